/*
 * testhmem_test: libfabric-level tests of the testhmem provider (no plugin involved).
 *
 *   testhmem_test getinfo   FI_HMEM hints find provider "testhmem"; no rxm stacking
 *   testhmem_test setopt    FI_OPT_CUDA_API_PERMITTED / FI_OPT_FI_HMEM_P2P answers
 *   testhmem_test profile   TESTHMEM_PROFILE's attributes and rules, each broken once
 *                           and caught, beside a transfer of each kind
 *   testhmem_test xfer      tagged, msg and RMA transfers between two endpoints of
 *                           one process through buffers registered as FI_HMEM_CUDA;
 *                           every byte checked, then the TESTHMEM_LOG lines
 *
 * The base provider comes from TESTHMEM_BASE, the mode from TESTHMEM_MODE, as for the
 * provider. In TESTHMEM_MODE=cuda the "device" buffers come from cuMemAlloc of
 * libcuda.so.1 (the stub here, a real GPU elsewhere) and are filled and checked with
 * cuMemcpyHtoD/DtoH; against the stub the provider's copies are also counted.
 *
 * Needs FI_PROVIDER_PATH naming the folder of libtesthmem-fi.so, and TESTHMEM_LOG.
 * Exit 0 pass, 1 fail, 77 skip (base provider or libcuda.so.1 unavailable).
 */
#include <dlfcn.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include "../stubcuda/stubcuda.h"

#define API_VERSION FI_VERSION(1, 17)
#define OPT_CUDA_API_PERMITTED 10
#define SKIP 77

static int failures;
static const char *log_path;

#define CHECK(cond)                                                                \
	do {                                                                       \
		if (!(cond)) {                                                     \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__,     \
				__LINE__, #cond);                                  \
			failures++;                                                \
		}                                                                  \
	} while (0)

#define CHECK_RET(call, want)                                                      \
	do {                                                                       \
		long r_ = (long)(call);                                            \
		if (r_ != (long)(want)) {                                          \
			fprintf(stderr, "%s:%d: %s = %ld (%s), want %ld\n",        \
				__FILE__, __LINE__, #call, r_,                     \
				fi_strerror((int)-r_), (long)(want));              \
			failures++;                                                \
		}                                                                  \
	} while (0)

