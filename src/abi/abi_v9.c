/* abi_v9.c - NCCL 2.24-2.25: size_t isend/irecv sizes, virtual devices,
 * forceFlush and size limits in the properties. */
#include "abi/abi.h"
#include "util/util.h"

static ncclResult_t v9_get_properties(int dev, ncclNetProperties_v9_t *props)
{
	struct fab_props p;
	ncclResult_t res = fab_net_get_properties(dev, &p);
	if (res == ncclSuccess)
		ABI_PROPS_V9(props, &p);
	return res;
}

FAB_EXPORT const ncclNet_v9_t ncclNetPlugin_v9 = {
	.name = FAB_PLUGIN_NAME,
	.init = abi_init_legacy,
	.devices = fab_net_devices,
	.getProperties = v9_get_properties,
	.listen = abi_listen_legacy,
	.connect = abi_connect_v7,
	.accept = abi_accept_v7,
	.regMr = fab_net_reg_mr,
	.regMrDmaBuf = fab_net_reg_mr_dmabuf,
	.deregMr = fab_net_dereg_mr,
	.isend = fab_net_isend,
	.irecv = fab_net_irecv,
	.iflush = fab_net_iflush,
	.test = fab_net_test,
	.closeSend = fab_net_close_send,
	.closeRecv = fab_net_close_recv,
	.closeListen = fab_net_close_listen,
	.getDeviceMr = NULL,
	.irecvConsumed = NULL,
	.makeVDevice = NULL, /* no NIC fusion: vProps = {1, {dev}} */
};
