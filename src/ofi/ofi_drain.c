/*
 * ofi_drain.c - the drain of unexpected messages: an endpoint's sweep, with
 * FI_PEEK, of the tagged messages no receive matched, which takes or discards
 * each one no owner will take (ofi_ep_drain_start in ofi.h says when and why).
 */
#include <stdlib.h>
#include <string.h>

#include <rdma/fi_tagged.h>

#include "ofi/ofi.h"
#include "ofi/ofi_int.h"
#include "log/log.h"
#include "util/util.h"

/* A node of the key space: the keys whose first len key bits (highest
 * first) are those of prefix. */
struct ofi_drain_node {
	uint64_t prefix; /* key bits in their tag positions */
	int len;
};

#define OFI_DRAIN_STACK 512
/* A message is taken whole into the scratch buffer, which grows to its
 * size up to this; a larger one is discarded (FI_DISCARD). */
#define OFI_DRAIN_BUF_MAX (4u << 20)
/* A receive for a message that another receive took meanwhile (a closing
 * connection's drain) would wait forever: cancelled after this. */
#define OFI_DRAIN_RECV_NS 1000000000ULL

enum ofi_drain_step { DRAIN_PEEK, DRAIN_RECV, DRAIN_DISCARD };

struct ofi_drain {
	struct ofi_op op;
	uint64_t key_mask;
	int key_bits;
	uint64_t bit[64];        /* the key's bits, highest first */
	ofi_drain_keep_fn keep;
	void *arg;
	bool busy;               /* a peek, receive or discard is posted */
	enum ofi_drain_step step;
	uint64_t tag;            /* the message being taken */
	size_t len;
	uint64_t posted_ns;      /* when the receive was posted */
	bool cancelled;          /* ... and cancelled, having waited too long */
	bool found;              /* this walk found a message to drain */
	struct ofi_drain_node cur; /* the node being looked at */
	bool have_cur;
	uint64_t next_ns;        /* when the next sweep starts (or resumes; util_now_ns) */
	uint64_t coarse_next_ns; /* ... on the coarse clock, what every progress call reads */
	uint64_t slice_end_ns;
	void *buf;               /* scratch for the messages taken */
	size_t buf_len;
	struct ofi_mr *buf_mr;   /* FI_MR_LOCAL */
	int depth;
	struct ofi_drain_node stack[OFI_DRAIN_STACK];
};

/* The node's mask: the tag bits its prefix fixes. */
static uint64_t drain_node_mask(const struct ofi_drain *d, int len)
{
	uint64_t m = 0;
	for (int i = 0; i < len; i++)
		m |= d->bit[i];
	return m;
}

/* The next sweep starts (or resumes) ns from now. */
static void drain_wait(struct ofi_drain *d, uint64_t ns)
{
	d->next_ns = util_now_ns() + ns;
	d->coarse_next_ns = ns ? util_coarse_ns() + ns : 0;
}

static ssize_t drain_peek(struct ofi_ep *ep, uint64_t tag, uint64_t ignore, uint64_t flags)
{
	struct ofi_drain *d = ep->drain;
	struct fi_msg_tagged msg = {
		.msg_iov = NULL, .desc = NULL, .iov_count = 0, .addr = FI_ADDR_UNSPEC,
		.tag = tag, .ignore = ignore, .context = &d->op.ctx, .data = 0,
	};
	memset(&d->op.ctx, 0, sizeof(d->op.ctx));
	ofi_ep_enter(ep);
	ssize_t rc = fi_trecvmsg(ep->ep, &msg, flags | FI_PEEK | FI_COMPLETION);
	ofi_ep_leave(ep);
	return rc;
}

/* Room for len bytes in the scratch buffer; false when there cannot be. */
static bool drain_buf_fit(struct ofi_ep *ep, size_t len)
{
	struct ofi_drain *d = ep->drain;
	if (len <= d->buf_len && d->buf)
		return true;
	if (len > OFI_DRAIN_BUF_MAX)
		return false;
	size_t want = d->buf_len ? d->buf_len : 65536;
	while (want < len)
		want *= 2;
	ofi_mr_put(d->buf_mr);
	d->buf_mr = NULL;
	free(d->buf);
	d->buf_len = 0;
	d->buf = malloc(want);
	if (!d->buf)
		return false;
	if ((ep->dom->mr_mode & FI_MR_LOCAL) &&
	    ofi_mr_get(ep->dom, d->buf, want, FI_HMEM_SYSTEM, 0, &d->buf_mr)) {
		free(d->buf);
		d->buf = NULL;
		return false;
	}
	d->buf_len = want;
	return true;
}

/* Posts the sweep's next operation; CQ lock held. Leaves d->busy false when
 * the sweep is done or paused. */
