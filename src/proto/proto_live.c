/*
 * proto_live.c - liveness: pings, pongs and goodbyes between the two ends of
 * a connection (see PROTO_PING_NS), and what happens once a peer is gone.
 */
#include <errno.h>
#include <stdio.h>

#include "log/log.h"
#include "proto/proto.h"
#include "util/util.h"

/* Records the first error that showed the peer is gone. */
static void comm_mark_dead(struct proto_comm *c, int err)
{
	int expected = 0;
	/* its process's other connections close without waiting for it either
	 * (cleared when it answers again) */
	if (atomic_compare_exchange_strong(&c->dead, &expected, err))
		ofi_ep_peer_set_silent(c->ep, c->peer_rail0, true);
}

static void ping_done(struct ofi_op *op, const struct fi_cq_tagged_entry *e,
		      const struct fi_cq_err_entry *err)
{
	struct proto_comm *c = op->owner;
	LOG_TRACE(NCCL_NET, "liveness: ping to %s %s", c->peer_text ? c->peer_text : "?",
		  err ? fi_strerror(err->err) : "sent");
	/* delivered says nothing (tcp takes it into the kernel's buffer even
	 * over a cut link): only the pong does; a failed one says the peer is gone */
	if (err && err->err != FI_ECANCELED)
		comm_mark_dead(c, err->err ? err->err : FI_EIO);
	proto_op_done(c, op);
}

static void pong_done(struct ofi_op *op, const struct fi_cq_tagged_entry *e,
		      const struct fi_cq_err_entry *err)
{
	proto_op_done(op->owner, op);
}

void proto_live_init(struct proto_comm *c)
{
	proto_op_init(&c->ping_op, ping_done, c, 0);
	proto_op_init(&c->pong_op, pong_done, c, 0);
	proto_op_init(&c->bye_op, pong_done, c, 0);
	proto_op_init(&c->stop_op, pong_done, c, 0);
	atomic_flag_clear(&c->alive_busy);
	atomic_init(&c->last_ns, util_coarse_ns());
}

/* Posts msg, a control word of the given type carrying `taken`, to the comm's
 * peer on its home rail: where the comm's test() reads (rail 0 before the
 * handshake). */
static ssize_t ping_send(struct proto_comm *c, struct ofi_op *op, struct proto_ping *msg,
			 enum proto_ping_type type, uint32_t taken)
{
	*msg = (struct proto_ping){ .route = proto_tag_ctrl(&c->dev->layout, PROTO_CTRL_PING, c->ping_id),
				    .magic = PROTO_PING_MAGIC, .type = type,
				    .from_id = c->reg.id ? c->reg.id : c->closed_id,
				    .taken = taken, .secret = c->secret };
	proto_op_post_begin(c, op, c->rails[c->home], NULL, false);
	ssize_t rc = ofi_ep_send(op->ep, msg, sizeof(*msg), proto_ctrl_desc(c), c->ping_peer,
				 &op->ctx);
	return proto_op_post_end(c, op, rc);
}

ssize_t proto_ping_post(struct proto_comm *c, struct ofi_op *op, struct proto_ping *msg,
			enum proto_ping_type type)
{
	uint32_t taken = c->kind == PROTO_RECV ?
				 atomic_load(&container_of(c, struct proto_recv, c)->taken) :
			 type == PROTO_STOPPED ?
				 atomic_load(&container_of(c, struct proto_send, c)->written) : 0;
	return ping_send(c, op, msg, type, taken);
}

ssize_t proto_abort_post(struct proto_send *s, struct ofi_op *op, struct proto_ping *msg,
			 uint32_t slot)
{
	return ping_send(&s->c, op, msg, PROTO_ABORT, slot);
}

/* PROTO_ABORT for receive comm r: the buffer its slot names fails, once.
 * Caller holds dom->id_lock. */
static void recv_abort_locked(struct proto_recv *r, uint32_t slot)
{
	struct proto_recv_req *q = &r->reqs[(slot >> 3) % PROTO_RECV_REQS];
	int i = (int)(slot & 7);
	unsigned bit = 1u << i;
	if (!r->c.dev->plan.writes_only || !q->h.in_use || q->h.kind != PROTO_REQ_RECV || i >= q->h.n ||
	    !(atomic_load(&q->rma_expect) & bit) || (atomic_fetch_or(&q->rma_done, bit) & bit))
		return;
	LOG_WARN(NCCL_NET,
		 "receive from %s: the sender had a message larger than this buffer of %zu bytes "
		 "(NCCL tag %d); nothing was written to the buffer. Both ranks must run the same "
		 "NCCL version and NCCL_PROTO/NCCL_ALGO/buffer settings",
		 r->peer_text, q->posted[i], q->tags[i]);
	proto_req_fail(&q->h, -FI_EMSGSIZE);
	atomic_fetch_add_explicit(&q->h.ncomplete, 1, memory_order_release);
}

