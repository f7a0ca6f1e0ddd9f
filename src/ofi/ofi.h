/*
 * ofi.h - the plugin's libfabric resources and their owners.
 *
 *   ofi_domain   one per NCCL device: fabric + domain + MR cache + endpoints.
 *                Opened at the device's first listen/connect, closed at finalize.
 *   ofi_ep       one endpoint with its own CQ and AV, shared by every connection
 *                of the device (an endpoint costs tens of MB; a connection is a
 *                few hundred bytes of plugin state and a tag range).
 *   ofi_op       the context of every posted operation. Completions are demuxed
 *                through op->complete, so the endpoint needs no table of who
 *                posted what.
 *
 * Functions return 0 or a negative libfabric/errno code; each WARNs where the
 * failure is found, with fi_strerror text and advice.
 */
#ifndef OFI_H
#define OFI_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include "policy/policy.h"
#include "util/list.h"

#define OFI_ADDR_MAX 88 /* endpoint names that fit a listen handle (tcp: 16, shm: 18) */

struct ofi_ep;
struct ofi_op;

/* Called from ofi_ep_progress with the endpoint's CQ lock held, once per
 * completion. entry is NULL for an error completion, then err is set.
 * Must not call back into progress or close the endpoint. */
typedef void (*ofi_op_complete_fn)(struct ofi_op *op, const struct fi_cq_tagged_entry *entry,
				   const struct fi_cq_err_entry *err);

struct ofi_op {
	struct fi_context2 ctx; /* first: providers with FI_CONTEXT(2) own this space */
	ofi_op_complete_fn complete;
	void *owner;
	struct ofi_ep *ep;      /* where it was posted (cancel goes there) */
	int index;
	atomic_int posted; /* 1 from posting until its completion: what close must cancel */
	struct ofi_mr *hold; /* the registration of the caller's buffer it uses, kept until
			      * its completion (NCCL's deregMr meanwhile is deferred) */
	bool bulk;           /* counted in its endpoint's bulk (ofi_ep_bulk_begin) */
};

/* ---- discovery (ofi_discover.c) ---- */

struct ofi_discovery {
	uint32_t runtime_version;  /* fi_version() */
	uint32_t build_version;    /* headers the plugin was built with */
	char runtime_path[256];    /* the libfabric.so.1 loaded ("?" when unknown) */
	int nattempts;
	struct policy_attempt_result attempts[POLICY_MAX_ATTEMPTS];
	struct policy_selection sel;
	struct policy_probe probe;
	/* A libfabric variable set for the selected provider (its traits'
	 * env_name), or kept as the environment set it: "" when none. */
	char env_note[POLICY_REASON_LEN];
	bool env_kept; /* the environment's value was kept: the quirk stays */
};

/* Runs the policy's plan through fi_getinfo and selects. Returns 0 when a
 * provider was selected, -FI_ENODATA when none (d->sel.reason says why). */
int ofi_discover(const struct cfg_values *cfg, struct ofi_discovery *d);
/* Opens a probe endpoint on info and records its FI_OPT_CUDA_API_PERMITTED and
 * FI_OPT_FI_HMEM_P2P answers. Closes everything it opened. */
void ofi_probe_run(const struct fi_info *info, struct policy_probe *probe);
void ofi_discovery_free(struct ofi_discovery *d);
/* The same provider, fabric and domain as info, asked again with caps added
 * (FI_DIRECTED_RECV, which nothing else needs and not every provider has):
 * a new entry the caller frees, or NULL when the provider lacks them. */
struct fi_info *ofi_info_with_caps(const struct fi_info *info, uint64_t caps);

/* ---- memory registrations (ofi_domain.c) and their cache (ofi_mr_cache.c) ---- */

struct ofi_mr {
	struct dlist link;         /* in the cache, sorted by start */
	uintptr_t start, end;      /* registered range (page-aligned for host memory) */
	enum fi_hmem_iface iface;
	int device;
	struct fid_mr *mr;
	void *desc;
	uint64_t key;
	/* the same range in each split rail's own domain, under the same key, so
	 * a peer writes into it on any rail (ofi_domain.split with RMA writes) */
	struct fid_mr *rail_mr[CFG_MAX_RAILS];
	int refs;                  /* guarded by the domain lock */
	struct ofi_domain *dom;
};

struct ofi_mr_cache {
	struct dlist mrs; /* sorted by start */
};

/* ---- domain (ofi_domain.c) ---- */

