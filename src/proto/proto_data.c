/*
 * proto_data.c - the data path, in the order a transfer meets it: isend,
 * irecv, test, iflush; then memory registration. No allocation and no CUDA
 * call happens here per operation. A comm's requests and the post/undo of
 * its operations are proto_comm.c's, the CTS's building, sending and
 * receiving proto_cts.c's (proto.h).
 *
 * A send, top-down: isend takes the message's sequence number for its tag,
 * which also picks its rail: the connection's home rail, or, spread over
 * several rails, home + the number (proto_msg_rail), so consecutive messages
 * move on different rails at once. A message of at most
 * eager_max bytes is posted at once as a tagged send (the receive may not
 * exist yet: the provider matches it later). A larger one needs the receiver's CTS for that sequence
 * number: until it arrives isend returns no request and NCCL retries. With
 * the CTS in hand the message goes as one RMA write into the announced
 * buffer, its CQ data naming the buffer and the size (proto_rma_landed), or,
 * without RMA, as one tagged send that fits the posted receive. A message
 * larger than the posted receive is never handed to the provider: a stand-in
 * with the abort bit fails the receive on both sides.
 *
 * A receive posts a tagged receive per buffer on its message's rail (the
 * receiver counts each tag's messages as the sender does) and one CTS on the
 * home rail; the CTS of a receive whose buffers all take any eager message is lazy
 * (sent only if it still waits after PROTO_LAZY_CTS_NS, else skipped). What
 * completes a buffer: the tagged receive (eager or tagged sends, stand-ins),
 * or the RMA write's CQ data, after which its tagged receive is cancelled and
 * that cancellation completes it.
 */
#include <stdio.h>
#include <string.h>

#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include "cuda/cuda_drv.h"
#include "log/log.h"
#include "proto/proto.h"
#include "util/util.h"

/* ---------------- send ---------------- */

static void cq_warn(struct ofi_op *op, const struct fi_cq_err_entry *err, const char *what,
		    const char *peer)
{
	char text[256];
	ofi_cq_error_text(op->ep, err, text, sizeof(text));
	LOG_WARN(NCCL_NET, "%s %s failed: %s%s", what, peer, text,
		 err->err == FI_ECANCELED ? ". The provider dropped it with its connection: the peer "
					    "has gone (exited, crashed or lost its link)" : "");
}

/* Whether a failed data completion was a cancellation the plugin asked for: its
 * comm is closing, or was failed because its peer is gone. Any other
 * cancellation is the provider dropping the operation with its connection
 * (tcp;ofi_rxm cancels a receive whose sender died part way through). */
static bool cancelled_by_us(const struct proto_comm *c, const struct fi_cq_err_entry *err)
{
	return err->err == FI_ECANCELED &&
	       (c->magic != PROTO_COMM_MAGIC || atomic_load(&c->dead) != 0);
}

/* The code a failed data completion leaves in its request: once the peer is
 * known to be gone, that (whatever the provider reports, a cancellation
 * included); a cancellation the plugin did not ask for means the same. */
static int data_err(const struct proto_comm *c, const struct fi_cq_err_entry *err)
{
	int dead = atomic_load(&c->dead);
	if (dead)
		return proto_gone_rc(dead);
	if (err->err == FI_ECANCELED && !cancelled_by_us(c, err))
		return -FI_ECONNRESET;
	return ofi_err_cq(err->err);
}

static void send_done(struct ofi_op *op, const struct fi_cq_tagged_entry *e,
		      const struct fi_cq_err_entry *err)
{
	struct proto_send_req *q = op->owner;
	struct proto_comm *c = q->h.comm;
	if (err) {
		if (!cancelled_by_us(c, err)) {
			char what[96];
			snprintf(what, sizeof(what), "%s of %zu bytes to",
				 q->how == PROTO_SEND_RMA ? "RMA write" : "send", q->size);
			cq_warn(op, err, what, container_of(c, struct proto_send, c)->peer_text);
		}
		proto_req_fail(&q->h, data_err(c, err));
	}
	if (q->how == PROTO_SEND_RMA) {
		struct proto_send *s = container_of(c, struct proto_send, c);
		if (!err)
			atomic_fetch_add(&s->written, 1);
		atomic_fetch_sub(&s->writing, 1);
	}
	ofi_op_release(op);
	proto_op_complete(c, op, &q->h.ncomplete);
}

/* An RMA write's pieces, from q->cursor on: piece k goes on rail q->rail + k,
 * each with the same CQ data (the receiver counts them). Returns 0 when all
 * are posted, -FI_EAGAIN when the provider took none (the first) or not all
 * (test() posts the rest), or an error. */
static ssize_t send_post_pieces(struct proto_send *s, struct proto_send_req *q)
{
	struct proto_comm *c = &s->c;
	void *desc = q->mr ? q->mr->desc : NULL;
	uint64_t imm = proto_imm(s->remote_id, q->cts.slot, (uint32_t)q->size, (uint32_t)q->pieces);
	if (c->dev->dom->cq_data4)
		imm &= PROTO_IMM_LOW;
	for (; q->cursor < q->pieces; q->cursor++) {
		int k = q->cursor;
		struct ofi_op *op = k ? &q->more[k - 1] : &q->op;
		int rail = (q->rail + k) % c->nrails;
		size_t off = (size_t)k * q->piece;
		size_t len = k + 1 < q->pieces ? q->piece : q->size - off;
		op->complete = q->op.complete;
		op->owner = q;
		op->index = k;
		/* counted before the goodbye is looked at, which counts after it is
		 * marked (proto_send_stop): a write is either posted before the
		 * sender answers STOPPED or never */
		atomic_fetch_add(&s->writing, 1);
		if (atomic_load(&s->peer_closed)) {
			atomic_fetch_sub(&s->writing, 1);
			return -FI_ECONNRESET;
		}
		proto_op_post_begin(c, op, c->rails[rail], q->mr, true);
		ssize_t rc = proto_op_post_end(
			c, op, ofi_ep_writedata(op->ep, (const char *)q->data + off, len, desc, imm,
						s->peer[rail], q->cts.addr + off, q->cts.key, &op->ctx));
		if (rc) {
			atomic_fetch_sub(&s->writing, 1);
			return rc;
		}
	}
	return 0;
}

/* Pieces that will not be posted: counted complete. A provider's refusal
 * fails the request (the receiver's buffer never fills: NCCL aborts on the
 * error). The receiver's goodbye (-FI_ECONNRESET: it revoked its buffers)
 * does not: the message is dropped as a tagged send to a closed receive comm
 * is (its provider throws it away), and the request completes. */
