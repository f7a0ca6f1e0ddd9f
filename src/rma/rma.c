/*
 * rma.c - NCCL's RMA plugin over libfabric RMA and atomics: see rma.h.
 */
#include "rma/rma.h"

#include <pthread.h>
#include <sys/random.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fi_atomic.h>

#include "log/log.h"
#include "ofi/ofi.h"
#include "proto/proto.h"
#include "util/freelist.h"
#include "util/list.h"
#include "util/util.h"

#define RMA_COLL_MAGIC 0x43414d52U /* "RMAC" */
#define RMA_CTX_MAGIC 0x58414d52U  /* "RMAX" */
#define RMA_WIN_MAGIC 0x57414d52U  /* "RMAW" */
#define RMA_WIN_DEAD 0x44414d52U   /* deregistered: kept until closeColl, refused */
#define RMA_REQ_MAGIC 0x51414d52U
#define RMA_RING_TAG 0x52 /* the ring's all-gathers: one tag, FIFO per tag */
/* Requests per context: NCCL keeps at most NCCL_NET_MAX_REQUESTS * maxRecvs
 * operations in flight per target rank, plus its flushes. */
#define RMA_REQS_PER_RANK (NCCL_NET_MAX_REQUESTS * PROTO_MAX_RECVS + 4)
#define RMA_MAX_CONTEXTS 64
/* How long destroyContext waits for operations still posted. */
#define RMA_CLOSE_WAIT_NS (5ULL * 1000000000ULL)

static struct rma_device *rma_devs;
static int rma_ndevs;

void rma_devices_set(struct rma_device *devs, int ndevs)
{
	rma_devs = devs;
	rma_ndevs = devs ? ndevs : 0;
}

static struct rma_device *device_of(int dev, const char *what)
{
	if (!rma_devs || dev < 0 || dev >= rma_ndevs) {
		LOG_WARN(NCCL_NET, "RMA %s: no device %d (the plugin has %d)", what, dev, rma_ndevs);
		return NULL;
	}
	return &rma_devs[dev];
}

int rma_devices(int *ndev)
{
	if (!ndev)
		return -FI_EINVAL;
	int n = 0;
	for (int d = 0; d < rma_ndevs; d++)
		n += rma_devs[d].decision.offered;
	/* the verdict is the same for every device of the provider */
	*ndev = n == rma_ndevs ? n : 0;
	return 0;
}

int rma_get_properties(int dev, struct net_props *props)
{
	struct rma_device *d = device_of(dev, "getProperties");
	if (!d || !props)
		return -FI_EINVAL;
	int rc = net_get_properties(dev, props);
	if (rc)
		return rc;
	props->ptr_support = NCCL_PTR_HOST;
	if (d->decision.gpu)
		props->ptr_support |= NCCL_PTR_CUDA | (d->net->dmabuf ? NCCL_PTR_DMABUF : 0);
	/* NCCL's RMA proxy drives it (v13 refuses any other type) */
	props->net_device_type = NCCL_NET_DEVICE_GIN_PROXY;
	props->net_device_version = 0;
	props->max_recvs = PROTO_MAX_RECVS;
	return 0;
}

int rma_listen(int dev, void *handle, void **listen_comm)
{
	struct rma_device *d = device_of(dev, "listen");
	if (!d)
		return -FI_EINVAL;
	if (!d->decision.offered) {
		LOG_WARN(NCCL_NET, "RMA listen on device %d: the RMA plugin is not offered (%s)",
			 dev, d->decision.reason);
		return -FI_EOPNOTSUPP;
	}
	return net_listen(dev, handle, listen_comm);
}

int rma_close_listen(void *listen_comm)
{
	return net_close_listen(listen_comm);
}

/* ---------------- the group ---------------- */

struct rma_peer_win {
	uint64_t base; /* the address a put at offset 0 writes (VA, or offset in the MR) */
	uint64_t key;
	uint64_t size;
	uint64_t id;   /* names the window in signal messages (random, never 0) */
};

/* A signal as a message (policy: msg_signals), applied by the target's
 * plugin after checking it names a live host window and a word inside it. */
#define RMA_SIGNAL_ROUTE 0x5349474e414c0001ULL /* "SIGNAL", the pool's route */
struct rma_sig_msg {
	uint64_t route;
	uint64_t win_id;
	uint64_t offset;
	uint64_t value;
};

struct rma_coll;

struct rma_win {
	_Atomic uint32_t magic;
	struct rma_coll *coll;
	struct dlist link;
	char *data;
	size_t size;
	int type;
	uint64_t flags;
	uint64_t id;
	struct ofi_mr *mr;
	struct rma_peer_win *peers; /* nranks */
};

struct rma_coll {
	uint32_t magic;
	struct rma_device *dev;
	int rank, nranks;
	void *sc, *rc;                /* the ring: to rank+1, from rank-1 (net API comms) */
	pthread_mutex_t coll_lock;    /* one collective at a time */
	struct ofi_domain *dom;       /* owned: RMA traffic only */
	struct ofi_ep *ep;
	fi_addr_t *peers;             /* nranks, ourselves included (flushes, self puts) */
	bool virt;                    /* FI_MR_VIRT_ADDR: remote addresses are VAs */
	bool msg_signals;             /* signals are messages (policy_rma) */
	atomic_uint refused;          /* signal messages refused (forged or stale) */
	pthread_mutex_t win_lock;
	struct dlist wins;            /* every window until closeColl (dead ones too) */
	atomic_int contexts;
	atomic_int last_error;
};

enum rma_req_kind { RMA_REQ_PUT = 1, RMA_REQ_GET, RMA_REQ_FLUSH, RMA_REQ_NOP };

struct rma_ctx;

struct rma_req {
	uint32_t magic;
	struct rma_ctx *ctx;
	struct util_free_node free_node;
	enum rma_req_kind kind;
	atomic_bool in_use;
	struct ofi_op op[2];          /* data, signal */
	int nops;                     /* operations that end the request */
	atomic_int ncomplete;
	atomic_int status;
	/* a strong signal posted from the put's completion (POLICY_RMA_ORDER_CHAIN) */
	bool chain;
	atomic_bool sig_due;          /* the put completed, the signal is not yet posted */
	fi_addr_t sig_dest;
	uint64_t sig_addr, sig_key;
	uint64_t start_ns;            /* posted at */
	/* the data operation, kept so that test() can post it when the provider
	 * had no room at first (data_due): NCCL expects a request, never EAGAIN */
	bool is_read;
	void *lbuf;
	size_t len;
	struct ofi_mr *lmr;
	uint64_t raddr, rkey;
	fi_addr_t dest;
	bool signal_after;            /* a signal follows the data op (not chained) */
	atomic_bool data_due;
	struct ofi_mr *due_hold;      /* keeps lmr while data_due */
	bool abandoned;               /* test() gave up on it: the last completion frees it
				       * (both under the CQ lock) */
	uint64_t operand;             /* the signal's addend (registered) */
	struct rma_sig_msg sig_msg;   /* ... or its message (registered) */
	uint64_t scratch;             /* a flush reads into it (registered) */
};

