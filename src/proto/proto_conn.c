/*
 * proto_conn.c - connection setup: listen, connect, accept and reject, the
 * handlers of the control messages that make a connection (CONNECT, ACCEPT,
 * CTS), and the closes. None of them blocks: connect and accept return a NULL
 * comm until the handshake is done, so NCCL can call them in turns on one
 * thread (its GDR probe connects to itself).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <rdma/fi_tagged.h>

#include "log/log.h"
#include "proto/proto.h"
#include "util/util.h"

/* A name such as shm's: printable characters, then NULs to the end. */
static bool printable_name(const unsigned char *b, size_t len)
{
	size_t n = 0;
	while (n < len && b[n] >= 0x20 && b[n] < 0x7f)
		n++;
	if (n == 0)
		return false;
	for (size_t i = n; i < len; i++)
		if (b[i])
			return false;
	return true;
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
	} else if (len > 1 && printable_name(addr, len)) {
		snprintf(buf, buf_len, "%.*s", (int)len, (const char *)addr); /* shm: "fi_shm://..." */
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
 * name; the handler queues each for its listen comm and answers it at once:
 * HELD when it waits for accept, REJECT when it can never succeed (no such
 * listen comm: closed, or a stale handle; a bad nonce or provider; the queue
 * full). So a connector hears within PROTO_CONNECT_ANSWER_NS whether anyone
 * listens. Answers are heap operations. A HELD answers a request that took a
 * place in a listen queue, so there are never more than those places; REJECTs,
 * which anyone can provoke, are at most PROTO_REJECTS_MAX in flight per
 * process, and beyond that a connector hears nothing and fails by its own
 * timeout, with the same error: a flood of hopeless requests, or a peer that
 * never reads its answers, cannot hold the memory or starve later HELDs. */

#define PROTO_REJECTS_MAX 64

struct proto_answer_op {
	struct ofi_op op;
	struct proto_msg msg;
	struct ofi_mr *mr;
	bool counted; /* a REJECT: holds a place in rejects_in_flight */
};

static atomic_int rejects_in_flight;

static void answer_free(struct proto_answer_op *a)
{
	if (a->counted)
		atomic_fetch_sub(&rejects_in_flight, 1);
	ofi_mr_put(a->mr);
	free(a);
}

static void answer_done(struct ofi_op *op, const struct fi_cq_tagged_entry *e,
			const struct fi_cq_err_entry *err)
{
	answer_free(op->owner);
}

/* Answers req with `type` (PROTO_MSG_HELD, or PROTO_MSG_REJECT and its
 * reason). Safe under the CQ lock (it only posts). */
static void send_answer(struct proto_device *dev, struct ofi_ep *ep, const struct proto_msg *req,
			uint8_t type, uint32_t reason)
{
	bool reject = type == PROTO_MSG_REJECT;
	if (reject) {
		char peer_text[64] = "?";
		proto_addr_text(dev->info, req->addr[0], req->alen[0], peer_text, sizeof(peer_text));
		LOG_WARN_LIMITED(NCCL_NET, "accept on %s: refused a connection from %s: %s",
				 dev->props.name, peer_text, proto_reject_text(reason));
		if (atomic_fetch_add(&rejects_in_flight, 1) >= PROTO_REJECTS_MAX) {
			atomic_fetch_sub(&rejects_in_flight, 1);
			return;
		}
	}
	struct proto_answer_op *a = calloc(1, sizeof(*a));
	if (!a) {
		if (reject)
			atomic_fetch_sub(&rejects_in_flight, 1);
		return;
	}
	a->counted = reject;
	fi_addr_t peer;
	if (req->alen[0] == 0 || ofi_ep_resolve(ep, req->addr[0], req->alen[0], &peer) ||
	    ((ep->dom->mr_mode & FI_MR_LOCAL) &&
	     ofi_mr_get(ep->dom, &a->msg, sizeof(a->msg), FI_HMEM_SYSTEM, 0, &a->mr))) {
		answer_free(a);
		return;
	}
	a->op.complete = answer_done;
	a->op.owner = a;
	a->op.ep = ep;
	a->msg.type = type;
	a->msg.reason = reason;
	a->msg.nonce = req->nonce;
	a->msg.secret = req->secret;
	proto_msg_seal(&a->msg, proto_tag_ctrl(&dev->layout, PROTO_CTRL_ACCEPT, req->id));
	if (ofi_ep_send(ep, &a->msg, sizeof(a->msg), a->mr ? a->mr->desc : NULL, peer, &a->op.ctx))
		answer_free(a);
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
	send_answer(dev, ep, m, reason == PROTO_REJECT_NONE ? PROTO_MSG_HELD : PROTO_MSG_REJECT,
		    reason);
}

int net_listen(int dev_index, void *handle, void **listen_comm)
{
	*listen_comm = NULL;
	struct proto_device *dev = proto_device_of(dev_index, "listen");
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
	rc = proto_comm_init(&l->c, PROTO_LISTEN, dev, dom, sizeof(*l), 1);
	if (rc) {
		proto_comm_free(&l->c);
		return ofi_err_sys(rc);
	}
	l->id = l->c.reg.id;
	l->nonce = random_u64();
	/* Connection requests should find a posted receive: the pool grows with
	 * the listen comms open on the device, within an eighth of the
	 * provider's receive queue (the CTS pool may take half, the answers'
	 * pool a sixteenth; the data receives need the rest, and hundreds of
	 * connections fill most of a small queue such as shm's). */
	int listens = proto_listen_count(l);
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
		send_answer(c->dev, c->ep, &m, PROTO_MSG_REJECT, PROTO_REJECT_NO_LISTENER);
	proto_comm_retire(c);
	return 0;
}

/* ---------------- connect ---------------- */

static void send_out_done(struct ofi_op *op, const struct fi_cq_tagged_entry *e,
			  const struct fi_cq_err_entry *err)
{
	struct proto_send *s = op->owner;
	char text[256];
	if (err && s->c.dev->dom->traits.stale_conn_once &&
	    (err->err == FI_ENOTCONN || err->err == FI_ECONNRESET || err->err == EPIPE) &&
	    util_now_ns() - s->out_ns < PROTO_CONNECT_ANSWER_NS) {
		/* (policy_traits.c, "stale connection") */
		ofi_cq_error_text(s->c.ep, err, text, sizeof(text));
		LOG_INFO(NCCL_NET | NCCL_INIT, "connect to %s: the connection request went down with "
			 "a connection the peer had reset (%s); sending it again", s->peer_text, text);
		atomic_store(&s->out_again, true);
	} else if (err && err->err != FI_ECANCELED) {
		ofi_cq_error_text(s->c.ep, err, text, sizeof(text));
		LOG_WARN(NCCL_NET | NCCL_INIT,
			 "connect to %s: the connection request could not be delivered: %s. Is the "
			 "peer process alive and reachable on this interface?",
			 s->peer_text, text);
		atomic_store(&s->out_err, err->err);
	}
	proto_op_done(&s->c, op);
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
		if (m->type == PROTO_MSG_HELD && !proto_msg_check(m, len, NULL, 0)) {
			atomic_store(&s->held, true); /* ACCEPT or REJECT follows */
			pthread_mutex_unlock(&dom->id_lock);
			return;
		}
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

/* Whether a data message that matched no receive will be taken: it names a
 * receive comm of ours that is open (a connection that has not posted that
 * receive yet). Anything else (a control bit in a tag, a connection that
 * closed or never existed) is thrown away by the endpoint's drain. A forged
 * message that names a live connection but comes from another process stays
 * until that connection closes: data receives name their peer, so it is
 * never delivered, and connection ids are random (22 bits), so hitting a live
 * one takes millions of guesses. */
static bool data_owned(struct ofi_ep *ep, void *arg, uint64_t tag)
{
	const struct proto_device *dev = arg;
	const struct proto_tag_layout *lay = &dev->layout;
	if (proto_tag_is_ctrl(lay, tag))
		return false;
	uint32_t conn = (uint32_t)(tag >> lay->conn_shift) & proto_tag_conn_mask(lay);
	struct ofi_domain *dom = ep->dom;
	pthread_mutex_lock(&dom->id_lock);
	const struct proto_comm *c = ofi_domain_lookup_locked(dom, conn);
	bool live = c && c->magic == PROTO_COMM_MAGIC && c->kind == PROTO_RECV;
	pthread_mutex_unlock(&dom->id_lock);
	/* (a connection made after this answer cannot have a message here yet:
	 * its peer learns the id from the ACCEPT, which is posted after the id
	 * is registered) */
	return live;
}

int proto_ep_start(struct proto_device *dev, struct ofi_ep *ep)
{
	ep->rw_fn = proto_rma_landed;
	ep->rw_arg = dev;
	/* Data messages nobody will take are thrown away, where the provider can
	 * (traits.drain); the key is what names the owner: the control bit and
	 * the connection id. */
	if (ep->dom->traits.drain) {
		const struct proto_tag_layout *lay = &dev->layout;
		uint64_t key = lay->ctrl_bit | (uint64_t)proto_tag_conn_mask(lay) << lay->conn_shift;
		int drc = ofi_ep_drain_start(ep, key, data_owned, dev);
		if (drc)
			return drc;
	}
	/* CTS (kind 2) and PING (kind 3) differ in the kind's low bit: one pool
	 * takes both, so pings never pile up unmatched in the provider */
	uint64_t ignore = 0xffffffffULL | 1ULL << dev->layout.kind_shift;
	/* (every pool's buffers take the largest control message: any control
	 * message may land in any of them) */
	int rc = ofi_ep_rx_pool_start(ep, proto_tag_ctrl(&dev->layout, PROTO_CTRL_CTS, 0), ignore,
				      PROTO_CTS_POOL, sizeof(struct proto_msg), proto_cts_handler, dev);
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
	/* before comm_init: its failure path destroys them */
	pthread_mutex_init(&s->cts_lock, NULL);
	pthread_mutex_init(&s->post_lock, NULL);
	dlist_init(&s->due_link);
	rc = proto_comm_init(&s->c, PROTO_SEND, dev, dom, sizeof(*s), dom->nep);
	if (rc) {
		proto_comm_free(&s->c);
		return ofi_err_sys(rc);
	}
	/* Every send comm of the endpoint receives its CTS through the shared
	 * pool: keep PROTO_CTS_PER_SEND receives posted per comm, so hundreds of
	 * connections between one pair never leave a CTS without a receive (shm
	 * of 1.17 never matches a CTS that arrived before a receive was posted for
	 * it: the sends behind a lost CTS would wait forever). */
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
	proto_op_init(&s->out_op, send_out_done, s, 0);
	dlist_init(&s->pending_link);
	proto_send_reqs_init(s);
	proto_addr_text(dev->info, h->addr, h->addr_len, s->peer_text, sizeof(s->peer_text));
	rc = ofi_ep_resolve(s->c.ep, h->addr, h->addr_len, &s->peer[0]);
	if (rc) {
		LOG_WARN(NCCL_NET, "connect to %s: the address in the handle cannot be used: %s",
			 s->peer_text, ofi_strerror(rc));
		proto_comm_free(&s->c);
		/* a peer that is gone stays one (ncclRemoteError) */
		return ofi_err_cause(rc) == OFI_CAUSE_PEER ? rc : ofi_err_sys(rc);
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
	s->out.flags = dev->plan.spread && s->c.nrails > 1 ? PROTO_FLAG_SPREAD : 0;
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

	if (atomic_exchange(&s->out_again, false))
		s->out_posted = false;
	if (!s->out_posted) {
		if (!s->out_ns)
			s->out_ns = util_now_ns(); /* the answer's bound counts from the first try */
		proto_op_post_begin(&s->c, &s->out_op, ep, NULL, false); /* the handshake takes rail 0 */
		rc = ofi_ep_send(ep, &s->out, sizeof(s->out), proto_ctrl_desc(&s->c), s->peer[0],
				 &s->out_op.ctx);
		if (proto_op_post_end(&s->c, &s->out_op, rc)) {
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
			/* (limited: a burst of connects to a closed handle is one story) */
			LOG_WARN_LIMITED(NCCL_NET, "connect to %s: the listener refused the connection: %s",
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
		if (nrails > 1 && s->c.dev->dom->rma_write && s->c.dev->plan.stripe_min) {
			/* the other pieces' operations of striped writes; without
			 * them every write takes the home rail whole */
			s->piece_ops = calloc((size_t)PROTO_SEND_REQS * (size_t)(nrails - 1),
					      sizeof(*s->piece_ops));
			if (!s->piece_ops)
				LOG_WARN(NCCL_NET, "connect to %s: no memory to stripe writes over "
					 "%d rails; each message takes one rail", s->peer_text, nrails);
			for (int i = 0; s->piece_ops && i < PROTO_SEND_REQS; i++)
				s->reqs[i].more = s->piece_ops + (size_t)i * (size_t)(nrails - 1);
		}
		s->remote_id = s->in.id;
		s->c.home = s->in.rail % nrails; /* (below the listener's rails: checked) */
		/* the listener's word settles it; it agrees only to what we offered */
		s->c.spread = nrails > 1 && (s->out.flags & PROTO_FLAG_SPREAD) &&
			      (s->in.flags & PROTO_FLAG_SPREAD);
		s->c.peer_text = s->peer_text;
		s->c.ping_peer = s->peer[s->c.home];
		s->c.peer_rail0 = s->peer[0];
		s->c.ping_id = s->remote_id;
		atomic_store(&s->c.last_ns, util_coarse_ns());
		atomic_store(&s->state, PROTO_READY);
		return 0;
	}
	uint64_t now = util_now_ns();
	if (!atomic_load(&s->held) && now - s->out_ns > PROTO_CONNECT_ANSWER_NS) {
		LOG_WARN(NCCL_NET,
			 "connect to %s: nothing answered the connection request within %llu s: no "
			 "listener of this plugin is at that address (the handle is stale or corrupt, "
			 "or its process has exited). Check that the peer rank is alive",
			 s->peer_text, (unsigned long long)(PROTO_CONNECT_ANSWER_NS / 1000000000ULL));
		return -FI_ECONNREFUSED;
	}
	uint64_t limit = s->c.dev->plan.timeout_ns;
	if (now - s->start_ns > limit) {
		LOG_WARN(NCCL_NET,
			 "connect to %s: no answer after %llu s: the peer may have died or never "
			 "called accept (NCCL_FABRIC_TIMEOUT sets the limit)",
			 s->peer_text, (unsigned long long)(limit / 1000000000ULL));
		return -FI_ETIMEDOUT;
	}
	return 0;
}

int net_connect(int dev_index, void *handle, void **send_comm)
{
	*send_comm = NULL;
	struct proto_device *dev = proto_device_of(dev_index, "connect");
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
		proto_comm_opened();
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
	proto_comm_closed();
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
	proto_op_done(&r->c, op);
}

static int recv_post_ack(struct proto_recv *r)
{
	proto_op_post_begin(&r->c, &r->ack_op, r->c.ep, NULL, false); /* the handshake takes rail 0 */
	ssize_t rc = ofi_ep_send(r->c.ep, &r->ack, sizeof(r->ack), proto_ctrl_desc(&r->c),
				 r->peer[0], &r->ack_op.ctx);
	if (proto_op_post_end(&r->c, &r->ack_op, rc))
		return (int)rc;
	r->ack_posted = true;
	return 0;
}

/* The home rail of each accepted connection, in turn. */
static atomic_uint accept_rail_turn;

/* Makes the receive comm a queued connection request asks for, with its
 * ACCEPT sealed, ready to post (the counterpart of send_create). Returns 0
 * with *out NULL when the request names an address we cannot use: refused
 * (REJECT), and accept goes on waiting for a good one. Any other failure
 * refuses the request too, and returns the error. */
static int recv_create(struct proto_listen *l, const struct proto_msg *req,
		       struct proto_recv **out)
{
	struct proto_device *dev = l->c.dev;
	*out = NULL;
	char peer_text[64] = "?";
	proto_addr_text(dev->info, req->addr[0], req->alen[0], peer_text, sizeof(peer_text));
	/* (nonce, provider and addresses were checked when it was queued) */
	struct proto_recv *r = calloc(1, sizeof(*r));
	struct ofi_domain *dom = dev->dom;
	int nrails = req->nrails < dom->nep ? req->nrails : dom->nep;
	int irc = r ? proto_comm_init(&r->c, PROTO_RECV, dev, dom, sizeof(*r), nrails) : -FI_ENOMEM;
	if (irc) {
		if (r)
			proto_comm_free(&r->c);
		LOG_WARN(NCCL_NET, "accept on %s: out of memory", dev->props.name);
		send_answer(dev, l->c.ep, req, PROTO_MSG_REJECT, PROTO_REJECT_RESOURCES);
		return ofi_err_sys(irc);
	}
	proto_op_init(&r->ack_op, recv_ack_done, r, 0);
	proto_recv_reqs_init(r);
	util_strlcpy(r->peer_text, peer_text, sizeof(r->peer_text));
	for (int i = 0; i < r->c.nrails; i++) {
		if (ofi_ep_resolve(r->c.rails[i], req->addr[i], req->alen[i], &r->peer[i])) {
			send_answer(dev, l->c.ep, req, PROTO_MSG_REJECT, PROTO_REJECT_RESOURCES);
			proto_comm_free(&r->c);
			return 0;
		}
	}
	for (int i = 0; i < r->c.nrails; i++)
		r->src[i] = dom->directed ? r->peer[i] : FI_ADDR_UNSPEC;
	if (dom->rma_write && (dom->info->mode & FI_RX_CQ_DATA)) {
		/* the writes to come take control receives (FI_RX_CQ_DATA):
		 * within half of the provider's receive queue, as at connect */
		int objects = ofi_domain_nobjs(dom);
		int want = PROTO_CTS_POOL + PROTO_CTS_PER_RECV_RXCQ * objects;
		for (int i = 0; i < r->c.nrails; i++)
			if (pool_reserve_share(r->c.rails[i], PROTO_POOL_CTS, PROTO_CTS_POOL, want, 2))
				LOG_WARN(NCCL_NET, "accept: could not post more control receives on "
					 "rail %d for the RMA writes of %d connections (FI_RX_CQ_DATA); "
					 "a write may wait for a free one", i, objects);
	}
	r->id = r->c.reg.id;
	r->c.secret = req->secret;
	r->ack.type = PROTO_MSG_ACCEPT;
	r->ack.secret = req->secret; /* only the listener saw it: the ACCEPT is genuine */
	r->ack.id = r->id;
	r->ack.nonce = req->nonce;
	r->ack.prov_hash = dev->prov_hash;
	r->ack.nrails = (uint8_t)r->c.nrails;
	r->c.home = (int)(atomic_fetch_add_explicit(&accept_rail_turn, 1, memory_order_relaxed) %
			  (uint32_t)r->c.nrails);
	r->ack.rail = (uint8_t)r->c.home;
	r->c.spread = r->c.nrails > 1 && dev->plan.spread && (req->flags & PROTO_FLAG_SPREAD);
	r->ack.flags = r->c.spread ? PROTO_FLAG_SPREAD : 0;
	for (int i = 0; i < r->c.nrails; i++) {
		r->ack.alen[i] = (uint8_t)r->c.rails[i]->namelen;
		memcpy(r->ack.addr[i], r->c.rails[i]->name, r->c.rails[i]->namelen);
	}
	proto_msg_seal(&r->ack, proto_tag_ctrl(&dev->layout, PROTO_CTRL_ACCEPT, req->id));
	r->reply_id = req->id;
	*out = r;
	return 0;
}

/* NCCL calls accept over and over while it waits for a connection, and
 * NCCL_FABRIC_TIMEOUT counts from the first call of such a run. Calls further
 * apart than this belong to different waits (the listen comm lay idle in
 * between, e.g. until NCCL needed its next connection), and the count starts
 * again. 5 s: far longer than NCCL takes between two calls of one wait (it
 * retries at once), and short beside NCCL_FABRIC_TIMEOUT's default. */
#define PROTO_ACCEPT_RUN_GAP_NS (5ULL * 1000000000ULL)

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
			if (!l->wait_start_ns || now - l->last_call_ns > PROTO_ACCEPT_RUN_GAP_NS)
				l->wait_start_ns = now;
			l->last_call_ns = now;
			uint64_t limit = dev->plan.timeout_ns;
			if (now - l->wait_start_ns > limit) {
				LOG_WARN(NCCL_NET,
					 "accept on %s: no connection request after %llu s: the peer may "
					 "have died (NCCL_FABRIC_TIMEOUT sets the limit)",
					 dev->props.name, (unsigned long long)(limit / 1000000000ULL));
				return -FI_ETIMEDOUT;
			}
			return 0;
		}
		int rc = recv_create(l, &req, &l->accepting);
		if (rc || !l->accepting)
			return rc;
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
	proto_comm_opened();
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
	proto_comm_closed();
	proto_comm_retire(c);
	return 0;
}