struct ofi_domain_attr {
	const struct fi_info *info; /* the entry to open (HMEM or host entry) */
	bool hmem;                  /* GPU buffers will be registered */
	bool flush_rma;             /* iflush reads GPU buffers back (needs a host page) */
	int expected_cuda_rc;       /* every endpoint must repeat the probe's answer */
	int nep;                    /* endpoints to open (>= 1): the rails */
	bool progress_threads;      /* one progress thread per endpoint */
	bool rma_write;             /* large messages may go as RMA writes */
	size_t buf_size;            /* bounce buffers' size (0: none) */
	bool random_keys;           /* registration keys drawn at random (RMA windows: a
				     * stale or guessed key then names no window) */
	int cq_batch;
	const char *name;           /* device name, for messages */
};

/* An object that receives messages under an id of the domain's id space (a
 * listen comm, a connector, a connection): the id travels in tags and in
 * remote CQ data, and any of the domain's endpoints finds its owner. */
struct ofi_obj {
	struct dlist link;
	uint32_t id;
	void *owner;
};

#define OFI_ID_BUCKETS 256

/* A registered host buffer of the domain's bounce size (ofi_buf_get). */
struct ofi_buf {
	struct ofi_buf *next;
	void *mem;
	void *desc;
};
struct ofi_buf_slab;

struct ofi_domain {
	struct fi_info *info;       /* our own copy */
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	pthread_mutex_t lock;       /* MR cache and key counter */
	struct ofi_mr_cache mrs;
	uint64_t next_key;
	bool random_keys;           /* ofi_domain_attr.random_keys */
	int mr_mode;
	bool hmem, rma;
	bool rma_write;             /* FI_WRITE|FI_REMOTE_WRITE and 4 or more bytes of remote CQ data */
	bool cq_data4;              /* ... only 4 of them: the size comes from the completions */
	struct policy_traits traits; /* the provider's quirks, computed at open */
	bool directed;              /* FI_DIRECTED_RECV: receives can name their source */
	int expected_cuda_rc;
	int cq_batch;
	char name[POLICY_NAME_LEN];
	int nep;
	/* rails: each connection takes one of them, its home rail, for all its
	 * messages (proto gives connections their home rails in turn) */
	struct ofi_ep *eps[CFG_MAX_RAILS];
	/* Rails after the first open their own fi_domain: a provider may
	 * serialise every call of a domain's endpoints under one lock, or
	 * progress them all from one engine (policy_traits.c, "split domains"),
	 * so rails of one domain never run in parallel. Only where the traits
	 * allow it (no local descriptors needed), without GPU memory, and with
	 * RMA writes only where the plugin picks the keys (no FI_MR_PROV_KEY):
	 * a registration is then repeated in each rail's domain under the same
	 * key (rail_mr). Descriptors are the first domain's; the other rails get
	 * none. */
	bool split;
	pthread_mutex_t zombie_lock;
	struct dlist zombies;       /* closed objects waiting for their last completion */
	_Atomic uint64_t zombie_check_ns; /* when progress looks at them again (coarse clock) */
	void *flush_page;           /* RDMA-read flushes land here (GPU memory only) */
	struct ofi_mr *flush_mr;
	pthread_mutex_t buf_lock;   /* bounce buffers */
	size_t buf_size;
	struct ofi_buf *buf_free;
	_Atomic(struct ofi_buf *) spill; /* ofi_buf_spill */
	bool rx_iov2;               /* receives take two iovs (ofi_ep_trecv_spill) */
	struct ofi_buf_slab *buf_slabs;
	pthread_mutex_t id_lock;    /* the id space below */
	struct dlist ids[OFI_ID_BUCKETS];
	uint32_t next_id;
	uint64_t id_rng;            /* ids are drawn at random (ofi_domain_register) */
	int nids;
};

/* Bounce buffers: registered host memory of buf_size bytes each, from slabs
 * that grow on demand and live until the domain closes. NULL when out of
 * memory (or buf_size is 0). */
struct ofi_buf *ofi_buf_get(struct ofi_domain *dom);
void ofi_buf_put(struct ofi_domain *dom, struct ofi_buf *b);
/* The domain's spill: one bounce buffer that receives write into and nobody
 * reads (ofi_ep_trecv_spill), shared by them all, so concurrent writes into
 * it do no harm. Taken on first use, kept until the domain closes; NULL when
 * out of memory (or buf_size is 0). */
struct ofi_buf *ofi_buf_spill(struct ofi_domain *dom);

/* Registers obj under a fresh id, unique among the domain's registered
 * objects, within mask and never 0. Returns the id, 0 when mask is exhausted.
 * Ids are drawn at random: another process cannot guess them, and a late
 * message for a closed object finds nobody rather than its successor. */
uint32_t ofi_domain_register(struct ofi_domain *dom, struct ofi_obj *obj, uint32_t mask,
			     void *owner);