/* A ping or pong for the object `id` of this domain, from the CTS pool of
 * its home rail (CQ lock held). Checked like every control message: the addressee
 * must be a connection whose peer is from_id, and the secret its own. */
void proto_ping_handler(struct ofi_ep *ep, const void *msg, size_t len, uint32_t id)
{
	struct ofi_domain *dom = ep->dom;
	const struct proto_ping *m = msg;
	pthread_mutex_lock(&dom->id_lock);
	struct proto_comm *c = ofi_domain_lookup_locked(dom, id);
	bool conn = c && c->magic == PROTO_COMM_MAGIC && (c->kind == PROTO_SEND || c->kind == PROTO_RECV);
	if (!conn) {
		/* closed meanwhile (or never ours): the peer's pings go unanswered */
		pthread_mutex_unlock(&dom->id_lock);
		return;
	}
	if (len != sizeof(*m) || m->magic != PROTO_PING_MAGIC || !c->ping_id ||
	    m->from_id != c->ping_id || m->secret != c->secret ||
	    (m->type != PROTO_PING && m->type != PROTO_PONG && m->type != PROTO_BYE &&
	     !((m->type == PROTO_STOPPED || m->type == PROTO_ABORT) && c->kind == PROTO_RECV))) {
		pthread_mutex_unlock(&dom->id_lock);
		atomic_fetch_add(&ep->dropped, 1);
		LOG_WARN_LIMITED(NCCL_NET, "connection %s %s: dropped a ping that is not from its peer "
				 "(%zu bytes)", c->kind == PROTO_SEND ? "to" : "from",
				 c->peer_text ? c->peer_text : "?", len);
		return;
	}
	if (m->type != PROTO_PING && c->kind == PROTO_SEND) {
		/* how many of our messages the receiver took: only ever forward */
		struct proto_send *s = container_of(c, struct proto_send, c);
		if (!atomic_exchange(&s->answered, true))
			ofi_ep_peer_set_silent(c->ep, c->peer_rail0, false); /* it answers again */
		uint32_t acked = atomic_load(&s->acked);
		if ((int32_t)(m->taken - acked) > 0)
			atomic_store(&s->acked, m->taken);
		if (m->type == PROTO_BYE) {
			atomic_store(&s->peer_closed, true);
			proto_send_stop(s);
		}
	}
	if (m->type == PROTO_ABORT) {
		recv_abort_locked(container_of(c, struct proto_recv, c), m->taken);
	} else if (m->type == PROTO_PONG) {
		atomic_store(&c->last_ns, util_coarse_ns());
	} else if (m->type == PROTO_STOPPED) {
		struct proto_recv *r = container_of(c, struct proto_recv, c);
		atomic_store(&r->peer_written, m->taken);
		atomic_store(&r->peer_stopped, true);
	} else if (m->type == PROTO_BYE) {
		/* (its pings go unanswered from now on: liveness sees the rest) */
	} else if (!atomic_load(&c->pong_op.posted)) {
		/* (one pong in flight per connection: the peer pings again) */
		(void)proto_ping_post(c, &c->pong_op, &c->pong_msg, PROTO_PONG);
	}
	pthread_mutex_unlock(&dom->id_lock);
}

/* The receiver revoked its buffers (its goodbye; peer_closed is set): once
 * no write of ours is in flight, say so and how many pieces we wrote. Asked
 * again by each goodbye the closing receiver repeats, so a write that was in
 * flight at the first is answered by a later one; called where the home
 * rail's CQ lock is held or no lock is (a post from another rail's
 * completion could wait on this rail's lock while its reader waits for ours). */
void proto_send_stop(struct proto_send *s)
{
	if (!s->c.dev->dom->rma_write || atomic_load(&s->writing) != 0 ||
	    atomic_load(&s->c.stop_op.posted))
		return;
	(void)proto_ping_post(&s->c, &s->c.stop_op, &s->c.stop_msg, PROTO_STOPPED);
}

/* The peer is gone: every request of the comm fails (proto_gone_rc; NCCL sees
 * ncclRemoteError), and its operations are cancelled so the provider lets go
 * of NCCL's buffers. */
static void comm_fail_all(struct proto_comm *c, int err)
{
	int n = 0;
	if (c->kind == PROTO_SEND) {
		struct proto_send *s = container_of(c, struct proto_send, c);
		for (int i = 0; i < PROTO_SEND_REQS; i++)
			if (s->reqs[i].h.in_use) {
				proto_req_fail(&s->reqs[i].h, proto_gone_rc(err));
				n++;
			}
	} else if (c->kind == PROTO_RECV) {
		struct proto_recv *r = container_of(c, struct proto_recv, c);
		for (int i = 0; i < PROTO_RECV_REQS; i++)
			if (r->reqs[i].h.in_use) {
				proto_req_fail(&r->reqs[i].h, proto_gone_rc(err));
				n++;
			}
	}
	LOG_WARN(NCCL_NET,
		 "connection %s %s: the peer is gone (%s: %s, %.1f s after its last sign of life). "
		 "Failing %d pending request(s) with ncclRemoteError. The peer process probably died "
		 "or lost its network: check its log (NCCL_FABRIC_PEER_TIMEOUT bounds the wait)",
		 c->kind == PROTO_SEND ? "to" : "from", c->peer_text ? c->peer_text : "?",
		 err == FI_ETIMEDOUT ? "no answer to liveness pings" :
		 err == ESRCH ? "its process has exited" :
		 err == ECONNREFUSED ? "its endpoint's address refuses connections, so nothing "
				       "listens there any more" : "a liveness ping failed",
		 fi_strerror(err), (double)(util_coarse_ns() - atomic_load(&c->last_ns)) / 1e9, n);
	proto_comm_lock_rails(c);
	proto_comm_cancel_locked(c);
	proto_comm_unlock_rails(c);
}

