/*
 * stubcuda-selftest: loads libcuda.so.1 the way the plugin does (dlopen by soname,
 * found through LD_LIBRARY_PATH) and checks the stub's answers.
 *
 *   stubcuda_selftest default   defaults, pointers, copies, cuGetProcAddress, log
 *   stubcuda_selftest nodev     STUBCUDA_DEVICES=0
 *   stubcuda_selftest failinit  STUBCUDA_FAIL_INIT=1
 *   stubcuda_selftest env       STUBCUDA_DRIVER_VERSION/DMABUF/DEVICES/PCI_BUS_IDS
 *
 * Exit 0 pass, 1 fail, 77 skip (the stub could not be loaded).
 */
#include "stubcuda.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;

static int failures;

#define CHECK(cond)                                                                \
	do {                                                                       \
		if (!(cond)) {                                                     \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__,     \
				__LINE__, #cond);                                  \
			failures++;                                                \
		}                                                                  \
	} while (0)

#define CHECK_RC(call, want)                                                       \
	do {                                                                       \
		CUresult rc_ = (call);                                             \
		if (rc_ != (want)) {                                               \
			fprintf(stderr, "%s:%d: %s returned %d, want %d\n",        \
				__FILE__, __LINE__, #call, rc_, (want));           \
			failures++;                                                \
		}                                                                  \
	} while (0)

static void *lib;

static void *sym(const char *name)
{
	void *p = dlsym(lib, name);

	if (!p) {
		fprintf(stderr, "missing symbol %s\n", name);
		exit(1);
	}
	return p;
}

/* driver entry points, looked up by exported name */
static CUresult (*p_cuInit)(unsigned int);
static CUresult (*p_cuDriverGetVersion)(int *);
static CUresult (*p_cuDeviceGetCount)(int *);
static CUresult (*p_cuDeviceGet)(CUdevice *, int);
static CUresult (*p_cuDeviceGetAttribute)(int *, int, CUdevice);
static CUresult (*p_cuDeviceGetName)(char *, int, CUdevice);
static CUresult (*p_cuDeviceGetPCIBusId)(char *, int, CUdevice);
static CUresult (*p_cuPointerGetAttribute)(void *, int, CUdeviceptr);
static CUresult (*p_cuFlushGPUDirectRDMAWrites)(int, int);
static CUresult (*p_cuGetErrorString)(CUresult, const char **);
static CUresult (*p_cuGetErrorName)(CUresult, const char **);
static CUresult (*p_cuCtxGetCurrent)(CUcontext *);
static CUresult (*p_cuCtxSetCurrent)(CUcontext);
static CUresult (*p_cuCtxGetDevice)(CUdevice *);
static CUresult (*p_cuCtxPushCurrent)(CUcontext);
static CUresult (*p_cuCtxPopCurrent)(CUcontext *);
static CUresult (*p_cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
static CUresult (*p_cuDevicePrimaryCtxRelease)(CUdevice);
static CUresult (*p_cuStreamCreate)(CUstream *, unsigned int);
static CUresult (*p_cuStreamDestroy)(CUstream);
static CUresult (*p_cuStreamSynchronize)(CUstream);
static CUresult (*p_cuMemcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream);
static CUresult (*p_cuMemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
static CUresult (*p_cuMemcpyDtoH)(void *, CUdeviceptr, size_t);
static CUresult (*p_cuMemcpyHtoD)(CUdeviceptr, const void *, size_t);
static CUresult (*p_cuMemAlloc)(CUdeviceptr *, size_t);
static CUresult (*p_cuMemFree)(CUdeviceptr);
static CUresult (*p_cuMemAllocHost)(void **, size_t);
static CUresult (*p_cuMemFreeHost)(void *);
static CUresult (*p_cuGetProcAddress)(const char *, void **, int, unsigned long long);
static CUresult (*p_cuGetProcAddress_v2)(const char *, void **, int, unsigned long long,
					 int *);
static stubcuda_mark_device_fn p_mark;
static stubcuda_unmark_fn p_unmark;
static stubcuda_flush_count_fn p_flush_count;
static stubcuda_call_count_fn p_calls;
static stubcuda_mark_device_on_fn p_mark_on;
static stubcuda_fail_copies_fn p_fail_copies;
static stubcuda_cross_device_count_fn p_cross;

#define LOAD(var, name) (*(void **)&(var) = sym(name))

static void load_all(void)
{
	LOAD(p_cuInit, "cuInit");
	LOAD(p_cuDriverGetVersion, "cuDriverGetVersion");
	LOAD(p_cuDeviceGetCount, "cuDeviceGetCount");
	LOAD(p_cuDeviceGet, "cuDeviceGet");
	LOAD(p_cuDeviceGetAttribute, "cuDeviceGetAttribute");
	LOAD(p_cuDeviceGetName, "cuDeviceGetName");
	LOAD(p_cuDeviceGetPCIBusId, "cuDeviceGetPCIBusId");
	LOAD(p_cuPointerGetAttribute, "cuPointerGetAttribute");
	LOAD(p_cuFlushGPUDirectRDMAWrites, "cuFlushGPUDirectRDMAWrites");
	LOAD(p_cuGetErrorString, "cuGetErrorString");
	LOAD(p_cuGetErrorName, "cuGetErrorName");
	LOAD(p_cuCtxGetCurrent, "cuCtxGetCurrent");
	LOAD(p_cuCtxSetCurrent, "cuCtxSetCurrent");
	LOAD(p_cuCtxGetDevice, "cuCtxGetDevice");
	LOAD(p_cuCtxPushCurrent, "cuCtxPushCurrent_v2");
	LOAD(p_cuCtxPopCurrent, "cuCtxPopCurrent_v2");
	LOAD(p_cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
	LOAD(p_cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2");
	LOAD(p_cuStreamCreate, "cuStreamCreate");
	LOAD(p_cuStreamDestroy, "cuStreamDestroy_v2");
	LOAD(p_cuStreamSynchronize, "cuStreamSynchronize");
	LOAD(p_cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2");
	LOAD(p_cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
	LOAD(p_cuMemcpyDtoH, "cuMemcpyDtoH_v2");
	LOAD(p_cuMemcpyHtoD, "cuMemcpyHtoD_v2");
	LOAD(p_cuMemAlloc, "cuMemAlloc_v2");
	LOAD(p_cuMemFree, "cuMemFree_v2");
	LOAD(p_cuMemAllocHost, "cuMemAllocHost_v2");
	LOAD(p_cuMemFreeHost, "cuMemFreeHost");
	LOAD(p_cuGetProcAddress, "cuGetProcAddress");
	LOAD(p_cuGetProcAddress_v2, "cuGetProcAddress_v2");
	LOAD(p_mark, STUBCUDA_SYM_MARK_DEVICE);
	LOAD(p_unmark, STUBCUDA_SYM_UNMARK);
	LOAD(p_flush_count, STUBCUDA_SYM_FLUSH_COUNT);
	LOAD(p_calls, STUBCUDA_SYM_CALL_COUNT);
	LOAD(p_mark_on, STUBCUDA_SYM_MARK_DEVICE_ON);
	LOAD(p_fail_copies, STUBCUDA_SYM_FAIL_COPIES);
	LOAD(p_cross, STUBCUDA_SYM_CROSS_DEVICE_COUNT);
}

static int attr(int a)
{
	int v = -12345;

	CHECK_RC(p_cuDeviceGetAttribute(&v, a, 0), 0);
	return v;
}

static unsigned int memtype(const void *p)
{
	unsigned int t = 0;

	if (p_cuPointerGetAttribute(&t, 2 /* MEMORY_TYPE */, (CUdeviceptr)(uintptr_t)p))
		return 0;
	return t;
}

static void test_pointers_and_copies(void)
{
	enum { N = 1 << 16 };
	unsigned char *host = malloc(N), *check = malloc(N), *fake = malloc(N);
	CUdeviceptr dev = 0, base = 0;
	CUcontext ctx = NULL, cur = NULL, popped = NULL;
	CUstream stream = NULL;
	void *pinned = NULL;
	size_t sz = 0;
	int ord = -1, i;

	CHECK(host && check && fake);
	for (i = 0; i < N; i++)
		host[i] = (unsigned char)(i * 7 + 3);

	/* unregistered host memory: CUDA_ERROR_INVALID_VALUE, like the real driver */
	CHECK(memtype(host) == 0);
	CHECK_RC(p_cuPointerGetAttribute(&ord, 2, (CUdeviceptr)(uintptr_t)host), 1);

	/* ranges a test marks as device memory */
	CHECK(p_mark(fake, N) == 0);
	CHECK(p_mark(fake + 16, 8) == -1); /* overlap refused */
	CHECK(memtype(fake) == 2);
	CHECK(memtype(fake + N - 1) == 2);
	CHECK(memtype(fake + N) != 2);
	CHECK_RC(p_cuPointerGetAttribute(&ord, 9, (CUdeviceptr)(uintptr_t)(fake + 100)), 0);
	CHECK(ord == 0);
	CHECK_RC(p_cuPointerGetAttribute(&base, 11, (CUdeviceptr)(uintptr_t)(fake + 100)), 0);
	CHECK(base == (CUdeviceptr)(uintptr_t)fake);
	CHECK_RC(p_cuPointerGetAttribute(&sz, 12, (CUdeviceptr)(uintptr_t)(fake + 100)), 0);
	CHECK(sz == N);
	CHECK(p_unmark(fake) == 0);
	CHECK(p_unmark(fake) == -1);
	CHECK(memtype(fake) == 0);

	/* no context yet: allocation, copies and streams refuse */
	CHECK_RC(p_cuCtxGetCurrent(&cur), 0);
	CHECK(cur == NULL);
	CHECK_RC(p_cuMemAlloc(&dev, N), 201);
	CHECK_RC(p_cuFlushGPUDirectRDMAWrites(0, 100), 201);

	CHECK_RC(p_cuDevicePrimaryCtxRetain(&ctx, 0), 0);
	CHECK(ctx != NULL);
	CHECK_RC(p_cuCtxPushCurrent(ctx), 0);
	CHECK_RC(p_cuCtxGetCurrent(&cur), 0);
	CHECK(cur == ctx);

	CHECK_RC(p_cuMemAlloc(&dev, N), 0);
	CHECK(memtype((void *)(uintptr_t)dev) == 2);
	CHECK_RC(p_cuMemAllocHost(&pinned, N), 0);
	CHECK(memtype(pinned) == 1);

	CHECK_RC(p_cuMemcpyHtoD(dev, host, N), 0);
	memset(check, 0, N);
	CHECK_RC(p_cuMemcpyDtoH(check, dev, N), 0);
	CHECK(memcmp(check, host, N) == 0);
	/* a host pointer is not device memory */
	CHECK_RC(p_cuMemcpyDtoH(check, (CUdeviceptr)(uintptr_t)host, N), 1);
	CHECK_RC(p_cuMemcpyHtoD(dev + 1, host, N), 1); /* runs past the allocation */

	CHECK_RC(p_cuStreamCreate(&stream, 1 /* NON_BLOCKING */), 0);
	memset(pinned, 0, N);
	CHECK_RC(p_cuMemcpyDtoHAsync(pinned, dev, N, stream), 0);
	CHECK_RC(p_cuStreamSynchronize(stream), 0);
	CHECK(memcmp(pinned, host, N) == 0);
	memset(check, 0x5a, N);
	CHECK_RC(p_cuMemcpyHtoDAsync(dev, check, N, stream), 0);
	CHECK_RC(p_cuStreamSynchronize(stream), 0);
	CHECK(((unsigned char *)(uintptr_t)dev)[N / 2] == 0x5a);
	CHECK_RC(p_cuStreamDestroy(stream), 0);

	CHECK(p_flush_count() == 0);
	CHECK_RC(p_cuFlushGPUDirectRDMAWrites(0, 100), 0);
	CHECK_RC(p_cuFlushGPUDirectRDMAWrites(0, 200), 0);
	CHECK_RC(p_cuFlushGPUDirectRDMAWrites(0, 7), 1);
	CHECK(p_flush_count() == 2);

	CHECK_RC(p_cuMemFree(dev + 8), 1); /* not the start of the block */
	CHECK_RC(p_cuMemFree(dev), 0);
	CHECK(memtype((void *)(uintptr_t)dev) == 0);
	CHECK_RC(p_cuMemFreeHost(pinned), 0);

	CHECK_RC(p_cuCtxPopCurrent(&popped), 0);
	CHECK(popped == ctx);
	CHECK_RC(p_cuCtxPopCurrent(&popped), 201);
	CHECK_RC(p_cuCtxSetCurrent(ctx), 0);
	CHECK_RC(p_cuCtxGetCurrent(&cur), 0);
	CHECK(cur == ctx);
	CHECK_RC(p_cuCtxSetCurrent(NULL), 0);
	CHECK_RC(p_cuDevicePrimaryCtxRelease(0), 0);

	free(host);
	free(check);
	free(fake);
}

/* Injected copy failures (single device). */
static void test_fail_copies(void)
{
	enum { N = 4096 };
	unsigned char *host = calloc(1, N), *fake = calloc(1, N);
	CUcontext ctx = NULL, popped = NULL;
	CUstream stream = NULL;
	int i;

	CHECK(host && fake);
	CHECK(p_mark(fake, N) == 0);
	CHECK_RC(p_cuDevicePrimaryCtxRetain(&ctx, 0), 0);
	CHECK_RC(p_cuCtxPushCurrent(ctx), 0);
	CHECK_RC(p_cuStreamCreate(&stream, 1), 0);
	/* HtoD only: skip one, fail two */
	p_fail_copies(STUBCUDA_COPY_HTOD, 1, 2, 700);
	CHECK_RC(p_cuMemcpyDtoHAsync(host, (CUdeviceptr)(uintptr_t)fake, N, stream), 0);
	CHECK_RC(p_cuMemcpyHtoDAsync((CUdeviceptr)(uintptr_t)fake, host, N, stream), 0);
	host[0] = 0x77;
	CHECK_RC(p_cuMemcpyHtoDAsync((CUdeviceptr)(uintptr_t)fake, host, N, stream), 700);
	CHECK(fake[0] == 0); /* nothing copied */
	CHECK_RC(p_cuMemcpyHtoDAsync((CUdeviceptr)(uintptr_t)fake, host, N, stream), 700);
	CHECK_RC(p_cuMemcpyHtoDAsync((CUdeviceptr)(uintptr_t)fake, host, N, stream), 0);
	CHECK(fake[0] == 0x77);
	/* result 0 means CUDA_ERROR_UNKNOWN; both directions */
	p_fail_copies(STUBCUDA_COPY_HTOD | STUBCUDA_COPY_DTOH, 0, 1, 0);
	CHECK_RC(p_cuMemcpyDtoHAsync(host, (CUdeviceptr)(uintptr_t)fake, N, stream), 999);
	CHECK_RC(p_cuMemcpyDtoHAsync(host, (CUdeviceptr)(uintptr_t)fake, N, stream), 0);
	p_fail_copies(STUBCUDA_COPY_DTOH, 0, 5, 1);
	p_fail_copies(0, 0, 0, 0); /* off */
	for (i = 0; i < 3; i++)
		CHECK_RC(p_cuMemcpyDtoHAsync(host, (CUdeviceptr)(uintptr_t)fake, N, stream), 0);
	CHECK_RC(p_cuStreamDestroy(stream), 0);
	CHECK_RC(p_cuCtxPopCurrent(&popped), 0);
	CHECK_RC(p_cuDevicePrimaryCtxRelease(0), 0);
	CHECK(p_unmark(fake) == 0);
	free(host);
	free(fake);
}

/* Two devices (STUBCUDA_DEVICES=2): memory belongs to a device, and an async copy
 * must run on a stream of that device. */
static void test_two_devices(void)
{
	enum { N = 8192 };
	unsigned char *host = malloc(N), *fake1 = calloc(1, N);
	CUcontext c0 = NULL, c1 = NULL, cur = NULL, popped = NULL;
	CUstream s0 = NULL, s1 = NULL;
	CUdeviceptr d0 = 0, d1 = 0;
	unsigned long cross0 = p_cross();
	int ord = -1;
	CUdevice dev = -1;

	CHECK(host && fake1);
	memset(host, 0x42, N);
	CHECK_RC(p_cuDevicePrimaryCtxRetain(&c0, 0), 0);
	CHECK_RC(p_cuDevicePrimaryCtxRetain(&c1, 1), 0);
	CHECK(c0 && c1 && c0 != c1);

	/* allocations belong to the current context's device */
	CHECK_RC(p_cuCtxPushCurrent(c0), 0);
	CHECK_RC(p_cuMemAlloc(&d0, N), 0);
	CHECK_RC(p_cuStreamCreate(&s0, 1), 0);
	CHECK_RC(p_cuCtxPopCurrent(&popped), 0);
	CHECK_RC(p_cuCtxPushCurrent(c1), 0);
	CHECK_RC(p_cuCtxGetDevice(&dev), 0);
	CHECK(dev == 1);
	CHECK_RC(p_cuMemAlloc(&d1, N), 0);
	CHECK_RC(p_cuStreamCreate(&s1, 1), 0);
	CHECK_RC(p_cuPointerGetAttribute(&ord, 9, d1 + 100), 0);
	CHECK(ord == 1);
	CHECK_RC(p_cuPointerGetAttribute(&cur, 1, d1), 0);
	CHECK(cur == c1);
	CHECK_RC(p_cuPointerGetAttribute(&ord, 9, d0), 0);
	CHECK(ord == 0);

	/* c1 is current: a copy into device 0 memory on device 0's stream works, on
	 * device 1's stream it does not (either direction) */
	CHECK_RC(p_cuMemcpyHtoDAsync(d0, host, N, s0), 0);
	CHECK_RC(p_cuMemcpyHtoDAsync(d0, host, N, s1), 1);
	CHECK_RC(p_cuMemcpyDtoHAsync(host, d0, N, s1), 1);
	CHECK_RC(p_cuMemcpyHtoDAsync(d1, host, N, s1), 0);
	CHECK_RC(p_cuMemcpyHtoDAsync(d1, host, N, s0), 1);
	/* the NULL stream is the current context's: device 1 */
	CHECK_RC(p_cuMemcpyHtoDAsync(d1, host, N, NULL), 0);
	CHECK_RC(p_cuMemcpyHtoDAsync(d0, host, N, NULL), 1);
	/* synchronous copies reach either device */
	CHECK_RC(p_cuMemcpyHtoD(d0, host, N), 0);
	CHECK(p_cross() - cross0 == 4);

	/* marked memory of device 1 */
	CHECK(p_mark_on(fake1, N, 1) == 0);
	CHECK(p_mark_on(fake1, N, 1) == -1);
	CHECK(p_mark_on(host, N, 16) == -1);
	CHECK_RC(p_cuPointerGetAttribute(&ord, 9, (CUdeviceptr)(uintptr_t)(fake1 + 5)), 0);
	CHECK(ord == 1);
	CHECK_RC(p_cuMemcpyHtoDAsync((CUdeviceptr)(uintptr_t)fake1, host, N, s1), 0);
	CHECK(fake1[N - 1] == 0x42);
	CHECK_RC(p_cuMemcpyDtoHAsync(host, (CUdeviceptr)(uintptr_t)fake1, N, s0), 1);
	CHECK(p_unmark(fake1) == 0);

	CHECK_RC(p_cuMemFree(d1), 0);
	CHECK_RC(p_cuStreamDestroy(s1), 0);
	CHECK_RC(p_cuStreamDestroy(s0), 0);
	CHECK_RC(p_cuMemFree(d0), 0);
	CHECK_RC(p_cuCtxPopCurrent(&popped), 0);
	CHECK(popped == c1);
	CHECK_RC(p_cuDevicePrimaryCtxRelease(1), 0);
	CHECK_RC(p_cuDevicePrimaryCtxRelease(0), 0);
	free(host);
	free(fake1);
}

static void test_proc_address(void)
{
	void *fn = NULL;
	int status = -1;

	CHECK_RC(p_cuGetProcAddress_v2("cuMemAlloc", &fn, 12000, 0, &status), 0);
	CHECK(status == 0 && fn == dlsym(lib, "cuMemAlloc_v2"));
	CHECK_RC(p_cuGetProcAddress_v2("cuMemcpyDtoHAsync", &fn, 12040, 2, &status), 0);
	CHECK(fn == dlsym(lib, "cuMemcpyDtoHAsync_v2"));
	CHECK_RC(p_cuGetProcAddress_v2("cuFlushGPUDirectRDMAWrites", &fn, 11020, 0, &status), 500);
	CHECK(status == 2 && fn == NULL);
	CHECK_RC(p_cuGetProcAddress_v2("cuNoSuchThing", &fn, 12040, 0, &status), 500);
	CHECK(status == 1 && fn == NULL);
	CHECK_RC(p_cuGetProcAddress_v2("cuInit", &fn, 12040, 4, &status), 1); /* bad flags */
	CHECK_RC(p_cuGetProcAddress_v2("cuGetProcAddress", &fn, 12040, 0, &status), 0);
	CHECK(fn == dlsym(lib, "cuGetProcAddress_v2"));
	CHECK_RC(p_cuGetProcAddress("cuGetProcAddress", &fn, 11080, 0), 0);
	CHECK(fn == dlsym(lib, "cuGetProcAddress"));
	CHECK_RC(p_cuGetProcAddress("cuDevicePrimaryCtxRelease", &fn, 12000, 0), 0);
	CHECK(fn == dlsym(lib, "cuDevicePrimaryCtxRelease_v2"));
	/* legacy entry points of versioned functions are not exported on purpose */
	CHECK(dlsym(lib, "cuMemAlloc") == NULL);
	CHECK(dlsym(lib, "cuMemcpyDtoHAsync") == NULL);
}

static void test_log(unsigned long calls)
{
	const char *path = getenv("STUBCUDA_LOG");
	unsigned long lines = 0, inits = 0;
	char line[256];
	FILE *f;

	if (!path || !*path) {
		printf("STUBCUDA_LOG not set: log not checked\n");
		return;
	}
	f = fopen(path, "r");
	CHECK(f != NULL);
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		lines++;
		if (!strcmp(line, "cuInit\n"))
			inits++;
	}
	fclose(f);
	CHECK(inits == 2); /* cuInit(1) and cuInit(0) */
	CHECK(lines == calls);
}

static void test_default(void)
{
	char buf[128];
	const char *s = NULL;
	int v = 0, n = -1;
	CUdevice dev = -1;
	unsigned long before;

	/* before cuInit */
	CHECK_RC(p_cuDriverGetVersion(&v), 0);
	CHECK(v == 12040);
	CHECK_RC(p_cuDeviceGetCount(&n), 3);
	CHECK_RC(p_cuGetErrorString(100, &s), 0);
	CHECK(s && strstr(s, "no CUDA-capable device"));
	CHECK_RC(p_cuGetErrorName(201, &s), 0);
	CHECK(s && !strcmp(s, "CUDA_ERROR_INVALID_CONTEXT"));
	CHECK_RC(p_cuGetErrorName(123456, &s), 1);

	CHECK_RC(p_cuInit(1), 1);
	CHECK_RC(p_cuInit(0), 0);
	CHECK_RC(p_cuDeviceGetCount(&n), 0);
	CHECK(n == 1);
	CHECK_RC(p_cuDeviceGet(&dev, 0), 0);
	CHECK(dev == 0);
	CHECK_RC(p_cuDeviceGet(&dev, 1), 101);

	CHECK(attr(116) == 1); /* GPU_DIRECT_RDMA_SUPPORTED */
	CHECK(attr(124) == 1); /* DMA_BUF_SUPPORTED */
	CHECK(attr(33) == 0x18); /* PCI_BUS_ID */
	CHECK(attr(34) == 0);    /* PCI_DEVICE_ID */
	CHECK(attr(50) == 0);    /* PCI_DOMAIN_ID */
	CHECK(attr(75) == 9);    /* COMPUTE_CAPABILITY_MAJOR */
	CHECK(attr(76) == 0);    /* COMPUTE_CAPABILITY_MINOR */
	CHECK(attr(41) == 1);    /* UNIFIED_ADDRESSING */
	CHECK_RC(p_cuDeviceGetAttribute(&v, 0, 0), 1);
	CHECK_RC(p_cuDeviceGetAttribute(&v, 116, 3), 101);

	CHECK_RC(p_cuDeviceGetName(buf, sizeof(buf), 0), 0);
	CHECK(strstr(buf, "H200") != NULL);
	CHECK_RC(p_cuDeviceGetPCIBusId(buf, sizeof(buf), 0), 0);
	CHECK(!strcmp(buf, "0000:18:00.0"));

	test_pointers_and_copies();
	test_proc_address();
	test_fail_copies();

	before = p_calls(NULL);
	CHECK(before > 0);
	CHECK(p_calls("cuInit") == 2);
	CHECK(p_calls("cuMemcpyDtoHAsync_v2") == 7);
	CHECK(p_calls("cuFlushGPUDirectRDMAWrites") == 4);
	CHECK(p_calls("nonsense") == 0);
	CHECK(p_calls(NULL) == before); /* the test API itself is not counted */
	test_log(before);
}

static void test_nodev(void)
{
	int n = -1;
	CUdevice dev;

	CHECK_RC(p_cuInit(0), 0);
	CHECK_RC(p_cuDeviceGetCount(&n), 0);
	CHECK(n == 0);
	CHECK_RC(p_cuDeviceGet(&dev, 0), 101);
}

static void test_failinit(void)
{
	int n = -1, v = 0;

	CHECK_RC(p_cuInit(0), 100);
	CHECK_RC(p_cuDeviceGetCount(&n), 3);
	CHECK_RC(p_cuDriverGetVersion(&v), 0);
	CHECK(v == 12040);
}

static void test_env(void)
{
	char buf[64];
	int n = -1, v = 0;

	CHECK_RC(p_cuDriverGetVersion(&v), 0);
	CHECK(v == 11080);
	CHECK_RC(p_cuInit(0), 0);
	CHECK_RC(p_cuDeviceGetCount(&n), 0);
	CHECK(n == 2);
	CHECK(attr(124) == 0);
	CHECK_RC(p_cuDeviceGetPCIBusId(buf, sizeof(buf), 1), 0);
	CHECK(!strcmp(buf, "0001:5E:00.0"));
	CHECK_RC(p_cuDeviceGetAttribute(&v, 33, 1), 0);
	CHECK(v == 0x5e);
	CHECK_RC(p_cuDeviceGetAttribute(&v, 50, 1), 0);
	CHECK(v == 1);
	CHECK_RC(p_cuDeviceGetPCIBusId(buf, 5, 0), 0); /* truncated, NUL-terminated */
	CHECK(!strcmp(buf, "0000"));
	test_two_devices();
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "default";
	const char *log = getenv("STUBCUDA_LOG");

	if (log && *log)
		unlink(log); /* the stub opens it at its first call */
	lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		printf("SKIP: dlopen(libcuda.so.1): %s\n", dlerror());
		return 77;
	}
	if (!dlsym(lib, STUBCUDA_SYM_CALL_COUNT)) {
		fprintf(stderr, "libcuda.so.1 on the search path is not the stub: put the "
				"stubcuda folder first on LD_LIBRARY_PATH\n");
		return 1;
	}
	load_all();

	if (!strcmp(mode, "default"))
		test_default();
	else if (!strcmp(mode, "nodev"))
		test_nodev();
	else if (!strcmp(mode, "failinit"))
		test_failinit();
	else if (!strcmp(mode, "env"))
		test_env();
	else {
		fprintf(stderr, "unknown mode %s\n", mode);
		return 2;
	}
	printf("stubcuda selftest %s: %s (%d failures)\n", mode, failures ? "FAIL" : "PASS",
	       failures);
	return failures ? 1 : 0;
}