void ofi_domain_unregister(struct ofi_domain *dom, struct ofi_obj *obj);
/* The owner registered under id, or NULL; caller holds dom->id_lock. */
void *ofi_domain_lookup_locked(struct ofi_domain *dom, uint32_t id);
int ofi_domain_nobjs(struct ofi_domain *dom);
/* Calls visit(owner, arg) for each registered object, under id_lock (visit
 * takes no lock of the plugin's). */
void ofi_domain_visit(struct ofi_domain *dom, void (*visit)(void *owner, void *arg), void *arg);

int ofi_domain_open(const struct ofi_domain_attr *attr, struct ofi_domain **out);
/* Reads what peers still send (a late CTS, a ping) until quiet_ns pass
 * without a completion, at most max_ns: a stream endpoint closed with unread
 * bytes resets its connections, and the peer loses what it has not read. */
void ofi_domain_drain(struct ofi_domain *dom, uint64_t quiet_ns, uint64_t max_ns);
void ofi_domain_close(struct ofi_domain *dom);

/* The cache's bookkeeping, apart from libfabric (ofi_mr_cache.c; unit-tested).
 * Callers hold the domain lock. */
void ofi_mr_cache_init(struct ofi_mr_cache *cache);
/* The range a registration of [addr, addr+len) covers: whole pages for host
 * memory, exact for device memory (rounding could leave the allocation). */
void ofi_mr_range(const void *addr, size_t len, enum fi_hmem_iface iface, size_t page,
		  uintptr_t *start, uintptr_t *end);
struct ofi_mr *ofi_mr_cache_find(struct ofi_mr_cache *cache, uintptr_t start, uintptr_t end,
				 enum fi_hmem_iface iface, int device);
void ofi_mr_cache_insert(struct ofi_mr_cache *cache, struct ofi_mr *mr);
void ofi_mr_cache_remove(struct ofi_mr *mr);
int ofi_mr_cache_count(const struct ofi_mr_cache *cache);

/* Registers [addr, addr+len) or takes a reference on a registration covering it.
 * device is the CUDA ordinal for FI_HMEM_CUDA. */
int ofi_mr_get(struct ofi_domain *dom, void *addr, size_t len, enum fi_hmem_iface iface,
	       int device, struct ofi_mr **out);
/* Same through a DMA-BUF file descriptor (FI_MR_DMABUF, libfabric >= 1.20). */
int ofi_mr_get_dmabuf(struct ofi_domain *dom, void *addr, size_t len, int fd, uint64_t offset,
		      int device, struct ofi_mr **out);
/* Drops the reference; the last one really deregisters. */
void ofi_mr_put(struct ofi_mr *mr);
/* An operation that uses the registered buffer takes a reference for its
 * lifetime (op->hold), so a deregMr while it is in flight only drops NCCL's
 * reference: the registration goes when the operation completes. */
static inline void ofi_op_hold(struct ofi_op *op, struct ofi_mr *mr);
static inline void ofi_op_release(struct ofi_op *op);
/* Registrations currently held (tests, the report). */
int ofi_mr_count(struct ofi_domain *dom);
void ofi_mr_ref(struct ofi_mr *mr);

static inline void ofi_op_hold(struct ofi_op *op, struct ofi_mr *mr)
{
	op->hold = mr;
	if (mr)
		ofi_mr_ref(mr);
}

static inline void ofi_op_release(struct ofi_op *op)
{
	struct ofi_mr *mr = op->hold;
	op->hold = NULL;
	ofi_mr_put(mr);
}

/* ---- endpoint (ofi_ep.c) ---- */

/* Called for each control message whose route (its first 8 bytes) matches
 * the pool's tag, with the endpoint's CQ lock held; tag is that route. The
 * buffer is re-posted when the handler returns. */
typedef void (*ofi_rx_handler_fn)(struct ofi_ep *ep, void *arg, const void *msg, size_t len,
				  uint64_t tag);
/* Called for each remote write with CQ data that lands on the endpoint (the
 * provider gives such completions no context of ours), CQ lock held. */
typedef void (*ofi_rw_handler_fn)(struct ofi_ep *ep, void *arg, uint64_t data, size_t len);

struct ofi_rx_pool;
struct ofi_drain;

/* Whether a tagged message that matched no receive belongs to someone who
 * will receive it (true), or is to be thrown away (ofi_ep_drain_start). */
typedef bool (*ofi_drain_keep_fn)(struct ofi_ep *ep, void *arg, uint64_t tag);

