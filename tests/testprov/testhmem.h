/*
 * testhmem: a test-only libfabric provider that advertises FI_HMEM over a real base
 * provider (tcp;ofi_rxm or shm) and forwards everything to it.
 *
 * Ownership: every wrapper object embeds the public fid struct first and holds the
 * base object it forwards to; children hold a reference on their parent (closing a
 * referenced parent returns -FI_EBUSY). The MR wrapper itself is the memory
 * descriptor handed to the caller (fi_mr_desc), so ops translate desc -> base desc.
 *
 * Modes (TESTHMEM_MODE, read at fi_domain):
 *   host  CUDA-registered buffers are host memory: registered underneath as
 *         FI_HMEM_SYSTEM; no CUDA call is ever made.
 *   cuda  CUDA-registered buffers are device memory: moved through host bounce
 *         buffers with the provider's own CUDA copies, each made on a private
 *         non-blocking stream of the primary context of the buffer's device (one
 *         per device, so one domain serves several GPUs); receives are copied to
 *         the device when their completion is read from the testhmem CQ. A copy
 *         that fails turns the operation's completion into an error completion
 *         (FI_EIO, prov_errno = the CUresult).
 */
#ifndef TESTHMEM_H
#define TESTHMEM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_collective.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <rdma/providers/fi_log.h>
#include <rdma/providers/fi_prov.h>

#define TH_PROV_NAME "testhmem"
#define TH_PROV_VERSION FI_VERSION(1, 0)
#define TH_NAME_MAX 64
#define TH_IOV_MAX 16

/* FI_OPT_CUDA_API_PERMITTED (libfabric 1.18) is an enum value the 1.17 headers lack */
#define TH_OPT_CUDA_API_PERMITTED 10

#define TH_HIDDEN __attribute__((visibility("hidden")))

#ifndef container_of
#define container_of(ptr, type, field) ((type *)((char *)(ptr) - offsetof(type, field)))
#endif

extern struct fi_provider th_prov TH_HIDDEN;

/* ---- configuration and log (th_prov.c) ---- */

enum th_mode { TH_MODE_HOST, TH_MODE_CUDA };

void th_base_name(char *buf, size_t len);
enum th_mode th_mode_from_env(void);
/* TESTHMEM_CQ_DATA_SIZE: remote CQ data offered (0: the base's), as a NIC with
 * fewer bytes of immediate data has (EFA, verbs: 4): entries say so, a hint
 * asking for more finds nothing, and only that many low bytes arrive. */
size_t th_cq_data_size_from_env(void);
/* ---- provider profiles (th_profile.c) ---- */

/* What a real provider reports and enforces (TESTHMEM_PROFILE). */
struct th_profile {
	const char *name;	 /* the TESTHMEM_PROFILE value */
	const char *prov;	 /* entries are named "<prov>;testhmem" */
	uint64_t caps;		 /* all it offers (FI_HMEM added when hinted) */
	uint64_t mode;		 /* required of the consumer */
	uint64_t mode_hinted;	 /* set only when the hints carry it */
	int mr_mode;		 /* required */
	int mr_mode_hinted;	 /* set only when the hints carry it */
	size_t mr_key_size;
	size_t cq_data_size;
	size_t inject_size;
	size_t max_msg_size;
	size_t msg_mtu;		 /* sends at most this (0: max_msg_size) */
	size_t iov_limit, rma_iov_limit;
	size_t size;		 /* tx and rx queue sizes reported */
	uint64_t msg_order;
	unsigned tag_bits;	 /* 0: no FI_TAGGED */
	const char *cuda_api;	 /* FI_OPT_CUDA_API_PERMITTED's answer */
	const char *writedata_env; /* writedata needs this variable set to 1 */
	int tag64_first;	 /* psm3: a tag64 entry without CQ data first */
};

/* TESTHMEM_PROFILE's profile, or NULL (pass-through). */
const struct th_profile *th_profile(void);
/* Appends to *tail the profile's entries for one base entry (none when the
 * hints ask for what the profile lacks). */
int th_profile_entries(const struct th_profile *p, const struct fi_info *hints,
		       struct fi_info *base_entry, struct fi_info ***tail);
/* TESTHMEM_RX_CQ_DATA=required: the profile's FI_RX_CQ_DATA (efa-direct on a
 * device without unsolicited write receives) is required, and enforced. */
