/*
 * stubcuda: a stand-in for the CUDA driver (libcuda.so.1) for machines without a GPU,
 * and over it a stand-in for the CUDA runtime (libcudart.so, described at the end of
 * this comment). README.md in this folder has an overview and the tests.
 *
 * Tests put ${CMAKE_BINARY_DIR}/stubcuda first on LD_LIBRARY_PATH so that
 * dlopen("libcuda.so.1") finds this library. It reports GPUs that do not exist;
 * "device memory" is host memory that a test (or cuMemAlloc) marked as such.
 *
 * Environment (read at each call that needs it):
 *   STUBCUDA_DEVICES=N             devices reported (default 1; 0 = driver present,
 *                                  no GPU: cuInit succeeds, cuDeviceGetCount gives 0)
 *   STUBCUDA_FAIL_INIT=1           cuInit fails with CUDA_ERROR_NO_DEVICE (what the real
 *                                  driver does when no GPU is visible)
 *   STUBCUDA_DRIVER_VERSION=V      cuDriverGetVersion answer (default 12040)
 *   STUBCUDA_DMABUF=0|1            CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED (default 1)
 *   STUBCUDA_GDR=0|1               CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED (default 1)
 *   STUBCUDA_RDMA_WRITES_ORDERING=V CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING
 *                                  (default 0 = NONE, so callers must flush)
 *   STUBCUDA_PCI_BUS_IDS=a,b,...   PCI bus ids of devices 0,1,... ("0000:18:00.0");
 *                                  the default is a fixed 8-GPU table
 *   STUBCUDA_P2P=0|1               cuDeviceCanAccessPeer between two different devices
 *                                  (default 1)
 *   STUBCUDA_GUARD=1               device memory the CPU cannot touch, as on a GPU:
 *                                  memory marked as device memory (which must then
 *                                  start on a page) and cuMemAlloc_v2's blocks are
 *                                  mapped PROT_NONE, so a CPU load or store there
 *                                  faults (SIGSEGV), and an EFAULT in the kernel's
 *                                  hands. The copies reach the bytes through a
 *                                  second mapping; stubcuda_host_view gives a test
 *                                  that mapping to fill and check its buffers.
 *                                  stubcuda_unmark gives the pages back as they were
 *                                  (read at each mark and cuMemAlloc_v2)
 *   STUBCUDA_LOG=path              append one line per driver call: the exported
 *                                  symbol name ("cuInit", "cuMemcpyDtoHAsync_v2"), and
 *                                  per stub runtime call (see below)
 *
 * Symbols are exported under the names that CUDA 12's cuda.h maps the API to
 * (cuMemAlloc -> cuMemAlloc_v2, cuMemcpyDtoHAsync -> cuMemcpyDtoHAsync_v2,
 * cuStreamDestroy -> cuStreamDestroy_v2, cuCtxPushCurrent -> cuCtxPushCurrent_v2, ...).
 * The legacy unversioned names of those functions are deliberately NOT exported:
 * a caller that dlsym()s "cuMemAlloc" gets the pre-3.2 ABI from the real driver,
 * which is a bug the stub makes visible. cuGetProcAddress (CUDA 11.3, 4 arguments)
 * and cuGetProcAddress_v2 (CUDA 12.0, 5 arguments) both exist and take the base
 * name ("cuMemAlloc") as the real driver does.
 *
 * Like the real driver, memory copies, stream and allocation calls need a current
 * context (cuCtxSetCurrent / cuCtxPushCurrent_v2 of a primary context), or they
 * return CUDA_ERROR_INVALID_CONTEXT; every call but cuDriverGetVersion,
 * cuGetErrorString/Name and cuGetProcAddress* needs cuInit first.
 *
 * Devices and contexts: each device has one primary context; a stream belongs to
 * the context current when it was created. Device memory belongs to one device:
 * cuMemAlloc_v2 gives memory of the current context's device, a test marks memory
 * of device 0 (stubcuda_mark_device) or of any device (stubcuda_mark_device_on).
 * CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL and _CONTEXT answer that device and its
 * primary context. An asynchronous copy (cuMemcpyHtoDAsync_v2/DtoHAsync_v2) to or
 * from device memory of device B on a stream of device A (for the NULL, legacy or
 * per-thread stream: while a context of device A is current) fails with
 * CUDA_ERROR_INVALID_VALUE, as the real driver answered on a 2-GPU H200 without
 * peer access (counted: stubcuda_cross_device_count). Which context is current when
 * the copy is issued does not matter (the real driver also runs a copy on a stream
 * of another device than the current one). The synchronous cuMemcpyHtoD_v2/DtoH_v2
 * reach any device's memory.
 *
 * Test-only API, looked up with dlsym() on the dlopen("libcuda.so.1") handle.
 *
 * The stub CUDA runtime: ${CMAKE_BINARY_DIR}/stubcuda/libcudart.so (stubcudart.c),
 * beside the driver, so that one LD_LIBRARY_PATH entry serves a caller that does
 * dlopen("libcudart.so") (libfabric 2.x built with --enable-cuda-dlopen) as well.
 * It is linked against the stub driver (DT_NEEDED libcuda.so.1) and keeps no state of
 * its own but each thread's current device: devices, device memory, registered host
 * memory and contexts are the driver's, reached through the driver's exported API.
 * So STUBCUDA_DEVICES, STUBCUDA_FAIL_INIT etc. act on both alike; with the real
 * driver instead of the stub it cannot load (it needs the hooks below).
 *
 * Runtime functions (those libfabric 2.1 looks up): cudaGetDeviceCount, cudaGetDevice,
 * cudaSetDevice, cudaMalloc, cudaFree, cudaMemcpy, cudaDeviceSynchronize,
 * cudaHostRegister, cudaHostUnregister, cudaGetErrorName, cudaGetErrorString,
 * cudaIpcGetMemHandle, cudaIpcOpenMemHandle, cudaIpcCloseMemHandle.
 *   - The first call that needs the driver calls cuInit(0) once; STUBCUDA_FAIL_INIT=1
 *     or STUBCUDA_DEVICES=0 then make cudaGetDeviceCount store 0 and return
 *     cudaErrorNoDevice (100), and every call that needs a device return it too.
 *   - Like the real runtime, a call that needs a context uses the thread's current
 *     driver context, or else makes the primary context of the thread's device
 *     (cudaSetDevice, default 0) current, retaining it once per device.
 *   - cudaMalloc/cudaFree are cuMemAlloc_v2/cuMemFree_v2; cudaHostRegister/Unregister
 *     are cuMemHostRegister_v2/cuMemHostUnregister.
 *   - cudaMemcpy copies at once (memmove). The kind is checked against the memory:
 *     HostToDevice needs device memory at dst and none at src, DeviceToHost the
 *     reverse, DeviceToDevice both, HostToHost neither; a mismatch is
 *     cudaErrorInvalidValue (1), a kind above cudaMemcpyDefault (4)
 *     cudaErrorInvalidMemcpyDirection (21). cudaMemcpyDefault infers the direction.
 *     Device memory copies go through cuMemcpyHtoD_v2/DtoH_v2/DtoD_v2, so a range
 *     that runs past its allocation fails as there.
 *   - CUDA IPC is not modelled: with valid arguments cudaIpcGetMemHandle (on device
 *     memory), cudaIpcOpenMemHandle and cudaIpcCloseMemHandle return
 *     cudaErrorNotSupported (801); libfabric's shm then falls back to copies through
 *     its bounce buffers.
 *   - Each runtime call appends its name to STUBCUDA_LOG ("cudaMemcpy"); the driver
 *     calls it makes on the way are logged as "cudart:<driver symbol>"
 *     ("cudart:cuMemcpyHtoD_v2") and counted apart from direct driver calls (see
 *     stubcuda_call_count). Loading the runtime logs and counts "cudart_load".
 */
