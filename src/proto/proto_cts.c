/*
 * proto_cts.c - the clear-to-send (CTS), in one place. A message above the
 * eager limit waits for it: the receiver announces each buffer of a receive
 * (its size and, for an RMA write, its address and key) in one CTS message;
 * the sender keeps the announced entries in a table keyed by (folded NCCL
 * tag, sequence number), where isend takes the one for its message.
 *
 * In the order a CTS lives: the receiver builds it (proto_cts_init,
 * proto_cts_announce per buffer, proto_cts_lazy), sends it (proto_cts_send),
 * skips a lazy one no longer needed (proto_cts_skip_lazy) and fails a receive
 * whose CTS could not be delivered (proto_cts_check_failed); the sender
 * receives it (proto_cts_handler) into its table (proto_cts_put; isend's
 * proto_cts_take).
 */
#include <stdio.h>
#include <string.h>

#include "log/log.h"
#include "proto/proto.h"
#include "proto/proto_cts.h"
#include "util/util.h"

/* ---------------- the receiver: building and sending a CTS ---------------- */

static void cts_done(struct ofi_op *op, const struct fi_cq_tagged_entry *e,
		     const struct fi_cq_err_entry *err)
{
	struct proto_recv_req *q = op->owner;
	struct proto_comm *c = q->h.comm;
	if (err && err->err != FI_ECANCELED) {
		/* An eager sender may be done and gone before our CTS reaches it:
		 * then its messages are here, or on their way. test() fails the
		 * request only if it is still waiting a while later. */
		q->cts_err = err->err;
		atomic_store(&q->cts_failed_ns, util_now_ns());
		LOG_TRACE(NCCL_NET, "receive: the CTS to %s failed: %s",
			  container_of(c, struct proto_recv, c)->peer_text, fi_strerror(err->err));
	}
	proto_op_complete(c, op, &q->h.ncomplete);
}

void proto_cts_init(struct proto_recv_req *q, int n)
{
	struct proto_comm *c = q->h.comm;
	struct proto_recv *rc_ = container_of(c, struct proto_recv, c);
	q->cts.count = (uint32_t)n;
	q->cts.conn_id = rc_->id;
	q->cts.secret = c->secret;
	atomic_store(&q->cts_failed_ns, 0);
	q->cts_op.complete = cts_done;
	q->cts_op.owner = q;
	q->cts_op.index = -1;
}

void proto_cts_announce(struct proto_recv_req *q, int i, uint32_t seq, bool rma)
{
	struct proto_comm *c = q->h.comm;
	struct proto_recv *rc_ = container_of(c, struct proto_recv, c);
	struct proto_device *dev = c->dev;
	uint32_t index = (uint32_t)(q - rc_->reqs);
	struct ofi_mr *mr = q->mr[i];
	size_t size = q->posted[i];
	void *data = q->data[i];
	struct proto_cts_entry *ce = &q->cts.e[i];
	memset(ce, 0, sizeof(*ce));
	ce->tag = q->tags[i];
	ce->seq = seq & proto_tag_seq_mask(&dev->layout);
	ce->size = size;
	if (rma && mr && (size > dev->plan.eager_max || dev->plan.writes_only) && size <= UINT32_MAX) {
		/* a large message can land here directly */
		ce->flags = PROTO_CTS_RMA;
		ce->key = mr->key;
		ce->addr = (dev->dom->mr_mode & FI_MR_VIRT_ADDR) ?
				   (uint64_t)(uintptr_t)data :
				   (uint64_t)((uintptr_t)data - mr->start);
		ce->slot = index << 3 | (uint32_t)i;
		atomic_fetch_or(&q->rma_expect, 1u << i);
		if (dev->plan.writes_only)
			ofi_op_hold(&q->ops[i], mr);
	}
}

void proto_cts_lazy(struct proto_recv_req *q)
{
	const struct proto_device *dev = q->h.comm->dev;
	int n = q->h.n;
	/* Every buffer takes any eager message whole (its own size, or a spill or
	 * bounce buffer that shows an oversized one): the sender needs this CTS only
	 * for a message above the eager limit, which is an error. Sent late. */
	bool lazy = dev->plan.eager_max > 0;
	for (int i = 0; i < n; i++)
		lazy &= q->posted[i] <= dev->plan.eager_max &&
			(q->bounce[i] || (q->spill >> i & 1) || q->posted[i] == dev->plan.eager_max);
	if (lazy) {
		q->cts_due_ns = util_coarse_ns() + PROTO_LAZY_CTS_NS;
		atomic_store(&q->cts_lazy, 1);
	}
}

