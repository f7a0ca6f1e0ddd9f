/* abi_v9.c - NCCL 2.24-2.25: size_t isend/irecv sizes, virtual devices,
 * forceFlush and size limits in the properties. */
#include "abi/abi.h"

UTIL_EXPORT const ncclNet_v9_t ncclNetPlugin_v9 = {
	.name = CORE_PLUGIN_NAME,
	.init = abi_init_legacy,
	.devices = abi_devices,
	.getProperties = abi_get_properties_v9,
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