int th_profile_rx_cq_data(const struct th_profile *p);
/* Whether writedata may run (cxi: FI_CXI_ENABLE_WRITEDATA=1). */
int th_profile_writedata_ok(const struct th_profile *p);
/* Provider keys: a new one for the registration of [va, va+len), unique on the
 * host (0: the host's table is out of reach); forgotten at close; the
 * registration a key names (1), for the initiator's offset. */
uint64_t th_profile_key_new(const struct th_profile *p, uint64_t va, uint64_t len);
void th_profile_key_free(const struct th_profile *p, uint64_t key);
int th_profile_key_va(const struct th_profile *p, uint64_t key, uint64_t *va, uint64_t *len);

/* Appends one line to TESTHMEM_LOG (no-op when unset); one write() per line. */
void th_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* TESTHMEM_TRACE (read at fi_domain): 0 off, 1 a line per data operation, copy and
 * completion, 2 also a line before each CUDA call that may block, and -FI_EAGAIN
 * posts. */
int th_trace_level(void);
#define TH_TRACE(dom, level, ...)                                                  \
	do {                                                                       \
		if ((dom)->trace >= (level))                                       \
			th_log(__VA_ARGS__);                                       \
	} while (0)
const char *th_iface_name(enum fi_hmem_iface iface);

/* The base's fi_info for ours: FI_HMEM and FI_MR_HMEM taken out, the base named;
 * in cuda mode FI_SOURCE added (where caps are given), which the RMA emulation
 * needs to answer a read request, and FI_MR_VIRT_ADDR taken out: registrations
 * are addressed by offset (th_rma.c). */
struct fi_info *th_info_to_base(const struct fi_info *info, const char *base_name,
				enum th_mode mode);
/* Under a profile the base opens its own entry for the domain ours names
 * (our attributes are not the base's); else th_info_to_base. */
struct fi_info *th_base_entry(const struct fi_info *info, const char *base_name,
			      enum th_mode mode);

/* fid-level stubs shared by every object */
int th_no_bind(struct fid *fid, struct fid *bfid, uint64_t flags);
int th_no_control(struct fid *fid, int command, void *arg);
int th_no_ops_open(struct fid *fid, const char *name, uint64_t flags, void **ops,
		   void *context);
int th_no_tostr(const struct fid *fid, char *buf, size_t len);
int th_no_ops_set(struct fid *fid, const char *name, uint64_t flags, void *ops,
		  void *context);

/* ---- objects ---- */

struct th_fabric {
	struct fid_fabric fabric_fid;
	struct fid_fabric *base;
	char base_name[TH_NAME_MAX];
	atomic_int ref;
};

struct th_eq {
	struct fid_eq eq_fid;
	struct fid_eq *base;
	struct th_fabric *fabric;
	atomic_int ref;
};

enum th_iface_idx { TH_IF_SYSTEM, TH_IF_CUDA, TH_IF_COUNT };

struct th_counters {
	atomic_ulong regs;
	atomic_ulong sends;	 /* send-type posts (send, inject, senddata...) */
	atomic_ulong recvs;	 /* receive posts */
	atomic_ulong send_bytes; /* bytes posted for sending */
	atomic_ulong recv_bytes; /* receive buffer bytes posted */
	atomic_ulong injects;	 /* of the sends, injects */
	atomic_ulong reads;	 /* RMA reads into local buffers of this iface */
	atomic_ulong writes;	 /* RMA writes from local buffers of this iface */
	atomic_ulong rma_bytes;
};

struct th_cuda_dom; /* th_cuda.c */

