/*
 * testhmem cuda mode: the provider's own CUDA copies between device buffers and
 * host bounce buffers.
 *
 * The driver is reached with dlopen("libcuda.so.1") at run time (never linked), by
 * the symbol names CUDA 12's cuda.h maps the API to (cuMemcpyDtoHAsync_v2, ...).
 * Every CUDA call runs with the domain's context pushed and under the domain's
 * lock, on one private CU_STREAM_NON_BLOCKING stream.
 */
#include "testhmem.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int th_cures;
typedef unsigned long long th_cudevptr;

#define TH_CU_MEMORYTYPE_DEVICE 2
#define TH_CU_POINTER_ATTRIBUTE_MEMORY_TYPE 2
#define TH_CU_STREAM_NON_BLOCKING 1

static struct {
	void *lib;
	th_cures (*init)(unsigned int flags);
	th_cures (*device_get)(int *dev, int ordinal);
	th_cures (*primary_retain)(void **ctx, int dev);
	th_cures (*primary_release)(int dev);
	th_cures (*ctx_get_current)(void **ctx);
	th_cures (*ctx_push)(void *ctx);
	th_cures (*ctx_pop)(void **ctx);
	th_cures (*stream_create)(void **stream, unsigned int flags);
	th_cures (*stream_destroy)(void *stream);
	th_cures (*stream_sync)(void *stream);
	th_cures (*dtoh_async)(void *dst, th_cudevptr src, size_t n, void *stream);
	th_cures (*htod_async)(th_cudevptr dst, const void *src, size_t n, void *stream);
	th_cures (*alloc_host)(void **p, size_t n);
	th_cures (*free_host)(void *p);
	th_cures (*pointer_get_attribute)(void *data, int attr, th_cudevptr ptr);
	th_cures (*get_error_name)(th_cures err, const char **name);
	char error[256];
} th_cu;

static pthread_once_t th_cu_once = PTHREAD_ONCE_INIT;

#define TH_CU_SYM(field, name)                                                     \
	do {                                                                       \
		*(void **)&th_cu.field = dlsym(th_cu.lib, name);                   \
		if (!th_cu.field) {                                                \
			snprintf(th_cu.error, sizeof(th_cu.error),                 \
				 "libcuda.so.1 lacks %s", name);                   \
			return;                                                    \
		}                                                                  \
	} while (0)

static void th_cu_load(void)
{
	th_cu.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!th_cu.lib) {
		snprintf(th_cu.error, sizeof(th_cu.error), "dlopen(libcuda.so.1): %s",
			 dlerror());
		return;
	}
	TH_CU_SYM(init, "cuInit");
	TH_CU_SYM(device_get, "cuDeviceGet");
	TH_CU_SYM(primary_retain, "cuDevicePrimaryCtxRetain");
	TH_CU_SYM(primary_release, "cuDevicePrimaryCtxRelease_v2");
	TH_CU_SYM(ctx_get_current, "cuCtxGetCurrent");
	TH_CU_SYM(ctx_push, "cuCtxPushCurrent_v2");
	TH_CU_SYM(ctx_pop, "cuCtxPopCurrent_v2");
	TH_CU_SYM(stream_create, "cuStreamCreate");
	TH_CU_SYM(stream_destroy, "cuStreamDestroy_v2");
	TH_CU_SYM(stream_sync, "cuStreamSynchronize");
	TH_CU_SYM(dtoh_async, "cuMemcpyDtoHAsync_v2");
	TH_CU_SYM(htod_async, "cuMemcpyHtoDAsync_v2");
	TH_CU_SYM(alloc_host, "cuMemAllocHost_v2");
	TH_CU_SYM(free_host, "cuMemFreeHost");
	TH_CU_SYM(pointer_get_attribute, "cuPointerGetAttribute");
	TH_CU_SYM(get_error_name, "cuGetErrorName");
	th_cu.error[0] = '\0';
}

static const char *th_cu_errname(th_cures r)
{
	const char *name = NULL;

	if (th_cu.get_error_name && !th_cu.get_error_name(r, &name) && name)
		return name;
	return "CUDA_ERROR_?";
}

