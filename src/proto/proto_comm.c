/*
 * proto_comm.c - a comm's life: creation, each kind's cleanup and its
 * release, cancelling its operations, the request pools, and the post/undo
 * helpers every operation of a comm goes through; the device table, each
 * device's domain (opened at first use) and the connection counts. Its close
 * is proto_close.c's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
	pthread_mutex_destroy(&s->post_lock);
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
	c->spread = false;
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

static void op_will_post(struct proto_comm *c, struct ofi_op *op, struct ofi_ep *ep)
{
	op->ep = ep;
	atomic_store(&op->posted, 1);
	atomic_fetch_add(&c->pending, 1);
}

static void op_not_posted(struct proto_comm *c, struct ofi_op *op)
{
	atomic_store(&op->posted, 0);
	atomic_fetch_sub(&c->pending, 1);
}

void proto_op_post_begin(struct proto_comm *c, struct ofi_op *op, struct ofi_ep *ep,
			 struct ofi_mr *hold, bool bulk)
{
	op_will_post(c, op, ep);
	ofi_op_hold(op, hold);
	if (bulk)
		ofi_ep_bulk_begin(op);
}

ssize_t proto_op_post_end(struct proto_comm *c, struct ofi_op *op, ssize_t rc)
{
	if (rc) {
		ofi_ep_bulk_end(op);
		ofi_op_release(op);
		op_not_posted(c, op);
	}
	return rc;
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

/* ---------------- cancel ---------------- */

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

/* ---------------- devices and accounting ---------------- */

void proto_device_init(struct proto_device *dev, int index, const struct policy_dev_choice *choice,
		       const struct fi_info *info, const char *provider, const char *procs_dir,
		       const struct policy_device_plan *plan, const struct policy_device_why *why)
{
	dev->index = index;
	dev->choice = *choice;
	dev->info = info;
	dev->provider = provider;
	util_strlcpy(dev->procs_dir, procs_dir, sizeof(dev->procs_dir));
	dev->plan = *plan;
	dev->why = why;
	proto_tag_layout_init(&dev->layout, plan->tag_bits);
	dev->prov_hash = proto_prov_hash(provider, info->addr_format, dev->layout.bits);
	pthread_mutex_init(&dev->open_lock, NULL);
	pthread_mutex_init(&dev->due_lock, NULL);
	dlist_init(&dev->due_sends);
	atomic_init(&dev->ndue, 0);
}

/* Opens the device's domain on first use and starts what every endpoint
 * needs (proto_ep_start). Everything it reads was fixed in the device at
 * init: no global lookup. */
int proto_device_open(struct proto_device *dev, struct ofi_domain **out)
{
	int rc = 0;
	pthread_mutex_lock(&dev->open_lock);
	const char *rails_why = dev->why->rails;
	struct policy_rails_choice rails;
	if (!dev->dom && dev->plan.rails_in.cfg_rails == 0) {
		/* auto: counted again now, when a job's ranks have all started (NCCL
		 * opens a device once its bootstrap is done) */
		dev->plan.rails_in.nprocs = util_procs_count(dev->procs_dir);
		policy_rails(&dev->plan.rails_in, &rails);
		dev->plan.nrails = rails.rails;
		dev->plan.progress_threads = rails.threads;
		rails_why = rails.reason;
	}
	if (!dev->dom) {
		struct ofi_domain_attr attr = {
			.info = dev->info,
			.hmem = dev->plan.hmem,
			.flush_rma = dev->plan.flush_rma,
			.expected_cuda_rc = dev->plan.expected_cuda_rc,
			.nep = dev->plan.nrails,
			.progress_threads = dev->plan.progress_threads,
			.rma_write = dev->plan.rma,
			.buf_size = dev->plan.eager_max,
			.cq_batch = dev->plan.cq_batch,
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
			if (dev->dom->rma_write && dev->dom->nep > 1 && dev->plan.stripe_min)
				snprintf(how, sizeof(how), "%s, cut over the rails from %zu bytes",
					 dev->why->data, dev->plan.stripe_min);
			else
				snprintf(how, sizeof(how), "%s", dev->why->data);
			LOG_INFO(NCCL_NET | NCCL_INIT,
				 "device %d (%s) opened: provider %s, fabric %s; rails %s%s%s; eager up to "
				 "%s; early sends: %s; larger messages: %s",
				 dev->index, dev->props.name, dev->provider,
				 dev->info->fabric_attr->name, rails_why,
				 dev->dom->split ? ", each rail its own domain" :
				 dev->dom->nep > 1 ? ", rails share one domain (registrations need it)" : "",
				 dev->dom->nep < 2 ? "" : dev->plan.spread ?
				 "; a connection's messages take the rails in turn (NCCL_FABRIC_SPREAD)" :
				 "; a connection's messages take its home rail (NCCL_FABRIC_SPREAD=0)",
				 dev->why->eager, dev->why->early, how);
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

int proto_devices(struct proto_device **devs)
{
	*devs = __atomic_load_n(&devices, __ATOMIC_ACQUIRE);
	return *devs ? __atomic_load_n(&ndevices, __ATOMIC_ACQUIRE) : 0;
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
	return proto_comm_progress_rails(c, (1u << c->nrails) - 1);
}

int proto_comm_progress_rails(struct proto_comm *c, unsigned rails)
{
	int total = 0;
	for (int i = 0; i < c->nrails; i++) {
		if (!(rails >> i & 1))
			continue;
		int n = ofi_ep_progress(c->rails[i]);
		if (n < 0)
			return n;
		total += n;
	}
	return total;
}
