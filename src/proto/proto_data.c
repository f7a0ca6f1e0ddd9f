/*
 * proto_data.c - the data path: isend, irecv, test, iflush, and memory
 * registration. No allocation and no CUDA call happens here per operation.
 */
#include <stdio.h>
#include <string.h>

#include <rdma/fi_rma.h>
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

/* A receive whose remaining operations can never be posted: counted complete
 * so test() can report the failure instead of waiting forever. Posted ones
 * still complete (or are cancelled at close) normally. */
static void recv_abandon(struct proto_recv_req *q)
{
	struct proto_req *r = &q->h;
	req_fail(r, ncclSystemError);
	int missing = (r->nops - 1 - r->nposted) + (q->cts_sent ? 0 : 1);
	r->nposted = r->nops - 1;
	q->cts_sent = true;
	atomic_fetch_add(&r->ncomplete, missing);
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
			fab_cq_error_text(op->ep, err, text, sizeof(text));
			struct proto_send *s = container_of(c, struct proto_send, c);
			FAB_WARN(NCCL_NET, "send of %zu bytes to %s failed: %s", q->size, s->peer_text,
				 text);
		}
		req_fail(&q->h, err->err == FI_ECANCELED ? ncclSystemError : classify_error(err->err));
	}
	atomic_fetch_add_explicit(&q->h.ncomplete, 1, memory_order_release);
	op_finish(c, op);
}

/* The receive the peer posted for (tag, seq), once its CTS has arrived. */
static bool send_take_cts(struct proto_send *s, uint32_t folded, uint32_t seq, uint64_t *posted,
			  uint32_t *meta)
{
	uint64_t key = proto_cts_key(folded, seq & proto_tag_seq_mask(&s->c.dev->layout));
	pthread_mutex_lock(&s->cts_lock);
	bool found = proto_cts_take(&s->cts, key, posted, meta);
	pthread_mutex_unlock(&s->cts_lock);
	return found;
}

static void send_return_cts(struct proto_send *s, uint32_t folded, uint32_t seq, uint64_t posted,
			    uint32_t meta)
{
	uint64_t key = proto_cts_key(folded, seq & proto_tag_seq_mask(&s->c.dev->layout));
	pthread_mutex_lock(&s->cts_lock);
	(void)proto_cts_put(&s->cts, key, posted, meta); /* the slot it came from is free */
	pthread_mutex_unlock(&s->cts_lock);
}

/* Posts the chunks not posted yet. Returns 0 (all posted), -FI_EAGAIN, or an
 * error. Chunk j goes on rail j (one message: on q->rail). */
static int send_post_remaining(struct proto_send_req *q)
{
	struct proto_comm *c = q->h.comm;
	struct proto_send *s = container_of(c, struct proto_send, c);
	bool aborting = q->abort_size != 0;
	while (q->h.nposted < q->chunks) {
		int j = q->h.nposted;
		int rail = q->chunks == 1 ? q->rail : j;
		size_t off = 0, len = q->size;
		if (q->chunks > 1)
			proto_chunk(q->size, q->csize, j, &off, &len);
		const void *buf = q->data + off;
		void *desc = q->desc;
		uint64_t wire = q->wire;
		if (aborting) {
			/* a stand-in in every chunk, with the size where it fits */
			size_t room = q->posted, roff;
			if (q->chunks > 1)
				proto_chunk(q->posted, q->csize, j, &roff, &room);
			buf = &q->abort_size;
			len = room >= sizeof(q->abort_size) ? sizeof(q->abort_size) : 0;
			desc = c->ctrl_mr ? c->ctrl_mr->desc : NULL;
			wire |= c->dev->layout.abort_bit;
		}
		struct fab_op *op = &q->ops[j];
		op->ep = c->rails[rail];
		atomic_store(&op->posted, 1);
		atomic_fetch_add(&c->pending, 1);
		ssize_t rc = fab_ep_tsend(op->ep, buf, len, desc, s->peer[rail], wire, &op->ctx);
		if (rc) {
			atomic_store(&op->posted, 0);
			atomic_fetch_sub(&c->pending, 1);
			return (int)rc;
		}
		q->h.nposted++;
	}
	return 0;
}