#define TH_OPS_PER_DOMAIN 4096
#define TH_BOUNCE_MIN_CLASS 12 /* 4 KiB */
#define TH_BOUNCE_CLASSES 48

struct th_cuda_dom {
	void *ctx;
	int dev;
	int retained; /* primary context retained by us */
	void *stream;
	pthread_mutex_t lock; /* ops, bounce pool, every CUDA call */
	struct th_op *ops;
	struct th_op *free_ops;
	struct th_bounce *free_bounce[TH_BOUNCE_CLASSES];
	struct th_bounce *all_bounce; /* every bounce buffer, through next_all */
	uint64_t next_key;
};

/* Runs with cd->lock held. */
static int th_ctx_push(struct th_cuda_dom *cd)
{
	th_cures r = th_cu.ctx_push(cd->ctx);

	if (r)
		th_log("error cuda call=cuCtxPushCurrent_v2 result=%s", th_cu_errname(r));
	return r ? -FI_EIO : 0;
}

static void th_ctx_pop(void)
{
	void *old;

	th_cu.ctx_pop(&old);
}

int th_cuda_domain_init(struct th_domain *dom)
{
	struct th_cuda_dom *cd;
	const char *env;
	void *cur = NULL;
	th_cures r;
	size_t i;

	pthread_once(&th_cu_once, th_cu_load);
	if (th_cu.error[0]) {
		th_log("error cuda-unavailable reason=%s", th_cu.error);
		FI_WARN(&th_prov, FI_LOG_DOMAIN, "TESTHMEM_MODE=cuda: %s\n", th_cu.error);
		return -FI_ENOSYS;
	}
	r = th_cu.init(0);
	if (r) {
		th_log("error cuda call=cuInit result=%s", th_cu_errname(r));
		return -FI_ENODEV;
	}
	cd = calloc(1, sizeof(*cd));
	if (!cd)
		return -FI_ENOMEM;
	cd->ops = calloc(TH_OPS_PER_DOMAIN, sizeof(*cd->ops));
	if (!cd->ops) {
		free(cd);
		return -FI_ENOMEM;
	}
	for (i = TH_OPS_PER_DOMAIN; i-- > 0;) {
		cd->ops[i].next_free = cd->free_ops;
		cd->free_ops = &cd->ops[i];
	}
	pthread_mutex_init(&cd->lock, NULL);
	cd->next_key = 0x7e57b0b000000000ULL;

	/* the caller's current context if it has one, else a primary context */
	if (!th_cu.ctx_get_current(&cur) && cur) {
		cd->ctx = cur;
	} else {
		env = getenv("TESTHMEM_CUDA_DEVICE");
		r = th_cu.device_get(&cd->dev, env && *env ? atoi(env) : 0);
		if (!r)
			r = th_cu.primary_retain(&cd->ctx, cd->dev);
		if (r) {
			th_log("error cuda call=cuDevicePrimaryCtxRetain result=%s",
			       th_cu_errname(r));
			goto err;
		}
		cd->retained = 1;
	}
	if (th_ctx_push(cd))
		goto err;
	r = th_cu.stream_create(&cd->stream, TH_CU_STREAM_NON_BLOCKING);
	th_ctx_pop();
	if (r) {
		th_log("error cuda call=cuStreamCreate result=%s", th_cu_errname(r));
		goto err;
	}
	dom->cuda = cd;
	return 0;
err:
	if (cd->retained)
		th_cu.primary_release(cd->dev);
	pthread_mutex_destroy(&cd->lock);
	free(cd->ops);
	free(cd);
	return -FI_EIO;
}

