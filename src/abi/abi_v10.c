/* abi_v10.c - NCCL 2.26-2.27: profiler callback, comm config on connect,
 * profiler handles on isend/irecv. Properties as v9. */
#include "abi/abi.h"

UTIL_EXPORT const ncclNet_v10_t ncclNetPlugin_v10 = {
	.name = CORE_PLUGIN_NAME,
	.init = abi_init_v10,
	.devices = abi_devices,
	.getProperties = abi_get_properties_v10,
	.listen = abi_listen_legacy,
	.connect = abi_connect_v10,
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
};
