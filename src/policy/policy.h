/*
 * policy.h - provider selection and the GPU-memory policy, as pure functions.
 *
 * Inputs are plain data: the fi_info lists that discovery got back (one list per
 * attempt), the libfabric version, the settings, the answers of the probe
 * endpoint and what the CUDA driver reported. Outputs are a decision and its
 * reasons in words. Nothing here opens a fabric, reads the environment or logs:
 * discovery (ofi/) gathers the inputs, core/ logs the decision, and the tools
 * print the same reasons. tests/unit/test_policy.c runs it over synthetic lists.
 *
 * One file per decision, this header for all of them: policy_select.c (the
 * discovery plan, the provider and its devices), policy_hmem.c (GPU memory),
 * policy_rma.c (NCCL's RMA plugin), policy_rails.c, policy_path.c (how large
 * messages move), policy_eager.c (the eager limit); each provider's quirks are
 * policy_traits.c's.
 */
#ifndef POLICY_H
#define POLICY_H

#include <stdbool.h>
#include <stdint.h>

#include <rdma/fabric.h>

#include "cfg/cfg.h"
#include "policy/policy_traits.h"

#define POLICY_MAX_ATTEMPTS 24
#define POLICY_MAX_CANDS 256
#define POLICY_MAX_DEVS 32
#define POLICY_NAME_LEN 64
#define POLICY_REASON_LEN 320 /* the longest: a writes-only data path under FI_RX_CQ_DATA */

/* Option value of FI_OPT_CUDA_API_PERMITTED (libfabric >= 1.18). It is an enum
 * member, so its presence cannot be tested with #ifdef; the number is stable. */
#define POLICY_OPT_CUDA_API_PERMITTED 10

/* Mode bits the plugin honours: every request starts with a struct fi_context2,
 * the iov arrays its msg calls name live in the request (FI_ASYNC_IOV), and a
 * peer's RMA write with CQ data may take one of the untagged receives each
 * endpoint keeps posted for control messages (FI_RX_CQ_DATA: ofi_ep_progress
 * hands the write to its handler and posts that receive again, unread; only
 * the attempts that ask for RMA offer it). */
#define POLICY_SUPPORTED_MODE (FI_CONTEXT | FI_CONTEXT2 | FI_ASYNC_IOV | FI_RX_CQ_DATA)
/* mr_mode bits the plugin honours (registration in ofi/ofi_domain.c, and the
 * data path). */
#define POLICY_SUPPORTED_MR_MODE                                                              \
	(FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT |   \
	 FI_MR_HMEM)

/* ---- discovery plan (policy_select.c) ---- */

struct policy_attempt_plan {
	bool hmem;   /* FI_HMEM in caps, FI_MR_HMEM in mr_mode */
	bool remote; /* FI_REMOTE_COMM asked (else no locality bit: single-host providers answer) */
	bool rma;    /* FI_RMA|FI_READ asked for (used for flush and later protocols) */
	uint64_t caps;
	uint64_t mode;
	int mr_mode;
	uint32_t api_version;
	bool legacy; /* asked again at API 1.17 for providers built against older headers */
	bool notag;  /* FI_TAGGED left out: a provider without tags (efa-direct) carries
		      * every message as an RMA write after the CTS */
	char label[96];
};

/* The fi_getinfo calls to make, in order, for this libfabric version and these
 * settings. Returns how many were written.
 *
 * Every attempt asks for the newest API the plugin knows (up to 1.22; DMA-BUF
 * needs 1.20). libfabric 2.x skips a provider whose fi_version is lower than
 * the API asked for, so on a libfabric newer than 1.17 the same attempts are
 * made again at API 1.17: an external provider built against older headers is
 * still found, at the API it knows. */
int policy_plan(const struct cfg_values *cfg, uint32_t fi_version,
		    struct policy_attempt_plan plan[POLICY_MAX_ATTEMPTS]);

/* ---- provider and device selection (policy_select.c) ---- */