void th_cuda_domain_fini(struct th_domain *dom)
{
	struct th_cuda_dom *cd = dom->cuda;
	struct th_bounce *b, *next;

	if (!cd)
		return;
	pthread_mutex_lock(&cd->lock);
	if (!th_ctx_push(cd)) {
		for (b = cd->all_bounce; b; b = next) {
			next = b->next_all;
			if (b->mr)
				fi_close(&b->mr->fid);
			th_cu.free_host(b->buf);
			free(b);
		}
		th_cu.stream_destroy(cd->stream);
		th_ctx_pop();
	}
	pthread_mutex_unlock(&cd->lock);
	if (cd->retained)
		th_cu.primary_release(cd->dev);
	pthread_mutex_destroy(&cd->lock);
	free(cd->ops);
	free(cd);
	dom->cuda = NULL;
}

int th_cuda_is_device(struct th_domain *dom, const void *p)
{
	struct th_cuda_dom *cd = dom->cuda;
	unsigned int type = 0;
	th_cures r = 1;

	pthread_mutex_lock(&cd->lock);
	if (!th_ctx_push(cd)) {
		r = th_cu.pointer_get_attribute(&type, TH_CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
						(th_cudevptr)(uintptr_t)p);
		th_ctx_pop();
	}
	pthread_mutex_unlock(&cd->lock);
	return !r && type == TH_CU_MEMORYTYPE_DEVICE;
}

/* ---- ops ---- */

struct th_op *th_op_get(struct th_domain *dom)
{
	struct th_cuda_dom *cd = dom->cuda;
	struct th_op *op;

	pthread_mutex_lock(&cd->lock);
	op = cd->free_ops;
	if (op) {
		cd->free_ops = op->next_free;
		memset(op, 0, sizeof(*op));
		op->in_use = 1;
	}
	pthread_mutex_unlock(&cd->lock);
	return op;
}

void th_op_put(struct th_domain *dom, struct th_op *op)
{
	struct th_cuda_dom *cd = dom->cuda;

	pthread_mutex_lock(&cd->lock);
	op->in_use = 0;
	op->next_free = cd->free_ops;
	cd->free_ops = op;
	pthread_mutex_unlock(&cd->lock);
}

/* Is ctx one of our ops? Any value may arrive (callers' contexts are opaque), so
 * only addresses are compared. */
struct th_op *th_op_from_ctx(struct th_domain *dom, void *ctx)
{
	struct th_cuda_dom *cd = dom->cuda;
	uintptr_t p = (uintptr_t)ctx, s;
	struct th_op *op;

	if (!cd)
		return NULL;
	s = (uintptr_t)cd->ops;
	if (p < s || p >= s + TH_OPS_PER_DOMAIN * sizeof(struct th_op) ||
	    (p - s) % sizeof(struct th_op))
		return NULL;
	op = &cd->ops[(p - s) / sizeof(struct th_op)];
	return op->in_use ? op : NULL;
}

struct th_op *th_op_find_user(struct th_domain *dom, void *user_ctx)
{
	struct th_cuda_dom *cd = dom->cuda;
	struct th_op *found = NULL;
	size_t i;

	if (!cd)
		return NULL;
	pthread_mutex_lock(&cd->lock);
	for (i = 0; i < TH_OPS_PER_DOMAIN && !found; i++)
		if (cd->ops[i].in_use && cd->ops[i].user_ctx == user_ctx)
			found = &cd->ops[i];
	pthread_mutex_unlock(&cd->lock);
	return found;
}

/* ---- bounce buffers: pinned host memory, kept per size class until fini ---- */

static int th_bounce_class(size_t len)
{
	int cls = TH_BOUNCE_MIN_CLASS;

	while (cls < TH_BOUNCE_CLASSES - 1 && ((size_t)1 << cls) < len)
		cls++;
	return ((size_t)1 << cls) >= len ? cls : -1;
}

struct th_bounce *th_bounce_get(struct th_domain *dom, size_t len)
{
	struct th_cuda_dom *cd = dom->cuda;
	int cls = th_bounce_class(len);
	struct th_bounce *b = NULL;
	th_cures r;
	int ret;

