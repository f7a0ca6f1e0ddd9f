/*
 * proto_conn.c - listen, connect, accept and close. None of them blocks:
 * connect and accept return a NULL comm until the handshake is done, so NCCL
 * can call them in turns on one thread (its GDR probe connects to itself).
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/random.h>

#include <rdma/fi_tagged.h>

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

static void send_fini(struct proto_comm *c)
{
	struct proto_send *s = container_of(c, struct proto_send, c);
	proto_seq_free(&s->seq);
	pthread_mutex_destroy(&s->cts_lock);
}

/* listen comms open per device: what the CONNECT pool is sized for */
static atomic_int listens_open[POLICY_MAX_DEVS];

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
	ofi_mr_put(r->sink_mr);
	free(r->sink);
}

static void op_init(struct ofi_op *op, ofi_op_complete_fn fn, void *owner, int index);
static void ping_done(struct ofi_op *op, const struct fi_cq_tagged_entry *e,
		      const struct fi_cq_err_entry *err);
static void pong_done(struct ofi_op *op, const struct fi_cq_tagged_entry *e,
		      const struct fi_cq_err_entry *err);

static int comm_init(struct proto_comm *c, enum proto_comm_kind kind, struct proto_device *dev,
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
	op_init(&c->ping_op, ping_done, c, 0);
	op_init(&c->pong_op, pong_done, c, 0);
	op_init(&c->bye_op, pong_done, c, 0);
	atomic_flag_clear(&c->alive_busy);
	atomic_init(&c->last_ns, util_coarse_ns());
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

static void *ctrl_desc(struct proto_comm *c)
{
	return c->ctrl_mr ? c->ctrl_mr->desc : NULL;
}

static void op_init(struct ofi_op *op, ofi_op_complete_fn fn, void *owner, int index)
{
	memset(&op->ctx, 0, sizeof(op->ctx));
	op->complete = fn;
	op->owner = owner;
	op->ep = NULL;
	op->index = index;
	atomic_init(&op->posted, 0);
}

/* Counted before posting: a completion may arrive on another thread before the
 * post call returns. */
static void op_will_post(struct proto_comm *c, struct ofi_op *op)
{
	op->ep = c->ep; /* control messages travel on rail 0 */
	atomic_store(&op->posted, 1);
	atomic_fetch_add(&c->pending, 1);
}

static void op_not_posted(struct proto_comm *c, struct ofi_op *op)
{
	atomic_store(&op->posted, 0);
	atomic_fetch_sub(&c->pending, 1);
}

/* Last action of every completion callback: after it the comm may be freed. */
static void op_done(struct proto_comm *c, struct ofi_op *op)
{
	atomic_store(&op->posted, 0);
	atomic_fetch_sub_explicit(&c->pending, 1, memory_order_release);
}

static void cancel_op(struct proto_comm *c, struct ofi_op *op)
{
	if (atomic_load(&op->posted) && op->ep)
		ofi_ep_cancel(op->ep, &op->ctx);
}

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
	cancel_op(c, &c->ping_op);
	cancel_op(c, &c->pong_op);
	switch (c->kind) {
	case PROTO_LISTEN:
		break; /* nothing posted: requests come through the endpoint's pool */
	case PROTO_SEND: {
		struct proto_send *s = container_of(c, struct proto_send, c);
		cancel_op(c, &s->out_op);
		for (int i = 0; i < PROTO_SEND_REQS; i++)
			cancel_op(c, &s->reqs[i].op);
		break;
	}
	case PROTO_RECV: {
		struct proto_recv *r = container_of(c, struct proto_recv, c);
		cancel_op(c, &r->ack_op);
		for (int i = 0; i < PROTO_RECV_REQS; i++) {
			for (int k = 0; k < PROTO_MAX_RECVS; k++)
				cancel_op(c, &r->reqs[i].ops[k]);
			cancel_op(c, &r->reqs[i].cts_op);
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

static ssize_t post_ping(struct proto_comm *c, struct ofi_op *op, struct proto_ping *msg,
			 enum proto_ping_type type);

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
			ssize_t rc = post_ping(c, &c->ping_op, &c->ping_msg, PROTO_PING);
			if (rc && rc != -FI_EAGAIN)
				return;
		}
		if (proto_comm_progress_all(c) <= 0)
			sched_yield();
	}
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
		if (c->ping_id && !atomic_load(&c->dead))
			(void)post_ping(c, &c->bye_op, &c->bye_msg, PROTO_BYE);
		recv_prepare_sink(container_of(c, struct proto_recv, c));
	}
	/* control messages and RMA notices for it are dropped from now on */
	ofi_domain_unregister(ep->dom, &c->reg);
	c->magic = 0xdeadbeef;
	/* Holding the CQ locks keeps completions from running while we cancel. */
	proto_comm_lock_rails(c);
	proto_comm_cancel_locked(c);
	proto_comm_unlock_rails(c);
	/* An operation already matched cannot be cancelled: it is moving data
	 * to or from NCCL's buffer right now, and NCCL frees that buffer once
	 * close returns. Let such operations finish (bounded); cancelled receives
	 * complete at once and are re-posted into the sink. */
	uint64_t deadline = util_now_ns() + PROTO_CLOSE_WAIT_NS;
	int busy;
	while ((busy = comm_user_ops(c)) > 0 && util_now_ns() < deadline) {
		if (proto_comm_progress_all(c) <= 0)
			sched_yield();
	}
	if (busy > 0)
		LOG_WARN(NCCL_NET,
			 "closing a connection: %d operation(s) still use NCCL's buffers after %d s "
			 "(the peer stopped making progress); freeing those buffers now may fault",
			 busy, (int)(PROTO_CLOSE_WAIT_NS / 1000000000ULL));
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
		else
			LOG_INFO(NCCL_NET | NCCL_INIT,
				 "device %d (%s) opened: provider %s, fabric %s; rails %s%s; eager up to "
				 "%s, larger messages as %s",
				 dev->index, dev->props.name, dev->provider,
				 dev->info->fabric_attr->name, dev->rails_reason,
				 dev->dom->split ? ", each rail its own domain" :
				 dev->dom->nep > 1 ? ", rails share one domain (registrations need it)" : "",
				 dev->eager_reason,
				 dev->dom->rma_write ? "one RMA write each" : "one tagged send each");
	}
	pthread_mutex_unlock(&dev->open_lock);
	*out = dev->dom;
	return rc;
}