#define MUST(call)                                                                 \
	do {                                                                       \
		long r_ = (long)(call);                                            \
		if (r_) {                                                          \
			fprintf(stderr, "%s:%d: %s = %ld (%s)\n", __FILE__,        \
				__LINE__, #call, r_, fi_strerror((int)-r_));       \
			exit(1);                                                   \
		}                                                                  \
	} while (0)

static const char *base_name(void)
{
	const char *b = getenv("TESTHMEM_BASE");

	return b && *b ? b : "tcp;ofi_rxm";
}

/* TESTHMEM_CQ_DATA_SIZE=4: a NIC with 4 bytes of immediate data (EFA, verbs) */
static int cq4(void)
{
	const char *e = getenv("TESTHMEM_CQ_DATA_SIZE");

	return e && !strcmp(e, "4");
}

static int cuda_mode(void)
{
	const char *m = getenv("TESTHMEM_MODE");

	return m && !strcmp(m, "cuda");
}

/* ---- log file ---- */

static char *log_read(void)
{
	FILE *f = log_path ? fopen(log_path, "r") : NULL;
	char *buf = NULL;
	size_t n = 0, cap = 0;
	int c;

	if (!f)
		return calloc(1, 1);
	while ((c = fgetc(f)) != EOF) {
		if (n + 2 > cap) {
			cap = cap ? 2 * cap : 4096;
			buf = realloc(buf, cap);
			if (!buf)
				exit(1);
		}
		buf[n++] = (char)c;
	}
	fclose(f);
	if (!buf)
		return calloc(1, 1);
	buf[n] = '\0';
	return buf;
}

static void log_reset(void)
{
	if (log_path)
		unlink(log_path);
}

/* Number of lines that start with prefix. */
static int log_count(const char *prefix)
{
	char *all = log_read(), *line, *save = NULL;
	int n = 0;

	for (line = strtok_r(all, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		n += !strncmp(line, prefix, strlen(prefix));
	free(all);
	return n;
}

struct ops_sum {
	unsigned long sends, recvs, bytes, send_bytes, recv_bytes, injects, reads, writes,
		rma_bytes, regs;
};

/* Sums the "ops iface=<iface> ..." summary lines of every closed domain. */
static int log_ops(const char *iface, struct ops_sum *sum)
{
	char *all = log_read(), *line, *save = NULL, prefix[64], fmt[512];
	int n = 0;

	memset(sum, 0, sizeof(*sum));
	snprintf(prefix, sizeof(prefix), "ops iface=%s ", iface);
	snprintf(fmt, sizeof(fmt),
		 "ops iface=%s sends=%%lu recvs=%%lu bytes=%%lu send_bytes=%%lu "
		 "recv_bytes=%%lu injects=%%lu reads=%%lu writes=%%lu rma_bytes=%%lu "
		 "regs=%%lu",
		 iface);
	for (line = strtok_r(all, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		struct ops_sum s;

		if (strncmp(line, prefix, strlen(prefix)))
			continue;
		if (sscanf(line, fmt, &s.sends, &s.recvs, &s.bytes, &s.send_bytes,
			   &s.recv_bytes, &s.injects, &s.reads, &s.writes, &s.rma_bytes,
			   &s.regs) != 10) {
			fprintf(stderr, "unparsable log line: %s\n", line);
			failures++;
			continue;
		}
		sum->sends += s.sends;
		sum->recvs += s.recvs;
		sum->bytes += s.bytes;
		sum->send_bytes += s.send_bytes;
		sum->recv_bytes += s.recv_bytes;
		sum->injects += s.injects;
		sum->reads += s.reads;
		sum->writes += s.writes;
		sum->rma_bytes += s.rma_bytes;
		sum->regs += s.regs;
		n++;
	}
	free(all);
	return n;
}

/* Sums the "check ..." lines. */
static void log_checks(unsigned long *bad_desc, unsigned long *nodesc, unsigned long *copy_err)
{
	char *all = log_read(), *line, *save = NULL;

	*bad_desc = *nodesc = *copy_err = 0;
	for (line = strtok_r(all, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		unsigned long a, b, c;

		if (sscanf(line, "check bad_desc=%lu nodesc_cuda=%lu copy_errors=%lu", &a, &b,
			   &c) == 3) {
			*bad_desc += a;
			*nodesc += b;
			*copy_err += c;
		}
	}
	free(all);
}

/* ---- getinfo ---- */

static struct fi_info *make_hints(uint64_t caps, const char *prov)
{
	struct fi_info *h = fi_allocinfo();

	if (!h)
		exit(1);
	h->caps = caps;
	h->ep_attr->type = FI_EP_RDM;
	h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED |
				  FI_MR_PROV_KEY | FI_MR_HMEM;
	h->domain_attr->threading = FI_THREAD_SAFE;
	h->mode = FI_CONTEXT | FI_CONTEXT2;
	if (prov)
		h->fabric_attr->prov_name = strdup(prov);
	return h;
}

/* Can the base provider be used here at all? */
static int base_available(void)
{
	struct fi_info *h = make_hints(FI_TAGGED | FI_MSG, base_name()), *info = NULL;
	int ret;

	h->domain_attr->mr_mode &= ~FI_MR_HMEM;
	ret = fi_getinfo(API_VERSION, NULL, NULL, 0, h, &info);
	fi_freeinfo(h);
	fi_freeinfo(info);
	return ret == 0;
}

/* testhmem keeps the base's fabric and domain names */
static int fabric_of_base(const struct fi_info *base, const char *name)
{
	for (; base; base = base->next)
		if (!strcmp(base->fabric_attr->name, name))
			return 1;
	return 0;
}

static int test_getinfo(void)
{
	struct fi_info *h, *info = NULL, *cur, *base_info = NULL;
	int found, total, ret;

	if (!base_available()) {
		printf("SKIP: base provider \"%s\" offers nothing here\n", base_name());
		return SKIP;
	}
	h = make_hints(FI_TAGGED | FI_MSG, base_name());
	h->domain_attr->mr_mode &= ~FI_MR_HMEM;
	CHECK_RET(fi_getinfo(API_VERSION, NULL, NULL, 0, h, &base_info), 0);
	fi_freeinfo(h);

	/* 1: FI_HMEM hints, no provider named: testhmem answers, nobody stacks on it */
	h = make_hints(FI_TAGGED | FI_MSG | FI_RMA | FI_HMEM, NULL);
	ret = fi_getinfo(API_VERSION, NULL, NULL, 0, h, &info);
	CHECK_RET(ret, 0);
	found = 0;
	for (cur = info; cur; cur = cur->next) {
		const char *p = cur->fabric_attr->prov_name;

		CHECK(!strstr(p, "testhmem;") && !strstr(p, ";testhmem"));
		if (strcmp(p, "testhmem"))
			continue;
		found++;
		CHECK(cur->caps & FI_HMEM);
		CHECK(cur->tx_attr->caps & FI_HMEM);
		CHECK(cur->rx_attr->caps & FI_HMEM);
		CHECK(cur->domain_attr->mr_mode & FI_MR_HMEM);
		CHECK(cur->ep_attr->type == FI_EP_RDM);
		CHECK(cur->fabric_attr->prov_version == FI_VERSION(1, 0));
		CHECK(fabric_of_base(base_info, cur->fabric_attr->name));
	}
	CHECK(found > 0);
	printf("FI_HMEM hints: %d testhmem entries\n", found);
	fi_freeinfo(info);
	fi_freeinfo(h);

	/* 2: provider named: only testhmem entries */
	h = make_hints(FI_TAGGED | FI_MSG | FI_RMA | FI_HMEM, "testhmem");
	info = NULL;
	CHECK_RET(fi_getinfo(API_VERSION, NULL, NULL, 0, h, &info), 0);
	total = 0;
	for (cur = info; cur; cur = cur->next, total++)
		CHECK(!strcmp(cur->fabric_attr->prov_name, "testhmem"));
	CHECK(total > 0);
	fi_freeinfo(info);

	/* 3: FI_HMEM asked but not FI_MR_HMEM: FI_HMEM without the mr_mode bit */
	h->domain_attr->mr_mode &= ~FI_MR_HMEM;
	info = NULL;
	CHECK_RET(fi_getinfo(API_VERSION, NULL, NULL, 0, h, &info), 0);
	for (cur = info; cur; cur = cur->next) {
		CHECK(cur->caps & FI_HMEM);
		CHECK(!(cur->domain_attr->mr_mode & FI_MR_HMEM));
	}
	fi_freeinfo(info);
	fi_freeinfo(h);

	/* 4: no FI_HMEM asked: plain entries */
	h = make_hints(FI_TAGGED | FI_MSG, "testhmem");
	info = NULL;
	CHECK_RET(fi_getinfo(API_VERSION, NULL, NULL, 0, h, &info), 0);
	for (cur = info; cur; cur = cur->next) {
		CHECK(!(cur->caps & FI_HMEM));
		CHECK(!(cur->tx_attr->caps & FI_HMEM));
		CHECK(!(cur->domain_attr->mr_mode & FI_MR_HMEM));
		CHECK(fabric_of_base(base_info, cur->fabric_attr->name));
	}
	fi_freeinfo(info);

	/* 5: MSG and DGRAM endpoints are refused (this keeps ofi_rxm/ofi_rxd off) */
	h->ep_attr->type = FI_EP_MSG;
	info = NULL;
	CHECK_RET(fi_getinfo(API_VERSION, NULL, NULL, 0, h, &info), -FI_ENODATA);
	h->ep_attr->type = FI_EP_DGRAM;
	CHECK_RET(fi_getinfo(API_VERSION, NULL, NULL, 0, h, &info), -FI_ENODATA);
	fi_freeinfo(h);

	/* 6: "testhmem;ofi_rxm" does not exist */
	h = make_hints(FI_TAGGED | FI_MSG, "testhmem;ofi_rxm");
	info = NULL;
	CHECK_RET(fi_getinfo(API_VERSION, NULL, NULL, 0, h, &info), -FI_ENODATA);
	fi_freeinfo(h);

	/* 7: atomics are not offered */
	h = make_hints(FI_TAGGED | FI_ATOMIC, "testhmem");
	info = NULL;
	CHECK_RET(fi_getinfo(API_VERSION, NULL, NULL, 0, h, &info), -FI_ENODATA);
	fi_freeinfo(h);

	/* 8: no hints at all: RDM entries only */
	info = NULL;
	CHECK_RET(fi_getinfo(API_VERSION, NULL, NULL, 0, NULL, &info), 0);
	found = 0;
	for (cur = info; cur; cur = cur->next) {
		if (strcmp(cur->fabric_attr->prov_name, "testhmem"))
			continue;
		found++;
		CHECK(cur->ep_attr->type == FI_EP_RDM);
		CHECK(!(cur->caps & FI_HMEM));
	}
	CHECK(found > 0);
	fi_freeinfo(info);
	fi_freeinfo(base_info);
	return failures ? 1 : 0;
}

/* ---- an endpoint pair ---- */

struct side {
	struct fid_domain *domain;
	struct fid_cq *cq;
	struct fid_av *av;
	struct fid_ep *ep;
	fi_addr_t peer;
	enum fi_cq_format format;
};

struct comp {
	void *ctx;
	uint64_t flags;
	size_t len;
	uint64_t tag;
	uint64_t data;
	int err;
	int prov_errno;
	char text[160]; /* fi_cq_strerror of an error completion */
};

#define MAX_PENDING 64

struct pending {
	struct comp c[MAX_PENDING];
	int n;
};

static struct fid_fabric *fabric;
static struct fi_info *info;
static struct side A, B;
static struct pending pend_a, pend_b;
static int expect_errors; /* copyerr: error completions are the point */

static void open_side(struct side *s, enum fi_cq_format format)
{
	struct fi_cq_attr cq_attr = { .format = format, .size = 256 };
	struct fi_av_attr av_attr = { .type = FI_AV_MAP };

	s->format = format;
	MUST(fi_domain(fabric, info, &s->domain, NULL));
	MUST(fi_cq_open(s->domain, &cq_attr, &s->cq, NULL));
	MUST(fi_av_open(s->domain, &av_attr, &s->av, NULL));
	MUST(fi_endpoint(s->domain, info, &s->ep, NULL));
	MUST(fi_ep_bind(s->ep, &s->cq->fid, FI_TRANSMIT | FI_RECV));
	MUST(fi_ep_bind(s->ep, &s->av->fid, 0));
}

static void connect_sides(void)
{
	char na[256], nb[256];
	size_t la = sizeof(na), lb = sizeof(nb);

	MUST(fi_enable(A.ep));
	MUST(fi_enable(B.ep));
	MUST(fi_getname(&A.ep->fid, na, &la));
	MUST(fi_getname(&B.ep->fid, nb, &lb));
	CHECK_RET(fi_av_insert(A.av, nb, 1, &A.peer, 0, NULL), 1);
	CHECK_RET(fi_av_insert(B.av, na, 1, &B.peer, 0, NULL), 1);
}

static void close_side(struct side *s)
{
	MUST(fi_close(&s->ep->fid));
	MUST(fi_close(&s->av->fid));
	MUST(fi_close(&s->cq->fid));
	MUST(fi_close(&s->domain->fid));
}

static void poll_cq(struct side *s, struct pending *p)
{
	struct fi_cq_tagged_entry t[8];
	struct fi_cq_data_entry d[8];
	struct fi_cq_err_entry err;
	ssize_t n, i;

	if (s->format == FI_CQ_FORMAT_TAGGED)
		n = fi_cq_read(s->cq, t, 8);
	else
		n = fi_cq_read(s->cq, d, 8);
	if (n == -FI_EAGAIN)
		return;
	if (n == -FI_EAVAIL) {
		memset(&err, 0, sizeof(err));
		if (fi_cq_readerr(s->cq, &err, 0) == 1 && p->n < MAX_PENDING) {
			const char *text =
				fi_cq_strerror(s->cq, err.prov_errno, err.err_data, NULL, 0);
			struct comp *c = &p->c[p->n++];

			if (err.err != FI_ECANCELED && !expect_errors)
				fprintf(stderr, "completion error: %s (ctx %p)\n",
					fi_strerror(err.err), err.op_context);
			*c = (struct comp){ err.op_context, err.flags, err.len, err.tag,
					    err.data,	    err.err,   err.prov_errno, "" };
			snprintf(c->text, sizeof(c->text), "%s", text ? text : "");
		}
		return;
	}
	if (n < 0) {
		fprintf(stderr, "fi_cq_read: %s\n", fi_strerror((int)-n));
		exit(1);
	}
	for (i = 0; i < n && p->n < MAX_PENDING; i++) {
		if (s->format == FI_CQ_FORMAT_TAGGED)
			p->c[p->n++] = (struct comp){ t[i].op_context, t[i].flags, t[i].len,
						      t[i].tag, t[i].data, 0, 0, "" };
		else
			p->c[p->n++] = (struct comp){ d[i].op_context, d[i].flags, d[i].len, 0,
						      d[i].data, 0, 0, "" };
	}
}

/* Drives both sides until the completion for ctx shows up on side s; it must carry
 * error code want_err (0: success). */
static struct comp wait_comp_err(struct side *s, void *ctx, int want_err)
{
	struct pending *p = s == &A ? &pend_a : &pend_b;
	time_t start = time(NULL);
	struct comp c;
	int i;

	for (;;) {
		for (i = 0; i < p->n; i++) {
			if (p->c[i].ctx == ctx) {
				c = p->c[i];
				p->c[i] = p->c[--p->n];
				/* err is positive by the book; shm of 1.17 stores it
				 * negated (2.x does not): compare the code */
				CHECK((c.err < 0 ? -c.err : c.err) == want_err);
				return c;
			}
		}
		poll_cq(&A, &pend_a);
		poll_cq(&B, &pend_b);
		if (time(NULL) - start > 30) {
			fprintf(stderr, "timeout waiting for completion %p\n", ctx);
			exit(1);
		}
	}
}

static struct comp wait_comp(struct side *s, void *ctx)
{
	return wait_comp_err(s, ctx, 0);
}

/* Progress for a while and make sure nothing unexpected completes. */
static void settle(void)
{
	int i;

	for (i = 0; i < 1000; i++) {
		poll_cq(&A, &pend_a);
		poll_cq(&B, &pend_b);
	}
}

/* The next completion at B with remote CQ data (a peer's write's). */
static struct comp wait_remote_data(void)
{
	for (;;) {
		poll_cq(&A, &pend_a);
		poll_cq(&B, &pend_b);
		for (int i = 0; i < pend_b.n; i++) {
			if (pend_b.c[i].flags & FI_REMOTE_CQ_DATA) {
				struct comp c = pend_b.c[i];

				pend_b.c[i] = pend_b.c[--pend_b.n];
				return c;
			}
		}
	}
}

#define POST(call)                                                                 \
	do {                                                                       \
		ssize_t p_;                                                        \
		time_t t_ = time(NULL);                                            \
		while ((p_ = (call)) == -FI_EAGAIN) {                              \
			poll_cq(&A, &pend_a);                                      \
			poll_cq(&B, &pend_b);                                      \
			if (time(NULL) - t_ > 30)                                  \
				break;                                             \
		}                                                                  \
		if (p_) {                                                          \
			fprintf(stderr, "%s:%d: %s = %zd (%s)\n", __FILE__,        \
				__LINE__, #call, p_, fi_strerror((int)-p_));       \
			exit(1);                                                   \
		}                                                                  \
	} while (0)

/* ---- "device" memory: host memory in host mode, cuMemAlloc in cuda mode ---- */

typedef int CUresult;
static void *cuda_lib;
static CUresult (*cu_init)(unsigned int);
static CUresult (*cu_primary_retain)(void **, int);
static CUresult (*cu_primary_release)(int);
static CUresult (*cu_ctx_set)(void *);
static CUresult (*cu_alloc)(unsigned long long *, size_t);
static CUresult (*cu_free)(unsigned long long);
static CUresult (*cu_htod)(unsigned long long, const void *, size_t);
static CUresult (*cu_dtoh)(void *, unsigned long long, size_t);
static CUresult (*cu_device_count)(int *);
static stubcuda_call_count_fn stub_calls;
static stubcuda_fail_copies_fn stub_fail_copies;
static stubcuda_cross_device_count_fn stub_cross;

static int cuda_load(void)
{
	cuda_lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!cuda_lib)
		return -1;
	*(void **)&cu_init = dlsym(cuda_lib, "cuInit");
	*(void **)&cu_primary_retain = dlsym(cuda_lib, "cuDevicePrimaryCtxRetain");
	*(void **)&cu_primary_release = dlsym(cuda_lib, "cuDevicePrimaryCtxRelease_v2");
	*(void **)&cu_ctx_set = dlsym(cuda_lib, "cuCtxSetCurrent");
	*(void **)&cu_alloc = dlsym(cuda_lib, "cuMemAlloc_v2");
	*(void **)&cu_free = dlsym(cuda_lib, "cuMemFree_v2");
	*(void **)&cu_htod = dlsym(cuda_lib, "cuMemcpyHtoD_v2");
	*(void **)&cu_dtoh = dlsym(cuda_lib, "cuMemcpyDtoH_v2");
	*(void **)&cu_device_count = dlsym(cuda_lib, "cuDeviceGetCount");
	*(void **)&stub_calls = dlsym(cuda_lib, STUBCUDA_SYM_CALL_COUNT);
	*(void **)&stub_fail_copies = dlsym(cuda_lib, STUBCUDA_SYM_FAIL_COPIES);
	*(void **)&stub_cross = dlsym(cuda_lib, STUBCUDA_SYM_CROSS_DEVICE_COUNT);
	if (!cu_init || !cu_primary_retain || !cu_primary_release || !cu_ctx_set ||
	    !cu_alloc || !cu_free || !cu_htod || !cu_dtoh || !cu_device_count)
		return -1;
	return 0;
}

static void *dev_alloc(size_t len)
{
	unsigned long long p = 0;
	void *h = NULL;

	if (!cuda_mode()) {
		if (posix_memalign(&h, 4096, len))
			exit(1);
		return h;
	}
	if (cu_alloc(&p, len)) {
		fprintf(stderr, "cuMemAlloc_v2(%zu) failed\n", len);
		exit(1);
	}
	return (void *)(uintptr_t)p;
}

static void dev_free(void *p)
{
	if (cuda_mode())
		cu_free((unsigned long long)(uintptr_t)p);
	else
		free(p);
}

static unsigned char pattern(size_t i, unsigned seed)
{
	return (unsigned char)(i * 131u + seed * 7u + 1u);
}

static void mem_write(void *dst, const void *src, size_t len, int dev)
{
	if (dev && cuda_mode()) {
		if (cu_htod((unsigned long long)(uintptr_t)dst, src, len))
			exit(1);
	} else {
		memcpy(dst, src, len);
	}
}

static void mem_read(void *dst, const void *src, size_t len, int dev)
{
	if (dev && cuda_mode()) {
		if (cu_dtoh(dst, (unsigned long long)(uintptr_t)src, len))
			exit(1);
	} else {
		memcpy(dst, src, len);
	}
}

static void fill(void *buf, size_t len, unsigned seed, int dev)
{
	unsigned char *tmp = malloc(len ? len : 1);
	size_t i;

	for (i = 0; i < len; i++)
		tmp[i] = pattern(i, seed);
	mem_write(buf, tmp, len, dev);
	free(tmp);
}

static void zero(void *buf, size_t len, int dev)
{
	unsigned char *tmp = calloc(1, len ? len : 1);

	mem_write(buf, tmp, len, dev);
	free(tmp);
}

/* Every byte of buf must be pattern(seed), counting from index `from`. */
static int verify(const void *buf, size_t len, unsigned seed, size_t from, int dev,
		  const char *what)
{
	unsigned char *tmp = malloc(len ? len : 1);
	size_t i;

	mem_read(tmp, buf, len, dev);
	for (i = 0; i < len; i++) {
		if (tmp[i] != pattern(from + i, seed)) {
			fprintf(stderr, "%s: byte %zu is 0x%02x, want 0x%02x\n", what, i, tmp[i],
				pattern(from + i, seed));
			failures++;
			free(tmp);
			return -1;
		}
	}
	free(tmp);
	return 0;
}

/* Drives both sides until buf holds pattern(seed) (a write with no event at the
 * target lands as the target reads its CQ), then checks it; at most 30 s. */
static void wait_bytes(const void *buf, size_t len, unsigned seed, int dev, const char *what)
{
	unsigned char *tmp = malloc(len ? len : 1);
	time_t start = time(NULL);
	size_t i;

	for (;;) {
		mem_read(tmp, buf, len, dev);
		for (i = 0; i < len && tmp[i] == pattern(i, seed); i++)
			;
		if (i == len || time(NULL) - start > 30)
			break;
		poll_cq(&A, &pend_a);
		poll_cq(&B, &pend_b);
	}
	free(tmp);
	verify(buf, len, seed, 0, dev, what);
}

/* Host mode promises "no CUDA calls": the provider must not even have loaded the
 * driver (tests put the stub on LD_LIBRARY_PATH so that it could have). A
 * libfabric with CUDA support of its own (2.x built --with-cuda) loads the
 * driver and runtime itself at fi_getinfo; then the provider's promise is
 * checked on the calls only it makes: the stub counts no asynchronous copy
 * (libfabric's own copies go through the runtime's cudaMemcpy). */
static void check_no_cuda_loaded(void)
{
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
	void *rt = dlopen("libcudart.so", RTLD_NOW | RTLD_NOLOAD);

	if (h && rt) {
		stubcuda_call_count_fn count;
		*(void **)&count = dlsym(h, STUBCUDA_SYM_CALL_COUNT);
		CHECK(count != NULL);
		if (count) {
			CHECK(count("cuMemcpyHtoDAsync_v2") == 0);
			CHECK(count("cuMemcpyDtoHAsync_v2") == 0);
			CHECK(count("cuStreamCreate") == 0);
		}
	} else {
		CHECK(h == NULL);
	}
	if (h)
		dlclose(h);
	if (rt)
		dlclose(rt);
}

/* ---- setopt ---- */

static void open_fabric(uint64_t caps)
{
	struct fi_info *h = make_hints(caps, "testhmem");
	int ret = fi_getinfo(API_VERSION, NULL, NULL, 0, h, &info);

	fi_freeinfo(h);
	if (ret) {
		fprintf(stderr, "fi_getinfo(testhmem): %s\n", fi_strerror(-ret));
		exit(1);
	}
	MUST(fi_fabric(info->fabric_attr, &fabric, NULL));
}

static void close_fabric(void)
{
	MUST(fi_close(&fabric->fid));
	fi_freeinfo(info);
	info = NULL;
}

static int setopt_cuda(struct fid_ep *ep, bool value)
{
	return fi_setopt(&ep->fid, FI_OPT_ENDPOINT, OPT_CUDA_API_PERMITTED, &value,
			 sizeof(value));
}

static int test_setopt(void)
{
	static const struct {
		const char *env;
		int want;
	} answers[] = {
		{ "ok", 0 },
		{ "eopnotsupp", -FI_EOPNOTSUPP },
		{ "einval", -FI_EINVAL },
		{ "enoprotoopt", -FI_ENOPROTOOPT },
	};
	static const char *const p2p_names[] = { "enabled", "required", "preferred", "disabled" };
	char line[128];
	size_t i, optlen;
	int v, p2p_default;

	if (!base_available()) {
		printf("SKIP: base provider \"%s\" offers nothing here\n", base_name());
		return SKIP;
	}
	if (cuda_mode() && cuda_load()) {
		printf("SKIP: TESTHMEM_MODE=cuda and libcuda.so.1 unusable\n");
		return SKIP;
	}
	log_reset();
	open_fabric(FI_TAGGED | FI_MSG | FI_HMEM);
	open_side(&A, FI_CQ_FORMAT_TAGGED);

	/* every answer the environment asks for comes back from fi_setopt */
	for (i = 0; i < sizeof(answers) / sizeof(answers[0]); i++) {
		setenv("TESTHMEM_CUDA_API_PERMITTED", answers[i].env, 1);
		CHECK_RET(setopt_cuda(A.ep, false), answers[i].want);
		snprintf(line, sizeof(line), "setopt cuda_api_permitted=%s value=0",
			 answers[i].env);
		CHECK(log_count(line) == 1);
	}
	/* default: host mode promises no CUDA calls, cuda mode cannot */
	unsetenv("TESTHMEM_CUDA_API_PERMITTED");
	CHECK_RET(setopt_cuda(A.ep, false), cuda_mode() ? -FI_EOPNOTSUPP : 0);
	CHECK_RET(setopt_cuda(A.ep, true), cuda_mode() ? -FI_EOPNOTSUPP : 0);
	CHECK(log_count("setopt cuda_api_permitted=") == 6);
	/* a bool, nothing else */
	v = 0;
	CHECK_RET(fi_setopt(&A.ep->fid, FI_OPT_ENDPOINT, OPT_CUDA_API_PERMITTED, &v, sizeof(v)),
		  -FI_EINVAL);
	/* set-only */
	optlen = sizeof(bool);
	CHECK_RET(fi_getopt(&A.ep->fid, FI_OPT_ENDPOINT, OPT_CUDA_API_PERMITTED, &v, &optlen),
		  -FI_ENOPROTOOPT);

	/* FI_OPT_FI_HMEM_P2P */
	p2p_default = cuda_mode() ? FI_HMEM_P2P_DISABLED : FI_HMEM_P2P_ENABLED;
	optlen = sizeof(v);
	CHECK_RET(fi_getopt(&A.ep->fid, FI_OPT_ENDPOINT, FI_OPT_FI_HMEM_P2P, &v, &optlen), 0);
	CHECK(v == p2p_default && optlen == sizeof(int));
	for (i = 0; i < 4; i++) {
		setenv("TESTHMEM_P2P", p2p_names[i], 1);
		v = -1;
		optlen = sizeof(v);
		CHECK_RET(fi_getopt(&A.ep->fid, FI_OPT_ENDPOINT, FI_OPT_FI_HMEM_P2P, &v, &optlen),
			  0);
		CHECK(v == FI_HMEM_P2P_ENABLED + (int)i);
	}
	setenv("TESTHMEM_P2P", "enoprotoopt", 1);
	CHECK_RET(fi_getopt(&A.ep->fid, FI_OPT_ENDPOINT, FI_OPT_FI_HMEM_P2P, &v, &optlen),
		  -FI_ENOPROTOOPT);
	v = FI_HMEM_P2P_DISABLED;
	CHECK_RET(fi_setopt(&A.ep->fid, FI_OPT_ENDPOINT, FI_OPT_FI_HMEM_P2P, &v, sizeof(v)),
		  -FI_ENOPROTOOPT);
	setenv("TESTHMEM_P2P", "required", 1);
	CHECK_RET(fi_setopt(&A.ep->fid, FI_OPT_ENDPOINT, FI_OPT_FI_HMEM_P2P, &v, sizeof(v)), 0);
	v = -1;
	optlen = sizeof(v);
	CHECK_RET(fi_getopt(&A.ep->fid, FI_OPT_ENDPOINT, FI_OPT_FI_HMEM_P2P, &v, &optlen), 0);
	CHECK(v == FI_HMEM_P2P_DISABLED); /* what was set wins over the environment */
	CHECK(log_count("setopt hmem_p2p=disabled") == 1);
	unsetenv("TESTHMEM_P2P");

	/* any other option is the base provider's */
	{
		size_t minrecv = 0, len = sizeof(minrecv);

		CHECK_RET(fi_getopt(&A.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &minrecv,
				    &len),
			  0);
	}

	/* after fi_enable it is too late */
	MUST(fi_enable(A.ep));
	CHECK_RET(setopt_cuda(A.ep, false), -FI_EOPBADSTATE);
	CHECK(log_count("setopt cuda_api_permitted=eopbadstate") == 1);

	close_side(&A);
	close_fabric();
	if (!cuda_mode())
		check_no_cuda_loaded();
	CHECK(log_count("domain open mode=") == 1);
	CHECK(log_count("domain close mode=") == 1);
	return failures ? 1 : 0;
}

/* ---- transfers ---- */

#define BUF_LEN (8u << 20)
#define HOST_LEN (1u << 20)

struct expect {
	unsigned long cuda_sends, cuda_recvs, cuda_send_bytes, cuda_recv_bytes;
	unsigned long cuda_injects, cuda_reads, cuda_writes, cuda_rma_bytes;
	unsigned long sys_sends, sys_recvs;
	unsigned long d2h, h2d; /* copies the provider must make (cuda mode) */
};

static int reg_device; /* attr.device.cuda of the next CUDA registration */

static struct fid_mr *reg(struct side *s, void *buf, size_t len, uint64_t access,
			  enum fi_hmem_iface iface, uint64_t key)
{
	struct iovec iov = { buf, len };
	struct fi_mr_attr attr;
	struct fid_mr *mr = NULL;

	memset(&attr, 0, sizeof(attr));
	attr.mr_iov = &iov;
	attr.iov_count = 1;
	attr.access = access;
	attr.requested_key = key;
	attr.iface = iface;
	if (iface == FI_HMEM_CUDA)
		attr.device.cuda = reg_device;
	MUST(fi_mr_regattr(s->domain, &attr, 0, &mr));
	if (info->domain_attr->mr_mode & FI_MR_ENDPOINT) {
		MUST(fi_mr_bind(mr, &s->ep->fid, 0));
		MUST(fi_mr_enable(mr));
	}
	return mr;
}

static uint64_t rma_addr(void *buf, size_t offset_in_mr)
{
	if (info->domain_attr->mr_mode & FI_MR_VIRT_ADDR)
		return (uint64_t)(uintptr_t)buf;
	return offset_in_mr;
}

static int test_xfer(void)
{
	static const size_t sizes[] = { 1, 64, 4096, 65536, 1u << 20, 4u << 20 };
	char *a_dev, *b_dev, *a_host, *b_host;
	struct fid_mr *a_mr, *b_mr, *ah_mr, *bh_mr;
	void *a_desc, *b_desc, *ah_desc, *bh_desc;
	struct expect ex;
	struct ops_sum sum;
	unsigned long bad_desc, nodesc, copy_err, d2h0 = 0, h2d0 = 0;
	int ctx[64], tagged_data, rma, ret;
	struct comp c;
	size_t i;

	memset(&ex, 0, sizeof(ex));
	if (!base_available()) {
		printf("SKIP: base provider \"%s\" offers nothing here\n", base_name());
		return SKIP;
	}
	if (cuda_mode()) {
		void *ctx0 = NULL;

		if (cuda_load() || cu_init(0)) {
			printf("SKIP: TESTHMEM_MODE=cuda and libcuda.so.1 unusable\n");
			return SKIP;
		}
		if (cu_primary_retain(&ctx0, 0) || cu_ctx_set(ctx0)) {
			printf("SKIP: no CUDA device 0\n");
			return SKIP;
		}
		if (stub_calls) {
			d2h0 = stub_calls("cuMemcpyDtoHAsync_v2");
			h2d0 = stub_calls("cuMemcpyHtoDAsync_v2");
		}
	}
	log_reset();
	open_fabric(FI_TAGGED | FI_MSG | FI_RMA | FI_HMEM);
	printf("base %s, fabric %s, mode %s, mr_mode 0x%x, cq_data_size %zu\n", base_name(),
	       info->fabric_attr->name, cuda_mode() ? "cuda" : "host",
	       info->domain_attr->mr_mode, info->domain_attr->cq_data_size);
	CHECK(!strcmp(info->fabric_attr->prov_name, "testhmem"));
	CHECK(info->caps & FI_HMEM);
	tagged_data = info->domain_attr->cq_data_size >= 4;
	if (cq4()) {
		/* TESTHMEM_CQ_DATA_SIZE=4: offered as such, and a hint for more finds nothing */
		struct fi_info *h = make_hints(FI_TAGGED | FI_MSG | FI_RMA | FI_HMEM, "testhmem"), *none = NULL;

		CHECK(info->domain_attr->cq_data_size == 4);
		h->domain_attr->cq_data_size = 8;
		CHECK_RET(fi_getinfo(API_VERSION, NULL, NULL, 0, h, &none), -FI_ENODATA);
		fi_freeinfo(none);
		fi_freeinfo(h);
	}
	rma = !!(info->caps & FI_RMA);

	open_side(&A, FI_CQ_FORMAT_DATA);
	open_side(&B, FI_CQ_FORMAT_TAGGED);
	connect_sides();

	a_dev = dev_alloc(BUF_LEN);
	b_dev = dev_alloc(BUF_LEN);
	if (posix_memalign((void **)&a_host, 4096, HOST_LEN) ||
	    posix_memalign((void **)&b_host, 4096, HOST_LEN))
		exit(1);

	a_mr = reg(&A, a_dev, BUF_LEN, FI_SEND | FI_RECV | FI_READ | FI_WRITE, FI_HMEM_CUDA, 1);
	b_mr = reg(&B, b_dev, BUF_LEN,
		   FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE,
		   FI_HMEM_CUDA, 2);
	ah_mr = reg(&A, a_host, HOST_LEN, FI_SEND | FI_RECV | FI_READ | FI_WRITE, FI_HMEM_SYSTEM,
		    3);
	bh_mr = reg(&B, b_host, HOST_LEN,
		    FI_SEND | FI_RECV | FI_REMOTE_READ | FI_REMOTE_WRITE, FI_HMEM_SYSTEM, 4);
	a_desc = fi_mr_desc(a_mr);
	b_desc = fi_mr_desc(b_mr);
	ah_desc = fi_mr_desc(ah_mr);
	bh_desc = fi_mr_desc(bh_mr);
	CHECK(log_count("reg iface=cuda device=0 len=8388608 access=0x") == 2);
	CHECK(log_count("reg iface=system device=0 len=1048576 access=0x") == 2);

	if (cuda_mode()) {
		/* host memory registered as CUDA is refused in cuda mode */
		struct iovec iov = { a_host, 4096 };
		struct fi_mr_attr attr = { .mr_iov = &iov, .iov_count = 1, .access = FI_SEND,
					   .requested_key = 99, .iface = FI_HMEM_CUDA };
		struct fid_mr *bad = NULL;

		CHECK_RET(fi_mr_regattr(A.domain, &attr, 0, &bad), -FI_EINVAL);
		CHECK(log_count("error reg-not-device") == 1);
	}
	{
		/* other HMEM interfaces are not emulated */
		struct iovec iov = { a_host, 4096 };
		struct fi_mr_attr attr = { .mr_iov = &iov, .iov_count = 1, .access = FI_SEND,
					   .requested_key = 98, .iface = FI_HMEM_ZE };
		struct fid_mr *bad = NULL;

		CHECK_RET(fi_mr_regattr(A.domain, &attr, 0, &bad), -FI_ENOSYS);
	}

	/* 1: tagged messages of growing size, device to device */
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t len = sizes[i];

		fill(a_dev, len, (unsigned)i + 1, 1);
		zero(b_dev, len, 1);
		POST(fi_trecv(B.ep, b_dev, len, b_desc, B.peer, 100 + i, 0, &ctx[0]));
		POST(fi_tsend(A.ep, a_dev, len, a_desc, A.peer, 100 + i, &ctx[1]));
		c = wait_comp(&B, &ctx[0]);
		CHECK(c.len == len && c.tag == 100 + i);
		CHECK((c.flags & (FI_RECV | FI_TAGGED)) == (FI_RECV | FI_TAGGED));
		c = wait_comp(&A, &ctx[1]);
		CHECK(c.flags & FI_SEND);
		verify(b_dev, len, (unsigned)i + 1, 0, 1, "tsend/trecv");
		ex.cuda_sends++;
		ex.cuda_recvs++;
		ex.cuda_send_bytes += len;
		ex.cuda_recv_bytes += len;
		ex.d2h++;
		ex.h2d++;
	}

	/* 2: a smaller message into a larger receive: only len bytes land */
	fill(a_dev, 1000, 21, 1);
	fill(b_dev, 4096, 99, 1);
	POST(fi_trecv(B.ep, b_dev, 4096, b_desc, B.peer, 7, 0, &ctx[2]));
	POST(fi_tsend(A.ep, a_dev, 1000, a_desc, A.peer, 7, &ctx[3]));
	c = wait_comp(&B, &ctx[2]);
	CHECK(c.len == 1000);
	wait_comp(&A, &ctx[3]);
	verify(b_dev, 1000, 21, 0, 1, "short message");
	verify(b_dev + 1000, 4096 - 1000, 99, 1000, 1, "beyond short message");
	ex.cuda_sends++;
	ex.cuda_recvs++;
	ex.cuda_send_bytes += 1000;
	ex.cuda_recv_bytes += 4096;
	ex.d2h++;
	ex.h2d++;

	/* 3: tsendv (device + host pieces) into trecvv (two device pieces) */
	{
		struct iovec siov[2] = { { a_dev, 3000 }, { a_host, 5000 } };
		void *sdesc[2] = { a_desc, ah_desc };
		struct iovec riov[2] = { { b_dev, 6000 }, { b_dev + 100000, 2000 } };
		void *rdesc[2] = { b_desc, b_desc };

		fill(a_dev, 3000, 31, 1);
		fill(a_host, 5000, 32, 0);
		zero(b_dev, 6000, 1);
		zero(b_dev + 100000, 2000, 1);
		POST(fi_trecvv(B.ep, riov, rdesc, 2, B.peer, 8, 0, &ctx[4]));
		POST(fi_tsendv(A.ep, siov, sdesc, 2, A.peer, 8, &ctx[5]));
		c = wait_comp(&B, &ctx[4]);
		CHECK(c.len == 8000);
		wait_comp(&A, &ctx[5]);
		verify(b_dev, 3000, 31, 0, 1, "sendv piece 1");
		verify(b_dev + 3000, 3000, 32, 0, 1, "sendv piece 2a");
		verify(b_dev + 100000, 2000, 32, 3000, 1, "sendv piece 2b");
		ex.cuda_sends++;
		ex.cuda_recvs++;
		ex.cuda_send_bytes += 8000;
		ex.cuda_recv_bytes += 8000;
		ex.d2h += 1;
		ex.h2d += 2;
	}

	/* 4: tsendmsg/trecvmsg with remote CQ data */
	if (tagged_data) {
		struct iovec siov = { a_dev, 2048 }, riov = { b_dev, 2048 };
		void *sd = a_desc, *rd = b_desc;
		struct fi_msg_tagged rm = { &riov, &rd, 1, B.peer, 9, 0, &ctx[6], 0 };
		struct fi_msg_tagged sm = { &siov, &sd, 1, A.peer, 9, 0, &ctx[7], 0xfeedULL };

		fill(a_dev, 2048, 41, 1);
		zero(b_dev, 2048, 1);
		POST(fi_trecvmsg(B.ep, &rm, FI_COMPLETION));
		POST(fi_tsendmsg(A.ep, &sm, FI_COMPLETION | FI_REMOTE_CQ_DATA));
		c = wait_comp(&B, &ctx[6]);
		CHECK(c.flags & FI_REMOTE_CQ_DATA);
		CHECK(c.data == 0xfeedULL);
		wait_comp(&A, &ctx[7]);
		verify(b_dev, 2048, 41, 0, 1, "tsendmsg");

		fill(a_dev, 512, 42, 1);
		POST(fi_trecv(B.ep, b_dev, 512, b_desc, B.peer, 10, 0, &ctx[8]));
		POST(fi_tsenddata(A.ep, a_dev, 512, a_desc, 0xabcdULL, A.peer, 10, &ctx[9]));
		c = wait_comp(&B, &ctx[8]);
		CHECK(c.data == 0xabcdULL && (c.flags & FI_REMOTE_CQ_DATA));
		wait_comp(&A, &ctx[9]);
		verify(b_dev, 512, 42, 0, 1, "tsenddata");
		ex.cuda_sends += 2;
		ex.cuda_recvs += 2;
		ex.cuda_send_bytes += 2048 + 512;
		ex.cuda_recv_bytes += 2048 + 512;
		ex.d2h += 2;
		ex.h2d += 2;
	}

	/* 5: tinject from device memory (found by address: inject has no desc) */
	fill(a_dev + 4096, 16, 51, 1);
	zero(b_dev, 16, 1);
	POST(fi_trecv(B.ep, b_dev, 16, b_desc, B.peer, 11, 0, &ctx[10]));
	POST(fi_tinject(A.ep, a_dev + 4096, 16, A.peer, 11));
	c = wait_comp(&B, &ctx[10]);
	CHECK(c.len == 16);
	verify(b_dev, 16, 51, 0, 1, "tinject");
	ex.cuda_sends++;
	ex.cuda_injects++;
	ex.cuda_recvs++;
	ex.cuda_send_bytes += 16;
	ex.cuda_recv_bytes += 16;
	ex.d2h++;
	ex.h2d++;

	/* 6: untagged send/recv */
	fill(a_dev, 10000, 61, 1);
	zero(b_dev, 10000, 1);
	POST(fi_recv(B.ep, b_dev, 10000, b_desc, B.peer, &ctx[11]));
	POST(fi_send(A.ep, a_dev, 10000, a_desc, A.peer, &ctx[12]));
	c = wait_comp(&B, &ctx[11]);
	CHECK(c.len == 10000 && (c.flags & FI_MSG));
	wait_comp(&A, &ctx[12]);
	verify(b_dev, 10000, 61, 0, 1, "send/recv");
	ex.cuda_sends++;
	ex.cuda_recvs++;
	ex.cuda_send_bytes += 10000;
	ex.cuda_recv_bytes += 10000;
	ex.d2h++;
	ex.h2d++;

	/* 7: host memory only: counted as iface=system, no copies */
	fill(a_host, 7000, 71, 0);
	zero(b_host, 7000, 0);
	POST(fi_trecv(B.ep, b_host, 7000, bh_desc, B.peer, 12, 0, &ctx[13]));
	POST(fi_tsend(A.ep, a_host, 7000, ah_desc, A.peer, 12, &ctx[14]));
	wait_comp(&B, &ctx[13]);
	wait_comp(&A, &ctx[14]);
	verify(b_host, 7000, 71, 0, 0, "host message");
	ex.sys_sends++;
	ex.sys_recvs++;

	/* 8: no desc on device memory: tolerated, counted as nodesc_cuda */
	fill(a_dev, 300, 81, 1);
	zero(b_dev, 300, 1);
	POST(fi_trecv(B.ep, b_dev, 300, b_desc, B.peer, 13, 0, &ctx[15]));
	POST(fi_tsend(A.ep, a_dev, 300, NULL, A.peer, 13, &ctx[16]));
	wait_comp(&B, &ctx[15]);
	wait_comp(&A, &ctx[16]);
	verify(b_dev, 300, 81, 0, 1, "no-desc send");
	ex.cuda_sends++;
	ex.cuda_recvs++;
	ex.cuda_send_bytes += 300;
	ex.cuda_recv_bytes += 300;
	ex.d2h++;
	ex.h2d++;

	/* 9: a desc that does not cover the buffer is refused */
	CHECK_RET(fi_tsend(A.ep, a_host, 64, a_desc, A.peer, 14, &ctx[17]), -FI_EINVAL);

	/* 10: RMA into and out of the peer's "device" buffer, then its host buffer. Host
	 * mode: the base reaches the "device" memory itself (GPUDirect-like). Cuda mode:
	 * it never touches a device address (STUBCUDA_GUARD makes a stray access fault);
	 * the target moves the bytes between the device and a host shadow when its CQ is
	 * read: a write before its CQ data completion is handed out, a plain write and an
	 * inject at the next reads, a read before it is answered. */
	if (rma) {
		int t;

		for (t = 0; t < 2; t++) {
			int tdev = t == 0, land = cuda_mode() && tdev;
			char *tgt = tdev ? b_dev : b_host;
			uint64_t key = fi_mr_key(tdev ? b_mr : bh_mr);
			const char *where = tdev ? "device" : "host";

			if (tagged_data) {
				/* with 4 bytes of CQ data only the low ones arrive */
				uint64_t data = (0x5eed0000u + (unsigned)t) | (cq4() ? 0xabcdULL << 40 : 0);
				uint64_t want = cq4() ? data & 0xffffffffULL : data;

				fill(a_dev, 40000, 91 + t, 1);
				zero(tgt, 40000, tdev);
				POST(fi_writedata(A.ep, a_dev, 40000, a_desc, data, A.peer,
						  rma_addr(tgt, 0), key, &ctx[18]));
				c = wait_comp(&A, &ctx[18]);
				CHECK((c.flags & (FI_RMA | FI_WRITE)) == (FI_RMA | FI_WRITE));
				c = wait_comp(&B, NULL);
				CHECK(c.flags & FI_REMOTE_CQ_DATA);
				CHECK(c.data == want);
				if (cuda_mode() || cq4())
					CHECK(c.len == 40000);
				printf("fi_writedata into %s memory: CQ data 0x%llx, len %zu\n", where,
				       (unsigned long long)c.data, c.len);
				verify(tgt, 40000, 91 + t, 0, tdev, "fi_writedata");
				ex.cuda_writes++;
				ex.cuda_rma_bytes += 40000;
				ex.d2h++;
				ex.h2d += land;
			}

			/* a plain write: no event at the target */
			fill(a_dev, 20000, 93 + t, 1);
			zero(tgt + 40000, 20000, tdev);
			POST(fi_write(A.ep, a_dev, 20000, a_desc, A.peer, rma_addr(tgt + 40000, 40000),
				      key, &ctx[19]));
			c = wait_comp(&A, &ctx[19]);
			CHECK((c.flags & (FI_RMA | FI_WRITE)) == (FI_RMA | FI_WRITE));
			wait_bytes(tgt + 40000, 20000, 93 + t, tdev, "fi_write");
			ex.cuda_writes++;
			ex.cuda_rma_bytes += 20000;
			ex.d2h++;
			ex.h2d += land;

			/* an inject from host memory */
			fill(a_host, 64, 95 + t, 0);
			zero(tgt + 60000, 64, tdev);
			POST(fi_inject_write(A.ep, a_host, 64, A.peer, rma_addr(tgt + 60000, 60000),
					     key));
			wait_bytes(tgt + 60000, 64, 95 + t, tdev, "fi_inject_write");
			ex.h2d += land;

			/* a read of what the target's memory holds */
			fill(tgt + 65536, 30000, 97 + t, tdev);
			zero(a_dev + 65536, 30000, 1);
			POST(fi_read(A.ep, a_dev + 65536, 30000, a_desc, A.peer,
				     rma_addr(tgt + 65536, 65536), key, &ctx[20]));
			c = wait_comp(&A, &ctx[20]);
			CHECK((c.flags & (FI_RMA | FI_READ)) == (FI_RMA | FI_READ));
			verify(a_dev + 65536, 30000, 97 + t, 0, 1, "fi_read");
			ex.cuda_reads++;
			ex.cuda_rma_bytes += 30000;
			ex.d2h += land;
			ex.h2d++;
		}
	}

	/* 11: a cancelled receive completes in error with the caller's context */
	POST(fi_trecv(B.ep, b_dev, 4096, b_desc, B.peer, 999, 0, &ctx[21]));
	CHECK_RET(fi_cancel(&B.ep->fid, &ctx[21]), 0);
	c = wait_comp_err(&B, &ctx[21], FI_ECANCELED);
	ex.cuda_recvs++;
	ex.cuda_recv_bytes += 4096;

	settle();
	CHECK(pend_a.n == 0 && pend_b.n == 0); /* nothing completed twice or unasked */

	MUST(fi_close(&a_mr->fid));
	MUST(fi_close(&b_mr->fid));
	MUST(fi_close(&ah_mr->fid));
	MUST(fi_close(&bh_mr->fid));
	close_side(&A);
	close_side(&B);
	close_fabric();

	/* what the provider saw, from its log */
	CHECK(log_count("dereg iface=cuda len=8388608") == 2);
	ret = log_ops("cuda", &sum);
	CHECK(ret == 2);
	printf("cuda: sends=%lu recvs=%lu send_bytes=%lu recv_bytes=%lu injects=%lu reads=%lu "
	       "writes=%lu regs=%lu\n",
	       sum.sends, sum.recvs, sum.send_bytes, sum.recv_bytes, sum.injects, sum.reads,
	       sum.writes, sum.regs);
	CHECK(sum.sends == ex.cuda_sends);
	CHECK(sum.recvs == ex.cuda_recvs);
	CHECK(sum.send_bytes == ex.cuda_send_bytes);
	CHECK(sum.recv_bytes == ex.cuda_recv_bytes);
	CHECK(sum.bytes == ex.cuda_send_bytes + ex.cuda_recv_bytes);
	CHECK(sum.injects == ex.cuda_injects);
	CHECK(sum.reads == ex.cuda_reads && sum.writes == ex.cuda_writes);
	CHECK(sum.rma_bytes == ex.cuda_rma_bytes);
	CHECK(sum.regs == 2);
	log_ops("system", &sum);
	CHECK(sum.sends == ex.sys_sends && sum.recvs == ex.sys_recvs);
	CHECK(sum.regs == 2);
	log_checks(&bad_desc, &nodesc, &copy_err);
	CHECK(bad_desc == 1 && nodesc == 1 && copy_err == 0);
	CHECK(log_count(cuda_mode() ? "domain open mode=cuda" : "domain open mode=host") == 2);

	if (cuda_mode() && stub_calls) {
		unsigned long d2h = stub_calls("cuMemcpyDtoHAsync_v2") - d2h0;
		unsigned long h2d = stub_calls("cuMemcpyHtoDAsync_v2") - h2d0;

		/* a send the base refuses with -FI_EAGAIN (rxm while it connects) has
		 * been copied already and is copied again when the caller retries */
		printf("stub saw %lu DtoH and %lu HtoD copies by the provider (want >= %lu, "
		       "%lu)\n",
		       d2h, h2d, ex.d2h, ex.h2d);
		CHECK(d2h >= ex.d2h);
		CHECK(h2d == ex.h2d);
		CHECK(stub_calls("cuStreamCreate") == 2);
		CHECK(stub_calls("cuStreamDestroy_v2") == 2);
	}
	if (!cuda_mode())
		check_no_cuda_loaded();
	free(a_host);
	free(b_host);
	dev_free(a_dev);
	dev_free(b_dev);
	if (cuda_mode())
		cu_primary_release(0);
	return failures ? 1 : 0;
}

/* Sums a "key=N" field over the "check ..." lines (0 when absent). */
static unsigned long log_check_field(const char *key)
{
	char *all = log_read(), *line, *save = NULL, pat[64];
	unsigned long sum = 0, v;

	snprintf(pat, sizeof(pat), " %s=", key);
	for (line = strtok_r(all, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *f = strstr(line, pat);

		if (strncmp(line, "check ", 6) || !f)
			continue;
		if (sscanf(f + strlen(pat), "%lu", &v) == 1)
			sum += v;
	}
	free(all);
	return sum;
}

/* Lines that start with prefix and contain every string of `also` (NULL-ended). */
static int log_count_with(const char *prefix, const char *const *also)
{
	char *all = log_read(), *line, *save = NULL;
	int n = 0;
	size_t i;

	for (line = strtok_r(all, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		int ok = !strncmp(line, prefix, strlen(prefix));

		for (i = 0; ok && also && also[i]; i++)
			ok = strstr(line, also[i]) != NULL;
		n += ok;
	}
	free(all);
	return n;
}

/* ---- two GPUs behind one domain (NCCL's single-process mode) ----
 *
 * NCCL driving two GPUs from one process opens the plugin's one domain and one
 * endpoint per NIC once, and its two proxy threads (one per GPU, each with its own
 * device's context current) post and reap operations on buffers of both GPUs
 * through them. Each worker thread here holds one device's context, posts a receive
 * into its device's memory and a send from it to the other worker, and reaps the
 * shared CQ (in batches, under a lock, like the plugin): completions of the other
 * device's receives are finished by a thread whose current context is not theirs.
 * Needs two devices (STUBCUDA_DEVICES=2 with the stub). */

#define MD_SIZES 6
#define MD_ABORT_BIT (1ULL << 59) /* ignored by receives, as the plugin's abort bit */

/* done is set last, with release, after tag, len and err: the waiting thread
 * reads them after it sees done (acquire). */
struct md_comp {
	int done;
	int err;
	uint64_t tag;
	size_t len;
};

struct md_worker {
	volatile int recv_posted[MD_SIZES];
	int dev;
	void *ctx;
	char *sbuf, *rbuf;
	void *sdesc, *rdesc;
	struct md_comp send_c[MD_SIZES], recv_c[MD_SIZES];
	int failures;
};

static pthread_mutex_t md_cq_lock = PTHREAD_MUTEX_INITIALIZER;
/* shm of libfabric 1.17 loses messages or crashes (about 1 run in 100, also without
 * testhmem) when threads post on one endpoint while another reads its CQ: over shm
 * every libfabric call of the workers is serialised (the CUDA side, copies made by
 * a thread whose current context is another device's, is unchanged) */
static pthread_mutex_t md_api_lock = PTHREAD_MUTEX_INITIALIZER;
static int md_serialize;

static void md_api_enter(void)
{
	if (md_serialize)
		pthread_mutex_lock(&md_api_lock);
}

static void md_api_leave(void)
{
	if (md_serialize)
		pthread_mutex_unlock(&md_api_lock);
}
static struct md_worker md_w[2];
static const size_t md_sizes[MD_SIZES] = { 1, 16, 16, 4096, 65536, 1u << 20 };

/* Reaps the shared CQ (trylock: another thread reaping serves us too). */
static void md_progress(void)
{
	struct fi_cq_tagged_entry e[32];
	struct fi_cq_err_entry err;
	ssize_t n, i;

	if (pthread_mutex_trylock(&md_cq_lock))
		return;
	md_api_enter();
	for (;;) {
		n = fi_cq_read(A.cq, e, 32);
		if (n > 0) {
			for (i = 0; i < n; i++) {
				struct md_comp *c = e[i].op_context;

				c->tag = e[i].tag;
				c->len = e[i].len;
				__atomic_store_n(&c->done, 1, __ATOMIC_RELEASE);
			}
			continue;
		}
		if (n == -FI_EAVAIL) {
			memset(&err, 0, sizeof(err));
			if (fi_cq_readerr(A.cq, &err, 0) == 1) {
				struct md_comp *c = err.op_context;

				fprintf(stderr, "multidev: completion error %s\n",
					fi_strerror(err.err));
				c->err = err.err;
				c->tag = err.tag;
				__atomic_store_n(&c->done, 1, __ATOMIC_RELEASE);
			}
			continue;
		}
		break;
	}
	md_api_leave();
	pthread_mutex_unlock(&md_cq_lock);
}

static int md_wait(struct md_comp *c)
{
	time_t start = time(NULL);

	while (!__atomic_load_n(&c->done, __ATOMIC_ACQUIRE)) {
		md_progress();
		if (time(NULL) - start > 30)
			return -1;
	}
	return c->err ? -1 : 0;
}

static void *md_thread(void *arg)
{
	struct md_worker *w = arg;
	int me = (int)(w - md_w), peer = 1 - me;
	size_t i;

	if (cuda_mode() && cu_ctx_set(w->ctx)) {
		w->failures++;
		return NULL;
	}
	for (i = 0; i < MD_SIZES; i++) {
		size_t len = md_sizes[i];
		uint64_t rtag = ((uint64_t)me << 8) | i, stag = ((uint64_t)peer << 8) | i;
		ssize_t ret;
		time_t t0;

		if (i == 2)
			stag |= MD_ABORT_BIT; /* the receive ignores it; the completion shows it */
		zero(w->rbuf, len, 1);
		fill(w->sbuf, len, (unsigned)(me * 16 + i), 1);
		t0 = time(NULL);
		for (;;) {
			md_api_enter();
			ret = fi_trecv(A.ep, w->rbuf, len, w->rdesc, FI_ADDR_UNSPEC, rtag,
				       MD_ABORT_BIT, &w->recv_c[i]);
			md_api_leave();
			if (ret != -FI_EAGAIN || time(NULL) - t0 > 30)
				break;
			md_progress();
		}
		if (ret) {
			fprintf(stderr, "multidev dev %d: fi_trecv: %s\n", w->dev,
				fi_strerror((int)-ret));
			w->failures++;
			return NULL;
		}
		__atomic_store_n(&w->recv_posted[i], 1, __ATOMIC_RELEASE);
		/* the tag with the ignored bit goes to a posted receive: shm of libfabric
		 * 1.17 does not apply ignore bits to unexpected messages */
		t0 = time(NULL);
		while (i == 2 && !__atomic_load_n(&md_w[peer].recv_posted[i], __ATOMIC_ACQUIRE) &&
		       time(NULL) - t0 < 30)
			md_progress();
		t0 = time(NULL);
		for (;;) {
			md_api_enter();
			if (len == 16 && i == 1) /* inject: no desc, no completion */
				ret = fi_tinject(A.ep, w->sbuf, len, A.peer, stag);
			else
				ret = fi_tsend(A.ep, w->sbuf, len, w->sdesc, A.peer, stag,
					       &w->send_c[i]);
			md_api_leave();
			if (ret != -FI_EAGAIN || time(NULL) - t0 > 30)
				break;
			md_progress();
		}
		if (ret) {
			fprintf(stderr, "multidev dev %d: send of %zu bytes: %s\n", w->dev, len,
				fi_strerror((int)-ret));
			w->failures++;
			return NULL;
		}
		if (len == 16 && i == 1)
			w->send_c[i].done = 1;
		if (md_wait(&w->send_c[i]) || md_wait(&w->recv_c[i])) {
			fprintf(stderr, "multidev dev %d: %zu bytes: %s\n", w->dev, len,
				w->send_c[i].done && w->recv_c[i].done ? "failed" : "timeout");
			w->failures++;
			return NULL;
		}
		if (w->recv_c[i].len != len || w->recv_c[i].tag != rtag + (i == 2 ? MD_ABORT_BIT : 0)) {
			fprintf(stderr, "multidev dev %d: completion len %zu tag 0x%llx\n", w->dev,
				w->recv_c[i].len, (unsigned long long)w->recv_c[i].tag);
			w->failures++;
		}
		if (verify(w->rbuf, len, (unsigned)(peer * 16 + i), 0, 1, "multidev"))
			w->failures++;
	}
	return NULL;
}

static int test_multidev(void)
{
	static const char *const dev1_copy[] = { " dev=1 ", NULL };
	struct fid_mr *mr[4];
	char name[256];
	size_t namelen = sizeof(name);
	unsigned long cross0 = 0, streams0 = 0;
	pthread_t th[2];
	int ndev = 0, d;

	/* host mode: the same traffic straight through the base (no copies) */
	md_serialize = !strcmp(base_name(), "shm");
	if (!base_available()) {
		printf("SKIP: base provider \"%s\" offers nothing here\n", base_name());
		return SKIP;
	}
	for (d = 0; d < 2; d++)
		md_w[d].dev = d;
	if (cuda_mode()) {
		if (cuda_load() || cu_init(0) || cu_device_count(&ndev) || ndev < 2) {
			printf("SKIP: multidev needs libcuda.so.1 with 2 devices "
			       "(STUBCUDA_DEVICES=2)\n");
			return SKIP;
		}
		for (d = 0; d < 2; d++) {
			if (cu_primary_retain(&md_w[d].ctx, d)) {
				printf("SKIP: no CUDA device %d\n", d);
				return SKIP;
			}
		}
		if (stub_calls) {
			cross0 = stub_cross ? stub_cross() : 0;
			streams0 = stub_calls("cuStreamCreate");
		}
	}
	/* each device's buffers, allocated under its own context */
	for (d = 1; d >= 0; d--) {
		if (cuda_mode())
			MUST(cu_ctx_set(md_w[d].ctx));
		md_w[d].sbuf = dev_alloc(1u << 20);
		md_w[d].rbuf = dev_alloc(1u << 20);
	}
	/* device 0 is current where the domain is opened and the MRs registered */
	log_reset();
	open_fabric(FI_TAGGED | FI_MSG | FI_HMEM);
	open_side(&A, FI_CQ_FORMAT_TAGGED);
	MUST(fi_enable(A.ep));
	MUST(fi_getname(&A.ep->fid, name, &namelen));
	CHECK_RET(fi_av_insert(A.av, name, 1, &A.peer, 0, NULL), 1); /* to itself */
	for (d = 0; d < 2; d++) {
		reg_device = d;
		mr[2 * d] = reg(&A, md_w[d].sbuf, 1u << 20, FI_SEND | FI_RECV, FI_HMEM_CUDA,
				10 + 2 * d);
		mr[2 * d + 1] = reg(&A, md_w[d].rbuf, 1u << 20, FI_SEND | FI_RECV, FI_HMEM_CUDA,
				    11 + 2 * d);
		md_w[d].sdesc = fi_mr_desc(mr[2 * d]);
		md_w[d].rdesc = fi_mr_desc(mr[2 * d + 1]);
	}
	reg_device = 0;

	for (d = 0; d < 2; d++)
		MUST(pthread_create(&th[d], NULL, md_thread, &md_w[d]));
	for (d = 0; d < 2; d++) {
		pthread_join(th[d], NULL);
		failures += md_w[d].failures;
	}

	for (d = 0; d < 4; d++)
		MUST(fi_close(&mr[d]->fid));
	close_side(&A);
	close_fabric();

	CHECK(log_count("reg iface=cuda device=0 ") == 2);
	CHECK(log_count("reg iface=cuda device=1 ") == 2);
	CHECK(log_count("error ") == 0);
	CHECK(log_check_field("copy_errors") == 0);
	CHECK(log_check_field("ops_in_use") == 0);
	if (cuda_mode() && getenv("TESTHMEM_TRACE") && atoi(getenv("TESTHMEM_TRACE")) > 0) {
		CHECK(log_count_with("trace copy=h2d ", dev1_copy) >= MD_SIZES);
		CHECK(log_count_with("trace copy=d2h ", dev1_copy) >= MD_SIZES);
		CHECK(log_count("trace op=tinject ") == 2);
	}
	if (cuda_mode() && stub_calls) {
		printf("stub: %lu cross-device copies, %lu streams created\n",
		       (stub_cross ? stub_cross() : 0) - cross0,
		       stub_calls("cuStreamCreate") - streams0);
		CHECK(!stub_cross || stub_cross() == cross0);
		CHECK(stub_calls("cuStreamCreate") - streams0 == 2); /* one per device */
		CHECK(stub_calls("cuStreamDestroy_v2") == stub_calls("cuStreamCreate"));
	}
	for (d = 0; d < 2; d++) {
		if (cuda_mode())
			MUST(cu_ctx_set(md_w[d].ctx));
		dev_free(md_w[d].sbuf);
		dev_free(md_w[d].rbuf);
	}
	if (cuda_mode()) {
		cu_ctx_set(NULL);
		cu_primary_release(0);
		cu_primary_release(1);
	} else {
		check_no_cuda_loaded();
	}
	return failures ? 1 : 0;
}

/* ---- CUDA copy failures become error completions ----
 *
 * With the stub, copies are made to fail (stubcuda_fail_copies). A receive whose
 * copy to the device fails, a send whose copy from the device fails, an RMA read
 * or write likewise: each must complete in error (FI_EIO, readable with
 * fi_cq_readerr, with the caller's context, flags and tag), never succeed with
 * stale data or vanish. An inject has no completion: it fails at once. */

#define CU_ILLEGAL_ADDRESS 700

static int test_copyerr(void)
{
	char *a_dev, *b_dev, *a_host, *b_host;
	struct fid_mr *a_mr, *b_mr, *ah_mr, *bh_mr;
	void *a_desc, *b_desc;
	int ctx[32], i, nerr, injected = 0, rma;
	struct comp c;
	void *ctx0 = NULL;

	if (!cuda_mode()) {
		printf("SKIP: copyerr needs TESTHMEM_MODE=cuda\n");
		return SKIP;
	}
	if (!base_available()) {
		printf("SKIP: base provider \"%s\" offers nothing here\n", base_name());
		return SKIP;
	}
	if (cuda_load() || cu_init(0) || cu_primary_retain(&ctx0, 0) || cu_ctx_set(ctx0)) {
		printf("SKIP: libcuda.so.1 unusable\n");
		return SKIP;
	}
	if (!stub_fail_copies) {
		printf("SKIP: copyerr makes copies fail through the stub's test API\n");
		return SKIP;
	}
	expect_errors = 1;
	log_reset();
	open_fabric(FI_TAGGED | FI_MSG | FI_RMA | FI_HMEM);
	rma = !!(info->caps & FI_RMA);
	open_side(&A, FI_CQ_FORMAT_DATA);
	open_side(&B, FI_CQ_FORMAT_TAGGED);
	connect_sides();
	a_dev = dev_alloc(BUF_LEN);
	b_dev = dev_alloc(BUF_LEN);
	if (posix_memalign((void **)&a_host, 4096, HOST_LEN) ||
	    posix_memalign((void **)&b_host, 4096, HOST_LEN))
		exit(1);
	a_mr = reg(&A, a_dev, BUF_LEN, FI_SEND | FI_RECV | FI_READ | FI_WRITE, FI_HMEM_CUDA, 1);
	b_mr = reg(&B, b_dev, BUF_LEN, FI_SEND | FI_RECV, FI_HMEM_CUDA, 2);
	ah_mr = reg(&A, a_host, HOST_LEN, FI_SEND | FI_RECV, FI_HMEM_SYSTEM, 3);
	bh_mr = reg(&B, b_host, HOST_LEN, FI_SEND | FI_RECV | FI_REMOTE_READ | FI_REMOTE_WRITE,
		    FI_HMEM_SYSTEM, 4);
	a_desc = fi_mr_desc(a_mr);
	b_desc = fi_mr_desc(b_mr);

	/* 0: warm up the connection (rxm connects on first use) */
	fill(a_dev, 64, 1, 1);
	POST(fi_trecv(B.ep, b_dev, 64, b_desc, B.peer, 1000, 0, &ctx[0]));
	POST(fi_tsend(A.ep, a_dev, 64, a_desc, A.peer, 1000, &ctx[1]));
	wait_comp(&B, &ctx[0]);
	wait_comp(&A, &ctx[1]);

	/* 0b: a DMA-BUF registration (FI_MR_DMABUF of libfabric 1.20, as the plugin
	 * makes for NCCL_PTR_DMABUF) is taken by its address range: offset bytes
	 * past base_addr, the start of the DMA-BUF */
	{
		struct { int fd; uint64_t offset; size_t len; void *base_addr; } dmabuf = {
			-1, 1u << 20, 65536, b_dev + (1u << 20)
		};
		struct fi_mr_attr attr = { .mr_iov = (const struct iovec *)(const void *)&dmabuf,
					   .iov_count = 1, .access = FI_SEND | FI_RECV,
					   .requested_key = 5, .iface = FI_HMEM_CUDA };
		struct fid_mr *dmr = NULL;

		MUST(fi_mr_regattr(B.domain, &attr, 1ULL << 40, &dmr));
		fill(a_dev, 65536, 4, 1);
		zero(b_dev + (2u << 20), 65536, 1);
		POST(fi_trecv(B.ep, b_dev + (2u << 20), 65536, fi_mr_desc(dmr), B.peer, 1001, 0,
			      &ctx[0]));
		POST(fi_tsend(A.ep, a_dev, 65536, a_desc, A.peer, 1001, &ctx[1]));
		wait_comp(&B, &ctx[0]);
		wait_comp(&A, &ctx[1]);
		verify(b_dev + (2u << 20), 65536, 4, 0, 1, "dmabuf MR");
		MUST(fi_close(&dmr->fid));
		CHECK(log_count("reg iface=cuda device=0 len=65536 ") == 1);
		CHECK(log_count_with("reg iface=cuda ", (const char *const[]){ " dmabuf=1", NULL }) ==
		      1);
	}

	/* 1: the receive's copy to the device fails: error completion, sender fine */
	fill(a_dev, 4096, 2, 1);
	stub_fail_copies(STUBCUDA_COPY_HTOD, 0, 1, CU_ILLEGAL_ADDRESS);
	injected++;
	POST(fi_trecv(B.ep, b_dev, 4096, b_desc, B.peer, 0x77, 0, &ctx[2]));
	POST(fi_tsend(A.ep, a_dev, 4096, a_desc, A.peer, 0x77, &ctx[3]));
	c = wait_comp_err(&B, &ctx[2], FI_EIO);
	CHECK(c.tag == 0x77);
	CHECK((c.flags & (FI_RECV | FI_TAGGED)) == (FI_RECV | FI_TAGGED));
	CHECK(c.prov_errno == CU_ILLEGAL_ADDRESS);
	CHECK(strstr(c.text, "cuMemcpyHtoDAsync_v2") != NULL);
	CHECK(strstr(c.text, "CUDA_ERROR_ILLEGAL_ADDRESS") != NULL);
	printf("error completion text: %s\n", c.text);
	wait_comp(&A, &ctx[3]);

	/* 2: three receives reaped in one batch, the second copy fails: one error, two
	 * good ones with their data */
	stub_fail_copies(STUBCUDA_COPY_HTOD, 1, 1, CU_ILLEGAL_ADDRESS);
	injected++;
	for (i = 0; i < 3; i++) {
		fill(a_dev + (size_t)i * 8192, 8192, 10 + (unsigned)i, 1);
		zero(b_dev + (size_t)i * 8192, 8192, 1);
		POST(fi_trecv(B.ep, b_dev + (size_t)i * 8192, 8192, b_desc, B.peer, 20 + (uint64_t)i,
			      0, &ctx[4 + i]));
	}
	for (i = 0; i < 3; i++)
		POST(fi_tsend(A.ep, a_dev + (size_t)i * 8192, 8192, a_desc, A.peer, 20 + (uint64_t)i,
			      &ctx[7 + i]));
	for (i = 0; i < 3; i++)
		wait_comp(&A, &ctx[7 + i]);
	/* wait until all three receives are in, then look at them */
	{
		time_t start = time(NULL);
		int got;

		do {
			poll_cq(&A, &pend_a);
			poll_cq(&B, &pend_b);
			got = 0;
			for (i = 0; i < pend_b.n; i++)
				got += pend_b.c[i].ctx >= (void *)&ctx[4] &&
				       pend_b.c[i].ctx <= (void *)&ctx[6];
		} while (got < 3 && time(NULL) - start < 30);
		CHECK(got == 3);
	}
	nerr = 0;
	for (i = 0; i < 3; i++) {
		int k;

		for (k = 0; k < pend_b.n && pend_b.c[k].ctx != &ctx[4 + i]; k++)
			;
		if (k == pend_b.n)
			continue;
		c = pend_b.c[k];
		pend_b.c[k] = pend_b.c[--pend_b.n];
		CHECK(c.tag == 20 + (uint64_t)i);
		if (c.err) {
			CHECK(c.err == FI_EIO);
			nerr++;
		} else {
			CHECK(c.len == 8192);
			verify(b_dev + (size_t)i * 8192, 8192, 10 + (unsigned)i, 0, 1, "batch");
		}
	}
	CHECK(nerr == 1);

	/* 3: the send's copy from the device fails: the send completes in error and
	 * nothing goes out (the receive is cancelled) */
	stub_fail_copies(STUBCUDA_COPY_DTOH, 0, 1, CU_ILLEGAL_ADDRESS);
	injected++;
	POST(fi_trecv(B.ep, b_dev, 4096, b_desc, B.peer, 0x88, 0, &ctx[10]));
	POST(fi_tsend(A.ep, a_dev, 4096, a_desc, A.peer, 0x88, &ctx[11]));
	c = wait_comp_err(&A, &ctx[11], FI_EIO);
	CHECK((c.flags & (FI_SEND | FI_TAGGED)) == (FI_SEND | FI_TAGGED));
	CHECK(c.tag == 0x88);
	CHECK(strstr(c.text, "cuMemcpyDtoHAsync_v2") != NULL);
	settle();
	CHECK_RET(fi_cancel(&B.ep->fid, &ctx[10]), 0);
	wait_comp_err(&B, &ctx[10], FI_ECANCELED);

	/* the same buffers work again afterwards */
	fill(a_dev, 4096, 3, 1);
	zero(b_dev, 4096, 1);
	POST(fi_trecv(B.ep, b_dev, 4096, b_desc, B.peer, 0x99, 0, &ctx[12]));
	POST(fi_tsend(A.ep, a_dev, 4096, a_desc, A.peer, 0x99, &ctx[13]));
	wait_comp(&B, &ctx[12]);
	wait_comp(&A, &ctx[13]);
	verify(b_dev, 4096, 3, 0, 1, "after errors");

	/* 4: an untagged send likewise */
	stub_fail_copies(STUBCUDA_COPY_DTOH, 0, 1, CU_ILLEGAL_ADDRESS);
	injected++;
	POST(fi_send(A.ep, a_dev, 100, a_desc, A.peer, &ctx[14]));
	c = wait_comp_err(&A, &ctx[14], FI_EIO);
	CHECK((c.flags & (FI_SEND | FI_MSG)) == (FI_SEND | FI_MSG));

	/* 5: an inject has no completion to carry the error: it fails at once */
	stub_fail_copies(STUBCUDA_COPY_DTOH, 0, 1, CU_ILLEGAL_ADDRESS);
	injected++;
	CHECK_RET(fi_tinject(A.ep, a_dev, 16, A.peer, 0x55), -FI_EIO);

	/* 6: RMA: a read whose copy to the device fails, a write whose copy from it does */
	if (rma) {
		uint64_t key = fi_mr_key(bh_mr);

		stub_fail_copies(STUBCUDA_COPY_HTOD, 0, 1, CU_ILLEGAL_ADDRESS);
		injected++;
		POST(fi_read(A.ep, a_dev, 4096, a_desc, A.peer, rma_addr(b_host, 0), key, &ctx[15]));
		c = wait_comp_err(&A, &ctx[15], FI_EIO);
		CHECK((c.flags & (FI_RMA | FI_READ)) == (FI_RMA | FI_READ));
		stub_fail_copies(STUBCUDA_COPY_DTOH, 0, 1, CU_ILLEGAL_ADDRESS);
		injected++;
		POST(fi_write(A.ep, a_dev, 4096, a_desc, A.peer, rma_addr(b_host, 0), key, &ctx[16]));
		c = wait_comp_err(&A, &ctx[16], FI_EIO);
		CHECK((c.flags & (FI_RMA | FI_WRITE)) == (FI_RMA | FI_WRITE));
	}

	/* 7: zero bytes, NULL buffers, CUDA descs (as NCCL's empty messages): no copy */
	stub_fail_copies(STUBCUDA_COPY_HTOD | STUBCUDA_COPY_DTOH, 0, 100, CU_ILLEGAL_ADDRESS);
	POST(fi_trecv(B.ep, NULL, 0, b_desc, B.peer, 0xbb, 0, &ctx[19]));
	POST(fi_tsend(A.ep, NULL, 0, a_desc, A.peer, 0xbb, &ctx[20]));
	c = wait_comp(&B, &ctx[19]);
	CHECK(c.len == 0 && c.tag == 0xbb);
	wait_comp(&A, &ctx[20]);
	stub_fail_copies(0, 0, 0, 0);

	/* 8 (last: ofi_rxm may drop the connection after it): a truncated receive; the
	 * bytes that fit reach the device */
	fill(a_dev, 3000, 7, 1);
	zero(b_dev, 4096, 1);
	POST(fi_trecv(B.ep, b_dev, 1000, b_desc, B.peer, 0xaa, 0, &ctx[17]));
	POST(fi_tsend(A.ep, a_dev, 3000, a_desc, A.peer, 0xaa, &ctx[18]));
	/* shm of libfabric 1.17 reports err = -FI_ETRUNC (and len 0), 2.x +FI_ETRUNC */
	c = wait_comp_err(&B, &ctx[17], FI_ETRUNC);
	CHECK(c.tag == 0xaa);
	if (c.len == 1000)
		verify(b_dev, 1000, 7, 0, 1, "truncated receive");
	else
		printf("truncated receive reports len %zu (base %s)\n", c.len, base_name());
	wait_comp(&A, &ctx[18]);

	stub_fail_copies(0, 0, 0, 0);
	settle();
	CHECK(pend_a.n == 0 && pend_b.n == 0);
	MUST(fi_close(&a_mr->fid));
	MUST(fi_close(&b_mr->fid));
	MUST(fi_close(&ah_mr->fid));
	MUST(fi_close(&bh_mr->fid));
	close_side(&A);
	close_side(&B);
	close_fabric();

	printf("copy errors injected %d, logged %lu\n", injected, log_check_field("copy_errors"));
	CHECK(log_check_field("copy_errors") == (unsigned long)injected);
	CHECK(log_count("error cuda call=cuMemcpy") == injected);
	CHECK(log_check_field("ops_in_use") == 0);
	free(a_host);
	free(b_host);
	dev_free(a_dev);
	dev_free(b_dev);
	cu_primary_release(0);
	return failures ? 1 : 0;
}


/* ---- profiles (TESTHMEM_PROFILE): each rule, and a consumer breaking it caught ---- */

/* What each profile must report, written from the reference sheet apart from
 * the provider's own table, so that a rule taken out of the provider fails
 * here. */
struct profile_want {
	const char *name, *prov;
	size_t cq_data, key_size;
	int mr_required;
	uint64_t mode;
	size_t inject, send_max, iov_limit;
	unsigned tag_bits; /* 0: no FI_TAGGED */
	size_t ctx_bytes;  /* of the caller's context the provider owns */
	int cuda_answer;
	int writedata_env; /* cxi */
};

static const struct profile_want profile_wants[] = {
	{ "efa-direct", "efa;testhmem", 4, 4,
	  FI_MR_LOCAL | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR, FI_CONTEXT2, 32, 8192,
	  2, 0, sizeof(struct fi_context2), 0, 0 },
	{ "efa", "efa;testhmem", 4, 4, FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR, 0, 4096,
	  0, 4, 64, 0, 0, 0 },
	{ "verbs", "verbs;ofi_rxm;testhmem", 4, 4,
	  FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR, 0, 192, 1u << 30, 4, 64, 0,
	  -FI_EOPNOTSUPP, 0 },
	{ "cxi", "cxi;testhmem", 8, 8, FI_MR_ENDPOINT | FI_MR_ALLOCATED | FI_MR_PROV_KEY, 0, 192,
	  0, 1, 48, 0, -FI_EOPNOTSUPP, 1 },
	{ "psm3", "psm3;testhmem", 4, 8, 0, FI_CONTEXT, 64, 0, 13, 60, sizeof(struct fi_context),
	  0, 0 },
	{ "opx", "opx;testhmem", 4, 8, 0, FI_ASYNC_IOV, 16, 0, 1, 64, 0, 0, 0 },
};

static struct fi_info *profile_hints(uint64_t caps)
{
	struct fi_info *h = make_hints(caps, "testhmem");

	h->mode |= FI_ASYNC_IOV;
	h->domain_attr->mr_mode |= FI_MR_ENDPOINT;
	h->domain_attr->mr_mode &= ~FI_MR_HMEM;
	return h;
}

static int profile_finds(struct fi_info *h)
{
	struct fi_info *got = NULL;
	int ret = fi_getinfo(API_VERSION, NULL, NULL, 0, h, &got);

	fi_freeinfo(got);
	fi_freeinfo(h);
	return ret == 0;
}

static int rule_logged(const char *rule)
{
	char prefix[96];

	snprintf(prefix, sizeof(prefix), "error rule=%s ", rule);
	return log_count(prefix);
}

static struct fid_mr *profile_reg(struct side *s, void *buf, size_t len, uint64_t access,
				  uint64_t key)
{
	struct fid_mr *mr = NULL;

	MUST(fi_mr_reg(s->domain, buf, len, access, 0, key, 0, &mr, NULL));
	if (info->domain_attr->mr_mode & FI_MR_ENDPOINT) {
		MUST(fi_mr_bind(mr, &s->ep->fid, 0));
		MUST(fi_mr_enable(mr));
	}
	return mr;
}

/* Reads side s's CQ straight (no pending list): the successful completions
 * read, each counted in *recvs or *sends; an error completion fails. */
static int drain_once(struct side *s, int *recvs, int *sends)
{
	struct fi_cq_tagged_entry t[16];
	ssize_t n = fi_cq_read(s->cq, t, s->format == FI_CQ_FORMAT_TAGGED ? 16 : 8), i;
	size_t esz = s->format == FI_CQ_FORMAT_TAGGED ? sizeof(struct fi_cq_tagged_entry)
						      : sizeof(struct fi_cq_data_entry);

	if (n == -FI_EAVAIL) {
		struct fi_cq_err_entry err;

		memset(&err, 0, sizeof(err));
		fi_cq_readerr(s->cq, &err, 0);
		fprintf(stderr, "drain: completion error %s\n", fi_strerror(err.err));
		failures++;
		return 0;
	}
	for (i = 0; i < n; i++) {
		const struct fi_cq_msg_entry *m = (const void *)((const char *)t + (size_t)i * esz);

		if (m->flags & FI_RECV)
			(*recvs)++;
		else
			(*sends)++;
	}
	return n > 0 ? (int)n : 0;
}

/* Progresses both sides until B has read `recvs` receive completions and A
 * `sends` send completions. */
static void drain(int recvs, int sends)
{
	int r = 0, s = 0, dummy = 0;
	time_t start = time(NULL);

	while (r < recvs || s < sends) {
		drain_once(&A, &dummy, &s);
		drain_once(&B, &r, &dummy);
		if (time(NULL) - start > 30) {
			fprintf(stderr, "drain: timeout (%d of %d receives, %d of %d sends)\n", r,
				recvs, s, sends);
			exit(1);
		}
	}
}

static int test_profile(void)
{
	const char *name = getenv("TESTHMEM_PROFILE");
	const struct profile_want *w = NULL;
	enum { LEN = 1 << 20 };
	struct fi_context2 ctx[8];
	char *a_buf, *b_buf;
	struct comp c;
	size_t i;

	for (i = 0; name && i < sizeof(profile_wants) / sizeof(profile_wants[0]); i++)
		if (!strcmp(name, profile_wants[i].name))
			w = &profile_wants[i];
	if (!w) {
		printf("SKIP: TESTHMEM_PROFILE names no profile this test knows\n");
		return SKIP;
	}
	if (!base_available()) {
		printf("SKIP: base provider \"%s\" offers nothing here\n", base_name());
		return SKIP;
	}
	log_reset();
	/* both halves of the reordering (held sends are opt-in) */
	setenv("TESTHMEM_REORDER", "all", 0);
	uint64_t caps = FI_MSG | FI_RMA | (w->tag_bits ? FI_TAGGED : 0);

	/* getinfo: the hint rules */
	if (!w->tag_bits)
		CHECK(!profile_finds(profile_hints(FI_MSG | FI_TAGGED | FI_RMA)));
	if (w->cq_data < 8) {
		struct fi_info *h = profile_hints(caps);

		h->domain_attr->cq_data_size = w->cq_data + 1;
		CHECK(!profile_finds(h));
	}
	if (w->mode) {
		struct fi_info *h = profile_hints(caps);

		h->mode &= ~w->mode;
		CHECK(!profile_finds(h));
	}
	if (w->mr_required) {
		struct fi_info *h = profile_hints(caps);

		h->domain_attr->mr_mode &= ~(w->mr_required & -w->mr_required); /* lowest bit */
		CHECK(!profile_finds(h));
	}
	if (!strcmp(w->name, "psm3")) {
		/* to a hint of no CQ data: the tag64 instance first, then tag60 */
		struct fi_info *h = profile_hints(caps), *got = NULL;

		MUST(fi_getinfo(API_VERSION, NULL, NULL, 0, h, &got));
		CHECK(got->domain_attr->cq_data_size == 0);
		CHECK(got->next && got->next->domain_attr->cq_data_size == 4);
		fi_freeinfo(got);
		fi_freeinfo(h);
	}

	/* TESTHMEM_RX_CQ_DATA=required: efa-direct's FI_RX_CQ_DATA, to hints
	 * that offer it only */
	const char *rcd = getenv("TESTHMEM_RX_CQ_DATA");
	int rx_cq_data = rcd && !strcmp(rcd, "required") && !strcmp(w->name, "efa-direct");

	if (rx_cq_data)
		CHECK(!profile_finds(profile_hints(caps)));
	/* the entry */
	struct fi_info *h = profile_hints(caps);

	if (rx_cq_data)
		h->mode |= FI_RX_CQ_DATA;

	h->domain_attr->cq_data_size = w->cq_data;
	MUST(fi_getinfo(API_VERSION, NULL, NULL, 0, h, &info));
	fi_freeinfo(h);
	MUST(fi_fabric(info->fabric_attr, &fabric, NULL));
	printf("profile %s: prov %s, mr_mode 0x%x, mode 0x%llx, cq_data %zu, key %zu, inject %zu, "
	       "tag 0x%llx\n",
	       w->name, info->fabric_attr->prov_name, info->domain_attr->mr_mode,
	       (unsigned long long)info->mode, info->domain_attr->cq_data_size,
	       info->domain_attr->mr_key_size, info->tx_attr->inject_size,
	       (unsigned long long)info->ep_attr->mem_tag_format);
	CHECK(!strcmp(info->fabric_attr->prov_name, w->prov));
	CHECK(info->domain_attr->cq_data_size == w->cq_data);
	CHECK(info->domain_attr->mr_key_size == w->key_size);
	CHECK((info->domain_attr->mr_mode & w->mr_required) == w->mr_required);
	CHECK(!(info->domain_attr->mr_mode & ~(w->mr_required | FI_MR_LOCAL)));
	CHECK((info->mode & (FI_CONTEXT | FI_CONTEXT2 | FI_ASYNC_IOV)) == w->mode);
	CHECK(!!(info->mode & FI_RX_CQ_DATA) == rx_cq_data);
	CHECK(info->tx_attr->inject_size == w->inject);
	CHECK(info->tx_attr->iov_limit == w->iov_limit);
	CHECK(!!(info->caps & FI_TAGGED) == !!w->tag_bits);
	if (w->tag_bits && w->tag_bits < 64)
		CHECK(info->ep_attr->mem_tag_format == (1ULL << w->tag_bits) - 1);

	open_side(&A, FI_CQ_FORMAT_DATA);
	open_side(&B, FI_CQ_FORMAT_TAGGED);
	{
		/* FI_OPT_CUDA_API_PERMITTED: the real provider's answer (before enable) */
		bool no = false;

		CHECK_RET(fi_setopt(&A.ep->fid, FI_OPT_ENDPOINT, OPT_CUDA_API_PERMITTED, &no,
				    sizeof(no)),
			  w->cuda_answer);
	}
	connect_sides();
	if (posix_memalign((void **)&a_buf, 4096, LEN) || posix_memalign((void **)&b_buf, 4096, LEN))
		exit(1);

	/* FI_MR_ENDPOINT: a registration reaches the wire only bound and enabled */
	if (w->mr_required & FI_MR_ENDPOINT) {
		struct fid_mr *mr = NULL;

		MUST(fi_mr_reg(A.domain, a_buf, LEN, FI_SEND, 0, 7, 0, &mr, NULL));
		CHECK(fi_mr_key(mr) == FI_KEY_NOTAVAIL);
		CHECK_RET(fi_mr_enable(mr), -FI_EINVAL);
		CHECK(rule_logged("mr-endpoint-unbound") == 1);
		CHECK_RET(fi_send(A.ep, a_buf, 64, fi_mr_desc(mr), A.peer, &ctx[0]), -FI_EINVAL);
		CHECK(rule_logged("mr-endpoint-not-enabled") == 1);
		MUST(fi_mr_bind(mr, &A.ep->fid, 0));
		MUST(fi_mr_enable(mr));
		CHECK(fi_mr_key(mr) != FI_KEY_NOTAVAIL);
		MUST(fi_close(&mr->fid));
	}
	struct fid_mr *a_mr = profile_reg(&A, a_buf, LEN, FI_SEND | FI_RECV | FI_READ | FI_WRITE, 11);
	struct fid_mr *b_mr = profile_reg(&B, b_buf, LEN,
					  FI_SEND | FI_RECV | FI_REMOTE_READ | FI_REMOTE_WRITE, 12);
	void *ad = fi_mr_desc(a_mr), *bd = fi_mr_desc(b_mr);
	uint64_t bkey = fi_mr_key(b_mr);

	if (info->domain_attr->mr_mode & FI_MR_PROV_KEY) {
		/* the provider's keys: not the ones asked for, of its width, distinct */
		CHECK(bkey != 12 && fi_mr_key(a_mr) != 11 && bkey != fi_mr_key(a_mr) && bkey);
		if (w->key_size == 4)
			CHECK(bkey <= UINT32_MAX);
	} else {
		CHECK(bkey == 12);
	}

	/* a message, with the context words the provider owns */
	fill(a_buf, 4096, 1, 0);
	zero(b_buf, 4096, 0);
	memset(&ctx[0], 0, sizeof(ctx[0]));
	POST(fi_recv(B.ep, b_buf, 4096, bd, B.peer, &ctx[0]));
	if (w->ctx_bytes) {
		static const struct fi_context2 zero_ctx;

		CHECK(memcmp(&ctx[0], &zero_ctx, w->ctx_bytes) != 0);
	}
	POST(fi_send(A.ep, a_buf, 4096, ad, A.peer, &ctx[1]));
	c = wait_comp(&B, &ctx[0]);
	CHECK(c.len == 4096);
	wait_comp(&A, &ctx[1]);
	verify(b_buf, 4096, 1, 0, 0, "send/recv");

	/* FI_MR_LOCAL: a send without its desc */
	if (info->domain_attr->mr_mode & FI_MR_LOCAL) {
		CHECK_RET(fi_send(A.ep, a_buf, 64, NULL, A.peer, &ctx[1]), -FI_EINVAL);
		CHECK(rule_logged("mr-local") == 1);
	}
	/* injects up to inject_size */
	fill(a_buf, w->inject, 2, 0);
	POST(fi_recv(B.ep, b_buf, 4096, bd, B.peer, &ctx[0]));
	POST(fi_inject(A.ep, a_buf, w->inject, A.peer));
	c = wait_comp(&B, &ctx[0]);
	CHECK(c.len == w->inject);
	verify(b_buf, w->inject, 2, 0, 0, "inject");
	CHECK_RET(fi_inject(A.ep, a_buf, w->inject + 1, A.peer), -FI_EINVAL);
	CHECK(rule_logged("inject-size") >= 1);
	/* sends up to the message size */
	if (w->send_max && w->send_max < LEN) {
		CHECK_RET(fi_send(A.ep, a_buf, w->send_max + 1, ad, A.peer, &ctx[1]), -FI_EINVAL);
		CHECK(rule_logged("msg-size") == 1);
	}
	/* iov_limit */
	if (w->iov_limit < 4) {
		struct iovec iov[4];
		void *descs[4] = { ad, ad, ad, ad };

		for (i = 0; i < 4; i++)
			iov[i] = (struct iovec){ a_buf + 64 * i, 64 };
		CHECK_RET(fi_sendv(A.ep, iov, descs, w->iov_limit + 1, A.peer, &ctx[1]), -FI_EINVAL);
		CHECK(rule_logged("iov-limit") == 1);
	}
	/* tags: none at all, or no wider than the format */
	if (!w->tag_bits) {
		CHECK_RET(fi_tsend(A.ep, a_buf, 64, ad, A.peer, 1, &ctx[1]), -FI_ENOSYS);
		CHECK(rule_logged("no-tags") == 1);
	} else {
		uint64_t tag = w->tag_bits < 64 ? (1ULL << (w->tag_bits - 1)) | 5 : 5;

		fill(a_buf, 256, 3, 0);
		POST(fi_trecv(B.ep, b_buf, 256, bd, B.peer, tag, 0, &ctx[0]));
		POST(fi_tsend(A.ep, a_buf, 256, ad, A.peer, tag, &ctx[1]));
		c = wait_comp(&B, &ctx[0]);
		CHECK(c.len == 256 && c.tag == tag);
		wait_comp(&A, &ctx[1]);
		verify(b_buf, 256, 3, 0, 0, "tsend/trecv");
		if (w->tag_bits < 64) {
			CHECK_RET(fi_tsend(A.ep, a_buf, 64, ad, A.peer, 1ULL << w->tag_bits, &ctx[1]),
				  -FI_EINVAL);
			CHECK(rule_logged("tag-width") == 1);
		}
	}

	/* queue depths: a post beyond size answers -FI_EAGAIN until the consumer
	 * reads completions */
	{
		size_t depth = info->rx_attr->size, sent = 0;
		struct fi_context2 *q = calloc(2 * depth + 4, sizeof(*q));
		ssize_t r = 0;

		CHECK(q && depth && info->tx_attr->size == depth);
		for (i = 0; i < depth; i++) {
			r = fi_recv(B.ep, b_buf + (i % 256) * 64, 64, bd, B.peer, &q[i]);
			if (r)
				break;
		}
		CHECK(i == depth && !r);
		CHECK_RET(fi_recv(B.ep, b_buf, 64, bd, B.peer, &q[depth]), -FI_EAGAIN);
		CHECK(B.ep->ops->rx_size_left(B.ep) == 0);
		/* sends without reading A's CQ: the depth's worth go out */
		fill(a_buf, 64, 6, 0);
		while (sent <= depth) {
			r = fi_send(A.ep, a_buf, 64, ad, A.peer, &q[depth + 1 + sent]);
			if (r)
				break;
			sent++;
		}
		printf("queues: depth %zu, %zu sends posted before %s\n", depth, sent,
		       fi_strerror((int)-r));
		CHECK(r == -FI_EAGAIN && sent == depth);
		CHECK(A.ep->ops->tx_size_left(A.ep) == 0);
		/* the receives and sends complete; read, there is room again */
		drain((int)sent, (int)sent);
		CHECK(B.ep->ops->rx_size_left(B.ep) == (ssize_t)depth);
		CHECK(A.ep->ops->tx_size_left(A.ep) == (ssize_t)depth);
		POST(fi_recv(B.ep, b_buf, 64, bd, B.peer, &q[0]));
		POST(fi_send(A.ep, a_buf, 64, ad, A.peer, &q[1]));
		wait_comp(&B, &q[0]);
		wait_comp(&A, &q[1]);
		free(q);
	}

	/* message order: on a profile without FI_ORDER_SAS two sends may arrive
	 * the other way round (and tagged receives still match by tag); never on
	 * one with it */
	{
		int unordered = !strcmp(w->name, "efa-direct") || !strcmp(w->name, "opx");
		int swapped = 0, tries = 200;

		CHECK(!!(info->tx_attr->msg_order & FI_ORDER_SAS) == !unordered);
		for (int t = 0; t < tries; t++) {
			a_buf[0] = 1;
			a_buf[64] = 2;
			b_buf[0] = b_buf[64] = 0;
			POST(fi_recv(B.ep, b_buf, 64, bd, B.peer, &ctx[3]));
			POST(fi_recv(B.ep, b_buf + 64, 64, bd, B.peer, &ctx[4]));
			POST(fi_send(A.ep, a_buf, 64, ad, A.peer, &ctx[5]));
			POST(fi_send(A.ep, a_buf + 64, 64, ad, A.peer, &ctx[6]));
			wait_comp(&B, &ctx[3]);
			wait_comp(&B, &ctx[4]);
			wait_comp(&A, &ctx[5]);
			wait_comp(&A, &ctx[6]);
			CHECK((b_buf[0] == 1 && b_buf[64] == 2) || (b_buf[0] == 2 && b_buf[64] == 1));
			swapped += b_buf[0] == 2;
			if (w->tag_bits) {
				/* by tag, whatever the order */
				b_buf[0] = b_buf[64] = 0;
				POST(fi_trecv(B.ep, b_buf, 64, bd, B.peer, 1, 0, &ctx[3]));
				POST(fi_trecv(B.ep, b_buf + 64, 64, bd, B.peer, 2, 0, &ctx[4]));
				POST(fi_tsend(A.ep, a_buf, 64, ad, A.peer, 1, &ctx[5]));
				POST(fi_tsend(A.ep, a_buf + 64, 64, ad, A.peer, 2, &ctx[6]));
				wait_comp(&B, &ctx[3]);
				wait_comp(&B, &ctx[4]);
				wait_comp(&A, &ctx[5]);
				wait_comp(&A, &ctx[6]);
				CHECK(b_buf[0] == 1 && b_buf[64] == 2);
			}
		}
		printf("order: %d of %d message pairs arrived swapped\n", swapped, tries);
		if (unordered && getenv("TESTHMEM_REORDER") && !strcmp(getenv("TESTHMEM_REORDER"), "0"))
			CHECK(swapped == 0);
		else if (unordered)
			CHECK(swapped > 0);
		else
			CHECK(swapped == 0);
	}

	/* RMA write with CQ data: only cq_data bytes of it arrive, with the length */
	uint64_t off = 8192, raddr = (info->domain_attr->mr_mode & FI_MR_VIRT_ADDR)
					     ? (uint64_t)(uintptr_t)(b_buf + off)
					     : off;
	uint64_t data = 0x1122334455667788ULL;
	uint64_t want_data = w->cq_data >= 8 ? data : data & ((1ULL << (8 * w->cq_data)) - 1);
	size_t wlen = 65536;

	fill(a_buf, wlen, 4, 0);
	zero(b_buf + off, wlen, 0);
	if (w->writedata_env) {
		unsetenv("FI_CXI_ENABLE_WRITEDATA");
		CHECK_RET(fi_writedata(A.ep, a_buf, wlen, ad, data, A.peer, raddr, bkey, &ctx[1]),
			  -FI_ENOSYS);
		CHECK(rule_logged("writedata-disabled") == 1);
		setenv("FI_CXI_ENABLE_WRITEDATA", "1", 1);
	}
	if (rx_cq_data) {
		/* FI_RX_CQ_DATA: the write's completion takes a posted receive */
		POST(fi_recv(B.ep, b_buf, 64, bd, B.peer, &ctx[3]));
		POST(fi_writedata(A.ep, a_buf, wlen, ad, data, A.peer, raddr, bkey, &ctx[1]));
		wait_comp(&A, &ctx[1]);
		c = wait_comp(&B, &ctx[3]);
		CHECK((c.flags & (FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA)) ==
		      (FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA));
		CHECK(!(c.flags & FI_RECV));
		CHECK(c.len == wlen && c.data == want_data);
		verify(b_buf + off, wlen, 4, 0, 0, "writedata into a receive");
		/* none posted: it waits (RNR), and completes once one is */
		zero(b_buf + off, wlen, 0);
		POST(fi_writedata(A.ep, a_buf, wlen, ad, data + 1, A.peer, raddr, bkey, &ctx[1]));
		wait_comp(&A, &ctx[1]);
		settle();
		for (i = 0; i < (size_t)pend_b.n; i++)
			CHECK(!(pend_b.c[i].flags & FI_REMOTE_CQ_DATA));
		POST(fi_recv(B.ep, b_buf, 64, bd, B.peer, &ctx[4]));
		c = wait_comp(&B, &ctx[4]);
		CHECK((c.flags & FI_REMOTE_WRITE) && c.len == wlen && c.data == want_data + 1);
		verify(b_buf + off, wlen, 4, 0, 0, "writedata waiting for a receive");
		/* a write and a message take one receive each; efa-direct
		 * promises no order between them (shm 2.x delivers the
		 * message first at times) */
		POST(fi_recv(B.ep, b_buf, 64, bd, B.peer, &ctx[5]));
		POST(fi_recv(B.ep, b_buf + 64, 64, bd, B.peer, &ctx[6]));
		POST(fi_writedata(A.ep, a_buf, wlen, ad, data, A.peer, raddr, bkey, &ctx[1]));
		POST(fi_send(A.ep, a_buf, 64, ad, A.peer, &ctx[2]));
		wait_comp(&A, &ctx[1]);
		wait_comp(&A, &ctx[2]);
		struct comp c5 = wait_comp(&B, &ctx[5]);
		struct comp c6 = wait_comp(&B, &ctx[6]);
		int writes = 0, msgs = 0;
		for (int k = 0; k < 2; k++) {
			const struct comp *e = k ? &c6 : &c5;
			writes += (e->flags & FI_REMOTE_WRITE) && e->len == wlen;
			msgs += (e->flags & FI_RECV) && !(e->flags & FI_REMOTE_WRITE) && e->len == 64;
		}
		CHECK(writes == 1 && msgs == 1);
		/* the same for an inject */
		POST(fi_recv(B.ep, b_buf, 64, bd, B.peer, &ctx[3]));
		POST(fi_inject_writedata(A.ep, a_buf, 8, data, A.peer, raddr, bkey));
		c = wait_comp(&B, &ctx[3]);
		CHECK((c.flags & FI_REMOTE_WRITE) && c.len == 8 && c.data == want_data);
	} else {
	POST(fi_writedata(A.ep, a_buf, wlen, ad, data, A.peer, raddr, bkey, &ctx[1]));
	wait_comp(&A, &ctx[1]);
	c = wait_remote_data(); /* the target's completion */
	CHECK(c.ctx == NULL); /* it took no receive: no context */
	CHECK(c.data == want_data);
	if (w->cq_data < 8)
		CHECK(c.len == wlen); /* the size is summed from the lengths */
	verify(b_buf + off, wlen, 4, 0, 0, "writedata");
	/* no context either where the base's command slot held something
	 * before (shm reads a write's context from a field of its command that
	 * it never sets: a message's (one slot) and an earlier write's second
	 * slot leave 1 there) */
	int stale = 0;

	for (int round = 0; round < 1500; round++) {
		POST(fi_recv(B.ep, b_buf, 64, bd, B.peer, &ctx[3]));
		POST(fi_send(A.ep, a_buf, 64, ad, A.peer, &ctx[2]));
		wait_comp(&B, &ctx[3]);
		wait_comp(&A, &ctx[2]);
		POST(fi_writedata(A.ep, a_buf, 64, ad, data, A.peer, raddr, bkey, &ctx[1]));
		wait_comp(&A, &ctx[1]);
		c = wait_remote_data();
		stale += c.ctx != NULL;
	}
	printf("remote writes: %d of 1500 with a context\n", stale);
	CHECK(stale == 0);
	}

	/* the other kind of address (an offset where VAs are due, a VA where
	 * offsets are) lands in no registration */
	{
		uint64_t wrong = (info->domain_attr->mr_mode & FI_MR_VIRT_ADDR)
					 ? off
					 : (uint64_t)(uintptr_t)(b_buf + off);
		if (info->domain_attr->mr_mode & FI_MR_PROV_KEY) {
			/* a remote access error at the initiator */
			POST(fi_write(A.ep, a_buf, 64, ad, A.peer, wrong, bkey, &ctx[2]));
			expect_errors = 1;
			c = wait_comp_err(&A, &ctx[2], FI_EACCES);
			expect_errors = 0;
			CHECK(rule_logged("remote-range") == 1);
			/* and a key that names nothing */
			POST(fi_write(A.ep, a_buf, 64, ad, A.peer, raddr, bkey ^ 0x5a5a, &ctx[2]));
			expect_errors = 1;
			c = wait_comp_err(&A, &ctx[2], FI_EACCES);
			expect_errors = 0;
			CHECK(rule_logged("remote-key") == 1);
		}
		/* with the consumer's keys the target refuses it (the base's own
		 * check): nothing lands */
	}

	printf("rules logged: %d\n", log_count("error rule="));
	MUST(fi_close(&a_mr->fid));
	MUST(fi_close(&b_mr->fid));
	close_side(&A);
	close_side(&B);
	close_fabric();
	free(a_buf);
	free(b_buf);
	return failures ? 1 : 0;
}

/* A region of this process's pid that a dead process of the same pid left
 * under /dev/shm (pids wrap) must not stop an endpoint from enabling: a NIC
 * has no such state. The stale region is a copy of a live one of ours, at the
 * next endpoint's name, dated before this process started. shm bases only. */
static int test_stale(void)
{
	struct side a = { 0 }, b = { 0 };
	char name[256], path[300], *copy;
	size_t len = sizeof(name) - 1;
	struct timespec old[2];
	struct stat st;
	FILE *f;

	if (strcmp(base_name(), "shm") || !base_available()) {
		printf("SKIP: needs the shm base (TESTHMEM_BASE=shm), not \"%s\"\n", base_name());
		return SKIP;
	}
	open_fabric(FI_TAGGED | FI_MSG);
	open_side(&a, FI_CQ_FORMAT_TAGGED);
	MUST(fi_enable(a.ep));
	memset(name, 0, sizeof(name));
	MUST(fi_getname(&a.ep->fid, name, &len));
	const char *file = strstr(name, "://") ? strstr(name, "://") + 3 : name;
	snprintf(path, sizeof(path), "/dev/shm/%s", file);
	CHECK_RET(stat(path, &st), 0);
	copy = malloc((size_t)st.st_size);
	f = fopen(path, "rb");
	CHECK(copy && f && fread(copy, 1, (size_t)st.st_size, f) == (size_t)st.st_size);
	if (f)
		fclose(f);

	/* the next endpoint's name, taken by a "dead" region owned by our pid */
	open_side(&b, FI_CQ_FORMAT_TAGGED);
	len = sizeof(name) - 1;
	memset(name, 0, sizeof(name));
	MUST(fi_getname(&b.ep->fid, name, &len));
	file = strstr(name, "://") ? strstr(name, "://") + 3 : name;
	snprintf(path, sizeof(path), "/dev/shm/%s", file);
	f = fopen(path, "wb");
	CHECK(f && copy && fwrite(copy, 1, (size_t)st.st_size, f) == (size_t)st.st_size);
	if (f)
		fclose(f);
	clock_gettime(CLOCK_REALTIME, &old[0]);
	old[0].tv_sec -= 3600;
	old[1] = old[0];
	CHECK_RET(utimensat(AT_FDCWD, path, old, 0), 0);

	CHECK_RET(fi_enable(b.ep), 0);
	CHECK_RET(stat(path, &st), 0);
	CHECK(st.st_mtim.tv_sec > old[0].tv_sec + 60); /* b's own region now */
	printf("stale region %s of this pid: enabled over it\n", file);
	free(copy);
	close_side(&b);
	close_side(&a);
	close_fabric();
	return 0;
}

/* TESTHMEM_BUSY_WRITES=3: every third write that passes the rules is refused
 * with -FI_EAGAIN, posts nothing and completes nothing; reads do not count;
 * the refused write posted again goes. */
static int test_busy(void)
{
	enum { N = 3, WRITES = 6, CHUNK = 4096, LEN = WRITES * CHUNK };
	struct fi_context2 ctx[WRITES + 2];
	char *a_buf, *b_buf, *back;
	int k;

	if (!base_available()) {
		printf("SKIP: base provider \"%s\" offers nothing here\n", base_name());
		return SKIP;
	}
	setenv("TESTHMEM_BUSY_WRITES", "3", 1);
	open_fabric(FI_MSG | FI_RMA);
	open_side(&A, FI_CQ_FORMAT_DATA);
	open_side(&B, FI_CQ_FORMAT_DATA);
	connect_sides();
	if (posix_memalign((void **)&a_buf, 4096, LEN) || posix_memalign((void **)&b_buf, 4096, LEN) ||
	    posix_memalign((void **)&back, 4096, CHUNK))
		exit(1);
	struct fid_mr *am = profile_reg(&A, a_buf, LEN, FI_SEND | FI_WRITE | FI_READ, 21);
	struct fid_mr *km = profile_reg(&A, back, CHUNK, FI_READ, 23);
	struct fid_mr *bm = profile_reg(&B, b_buf, LEN, FI_RECV | FI_REMOTE_WRITE | FI_REMOTE_READ, 22);
	uint64_t bkey = fi_mr_key(bm);

	/* a message first: the base connects (rxm refuses with -FI_EAGAIN
	 * until then), so the writes below meet only the rule */
	POST(fi_recv(B.ep, b_buf, 64, fi_mr_desc(bm), B.peer, &ctx[WRITES + 1]));
	POST(fi_send(A.ep, a_buf, 64, fi_mr_desc(am), A.peer, &ctx[WRITES]));
	wait_comp(&B, &ctx[WRITES + 1]);
	wait_comp(&A, &ctx[WRITES]);
	memset(b_buf, 0, LEN);
	for (k = 0; k < WRITES; k++)
		fill(a_buf + k * CHUNK, CHUNK, 40 + k, 0);
	for (k = 0; k < WRITES; k++) {
		ssize_t r = fi_write(A.ep, a_buf + k * CHUNK, CHUNK, fi_mr_desc(am), A.peer,
				     rma_addr(b_buf + k * CHUNK, k * CHUNK), bkey, &ctx[k]);

		if (k % N == N - 1) {
			CHECK_RET(r, -FI_EAGAIN);
			continue;
		}
		CHECK_RET(r, 0);
		if (!r)
			wait_comp(&A, &ctx[k]);
		if (k == 0) { /* a read between: not counted */
			POST(fi_read(A.ep, back, CHUNK, fi_mr_desc(km), A.peer, rma_addr(b_buf, 0),
				     bkey, &ctx[WRITES]));
			wait_comp(&A, &ctx[WRITES]);
			verify(back, CHUNK, 40, 0, 0, "read between writes");
		}
	}
	settle();
	CHECK(pend_a.n == 0); /* no completion for a refused write */
	for (k = 0; k < WRITES; k++) {
		if (k % N != N - 1) {
			verify(b_buf + k * CHUNK, CHUNK, 40 + k, 0, 0, "write");
			continue;
		}
		size_t nonzero = 0;
		for (int i = 0; i < CHUNK; i++)
			nonzero += b_buf[k * CHUNK + i] != 0;
		CHECK(nonzero == 0); /* a refused write lands nowhere */
		/* posted again (the next in the count: it goes) */
		CHECK_RET(fi_write(A.ep, a_buf + k * CHUNK, CHUNK, fi_mr_desc(am), A.peer,
				   rma_addr(b_buf + k * CHUNK, k * CHUNK), bkey, &ctx[k]),
			  0);
		wait_comp(&A, &ctx[k]);
		verify(b_buf + k * CHUNK, CHUNK, 40 + k, 0, 0, "write posted again");
	}
	printf("busy writes: every %dth of %d refused with -FI_EAGAIN, posted again\n", N, WRITES);
	MUST(fi_close(&am->fid));
	MUST(fi_close(&km->fid));
	MUST(fi_close(&bm->fid));
	close_side(&B);
	close_side(&A);
	close_fabric();
	free(a_buf);
	free(b_buf);
	free(back);
	unsetenv("TESTHMEM_BUSY_WRITES");
	return 0;
}

int main(int argc, char **argv)
{
	const char *what = argc > 1 ? argv[1] : "";
	int ret;

	log_path = getenv("TESTHMEM_LOG");
	if (!log_path || !*log_path) {
		fprintf(stderr, "TESTHMEM_LOG must name a file the test may overwrite\n");
		return 2;
	}
	if (!getenv("FI_PROVIDER_PATH"))
		fprintf(stderr, "warning: FI_PROVIDER_PATH unset: testhmem will not load\n");
	if (!strcmp(what, "getinfo"))
		ret = test_getinfo();
	else if (!strcmp(what, "setopt"))
		ret = test_setopt();
	else if (!strcmp(what, "xfer"))
		ret = test_xfer();
	else if (!strcmp(what, "multidev"))
		ret = test_multidev();
	else if (!strcmp(what, "copyerr"))
		ret = test_copyerr();
	else if (!strcmp(what, "profile"))
		ret = test_profile();
	else if (!strcmp(what, "stale"))
		ret = test_stale();
	else if (!strcmp(what, "busy"))
		ret = test_busy();
	else {
		fprintf(stderr, "usage: %s getinfo|setopt|xfer|multidev|copyerr|profile|stale|busy\n",
			argv[0]);
		return 2;
	}
	if (ret == SKIP)
		return SKIP;
	printf("testhmem %s (base %s, mode %s): %s (%d failures)\n", what, base_name(),
	       cuda_mode() ? "cuda" : "host", failures ? "FAIL" : "PASS", failures);
	return failures ? 1 : 0;
}