static void send_pieces_end(struct proto_send *s, struct proto_send_req *q, int rc)
{
	if (rc == -FI_ECANCELED) {
		LOG_INFO(NCCL_NET, "isend to %s: its buffer was deregistered with %d of %d piece(s) "
			 "of a %zu-byte message not yet written; they never will be", s->peer_text,
			 q->pieces - q->cursor, q->pieces, q->size);
		proto_req_fail(&q->h, rc);
	} else if (rc == -FI_ECONNRESET) {
		LOG_INFO(NCCL_NET, "isend to %s: the receiver closed its connection; %d of %d "
			 "piece(s) of a %zu-byte message are not written (dropped)", s->peer_text,
			 q->pieces - q->cursor, q->pieces, q->size);
	} else {
		LOG_WARN(NCCL_NET, "isend: writing piece %d of %d of a %zu-byte message to %s "
			 "failed: %s", q->cursor + 1, q->pieces, q->size, s->peer_text,
			 ofi_strerror(rc));
		proto_req_fail(&q->h, ofi_err_sys(rc));
	}
	atomic_fetch_add(&q->h.ncomplete, q->pieces - q->cursor);
	q->cursor = q->pieces;
	/* the receiver will never take this message: closeSend must not wait
	 * for it (see proto_send.sent) */
	atomic_fetch_sub(&s->sent, 1);
}

/* Posts more of a write whose pieces the provider refused for a moment;
 * under s->post_lock. Returns whether some are still to be posted. */
static bool send_pieces_more(struct proto_send *s, struct proto_send_req *q)
{
	ssize_t rc = send_post_pieces(s, q);
	if (rc && rc != -FI_EAGAIN)
		send_pieces_end(s, q, (int)rc);
	return q->cursor < q->pieces;
}

/* A write with pieces the provider has not taken yet. */
static bool send_req_due(const struct proto_send_req *q)
{
	return q->h.in_use && q->how == PROTO_SEND_RMA && q->cursor < q->pieces;
}

/* Takes a listed comm off its device's due list; under dev->due_lock. */
static void send_delist_locked(struct proto_device *dev, struct proto_send *s)
{
	s->due = false;
	dlist_remove(&s->due_link);
	atomic_fetch_sub(&dev->ndue, 1);
}

/* Lock order: a device's due_lock, then a comm's post_lock. Under post_lock
 * a poster that leaves pieces only asks (due_asked); the comm is listed once
 * post_lock is released (send_list_due). */
static void send_ask_due(struct proto_send *s)
{
	atomic_store(&s->due_asked, true);
}

static void send_list_due(struct proto_send *s)
{
	if (!atomic_load_explicit(&s->due_asked, memory_order_relaxed) ||
	    !atomic_exchange(&s->due_asked, false))
		return;
	struct proto_device *dev = s->c.dev;
	pthread_mutex_lock(&dev->due_lock);
	if (!s->due) {
		s->due = true;
		dlist_insert_tail(&dev->due_sends, &s->due_link);
		atomic_fetch_add(&dev->ndue, 1);
	}
	pthread_mutex_unlock(&dev->due_lock);
}

void proto_send_undue(struct proto_send *s)
{
	struct proto_device *dev = s->c.dev;
	pthread_mutex_lock(&dev->due_lock);
	if (s->due)
		send_delist_locked(dev, s);
	pthread_mutex_unlock(&dev->due_lock);
}

void proto_sends_due(struct proto_device *dev)
{
	if (pthread_mutex_trylock(&dev->due_lock))
		return; /* another test() is at it */
	struct dlist *it = dev->due_sends.next, *next;
	for (; it != &dev->due_sends; it = next) {
		next = it->next;
		struct proto_send *s = container_of(it, struct proto_send, due_link);
		if (pthread_mutex_trylock(&s->post_lock))
			continue; /* its own isend or test() is posting */
		/* a comm whose peer is gone writes no more: its requests report
		 * that (proto_comm_alive) */
		bool more = false;
		for (int i = 0; i < PROTO_SEND_REQS && !atomic_load(&s->c.dead); i++) {
			if (send_req_due(&s->reqs[i]))
				more |= send_pieces_more(s, &s->reqs[i]);
		}
		if (!more)
			send_delist_locked(dev, s);
		pthread_mutex_unlock(&s->post_lock);
	}
	pthread_mutex_unlock(&dev->due_lock);
}

/* deregMr on a send comm: the pieces of its writes from that registration
 * that are not posted yet never will be (NCCL deregisters, then closes, with
 * sends in flight). The comm is only compared with the listed ones, never
 * read: a closed comm is on no list. Waits for the comm's poster. */
static void sends_drop_mr(const void *comm, struct ofi_mr *mr)
{
	struct proto_device *devs;
	int n = proto_devices(&devs);
	for (int d = 0; d < n; d++) {
		struct proto_device *dev = &devs[d];
		if (dev->dom != mr->dom || !atomic_load(&dev->ndue))
			continue;
		pthread_mutex_lock(&dev->due_lock);
		struct dlist *it;
		for (it = dev->due_sends.next; it != &dev->due_sends; it = it->next) {
			struct proto_send *s = container_of(it, struct proto_send, due_link);
			if ((const void *)&s->c != comm)
				continue;
			pthread_mutex_lock(&s->post_lock);
			for (int i = 0; i < PROTO_SEND_REQS; i++) {
				if (send_req_due(&s->reqs[i]) && s->reqs[i].mr == mr)
					send_pieces_end(s, &s->reqs[i], -FI_ECANCELED);
			}
			pthread_mutex_unlock(&s->post_lock);
		}
		pthread_mutex_unlock(&dev->due_lock);
	}
}

/* Posts the send's operations. Returns 0 (posted: all, or the first pieces of
 * a write), -FI_EAGAIN (nothing posted) or an error (nothing posted). */
static ssize_t send_post(struct proto_send *s, struct proto_send_req *q, int rail,
			 const void *data, struct ofi_mr *mr, uint64_t wire,
			 const struct proto_cts_entry *cts)
{
	struct proto_comm *c = &s->c;
	struct ofi_op *op = &q->op;
	void *desc = mr ? mr->desc : NULL;
	if (q->how == PROTO_SEND_RMA) {
		q->data = data;
		q->mr = mr;
		q->cts = *cts;
		ssize_t rc = send_post_pieces(s, q);
		if (rc && (q->cursor > 0 || rc == -FI_ECONNRESET)) {
			/* some pieces are on their way (or none will be: the
			 * receiver closed): the request stands; any test() of the
			 * device posts the rest, or this one reports the failure */
			if (rc != -FI_EAGAIN)
				send_pieces_end(s, q, (int)rc);
			else
				send_ask_due(s);
			return 0;
		}
		return rc;
	}
	if (q->how == PROTO_SEND_ABORT && c->dev->plan.writes_only)
		/* no tags: a control word names the buffer instead (posted, and
		 * counted in the comm, as a ping is) */
		return proto_abort_post(s, op, &q->abort_msg, cts->slot);
	proto_op_post_begin(c, op, c->rails[rail], q->how == PROTO_SEND_ABORT ? NULL : mr,
			    q->how == PROTO_SEND_TAGGED || q->how == PROTO_SEND_EARLY);
	ssize_t rc;
	if (q->how == PROTO_SEND_ABORT)
		/* the size travels where the posted buffer has room for it */
		rc = ofi_ep_tsend(op->ep, &q->abort_size,
				  cts->size >= sizeof(q->abort_size) ? sizeof(q->abort_size) : 0,
				  proto_ctrl_desc(c), s->peer[rail],
				  wire | c->dev->layout.abort_bit, &op->ctx);
	else
		rc = ofi_ep_tsend(op->ep, data, q->size, desc, s->peer[rail], wire, &op->ctx);
	return proto_op_post_end(c, op, rc);
}

