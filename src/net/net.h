/*
 * net.h - the plugin's one internal API. Every NCCL ABI version (abi/abi_vN.c)
 * is a thin adapter over these functions; they take the newest form of each
 * argument (size_t sizes, a context from init to finalize), and only those
 * the plugin acts on: NCCL's comm id, its traffic class and the context of
 * listen and connect stop at the adapters (every context shares one plugin
 * state, and no traffic class is set).
 *
 * Implemented by core/ (init, finalize, devices, properties) and proto/
 * (connections, memory registration, data). This header names only NCCL's
 * vocabulary (nccl/), so every layer may include it.
 */
#ifndef NET_H
#define NET_H

#include <stddef.h>
#include <stdint.h>

#include "nccl/nccl_net.h"

/* Properties at the newest layout; adapters copy the fields their version has. */
struct net_props {
	const char *name;
	const char *pci_path;
	uint64_t guid;
	int ptr_support;
	int reg_is_global;
	int force_flush;
	int speed;
	int port;
	float latency;
	int max_comms;
	int max_recvs;
	int net_device_type;
	int net_device_version;
	int vdev_count;
	int vdevs[1];
	size_t max_p2p_bytes;
	size_t max_coll_bytes;
	int max_multi_request_size;
	int16_t rail_id, plane_id;
};

/* Internal API: NCCL's semantics (see nccl/nccl_net.h), except that each
 * returns 0 or a negative FI_* code (ofi/ofi.h, "Errors"); abi_result() in
 * abi/abi_common.c makes that NCCL's ncclResult_t. */
int net_init(void **ctx, ncclDebugLogger_t logger);
int net_finalize(void *ctx);
int net_devices(int *ndev);
int net_get_properties(int dev, struct net_props *props);
int net_listen(int dev, void *handle, void **listen_comm);
int net_connect(int dev, void *handle, void **send_comm);
int net_accept(void *listen_comm, void **recv_comm);
int net_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle);
int net_reg_mr_dmabuf(void *comm, void *data, size_t size, int type, uint64_t offset,
			  int fd, void **mhandle);
int net_dereg_mr(void *comm, void *mhandle);
int net_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
		  void **request);
int net_irecv(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
		  void **mhandles, void **request);
int net_iflush(void *recv_comm, int n, void **data, int *sizes, void **mhandles,
		   void **request);
int net_test(void *request, int *done, int *sizes);
int net_close_send(void *send_comm);
int net_close_recv(void *recv_comm);
int net_close_listen(void *listen_comm);

#endif
