/*
 * Profile rules that keep state (th_profile.c's top comment says what each
 * does and why):
 *  - queue depths: operations posted and whose completion the consumer has
 *    not read, per endpoint and direction, against the profile's size;
 *  - no ordering: a send held back to follow the next one, and a completion
 *    held back to follow the next read's, on profiles without FI_ORDER_SAS;
 *  - FI_RX_CQ_DATA: a write's CQ data travels as an empty untagged message
 *    behind the write, which consumes the target's next receive.
 *
 * Counting: each counted operation is a node keyed by its context in the
 * table of the CQ its completion goes to, inserted before the base sees the
 * operation (so no completion can come back first) and removed, under that
 * CQ's track_lock, by the completion the consumer reads (or by the failed
 * post, or the endpoint's close). The endpoint's count is the number of its
 * nodes, so a count cannot leak while completions are read; an operation whose
 * completion the consumer never sees (selective completion without
 * FI_COMPLETION, injects, FI_PEEK) is not counted. A context posted twice at
 * once on endpoints sharing a CQ may be taken off the other endpoint's count
 * first: the counts still sum up, and each is right once both complete.
 */
#include "testhmem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define TH_TRACK_BUCKETS 1024
#define TH_REORDER_ONE_IN 4

struct th_track {
	struct th_track *next;
	void *ctx;
	struct th_ep *ep;
	int rx, multi;
};

struct th_held {
	int tagged;
	struct iovec iov[TH_IOV_MAX];
	void *desc[TH_IOV_MAX];
	size_t count;
	fi_addr_t dest;
	uint64_t tag, data, flags;
	void *context;
};

struct th_notice {
	struct th_notice *next;
	fi_addr_t dest;
	uint64_t data;
};

static uint64_t th_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static uint64_t splitmix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

int th_rules_coin(struct th_domain *dom, unsigned one_in)
{
	return splitmix64(dom->rng_seed + atomic_fetch_add(&dom->rng_ctr, 1)) % one_in == 0;
}

static int env_off(const char *name)
{
	const char *v = getenv(name);

	return v && (!strcmp(v, "0") || !strcasecmp(v, "off") || !strcasecmp(v, "no"));
}

void th_rules_domain_init(struct th_domain *dom, const struct fi_info *info)
{
	const struct th_profile *p = dom->profile;
	const char *seed = getenv("TESTHMEM_REORDER_SEED");

	pthread_mutex_init(&dom->eps_lock, NULL);
	const char *busy = getenv("TESTHMEM_BUSY_WRITES");
	dom->busy_writes = busy && *busy ? (unsigned)strtoul(busy, NULL, 0) : 0;
	if (!p)
		return;
	if (!env_off("TESTHMEM_QUEUE_LIMIT")) {
		dom->tx_depth = info->tx_attr && info->tx_attr->size ? info->tx_attr->size : p->size;
		dom->rx_depth = info->rx_attr && info->rx_attr->size ? info->rx_attr->size : p->size;
	}
	/* reordering and FI_RX_CQ_DATA work on the host path only */
	/* TESTHMEM_REORDER: completions (the default), sends, all, 0. Held sends
	 * are opt-in: the plugin's close-inflight/1000 takes three times as long
	 * with them (a held send waits for the domain's next CQ read) */
	const char *ro = getenv("TESTHMEM_REORDER");

	if (!(p->msg_order & FI_ORDER_SAS) && dom->mode == TH_MODE_HOST &&
	    !env_off("TESTHMEM_REORDER"))
		dom->reorder = ro && !strcmp(ro, "sends")  ? TH_REORDER_SENDS
			       : ro && (!strcmp(ro, "all") || !strcmp(ro, "1"))
				       ? TH_REORDER_SENDS | TH_REORDER_COMPS
				       : TH_REORDER_COMPS;
	dom->rng_seed = seed && *seed ? strtoull(seed, NULL, 0) : 0x7468726f72646572ULL + dom->id;
	dom->rx_cq_data = (info->mode & FI_RX_CQ_DATA) && th_profile_rx_cq_data(p) &&
			  dom->mode == TH_MODE_HOST;
	th_log("domain rules tx_depth=%zu rx_depth=%zu reorder=%d rx_cq_data=%d busy_writes=%u "
	       "dom=%u",
	       dom->tx_depth, dom->rx_depth, dom->reorder, dom->rx_cq_data, dom->busy_writes,
	       dom->id);
}