/* How many pieces an RMA write of size bytes is cut into: one per rail, each
 * at least PROTO_PIECE_MIN bytes, from the device's stripe_min up. */
static int send_pieces(const struct proto_send *s, size_t size, size_t *piece)
{
	const struct proto_device *dev = s->c.dev;
	size_t n = 1;
	if (size == 0) {
		*piece = 0; /* a write of no bytes, for its CQ data (writes only) */
		return 1;
	}
	if (s->piece_ops && dev->plan.stripe_min && size >= dev->plan.stripe_min) {
		n = size / PROTO_PIECE_MIN;
		n = n > (size_t)s->c.nrails ? (size_t)s->c.nrails : n ? n : 1;
	}
	/* pieces start on 4 KiB boundaries; the last takes the rest */
	size_t p = ((size + n - 1) / n + 4095) & ~(size_t)4095;
	*piece = p;
	return (int)((size + p - 1) / p);
}

int net_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
		  void **request)
{
	*request = NULL;
	struct proto_comm *c = proto_comm_from(send_comm, PROTO_SEND);
	if (!c) {
		LOG_WARN(NCCL_NET, "isend: %p is not a send comm", send_comm);
		return -FI_EINVAL;
	}
	struct proto_send *s = container_of(c, struct proto_send, c);
	struct proto_device *dev = c->dev;
	const struct proto_tag_layout *lay = &dev->layout;
	struct ofi_mr *mr = mhandle;
	int gone = proto_comm_exited(c);
	if (gone) {
		(void)proto_comm_alive(c); /* the comm's WARN, once */
		return proto_gone_rc(gone);
	}
	if (!mr && size && (dev->dom->mr_mode & FI_MR_LOCAL)) {
		LOG_WARN(NCCL_NET, "isend: unregistered buffer, but provider %s needs registration",
			 dev->choice.domain);
		return -FI_EINVAL;
	}

	/* The sequence number, and the CTS for it when one is needed, are taken
	 * together under cts_lock: the CTS handler drops a CTS for a number
	 * already taken (an eager send did not wait for it). */
	uint32_t folded = proto_tag_fold(lay, tag);
	uint32_t mask = proto_tag_seq_mask(lay);
	bool eager = !dev->plan.writes_only && size <= dev->plan.eager_max;
	/* above the eager limit, a few may go before their CTS (early sends) */
	bool may_early = !eager && size <= dev->plan.early_max && dev->plan.early_sends > 0;
	bool early = false;
	struct proto_cts_entry cts;
	bool have = false;
	uint32_t seq = 0;
	for (int attempt = 0;; attempt++) {
		pthread_mutex_lock(&s->cts_lock);
		struct proto_seq_entry *se = proto_seq_get(&s->seq, folded);
		if (!se) {
			pthread_mutex_unlock(&s->cts_lock);
			LOG_WARN(NCCL_NET, "isend: out of memory");
			return -FI_ENOMEM;
		}
		seq = se->seq;
		have = proto_cts_take(&s->cts, proto_cts_key(folded, seq & mask), &cts);
		if (!have && may_early && s->nearly < dev->plan.early_sends) {
			s->early_size[s->nearly] = size;
			s->early[s->nearly++] = proto_cts_key(folded, seq & mask);
			early = true;
		}
		if (have || eager || early) {
			se->seq++;
			pthread_mutex_unlock(&s->cts_lock);
			break;
		}
		pthread_mutex_unlock(&s->cts_lock);
		/* The receiver has not announced this message's buffer yet: NCCL
		 * retries. */
		if (attempt || proto_comm_progress(c) < 0) {
			int dead = proto_comm_alive(c);
			if (dead) {
				LOG_WARN(NCCL_NET, "isend of %zu bytes to %s: the peer is gone (%s); "
					 "the message cannot be delivered", size, s->peer_text,
					 fi_strerror(dead));
				return proto_gone_rc(dead);
			}
			return 0;
		}
	}
	int rail = proto_msg_rail(c, seq);
	pthread_mutex_lock(&s->post_lock);
	struct proto_req *r = proto_req_get(c);
	struct proto_send_req *q = r ? container_of(r, struct proto_send_req, h) : NULL;
	ssize_t rc = -FI_EAGAIN;
	if (q) {
		proto_req_reset(r, 1);
		r->nops = 1;
		q->size = size;
		q->abort_size = 0;
		q->op.complete = send_done;
		q->op.owner = q;
		q->op.index = 0;
		q->pieces = 1;
		q->cursor = 0;
		q->piece = size;
		q->rail = rail;
		if (have && size > cts.size)
			q->how = PROTO_SEND_ABORT;
		else if (eager)
			q->how = PROTO_SEND_EAGER;
		else if (early)
			q->how = PROTO_SEND_EARLY;
		else if ((cts.flags & PROTO_CTS_RMA) && dev->dom->rma_write && size <= UINT32_MAX) {
			q->how = PROTO_SEND_RMA;
			q->pieces = send_pieces(s, size, &q->piece);
			r->nops = q->pieces;
		} else
			q->how = PROTO_SEND_TAGGED;
		if (q->how == PROTO_SEND_ABORT) {
			/* Never hand the provider a message larger than the receive:
			 * providers break the connection or hang on it. */
			LOG_WARN(NCCL_NET,
				 "isend of %zu bytes to %s (NCCL tag %d): the receiver posted only %llu "
				 "bytes. Both ranks must run the same NCCL version and NCCL_PROTO/"
				 "NCCL_ALGO/buffer settings",
				 size, s->peer_text, tag, (unsigned long long)cts.size);
			proto_req_fail(r, -FI_EMSGSIZE);
			q->abort_size = size;
		}
		/* counted before posting: a write whose later pieces are dropped
		 * at once (send_pieces_end) takes its count back */
		atomic_fetch_add_explicit(&s->sent, 1, memory_order_relaxed);
		rc = send_post(s, q, rail, data, mr,
			       proto_tag_data(lay, s->remote_id, seq, tag), &cts);
		if (rc)
			atomic_fetch_sub_explicit(&s->sent, 1, memory_order_relaxed);
	}
	if (rc && q)
		proto_req_put(r);
	pthread_mutex_unlock(&s->post_lock);
	send_list_due(s);
	if (rc) {
		/* Nothing went out: undo, as if isend had not been called. */
		pthread_mutex_lock(&s->cts_lock);
		proto_seq_get(&s->seq, folded)->seq--;
		if (have)
			(void)proto_cts_put(&s->cts, proto_cts_key(folded, seq & mask), &cts);
		if (early)
			proto_early_forget(s, proto_cts_key(folded, seq & mask));
		pthread_mutex_unlock(&s->cts_lock);
		if (rc == -FI_EAGAIN) {
			(void)ofi_ep_progress(c->rails[rail]);
			return 0;
		}
		LOG_WARN(NCCL_NET, "isend of %zu bytes to %s: %s failed: %s", size, s->peer_text,
			 q && q->how == PROTO_SEND_RMA ? "fi_writedata" : "fi_tsend",
			 ofi_strerror((int)rc));
		return ofi_err_sys((int)rc);
	}
	LOG_TRACE(NCCL_NET, "isend %zu bytes tag %d seq %u to %s on rail %d, %d piece(s) (%s)", size,
		  tag, seq, s->peer_text, rail, q->pieces,
		  q->how == PROTO_SEND_EAGER ? "eager" : q->how == PROTO_SEND_EARLY ? "early" :
		  q->how == PROTO_SEND_RMA ? "RMA write" :
		  q->how == PROTO_SEND_TAGGED ? "after CTS" : "stand-in");
	*request = r;
	return 0;
}

