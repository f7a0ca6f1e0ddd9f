/*
 * abi_rma.c - NCCL's RMA plugin tables (device-initiated networking, NCCL
 * 2.30): ncclRmaPlugin_v14, and _v13 for NCCL releases that look for that
 * one. Thin adapters over the internal RMA API (rma/rma.h).
 *
 * NCCL calls init once per communicator (a context each, like net v11+),
 * then devices(); 0 devices means "no RMA here" and NCCL moves on. Its RMA
 * proxy then calls listen, connect (collective, blocking; its first argument
 * is NCCL's net context, not ours, so it is not used), getProperties,
 * closeListen, createContext, the collective regMrSym per window, and from
 * its progress thread iput/iputSignal/iget/iflush, test and progress.
 */
#include "abi/abi.h"
#include "nccl/nccl_rma.h"
#include "rma/rma.h"
#include "util/util.h"

static ncclResult_t rma_abi_init(void **ctx, uint64_t comm_id, ncclDebugLogger_t logger)
{
	(void)comm_id;
	int rc = net_init(ctx, logger);
	int n = 0;
	if (rc == 0 && ctx && rma_devices(&n) == 0 && n == 0) {
		/* NCCL finalizes only an RMA plugin it uses: where devices() will
		 * say 0, no reference on the plugin context is kept (the reason is
		 * in the init log) */
		net_finalize(*ctx);
		*ctx = NULL;
	}
	return abi_result(rc);
}

static ncclResult_t rma_abi_devices(int *ndev)
{
	return abi_result(rma_devices(ndev));
}

static ncclResult_t rma_abi_get_properties(int dev, ncclNetProperties_v12_t *props)
{
	struct net_props p;
	int rc = rma_get_properties(dev, &p);
	if (rc == 0) {
		ABI_PROPS_V12(props, &p);
	}
	return abi_result(rc);
}

static ncclResult_t rma_abi_listen(void *ctx, int dev, void *handle, void **listen_comm)
{
	(void)ctx;
	return abi_result(rma_listen(dev, handle, listen_comm));
}

static ncclResult_t rma_abi_connect(void *ctx, void *handles[], int nranks, int rank,
				   void *listen_comm, void **coll)
{
	(void)ctx; /* NCCL passes its net context here */
	return abi_result(rma_connect(handles, nranks, rank, listen_comm, coll));
}

static ncclResult_t rma_abi_create_context_v14(void *coll, ncclRmaConfig_v14_t *config,
					       void **ctx)
{
	/* the traffic class is not set (as in the net API); every rank is
	 * reachable from the one endpoint, whatever the stride */
	return abi_result(rma_create_context(coll, config ? config->nContexts : 1, ctx));
}

static ncclResult_t rma_abi_create_context_v13(void *coll, ncclGinConfig_v13_t *config,
					       void **ctx, ncclNetDeviceHandle_t **dev_handle)
{
	if (dev_handle)
		*dev_handle = NULL; /* GIN_PROXY: no device-side handle */
	return abi_result(rma_create_context(coll, config ? config->nContexts : 1, ctx));
}

static ncclResult_t rma_abi_reg_v14(void *coll, void *data, size_t size, int type,
				    uint64_t flags, void **mhandle)
{
	return abi_result(rma_reg_sym(coll, data, size, type, flags, -1, 0, mhandle));
}

static ncclResult_t rma_abi_reg_dmabuf_v14(void *coll, void *data, size_t size, int type,
					   uint64_t offset, int fd, uint64_t flags, void **mhandle)
{
	return abi_result(rma_reg_sym(coll, data, size, type, flags, fd, offset, mhandle));
}

static ncclResult_t rma_abi_reg_v13(void *coll, void *data, size_t size, int type,
				    uint64_t flags, void **mhandle, void **gin_handle)
{
	if (gin_handle)
		*gin_handle = NULL;
	return abi_result(rma_reg_sym(coll, data, size, type, flags, -1, 0, mhandle));
}

static ncclResult_t rma_abi_reg_dmabuf_v13(void *coll, void *data, size_t size, int type,
					   uint64_t offset, int fd, uint64_t flags, void **mhandle,
					   void **gin_handle)
{
	if (gin_handle)
		*gin_handle = NULL;
	return abi_result(rma_reg_sym(coll, data, size, type, flags, fd, offset, mhandle));
}

static ncclResult_t rma_abi_dereg(void *coll, void *mhandle)
{
	return abi_result(rma_dereg_sym(coll, mhandle));
}

static ncclResult_t rma_abi_destroy_context(void *ctx)
{
	return abi_result(rma_destroy_context(ctx));
}

static ncclResult_t rma_abi_close_coll(void *coll)
{
	return abi_result(rma_close_coll(coll));
}

