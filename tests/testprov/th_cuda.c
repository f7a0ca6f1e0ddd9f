/*
 * testhmem cuda mode: the provider's own CUDA copies between device buffers and
 * host bounce buffers.
 *
 * The driver is reached with dlopen("libcuda.so.1") at run time (never linked), by
 * the symbol names CUDA 12's cuda.h maps the API to (cuMemcpyDtoHAsync_v2, ...).
 *
 * Devices: a copy runs on the device that owns the buffer, never on whatever
 * context the calling thread has current. Each device gets, once per domain and
 * when its first buffer is registered (a control-path call), a retained primary
 * context and a private CU_STREAM_NON_BLOCKING stream. A copy pushes that context
 * (cuCtxPushCurrent_v2), runs cuMemcpy*Async_v2 + cuStreamSynchronize on that
 * stream under that device's lock, and pops it again, so the caller's own context
 * stack is left as it was. One domain therefore serves buffers of several GPUs from
 * threads whose current context is any of them (NCCL's single-process mode: one
 * domain per NIC, one proxy thread per GPU). The real driver refuses a copy into
 * device B's memory on a stream of device A (CUDA_ERROR_INVALID_VALUE, seen on an
 * H200 pair without peer access); the stub mimics that.
 *
 * Bounce buffers (TESTHMEM_BOUNCE): "pageable" (default) allocates them with
 * posix_memalign: no CUDA allocation ever happens on the data path. "pinned" uses
 * cuMemAllocHost_v2 in the context of the device they first serve; on a real GPU
 * that call waited behind NCCL's running kernel (one process per GPU, H200,
 * CUDA 13): a deadlock, which is exactly why NCCL forbids CUDA calls under it.
 */
#include "testhmem.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int th_cures;
typedef unsigned long long th_cudevptr;

#define TH_CUDA_SUCCESS 0
#define TH_CUDA_ERROR_INVALID_CONTEXT 201
#define TH_CU_MEMORYTYPE_DEVICE 2
#define TH_CU_POINTER_ATTRIBUTE_MEMORY_TYPE 2
#define TH_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL 9
#define TH_CU_STREAM_NON_BLOCKING 1
#define TH_CUDA_MAX_DEVICES 64

static struct {
	void *lib;
	th_cures (*init)(unsigned int flags);
	th_cures (*device_get_count)(int *count);
	th_cures (*device_get)(int *dev, int ordinal);
	th_cures (*primary_retain)(void **ctx, int dev);
	th_cures (*primary_release)(int dev);
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
	TH_CU_SYM(device_get_count, "cuDeviceGetCount");
	TH_CU_SYM(device_get, "cuDeviceGet");
	TH_CU_SYM(primary_retain, "cuDevicePrimaryCtxRetain");
	TH_CU_SYM(primary_release, "cuDevicePrimaryCtxRelease_v2");
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

	if (!r)
		return "CUDA_SUCCESS";
	if (th_cu.get_error_name && !th_cu.get_error_name(r, &name) && name)
		return name;
	return "CUDA_ERROR_?";
}

static long th_usec_since(const struct timespec *t0)
{
	struct timespec t1;

	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (long)((t1.tv_sec - t0->tv_sec) * 1000000L + (t1.tv_nsec - t0->tv_nsec) / 1000);
}

#define TH_OPS_PER_DOMAIN 4096
#define TH_BOUNCE_MIN_CLASS 12 /* 4 KiB */
#define TH_BOUNCE_CLASSES 48

/* One device as this domain uses it. */
struct th_cuda_dev {
	pthread_mutex_t lock; /* setup, and every call on this device's stream */
	int state;	      /* 0 not set up, 1 ready, -1 setup failed */
	int cudev;	      /* CUdevice of the ordinal */
	void *ctx;	      /* retained primary context */
	void *stream;	      /* private, non-blocking */
};

struct th_cuda_dom {
	int ndev;
	struct th_cuda_dev *devs;
	int pinned;	      /* TESTHMEM_BOUNCE=pinned */
	pthread_mutex_t lock; /* ops and the bounce pool */
	struct th_op *ops;
	struct th_op *free_ops;
	struct th_bounce *free_bounce[TH_BOUNCE_CLASSES];
	struct th_bounce *all_bounce; /* every bounce buffer, through next_all */
	uint64_t next_key;
};

