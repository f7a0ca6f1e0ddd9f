/*
 * proto_close.c - a comm's close (proto_comm_retire), top-down: a sender
 * waits until its receiver took every message; a receiver says goodbye, waits
 * until writes into the buffers it announced stopped, and readies a sink for
 * data already on its way; then the comm's operations are cancelled, those
 * already moving NCCL's data are waited for (bounded; over TCP, a stopped
 * peer's connections are reset), and the comm is freed or left to its domain
 * as a zombie until its last completion.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sched.h>

#include "log/log.h"
#include "proto/proto.h"
#include "util/util.h"

/* A receive comm closing with receives the sender was told about (CTS sent)
 * cannot just cancel them: the sender may have posted the data, and a
 * provider keeps an unmatched message in its own buffers forever (shm's SAR
 * buffers then starve every later transfer). The cancelled receives are
 * re-posted into one scratch buffer (recv_done does it), where the data
 * drains: never into the user's buffers, which NCCL frees after the close. */
static void recv_prepare_sink(struct proto_recv *r)
{
	size_t need = 0;
	for (int i = 0; i < PROTO_RECV_REQS; i++) {
		struct proto_recv_req *q = &r->reqs[i];
		if (!q->h.in_use || q->h.kind != PROTO_REQ_RECV)
			continue; /* (an eager sender does not wait for the CTS) */
		for (int k = 0; k < q->h.n; k++)
			if (q->posted[k] > need)
				need = q->posted[k];
	}
	if (!need)
		return;
	need = need < 64 ? 64 : need; /* room for an abort stand-in */
	r->sink = malloc(need);
	if (!r->sink)
		return;
	if (r->c.dev->dom->mr_mode & FI_MR_LOCAL &&
	    ofi_mr_get(r->c.dev->dom, r->sink, need, FI_HMEM_SYSTEM, 0, &r->sink_mr)) {
		free(r->sink);
		r->sink = NULL;
		return;
	}
	r->sink_len = need;
}

/* The sink's time is up (struct ofi_zombie's expire): its receives are
 * cancelled, and their completions end the zombie. */
static void recv_sink_expire(struct ofi_zombie *z)
{
	struct proto_comm *c = container_of(z, struct proto_comm, zombie);
	struct proto_recv *r = container_of(c, struct proto_recv, c);
	atomic_store(&r->sink_done, true);
	proto_comm_lock_rails(c);
	for (int i = 0; i < PROTO_RECV_REQS; i++) {
		uint64_t sunk = atomic_load(&r->reqs[i].sunk);
		for (int k = 0; k < PROTO_MAX_RECVS; k++)
			if (sunk >> k & 1)
				proto_op_cancel(&r->reqs[i].ops[k]);
	}
	proto_comm_unlock_rails(c);
}

/* Operations of a closing comm that still reference the caller's memory. */
static int comm_user_ops(struct proto_comm *c)
{
	int n = 0;
	if (c->kind == PROTO_SEND) {
		struct proto_send *s = container_of(c, struct proto_send, c);
		for (int i = 0; i < PROTO_SEND_REQS; i++) {
			if (s->reqs[i].abort_size)
				continue; /* stand-ins carry plugin memory */
			n += atomic_load(&s->reqs[i].op.posted);
			for (int k = 0; s->reqs[i].more && k < c->nrails - 1; k++)
				n += atomic_load(&s->reqs[i].more[k].posted);
		}
	} else if (c->kind == PROTO_RECV) {
		struct proto_recv *r = container_of(c, struct proto_recv, c);
		int per = PROTO_MAX_RECVS;
		for (int i = 0; i < PROTO_RECV_REQS; i++) {
			uint64_t sunk = atomic_load(&r->reqs[i].sunk);
			for (int k = 0; k < per; k++)
				n += atomic_load(&r->reqs[i].ops[k].posted) && !(sunk >> k & 1);
		}
	}
	return n;
}

/* closeSend: waits (bounded) until the receiver took every message we handed
 * the provider (see proto_send.sent), asking by ping; its pongs say how many
 * it took. Usually one round trip; nothing when the peer is gone or closed. */
