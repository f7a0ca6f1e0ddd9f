/*
 * stubcuda: a stand-in CUDA driver (libcuda.so.1) for tests on machines without a GPU.
 * See stubcuda.h for the environment variables and the test-only API.
 *
 * The declarations below are written from the CUDA driver API's documented C
 * signatures and enum values (CUDA 12); cuda.h is not used. Enums travel as
 * 32-bit integers, which is how the real driver's ABI passes them on x86_64/aarch64.
 */
#include "stubcuda.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define STUB_API __attribute__((visibility("default")))

/* ---- driver API types and values (from the public CUDA 12 driver API) ---- */

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long cuuint64_t;
typedef struct CUctx_st *CUcontext;
typedef struct CUstream_st *CUstream;
typedef int CUdevice_attribute;
typedef int CUpointer_attribute;
typedef int CUflushGPUDirectRDMAWritesTarget;
typedef int CUflushGPUDirectRDMAWritesScope;
typedef int CUdriverProcAddressQueryResult;
typedef int CUmemRangeHandleType;

enum {
	CUDA_SUCCESS = 0,
	CUDA_ERROR_INVALID_VALUE = 1,
	CUDA_ERROR_OUT_OF_MEMORY = 2,
	CUDA_ERROR_NOT_INITIALIZED = 3,
	CUDA_ERROR_DEINITIALIZED = 4,
	CUDA_ERROR_NO_DEVICE = 100,
	CUDA_ERROR_INVALID_DEVICE = 101,
	CUDA_ERROR_INVALID_CONTEXT = 201,
	CUDA_ERROR_INVALID_HANDLE = 400,
	CUDA_ERROR_NOT_FOUND = 500,
	CUDA_ERROR_ILLEGAL_ADDRESS = 700,
	CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED = 712,
	CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED = 713,
	CUDA_ERROR_NOT_SUPPORTED = 801,
	CUDA_ERROR_UNKNOWN = 999,
};

enum {
	CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
	CU_DEVICE_ATTRIBUTE_PCI_BUS_ID = 33,
	CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID = 34,
	CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING = 41,
	CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID = 50,
	CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
	CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
	CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED = 116,
	CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS = 117,
	CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING = 118,
	CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED = 124,
	STUB_DEVICE_ATTRIBUTE_LIMIT = 200, /* above every attribute CUDA 12.x defines */
};

enum {
	CU_POINTER_ATTRIBUTE_CONTEXT = 1,
	CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2,
	CU_POINTER_ATTRIBUTE_DEVICE_POINTER = 3,
	CU_POINTER_ATTRIBUTE_HOST_POINTER = 4,
	CU_POINTER_ATTRIBUTE_SYNC_MEMOPS = 6,
	CU_POINTER_ATTRIBUTE_BUFFER_ID = 7,
	CU_POINTER_ATTRIBUTE_IS_MANAGED = 8,
	CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9,
	CU_POINTER_ATTRIBUTE_RANGE_START_ADDR = 11,
	CU_POINTER_ATTRIBUTE_RANGE_SIZE = 12,
};

enum { CU_MEMORYTYPE_HOST = 1, CU_MEMORYTYPE_DEVICE = 2 };
/* cuMemHostRegister flags: PORTABLE 1, DEVICEMAP 2, IOMEMORY 4, READ_ONLY 8 */
#define STUB_HOST_REGISTER_FLAGS 0xfu
enum { CU_STREAM_DEFAULT = 0, CU_STREAM_NON_BLOCKING = 1 };
enum { CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TARGET_CURRENT_CTX = 0 };
enum {
	CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_OWNER = 100,
	CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_ALL_DEVICES = 200,
};
enum { CU_FLUSH_GPU_DIRECT_RDMA_WRITES_OPTION_HOST = 1 };
enum {
	CU_GET_PROC_ADDRESS_SUCCESS = 0,
	CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1,
	CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT = 2,
};
/* cuGetProcAddress flags: DEFAULT 0, LEGACY_STREAM 1, PER_THREAD_DEFAULT_STREAM 2 */
#define STUB_PROC_FLAGS_MASK 0x3ULL
#define STUB_LEGACY_STREAM ((CUstream)0x1)
#define STUB_PER_THREAD_STREAM ((CUstream)0x2)

/* ---- exported driver API (prototypes keep -Wmissing-prototypes quiet) ---- */

#define STUB_FUNCS(X)                                                              \
	X(cuInit, CUresult, (unsigned int flags), 2000)                             \
	X(cuDriverGetVersion, CUresult, (int *version), 2020)                       \
	X(cuDeviceGetCount, CUresult, (int *count), 2000)                           \
	X(cuDeviceGet, CUresult, (CUdevice *dev, int ordinal), 2000)                \
	X(cuDeviceGetAttribute, CUresult,                                           \
	  (int *pi, CUdevice_attribute attrib, CUdevice dev), 2000)                 \
	X(cuDeviceGetName, CUresult, (char *name, int len, CUdevice dev), 2000)     \
	X(cuDeviceGetPCIBusId, CUresult, (char *busid, int len, CUdevice dev), 4010) \
	X(cuDeviceTotalMem_v2, CUresult, (size_t *bytes, CUdevice dev), 3020)       \
	X(cuPointerGetAttribute, CUresult,                                          \
	  (void *data, CUpointer_attribute attr, CUdeviceptr ptr), 4000)            \
	X(cuPointerGetAttributes, CUresult,                                         \
	  (unsigned int n, CUpointer_attribute *attrs, void **data,                 \
	   CUdeviceptr ptr), 7000)                                                  \
	X(cuPointerSetAttribute, CUresult,                                          \
	  (const void *value, CUpointer_attribute attr, CUdeviceptr ptr), 6000)     \
	X(cuDeviceCanAccessPeer, CUresult,                                          \
	  (int *can, CUdevice dev, CUdevice peer), 4000)                            \
	X(cuFlushGPUDirectRDMAWrites, CUresult,                                     \
	  (CUflushGPUDirectRDMAWritesTarget target,                                 \
	   CUflushGPUDirectRDMAWritesScope scope), 11030)                           \
	X(cuGetErrorString, CUresult, (CUresult error, const char **str), 6000)     \
	X(cuGetErrorName, CUresult, (CUresult error, const char **str), 6000)       \
	X(cuCtxGetCurrent, CUresult, (CUcontext *pctx), 4000)                       \
	X(cuCtxSetCurrent, CUresult, (CUcontext ctx), 4000)                         \
	X(cuCtxGetDevice, CUresult, (CUdevice *dev), 2000)                          \
	X(cuCtxPushCurrent_v2, CUresult, (CUcontext ctx), 4000)                     \
	X(cuCtxPopCurrent_v2, CUresult, (CUcontext *pctx), 4000)                    \
	X(cuDevicePrimaryCtxRetain, CUresult, (CUcontext *pctx, CUdevice dev), 7000) \
	X(cuDevicePrimaryCtxRelease_v2, CUresult, (CUdevice dev), 11000)            \
	X(cuStreamCreate, CUresult, (CUstream *stream, unsigned int flags), 2000)   \
	X(cuStreamDestroy_v2, CUresult, (CUstream stream), 4000)                    \
	X(cuStreamSynchronize, CUresult, (CUstream stream), 2000)                   \
	X(cuMemcpyDtoHAsync_v2, CUresult,                                           \
	  (void *dst, CUdeviceptr src, size_t n, CUstream stream), 3020)            \
	X(cuMemcpyHtoDAsync_v2, CUresult,                                           \
	  (CUdeviceptr dst, const void *src, size_t n, CUstream stream), 3020)      \
	X(cuMemcpyDtoH_v2, CUresult, (void *dst, CUdeviceptr src, size_t n), 3020)  \
	X(cuMemcpyHtoD_v2, CUresult,                                                \
	  (CUdeviceptr dst, const void *src, size_t n), 3020)                       \
	X(cuMemcpyDtoD_v2, CUresult,                                                \
	  (CUdeviceptr dst, CUdeviceptr src, size_t n), 3020)                       \
	X(cuMemAlloc_v2, CUresult, (CUdeviceptr *dptr, size_t n), 3020)             \
	X(cuMemFree_v2, CUresult, (CUdeviceptr dptr), 3020)                         \
	X(cuMemAllocHost_v2, CUresult, (void **pp, size_t n), 3020)                 \
	X(cuMemFreeHost, CUresult, (void *p), 2000)                                 \
	X(cuMemHostRegister_v2, CUresult,                                           \
	  (void *p, size_t n, unsigned int flags), 6050)                            \
	X(cuMemHostUnregister, CUresult, (void *p), 4000)                           \
	X(cuMemGetAddressRange_v2, CUresult,                                        \
	  (CUdeviceptr *base, size_t *size, CUdeviceptr dptr), 3020)                \
	X(cuMemGetHandleForAddressRange, CUresult,                                  \
	  (void *handle, CUdeviceptr dptr, size_t size, CUmemRangeHandleType type,  \
	   unsigned long long flags), 11070)                                        \
	X(cuGetProcAddress, CUresult,                                               \
	  (const char *symbol, void **pfn, int version, cuuint64_t flags), 11030)   \
	X(cuGetProcAddress_v2, CUresult,                                            \
	  (const char *symbol, void **pfn, int version, cuuint64_t flags,           \
	   CUdriverProcAddressQueryResult *status), 12000)

