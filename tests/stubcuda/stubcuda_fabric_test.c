/*
 * stubcuda-libfabric: libfabric's own CUDA support, started under the stub runtime and
 * driver on a machine without a GPU, with real providers.
 *
 * Built against the system's libfabric headers (1.17: FI_OPT_CUDA_API_PERMITTED is
 * option number 10 there) and run on whatever libfabric.so.1 LD_LIBRARY_PATH gives,
 * e.g. <stubcuda dir>:<libfabric 2.1 built --with-cuda --enable-cuda-dlopen>/lib.
 *
 *   1. prints what fi_setopt(FI_OPT_CUDA_API_PERMITTED, false) answers before fi_enable
 *      on shm (FI_HMEM), tcp;ofi_rxm and native tcp (FI_TCP_IFACE=lo), and fi_enable;
 *   2. finds out from the stubs' call counts whether libfabric's CUDA support started:
 *        old     libfabric older than 1.18
 *        nocuda  it never loaded libcudart.so (built without CUDA)
 *        nodev   it loaded the runtime, asked cudaGetDeviceCount, and let go of it
 *        broken  it loaded the runtime but never asked for devices (a symbol missing
 *                from the stubs: FI_LOG_LEVEL=warn names it)
 *        active  CUDA support is on
 *   3. active: registers stub device memory (cudaMalloc) with fi_mr_regattr iface
 *      FI_HMEM_CUDA and moves buffers between two shm endpoints of this process
 *      (inline, inject, SAR sizes, both ways; again through FI_HMEM_DEVICE_ONLY MRs),
 *      checking every byte and that the stub runtime's cudaMemcpy did the copies. nodev: checks fi_mr_regattr FI_HMEM_CUDA fails with -FI_ENOSYS.
 *
 * Usage: stubcuda_fabric_test [--expect=OUTCOME[,OUTCOME...]] [--libfabric-dir=DIR]
 * Exit 0 when the outcome is an expected one (default active) and its checks pass;
 * 77 with "SKIP: reason" when active was expected but libfabric is old or has no CUDA
 * support, or DIR does not exist; 1 otherwise.
 */
#include "stubcuda.h"

#include <dlfcn.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* FI_OPT_CUDA_API_PERMITTED (libfabric 1.18): not in the 1.17 headers */
#define OPT_CUDA_API_PERMITTED 10
#define API_VERSION FI_VERSION(1, 17)

typedef int cudaError_t;
enum { H2D = 1, D2H = 2 };

static cudaError_t (*r_Malloc)(void **, size_t);
static cudaError_t (*r_Free)(void *);
static cudaError_t (*r_Memcpy)(void *, const void *, size_t, int);
static stubcuda_rt_call_count_fn rt_calls;
static stubcuda_call_count_fn drv_calls;

static int failures;

#define FAIL(...)                                                                  \
	do {                                                                       \
		fprintf(stderr, "FAIL: " __VA_ARGS__);                             \
		fputc('\n', stderr);                                               \
		failures++;                                                        \
	} while (0)

/* ---- one endpoint: fabric, domain, AV, CQ, endpoint ---- */

struct node {
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_av *av;
	struct fid_cq *cq;
	struct fid_ep *ep;
	int setopt_ret; /* fi_setopt(CUDA_API_PERMITTED = false) before fi_enable */
	int enable_ret;
};

static void node_close(struct node *n)
{
	if (n->ep)
		fi_close(&n->ep->fid);
	if (n->av)
		fi_close(&n->av->fid);
	if (n->cq)
		fi_close(&n->cq->fid);
	if (n->domain)
		fi_close(&n->domain->fid);
	if (n->fabric)
		fi_close(&n->fabric->fid);
	memset(n, 0, sizeof(*n));
}

/* Opens everything on `info`, sharing fabric/domain with `share` if given. Returns 0
 * or the first failing call's answer (node->setopt_ret never fails it). */
