/*
 * th_rma.c - cuda mode: remote RMA into and out of device memory, carried as a
 * GPUDirect NIC would carry it, without the base provider ever touching a
 * device address.
 *
 * A CUDA registration that allows remote access gets a host shadow of its
 * length, registered with the base in place of the device memory: a base write
 * lands in the shadow, a base read takes from it. The target moves the bytes
 * between shadow and device when it learns of the operation:
 *
 *   write  The initiator posts the base write with 8 bytes of remote CQ data
 *          holding an id of its own, and a notice (id, key, offset, length and
 *          the caller's CQ data) as a tagged message carrying TH_NOTICE_TAG, a
 *          bit the caller never has (cuda mode offers a tag format one bit
 *          narrower). The target pairs the write's completion with the notice,
 *          in whichever order they come, copies the written range to the
 *          device, and only then hands the caller its remote CQ data
 *          completion (when the write carried data). The initiator's write
 *          completes once both base operations have.
 *   read   The initiator sends a read request; the target copies the range
 *          from the device into the shadow and answers "ready" to the
 *          request's source (the base runs with FI_SOURCE for this); then the
 *          initiator posts the base read. It completes once the read and the
 *          request have.
 *
 * So a plain write, with no event for the caller at the target, reaches the
 * device at the target's next CQ read, as every write does. Every RMA of a
 * cuda-mode domain takes this path, whatever memory the target holds: the
 * initiator cannot tell. Both processes must run in cuda mode. The base must
 * address registrations by offset (no FI_MR_VIRT_ADDR): with virtual addresses
 * the initiator would need the target's shadow address. One remote segment
 * per operation.
 *
 * Log lines: "rma landed=N refreshed=N" at domain close; errors as
 * "error rma-...".
 */
#include "testhmem.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define TH_NOTE_MAGIC 0x7468524dU /* "thRM" */
#define TH_NOTES 8192
#define TH_NOTES_PER_EP 32
#define TH_PAIR_BUCKETS 256

enum th_note_kind { TH_NOTE_WRITE = 1, TH_NOTE_READREQ = 2, TH_NOTE_READY = 3 };

/* What travels, both ends being this provider in cuda mode. */
struct th_notice {
	uint32_t magic;
	uint16_t kind;
	uint16_t has_data; /* write: the caller's write carried CQ data */
	uint32_t cookie;   /* read: the initiator's op index, echoed by "ready" */
	int32_t status;	   /* ready: 0, or the -FI_* error the target met */
	uint64_t id;
	uint64_t key;
	uint64_t addr; /* offset into the target's registration */
	uint64_t len;
	uint64_t data;
};

enum th_note_state { TH_NOTE_IDLE, TH_NOTE_RX, TH_NOTE_TX };

/* One notice buffer. Its address is the context the base sees; the
 * fi_context2 first satisfies FI_CONTEXT(2). */
struct th_note {
	struct fi_context2 ctx;
	enum th_note_state state;
	struct th_ep *ep;  /* RX: posted there; TX: goes out there; NULL: retired */
	struct th_op *op;  /* TX: the caller's operation it belongs to, or NULL */
	fi_addr_t dest;	   /* TX */
	struct th_notice msg;
	struct th_note *next; /* free or deferred list */
};

/* The two halves of a write at its target, by the initiator's id. */
struct th_pair {
	uint64_t id;
	int have_write, have_note;
	struct th_notice n;
	struct th_pair *next;
};

struct th_rma_dom {
	pthread_mutex_t lock; /* everything below */
	struct th_note *notes; /* TH_NOTES */
	struct th_note *free_notes;
	struct th_note *deferred, *deferred_tail; /* TX notes waiting for room */
	struct th_op *deferred_reads;		  /* ready, read not yet posted */
	struct th_pair *pairs[TH_PAIR_BUCKETS];
	uint32_t nonce;
	uint32_t next_seq;
	unsigned long landed, refreshed;
};

/* ---- notes ---- */

static struct th_note *th_note_get(struct th_rma_dom *rd)
{
	struct th_note *n;