struct th_domain {
	struct fid_domain domain_fid;
	struct fid_domain *base;
	struct th_fabric *fabric;
	atomic_int ref;
	unsigned id; /* 1, 2, ... in opening order, per process: "dom=" in the log */
	enum th_mode mode;
	uint64_t base_mr_mode;
	struct th_counters counts[TH_IF_COUNT];
	atomic_ulong bad_desc;	   /* desc not ours, or buffer outside its MR */
	atomic_ulong nodesc_cuda;  /* data op on a CUDA MR's memory without its desc */
	atomic_ulong copy_errors;  /* CUDA copies that failed (cuda mode) */
	atomic_ulong device_mismatch; /* attr->device.cuda was not the buffer's device */
	int trace;		   /* TESTHMEM_TRACE */
	uint64_t cq_data_mask;	   /* TESTHMEM_CQ_DATA_SIZE: the bytes of CQ data that arrive */
	pthread_mutex_t lock;	   /* cuda_mrs */
	/* Over shm every data call and CQ read of the domain's endpoints takes
	 * serial (recursive): libfabric 1.17's shm loses messages when one
	 * thread posts while another reads the CQ. The plugin serialises real
	 * shm itself, but it cannot see that our base is shm. */
	int serialize;
	pthread_mutex_t serial;
	struct th_mr *cuda_mrs;	   /* live CUDA-iface MRs, for address lookups */
	struct th_cuda_dom *cuda;  /* cuda mode only */
	struct th_rma_dom *rma;	   /* cuda mode only: remote RMA emulation (th_rma.c) */
	/* TESTHMEM_PROFILE, with the attributes of the entry the domain opened */
	const struct th_profile *profile;
	int mr_mode;		   /* the consumer's view */
	uint64_t tag_mask;	   /* tag bits a call may use */
	int tagged;		   /* FI_TAGGED offered */
	size_t ctx_bytes;	   /* FI_CONTEXT(2): bytes of the caller's context we own */
	size_t inject_size, msg_max, rma_max, iov_limit, rma_iov_limit;
	atomic_ulong rule_errors;  /* calls refused by a profile rule */
	/* virtual addresses reach a base that takes offsets: translated with
	 * the host's key table */
	int virt_xlate;
	/* the profile's queue depths (th_rules.c; 0: no limit), message and
	 * completion reordering (pseudo-random, seeded), FI_RX_CQ_DATA */
	size_t tx_depth, rx_depth;
	int reorder; /* TH_REORDER_* */
	uint64_t rng_seed;
	atomic_ulong rng_ctr;
	int rx_cq_data;
	/* TESTHMEM_BUSY_WRITES=N: every Nth RMA write that passes the rules is
	 * refused with -FI_EAGAIN, posting nothing (0: never) */
	unsigned busy_writes;
	atomic_ulong writes_seen;
	/* the base's own entry has FI_RX_CQ_DATA: its remote writes' contexts
	 * are receives the caller posted, passed on as they are */
	int base_rx_cq_data;
	pthread_mutex_t eps_lock; /* eps */
	struct th_ep *eps;	  /* open endpoints, for th_rules_progress */
	atomic_int deferred;	  /* endpoints holding a send or a notice back */
};

/* Around each data call and CQ read: one at a time over shm (serialize). */
static inline void th_serial_enter(struct th_domain *dom)
{
	if (dom->serialize)
		pthread_mutex_lock(&dom->serial);
}

static inline void th_serial_leave(struct th_domain *dom)
{
	if (dom->serialize)
		pthread_mutex_unlock(&dom->serial);
}

#define TH_MR_MAGIC 0x74686d656d4d5231ULL /* "thmemMR1" */

struct th_mr {
	struct fid_mr mr_fid;
	uint64_t magic;
	struct fid_mr *base;
	struct th_domain *domain;
	enum fi_hmem_iface iface;
	int device;   /* attr->device.cuda */
	int cuda_dev; /* cuda mode: the buffer's device (its copies run there) */
	uint64_t access;
	size_t iov_count;
	struct iovec iov[TH_IOV_MAX];
	size_t len;
	/* cuda mode, remote access: host memory of len bytes registered with the
	 * base in place of the device memory (th_rma.c moves the bytes) */
	void *shadow;
	struct th_mr *next_cuda, *prev_cuda;
	/* profiles: the provider's key (freed at close), and FI_MR_ENDPOINT's
	 * registration waiting for its bind and enable */
	uint64_t prov_key;
	int pending, bound;
	uint64_t req_key, reg_flags;
};

struct th_av {
	struct fid_av av_fid;
	struct fid_av *base;
	struct th_domain *domain;
	atomic_int ref;
};

struct th_cntr {
	struct fid_cntr cntr_fid;
	struct fid_cntr *base;
	struct th_domain *domain;
	atomic_int ref;
};

#define TH_ERR_TEXT 192

/* An error completion the provider made itself (a failed CUDA copy). */
struct th_cq_err {
	struct th_cq_err *next;
	struct fi_cq_err_entry e;
	char text[TH_ERR_TEXT];
};