/* Connections made and open, for the resources line (proto_comm_counts). */
static atomic_int comms_live, comms_peak;
static atomic_long comms_total;

static void comm_opened(void)
{
	int live = atomic_fetch_add(&comms_live, 1) + 1;
	int peak = atomic_load(&comms_peak);
	while (live > peak && !atomic_compare_exchange_weak(&comms_peak, &peak, live))
		;
	atomic_fetch_add(&comms_total, 1);
}

static void comm_closed(void)
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

/* ---------------- liveness ---------------- */

/* Records the first error that showed the peer is gone. */
static void comm_mark_dead(struct proto_comm *c, int err)
{
	int expected = 0;
	atomic_compare_exchange_strong(&c->dead, &expected, err);
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
	op_done(c, op);
}

static void pong_done(struct ofi_op *op, const struct fi_cq_tagged_entry *e,
		      const struct fi_cq_err_entry *err)
{
	op_done(op->owner, op);
}

/* Posts a ping or pong (type) to the comm's peer from op and its message
 * buffer; 0 or the provider's error (then nothing is posted). */
static ssize_t post_ping(struct proto_comm *c, struct ofi_op *op, struct proto_ping *msg,
			 enum proto_ping_type type)
{
	uint32_t taken = c->kind == PROTO_RECV ?
				 atomic_load(&container_of(c, struct proto_recv, c)->taken) : 0;
	*msg = (struct proto_ping){ .route = proto_tag_ctrl(&c->dev->layout, PROTO_CTRL_PING, c->ping_id),
				    .magic = PROTO_PING_MAGIC, .type = type, .from_id = c->reg.id,
				    .taken = taken, .secret = c->secret };
	op_will_post(c, op);
	op->ep = c->rails[c->home]; /* where the comm's test() reads (rail 0 before the handshake) */
	ssize_t rc = ofi_ep_send(op->ep, msg, sizeof(*msg), ctrl_desc(c), c->ping_peer, &op->ctx);
	if (rc)
		op_not_posted(c, op);
	return rc;
}

/* A ping or pong for the object `id` of this domain, from the CTS pool of
 * its home rail (CQ lock held). Checked like every control message: the addressee
 * must be a connection whose peer is from_id, and the secret its own. */
static void ping_handler(struct ofi_ep *ep, const void *msg, size_t len, uint32_t id)
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
	    (m->type != PROTO_PING && m->type != PROTO_PONG && m->type != PROTO_BYE)) {
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
		if (m->type == PROTO_BYE)
			atomic_store(&s->peer_closed, true);
	}
	if (m->type == PROTO_PONG) {
		atomic_store(&c->last_ns, util_coarse_ns());
	} else if (m->type == PROTO_BYE) {
		/* (its pings go unanswered from now on: liveness sees the rest) */
	} else if (!atomic_load(&c->pong_op.posted)) {
		/* (one pong in flight per connection: the peer pings again) */
		(void)post_ping(c, &c->pong_op, &c->pong_msg, PROTO_PONG);
	}
	pthread_mutex_unlock(&dom->id_lock);
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
		 err == FI_ETIMEDOUT ? "no answer to liveness pings" : "a liveness ping failed",
		 fi_strerror(err), (double)(util_coarse_ns() - atomic_load(&c->last_ns)) / 1e9, n);
	proto_comm_lock_rails(c);
	proto_comm_cancel_locked(c);
	proto_comm_unlock_rails(c);
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
	if (now - c->probe_ns > c->dev->peer_timeout_ns) {
		comm_mark_dead(c, FI_ETIMEDOUT);
		goto out;
	}
	if (atomic_load(&c->ping_op.posted) || now - c->ping_ns < PROTO_PING_NS)
		goto out; /* (a ping the provider holds: the deadline above covers it) */
	c->ping_ns = now;
	ssize_t rc = post_ping(c, &c->ping_op, &c->ping_msg, PROTO_PING);
	LOG_TRACE(NCCL_NET, "liveness: ping to %s after %.1f s without a sign of life: %s",
		  c->peer_text ? c->peer_text : "?", (double)(now - last) / 1e9,
		  rc ? ofi_strerror((int)rc) : "posted");
	if (rc) {
		/* -FI_EAGAIN: busy, never a verdict (policy_traits.c, "EAGAIN for a
		 * dead peer"); the deadline above ends it. Any other error ends it now. */
		if (rc != -FI_EAGAIN)
			comm_mark_dead(c, (int)-rc);
	}
out:
	atomic_flag_clear(&c->alive_busy);
	return 0;
}