	pthread_mutex_lock(&rd->lock);
	n = rd->free_notes;
	if (n)
		rd->free_notes = n->next;
	pthread_mutex_unlock(&rd->lock);
	if (n) {
		memset(n, 0, sizeof(*n));
		n->state = TH_NOTE_TX;
	}
	return n;
}

static void th_note_put(struct th_rma_dom *rd, struct th_note *n)
{
	pthread_mutex_lock(&rd->lock);
	n->state = TH_NOTE_IDLE;
	n->next = rd->free_notes;
	rd->free_notes = n;
	pthread_mutex_unlock(&rd->lock);
}

/* Is ctx one of our notes? Only addresses are compared (contexts are opaque). */
static struct th_note *th_note_from_ctx(struct th_rma_dom *rd, void *ctx)
{
	uintptr_t p = (uintptr_t)ctx, s = (uintptr_t)rd->notes;

	if (p < s || p >= s + TH_NOTES * sizeof(struct th_note) ||
	    (p - s) % sizeof(struct th_note))
		return NULL;
	return &rd->notes[(p - s) / sizeof(struct th_note)];
}

static ssize_t th_note_post_rx(struct th_note *n)
{
	struct iovec iov = { &n->msg, sizeof(n->msg) };
	struct fi_msg_tagged m = { &iov, NULL, 1, FI_ADDR_UNSPEC, TH_NOTICE_TAG, 0, n, 0 };

	n->state = TH_NOTE_RX;
	return fi_trecvmsg(n->ep->base, &m, FI_COMPLETION);
}

static ssize_t th_note_post_tx(struct th_note *n)
{
	struct iovec iov = { &n->msg, sizeof(n->msg) };
	struct fi_msg_tagged m = { &iov, NULL, 1, n->dest, TH_NOTICE_TAG, 0, n, 0 };

	return fi_tsendmsg(n->ep->base, &m, FI_COMPLETION);
}

static void th_defer_note(struct th_rma_dom *rd, struct th_note *n)
{
	pthread_mutex_lock(&rd->lock);
	n->next = NULL;
	if (rd->deferred_tail)
		rd->deferred_tail->next = n;
	else
		rd->deferred = n;
	rd->deferred_tail = n;
	pthread_mutex_unlock(&rd->lock);
}

/* Sends a TX note now, or later when the base has no room. Returns 0 or the
 * base's error (the note is then the caller's). */
static ssize_t th_note_send(struct th_rma_dom *rd, struct th_note *n)
{
	ssize_t ret = th_note_post_tx(n);

	if (ret == -FI_EAGAIN) {
		th_defer_note(rd, n);
		return 0;
	}
	return ret;
}

/* ---- domain ---- */

int th_rma_domain_init(struct th_domain *dom)
{
	struct th_rma_dom *rd = calloc(1, sizeof(*rd));
	size_t i;

	if (!rd)
		return -FI_ENOMEM;
	rd->notes = calloc(TH_NOTES, sizeof(*rd->notes));
	if (!rd->notes) {
		free(rd);
		return -FI_ENOMEM;
	}
	if (dom->base_mr_mode & FI_MR_LOCAL) {
		/* the notices' buffers would need a registration of their own */
		th_log("error rma-mr-local dom=%u", dom->id);
		free(rd->notes);
		free(rd);
		return -FI_EOPNOTSUPP;
	}
	for (i = TH_NOTES; i-- > 0;) {
		rd->notes[i].next = rd->free_notes;
		rd->free_notes = &rd->notes[i];
	}
	if (getrandom(&rd->nonce, sizeof(rd->nonce), 0) != sizeof(rd->nonce))
		rd->nonce = (uint32_t)getpid() ^ (uint32_t)time(NULL) ^ (uint32_t)(uintptr_t)rd;
	pthread_mutex_init(&rd->lock, NULL);
	dom->rma = rd;
	return 0;
}