struct rma_ctx {
	uint32_t magic;
	struct rma_coll *coll;
	int ncontexts;
	int nreqs;
	struct rma_req *reqs;
	struct ofi_mr *reqs_mr;       /* operands and scratch: FI_MR_LOCAL providers need it */
	struct util_freelist free;
	atomic_int posted;            /* operations handed to libfabric, not yet completed */
	atomic_int ndue;              /* requests with an operation waiting for room */
};

static void set_due(struct rma_req *r, atomic_bool *flag)
{
	atomic_store(flag, true);
	atomic_fetch_add(&r->ctx->ndue, 1);
}

static bool take_due(struct rma_req *r, atomic_bool *flag)
{
	if (!atomic_exchange(flag, false))
		return false;
	atomic_fetch_sub(&r->ctx->ndue, 1);
	return true;
}

static struct rma_coll *coll_from(void *p, const char *what)
{
	struct rma_coll *c = p;
	if (!c || c->magic != RMA_COLL_MAGIC) {
		LOG_WARN(NCCL_NET, "RMA %s: %p is not an RMA collective comm of this plugin", what,
			 p);
		return NULL;
	}
	return c;
}

static struct rma_ctx *ctx_from(void *p, int context, const char *what)
{
	struct rma_ctx *x = p;
	if (!x || x->magic != RMA_CTX_MAGIC) {
		LOG_WARN(NCCL_NET, "RMA %s: %p is not an RMA context of this plugin", what, p);
		return NULL;
	}
	if (context < 0 || context >= x->ncontexts) {
		LOG_WARN(NCCL_NET, "RMA %s: context %d out of range (0..%d)", what, context,
			 x->ncontexts - 1);
		return NULL;
	}
	return x;
}

/* ctx_from, and rank a rank of its group. */
static struct rma_ctx *ctx_rank_from(void *p, int context, uint32_t rank, const char *what)
{
	struct rma_ctx *x = ctx_from(p, context, what);
	if (x && rank >= (uint32_t)x->coll->nranks) {
		LOG_WARN(NCCL_NET, "RMA %s: rank %u out of range (%d ranks)", what, rank,
			 x->coll->nranks);
		return NULL;
	}
	return x;
}

/* A live window of coll: handles stay valid memory until closeColl, so a
 * deregistered one is recognised and refused rather than read after free. */
static bool in_window_u(uint64_t off, size_t len, uint64_t size)
{
	return off <= size && len <= size - off;
}

static struct rma_win *win_from(struct rma_coll *c, void *p, const char *what, const char *role)
{
	struct rma_win *w = p;
	if (!w) {
		LOG_WARN(NCCL_NET, "RMA %s: no %s window", what, role);
		return NULL;
	}
	uint32_t m = atomic_load_explicit(&w->magic, memory_order_acquire);
	if (m == RMA_WIN_DEAD && w->coll == c) {
		LOG_WARN(NCCL_NET, "RMA %s: the %s window %p was deregistered", what, role, p);
		return NULL;
	}
	if (m != RMA_WIN_MAGIC || w->coll != c) {
		LOG_WARN(NCCL_NET, "RMA %s: %p is not a %s window of this collective comm", what, p,
			 role);
		return NULL;
	}
	return w;
}

/* The ring's all-gather: `len` bytes of each rank into all[rank * len]. */
static int ring_allgather(struct rma_coll *c, const void *mine, void *all, size_t len)
{
	memcpy((char *)all + (size_t)c->rank * len, mine, len);
	if (c->nranks == 1)
		return 0;
	void *smr = NULL, *rmr = NULL;
	size_t total = len * (size_t)c->nranks;
	int rc = net_reg_mr(c->sc, all, total, NCCL_PTR_HOST, &smr);
	if (!rc)
		rc = net_reg_mr(c->rc, all, total, NCCL_PTR_HOST, &rmr);
	uint64_t deadline = util_now_ns() + c->dev->net->timeout_ns;
	for (int step = 0; !rc && step < c->nranks - 1; step++) {
		int sblk = (c->rank - step + c->nranks) % c->nranks;
		int rblk = (c->rank - step - 1 + c->nranks) % c->nranks;
		void *sreq = NULL, *rreq = NULL;
		void *rdata = (char *)all + (size_t)rblk * len;
		size_t rsize = len;
		int tag = RMA_RING_TAG;
		rc = net_irecv(c->rc, 1, &rdata, &rsize, &tag, &rmr, &rreq);
		while (!rc && !sreq) {
			rc = net_isend(c->sc, (char *)all + (size_t)sblk * len, len, tag, smr, &sreq);
			if (!rc && !sreq && util_now_ns() > deadline)
				rc = -FI_ETIMEDOUT;
		}
		int sdone = 0, rdone = 0, sizes[1];
		while (!rc && (!sdone || !rdone)) {
			if (!sdone)
				rc = net_test(sreq, &sdone, NULL);
			if (!rc && !rdone)
				rc = net_test(rreq, &rdone, sizes);
			if (!rc && rdone && (size_t)sizes[0] != len) {
				LOG_WARN(NCCL_NET, "RMA rank %d: an all-gather block of %d bytes "
					 "arrived, %zu expected: the ranks disagree on the group",
					 c->rank, sizes[0], len);
				rc = -FI_EINVAL;
			}
			if (!rc && util_now_ns() > deadline)
				rc = -FI_ETIMEDOUT;
		}
	}
	if (rc)
		LOG_WARN(NCCL_NET, "RMA rank %d of %d: all-gather over the ring failed: %s. A rank "
			 "did not take part or its process is gone",
			 c->rank, c->nranks, ofi_strerror(rc));
	if (smr)
		net_dereg_mr(c->sc, smr);
	if (rmr)
		net_dereg_mr(c->rc, rmr);
	return rc;
}