#ifndef STUBCUDA_H
#define STUBCUDA_H

#include <stddef.h>

/* Marks [p, p+len) as device memory of device 0 (what cuPointerGetAttribute and the
 * copy functions check). Returns 0, or -1 if the range overlaps a marked one. */
typedef int (*stubcuda_mark_device_fn)(void *p, size_t len);
/* Forgets the marked range that starts at p. Returns 0, or -1 if none starts there. */
typedef int (*stubcuda_unmark_fn)(void *p);
/* Marks [p, p+len) as device memory of device `device` (0..15; the device need
 * not be reported by STUBCUDA_DEVICES). Returns 0, or -1 (overlap, bad device). */
typedef int (*stubcuda_mark_device_on_fn)(void *p, size_t len, int device);
/* Makes asynchronous copies fail: of the next copies in the directions `dirs`
 * (STUBCUDA_COPY_HTOD | STUBCUDA_COPY_DTOH), `skip` succeed, then `count` fail with
 * CUresult `result` (0: CUDA_ERROR_UNKNOWN) before copying anything. A copy the
 * device rule refuses does not count. count 0 turns it off. */
typedef void (*stubcuda_fail_copies_fn)(unsigned dirs, unsigned skip, unsigned count,
					int result);
#define STUBCUDA_COPY_HTOD 1u
#define STUBCUDA_COPY_DTOH 2u
/* Asynchronous copies refused because the stream's device was not the memory's. */
typedef unsigned long (*stubcuda_cross_device_count_fn)(void);
/* Number of successful cuFlushGPUDirectRDMAWrites calls. */
typedef unsigned long (*stubcuda_flush_count_fn)(void);
/* Calls of one driver function, by exported name ("cuMemcpyDtoHAsync_v2"); NULL: all
 * driver calls together. Test-API calls are not counted. Calls made by the stub
 * runtime inside one of its functions are not counted here but under
 * "cudart:<name>" ("cudart:cuMemAlloc_v2"; not part of the NULL total). */
