/* abi_v6.c - NCCL 2.13-2.18: int sizes, no device comms, no context. */
#include "abi/abi.h"
#include "util/util.h"

static ncclResult_t v6_get_properties(int dev, ncclNetProperties_v6_t *props)
{
	struct net_props p;
	int rc = net_get_properties(dev, &p);
	if (rc == 0)
		ABI_PROPS_V6(props, &p);
	return abi_result(rc);
}

UTIL_EXPORT const ncclNet_v6_t ncclNetPlugin_v6 = {
	.name = CORE_PLUGIN_NAME,
	.init = abi_init_legacy,
	.devices = abi_devices,
	.getProperties = v6_get_properties,
	.listen = abi_listen_legacy,
	.connect = abi_connect_v6,
	.accept = abi_accept,
	.regMr = abi_reg_mr_int,
	.regMrDmaBuf = abi_reg_mr_dmabuf,
	.deregMr = abi_dereg_mr,
	.isend = abi_isend_int,
	.irecv = abi_irecv_int,
	.iflush = abi_iflush,
	.test = abi_test,
	.closeSend = abi_close_send,
	.closeRecv = abi_close_recv,
	.closeListen = abi_close_listen,
};