static int node_open(struct fi_info *info, struct node *n, struct node *share)
{
	struct fi_av_attr av_attr = { .type = FI_AV_MAP };
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_CONTEXT, .size = 128 };
	bool no = false;
	int ret;

	memset(n, 0, sizeof(*n));
	if (!share) {
		ret = fi_fabric(info->fabric_attr, &n->fabric, NULL);
		if (ret)
			return ret;
		ret = fi_domain(n->fabric, info, &n->domain, NULL);
		if (ret)
			return ret;
	}
	ret = fi_av_open(share ? share->domain : n->domain, &av_attr, &n->av, NULL);
	if (ret)
		return ret;
	ret = fi_cq_open(share ? share->domain : n->domain, &cq_attr, &n->cq, NULL);
	if (ret)
		return ret;
	ret = fi_endpoint(share ? share->domain : n->domain, info, &n->ep, NULL);
	if (ret)
		return ret;
	ret = fi_ep_bind(n->ep, &n->av->fid, 0);
	if (ret)
		return ret;
	ret = fi_ep_bind(n->ep, &n->cq->fid, FI_TRANSMIT | FI_RECV);
	if (ret)
		return ret;
	n->setopt_ret = fi_setopt(&n->ep->fid, FI_OPT_ENDPOINT, OPT_CUDA_API_PERMITTED, &no,
				  sizeof(no));
	n->enable_ret = fi_enable(n->ep);
	return n->enable_ret;
}

static struct fi_info *get_info(const char *prov, uint64_t caps)
{
	struct fi_info *hints = fi_allocinfo(), *info = NULL, *cur;
	int ret;

	if (!hints)
		return NULL;
	hints->caps = caps;
	hints->ep_attr->type = FI_EP_RDM;
	hints->mode = FI_CONTEXT | FI_CONTEXT2;
	hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_HMEM | FI_MR_VIRT_ADDR |
				      FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	hints->fabric_attr->prov_name = strdup(prov);
	ret = fi_getinfo(API_VERSION, NULL, NULL, 0, hints, &info);
	fi_freeinfo(hints);
	if (ret) {
		printf("  fi_getinfo(%s): %d (%s)\n", prov, ret, fi_strerror(-ret));
		return NULL;
	}
	/* the exact provider: "tcp" must not be "tcp;ofi_rxm" */
	for (cur = info; cur; cur = cur->next) {
		if (!strcmp(cur->fabric_attr->prov_name, prov)) {
			struct fi_info *one = fi_dupinfo(cur);

			fi_freeinfo(info);
			return one;
		}
	}
	printf("  fi_getinfo(%s): no info of that exact provider\n", prov);
	fi_freeinfo(info);
	return NULL;
}

static const char *ret_name(int ret)
{
	switch (ret) {
	case 0:
		return "FI_SUCCESS";
	case -FI_EINVAL:
		return "-FI_EINVAL";
	case -FI_EOPNOTSUPP:
		return "-FI_EOPNOTSUPP";
	case -FI_ENOPROTOOPT:
		return "-FI_ENOPROTOOPT";
	case -FI_ENOSYS:
		return "-FI_ENOSYS";
	default:
		return "?";
	}
}

struct probe {
	const char *prov;
	uint64_t caps;
	int setopt_ret;
	bool opened;
};

static void probe(struct probe *p)
{
	struct fi_info *info = get_info(p->prov, p->caps);
	struct node n;
	int ret;

	if (!info) {
		printf("setopt probe %-12s: provider not available\n", p->prov);
		return;
	}
	ret = node_open(info, &n, NULL);
	if (n.ep) {
		p->opened = true;
		p->setopt_ret = n.setopt_ret;
		printf("setopt probe %-12s: fi_setopt(FI_OPT_CUDA_API_PERMITTED=false) = %d "
		       "%s (%s); fi_enable = %d\n",
		       p->prov, n.setopt_ret, ret_name(n.setopt_ret),
		       fi_strerror(-n.setopt_ret), n.enable_ret);
	} else {
		printf("setopt probe %-12s: endpoint setup failed: %d (%s)\n", p->prov, ret,
		       fi_strerror(-ret));
	}
	node_close(&n);
	fi_freeinfo(info);
}

/* ---- the shm transfer ---- */