const char *th_cuda_bounce_mode(const struct th_domain *dom)
{
	return dom->cuda && dom->cuda->pinned ? "pinned" : "pageable";
}

int th_cuda_ndev(const struct th_domain *dom)
{
	return dom->cuda ? dom->cuda->ndev : 0;
}

/* ---- per-device context and stream ---- */

/* Pushes the device's context; the caller holds d->lock. */
static th_cures th_dev_push(struct th_domain *dom, int dev, struct th_cuda_dev *d)
{
	th_cures r = th_cu.ctx_push(d->ctx);

	if (r)
		th_log("error cuda call=cuCtxPushCurrent_v2 dev=%d result=%s dom=%u", dev,
		       th_cu_errname(r), dom->id);
	return r;
}

/* Pops what th_dev_push pushed and checks it was that. */
static void th_dev_pop(struct th_domain *dom, int dev, struct th_cuda_dev *d)
{
	void *old = NULL;
	th_cures r = th_cu.ctx_pop(&old);

	if (r || old != d->ctx)
		th_log("error cuda call=cuCtxPopCurrent_v2 dev=%d result=%s popped=%s dom=%u",
		       dev, th_cu_errname(r), old == d->ctx ? "ours" : "other", dom->id);
}

/* Sets up device dev's context and stream (once). Returns the device, or NULL. */
static struct th_cuda_dev *th_dev_get(struct th_domain *dom, int dev)
{
	struct th_cuda_dom *cd = dom->cuda;
	struct th_cuda_dev *d;
	th_cures r;

	if (!cd || dev < 0 || dev >= cd->ndev) {
		th_log("error cuda-device dev=%d reason=out-of-range devices=%d dom=%u", dev,
		       cd ? cd->ndev : 0, dom->id);
		return NULL;
	}
	d = &cd->devs[dev];
	pthread_mutex_lock(&d->lock);
	if (d->state) {
		pthread_mutex_unlock(&d->lock);
		return d->state > 0 ? d : NULL;
	}
	TH_TRACE(dom, 2, "trace cuda-setup-begin dev=%d dom=%u", dev, dom->id);
	r = th_cu.device_get(&d->cudev, dev);
	if (r) {
		th_log("error cuda call=cuDeviceGet dev=%d result=%s dom=%u", dev,
		       th_cu_errname(r), dom->id);
		goto fail;
	}
	r = th_cu.primary_retain(&d->ctx, d->cudev);
	if (r) {
		th_log("error cuda call=cuDevicePrimaryCtxRetain dev=%d result=%s dom=%u", dev,
		       th_cu_errname(r), dom->id);
		goto fail;
	}
	r = th_dev_push(dom, dev, d);
	if (!r) {
		r = th_cu.stream_create(&d->stream, TH_CU_STREAM_NON_BLOCKING);
		th_dev_pop(dom, dev, d);
		if (r)
			th_log("error cuda call=cuStreamCreate dev=%d result=%s dom=%u", dev,
			       th_cu_errname(r), dom->id);
	}
	if (r) {
		th_cu.primary_release(d->cudev);
		goto fail;
	}
	d->state = 1;
	TH_TRACE(dom, 1, "trace cuda-setup dev=%d result=CUDA_SUCCESS dom=%u", dev, dom->id);
	pthread_mutex_unlock(&d->lock);
	return d;
fail:
	d->state = -1;
	pthread_mutex_unlock(&d->lock);
	return NULL;
}

/* ---- domain ---- */

