/*
 * abi_common.c - argument translations shared by several NCCL versions, each
 * version's getProperties (from nccl/nccl_versions.h's list), and abi_result,
 * where an internal result becomes NCCL's.
 */
#include <string.h>

#include "abi/abi.h"
#include "log/log.h"

/*
 * The one place an internal result (0 or a negative FI_* code, ofi/ofi.h
 * "Errors") becomes NCCL's:
 *
 *   internal code                        what it means               NCCL is told
 *   0                                    done                        ncclSuccess
 *   -FI_EINVAL                           NCCL passed something the   ncclInvalidArgument
 *                                        plugin cannot take
 *   -FI_EMSGSIZE, -FI_ETRUNC             a message larger than the   ncclInvalidUsage
 *                                        receive posted for it
 *   -FI_ECONNRESET, -FI_ECONNREFUSED,    the peer is gone, refused,  ncclRemoteError
 *   -FI_ECONNABORTED, -FI_ENOTCONN,      cannot be reached or is
 *   -FI_EHOSTUNREACH, -FI_ENETUNREACH,   silent
 *   -FI_ETIMEDOUT, -FI_EIO
 *   -FI_EOPBADSTATE                      the plugin's own state      ncclInternalError
 *                                        contradicts itself (a bug)
 *   -OFI_ECUDA                           a CUDA driver call failed   ncclUnhandledCudaError
 *   anything else (-FI_ENOMEM,           libfabric or the system     ncclSystemError
 *   -FI_EOTHER, -FI_ECANCELED, ...)      failed
 *
 * ncclInProgress is never returned: connect and accept return ncclSuccess
 * with no comm until their handshake is done.
 */
ncclResult_t abi_result(int rc)
{
	if (rc == 0)
		return ncclSuccess;
	switch (ofi_err_cause(rc)) { /* (the codes of each cause: ofi/ofi.h) */
	case OFI_CAUSE_ARGUMENT:
		return ncclInvalidArgument;
	case OFI_CAUSE_SIZE:
		return ncclInvalidUsage;
	case OFI_CAUSE_PEER:
		return ncclRemoteError;
	case OFI_CAUSE_BUG:
		return ncclInternalError;
	case OFI_CAUSE_CUDA:
		return ncclUnhandledCudaError;
	case OFI_CAUSE_OTHER:
		break;
	}
	return ncclSystemError;
}

ncclResult_t abi_init_legacy(ncclDebugLogger_t logger)
{
	/* v6..v10: one init per process and no finalize; the context lives until exit. */
	return abi_result(net_init(NULL, logger));
}

ncclResult_t abi_init_v10(ncclDebugLogger_t logger, ncclProfilerCallback_t prof)
{
	(void)prof; /* profiler events: not emitted yet */
	return abi_init_legacy(logger);
}

ncclResult_t abi_init_v11(void **ctx, uint64_t comm_id, ncclNetCommConfig_t *config,
			  ncclDebugLogger_t logger, ncclProfilerCallback_t prof)
{
	(void)comm_id; /* the plugin neither keys state on it nor sets a traffic class */
	(void)config;
	(void)prof;
	return abi_result(net_init(ctx, logger));
}

ncclResult_t abi_listen_legacy(int dev, void *handle, void **listen_comm)
{
	return abi_result(net_listen(dev, handle, listen_comm));
}

ncclResult_t abi_connect_v6(int dev, void *handle, void **send_comm)
{
	return abi_result(net_connect(dev, handle, send_comm));
}

ncclResult_t abi_connect_v7(int dev, void *handle, void **send_comm,
			    ncclNetDeviceHandle_t **send_dev_comm)
{
	if (send_dev_comm)
		*send_dev_comm = NULL; /* host-side network: no device comm */
	return abi_connect_v6(dev, handle, send_comm);
}

ncclResult_t abi_connect_v10(int dev, ncclNetCommConfig_t *config, void *handle,
			     void **send_comm, ncclNetDeviceHandle_t **send_dev_comm)
{
	(void)config; /* its traffic class is not acted on */
	if (send_dev_comm)
		*send_dev_comm = NULL;
	return abi_result(net_connect(dev, handle, send_comm));
}

ncclResult_t abi_connect_v11(void *ctx, int dev, void *handle, void **send_comm,
			     ncclNetDeviceHandle_t **send_dev_comm)
{
	(void)ctx; /* one plugin state for every context */
	if (send_dev_comm)
		*send_dev_comm = NULL;
	return abi_result(net_connect(dev, handle, send_comm));
}

ncclResult_t abi_accept_v7(void *listen_comm, void **recv_comm,
			   ncclNetDeviceHandle_t **recv_dev_comm)
{
	if (recv_dev_comm)
		*recv_dev_comm = NULL;
	return abi_result(net_accept(listen_comm, recv_comm));
}

