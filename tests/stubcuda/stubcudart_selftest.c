/*
 * stubcudart-selftest: loads libcudart.so the way libfabric 2.x does (dlopen of the
 * unversioned name, found through LD_LIBRARY_PATH) and checks the stub runtime's
 * answers against the stub driver's state.
 *
 *   stubcudart_selftest default   one device: copies, errors, registration, IPC, log
 *   stubcudart_selftest nodev     STUBCUDA_DEVICES=0
 *   stubcudart_selftest failinit  STUBCUDA_FAIL_INIT=1
 *   stubcudart_selftest multi     STUBCUDA_DEVICES=2: devices, threads, peer access
 *
 * Exit 0 pass, 1 fail, 77 skip (the stub runtime could not be loaded).
 */
#include "stubcuda.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int cudaError_t;
typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct {
	char reserved[64];
} ipc_handle_t;

enum { H2H = 0, H2D = 1, D2H = 2, D2D = 3, DEFAULT = 4 };

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
		int rc_ = (call);                                                  \
		if (rc_ != (want)) {                                               \
			fprintf(stderr, "%s:%d: %s returned %d, want %d\n",        \
				__FILE__, __LINE__, #call, rc_, (want));           \
			failures++;                                                \
		}                                                                  \
	} while (0)

static void *rt, *drv;

static void *sym(void *lib, const char *name)
{
	void *p = dlsym(lib, name);

	if (!p) {
		fprintf(stderr, "missing symbol %s\n", name);
		exit(1);
	}
	return p;
}

/* runtime */
static cudaError_t (*r_GetDeviceCount)(int *);
static cudaError_t (*r_GetDevice)(int *);
static cudaError_t (*r_SetDevice)(int);
static cudaError_t (*r_Malloc)(void **, size_t);
static cudaError_t (*r_Free)(void *);
static cudaError_t (*r_Memcpy)(void *, const void *, size_t, int);
static cudaError_t (*r_DeviceSynchronize)(void);
static cudaError_t (*r_HostRegister)(void *, size_t, unsigned int);
static cudaError_t (*r_HostUnregister)(void *);
static const char *(*r_GetErrorName)(cudaError_t);
static const char *(*r_GetErrorString)(cudaError_t);
static cudaError_t (*r_IpcGetMemHandle)(ipc_handle_t *, void *);
static cudaError_t (*r_IpcOpenMemHandle)(void **, ipc_handle_t, unsigned int);
static cudaError_t (*r_IpcCloseMemHandle)(void *);
/* driver */
static CUresult (*d_PointerGetAttribute)(void *, int, CUdeviceptr);
static CUresult (*d_PointerGetAttributes)(unsigned int, int *, void **, CUdeviceptr);
static CUresult (*d_CtxGetCurrent)(CUcontext *);
static CUresult (*d_DevicePrimaryCtxRetain)(CUcontext *, int);
static CUresult (*d_DevicePrimaryCtxRelease)(int);
static CUresult (*d_DeviceCanAccessPeer)(int *, int, int);
static stubcuda_call_count_fn d_calls;
static stubcuda_rt_call_count_fn rt_calls;

#define LOAD(lib, var, name) (*(void **)&(var) = sym(lib, name))