static void send_wait_taken(struct proto_send *s)
{
	struct proto_comm *c = &s->c;
	uint64_t start = util_now_ns(), last_ping = 0;
	/* a peer that let an earlier close wait in vain is not waited for again:
	 * a job whose peer exited without a word closes each comm at once */
	if (ofi_ep_peer_silent(c->ep, c->peer_rail0))
		return;
	while (c->ping_id && !atomic_load(&c->dead) && !atomic_load(&s->peer_closed) &&
	       (int32_t)(atomic_load(&s->sent) - atomic_load(&s->acked)) > 0) {
		uint64_t now = util_now_ns();
		if (now - start > PROTO_CLOSE_ACK_NS) {
			LOG_INFO(NCCL_NET, "closing the connection to %s: the receiver took %u of %u "
				 "messages within %d s; closing anyway (later closes to it do not wait)",
				 s->peer_text, atomic_load(&s->acked), atomic_load(&s->sent),
				 (int)(PROTO_CLOSE_ACK_NS / 1000000000ULL));
			if (!atomic_load(&s->answered))
				ofi_ep_peer_set_silent(c->ep, c->peer_rail0, true);
			return;
		}
		if (!atomic_load(&c->ping_op.posted) && now - last_ping >= PROTO_CLOSE_PING_NS) {
			last_ping = now;
			ssize_t rc = proto_ping_post(c, &c->ping_op, &c->ping_msg, PROTO_PING);
			if (rc && rc != -FI_EAGAIN)
				return;
		}
		if (proto_comm_progress_all(c) <= 0)
			sched_yield();
	}
}

/* Whether the receive comm announced a buffer for an RMA write (its CTS
 * went out) that has not been filled: its sender may be writing there. */
static bool recv_grants_open(struct proto_recv *r)
{
	for (int i = 0; i < PROTO_RECV_REQS; i++) {
		struct proto_recv_req *q = &r->reqs[i];
		if (q->h.in_use && q->h.kind == PROTO_REQ_RECV && q->cts_sent &&
		    (atomic_load(&q->rma_expect) & ~atomic_load(&q->rma_done)))
			return true;
	}
	return false;
}

/* closeRecv with buffers announced for RMA writes: NCCL frees them once we
 * return, and a write on its way would land in freed memory (or, where NCCL
 * did not deregister them, memory reused). The goodbye revokes them; wait
 * (bounded) until the sender says it writes no more (PROTO_STOPPED, asked
 * again with each goodbye) and every piece it wrote has landed. */
static void recv_wait_stopped(struct proto_recv *r)
{
	struct proto_comm *c = &r->c;
	uint64_t start = util_now_ns(), last = start;
	while (!atomic_load(&c->dead) && !ofi_ep_peer_silent(c->ep, c->peer_rail0)) {
		if (atomic_load(&r->peer_stopped) &&
		    (int32_t)(atomic_load(&r->pieces_in) - atomic_load(&r->peer_written)) >= 0)
			return;
		uint64_t now = util_now_ns();
		if (now - start > PROTO_CLOSE_WAIT_NS) {
			LOG_WARN(NCCL_NET,
				 "closing the connection from %s: the sender did not confirm within "
				 "%d s that it stopped writing into the buffers this connection "
				 "announced (%u of %u pieces landed%s); a late write may land in "
				 "them after NCCL frees them",
				 r->peer_text, (int)(PROTO_CLOSE_WAIT_NS / 1000000000ULL),
				 atomic_load(&r->pieces_in), atomic_load(&r->peer_written),
				 atomic_load(&r->peer_stopped) ? "" : ", no answer");
			return;
		}
		if (!atomic_load(&c->bye_op.posted) && now - last >= PROTO_CLOSE_PING_NS) {
			last = now;
			ssize_t rc = proto_ping_post(c, &c->bye_op, &c->bye_msg, PROTO_BYE);
			if (rc && rc != -FI_EAGAIN)
				return;
		}
		if (proto_comm_progress_all(c) <= 0)
			sched_yield();
	}
}

/* The peer's address on each of the comm's rails. */
static fi_addr_t comm_peer(const struct proto_comm *c, int k)
{
	if (c->kind == PROTO_SEND)
		return container_of(c, struct proto_send, c)->peer[k];
	return container_of(c, struct proto_recv, c)->peer[k];
}

/* What this process's other connections say of a comm's peer. */
struct peer_look {
	const struct proto_comm *me;
	int others;         /* open connections on the same endpoint to it */
	uint64_t last_ns;   /* its latest sign of life, on any of them */
};

static void peer_look_visit(void *owner, void *arg)
{
	struct peer_look *look = arg;
	const struct proto_comm *c = owner, *me = look->me;
	if (!c || c == me || c->magic != PROTO_COMM_MAGIC ||
	    (c->kind != PROTO_SEND && c->kind != PROTO_RECV) || c->rails[0] != me->rails[0] ||
	    comm_peer(c, 0) != comm_peer(me, 0))
		return;
	look->others++;
	uint64_t last = atomic_load(&c->last_ns);
	if (last > look->last_ns)
		look->last_ns = last;
}