/* A send that can never finish posting: the rest counted complete, failed. */
static void send_abandon(struct proto_send_req *q)
{
	struct proto_req *r = &q->h;
	req_fail(r, ncclSystemError);
	atomic_fetch_add(&r->ncomplete, r->nops - r->nposted);
	r->nposted = r->nops;
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
	const struct proto_tag_layout *lay = &c->dev->layout;
	struct fab_mr *mr = mhandle;
	if (!mr && size && (c->dev->dom->mr_mode & FI_MR_LOCAL)) {
		FAB_WARN(NCCL_NET, "isend: unregistered buffer, but provider %s needs registration",
			 c->dev->choice.domain);
		return ncclInvalidArgument;
	}

	uint32_t folded = proto_tag_fold(lay, tag);
	struct proto_seq_entry *se = proto_seq_get(&s->seq, folded);
	if (!se) {
		FAB_WARN(NCCL_NET, "isend: out of memory");
		return ncclSystemError;
	}
	uint32_t seq = se->seq;
	uint64_t posted;
	uint32_t meta;
	if (!send_take_cts(s, folded, seq, &posted, &meta)) {
		/* The receiver has not posted this message's buffer yet: NCCL retries. */
		if (fab_ep_progress(c->ep) < 0)
			return ncclSystemError;
		if (!send_take_cts(s, folded, seq, &posted, &meta))
			return ncclSuccess;
	}
	struct proto_req *r = req_get(c);
	if (!r) {
		send_return_cts(s, folded, seq, posted, meta);
		return ncclSuccess;
	}
	struct proto_send_req *q = container_of(r, struct proto_send_req, h);
	req_reset(r, 1);
	q->size = size;
	q->abort_size = 0;
	q->data = data;
	q->desc = mr ? mr->desc : NULL;
	q->wire = proto_tag_data(lay, s->remote_id, seq, tag);
	q->posted = posted;
	q->chunks = (int)(meta & 0xffff);
	q->rail = (int)(meta >> 16);
	q->csize = q->chunks > 1 ? proto_chunk_size(posted, q->chunks) : posted;
	r->nops = q->chunks;
	for (int j = 0; j < q->chunks; j++) {
		q->ops[j].complete = send_done;
		q->ops[j].owner = q;
		q->ops[j].index = j;
	}
	if (size > posted) {
		/* Never hand the provider a message larger than the receive: providers
		 * break the connection or hang on it. Stand-ins with the abort bit
		 * complete the peer's receive with an error instead. */
		FAB_WARN(NCCL_NET,
			 "isend of %zu bytes to %s (NCCL tag %d): the receiver posted only %llu "
			 "bytes. Both ranks must run the same NCCL version and NCCL_PROTO/"
			 "NCCL_ALGO/buffer settings",
			 size, s->peer_text, tag, (unsigned long long)posted);
		req_fail(r, ncclInvalidUsage);
		q->abort_size = size;
	}

	int rc = send_post_remaining(q);
	if (rc && r->nposted == 0) {
		req_put(r);
		send_return_cts(s, folded, seq, posted, meta);
		if (rc == -FI_EAGAIN) {
			(void)fab_ep_progress(c->ep);
			return ncclSuccess;
		}
		FAB_WARN(NCCL_NET, "isend of %zu bytes to %s: fi_tsend failed: %s", size, s->peer_text,
			 fab_strerror(rc));
		return ncclSystemError;
	}
	if (rc && rc != -FI_EAGAIN) {
		FAB_WARN(NCCL_NET, "isend of %zu bytes to %s: fi_tsend failed: %s", size, s->peer_text,
			 fab_strerror(rc));
		send_abandon(q);
	}
	/* with -FI_EAGAIN part way, test() posts the other chunks */
	se = proto_seq_get(&s->seq, folded); /* the table may have moved entries */
	se->seq++;
	FAB_TRACE(NCCL_NET, "isend %zu bytes tag %d seq %u to %s (%d chunk%s)", size, tag, seq,
		  s->peer_text, q->chunks, q->chunks == 1 ? "" : "s");
	*request = r;
	return ncclSuccess;
}

