/*
 * proto_data.c - the data path: isend, irecv, test, iflush, and memory
 * registration. No allocation and no CUDA call happens here per operation.
 */
#include <stdio.h>
#include <string.h>

#include <rdma/fi_tagged.h>

#include "cuda/cuda_drv.h"
#include "log/log.h"
#include "proto/proto.h"
#include "util/util.h"

static struct proto_req *req_get(struct proto_comm *c)
{
	struct fab_free_node *n = fab_freelist_pop(&c->reqs);
	if (!n)
		return NULL;
	struct proto_req *r = container_of(n, struct proto_req, free_node);
	r->in_use = true;
	return r;
}

static void req_put(struct proto_req *r)
{
	r->in_use = false;
	fab_freelist_push(&r->comm->reqs, &r->free_node);
}

static void req_reset(struct proto_req *r, int n)
{
	r->n = n;
	r->nposted = 0;
	atomic_store(&r->ncomplete, 0);
	atomic_store(&r->status, ncclSuccess);
}

/* First failure wins; later ones keep their WARN lines but not the result. */
static void req_fail(struct proto_req *r, ncclResult_t res)
{
	int expected = ncclSuccess;
	atomic_compare_exchange_strong(&r->status, &expected, (int)res);
}

static ncclResult_t classify_error(int err)
{
	switch (err) {
	case FI_ETRUNC:
	case FI_EMSGSIZE:
		return ncclInvalidUsage;
	case FI_ECONNRESET:
	case FI_ECONNREFUSED:
	case FI_ECONNABORTED:
	case FI_ENOTCONN:
	case FI_EHOSTUNREACH:
	case FI_ENETUNREACH:
	case FI_ETIMEDOUT:
	case FI_EIO:
		return ncclRemoteError;
	default:
		return ncclSystemError;
	}
}

static void op_finish(struct proto_comm *c, struct fab_op *op)
{
	atomic_store(&op->posted, 0);
	atomic_fetch_sub_explicit(&c->pending, 1, memory_order_release);
}

static void error_text(struct fab_ep *ep, const struct fi_cq_err_entry *err, char *buf, size_t len)
{
	const char *prov = fi_cq_strerror(ep->cq, err->prov_errno, err->err_data, NULL, 0);
	snprintf(buf, len, "%s (provider: %s)", fi_strerror(err->err), prov ? prov : "-");
}

/* ---------------- send ---------------- */

static void send_done(struct fab_op *op, const struct fi_cq_tagged_entry *e,
		      const struct fi_cq_err_entry *err)
{
	struct proto_send_req *q = op->owner;
	struct proto_comm *c = q->h.comm;
	if (err) {
		if (err->err != FI_ECANCELED) {
			char text[256];
			error_text(c->ep, err, text, sizeof(text));
			struct proto_send *s = container_of(c, struct proto_send, c);
			FAB_WARN(NCCL_NET, "send of %zu bytes to %s failed: %s", q->size, s->peer_text,
				 text);
		}
		req_fail(&q->h, err->err == FI_ECANCELED ? ncclSystemError : classify_error(err->err));
	}
	atomic_fetch_add_explicit(&q->h.ncomplete, 1, memory_order_release);
	op_finish(c, op);
}