uint64_t proto_peer_last_ns(struct proto_comm *c, int *others)
{
	struct peer_look look = { c, 0, atomic_load(&c->last_ns) };
	ofi_domain_visit(c->ep->dom, peer_look_visit, &look);
	if (others)
		*others = look.others;
	return look.last_ns;
}

/* Whether a close may reset the TCP connections to its peer: only when that
 * touches nothing else and the peer is stopped, not merely slow or closing
 * too. Over TCP one connection carries every comm between two endpoints (rxm,
 * native tcp), so no other open comm of ours may use it; and the peer must
 * have shown no sign of life, on this comm or any other to it, for
 * PROTO_CLOSE_QUIET_NS: a goodbye, a pong, a completion. Says why not, in why. */
static bool comm_may_reset(struct proto_comm *c, char *why, size_t len)
{
	int others;
	uint64_t last = proto_peer_last_ns(c, &others), now = util_coarse_ns();
	bool spoke = c->kind == PROTO_SEND &&
		     atomic_load(&container_of(c, struct proto_send, c)->peer_closed);
	if (others) {
		snprintf(why, len, "%d other connection(s) of this process to it share the "
			 "provider's connection", others);
		return false;
	}
	if (spoke || (last <= now && now - last < PROTO_CLOSE_QUIET_NS)) {
		snprintf(why, len, "the peer is alive (%s %.1f s ago)",
			 spoke ? "it said goodbye; last sign of life" : "last sign of life",
			 (double)(now - last) / 1e9);
		return false;
	}
	return true;
}

/* Over TCP sockets: has the kernel reset the comm's connections to its peer
 * if nothing of them is acknowledged for timeout_ms; with shut, also shuts
 * down the connections to the peer's endpoint address (ofi_sock.c).
 * Returns how many sockets it recorded in armed (one record per rail). */
static int comm_arm_reset(struct proto_comm *c, unsigned timeout_ms, bool shut,
			  struct ofi_sock_armed armed[PROTO_MAX_RAILS])
{
	int n = 0;
	for (int k = 0; k < c->nrails; k++) {
		int rc = ofi_ep_peer_arm_reset(c->rails[k], comm_peer(c, k), timeout_ms, shut,
					       &armed[k]);
		n += rc > 0 ? rc : 0;
	}
	return n;
}

/* Whether every socket armed for the reset lost its connection: nothing
 * moves through them any more. */
static bool comm_reset_done(const struct ofi_sock_armed armed[PROTO_MAX_RAILS], int nrails)
{
	int live = 0, any = 0;
	for (int k = 0; k < nrails; k++) {
		any += armed[k].n;
		live += ofi_sock_live(&armed[k]);
	}
	return any && !live;
}

/* Progresses until the comm's operations on NCCL's buffers are done, the
 * armed sockets all lost their connection (*reset), or wait_ns passed.
 * Returns the operations still busy. */
static int comm_wait_ops(struct proto_comm *c, uint64_t wait_ns,
			 const struct ofi_sock_armed armed[PROTO_MAX_RAILS], bool *reset)
{
	uint64_t deadline = util_now_ns() + wait_ns;
	int busy;
	while ((busy = comm_user_ops(c)) > 0 && util_now_ns() < deadline &&
	       !(*reset = comm_reset_done(armed, c->nrails))) {
		if (proto_comm_progress_all(c) <= 0)
			sched_yield();
	}
	return busy;
}

