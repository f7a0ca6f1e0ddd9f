/* abi_v10.c - NCCL 2.26-2.27: profiler callback, comm config on connect,
 * profiler handles on isend/irecv. Properties as v9. */
#include "abi/abi.h"
#include "util/util.h"

static ncclResult_t v10_init(ncclDebugLogger_t logger, ncclProfilerCallback_t prof)
{
	(void)prof;
	return abi_init_legacy(logger);
}

static ncclResult_t v10_get_properties(int dev, ncclNetProperties_v9_t *props)
{
	struct net_props p;
	int rc = net_get_properties(dev, &p);
	if (rc == 0)
		ABI_PROPS_V9(props, &p);
	return abi_result(rc);
}

UTIL_EXPORT const ncclNet_v10_t ncclNetPlugin_v10 = {
	.name = CORE_PLUGIN_NAME,
	.init = v10_init,
	.devices = abi_devices,
	.getProperties = v10_get_properties,
	.listen = abi_listen_legacy,
	.connect = abi_connect_v10,
	.accept = abi_accept_v7,
	.regMr = abi_reg_mr,
	.regMrDmaBuf = abi_reg_mr_dmabuf,
	.deregMr = abi_dereg_mr,
	.isend = abi_isend_v10,
	.irecv = abi_irecv_v10,
	.iflush = abi_iflush,
	.test = abi_test,
	.closeSend = abi_close_send,
	.closeRecv = abi_close_recv,
	.closeListen = abi_close_listen,
	.getDeviceMr = NULL,
	.irecvConsumed = NULL,
	.makeVDevice = NULL,
};