#define STUB_DECLARE(name, ret, args, ver) STUB_API ret name args;
STUB_FUNCS(STUB_DECLARE)
#undef STUB_DECLARE

STUB_API int stubcuda_mark_device(void *p, size_t len);
STUB_API int stubcuda_mark_device_on(void *p, size_t len, int device);
STUB_API void stubcuda_fail_copies(unsigned dirs, unsigned skip, unsigned count, int result);
STUB_API unsigned long stubcuda_cross_device_count(void);
STUB_API int stubcuda_unmark(void *p);
STUB_API unsigned long stubcuda_flush_count(void);
STUB_API unsigned long stubcuda_call_count(const char *name);
STUB_API void stubcuda_rt_enter(const char *name);
STUB_API void stubcuda_rt_leave(void);
STUB_API unsigned long stubcuda_rt_call_count(const char *name);
STUB_API void *stubcuda_host_view(const void *p);

/* ---- call accounting ---- */

enum stub_fn {
#define STUB_ENUM(name, ret, args, ver) FN_##name,
	STUB_FUNCS(STUB_ENUM)
#undef STUB_ENUM
	FN_COUNT
};

static const char *const stub_fn_names[FN_COUNT] = {
#define STUB_NAME(name, ret, args, ver) #name,
	STUB_FUNCS(STUB_NAME)
#undef STUB_NAME
};

static atomic_ulong stub_calls[FN_COUNT];
static atomic_ulong stub_calls_total;
/* driver calls that the stub runtime (libcudart.so) made on a caller's behalf: between
 * stubcuda_rt_enter and stubcuda_rt_leave on this thread */
static atomic_ulong stub_calls_rt[FN_COUNT];
static _Thread_local int stub_rt_depth;
static atomic_ulong stub_flushes;

static int stub_log_fd = -1;
static pthread_once_t stub_log_once = PTHREAD_ONCE_INIT;

static void stub_log_open(void)
{
	const char *path = getenv("STUBCUDA_LOG");

	if (path && *path)
		stub_log_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
}

/* Appends one line to STUBCUDA_LOG (one write: lines from several threads or
 * processes never interleave). */
static void stub_log_line(const char *prefix, const char *name)
{
	char line[96];
	int n;

	pthread_once(&stub_log_once, stub_log_open);
	if (stub_log_fd < 0)
		return;
	n = snprintf(line, sizeof(line), "%s%s\n", prefix, name);
	if (n > 0 && write(stub_log_fd, line, (size_t)n) < 0) {
		/* the log is best effort; a test that reads it will notice */
	}
}

/* Counts the call and logs its name; a call the stub runtime makes inside one of
 * its own functions is counted apart and logged as "cudart:<name>". */
static void stub_note(enum stub_fn fn)
{
	if (stub_rt_depth) {
		atomic_fetch_add(&stub_calls_rt[fn], 1);
		stub_log_line("cudart:", stub_fn_names[fn]);
		return;
	}
	atomic_fetch_add(&stub_calls[fn], 1);
	atomic_fetch_add(&stub_calls_total, 1);
	stub_log_line("", stub_fn_names[fn]);
}

/* ---- environment ---- */

static long stub_env_long(const char *name, long dflt)
{
	const char *v = getenv(name);
	char *end;
	long x;

	if (!v || !*v)
		return dflt;
	errno = 0;
	x = strtol(v, &end, 0);
	if (errno || *end)
		return dflt;
	return x;
}

#define STUB_MAX_DEVICES 16

static int stub_device_count(void)
{
	long n = stub_env_long("STUBCUDA_DEVICES", 1);

	if (n < 0)
		n = 0;
	if (n > STUB_MAX_DEVICES)
		n = STUB_MAX_DEVICES;
	return (int)n;
}

struct stub_pci {
	unsigned domain, bus, dev, fn;
};

static const unsigned stub_default_bus[8] = { 0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb };

/* PCI address of a device: the n-th entry of STUBCUDA_PCI_BUS_IDS, else the table. */
static void stub_device_pci(int dev, struct stub_pci *pci)
{
	const char *list = getenv("STUBCUDA_PCI_BUS_IDS");
	int i = 0;

	memset(pci, 0, sizeof(*pci));
	pci->bus = dev < 8 ? stub_default_bus[dev] : 0x18u + (unsigned)dev;
	while (list && *list) {
		if (i == dev) {
			struct stub_pci p = { 0, 0, 0, 0 };

			if (sscanf(list, "%x:%x:%x.%x", &p.domain, &p.bus, &p.dev, &p.fn) == 4)
				*pci = p;
			return;
		}
		list = strchr(list, ',');
		if (list)
			list++;
		i++;
	}
}

/* ---- driver state ---- */

struct CUctx_st {
	unsigned magic;
	int device;
	atomic_int refs;
};

struct CUstream_st {
	unsigned magic;
	unsigned flags;
	CUcontext ctx;
};