int proto_comm_exited(struct proto_comm *c)
{
	int dead = atomic_load(&c->dead);
	if (dead || !c->ping_id)
		return dead;
	uint64_t now = util_coarse_ns(), last = atomic_load(&c->last_ns);
	if (last > now || now - last < PROTO_EXIT_CHECK_NS ||
	    now - atomic_load(&c->exit_check_ns) < PROTO_EXIT_CHECK_NS)
		return 0;
	atomic_store(&c->exit_check_ns, now);
	if (!ofi_ep_peer_gone(c->rails[c->home], c->ping_peer))
		return 0;
	comm_mark_dead(c, ESRCH);
	return ESRCH;
}

int proto_comm_alive(struct proto_comm *c)
{
	int dead = atomic_load(&c->dead);
	if (dead) {
		if (!atomic_exchange(&c->dead_handled, true))
			comm_fail_all(c, dead);
		return dead;
	}
	if (!c->ping_id || atomic_flag_test_and_set(&c->alive_busy))
		return 0;
	uint64_t now = util_coarse_ns(), last = atomic_load(&c->last_ns);
	if (now - last < PROTO_PING_NS || last > now) {
		c->probe_ns = 0;
		goto out;
	}
	if (!c->probe_ns || c->probe_ns < last)
		c->probe_ns = now; /* pings from now on must be answered */
	uint64_t timeout = c->dev->plan.peer_timeout_ns;
	if (now - c->probe_ns > timeout) {
		/* Silent for the whole timeout. Not a verdict when the peer moves
		 * data on another of our connections (liveness that lied under a
		 * flood), nor when none of our pings went out in time to be
		 * answered (the provider answered -FI_EAGAIN, busy with bulk data),
		 * unless that lasted twice the timeout. */
		uint64_t seen = proto_peer_last_ns(c, NULL);
		bool asked = c->ping_sent_ns >= c->probe_ns &&
			     now - c->ping_sent_ns >= PROTO_PING_NS;
		if (seen <= now && now - seen < timeout) {
			c->probe_ns = now;
		} else if (asked || now - c->probe_ns > 2 * timeout) {
			comm_mark_dead(c, FI_ETIMEDOUT);
			goto out;
		}
	}
	if (atomic_load(&c->ping_op.posted) || now - c->ping_ns < PROTO_PING_NS)
		goto out; /* (a ping the provider holds: the deadline above covers it) */
	c->ping_ns = now;
	if (ofi_ep_peer_gone(c->rails[c->home], c->ping_peer)) {
		/* never post to it: it may have died holding a lock libfabric spins on */
		LOG_TRACE(NCCL_NET, "liveness: the process behind %s has exited",
			  c->peer_text ? c->peer_text : "?");
		comm_mark_dead(c, ESRCH);
		goto out;
	}
	ssize_t rc = proto_ping_post(c, &c->ping_op, &c->ping_msg, PROTO_PING);
	LOG_TRACE(NCCL_NET, "liveness: ping to %s after %.1f s without a sign of life: %s",
		  c->peer_text ? c->peer_text : "?", (double)(now - last) / 1e9,
		  rc ? ofi_strerror((int)rc) : "posted");
	if (!rc) {
		c->ping_sent_ns = now;
	} else if (rc == -FI_EAGAIN && c->dev->dom->traits.tcp_sockets &&
		   now - last >= 2 * PROTO_PING_NS &&
		   ofi_ep_peer_refused(c->rails[c->home], c->ping_peer, PROTO_PROBE_WAIT_MS)) {
		/* a TCP provider may answer -FI_EAGAIN for good while it tries to
		 * connect again to a peer that has gone: a refused connection to
		 * the peer's endpoint address says so at once */
		comm_mark_dead(c, ECONNREFUSED);
	} else if (rc != -FI_EAGAIN)
		comm_mark_dead(c, (int)-rc); /* -FI_EAGAIN: busy, never a verdict
					      * (policy_traits.c, "EAGAIN for a
					      * dead peer"); the deadline above ends
					      * it. Any other error ends it now. */
out:
	atomic_flag_clear(&c->alive_busy);
	return 0;
}
