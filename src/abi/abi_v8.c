/* abi_v8.c - NCCL 2.20-2.23: v7 with size_t regMr and regIsGlobal. */
#include "abi/abi.h"

UTIL_EXPORT const ncclNet_v8_t ncclNetPlugin_v8 = {
	.name = CORE_PLUGIN_NAME,
	.init = abi_init_legacy,
	.devices = abi_devices,
	.getProperties = abi_get_properties_v8,
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