static int wait_cq(struct node *a, struct node *b, void *ctx_a, void *ctx_b)
{
	struct timespec t0, t;
	bool got_a = !ctx_a, got_b = !ctx_b;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (!got_a || !got_b) {
		struct fi_cq_entry e;
		struct node *n[2] = { a, b };
		int i;

		for (i = 0; i < 2; i++) {
			ssize_t r = fi_cq_read(n[i]->cq, &e, 1);

			if (r == 1) {
				if (e.op_context == ctx_a)
					got_a = true;
				else if (e.op_context == ctx_b)
					got_b = true;
			} else if (r == -FI_EAVAIL) {
				struct fi_cq_err_entry err = { 0 };

				fi_cq_readerr(n[i]->cq, &err, 0);
				FAIL("completion error %d (%s), prov_errno %d", err.err,
				     fi_strerror(err.err), err.prov_errno);
				return -1;
			} else if (r != -FI_EAGAIN) {
				FAIL("fi_cq_read: %zd", r);
				return -1;
			}
		}
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 20) {
			FAIL("no completion within 20 s");
			return -1;
		}
	}
	return 0;
}

static int reg_cuda(struct fid_domain *domain, void *buf, size_t len, uint64_t flags,
		    uint64_t key, struct fid_mr **mr)
{
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	struct fi_mr_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.mr_iov = &iov;
	attr.iov_count = 1;
	attr.access = FI_SEND | FI_RECV;
	attr.requested_key = key;
	attr.iface = FI_HMEM_CUDA;
	attr.device.cuda = 0;
	return fi_mr_regattr(domain, &attr, flags, mr);
}

static void fill(unsigned char *p, size_t n, unsigned seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (unsigned char)(seed * 31 + i * 7 + (i >> 8));
}

static size_t first_diff(const unsigned char *p, size_t n, unsigned seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (p[i] != (unsigned char)(seed * 31 + i * 7 + (i >> 8)))
			return i;
	return n;
}

#define MAX_LEN (1u << 20)

/* Driver and runtime calls worth showing per transfer. */
static const char *const shown_calls[] = {
	"cudaMemcpy",		 "cudaIpcGetMemHandle",	   "cudaDeviceSynchronize",
	"cudart:cuMemcpyHtoD_v2", "cudart:cuMemcpyDtoH_v2", "cuPointerGetAttribute",
	"cuPointerGetAttributes", "cuMemGetAddressRange_v2",
};
#define NSHOWN (sizeof(shown_calls) / sizeof(shown_calls[0]))

static unsigned long calls_of(const char *name)
{
	return !strncmp(name, "cuda", 4) && strncmp(name, "cudart:", 7) ? rt_calls(name)
									 : drv_calls(name);
}

static void transfer(struct node *a, struct node *b, fi_addr_t to_b, void *src, void *dst,
		     void *desc_src, void *desc_dst, size_t len, unsigned seed,
		     const char *what, unsigned char *host)
{
	struct fi_context2 ctx_s, ctx_r;
	unsigned long before[NSHOWN];
	size_t i, bad;
	ssize_t r;

	fill(host, len, seed);
	if (r_Memcpy(src, host, len, H2D) || r_Memcpy(dst, host + len, len, H2D)) {
		FAIL("%s: cudaMemcpy to stage the buffers failed", what);
		return;
	}
	for (i = 0; i < NSHOWN; i++)
		before[i] = calls_of(shown_calls[i]);

	do {
		r = fi_recv(b->ep, dst, len, desc_dst, FI_ADDR_UNSPEC, &ctx_r);
	} while (r == -FI_EAGAIN);
	if (r) {
		FAIL("%s: fi_recv: %zd (%s)", what, r, fi_strerror((int)-r));
		return;
	}
	for (;;) {
		struct fi_cq_entry e;

		r = fi_send(a->ep, src, len, desc_src, to_b, &ctx_s);
		if (r != -FI_EAGAIN)
			break;
		(void)fi_cq_read(a->cq, &e, 0); /* progress */
		(void)fi_cq_read(b->cq, &e, 0);
	}
	if (r) {
		FAIL("%s: fi_send: %zd (%s)", what, r, fi_strerror((int)-r));
		return;
	}
	if (wait_cq(a, b, &ctx_s, &ctx_r))
		return;

	printf("shm %-24s %8zu bytes:", what, len);
	for (i = 0; i < NSHOWN; i++) {
		unsigned long d = calls_of(shown_calls[i]) - before[i];

		if (d)
			printf(" %s=%lu", shown_calls[i], d);
	}
	if (calls_of("cudaMemcpy") - before[0] < 2)
		FAIL("%s: the stub runtime's cudaMemcpy was not used for both sides", what);

	memset(host + len, 0, len);
	if (r_Memcpy(host + len, dst, len, D2H)) {
		FAIL("%s: cudaMemcpy to read the result back failed", what);
		return;
	}
	bad = first_diff(host + len, len, seed);
	if (bad != len) {
		printf("\n");
		FAIL("%s: byte %zu of %zu differs", what, bad, len);
		return;
	}
	printf(" : every byte ok\n");
}