#define STUB_CTX_MAGIC 0x5c7c0de1u
#define STUB_STREAM_MAGIC 0x5c7ea3a1u
#define STUB_STREAM_DEAD 0xdeadbeefu

static atomic_int stub_initialized;
static struct CUctx_st stub_primary[STUB_MAX_DEVICES];

#define STUB_CTX_STACK 16
static _Thread_local CUcontext stub_ctx_stack[STUB_CTX_STACK];
static _Thread_local int stub_ctx_depth;

static CUcontext stub_current(void)
{
	return stub_ctx_depth ? stub_ctx_stack[stub_ctx_depth - 1] : NULL;
}

static int stub_ctx_valid(CUcontext ctx)
{
	return ctx >= &stub_primary[0] && ctx < &stub_primary[STUB_MAX_DEVICES] &&
	       ctx->magic == STUB_CTX_MAGIC;
}

static int stub_dev_valid(CUdevice dev)
{
	return dev >= 0 && dev < stub_device_count();
}

#define STUB_NEED_INIT()                                                           \
	do {                                                                       \
		if (!atomic_load(&stub_initialized))                               \
			return CUDA_ERROR_NOT_INITIALIZED;                         \
	} while (0)

#define STUB_NEED_CTX()                                                            \
	do {                                                                       \
		STUB_NEED_INIT();                                                  \
		if (!stub_current())                                               \
			return CUDA_ERROR_INVALID_CONTEXT;                         \
	} while (0)

/* ---- marked memory ranges ---- */

enum stub_mem { STUB_MEM_DEVICE = CU_MEMORYTYPE_DEVICE, STUB_MEM_HOST = CU_MEMORYTYPE_HOST };

struct stub_range {
	uintptr_t start;
	size_t len;
	enum stub_mem type;
	int owned; /* allocated by cuMemAlloc/cuMemAllocHost: freed there */
	unsigned long long id;
	int device; /* device memory: its device; host memory: the allocating context's */
	/* STUBCUDA_GUARD: the pages at start are PROT_NONE, so that a CPU access
	 * faults as it would on a GPU; the same pages, readable and writable, are
	 * mapped at view (len rounded up to pages), where the copies go */
	char *view;
	size_t view_len;
};

static pthread_mutex_t stub_range_lock = PTHREAD_MUTEX_INITIALIZER;
static struct stub_range *stub_ranges;
static size_t stub_nranges, stub_cap_ranges;
static unsigned long long stub_next_id = 1;

static int stub_range_add_view(void *p, size_t len, enum stub_mem type, int owned, int device,
			      char *view, size_t view_len)
{
	uintptr_t s = (uintptr_t)p;
	int ret = 0;
	size_t i;

	if (!p || !len)
		return -1;
	pthread_mutex_lock(&stub_range_lock);
	for (i = 0; i < stub_nranges; i++) {
		struct stub_range *r = &stub_ranges[i];

		if (s < r->start + r->len && r->start < s + len) {
			ret = -1;
			goto out;
		}
	}
	if (stub_nranges == stub_cap_ranges) {
		size_t cap = stub_cap_ranges ? 2 * stub_cap_ranges : 64;
		struct stub_range *n = realloc(stub_ranges, cap * sizeof(*n));

		if (!n) {
			ret = -1;
			goto out;
		}
		stub_ranges = n;
		stub_cap_ranges = cap;
	}
	stub_ranges[stub_nranges++] = (struct stub_range){ s,	   len,	 type, owned, stub_next_id++,
							   device, view, view_len };
out:
	pthread_mutex_unlock(&stub_range_lock);
	return ret;
}

static int stub_range_add(void *p, size_t len, enum stub_mem type, int owned, int device)
{
	return stub_range_add_view(p, len, type, owned, device, NULL, 0);
}

/* Removes the range starting at p; *gone (if given) receives it. */
static int stub_range_take(void *p, struct stub_range *gone)
{
	uintptr_t s = (uintptr_t)p;
	int ret = -1;
	size_t i;

	pthread_mutex_lock(&stub_range_lock);
	for (i = 0; i < stub_nranges; i++) {
		if (stub_ranges[i].start == s) {
			if (gone)
				*gone = stub_ranges[i];
			stub_ranges[i] = stub_ranges[--stub_nranges];
			ret = 0;
			break;
		}
	}
	pthread_mutex_unlock(&stub_range_lock);
	return ret;
}

static int stub_range_del(void *p)
{
	return stub_range_take(p, NULL);
}

static int stub_range_overlap(uintptr_t p, size_t len, struct stub_range *out);

/* ---- guarded device memory (STUBCUDA_GUARD=1) ---- */

static size_t stub_page(void)
{
	long pg = sysconf(_SC_PAGESIZE);

	return pg > 0 ? (size_t)pg : 4096;
}

static int stub_guard_on(void)
{
	const char *v = getenv("STUBCUDA_GUARD");

	return v && *v && strcmp(v, "0") != 0;
}

/* Makes the page-aligned [p, p+len) inaccessible to the CPU, keeping its bytes:
 * a memfd holds them, mapped PROT_NONE at p and read-write at *view. Returns 0, or
 * -1 (p not page-aligned, or a mapping failed: p is left as it was). */
static int stub_guard(void *p, size_t len, char **view, size_t *view_len)
{
	size_t pg = stub_page(), n = (len + pg - 1) / pg * pg;
	char *v;
	int fd;

	if ((uintptr_t)p % pg || !len)
		return -1;
	fd = memfd_create("stubcuda-device", MFD_CLOEXEC);
	if (fd < 0)
		return -1;
	if (ftruncate(fd, (off_t)n)) {
		close(fd);
		return -1;
	}
	v = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (v == MAP_FAILED) {
		close(fd);
		return -1;
	}
	memcpy(v, p, n);
	if (mmap(p, n, PROT_NONE, MAP_SHARED | MAP_FIXED, fd, 0) == MAP_FAILED) {
		munmap(v, n);
		close(fd);
		return -1;
	}
	close(fd);
	*view = v;
	*view_len = n;
	return 0;
}

/* Gives p its bytes back as ordinary private memory and drops the view. */
static void stub_unguard(const struct stub_range *r)
{
	void *p = (void *)r->start;

	if (!r->view)
		return;
	if (mmap(p, r->view_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
		 -1, 0) != MAP_FAILED)
		memcpy(p, r->view, r->view_len);
	munmap(r->view, r->view_len);
}

/* Marks device memory, guarded when STUBCUDA_GUARD asks for it. */
static int stub_mark_device(void *p, size_t len, int owned, int device)
{
	char *view = NULL;
	size_t view_len = 0;
	struct stub_range r;

	if (!p || !len || !stub_range_overlap((uintptr_t)p, len, &r))
		return -1;
	if (stub_guard_on() && stub_guard(p, len, &view, &view_len))
		return -1;
	if (stub_range_add_view(p, len, STUB_MEM_DEVICE, owned, device, view, view_len)) {
		struct stub_range undo = { .start = (uintptr_t)p, .view = view,
					   .view_len = view_len };

		stub_unguard(&undo);
		return -1;
	}
	return 0;
}