/* shm: what a peer's region must share with ours (ofi_shm.c). */
struct ofi_shm_self {
	bool valid;
	uint8_t version;
	off_t size;
};
int ofi_shm_self_init(struct ofi_shm_self *self, const void *name, size_t len);
/* Whether addr names a live process's region of this user, with our layout;
 * 0 and the process's pid and start time, or a negative code and why. */
int ofi_shm_check(const struct ofi_shm_self *self, const void *addr, size_t len, pid_t *pid,
		  uint64_t *start, char *why, size_t why_len);
/* Whether the process checked as (pid, start) has exited since. */
bool ofi_shm_gone(pid_t pid, uint64_t start);
/* Unlinks the regions under /dev/shm named with this process's pid that are
 * older than the process: a dead process's of the same pid left them (killed,
 * or _exit), and shm then fails our fi_enable with -FI_EBUSY. Returns how many. */
int ofi_shm_unlink_stale_own(void);
/* fi_enable, once more after -FI_EBUSY where the provider's addresses name
 * such regions (shm_region): shm removes the region it refused, and the
 * older ones of this pid are removed too (*stale: how many, for the log). */
int ofi_enable(struct fid_ep *ep, bool shm_region, int *stale);

struct ofi_ep {
	struct ofi_domain *dom;
	struct fid_ep *ep;
	struct fid_av *av;
	struct fid_cq *cq;
	pthread_mutex_t cq_lock;    /* one reader of the CQ at a time */
	pthread_mutex_t lock;       /* address cache */
	char name[OFI_ADDR_MAX];
	size_t namelen;
	int cuda_api_rc;            /* its FI_OPT_CUDA_API_PERMITTED answer */
	int index;
	/* peer address -> fi_addr_t, so a hundred connections to one peer insert it once */
	int naddrs, addrs_cap;
	struct ofi_peer_addr {
		size_t len;
		unsigned char bytes[OFI_ADDR_MAX];
		fi_addr_t fi_addr;
		bool silent;        /* left a close waiting for its answer (ofi_ep_peer_silent) */
		pid_t shm_pid;      /* shm: the process behind the address, checked, or 0 */
		uint64_t shm_start; /* ... and its start time, which a reused pid does not have */
	} *addrs;
	struct ofi_shm_self shm;    /* shm: our own region's layout (traits.shm_region) */
	pthread_t thread;           /* progress thread, when started */
	atomic_bool thread_run;
	bool has_thread, thread_busy;
	_Atomic uint64_t last_read_ns; /* when a thread last read the CQ */
	/* Operations moving large messages. A busy thread spins only while there
	 * are some: between bulk transfers NCCL's thread is the only one taking
	 * the provider's locks, so small messages pay no handoff to it. */
	atomic_int bulk;
	pthread_mutex_t wake_lock;  /* with wake: a sleeping thread learns of bulk work */
	pthread_cond_t wake;
#define OFI_EP_MAX_POOLS 3
	struct ofi_rx_pool *pools[OFI_EP_MAX_POOLS]; /* shared control receives, by start order */
	int npools;
	atomic_uint_fast64_t completions;
	atomic_int cq_errors;
	atomic_uint dropped;        /* malformed or forged messages and addresses refused */
	bool serialize;             /* traits.serialize: posts wait for CQ reads (cq_lock) */
	ofi_rw_handler_fn rw_fn;    /* remote writes with CQ data, or NULL */
	void *rw_arg;
	struct fid_domain *own_domain; /* a split rail's own domain (ofi_domain.split), or NULL */
	struct ofi_drain *drain;    /* the sweep of unexpected messages, or NULL */
	atomic_uint drained;        /* unexpected messages it threw away */
};

/* A registration's descriptor as this endpoint may use it: registrations
 * belong to the first domain, so a split rail gets none (split only where
 * none is needed). */
static inline void *ofi_ep_desc(const struct ofi_ep *ep, void *desc)
{
	return ep->own_domain ? NULL : desc;
}

/* Every libfabric data call goes through these, so the serialize trait is
 * applied in one place. cq_lock is recursive: completion callbacks post
 * while holding it. */
static inline void ofi_ep_enter(struct ofi_ep *ep)
{
	if (ep->serialize)
		pthread_mutex_lock(&ep->cq_lock);
}

static inline void ofi_ep_leave(struct ofi_ep *ep)
{
	if (ep->serialize)
		pthread_mutex_unlock(&ep->cq_lock);
}

static inline ssize_t ofi_ep_tsend(struct ofi_ep *ep, const void *buf, size_t len, void *desc,
				   fi_addr_t dest, uint64_t tag, void *ctx)
{
	ofi_ep_enter(ep);
	ssize_t rc = fi_tsend(ep->ep, buf, len, ofi_ep_desc(ep, desc), dest, tag, ctx);
	ofi_ep_leave(ep);
	return rc;
}