static void shm_transfers(void)
{
	struct fi_info *info = get_info("shm", FI_MSG | FI_HMEM);
	struct node a, b;
	fi_addr_t to_b = FI_ADDR_NOTAVAIL, to_a = FI_ADDR_NOTAVAIL;
	char name_a[256], name_b[256];
	size_t la = sizeof(name_a), lb = sizeof(name_b);
	struct fid_mr *mr_src = NULL, *mr_dst = NULL, *mr_src2 = NULL, *mr_dst2 = NULL;
	unsigned char *src = NULL, *dst = NULL, *host = NULL;
	static const size_t sizes[] = { 64, 3000, MAX_LEN };
	static const char *const names[] = { "inline", "inject", "SAR" };
	int ret;
	size_t i;

	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	if (!info) {
		FAIL("no shm provider with FI_HMEM");
		return;
	}
	printf("shm info: caps FI_HMEM %s, mr_mode FI_MR_HMEM %s\n",
	       info->caps & FI_HMEM ? "yes" : "no",
	       info->domain_attr->mr_mode & FI_MR_HMEM ? "yes" : "no");
	ret = node_open(info, &a, NULL);
	if (!ret)
		ret = node_open(info, &b, &a);
	if (ret) {
		FAIL("shm endpoints: %d (%s)", ret, fi_strerror(-ret));
		goto out;
	}
	printf("shm endpoints: fi_setopt(FI_OPT_CUDA_API_PERMITTED=false) = %d %s, "
	       "fi_enable = %d\n",
	       a.setopt_ret, ret_name(a.setopt_ret), a.enable_ret);
	if (fi_getname(&a.ep->fid, name_a, &la) || fi_getname(&b.ep->fid, name_b, &lb) ||
	    fi_av_insert(a.av, name_b, 1, &to_b, 0, NULL) != 1 ||
	    fi_av_insert(b.av, name_a, 1, &to_a, 0, NULL) != 1) {
		FAIL("shm addressing failed");
		goto out;
	}

	if (r_Malloc((void **)&src, MAX_LEN) || r_Malloc((void **)&dst, MAX_LEN)) {
		FAIL("cudaMalloc failed");
		goto out;
	}
	host = malloc(2 * (size_t)MAX_LEN);
	if (!host)
		goto out;
	ret = reg_cuda(a.domain, src, MAX_LEN, 0, 1, &mr_src);
	if (!ret)
		ret = reg_cuda(a.domain, dst, MAX_LEN, 0, 2, &mr_dst);
	printf("fi_mr_regattr(iface FI_HMEM_CUDA, stub device memory) = %d %s\n", ret,
	       ret_name(ret));
	if (ret) {
		FAIL("fi_mr_regattr FI_HMEM_CUDA: %d (%s)", ret, fi_strerror(-ret));
		goto out;
	}
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		transfer(&a, &b, to_b, src, dst, fi_mr_desc(mr_src), fi_mr_desc(mr_dst),
			 sizes[i], (unsigned)i + 1, names[i], host);

	/* FI_HMEM_DEVICE_ONLY: between processes shm would try CUDA IPC first (the stub
	 * refuses the handle, shm falls back to its bounce buffers); between endpoints of
	 * one process libfabric 2.1 does not (its peers are not "IPC valid"), so these
	 * take the same paths as above, through MRs with that flag */
	ret = reg_cuda(a.domain, src, MAX_LEN, FI_HMEM_DEVICE_ONLY, 3, &mr_src2);
	if (!ret)
		ret = reg_cuda(a.domain, dst, MAX_LEN, FI_HMEM_DEVICE_ONLY, 4, &mr_dst2);
	if (ret) {
		FAIL("fi_mr_regattr FI_HMEM_CUDA FI_HMEM_DEVICE_ONLY: %d (%s)", ret,
		     fi_strerror(-ret));
		goto out;
	}
	transfer(&b, &a, to_a, src, dst, fi_mr_desc(mr_src), fi_mr_desc(mr_dst), 64, 6,
		 "inline back", host);
	transfer(&a, &b, to_b, src, dst, fi_mr_desc(mr_src2), fi_mr_desc(mr_dst2), 64, 7,
		 "inline DEVICE_ONLY", host);
	transfer(&a, &b, to_b, src, dst, fi_mr_desc(mr_src2), fi_mr_desc(mr_dst2), MAX_LEN,
		 8, "SAR DEVICE_ONLY", host);
out:
	if (mr_src2)
		fi_close(&mr_src2->fid);
	if (mr_dst2)
		fi_close(&mr_dst2->fid);
	if (mr_src)
		fi_close(&mr_src->fid);
	if (mr_dst)
		fi_close(&mr_dst->fid);
	node_close(&b); /* its fabric and domain are a's */
	node_close(&a);
	if (src)
		r_Free(src);
	if (dst)
		r_Free(dst);
	free(host);
	fi_freeinfo(info);
}