/* ---------------- receive ---------------- */

static void recv_done(struct fab_op *op, const struct fi_cq_tagged_entry *e,
		      const struct fi_cq_err_entry *err)
{
	struct proto_recv_req *q = op->owner;
	struct proto_comm *c = q->h.comm;
	struct proto_recv *r = container_of(c, struct proto_recv, c);
	int i = op->index / c->nrails; /* the buffer this chunk belongs to */
	if (e && (e->tag & c->dev->layout.abort_bit)) {
		/* The sender's stand-in for a message larger than this buffer. */
		uint64_t sent = 0;
		if (e->len == sizeof(sent) && !(op->index % c->nrails))
			memcpy(&sent, q->data[i], sizeof(sent));
		if (op->index % c->nrails == 0) {
			char what[64];
			if (sent)
				snprintf(what, sizeof(what), "a message of %llu bytes",
					 (unsigned long long)sent);
			else
				snprintf(what, sizeof(what), "a larger message");
			FAB_WARN(NCCL_NET,
				 "receive from %s: the sender had %s for a buffer of %zu bytes (NCCL "
				 "tag %d); nothing was written past the buffer. Both ranks must run the "
				 "same NCCL version and NCCL_PROTO/NCCL_ALGO/buffer settings",
				 r->peer_text, what, q->posted[i], q->tags[i]);
		}
		req_fail(&q->h, ncclInvalidUsage);
	} else if (e) {
		atomic_fetch_add(&q->got[i], e->len);
	} else {
		if (err->err == FI_ECANCELED && c->magic != PROTO_COMM_MAGIC && r->sink && q->cts_sent) {
			/* closing: the sender may still send this one; let it drain */
			ssize_t rc = fab_ep_trecv(op->ep, r->sink, r->sink_len,
					      r->sink_mr ? r->sink_mr->desc : NULL, FI_ADDR_UNSPEC,
					      q->wire[i], c->dev->layout.abort_bit, &op->ctx);
			if (rc == 0) {
				atomic_fetch_or(&q->sunk, 1ULL << op->index);
				return; /* still posted: pending unchanged */
			}
		}
		if (err->err == FI_ETRUNC) {
			/* Cannot happen with CTS checks; kept for providers that report it. */
			FAB_WARN(NCCL_NET,
				 "receive from %s: a message larger than the buffer of %zu bytes "
				 "arrived (NCCL tag %d; provider reports %zu bytes kept, %zu cut%s)",
				 r->peer_text, q->posted[i], q->tags[i], (size_t)err->len,
				 (size_t)err->olen, c->magic != PROTO_COMM_MAGIC ? ", comm closing" : "");
		} else if (err->err != FI_ECANCELED || c->magic == PROTO_COMM_MAGIC) {
			char text[256];
			fab_cq_error_text(op->ep, err, text, sizeof(text));
			FAB_WARN(NCCL_NET, "receive of up to %zu bytes from %s failed: %s", q->posted[i],
				 r->peer_text, text);
		}
		req_fail(&q->h, err->err == FI_ECANCELED ? ncclSystemError : classify_error(err->err));
	}
	atomic_fetch_add_explicit(&q->h.ncomplete, 1, memory_order_release);
	op_finish(c, op);
}

static void recv_cts_done(struct fab_op *op, const struct fi_cq_tagged_entry *e,
			  const struct fi_cq_err_entry *err)
{
	struct proto_recv_req *q = op->owner;
	struct proto_comm *c = q->h.comm;
	if (err) {
		if (err->err != FI_ECANCELED) {
			char text[256];
			fab_cq_error_text(op->ep, err, text, sizeof(text));
			FAB_WARN(NCCL_NET, "receive from %s: sending the CTS failed: %s",
				 container_of(c, struct proto_recv, c)->peer_text, text);
		}
		req_fail(&q->h, err->err == FI_ECANCELED ? ncclSystemError : classify_error(err->err));
	}
	atomic_fetch_add_explicit(&q->h.ncomplete, 1, memory_order_release);
	op_finish(c, op);
}