void th_rules_domain_fini(struct th_domain *dom)
{
	pthread_mutex_destroy(&dom->eps_lock);
}

/* ---- queue depths ---- */

static size_t th_bucket(const void *ctx)
{
	uintptr_t p = (uintptr_t)ctx;

	return (p >> 4 ^ p >> 14 ^ p >> 24) % TH_TRACK_BUCKETS;
}

void th_rules_cq_open(struct th_cq *cq)
{
	pthread_mutex_init(&cq->track_lock, NULL);
	pthread_mutex_init(&cq->hold_lock, NULL);
	if (cq->domain->tx_depth || cq->domain->rx_depth)
		cq->track = calloc(TH_TRACK_BUCKETS, sizeof(*cq->track));
}

void th_rules_cq_close(struct th_cq *cq)
{
	if (cq->track) {
		for (size_t b = 0; b < TH_TRACK_BUCKETS; b++) {
			while (cq->track[b]) {
				struct th_track *t = cq->track[b];

				cq->track[b] = t->next;
				free(t);
			}
		}
		free(cq->track);
	}
	pthread_mutex_destroy(&cq->track_lock);
	pthread_mutex_destroy(&cq->hold_lock);
}

int th_q_take(struct th_ep *ep, int rx, void *ctx, int multi)
{
	struct th_domain *dom = ep->domain;
	size_t depth = rx ? dom->rx_depth : dom->tx_depth;
	struct th_cq *cq = rx ? ep->rx_cq : ep->tx_cq;
	size_t *out = rx ? &ep->rx_out : &ep->tx_out;
	struct th_track *t;

	if (!depth || !cq || !cq->track)
		return 0;
	t = malloc(sizeof(*t));
	if (!t)
		return 0; /* not counted: never a leak */
	pthread_mutex_lock(&cq->track_lock);
	if (*out >= depth) {
		pthread_mutex_unlock(&cq->track_lock);
		free(t);
		TH_TRACE(dom, 2, "trace queue-full dir=%s depth=%zu ctx=%p dom=%u", rx ? "rx" : "tx",
			 depth, ctx, dom->id);
		return -FI_EAGAIN;
	}
	t->ctx = ctx;
	t->ep = ep;
	t->rx = rx;
	t->multi = multi;
	t->next = cq->track[th_bucket(ctx)];
	cq->track[th_bucket(ctx)] = t;
	(*out)++;
	pthread_mutex_unlock(&cq->track_lock);
	return 1;
}

/* Takes one node of ctx off (ep NULL: any endpoint's; rx -1: either way).
 * cq->track_lock held. */
static void th_q_remove(struct th_cq *cq, void *ctx, struct th_ep *ep, int rx, int final)
{
	struct th_track **pp, *t;

	for (pp = &cq->track[th_bucket(ctx)]; (t = *pp); pp = &t->next) {
		if (t->ctx != ctx || (ep && t->ep != ep) || (rx >= 0 && t->rx != rx))
			continue;
		if (t->multi && !final)
			return; /* a multi-receive buffer leaves with its last completion */
		*pp = t->next;
		if (t->rx)
			t->ep->rx_out--;
		else
			t->ep->tx_out--;
		free(t);
		return;
	}
}

void th_q_undo(struct th_ep *ep, int rx, void *ctx)
{
	struct th_cq *cq = rx ? ep->rx_cq : ep->tx_cq;

	if (!cq || !cq->track)
		return;
	pthread_mutex_lock(&cq->track_lock);
	th_q_remove(cq, ctx, ep, rx, 1);
	pthread_mutex_unlock(&cq->track_lock);
}

/* The queue a completion with these flags leaves: 1 rx, 0 tx, -1 either
 * (no flags), -2 none (a remote event). */