/* Where the CPU reaches the bytes of device memory at p: its view when guarded. */
static void *stub_view_of(const struct stub_range *r, uintptr_t p)
{
	return r->view ? r->view + (p - r->start) : (void *)p;
}

/* Finds the marked range holding [p, p+len) (len 0: just p). */
static int stub_range_find(uintptr_t p, size_t len, struct stub_range *out)
{
	int ret = -1;
	size_t i;

	pthread_mutex_lock(&stub_range_lock);
	for (i = 0; i < stub_nranges; i++) {
		struct stub_range *r = &stub_ranges[i];

		if (p >= r->start && p < r->start + r->len &&
		    len <= r->start + r->len - p) {
			*out = *r;
			ret = 0;
			break;
		}
	}
	pthread_mutex_unlock(&stub_range_lock);
	return ret;
}

/* Finds a marked range that overlaps [p, p+len). */
static int stub_range_overlap(uintptr_t p, size_t len, struct stub_range *out)
{
	int ret = -1;
	size_t i;

	pthread_mutex_lock(&stub_range_lock);
	for (i = 0; i < stub_nranges; i++) {
		struct stub_range *r = &stub_ranges[i];

		if (p < r->start + r->len && r->start < p + len) {
			*out = *r;
			ret = 0;
			break;
		}
	}
	pthread_mutex_unlock(&stub_range_lock);
	return ret;
}

static int stub_is_device(uintptr_t p, size_t n)
{
	struct stub_range r;

	return !stub_range_find(p, n, &r) && r.type == STUB_MEM_DEVICE;
}


/* ---- initialization and devices ---- */

