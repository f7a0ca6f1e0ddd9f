/*
 * proto_comm.c - a comm's life: creation, each kind's cleanup, retirement
 * (cancel, drain, zombie), the request pools, and the post/undo helpers every
 * operation of a comm goes through; the device table, each device's domain
 * (opened at first use) and the connection counts.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>

#include "log/log.h"
#include "proto/proto.h"
#include "util/util.h"

/* ---------------- comm basics ---------------- */

struct proto_comm *proto_comm_from(void *p, enum proto_comm_kind kind)
{
	struct proto_comm *c = p;
	if (!c || c->magic != PROTO_COMM_MAGIC || (kind && c->kind != kind))
		return NULL;
	return c;
}

static void comm_release(struct ofi_zombie *z)
{
	struct proto_comm *c = container_of(z, struct proto_comm, zombie);
	if (c->dev && c->dev->dom)
		ofi_domain_unregister(c->dev->dom, &c->reg);
	ofi_mr_put(c->ctrl_mr);
	if (c->fini)
		c->fini(c);
	util_freelist_destroy(&c->reqs);
	c->magic = 0xdeadbeef; /* a stale pointer handed back by NCCL is caught */
	free(c);
}

void proto_comm_free(struct proto_comm *c)
{
	comm_release(&c->zombie);
}

static void send_fini(struct proto_comm *c)
{
	struct proto_send *s = container_of(c, struct proto_send, c);
	proto_seq_free(&s->seq);
	pthread_mutex_destroy(&s->cts_lock);
	free(s->piece_ops);
}

/* listen comms open per device: what the CONNECT pool is sized for */
static atomic_int listens_open[POLICY_MAX_DEVS];

int proto_listen_count(struct proto_listen *l)
{
	int listens = atomic_fetch_add(&listens_open[l->c.dev->index], 1) + 1;
	l->counted = true;
	return listens;
}

static void listen_fini(struct proto_comm *c)
{
	struct proto_listen *l = container_of(c, struct proto_listen, c);
	if (l->counted)
		atomic_fetch_sub(&listens_open[c->dev->index], 1);
	pthread_mutex_destroy(&l->inbox_lock);
}

static void recv_fini(struct proto_comm *c)
{
	struct proto_recv *r = container_of(c, struct proto_recv, c);
	proto_seq_free(&r->seq);
	/* writes only: the registrations requests still held (net_irecv) */
	for (int i = 0; i < PROTO_RECV_REQS; i++)
		if (r->reqs[i].h.kind == PROTO_REQ_RECV)
			for (int k = 0; k < PROTO_MAX_RECVS; k++)
				if (!atomic_load(&r->reqs[i].ops[k].posted))
					ofi_op_release(&r->reqs[i].ops[k]);
	ofi_mr_put(r->sink_mr);
	free(r->sink);
}

int proto_comm_init(struct proto_comm *c, enum proto_comm_kind kind, struct proto_device *dev,
		    struct ofi_domain *dom, size_t size, int nrails)
{
	c->magic = PROTO_COMM_MAGIC;
	c->kind = kind;
	c->fini = kind == PROTO_SEND ? send_fini : kind == PROTO_RECV ? recv_fini : listen_fini;
	c->dev = dev;
	c->ep = dom->eps[0];
	c->home = 0;
	c->nrails = nrails < 1 ? 1 : nrails > dom->nep ? dom->nep : nrails;
	for (int i = 0; i < c->nrails; i++)
		c->rails[i] = dom->eps[i];
	atomic_init(&c->pending, 0);
	proto_live_init(c);
	util_freelist_init(&c->reqs);
	dlist_init(&c->zombie.link);
	c->zombie.pending = &c->pending;
	c->zombie.release = comm_release;
	/* Connections' ids go in data tags (conn field) and RMA CQ data; the
	 * others in control tags. */
	uint32_t mask = kind == PROTO_RECV ? proto_tag_conn_mask(&dev->layout) & PROTO_IMM_CONN_MASK :
					     0x7fffffffu;
	if (!ofi_domain_register(dom, &c->reg, mask, c)) {
		LOG_WARN(NCCL_NET, "device %s: every connection id is in use", dev->props.name);
		return -FI_ENOSPC;
	}
	if (dom->mr_mode & FI_MR_LOCAL) {
		/* the handshake messages live inside the comm */
		int rc = ofi_mr_get(dom, c, size, FI_HMEM_SYSTEM, 0, &c->ctrl_mr);
		if (rc)
			return rc;
	}
	return 0;
}

/* ---------------- operations: post and undo ---------------- */

void proto_op_init(struct ofi_op *op, ofi_op_complete_fn fn, void *owner, int index)
{
	memset(&op->ctx, 0, sizeof(op->ctx));
	op->complete = fn;
	op->owner = owner;
	op->ep = NULL;
	op->index = index;
	atomic_init(&op->posted, 0);
}