/* A control message, untagged: it lands in one of the endpoint's control
 * receives (ofi_ep_rx_pool_start), whose first 8 bytes, its route, pick the
 * pool that handles it. */
static inline ssize_t ofi_ep_send(struct ofi_ep *ep, const void *buf, size_t len, void *desc,
				  fi_addr_t dest, void *ctx)
{
	ofi_ep_enter(ep);
	ssize_t rc = fi_send(ep->ep, buf, len, ofi_ep_desc(ep, desc), dest, ctx);
	ofi_ep_leave(ep);
	return rc;
}

/* ... and the receives that take them (ofi_ep_rx_pool_start's buffers). */
static inline ssize_t ofi_ep_recv(struct ofi_ep *ep, void *buf, size_t len, void *desc,
				  void *ctx)
{
	ofi_ep_enter(ep);
	ssize_t rc = fi_recv(ep->ep, buf, len, ofi_ep_desc(ep, desc), FI_ADDR_UNSPEC, ctx);
	ofi_ep_leave(ep);
	return rc;
}

static inline ssize_t ofi_ep_trecv(struct ofi_ep *ep, void *buf, size_t len, void *desc,
				   fi_addr_t src, uint64_t tag, uint64_t ignore, void *ctx)
{
	ofi_ep_enter(ep);
	ssize_t rc = fi_trecv(ep->ep, buf, len, ofi_ep_desc(ep, desc), src, tag, ignore, ctx);
	ofi_ep_leave(ep);
	return rc;
}

/* A tagged receive into buf whose overflow goes to the domain's spill
 * (ofi_buf_spill) instead of being cut: a message up to len + buf_size bytes
 * arrives whole, its length shows whether it fit, and nothing is written
 * past buf. Two iovs (dom->rx_iov2); a zero-length buf takes the spill alone. */
static inline ssize_t ofi_ep_trecv_spill(struct ofi_ep *ep, void *buf, size_t len, void *desc,
					 const struct ofi_buf *spill, fi_addr_t src, uint64_t tag,
					 uint64_t ignore, void *ctx)
{
	struct iovec iov[2] = {{buf, len}, {spill->mem, ep->dom->buf_size}};
	void *descs[2] = {ofi_ep_desc(ep, desc), ofi_ep_desc(ep, spill->desc)};
	int first = len ? 0 : 1;
	ofi_ep_enter(ep);
	ssize_t rc = fi_trecvv(ep->ep, iov + first, descs + first, 2 - (size_t)first, src, tag,
			       ignore, ctx);
	ofi_ep_leave(ep);
	return rc;
}

static inline ssize_t ofi_ep_read(struct ofi_ep *ep, void *buf, size_t len, void *desc,
				  fi_addr_t src, uint64_t addr, uint64_t key, void *ctx)
{
	ofi_ep_enter(ep);
	ssize_t rc = fi_read(ep->ep, buf, len, ofi_ep_desc(ep, desc), src, addr, key, ctx);
	ofi_ep_leave(ep);
	return rc;
}

static inline ssize_t ofi_ep_writedata(struct ofi_ep *ep, const void *buf, size_t len, void *desc,
				       uint64_t data, fi_addr_t dest, uint64_t addr, uint64_t key,
				       void *ctx)
{
	ofi_ep_enter(ep);
	ssize_t rc = fi_writedata(ep->ep, buf, len, ofi_ep_desc(ep, desc), data, dest, addr, key, ctx);
	ofi_ep_leave(ep);
	return rc;
}

static inline void ofi_ep_cancel(struct ofi_ep *ep, void *ctx)
{
	ofi_ep_enter(ep);
	(void)fi_cancel(&ep->ep->fid, ctx);
	ofi_ep_leave(ep);
}

int ofi_ep_open(struct ofi_domain *dom, int index, struct ofi_ep **out);
/* Stops its progress thread and closes the endpoint; no completion is
 * delivered after this. */
void ofi_ep_close(struct ofi_ep *ep);
/* A peer that left a close waiting in vain for its answer is probably gone:
 * later closes to it do not wait again. Any answer from it clears the mark. */
void ofi_ep_peer_set_silent(struct ofi_ep *ep, fi_addr_t peer, bool silent);
bool ofi_ep_peer_silent(struct ofi_ep *ep, fi_addr_t peer);
/* Reads up to cq_batch completions and dispatches them. Returns the number read
 * (0 when another thread is already reading) or a negative error. */