int th_cuda_domain_init(struct th_domain *dom)
{
	struct th_cuda_dom *cd;
	const char *env;
	th_cures r;
	int ndev = 0, i;
	size_t k;

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
	r = th_cu.device_get_count(&ndev);
	if (r || ndev <= 0) {
		th_log("error cuda call=cuDeviceGetCount result=%s devices=%d", th_cu_errname(r),
		       ndev);
		return -FI_ENODEV;
	}
	if (ndev > TH_CUDA_MAX_DEVICES)
		ndev = TH_CUDA_MAX_DEVICES;
	cd = calloc(1, sizeof(*cd));
	if (!cd)
		return -FI_ENOMEM;
	cd->ndev = ndev;
	cd->devs = calloc((size_t)ndev, sizeof(*cd->devs));
	cd->ops = calloc(TH_OPS_PER_DOMAIN, sizeof(*cd->ops));
	if (!cd->devs || !cd->ops) {
		free(cd->devs);
		free(cd->ops);
		free(cd);
		return -FI_ENOMEM;
	}
	for (i = 0; i < ndev; i++)
		pthread_mutex_init(&cd->devs[i].lock, NULL);
	for (k = TH_OPS_PER_DOMAIN; k-- > 0;) {
		cd->ops[k].next_free = cd->free_ops;
		cd->free_ops = &cd->ops[k];
	}
	pthread_mutex_init(&cd->lock, NULL);
	cd->next_key = 0x7e57b0b000000000ULL;
	env = getenv("TESTHMEM_BOUNCE");
	cd->pinned = env && !strcmp(env, "pinned");
	if (env && *env && strcmp(env, "pageable") && strcmp(env, "pinned"))
		FI_WARN(&th_prov, FI_LOG_DOMAIN,
			"TESTHMEM_BOUNCE=%s unknown (pinned|pageable): using pageable\n", env);
	dom->cuda = cd;
	return 0;
}

static void th_bounce_free(struct th_domain *dom, struct th_bounce *b)
{
	struct th_cuda_dom *cd = dom->cuda;

	if (b->mr)
		fi_close(&b->mr->fid);
	if (b->pinned) {
		struct th_cuda_dev *d = &cd->devs[b->dev];

		if (d->state > 0 && !th_dev_push(dom, b->dev, d)) {
			th_cu.free_host(b->buf);
			th_dev_pop(dom, b->dev, d);
		}
	} else {
		free(b->buf);
	}
	free(b);
}

void th_cuda_domain_fini(struct th_domain *dom)
{
	struct th_cuda_dom *cd = dom->cuda;
	struct th_bounce *b, *next;
	int i;

	if (!cd)
		return;
	for (b = cd->all_bounce; b; b = next) {
		next = b->next_all;
		th_bounce_free(dom, b);
	}
	for (i = 0; i < cd->ndev; i++) {
		struct th_cuda_dev *d = &cd->devs[i];

		if (d->state > 0) {
			if (!th_dev_push(dom, i, d)) {
				th_cu.stream_destroy(d->stream);
				th_dev_pop(dom, i, d);
			}
			th_cu.primary_release(d->cudev);
		}
		pthread_mutex_destroy(&d->lock);
	}
	pthread_mutex_destroy(&cd->lock);
	free(cd->devs);
	free(cd->ops);
	free(cd);
	dom->cuda = NULL;
}

/* cuPointerGetAttribute; a driver that wants a current context for it gets dev's. */
static th_cures th_ptr_attr(struct th_domain *dom, void *data, int attr, const void *p,
			    int dev)
{
	th_cures r = th_cu.pointer_get_attribute(data, attr, (th_cudevptr)(uintptr_t)p);
	struct th_cuda_dev *d;

	if (r != TH_CUDA_ERROR_INVALID_CONTEXT || !(d = th_dev_get(dom, dev)))
		return r;
	pthread_mutex_lock(&d->lock);
	if (!th_dev_push(dom, dev, d)) {
		r = th_cu.pointer_get_attribute(data, attr, (th_cudevptr)(uintptr_t)p);
		th_dev_pop(dom, dev, d);
	}
	pthread_mutex_unlock(&d->lock);
	return r;
}