struct policy_attempt_result {
	struct policy_attempt_plan plan;
	int rc;                      /* fi_getinfo's return */
	const struct fi_info *infos; /* its list (owned by the caller) */
};

struct policy_cand {
	const struct fi_info *info;
	int attempt;
	char prov[POLICY_NAME_LEN];
	char domain[POLICY_NAME_LEN];
	char fabric[POLICY_NAME_LEN];
	bool hmem, remote, rma, loopback;
	bool template_entry; /* no interface: a bare entry libfabric lists for the provider */
	uint32_t api_version;  /* the API it was found at */
	unsigned tag_bits;
	int twins;       /* identical entries libfabric listed again */
	bool kept;
	char reason[POLICY_REASON_LEN];
};

struct policy_dev_choice {
	char name[POLICY_NAME_LEN];          /* unique, what NCCL sees */
	char domain[POLICY_NAME_LEN];
	const struct fi_info *hmem_info;  /* FI_HMEM entry of this domain, or NULL */
	const struct fi_info *host_info;  /* entry without FI_HMEM, or NULL */
	bool loopback;
};

struct policy_selection {
	bool ok;
	char reason[POLICY_REASON_LEN];  /* why this provider, or why none */
	char provider[POLICY_NAME_LEN];
	bool local_only;              /* the provider never reaches other hosts (shm) */
	bool has_hmem;                /* some device has an FI_HMEM entry */
	char names[POLICY_REASON_LEN];   /* how NCCL_FABRIC_PROVIDER's items were matched */
	int ncands;
	struct policy_cand cands[POLICY_MAX_CANDS];
	int ndevs;
	struct policy_dev_choice devs[POLICY_MAX_DEVS];
};

/* fi_version: the run-time libfabric's, for the providers' traits (ranking). */
int policy_select(const struct policy_attempt_result *attempts, int nattempts,
		      const struct cfg_values *cfg, uint32_t fi_version,
		      struct policy_selection *sel);

/* Tag bits a provider offers, from ep_attr->mem_tag_format. */
unsigned policy_tag_bits(uint64_t mem_tag_format);
#define POLICY_MIN_TAG_BITS 48

/* ---- GPU-memory decision (policy_hmem.c) ---- */

/* What the probe endpoint answered (filled by ofi/, an input here). */
struct policy_probe {
	bool attempted;            /* the provider has FI_HMEM: a probe endpoint was opened */
	bool opened;               /* it opened */
	char error[POLICY_REASON_LEN];/* why it did not */
	int cuda_api_permitted_rc; /* fi_setopt(FI_OPT_CUDA_API_PERMITTED, false) */
	int p2p_rc;                /* fi_getopt(FI_OPT_FI_HMEM_P2P) */
	int p2p;                   /* its value when p2p_rc == 0 */
};

/* What the CUDA driver reported (filled by cuda/, an input here). */
struct policy_cuda_info {
	bool driver;          /* libcuda.so.1 opened and initialized */
	int driver_version;
	int ngpus;
	bool dmabuf;          /* every GPU reports DMA-BUF support */
	bool gdr;             /* every GPU reports GPUDirect RDMA support */
	bool flush;           /* cuFlushGPUDirectRDMAWrites is available */
	bool writes_ordered;  /* every GPU orders GPUDirect RDMA writes for its own reads */
	char error[POLICY_REASON_LEN];
};

enum policy_hmem_verdict {
	POLICY_HMEM_NO_SETTING,     /* NCCL_FABRIC_HMEM=off */
	POLICY_HMEM_NO_PROVIDER,    /* provider has no FI_HMEM entry */
	POLICY_HMEM_NO_GPU,         /* no CUDA driver or no GPU */
	POLICY_HMEM_PROBE_FAILED,   /* the probe endpoint did not open */
	POLICY_HMEM_REFUSED,        /* auto, and the provider did not promise */
	POLICY_HMEM_NO_FLUSH,       /* GPU buffers could not be flushed: not used, with a WARN */
	POLICY_HMEM_PROMISED,       /* provider answered 0: used */
	POLICY_HMEM_FORCED,         /* force, provider did not promise: used, with a WARN */
	POLICY_HMEM_FORCE_REFUSED,  /* force, but the answer says it cannot work: host memory, WARN */
};