int ofi_ep_progress(struct ofi_ep *ep);
/* Inserts a peer address (or finds it). The bytes come from another process:
 * they are checked for the domain's address format first (-FI_EINVAL, with a
 * WARN naming the reason, when they cannot be an address of it). */
int ofi_ep_resolve(struct ofi_ep *ep, const void *addr, size_t len, fi_addr_t *out);
/* Whether a resolved peer's process is known to have exited (shm only: its
 * process was checked at insertion). Posting to such a peer may hang in the
 * provider; tcp and others learn of a dead peer from their own errors. */
bool ofi_ep_peer_gone(struct ofi_ep *ep, fi_addr_t peer);
/* Providers over TCP sockets (traits.tcp_sockets): whether the peer's
 * endpoint address refuses a TCP connection, i.e. nothing listens there any
 * more (its process exited or closed the endpoint). A connection that is
 * accepted, or no answer within wait_ms (a host that is down), is no verdict. */
bool ofi_ep_peer_refused(struct ofi_ep *ep, fi_addr_t peer, unsigned wait_ms);

/* ---- progress thread (ofi_thread.c) ---- */

/* A thread that reads the endpoint's completions. busy: all the time, so
 * rails move data in parallel. Otherwise only when no other thread has for
 * OFI_EP_IDLE_NS: control messages (pings) are answered and a closed
 * connection drains while NCCL calls nothing on this endpoint. */
/* (Not much shorter: an idle read races with NCCL's posts, and a provider
 * with a thread-safety bug the traits do not know of (policy_traits.c,
 * "serialize") gets fewer chances to lose a message.) */
#define OFI_EP_IDLE_NS (50ULL * 1000000ULL)
int ofi_ep_start_progress_thread(struct ofi_ep *ep, bool busy);
/* op, about to be posted on op->ep, moves a large message: the endpoint's
 * busy thread (if any) reads its CQ until the last such operation ends. */
void ofi_ep_bulk_begin(struct ofi_op *op);
/* Bulk work expected on ep that no operation of ours posted there (a peer's
 * RMA writes landing): its progress thread stays busy until the drop. */
void ofi_ep_bulk_hold(struct ofi_ep *ep);
static inline void ofi_ep_bulk_drop(struct ofi_ep *ep)
{
	atomic_fetch_sub_explicit(&ep->bulk, 1, memory_order_release);
}
/* Ends what ofi_ep_bulk_begin started (nothing for other operations). */
static inline void ofi_ep_bulk_end(struct ofi_op *op)
{
	if (op->bulk) {
		op->bulk = false;
		ofi_ep_bulk_drop(op->ep);
	}
}

/* ---- a peer's TCP connections, reset by the kernel (ofi_sock.c) ---- */

#define OFI_SOCK_ARM_MAX 16
struct ofi_sock_armed {
	int n;
	struct {
		int fd;
		ino_t ino;
		bool table; /* armed: counted in the process's table */
		bool shut;  /* shut down by ofi_sock_shut */
	} s[OFI_SOCK_ARM_MAX];
};
/* Providers over TCP sockets (traits.tcp_sockets): sets TCP_USER_TIMEOUT on
 * this process's sockets with bytes waiting to leave between our endpoint
 * (self_name) and the peer's, so that the kernel resets those connections
 * if nothing of it is acknowledged for timeout_ms. Names are FI_SOCKADDR_IN
 * or _IN6. Returns how many sockets armed holds, or a negative code;
 * called again with the same record, it also sets the new timeout on the
 * sockets armed before. */
int ofi_sock_arm(const void *self_name, size_t self_len, const void *peer_name,
		 size_t peer_len, unsigned timeout_ms, struct ofi_sock_armed *armed);
/* Lets go of the sockets ofi_sock_arm armed; the last holder of a socket
 * still open puts back the value it had. */
void ofi_sock_disarm(struct ofi_sock_armed *armed);
/* Shuts down (SHUT_RDWR) this process's TCP sockets connected to the
 * peer's endpoint address itself, whatever they hold: the provider then
 * drops that connection as when a peer leaves. Only sockets whose remote
 * address is the peer's name: one accepted from its host may be another
 * process's. Recorded in armed; returns how many sockets armed holds, or a
 * negative code. */
int ofi_sock_shut(const void *peer_name, size_t peer_len, struct ofi_sock_armed *armed);
/* How many of the recorded sockets still carry their connection: neither
 * reset by the kernel, shut down, nor closed by the provider. */
int ofi_sock_live(const struct ofi_sock_armed *armed);
/* 1 when a TCP connection to the endpoint name (FI_SOCKADDR_IN or _IN6) is
 * refused within wait_ms, 0 when it is accepted (then closed at once) or
 * nothing answers, a negative code when it cannot be tried. */
