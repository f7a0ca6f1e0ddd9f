/*
 * abi.h - what the per-version adapters share. Each NCCL version's table lives
 * in its own file (abi_vN.c, one per line of nccl/nccl_versions.h's list)
 * and only points at helpers; a difference that
 * several versions share is written once here:
 *   - v6..v9: no per-communicator context (init once, no finalize);
 *   - v6..v8: int sizes in regMr (v6/v7), isend and irecv;
 *   - v7+:    device-comm out-arguments (always "none" here);
 *   - v10:    profiler handles (ignored) and a comm config on connect;
 *   - properties: one internal struct, copied field by field.
 * Every entry returns abi_result() of the internal call: the one place an
 * internal -FI_* code becomes an ncclResult_t.
 */
#ifndef ABI_H
#define ABI_H

#include "nccl/nccl_versions.h"
#include "core/core.h"
#include "util/util.h"

/* 0 or a negative FI_* code (ofi/ofi.h, "Errors") as NCCL's result. */
ncclResult_t abi_result(int rc);

ncclResult_t abi_init_legacy(ncclDebugLogger_t logger);
ncclResult_t abi_listen_legacy(int dev, void *handle, void **listen_comm);
ncclResult_t abi_connect_v6(int dev, void *handle, void **send_comm);
ncclResult_t abi_connect_v7(int dev, void *handle, void **send_comm,
			    ncclNetDeviceHandle_t **send_dev_comm);
ncclResult_t abi_connect_v10(int dev, ncclNetCommConfig_t *config, void *handle,
			     void **send_comm, ncclNetDeviceHandle_t **send_dev_comm);
ncclResult_t abi_connect_v11(void *ctx, int dev, void *handle, void **send_comm,
			     ncclNetDeviceHandle_t **send_dev_comm);
ncclResult_t abi_accept_v7(void *listen_comm, void **recv_comm,
			   ncclNetDeviceHandle_t **recv_dev_comm);
ncclResult_t abi_reg_mr_int(void *comm, void *data, int size, int type, void **mhandle);
ncclResult_t abi_isend_int(void *send_comm, void *data, int size, int tag, void *mhandle,
			   void **request);
ncclResult_t abi_irecv_int(void *recv_comm, int n, void **data, int *sizes, int *tags,
			   void **mhandles, void **request);
ncclResult_t abi_isend_v10(void *send_comm, void *data, size_t size, int tag, void *mhandle,
			   void *phandle, void **request);
ncclResult_t abi_irecv_v10(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
			   void **mhandles, void **phandles, void **request);
ncclResult_t abi_init_v10(ncclDebugLogger_t logger, ncclProfilerCallback_t prof);
ncclResult_t abi_init_v11(void **ctx, uint64_t comm_id, ncclNetCommConfig_t *config,
			  ncclDebugLogger_t logger, ncclProfilerCallback_t prof);
/* Entries in the same form in every version that has them. */
ncclResult_t abi_devices(int *ndev);
ncclResult_t abi_listen(void *ctx, int dev, void *handle, void **listen_comm);
ncclResult_t abi_accept(void *listen_comm, void **recv_comm);
ncclResult_t abi_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle);
ncclResult_t abi_reg_mr_dmabuf(void *comm, void *data, size_t size, int type, uint64_t offset,
			       int fd, void **mhandle);
ncclResult_t abi_dereg_mr(void *comm, void *mhandle);
ncclResult_t abi_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
		       void **request);
ncclResult_t abi_irecv(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
		       void **mhandles, void **request);
ncclResult_t abi_iflush(void *recv_comm, int n, void **data, int *sizes, void **mhandles,
			void **request);
ncclResult_t abi_test(void *request, int *done, int *sizes);
ncclResult_t abi_close_send(void *send_comm);
ncclResult_t abi_close_recv(void *recv_comm);
ncclResult_t abi_close_listen(void *listen_comm);
ncclResult_t abi_finalize(void *ctx);

/* Fields every properties layout has (v6 onwards). */
#define ABI_PROPS_V6(dst, src)                          \
	do {                                            \
		(dst)->name = (char *)(src)->name;      \
		(dst)->pciPath = (char *)(src)->pci_path; \
		(dst)->guid = (src)->guid;              \
		(dst)->ptrSupport = (src)->ptr_support; \
		(dst)->speed = (src)->speed;            \
		(dst)->port = (src)->port;              \
		(dst)->latency = (src)->latency;        \
		(dst)->maxComms = (src)->max_comms;     \
		(dst)->maxRecvs = (src)->max_recvs;     \
	} while (0)

/* v7 added the device type. */
#define ABI_PROPS_V7(dst, src)                                                  \
	do {                                                                    \
		ABI_PROPS_V6(dst, src);                                         \
		(dst)->netDeviceType = (ncclNetDeviceType)(src)->net_device_type; \
		(dst)->netDeviceVersion = (src)->net_device_version;            \
	} while (0)

/* v8 added regIsGlobal. */
#define ABI_PROPS_V8(dst, src)                                   \
	do {                                                     \
		ABI_PROPS_V7(dst, src);                          \
		(dst)->regIsGlobal = (src)->reg_is_global;       \
	} while (0)

/* v9 added forceFlush, virtual devices and size limits. */
#define ABI_PROPS_V9(dst, src)                                   \
	do {                                                     \
		ABI_PROPS_V8(dst, src);                          \
		(dst)->forceFlush = (src)->force_flush;          \
		(dst)->vProps.ndevs = (src)->vdev_count;         \
		(dst)->vProps.devs[0] = (src)->vdevs[0];         \
		(dst)->maxP2pBytes = (src)->max_p2p_bytes;       \
		(dst)->maxCollBytes = (src)->max_coll_bytes;     \
	} while (0)

/* v11 added multi-requests. */
#define ABI_PROPS_V11(dst, src)                                               \
	do {                                                                  \
		ABI_PROPS_V9(dst, src);                                       \
		(dst)->maxMultiRequestSize = (src)->max_multi_request_size;   \
	} while (0)

/* v12 (the net and RMA tables of NCCL 2.30): v11's multi-requests, rail and plane ids. */
#define ABI_PROPS_V12(dst, src)                                               \
	do {                                                                  \
		ABI_PROPS_V11(dst, src);                                      \
		(dst)->railId = (src)->rail_id;                               \
		(dst)->planeId = (src)->plane_id;                             \
	} while (0)

/* For each version N of nccl_versions.h's list: its table, ncclNetPlugin_vN
 * (abi_vN.c; declared here so that a definition of another type does not
 * compile), and its getProperties, abi_get_properties_vN (abi_common.c), which
 * fills the version's properties layout P with ABI_PROPS_VP. A new properties
 * layout needs its ABI_PROPS_V macro above. */
#define ABI_DECLARE_VERSION_(N, P, ...)                                                  \
	extern UTIL_EXPORT const ncclNet_v##N##_t ncclNetPlugin_v##N;                    \
	ncclResult_t abi_get_properties_v##N(int dev, ncclNetProperties_v##P##_t *props);
NCCL_NET_VERSIONS(ABI_DECLARE_VERSION_)

#endif