void proto_addr_text(const struct fi_info *info, const void *addr, size_t len, char *buf,
		     size_t buf_len)
{
	char ip[INET6_ADDRSTRLEN] = "";
	if (info && info->addr_format == FI_SOCKADDR_IN && len >= sizeof(struct sockaddr_in)) {
		const struct sockaddr_in *sin = addr;
		inet_ntop(AF_INET, &sin->sin_addr, ip, sizeof(ip));
		snprintf(buf, buf_len, "%s:%u", ip, ntohs(sin->sin_port));
	} else if (info && info->addr_format == FI_SOCKADDR_IN6 &&
		   len >= sizeof(struct sockaddr_in6)) {
		const struct sockaddr_in6 *sin6 = addr;
		inet_ntop(AF_INET6, &sin6->sin6_addr, ip, sizeof(ip));
		snprintf(buf, buf_len, "[%s]:%u", ip, ntohs(sin6->sin6_port));
	} else {
		size_t o = 0;
		const unsigned char *b = addr;
		for (size_t i = 0; i < len && o + 3 < buf_len; i++)
			o += (size_t)snprintf(buf + o, buf_len - o, "%02x", b[i]);
		if (!len && buf_len)
			buf[0] = '\0';
	}
}

static uint64_t random_u64(void)
{
	uint64_t v = 0;
	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != (ssize_t)sizeof(v))
		v = util_now_ns() ^ ((uint64_t)(uintptr_t)&v << 17);
	return v;
}

/* The device table core hands over at init (proto_devices_set). */
static struct proto_device *devices;
static int ndevices;

void proto_devices_set(struct proto_device *devs, int ndevs)
{
	__atomic_store_n(&ndevices, devs ? ndevs : 0, __ATOMIC_RELEASE);
	__atomic_store_n(&devices, devs, __ATOMIC_RELEASE);
}

static struct proto_device *device_of(int dev, const char *what)
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

/* Grows pool `pool` of ep to want receives, within 1/share of the provider's
 * receive queue (the rest is for the data receives and the other pools). */
static int pool_reserve_share(struct ofi_ep *ep, int pool, int base, int want, int share)
{
	size_t rx = ep->dom->info->rx_attr ? ep->dom->info->rx_attr->size : 0;
	int cap = rx >= (size_t)(2 * share * base) ? (int)(rx / (size_t)share) : base;
	return ofi_ep_rx_pool_reserve(ep, pool, want < cap ? want : cap);
}

/* ---------------- listen ---------------- */

/* Connection requests reach rail 0's CONNECT pool whatever listen id they
 * name; the handler queues each for its listen comm, and answers those that
 * can never succeed (no such listen comm: closed, or a stale handle; its
 * queue full) with a REJECT at once, so a connector never waits for a
 * timeout. Answers are sent from heap operations, at most PROTO_REJECTS_MAX
 * in flight per device; beyond that a connector times out instead. */

#define PROTO_REJECTS_MAX 64

struct proto_reject_op {
	struct ofi_op op;
	struct proto_msg msg;
	struct ofi_mr *mr;
};

static atomic_int rejects_in_flight;

/* Frees an answer (NULL: only its slot) and gives its slot back. */
static void reject_free(struct proto_reject_op *rj)
{
	if (rj)
		ofi_mr_put(rj->mr);
	free(rj);
	atomic_fetch_sub(&rejects_in_flight, 1);
}

static void reject_done(struct ofi_op *op, const struct fi_cq_tagged_entry *e,
			const struct fi_cq_err_entry *err)
{
	reject_free(op->owner);
}

/* Answers req with a REJECT. Safe under the CQ lock (it only posts). */
static void send_reject(struct proto_device *dev, struct ofi_ep *ep, const struct proto_msg *req,
			uint32_t reason)
{
	char peer_text[64] = "?";
	proto_addr_text(dev->info, req->addr[0], req->alen[0], peer_text, sizeof(peer_text));
	LOG_WARN_LIMITED(NCCL_NET, "accept on %s: refused a connection from %s: %s",
			 dev->props.name, peer_text, proto_reject_text(reason));
	fi_addr_t peer;
	if (req->alen[0] == 0 || ofi_ep_resolve(ep, req->addr[0], req->alen[0], &peer))
		return;
	if (atomic_fetch_add(&rejects_in_flight, 1) >= PROTO_REJECTS_MAX) {
		atomic_fetch_sub(&rejects_in_flight, 1);
		return;
	}
	struct proto_reject_op *rj = calloc(1, sizeof(*rj));
	if (!rj || ((ep->dom->mr_mode & FI_MR_LOCAL) &&
		    ofi_mr_get(ep->dom, &rj->msg, sizeof(rj->msg), FI_HMEM_SYSTEM, 0, &rj->mr))) {
		reject_free(rj);
		return;
	}
	rj->op.complete = reject_done;
	rj->op.owner = rj;
	rj->op.ep = ep;
	rj->msg.type = PROTO_MSG_REJECT;
	rj->msg.reason = reason;
	rj->msg.nonce = req->nonce;
	rj->msg.secret = req->secret;
	proto_msg_seal(&rj->msg, proto_tag_ctrl(&dev->layout, PROTO_CTRL_ACCEPT, req->id));
	if (ofi_ep_send(ep, &rj->msg, sizeof(rj->msg), rj->mr ? rj->mr->desc : NULL, peer,
			&rj->op.ctx))
		reject_free(rj);
}