int ofi_sock_refused(const void *peer_name, size_t peer_len, unsigned wait_ms);
/* ofi_sock_arm between this endpoint and an inserted peer; with shut, also
 * ofi_sock_shut of the connection to its endpoint address. */
int ofi_ep_peer_arm_reset(struct ofi_ep *ep, fi_addr_t peer, unsigned timeout_ms, bool shut,
			  struct ofi_sock_armed *armed);

/* ---- peer addresses from the wire (ofi_addr.c; pure, unit-tested) ---- */

/* 0 when len bytes at addr can be an address of addr_format (socket family and
 * length, a terminated printable string, or any non-empty provider format up
 * to OFI_ADDR_MAX); else -FI_EINVAL with the reason in why. */
int ofi_addr_check(uint32_t addr_format, const void *addr, size_t len, char *why, size_t why_len);
const char *ofi_addr_format_name(uint32_t addr_format);

/* ---- control receive pools (ofi_pool.c) ---- */

/* Keeps count receives of size bytes posted with (tag, ignore); each message
 * goes to fn and its buffer is re-posted. For control messages addressed to
 * many objects (the tag carries the object's id); at most OFI_EP_MAX_POOLS
 * per endpoint, ep->pools[i] in start order. */
int ofi_ep_rx_pool_start(struct ofi_ep *ep, uint64_t tag, uint64_t ignore, int count,
			 size_t size, ofi_rx_handler_fn fn, void *arg);
/* Grows pool `index` (never shrinks it) to at least total receives, capped at
 * OFI_RX_POOL_MAX: the objects it serves grew. */
#define OFI_RX_POOL_MAX 16384
int ofi_ep_rx_pool_reserve(struct ofi_ep *ep, int index, int total);

/* ---- drain of unexpected messages (ofi_drain.c) ---- */

/* Drain: a data message that matches no posted receive stays in the provider
 * as an unexpected message until a receive takes it. One that no receive
 * ever will (a forged one, or one for a connection that closed before it
 * arrived) holds the provider's buffers for good: tcp;ofi_rxm keeps the
 * connection's receive buffers and credits, native tcp stops reading the
 * socket it came on (behind it, every later message of that peer). Every
 * OFI_DRAIN_NS the endpoint's progress walks its unexpected tagged messages
 * with FI_PEEK and drains each one keep says nobody takes (received into
 * a scratch buffer, or discarded unread above 4 MiB and above
 * traits.whole_max); messages of
 * owners that keep them (key: tag & key_mask, the bits that name the owner)
 * are stepped over by splitting the key space around them. A walk that found such messages is followed
 * by another at the next progress call (a flood is drained as fast as the
 * slices allow), one that found none by a pause of OFI_DRAIN_NS. Only where
 * traits.drain says the provider implements the peek. */
#define OFI_DRAIN_NS (100ULL * 1000000ULL)
/* ... and a sweep spends at most this long per progress call before it
 * yields to the caller (it goes on at the next call). */
#define OFI_DRAIN_SLICE_NS (2ULL * 1000000ULL)
int ofi_ep_drain_start(struct ofi_ep *ep, uint64_t key_mask, ofi_drain_keep_fn keep, void *arg);
/* (Such a message is taken by an ordinary receive of its tag into a scratch
 * buffer, as the provider takes any message: tcp;ofi_rxm keeps a discarded
 * segmented message's sender waiting and the connection's credits forever.
 * One above OFI_DRAIN_BUF_MAX is thrown away with FI_PEEK|FI_DISCARD.) */

/* Zombies: an object whose owner closed it while operations were still posted.
 * It stays linked on the domain until zombie->pending drops to zero (then the
 * progress of any of its endpoints frees it) or the domain closes. One with an
 * expire callback holds operations of its own that must not stay posted for
 * good (a closed receive's sink: each takes one of the provider's receive
 * entries): expire is called once, at expire_ns (coarse clock), or sooner
 * when such zombies hold more than OFI_ZOMBIE_TIMED_OPS operations (the
 * oldest first); it cancels them, and their completions then bring pending to
 * zero. Called with zombie_lock held and no CQ lock. */
#define OFI_ZOMBIE_TIMED_OPS 256
#define OFI_ZOMBIE_CHECK_NS 100000000ULL /* zombies looked at without completions */
struct ofi_zombie {
	struct dlist link;
	atomic_int *pending;        /* operations still posted */
	void (*release)(struct ofi_zombie *z);
	void (*expire)(struct ofi_zombie *z);
	uint64_t expire_ns;         /* 0: none */
	atomic_bool expired;
};
void ofi_domain_add_zombie(struct ofi_domain *dom, struct ofi_zombie *z);