ncclResult_t fab_net_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
			   void **request)
{
	*request = NULL;
	struct proto_comm *c = proto_comm_from(send_comm, PROTO_SEND);
	if (!c) {
		FAB_WARN(NCCL_NET, "isend: %p is not a send comm", send_comm);
		return ncclInvalidArgument;
	}
	struct proto_send *s = container_of(c, struct proto_send, c);
	struct fab_mr *mr = mhandle;
	if (!mr && size && (c->dev->dom->mr_mode & FI_MR_LOCAL)) {
		FAB_WARN(NCCL_NET, "isend: unregistered buffer, but provider %s needs registration",
			 c->dev->choice.domain);
		return ncclInvalidArgument;
	}
	struct proto_req *r = req_get(c);
	if (!r) {
		(void)fab_ep_progress(c->ep);
		return ncclSuccess; /* NCCL retries */
	}
	struct proto_send_req *q = container_of(r, struct proto_send_req, h);
	req_reset(r, 1);
	q->size = size;
	q->op.complete = send_done;
	q->op.owner = q;
	q->op.index = 0;

	uint32_t folded = proto_tag_fold(&c->dev->layout, tag);
	struct proto_seq_entry *se = proto_seq_get(&s->seq, folded);
	if (!se) {
		req_put(r);
		FAB_WARN(NCCL_NET, "isend: out of memory");
		return ncclSystemError;
	}
	uint32_t seq = se->seq++;
	uint64_t wire = proto_tag_data(&c->dev->layout, s->remote_id, seq, tag);

	atomic_store(&q->op.posted, 1);
	atomic_fetch_add(&c->pending, 1);
	ssize_t rc = fi_tsend(c->ep->ep, data, size, mr ? mr->desc : NULL, s->peer, wire, &q->op.ctx);
	if (rc) {
		atomic_store(&q->op.posted, 0);
		atomic_fetch_sub(&c->pending, 1);
		proto_seq_get(&s->seq, folded)->seq--;
		req_put(r);
		if (rc == -FI_EAGAIN) {
			(void)fab_ep_progress(c->ep);
			return ncclSuccess;
		}
		FAB_WARN(NCCL_NET, "isend of %zu bytes to %s: fi_tsend failed: %s", size, s->peer_text,
			 fab_strerror((int)rc));
		return ncclSystemError;
	}
	r->nposted = 1;
	FAB_TRACE(NCCL_NET, "isend %zu bytes tag %d seq %u to %s", size, tag, seq, s->peer_text);
	*request = r;
	return ncclSuccess;
}

/* ---------------- receive ---------------- */

static void recv_done(struct fab_op *op, const struct fi_cq_tagged_entry *e,
		      const struct fi_cq_err_entry *err)
{
	struct proto_recv_req *q = op->owner;
	struct proto_comm *c = q->h.comm;
	int i = op->index;
	if (e) {
		q->got[i] = e->len;
	} else {
		struct proto_recv *r = container_of(c, struct proto_recv, c);
		if (err->err == FI_ETRUNC) {
			/* len is what fit, olen what did not: no byte past the buffer was written */
			FAB_WARN(NCCL_NET,
				 "receive from %s: a message of %zu bytes arrived for a buffer of %zu "
				 "bytes (NCCL tag %d): the sender sent more than the receiver posted. "
				 "Both ranks must run the same NCCL version and NCCL_PROTO/NCCL_ALGO/"
				 "buffer settings",
				 r->peer_text, err->len + err->olen, q->posted[i], q->tags[i]);
			q->got[i] = err->len;
		} else if (err->err != FI_ECANCELED) {
			char text[256];
			error_text(c->ep, err, text, sizeof(text));
			FAB_WARN(NCCL_NET, "receive of up to %zu bytes from %s failed: %s", q->posted[i],
				 r->peer_text, text);
		}
		req_fail(&q->h, err->err == FI_ECANCELED ? ncclSystemError : classify_error(err->err));
	}
	atomic_fetch_add_explicit(&q->h.ncomplete, 1, memory_order_release);
	op_finish(c, op);
}

/* Posts the buffers not yet posted. Returns 0 (all posted), -FI_EAGAIN, or an error. */
static int recv_post_remaining(struct proto_recv_req *q)
{
	struct proto_comm *c = q->h.comm;
	while (q->h.nposted < q->h.n) {
		int i = q->h.nposted;
		struct fab_op *op = &q->op[i];
		atomic_store(&op->posted, 1);
		atomic_fetch_add(&c->pending, 1);
		ssize_t rc = fi_trecv(c->ep->ep, q->data[i], q->posted[i], q->desc[i], FI_ADDR_UNSPEC,
				      q->wire[i], 0, &op->ctx);
		if (rc) {
			atomic_store(&op->posted, 0);
			atomic_fetch_sub(&c->pending, 1);
			return (int)rc;
		}
		q->h.nposted++;
	}
	return 0;
}