static void connect_handler(struct ofi_ep *ep, void *arg, const void *msg, size_t len,
			    uint64_t tag)
{
	struct proto_device *dev = arg;
	const struct proto_msg *m = msg;
	char why[160] = "";
	bool bad = proto_msg_check(m, len, why, sizeof(why)) != 0;
	if (!bad && m->type != PROTO_MSG_CONNECT) {
		snprintf(why, sizeof(why), "message type %u where a CONNECT was expected", m->type);
		bad = true;
	}
	if (bad) {
		atomic_fetch_add(&ep->dropped, 1);
		LOG_WARN_LIMITED(NCCL_NET, "accept on %s: dropped a malformed connection request: %s",
				 dev->props.name, why);
		return;
	}
	for (unsigned i = 0; i < m->nrails; i++) {
		if (ofi_addr_check(ep->dom->info->addr_format, m->addr[i], m->alen[i], why, sizeof(why))) {
			atomic_fetch_add(&ep->dropped, 1);
			LOG_WARN_LIMITED(NCCL_NET, "accept on %s: dropped a connection request whose "
					 "rail %u address cannot be used: %s", dev->props.name, i, why);
			return;
		}
	}
	uint32_t id = (uint32_t)tag;
	struct ofi_domain *dom = ep->dom;
	pthread_mutex_lock(&dom->id_lock);
	struct proto_listen *l = ofi_domain_lookup_locked(dom, id);
	uint32_t reason = PROTO_REJECT_NO_LISTENER;
	if (l && l->c.magic == PROTO_COMM_MAGIC && l->c.kind == PROTO_LISTEN) {
		/* checked here, not at accept: requests that cannot succeed never
		 * take a place in the queue (a flood of them cannot lock out real ones) */
		if (m->nonce != l->nonce) {
			reason = PROTO_REJECT_NONCE;
			atomic_fetch_add(&ep->dropped, 1);
			goto out;
		}
		if (m->prov_hash != dev->prov_hash) {
			reason = PROTO_REJECT_PROVIDER;
			goto out;
		}
		pthread_mutex_lock(&l->inbox_lock);
		if (l->inbox_n < PROTO_LISTEN_INBOX) {
			l->inbox[(l->inbox_head + l->inbox_n) % PROTO_LISTEN_INBOX] = *m;
			l->inbox_n++;
			reason = PROTO_REJECT_NONE;
		} else {
			reason = PROTO_REJECT_RESOURCES;
		}
		pthread_mutex_unlock(&l->inbox_lock);
	}
out:
	pthread_mutex_unlock(&dom->id_lock);
	if (reason != PROTO_REJECT_NONE)
		send_reject(dev, ep, m, reason);
}

int net_listen(void *ctx, int dev_index, void *handle, void **listen_comm)
{
	*listen_comm = NULL;
	struct proto_device *dev = device_of(dev_index, "listen");
	if (!dev)
		return -FI_EINVAL;
	struct ofi_domain *dom;
	int rc = proto_device_open(dev, &dom);
	if (rc)
		return ofi_err_sys(rc);
	struct proto_listen *l = calloc(1, sizeof(*l));
	if (!l) {
		LOG_WARN(NCCL_NET, "listen: out of memory");
		return -FI_ENOMEM;
	}
	pthread_mutex_init(&l->inbox_lock, NULL); /* before comm_init: its failure path destroys it */
	rc = comm_init(&l->c, PROTO_LISTEN, dev, dom, sizeof(*l), 1);
	if (rc) {
		comm_release(&l->c.zombie);
		return ofi_err_sys(rc);
	}
	l->id = l->c.reg.id;
	l->nonce = random_u64();
	/* Connection requests should find a posted receive: the pool grows with
	 * the listen comms open on the device, within an eighth of the
	 * provider's receive queue (the CTS pool may take half, the answers'
	 * pool a sixteenth; the data receives need the rest: shm has 1024 in
	 * all, and many-comms/320 posts 640 of them). */
	int listens = atomic_fetch_add(&listens_open[dev->index], 1) + 1;
	l->counted = true;
	if (pool_reserve_share(l->c.ep, PROTO_POOL_CONNECT, PROTO_CONNECT_POOL,
			       PROTO_CONNECT_POOL + listens, 8))
		LOG_WARN(NCCL_NET, "listen: could not post more connection-request receives for %d "
			 "listen comms; requests may wait for a free one", listens);
	struct proto_handle h;
	proto_handle_encode(&h, l->id, dev->layout.bits, dev->prov_hash, l->nonce, l->c.ep->name,
			    l->c.ep->namelen);
	memcpy(handle, &h, sizeof(h));
	LOG_TRACE(NCCL_NET, "listen on %s: id %u", dev->props.name, l->id);
	*listen_comm = l;
	return 0;
}

/* Takes the oldest queued connection request; false when there is none. */
static bool listen_pop(struct proto_listen *l, struct proto_msg *out)
{
	pthread_mutex_lock(&l->inbox_lock);
	bool got = l->inbox_n > 0;
	if (got) {
		*out = l->inbox[l->inbox_head];
		l->inbox_head = (l->inbox_head + 1) % PROTO_LISTEN_INBOX;
		l->inbox_n--;
	}
	pthread_mutex_unlock(&l->inbox_lock);
	return got;
}

int net_close_listen(void *listen_comm)
{
	if (!listen_comm)
		return 0;
	struct proto_comm *c = proto_comm_from(listen_comm, PROTO_LISTEN);
	if (!c) {
		LOG_WARN(NCCL_NET, "closeListen: %p is not a listen comm", listen_comm);
		return -FI_EINVAL;
	}
	struct proto_listen *l = container_of(c, struct proto_listen, c);
	if (l->accepting)
		proto_comm_retire(&l->accepting->c);
	/* no request reaches it from here on; the queued ones are answered */
	ofi_domain_unregister(c->dev->dom, &c->reg);
	struct proto_msg m;
	while (listen_pop(l, &m))
		send_reject(c->dev, c->ep, &m, PROTO_REJECT_NO_LISTENER);
	proto_comm_retire(c);
	return 0;
}

/* ---------------- connect ---------------- */

