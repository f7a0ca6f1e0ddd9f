/*
 * rma.c - NCCL's RMA plugin over libfabric RMA and atomics: see rma.h.
 */
#include "rma/rma_int.h"

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
	/* the net device's properties, fixed by core at init (rma never calls up) */
	*props = d->net->props;
	props->ptr_support = NCCL_PTR_HOST;
	if (d->decision.gpu)
		props->ptr_support |= NCCL_PTR_CUDA | (d->net->plan.dmabuf ? NCCL_PTR_DMABUF : 0);
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

struct rma_coll *rma_coll_from(void *p, const char *what)
{
	struct rma_coll *c = p;
	if (!c || c->magic != RMA_COLL_MAGIC) {
		LOG_WARN(NCCL_NET, "RMA %s: %p is not an RMA collective comm of this plugin", what,
			 p);
		return NULL;
	}
	return c;
}

struct rma_ctx *rma_ctx_from(void *p, int context, const char *what)
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

/* rma_ctx_from, and rank a rank of its group. */
struct rma_ctx *rma_ctx_rank_from(void *p, int context, uint32_t rank, const char *what)
{
	struct rma_ctx *x = rma_ctx_from(p, context, what);
	if (x && rank >= (uint32_t)x->coll->nranks) {
		LOG_WARN(NCCL_NET, "RMA %s: rank %u out of range (%d ranks)", what, rank,
			 x->coll->nranks);
		return NULL;
	}
	return x;
}

/* Checks [off, off+len) against a window of `size` bytes. */
bool rma_in_window(uint64_t off, size_t len, uint64_t size)
{
	return off <= size && len <= size - off;
}

/* A live window of coll: handles stay valid memory until closeColl, so a
 * deregistered one is recognised and refused rather than read after free. */
struct rma_win *rma_win_from(struct rma_coll *c, void *p, const char *what, const char *role)
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

/* The ring's all-gather: `len` bytes of each rank into all[rank * len].
 * On failure a receive into `all` or a send from it may still be posted, and
 * the ring's tags are out of step with the neighbours': the ring is closed,
 * which takes back its buffers as closeRecv/closeSend take back NCCL's (so the
 * caller may free `all`), and later collectives fail at once. */
static int ring_allgather(struct rma_coll *c, const void *mine, void *all, size_t len)
{
	memcpy((char *)all + (size_t)c->rank * len, mine, len);
	if (c->nranks == 1)
		return 0;
	if (!c->sc || !c->rc) {
		LOG_WARN(NCCL_NET, "RMA rank %d of %d: the ring to the neighbours was closed when an "
			 "earlier all-gather failed; close this collective comm (closeColl) and "
			 "connect again", c->rank, c->nranks);
		return -FI_EIO;
	}
	void *smr = NULL, *rmr = NULL;
	size_t total = len * (size_t)c->nranks;
	int rc = net_reg_mr(c->sc, all, total, NCCL_PTR_HOST, &smr);
	if (!rc)
		rc = net_reg_mr(c->rc, all, total, NCCL_PTR_HOST, &rmr);
	uint64_t deadline = util_now_ns() + c->dev->net->plan.timeout_ns;
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
	if (rc) {
		net_close_send(c->sc);
		net_close_recv(c->rc);
		c->sc = NULL;
		c->rc = NULL;
	}
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
	if (hit && hit->type == NCCL_PTR_HOST && !(m.offset & 7) && rma_in_window(m.offset, 8, hit->size))
		__atomic_fetch_add((uint64_t *)(void *)(hit->data + m.offset), m.value,
				   __ATOMIC_RELEASE);
	pthread_mutex_unlock(&c->win_lock);
	if (!hit || hit->type != NCCL_PTR_HOST || (m.offset & 7) || !rma_in_window(m.offset, 8, hit->size)) {
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
	/* the windows leave the list under win_lock before they are freed: the
	 * endpoint's progress thread may run the signal handler until the
	 * domain closes */
	struct dlist wins;
	dlist_init(&wins);
	pthread_mutex_lock(&c->win_lock);
	while (!dlist_empty(&c->wins)) {
		struct dlist *first = c->wins.next;
		dlist_remove(first);
		dlist_insert_tail(&wins, first);
	}
	pthread_mutex_unlock(&c->win_lock);
	struct dlist *it, *nx;
	dlist_foreach_safe(&wins, it, nx) {
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
		uint64_t deadline = util_now_ns() + d->net->plan.timeout_ns;
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
		.expected_cuda_rc = d->net->plan.expected_cuda_rc,
		.nep = 1,
		.random_keys = true,
		.cq_batch = d->net->plan.cq_batch,
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
	struct rma_coll *c = rma_coll_from(p, "closeColl");
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
	struct rma_coll *c = rma_coll_from(p, "regMrSym");
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
	struct rma_coll *c = rma_coll_from(p, "deregMrSym");
	if (!c)
		return -FI_EINVAL;
	struct rma_win *w = rma_win_from(c, mhandle, "deregMrSym", "registered");
	if (!w)
		return -FI_EINVAL;
	/* under win_lock: a signal handler that found the window live finishes
	 * its add before NCCL may free the buffer */
	uint32_t live = RMA_WIN_MAGIC;
	pthread_mutex_lock(&c->win_lock);
	bool was_live = atomic_compare_exchange_strong(&w->magic, &live, RMA_WIN_DEAD);
	pthread_mutex_unlock(&c->win_lock);
	if (!was_live)
		return -FI_EINVAL;
	/* an operation in flight holds its own reference (ofi_op_hold) */
	struct ofi_mr *mr = w->mr;
	w->mr = NULL;
	ofi_mr_put(mr);
	return 0;
}