/* No CUDA support (nodev): the CUDA iface is not there for registrations. */
static void check_mr_enosys(void)
{
	struct fi_info *info = get_info("shm", FI_MSG | FI_HMEM);
	static unsigned char buf[4096];
	struct fid_mr *mr = NULL;
	struct node n;
	int ret;

	if (!info) {
		FAIL("no shm provider with FI_HMEM");
		return;
	}
	ret = node_open(info, &n, NULL);
	if (!n.domain) {
		FAIL("shm domain: %d", ret);
	} else {
		ret = reg_cuda(n.domain, buf, sizeof(buf), 0, 1, &mr);
		printf("fi_mr_regattr(iface FI_HMEM_CUDA) without CUDA support = %d %s\n", ret,
		       ret_name(ret));
		if (ret != -FI_ENOSYS)
			FAIL("fi_mr_regattr FI_HMEM_CUDA: %d, want -FI_ENOSYS", ret);
		if (!ret)
			fi_close(&mr->fid);
	}
	node_close(&n);
	fi_freeinfo(info);
}

/* ---- main ---- */

/* Whether `got` is one of the comma-separated outcomes in `list`. */
static bool expected(const char *list, const char *got)
{
	size_t n = strlen(got);

	while (*list) {
		const char *end = strchr(list, ',');
		size_t len = end ? (size_t)(end - list) : strlen(list);

		if (len == n && !strncmp(list, got, n))
			return true;
		list += len + (end ? 1 : 0);
	}
	return false;
}

static const char *classify(uint32_t version)
{
	void *h;

	if (version < FI_VERSION(1, 18))
		return "old";
	if (!rt_calls("cudart_load"))
		return "nocuda";
	if (!rt_calls("cudaGetDeviceCount"))
		return "broken";
	h = dlopen("libcudart.so", RTLD_NOW | RTLD_NOLOAD);
	if (!h)
		return "nodev";
	dlclose(h);
	return "active";
}