struct th_cq {
	struct fid_cq cq_fid;
	struct fid_cq *base;
	struct th_domain *domain;
	atomic_int ref;
	enum fi_cq_format format; /* the caller's */
	int translate;		  /* cuda mode: base CQ is TAGGED, entries rewritten */
	pthread_mutex_t err_lock; /* errs, err_text */
	struct th_cq_err *errs, *errs_tail;
	atomic_int nerrs;
	char err_text[TH_ERR_TEXT]; /* err_data of the last error entry we wrote */
	const void *err_data_ours;  /* where that err_data went (strerror knows it) */
	/* th_rules.c: the operations posted to endpoints bound to this CQ whose
	 * completion the consumer has not read yet (queue depths), and the
	 * completion held back (reordering) */
	pthread_mutex_t track_lock;
	struct th_track **track;
	pthread_mutex_t hold_lock;
	int held;
	struct fi_cq_tagged_entry held_ent; /* in the caller's format */
	fi_addr_t held_src;
};

/* Queues an error completion; fi_cq_read answers -FI_EAVAIL until it is read. */
int th_cq_push_err(struct th_cq *cq, const struct fi_cq_err_entry *e, const char *text);

struct th_ep {
	struct fid_ep ep_fid;
	struct fid_ep *base;
	struct th_domain *domain;
	struct th_cq *tx_cq, *rx_cq;
	struct th_av *av;
	struct th_cntr *cntrs[8];
	size_t ncntrs;
	struct th_eq *eq;
	int enabled;
	uint64_t tx_op_flags, rx_op_flags;
	int tx_selective, rx_selective;
	int p2p_set, p2p_value;
	int notes_posted; /* cuda mode: notice receives posted at enable (th_rma.c) */
	/* th_rules.c: posted and not yet read (under the CQ's track_lock), the
	 * send held back, notices of writes waiting for room */
	size_t tx_out, rx_out;
	pthread_mutex_t hold_lock;
	struct th_held *held;
	uint64_t held_ns;
	struct th_notice *notices, *notices_tail;
	struct th_ep *next_ep, *prev_ep;
};

static inline int th_mr_is_cuda(const struct th_mr *mr)
{
	return mr && mr->iface == FI_HMEM_CUDA;
}

/* th_domain.c */
int th_domain_open(struct fid_fabric *fabric, struct fi_info *info,
		   struct fid_domain **domain, void *context);
struct th_mr *th_domain_find_cuda(struct th_domain *dom, const void *buf, size_t len);
void th_count(struct th_domain *dom, const struct th_mr *mr, int is_recv, size_t bytes);

/* ---- profile rules that keep state (th_rules.c) ---- */

#define TH_REORDER_SENDS 1
#define TH_REORDER_COMPS 2

struct th_track;
struct th_held;
struct th_notice;

/* At fi_domain: queue depths, reordering, FI_RX_CQ_DATA from the profile and env. */
void th_rules_domain_init(struct th_domain *dom, const struct fi_info *info);
void th_rules_domain_fini(struct th_domain *dom);
void th_rules_ep_open(struct th_ep *ep);
void th_rules_ep_close(struct th_ep *ep);
void th_rules_cq_open(struct th_cq *cq);
void th_rules_cq_close(struct th_cq *cq);
/* An operation about to be posted whose completion the consumer will read (rx:
 * a receive): 1 counted, 0 not counted (no limit, no CQ), -FI_EAGAIN the queue
 * is full. th_q_undo takes a count back when the post then failed. */
int th_q_take(struct th_ep *ep, int rx, void *ctx, int multi);
void th_q_undo(struct th_ep *ep, int rx, void *ctx);
/* n entries in the caller's format handed to the consumer: their operations
 * leave the queues; one error entry likewise. */
/* The size of one entry of a CQ of this format (th_domain.c). */
size_t th_cq_entry_size(enum fi_cq_format format);
void th_q_done(struct th_cq *cq, const void *buf, ssize_t n);
void th_q_done_err(struct th_cq *cq, const struct fi_cq_err_entry *e);
/* fi_tx_size_left/fi_rx_size_left under a depth: what is left; -1 none. */
ssize_t th_q_left(struct th_ep *ep, int rx);
/* A send on a profile without ordering (host path): posted, or held back to
 * follow the next one. flags: the msg call's. */