/* A signal message from a peer (CQ lock held): nothing in it is trusted. */
static void signal_handler(struct ofi_ep *ep, void *arg, const void *msg, size_t len,
			   uint64_t route)
{
	(void)ep;
	(void)route;
	struct rma_coll *c = arg;
	struct rma_sig_msg m;
	if (len != sizeof(m)) {
		atomic_fetch_add(&c->refused, 1);
		LOG_WARN_LIMITED(NCCL_NET, "RMA: a signal message of %zu bytes was refused", len);
		return;
	}
	memcpy(&m, msg, sizeof(m));
	struct rma_win *hit = NULL;
	pthread_mutex_lock(&c->win_lock);
	struct dlist *it;
	dlist_foreach(&c->wins, it) {
		struct rma_win *w = container_of(it, struct rma_win, link);
		if (w->id == m.win_id && atomic_load(&w->magic) == RMA_WIN_MAGIC) {
			hit = w;
			break;
		}
	}
	if (hit && hit->type == NCCL_PTR_HOST && !(m.offset & 7) && in_window_u(m.offset, 8, hit->size))
		__atomic_fetch_add((uint64_t *)(void *)(hit->data + m.offset), m.value,
				   __ATOMIC_RELEASE);
	pthread_mutex_unlock(&c->win_lock);
	if (!hit || hit->type != NCCL_PTR_HOST || (m.offset & 7) || !in_window_u(m.offset, 8, hit->size)) {
		atomic_fetch_add(&c->refused, 1);
		LOG_WARN_LIMITED(NCCL_NET, "RMA: a signal for %s (window id %#llx, offset %llu) was "
				 "refused, nothing written",
				 hit ? "a word outside its window" : "an unknown or deregistered window",
				 (unsigned long long)m.win_id, (unsigned long long)m.offset);
	}
}

struct rma_addr_blk {
	uint32_t len;
	unsigned char bytes[OFI_ADDR_MAX];
};

static void coll_free(struct rma_coll *c)
{
	if (c->sc)
		net_close_send(c->sc);
	if (c->rc)
		net_close_recv(c->rc);
	struct dlist *it, *nx;
	dlist_foreach_safe(&c->wins, it, nx) {
		struct rma_win *w = container_of(it, struct rma_win, link);
		if (w->mr)
			ofi_mr_put(w->mr);
		free(w->peers);
		free(w);
	}
	if (c->dom)
		ofi_domain_close(c->dom);
	free(c->peers);
	pthread_mutex_destroy(&c->coll_lock);
	pthread_mutex_destroy(&c->win_lock);
	c->magic = 0;
	free(c);
}

int rma_connect(void *handles[], int nranks, int rank, void *listen_comm, void **out)
{
	if (!out || !handles || nranks < 1 || rank < 0 || rank >= nranks) {
		LOG_WARN(NCCL_NET, "RMA connect: bad arguments (rank %d of %d)", rank, nranks);
		return -FI_EINVAL;
	}
	*out = NULL;
	struct proto_comm *lc = proto_comm_from(listen_comm, PROTO_LISTEN);
	if (!lc) {
		LOG_WARN(NCCL_NET, "RMA connect: %p is not a listen comm of this plugin", listen_comm);
		return -FI_EINVAL;
	}
	struct rma_device *d = device_of(lc->dev->index, "connect");
	if (!d)
		return -FI_EINVAL;
	if (!d->decision.offered || !d->info) {
		LOG_WARN(NCCL_NET, "RMA connect: not offered on device %s (%s)", d->net->props.name,
			 d->decision.reason);
		return -FI_EOPNOTSUPP;
	}
	struct rma_coll *c = calloc(1, sizeof(*c));
	if (!c)
		return -FI_ENOMEM;
	c->magic = RMA_COLL_MAGIC;
	c->dev = d;
	c->rank = rank;
	c->nranks = nranks;
	pthread_mutex_init(&c->coll_lock, NULL);
	pthread_mutex_init(&c->win_lock, NULL);
	dlist_init(&c->wins);
	int rc = 0;
	c->peers = calloc((size_t)nranks, sizeof(*c->peers));
	if (!c->peers) {
		rc = -FI_ENOMEM;
		goto fail;
	}
	if (nranks > 1) {
		uint64_t deadline = util_now_ns() + d->net->timeout_ns;
		int next = (rank + 1) % nranks;
		while (!rc && (!c->sc || !c->rc)) {
			if (!c->sc)
				rc = net_connect(lc->dev->index, handles[next], &c->sc);
			if (!rc && !c->rc)
				rc = net_accept(listen_comm, &c->rc);
			if (!rc && (!c->sc || !c->rc) && util_now_ns() > deadline) {
				LOG_WARN(NCCL_NET, "RMA connect: rank %d of %d made no ring with its "
					 "neighbours within NCCL_FABRIC_TIMEOUT", rank, nranks);
				rc = -FI_ETIMEDOUT;
			}
		}
		if (rc)
			goto fail;
	}
	struct ofi_domain_attr attr = {
		.info = d->info,
		.hmem = d->decision.gpu,
		.expected_cuda_rc = d->net->expected_cuda_rc,
		.nep = 1,
		.random_keys = true,
		.cq_batch = d->net->cq_batch,
		.name = d->net->props.name,
	};
	rc = ofi_domain_open(&attr, &c->dom);
	if (rc)
		goto fail;
	c->ep = c->dom->eps[0];
	c->virt = (c->dom->mr_mode & FI_MR_VIRT_ADDR) != 0;
	c->msg_signals = d->decision.msg_signals;
	if (c->msg_signals) {
		int n = RMA_REQS_PER_RANK * nranks;
		rc = ofi_ep_rx_pool_start(c->ep, RMA_SIGNAL_ROUTE, 0,
					  n < OFI_RX_POOL_MAX ? n : OFI_RX_POOL_MAX,
					  sizeof(struct rma_sig_msg), signal_handler, c);
		if (rc) {
			LOG_WARN(NCCL_NET, "RMA connect: posting the signal receives failed: %s",
				 ofi_strerror(rc));
			goto fail;
		}
	}
	struct rma_addr_blk mine, *all = calloc((size_t)nranks, sizeof(*all));
	if (!all) {
		rc = -FI_ENOMEM;
		goto fail;
	}
	memset(&mine, 0, sizeof(mine));
	mine.len = (uint32_t)c->ep->namelen;
	memcpy(mine.bytes, c->ep->name, c->ep->namelen);
	rc = ring_allgather(c, &mine, all, sizeof(mine));
	for (int r = 0; !rc && r < nranks; r++) {
		if (all[r].len == 0 || all[r].len > OFI_ADDR_MAX) {
			LOG_WARN(NCCL_NET, "RMA connect: rank %d sent an address of %u bytes", r,
				 all[r].len);
			rc = -FI_EINVAL;
			break;
		}
		rc = ofi_ep_resolve(c->ep, all[r].bytes, all[r].len, &c->peers[r]);
	}
	free(all);
	if (rc)
		goto fail;
	LOG_INFO(NCCL_INIT | NCCL_NET, "RMA: rank %d of %d connected on %s; strong signals: %s",
		 rank, nranks, d->net->props.name, d->decision.order_reason);
	*out = c;
	return 0;
fail:
	coll_free(c);
	return rc;
}