/* ---------------- receive ---------------- */

/* The comm's rail that ep is. */
static int comm_rail(const struct proto_comm *c, const struct ofi_ep *ep)
{
	int k = 0;
	while (k < c->nrails - 1 && c->rails[k] != ep)
		k++;
	return k;
}

static void recv_done(struct ofi_op *op, const struct fi_cq_tagged_entry *e,
		      const struct fi_cq_err_entry *err)
{
	struct proto_recv_req *q = op->owner;
	struct proto_comm *c = q->h.comm;
	struct proto_recv *r = container_of(c, struct proto_recv, c);
	int i = op->index;
	struct ofi_buf *bounce = q->bounce[i];
	q->bounce[i] = NULL;
	ofi_op_release(op); /* the provider is done with NCCL's buffer */
	if (err && err->err == FI_ECANCELED && c->magic != PROTO_COMM_MAGIC && r->sink &&
	    !(atomic_load(&q->sunk) >> i & 1) && !atomic_load(&r->sink_done)) {
		/* closing: the sender may still send this one; let it drain into
		 * the sink (until proto_recv.sink_done) */
		ofi_buf_put(c->dev->dom, bounce);
		bounce = NULL;
		if (ofi_ep_trecv(op->ep, r->sink, r->sink_len, r->sink_mr ? r->sink_mr->desc : NULL,
				 r->src[comm_rail(c, op->ep)], q->wire[i], c->dev->layout.abort_bit,
				 &op->ctx) == 0) {
			atomic_fetch_or(&q->sunk, 1ULL << i);
			return; /* still posted: pending unchanged */
		}
	}
	if (e)
		atomic_fetch_add_explicit(&r->taken, 1, memory_order_relaxed);
	if (e && (e->tag & c->dev->layout.abort_bit)) {
		/* The sender's stand-in for a message larger than this buffer. Its
		 * payload (the sender's size) comes from the peer and is not
		 * printed: the sender's own WARN names the size. */
		LOG_WARN(NCCL_NET,
			 "receive from %s: the sender had a message larger than this buffer of %zu "
			 "bytes (NCCL tag %d); nothing was written past the buffer. Both ranks must "
			 "run the same NCCL version and NCCL_PROTO/NCCL_ALGO/buffer settings",
			 r->peer_text, q->posted[i], q->tags[i]);
		proto_req_fail(&q->h, -FI_EMSGSIZE);
	} else if (e && (bounce || (q->spill >> i & 1)) && e->len > q->posted[i]) {
		LOG_WARN(NCCL_NET,
			 "receive from %s: a message of %zu bytes arrived for a buffer of %zu bytes "
			 "(NCCL tag %d); nothing was written past the buffer. Both ranks must run the "
			 "same NCCL version and NCCL_PROTO/NCCL_ALGO/buffer settings",
			 r->peer_text, (size_t)e->len, q->posted[i], q->tags[i]);
		proto_req_fail(&q->h, -FI_EMSGSIZE);
	} else if (e) {
		/* (a closed comm's buffers may be freed: nothing is copied there) */
		if (bounce && e->len && c->magic == PROTO_COMM_MAGIC)
			memcpy(q->data[i], bounce->mem, e->len);
		atomic_store(&q->got[i], e->len);
		atomic_store_explicit(&r->big_last, e->len > c->dev->plan.eager_max,
				      memory_order_relaxed);
	} else if (err->err == FI_ECANCELED && (atomic_load(&q->rma_done) & (1u << i))) {
		/* the RMA write filled this buffer; this was its tagged receive */
	} else {
		if (err->err == FI_ETRUNC) {
			/* an early send (it did not wait for the CTS, which names
			 * the size) larger than this receive: the provider cut it */
			LOG_WARN(NCCL_NET,
				 "receive from %s: a message larger than this buffer of %zu bytes "
				 "arrived (NCCL tag %d) and the provider cut it; nothing was written "
				 "past the buffer. Both ranks must run the same NCCL version and "
				 "NCCL_PROTO/NCCL_ALGO/buffer settings",
				 r->peer_text, q->posted[i], q->tags[i]);
		} else if (!cancelled_by_us(c, err)) {
			char what[96];
			snprintf(what, sizeof(what), "receive of up to %zu bytes from", q->posted[i]);
			cq_warn(op, err, what, r->peer_text);
		}
		proto_req_fail(&q->h, data_err(c, err));
	}
	ofi_buf_put(c->dev->dom, bounce);
	proto_op_complete(c, op, &q->h.ncomplete);
}

/* The CQ data of a peer's RMA write, or of one of its pieces: when every
 * piece has landed, one of our buffers is full. Runs under the CQ lock of
 * the rail the piece arrived on and the domain's id_lock, which serialises
 * the pieces of one buffer. The buffer's tagged receive is cancelled here
 * when this is its rail, else by the next test() (a cancel on another rail
 * from here could wait for that rail's CQ lock while its reader waits for
 * id_lock). Nothing in the data is trusted: a write that does not name a
 * buffer waiting for one, or whose pieces disagree, is dropped. */