void th_rma_domain_fini(struct th_domain *dom)
{
	struct th_rma_dom *rd = dom->rma;
	size_t i;

	if (!rd)
		return;
	th_log("rma landed=%lu refreshed=%lu dom=%u pid=%d", rd->landed, rd->refreshed, dom->id,
	       (int)getpid());
	for (i = 0; i < TH_PAIR_BUCKETS; i++) {
		while (rd->pairs[i]) {
			struct th_pair *p = rd->pairs[i];

			rd->pairs[i] = p->next;
			free(p);
		}
	}
	pthread_mutex_destroy(&rd->lock);
	free(rd->notes);
	free(rd);
	dom->rma = NULL;
}

void *th_rma_shadow_alloc(struct th_domain *dom, size_t len, int *err)
{
	void *p = NULL;

	if (dom->base_mr_mode & FI_MR_VIRT_ADDR) {
		th_log("error rma-virt-addr len=%zu dom=%u", len, dom->id);
		*err = -FI_EOPNOTSUPP;
		return NULL;
	}
	if (posix_memalign(&p, 4096, len ? len : 1)) {
		*err = -FI_ENOMEM;
		return NULL;
	}
	memset(p, 0, len ? len : 1);
	return p;
}

/* ---- endpoints ---- */

void th_rma_ep_enable(struct th_ep *ep)
{
	struct th_rma_dom *rd = ep->domain->rma;
	int i;

	if (!rd || !ep->rx_cq)
		return;
	for (i = 0; i < TH_NOTES_PER_EP; i++) {
		struct th_note *n = th_note_get(rd);
		ssize_t ret;

		if (!n) {
			th_log("error rma-notes-exhausted dom=%u", ep->domain->id);
			break;
		}
		n->ep = ep;
		ret = th_note_post_rx(n);
		if (ret) {
			th_log("error rma-note-recv ret=%zd dom=%u", ret, ep->domain->id);
			th_note_put(rd, n);
			break;
		}
		ep->notes_posted++;
	}
}

void th_rma_ep_close(struct th_ep *ep)
{
	struct th_rma_dom *rd = ep->domain->rma;
	struct th_note **pn, *n;
	struct th_op **po;
	size_t i;

	if (!rd)
		return;
	pthread_mutex_lock(&rd->lock);
	for (pn = &rd->deferred; (n = *pn);) {
		if (n->ep == ep) {
			*pn = n->next;
			n->state = TH_NOTE_IDLE;
			n->next = rd->free_notes;
			rd->free_notes = n;
		} else {
			pn = &n->next;
		}
	}
	rd->deferred_tail = NULL;
	for (n = rd->deferred; n; n = n->next)
		rd->deferred_tail = n;
	for (po = &rd->deferred_reads; *po;) {
		if ((*po)->ep == ep)
			*po = (*po)->next_defer;
		else
			po = &(*po)->next_defer;
	}
	/* posted receives (and completions not yet read) name ep: they are
	 * retired, and freed if a completion of theirs is ever read */
	for (i = 0; i < TH_NOTES; i++)
		if (rd->notes[i].state != TH_NOTE_IDLE && rd->notes[i].ep == ep)
			rd->notes[i].ep = NULL;
	pthread_mutex_unlock(&rd->lock);
}

/* ---- posting ---- */

static uint64_t th_rma_next_id(struct th_rma_dom *rd)
{
	uint32_t seq;

	pthread_mutex_lock(&rd->lock);
	seq = ++rd->next_seq;
	pthread_mutex_unlock(&rd->lock);
	return (uint64_t)rd->nonce << 32 | seq;
}

static ssize_t th_rma_post_read(struct th_op *op)
{
	struct iovec biov = { op->bounce->buf, op->len };
	struct fi_msg_rma m = { &biov, &op->bounce->desc, 1, op->dest, &op->remote, 1, op, 0 };

	return fi_readmsg(op->ep->base, &m, op->base_flags);
}

