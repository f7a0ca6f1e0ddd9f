/*
 * plugin.h - the plugin's one internal API. Every NCCL ABI version (abi/abi_vN.c)
 * is a thin adapter over these functions; they take the newest form of each
 * argument (size_t sizes, a context, a traffic class).
 *
 * State: one refcounted plugin context lives from the first init to the last
 * finalize (v11+) or to process exit (v6-v10, which have no finalize). It holds
 * the settings (frozen), the discovery results, the GPU-memory decision and the
 * devices. Devices open their libfabric domain at first use.
 */
#ifndef CORE_PLUGIN_H
#define CORE_PLUGIN_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdatomic.h>
#include <stdio.h>

#include "nccl/nccl_net.h"
#include "cfg/cfg.h"
#include "ofi/ofi.h"
#include "policy/policy.h"
#include "proto/proto_tag.h"
#include "util/list.h"

#define CORE_PLUGIN_NAME "Fabric"
#define CORE_PLUGIN_VERSION "0.1.0"

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

struct proto_device {
	int index;
	struct policy_dev_choice choice;
	const struct fi_info *info;   /* the entry endpoints are opened with */
	struct fi_info *directed_info;/* info asked again with FI_DIRECTED_RECV (owned), or NULL */
	bool hmem;                    /* GPU buffers go to this device */
	struct net_props props;
	char pci_path[PATH_MAX];
	char speed_source[64];
	struct proto_tag_layout layout;
	uint64_t prov_hash;
	/* what the data path reads, fixed at init: no global lookups per message */
	size_t eager_max;             /* NCCL_FABRIC_EAGER_MAX */
	uint64_t timeout_ns;          /* NCCL_FABRIC_TIMEOUT */
	uint64_t peer_timeout_ns;     /* NCCL_FABRIC_PEER_TIMEOUT */
	int flush;                    /* enum policy_flush_method, for GPU buffers */
	bool dmabuf;                  /* DMA-BUF registration offered */
	const char *provider;         /* the selected provider's name (discovery's) */
	int cq_batch;                 /* NCCL_FABRIC_CQ_BATCH */
	bool rma_cfg;                 /* NCCL_FABRIC_RMA */
	bool flush_rma;               /* GPU buffers flushed by an RDMA read (needs a host page) */
	int expected_cuda_rc;         /* every endpoint must repeat the probe's CUDA answer */
	int nrails;                   /* endpoints to open (resolved from NCCL_FABRIC_RAILS) */
	bool progress_threads;
	char rails_reason[POLICY_REASON_LEN];
	char eager_reason[96];
	pthread_mutex_t open_lock;
	struct ofi_domain *dom;       /* NULL until first use */
	char open_error[POLICY_REASON_LEN];
};

struct core_plugin {
	int refs;
	struct cfg_values cfg;
	int cfg_invalid;
	struct ofi_discovery disc;
	struct policy_cuda_info cuda;
	struct policy_hmem_decision hmem;
	int ndevs;
	struct proto_device devs[POLICY_MAX_DEVS];
	void *libfabric_pin;
};

/* The live plugin context, or NULL outside init..finalize. */
struct core_plugin *core_plugin_get(void);

/* Internal API: NCCL's semantics (see nccl/nccl_net.h), except that each
 * returns 0 or a negative FI_* code (ofi/ofi.h, "Errors"); abi_result() in
 * abi/abi_common.c makes that NCCL's ncclResult_t. */
int net_init(void **ctx, uint64_t comm_id, int traffic_class, ncclDebugLogger_t logger);
int net_finalize(void *ctx);
int net_devices(int *ndev);
int net_get_properties(int dev, struct net_props *props);
int net_listen(void *ctx, int dev, void *handle, void **listen_comm);
int net_connect(void *ctx, int dev, int traffic_class, void *handle, void **send_comm);
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

/* The report behind nccl-fabric-info (core/report.c). */
int core_report_write(FILE *out, int flags); /* NCCL_FABRIC_REPORT_* */

#endif