/* How iflush makes GPU-direct writes visible before NCCL reads them. */
enum policy_flush_method {
	POLICY_FLUSH_NONE,     /* host memory only: nothing to flush */
	POLICY_FLUSH_RMA_READ, /* an RDMA read of the received buffer (the NIC's writes land first) */
	POLICY_FLUSH_CUDA,     /* cuFlushGPUDirectRDMAWrites */
};

struct policy_hmem_decision {
	enum policy_hmem_verdict verdict;
	bool use_hmem;        /* GPU buffers go to the provider (NCCL_PTR_CUDA) */
	bool dmabuf;          /* NCCL_PTR_DMABUF */
	int ptr_support;      /* NCCL_PTR_* bits */
	int expected_cuda_rc; /* the answer every later endpoint must repeat */
	enum policy_flush_method flush;
	bool force_flush;     /* forceFlush: NCCL must call iflush even on Hopper */
	char flush_reason[POLICY_REASON_LEN];
	char answer[POLICY_REASON_LEN]; /* the provider's answer in words */
	char p2p[96];         /* its GPUDirect stance in words */
	char reason[512];     /* the decision in one sentence */
	char dmabuf_reason[POLICY_REASON_LEN];
	char nccl_effect[512];/* what NCCL will do with it */
	char remedy[512];     /* what the user can do, for this answer and libfabric version */
	char warning[512];    /* non-empty: must be logged as WARN */
};

const char *policy_flush_name(enum policy_flush_method m);
void policy_hmem(const struct policy_selection *sel, const struct policy_probe *probe,
		     const struct policy_cuda_info *cuda, const struct cfg_values *cfg,
		     uint32_t fi_version, struct policy_hmem_decision *out);

/* Words for a fi_setopt(FI_OPT_CUDA_API_PERMITTED) answer. What -FI_EINVAL
 * means depends on the libfabric version: from 1.18 on, libfabric's own CUDA
 * support answers it when it is not running. */
const char *policy_cuda_answer(int rc, uint32_t fi_version);
const char *policy_verdict_name(enum policy_hmem_verdict v);

/* ---- NCCL's RMA plugin, device-initiated networking (policy_rma.c) ---- */

/* How a strong signal is kept behind the put it follows. */
enum policy_rma_order {
	POLICY_RMA_ORDER_PROVIDER = 1, /* tx msg_order orders the signal behind the write
					* (FI_ORDER_WAW for atomics, FI_ORDER_SAW for messages) */
	POLICY_RMA_ORDER_FENCE = 2,    /* FI_FENCE: the signal is posted fenced */
	POLICY_RMA_ORDER_CHAIN = 3,    /* neither: the put asks for FI_DELIVERY_COMPLETE and
					* the signal is posted from its completion */
};

/* What the provider's RMA entry offers (filled by core from fi_info, an
 * input here): caps 0 when the provider has no such entry. */
struct policy_rma_caps {
	uint64_t caps;        /* FI_RMA, FI_ATOMIC, FI_MSG, FI_READ, FI_WRITE, FI_REMOTE_*, FI_FENCE */
	uint64_t msg_order;   /* tx_attr->msg_order */
	bool hmem;            /* the entry has FI_HMEM */
};

struct policy_rma_decision {
	bool offered;         /* devices() reports the devices; else 0 */
	bool gpu;             /* GPU windows (NCCL_PTR_CUDA); else host memory only */
	bool msg_signals;     /* no FI_ATOMIC: a signal is a message the target's plugin
			       * applies (host windows only) */
	enum policy_rma_order order;
	char reason[512];     /* offered or not, and why, in one sentence */
	char order_reason[POLICY_REASON_LEN];
	char warning[POLICY_REASON_LEN]; /* non-empty: logged as WARN */
};