int rma_close_coll(void *p)
{
	struct rma_coll *c = coll_from(p, "closeColl");
	if (!c)
		return -FI_EINVAL;
	if (atomic_load(&c->contexts) > 0)
		LOG_WARN(NCCL_NET, "RMA closeColl: %d context(s) still open; their requests are "
			 "kept", atomic_load(&c->contexts));
	coll_free(c);
	return 0;
}

/* ---------------- windows ---------------- */

int rma_reg_sym(void *p, void *data, size_t size, int type, uint64_t flags, int fd,
		uint64_t offset, void **mhandle)
{
	struct rma_coll *c = coll_from(p, "regMrSym");
	if (!c || !mhandle)
		return -FI_EINVAL;
	*mhandle = NULL;
	if (type != NCCL_PTR_HOST && !(type == NCCL_PTR_CUDA && c->dev->decision.gpu)) {
		LOG_WARN(NCCL_NET, "RMA regMrSym: memory type %d is not offered on %s (%s)", type,
			 c->dev->net->props.name, c->dev->decision.reason);
		return -FI_EINVAL;
	}
	if (!data && size) {
		LOG_WARN(NCCL_NET, "RMA regMrSym: no buffer for %zu bytes", size);
		return -FI_EINVAL;
	}
	struct rma_win *w = calloc(1, sizeof(*w));
	struct rma_peer_win *all = calloc((size_t)c->nranks, sizeof(*all));
	if (!w || !all) {
		free(w);
		free(all);
		return -FI_ENOMEM;
	}
	w->coll = c;
	w->data = data;
	w->size = size;
	w->type = type;
	w->flags = flags;
	int rc = 0;
	uint64_t id = 0;
	while (!id)
		if (getrandom(&id, sizeof(id), GRND_NONBLOCK) != sizeof(id))
			id = util_now_ns() ^ (uint64_t)(uintptr_t)w;
	w->id = id;
	struct rma_peer_win mine = { 0, 0, size, id };
	if (size) {
		enum fi_hmem_iface iface = type == NCCL_PTR_CUDA ? FI_HMEM_CUDA : FI_HMEM_SYSTEM;
		/* No CUDA call here: libfabric finds the GPU from the address, so the
		 * ordinal is not looked up (device 0). */
		rc = fd >= 0 ? ofi_mr_get_dmabuf(c->dom, data, size, fd, offset, 0, &w->mr) :
			       ofi_mr_get(c->dom, data, size, iface, 0, &w->mr);
		if (!rc) {
			mine.key = w->mr->key;
			mine.base = c->virt ? (uint64_t)(uintptr_t)data :
					      (uint64_t)((uintptr_t)data - w->mr->start);
		}
	}
	/* Every rank takes part even when its own registration failed (a zero
	 * key and size mark it), so no rank waits for it forever. */
	pthread_mutex_lock(&c->coll_lock);
	int grc = ring_allgather(c, &mine, all, sizeof(mine));
	pthread_mutex_unlock(&c->coll_lock);
	if (!rc)
		rc = grc;
	for (int r = 0; !rc && r < c->nranks; r++)
		if (all[r].size != size)
			LOG_INFO(NCCL_NET, "RMA regMrSym: rank %d registered %llu bytes, we %zu: "
				 "puts to it are checked against its size",
				 r, (unsigned long long)all[r].size, size);
	if (rc) {
		if (w->mr)
			ofi_mr_put(w->mr);
		free(all);
		free(w);
		return rc;
	}
	w->peers = all;
	pthread_mutex_lock(&c->win_lock);
	dlist_insert_tail(&c->wins, &w->link);
	pthread_mutex_unlock(&c->win_lock);
	atomic_store_explicit(&w->magic, RMA_WIN_MAGIC, memory_order_release);
	*mhandle = w;
	return 0;
}

int rma_dereg_sym(void *p, void *mhandle)
{
	struct rma_coll *c = coll_from(p, "deregMrSym");
	if (!c)
		return -FI_EINVAL;
	struct rma_win *w = win_from(c, mhandle, "deregMrSym", "registered");
	if (!w)
		return -FI_EINVAL;
	uint32_t live = RMA_WIN_MAGIC;
	if (!atomic_compare_exchange_strong(&w->magic, &live, RMA_WIN_DEAD))
		return -FI_EINVAL;
	/* an operation in flight holds its own reference (ofi_op_hold) */
	struct ofi_mr *mr = w->mr;
	w->mr = NULL;
	ofi_mr_put(mr);
	return 0;
}

int rma_test_peer_window(void *mhandle, uint32_t rank, uint64_t *key, uint64_t *size)
{
	struct rma_win *w = mhandle;
	if (!w || atomic_load(&w->magic) != RMA_WIN_MAGIC || rank >= (uint32_t)w->coll->nranks)
		return -FI_EINVAL;
	*key = w->peers[rank].key;
	*size = w->peers[rank].size;
	return 0;
}

int rma_test_set_peer_id(void *mhandle, uint32_t rank, uint64_t id)
{
	struct rma_win *w = mhandle;
	if (!w || atomic_load(&w->magic) != RMA_WIN_MAGIC || rank >= (uint32_t)w->coll->nranks)
		return -FI_EINVAL;
	w->peers[rank].id = id;
	return 0;
}

unsigned rma_test_refused(void *coll)
{
	struct rma_coll *c = coll;
	return c && c->magic == RMA_COLL_MAGIC ? atomic_load(&c->refused) : 0;
}

bool rma_test_msg_signals(void *coll)
{
	struct rma_coll *c = coll;
	return c && c->magic == RMA_COLL_MAGIC && c->msg_signals;
}

int rma_test_set_peer_window(void *mhandle, uint32_t rank, uint64_t key, uint64_t size)
{
	struct rma_win *w = mhandle;
	if (!w || atomic_load(&w->magic) != RMA_WIN_MAGIC || rank >= (uint32_t)w->coll->nranks)
		return -FI_EINVAL;
	w->peers[rank].key = key;
	w->peers[rank].size = size;
	return 0;
}