void proto_rma_landed(struct ofi_ep *ep, void *arg, uint64_t imm, size_t len)
{
	struct proto_device *dev = arg;
	struct ofi_domain *dom = ep->dom;
	uint32_t conn, slot, size, pieces;
	proto_imm_parse(imm, &conn, &slot, &size, &pieces);
	/* 4 bytes of CQ data: the message's size is what its pieces brought */
	bool summed = dom->cq_data4;
	if (summed)
		size = len > UINT32_MAX ? UINT32_MAX : (uint32_t)len; /* this piece's */
	const char *why = NULL;
	pthread_mutex_lock(&dom->id_lock);
	struct proto_recv *r = ofi_domain_lookup_locked(dom, conn);
	struct proto_recv_req *q = NULL;
	int i = (int)(slot & 7);
	if (!r || r->c.magic != PROTO_COMM_MAGIC || r->c.kind != PROTO_RECV) {
		why = "no such connection (closed?)";
	} else {
		atomic_fetch_add(&r->pieces_in, 1); /* it landed, whatever it names: close counts it */
		q = &r->reqs[(slot >> 3) % PROTO_RECV_REQS];
		if (!q->h.in_use || q->h.kind != PROTO_REQ_RECV || i >= q->h.n ||
		    !(atomic_load(&q->rma_expect) & (1u << i)) ||
		    (atomic_load(&q->rma_done) & (1u << i)))
			why = "no buffer waits for it";
		else if (size > q->posted[i] ||
			 (summed && q->landed[i] && size > q->posted[i] - q->landing_size[i]))
			why = "larger than the buffer";
		else if ((int)pieces > r->c.nrails)
			why = "cut into more pieces than the connection has rails";
		else if (q->landed[i] && (pieces != q->pieces[i] ||
					  (!summed && size != q->landing_size[i])))
			why = "its pieces disagree on the message";
	}
	if (why) {
		pthread_mutex_unlock(&dom->id_lock);
		atomic_fetch_add(&ep->dropped, 1);
		LOG_WARN_LIMITED(NCCL_NET, "device %s: dropped an RMA write notice (connection %u, "
				 "slot %u, %u bytes, %u piece(s)): %s", dev->props.name, conn, slot,
				 size, pieces, why);
		return;
	}
	if (!q->landed[i]) {
		q->pieces[i] = (uint8_t)pieces;
		q->landing_size[i] = size;
	} else if (summed) {
		q->landing_size[i] += size;
	}
	size = q->landing_size[i];
	if (++q->landed[i] < pieces) {
		pthread_mutex_unlock(&dom->id_lock);
		return;
	}
	atomic_store(&q->got[i], (size_t)size);
	atomic_store_explicit(&r->big_last, size > dev->plan.eager_max, memory_order_relaxed);
	atomic_fetch_or(&q->rma_done, 1u << i);
	atomic_fetch_add_explicit(&r->taken, 1, memory_order_relaxed);
	/* the buffer's tagged receive will not be matched now: its cancellation
	 * (recv_done) completes the buffer; without tags there is none */
	if (dev->plan.writes_only)
		atomic_fetch_add_explicit(&q->h.ncomplete, 1, memory_order_release);
	else if (q->ops[i].ep == ep)
		ofi_ep_cancel(ep, &q->ops[i].ctx);
	else
		atomic_fetch_or(&q->cancel_due, 1u << i);
	pthread_mutex_unlock(&dom->id_lock);
}

/* Cancels the receives of buffers whose striped write has landed on another
 * rail (proto_rma_landed), each under its own rail's CQ lock (proto_op_cancel). */
static void recv_cancel_due(struct proto_recv_req *q)
{
	unsigned due = atomic_exchange(&q->cancel_due, 0);
	for (int i = 0; due; i++, due >>= 1) {
		if (!(due & 1))
			continue;
		struct ofi_ep *ep = q->h.comm->rails[q->rail[i]];
		pthread_mutex_lock(&ep->cq_lock);
		proto_op_cancel(&q->ops[i]);
		pthread_mutex_unlock(&ep->cq_lock);
	}
}

/* A receive whose buffers may take striped writes (two pieces or more: the
 * sender's NCCL_FABRIC_STRIPE_MIN decides) keeps its comm's other rails busy
 * (their progress threads read the pieces' CQ data, and test() reads every
 * rail) until test() reports it done: every rail but those its own receives
 * keep busy already. */
static void recv_hold_rails(struct proto_recv_req *q)
{
	struct proto_comm *c = q->h.comm;
	unsigned expect = atomic_load(&q->rma_expect);
	if (c->nrails < 2 || !expect)
		return;
	bool big = false;
	unsigned own = 0;
	for (int i = 0; i < q->h.n; i++) {
		big |= (expect >> i & 1) && q->posted[i] >= 2 * (size_t)PROTO_PIECE_MIN;
		own |= 1u << q->rail[i];
	}
	if (!big)
		return;
	q->rails_held = ((1u << c->nrails) - 1) & ~own;
	for (int k = 0; k < c->nrails; k++)
		if (q->rails_held >> k & 1)
			ofi_ep_bulk_hold(c->rails[k]);
}

void proto_recv_release_rails(struct proto_recv_req *q)
{
	struct proto_comm *c = q->h.comm;
	unsigned held = q->rails_held;
	q->rails_held = 0;
	for (int k = 0; k < c->nrails; k++)
		if (held >> k & 1)
			ofi_ep_bulk_drop(c->rails[k]);
}

/* Posts what is not posted yet: each buffer's tagged receive on its
 * message's rail, then the CTS that announces them on the home rail. Returns 0
 * (all posted), -FI_EAGAIN, or an error. */
static int recv_post_remaining(struct proto_recv_req *q)
{
	struct proto_comm *c = q->h.comm;
	struct proto_recv *r = container_of(c, struct proto_recv, c);
	uint64_t ignore = c->dev->layout.abort_bit;
	if (c->dev->plan.writes_only)
		q->cursor = q->h.n; /* every buffer takes a write: no receive to post */
	for (; q->cursor < q->h.n; q->cursor++) {
		int i = q->cursor;
		struct ofi_op *op = &q->ops[i];
		struct ofi_buf *b = q->bounce[i];
		struct ofi_buf *spill = q->spill >> i & 1 ? ofi_buf_spill(c->dev->dom) : NULL;
		struct ofi_mr *mr = q->mr[i];
		/* from the peer only, where the provider can (directed receives):
		 * another process cannot fill it by guessing the tag */
		fi_addr_t src = r->src[q->rail[i]];
		/* Bulk (the rail's progress thread reads its CQ all the time)
		 * only when a large message is likely: NCCL posts every receive
		 * with its whole slot, so the posted size alone would wake the
		 * thread for every small message too, and a thread spinning
		 * beside NCCL's proxy thread costs each of them more than it
		 * saves. The last message's size predicts the next one's: NCCL
		 * cuts a collective into steps of one size. */
		proto_op_post_begin(c, op, c->rails[q->rail[i]], b ? NULL : mr,
				    q->posted[i] > c->dev->plan.eager_max &&
					    atomic_load_explicit(&r->big_last, memory_order_relaxed));
		void *desc = mr ? mr->desc : NULL;
		ssize_t rc = b ? ofi_ep_trecv(op->ep, b->mem, c->dev->plan.eager_max, b->desc, src,
					      q->wire[i], ignore, &op->ctx) :
			     spill ? ofi_ep_trecv_spill(op->ep, q->data[i], q->posted[i], desc, spill,
							src, q->wire[i], ignore, &op->ctx) :
				     ofi_ep_trecv(op->ep, q->data[i], q->posted[i], desc, src,
						  q->wire[i], ignore, &op->ctx);
		if (proto_op_post_end(c, op, rc))
			return (int)rc;
		q->h.nposted++;
	}
	if (!q->cts_sent) {
		int rc = proto_cts_send(q);
		if (rc || !q->cts_sent)
			return rc;
		recv_hold_rails(q);
	}
	return 0;
}