	if (cls < 0)
		return NULL;
	pthread_mutex_lock(&cd->lock);
	if (cd->free_bounce[cls]) {
		b = cd->free_bounce[cls];
		cd->free_bounce[cls] = b->next;
		goto out;
	}
	b = calloc(1, sizeof(*b));
	if (!b)
		goto out;
	b->cls = cls;
	b->cap = (size_t)1 << cls;
	if (th_ctx_push(cd)) {
		free(b);
		b = NULL;
		goto out;
	}
	r = th_cu.alloc_host(&b->buf, b->cap);
	th_ctx_pop();
	if (r) {
		th_log("error cuda call=cuMemAllocHost_v2 len=%zu result=%s", b->cap,
		       th_cu_errname(r));
		free(b);
		b = NULL;
		goto out;
	}
	if (dom->base_mr_mode & FI_MR_LOCAL) {
		ret = fi_mr_reg(dom->base, b->buf, b->cap,
				FI_SEND | FI_RECV | FI_READ | FI_WRITE, 0, cd->next_key++, 0,
				&b->mr, NULL);
		if (ret) {
			th_log("error bounce-reg len=%zu ret=%d", b->cap, ret);
			if (!th_ctx_push(cd)) {
				th_cu.free_host(b->buf);
				th_ctx_pop();
			}
			free(b);
			b = NULL;
			goto out;
		}
		b->desc = fi_mr_desc(b->mr);
	}
	b->next_all = cd->all_bounce;
	cd->all_bounce = b;
out:
	pthread_mutex_unlock(&cd->lock);
	return b;
}

void th_bounce_put(struct th_domain *dom, struct th_bounce *b)
{
	struct th_cuda_dom *cd = dom->cuda;

	pthread_mutex_lock(&cd->lock);
	b->next = cd->free_bounce[b->cls];
	cd->free_bounce[b->cls] = b;
	pthread_mutex_unlock(&cd->lock);
}

/* ---- copies ---- */

static int th_cuda_copy(struct th_domain *dom, void *dst, const void *src, size_t n, int to_dev)
{
	struct th_cuda_dom *cd = dom->cuda;
	th_cures r;

	if (!n)
		return 0;
	pthread_mutex_lock(&cd->lock);
	if (th_ctx_push(cd)) {
		pthread_mutex_unlock(&cd->lock);
		atomic_fetch_add(&dom->copy_errors, 1);
		return -FI_EIO;
	}
	if (to_dev)
		r = th_cu.htod_async((th_cudevptr)(uintptr_t)dst, src, n, cd->stream);
	else
		r = th_cu.dtoh_async(dst, (th_cudevptr)(uintptr_t)src, n, cd->stream);
	if (!r)
		r = th_cu.stream_sync(cd->stream);
	th_ctx_pop();
	pthread_mutex_unlock(&cd->lock);
	if (r) {
		th_log("error cuda call=%s len=%zu result=%s",
		       to_dev ? "cuMemcpyHtoDAsync_v2" : "cuMemcpyDtoHAsync_v2", n,
		       th_cu_errname(r));
		atomic_fetch_add(&dom->copy_errors, 1);
		return -FI_EIO;
	}
	return 0;
}

int th_cuda_d2h(struct th_domain *dom, void *dst, const void *src, size_t n)
{
	return th_cuda_copy(dom, dst, src, n, 0);
}

int th_cuda_h2d(struct th_domain *dom, void *dst, const void *src, size_t n)
{
	return th_cuda_copy(dom, dst, src, n, 1);
}

void th_op_complete(struct th_domain *dom, struct th_op *op, size_t len, int ok)
{
	if (ok && (op->kind == TH_OP_RECV || op->kind == TH_OP_READ)) {
		size_t left = op->kind == TH_OP_RECV && len < op->len ? len : op->len;
		const char *src = op->bounce->buf;
		size_t i;

		for (i = 0; i < op->iov_count && left; i++) {
			size_t n = op->iov[i].iov_len < left ? op->iov[i].iov_len : left;

			if (op->iov_cuda[i])
				th_cuda_h2d(dom, op->iov[i].iov_base, src, n);
			else
				memcpy(op->iov[i].iov_base, src, n);
			src += n;
			left -= n;
		}
	}
	if (op->bounce)
		th_bounce_put(dom, op->bounce);
	th_op_put(dom, op);
}