static void send_out_done(struct ofi_op *op, const struct fi_cq_tagged_entry *e,
			  const struct fi_cq_err_entry *err)
{
	struct proto_send *s = op->owner;
	if (err && err->err != FI_ECANCELED) {
		char text[256];
		ofi_cq_error_text(s->c.ep, err, text, sizeof(text));
		LOG_WARN(NCCL_NET | NCCL_INIT,
			 "connect to %s: the connection request could not be delivered: %s. Is the "
			 "peer process alive and reachable on this interface?",
			 s->peer_text, text);
		atomic_store(&s->out_err, err->err);
	}
	op_done(&s->c, op);
}

/* Every answer to a connection request reaches rail 0's ACCEPT pool (so
 * answers nobody waits for, forged or late, are drained, not left in the
 * provider). The answer must carry the secret of our CONNECT, which only the
 * listener saw. CQ lock held. */
static void accept_handler(struct ofi_ep *ep, void *arg, const void *msg, size_t len,
			   uint64_t tag)
{
	struct ofi_domain *dom = ep->dom;
	const struct proto_msg *m = msg;
	uint32_t id = (uint32_t)tag;
	pthread_mutex_lock(&dom->id_lock);
	struct proto_send *s = ofi_domain_lookup_locked(dom, id);
	bool waiting = s && s->c.magic == PROTO_COMM_MAGIC && s->c.kind == PROTO_SEND &&
		       atomic_load(&s->state) == PROTO_CONNECTING && !atomic_load(&s->in_done);
	if (waiting && len == sizeof(*m) && m->secret == s->c.secret) {
		memcpy(&s->in, m, sizeof(*m));
		atomic_store_explicit(&s->in_done, 1, memory_order_release);
		pthread_mutex_unlock(&dom->id_lock);
		return;
	}
	pthread_mutex_unlock(&dom->id_lock);
	atomic_fetch_add(&ep->dropped, 1);
	LOG_WARN_LIMITED(NCCL_NET, "device %s: dropped an answer to a connection request that no "
			 "connect of this process is waiting for, or that is not from its listener "
			 "(%zu bytes, id %u)", dom->name, len, id);
}

static void send_free_list_init(struct proto_send *s);

/* ---- CTS: receives announced by the peer ---- */

/* One pool per rail receives every CTS; the tag carries the send comm's id.
 * Runs under that rail's CQ lock. The entries come from another process:
 * each is checked, and one for a message already sent eagerly is dropped. */
