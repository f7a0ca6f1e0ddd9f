/* abi_v8.c - NCCL 2.20-2.23: v7 with size_t regMr and regIsGlobal. */
#include "abi/abi.h"
#include "util/util.h"

static ncclResult_t v8_get_properties(int dev, ncclNetProperties_v8_t *props)
{
	struct net_props p;
	int rc = net_get_properties(dev, &p);
	if (rc == 0)
		ABI_PROPS_V8(props, &p);
	return abi_result(rc);
}

UTIL_EXPORT const ncclNet_v8_t ncclNetPlugin_v8 = {
	.name = CORE_PLUGIN_NAME,
	.init = abi_init_legacy,
	.devices = abi_devices,
	.getProperties = v8_get_properties,
	.listen = abi_listen_legacy,
	.connect = abi_connect_v7,
	.accept = abi_accept_v7,
	.regMr = abi_reg_mr,
	.regMrDmaBuf = abi_reg_mr_dmabuf,
	.deregMr = abi_dereg_mr,
	.isend = abi_isend_int,
	.irecv = abi_irecv_int,
	.iflush = abi_iflush,
	.test = abi_test,
	.closeSend = abi_close_send,
	.closeRecv = abi_close_recv,
	.closeListen = abi_close_listen,
	.getDeviceMr = NULL,
	.irecvConsumed = NULL,
};