/* A receive whose remaining operations can never be posted (rc: the posting's
 * failure): counted complete so test() can report the failure instead of
 * waiting forever. Its CTS never went out, so no message above the eager
 * limit and no write will come: the receives already posted are cancelled
 * (their cancellations complete them), and with writes only every buffer is
 * counted complete. */
static void recv_abandon(struct proto_recv_req *q, int rc)
{
	struct proto_req *r = &q->h;
	struct proto_comm *c = r->comm;
	proto_req_fail(r, ofi_err_sys(rc));
	atomic_store(&q->cts_lazy, 0);
	bool cts_sent = q->cts_sent, writes_only = c->dev->plan.writes_only;
	int posted = q->cursor;
	int missing = (r->n - posted) + (cts_sent ? 0 : 1);
	if (!cts_sent && writes_only)
		missing += posted; /* buffers waiting for writes that cannot come */
	for (int k = q->cursor; k < r->n; k++) {
		ofi_buf_put(c->dev->dom, q->bounce[k]);
		q->bounce[k] = NULL;
	}
	q->cursor = r->n;
	q->cts_sent = true;
	atomic_fetch_add(&r->ncomplete, missing);
	if (!cts_sent && !writes_only && posted) {
		proto_comm_lock_rails(c);
		for (int k = 0; k < posted; k++)
			proto_op_cancel(&q->ops[k]);
		proto_comm_unlock_rails(c);
	}
}

/* Writes only: each buffer's registration is held from irecv until the
 * request ends (no receive is posted to hold it): NCCL's deregMr meanwhile
 * waits, and a write on its way never meets a closed registration. */
static void recv_release_holds(struct proto_recv_req *q, int n)
{
	for (int k = 0; k < n; k++)
		ofi_op_release(&q->ops[k]);
}

int net_irecv(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
		  void **mhandles, void **request)
{
	*request = NULL;
	struct proto_comm *c = proto_comm_from(recv_comm, PROTO_RECV);
	if (!c) {
		LOG_WARN(NCCL_NET, "irecv: %p is not a receive comm", recv_comm);
		return -FI_EINVAL;
	}
	int gone = proto_comm_exited(c); /* a receive may post its CTS to the peer */
	if (gone) {
		(void)proto_comm_alive(c); /* the comm's WARN, once */
		return proto_gone_rc(gone);
	}
	struct proto_recv *rc_ = container_of(c, struct proto_recv, c);
	struct proto_device *dev = c->dev;
	const struct proto_tag_layout *lay = &dev->layout;
	if (n < 1 || n > dev->props.max_recvs) {
		LOG_WARN(NCCL_NET, "irecv: %d buffers requested, maxRecvs is %d", n,
			 dev->props.max_recvs);
		return -FI_EINVAL;
	}
	bool need_mr = (dev->dom->mr_mode & FI_MR_LOCAL) || dev->plan.writes_only;
	for (int i = 0; i < n; i++) {
		if (need_mr && (sizes[i] || dev->plan.writes_only) && !(mhandles && mhandles[i])) {
			LOG_WARN(NCCL_NET, "irecv: unregistered buffer, but the provider needs registration");
			return -FI_EINVAL;
		}
	}
	struct proto_req *r = proto_req_get(c);
	if (!r) {
		(void)proto_comm_progress(c);
		return 0;
	}
	struct proto_recv_req *q = container_of(r, struct proto_recv_req, h);
	bool rma = dev->dom->rma_write;
	proto_req_reset(r, n);
	r->nops = n + 1; /* a receive per buffer, and the CTS */
	q->cts_sent = false;
	q->cts_due_ns = 0;
	atomic_store(&q->cts_lazy, 0);
	q->cursor = 0;
	atomic_store(&q->sunk, 0);
	atomic_store(&q->rma_expect, 0);
	atomic_store(&q->rma_done, 0);
	atomic_store(&q->cancel_due, 0);
	q->rails_held = 0;
	q->spill = 0;
	memset(q->landed, 0, sizeof(q->landed));
	proto_cts_init(q, n);
	for (int i = 0; i < n; i++) {
		uint32_t folded = proto_tag_fold(lay, tags[i]);
		struct proto_seq_entry *se = proto_seq_get(&rc_->seq, folded);
		if (!se) {
			for (int k = 0; k < i; k++) {
				proto_seq_get(&rc_->seq, proto_tag_fold(lay, tags[k]))->seq--;
				ofi_buf_put(dev->dom, q->bounce[k]);
			}
			recv_release_holds(q, i);
			proto_req_put(r);
			LOG_WARN(NCCL_NET, "irecv: out of memory");
			return -FI_ENOMEM;
		}
		uint32_t seq = se->seq++;
		struct ofi_mr *mr = mhandles ? mhandles[i] : NULL;
		q->data[i] = data[i];
		q->posted[i] = sizes[i];
		atomic_store(&q->got[i], 0);
		q->mr[i] = mr;
		q->tags[i] = tags[i];
		q->wire[i] = proto_tag_data(lay, rc_->id, seq, tags[i]);
		q->rail[i] = (uint8_t)proto_msg_rail(c, seq);
		q->bounce[i] = NULL;
		if (sizes[i] < dev->plan.eager_max && !(mr && mr->iface != FI_HMEM_SYSTEM)) {
			if ((!sizes[i] || dev->dom->rx_iov2) && ofi_buf_spill(dev->dom)) {
				q->spill |= 1u << i;
			} else {
				q->bounce[i] = ofi_buf_get(dev->dom);
				if (!q->bounce[i])
					LOG_WARN_LIMITED(NCCL_NET,
							 "irecv: no memory for a bounce buffer; a message "
							 "larger than this %zu-byte buffer would be cut by "
							 "the provider", sizes[i]);
			}
		}
		proto_cts_announce(q, i, seq, rma);
		struct ofi_op *op = &q->ops[i];
		op->complete = recv_done;
		op->owner = q;
		op->index = i;
	}
	proto_cts_lazy(q);
	int prc = recv_post_remaining(q);
	if (prc && q->h.nposted == 0) {
		/* nothing went out: undo as if irecv had not been called */
		for (int k = 0; k < n; k++) {
			proto_seq_get(&rc_->seq, proto_tag_fold(lay, tags[k]))->seq--;
			ofi_buf_put(dev->dom, q->bounce[k]);
		}
		recv_release_holds(q, n);
		proto_req_put(r);
		if (prc == -FI_EAGAIN) {
			(void)proto_comm_progress(c);
			return 0;
		}
		LOG_WARN(NCCL_NET, "irecv from %s: fi_trecv failed: %s", rc_->peer_text,
			 ofi_strerror(prc));
		return ofi_err_sys(prc);
	}
	if (prc && prc != -FI_EAGAIN) {
		LOG_WARN(NCCL_NET, "irecv from %s: posting failed: %s", rc_->peer_text,
			 ofi_strerror(prc));
		recv_abandon(q, prc);
	}
	/* with -FI_EAGAIN part way, test() posts the rest */
	LOG_TRACE(NCCL_NET, "irecv %d buffers from %s (first tag %d, %zu bytes, rail %d%s)", n,
		  rc_->peer_text, tags[0], sizes[0], q->rail[0],
		  (atomic_load(&q->rma_expect) & 1) ? ", RMA target" : "");
	*request = r;
	return 0;
}