int proto_cts_send(struct proto_recv_req *q)
{
	struct proto_comm *c = q->h.comm;
	struct proto_recv *r = container_of(c, struct proto_recv, c);
	if (atomic_load_explicit(&q->cts_lazy, memory_order_relaxed)) {
		/* lazy: not before it is due, and only by the thread that claims it */
		int lazy = 1;
		if (util_coarse_ns() < q->cts_due_ns ||
		    !atomic_compare_exchange_strong(&q->cts_lazy, &lazy, 0))
			return 0;
	}
	int rail = c->home;
	proto_op_post_begin(c, &q->cts_op, c->rails[rail], NULL, false);
	q->cts.route = proto_tag_ctrl(&c->dev->layout, PROTO_CTRL_CTS, r->reply_id);
	ssize_t rc = ofi_ep_send(q->cts_op.ep, &q->cts,
			     offsetof(struct proto_cts, e) + (size_t)q->h.n * sizeof(q->cts.e[0]),
			     proto_ctrl_desc(c), r->peer[rail], &q->cts_op.ctx);
	if (proto_op_post_end(c, &q->cts_op, rc)) {
		if (q->cts_due_ns)
			atomic_store(&q->cts_lazy, 1); /* (due: the next call posts it) */
		return (int)rc;
	}
	q->cts_sent = true;
	return 0;
}

/* A lazy CTS neither posted nor due by the time every buffer is full is
 * never needed: skipped, it counts as done. */
void proto_cts_skip_lazy(struct proto_req *r)
{
	if (r->kind != PROTO_REQ_RECV)
		return;
	struct proto_recv_req *q = container_of(r, struct proto_recv_req, h);
	int lazy = 1;
	if (atomic_load_explicit(&q->cts_lazy, memory_order_relaxed) && q->cursor >= r->n &&
	    atomic_load_explicit(&r->ncomplete, memory_order_acquire) >= r->n &&
	    atomic_compare_exchange_strong(&q->cts_lazy, &lazy, 0)) {
		q->cts_sent = true;
		atomic_fetch_add_explicit(&r->ncomplete, 1, memory_order_release);
	}
}

/* How long a receive whose CTS could not be delivered may still wait for
 * messages the sender posted before it went away. */
#define PROTO_CTS_FAIL_GRACE_NS 1000000000ULL

/* The CTS failed and the receive is still not complete after the grace: the
 * peer cannot send into it. Fail it, and cancel its receives so it ends. */
static void cts_failed(struct proto_recv_req *q)
{
	struct proto_comm *c = q->h.comm;
	if (atomic_exchange(&q->cts_failed_ns, 0) == 0)
		return;
	LOG_WARN(NCCL_NET, "receive from %s: the clear-to-send could not be delivered (%s) and "
		 "nothing arrived for 1 s: the peer closed or died. Failing the receive",
		 container_of(c, struct proto_recv, c)->peer_text, fi_strerror(q->cts_err));
	proto_req_fail(&q->h, ofi_err_cq(q->cts_err));
	proto_comm_lock_rails(c);
	for (int i = 0; i < q->h.n; i++)
		proto_op_cancel(&q->ops[i]);
	proto_comm_unlock_rails(c);
}

void proto_cts_check_failed(struct proto_recv_req *q)
{
	uint64_t failed = atomic_load(&q->cts_failed_ns);
	if (failed && util_now_ns() - failed > PROTO_CTS_FAIL_GRACE_NS)
		cts_failed(q);
}

/* ---------------- the sender: receiving a CTS ---------------- */

/* One pool per rail receives every CTS; the tag carries the send comm's id.
 * Runs under that rail's CQ lock. The entries come from another process:
 * each is checked, and one for a message already sent eagerly is dropped. */