static void load(void)
{
	LOAD(rt, r_GetDeviceCount, "cudaGetDeviceCount");
	LOAD(rt, r_GetDevice, "cudaGetDevice");
	LOAD(rt, r_SetDevice, "cudaSetDevice");
	LOAD(rt, r_Malloc, "cudaMalloc");
	LOAD(rt, r_Free, "cudaFree");
	LOAD(rt, r_Memcpy, "cudaMemcpy");
	LOAD(rt, r_DeviceSynchronize, "cudaDeviceSynchronize");
	LOAD(rt, r_HostRegister, "cudaHostRegister");
	LOAD(rt, r_HostUnregister, "cudaHostUnregister");
	LOAD(rt, r_GetErrorName, "cudaGetErrorName");
	LOAD(rt, r_GetErrorString, "cudaGetErrorString");
	LOAD(rt, r_IpcGetMemHandle, "cudaIpcGetMemHandle");
	LOAD(rt, r_IpcOpenMemHandle, "cudaIpcOpenMemHandle");
	LOAD(rt, r_IpcCloseMemHandle, "cudaIpcCloseMemHandle");
	LOAD(drv, d_PointerGetAttribute, "cuPointerGetAttribute");
	LOAD(drv, d_PointerGetAttributes, "cuPointerGetAttributes");
	LOAD(drv, d_CtxGetCurrent, "cuCtxGetCurrent");
	LOAD(drv, d_DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
	LOAD(drv, d_DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2");
	LOAD(drv, d_DeviceCanAccessPeer, "cuDeviceCanAccessPeer");
	LOAD(drv, d_calls, STUBCUDA_SYM_CALL_COUNT);
	LOAD(drv, rt_calls, STUBCUDA_SYM_RT_CALL_COUNT);
}

static unsigned mem_type(const void *p)
{
	unsigned t = 0;

	if (d_PointerGetAttribute(&t, 2 /* MEMORY_TYPE */, (CUdeviceptr)(uintptr_t)p))
		return 0;
	return t;
}

static void fill(unsigned char *p, size_t n, unsigned seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (unsigned char)(seed + i * 7);
}

static int same(const unsigned char *p, size_t n, unsigned seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (p[i] != (unsigned char)(seed + i * 7))
			return 0;
	return 1;
}

static void test_errors(void)
{
	CHECK(!strcmp(r_GetErrorName(0), "cudaSuccess"));
	CHECK(!strcmp(r_GetErrorName(100), "cudaErrorNoDevice"));
	CHECK(!strcmp(r_GetErrorName(801), "cudaErrorNotSupported"));
	CHECK(strstr(r_GetErrorString(100), "no CUDA-capable device") != NULL);
	CHECK(!strcmp(r_GetErrorString(1), "invalid argument"));
	CHECK(!strcmp(r_GetErrorName(123456), "unrecognized error code"));
	CHECK(!strcmp(r_GetErrorString(123456), "unrecognized error code"));
}

enum { N = 4096 };

static void test_copies(void)
{
	unsigned char host[N], back[N];
	unsigned char *d1 = NULL, *d2 = NULL;
	unsigned long memcpys = rt_calls("cudaMemcpy");
	unsigned long htod = d_calls("cudart:cuMemcpyHtoD_v2");

	CHECK_RC(r_Malloc((void **)&d1, N), 0);
	CHECK_RC(r_Malloc((void **)&d2, N), 0);
	CHECK(d1 && d2);
	if (!d1 || !d2)
		return;
	CHECK(mem_type(d1) == 2 && mem_type(d2) == 2);
	CHECK(mem_type(host) == 0);

	/* the four kinds, then the same with cudaMemcpyDefault */
	fill(host, N, 1);
	CHECK_RC(r_Memcpy(d1, host, N, H2D), 0);
	CHECK(same(d1, N, 1)); /* really copied: "device memory" is host memory */
	CHECK_RC(r_Memcpy(d2, d1, N, D2D), 0);
	memset(back, 0, N);
	CHECK_RC(r_Memcpy(back, d2, N, D2H), 0);
	CHECK(same(back, N, 1));
	memset(back, 0, N);
	CHECK_RC(r_Memcpy(back, host, N, H2H), 0);
	CHECK(same(back, N, 1));

	fill(host, N, 2);
	CHECK_RC(r_Memcpy(d1, host, N, DEFAULT), 0);
	CHECK_RC(r_Memcpy(d2 + 100, d1 + 100, N - 100, DEFAULT), 0);
	memset(back, 0, N);
	CHECK_RC(r_Memcpy(back, d2, N, DEFAULT), 0);
	CHECK(same(back + 100, N - 100, 2 + 100 * 7));
	memset(back, 0, N);
	CHECK_RC(r_Memcpy(back, host, N, DEFAULT), 0);
	CHECK(same(back, N, 2));
	CHECK_RC(r_Memcpy(back, host, 0, H2D), 0); /* nothing to copy */

	/* kinds that do not match the memory, bad kind, past the allocation */
	CHECK_RC(r_Memcpy(back, host, N, H2D), 1);
	CHECK_RC(r_Memcpy(back, host, N, D2H), 1);
	CHECK_RC(r_Memcpy(d1, host, N, D2H), 1);
	CHECK_RC(r_Memcpy(d1, d2, N, H2D), 1);
	CHECK_RC(r_Memcpy(d1, host, N, D2D), 1);
	CHECK_RC(r_Memcpy(back, d1, N, H2H), 1);
	CHECK_RC(r_Memcpy(d1, host, N, 5), 21);
	CHECK_RC(r_Memcpy(d1 + N - 16, host, 32, H2D), 1);
	CHECK_RC(r_Memcpy(NULL, host, 8, DEFAULT), 1);

	CHECK(rt_calls("cudaMemcpy") - memcpys == 18);
	CHECK(d_calls("cudart:cuMemcpyHtoD_v2") - htod == 3); /* the last one fails there */
	CHECK(d_calls("cuMemcpyHtoD_v2") == 0);               /* no direct driver calls */

	CHECK_RC(r_DeviceSynchronize(), 0);
	CHECK_RC(r_Free(d1), 0);
	CHECK_RC(r_Free(d1), 1); /* freed twice */
	CHECK(mem_type(d1) == 0);
	CHECK_RC(r_Free(d2 + 8), 1); /* not the start */
	CHECK_RC(r_Free(d2), 0);
	CHECK_RC(r_Free(NULL), 0);
	CHECK_RC(r_Malloc((void **)&d1, 0), 0);
	CHECK(d1 == NULL);
	CHECK_RC(r_Malloc(NULL, 8), 1);
}

static void test_pointer_attributes(void)
{
	unsigned type = 99, managed = 99;
	int ordinal = 99;
	int attrs[3] = { 2 /* MEMORY_TYPE */, 8 /* IS_MANAGED */, 9 /* DEVICE_ORDINAL */ };
	void *data[3] = { &type, &managed, &ordinal };
	char host[64];
	void *d = NULL;

	CHECK_RC(r_Malloc(&d, 256), 0);
	CHECK_RC(d_PointerGetAttributes(3, attrs, data, (CUdeviceptr)(uintptr_t)d + 8), 0);
	CHECK(type == 2 && managed == 0 && ordinal == 0);
	/* unknown memory: defaults and success, unlike cuPointerGetAttribute */
	type = managed = 99;
	ordinal = 99;
	CHECK_RC(d_PointerGetAttributes(3, attrs, data, (CUdeviceptr)(uintptr_t)host), 0);
	CHECK(type == 0 && managed == 0 && ordinal == -2);
	CHECK_RC(d_PointerGetAttribute(&type, 2, (CUdeviceptr)(uintptr_t)host), 1);
	data[1] = NULL;
	CHECK_RC(d_PointerGetAttributes(3, attrs, data, (CUdeviceptr)(uintptr_t)d), 1);
	CHECK_RC(r_Free(d), 0);
}

static void test_host_register(void)
{
	static unsigned char buf[8192];
	unsigned char *d = NULL;

	CHECK_RC(r_HostRegister(buf, sizeof(buf), 0), 0);
	CHECK(mem_type(buf) == 1 && mem_type(buf + 8191) == 1);
	CHECK_RC(r_HostRegister(buf + 4096, 16, 0), 712);
	CHECK_RC(r_HostRegister(buf, 0, 0), 1);
	CHECK_RC(r_HostRegister(buf, 16, 0x10), 1);
	/* registered host memory is still host memory for cudaMemcpy */
	CHECK_RC(r_Malloc((void **)&d, 512), 0);
	fill(buf, 512, 3);
	CHECK_RC(r_Memcpy(d, buf, 512, H2D), 0);
	CHECK(same(d, 512, 3));
	CHECK_RC(r_Memcpy(buf, d, 512, D2D), 1);
	CHECK_RC(r_HostRegister(d, 16, 0), 1); /* device memory */
	CHECK_RC(r_HostUnregister(buf + 8), 713);
	CHECK_RC(r_HostUnregister(buf), 0);
	CHECK_RC(r_HostUnregister(buf), 713);
	CHECK(mem_type(buf) == 0);
	CHECK_RC(r_HostUnregister(NULL), 1);
	CHECK_RC(r_Free(d), 0);
}

static void test_ipc(void)
{
	ipc_handle_t h;
	char host[16];
	void *d = NULL, *opened = &h;

	CHECK_RC(r_Malloc(&d, 1024), 0);
	memset(&h, 0x5a, sizeof(h));
	CHECK_RC(r_IpcGetMemHandle(&h, d), 801);
	CHECK(h.reserved[0] == 0 && h.reserved[63] == 0);
	CHECK_RC(r_IpcGetMemHandle(&h, host), 1);
	CHECK_RC(r_IpcGetMemHandle(NULL, d), 1);
	CHECK_RC(r_IpcOpenMemHandle(&opened, h, 1), 801);
	CHECK(opened == NULL);
	CHECK_RC(r_IpcOpenMemHandle(&opened, h, 2), 1);
	CHECK_RC(r_IpcOpenMemHandle(NULL, h, 1), 1);
	CHECK_RC(r_IpcCloseMemHandle(d), 801);
	CHECK_RC(r_IpcCloseMemHandle(NULL), 1);
	CHECK_RC(r_Free(d), 0);
}

/* A thread with no current context: the runtime makes the primary context of the
 * thread's device (0 until cudaSetDevice) current, as the real runtime does. */
static void *thread_copy(void *arg)
{
	unsigned char host[256];
	unsigned char *d = arg;
	CUcontext ctx = (CUcontext)1;
	int dev = -1;

	CHECK_RC(d_CtxGetCurrent(&ctx), 0);
	CHECK(ctx == NULL);
	CHECK_RC(r_GetDevice(&dev), 0);
	CHECK(dev == 0);
	fill(host, sizeof(host), 9);
	CHECK_RC(r_Memcpy(d, host, sizeof(host), DEFAULT), 0);
	CHECK(same(d, sizeof(host), 9));
	CHECK_RC(d_CtxGetCurrent(&ctx), 0);
	CHECK(ctx != NULL);
	return NULL;
}

static void run_thread(void *arg)
{
	pthread_t t;

	CHECK(pthread_create(&t, NULL, thread_copy, arg) == 0);
	pthread_join(t, NULL);
}

static void test_log(void)
{
	const char *path = getenv("STUBCUDA_LOG");
	unsigned long memcpys = 0, htod = 0, loads = 0, direct = 0;
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
		if (!strcmp(line, "cudaMemcpy\n"))
			memcpys++;
		else if (!strcmp(line, "cudart:cuMemcpyHtoD_v2\n"))
			htod++;
		else if (!strcmp(line, "cudart_load\n"))
			loads++;
		else if (!strncmp(line, "cu", 2) && strncmp(line, "cuda", 4))
			direct++;
	}
	fclose(f);
	CHECK(memcpys == rt_calls("cudaMemcpy"));
	CHECK(htod == d_calls("cudart:cuMemcpyHtoD_v2"));
	CHECK(loads == 1);
	CHECK(direct == d_calls(NULL));
}

static void test_default(void)
{
	CUcontext ctx = NULL, primary = NULL;
	unsigned char *d = NULL;
	int n = -1, dev = -1;

	CHECK(rt_calls("cudart_load") == 1);
	test_errors();
	CHECK_RC(r_GetDeviceCount(&n), 0);
	CHECK(n == 1);
	CHECK_RC(r_GetDeviceCount(NULL), 1);
	CHECK_RC(r_GetDevice(&dev), 0);
	CHECK(dev == 0);
	CHECK_RC(r_SetDevice(1), 101);
	CHECK_RC(r_SetDevice(-1), 101);
	CHECK_RC(r_SetDevice(0), 0);
	/* the runtime's context is the driver's primary context */
	CHECK_RC(d_CtxGetCurrent(&ctx), 0);
	CHECK_RC(d_DevicePrimaryCtxRetain(&primary, 0), 0);
	CHECK(ctx != NULL && ctx == primary);
	CHECK_RC(d_DevicePrimaryCtxRelease(0), 0);

	test_copies();
	test_pointer_attributes();
	test_host_register();
	test_ipc();

	CHECK_RC(r_Malloc((void **)&d, 256), 0);
	if (d)
		run_thread(d);
	CHECK_RC(r_Free(d), 0);
	CHECK(rt_calls(NULL) > rt_calls("cudaMemcpy"));
	test_log();
}

/* No usable device: every call that needs one answers cudaErrorNoDevice. */
static void test_nodev(void)
{
	unsigned char host[16];
	void *d = NULL;
	int n = -1, dev = -1;

	test_errors();
	CHECK_RC(r_GetDeviceCount(&n), 100);
	CHECK(n == 0);
	CHECK_RC(r_GetDevice(&dev), 100);
	CHECK_RC(r_SetDevice(0), 100);
	CHECK_RC(r_Malloc(&d, 64), 100);
	CHECK_RC(r_Free(NULL), 100);
	CHECK_RC(r_Memcpy(host, host + 8, 8, DEFAULT), 100);
	CHECK_RC(r_DeviceSynchronize(), 100);
	CHECK_RC(r_HostRegister(host, sizeof(host), 0), 100);
	CHECK(rt_calls("cudaGetDeviceCount") == 1);
}

static void test_multi(void)
{
	CUcontext ctx = NULL, primary1 = NULL;
	int n = -1, dev = -1, can = -1, ordinal = -1;
	unsigned char *d0 = NULL, *d1 = NULL;

	CHECK_RC(r_GetDeviceCount(&n), 0);
	CHECK(n == 2);
	CHECK_RC(r_Malloc((void **)&d0, 256), 0); /* device 0: the default */
	CHECK_RC(r_SetDevice(1), 0);
	CHECK_RC(r_GetDevice(&dev), 0);
	CHECK(dev == 1);
	CHECK_RC(d_CtxGetCurrent(&ctx), 0);
	CHECK_RC(d_DevicePrimaryCtxRetain(&primary1, 1), 0);
	CHECK(ctx == primary1);
	CHECK_RC(d_DevicePrimaryCtxRelease(1), 0);
	CHECK_RC(r_Malloc((void **)&d1, 256), 0);
	CHECK_RC(d_PointerGetAttribute(&ordinal, 9, (CUdeviceptr)(uintptr_t)d1), 0);
	CHECK(ordinal == 1);
	CHECK_RC(d_PointerGetAttribute(&ordinal, 9, (CUdeviceptr)(uintptr_t)d0), 0);
	CHECK(ordinal == 0);
	/* synchronous copies reach either device's memory */
	fill(d0, 256, 4);
	CHECK_RC(r_Memcpy(d1, d0, 256, DEFAULT), 0);
	CHECK(same(d1, 256, 4));
	CHECK_RC(r_SetDevice(2), 101);

	CHECK_RC(d_DeviceCanAccessPeer(&can, 0, 1), 0);
	CHECK(can == 1);
	CHECK_RC(d_DeviceCanAccessPeer(&can, 1, 1), 0);
	CHECK(can == 0);
	CHECK_RC(d_DeviceCanAccessPeer(&can, 0, 2), 101);
	setenv("STUBCUDA_P2P", "0", 1);
	CHECK_RC(d_DeviceCanAccessPeer(&can, 1, 0), 0);
	CHECK(can == 0);

	run_thread(d0); /* a new thread starts on device 0 */
	CHECK_RC(r_Free(d0), 0);
	CHECK_RC(r_Free(d1), 0);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "default";
	const char *log = getenv("STUBCUDA_LOG");

	if (log && *log)
		unlink(log); /* opened at the runtime's load */
	/* libfabric's way: the unversioned runtime first, then the driver */
	rt = dlopen("libcudart.so", RTLD_NOW);
	if (!rt) {
		printf("SKIP: cannot load libcudart.so: %s\n", dlerror());
		return 77;
	}
	drv = dlopen("libcuda.so.1", RTLD_NOW);
	if (!drv || !dlsym(drv, STUBCUDA_SYM_RT_CALL_COUNT)) {
		fprintf(stderr, "libcudart.so/libcuda.so.1 are not the stubs (the stubcuda "
			"folder first on LD_LIBRARY_PATH?)\n");
		return 1;
	}
	load();
	if (rt_calls("cudart_load") != 1) {
		fprintf(stderr, "libcudart.so is not the stub runtime (%s first on "
			"LD_LIBRARY_PATH?)\n", "the stubcuda folder");
		return 1;
	}

	if (!strcmp(mode, "default"))
		test_default();
	else if (!strcmp(mode, "nodev") || !strcmp(mode, "failinit"))
		test_nodev();
	else if (!strcmp(mode, "multi"))
		test_multi();
	else {
		fprintf(stderr, "unknown mode %s\n", mode);
		return 2;
	}
	if (failures) {
		fprintf(stderr, "%d check(s) failed\n", failures);
		return 1;
	}
	printf("stubcudart selftest %s: ok\n", mode);
	return 0;
}