static ncclResult_t rma_abi_close_listen(void *listen_comm)
{
	return abi_result(rma_close_listen(listen_comm));
}

static ncclResult_t rma_abi_iput(void *ctx, int context, uint64_t src_off, void *src_mh,
				 size_t size, uint64_t dst_off, void *dst_mh, uint32_t rank,
				 void **request)
{
	return abi_result(
		rma_iput(ctx, context, src_off, src_mh, size, dst_off, dst_mh, rank, request));
}

static ncclResult_t rma_abi_iput_signal_v14(void *ctx, int context, uint64_t src_off,
					    void *src_mh, size_t size, uint64_t dst_off,
					    void *dst_mh, uint32_t rank, uint64_t sig_off,
					    void *sig_mh, uint64_t sig_value, uint32_t sig_op,
					    bool strong, void **request)
{
	return abi_result(rma_iput_signal(ctx, context, src_off, src_mh, size, dst_off, dst_mh,
					  rank, sig_off, sig_mh, sig_value, sig_op, strong,
					  request));
}

/* v13: every signal is strong */
static ncclResult_t rma_abi_iput_signal_v13(void *ctx, int context, uint64_t src_off,
					    void *src_mh, size_t size, uint64_t dst_off,
					    void *dst_mh, uint32_t rank, uint64_t sig_off,
					    void *sig_mh, uint64_t sig_value, uint32_t sig_op,
					    void **request)
{
	return abi_result(rma_iput_signal(ctx, context, src_off, src_mh, size, dst_off, dst_mh,
					  rank, sig_off, sig_mh, sig_value, sig_op, true,
					  request));
}

static ncclResult_t rma_abi_iget(void *ctx, int context, uint64_t remote_off, void *remote_mh,
				 size_t size, uint64_t local_off, void *local_mh, uint32_t rank,
				 void **request)
{
	return abi_result(rma_iget(ctx, context, remote_off, remote_mh, size, local_off,
				   local_mh, rank, request));
}

static ncclResult_t rma_abi_iflush(void *ctx, int context, void *mhandle, uint32_t rank,
				   void **request)
{
	return abi_result(rma_iflush(ctx, context, mhandle, rank, request));
}

static ncclResult_t rma_abi_test(void *coll, void *request, int *done)
{
	return abi_result(rma_test(coll, request, done));
}

static ncclResult_t rma_abi_progress(void *ctx)
{
	return abi_result(rma_progress(ctx));
}

static ncclResult_t rma_abi_query_last_error(void *ctx, bool *has_error)
{
	return abi_result(rma_query_last_error(ctx, has_error));
}

UTIL_EXPORT const ncclRma_v14_t ncclRmaPlugin_v14 = {
	.name = CORE_PLUGIN_NAME,
	.init = rma_abi_init,
	.devices = rma_abi_devices,
	.getProperties = rma_abi_get_properties,
	.listen = rma_abi_listen,
	.connect = rma_abi_connect,
	.createContext = rma_abi_create_context_v14,
	.regMrSym = rma_abi_reg_v14,
	.regMrSymDmaBuf = rma_abi_reg_dmabuf_v14,
	.deregMrSym = rma_abi_dereg,
	.destroyContext = rma_abi_destroy_context,
	.closeColl = rma_abi_close_coll,
	.closeListen = rma_abi_close_listen,
	.iput = rma_abi_iput,
	.iputSignal = rma_abi_iput_signal_v14,
	.iget = rma_abi_iget,
	.iflush = rma_abi_iflush,
	.test = rma_abi_test,
	.progress = rma_abi_progress,
	.queryLastError = rma_abi_query_last_error,
	.finalize = abi_finalize,
};

UTIL_EXPORT const ncclRma_v13_t ncclRmaPlugin_v13 = {
	.name = CORE_PLUGIN_NAME,
	.init = rma_abi_init,
	.devices = rma_abi_devices,
	.getProperties = rma_abi_get_properties,
	.listen = rma_abi_listen,
	.connect = rma_abi_connect,
	.createContext = rma_abi_create_context_v13,
	.regMrSym = rma_abi_reg_v13,
	.regMrSymDmaBuf = rma_abi_reg_dmabuf_v13,
	.deregMrSym = rma_abi_dereg,
	.destroyContext = rma_abi_destroy_context,
	.closeColl = rma_abi_close_coll,
	.closeListen = rma_abi_close_listen,
	.iput = rma_abi_iput,
	.iputSignal = rma_abi_iput_signal_v13,
	.iget = rma_abi_iget,
	.iflush = rma_abi_iflush,
	.test = rma_abi_test,
	.progress = rma_abi_progress,
	.queryLastError = rma_abi_query_last_error,
	.finalize = abi_finalize,
};
