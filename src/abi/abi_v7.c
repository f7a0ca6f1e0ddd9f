/* abi_v7.c - NCCL 2.19: v6 plus device-comm out-arguments and the device type. */
#include "abi/abi.h"
#include "util/util.h"

static ncclResult_t v7_get_properties(int dev, ncclNetProperties_v7_t *props)
{
	struct net_props p;
	int rc = net_get_properties(dev, &p);
	if (rc == 0) {
		ABI_PROPS_V6(props, &p);
		props->netDeviceType = (ncclNetDeviceType)p.net_device_type;
		props->netDeviceVersion = p.net_device_version;
	}
	return abi_result(rc);
}

UTIL_EXPORT const ncclNet_v7_t ncclNetPlugin_v7 = {
	.name = CORE_PLUGIN_NAME,
	.init = abi_init_legacy,
	.devices = abi_devices,
	.getProperties = v7_get_properties,
	.listen = abi_listen_legacy,
	.connect = abi_connect_v7,
	.accept = abi_accept_v7,
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
	.getDeviceMr = NULL,   /* NULL: not supported (host-side network) */
	.irecvConsumed = NULL,
};