typedef unsigned long (*stubcuda_call_count_fn)(const char *name);
/* Calls of one stub runtime function by name ("cudaMemcpy", "cudart_load"); NULL: all.
 * Kept by the driver, so counts survive a dlclose() of libcudart.so. */
typedef unsigned long (*stubcuda_rt_call_count_fn)(const char *name);
/* For the stub runtime only: brackets each runtime call (logs and counts `name`,
 * then driver calls on this thread count as the runtime's until the leave). */
typedef void (*stubcuda_rt_enter_fn)(const char *name);
typedef void (*stubcuda_rt_leave_fn)(void);

/* Where the CPU may read and write the device memory at p: with STUBCUDA_GUARD
 * the second mapping of its bytes, otherwise p itself (also for memory the stub
 * does not know). */
typedef void *(*stubcuda_host_view_fn)(const void *p);

#define STUBCUDA_SYM_MARK_DEVICE "stubcuda_mark_device"
#define STUBCUDA_SYM_MARK_DEVICE_ON "stubcuda_mark_device_on"
#define STUBCUDA_SYM_FAIL_COPIES "stubcuda_fail_copies"
#define STUBCUDA_SYM_CROSS_DEVICE_COUNT "stubcuda_cross_device_count"
#define STUBCUDA_SYM_UNMARK "stubcuda_unmark"
#define STUBCUDA_SYM_FLUSH_COUNT "stubcuda_flush_count"
#define STUBCUDA_SYM_CALL_COUNT "stubcuda_call_count"
#define STUBCUDA_SYM_RT_CALL_COUNT "stubcuda_rt_call_count"
#define STUBCUDA_SYM_HOST_VIEW "stubcuda_host_view"

#endif /* STUBCUDA_H */