/* mode: NCCL_FABRIC_RMA_PLUGIN (enum cfg_rma_plugin_mode); hmem: the
 * GPU-memory decision already taken. */
void policy_rma(int mode, const char *provider, const struct policy_rma_caps *caps,
		const struct policy_hmem_decision *hmem, struct policy_rma_decision *out);
const char *policy_rma_order_name(enum policy_rma_order o);

/* ---- rails (policy_rails.c) ---- */

/* Rails (endpoints per device) and progress threads. Pure: the CPUs, the
 * processes sharing them and the settings in; a choice and its reason out. */
#define POLICY_AUTO_RAILS_MAX 4
struct policy_rails_input {
	int ncpus;       /* CPUs this process may run on (its affinity) */
	int nprocs;      /* plugin processes on this host, this one included */
	const char *one_rail_why; /* auto opens one rail, for this reason (traits); NULL: several */
	int cfg_rails;   /* NCCL_FABRIC_RAILS: 0 auto, else the count */
	int threads_mode; /* NCCL_FABRIC_PROGRESS_THREADS: 0 auto, 1 on, 2 off */
};
struct policy_rails_choice {
	int rails;
	bool threads;
	char reason[POLICY_REASON_LEN];
};
void policy_rails(const struct policy_rails_input *in, struct policy_rails_choice *out);

/* ---- the data path (policy_path.c; policy_writes_fit: policy_select.c) ---- */

/* How messages above the eager limit move. Pure: the setting and the
 * provider's entry in; the choice and its reason out. RMA writes into the
 * buffer the receiver announced where the provider has FI_RMA with remote
 * writes and 4 bytes of remote CQ data or more (with 4, the receiver sums the
 * size from the write completions; where each write's CQ data takes a posted
 * receive, FI_RX_CQ_DATA, the control receives serve, each posted again
 * unread); else one tagged send after the clear-to-send. */
struct policy_data_path {
	bool rma;
	char reason[POLICY_REASON_LEN];
};
/* Whether an entry can carry messages as RMA writes with CQ data: the write
 * capabilities and 4 bytes of CQ data or more (FI_RX_CQ_DATA or not). */
bool policy_writes_fit(const struct fi_info *info);

/* An IP provider's bare entry (no address, its own name as domain): what
 * libfabric 2.x lists for native tcp when FI_REMOTE_COMM is asked for and
 * loopback is the only interface it may use. Discovery asks again for that
 * provider with POLICY_LOOPBACK_NODE as the source address, which lists its
 * loopback entry, so loopback gets the provider a real interface would. */
bool policy_is_template(const struct fi_info *info);
#define POLICY_LOOPBACK_NODE "127.0.0.1"
/* cfg_rma: NCCL_FABRIC_RMA; cfg_explicit: set in the environment (it then
 * overrides no_write_why, the traits' reason against writes by default);
 * cxi_writedata: FI_CXI_ENABLE_WRITEDATA's value (NULL: unset), without which
 * cxi has no writes with CQ data. */
void policy_data_path(bool cfg_rma, bool cfg_explicit, const char *no_write_why,
		      const char *provider, const struct fi_info *info, const char *cxi_writedata,
		      struct policy_data_path *out);

/* ---- the eager limit (policy_eager.c) ---- */

/* The eager limit: messages up to it are sent without waiting for the
 * receiver. auto (cfg_eager < 0): what the provider completes on its own
 * (traits->eager_default), so an eager send never holds NCCL's buffer until
 * a receive is posted. */
size_t policy_eager(const struct policy_traits *traits, long cfg_eager, char *reason,
		    size_t reason_len);