static void cts_handler(struct ofi_ep *ep, void *arg, const void *msg, size_t len, uint64_t tag)
{
	const struct proto_cts *m = msg;
	uint32_t id = (uint32_t)tag;
	struct ofi_domain *dom = ep->dom;
	struct proto_device *dev = arg;
	if (((tag >> dev->layout.kind_shift) & 3) == PROTO_CTRL_PING) {
		ping_handler(ep, msg, len, id);
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
		if (se && proto_seq_behind(se->seq, e.seq, mask))
			continue; /* sent eagerly before this CTS arrived */
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

int proto_ep_start(struct proto_device *dev, struct ofi_ep *ep)
{
	ep->rw_fn = proto_rma_landed;
	ep->rw_arg = dev;
	/* CTS (kind 2) and PING (kind 3) differ in the kind's low bit: one pool
	 * takes both, so pings never pile up unmatched in the provider */
	uint64_t ignore = 0xffffffffULL | 1ULL << dev->layout.kind_shift;
	/* (every pool's buffers take the largest control message: any control
	 * message may land in any of them) */
	int rc = ofi_ep_rx_pool_start(ep, proto_tag_ctrl(&dev->layout, PROTO_CTRL_CTS, 0), ignore,
				      PROTO_CTS_POOL, sizeof(struct proto_msg), cts_handler, dev);
	/* listen handles carry rail 0's address: connection requests arrive there */
	if (!rc && ep->index == 0)
		rc = ofi_ep_rx_pool_start(ep, proto_tag_ctrl(&dev->layout, PROTO_CTRL_CONNECT, 0),
					  0xffffffffULL, PROTO_CONNECT_POOL, sizeof(struct proto_msg),
					  connect_handler, dev);
	/* ... and the answers to this process's connection requests */
	if (!rc && ep->index == 0)
		rc = ofi_ep_rx_pool_start(ep, proto_tag_ctrl(&dev->layout, PROTO_CTRL_ACCEPT, 0),
					  0xffffffffULL, PROTO_ACCEPT_POOL, sizeof(struct proto_msg),
					  accept_handler, dev);
	return rc;
}

/* Connects NCCL started and has not finished: it calls connect again with
 * the same handle until one returns a comm. The connection layer's own
 * state: nothing outside it reads this registry. */
static pthread_mutex_t pending_lock = PTHREAD_MUTEX_INITIALIZER;
static struct dlist pending_connects = { &pending_connects, &pending_connects };

static struct proto_send *send_find_pending(const void *handle, uint64_t sum, int dev)
{
	struct dlist *it;
	dlist_foreach(&pending_connects, it) {
		struct proto_send *s = container_of(it, struct proto_send, pending_link);
		if (s->handle_ptr == handle && s->handle_sum == sum && s->c.dev->index == dev)
			return s;
	}
	return NULL;
}

static int send_create(struct proto_device *dev, const struct proto_handle *h,
		       const void *handle_ptr, struct proto_send **out)
{
	struct ofi_domain *dom;
	int rc = proto_device_open(dev, &dom);
	if (rc)
		return ofi_err_sys(rc);
	struct proto_send *s = calloc(1, sizeof(*s));
	if (!s) {
		LOG_WARN(NCCL_NET, "connect: out of memory");
		return -FI_ENOMEM;
	}
	pthread_mutex_init(&s->cts_lock, NULL); /* before comm_init: its failure path destroys it */
	rc = comm_init(&s->c, PROTO_SEND, dev, dom, sizeof(*s), dom->nep);
	if (rc) {
		comm_release(&s->c.zombie);
		return ofi_err_sys(rc);
	}
	/* Every send comm of the endpoint receives its CTS through the shared
	 * pool: keep PROTO_CTS_PER_SEND receives posted per comm, so hundreds of
	 * connections between one pair never leave a CTS without a receive (shm
	 * of 1.17 never matches a CTS that arrived before a receive was posted for
	 * it: with 320 connections and 128 receives, the sends behind the lost
	 * ones waited forever). */
	int objects = ofi_domain_nobjs(dom);
	/* ... within half of the provider's receive queue. CTS take every rail. */
	int want = PROTO_CTS_POOL + PROTO_CTS_PER_SEND * objects;
	for (int i = 0; i < s->c.nrails; i++)
		if (pool_reserve_share(s->c.rails[i], PROTO_POOL_CTS, PROTO_CTS_POOL, want, 2))
			LOG_WARN(NCCL_NET, "connect: could not post more control receives on rail %d "
				 "for %d connections; CTS messages may wait for a free one", i, objects);
	/* answers: room for every connect that may be waiting at once */
	if (pool_reserve_share(s->c.ep, PROTO_POOL_ACCEPT, PROTO_ACCEPT_POOL,
			       PROTO_ACCEPT_POOL + objects / 2, 16))
		LOG_WARN(NCCL_NET, "connect: could not post more receives for connection answers "
			 "(%d connections); an answer may wait for a free one", objects);
	op_init(&s->out_op, send_out_done, s, 0);
	dlist_init(&s->pending_link);
	send_free_list_init(s);
	proto_addr_text(dev->info, h->addr, h->addr_len, s->peer_text, sizeof(s->peer_text));
	rc = ofi_ep_resolve(s->c.ep, h->addr, h->addr_len, &s->peer[0]);
	if (rc) {
		LOG_WARN(NCCL_NET, "connect to %s: the address in the handle cannot be used: %s",
			 s->peer_text, ofi_strerror(rc));
		comm_release(&s->c.zombie);
		return ofi_err_sys(rc);
	}
	s->reply_id = s->c.reg.id;
	s->listen_tag = proto_tag_ctrl(&dev->layout, PROTO_CTRL_CONNECT, h->listen_id);
	s->out.type = PROTO_MSG_CONNECT;
	s->out.id = s->reply_id;
	s->out.nonce = h->nonce;
	s->c.secret = random_u64();
	s->out.secret = s->c.secret;
	s->out.prov_hash = dev->prov_hash;
	s->out.nrails = (uint8_t)s->c.nrails;
	for (int i = 0; i < s->c.nrails; i++) {
		s->out.alen[i] = (uint8_t)s->c.rails[i]->namelen;
		memcpy(s->out.addr[i], s->c.rails[i]->name, s->c.rails[i]->namelen);
	}
	proto_msg_seal(&s->out, s->listen_tag);
	s->start_ns = util_now_ns();
	s->handle_ptr = handle_ptr;
	s->handle_sum = h->checksum;
	atomic_init(&s->state, PROTO_CONNECTING);
	*out = s;
	return 0;
}

/* One step of the handshake. Returns an error only when the connection failed:
 * the peer refused (-FI_ECONNREFUSED), could not be reached (-FI_EHOSTUNREACH),
 * answered nonsense (-FI_ECONNABORTED) or not in time (-FI_ETIMEDOUT), or a
 * libfabric call failed. */
static int send_advance(struct proto_send *s)
{
	struct ofi_ep *ep = s->c.ep;
	ssize_t rc;

	if (!s->out_posted) {
		op_will_post(&s->c, &s->out_op);
		rc = ofi_ep_send(ep, &s->out, sizeof(s->out), ctrl_desc(&s->c), s->peer[0],
				 &s->out_op.ctx);
		if (rc) {
			op_not_posted(&s->c, &s->out_op);
			if (rc != -FI_EAGAIN) {
				LOG_WARN(NCCL_NET, "connect to %s: sending the connection request failed: %s",
					 s->peer_text, ofi_strerror((int)rc));
				return ofi_err_sys((int)rc);
			}
		} else {
			s->out_posted = true;
		}
	}
	int prc = ofi_ep_progress(ep);
	if (prc < 0)
		return ofi_err_sys(prc);
	if (atomic_load(&s->out_err))
		return -FI_EHOSTUNREACH; /* (send_out_done's WARN names libfabric's reason) */
	if (atomic_load_explicit(&s->in_done, memory_order_acquire)) {
		char why[160];
		if (proto_msg_check(&s->in, sizeof(s->in), why, sizeof(why))) {
			LOG_WARN(NCCL_NET, "connect to %s: bad reply: %s", s->peer_text, why);
			return -FI_ECONNABORTED;
		}
		if (s->in.type == PROTO_MSG_REJECT) {
			LOG_WARN(NCCL_NET, "connect to %s: the listener refused the connection: %s",
				 s->peer_text, proto_reject_text(s->in.reason));
			return -FI_ECONNREFUSED;
		}
		if (s->in.type != PROTO_MSG_ACCEPT || s->in.nonce != s->out.nonce) {
			LOG_WARN(NCCL_NET, "connect to %s: the reply does not answer this request",
				 s->peer_text);
			return -FI_ECONNABORTED;
		}
		/* the listener agreed on min(our rails, its rails); reach each of its rails */
		int nrails = s->in.nrails < s->c.nrails ? s->in.nrails : s->c.nrails;
		for (int i = 1; i < nrails; i++) {
			int rrc = ofi_ep_resolve(s->c.rails[i], s->in.addr[i], s->in.alen[i], &s->peer[i]);
			if (rrc) {
				LOG_WARN(NCCL_NET, "connect to %s: rail %d's address cannot be used: %s",
					 s->peer_text, i, ofi_strerror(rrc));
				return ofi_err_sys(rrc);
			}
		}
		s->c.nrails = nrails;
		s->remote_id = s->in.id;
		s->c.home = s->in.rail % nrails; /* (below the listener's rails: checked) */
		s->c.peer_text = s->peer_text;
		s->c.ping_peer = s->peer[s->c.home];
		s->c.peer_rail0 = s->peer[0];
		s->c.ping_id = s->remote_id;
		atomic_store(&s->c.last_ns, util_coarse_ns());
		atomic_store(&s->state, PROTO_READY);
		return 0;
	}
	uint64_t limit = s->c.dev->timeout_ns;
	if (util_now_ns() - s->start_ns > limit) {
		LOG_WARN(NCCL_NET,
			 "connect to %s: no answer after %llu s: the peer may have died or never "
			 "called accept (NCCL_FABRIC_TIMEOUT sets the limit)",
			 s->peer_text, (unsigned long long)(limit / 1000000000ULL));
		return -FI_ETIMEDOUT;
	}
	return 0;
}

int net_connect(void *ctx, int dev_index, int traffic_class, void *handle, void **send_comm)
{
	*send_comm = NULL;
	struct proto_device *dev = device_of(dev_index, "connect");
	if (!dev)
		return -FI_EINVAL;
	if (!handle) {
		LOG_WARN(NCCL_NET, "connect: NULL handle");
		return -FI_EINVAL;
	}
	char why[256];
	if (proto_handle_check(handle, dev->prov_hash, why, sizeof(why))) {
		LOG_WARN(NCCL_NET, "connect on %s: invalid connection handle: %s", dev->props.name, why);
		return -FI_EINVAL;
	}
	struct proto_handle h;
	memcpy(&h, handle, sizeof(h));

	pthread_mutex_lock(&pending_lock);
	struct proto_send *s = send_find_pending(handle, h.checksum, dev_index);
	if (s)
		dlist_remove(&s->pending_link);
	pthread_mutex_unlock(&pending_lock);
	if (!s) {
		int rc = send_create(dev, &h, handle, &s);
		if (rc)
			return rc;
	}

	int rc = send_advance(s);
	if (rc) {
		proto_comm_retire(&s->c);
		return rc;
	}
	if (atomic_load(&s->state) == PROTO_READY) {
		LOG_TRACE(NCCL_NET, "connected to %s on %s: remote id %u", s->peer_text,
			  dev->props.name, s->remote_id);
		*send_comm = s;
		comm_opened();
		return 0;
	}
	pthread_mutex_lock(&pending_lock);
	dlist_insert_tail(&pending_connects, &s->pending_link);
	pthread_mutex_unlock(&pending_lock);
	return 0;
}

void proto_pending_connects_close(int dev_index)
{
	struct dlist *it, *tmp;
	pthread_mutex_lock(&pending_lock);
	dlist_foreach_safe(&pending_connects, it, tmp) {
		struct proto_send *s = container_of(it, struct proto_send, pending_link);
		if (dev_index >= 0 && s->c.dev->index != dev_index)
			continue;
		dlist_remove(&s->pending_link);
		proto_comm_retire(&s->c);
	}
	pthread_mutex_unlock(&pending_lock);
}

int net_close_send(void *send_comm)
{
	if (!send_comm)
		return 0;
	struct proto_comm *c = proto_comm_from(send_comm, PROTO_SEND);
	if (!c) {
		LOG_WARN(NCCL_NET, "closeSend: %p is not a send comm", send_comm);
		return -FI_EINVAL;
	}
	comm_closed();
	proto_comm_retire(c);
	return 0;
}

/* ---------------- accept ---------------- */

static void recv_ack_done(struct ofi_op *op, const struct fi_cq_tagged_entry *e,
			  const struct fi_cq_err_entry *err)
{
	struct proto_recv *r = op->owner;
	if (err && err->err != FI_ECANCELED) {
		char text[256];
		ofi_cq_error_text(r->c.ep, err, text, sizeof(text));
		LOG_WARN(NCCL_NET, "accept from %s: the answer to the connector failed: %s",
			 r->peer_text, text);
	}
	op_done(&r->c, op);
}

static void recv_free_list_init(struct proto_recv *r);

static int recv_post_ack(struct proto_recv *r)
{
	op_will_post(&r->c, &r->ack_op);
	ssize_t rc = ofi_ep_send(r->c.ep, &r->ack, sizeof(r->ack), ctrl_desc(&r->c), r->peer[0],
				 &r->ack_op.ctx);
	if (rc) {
		op_not_posted(&r->c, &r->ack_op);
		return (int)rc;
	}
	r->ack_posted = true;
	return 0;
}

/* The home rail of each accepted connection, in turn. */
static atomic_uint accept_rail_turn;

int net_accept(void *listen_comm, void **recv_comm)
{
	*recv_comm = NULL;
	struct proto_comm *c = proto_comm_from(listen_comm, PROTO_LISTEN);
	if (!c) {
		LOG_WARN(NCCL_NET, "accept: %p is not a listen comm", listen_comm);
		return -FI_EINVAL;
	}
	struct proto_listen *l = container_of(c, struct proto_listen, c);
	struct proto_device *dev = c->dev;
	uint64_t now = util_now_ns();

	/* With l->accepting set, the connection exists and only its answer is
	 * still to be posted (the last try met -FI_EAGAIN). */
	if (!l->accepting) {
		struct proto_msg req;
		bool got = listen_pop(l, &req);
		if (!got) {
			int prc = ofi_ep_progress(c->ep);
			if (prc < 0)
				return ofi_err_sys(prc);
			got = listen_pop(l, &req);
		}
		if (!got) {
			if (!l->wait_start_ns || now - l->last_call_ns > 5000000000ULL)
				l->wait_start_ns = now;
			l->last_call_ns = now;
			uint64_t limit = dev->timeout_ns;
			if (now - l->wait_start_ns > limit) {
				LOG_WARN(NCCL_NET,
					 "accept on %s: no connection request after %llu s: the peer may "
					 "have died (NCCL_FABRIC_TIMEOUT sets the limit)",
					 dev->props.name, (unsigned long long)(limit / 1000000000ULL));
				return -FI_ETIMEDOUT;
			}
			return 0;
		}
		char peer_text[64] = "?";
		proto_addr_text(dev->info, req.addr[0], req.alen[0], peer_text, sizeof(peer_text));
		/* (nonce, provider and addresses were checked when it was queued) */
		struct proto_recv *r = calloc(1, sizeof(*r));
		struct ofi_domain *dom = dev->dom;
		int nrails = req.nrails < dom->nep ? req.nrails : dom->nep;
		int irc = r ? comm_init(&r->c, PROTO_RECV, dev, dom, sizeof(*r), nrails) : -FI_ENOMEM;
		if (irc) {
			if (r)
				comm_release(&r->c.zombie);
			LOG_WARN(NCCL_NET, "accept on %s: out of memory", dev->props.name);
			send_reject(dev, c->ep, &req, PROTO_REJECT_RESOURCES);
			return ofi_err_sys(irc);
		}
		op_init(&r->ack_op, recv_ack_done, r, 0);
		recv_free_list_init(r);
		util_strlcpy(r->peer_text, peer_text, sizeof(r->peer_text));
		for (int i = 0; i < r->c.nrails; i++) {
			if (ofi_ep_resolve(r->c.rails[i], req.addr[i], req.alen[i], &r->peer[i])) {
				/* a request with an address we cannot use: refused, and
				 * accept goes on waiting for a good one */
				send_reject(dev, c->ep, &req, PROTO_REJECT_RESOURCES);
				comm_release(&r->c.zombie);
				return 0;
			}
		}
		for (int i = 0; i < r->c.nrails; i++)
			r->src[i] = dom->directed ? r->peer[i] : FI_ADDR_UNSPEC;
		r->id = r->c.reg.id;
		r->c.secret = req.secret;
		r->ack.type = PROTO_MSG_ACCEPT;
		r->ack.secret = req.secret; /* only the listener saw it: the ACCEPT is genuine */
		r->ack.id = r->id;
		r->ack.nonce = req.nonce;
		r->ack.prov_hash = dev->prov_hash;
		r->ack.nrails = (uint8_t)r->c.nrails;
		r->c.home = (int)(atomic_fetch_add_explicit(&accept_rail_turn, 1, memory_order_relaxed) %
				  (uint32_t)r->c.nrails);
		r->ack.rail = (uint8_t)r->c.home;
		for (int i = 0; i < r->c.nrails; i++) {
			r->ack.alen[i] = (uint8_t)r->c.rails[i]->namelen;
			memcpy(r->ack.addr[i], r->c.rails[i]->name, r->c.rails[i]->namelen);
		}
		proto_msg_seal(&r->ack, proto_tag_ctrl(&dev->layout, PROTO_CTRL_ACCEPT, req.id));
		r->reply_id = req.id;
		l->accepting = r;
	}

	struct proto_recv *r = l->accepting;
	int rc = recv_post_ack(r);
	if (rc == -FI_EAGAIN) {
		(void)ofi_ep_progress(c->ep);
		return 0;
	}
	l->accepting = NULL;
	if (rc) {
		LOG_WARN(NCCL_NET, "accept on %s: answering %s failed: %s", dev->props.name,
			 r->peer_text, ofi_strerror(rc));
		proto_comm_retire(&r->c);
		return ofi_err_sys(rc);
	}
	l->wait_start_ns = 0;
	r->c.peer_text = r->peer_text;
	r->c.ping_peer = r->peer[r->c.home];
	r->c.peer_rail0 = r->peer[0];
	r->c.ping_id = r->reply_id;
	atomic_store(&r->c.last_ns, util_coarse_ns());
	LOG_TRACE(NCCL_NET, "accepted %s on %s: id %u", r->peer_text, dev->props.name, r->id);
	*recv_comm = r;
	comm_opened();
	return 0;
}

int net_close_recv(void *recv_comm)
{
	if (!recv_comm)
		return 0;
	struct proto_comm *c = proto_comm_from(recv_comm, PROTO_RECV);
	if (!c) {
		LOG_WARN(NCCL_NET, "closeRecv: %p is not a receive comm", recv_comm);
		return -FI_EINVAL;
	}
	comm_closed();
	proto_comm_retire(c);
	return 0;
}

/* ---------------- request pools ---------------- */

static void send_free_list_init(struct proto_send *s)
{
	for (int i = PROTO_SEND_REQS - 1; i >= 0; i--) {
		struct proto_send_req *q = &s->reqs[i];
		q->h.kind = PROTO_REQ_SEND;
		q->h.comm = &s->c;
		util_freelist_push(&s->c.reqs, &q->h.free_node);
	}
}

static void recv_free_list_init(struct proto_recv *r)
{
	for (int i = PROTO_RECV_REQS - 1; i >= 0; i--) {
		struct proto_recv_req *q = &r->reqs[i];
		q->h.kind = PROTO_REQ_RECV;
		q->h.comm = &r->c;
		util_freelist_push(&r->c.reqs, &q->h.free_node);
	}
}

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