void proto_op_will_post(struct proto_comm *c, struct ofi_op *op, struct ofi_ep *ep)
{
	op->ep = ep;
	atomic_store(&op->posted, 1);
	atomic_fetch_add(&c->pending, 1);
}

void proto_op_not_posted(struct proto_comm *c, struct ofi_op *op)
{
	atomic_store(&op->posted, 0);
	atomic_fetch_sub(&c->pending, 1);
}

void proto_op_done(struct proto_comm *c, struct ofi_op *op)
{
	atomic_store(&op->posted, 0);
	atomic_fetch_sub_explicit(&c->pending, 1, memory_order_release);
}

void proto_op_complete(struct proto_comm *c, struct ofi_op *op, atomic_int *ncomplete)
{
	atomic_store_explicit(&c->last_ns, util_coarse_ns(), memory_order_relaxed);
	ofi_ep_bulk_end(op);
	atomic_store(&op->posted, 0);
	atomic_fetch_add_explicit(ncomplete, 1, memory_order_release);
	atomic_fetch_sub_explicit(&c->pending, 1, memory_order_release);
}

void proto_op_cancel(struct ofi_op *op)
{
	if (atomic_load(&op->posted) && op->ep)
		ofi_ep_cancel(op->ep, &op->ctx);
}

/* ---------------- retirement ---------------- */

void proto_comm_lock_rails(struct proto_comm *c)
{
	for (int i = 0; i < c->nrails; i++)
		pthread_mutex_lock(&c->rails[i]->cq_lock);
}

void proto_comm_unlock_rails(struct proto_comm *c)
{
	for (int i = c->nrails - 1; i >= 0; i--)
		pthread_mutex_unlock(&c->rails[i]->cq_lock);
}

void proto_comm_cancel_locked(struct proto_comm *c)
{
	proto_op_cancel(&c->ping_op);
	proto_op_cancel(&c->pong_op);
	switch (c->kind) {
	case PROTO_LISTEN:
		break; /* nothing posted: requests come through the endpoint's pool */
	case PROTO_SEND: {
		struct proto_send *s = container_of(c, struct proto_send, c);
		proto_op_cancel(&s->out_op);
		for (int i = 0; i < PROTO_SEND_REQS; i++) {
			proto_op_cancel(&s->reqs[i].op);
			for (int k = 0; s->reqs[i].more && k < s->c.nrails - 1; k++)
				proto_op_cancel(&s->reqs[i].more[k]);
		}
		break;
	}
	case PROTO_RECV: {
		struct proto_recv *r = container_of(c, struct proto_recv, c);
		proto_op_cancel(&r->ack_op);
		for (int i = 0; i < PROTO_RECV_REQS; i++) {
			for (int k = 0; k < PROTO_MAX_RECVS; k++)
				proto_op_cancel(&r->reqs[i].ops[k]);
			proto_op_cancel(&r->reqs[i].cts_op);
		}
		break;
	}
	}
}

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
	if (c->kind == PROTO_SEND)
		send_wait_taken(container_of(c, struct proto_send, c));
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
		comm_release(&c->zombie);
	else
		ofi_domain_add_zombie(ep->dom, &c->zombie);
}

/* ---------------- devices and accounting ---------------- */

/* Opens the device's domain on first use and starts what every endpoint
 * needs (proto_ep_start). Everything it reads was fixed in the device at
 * init: no global lookup. */
int proto_device_open(struct proto_device *dev, struct ofi_domain **out)
{
	int rc = 0;
	pthread_mutex_lock(&dev->open_lock);
	if (!dev->dom && dev->rails_in.cfg_rails == 0) {
		/* auto: counted again now, when a job's ranks have all started (NCCL
		 * opens a device once its bootstrap is done) */
		struct policy_rails_choice rails;
		dev->rails_in.nprocs = util_procs_count(dev->procs_dir);
		policy_rails(&dev->rails_in, &rails);
		dev->nrails = rails.rails;
		dev->progress_threads = rails.threads;
		util_strlcpy(dev->rails_reason, rails.reason, sizeof(dev->rails_reason));
	}
	if (!dev->dom) {
		struct ofi_domain_attr attr = {
			.info = dev->info,
			.hmem = dev->hmem,
			.flush_rma = dev->flush_rma,
			.expected_cuda_rc = dev->expected_cuda_rc,
			.nep = dev->nrails,
			.progress_threads = dev->progress_threads,
			.rma_write = dev->rma_cfg,
			.buf_size = dev->eager_max,
			.cq_batch = dev->cq_batch,
			.name = dev->props.name,
		};
		rc = ofi_domain_open(&attr, &dev->dom);
		if (!rc)
			rc = proto_ep_start(dev, dev->dom->eps[0]);
		for (int i = 1; !rc && i < dev->dom->nep; i++)
			rc = proto_ep_start(dev, dev->dom->eps[i]);
		if (rc && dev->dom) {
			ofi_domain_close(dev->dom);
			dev->dom = NULL;
		}
		if (rc)
			snprintf(dev->open_error, sizeof(dev->open_error), "%s", ofi_strerror(rc));
		else {
			char how[POLICY_REASON_LEN + 64];
			if (dev->dom->rma_write && dev->dom->nep > 1 && dev->stripe_min)
				snprintf(how, sizeof(how), "%s, cut over the rails from %zu bytes",
					 dev->data_reason, dev->stripe_min);
			else
				snprintf(how, sizeof(how), "%s", dev->data_reason);
			LOG_INFO(NCCL_NET | NCCL_INIT,
				 "device %d (%s) opened: provider %s, fabric %s; rails %s%s; eager up to "
				 "%s; larger messages: %s",
				 dev->index, dev->props.name, dev->provider,
				 dev->info->fabric_attr->name, dev->rails_reason,
				 dev->dom->split ? ", each rail its own domain" :
				 dev->dom->nep > 1 ? ", rails share one domain (registrations need it)" : "",
				 dev->eager_reason, how);
		}
	}
	pthread_mutex_unlock(&dev->open_lock);
	*out = dev->dom;
	return rc;
}