/* ---------------- contexts and requests ---------------- */

int rma_create_context(void *p, int ncontexts, void **out)
{
	struct rma_coll *c = coll_from(p, "createContext");
	if (!c || !out)
		return -FI_EINVAL;
	*out = NULL;
	if (ncontexts < 1 || ncontexts > RMA_MAX_CONTEXTS) {
		LOG_WARN(NCCL_NET, "RMA createContext: %d contexts asked, 1..%d offered", ncontexts,
			 RMA_MAX_CONTEXTS);
		return -FI_EINVAL;
	}
	struct rma_ctx *x = calloc(1, sizeof(*x));
	if (!x)
		return -FI_ENOMEM;
	x->coll = c;
	x->ncontexts = ncontexts;
	x->nreqs = RMA_REQS_PER_RANK * c->nranks;
	size_t bytes = (sizeof(*x->reqs) * (size_t)x->nreqs + 4095) & ~(size_t)4095;
	x->reqs = aligned_alloc(4096, bytes);
	if (!x->reqs) {
		free(x);
		return -FI_ENOMEM;
	}
	memset(x->reqs, 0, sizeof(*x->reqs) * (size_t)x->nreqs);
	int rc = ofi_mr_get(c->dom, x->reqs, sizeof(*x->reqs) * (size_t)x->nreqs, FI_HMEM_SYSTEM,
			    0, &x->reqs_mr);
	if (rc) {
		free(x->reqs);
		free(x);
		return rc;
	}
	util_freelist_init(&x->free);
	for (int i = x->nreqs - 1; i >= 0; i--) {
		x->reqs[i].magic = RMA_REQ_MAGIC;
		x->reqs[i].ctx = x;
		util_freelist_push(&x->free, &x->reqs[i].free_node);
	}
	x->magic = RMA_CTX_MAGIC;
	atomic_fetch_add(&c->contexts, 1);
	*out = x;
	return 0;
}

int rma_destroy_context(void *p)
{
	struct rma_ctx *x = ctx_from(p, 0, "destroyContext");
	if (!x)
		return -FI_EINVAL;
	struct rma_coll *c = x->coll;
	/* Operations still posted write into our requests when they complete:
	 * wait for them, cancel what remains, and keep the requests (a WARN)
	 * rather than free memory a late completion may touch. */
	/* operations that never reached the provider are dropped */
	for (int i = 0; i < x->nreqs; i++) {
		struct rma_req *r = &x->reqs[i];
		if (take_due(r, &r->data_due)) {
			ofi_mr_put(r->due_hold);
			r->due_hold = NULL;
		}
		take_due(r, &r->sig_due);
	}
	uint64_t start = util_now_ns();
	bool cancelled = false;
	while (atomic_load(&x->posted) > 0) {
		ofi_ep_progress(c->ep);
		uint64_t waited = util_now_ns() - start;
		if (!cancelled && waited > RMA_CLOSE_WAIT_NS) {
			pthread_mutex_lock(&c->ep->cq_lock);
			for (int i = 0; i < x->nreqs; i++)
				for (int k = 0; k < 2; k++)
					if (atomic_load(&x->reqs[i].op[k].posted))
						ofi_ep_cancel(c->ep, &x->reqs[i].op[k].ctx);
			pthread_mutex_unlock(&c->ep->cq_lock);
			cancelled = true;
		}
		if (waited > 2 * RMA_CLOSE_WAIT_NS)
			break;
	}
	int left = atomic_load(&x->posted);
	x->magic = 0;
	atomic_fetch_sub(&c->contexts, 1);
	if (left) {
		LOG_WARN(NCCL_NET, "RMA destroyContext: %d operation(s) neither completed nor "
			 "cancelled within %.0f s; their requests are kept", left,
			 2 * RMA_CLOSE_WAIT_NS / 1e9);
		return 0;
	}
	ofi_mr_put(x->reqs_mr);
	util_freelist_destroy(&x->free);
	free(x->reqs);
	free(x);
	return 0;
}

static struct rma_req *req_get(struct rma_ctx *x, enum rma_req_kind kind, const char *what)
{
	struct util_free_node *n = util_freelist_pop(&x->free);
	if (!n) {
		LOG_WARN(NCCL_NET, "RMA %s: all %d requests of the context are in use: NCCL keeps "
			 "more operations in flight than it announced", what, x->nreqs);
		return NULL;
	}
	struct rma_req *r = container_of(n, struct rma_req, free_node);
	r->kind = kind;
	r->nops = 0;
	r->chain = false;
	r->signal_after = false;
	r->due_hold = NULL;
	atomic_store(&r->data_due, false);
	r->abandoned = false;
	r->start_ns = util_now_ns();
	atomic_store(&r->sig_due, false);
	atomic_store(&r->ncomplete, 0);
	atomic_store(&r->status, 0);
	atomic_store(&r->in_use, true);
	return r;
}

static void req_put(struct rma_req *r)
{
	atomic_store(&r->in_use, false);
	util_freelist_push(&r->ctx->free, &r->free_node);
}

static void req_fail(struct rma_req *r, int rc)
{
	int expected = 0;
	atomic_compare_exchange_strong(&r->status, &expected, rc);
	atomic_store(&r->ctx->coll->last_error, rc);
}

static int post_signal(struct rma_req *r);

static void op_complete(struct ofi_op *op, const struct fi_cq_tagged_entry *entry,
			const struct fi_cq_err_entry *err)
{
	(void)entry;
	struct rma_req *r = op->owner;
	struct rma_ctx *x = r->ctx;
	ofi_op_release(op);
	if (err) {
		char text[256];
		ofi_cq_error_text(x->coll->ep, err, text, sizeof(text));
		LOG_WARN_LIMITED(NCCL_NET, "RMA %s to rank %d failed: %s. A stale or forged "
				 "window key, or a peer that is gone",
			 r->kind == RMA_REQ_GET ? "get" : r->kind == RMA_REQ_FLUSH ? "flush" :
				 (op->index & 0xff) ? "signal" : "put",
			 op->index >> 8, text);
		req_fail(r, ofi_err_cq(ofi_cq_err_code(err)));
		if ((op->index & 0xff) == 0 && r->chain)
			atomic_fetch_add(&r->ncomplete, 1); /* the signal never goes */
	} else if ((op->index & 0xff) == 0 && r->chain) {
		/* the put is at the target: now its strong signal */
		int rc = post_signal(r);
		if (rc == -FI_EAGAIN) {
			set_due(r, &r->sig_due);
		} else if (rc) {
			req_fail(r, rc);
			atomic_fetch_add(&r->ncomplete, 1);
		}
	}
	atomic_store_explicit(&op->posted, 0, memory_order_release);
	int done = atomic_fetch_add(&r->ncomplete, 1) + 1;
	if (r->abandoned && done >= r->nops)
		req_put(r);
	atomic_fetch_sub(&x->posted, 1);
}