int th_cuda_reg_device(struct th_domain *dom, const struct iovec *iov, size_t count,
		       int attr_dev, int *devp)
{
	size_t i, len = 0;
	int dev = -1;

	for (i = 0; i < count; i++)
		len += iov[i].iov_len;
	for (i = 0; i < count; i++) {
		unsigned int type = 0;
		int ord = -1;
		th_cures r;

		r = th_ptr_attr(dom, &type, TH_CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
				iov[i].iov_base, attr_dev);
		if (r || type != TH_CU_MEMORYTYPE_DEVICE) {
			th_log("error reg-not-device iface=cuda device=%d len=%zu dom=%u", attr_dev,
			       len, dom->id);
			return -FI_EINVAL;
		}
		r = th_ptr_attr(dom, &ord, TH_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
				iov[i].iov_base, attr_dev);
		if (r)
			ord = attr_dev; /* a driver that cannot say: trust the caller */
		if (dev >= 0 && ord != dev) {
			th_log("error reg-multi-device iface=cuda device=%d ptr_device=%d,%d "
			       "len=%zu dom=%u",
			       attr_dev, dev, ord, len, dom->id);
			return -FI_EINVAL;
		}
		dev = ord;
	}
	if (dev < 0)
		dev = attr_dev; /* no pieces */
	if (dev != attr_dev) {
		/* a caller bug; the copies must run on the buffer's device regardless */
		atomic_fetch_add(&dom->device_mismatch, 1);
		th_log("error reg-device-mismatch iface=cuda device=%d ptr_device=%d len=%zu "
		       "dom=%u",
		       attr_dev, dev, len, dom->id);
	}
	/* the device's context and stream are made here, on the control path */
	if (!th_dev_get(dom, dev))
		return -FI_EIO;
	*devp = dev;
	return 0;
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

unsigned long th_cuda_ops_in_use(struct th_domain *dom)
{
	struct th_cuda_dom *cd = dom->cuda;
	unsigned long n = 0;
	size_t i;

	if (!cd)
		return 0;
	pthread_mutex_lock(&cd->lock);
	for (i = 0; i < TH_OPS_PER_DOMAIN; i++)
		n += cd->ops[i].in_use != 0;
	pthread_mutex_unlock(&cd->lock);
	return n;
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

uint32_t th_op_index(struct th_domain *dom, const struct th_op *op)
{
	return (uint32_t)(op - dom->cuda->ops);
}

struct th_op *th_op_at(struct th_domain *dom, uint32_t index)
{
	struct th_cuda_dom *cd = dom->cuda;

	if (!cd || index >= TH_OPS_PER_DOMAIN || !cd->ops[index].in_use)
		return NULL;
	return &cd->ops[index];
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

/* ---- bounce buffers: host memory, kept per size class until fini ---- */

static int th_bounce_class(size_t len)
{
	int cls = TH_BOUNCE_MIN_CLASS;

	while (cls < TH_BOUNCE_CLASSES - 1 && ((size_t)1 << cls) < len)
		cls++;
	return ((size_t)1 << cls) >= len ? cls : -1;
}

/* Allocates a new bounce of class cls; cd->lock held. */
static struct th_bounce *th_bounce_new(struct th_domain *dom, int cls, int dev)
{
	struct th_cuda_dom *cd = dom->cuda;
	struct th_bounce *b = calloc(1, sizeof(*b));
	struct timespec t0;
	th_cures r = 0;
	int ret;

	if (!b)
		return NULL;
	b->cls = cls;
	b->cap = (size_t)1 << cls;
	b->dev = dev;
	if (cd->pinned) {
		struct th_cuda_dev *d = th_dev_get(dom, dev);

		/* cuMemAllocHost on the data path: traced before and after, since a
		 * driver that serialises it behind running kernels would stall here */
		TH_TRACE(dom, 1, "trace bounce-alloc-begin len=%zu pinned=1 dev=%d dom=%u", b->cap,
			 dev, dom->id);
		clock_gettime(CLOCK_MONOTONIC, &t0);
		r = -1;
		if (d) {
			pthread_mutex_lock(&d->lock);
			r = th_dev_push(dom, dev, d);
			if (!r) {
				r = th_cu.alloc_host(&b->buf, b->cap);
				th_dev_pop(dom, dev, d);
			}
			pthread_mutex_unlock(&d->lock);
		}
		TH_TRACE(dom, 1, "trace bounce-alloc len=%zu pinned=1 dev=%d result=%s us=%ld dom=%u",
			 b->cap, dev, th_cu_errname(r), th_usec_since(&t0), dom->id);
		if (r) {
			th_log("error cuda call=cuMemAllocHost_v2 len=%zu dev=%d result=%s dom=%u",
			       b->cap, dev, th_cu_errname(r), dom->id);
			free(b);
			return NULL;
		}
		b->pinned = 1;
	} else if (posix_memalign(&b->buf, 4096, b->cap)) {
		free(b);
		return NULL;
	}
	if (dom->base_mr_mode & FI_MR_LOCAL) {
		ret = fi_mr_reg(dom->base, b->buf, b->cap, FI_SEND | FI_RECV | FI_READ | FI_WRITE,
				0, cd->next_key++, 0, &b->mr, NULL);
		if (ret) {
			th_log("error bounce-reg len=%zu ret=%d dom=%u", b->cap, ret, dom->id);
			b->mr = NULL;
			th_bounce_free(dom, b);
			return NULL;
		}
		b->desc = fi_mr_desc(b->mr);
	}
	b->next_all = cd->all_bounce;
	cd->all_bounce = b;
	return b;
}

struct th_bounce *th_bounce_get(struct th_domain *dom, size_t len, int dev)
{
	struct th_cuda_dom *cd = dom->cuda;
	int cls = th_bounce_class(len);
	struct th_bounce *b;

	if (cls < 0)
		return NULL;
	pthread_mutex_lock(&cd->lock);
	b = cd->free_bounce[cls];
	if (b)
		cd->free_bounce[cls] = b->next;
	else
		b = th_bounce_new(dom, cls, dev);
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

int th_cuda_copy(struct th_domain *dom, int dev, void *dst, const void *src, size_t n,
		 int to_dev, const char *op, uint64_t tag, struct th_copy_err *err)
{
	const char *call = to_dev ? "cuMemcpyHtoDAsync_v2" : "cuMemcpyDtoHAsync_v2";
	const char *dir = to_dev ? "h2d" : "d2h";
	struct th_cuda_dev *d;
	struct timespec t0;
	th_cures r;

	if (!n)
		return 0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	d = th_dev_get(dom, dev);
	if (!d) {
		r = TH_CUDA_ERROR_INVALID_CONTEXT;
		call = "cuDevicePrimaryCtxRetain";
		goto out;
	}
	TH_TRACE(dom, 2, "trace copy-begin=%s op=%s dev=%d len=%zu tag=0x%llx dom=%u", dir, op,
		 dev, n, (unsigned long long)tag, dom->id);
	pthread_mutex_lock(&d->lock);
	r = th_dev_push(dom, dev, d);
	if (r) {
		call = "cuCtxPushCurrent_v2";
	} else {
		if (to_dev)
			r = th_cu.htod_async((th_cudevptr)(uintptr_t)dst, src, n, d->stream);
		else
			r = th_cu.dtoh_async(dst, (th_cudevptr)(uintptr_t)src, n, d->stream);
		if (!r) {
			r = th_cu.stream_sync(d->stream);
			if (r)
				call = "cuStreamSynchronize";
		}
		th_dev_pop(dom, dev, d);
	}
	pthread_mutex_unlock(&d->lock);
out:
	TH_TRACE(dom, 1, "trace copy=%s op=%s dev=%d len=%zu tag=0x%llx result=%s us=%ld dom=%u",
		 dir, op, dev, n, (unsigned long long)tag, th_cu_errname(r), th_usec_since(&t0),
		 dom->id);
	if (!r)
		return 0;
	th_log("error cuda call=%s len=%zu result=%s dev=%d op=%s tag=0x%llx dom=%u", call, n,
	       th_cu_errname(r), dev, op, (unsigned long long)tag, dom->id);
	atomic_fetch_add(&dom->copy_errors, 1);
	if (err) {
		err->result = r;
		snprintf(err->text, sizeof(err->text),
			 "testhmem: %s of %zu bytes %s device %d failed: %s (%s)", call, n,
			 to_dev ? "to" : "from", dev, th_cu_errname(r), op);
	}
	return -FI_EIO;
}

int th_op_finish(struct th_domain *dom, struct th_op *op, size_t len, int copy,
		 struct th_copy_err *err)
{
	int ret = 0;

	if (copy && (op->kind == TH_OP_RECV || op->kind == TH_OP_READ)) {
		size_t left = op->kind == TH_OP_RECV && len < op->len ? len : op->len;
		const char *src = op->bounce->buf;
		size_t i;

		for (i = 0; i < op->iov_count && left && !ret; i++) {
			size_t n = op->iov[i].iov_len < left ? op->iov[i].iov_len : left;

			if (op->iov_dev[i] >= 0)
				ret = th_cuda_copy(dom, op->iov_dev[i], op->iov[i].iov_base, src, n, 1,
						   op->name, op->tag, err);
			else
				memcpy(op->iov[i].iov_base, src, n);
			src += n;
			left -= n;
		}
	}
	if (op->bounce)
		th_bounce_put(dom, op->bounce);
	th_op_put(dom, op);
	return ret;
}