ssize_t th_rma_post(struct th_ep *ep, struct th_op *op, int is_read, fi_addr_t dest,
		    const struct fi_rma_iov *riov, uint64_t data, int has_data, uint64_t flags)
{
	struct th_domain *dom = ep->domain;
	struct th_rma_dom *rd = dom->rma;
	struct th_note *n;
	ssize_t ret;

	n = th_note_get(rd);
	if (!n)
		return -FI_EAGAIN;
	op->id = th_rma_next_id(rd);
	op->ep = ep;
	op->dest = dest;
	op->remote = *riov;
	/* what the caller's flags may say of the base operation; a completion
	 * always, since the last part finishes the op */
	op->base_flags = (flags & (FI_DELIVERY_COMPLETE | FI_TRANSMIT_COMPLETE | FI_FENCE)) |
			 FI_COMPLETION;
	atomic_store(&op->parts, 2);
	n->ep = ep;
	n->op = op;
	n->dest = dest;
	n->msg.magic = TH_NOTE_MAGIC;
	n->msg.id = op->id;
	n->msg.key = riov->key;
	n->msg.addr = riov->addr;
	n->msg.len = op->len;
	if (is_read) {
		n->msg.kind = TH_NOTE_READREQ;
		n->msg.cookie = th_op_index(dom, op);
		ret = th_note_post_tx(n);
		if (ret)
			th_note_put(rd, n);
		return ret;
	}
	struct iovec biov = { op->bounce->buf, op->len };
	struct fi_msg_rma m = { &biov, &op->bounce->desc, 1, dest, &op->remote, 1, op, op->id };

	n->msg.kind = TH_NOTE_WRITE;
	n->msg.has_data = !!has_data;
	n->msg.data = data;
	ret = fi_writemsg(ep->base, &m, op->base_flags | FI_REMOTE_CQ_DATA);
	if (ret) {
		th_note_put(rd, n);
		return ret;
	}
	ret = th_note_send(rd, n);
	if (ret) {
		/* the write is out, its notice is not: the target never lands it */
		struct fi_cq_err_entry e;

		th_log("error rma-notice-send ret=%zd dom=%u", ret, dom->id);
		th_note_put(rd, n);
		memset(&e, 0, sizeof(e));
		e.op_context = op->user_ctx;
		e.flags = FI_RMA | FI_WRITE;
		e.err = (int)-ret;
		op->reported = 1;
		if (ep->tx_cq)
			th_cq_push_err(ep->tx_cq, &e, "testhmem: the write's notice could not be sent");
		atomic_fetch_sub(&op->parts, 1);
	}
	return 0;
}

void th_rma_progress(struct th_domain *dom)
{
	struct th_rma_dom *rd = dom->rma;
	struct th_note *notes, *n, *again = NULL, **tail = &again;
	struct th_op *reads, *op;

	if (!rd || (!rd->deferred && !rd->deferred_reads))
		return;
	pthread_mutex_lock(&rd->lock);
	notes = rd->deferred;
	rd->deferred = rd->deferred_tail = NULL;
	reads = rd->deferred_reads;
	rd->deferred_reads = NULL;
	pthread_mutex_unlock(&rd->lock);
	while ((n = notes)) {
		notes = n->next;
		if (th_note_post_tx(n) == -FI_EAGAIN) {
			n->next = NULL;
			*tail = n;
			tail = &n->next;
		}
	}
	while ((op = reads)) {
		reads = op->next_defer;
		if (th_rma_post_read(op) == -FI_EAGAIN) {
			pthread_mutex_lock(&rd->lock);
			op->next_defer = rd->deferred_reads;
			rd->deferred_reads = op;
			pthread_mutex_unlock(&rd->lock);
		}
	}
	while ((n = again)) {
		again = n->next;
		th_defer_note(rd, n);
	}
}

/* ---- the target: moving bytes between shadow and device ---- */

/* Copies [off, off+len) between the shadowed MR with this key and its device
 * memory (to_dev: shadow -> device). Returns 0 (also when no shadowed MR has
 * the key: host memory, which the base reached itself), or -FI_EIO /
 * -FI_EINVAL (logged). */