/* Whether to post again: the provider is full (-FI_EAGAIN) and reading our
 * completions may make room, which a completion callback (CQ lock held) may
 * not do. After a few tries the operation waits in its request and test()
 * posts it: NCCL expects a request from every call, never -FI_EAGAIN. */
#define RMA_POST_TRIES 16
static bool post_again(struct ofi_ep *ep, ssize_t rc, bool in_cb, int *tries)
{
	if (rc != -FI_EAGAIN || in_cb || ++*tries >= RMA_POST_TRIES)
		return false;
	ofi_ep_progress(ep);
	return true;
}

static void op_prepare(struct rma_req *r, int k, uint32_t rank, struct ofi_mr *hold)
{
	struct ofi_op *op = &r->op[k];
	memset(&op->ctx, 0, sizeof(op->ctx));
	op->complete = op_complete;
	op->owner = r;
	op->ep = r->ctx->coll->ep;
	op->index = k | (int)(rank << 8);
	op->bulk = false;
	op->hold = NULL;
	ofi_op_hold(op, hold);
	atomic_store(&op->posted, 1);
	atomic_fetch_add(&r->ctx->posted, 1);
}

static void op_unprepare(struct rma_req *r, int k)
{
	ofi_op_release(&r->op[k]);
	atomic_store(&r->op[k].posted, 0);
	atomic_fetch_sub(&r->ctx->posted, 1);
}

static int post_signal(struct rma_req *r)
{
	struct rma_coll *c = r->ctx->coll;
	uint32_t rank = (uint32_t)(r->op[1].index >> 8);
	bool in_cb = r->chain; /* chained signals are posted from the put's completion */
	op_prepare(r, 1, rank, NULL);
	struct fi_ioc ioc = { .addr = &r->operand, .count = 1 };
	struct fi_rma_ioc rioc = { .addr = r->sig_addr, .count = 1, .key = r->sig_key };
	void *desc = ofi_ep_desc(c->ep, r->ctx->reqs_mr->desc);
	struct fi_msg_atomic msg = {
		.msg_iov = &ioc,
		.desc = &desc,
		.iov_count = 1,
		.addr = r->sig_dest,
		.rma_iov = &rioc,
		.rma_iov_count = 1,
		.datatype = FI_UINT64,
		.op = FI_SUM,
		.context = &r->op[1].ctx,
	};
	/* The signal's own completion only frees the request: no delivery
	 * guarantee is asked of it (shm of 1.17 and 2.1 crashed in fi_cq_read
	 * with FI_DELIVERY_COMPLETE atomics in flight). */
	uint64_t fl = FI_COMPLETION;
	if (c->dev->decision.order == POLICY_RMA_ORDER_FENCE && r->nops == 2 && !r->chain)
		fl |= FI_FENCE;
	struct iovec siov = { .iov_base = &r->sig_msg, .iov_len = sizeof(r->sig_msg) };
	struct fi_msg smsg = { .msg_iov = &siov,
			       .desc = &desc,
			       .iov_count = 1,
			       .addr = r->sig_dest,
			       .context = &r->op[1].ctx };
	int tries = 0;
	ssize_t prc;
	do {
		ofi_ep_enter(c->ep);
		prc = c->msg_signals ? fi_sendmsg(c->ep->ep, &smsg, fl) :
				       fi_atomicmsg(c->ep->ep, &msg, fl);
		ofi_ep_leave(c->ep);
	} while (post_again(c->ep, prc, in_cb, &tries));
	int rc = (int)prc;
	if (rc) {
		op_unprepare(r, 1);
		if (rc != -FI_EAGAIN) {
			LOG_WARN(NCCL_NET, "RMA signal to rank %u: %s failed: %s", rank,
				 c->msg_signals ? "fi_sendmsg" : "fi_atomicmsg", ofi_strerror(rc));
			return ofi_err_sys(rc);
		}
	}
	return rc;
}

/* Posts the request's data operation (a write, or a read) from what it
 * stored; -FI_EAGAIN when the provider has no room yet. */
static int post_data(struct rma_req *r)
{
	struct rma_coll *c = r->ctx->coll;
	uint32_t rank = (uint32_t)(r->op[0].index >> 8);
	op_prepare(r, 0, rank, r->lmr);
	void *desc = ofi_ep_desc(c->ep, r->lmr->desc);
	struct iovec iov = { .iov_base = r->lbuf, .iov_len = r->len };
	struct fi_rma_iov riov = { .addr = r->raddr, .len = r->len, .key = r->rkey };
	struct fi_msg_rma msg = { .msg_iov = &iov,
				  .desc = &desc,
				  .iov_count = 1,
				  .addr = r->dest,
				  .rma_iov = &riov,
				  .rma_iov_count = 1,
				  .context = &r->op[0].ctx };
	int tries = 0;
	ssize_t prc;
	do {
		ofi_ep_enter(c->ep);
		/* a completed put is placed at the target: NCCL reuses the source and
		 * chained signals rely on it (FI_DELIVERY_COMPLETE) */
		prc = r->is_read ? fi_readmsg(c->ep->ep, &msg, FI_COMPLETION) :
				   fi_writemsg(c->ep->ep, &msg, FI_COMPLETION | FI_DELIVERY_COMPLETE);
		ofi_ep_leave(c->ep);
	} while (post_again(c->ep, prc, false, &tries));
	int rc = (int)prc;
	if (rc) {
		op_unprepare(r, 0);
		if (rc != -FI_EAGAIN) {
			LOG_WARN(NCCL_NET, "RMA %s of %zu bytes %s rank %u: %s failed: %s",
				 r->is_read ? "read" : "write", r->len, r->is_read ? "from" : "to",
				 rank, r->is_read ? "fi_readmsg" : "fi_writemsg", ofi_strerror(rc));
			return ofi_err_sys(rc);
		}
	}
	return rc;
}

/* Posts a new request's data operation, or leaves it due; then its signal
 * when one follows unchained. 0 unless the request cannot go at all. */