ssize_t th_reorder_send(struct th_ep *ep, int tagged, const struct iovec *iov, void **desc,
			size_t count, fi_addr_t dest, uint64_t tag, uint64_t data,
			void *context, uint64_t flags);
/* Posts what was held back: all of it (force), or what waited long enough. */
void th_rules_progress(struct th_domain *dom, int force);
/* fi_cancel: a held send goes out first, so the base can cancel it. */
void th_rules_cancel(struct th_ep *ep, void *context);
/* CQ reads with completion reordering (the inner read is the unreordered one). */
typedef ssize_t (*th_cq_reader)(struct fid_cq *cq, void *buf, size_t count, fi_addr_t *src);
ssize_t th_cq_read_reorder(struct th_cq *cq, void *buf, size_t count, fi_addr_t *src,
			   th_cq_reader inner);
/* sread: a held completion is returned at once; 0 when none is held. */
ssize_t th_cq_take_held(struct th_cq *cq, void *buf, size_t count, fi_addr_t *src);
/* FI_RX_CQ_DATA: after a write with CQ data was posted, its notice (an empty
 * untagged message carrying the data and length) consumes a receive at the
 * target; th_rx_cq_data_rewrite makes the target's entry a remote write's. */
#define TH_NOTICE_MARK (1ULL << 63)
void th_notice_send(struct th_ep *ep, fi_addr_t dest, uint64_t data, size_t len);
void th_rx_cq_data_rewrite(struct th_cq *cq, void *buf, ssize_t n);
/* A peer's RMA at this target took no receive of the caller's: its entry says
 * op_context NULL, as a provider without FI_RX_CQ_DATA reports it (shm puts a
 * field of the peer's command there, left over from an earlier one). n base
 * entries in `format`, read before anything else looks at them; the notices'
 * entries that th_rx_cq_data_rewrite turns into writes keep their receive's. */
void th_remote_ctx_clear(struct th_domain *dom, enum fi_cq_format format, void *buf, ssize_t n);
void th_remote_ctx_clear_err(struct th_domain *dom, struct fi_cq_err_entry *e);
/* The pseudo-random choice: 1 in `one_in`. */
int th_rules_coin(struct th_domain *dom, unsigned one_in);

/* th_ep.c */
int th_endpoint_open(struct fid_domain *domain, struct fi_info *info, struct fid_ep **ep,
		     void *context);

/* th_prov.c: EQ */
int th_eq_open(struct fid_fabric *fabric, struct fi_eq_attr *attr, struct fid_eq **eq,
	       void *context);

/* ---- cuda mode (th_cuda.c) ---- */

enum th_op_kind { TH_OP_SEND, TH_OP_RECV, TH_OP_READ, TH_OP_WRITE };

struct th_bounce {
	void *buf;
	size_t cap;
	int pinned; /* cuMemAllocHost (freed with dev's context), else posix_memalign */
	int dev;
	struct fid_mr *mr; /* base registration when the base needs FI_MR_LOCAL */
	void *desc;
	int cls;
	struct th_bounce *next;	    /* free list of its size class */
	struct th_bounce *next_all; /* every buffer of the domain, freed at close */
};

/* A data operation on CUDA memory in flight in cuda mode. Its address is the
 * context the base provider sees; the fi_context2 first satisfies FI_CONTEXT(2). */
struct th_op {
	struct fi_context2 fi_ctx;
	enum th_op_kind kind;
	int in_use;
	int want_comp;
	void *user_ctx;
	const char *name; /* the caller's call ("trecv"), for the log */
	uint64_t tag;	  /* as posted (a receive completes with the sender's) */
	int dev;	  /* first CUDA device among the buffers */
	struct th_bounce *bounce;
	size_t len; /* bytes the bounce carries */
	size_t iov_count;
	struct iovec iov[TH_IOV_MAX]; /* caller's buffers */
	int iov_dev[TH_IOV_MAX];      /* device of each, -1: host memory */
	struct th_op *next_free;
	/* remote RMA (th_rma.c): base operations still to complete (the last one
	 * finishes the op), whether the caller already saw an error, the id the
	 * target pairs the parts by, and what a read posts once the target is ready */
	atomic_int parts;
	int reported;
	uint64_t id;
	struct th_ep *ep;
	fi_addr_t dest;
	struct fi_rma_iov remote;
	uint64_t base_flags;
	struct th_op *next_defer;
};