static int th_rma_move(struct th_domain *dom, uint64_t key, uint64_t off, uint64_t len,
		       int to_dev, struct th_copy_err *cerr)
{
	struct th_mr *mr;
	int ret = 0;
	size_t i;

	pthread_mutex_lock(&dom->lock);
	for (mr = dom->cuda_mrs; mr; mr = mr->next_cuda) {
		if (!mr->shadow || mr->mr_fid.key != key)
			continue;
		if (off > mr->len || len > mr->len - off) {
			th_log("error rma-range key=0x%" PRIx64 " off=%" PRIu64 " len=%" PRIu64
			       " mr_len=%zu dom=%u",
			       key, off, len, mr->len, dom->id);
			ret = -FI_EINVAL;
			break;
		}
		/* the shadow is the MR's pieces end to end */
		uint64_t start = 0;

		for (i = 0; i < mr->iov_count && len && !ret; i++) {
			uint64_t plen = mr->iov[i].iov_len;

			if (off < start + plen) {
				uint64_t in = off - start, n = plen - in < len ? plen - in : len;
				char *dev = (char *)mr->iov[i].iov_base + in;
				char *sh = (char *)mr->shadow + off;

				ret = to_dev ? th_cuda_copy(dom, mr->cuda_dev, dev, sh, n, 1,
							    "remote-write", 0, cerr)
					     : th_cuda_copy(dom, mr->cuda_dev, sh, dev, n, 0,
							    "remote-read", 0, cerr);
				off += n;
				len -= n;
			}
			start += plen;
		}
		break;
	}
	pthread_mutex_unlock(&dom->lock);
	return ret;
}

/* Both halves of a write are in: the bytes go to the device, then the caller
 * hears of it (with CQ data). */
static int th_rma_land(struct th_cq *cq, const struct th_notice *m,
		       struct fi_cq_tagged_entry *out)
{
	struct th_domain *dom = cq->domain;
	struct th_copy_err cerr;

	memset(&cerr, 0, sizeof(cerr));
	if (th_rma_move(dom, m->key, m->addr, m->len, 1, &cerr)) {
		struct fi_cq_err_entry e;

		memset(&e, 0, sizeof(e));
		e.flags = FI_RMA | FI_REMOTE_WRITE | (m->has_data ? FI_REMOTE_CQ_DATA : 0);
		e.len = m->len;
		e.data = m->data;
		e.err = FI_EIO;
		e.prov_errno = cerr.result;
		th_cq_push_err(cq, &e, cerr.text[0] ? cerr.text : "testhmem: a remote write "
								    "missed its registration");
		return 1;
	}
	pthread_mutex_lock(&dom->rma->lock);
	dom->rma->landed++;
	pthread_mutex_unlock(&dom->rma->lock);
	if (!m->has_data)
		return 1;
	memset(out, 0, sizeof(*out));
	out->flags = FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA;
	out->len = m->len;
	out->data = m->data;
	return 2;
}

/* One half of a write arrived (m: the notice, or NULL for the write's own
 * completion). */
static int th_rma_pair(struct th_cq *cq, uint64_t id, const struct th_notice *m,
		       struct fi_cq_tagged_entry *out)
{
	struct th_rma_dom *rd = cq->domain->rma;
	struct th_pair **pp, *p;
	struct th_notice n;

	pthread_mutex_lock(&rd->lock);
	for (pp = &rd->pairs[id % TH_PAIR_BUCKETS]; (p = *pp); pp = &p->next)
		if (p->id == id)
			break;
	if (p && (m ? !p->have_note : !p->have_write)) {
		*pp = p->next;
		if (m)
			p->n = *m;
		n = p->n;
		pthread_mutex_unlock(&rd->lock);
		free(p);
		return th_rma_land(cq, &n, out);
	}
	if (p) {
		pthread_mutex_unlock(&rd->lock);
		th_log("error rma-duplicate id=0x%" PRIx64 " dom=%u", id, cq->domain->id);
		return 1;
	}
	p = calloc(1, sizeof(*p));
	if (!p) {
		pthread_mutex_unlock(&rd->lock);
		th_log("error rma-pair reason=ENOMEM dom=%u", cq->domain->id);
		return 1;
	}
	p->id = id;
	p->have_note = m != NULL;
	p->have_write = m == NULL;
	if (m)
		p->n = *m;
	p->next = rd->pairs[id % TH_PAIR_BUCKETS];
	rd->pairs[id % TH_PAIR_BUCKETS] = p;
	pthread_mutex_unlock(&rd->lock);
	return 1;
}

