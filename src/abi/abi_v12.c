/* abi_v12.c - NCCL 2.30: v11 with 8-entry vProps and rail/plane ids. */
#include "abi/abi.h"
#include "util/util.h"

static ncclResult_t v12_get_properties(int dev, ncclNetProperties_v12_t *props)
{
	struct fab_props p;
	ncclResult_t res = fab_net_get_properties(dev, &p);
	if (res == ncclSuccess) {
		ABI_PROPS_V9(props, &p);
		props->maxMultiRequestSize = p.max_multi_request_size;
		props->railId = p.rail_id;
		props->planeId = p.plane_id;
	}
	return res;
}

FAB_EXPORT const ncclNet_v12_t ncclNetPlugin_v12 = {
	.name = FAB_PLUGIN_NAME,
	.init = abi_init_v11,
	.devices = fab_net_devices,
	.getProperties = v12_get_properties,
	.listen = fab_net_listen,
	.connect = abi_connect_v11,
	.accept = abi_accept_v7,
	.regMr = fab_net_reg_mr,
	.regMrDmaBuf = fab_net_reg_mr_dmabuf,
	.deregMr = fab_net_dereg_mr,
	.isend = abi_isend_v10,
	.irecv = abi_irecv_v10,
	.iflush = fab_net_iflush,
	.test = fab_net_test,
	.closeSend = fab_net_close_send,
	.closeRecv = fab_net_close_recv,
	.closeListen = fab_net_close_listen,
	.getDeviceMr = NULL,
	.irecvConsumed = NULL,
	.makeVDevice = NULL,
	.finalize = fab_net_finalize,
	.setNetAttr = NULL,
};