CUresult cuInit(unsigned int flags)
{
	int i;

	stub_note(FN_cuInit);
	if (flags != 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (stub_env_long("STUBCUDA_FAIL_INIT", 0))
		return CUDA_ERROR_NO_DEVICE;
	for (i = 0; i < STUB_MAX_DEVICES; i++) {
		stub_primary[i].magic = STUB_CTX_MAGIC;
		stub_primary[i].device = i;
	}
	atomic_store(&stub_initialized, 1);
	return CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int *version)
{
	stub_note(FN_cuDriverGetVersion);
	if (!version)
		return CUDA_ERROR_INVALID_VALUE;
	*version = (int)stub_env_long("STUBCUDA_DRIVER_VERSION", 12040);
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int *count)
{
	stub_note(FN_cuDeviceGetCount);
	STUB_NEED_INIT();
	if (!count)
		return CUDA_ERROR_INVALID_VALUE;
	*count = stub_device_count();
	return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *dev, int ordinal)
{
	stub_note(FN_cuDeviceGet);
	STUB_NEED_INIT();
	if (!dev)
		return CUDA_ERROR_INVALID_VALUE;
	if (!stub_dev_valid(ordinal))
		return CUDA_ERROR_INVALID_DEVICE;
	*dev = ordinal;
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
	struct stub_pci pci;

	stub_note(FN_cuDeviceGetAttribute);
	STUB_NEED_INIT();
	if (!pi || attrib <= 0 || attrib >= STUB_DEVICE_ATTRIBUTE_LIMIT)
		return CUDA_ERROR_INVALID_VALUE;
	if (!stub_dev_valid(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	stub_device_pci(dev, &pci);
	switch (attrib) {
	case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED:
		*pi = stub_env_long("STUBCUDA_GDR", 1) ? 1 : 0;
		break;
	case CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED:
		*pi = stub_env_long("STUBCUDA_DMABUF", 1) ? 1 : 0;
		break;
	case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS:
		*pi = CU_FLUSH_GPU_DIRECT_RDMA_WRITES_OPTION_HOST;
		break;
	case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING:
		*pi = (int)stub_env_long("STUBCUDA_RDMA_WRITES_ORDERING", 0);
		break;
	case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID:
		*pi = (int)pci.bus;
		break;
	case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID:
		*pi = (int)pci.dev;
		break;
	case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID:
		*pi = (int)pci.domain;
		break;
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
		*pi = 9;
		break;
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
		*pi = 0;
		break;
	case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
		*pi = 1;
		break;
	case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
		*pi = 132;
		break;
	default:
		*pi = 0; /* every other attribute: "not supported" / zero */
		break;
	}
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
	stub_note(FN_cuDeviceGetName);
	STUB_NEED_INIT();
	if (!name || len <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (!stub_dev_valid(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	snprintf(name, (size_t)len, "NVIDIA H200 (stubcuda %d)", dev);
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetPCIBusId(char *busid, int len, CUdevice dev)
{
	struct stub_pci pci;

	stub_note(FN_cuDeviceGetPCIBusId);
	STUB_NEED_INIT();
	if (!busid || len <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (!stub_dev_valid(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	stub_device_pci(dev, &pci);
	/* the real driver answers in upper case ("0000:1B:00.0"); callers lower it */
	snprintf(busid, (size_t)len, "%04X:%02X:%02X.%X", pci.domain, pci.bus, pci.dev, pci.fn);
	return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
	stub_note(FN_cuDeviceTotalMem_v2);
	STUB_NEED_INIT();
	if (!bytes)
		return CUDA_ERROR_INVALID_VALUE;
	if (!stub_dev_valid(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	*bytes = (size_t)141 << 30;
	return CUDA_SUCCESS;
}

/* Peer access between two different reported devices: STUBCUDA_P2P (default 1). A
 * device is not its own peer (0): the stub's choice. */
CUresult cuDeviceCanAccessPeer(int *can, CUdevice dev, CUdevice peer)
{
	stub_note(FN_cuDeviceCanAccessPeer);
	STUB_NEED_INIT();
	if (!can)
		return CUDA_ERROR_INVALID_VALUE;
	if (!stub_dev_valid(dev) || !stub_dev_valid(peer))
		return CUDA_ERROR_INVALID_DEVICE;
	*can = dev != peer && stub_env_long("STUBCUDA_P2P", 1) ? 1 : 0;
	return CUDA_SUCCESS;
}

/* ---- pointers ---- */

/* One attribute of ptr, which lies in the marked range r. */
static CUresult stub_pointer_attr(const struct stub_range *r, CUpointer_attribute attr,
				  CUdeviceptr ptr, void *data)
{
	switch (attr) {
	case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
		*(unsigned int *)data = (unsigned int)r->type;
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
		*(int *)data = r->device;
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_CONTEXT:
		*(CUcontext *)data = &stub_primary[r->device];
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
		*(CUdeviceptr *)data = ptr;
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_HOST_POINTER:
		if (r->type != STUB_MEM_HOST)
			return CUDA_ERROR_INVALID_VALUE;
		*(void **)data = (void *)(uintptr_t)ptr;
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_BUFFER_ID:
		*(unsigned long long *)data = r->id;
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_IS_MANAGED:
		*(unsigned int *)data = 0; /* the stub has no managed memory */
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
		*(CUdeviceptr *)data = (CUdeviceptr)r->start;
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
		*(size_t *)data = r->len;
		return CUDA_SUCCESS;
	default:
		return CUDA_ERROR_NOT_SUPPORTED; /* not modelled by the stub */
	}
}

/* What cuPointerGetAttributes stores for a pointer the driver does not know (or an
 * attribute that does not apply to it): NULL / zero, and for the device ordinal
 * -2 (cudaInvalidDeviceId). */
static CUresult stub_pointer_attr_default(CUpointer_attribute attr, void *data)
{
	switch (attr) {
	case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
	case CU_POINTER_ATTRIBUTE_IS_MANAGED:
		*(unsigned int *)data = 0;
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
		*(int *)data = -2;
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_CONTEXT:
	case CU_POINTER_ATTRIBUTE_HOST_POINTER:
		*(void **)data = NULL;
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
	case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
		*(CUdeviceptr *)data = 0;
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_BUFFER_ID:
		*(unsigned long long *)data = 0;
		return CUDA_SUCCESS;
	case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
		*(size_t *)data = 0;
		return CUDA_SUCCESS;
	default:
		return CUDA_ERROR_NOT_SUPPORTED;
	}
}

CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attr, CUdeviceptr ptr)
{
	struct stub_range r;

	stub_note(FN_cuPointerGetAttribute);
	STUB_NEED_INIT();
	if (!data)
		return CUDA_ERROR_INVALID_VALUE;
	/* unregistered host memory: the real driver answers CUDA_ERROR_INVALID_VALUE */
	if (stub_range_find((uintptr_t)ptr, 0, &r))
		return CUDA_ERROR_INVALID_VALUE;
	return stub_pointer_attr(&r, attr, ptr, data);
}

/* Unlike cuPointerGetAttribute, memory the driver does not know is no error: every
 * attribute gets its default value and the call succeeds (as documented). */
CUresult cuPointerGetAttributes(unsigned int n, CUpointer_attribute *attrs, void **data,
				CUdeviceptr ptr)
{
	struct stub_range r;
	int known;
	unsigned int i;

	stub_note(FN_cuPointerGetAttributes);
	STUB_NEED_INIT();
	if (!n || !attrs || !data)
		return CUDA_ERROR_INVALID_VALUE;
	for (i = 0; i < n; i++)
		if (!data[i])
			return CUDA_ERROR_INVALID_VALUE;
	known = !stub_range_find((uintptr_t)ptr, 0, &r);
	for (i = 0; i < n; i++) {
		CUresult res = known ? stub_pointer_attr(&r, attrs[i], ptr, data[i])
				     : CUDA_ERROR_INVALID_VALUE;

		if (res == CUDA_ERROR_INVALID_VALUE)
			res = stub_pointer_attr_default(attrs[i], data[i]);
		if (res != CUDA_SUCCESS)
			return res;
	}
	return CUDA_SUCCESS;
}

CUresult cuPointerSetAttribute(const void *value, CUpointer_attribute attr, CUdeviceptr ptr)
{
	stub_note(FN_cuPointerSetAttribute);
	STUB_NEED_INIT();
	if (!value || attr != CU_POINTER_ATTRIBUTE_SYNC_MEMOPS)
		return CUDA_ERROR_INVALID_VALUE;
	return stub_is_device((uintptr_t)ptr, 0) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuFlushGPUDirectRDMAWrites(CUflushGPUDirectRDMAWritesTarget target,
				    CUflushGPUDirectRDMAWritesScope scope)
{
	stub_note(FN_cuFlushGPUDirectRDMAWrites);
	STUB_NEED_CTX();
	if (target != CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TARGET_CURRENT_CTX ||
	    (scope != CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_OWNER &&
	     scope != CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_ALL_DEVICES))
		return CUDA_ERROR_INVALID_VALUE;
	atomic_fetch_add(&stub_flushes, 1);
	return CUDA_SUCCESS;
}

/* ---- errors ---- */

struct stub_err {
	CUresult code;
	const char *name;
	const char *text;
};

static const struct stub_err stub_errors[] = {
	{ CUDA_SUCCESS, "CUDA_SUCCESS", "no error" },
	{ CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument" },
	{ CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory" },
	{ CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error" },
	{ CUDA_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED", "driver shutting down" },
	{ CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected" },
	{ CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal" },
	{ CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context" },
	{ CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle" },
	{ CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found" },
	{ CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS",
	  "an illegal memory access was encountered" },
	{ CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
	  "part or all of the requested memory range is already mapped" },
	{ CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED",
	  "pointer does not correspond to a registered memory region" },
	{ CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported" },
	{ CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error" },
};

static const struct stub_err *stub_err_find(CUresult e)
{
	size_t i;

	for (i = 0; i < sizeof(stub_errors) / sizeof(stub_errors[0]); i++)
		if (stub_errors[i].code == e)
			return &stub_errors[i];
	return NULL;
}

CUresult cuGetErrorString(CUresult error, const char **str)
{
	const struct stub_err *e = stub_err_find(error);

	stub_note(FN_cuGetErrorString);
	if (!str)
		return CUDA_ERROR_INVALID_VALUE;
	*str = e ? e->text : NULL;
	return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuGetErrorName(CUresult error, const char **str)
{
	const struct stub_err *e = stub_err_find(error);

	stub_note(FN_cuGetErrorName);
	if (!str)
		return CUDA_ERROR_INVALID_VALUE;
	*str = e ? e->name : NULL;
	return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* ---- contexts (primary contexts only) ---- */

CUresult cuCtxGetCurrent(CUcontext *pctx)
{
	stub_note(FN_cuCtxGetCurrent);
	STUB_NEED_INIT();
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	*pctx = stub_current();
	return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext ctx)
{
	stub_note(FN_cuCtxSetCurrent);
	STUB_NEED_INIT();
	if (ctx && !stub_ctx_valid(ctx))
		return CUDA_ERROR_INVALID_CONTEXT;
	if (!ctx) {
		if (stub_ctx_depth)
			stub_ctx_depth--;
		return CUDA_SUCCESS;
	}
	if (!stub_ctx_depth)
		stub_ctx_depth = 1;
	stub_ctx_stack[stub_ctx_depth - 1] = ctx;
	return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice(CUdevice *dev)
{
	stub_note(FN_cuCtxGetDevice);
	STUB_NEED_CTX();
	if (!dev)
		return CUDA_ERROR_INVALID_VALUE;
	*dev = stub_current()->device;
	return CUDA_SUCCESS;
}

CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
	stub_note(FN_cuCtxPushCurrent_v2);
	STUB_NEED_INIT();
	if (!stub_ctx_valid(ctx))
		return CUDA_ERROR_INVALID_CONTEXT;
	if (stub_ctx_depth == STUB_CTX_STACK)
		return CUDA_ERROR_OUT_OF_MEMORY;
	stub_ctx_stack[stub_ctx_depth++] = ctx;
	return CUDA_SUCCESS;
}

CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
	stub_note(FN_cuCtxPopCurrent_v2);
	STUB_NEED_INIT();
	if (!stub_ctx_depth)
		return CUDA_ERROR_INVALID_CONTEXT;
	stub_ctx_depth--;
	if (pctx)
		*pctx = stub_ctx_stack[stub_ctx_depth];
	return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
	stub_note(FN_cuDevicePrimaryCtxRetain);
	STUB_NEED_INIT();
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	if (!stub_dev_valid(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	atomic_fetch_add(&stub_primary[dev].refs, 1);
	*pctx = &stub_primary[dev];
	return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
	stub_note(FN_cuDevicePrimaryCtxRelease_v2);
	STUB_NEED_INIT();
	if (!stub_dev_valid(dev))
		return CUDA_ERROR_INVALID_DEVICE;
	if (atomic_load(&stub_primary[dev].refs) <= 0)
		return CUDA_ERROR_INVALID_CONTEXT;
	atomic_fetch_sub(&stub_primary[dev].refs, 1);
	return CUDA_SUCCESS;
}

/* ---- streams and copies (copies happen at once; streams only validate) ---- */

static int stub_stream_ok(CUstream s)
{
	return !s || s == STUB_LEGACY_STREAM || s == STUB_PER_THREAD_STREAM ||
	       s->magic == STUB_STREAM_MAGIC;
}

CUresult cuStreamCreate(CUstream *stream, unsigned int flags)
{
	CUstream s;

	stub_note(FN_cuStreamCreate);
	STUB_NEED_CTX();
	if (!stream || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING))
		return CUDA_ERROR_INVALID_VALUE;
	s = calloc(1, sizeof(*s));
	if (!s)
		return CUDA_ERROR_OUT_OF_MEMORY;
	s->magic = STUB_STREAM_MAGIC;
	s->flags = flags;
	s->ctx = stub_current();
	*stream = s;
	return CUDA_SUCCESS;
}

CUresult cuStreamDestroy_v2(CUstream stream)
{
	stub_note(FN_cuStreamDestroy_v2);
	STUB_NEED_INIT();
	if (!stream || stream == STUB_LEGACY_STREAM || stream == STUB_PER_THREAD_STREAM ||
	    stream->magic != STUB_STREAM_MAGIC)
		return CUDA_ERROR_INVALID_HANDLE;
	stream->magic = STUB_STREAM_DEAD;
	free(stream);
	return CUDA_SUCCESS;
}

CUresult cuStreamSynchronize(CUstream stream)
{
	stub_note(FN_cuStreamSynchronize);
	STUB_NEED_CTX();
	return stub_stream_ok(stream) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

/* Copies that a test asked to fail (stubcuda_fail_copies): direction mask, copies
 * to let through first, copies to fail, and the error. */
static pthread_mutex_t stub_fail_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned stub_fail_dirs, stub_fail_skip, stub_fail_count;
static CUresult stub_fail_result;
static atomic_ulong stub_cross_device; /* copies refused by the device rule */

static CUresult stub_injected_failure(unsigned dir)
{
	CUresult r = CUDA_SUCCESS;

	pthread_mutex_lock(&stub_fail_lock);
	if ((stub_fail_dirs & dir) && stub_fail_count) {
		if (stub_fail_skip) {
			stub_fail_skip--;
		} else {
			stub_fail_count--;
			r = stub_fail_result;
		}
	}
	pthread_mutex_unlock(&stub_fail_lock);
	return r;
}

/* The device a copy on this stream runs on: the stream's context's, or for the
 * NULL / legacy / per-thread stream the current context's. */
static int stub_stream_device(CUstream s)
{
	CUcontext ctx = (!s || s == STUB_LEGACY_STREAM || s == STUB_PER_THREAD_STREAM)
				? stub_current()
				: s->ctx;

	return ctx ? ctx->device : -1;
}

/* dir: STUBCUDA_COPY_HTOD or STUBCUDA_COPY_DTOH. exec_dev: the device whose stream
 * runs the copy, or -1 for the synchronous copies (any device's memory: the real
 * driver stages those through UVA; never failed on purpose either). */
static CUresult stub_copy(void *dst, const void *src, size_t n, unsigned dir, int exec_dev)
{
	uintptr_t dev_ptr = (uintptr_t)(dir == STUBCUDA_COPY_HTOD ? dst : src);
	struct stub_range range;
	int mem_dev;
	CUresult r;

	if (!n)
		return CUDA_SUCCESS;
	if (!dst || !src)
		return CUDA_ERROR_INVALID_VALUE;
	if (stub_range_find(dev_ptr, n, &range) || range.type != STUB_MEM_DEVICE)
		return CUDA_ERROR_INVALID_VALUE;
	mem_dev = range.device;
	/* What the real driver answered on a 2-GPU H200 (no peer access enabled): an
	 * async copy to or from device memory of device B on a stream of a context
	 * of device A fails with CUDA_ERROR_INVALID_VALUE. */
	if (exec_dev >= 0 && exec_dev != mem_dev) {
		atomic_fetch_add(&stub_cross_device, 1);
		return CUDA_ERROR_INVALID_VALUE;
	}
	r = exec_dev >= 0 ? stub_injected_failure(dir) : CUDA_SUCCESS;
	if (r)
		return r;
	if (dir == STUBCUDA_COPY_HTOD)
		dst = stub_view_of(&range, dev_ptr);
	else
		src = stub_view_of(&range, dev_ptr);
	memmove(dst, src, n);
	return CUDA_SUCCESS;
}

CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream stream)
{
	stub_note(FN_cuMemcpyDtoHAsync_v2);
	STUB_NEED_CTX();
	if (!stub_stream_ok(stream))
		return CUDA_ERROR_INVALID_HANDLE;
	return stub_copy(dst, (const void *)(uintptr_t)src, n, STUBCUDA_COPY_DTOH,
			 stub_stream_device(stream));
}

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream stream)
{
	stub_note(FN_cuMemcpyHtoDAsync_v2);
	STUB_NEED_CTX();
	if (!stub_stream_ok(stream))
		return CUDA_ERROR_INVALID_HANDLE;
	return stub_copy((void *)(uintptr_t)dst, src, n, STUBCUDA_COPY_HTOD,
			 stub_stream_device(stream));
}

CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n)
{
	stub_note(FN_cuMemcpyDtoH_v2);
	STUB_NEED_CTX();
	return stub_copy(dst, (const void *)(uintptr_t)src, n, STUBCUDA_COPY_DTOH, -1);
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n)
{
	stub_note(FN_cuMemcpyHtoD_v2);
	STUB_NEED_CTX();
	return stub_copy((void *)(uintptr_t)dst, src, n, STUBCUDA_COPY_HTOD, -1);
}

/* Device to device: both ranges must be device memory (of any devices). */
CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
	stub_note(FN_cuMemcpyDtoD_v2);
	STUB_NEED_CTX();
	if (!n)
		return CUDA_SUCCESS;
	struct stub_range rd, rs;

	if (stub_range_find((uintptr_t)dst, n, &rd) || rd.type != STUB_MEM_DEVICE ||
	    stub_range_find((uintptr_t)src, n, &rs) || rs.type != STUB_MEM_DEVICE)
		return CUDA_ERROR_INVALID_VALUE;
	memmove(stub_view_of(&rd, (uintptr_t)dst), stub_view_of(&rs, (uintptr_t)src), n);
	return CUDA_SUCCESS;
}

/* ---- allocations ---- */

static void *stub_alloc(size_t n)
{
	void *p = NULL;

	/* round up so that neighbouring allocations never share a range */
	if (posix_memalign(&p, 256, (n + 255) & ~(size_t)255))
		return NULL;
	return p;
}

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t n)
{
	void *p;

	stub_note(FN_cuMemAlloc_v2);
	STUB_NEED_CTX();
	if (!dptr || !n)
		return CUDA_ERROR_INVALID_VALUE;
	if (stub_guard_on()) {
		/* whole pages of their own, made inaccessible by stub_mark_device */
		size_t pg = stub_page();

		p = mmap(NULL, (n + pg - 1) / pg * pg, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			return CUDA_ERROR_OUT_OF_MEMORY;
	} else {
		p = stub_alloc(n);
		if (!p)
			return CUDA_ERROR_OUT_OF_MEMORY;
	}
	if (stub_mark_device(p, n, 1, stub_current()->device)) {
		if (stub_guard_on())
			munmap(p, (n + stub_page() - 1) / stub_page() * stub_page());
		else
			free(p);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*dptr = (CUdeviceptr)(uintptr_t)p;
	return CUDA_SUCCESS;
}

CUresult cuMemFree_v2(CUdeviceptr dptr)
{
	void *p = (void *)(uintptr_t)dptr;
	struct stub_range r;

	stub_note(FN_cuMemFree_v2);
	STUB_NEED_CTX();
	if (!p)
		return CUDA_SUCCESS;
	/* only the start of a cuMemAlloc'd block may be freed */
	if (stub_range_find((uintptr_t)p, 0, &r) || r.type != STUB_MEM_DEVICE || !r.owned ||
	    r.start != (uintptr_t)p)
		return CUDA_ERROR_INVALID_VALUE;
	if (stub_range_take(p, &r))
		return CUDA_ERROR_INVALID_VALUE;
	if (r.view) {
		munmap(r.view, r.view_len);
		munmap(p, r.view_len);
	} else {
		free(p);
	}
	return CUDA_SUCCESS;
}

CUresult cuMemAllocHost_v2(void **pp, size_t n)
{
	void *p;

	stub_note(FN_cuMemAllocHost_v2);
	STUB_NEED_CTX();
	if (!pp || !n)
		return CUDA_ERROR_INVALID_VALUE;
	p = stub_alloc(n);
	if (!p)
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (stub_range_add(p, n, STUB_MEM_HOST, 1, stub_current()->device)) {
		free(p);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*pp = p;
	return CUDA_SUCCESS;
}

CUresult cuMemFreeHost(void *p)
{
	struct stub_range r;

	stub_note(FN_cuMemFreeHost);
	STUB_NEED_CTX();
	if (!p)
		return CUDA_SUCCESS;
	if (stub_range_find((uintptr_t)p, 0, &r) || r.type != STUB_MEM_HOST || !r.owned ||
	    r.start != (uintptr_t)p)
		return CUDA_ERROR_INVALID_VALUE;
	stub_range_del(p);
	free(p);
	return CUDA_SUCCESS;
}

/* Page-locks nothing: marks [p, p+n) as registered host memory (MEMORY_TYPE HOST). */
CUresult cuMemHostRegister_v2(void *p, size_t n, unsigned int flags)
{
	struct stub_range r;

	stub_note(FN_cuMemHostRegister_v2);
	STUB_NEED_CTX();
	if (!p || !n || (flags & ~STUB_HOST_REGISTER_FLAGS))
		return CUDA_ERROR_INVALID_VALUE;
	if (!stub_range_overlap((uintptr_t)p, n, &r))
		return r.type == STUB_MEM_HOST ? CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED
					       : CUDA_ERROR_INVALID_VALUE;
	if (stub_range_add(p, n, STUB_MEM_HOST, 0, stub_current()->device))
		return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED; /* raced another caller */
	return CUDA_SUCCESS;
}

/* p must be the start of a range registered with cuMemHostRegister_v2. */
CUresult cuMemHostUnregister(void *p)
{
	struct stub_range r;

	stub_note(FN_cuMemHostUnregister);
	STUB_NEED_CTX();
	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	if (stub_range_find((uintptr_t)p, 0, &r) || r.type != STUB_MEM_HOST || r.owned ||
	    r.start != (uintptr_t)p)
		return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
	stub_range_del(p);
	return CUDA_SUCCESS;
}

CUresult cuMemGetAddressRange_v2(CUdeviceptr *base, size_t *size, CUdeviceptr dptr)
{
	struct stub_range r;

	stub_note(FN_cuMemGetAddressRange_v2);
	STUB_NEED_CTX();
	if (stub_range_find((uintptr_t)dptr, 0, &r) || r.type != STUB_MEM_DEVICE)
		return CUDA_ERROR_NOT_FOUND;
	if (base)
		*base = (CUdeviceptr)r.start;
	if (size)
		*size = r.len;
	return CUDA_SUCCESS;
}

/* DMA-BUF export cannot be faked: there is no device driver to hand out the fd. */
CUresult cuMemGetHandleForAddressRange(void *handle, CUdeviceptr dptr, size_t size,
				       CUmemRangeHandleType type, unsigned long long flags)
{
	stub_note(FN_cuMemGetHandleForAddressRange);
	STUB_NEED_CTX();
	if (!handle || !size)
		return CUDA_ERROR_INVALID_VALUE;
	return CUDA_ERROR_NOT_SUPPORTED;
}

/* ---- cuGetProcAddress ---- */

struct stub_proc {
	const char *name; /* base name, as callers pass it */
	int min_version;  /* first CUDA version the stub's entry point answers for */
	void *fn;
};

static const struct stub_proc stub_procs[] = {
	{ "cuInit", 2000, (void *)cuInit },
	{ "cuDriverGetVersion", 2020, (void *)cuDriverGetVersion },
	{ "cuDeviceGetCount", 2000, (void *)cuDeviceGetCount },
	{ "cuDeviceGet", 2000, (void *)cuDeviceGet },
	{ "cuDeviceGetAttribute", 2000, (void *)cuDeviceGetAttribute },
	{ "cuDeviceGetName", 2000, (void *)cuDeviceGetName },
	{ "cuDeviceGetPCIBusId", 4010, (void *)cuDeviceGetPCIBusId },
	{ "cuDeviceTotalMem", 3020, (void *)cuDeviceTotalMem_v2 },
	{ "cuPointerGetAttribute", 4000, (void *)cuPointerGetAttribute },
	{ "cuPointerGetAttributes", 7000, (void *)cuPointerGetAttributes },
	{ "cuPointerSetAttribute", 6000, (void *)cuPointerSetAttribute },
	{ "cuDeviceCanAccessPeer", 4000, (void *)cuDeviceCanAccessPeer },
	{ "cuFlushGPUDirectRDMAWrites", 11030, (void *)cuFlushGPUDirectRDMAWrites },
	{ "cuGetErrorString", 6000, (void *)cuGetErrorString },
	{ "cuGetErrorName", 6000, (void *)cuGetErrorName },
	{ "cuCtxGetCurrent", 4000, (void *)cuCtxGetCurrent },
	{ "cuCtxSetCurrent", 4000, (void *)cuCtxSetCurrent },
	{ "cuCtxGetDevice", 2000, (void *)cuCtxGetDevice },
	{ "cuCtxPushCurrent", 4000, (void *)cuCtxPushCurrent_v2 },
	{ "cuCtxPopCurrent", 4000, (void *)cuCtxPopCurrent_v2 },
	{ "cuDevicePrimaryCtxRetain", 7000, (void *)cuDevicePrimaryCtxRetain },
	{ "cuDevicePrimaryCtxRelease", 11000, (void *)cuDevicePrimaryCtxRelease_v2 },
	{ "cuStreamCreate", 2000, (void *)cuStreamCreate },
	{ "cuStreamDestroy", 4000, (void *)cuStreamDestroy_v2 },
	{ "cuStreamSynchronize", 2000, (void *)cuStreamSynchronize },
	{ "cuMemcpyDtoHAsync", 3020, (void *)cuMemcpyDtoHAsync_v2 },
	{ "cuMemcpyHtoDAsync", 3020, (void *)cuMemcpyHtoDAsync_v2 },
	{ "cuMemcpyDtoH", 3020, (void *)cuMemcpyDtoH_v2 },
	{ "cuMemcpyHtoD", 3020, (void *)cuMemcpyHtoD_v2 },
	{ "cuMemcpyDtoD", 3020, (void *)cuMemcpyDtoD_v2 },
	{ "cuMemAlloc", 3020, (void *)cuMemAlloc_v2 },
	{ "cuMemFree", 3020, (void *)cuMemFree_v2 },
	{ "cuMemAllocHost", 3020, (void *)cuMemAllocHost_v2 },
	{ "cuMemFreeHost", 2000, (void *)cuMemFreeHost },
	{ "cuMemHostRegister", 6050, (void *)cuMemHostRegister_v2 },
	{ "cuMemHostUnregister", 4000, (void *)cuMemHostUnregister },
	{ "cuMemGetAddressRange", 3020, (void *)cuMemGetAddressRange_v2 },
	{ "cuMemGetHandleForAddressRange", 11070, (void *)cuMemGetHandleForAddressRange },
	{ "cuGetProcAddress", 12000, (void *)cuGetProcAddress_v2 },
};

static CUresult stub_proc_lookup(const char *symbol, void **pfn, int version,
				 cuuint64_t flags, CUdriverProcAddressQueryResult *status)
{
	size_t i;

	if (!symbol || !pfn || (flags & ~STUB_PROC_FLAGS_MASK))
		return CUDA_ERROR_INVALID_VALUE;
	*pfn = NULL;
	for (i = 0; i < sizeof(stub_procs) / sizeof(stub_procs[0]); i++) {
		if (strcmp(stub_procs[i].name, symbol))
			continue;
		if (!strcmp(symbol, "cuGetProcAddress") && version >= 11030 && version < 12000) {
			*pfn = (void *)cuGetProcAddress;
		} else if (version < stub_procs[i].min_version) {
			if (status)
				*status = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
			return CUDA_ERROR_NOT_FOUND;
		} else {
			*pfn = stub_procs[i].fn;
		}
		if (status)
			*status = CU_GET_PROC_ADDRESS_SUCCESS;
		return CUDA_SUCCESS;
	}
	if (status)
		*status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
	return CUDA_ERROR_NOT_FOUND;
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
	stub_note(FN_cuGetProcAddress);
	return stub_proc_lookup(symbol, pfn, version, flags, NULL);
}

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
			     CUdriverProcAddressQueryResult *status)
{
	stub_note(FN_cuGetProcAddress_v2);
	return stub_proc_lookup(symbol, pfn, version, flags, status);
}

/* ---- test-only API ---- */

int stubcuda_mark_device(void *p, size_t len)
{
	return stub_mark_device(p, len, 0, 0);
}

int stubcuda_mark_device_on(void *p, size_t len, int device)
{
	if (device < 0 || device >= STUB_MAX_DEVICES)
		return -1;
	return stub_mark_device(p, len, 0, device);
}

void *stubcuda_host_view(const void *p)
{
	struct stub_range r;

	if (stub_range_find((uintptr_t)p, 0, &r) || r.type != STUB_MEM_DEVICE)
		return (void *)p;
	return stub_view_of(&r, (uintptr_t)p);
}

void stubcuda_fail_copies(unsigned dirs, unsigned skip, unsigned count, int result)
{
	pthread_mutex_lock(&stub_fail_lock);
	stub_fail_dirs = dirs;
	stub_fail_skip = skip;
	stub_fail_count = count;
	stub_fail_result = result ? result : CUDA_ERROR_UNKNOWN;
	pthread_mutex_unlock(&stub_fail_lock);
}

unsigned long stubcuda_cross_device_count(void)
{
	return atomic_load(&stub_cross_device);
}

int stubcuda_unmark(void *p)
{
	struct stub_range r;

	if (stub_range_take(p, &r))
		return -1;
	stub_unguard(&r);
	return 0;
}

unsigned long stubcuda_flush_count(void)
{
	return atomic_load(&stub_flushes);
}

unsigned long stubcuda_call_count(const char *name)
{
	atomic_ulong *table = stub_calls;
	int i;

	if (!name)
		return atomic_load(&stub_calls_total);
	if (!strncmp(name, "cudart:", 7)) {
		table = stub_calls_rt;
		name += 7;
	}
	for (i = 0; i < FN_COUNT; i++)
		if (!strcmp(stub_fn_names[i], name))
			return atomic_load(&table[i]);
	return 0;
}

/* ---- hooks for the stub runtime (stubcudart.c) ---- */

/* Calls of the runtime's functions by name: a small table, filled as names come. */
#define STUB_RT_NAMES 48
static pthread_mutex_t stub_rt_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	char name[40];
	unsigned long calls;
} stub_rt_calls[STUB_RT_NAMES];
static unsigned long stub_rt_total;

void stubcuda_rt_enter(const char *name)
{
	int i;

	stub_rt_depth++;
	if (!name)
		return;
	pthread_mutex_lock(&stub_rt_lock);
	stub_rt_total++;
	for (i = 0; i < STUB_RT_NAMES; i++) {
		if (!stub_rt_calls[i].name[0])
			snprintf(stub_rt_calls[i].name, sizeof(stub_rt_calls[i].name), "%s",
				 name);
		if (!strcmp(stub_rt_calls[i].name, name)) {
			stub_rt_calls[i].calls++;
			break;
		}
	}
	pthread_mutex_unlock(&stub_rt_lock);
	stub_log_line("", name);
}

void stubcuda_rt_leave(void)
{
	if (stub_rt_depth > 0)
		stub_rt_depth--;
}

unsigned long stubcuda_rt_call_count(const char *name)
{
	unsigned long n = 0;
	int i;

	pthread_mutex_lock(&stub_rt_lock);
	if (!name)
		n = stub_rt_total;
	for (i = 0; name && i < STUB_RT_NAMES && stub_rt_calls[i].name[0]; i++) {
		if (!strcmp(stub_rt_calls[i].name, name)) {
			n = stub_rt_calls[i].calls;
			break;
		}
	}
	pthread_mutex_unlock(&stub_rt_lock);
	return n;
}