/* A read request: the range goes from the device to the shadow, then "ready"
 * goes back to where the request came from. */
static void th_rma_refresh(struct th_domain *dom, struct th_ep *ep, const struct th_notice *m,
			   fi_addr_t src)
{
	struct th_rma_dom *rd = dom->rma;
	struct th_note *r;
	int status;

	status = th_rma_move(dom, m->key, m->addr, m->len, 0, NULL);
	if (!status) {
		pthread_mutex_lock(&rd->lock);
		rd->refreshed++;
		pthread_mutex_unlock(&rd->lock);
	}
	if (src == FI_ADDR_NOTAVAIL || !ep) {
		th_log("error rma-read-no-source id=0x%" PRIx64 " dom=%u", m->id, dom->id);
		return;
	}
	r = th_note_get(rd);
	if (!r) {
		th_log("error rma-notes-exhausted dom=%u", dom->id);
		return;
	}
	r->ep = ep;
	r->dest = src;
	r->msg.magic = TH_NOTE_MAGIC;
	r->msg.kind = TH_NOTE_READY;
	r->msg.id = m->id;
	r->msg.cookie = m->cookie;
	r->msg.status = status;
	if (th_note_send(rd, r)) {
		th_log("error rma-ready-send dom=%u", dom->id);
		th_note_put(rd, r);
	}
}

/* ---- completions ---- */

/* The caller's completion of a finished op, or none. */
static int th_rma_op_done(struct th_cq *cq, struct th_op *op, struct fi_cq_tagged_entry *out)
{
	struct th_domain *dom = cq->domain;
	int is_read = op->kind == TH_OP_READ, want = op->want_comp && !op->reported;
	void *ctx = op->user_ctx;
	size_t len = op->len;
	struct th_copy_err cerr;

	if (th_op_finish(dom, op, len, is_read, &cerr)) {
		struct fi_cq_err_entry e;

		memset(&e, 0, sizeof(e));
		e.op_context = ctx;
		e.flags = FI_RMA | FI_READ;
		e.err = FI_EIO;
		e.prov_errno = cerr.result;
		th_cq_push_err(cq, &e, cerr.text);
		return 1;
	}
	if (!want)
		return 1;
	memset(out, 0, sizeof(*out));
	out->op_context = ctx;
	out->flags = FI_RMA | (is_read ? FI_READ : FI_WRITE);
	return 2;
}

/* One base operation of op is done. */
static int th_rma_part(struct th_cq *cq, struct th_op *op, struct fi_cq_tagged_entry *out)
{
	if (atomic_fetch_sub(&op->parts, 1) > 1)
		return 1;
	return th_rma_op_done(cq, op, out);
}