ncclResult_t fab_net_irecv(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
			   void **mhandles, void **request)
{
	*request = NULL;
	struct proto_comm *c = proto_comm_from(recv_comm, PROTO_RECV);
	if (!c) {
		FAB_WARN(NCCL_NET, "irecv: %p is not a receive comm", recv_comm);
		return ncclInvalidArgument;
	}
	struct proto_recv *rc_ = container_of(c, struct proto_recv, c);
	if (n < 1 || n > c->dev->props.max_recvs) {
		FAB_WARN(NCCL_NET, "irecv: %d buffers requested, maxRecvs is %d", n,
			 c->dev->props.max_recvs);
		return ncclInvalidArgument;
	}
	bool need_mr = c->dev->dom->mr_mode & FI_MR_LOCAL;
	for (int i = 0; i < n; i++) {
		if (need_mr && sizes[i] && !(mhandles && mhandles[i])) {
			FAB_WARN(NCCL_NET, "irecv: unregistered buffer, but the provider needs registration");
			return ncclInvalidArgument;
		}
	}
	struct proto_req *r = req_get(c);
	if (!r) {
		(void)fab_ep_progress(c->ep);
		return ncclSuccess;
	}
	struct proto_recv_req *q = container_of(r, struct proto_recv_req, h);
	req_reset(r, n);
	for (int i = 0; i < n; i++) {
		uint32_t folded = proto_tag_fold(&c->dev->layout, tags[i]);
		struct proto_seq_entry *se = proto_seq_get(&rc_->seq, folded);
		if (!se) {
			for (int k = 0; k < i; k++)
				proto_seq_get(&rc_->seq, proto_tag_fold(&c->dev->layout, tags[k]))->seq--;
			req_put(r);
			FAB_WARN(NCCL_NET, "irecv: out of memory");
			return ncclSystemError;
		}
		struct fab_mr *mr = mhandles ? mhandles[i] : NULL;
		q->data[i] = data[i];
		q->posted[i] = sizes[i];
		q->got[i] = 0;
		q->desc[i] = mr ? mr->desc : NULL;
		q->tags[i] = tags[i];
		q->wire[i] = proto_tag_data(&c->dev->layout, rc_->id, se->seq++, tags[i]);
		q->op[i].complete = recv_done;
		q->op[i].owner = q;
		q->op[i].index = i;
	}
	int prc = recv_post_remaining(q);
	if (prc && q->h.nposted == 0) {
		/* nothing went out: undo as if irecv had not been called */
		for (int k = 0; k < n; k++)
			proto_seq_get(&rc_->seq, proto_tag_fold(&c->dev->layout, tags[k]))->seq--;
		req_put(r);
		if (prc == -FI_EAGAIN) {
			(void)fab_ep_progress(c->ep);
			return ncclSuccess;
		}
		FAB_WARN(NCCL_NET, "irecv from %s: fi_trecv failed: %s", rc_->peer_text,
			 fab_strerror(prc));
		return ncclSystemError;
	}
	if (prc && prc != -FI_EAGAIN) {
		FAB_WARN(NCCL_NET, "irecv from %s: fi_trecv failed: %s", rc_->peer_text,
			 fab_strerror(prc));
		req_fail(r, ncclSystemError);
		/* the rest will never be posted: count them complete */
		atomic_fetch_add(&r->ncomplete, n - r->nposted);
		r->n = r->nposted + (n - r->nposted);
		r->nposted = n;
	}
	/* with -FI_EAGAIN part way, test() posts the rest */
	FAB_TRACE(NCCL_NET, "irecv %d buffers from %s (first tag %d, %zu bytes)", n,
		  rc_->peer_text, tags[0], sizes[0]);
	*request = r;
	return ncclSuccess;
}

/* ---------------- test ---------------- */

ncclResult_t fab_net_test(void *request, int *done, int *sizes)
{
	struct proto_req *r = request;
	*done = 0;
	if (!r || !r->in_use) {
		FAB_WARN(NCCL_NET, "test: %p is not a pending request", request);
		return ncclInvalidArgument;
	}
	struct proto_comm *c = r->comm;
	if (r->kind == PROTO_REQ_RECV && r->nposted < r->n) {
		int rc = recv_post_remaining(container_of(r, struct proto_recv_req, h));
		if (rc && rc != -FI_EAGAIN) {
			FAB_WARN(NCCL_NET, "test: posting a receive failed: %s", fab_strerror(rc));
			req_fail(r, ncclSystemError);
			atomic_fetch_add(&r->ncomplete, r->n - r->nposted);
			r->nposted = r->n;
		}
	}
	if (atomic_load_explicit(&r->ncomplete, memory_order_acquire) < r->n) {
		if (fab_ep_progress(c->ep) < 0)
			return ncclSystemError;
		if (atomic_load_explicit(&r->ncomplete, memory_order_acquire) < r->n)
			return ncclSuccess;
	}
	ncclResult_t res = (ncclResult_t)atomic_load(&r->status);
	if (sizes) {
		if (r->kind == PROTO_REQ_SEND) {
			sizes[0] = (int)container_of(r, struct proto_send_req, h)->size;
		} else {
			struct proto_recv_req *q = container_of(r, struct proto_recv_req, h);
			for (int i = 0; i < r->n; i++)
				sizes[i] = (int)q->got[i];
		}
	}
	*done = 1;
	req_put(r);
	return res;
}