static int th_q_dir(const struct th_domain *dom, uint64_t flags, int has_flags)
{
	if (!has_flags)
		return -1;
	if (flags & FI_RECV)
		return 1;
	if (flags & (FI_REMOTE_READ | FI_REMOTE_WRITE))
		/* FI_RX_CQ_DATA: a write's completion took a receive */
		return dom->rx_cq_data && (flags & FI_REMOTE_CQ_DATA) ? 1 : -2;
	if (flags & (FI_SEND | FI_RMA | FI_READ | FI_WRITE))
		return 0;
	return -1;
}

void th_q_done(struct th_cq *cq, const void *buf, ssize_t n)
{
	size_t esz = th_cq_entry_size(cq->format);
	int has_flags = cq->format != FI_CQ_FORMAT_CONTEXT;

	if (!cq->track || n <= 0)
		return;
	pthread_mutex_lock(&cq->track_lock);
	for (ssize_t i = 0; i < n; i++) {
		/* every format begins with op_context, all but CONTEXT then flags */
		const struct fi_cq_msg_entry *e = (const void *)((const char *)buf + (size_t)i * esz);
		uint64_t flags = has_flags ? e->flags : 0;
		int dir = th_q_dir(cq->domain, flags, has_flags);

		if (dir != -2)
			th_q_remove(cq, e->op_context, NULL, dir,
				    !(flags & FI_RECV) || (flags & FI_MULTI_RECV));
	}
	pthread_mutex_unlock(&cq->track_lock);
}

void th_q_done_err(struct th_cq *cq, const struct fi_cq_err_entry *e)
{
	int dir;

	if (!cq->track)
		return;
	dir = th_q_dir(cq->domain, e->flags, e->flags != 0);
	if (dir == -2)
		return;
	pthread_mutex_lock(&cq->track_lock);
	th_q_remove(cq, e->op_context, NULL, dir, 1); /* an error ends a multi-receive too */
	pthread_mutex_unlock(&cq->track_lock);
}

ssize_t th_q_left(struct th_ep *ep, int rx)
{
	size_t depth = rx ? ep->domain->rx_depth : ep->domain->tx_depth;
	struct th_cq *cq = rx ? ep->rx_cq : ep->tx_cq;
	ssize_t left;

	if (!depth || !cq || !cq->track)
		return -1;
	pthread_mutex_lock(&cq->track_lock);
	left = (ssize_t)(depth - (rx ? ep->rx_out : ep->tx_out));
	pthread_mutex_unlock(&cq->track_lock);
	return left;
}

/* ---- endpoints ---- */

void th_rules_ep_open(struct th_ep *ep)
{
	struct th_domain *dom = ep->domain;

	pthread_mutex_init(&ep->hold_lock, NULL);
	pthread_mutex_lock(&dom->eps_lock);
	ep->next_ep = dom->eps;
	if (dom->eps)
		dom->eps->prev_ep = ep;
	dom->eps = ep;
	pthread_mutex_unlock(&dom->eps_lock);
}

static int th_ep_deferring(const struct th_ep *ep)
{
	return ep->held || ep->notices;
}

void th_rules_ep_close(struct th_ep *ep)
{
	struct th_domain *dom = ep->domain;
	struct th_cq *cqs[2] = { ep->tx_cq, ep->rx_cq };

	pthread_mutex_lock(&dom->eps_lock);
	if (ep->prev_ep)
		ep->prev_ep->next_ep = ep->next_ep;
	else
		dom->eps = ep->next_ep;
	if (ep->next_ep)
		ep->next_ep->prev_ep = ep->prev_ep;
	pthread_mutex_unlock(&dom->eps_lock);
	pthread_mutex_lock(&ep->hold_lock);
	if (th_ep_deferring(ep))
		atomic_fetch_sub(&dom->deferred, 1);
	free(ep->held);
	ep->held = NULL;
	while (ep->notices) {
		struct th_notice *n = ep->notices;

		ep->notices = n->next;
		free(n);
	}
	pthread_mutex_unlock(&ep->hold_lock);
	pthread_mutex_destroy(&ep->hold_lock);
	for (int k = 0; k < 2; k++) {
		struct th_cq *cq = cqs[k];

		if (!cq || !cq->track || (k == 1 && cq == cqs[0]))
			continue;
		pthread_mutex_lock(&cq->track_lock);
		for (size_t b = 0; b < TH_TRACK_BUCKETS; b++) {
			struct th_track **pp = &cq->track[b], *t;

			while ((t = *pp)) {
				if (t->ep == ep) {
					*pp = t->next;
					free(t);
				} else {
					pp = &t->next;
				}
			}
		}
		pthread_mutex_unlock(&cq->track_lock);
	}
}

