/* abi_v9.c - NCCL 2.24-2.25: size_t isend/irecv sizes, virtual devices,
 * forceFlush and size limits in the properties. */
#include "abi/abi.h"
#include "util/util.h"

static ncclResult_t v9_get_properties(int dev, ncclNetProperties_v9_t *props)
{
	struct net_props p;
	int rc = net_get_properties(dev, &p);
	if (rc == 0)
		ABI_PROPS_V9(props, &p);
	return abi_result(rc);
}

UTIL_EXPORT const ncclNet_v9_t ncclNetPlugin_v9 = {
	.name = CORE_PLUGIN_NAME,
	.init = abi_init_legacy,
	.devices = abi_devices,
	.getProperties = v9_get_properties,
	.listen = abi_listen_legacy,
	.connect = abi_connect_v7,
	.accept = abi_accept_v7,
	.regMr = abi_reg_mr,
	.regMrDmaBuf = abi_reg_mr_dmabuf,
	.deregMr = abi_dereg_mr,
	.isend = abi_isend,
	.irecv = abi_irecv,
	.iflush = abi_iflush,
	.test = abi_test,
	.closeSend = abi_close_send,
	.closeRecv = abi_close_recv,
	.closeListen = abi_close_listen,
	.getDeviceMr = NULL,
	.irecvConsumed = NULL,
	.makeVDevice = NULL, /* no NIC fusion: vProps = {1, {dev}} */
};