/* Connections made and open, for the resources line (proto_comm_counts). */
static atomic_int comms_live, comms_peak;
static atomic_long comms_total;

void proto_comm_opened(void)
{
	int live = atomic_fetch_add(&comms_live, 1) + 1;
	int peak = atomic_load(&comms_peak);
	while (live > peak && !atomic_compare_exchange_weak(&comms_peak, &peak, live))
		;
	atomic_fetch_add(&comms_total, 1);
}

void proto_comm_closed(void)
{
	atomic_fetch_sub(&comms_live, 1);
}

void proto_comm_counts(int *live, int *peak, long *total)
{
	*live = atomic_load(&comms_live);
	*peak = atomic_load(&comms_peak);
	*total = atomic_load(&comms_total);
}

void proto_comm_counts_reset(void)
{
	atomic_store(&comms_peak, atomic_load(&comms_live));
	atomic_store(&comms_total, 0);
}

/* The device table core hands over at init (proto_devices_set). */
static struct proto_device *devices;
static int ndevices;

void proto_devices_set(struct proto_device *devs, int ndevs)
{
	__atomic_store_n(&ndevices, devs ? ndevs : 0, __ATOMIC_RELEASE);
	__atomic_store_n(&devices, devs, __ATOMIC_RELEASE);
}

struct proto_device *proto_device_of(int dev, const char *what)
{
	struct proto_device *devs = __atomic_load_n(&devices, __ATOMIC_ACQUIRE);
	int n = __atomic_load_n(&ndevices, __ATOMIC_ACQUIRE);
	if (!devs) {
		LOG_WARN(NCCL_NET, "%s called before init", what);
		return NULL;
	}
	if (dev < 0 || dev >= n) {
		LOG_WARN(NCCL_NET, "%s: device %d does not exist (%d devices)", what, dev, n);
		return NULL;
	}
	return &devs[dev];
}

/* ---------------- request pools ---------------- */

void proto_send_reqs_init(struct proto_send *s)
{
	for (int i = PROTO_SEND_REQS - 1; i >= 0; i--) {
		struct proto_send_req *q = &s->reqs[i];
		q->h.kind = PROTO_REQ_SEND;
		q->h.comm = &s->c;
		util_freelist_push(&s->c.reqs, &q->h.free_node);
	}
}

void proto_recv_reqs_init(struct proto_recv *r)
{
	for (int i = PROTO_RECV_REQS - 1; i >= 0; i--) {
		struct proto_recv_req *q = &r->reqs[i];
		q->h.kind = PROTO_REQ_RECV;
		q->h.comm = &r->c;
		util_freelist_push(&r->c.reqs, &q->h.free_node);
	}
}

struct proto_req *proto_req_get(struct proto_comm *c)
{
	struct util_free_node *n = util_freelist_pop(&c->reqs);
	if (!n)
		return NULL;
	struct proto_req *r = container_of(n, struct proto_req, free_node);
	r->in_use = true;
	return r;
}

void proto_req_put(struct proto_req *r)
{
	r->in_use = false;
	util_freelist_push(&r->comm->reqs, &r->free_node);
}

void proto_req_reset(struct proto_req *r, int n)
{
	r->n = n;
	r->nposted = 0;
	atomic_store(&r->ncomplete, 0);
	atomic_store(&r->status, 0);
}

/* ---------------- progress ---------------- */

int proto_comm_progress(struct proto_comm *c)
{
	return ofi_ep_progress(c->rails[c->home]);
}

int proto_comm_progress_all(struct proto_comm *c)
{
	int total = 0;
	for (int i = 0; i < c->nrails; i++) {
		int n = ofi_ep_progress(c->rails[i]);
		if (n < 0)
			return n;
		total += n;
	}
	return total;
}
