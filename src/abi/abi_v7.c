/* abi_v7.c - NCCL 2.19: v6 plus device-comm out-arguments and the device type. */
#include "abi/abi.h"

UTIL_EXPORT const ncclNet_v7_t ncclNetPlugin_v7 = {
	.name = CORE_PLUGIN_NAME,
	.init = abi_init_legacy,
	.devices = abi_devices,
	.getProperties = abi_get_properties_v7,
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