static int start_request(struct rma_req *r)
{
	int rc = post_data(r);
	if (rc == -FI_EAGAIN) {
		r->due_hold = r->lmr;
		ofi_mr_ref(r->lmr);
		set_due(r, &r->data_due);
		return 0;
	}
	if (rc)
		return rc;
	if (r->signal_after) {
		int src = post_signal(r);
		if (src == -FI_EAGAIN) {
			set_due(r, &r->sig_due);
		} else if (src) {
			req_fail(r, src);
			atomic_fetch_add(&r->ncomplete, 1);
		}
	}
	return 0;
}

/* Checks [off, off+len) against a window of `size` bytes. */
static bool in_window(uint64_t off, size_t len, uint64_t size)
{
	return off <= size && len <= size - off;
}

static int put_common(void *p, int context, uint64_t src_off, void *src_mh, size_t size,
		      uint64_t dst_off, void *dst_mh, uint32_t rank, bool signal,
		      uint64_t sig_off, void *sig_mh, uint64_t sig_value, uint32_t sig_op,
		      bool strong, void **request)
{
	const char *what = signal ? "iputSignal" : "iput";
	struct rma_ctx *x = ctx_rank_from(p, context, rank, what);
	if (!x || !request)
		return -FI_EINVAL;
	*request = NULL;
	struct rma_coll *c = x->coll;
	struct rma_win *src = NULL, *dst = NULL, *sig = NULL;
	if (size) {
		src = win_from(c, src_mh, what, "source");
		dst = win_from(c, dst_mh, what, "destination");
		if (!src || !dst)
			return -FI_EINVAL;
		if (!in_window(src_off, size, src->size) ||
		    !in_window(dst_off, size, dst->peers[rank].size)) {
			LOG_WARN(NCCL_NET, "RMA %s of %zu bytes to rank %u refused: source offset "
				 "%llu in a window of %zu bytes, destination offset %llu in rank "
				 "%u's window of %llu bytes",
				 what, size, rank, (unsigned long long)src_off, src->size,
				 (unsigned long long)dst_off, rank,
				 (unsigned long long)dst->peers[rank].size);
			return -FI_EINVAL;
		}
	}
	if (signal) {
		sig = win_from(c, sig_mh, what, "signal");
		if (!sig)
			return -FI_EINVAL;
		if (sig_op != NCCL_NET_SIGNAL_OP_INC && sig_op != NCCL_NET_SIGNAL_OP_ADD) {
			LOG_WARN(NCCL_NET, "RMA %s: unknown signal op %u", what, sig_op);
			return -FI_EINVAL;
		}
		if ((sig_off & 7) || !in_window(sig_off, 8, sig->peers[rank].size)) {
			LOG_WARN(NCCL_NET, "RMA %s refused: signal offset %llu is not an aligned "
				 "64-bit word of rank %u's signal window of %llu bytes",
				 what, (unsigned long long)sig_off, rank,
				 (unsigned long long)sig->peers[rank].size);
			return -FI_EINVAL;
		}
	}
	struct rma_req *r = req_get(x, signal || size ? RMA_REQ_PUT : RMA_REQ_NOP, what);
	if (!r)
		return -FI_ENOSPC;
	r->op[0].index = (int)(rank << 8);
	r->op[1].index = 1 | (int)(rank << 8);
	int rc = 0;
	if (signal) {
		r->sig_dest = c->peers[rank];
		r->sig_addr = sig->peers[rank].base + sig_off;
		r->sig_key = sig->peers[rank].key;
		r->operand = sig_op == NCCL_NET_SIGNAL_OP_INC ? 1 : sig_value;
		r->sig_msg = (struct rma_sig_msg){ RMA_SIGNAL_ROUTE, sig->peers[rank].id, sig_off,
						   r->operand };
	}
	r->nops = (size ? 1 : 0) + (signal ? 1 : 0);
	r->chain = signal && size && strong && c->dev->decision.order == POLICY_RMA_ORDER_CHAIN;
	if (size) {
		r->is_read = false;
		r->lbuf = src->data + src_off;
		r->len = size;
		r->lmr = src->mr;
		r->raddr = dst->peers[rank].base + dst_off;
		r->rkey = dst->peers[rank].key;
		r->dest = c->peers[rank];
		r->signal_after = signal && !r->chain;
		rc = start_request(r);
		if (rc) {
			req_put(r);
			return rc;
		}
	} else if (signal) {
		rc = post_signal(r);
		if (rc == -FI_EAGAIN) {
			set_due(r, &r->sig_due);
		} else if (rc) {
			req_put(r);
			return rc;
		}
	}
	*request = r;
	return 0;
}

int rma_iput(void *ctx, int context, uint64_t src_off, void *src_mh, size_t size,
	     uint64_t dst_off, void *dst_mh, uint32_t rank, void **request)
{
	return put_common(ctx, context, src_off, src_mh, size, dst_off, dst_mh, rank, false, 0,
			  NULL, 0, 0, false, request);
}

int rma_iput_signal(void *ctx, int context, uint64_t src_off, void *src_mh, size_t size,
		    uint64_t dst_off, void *dst_mh, uint32_t rank, uint64_t sig_off,
		    void *sig_mh, uint64_t sig_value, uint32_t sig_op, bool strong,
		    void **request)
{
	return put_common(ctx, context, src_off, src_mh, size, dst_off, dst_mh, rank, true,
			  sig_off, sig_mh, sig_value, sig_op, strong, request);
}

static int read_common(struct rma_ctx *x, enum rma_req_kind kind, const char *what,
		       void *local, size_t size, struct ofi_mr *lmr, uint32_t rank,
		       uint64_t raddr, uint64_t rkey, void **request)
{
	struct rma_coll *c = x->coll;
	struct rma_req *r = req_get(x, kind, what);
	if (!r)
		return -FI_ENOSPC;
	r->nops = 1;
	if (kind == RMA_REQ_FLUSH) {
		local = &r->scratch;
		lmr = x->reqs_mr;
	}
	r->is_read = true;
	r->lbuf = local;
	r->len = size;
	r->lmr = lmr;
	r->raddr = raddr;
	r->rkey = rkey;
	r->dest = c->peers[rank];
	r->op[0].index = (int)(rank << 8);
	int rc = start_request(r);
	if (rc) {
		req_put(r);
		return rc;
	}
	*request = r;
	return 0;
}