/* ---- sends held back ---- */

static ssize_t th_held_post(struct th_ep *ep, const struct th_held *h)
{
	if (h->tagged) {
		struct fi_msg_tagged m = { h->iov, (void **)h->desc, h->count, h->dest,
					   h->tag, 0, h->context, h->data };

		return fi_tsendmsg(ep->base, &m, h->flags);
	} else {
		struct fi_msg m = { h->iov, (void **)h->desc, h->count, h->dest, h->context,
				    h->data };

		return fi_sendmsg(ep->base, &m, h->flags);
	}
}

/* Posts the held send; -FI_EAGAIN keeps it for later, another error becomes
 * its error completion. ep->hold_lock held. */
static void th_held_flush(struct th_ep *ep)
{
	struct th_held *h = ep->held;
	ssize_t ret;

	if (!h)
		return;
	ret = th_held_post(ep, h);
	if (ret == -FI_EAGAIN)
		return;
	TH_TRACE(ep->domain, 1, "trace reorder-post ctx=%p ret=%zd dom=%u", h->context, ret,
		 ep->domain->id);
	if (ret) {
		struct fi_cq_err_entry e;

		memset(&e, 0, sizeof(e));
		e.op_context = h->context;
		e.flags = FI_SEND | (h->tagged ? FI_TAGGED : FI_MSG);
		e.tag = h->tag;
		e.err = (int)-ret;
		th_log("error held-send ret=%zd dom=%u", ret, ep->domain->id);
		if (!ep->tx_cq || th_cq_push_err(ep->tx_cq, &e, "testhmem: held send failed"))
			th_q_undo(ep, 0, h->context);
	}
	ep->held = NULL;
	free(h);
}

static void th_notices_flush(struct th_ep *ep)
{
	static const char none[1];

	while (ep->notices) {
		struct th_notice *n = ep->notices;
		ssize_t ret = fi_injectdata(ep->base, none, 0, n->data, n->dest);

		if (ret == -FI_EAGAIN)
			return;
		if (ret)
			th_log("error notice-lost ret=%zd dom=%u", ret, ep->domain->id);
		ep->notices = n->next;
		if (!ep->notices)
			ep->notices_tail = NULL;
		free(n);
	}
}

/* ep->hold_lock held; `was`: whether it deferred anything before. */
static void th_deferred_update(struct th_ep *ep, int was)
{
	int now = th_ep_deferring(ep);

	if (now && !was)
		atomic_fetch_add(&ep->domain->deferred, 1);
	else if (!now && was)
		atomic_fetch_sub(&ep->domain->deferred, 1);
}

ssize_t th_reorder_send(struct th_ep *ep, int tagged, const struct iovec *iov, void **desc,
			size_t count, fi_addr_t dest, uint64_t tag, uint64_t data,
			void *context, uint64_t flags)
{
	struct th_held h = { tagged, { { 0 } }, { 0 }, count, dest, tag, data, flags, context };
	struct th_domain *dom = ep->domain;
	ssize_t ret;
	int was;

	for (size_t i = 0; i < count; i++) {
		h.iov[i] = iov[i];
		h.desc[i] = desc ? desc[i] : NULL;
	}
	pthread_mutex_lock(&ep->hold_lock);
	was = th_ep_deferring(ep);
	if (ep->held) {
		/* this one overtakes the one held */
		ret = th_held_post(ep, &h);
		if (!ret)
			th_held_flush(ep);
	} else if (th_rules_coin(dom, TH_REORDER_ONE_IN) && (ep->held = malloc(sizeof(h)))) {
		*ep->held = h;
		ep->held_ns = th_now_ns();
		TH_TRACE(dom, 1, "trace reorder-hold ctx=%p dom=%u", context, dom->id);
		ret = 0;
	} else {
		ret = th_held_post(ep, &h);
	}
	th_deferred_update(ep, was);
	pthread_mutex_unlock(&ep->hold_lock);
	return ret;
}

