#include "cuda/cuda_drv.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "util/util.h"

/* The few driver types and values used, written from the driver API's
 * documented numbers (cuda.h), so nothing CUDA is needed at build time. */
typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
enum {
	CUDA_CU_ATTR_GPU_DIRECT_RDMA_SUPPORTED = 116,
	CUDA_CU_ATTR_DMA_BUF_SUPPORTED = 124,
	CUDA_CU_ATTR_GPU_DIRECT_RDMA_WRITES_ORDERING = 118,
	CUDA_CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2,
	CUDA_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9,
	CUDA_CU_MEMORYTYPE_DEVICE = 2,
	CUDA_CU_FLUSH_TARGET_CURRENT_CTX = 0,
	CUDA_CU_FLUSH_TO_OWNER = 100,
};

static struct {
	pthread_mutex_t lock;
	int refs;
	void *lib;
	CUresult (*init)(unsigned int);
	CUresult (*driver_version)(int *);
	CUresult (*device_count)(int *);
	CUresult (*device_get)(CUdevice *, int);
	CUresult (*device_attr)(int *, int, CUdevice);
	CUresult (*pointer_attr)(void *, int, CUdeviceptr);
	CUresult (*flush)(int, int);
	CUresult (*error_string)(CUresult, const char **);
} drv = { .lock = PTHREAD_MUTEX_INITIALIZER };

static const char *cu_err(CUresult r)
{
	const char *s = NULL;
	if (drv.error_string && drv.error_string(r, &s) == 0 && s)
		return s;
	return "unknown CUDA error";
}

void cuda_open(struct policy_cuda_info *info)
{
	memset(info, 0, sizeof(*info));
	pthread_mutex_lock(&drv.lock);
	if (!drv.lib) {
		drv.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
		if (!drv.lib) {
			snprintf(info->error, sizeof(info->error), "no CUDA driver (libcuda.so.1: %s)",
				 dlerror());
			pthread_mutex_unlock(&drv.lock);
			return;
		}
#define LOAD(field, sym) *(void **)(&drv.field) = dlsym(drv.lib, sym)
		LOAD(init, "cuInit");
		LOAD(driver_version, "cuDriverGetVersion");
		LOAD(device_count, "cuDeviceGetCount");
		LOAD(device_get, "cuDeviceGet");
		LOAD(device_attr, "cuDeviceGetAttribute");
		LOAD(pointer_attr, "cuPointerGetAttribute");
		LOAD(flush, "cuFlushGPUDirectRDMAWrites");
		LOAD(error_string, "cuGetErrorString");
#undef LOAD
	}
	drv.refs++;
	pthread_mutex_unlock(&drv.lock);

	if (!drv.init || !drv.device_count || !drv.device_get || !drv.device_attr ||
	    !drv.pointer_attr) {
		snprintf(info->error, sizeof(info->error),
			 "libcuda.so.1 lacks the driver functions the plugin needs");
		return;
	}
	CUresult r = drv.init(0);
	if (r) {
		snprintf(info->error, sizeof(info->error), "cuInit failed: %s", cu_err(r));
		return;
	}
	info->driver = true;
	if (drv.driver_version)
		drv.driver_version(&info->driver_version);
	r = drv.device_count(&info->ngpus);
	if (r) {
		snprintf(info->error, sizeof(info->error), "cuDeviceGetCount failed: %s", cu_err(r));
		info->ngpus = 0;
		return;
	}
	info->dmabuf = info->ngpus > 0;
	info->gdr = info->ngpus > 0;
	info->writes_ordered = info->ngpus > 0;
	for (int i = 0; i < info->ngpus; i++) {
		CUdevice dev;
		int v = 0;
		if (drv.device_get(&dev, i))
			continue;
		if (drv.device_attr(&v, CUDA_CU_ATTR_DMA_BUF_SUPPORTED, dev) || !v)
			info->dmabuf = false;
		v = 0;
		if (drv.device_attr(&v, CUDA_CU_ATTR_GPU_DIRECT_RDMA_SUPPORTED, dev) || !v)
			info->gdr = false;
		v = 0; /* a flush scope: >= "to owner" means the GPU orders the writes */
		if (drv.device_attr(&v, CUDA_CU_ATTR_GPU_DIRECT_RDMA_WRITES_ORDERING, dev) ||
		    v < CUDA_CU_FLUSH_TO_OWNER)
			info->writes_ordered = false;
	}
	info->flush = drv.flush != NULL;
}

void cuda_close(void)
{
	/* The driver stays loaded (RTLD_NODELETE): NCCL holds it anyway, and
	 * unloading a driver after cuInit is not something it supports. */
	pthread_mutex_lock(&drv.lock);
	if (drv.refs > 0)
		drv.refs--;
	pthread_mutex_unlock(&drv.lock);
}

int cuda_pointer_device(const void *p)
{
	unsigned int type = 0;
	int ordinal = -1;
	if (!drv.pointer_attr)
		return -1;
	if (drv.pointer_attr(&type, CUDA_CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)p) ||
	    type != CUDA_CU_MEMORYTYPE_DEVICE)
		return -1;
	if (drv.pointer_attr(&ordinal, CUDA_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
			     (CUdeviceptr)(uintptr_t)p))
		return -1;
	return ordinal;
}

int cuda_flush_gdr_writes(void)
{
	if (!drv.flush)
		return -1;
	return drv.flush(CUDA_CU_FLUSH_TARGET_CURRENT_CTX, CUDA_CU_FLUSH_TO_OWNER);
}