/* Posts what is not posted yet: every chunk of every buffer, then the CTS
 * that tells the sender they are there. Returns 0 (all posted), -FI_EAGAIN,
 * or an error. */
static int recv_post_remaining(struct proto_recv_req *q)
{
	struct proto_comm *c = q->h.comm;
	struct proto_recv *r = container_of(c, struct proto_recv, c);
	uint64_t ignore = c->dev->layout.abort_bit;
	int total = q->h.n * c->nrails;
	for (; q->cursor < total; q->cursor++) {
		int i = q->cursor / c->nrails, j = q->cursor % c->nrails;
		if (j >= q->chunks[i])
			continue;
		int rail = q->chunks[i] == 1 ? q->rail[i] : j;
		size_t off = 0, len = q->posted[i];
		if (q->chunks[i] > 1)
			proto_chunk(q->posted[i], q->csize[i], j, &off, &len);
		struct fab_op *op = &q->ops[q->cursor];
		op->ep = c->rails[rail];
		atomic_store(&op->posted, 1);
		atomic_fetch_add(&c->pending, 1);
		ssize_t rc = fab_ep_trecv(op->ep, (char *)q->data[i] + off, len, q->desc[i],
				      FI_ADDR_UNSPEC, q->wire[i], ignore, &op->ctx);
		if (rc) {
			atomic_store(&op->posted, 0);
			atomic_fetch_sub(&c->pending, 1);
			return (int)rc;
		}
		q->h.nposted++;
	}
	if (!q->cts_sent) {
		q->cts_op.ep = c->ep;
		atomic_store(&q->cts_op.posted, 1);
		atomic_fetch_add(&c->pending, 1);
		ssize_t rc = fab_ep_tsend(c->ep, &q->cts,
				      offsetof(struct proto_cts, e) + (size_t)q->h.n * sizeof(q->cts.e[0]),
				      c->ctrl_mr ? c->ctrl_mr->desc : NULL, r->peer[0],
				      proto_tag_ctrl(&c->dev->layout, PROTO_CTRL_CTS, r->reply_id),
				      &q->cts_op.ctx);
		if (rc) {
			atomic_store(&q->cts_op.posted, 0);
			atomic_fetch_sub(&c->pending, 1);
			return (int)rc;
		}
		q->cts_sent = true;
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
	const struct proto_tag_layout *lay = &c->dev->layout;
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
		(void)proto_comm_progress(c);
		return ncclSuccess;
	}
	struct proto_recv_req *q = container_of(r, struct proto_recv_req, h);
	size_t stripe_min = (size_t)fab_plugin_get()->cfg.v[FAB_CFG_STRIPE_MIN].i;
	req_reset(r, n);
	q->cts_sent = false;
	q->cursor = 0;
	atomic_store(&q->sunk, 0);
	q->cts.count = (uint32_t)n;
	q->cts.conn_id = rc_->id;
	q->cts_op.complete = recv_cts_done;
	q->cts_op.owner = q;
	q->cts_op.index = -1;
	int nops = 0;
	for (int i = 0; i < n; i++) {
		uint32_t folded = proto_tag_fold(lay, tags[i]);
		struct proto_seq_entry *se = proto_seq_get(&rc_->seq, folded);
		if (!se) {
			for (int k = 0; k < i; k++)
				proto_seq_get(&rc_->seq, proto_tag_fold(lay, tags[k]))->seq--;
			req_put(r);
			FAB_WARN(NCCL_NET, "irecv: out of memory");
			return ncclSystemError;
		}
		uint32_t seq = se->seq++;
		struct fab_mr *mr = mhandles ? mhandles[i] : NULL;
		q->data[i] = data[i];
		q->posted[i] = sizes[i];
		atomic_store(&q->got[i], 0);
		q->desc[i] = mr ? mr->desc : NULL;
		q->tags[i] = tags[i];
		q->wire[i] = proto_tag_data(lay, rc_->id, seq, tags[i]);
		/* Large receives are split over every rail; smaller ones take turns. */
		q->chunks[i] = (uint8_t)(c->nrails > 1 && sizes[i] >= stripe_min ? c->nrails : 1);
		q->rail[i] = (uint8_t)(q->chunks[i] == 1 ? seq % (uint32_t)c->nrails : 0);
		q->csize[i] = q->chunks[i] > 1 ? proto_chunk_size(sizes[i], q->chunks[i]) : sizes[i];
		q->cts.e[i].tag = tags[i];
		q->cts.e[i].seq = seq & proto_tag_seq_mask(lay);
		q->cts.e[i].size = sizes[i];
		q->cts.e[i].chunks = q->chunks[i];
		q->cts.e[i].rail = q->rail[i];
		q->cts.e[i].reserved = 0;
		for (int j = 0; j < q->chunks[i]; j++) {
			struct fab_op *op = &q->ops[i * c->nrails + j];
			op->complete = recv_done;
			op->owner = q;
			op->index = i * c->nrails + j;
		}
		nops += q->chunks[i];
	}
	r->nops = nops + 1; /* the chunks and the CTS */
	int prc = recv_post_remaining(q);
	if (prc && q->h.nposted == 0) {
		/* nothing went out: undo as if irecv had not been called */
		for (int k = 0; k < n; k++)
			proto_seq_get(&rc_->seq, proto_tag_fold(lay, tags[k]))->seq--;
		req_put(r);
		if (prc == -FI_EAGAIN) {
			(void)proto_comm_progress(c);
			return ncclSuccess;
		}
		FAB_WARN(NCCL_NET, "irecv from %s: fi_trecv failed: %s", rc_->peer_text,
			 fab_strerror(prc));
		return ncclSystemError;
	}
	if (prc && prc != -FI_EAGAIN) {
		FAB_WARN(NCCL_NET, "irecv from %s: posting failed: %s", rc_->peer_text,
			 fab_strerror(prc));
		recv_abandon(q);
	}
	/* with -FI_EAGAIN part way, test() posts the rest */
	FAB_TRACE(NCCL_NET, "irecv %d buffers from %s (first tag %d, %zu bytes, %d chunk%s)", n,
		  rc_->peer_text, tags[0], sizes[0], q->chunks[0], q->chunks[0] == 1 ? "" : "s");
	*request = r;
	return ncclSuccess;
}