/* ---------------- test ---------------- */

static int flush_post(struct proto_recv_req *q);

static int test_req(struct proto_req *r, int *done, int *sizes);

int net_test(void *request, int *done, int *sizes)
{
	struct proto_req *r = request;
	*done = 0;
	if (!r || !r->in_use) {
		LOG_WARN(NCCL_NET, "test: %p is not a pending request", request);
		return -FI_EINVAL;
	}
	struct proto_device *dev = r->comm->dev;
	if (atomic_load_explicit(&dev->ndue, memory_order_relaxed))
		proto_sends_due(dev);
	if (r->kind != PROTO_REQ_SEND)
		return test_req(r, done, sizes);
	struct proto_send *s = container_of(r->comm, struct proto_send, c);
	pthread_mutex_lock(&s->post_lock);
	int rc = test_req(r, done, sizes);
	pthread_mutex_unlock(&s->post_lock);
	send_list_due(s);
	return rc;
}

/* One request's test(); a send's under its comm's post_lock. */
static int test_req(struct proto_req *r, int *done, int *sizes)
{
	if (r->kind == PROTO_REQ_FLUSH && r->nposted == 0) {
		int rc = flush_post(container_of(r, struct proto_recv_req, h));
		if (rc && rc != -FI_EAGAIN) {
			LOG_WARN(NCCL_NET, "iflush: fi_read failed: %s", ofi_strerror(rc));
			proto_req_fail(r, ofi_err_sys(rc));
			atomic_fetch_add(&r->ncomplete, 1);
			r->nposted = 1;
		}
	} else if (r->kind == PROTO_REQ_RECV) {
		/* Every receive of the comm that could not post everything yet, not
		 * only this one: NCCL tests the oldest request, which may wait for
		 * a message whose sender waits for a later request's CTS. */
		struct proto_recv *rv = container_of(r->comm, struct proto_recv, c);
		for (int k = 0; k < PROTO_RECV_REQS; k++) {
			struct proto_recv_req *q = &rv->reqs[k];
			if (!q->h.in_use || q->h.kind != PROTO_REQ_RECV)
				continue;
			if (atomic_load_explicit(&q->cancel_due, memory_order_relaxed))
				recv_cancel_due(q);
			if (q->cursor >= q->h.n && q->cts_sent)
				continue;
			int rc = recv_post_remaining(q);
			if (rc && rc != -FI_EAGAIN) {
				LOG_WARN(NCCL_NET, "test: posting a receive failed: %s", ofi_strerror(rc));
				recv_abandon(q, rc);
			}
		}
	}
	/* the rails this request's operations take, and the home rail, where
	 * the comm's CTS and pings travel; all of them for a striped write */
	struct proto_comm *c = r->comm;
	unsigned all = (1u << c->nrails) - 1, rails = 1u << c->home;
	if (r->kind == PROTO_REQ_SEND) {
		struct proto_send_req *q = container_of(r, struct proto_send_req, h);
		rails |= q->pieces > 1 ? all : 1u << q->rail;
		if (send_req_due(q) && send_pieces_more(container_of(r->comm, struct proto_send, c), q))
			send_ask_due(container_of(r->comm, struct proto_send, c));
	} else if (r->kind == PROTO_REQ_RECV) {
		struct proto_recv_req *q = container_of(r, struct proto_recv_req, h);
		if (q->rails_held) /* (the rest are its own: all rails either way) */
			rails = all;
		for (int i = 0; i < r->n; i++)
			rails |= 1u << q->rail[i];
	}
	proto_cts_skip_lazy(r);
	if (atomic_load_explicit(&r->ncomplete, memory_order_acquire) < r->nops) {
		/* a flush reads on rail 0 */
		int prc = r->kind == PROTO_REQ_FLUSH ? ofi_ep_progress(c->ep) :
			  proto_comm_progress_rails(c, rails);
		if (prc < 0)
			return ofi_err_sys(prc);
		proto_cts_skip_lazy(r);
		if (atomic_load_explicit(&r->ncomplete, memory_order_acquire) < r->nops) {
			/* The peer is gone: its operations were failed and cancelled. A
			 * provider may never complete the cancellations; the request then
			 * stays in use (its operations may still be posted) and reports
			 * the error, so NCCL's abort starts in bounded time. */
			int dead = proto_comm_alive(r->comm);
			if (dead) {
				LOG_WARN_LIMITED(NCCL_NET, "test: the peer of this connection is gone; "
						 "reporting ncclRemoteError");
				return proto_gone_rc(dead);
			}
			if (r->kind == PROTO_REQ_RECV)
				proto_cts_check_failed(container_of(r, struct proto_recv_req, h));
			return 0;
		}
	}
	int res = atomic_load(&r->status);
	if (res && atomic_load(&r->comm->dead))
		(void)proto_comm_alive(r->comm); /* the comm's WARN, once, and the rest failed */
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
	if (r->kind == PROTO_REQ_RECV) {
		proto_recv_release_rails(container_of(r, struct proto_recv_req, h));
		recv_release_holds(container_of(r, struct proto_recv_req, h), r->n);
	}
	*done = 1;
	proto_req_put(r);
	return res;
}

/* ---------------- flush ---------------- */

static void flush_done(struct ofi_op *op, const struct fi_cq_tagged_entry *e,
		       const struct fi_cq_err_entry *err)
{
	struct proto_recv_req *q = op->owner;
	struct proto_comm *c = q->h.comm;
	if (err) {
		if (err->err != FI_ECANCELED) {
			char text[256];
			ofi_cq_error_text(c->ep, err, text, sizeof(text));
			LOG_WARN(NCCL_NET, "iflush: the RDMA read that orders GPU writes failed: %s", text);
		}
		proto_req_fail(&q->h, ofi_err_sys(-err->err));
	}
	proto_op_complete(c, op, &q->h.ncomplete);
}