/* ---------------- flush ---------------- */

ncclResult_t fab_net_iflush(void *recv_comm, int n, void **data, int *sizes, void **mhandles,
			    void **request)
{
	*request = NULL;
	struct proto_comm *c = proto_comm_from(recv_comm, PROTO_RECV);
	if (!c) {
		FAB_WARN(NCCL_NET, "iflush: %p is not a receive comm", recv_comm);
		return ncclInvalidArgument;
	}
	/* Host memory needs no flush: the CPU sees what the provider wrote. GPU
	 * buffers are flushed through the CUDA driver (control path, rare: NCCL
	 * calls iflush only for GPU-direct receives it must order). */
	for (int i = 0; i < n; i++) {
		struct fab_mr *mr = mhandles ? mhandles[i] : NULL;
		if (mr && mr->iface == FI_HMEM_CUDA && sizes[i] > 0) {
			int rc = fab_cuda_flush_gdr_writes();
			if (rc) {
				FAB_WARN(NCCL_NET, "iflush: cuFlushGPUDirectRDMAWrites failed (%d)", rc);
				return ncclUnhandledCudaError;
			}
			break;
		}
	}
	return ncclSuccess;
}

/* ---------------- registration ---------------- */

static struct proto_comm *data_comm(void *comm, const char *what)
{
	struct proto_comm *c = proto_comm_from(comm, 0);
	if (!c || c->kind == PROTO_LISTEN) {
		FAB_WARN(NCCL_NET, "%s: %p is not a send or receive comm", what, comm);
		return NULL;
	}
	return c;
}

ncclResult_t fab_net_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle)
{
	*mhandle = NULL;
	struct proto_comm *c = data_comm(comm, "regMr");
	if (!c)
		return ncclInvalidArgument;
	enum fi_hmem_iface iface = FI_HMEM_SYSTEM;
	int device = 0;
	if (type == NCCL_PTR_CUDA) {
		if (!c->dev->hmem) {
			FAB_WARN(NCCL_NET,
				 "regMr: NCCL registered GPU memory on %s, but this device does not "
				 "support it (ptrSupport 0x%x)",
				 c->dev->props.name, c->dev->props.ptr_support);
			return ncclInvalidArgument;
		}
		iface = FI_HMEM_CUDA;
		device = fab_cuda_pointer_device(data);
		if (device < 0) {
			FAB_WARN(NCCL_NET, "regMr: %p is not GPU memory the CUDA driver knows", data);
			return ncclInvalidArgument;
		}
	} else if (type != NCCL_PTR_HOST) {
		FAB_WARN(NCCL_NET, "regMr: unknown memory type %d", type);
		return ncclInvalidArgument;
	}
	struct fab_mr *mr;
	int rc = fab_mr_get(c->dev->dom, data, size, iface, device, &mr);
	if (rc)
		return rc == -FI_ENOMEM ? ncclSystemError : ncclSystemError;
	*mhandle = mr;
	return ncclSuccess;
}

ncclResult_t fab_net_reg_mr_dmabuf(void *comm, void *data, size_t size, int type,
				   uint64_t offset, int fd, void **mhandle)
{
	/* Without DMA-BUF support the plugin never advertises NCCL_PTR_DMABUF, so
	 * NCCL calls this only for the types regMr takes. */
	if (fd < 0 || !(fab_plugin_get() && fab_plugin_get()->hmem.dmabuf))
		return fab_net_reg_mr(comm, data, size, type, mhandle);
	return fab_net_reg_mr(comm, data, size, type, mhandle);
}

ncclResult_t fab_net_dereg_mr(void *comm, void *mhandle)
{
	if (!mhandle)
		return ncclSuccess;
	fab_mr_put(mhandle);
	return ncclSuccess;
}