/* ---------------- test ---------------- */

static int flush_post(struct proto_recv_req *q);

ncclResult_t fab_net_test(void *request, int *done, int *sizes)
{
	struct proto_req *r = request;
	*done = 0;
	if (!r || !r->in_use) {
		FAB_WARN(NCCL_NET, "test: %p is not a pending request", request);
		return ncclInvalidArgument;
	}
	struct proto_comm *c = r->comm;
	if (r->kind == PROTO_REQ_FLUSH && r->nposted == 0) {
		int rc = flush_post(container_of(r, struct proto_recv_req, h));
		if (rc && rc != -FI_EAGAIN) {
			FAB_WARN(NCCL_NET, "iflush: fi_read failed: %s", fab_strerror(rc));
			req_fail(r, ncclSystemError);
			atomic_fetch_add(&r->ncomplete, 1);
			r->nposted = 1;
		}
	} else if (r->kind == PROTO_REQ_RECV) {
		struct proto_recv_req *q = container_of(r, struct proto_recv_req, h);
		if (r->nposted < r->nops - 1 || !q->cts_sent) {
			int rc = recv_post_remaining(q);
			if (rc && rc != -FI_EAGAIN) {
				FAB_WARN(NCCL_NET, "test: posting a receive failed: %s", fab_strerror(rc));
				recv_abandon(q);
			}
		}
	} else if (r->kind == PROTO_REQ_SEND && r->nposted < r->nops) {
		struct proto_send_req *q = container_of(r, struct proto_send_req, h);
		int rc = send_post_remaining(q);
		if (rc && rc != -FI_EAGAIN) {
			FAB_WARN(NCCL_NET, "test: posting a send failed: %s", fab_strerror(rc));
			send_abandon(q);
		}
	}
	if (atomic_load_explicit(&r->ncomplete, memory_order_acquire) < r->nops) {
		if (proto_comm_progress(c) < 0)
			return ncclSystemError;
		if (atomic_load_explicit(&r->ncomplete, memory_order_acquire) < r->nops)
			return ncclSuccess;
	}
	ncclResult_t res = (ncclResult_t)atomic_load(&r->status);
	if (r->kind == PROTO_REQ_FLUSH) {
		r->kind = PROTO_REQ_RECV; /* back to the receive pool's kind */
	} else if (sizes) {
		if (r->kind == PROTO_REQ_SEND) {
			sizes[0] = (int)container_of(r, struct proto_send_req, h)->size;
		} else {
			struct proto_recv_req *q = container_of(r, struct proto_recv_req, h);
			for (int i = 0; i < r->n; i++)
				sizes[i] = (int)atomic_load(&q->got[i]);
		}
	}
	*done = 1;
	req_put(r);
	return res;
}