void th_rules_progress(struct th_domain *dom, int force)
{
	if (!atomic_load(&dom->deferred))
		return;
	pthread_mutex_lock(&dom->eps_lock);
	for (struct th_ep *ep = dom->eps; ep; ep = ep->next_ep) {
		int was;

		pthread_mutex_lock(&ep->hold_lock);
		was = th_ep_deferring(ep);
		th_notices_flush(ep);
		(void)force; /* every CQ read lets it go: nothing waits for a timer */
		th_held_flush(ep);
		th_deferred_update(ep, was);
		pthread_mutex_unlock(&ep->hold_lock);
	}
	pthread_mutex_unlock(&dom->eps_lock);
}

void th_rules_cancel(struct th_ep *ep, void *context)
{
	pthread_mutex_lock(&ep->hold_lock);
	if (ep->held && ep->held->context == context) {
		int was = th_ep_deferring(ep);

		th_held_flush(ep);
		th_deferred_update(ep, was);
	}
	pthread_mutex_unlock(&ep->hold_lock);
}

/* ---- completions held back ---- */

ssize_t th_cq_read_reorder(struct th_cq *cq, void *buf, size_t count, fi_addr_t *src,
			   th_cq_reader inner)
{
	size_t esz = th_cq_entry_size(cq->format);
	fi_addr_t srcs[TH_IOV_MAX * 4];
	ssize_t n;

	if (!(cq->domain->reorder & TH_REORDER_COMPS) || !count)
		return inner(&cq->cq_fid, buf, count, src);
	if (count > sizeof(srcs) / sizeof(srcs[0]))
		count = sizeof(srcs) / sizeof(srcs[0]);
	pthread_mutex_lock(&cq->hold_lock);
	if (cq->held) {
		/* the held one follows what this read finds, or goes alone */
		n = count > 1 ? inner(&cq->cq_fid, buf, count - 1, srcs) : 0;
		if (n < 0)
			n = 0;
		memcpy((char *)buf + (size_t)n * esz, &cq->held_ent, esz);
		srcs[n++] = cq->held_src;
		cq->held = 0;
	} else {
		n = inner(&cq->cq_fid, buf, count, srcs);
		if (n > 0 && th_rules_coin(cq->domain, TH_REORDER_ONE_IN)) {
			memcpy(&cq->held_ent, buf, esz);
			cq->held_src = srcs[0];
			cq->held = 1;
			memmove(buf, (char *)buf + esz, (size_t)(n - 1) * esz);
			memmove(srcs, srcs + 1, (size_t)(n - 1) * sizeof(srcs[0]));
			TH_TRACE(cq->domain, 1, "trace reorder-hold-comp ctx=%p dom=%u",
				 cq->held_ent.op_context, cq->domain->id);
			if (!--n)
				n = -FI_EAGAIN;
		}
	}
	pthread_mutex_unlock(&cq->hold_lock);
	if (n > 0 && src)
		memcpy(src, srcs, (size_t)n * sizeof(srcs[0]));
	return n;
}

ssize_t th_cq_take_held(struct th_cq *cq, void *buf, size_t count, fi_addr_t *src)
{
	ssize_t n = 0;

	if (!(cq->domain->reorder & TH_REORDER_COMPS) || !count)
		return 0;
	pthread_mutex_lock(&cq->hold_lock);
	if (cq->held) {
		memcpy(buf, &cq->held_ent, th_cq_entry_size(cq->format));
		if (src)
			src[0] = cq->held_src;
		cq->held = 0;
		n = 1;
	}
	pthread_mutex_unlock(&cq->hold_lock);
	return n;
}

/* ---- FI_RX_CQ_DATA ---- */