int rma_iget(void *p, int context, uint64_t remote_off, void *remote_mh, size_t size,
	     uint64_t local_off, void *local_mh, uint32_t rank, void **request)
{
	struct rma_ctx *x = ctx_rank_from(p, context, rank, "iget");
	if (!x || !request)
		return -FI_EINVAL;
	*request = NULL;
	struct rma_coll *c = x->coll;
	if (!size) {
		struct rma_req *r = req_get(x, RMA_REQ_NOP, "iget");
		if (!r)
			return -FI_ENOSPC;
		*request = r;
		return 0;
	}
	struct rma_win *rw = win_from(c, remote_mh, "iget", "remote");
	struct rma_win *lw = win_from(c, local_mh, "iget", "local");
	if (!rw || !lw)
		return -FI_EINVAL;
	if (!in_window(remote_off, size, rw->peers[rank].size) ||
	    !in_window(local_off, size, lw->size)) {
		LOG_WARN(NCCL_NET, "RMA iget of %zu bytes from rank %u refused: remote offset %llu "
			 "in its window of %llu bytes, local offset %llu in ours of %zu",
			 size, rank, (unsigned long long)remote_off,
			 (unsigned long long)rw->peers[rank].size, (unsigned long long)local_off,
			 lw->size);
		return -FI_EINVAL;
	}
	return read_common(x, RMA_REQ_GET, "iget", lw->data + local_off, size, lw->mr, rank,
			   rw->peers[rank].base + remote_off, rw->peers[rank].key, request);
}

int rma_iflush(void *p, int context, void *mh, uint32_t rank, void **request)
{
	struct rma_ctx *x = ctx_rank_from(p, context, rank, "iflush");
	if (!x || !request)
		return -FI_EINVAL;
	*request = NULL;
	struct rma_coll *c = x->coll;
	struct rma_win *w = win_from(c, mh, "iflush", "flushed");
	if (!w)
		return -FI_EINVAL;
	uint64_t size = w->peers[rank].size;
	if (!size) {
		struct rma_req *r = req_get(x, RMA_REQ_NOP, "iflush");
		if (!r)
			return -FI_ENOSPC;
		*request = r;
		return 0;
	}
	/* A read of the window's first bytes: the NIC completes it only after
	 * the writes it placed there before (PCIe orders reads behind writes). */
	return read_common(x, RMA_REQ_FLUSH, "iflush", NULL, size < 8 ? size : 8, NULL, rank,
			   w->peers[rank].base, w->peers[rank].key, request);
}

/* Posts what the provider had no room for when the request was made (or
 * when its put completed): from test() and progress(), never under the CQ
 * lock. The flags are taken by exchange, so two threads never post twice. */
static void retry_due(struct rma_req *r)
{
	if (take_due(r, &r->data_due)) {
		int rc = post_data(r);
		if (rc == -FI_EAGAIN) {
			set_due(r, &r->data_due);
		} else {
			ofi_mr_put(r->due_hold);
			r->due_hold = NULL;
			if (rc) {
				/* none of its operations will go */
				req_fail(r, rc);
				atomic_store(&r->ncomplete, r->nops);
			} else if (r->signal_after) {
				set_due(r, &r->sig_due);
			}
		}
	}
	if (take_due(r, &r->sig_due)) {
		/* a signal the provider had no room for */
		int rc = post_signal(r);
		if (rc == -FI_EAGAIN) {
			set_due(r, &r->sig_due);
		} else if (rc) {
			req_fail(r, rc);
			atomic_fetch_add(&r->ncomplete, 1);
		}
	}
}

int rma_test(void *p, void *request, int *done)
{
	struct rma_coll *c = coll_from(p, "test");
	struct rma_req *r = request;
	if (!c || !done || !r || r->magic != RMA_REQ_MAGIC || !atomic_load(&r->in_use) ||
	    r->ctx->coll != c) {
		LOG_WARN(NCCL_NET, "RMA test: %p is not a request in flight of this comm", request);
		return -FI_EINVAL;
	}
	*done = 0;
	if (atomic_load(&r->ncomplete) < r->nops) {
		int prc = ofi_ep_progress(c->ep);
		if (prc < 0) {
			req_fail(r, prc);
		}
		retry_due(r);
	}
	if (atomic_load(&r->ncomplete) < r->nops) {
		uint64_t waited = util_now_ns() - r->start_ns;
		if (waited < c->dev->net->peer_timeout_ns)
			return 0;
		/* Neither completed nor failed: shm of libfabric 1.17 never answers an
		 * RMA write with a key the target does not know. NCCL would wait
		 * forever; the request fails, and its last completion (if one ever
		 * comes) returns it to the pool. */
		bool gave_up = false, unposted = false;
		pthread_mutex_lock(&c->ep->cq_lock);
		if (atomic_load(&r->ncomplete) < r->nops) {
			gave_up = true;
			/* what never reached the provider is dropped; what did is
			 * cancelled, and its completion frees the request */
			if (take_due(r, &r->data_due)) {
				ofi_mr_put(r->due_hold);
				r->due_hold = NULL;
			}
			take_due(r, &r->sig_due);
			unposted = !atomic_load(&r->op[0].posted) && !atomic_load(&r->op[1].posted);
			r->abandoned = !unposted;
			for (int k = 0; k < 2; k++)
				if (atomic_load(&r->op[k].posted))
					ofi_ep_cancel(c->ep, &r->op[k].ctx);
		}
		pthread_mutex_unlock(&c->ep->cq_lock);
		if (unposted)
			req_put(r);
		if (gave_up) {
			LOG_WARN(NCCL_NET, "RMA operation to rank %d: no completion within "
				 "NCCL_FABRIC_PEER_TIMEOUT (%.0f s); failed. The target refused it "
				 "without an answer (a stale or forged window key) or is gone",
				 r->op[0].index >> 8, (double)c->dev->net->peer_timeout_ns / 1e9);
			atomic_store(&c->last_error, -FI_ETIMEDOUT);
			*done = 1;
			return -FI_ETIMEDOUT;
		}
	}
	int rc = atomic_load(&r->status);
	*done = 1;
	req_put(r);
	return rc;
}

int rma_progress(void *p)
{
	struct rma_ctx *x = p;
	if (!x || x->magic != RMA_CTX_MAGIC)
		return -FI_EINVAL;
	int rc = ofi_ep_progress(x->coll->ep);
	if (atomic_load_explicit(&x->ndue, memory_order_relaxed) > 0)
		for (int i = 0; i < x->nreqs; i++)
			if (atomic_load(&x->reqs[i].data_due) || atomic_load(&x->reqs[i].sig_due))
				retry_due(&x->reqs[i]);
	return rc < 0 ? rc : 0;
}

int rma_query_last_error(void *p, bool *has_error)
{
	struct rma_ctx *x = p;
	if (!x || x->magic != RMA_CTX_MAGIC || !has_error)
		return -FI_EINVAL;
	*has_error = atomic_load(&x->coll->last_error) != 0;
	return 0;
}