void proto_comm_retire(struct proto_comm *c)
{
	if (!c)
		return;
	struct ofi_ep *ep = c->ep;
	if (c->kind == PROTO_SEND) {
		struct proto_send *s = container_of(c, struct proto_send, c);
		proto_send_undue(s); /* pieces not posted by now never are */
		send_wait_taken(s);
	}
	if (c->kind == PROTO_RECV) {
		/* tell the sender how many messages we took: its close then waits
		 * for no more (a goodbye the provider cannot send is no loss) */
		struct proto_recv *r = container_of(c, struct proto_recv, c);
		if (c->ping_id && !atomic_load(&c->dead)) {
			(void)proto_ping_post(c, &c->bye_op, &c->bye_msg, PROTO_BYE);
			if (recv_grants_open(r))
				recv_wait_stopped(r);
		}
		recv_prepare_sink(r);
		if (r->sink) {
			c->zombie.expire = recv_sink_expire;
			c->zombie.expire_ns = util_coarse_ns() + PROTO_SINK_NS;
		}
	}
	/* control messages and RMA notices for it are dropped from now on */
	c->closed_id = c->reg.id;
	ofi_domain_unregister(ep->dom, &c->reg);
	c->magic = 0xdeadbeef;
	/* Holding the CQ locks keeps completions from running while we cancel. */
	proto_comm_lock_rails(c);
	proto_comm_cancel_locked(c);
	proto_comm_unlock_rails(c);
	if (c->kind == PROTO_RECV) {
		struct proto_recv *r = container_of(c, struct proto_recv, c);
		for (int i = 0; i < PROTO_RECV_REQS; i++)
			proto_recv_release_rails(&r->reqs[i]);
	}
	/* An operation already matched cannot be cancelled: it is moving data
	 * to or from NCCL's buffer right now, and NCCL frees that buffer once
	 * close returns. Let such operations finish (bounded); cancelled receives
	 * complete at once and are re-posted into the sink. */
	const char *dir = c->kind == PROTO_SEND ? "to" : "from";
	const char *peer = c->peer_text ? c->peer_text : "?";
	struct ofi_sock_armed armed[PROTO_MAX_RAILS] = {0};
	bool tcp = c->dev->dom->traits.tcp_sockets, reset = false;
	char why_not[160] = "";
	int busy = comm_wait_ops(c, PROTO_CLOSE_WAIT_NS, armed, &reset);
	int narmed;
	if (busy > 0 && tcp && comm_may_reset(c, why_not, sizeof(why_not)) &&
	    (narmed = comm_arm_reset(c, PROTO_RESET_TIMEOUT_MS, true, armed)) > 0) {
		/* the peer still takes nothing: the sockets armed so far and any
		 * stuck since, with the shorter timeout (the kernel acts when its
		 * probes next find the window shut), and the connection to its
		 * endpoint address shut down (it may hold nothing unacknowledged:
		 * a rendezvous the peer has not asked for yet) */
		LOG_WARN(NCCL_NET,
			 "closing the connection %s %s: %d operation(s) on NCCL's buffers made no "
			 "progress for %d s: the peer takes no data and has shown no sign of life "
			 "for %d s. Resetting its TCP connection(s) (%d socket(s): TCP_USER_TIMEOUT "
			 "%u ms, or shut down), which no other connection of this process uses, so "
			 "that the provider lets go of them",
			 dir, peer, busy, (int)(PROTO_CLOSE_WAIT_NS / 1000000000ULL),
			 (int)(PROTO_CLOSE_QUIET_NS / 1000000000ULL), narmed, PROTO_RESET_TIMEOUT_MS);
		busy = comm_wait_ops(c, PROTO_RESET_WAIT_NS, armed, &reset);
	}
	for (int k = 0; k < c->nrails; k++)
		ofi_sock_disarm(&armed[k]);
	if (busy > 0 && reset) {
		/* (what the provider dropped with the connection may never complete:
		 * the comm stays a zombie, its memory kept) */
		LOG_WARN(NCCL_NET,
			 "closing the connection %s %s: the peer took no data; its TCP connection "
			 "was reset, and the provider no longer uses NCCL's buffers (%d operation(s) "
			 "dropped with it)", dir, peer, busy);
		busy = 0;
	}
	if (busy > 0)
		LOG_WARN(NCCL_NET,
			 "closing the connection %s %s: %d operation(s) still use NCCL's buffers "
			 "after %d s: the peer stopped taking data%s%s. libfabric cannot withdraw "
			 "them, so the provider may still use those buffers after NCCL frees them "
			 "(README, known limits): end the peer's process too",
			 dir, peer, busy, (int)(PROTO_CLOSE_WAIT_NS / 1000000000ULL),
			 why_not[0] ? "; its TCP connection is left alone: " : "", why_not);
	/* a receiver that closes later (or is closing now, its goodbye not yet
	 * here) learns how many pieces to wait for: none too, so that it need not
	 * wait for an answer its buffers' grants would otherwise ask for */
	if (c->kind == PROTO_SEND && c->ping_id && !atomic_load(&c->dead) && busy == 0 && !reset)
		proto_send_stop(container_of(c, struct proto_send, c));
	if (atomic_load_explicit(&c->pending, memory_order_acquire) == 0)
		proto_comm_free(c);
	else
		ofi_domain_add_zombie(ep->dom, &c->zombie);
}