/* ---------------- flush ---------------- */

static void flush_done(struct fab_op *op, const struct fi_cq_tagged_entry *e,
		       const struct fi_cq_err_entry *err)
{
	struct proto_recv_req *q = op->owner;
	struct proto_comm *c = q->h.comm;
	if (err) {
		if (err->err != FI_ECANCELED) {
			char text[256];
			fab_cq_error_text(c->ep, err, text, sizeof(text));
			FAB_WARN(NCCL_NET, "iflush: the RDMA read that orders GPU writes failed: %s", text);
		}
		req_fail(&q->h, ncclSystemError);
	}
	atomic_fetch_add_explicit(&q->h.ncomplete, 1, memory_order_release);
	op_finish(c, op);
}

/* Posts the flush's read. Returns 0, -FI_EAGAIN (test() retries), or an error. */
static int flush_post(struct proto_recv_req *q)
{
	struct proto_comm *c = q->h.comm;
	struct fab_domain *dom = c->dev->dom;
	q->ops[0].ep = c->ep;
	atomic_store(&q->ops[0].posted, 1);
	atomic_fetch_add(&c->pending, 1);
	ssize_t rc = fab_ep_read(c->ep, dom->flush_page, sizeof(uint64_t),
			     dom->flush_mr ? dom->flush_mr->desc : NULL, q->flush_self,
			     q->flush_addr, q->flush_key, &q->ops[0].ctx);
	if (rc) {
		atomic_store(&q->ops[0].posted, 0);
		atomic_fetch_sub(&c->pending, 1);
		return (int)rc;
	}
	q->h.nposted = 1;
	return 0;
}

/* An RDMA read of one word of the received buffer into a host page: PCIe
 * orders it after the NIC's writes, so when it completes the data is in GPU
 * memory. Always returns a request (a NULL request would tell NCCL the flush
 * is done): a read the provider cannot take yet is posted again by test(). */