/* Early sends: how many messages above the eager limit, each of at most
 * *max bytes (cfg_max), a connection may send before their clear-to-send
 * arrives, at a time. cfg_sends < 0: auto (traits->early_sends). 0 where the
 * provider cannot take them (an explicit setting is then ignored, and the
 * reason says so) or where cfg_max is not above the eager limit. */
int policy_early(const struct policy_traits *traits, long cfg_sends, long cfg_max,
		 size_t eager_max, size_t *max, char *reason, size_t reason_len);

/* ---- one device's plan (policy_device.c) ---- */

/* One device's plan: what its data path reads, fixed at init, and why. Pure:
 * the entry its endpoints open with, the settings, the GPU-memory decision
 * and the host's CPUs in; the plan and its reasons out. The data path takes
 * the plan (proto_device_init); the reasons stay with the report. */
struct policy_device_input {
	const struct fi_info *info;   /* the entry the device's endpoints open with */
	const char *provider;         /* the selected provider's name */
	uint32_t fi_version;          /* the run-time libfabric's (traits) */
	const struct cfg_values *cfg;
	const struct policy_hmem_decision *hmem;
	bool gpu;                     /* GPU buffers go to this device */
	const char *cxi_writedata;    /* FI_CXI_ENABLE_WRITEDATA's value, NULL if unset */
	int ncpus, nprocs;            /* for automatic rails */
};
struct policy_device_plan {
	bool hmem;                    /* GPU buffers go to this device */
	bool writes_only;             /* no FI_TAGGED: every message, 0 bytes too, is an
				       * RMA write after its CTS (no eager, no tagged receive) */
	unsigned tag_bits;            /* the tag layout's width */
	bool rma;                     /* large messages as RMA writes */
	size_t eager_max;             /* NCCL_FABRIC_EAGER_MAX, or the provider's */
	int early_sends;              /* NCCL_FABRIC_EARLY_SENDS, or the provider's (0: none) */
	size_t early_max;             /* NCCL_FABRIC_EARLY_MAX */
	size_t stripe_min;            /* NCCL_FABRIC_STRIPE_MIN (0: no striping) */
	bool spread;                  /* NCCL_FABRIC_SPREAD: offer messages on the rails in turn */
	uint64_t timeout_ns;          /* NCCL_FABRIC_TIMEOUT */
	uint64_t peer_timeout_ns;     /* NCCL_FABRIC_PEER_TIMEOUT */
	int cq_batch;                 /* NCCL_FABRIC_CQ_BATCH */
	int flush;                    /* enum policy_flush_method, for GPU buffers */
	bool flush_rma;               /* GPU buffers flushed by an RDMA read */
	bool dmabuf;                  /* DMA-BUF registration offered */
	int expected_cuda_rc;         /* every endpoint must repeat the probe's CUDA answer */
	int nrails;                   /* endpoints to open */
	bool progress_threads;
	struct policy_rails_input rails_in; /* what chose them: again at open when auto */
};
struct policy_device_why {
	char data[POLICY_REASON_LEN];  /* how messages above the eager limit move */
	char eager[96];
	char early[POLICY_REASON_LEN]; /* messages above the eager limit before their CTS */
	char rails[POLICY_REASON_LEN];
};
void policy_device(const struct policy_device_input *in, struct policy_device_plan *plan,
		   struct policy_device_why *why);
/* ---- provider names (policy_select.c) ---- */

/* Provider-name matching for NCCL_FABRIC_PROVIDER. An item names a provider by
 * its full name ("tcp;ofi_rxm", "tcp"), in any case. An item that is no listed
 * provider's full name names the layered providers whose core or top it is
 * ("tcp" -> "tcp;ofi_rxm" on libfabric 1.x, which has no native tcp RDM
 * provider; "ofi_rxm" -> "verbs;ofi_rxm"). policy_name_matches answers the
 * first rule, ..._core the second. */
bool policy_name_matches(const char *item, const char *prov_name);
bool policy_name_matches_core(const char *item, const char *prov_name);

#endif
