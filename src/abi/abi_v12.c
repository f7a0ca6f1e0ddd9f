/* abi_v12.c - NCCL 2.30: v11 with 8-entry vProps and rail/plane ids. */
#include "abi/abi.h"

UTIL_EXPORT const ncclNet_v12_t ncclNetPlugin_v12 = {
	.name = CORE_PLUGIN_NAME,
	.init = abi_init_v11,
	.devices = abi_devices,
	.getProperties = abi_get_properties_v12,
	.listen = abi_listen,
	.connect = abi_connect_v11,
	.accept = abi_accept_v7,
	.regMr = abi_reg_mr,
	.regMrDmaBuf = abi_reg_mr_dmabuf,
	.deregMr = abi_dereg_mr,
	.isend = abi_isend_v10,
	.irecv = abi_irecv_v10,
	.iflush = abi_iflush,
	.test = abi_test,
	.closeSend = abi_close_send,
	.closeRecv = abi_close_recv,
	.closeListen = abi_close_listen,
	.getDeviceMr = NULL,
	.irecvConsumed = NULL,
	.makeVDevice = NULL,
	.finalize = abi_finalize,
	.setNetAttr = NULL,
};