ncclResult_t abi_reg_mr_int(void *comm, void *data, int size, int type, void **mhandle)
{
	if (size < 0) {
		*mhandle = NULL;
		LOG_WARN(NCCL_NET, "regMr: negative size %d", size);
		return abi_result(-FI_EINVAL);
	}
	return abi_result(net_reg_mr(comm, data, (size_t)size, type, mhandle));
}

ncclResult_t abi_isend_int(void *send_comm, void *data, int size, int tag, void *mhandle,
			   void **request)
{
	if (size < 0) {
		*request = NULL;
		LOG_WARN(NCCL_NET, "isend: negative size %d", size);
		return abi_result(-FI_EINVAL);
	}
	return abi_result(net_isend(send_comm, data, (size_t)size, tag, mhandle, request));
}

ncclResult_t abi_irecv_int(void *recv_comm, int n, void **data, int *sizes, int *tags,
			   void **mhandles, void **request)
{
	size_t wide[8];
	if (n < 1 || n > 8) {
		*request = NULL;
		LOG_WARN(NCCL_NET, "irecv: %d buffers requested", n);
		return abi_result(-FI_EINVAL);
	}
	for (int i = 0; i < n; i++) {
		if (sizes[i] < 0) {
			*request = NULL;
			LOG_WARN(NCCL_NET, "irecv: negative size %d", sizes[i]);
			return abi_result(-FI_EINVAL);
		}
		wide[i] = (size_t)sizes[i];
	}
	return abi_result(net_irecv(recv_comm, n, data, wide, tags, mhandles, request));
}

ncclResult_t abi_isend_v10(void *send_comm, void *data, size_t size, int tag, void *mhandle,
			   void *phandle, void **request)
{
	(void)phandle; /* profiler events: not emitted yet */
	return abi_result(net_isend(send_comm, data, size, tag, mhandle, request));
}

ncclResult_t abi_irecv_v10(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
			   void **mhandles, void **phandles, void **request)
{
	(void)phandles;
	return abi_result(net_irecv(recv_comm, n, data, sizes, tags, mhandles, request));
}

/* Entries in the same form in every table that has them: devices, accept,
 * regMrDmaBuf, deregMr, iflush, test and the closes from v6; regMr (size_t)
 * from v8; isend and irecv (size_t) from v9; listen with a context and
 * finalize from v11. */
ncclResult_t abi_devices(int *ndev)
{
	return abi_result(net_devices(ndev));
}

ncclResult_t abi_listen(void *ctx, int dev, void *handle, void **listen_comm)
{
	(void)ctx; /* one plugin state for every context */
	return abi_result(net_listen(dev, handle, listen_comm));
}

ncclResult_t abi_accept(void *listen_comm, void **recv_comm)
{
	return abi_result(net_accept(listen_comm, recv_comm));
}

ncclResult_t abi_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle)
{
	return abi_result(net_reg_mr(comm, data, size, type, mhandle));
}

ncclResult_t abi_reg_mr_dmabuf(void *comm, void *data, size_t size, int type, uint64_t offset,
			       int fd, void **mhandle)
{
	return abi_result(net_reg_mr_dmabuf(comm, data, size, type, offset, fd, mhandle));
}

ncclResult_t abi_dereg_mr(void *comm, void *mhandle)
{
	return abi_result(net_dereg_mr(comm, mhandle));
}

ncclResult_t abi_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
		       void **request)
{
	return abi_result(net_isend(send_comm, data, size, tag, mhandle, request));
}

ncclResult_t abi_irecv(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
		       void **mhandles, void **request)
{
	return abi_result(net_irecv(recv_comm, n, data, sizes, tags, mhandles, request));
}

ncclResult_t abi_iflush(void *recv_comm, int n, void **data, int *sizes, void **mhandles,
			void **request)
{
	return abi_result(net_iflush(recv_comm, n, data, sizes, mhandles, request));
}

ncclResult_t abi_test(void *request, int *done, int *sizes)
{
	return abi_result(net_test(request, done, sizes));
}

ncclResult_t abi_close_send(void *send_comm)
{
	return abi_result(net_close_send(send_comm));
}

ncclResult_t abi_close_recv(void *recv_comm)
{
	return abi_result(net_close_recv(recv_comm));
}

ncclResult_t abi_close_listen(void *listen_comm)
{
	return abi_result(net_close_listen(listen_comm));
}

ncclResult_t abi_finalize(void *ctx)
{
	return abi_result(net_finalize(ctx));
}

/* abi_get_properties_vN for every version N of the list: the internal
 * properties copied into the version's layout P (ABI_PROPS_VP, abi.h). */
#define ABI_GET_PROPERTIES_(N, P, ...)                                                    \
	ncclResult_t abi_get_properties_v##N(int dev, ncclNetProperties_v##P##_t *props)   \
	{                                                                                 \
		struct net_props p;                                                       \
		int rc = net_get_properties(dev, &p);                                     \
		if (rc == 0)                                                              \
			ABI_PROPS_V##P(props, &p);                                        \
		return abi_result(rc);                                                    \
	}
NCCL_NET_VERSIONS(ABI_GET_PROPERTIES_)
