/* abi_v6.c - NCCL 2.13-2.18: int sizes, no device comms, no context. */
#include "abi/abi.h"
#include "util/util.h"

static ncclResult_t v6_get_properties(int dev, ncclNetProperties_v6_t *props)
{
	struct fab_props p;
	ncclResult_t res = fab_net_get_properties(dev, &p);
	if (res == ncclSuccess)
		ABI_PROPS_V6(props, &p);
	return res;
}

FAB_EXPORT const ncclNet_v6_t ncclNetPlugin_v6 = {
	.name = FAB_PLUGIN_NAME,
	.init = abi_init_legacy,
	.devices = fab_net_devices,
	.getProperties = v6_get_properties,
	.listen = abi_listen_legacy,
	.connect = abi_connect_v6,
	.accept = fab_net_accept,
	.regMr = abi_reg_mr_int,
	.regMrDmaBuf = fab_net_reg_mr_dmabuf,
	.deregMr = fab_net_dereg_mr,
	.isend = abi_isend_int,
	.irecv = abi_irecv_int,
	.iflush = fab_net_iflush,
	.test = fab_net_test,
	.closeSend = fab_net_close_send,
	.closeRecv = fab_net_close_recv,
	.closeListen = fab_net_close_listen,
};
