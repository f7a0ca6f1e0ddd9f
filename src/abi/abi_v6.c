/* abi_v6.c - NCCL 2.13-2.18: int sizes, no device comms, no context. */
#include "abi/abi.h"

UTIL_EXPORT const ncclNet_v6_t ncclNetPlugin_v6 = {
	.name = CORE_PLUGIN_NAME,
	.init = abi_init_legacy,
	.devices = abi_devices,
	.getProperties = abi_get_properties_v6,
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