static void drain_next(struct ofi_ep *ep)
{
	struct ofi_drain *d = ep->drain;
	uint64_t now = util_now_ns();
	if (now >= d->slice_end_ns) {
		drain_wait(d, 0); /* resumes at the next progress call */
		return;
	}
	ssize_t rc;
	switch (d->step) {
	case DRAIN_RECV:
		/* An ordinary receive of that very tag: the provider takes it the
		 * way it takes any message (segments, rendezvous, flow control),
		 * which a discard does not everywhere. */
		memset(&d->op.ctx, 0, sizeof(d->op.ctx));
		d->posted_ns = now;
		d->cancelled = false;
		rc = ofi_ep_trecv(ep, d->buf, d->buf_len, d->buf_mr ? d->buf_mr->desc : NULL,
				  FI_ADDR_UNSPEC, d->tag, 0, &d->op.ctx);
		break;
	case DRAIN_DISCARD:
		rc = drain_peek(ep, d->tag, 0, FI_DISCARD);
		break;
	default:
		if (!d->have_cur) {
			if (!d->depth) {
				/* the walk is done; one that found messages to drain
				 * is followed by another at once: more may be coming */
				drain_wait(d, d->found ? 0 : OFI_DRAIN_NS);
				d->found = false;
				d->cur = (struct ofi_drain_node){ 0, 0 };
				d->have_cur = true;
				return;
			}
			d->cur = d->stack[--d->depth];
			d->have_cur = true;
		}
		rc = drain_peek(ep, d->cur.prefix, ~drain_node_mask(d, d->cur.len), 0);
		break;
	}
	if (rc == 0) {
		d->busy = true;
		return;
	}
	if (rc == -FI_EAGAIN) {
		drain_wait(d, 0); /* the queue is full: at the next call */
		return;
	}
	LOG_WARN_LIMITED(NCCL_NET, "device %s: draining unexpected messages failed: %s; this "
			 "endpoint stops draining", ep->dom->name, ofi_strerror((int)rc));
	d->next_ns = d->coarse_next_ns = UINT64_MAX;
}

static void drain_push(struct ofi_drain *d, uint64_t prefix, int len)
{
	if (d->depth < OFI_DRAIN_STACK)
		d->stack[d->depth++] = (struct ofi_drain_node){ prefix, len };
	/* (else left for the next walk) */
}

static void drain_done(struct ofi_op *op, const struct fi_cq_tagged_entry *e,
		       const struct fi_cq_err_entry *err)
{
	struct ofi_ep *ep = op->owner;
	struct ofi_drain *d = ep->drain;
	d->busy = false;
	if (d->step != DRAIN_PEEK) {
		/* taken (a larger message than the peek said is cut: as good),
		 * or gone meanwhile; either way the node is looked at again */
		bool took = e || (err && err->err == FI_ETRUNC);
		if (err && !took && err->err != FI_ENOMSG && err->err != FI_ECANCELED)
			LOG_WARN_LIMITED(NCCL_NET, "device %s: draining a message failed: %s",
					 ep->dom->name, ofi_strerror(err->err));
		if (took) {
			unsigned n = atomic_fetch_add(&ep->drained, 1) + 1;
			LOG_WARN_LIMITED(NCCL_NET, "device %s: drained a data message that no "
					 "connection will take (tag 0x%llx, %zu bytes: its connection "
					 "is closed or never existed; %u so far). A peer sent after "
					 "its connection closed, or a process forges messages",
					 ep->dom->name, (unsigned long long)d->tag, d->len, n);
		}
		d->step = DRAIN_PEEK;
	} else if (!e) {
		if (err->err != FI_ENOMSG && err->err != FI_ECANCELED)
			LOG_WARN_LIMITED(NCCL_NET, "device %s: a peek for unexpected messages failed: %s",
					 ep->dom->name, ofi_strerror(err->err));
		d->have_cur = false; /* nothing unexpected under this node */
	} else if (!d->keep(ep, d->arg, e->tag)) {
		d->tag = e->tag;
		d->len = e->len;
		d->found = true;
		/* discarded unread where a receive would follow the sender's
		 * connection, which may be freed (traits.whole_max) */
		size_t whole = ep->dom->traits.whole_max;
		d->step = (!whole || e->len <= whole) && drain_buf_fit(ep, e->len) ? DRAIN_RECV :
										      DRAIN_DISCARD;
	} else {
		/* Someone takes it: step over its key. Its key's path below the
		 * node is split off, the siblings along it looked at instead. */
		uint64_t key = e->tag & d->key_mask;
		for (int l = d->key_bits; l > d->cur.len; l--) {
			uint64_t sib = (key & drain_node_mask(d, l - 1)) | (~key & d->bit[l - 1]);
			drain_push(d, sib, l);
		}
		d->have_cur = false;
	}
	drain_next(ep);
}

int ofi_ep_drain_start(struct ofi_ep *ep, uint64_t key_mask, ofi_drain_keep_fn keep, void *arg)
{
	struct ofi_drain *d = calloc(1, sizeof(*d));
	if (!d)
		return -FI_ENOMEM;
	d->key_mask = key_mask;
	for (int b = 63; b >= 0; b--)
		if (key_mask >> b & 1)
			d->bit[d->key_bits++] = 1ULL << b;
	d->keep = keep;
	d->arg = arg;
	d->op.complete = drain_done;
	d->op.owner = ep;
	d->op.ep = ep;
	d->cur = (struct ofi_drain_node){ 0, 0 };
	d->have_cur = true;
	drain_wait(d, OFI_DRAIN_NS);
	pthread_mutex_lock(&ep->cq_lock);
	ep->drain = d;
	pthread_mutex_unlock(&ep->cq_lock);
	return 0;
}

void ofi_drain_free(struct ofi_drain *d)
{
	if (!d)
		return;
	ofi_mr_put(d->buf_mr);
	free(d->buf);
	free(d);
}

/* Starts or resumes the sweep when it is due; CQ lock held. */
void ofi_drain_kick(struct ofi_ep *ep)
{
	struct ofi_drain *d = ep->drain;
	if (d->busy) {
		if (d->step == DRAIN_RECV && !d->cancelled &&
		    util_now_ns() - d->posted_ns > OFI_DRAIN_RECV_NS) {
			d->cancelled = true;
			ofi_ep_cancel(ep, &d->op.ctx);
		}
		return;
	}
	if (util_coarse_ns() < d->coarse_next_ns)
		return;
	uint64_t now = util_now_ns();
	if (now < d->next_ns)
		return;
	d->slice_end_ns = now + OFI_DRAIN_SLICE_NS;
	drain_next(ep);
}