void proto_cts_handler(struct ofi_ep *ep, void *arg, const void *msg, size_t len, uint64_t tag)
{
	const struct proto_cts *m = msg;
	uint32_t id = (uint32_t)tag;
	struct ofi_domain *dom = ep->dom;
	struct proto_device *dev = arg;
	if (((tag >> dev->layout.kind_shift) & 3) == PROTO_CTRL_PING) {
		proto_ping_handler(ep, msg, len, id);
		return;
	}
	pthread_mutex_lock(&dom->id_lock);
	struct proto_send *s = ofi_domain_lookup_locked(dom, id);
	if (!s || s->c.magic != PROTO_COMM_MAGIC || s->c.kind != PROTO_SEND) {
		/* the connection closed meanwhile: nothing waits for it */
		pthread_mutex_unlock(&dom->id_lock);
		return;
	}
	const struct proto_tag_layout *lay = &s->c.dev->layout;
	if (len < offsetof(struct proto_cts, e) || m->count < 1 || m->count > PROTO_CTS_MAX ||
	    len < offsetof(struct proto_cts, e) + m->count * sizeof(m->e[0]) ||
	    m->secret != s->c.secret ||
	    (atomic_load(&s->state) == PROTO_READY && m->conn_id != s->remote_id)) {
		/* (a CTS may overtake the ACCEPT: before it, the id is not known) */
		pthread_mutex_unlock(&dom->id_lock);
		atomic_fetch_add(&ep->dropped, 1);
		LOG_WARN_LIMITED(NCCL_NET, "connection to %s: dropped a CTS that is malformed or not "
				 "from its peer (%zu bytes)", s->peer_text, len);
		return;
	}
	uint32_t mask = proto_tag_seq_mask(lay);
	atomic_store_explicit(&s->c.last_ns, util_coarse_ns(), memory_order_relaxed);
	LOG_TRACE(NCCL_NET, "CTS from %s on rail %d: %u entries, first tag %d seq %u", s->peer_text,
		  ep->index, m->count, m->e[0].tag, m->e[0].seq);
	pthread_mutex_lock(&s->cts_lock);
	for (uint32_t i = 0; i < m->count; i++) {
		struct proto_cts_entry e = m->e[i];
		uint32_t folded = proto_tag_fold(lay, e.tag);
		e.seq &= mask;
		struct proto_seq_entry *se = proto_seq_get(&s->seq, folded);
		if (se && proto_seq_behind(se->seq, e.seq, mask)) {
			/* sent eagerly before this CTS arrived; an early send's
			 * receive is posted now: its place is free again */
			size_t sent = proto_early_forget(s, proto_cts_key(folded, e.seq));
			if (sent > e.size)
				LOG_WARN_LIMITED(NCCL_NET,
						 "isend of %zu bytes to %s (NCCL tag %d) went before its "
						 "clear-to-send, which says the receiver posted only "
						 "%llu bytes: the receiver fails it. Both ranks must run "
						 "the same NCCL version and NCCL_PROTO/NCCL_ALGO/buffer "
						 "settings", sent, s->peer_text, e.tag,
						 (unsigned long long)e.size);
			continue;
		}
		if (e.flags & ~PROTO_CTS_RMA || e.size > NCCL_MAX_NET_SIZE_BYTES) {
			atomic_fetch_add(&ep->dropped, 1);
			LOG_WARN_LIMITED(NCCL_NET,
					 "connection to %s: dropped a CTS entry with flags 0x%x, size %llu",
					 s->peer_text, e.flags, (unsigned long long)e.size);
			continue;
		}
		if (proto_cts_put(&s->cts, proto_cts_key(folded, e.seq), &e))
			LOG_WARN_LIMITED(NCCL_NET,
				 "connection to %s: CTS for tag %d seq %u dropped (table full or "
				 "duplicate): the peer posted more receives than NCCL allows",
				 s->peer_text, e.tag, e.seq);
	}
	pthread_mutex_unlock(&s->cts_lock);
	pthread_mutex_unlock(&dom->id_lock);
}

size_t proto_early_forget(struct proto_send *s, uint64_t key)
{
	for (int i = 0; i < s->nearly; i++) {
		if (s->early[i] == key) {
			size_t size = s->early_size[i];
			s->nearly--;
			s->early[i] = s->early[s->nearly];
			s->early_size[i] = s->early_size[s->nearly];
			return size;
		}
	}
	return 0;
}

/* ---------------- the sender's table of announced receives ---------------- */

static unsigned slot_of(uint64_t key)
{
	key ^= key >> 33;
	key *= 0xff51afd7ed558ccdULL;
	key ^= key >> 33;
	return (unsigned)(key & (PROTO_CTS_SLOTS - 1));
}

int proto_cts_put(struct proto_cts_table *t, uint64_t key, const struct proto_cts_entry *e)
{
	if (t->used >= PROTO_CTS_SLOTS - 1)
		return -1;
	for (unsigned i = slot_of(key);; i = (i + 1) & (PROTO_CTS_SLOTS - 1)) {
		if (t->slot[i].key == key)
			return -1;
		if (t->slot[i].key == 0) {
			t->slot[i].key = key;
			t->slot[i].e = *e;
			t->used++;
			return 0;
		}
	}
}

bool proto_cts_take(struct proto_cts_table *t, uint64_t key, struct proto_cts_entry *e)
{
	unsigned i = slot_of(key);
	for (;; i = (i + 1) & (PROTO_CTS_SLOTS - 1)) {
		if (t->slot[i].key == 0)
			return false;
		if (t->slot[i].key == key)
			break;
	}
	*e = t->slot[i].e;
	t->used--;
	/* backward-shift deletion keeps every chain unbroken without tombstones */
	unsigned hole = i;
	for (unsigned j = (i + 1) & (PROTO_CTS_SLOTS - 1); t->slot[j].key;
	     j = (j + 1) & (PROTO_CTS_SLOTS - 1)) {
		unsigned home = slot_of(t->slot[j].key);
		/* move j into the hole unless its home lies cyclically in (hole, j] */
		bool stays = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
		if (!stays) {
			t->slot[hole] = t->slot[j];
			hole = j;
		}
	}
	t->slot[hole].key = 0;
	return true;
}