static int th_rma_rx(struct th_cq *cq, struct th_note *n, const struct fi_cq_tagged_entry *e,
		     fi_addr_t src, struct fi_cq_tagged_entry *out)
{
	struct th_domain *dom = cq->domain;
	struct th_rma_dom *rd = dom->rma;
	struct th_notice m = n->msg;
	struct th_ep *ep = n->ep;
	struct th_op *op;

	/* the receive goes back at once: notices keep coming */
	if (ep && th_note_post_rx(n)) {
		th_log("error rma-note-recv dom=%u", dom->id);
		th_note_put(rd, n);
	} else if (!ep) {
		th_note_put(rd, n);
	}
	if (e->len != sizeof(m) || m.magic != TH_NOTE_MAGIC) {
		th_log("error rma-bad-notice len=%zu dom=%u", e->len, dom->id);
		return 1;
	}
	switch (m.kind) {
	case TH_NOTE_WRITE:
		return th_rma_pair(cq, m.id, &m, out);
	case TH_NOTE_READREQ:
		th_rma_refresh(dom, ep, &m, src);
		return 1;
	case TH_NOTE_READY:
		op = th_op_at(dom, m.cookie);
		if (!op || op->kind != TH_OP_READ || op->id != m.id) {
			th_log("error rma-stale-ready id=0x%" PRIx64 " dom=%u", m.id, dom->id);
			return 1;
		}
		if (m.status) {
			struct fi_cq_err_entry err;

			memset(&err, 0, sizeof(err));
			err.op_context = op->user_ctx;
			err.flags = FI_RMA | FI_READ;
			err.err = -m.status;
			if (!op->reported && op->ep->tx_cq)
				th_cq_push_err(op->ep->tx_cq, &err,
					       "testhmem: the target could not read its device memory");
			op->reported = 1;
			return th_rma_part(cq, op, out);
		}
		if (th_rma_post_read(op) == -FI_EAGAIN) {
			pthread_mutex_lock(&rd->lock);
			op->next_defer = rd->deferred_reads;
			rd->deferred_reads = op;
			pthread_mutex_unlock(&rd->lock);
		}
		return 1;
	default:
		th_log("error rma-bad-notice kind=%u dom=%u", m.kind, dom->id);
		return 1;
	}
}

int th_rma_comp(struct th_cq *cq, const struct fi_cq_tagged_entry *e, fi_addr_t src,
		struct fi_cq_tagged_entry *out)
{
	struct th_domain *dom = cq->domain;
	struct th_rma_dom *rd = dom->rma;
	struct th_note *n;
	struct th_op *op;

	if (!rd)
		return 0;
	n = th_note_from_ctx(rd, e->op_context);
	if (n) {
		if (n->state == TH_NOTE_IDLE)
			return 1;
		if (n->state == TH_NOTE_RX)
			return th_rma_rx(cq, n, e, src, out);
		op = n->op;
		th_note_put(rd, n);
		return op ? th_rma_part(cq, op, out) : 1;
	}
	op = th_op_from_ctx(dom, e->op_context);
	if (op)
		return op->kind == TH_OP_WRITE || op->kind == TH_OP_READ ? th_rma_part(cq, op, out)
									 : 0;
	/* every remote write carries an id of ours (some providers flag it
	 * FI_RMA|FI_REMOTE_CQ_DATA only) */
	if (!e->op_context && (e->flags & (FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA)))
		return th_rma_pair(cq, e->data, NULL, out);
	return 0;
}

int th_rma_comp_err(struct th_cq *cq, struct fi_cq_err_entry *e)
{
	struct th_domain *dom = cq->domain;
	struct th_rma_dom *rd = dom->rma;
	struct th_note *n;
	struct th_op *op;
	int is_read;

	if (!rd)
		return 0;
	n = th_note_from_ctx(rd, e->op_context);
	op = n ? n->op : th_op_from_ctx(dom, e->op_context);
	if (n) {
		if (n->state == TH_NOTE_IDLE)
			return 1;
		if (n->state == TH_NOTE_RX) {
			/* cancelled at close, or something not a notice: the
			 * receive is gone either way */
			if (n->ep)
				th_log("error rma-note-recv err=%d dom=%u", e->err, dom->id);
			th_note_put(rd, n);
			return 1;
		}
		th_note_put(rd, n);
		if (!op)
			return 1;
	} else if (!op || (op->kind != TH_OP_WRITE && op->kind != TH_OP_READ)) {
		return 0;
	}
	/* a part of the caller's RMA failed: the caller hears it once */
	is_read = op->kind == TH_OP_READ;
	if (op->reported) {
		if (atomic_fetch_sub(&op->parts, 1) == 1)
			th_op_finish(dom, op, 0, 0, NULL);
		return 1;
	}
	op->reported = 1;
	e->op_context = op->user_ctx;
	e->flags = FI_RMA | (is_read ? FI_READ : FI_WRITE);
	e->buf = NULL;
	e->len = 0;
	if (atomic_fetch_sub(&op->parts, 1) == 1)
		th_op_finish(dom, op, 0, 0, NULL);
	return 2;
}