static ncclResult_t flush_rma(struct proto_comm *c, struct fab_mr *mr, void *data,
			      void **request)
{
	struct fab_domain *dom = c->dev->dom;
	fi_addr_t self;
	if (fab_ep_resolve(c->ep, c->ep->name, c->ep->namelen, &self))
		return ncclSystemError;
	struct proto_req *r = req_get(c);
	if (!r) {
		/* NCCL completes a receive before flushing it, so a slot is free */
		FAB_WARN(NCCL_NET, "iflush: no free request on this connection (%d in flight)",
			 PROTO_RECV_REQS);
		return ncclInternalError;
	}
	struct proto_recv_req *q = container_of(r, struct proto_recv_req, h);
	req_reset(r, 1);
	r->kind = PROTO_REQ_FLUSH;
	r->nops = 1;
	q->cts_sent = true;
	q->ops[0].complete = flush_done;
	q->ops[0].owner = q;
	q->ops[0].index = 0;
	q->flush_self = self;
	q->flush_key = mr->key;
	q->flush_addr = (dom->mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)data :
							   (uint64_t)((uintptr_t)data - mr->start);
	int rc = flush_post(q);
	if (rc && rc != -FI_EAGAIN) {
		r->kind = PROTO_REQ_RECV;
		req_put(r);
		FAB_WARN(NCCL_NET, "iflush: fi_read failed: %s", fab_strerror(rc));
		return ncclSystemError;
	}
	if (rc)
		(void)fab_ep_progress(c->ep);
	*request = r;
	return ncclSuccess;
}

ncclResult_t fab_net_iflush(void *recv_comm, int n, void **data, int *sizes, void **mhandles,
			    void **request)
{
	*request = NULL;
	struct proto_comm *c = proto_comm_from(recv_comm, PROTO_RECV);
	if (!c) {
		FAB_WARN(NCCL_NET, "iflush: %p is not a receive comm", recv_comm);
		return ncclInvalidArgument;
	}
	/* Host memory needs no flush: the CPU sees what the provider wrote. One
	 * flush covers every buffer of the receive (the NIC's writes are ordered
	 * before it), so the last GPU buffer with data is the one read. */
	int last = -1;
	for (int i = 0; i < n; i++) {
		struct fab_mr *mr = mhandles ? mhandles[i] : NULL;
		if (mr && mr->iface == FI_HMEM_CUDA && sizes[i] > 0)
			last = i;
	}
	if (last < 0)
		return ncclSuccess;
	switch (fab_plugin_get()->hmem.flush) {
	case FAB_FLUSH_RMA_READ:
		return flush_rma(c, mhandles[last], data[last], request);
	case FAB_FLUSH_CUDA: {
		int rc = fab_cuda_flush_gdr_writes();
		if (rc) {
			FAB_WARN(NCCL_NET, "iflush: cuFlushGPUDirectRDMAWrites failed (CUresult %d)", rc);
			return ncclUnhandledCudaError;
		}
		return ncclSuccess;
	}
	case FAB_FLUSH_NONE:
		break;
	}
	FAB_WARN(NCCL_NET, "iflush: GPU memory registered but no flush method chosen");
	return ncclInternalError;
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
		return ncclSystemError;
	*mhandle = mr;
	return ncclSuccess;
}

ncclResult_t fab_net_reg_mr_dmabuf(void *comm, void *data, size_t size, int type,
				   uint64_t offset, int fd, void **mhandle)
{
	*mhandle = NULL;
	struct fab_plugin *p = fab_plugin_get();
	if (type != NCCL_PTR_CUDA || fd < 0 || !p || !p->hmem.dmabuf)
		return fab_net_reg_mr(comm, data, size, type, mhandle);
	struct proto_comm *c = data_comm(comm, "regMrDmaBuf");
	if (!c)
		return ncclInvalidArgument;
	int device = fab_cuda_pointer_device(data);
	if (device < 0) {
		FAB_WARN(NCCL_NET, "regMrDmaBuf: %p is not GPU memory the CUDA driver knows", data);
		return ncclInvalidArgument;
	}
	/* NCCL closes fd right after this call: it is imported here, inside it. */
	struct fab_mr *mr;
	if (fab_mr_get_dmabuf(c->dev->dom, data, size, fd, offset, device, &mr))
		return ncclSystemError;
	*mhandle = mr;
	return ncclSuccess;
}

ncclResult_t fab_net_dereg_mr(void *comm, void *mhandle)
{
	if (!mhandle)
		return ncclSuccess;
	fab_mr_put(mhandle);
	return ncclSuccess;
}