/* Posts the flush's read. Returns 0, -FI_EAGAIN (test() retries), or an error. */
static int flush_post(struct proto_recv_req *q)
{
	struct proto_comm *c = q->h.comm;
	struct ofi_domain *dom = c->dev->dom;
	proto_op_post_begin(c, &q->ops[0], c->ep, NULL, false); /* flushes read on rail 0 */
	ssize_t rc = ofi_ep_read(c->ep, dom->flush_page, sizeof(uint64_t),
			     dom->flush_mr ? dom->flush_mr->desc : NULL, q->flush_self,
			     q->flush_addr, q->flush_key, &q->ops[0].ctx);
	if (proto_op_post_end(c, &q->ops[0], rc))
		return (int)rc;
	q->h.nposted = 1;
	return 0;
}

/* An RDMA read of one word of the received buffer into a host page: PCIe
 * orders it after the NIC's writes, so when it completes the data is in GPU
 * memory. Always returns a request (a NULL request would tell NCCL the flush
 * is done): a read the provider cannot take yet is posted again by test(). */
static int flush_rma(struct proto_comm *c, struct ofi_mr *mr, void *data, void **request)
{
	struct ofi_domain *dom = c->dev->dom;
	fi_addr_t self;
	int rrc = ofi_ep_resolve(c->ep, c->ep->name, c->ep->namelen, &self);
	if (rrc)
		return ofi_err_sys(rrc);
	struct proto_req *r = proto_req_get(c);
	if (!r) {
		/* NCCL completes a receive before flushing it, so a slot is free */
		LOG_WARN(NCCL_NET, "iflush: no free request on this connection (%d in flight)",
			 PROTO_RECV_REQS);
		return -FI_EOPBADSTATE;
	}
	struct proto_recv_req *q = container_of(r, struct proto_recv_req, h);
	proto_req_reset(r, 1);
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
		proto_req_put(r);
		LOG_WARN(NCCL_NET, "iflush: fi_read failed: %s", ofi_strerror(rc));
		return ofi_err_sys(rc);
	}
	if (rc)
		(void)ofi_ep_progress(c->ep);
	*request = r;
	return 0;
}

int net_iflush(void *recv_comm, int n, void **data, int *sizes, void **mhandles,
		   void **request)
{
	*request = NULL;
	struct proto_comm *c = proto_comm_from(recv_comm, PROTO_RECV);
	if (!c) {
		LOG_WARN(NCCL_NET, "iflush: %p is not a receive comm", recv_comm);
		return -FI_EINVAL;
	}
	/* Host memory needs no flush: the CPU sees what the provider wrote. One
	 * flush covers every buffer of the receive (the NIC's writes are ordered
	 * before it), so the last GPU buffer with data is the one read. */
	int last = -1;
	for (int i = 0; i < n; i++) {
		struct ofi_mr *mr = mhandles ? mhandles[i] : NULL;
		if (mr && mr->iface == FI_HMEM_CUDA && sizes[i] > 0)
			last = i;
	}
	if (last < 0)
		return 0;
	switch ((enum policy_flush_method)c->dev->plan.flush) {
	case POLICY_FLUSH_RMA_READ:
		return flush_rma(c, mhandles[last], data[last], request);
	case POLICY_FLUSH_CUDA: {
		int rc = cuda_flush_gdr_writes();
		if (rc) {
			LOG_WARN(NCCL_NET, "iflush: cuFlushGPUDirectRDMAWrites failed (CUresult %d)", rc);
			return -OFI_ECUDA;
		}
		return 0;
	}
	case POLICY_FLUSH_NONE:
		break;
	}
	LOG_WARN(NCCL_NET, "iflush: GPU memory registered but no flush method chosen");
	return -FI_EOPBADSTATE;
}

/* ---------------- registration ---------------- */

static struct proto_comm *data_comm(void *comm, const char *what)
{
	struct proto_comm *c = proto_comm_from(comm, 0);
	if (!c || c->kind == PROTO_LISTEN) {
		LOG_WARN(NCCL_NET, "%s: %p is not a send or receive comm", what, comm);
		return NULL;
	}
	return c;
}

int net_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle)
{
	*mhandle = NULL;
	struct proto_comm *c = data_comm(comm, "regMr");
	if (!c)
		return -FI_EINVAL;
	enum fi_hmem_iface iface = FI_HMEM_SYSTEM;
	int device = 0;
	if (type == NCCL_PTR_CUDA) {
		if (!c->dev->plan.hmem) {
			LOG_WARN(NCCL_NET,
				 "regMr: NCCL registered GPU memory on %s, but this device does not "
				 "support it (ptrSupport 0x%x)",
				 c->dev->props.name, c->dev->props.ptr_support);
			return -FI_EINVAL;
		}
		iface = FI_HMEM_CUDA;
		device = cuda_pointer_device(data);
		if (device < 0) {
			LOG_WARN(NCCL_NET, "regMr: %p is not GPU memory the CUDA driver knows", data);
			return -FI_EINVAL;
		}
	} else if (type != NCCL_PTR_HOST) {
		LOG_WARN(NCCL_NET, "regMr: unknown memory type %d", type);
		return -FI_EINVAL;
	}
	struct ofi_mr *mr;
	int rc = ofi_mr_get(c->dev->dom, data, size, iface, device, &mr);
	if (rc)
		return ofi_err_sys(rc);
	*mhandle = mr;
	return 0;
}

int net_reg_mr_dmabuf(void *comm, void *data, size_t size, int type, uint64_t offset,
			  int fd, void **mhandle)
{
	*mhandle = NULL;
	struct proto_comm *c = data_comm(comm, "regMrDmaBuf");
	if (!c)
		return -FI_EINVAL;
	if (type != NCCL_PTR_CUDA || fd < 0 || !c->dev->plan.dmabuf)
		return net_reg_mr(comm, data, size, type, mhandle);
	int device = cuda_pointer_device(data);
	if (device < 0) {
		LOG_WARN(NCCL_NET, "regMrDmaBuf: %p is not GPU memory the CUDA driver knows", data);
		return -FI_EINVAL;
	}
	/* NCCL closes fd right after this call: it is imported here, inside it. */
	struct ofi_mr *mr;
	int rc = ofi_mr_get_dmabuf(c->dev->dom, data, size, fd, offset, device, &mr);
	if (rc)
		return ofi_err_sys(rc);
	*mhandle = mr;
	return 0;
}

int net_dereg_mr(void *comm, void *mhandle)
{
	if (!mhandle)
		return 0;
	sends_drop_mr(comm, mhandle);
	ofi_mr_put(mhandle);
	return 0;
}