void th_notice_send(struct th_ep *ep, fi_addr_t dest, uint64_t data, size_t len)
{
	struct th_notice *n = malloc(sizeof(*n));
	int was;

	if (!n) {
		th_log("error notice-lost reason=ENOMEM dom=%u", ep->domain->id);
		return;
	}
	n->next = NULL;
	n->dest = dest;
	/* the data's low 4 bytes (all efa-direct carries), the length above */
	n->data = TH_NOTICE_MARK | (uint64_t)(len & 0x7fffffffULL) << 32 |
		  (data & ep->domain->cq_data_mask & 0xffffffffULL);
	pthread_mutex_lock(&ep->hold_lock);
	was = th_ep_deferring(ep);
	if (ep->notices_tail)
		ep->notices_tail->next = n;
	else
		ep->notices = n;
	ep->notices_tail = n;
	th_notices_flush(ep);
	th_deferred_update(ep, was);
	pthread_mutex_unlock(&ep->hold_lock);
}

void th_rx_cq_data_rewrite(struct th_cq *cq, void *buf, ssize_t n)
{
	size_t esz = th_cq_entry_size(cq->format);

	if (!cq->domain->rx_cq_data || cq->format == FI_CQ_FORMAT_CONTEXT)
		return;
	for (ssize_t i = 0; i < n; i++) {
		char *slot = (char *)buf + (size_t)i * esz;
		struct fi_cq_msg_entry *m = (void *)slot;

		if ((m->flags & (FI_RECV | FI_TAGGED | FI_REMOTE_CQ_DATA)) !=
		    (FI_RECV | FI_REMOTE_CQ_DATA))
			continue;
		if (cq->format == FI_CQ_FORMAT_MSG) {
			/* no data to tell: an empty message with data is one */
			if (m->len)
				continue;
		} else {
			struct fi_cq_data_entry *d = (void *)slot;

			if (!(d->data & TH_NOTICE_MARK))
				continue;
			d->len = (d->data >> 32) & 0x7fffffffULL;
			d->data &= 0xffffffffULL;
			d->buf = NULL;
			if (cq->format == FI_CQ_FORMAT_TAGGED)
				((struct fi_cq_tagged_entry *)slot)->tag = 0;
		}
		/* the immediate data's entry (efa_cq.c:18-34, fabric-profiles.md:20),
		 * with the consumed receive's context */
		m->flags = FI_REMOTE_CQ_DATA | FI_RMA | FI_REMOTE_WRITE;
		TH_TRACE(cq->domain, 1, "trace rx-cq-data ctx=%p len=%zu dom=%u", m->op_context,
			 m->len, cq->domain->id);
	}
}

/* A peer's RMA at this target: flagged FI_REMOTE_WRITE or FI_REMOTE_READ, or
 * remote CQ data on something not a receive (some providers flag a write
 * FI_RMA|FI_REMOTE_CQ_DATA only). */
static int th_remote_rma(uint64_t flags)
{
	return (flags & (FI_REMOTE_WRITE | FI_REMOTE_READ)) ||
	       ((flags & FI_REMOTE_CQ_DATA) && !(flags & FI_RECV));
}

void th_remote_ctx_clear(struct th_domain *dom, enum fi_cq_format format, void *buf, ssize_t n)
{
	size_t esz = th_cq_entry_size(format);

	/* (FI_CQ_FORMAT_CONTEXT has no flags to tell a remote write by) */
	if (dom->base_rx_cq_data || format == FI_CQ_FORMAT_CONTEXT)
		return;
	for (ssize_t i = 0; i < n; i++) {
		/* every format but CONTEXT begins with op_context, then flags */
		struct fi_cq_msg_entry *m = (void *)((char *)buf + (size_t)i * esz);

		if (!m->op_context || !th_remote_rma(m->flags))
			continue;
		TH_TRACE(dom, 1, "trace remote-ctx-cleared ctx=%p flags=0x%llx dom=%u",
			 m->op_context, (unsigned long long)m->flags, dom->id);
		m->op_context = NULL;
	}
}

void th_remote_ctx_clear_err(struct th_domain *dom, struct fi_cq_err_entry *e)
{
	th_remote_ctx_clear(dom, FI_CQ_FORMAT_MSG, e, 1);
}
