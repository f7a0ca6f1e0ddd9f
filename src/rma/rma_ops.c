/*
 * rma_ops.c - the RMA plugin's requests (see rma.h): contexts and their
 * request pools, puts with their signals, gets and flushes, test and progress.
 */
#include "rma/rma_int.h"

#include <stdlib.h>
#include <string.h>

#include <rdma/fi_atomic.h>

#include "log/log.h"
#include "proto/proto.h"
#include "util/util.h"

/* ---------------- contexts and requests ---------------- */

int rma_create_context(void *p, int ncontexts, void **out)
{
	struct rma_coll *c = rma_coll_from(p, "createContext");
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
	struct rma_ctx *x = rma_ctx_from(p, 0, "destroyContext");
	if (!x)
		return -FI_EINVAL;
	struct rma_coll *c = x->coll;
	/* Operations still posted write into our requests when they complete:
	 * wait for them, cancel what remains, and keep the requests (a WARN)
	 * rather than free memory a late completion may touch. */
	/* operations that never reached the provider are dropped */
	for (int i = 0; i < x->nreqs; i++) {
		struct rma_req *r = &x->reqs[i];
		if (rma_take_due(r, &r->data_due)) {
			ofi_mr_put(r->due_hold);
			r->due_hold = NULL;
		}
		rma_take_due(r, &r->sig_due);
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
			rma_set_due(r, &r->sig_due);
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
	r->vec[1].ioc = (struct fi_ioc){ .addr = &r->operand, .count = 1 };
	r->vec[1].rioc = (struct fi_rma_ioc){ .addr = r->sig_addr, .count = 1, .key = r->sig_key };
	r->vec[1].desc = ofi_ep_desc(c->ep, r->ctx->reqs_mr->desc);
	struct fi_msg_atomic msg = {
		.msg_iov = &r->vec[1].ioc,
		.desc = &r->vec[1].desc,
		.iov_count = 1,
		.addr = r->sig_dest,
		.rma_iov = &r->vec[1].rioc,
		.rma_iov_count = 1,
		.datatype = FI_UINT64,
		.op = FI_SUM,
		.context = &r->op[1].ctx,
	};
	/* The signal's own completion only frees the request: no delivery
	 * guarantee is asked of it (shm of 1.17 and 2.1 crash in fi_cq_read
	 * with FI_DELIVERY_COMPLETE atomics in flight). */
	uint64_t fl = FI_COMPLETION;
	if (c->dev->decision.order == POLICY_RMA_ORDER_FENCE && r->nops == 2 && !r->chain)
		fl |= FI_FENCE;
	r->vec[1].iov = (struct iovec){ .iov_base = &r->sig_msg, .iov_len = sizeof(r->sig_msg) };
	struct fi_msg smsg = { .msg_iov = &r->vec[1].iov,
			       .desc = &r->vec[1].desc,
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
	r->vec[0].desc = ofi_ep_desc(c->ep, r->lmr->desc);
	r->vec[0].iov = (struct iovec){ .iov_base = r->lbuf, .iov_len = r->len };
	r->vec[0].riov = (struct fi_rma_iov){ .addr = r->raddr, .len = r->len, .key = r->rkey };
	struct fi_msg_rma msg = { .msg_iov = &r->vec[0].iov,
				  .desc = &r->vec[0].desc,
				  .iov_count = 1,
				  .addr = r->dest,
				  .rma_iov = &r->vec[0].riov,
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
		rma_set_due(r, &r->data_due);
		return 0;
	}
	if (rc)
		return rc;
	if (r->signal_after) {
		int src = post_signal(r);
		if (src == -FI_EAGAIN) {
			rma_set_due(r, &r->sig_due);
		} else if (src) {
			req_fail(r, src);
			atomic_fetch_add(&r->ncomplete, 1);
		}
	}
	return 0;
}

static int put_common(void *p, int context, uint64_t src_off, void *src_mh, size_t size,
		      uint64_t dst_off, void *dst_mh, uint32_t rank, bool signal,
		      uint64_t sig_off, void *sig_mh, uint64_t sig_value, uint32_t sig_op,
		      bool strong, void **request)
{
	const char *what = signal ? "iputSignal" : "iput";
	struct rma_ctx *x = rma_ctx_rank_from(p, context, rank, what);
	if (!x || !request)
		return -FI_EINVAL;
	*request = NULL;
	struct rma_coll *c = x->coll;
	struct rma_win *src = NULL, *dst = NULL, *sig = NULL;
	if (size) {
		src = rma_win_from(c, src_mh, what, "source");
		dst = rma_win_from(c, dst_mh, what, "destination");
		if (!src || !dst)
			return -FI_EINVAL;
		if (!rma_in_window(src_off, size, src->size) ||
		    !rma_in_window(dst_off, size, dst->peers[rank].size)) {
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
		sig = rma_win_from(c, sig_mh, what, "signal");
		if (!sig)
			return -FI_EINVAL;
		if (sig_op != NCCL_NET_SIGNAL_OP_INC && sig_op != NCCL_NET_SIGNAL_OP_ADD) {
			LOG_WARN(NCCL_NET, "RMA %s: unknown signal op %u", what, sig_op);
			return -FI_EINVAL;
		}
		if ((sig_off & 7) || !rma_in_window(sig_off, 8, sig->peers[rank].size)) {
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
			rma_set_due(r, &r->sig_due);
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
	struct rma_ctx *x = rma_ctx_rank_from(p, context, rank, "iget");
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
	struct rma_win *rw = rma_win_from(c, remote_mh, "iget", "remote");
	struct rma_win *lw = rma_win_from(c, local_mh, "iget", "local");
	if (!rw || !lw)
		return -FI_EINVAL;
	if (!rma_in_window(remote_off, size, rw->peers[rank].size) ||
	    !rma_in_window(local_off, size, lw->size)) {
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
	struct rma_ctx *x = rma_ctx_rank_from(p, context, rank, "iflush");
	if (!x || !request)
		return -FI_EINVAL;
	*request = NULL;
	struct rma_coll *c = x->coll;
	struct rma_win *w = rma_win_from(c, mh, "iflush", "flushed");
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
	if (rma_take_due(r, &r->data_due)) {
		int rc = post_data(r);
		if (rc == -FI_EAGAIN) {
			rma_set_due(r, &r->data_due);
		} else {
			ofi_mr_put(r->due_hold);
			r->due_hold = NULL;
			if (rc) {
				/* none of its operations will go */
				req_fail(r, rc);
				atomic_store(&r->ncomplete, r->nops);
			} else if (r->signal_after) {
				rma_set_due(r, &r->sig_due);
			}
		}
	}
	if (rma_take_due(r, &r->sig_due)) {
		/* a signal the provider had no room for */
		int rc = post_signal(r);
		if (rc == -FI_EAGAIN) {
			rma_set_due(r, &r->sig_due);
		} else if (rc) {
			req_fail(r, rc);
			atomic_fetch_add(&r->ncomplete, 1);
		}
	}
}

int rma_test(void *p, void *request, int *done)
{
	struct rma_coll *c = rma_coll_from(p, "test");
	struct rma_req *r = request;
	if (!c || !done || !r || r->magic != RMA_REQ_MAGIC || !atomic_load(&r->in_use) ||
	    r->ctx->coll != c) {
		LOG_WARN(NCCL_NET, "RMA test: %p is not a request in flight of this comm", request);
		return -FI_EINVAL;
	}
	*done = 0;
	if (atomic_load(&r->ncomplete) < r->nops) {
		int prc = ofi_ep_progress(c->ep);
		if (prc < 0)
			req_fail(r, ofi_err_sys(prc));
		retry_due(r);
	}
	if (atomic_load(&r->ncomplete) < r->nops) {
		uint64_t waited = util_now_ns() - r->start_ns;
		if (waited < c->dev->net->plan.peer_timeout_ns)
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
			/* a dropped operation never completes: count it, so the
			 * last completion of a posted one returns the request */
			if (rma_take_due(r, &r->data_due)) {
				ofi_mr_put(r->due_hold);
				r->due_hold = NULL;
				atomic_fetch_add(&r->ncomplete, 1);
			}
			if (rma_take_due(r, &r->sig_due))
				atomic_fetch_add(&r->ncomplete, 1);
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
				 r->op[0].index >> 8, (double)c->dev->net->plan.peer_timeout_ns / 1e9);
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
	return rc < 0 ? ofi_err_sys(rc) : 0;
}

int rma_query_last_error(void *p, bool *has_error)
{
	struct rma_ctx *x = p;
	if (!x || x->magic != RMA_CTX_MAGIC || !has_error)
		return -FI_EINVAL;
	*has_error = atomic_load(&x->coll->last_error) != 0;
	return 0;
}