/* The positive FI_* code of an error completion. libfabric documents err as
 * positive; some providers store it negated (policy_traits.c, "CQ error
 * sign"). */
static inline int ofi_cq_err_code(const struct fi_cq_err_entry *err)
{
	return err->err < 0 ? -err->err : err->err;
}

/*
 * Errors. Inside the plugin a failure is a negative FI_* code; abi_result()
 * (abi/abi_common.c) makes it NCCL's ncclResult_t at the ABI face, and only
 * there. The plugin picks these codes for causes of its own:
 *   -FI_EINVAL        NCCL handed it something it cannot take
 *   -FI_EMSGSIZE      a message larger than the receive posted for it
 *   -FI_ECONNABORTED, -FI_ECONNREFUSED, -FI_EHOSTUNREACH, -FI_ETIMEDOUT
 *                     the peer is gone, refused, cannot be reached, or is silent
 *   -FI_EOPBADSTATE   the plugin's own state contradicts itself (a bug)
 *   -OFI_ECUDA        a CUDA driver call failed
 * and a failed libfabric call or completion passes on libfabric's own code,
 * through ofi_err_sys or ofi_err_cq, which keep it from passing for one of
 * the causes above where NCCL was told something else before.
 */
/* The plugin's own code, above libfabric's range (FI_ERRNO_OFFSET..FI_ERRNO_MAX). */
#define OFI_ECUDA 4096

/* The cause a code stands for at the ABI face, the one list of them:
 * abi_result tells NCCL each apart, and ofi_err_sys and ofi_err_cq keep a
 * provider's code from passing for one. */
enum ofi_err_cause {
	OFI_CAUSE_OTHER = 0, /* libfabric or the system failed */
	OFI_CAUSE_ARGUMENT,  /* -FI_EINVAL */
	OFI_CAUSE_SIZE,      /* -FI_EMSGSIZE, -FI_ETRUNC */
	OFI_CAUSE_PEER,      /* the peer is gone, refused, unreachable or silent */
	OFI_CAUSE_BUG,       /* -FI_EOPBADSTATE */
	OFI_CAUSE_CUDA,      /* -OFI_ECUDA */
};

static inline enum ofi_err_cause ofi_err_cause(int rc)
{
	switch (-rc) {
	case FI_EINVAL:
		return OFI_CAUSE_ARGUMENT;
	case FI_EMSGSIZE:
	case FI_ETRUNC:
		return OFI_CAUSE_SIZE;
	case FI_ECONNRESET:
	case FI_ECONNREFUSED:
	case FI_ECONNABORTED:
	case FI_ENOTCONN:
	case FI_EHOSTUNREACH:
	case FI_ENETUNREACH:
	case FI_ETIMEDOUT:
	case FI_EIO:
		return OFI_CAUSE_PEER;
	case FI_EOPBADSTATE:
		return OFI_CAUSE_BUG;
	case OFI_ECUDA:
		return OFI_CAUSE_CUDA;
	default:
		return OFI_CAUSE_OTHER;
	}
}

/* The code to pass on where a libfabric or system call failed and NCCL is
 * told "system error": rc itself, unless rc is not negative or stands for a
 * cause of its own (ofi_err_cause); then -FI_EOTHER. (The WARN that reports
 * the failure names rc.) */
static inline int ofi_err_sys(int rc)
{
	return rc < 0 && ofi_err_cause(rc) == OFI_CAUSE_OTHER ? rc : -FI_EOTHER;
}

/* The code a failed completion leaves in its request, from err (positive
 * FI_*, ofi_cq_err_code): -err, so libfabric's reason reaches the ABI face (a
 * truncation or a lost peer keep their meaning there; a cancellation and the
 * rest are system errors), unless err is 0 or one of the causes the plugin
 * keeps for itself (a bad argument, a bug, CUDA); then -FI_EOTHER. */
static inline int ofi_err_cq(int err)
{
	if (err <= 0)
		return -FI_EOTHER;
	switch (ofi_err_cause(-err)) {
	case OFI_CAUSE_ARGUMENT:
	case OFI_CAUSE_BUG:
	case OFI_CAUSE_CUDA:
		return -FI_EOTHER;
	default:
		return -err;
	}
}

/* Text for a negative libfabric code (fi_strerror), or for -OFI_ECUDA. */
const char *ofi_strerror(int rc);
/* An error completion in words: libfabric's text and the provider's own. */
void ofi_cq_error_text(struct ofi_ep *ep, const struct fi_cq_err_entry *err, char *buf,
		       size_t len);

#endif