/* Why a copy failed: the CUresult and a sentence for fi_cq_strerror. */
struct th_copy_err {
	int result;
	char text[TH_ERR_TEXT];
};

int th_cuda_domain_init(struct th_domain *dom);
void th_cuda_domain_fini(struct th_domain *dom);
/* Registration of [p, p+len) pieces as CUDA memory: all device memory of one
 * device (found with cuPointerGetAttribute), whose context and stream it sets up.
 * attr_dev: attr->device.cuda. Returns 0 and the device, or -FI_EINVAL (logged). */
int th_cuda_reg_device(struct th_domain *dom, const struct iovec *iov, size_t count,
		       int attr_dev, int *dev);
const char *th_cuda_bounce_mode(const struct th_domain *dom);
int th_cuda_ndev(const struct th_domain *dom);
unsigned long th_cuda_ops_in_use(struct th_domain *dom);
struct th_op *th_op_get(struct th_domain *dom);
void th_op_put(struct th_domain *dom, struct th_op *op);
struct th_op *th_op_from_ctx(struct th_domain *dom, void *ctx);
struct th_op *th_op_find_user(struct th_domain *dom, void *user_ctx);
/* dev: the device the bounce serves (pinned bounces are allocated in its context) */
struct th_bounce *th_bounce_get(struct th_domain *dom, size_t len, int dev);
void th_bounce_put(struct th_domain *dom, struct th_bounce *b);
/* One copy between host memory and device memory of device dev, on that device's
 * stream with its primary context pushed. op/tag only name it in the log. Returns
 * 0, or -FI_EIO with *err filled (logged, counted in copy_errors). */
int th_cuda_copy(struct th_domain *dom, int dev, void *dst, const void *src, size_t n,
		 int to_dev, const char *op, uint64_t tag, struct th_copy_err *err);
/* Finishes a completed op: when `copy`, moves the len received bytes from the
 * bounce to the caller's buffers; then frees the bounce and the op. Returns 0, or
 * -FI_EIO with *err filled when a copy failed (the op is freed all the same). */
int th_op_finish(struct th_domain *dom, struct th_op *op, size_t len, int copy,
		 struct th_copy_err *err);
/* The op's index in the domain's table, and back (NULL: not an op in use). */
uint32_t th_op_index(struct th_domain *dom, const struct th_op *op);
struct th_op *th_op_at(struct th_domain *dom, uint32_t index);

/* ---- cuda mode: remote RMA into and out of device memory (th_rma.c) ---- */

/* The tag bit kept from the caller in cuda mode: notices travel with it. */
#define TH_NOTICE_TAG (1ULL << 63)

int th_rma_domain_init(struct th_domain *dom);
void th_rma_domain_fini(struct th_domain *dom);
/* Registration: the shadow of a CUDA MR that allows remote access (cuda mode),
 * to be registered with the base instead; NULL with *err when there is none to
 * be had (-FI_EOPNOTSUPP: the base addresses MRs by virtual address). */
void *th_rma_shadow_alloc(struct th_domain *dom, size_t len, int *err);
/* Endpoint: posts its notice receives (at enable); forgets it (before close). */
void th_rma_ep_enable(struct th_ep *ep);
void th_rma_ep_close(struct th_ep *ep);
/* Posts an RMA of op (bounce filled for a write) to dest's riov: the base write
 * with its notice, or the read request. Returns 0 or the base's error. */
ssize_t th_rma_post(struct th_ep *ep, struct th_op *op, int is_read, fi_addr_t dest,
		    const struct fi_rma_iov *riov, uint64_t data, int has_data, uint64_t flags);
/* Posts what waited for room (-FI_EAGAIN); each CQ read calls it first. */
void th_rma_progress(struct th_domain *dom);
/* A base completion: 0 not the emulation's (the caller handles it); 1 taken;
 * 2 taken, and *out is the completion the caller gets in its place. */
int th_rma_comp(struct th_cq *cq, const struct fi_cq_tagged_entry *e, fi_addr_t src,
		struct fi_cq_tagged_entry *out);
/* A base error completion: 0 not the emulation's; 1 taken (nothing for the
 * caller); 2 rewritten in place for the caller. */
int th_rma_comp_err(struct th_cq *cq, struct fi_cq_err_entry *e);

#endif /* TESTHMEM_H */