int main(int argc, char **argv)
{
	const char *expect = "active", *dir = NULL, *got;
	struct probe probes[] = {
		{ "shm", FI_MSG | FI_HMEM, 0, false },
		{ "tcp;ofi_rxm", FI_MSG, 0, false },
		{ "tcp", FI_MSG, 0, false },
	};
	uint32_t version;
	Dl_info where;
	void *drv, *rt;
	struct stat st;
	size_t i;
	int a;

	for (a = 1; a < argc; a++) {
		if (!strncmp(argv[a], "--expect=", 9))
			expect = argv[a] + 9;
		else if (!strncmp(argv[a], "--libfabric-dir=", 16))
			dir = argv[a] + 16;
		else {
			fprintf(stderr, "usage: %s [--expect=active|nodev|nocuda|old[,...]] "
				"[--libfabric-dir=DIR]\n", argv[0]);
			return 2;
		}
	}
	if (dir && *dir && stat(dir, &st)) {
		printf("SKIP: %s does not exist (FABRIC_TEST_LIBFABRIC_CUDA_DIR: a libfabric "
		       "built with CUDA support)\n", dir);
		return 77;
	}
	setenv("FI_TCP_IFACE", "lo", 0);

	/* the stub driver, held open so that its counts outlive libfabric's dlclose */
	drv = dlopen("libcuda.so.1", RTLD_NOW);
	if (!drv || !dlsym(drv, STUBCUDA_SYM_RT_CALL_COUNT)) {
		fprintf(stderr, "FAIL: libcuda.so.1 is not the stub driver (the stubcuda "
			"folder first on LD_LIBRARY_PATH?)\n");
		return 1;
	}
	*(void **)&rt_calls = dlsym(drv, STUBCUDA_SYM_RT_CALL_COUNT);
	*(void **)&drv_calls = dlsym(drv, STUBCUDA_SYM_CALL_COUNT);

	version = fi_version();
	if (dladdr((void *)fi_getinfo, &where) && where.dli_fname)
		printf("libfabric %u.%u from %s\n", FI_MAJOR(version), FI_MINOR(version),
		       where.dli_fname);

	for (i = 0; i < sizeof(probes) / sizeof(probes[0]); i++)
		probe(&probes[i]);

	got = classify(version);
	printf("libfabric CUDA support: %s (libcudart.so loads %lu, cudaGetDeviceCount "
	       "calls %lu)\n",
	       got, rt_calls("cudart_load"), rt_calls("cudaGetDeviceCount"));

	if (!expected(expect, got)) {
		if (!strcmp(expect, "active") && !strcmp(got, "old")) {
			printf("SKIP: libfabric %u.%u is older than 1.18\n", FI_MAJOR(version),
			       FI_MINOR(version));
			return 77;
		}
		if (!strcmp(expect, "active") && !strcmp(got, "nocuda")) {
			printf("SKIP: this libfabric has no CUDA support (it never loaded "
			       "libcudart.so)\n");
			return 77;
		}
		fprintf(stderr, "FAIL: libfabric CUDA support is %s, expected %s%s\n", got,
			expect,
			!strcmp(got, "broken") ? " (FI_LOG_LEVEL=warn FI_LOG_SUBSYS=core names "
						 "the symbol it did not find)"
					       : "");
		return 1;
	}

	if (!strcmp(got, "active")) {
		/* CUDA on: shm and rxm know the option (shm refuses false: it needs
		 * CUDA calls); native tcp does not know it */
		rt = dlopen("libcudart.so", RTLD_NOW);
		if (!rt) {
			fprintf(stderr, "FAIL: dlopen(libcudart.so): %s\n", dlerror());
			return 1;
		}
		*(void **)&r_Malloc = dlsym(rt, "cudaMalloc");
		*(void **)&r_Free = dlsym(rt, "cudaFree");
		*(void **)&r_Memcpy = dlsym(rt, "cudaMemcpy");
		if (!r_Malloc || !r_Free || !r_Memcpy) {
			fprintf(stderr, "FAIL: stub runtime symbols missing\n");
			return 1;
		}
		if (probes[0].opened && probes[0].setopt_ret == -FI_EINVAL)
			FAIL("shm answered -FI_EINVAL: it thinks CUDA is not available");
		shm_transfers();
	} else if (!strcmp(got, "nodev") || !strcmp(got, "nocuda")) {
		/* CUDA off: shm and rxm answer -FI_EINVAL ("CUDA not available") */
		if (probes[0].opened && probes[0].setopt_ret != -FI_EINVAL)
			FAIL("shm setopt answered %d, want -FI_EINVAL without CUDA",
			     probes[0].setopt_ret);
		check_mr_enosys();
	}
	if (failures) {
		fprintf(stderr, "%d failure(s)\n", failures);
		return 1;
	}
	printf("PASS (%s)\n", got);
	return 0;
}
