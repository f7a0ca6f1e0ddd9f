/*
 * perf_main.c - nccl-fabric-perf: one-direction bandwidth through the plugin,
 * or (--latency) ping-pong latency.
 *
 * Two forked ranks load the plugin as NCCL does; rank 0 isends, rank 1 irecvs,
 * with W messages in flight, for about --duration seconds (or --iters
 * messages) per size. Time is taken on the receiver, from a common start
 * (barrier) to the last completion. The first and last message of each size
 * are checked against the sender's checksums, and every test() must report
 * the full size: a fast wrong answer fails loudly.
 *
 * --raw measures plain libfabric instead (perf_raw.c: fi_tsend/fi_trecv on one
 * RDM endpoint per rank, the provider the plugin chose), with the same sizes,
 * window, timing and checks; --compare runs both, interleaved size by size in
 * the same two processes, and prints the ratio plugin/raw. --raw-op write makes
 * the raw path RMA writes with CQ data into the receiver's window, each slot
 * freed again by a credit message: the operation the plugin's write path uses,
 * so plugin/raw then shows what the plugin adds to it, and a baseline exists
 * where the provider has no tags (efa-direct).
 *
 * --bidir moves messages both ways at once instead: each rank isends to the
 * other and irecvs from it on one thread, a window each way, as NCCL's
 * send/recv and alltoall do (where a clear-to-send shares the link with the
 * data going the other way); GB/s per direction, the slower rank's time.
 *
 * --stripe N adds the plugin with NCCL_FABRIC_RAILS=N: large messages cut
 * into pieces written on N rails at once. The plugin reads its settings at
 * its first init and a process holds one plugin context, so this path runs
 * in a second pair of forked ranks (2 and 3), in its turn after the other
 * paths at each size, with the same checks; it must really stripe (the
 * device's INFO line, which the harness's logger keeps, says N > 1 rails and
 * a size from which writes are cut over them), else the run fails.
 */
#include "harness.h"
#include "perf_raw.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <ctype.h>

#define PF_MAX_SIZES 32
#define PF_MAX_ROUNDS 99
#define PF_MAX_WINDOW 256
#define PF_TAG 0x5f

/* Which transfer paths run (--raw, --compare). */
#define PF_PATH_PLUGIN 0x1
#define PF_PATH_RAW 0x2
#define PF_PATH_STRIPE 0x4 /* --stripe: the plugin with NCCL_FABRIC_RAILS=N */

struct pf_opts {
	char plugin[4096];
	int version;
	int dev;
	int window;
	long iters; /* 0: time-based */
	double duration;
	size_t sizes[PF_MAX_SIZES];
	int nsizes;
	const char *csv;
	int paths;            /* PF_PATH_* */
	int latency;          /* --latency: ping-pong, window 1 */
	const char *provider; /* --provider, NULL if not given */
	int stripe;           /* --stripe N: rails of the striped path, 0 if not given */
	enum pf_raw_op raw_op; /* --raw-op */
	int rounds;            /* --rounds: plugin and raw alternate this many times per size */
	int bidir;             /* --bidir: both ranks send and receive at once (plugin only) */
};

/* Receiver -> sender, per size. */
struct pf_result {
	int64_t iters;
	double seconds;
};

/* ------------------------------------------------------------ transfer loop */

/* One transfer path between two ranks (r->rank ^ 1 is the peer, the even one
 * sends): the plugin's comm, or the raw libfabric endpoint. */
struct pf_path {
	fh_net_t *net;
	void *comm;
	pf_raw_t *raw; /* set: the raw path (net and comm unused) */
	int striped;   /* the plugin with NCCL_FABRIC_RAILS=N (--stripe) */
};

/* The two ranks of one path; fh_oob_barrier waits for every rank, and with
 * --stripe a second pair of ranks runs alongside. */
static int pf_pair_barrier(fh_rank_t *r)
{
	const char token = 'P';
	char got = 0;
	int peer = r->rank ^ 1;
	if (fh_oob_send(r, peer, &token, 1) || fh_oob_recv(r, peer, &got, 1))
		return FH_FAIL;
	if (got != token)
		return fh_fail(r, "out-of-band channel to rank %d out of step (pair barrier)", peer);
	return FH_OK;
}

struct pf_ctx {
	fh_rank_t *r;
	fh_net_t *net;
	void *comm;
	pf_raw_t *raw; /* set: the raw libfabric path */
	fh_buf_t buf; /* window slots of `size` bytes, one registration */
	size_t size;
	int window;
	void *req[PF_MAX_WINDOW];
	uint64_t sums[PF_MAX_WINDOW]; /* sender's checksum of each slot */
	/* raw path */
	void *raw_mr, *raw_desc;
	int64_t slot_msg[PF_MAX_WINDOW]; /* message in flight in each slot */
	unsigned char busy[PF_MAX_WINDOW];
	/* raw writes: the receiver's window, and which of its slots it freed */
	int raw_write;
	pf_raw_target_t target;
	unsigned char freed[PF_MAX_WINDOW];
	unsigned char credit_due[PF_MAX_WINDOW];
	int credits_due; /* how many credit_due are set */
};

static unsigned char *pf_slot(struct pf_ctx *c, int64_t i)
{
	return c->buf.ptr + (size_t)(i % c->window) * c->size;
}

static int pf_check_slot(struct pf_ctx *c, int64_t i, const char *which)
{
	unsigned char *p = pf_slot(c, i);
	int slot = (int)(i % c->window);
	if (fh_checksum(p, c->size) == c->sums[slot])
		return FH_OK;
	size_t bad = 0;
	uint64_t seed = fh_mix64((uint64_t)c->size * 977 + (uint64_t)slot);
	if (fh_pattern_check(p, c->size, seed, &bad))
		return fh_fail(c->r, "DATA CORRUPTION: %s message (#%lld) of %zu bytes: first wrong "
				     "byte at offset %zu (0x%02x, expected 0x%02x)",
			       which, (long long)i, c->size, bad, p[bad],
			       fh_pattern_byte(seed, bad));
	return fh_fail(c->r, "DATA CORRUPTION: %s message (#%lld) of %zu bytes: checksum mismatch",
		       which, (long long)i, c->size);
}

/* The transfer loops' pace, after each step: a stage line once 2 s pass
 * without progress, and a yield now and then (spin on the fast path, but let
 * the peer's process run). what names the loop ("sending", "raw: writing",
 * ...). */
struct pf_pace {
	unsigned idle;
	double last;
};

static void pf_pace_start(struct pf_pace *p)
{
	p->idle = 0;
	p->last = fh_now();
}

static void pf_pace_step(struct pf_ctx *c, struct pf_pace *p, int progress, const char *what,
			 int64_t done, int64_t n)
{
	if (progress) {
		pf_pace_start(p);
		return;
	}
	if (fh_now() - p->last > 2.0)
		fh_stage(c->r, "%s %zu bytes: %lld/%lld done, no progress for 2s", what, c->size,
			 (long long)done, (long long)n);
	if (++p->idle > 100000)
		fh_relax(&p->idle);
}

/* One pass of the plugin's transfer loop: post what the window allows (in
 * order; NULL requests are retried on the next pass), then test the oldest
 * in flight. Receivers verify message 0 on completion and leave the last one
 * for the caller. */
struct pf_loop {
	int64_t posted, done, n;
};

static int pf_plugin_step(struct pf_ctx *c, int is_send, struct pf_loop *l, int *progress)
{
	while (l->posted < l->n && l->posted - l->done < c->window) {
		void **req = &c->req[l->posted % c->window];
		unsigned char *p = pf_slot(c, l->posted);
		ncclResult_t rc;
		*req = NULL;
		if (is_send) {
			rc = fh_net_isend(c->net, c->comm, p, c->size, PF_TAG, c->buf.mh, req);
		} else {
			/* Poison the last message's slot: stale bytes must not pass. */
			if (l->posted == l->n - 1 && l->posted > 0)
				memset(p, 0xee, c->size);
			size_t sz = c->size;
			int tag = PF_TAG;
			void *data = p, *mh = c->buf.mh;
			rc = fh_net_irecv(c->net, c->comm, 1, &data, &sz, &tag, &mh, req);
			if (rc == ncclSuccess &&
			    *req == (void *)(uintptr_t)NCCL_NET_OPTIONAL_RECV_COMPLETION)
				return fh_fail(c->r, "irecv() left 0x1 in *request");
		}
		if (rc != ncclSuccess)
			return fh_fail(c->r, "%s(%zu bytes) returned %s", is_send ? "isend" : "irecv",
				       c->size, fh_result_str(rc));
		if (!*req)
			break; /* NULL: retry later */
		l->posted++;
		*progress = 1;
	}
	if (l->done < l->posted) {
		int fin = 0, sz = -1;
		ncclResult_t rc = fh_net_test(c->net, c->req[l->done % c->window], &fin, &sz);
		if (rc != ncclSuccess)
			return fh_fail(c->r, "test() returned %s", fh_result_str(rc));
		if (fin) {
			if (!is_send && (sz < 0 || (size_t)sz != c->size))
				return fh_fail(c->r, "test() reported %d bytes for a %zu-byte message",
					       sz, c->size);
			if (!is_send && l->done == 0 && pf_check_slot(c, 0, "first"))
				return FH_FAIL;
			l->done++;
			*progress = 1;
		}
	}
	return FH_OK;
}

/* Move n messages with c->window in flight. */
static int pf_run_plugin(struct pf_ctx *c, int is_send, int64_t n)
{
	struct pf_loop l = {0, 0, n};
	struct pf_pace pace;
	pf_pace_start(&pace);
	while (l.done < n) {
		int progress = 0;
		if (pf_plugin_step(c, is_send, &l, &progress))
			return FH_FAIL;
		pf_pace_step(c, &pace, progress, is_send ? "sending" : "receiving", l.done, n);
	}
	return FH_OK;
}

/* --bidir: n messages each way, tx's sends and rx's receives in turn on one
 * thread, as NCCL's proxy drives a send and a receive of one step. */
static int pf_run_bidir(struct pf_ctx *tx, struct pf_ctx *rx, int64_t n)
{
	struct pf_loop ls = {0, 0, n}, lr = {0, 0, n};
	struct pf_pace pace;
	pf_pace_start(&pace);
	while (ls.done < n || lr.done < n) {
		int progress = 0;
		if (pf_plugin_step(tx, 1, &ls, &progress) || pf_plugin_step(rx, 0, &lr, &progress))
			return FH_FAIL;
		pf_pace_step(rx, &pace, progress, "sending and receiving", ls.done + lr.done, 2 * n);
	}
	return FH_OK;
}

/* Raw path: message i goes from and to slot i % window with tag i, so a
 * message matched to the wrong receive shows up as a wrong tag (and as a wrong
 * pattern in the checked slots). Completions may come in any order: a slot is
 * reused only once its own operation has completed. */
static uint64_t pf_raw_tag(int64_t i)
{
	return (uint64_t)i & 0x3fffffffu; /* far more than ever in flight */
}

/* Raw path, one pass: posts what the window allows, into slots base +
 * (i % window) of the endpoint's operation contexts (a two-way run gives each
 * direction its own range). */
static int pf_raw_post_step(struct pf_ctx *c, int is_send, struct pf_loop *l, int base,
			    int *progress)
{
	while (l->posted < l->n) {
		int slot = (int)(l->posted % c->window);
		if (c->busy[slot])
			break;
		unsigned char *p = pf_slot(c, l->posted);
		/* Poison the last message's slot: stale bytes must not pass. */
		if (!is_send && l->posted == l->n - 1 && l->posted > 0)
			memset(p, 0xee, c->size);
		int rc = pf_raw_post(c->r, c->raw, is_send, base + slot, p, c->size, c->raw_desc,
				     pf_raw_tag(l->posted));
		if (rc < 0)
			return FH_FAIL;
		if (rc > 0)
			break; /* -FI_EAGAIN: read completions, then retry */
		c->busy[slot] = 1;
		c->slot_msg[slot] = l->posted;
		l->posted++;
		*progress = 1;
	}
	return FH_OK;
}

/* The completion d of c's slot (relative to its range). */
static int pf_raw_complete(struct pf_ctx *c, int is_send, struct pf_loop *l,
			   const pf_raw_done_t *d, int slot)
{
	if (d->kind != PF_RAW_DONE)
		return fh_fail(c->r, "raw: a write's or credit's completion in send mode");
	if (slot < 0 || slot >= c->window || !c->busy[slot])
		return fh_fail(c->r, "raw: completion for slot %d, which has nothing in flight",
			       slot);
	int64_t msg = c->slot_msg[slot];
	if (!is_send) {
		if (d->len != c->size)
			return fh_fail(c->r, "raw: message #%lld completed with %zu bytes, expected %zu",
				       (long long)msg, d->len, c->size);
		if (d->tag != pf_raw_tag(msg))
			return fh_fail(c->r, "raw: the receive for message #%lld matched tag %llu",
				       (long long)msg, (unsigned long long)d->tag);
		if (msg == 0 && pf_check_slot(c, 0, "first"))
			return FH_FAIL;
	}
	c->busy[slot] = 0;
	l->done++;
	return FH_OK;
}

static int pf_run_raw(struct pf_ctx *c, int is_send, int64_t n)
{
	struct pf_loop l = {0, 0, n};
	struct pf_pace pace;
	pf_pace_start(&pace);
	memset(c->busy, 0, sizeof(c->busy));
	while (l.done < n) {
		int progress = 0;
		if (pf_raw_post_step(c, is_send, &l, 0, &progress))
			return FH_FAIL;
		pf_raw_done_t d[16];
		int got = pf_raw_poll(c->r, c->raw, d, 16);
		if (got < 0)
			return FH_FAIL;
		for (int k = 0; k < got; k++) {
			if (pf_raw_complete(c, is_send, &l, &d[k], d[k].slot))
				return FH_FAIL;
			progress = 1;
		}
		pf_pace_step(c, &pace, progress, is_send ? "raw: sending" : "raw: receiving", l.done,
			     n);
	}
	return FH_OK;
}

/* --bidir over raw libfabric: sends in slots 0..window-1, receives in
 * window..2*window-1 of the one endpoint, both on one thread. */
static int pf_run_raw_bidir(struct pf_ctx *tx, struct pf_ctx *rx, int64_t n)
{
	struct pf_loop ls = {0, 0, n}, lr = {0, 0, n};
	struct pf_pace pace;
	pf_pace_start(&pace);
	memset(tx->busy, 0, sizeof(tx->busy));
	memset(rx->busy, 0, sizeof(rx->busy));
	while (ls.done < n || lr.done < n) {
		int progress = 0;
		if (pf_raw_post_step(tx, 1, &ls, 0, &progress) ||
		    pf_raw_post_step(rx, 0, &lr, tx->window, &progress))
			return FH_FAIL;
		pf_raw_done_t d[16];
		int got = pf_raw_poll(tx->r, tx->raw, d, 16);
		if (got < 0)
			return FH_FAIL;
		for (int k = 0; k < got; k++) {
			int rc = d[k].slot < tx->window ?
					 pf_raw_complete(tx, 1, &ls, &d[k], d[k].slot) :
					 pf_raw_complete(rx, 0, &lr, &d[k], d[k].slot - tx->window);
			if (rc)
				return FH_FAIL;
			progress = 1;
		}
		pf_pace_step(rx, &pace, progress, "raw: sending and receiving", ls.done + lr.done,
			     2 * n);
	}
	return FH_OK;
}

/* Raw writes: message i is written into the receiver's slot i % window with
 * CQ data i. The receiver's window starts free; it frees a slot again, with a
 * credit, once the message there has landed and the slot's next message is
 * one of this run's. The writer reuses a slot once its own write has completed
 * and its credit has come. The receiver checks that each write lands where a
 * message is awaited (its CQ data names it). */
static void pf_raw_announce(struct pf_ctx *c, int slot, int64_t msg, int64_t n)
{
	/* Poison the last message's slot before the writer may write it: stale
	 * bytes must not pass (the first window's, before the run's barrier:
	 * pf_prepare). */
	if (msg == n - 1 && msg >= c->window)
		memset(pf_slot(c, msg), 0xee, c->size);
	c->busy[slot] = 1;
	c->slot_msg[slot] = msg;
}

/* Before the barrier that starts a run of n messages. */
static void pf_prepare(struct pf_ctx *c, int is_send, int64_t n)
{
	if (c->raw_write && !is_send && n > 1 && n - 1 < c->window)
		memset(pf_slot(c, n - 1), 0xee, c->size);
}

static int pf_run_raw_write(struct pf_ctx *c, int is_send, int64_t n)
{
	int64_t posted = 0, done = 0;
	struct pf_pace pace;
	pf_pace_start(&pace);
	memset(c->busy, 0, sizeof(c->busy));
	memset(c->credit_due, 0, sizeof(c->credit_due));
	c->credits_due = 0;
	memset(c->freed, 1, sizeof(c->freed));
	if (!is_send)
		for (int64_t m = 0; m < n && m < c->window; m++)
			pf_raw_announce(c, (int)m, m, n);
	while (done < n) {
		int progress = 0;
		while (is_send && posted < n) {
			int slot = (int)(posted % c->window);
			if (c->busy[slot] || !c->freed[slot])
				break;
			int rc = pf_raw_write(c->r, c->raw, slot, pf_slot(c, posted), c->size,
					      c->raw_desc, &c->target, (size_t)slot * c->size,
					      (uint32_t)posted);
			if (rc < 0)
				return FH_FAIL;
			if (rc > 0)
				break;
			c->busy[slot] = 1;
			c->freed[slot] = 0;
			posted++;
			progress = 1;
		}
		for (int s = 0; c->credits_due && s < c->window; s++) {
			if (!c->credit_due[s])
				continue;
			int rc = pf_raw_credit(c->r, c->raw, s);
			if (rc < 0)
				return FH_FAIL;
			if (rc == 0) {
				c->credit_due[s] = 0;
				c->credits_due--;
			}
		}
		pf_raw_done_t d[16];
		int got = pf_raw_poll(c->r, c->raw, d, 16);
		if (got < 0)
			return FH_FAIL;
		for (int k = 0; k < got; k++) {
			int slot = d[k].slot;
			if (is_send && d[k].kind == PF_RAW_DONE && slot < c->window && c->busy[slot]) {
				c->busy[slot] = 0;
				done++;
			} else if (is_send && d[k].kind == PF_RAW_CREDIT && !c->freed[slot]) {
				c->freed[slot] = 1;
			} else if (!is_send && d[k].kind == PF_RAW_LANDED) {
				slot = (int)(d[k].data % (uint32_t)c->window);
				int64_t msg = c->slot_msg[slot];
				if (!c->busy[slot] || (uint32_t)msg != d[k].data)
					return fh_fail(c->r, "raw: a write for message #%u landed, but "
							     "slot %d awaits %s",
						       d[k].data, slot, c->busy[slot] ? "another" : "none");
				if (msg == 0 && pf_check_slot(c, 0, "first"))
					return FH_FAIL;
				c->busy[slot] = 0;
				done++;
				if (msg + c->window < n) {
					pf_raw_announce(c, slot, msg + c->window, n);
					c->credits_due += !c->credit_due[slot];
					c->credit_due[slot] = 1;
				}
			} else {
				return fh_fail(c->r, "raw: an unexpected completion (kind %d, slot %d) "
						     "on the %s",
					       (int)d[k].kind, slot, is_send ? "writer" : "target");
			}
			progress = 1;
		}
		pf_pace_step(c, &pace, progress, is_send ? "raw: writing" : "raw: awaiting writes of",
			     done, n);
	}
	return FH_OK;
}

static int pf_run(struct pf_ctx *c, int is_send, int64_t n)
{
	if (c->raw)
		return c->raw_write ? pf_run_raw_write(c, is_send, n) : pf_run_raw(c, is_send, n);
	return pf_run_plugin(c, is_send, n);
}

/* ------------------------------------------------------------ one size */

/* The sender's slots, each with its own pattern for the whole run, and their
 * checksums (pf_check_slot's seeds). */
static void pf_fill_slots(struct pf_ctx *c)
{
	for (int s = 0; s < c->window; s++) {
		unsigned char *p = c->buf.ptr + (size_t)s * c->size;
		fh_pattern_fill(p, c->size, fh_mix64((uint64_t)c->size * 977 + (uint64_t)s));
		c->sums[s] = fh_checksum(p, c->size);
	}
}

/* Calibration's next step after a warm-up batch that took t seconds: the
 * next batch (> 0), or the final count as -count (n > 0: --iters). */
static int64_t pf_next_batch(const struct pf_opts *o, int64_t n, int64_t batch, double t)
{
	double enough = o->duration < 0.8 ? o->duration / 4 : 0.2;
	if (n > 0)
		return -n;
	if (t >= enough || batch >= 1000000) {
		double want = o->duration * (double)batch / (t > 0 ? t : 1e-9);
		return -(want < (double)o->window ? o->window
			 : want > 1e7 ? 10000000 : (int64_t)want);
	}
	return batch * (t < enough / 8 ? 8 : 2);
}

static int pf_size(fh_rank_t *r, const struct pf_path *path, const struct pf_opts *o, size_t size,
		   struct pf_result *res)
{
	int is_send = !(r->rank & 1), peer = r->rank ^ 1;
	const char *label = path->raw ? "raw: " : path->striped ? "striped: " : "";
	struct pf_ctx c;
	memset(&c, 0, sizeof(c));
	c.r = r;
	c.net = path->net;
	c.comm = path->comm;
	c.raw = path->raw;
	c.raw_write = path->raw && o->raw_op == PF_RAW_WRITE;
	c.size = size;
	c.window = o->window;
	if (c.raw && size > pf_raw_max_msg_size(c.raw))
		return fh_fail(r, "raw: %zu-byte messages exceed the provider's max_msg_size (%zu)",
			       size, pf_raw_max_msg_size(c.raw));
	if (fh_buf_alloc(&c.buf, size * (size_t)o->window, 0))
		return fh_fail(r, "cannot map %zu x %d bytes", size, o->window);
	/* Every slot holds its own pattern for the whole run; the sender tells
	 * the receiver the checksums. */
	if (is_send) {
		pf_fill_slots(&c);
		if (fh_oob_send(r, peer, c.sums, sizeof(uint64_t) * (size_t)o->window))
			return FH_FAIL;
	} else if (fh_oob_recv(r, peer, c.sums, sizeof(uint64_t) * (size_t)o->window)) {
		return FH_FAIL;
	}
	ncclResult_t rc = ncclSuccess;
	if (c.raw_write) {
		/* the receiver's window, for the writer's fi_writedata */
		if (pf_raw_expose(r, c.raw, c.buf.ptr, c.buf.size, &c.raw_mr, &c.raw_desc, &c.target))
			return FH_FAIL;
		if (is_send ? fh_oob_recv(r, peer, &c.target, sizeof(c.target))
			    : fh_oob_send(r, peer, &c.target, sizeof(c.target)))
			return FH_FAIL;
	} else if (c.raw) {
		if (pf_raw_reg(r, c.raw, c.buf.ptr, c.buf.size, &c.raw_mr, &c.raw_desc))
			return FH_FAIL;
	} else {
		rc = fh_buf_reg(c.net, &c.buf, c.comm, 0);
		if (rc != ncclSuccess)
			return fh_fail(r, "regMr(%zu bytes) returned %s", c.buf.size,
				       fh_result_str(rc));
	}

	/* Warm-up doubles as calibration: batches grow until one takes long
	 * enough to time; the receiver decides and tells the sender the next
	 * batch (> 0) or the final count (as -count). */
	int64_t n = o->iters;
	int64_t batch = 2 * (int64_t)o->window;
	for (;;) {
		pf_prepare(&c, is_send, batch);
		if (pf_pair_barrier(r))
			return FH_FAIL;
		double t0 = fh_now();
		if (pf_run(&c, is_send, batch))
			return FH_FAIL;
		double t = fh_now() - t0;
		int64_t next;
		if (!is_send) {
			if (pf_check_slot(&c, batch - 1, "last warm-up"))
				return FH_FAIL;
			next = pf_next_batch(o, n, batch, t);
			if (fh_oob_send(r, peer, &next, sizeof(next)))
				return FH_FAIL;
		} else if (fh_oob_recv(r, peer, &next, sizeof(next))) {
			return FH_FAIL;
		}
		if (next < 0) {
			n = -next;
			break;
		}
		batch = next;
	}

	fh_stage(r, "%s%zu bytes x %lld", label, size, (long long)n);
	pf_prepare(&c, is_send, n);
	if (pf_pair_barrier(r))
		return FH_FAIL;
	double t0 = fh_now();
	if (pf_run(&c, is_send, n))
		return FH_FAIL;
	double secs = fh_now() - t0;
	if (!is_send) {
		if (pf_check_slot(&c, n - 1, "last"))
			return FH_FAIL;
		res->iters = n;
		res->seconds = secs;
		if (fh_oob_send(r, peer, res, sizeof(*res)))
			return FH_FAIL;
	} else if (fh_oob_recv(r, peer, res, sizeof(*res))) {
		return FH_FAIL;
	}
	if (c.raw) {
		int st = pf_raw_dereg(r, c.raw, c.raw_mr);
		fh_buf_free(&c.buf);
		return st;
	}
	rc = fh_buf_dereg(c.net, &c.buf);
	fh_buf_free(&c.buf);
	if (rc != ncclSuccess)
		return fh_fail(r, "deregMr() returned %s", fh_result_str(rc));
	return FH_OK;
}

/* ------------------------------------------------------------ both ways (--bidir) */

/* Both ranks send n messages of size to the other and receive n from it at
 * once, W in flight each way, on the plugin's two comms; every slot's pattern
 * and the first and last message each way are checked, as in pf_size. Each
 * rank times from a common start to its last completion; the result is the
 * slower rank's. */
static int pf_bidir_run(struct pf_ctx *tx, struct pf_ctx *rx, int64_t n)
{
	return tx->raw ? pf_run_raw_bidir(tx, rx, n) : pf_run_bidir(tx, rx, n);
}

static int pf_bidir_size(fh_rank_t *r, const struct pf_path *path, void *sc, void *rcomm,
			 const struct pf_opts *o, size_t size, struct pf_result *res)
{
	int peer = r->rank ^ 1;
	fh_net_t *net = path->net;
	struct pf_ctx tx, rx;
	memset(&tx, 0, sizeof(tx));
	memset(&rx, 0, sizeof(rx));
	tx.r = rx.r = r;
	tx.net = rx.net = net;
	tx.raw = rx.raw = path->raw;
	tx.comm = sc;
	rx.comm = rcomm;
	if (tx.raw && size > pf_raw_max_msg_size(tx.raw))
		return fh_fail(r, "raw: %zu-byte messages exceed the provider's max_msg_size (%zu)",
			       size, pf_raw_max_msg_size(tx.raw));
	tx.size = rx.size = size;
	tx.window = rx.window = o->window;
	if (fh_buf_alloc(&tx.buf, size * (size_t)o->window, 0) ||
	    fh_buf_alloc(&rx.buf, size * (size_t)o->window, 0))
		return fh_fail(r, "cannot map 2 x %zu x %d bytes", size, o->window);
	pf_fill_slots(&tx);
	/* the even rank speaks first: the out-of-band channel is a stream */
	size_t sums = sizeof(uint64_t) * (size_t)o->window;
	if (r->rank & 1 ? fh_oob_recv(r, peer, rx.sums, sums) || fh_oob_send(r, peer, tx.sums, sums)
		       : fh_oob_send(r, peer, tx.sums, sums) || fh_oob_recv(r, peer, rx.sums, sums))
		return FH_FAIL;
	ncclResult_t rc = ncclSuccess;
	if (tx.raw) {
		if (pf_raw_reg(r, tx.raw, tx.buf.ptr, tx.buf.size, &tx.raw_mr, &tx.raw_desc) ||
		    pf_raw_reg(r, rx.raw, rx.buf.ptr, rx.buf.size, &rx.raw_mr, &rx.raw_desc))
			return FH_FAIL;
	} else {
		rc = fh_buf_reg(net, &tx.buf, sc, 0);
		if (rc == ncclSuccess)
			rc = fh_buf_reg(net, &rx.buf, rcomm, 0);
		if (rc != ncclSuccess)
			return fh_fail(r, "regMr(%zu bytes) returned %s", tx.buf.size,
				       fh_result_str(rc));
	}

	/* calibration as in pf_size; rank 0 decides */
	int64_t n = o->iters;
	int64_t batch = 2 * (int64_t)o->window;
	for (;;) {
		if (pf_pair_barrier(r))
			return FH_FAIL;
		double t0 = fh_now();
		if (pf_bidir_run(&tx, &rx, batch))
			return FH_FAIL;
		double t = fh_now() - t0;
		if (pf_check_slot(&rx, batch - 1, "last warm-up"))
			return FH_FAIL;
		int64_t next;
		if (r->rank == 0) {
			next = pf_next_batch(o, n, batch, t);
			if (fh_oob_send(r, peer, &next, sizeof(next)))
				return FH_FAIL;
		} else if (fh_oob_recv(r, peer, &next, sizeof(next))) {
			return FH_FAIL;
		}
		if (next < 0) {
			n = -next;
			break;
		}
		batch = next;
	}

	fh_stage(r, "%sboth ways: %zu bytes x %lld", tx.raw ? "raw: " : "", size, (long long)n);
	if (pf_pair_barrier(r))
		return FH_FAIL;
	double t0 = fh_now();
	if (pf_bidir_run(&tx, &rx, n))
		return FH_FAIL;
	double secs = fh_now() - t0;
	if (pf_check_slot(&rx, n - 1, "last"))
		return FH_FAIL;
	double other = 0;
	if (r->rank & 1 ? fh_oob_recv(r, peer, &other, sizeof(other)) ||
				  fh_oob_send(r, peer, &secs, sizeof(secs))
			: fh_oob_send(r, peer, &secs, sizeof(secs)) ||
				  fh_oob_recv(r, peer, &other, sizeof(other)))
		return FH_FAIL;
	res->iters = n;
	res->seconds = secs > other ? secs : other;
	if (tx.raw) {
		int st = pf_raw_dereg(r, tx.raw, tx.raw_mr) | pf_raw_dereg(r, rx.raw, rx.raw_mr);
		fh_buf_free(&tx.buf);
		fh_buf_free(&rx.buf);
		return st ? FH_FAIL : FH_OK;
	}
	rc = fh_buf_dereg(net, &tx.buf);
	if (rc == ncclSuccess)
		rc = fh_buf_dereg(net, &rx.buf);
	fh_buf_free(&tx.buf);
	fh_buf_free(&rx.buf);
	if (rc != ncclSuccess)
		return fh_fail(r, "deregMr() returned %s", fh_result_str(rc));
	return FH_OK;
}

/* ------------------------------------------------------------ latency (ping-pong) */

/* --latency: window 1, both directions. Rank 0 sends a message and waits for
 * the reply of the same size; rank 1 waits for it and replies. The figure is
 * half the round trip, taken on rank 0 over many round trips. Both ranks'
 * receives are posted before the peer can send, as NCCL posts its receives
 * ahead, and the first and last message each way are checked byte by byte. */
struct pf_pp {
	fh_rank_t *r;
	const struct pf_path *path;
	void *scomm, *rcomm;   /* plugin: to and from the peer */
	size_t size;
	fh_buf_t sbuf, rbuf;   /* own message; the peer's lands here */
	void *raw_smr, *raw_sdesc, *raw_rmr, *raw_rdesc;
	unsigned raw_done;     /* raw: slots finished, not yet waited for */
};

static uint64_t pf_pp_seed(size_t size, int rank)
{
	return fh_mix64((uint64_t)size * 977 + 1000 + (uint64_t)rank);
}

static int pf_pp_check(struct pf_pp *pp, int64_t i)
{
	int peer = pp->r->rank == 0 ? 1 : 0;
	size_t bad = 0;
	if (!pp->size || !fh_pattern_check(pp->rbuf.ptr, pp->size, pf_pp_seed(pp->size, peer), &bad))
		return FH_OK;
	return fh_fail(pp->r, "DATA CORRUPTION: ping-pong message #%lld of %zu bytes from rank %d: "
			      "first wrong byte at offset %zu",
		       (long long)i, pp->size, peer, bad);
}

/* Plugin: waits for one request, spinning on test(). */
static int pf_pp_wait(struct pf_pp *pp, void *req, int is_recv)
{
	unsigned idle = 0;
	double start = fh_now();
	for (;;) {
		int fin = 0, sz = -1;
		ncclResult_t rc = fh_net_test(pp->path->net, req, &fin, &sz);
		if (rc != ncclSuccess)
			return fh_fail(pp->r, "test() returned %s", fh_result_str(rc));
		if (fin) {
			if (is_recv && (sz < 0 || (size_t)sz != pp->size))
				return fh_fail(pp->r, "test() reported %d bytes for a %zu-byte message",
					       sz, pp->size);
			return FH_OK;
		}
		if (fh_now() - start > 2.0) {
			fh_stage(pp->r, "ping-pong %zu bytes: a %s waits for 2s", pp->size,
				 is_recv ? "receive" : "send");
			start = fh_now();
		}
		if (++idle > 100000)
			fh_relax(&idle);
	}
}

static int pf_pp_post_plugin(struct pf_pp *pp, int is_send, void **req)
{
	*req = NULL;
	unsigned idle = 0;
	while (!*req) {
		ncclResult_t rc;
		if (is_send) {
			rc = fh_net_isend(pp->path->net, pp->scomm, pp->sbuf.ptr, pp->size, PF_TAG,
					  pp->sbuf.mh, req);
		} else {
			void *data = pp->rbuf.ptr, *mh = pp->rbuf.mh;
			size_t sz = pp->size;
			int tag = PF_TAG;
			rc = fh_net_irecv(pp->path->net, pp->rcomm, 1, &data, &sz, &tag, &mh, req);
		}
		if (rc != ncclSuccess)
			return fh_fail(pp->r, "%s(%zu bytes) returned %s", is_send ? "isend" : "irecv",
				       pp->size, fh_result_str(rc));
		if (!*req && ++idle > 100000)
			fh_relax(&idle);
	}
	return FH_OK;
}

/* Raw: slot 0 sends, slot 1 receives; pp->raw_done collects finished slots. */
static int pf_pp_raw_progress(struct pf_pp *pp)
{
	pf_raw_done_t d[4];
	int got = pf_raw_poll(pp->r, pp->path->raw, d, 4);
	if (got < 0)
		return FH_FAIL;
	for (int k = 0; k < got; k++) {
		if (d[k].slot < 0 || d[k].slot > 1)
			return fh_fail(pp->r, "raw: completion for slot %d in a ping-pong", d[k].slot);
		if (d[k].slot == 1 && d[k].len != pp->size)
			return fh_fail(pp->r, "raw: ping-pong receive of %zu bytes completed with %zu",
				       pp->size, d[k].len);
		pp->raw_done |= 1u << d[k].slot;
	}
	return got;
}

static int pf_pp_raw_wait(struct pf_pp *pp, unsigned want)
{
	unsigned idle = 0;
	while ((pp->raw_done & want) != want) {
		int got = pf_pp_raw_progress(pp);
		if (got < 0)
			return FH_FAIL;
		if (!got && ++idle > 100000)
			fh_relax(&idle);
	}
	pp->raw_done &= ~want;
	return FH_OK;
}

static int pf_pp_post_raw(struct pf_pp *pp, int is_send)
{
	for (;;) {
		int rc = is_send ? pf_raw_post(pp->r, pp->path->raw, 1, 0, pp->sbuf.ptr, pp->size,
					       pp->raw_sdesc, PF_TAG) :
				   pf_raw_post(pp->r, pp->path->raw, 0, 1, pp->rbuf.ptr, pp->size,
					       pp->raw_rdesc, PF_TAG);
		if (rc <= 0)
			return rc < 0 ? FH_FAIL : FH_OK;
		if (pf_pp_raw_progress(pp) < 0) /* -FI_EAGAIN: progress, then again */
			return FH_FAIL;
	}
}

/* n round trips. */
static int pf_pp_run(struct pf_pp *pp, int64_t n)
{
	int initiator = pp->r->rank == 0;
	for (int64_t i = 0; i < n; i++) {
		if (i == n - 1 && n > 1)
			memset(pp->rbuf.ptr, 0xee, pp->size); /* stale bytes must not pass */
		if (pp->path->raw) {
			if (pf_pp_post_raw(pp, 0))
				return FH_FAIL;
			if (initiator) {
				if (pf_pp_post_raw(pp, 1) || pf_pp_raw_wait(pp, 3))
					return FH_FAIL;
			} else if (pf_pp_raw_wait(pp, 2) || pf_pp_post_raw(pp, 1) ||
				   pf_pp_raw_wait(pp, 1)) {
				return FH_FAIL;
			}
		} else {
			void *rreq, *sreq;
			if (pf_pp_post_plugin(pp, 0, &rreq))
				return FH_FAIL;
			if (initiator) {
				if (pf_pp_post_plugin(pp, 1, &sreq) || pf_pp_wait(pp, sreq, 0) ||
				    pf_pp_wait(pp, rreq, 1))
					return FH_FAIL;
			} else if (pf_pp_wait(pp, rreq, 1) || pf_pp_post_plugin(pp, 1, &sreq) ||
				   pf_pp_wait(pp, sreq, 0)) {
				return FH_FAIL;
			}
		}
		if ((i == 0 || i == n - 1) && pf_pp_check(pp, i))
			return FH_FAIL;
	}
	return FH_OK;
}

/* One size: res->seconds is the whole run on rank 0, res->iters the round trips. */
static int pf_pp_size(fh_rank_t *r, const struct pf_path *path, void *scomm, void *rcomm,
		      const struct pf_opts *o, size_t size, struct pf_result *res)
{
	struct pf_pp pp;
	memset(&pp, 0, sizeof(pp));
	pp.r = r;
	pp.path = path;
	pp.scomm = scomm;
	pp.rcomm = rcomm;
	pp.size = size;
	if (path->raw && size > pf_raw_max_msg_size(path->raw))
		return fh_fail(r, "raw: %zu-byte messages exceed the provider's max_msg_size", size);
	size_t alloc = size ? size : 1;
	if (fh_buf_alloc(&pp.sbuf, alloc, 0) || fh_buf_alloc(&pp.rbuf, alloc, 0))
		return fh_fail(r, "cannot map 2 x %zu bytes", size);
	fh_pattern_fill(pp.sbuf.ptr, size, pf_pp_seed(size, r->rank));
	int st = FH_OK;
	if (path->raw) {
		if (pf_raw_reg(r, path->raw, pp.sbuf.ptr, alloc, &pp.raw_smr, &pp.raw_sdesc) ||
		    pf_raw_reg(r, path->raw, pp.rbuf.ptr, alloc, &pp.raw_rmr, &pp.raw_rdesc))
			return FH_FAIL;
	} else {
		ncclResult_t rc = fh_buf_reg(path->net, &pp.sbuf, scomm, 0);
		if (rc == ncclSuccess)
			rc = fh_buf_reg(path->net, &pp.rbuf, rcomm, 0);
		if (rc != ncclSuccess)
			return fh_fail(r, "regMr(%zu bytes) returned %s", alloc, fh_result_str(rc));
	}
	/* warm-up, which also times the count: rank 0 decides, rank 1 follows */
	int64_t warm = 64, n = o->iters;
	if (fh_oob_barrier(r) || pf_pp_run(&pp, warm))
		return FH_FAIL;
	if (r->rank == 0) {
		double t0 = fh_now();
		if (pf_pp_run(&pp, warm))
			return FH_FAIL;
		double per = (fh_now() - t0) / (double)warm;
		if (!n) {
			double want = o->duration / (per > 0 ? per : 1e-9);
			n = want < 100 ? 100 : want > 2e6 ? 2000000 : (int64_t)want;
		}
		if (fh_oob_send(r, 1, &n, sizeof(n)))
			return FH_FAIL;
	} else if (pf_pp_run(&pp, warm) || fh_oob_recv(r, 0, &n, sizeof(n))) {
		return FH_FAIL;
	}
	fh_stage(r, "%sping-pong %zu bytes x %lld", path->raw ? "raw: " : "", size, (long long)n);
	if (fh_oob_barrier(r))
		return FH_FAIL;
	double t0 = fh_now();
	if (pf_pp_run(&pp, n))
		return FH_FAIL;
	res->iters = n;
	res->seconds = fh_now() - t0;
	if (path->raw) {
		st = pf_raw_dereg(r, path->raw, pp.raw_smr) | pf_raw_dereg(r, path->raw, pp.raw_rmr);
	} else {
		ncclResult_t a = fh_buf_dereg(path->net, &pp.sbuf), b = fh_buf_dereg(path->net, &pp.rbuf);
		if (a != ncclSuccess || b != ncclSuccess)
			st = fh_fail(r, "deregMr() returned %s", fh_result_str(a != ncclSuccess ? a : b));
	}
	fh_buf_free(&pp.sbuf);
	fh_buf_free(&pp.rbuf);
	return st;
}

/* Half a round trip, in microseconds. */
static double pf_pp_us(const struct pf_result *res)
{
	return res->iters ? res->seconds / (double)res->iters / 2 * 1e6 : 0;
}

static double pf_gbps(size_t size, const struct pf_result *res)
{
	double bytes = (double)size * (double)res->iters;
	return res->seconds > 0 ? bytes / res->seconds / 1e9 : 0;
}

/* One CSV row. rails: what the plugin's device opened with (0: not a plugin
 * path or not known); vs_raw: this path's bandwidth over raw libfabric's for
 * the same size in the same run (0: not measured). */
static void pf_csv_row(FILE *csv, const char *path, const char *prov, const char *dev,
		       int version, size_t size, int window, const struct pf_result *res,
		       int rails, double vs_raw)
{
	char ver[16] = "", nrails[16] = "", ratio[32] = "";
	if (version > 0) /* the table version means nothing on the raw path */
		snprintf(ver, sizeof(ver), "%d", version);
	if (rails > 0)
		snprintf(nrails, sizeof(nrails), "%d", rails);
	if (vs_raw > 0)
		snprintf(ratio, sizeof(ratio), "%.4f", vs_raw);
	fprintf(csv, "%s,\"%s\",\"%s\",%s,%zu,%lld,%d,%.6f,%.4f,%s,%s\n", path, prov ? prov : "",
		dev ? dev : "", ver, size, (long long)res->iters, window, res->seconds,
		pf_gbps(size, res), nrails, ratio);
}

static FILE *pf_csv_open(fh_rank_t *r, const char *name)
{
	FILE *csv = fopen(name, "w");
	if (!csv) {
		(void)fh_fail(r, "cannot write %s: %s", name, strerror(errno));
		return NULL;
	}
	fprintf(csv, "path,provider,device,version,bytes,iterations,window,seconds,gbps,rails,"
		     "vs_raw\n");
	return csv;
}

/* What a plugin device opened with, from its INFO line "device D (NAME)
 * opened: ...; rails N (why); ...[, cut over the rails from B bytes]", which
 * the harness's logger keeps whatever NCCL_DEBUG says. */
struct pf_rails {
	int rails;          /* 0: no line seen */
	long long cut_from; /* writes of at least this many bytes are cut into pieces; 0: none */
	char text[256];     /* "rails N (why)" */
};

#define PF_OPENED " opened: "

static void pf_rails_get(struct pf_rails *out)
{
	char line[2048];
	memset(out, 0, sizeof(*out));
	if (!fh_log_kept(line, sizeof(line)))
		return;
	const char *p = strstr(line, "; rails ");
	if (p) {
		out->rails = atoi(p + 8);
		size_t len = strcspn(p + 2, ";");
		snprintf(out->text, sizeof(out->text), "%.*s", (int)len, p + 2);
	}
	const char *c = strstr(line, "cut over the rails from ");
	if (c)
		out->cut_from = atoll(c + strlen("cut over the rails from "));
}

/* The striped path's setup, from its sending rank to rank 0. */
struct pf_stripe_info {
	struct pf_rails rails;
	char provider[256];
	char device[256];
};

/* The checks the striped path must pass before it is measured: it really
 * cuts large writes over more than one rail. */
static int pf_stripe_check(fh_rank_t *r, const struct pf_opts *o, const struct pf_rails *rl)
{
	if (!rl->rails)
		return fh_fail(r, "striped path: the plugin did not log its device's rails (no "
				  "\"device ... opened\" INFO line)");
	if (rl->rails < 2 || !rl->cut_from)
		return fh_fail(r, "striped path: NCCL_FABRIC_RAILS=%d does not stripe here: %s%s",
			       o->stripe, rl->text,
			       rl->rails < 2 ? "" :
			       "; large messages are not cut over the rails (no RMA writes, or "
			       "NCCL_FABRIC_STRIPE_MIN=0)");
	return FH_OK;
}

/* Rows print on rank 0: every path measured, then ratios to raw libfabric. */
static void pf_print_columns(int plugin, int raw, int stripe)
{
	printf("%14s", "bytes");
	if (plugin)
		printf(" %12s", "plugin GB/s");
	if (raw)
		printf(" %12s", "raw GB/s");
	if (plugin && raw)
		printf(" %11s", "plugin/raw");
	if (stripe)
		printf(" %12s", "striped GB/s");
	if (stripe && raw)
		printf(" %11s", "striped/raw");
	printf("\n");
}

static void pf_print_row(size_t size, const struct pf_result *pres, const struct pf_result *rres,
			 const struct pf_result *sres, double vs)
{
	double rg = rres ? pf_gbps(size, rres) : 0;
	printf("%14zu", size);
	if (pres)
		printf(" %12.3f", pf_gbps(size, pres));
	if (rres)
		printf(" %12.3f", rg);
	if (pres && rres)
		printf(" %11.2f", vs);
	if (sres)
		printf(" %12.3f", pf_gbps(size, sres));
	if (sres && rres)
		printf(" %11.2f", rg > 0 ? pf_gbps(size, sres) / rg : 0);
	printf("\n");
}

static double pf_vs(size_t size, const struct pf_result *res, const struct pf_result *raw)
{
	double rg = raw ? pf_gbps(size, raw) : 0;
	return rg > 0 ? pf_gbps(size, res) / rg : 0;
}

static int pf_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* --rounds: the round whose bandwidth is the median of n (the lower middle
 * one for even n). */
static struct pf_result pf_median(size_t size, const struct pf_result *res, int n)
{
	double g[PF_MAX_ROUNDS];
	for (int k = 0; k < n; k++)
		g[k] = pf_gbps(size, &res[k]);
	qsort(g, (size_t)n, sizeof(g[0]), pf_cmp_double);
	for (int k = 0; k < n; k++)
		if (pf_gbps(size, &res[k]) == g[(n - 1) / 2])
			return res[k];
	return res[0];
}

/* --rounds: the median of the rounds' own ratios, each taken between runs a
 * moment apart, so a machine that changes speed for seconds moves both sides
 * of most of them alike. */
static double pf_median_vs(size_t size, const struct pf_result *res, const struct pf_result *raw,
			   int n)
{
	double v[PF_MAX_ROUNDS];
	for (int k = 0; k < n; k++)
		v[k] = pf_vs(size, &res[k], &raw[k]);
	qsort(v, (size_t)n, sizeof(v[0]), pf_cmp_double);
	return v[(n - 1) / 2];
}

/* --stripe: the plugin again with NCCL_FABRIC_RAILS=N, in its own pair of
 * processes (the plugin reads its settings at its first init, and one
 * process holds one plugin context): ranks 2 and 3 next to --compare's 0 and
 * 1 (first = 2), or 0 and 1 alone (first = 0). With the other pair, this
 * pair opens its device only once the other's is open (so the other counts
 * only its own processes for automatic rails), and measures each size when
 * rank 0 says so, between the other paths' runs, so that only one path moves
 * data at a time. */
/* Loads the plugin as NCCL does and reads device o->dev: its properties and
 * the provider it chose (NULL without the tools table). FH_OK, or FH_FAIL /
 * FH_SKIP with the reason recorded (what: a prefix naming the path). */
static int pf_plugin_open(fh_rank_t *r, const struct pf_opts *o, const char *what,
			  fh_net_t **out, fh_props_t *p, const char **prov)
{
	char err[600];
	fh_net_t *net = calloc(1, sizeof(*net));
	if (!net)
		return fh_fail(r, "out of memory");
	*out = net;
	if (fh_net_open(net, o->plugin, o->version, err, sizeof(err)))
		return fh_fail(r, "%s", err);
	fh_log_keep(PF_OPENED);
	ncclResult_t rc = fh_net_init(net);
	if (rc != ncclSuccess)
		return fh_skip(r, "%sinit() returned %s: no usable provider", what,
			       fh_result_str(rc));
	int ndev = 0;
	rc = fh_net_devices(net, &ndev);
	if (rc != ncclSuccess)
		return fh_fail(r, "%sdevices() returned %s", what, fh_result_str(rc));
	if (ndev <= o->dev)
		return fh_skip(r, "%sno device: devices() returned %d", what, ndev);
	memset(p, 0, sizeof(*p));
	rc = fh_net_get_properties(net, o->dev, p);
	if (rc != ncclSuccess)
		return fh_fail(r, "%sgetProperties() returned %s", what, fh_result_str(rc));
	const ncclFabricTools_v1_t *tools = fh_net_tools(net);
	*prov = tools && tools->provider ? tools->provider() : NULL;
	return FH_OK;
}

static int pf_stripe_rank(fh_rank_t *r, const struct pf_opts *o, int first)
{
	int is_send = !(r->rank & 1), peer = r->rank ^ 1;
	int lead = r->rank == first && first > 0; /* talks to rank 0 */
	int head = r->rank == 0;                  /* prints: --stripe alone */
	char t = 0;
	if (first && fh_oob_recv(r, r->rank - first, &t, 1))
		return FH_FAIL;
	char n[16];
	snprintf(n, sizeof(n), "%d", o->stripe);
	setenv("NCCL_FABRIC_RAILS", n, 1);
	/* pieces are RMA writes: asked for where the provider's default is tagged
	 * (unless NCCL_FABRIC_RMA says otherwise) */
	setenv("NCCL_FABRIC_RMA", "1", 0);
	fh_net_t *net = NULL;
	fh_props_t p;
	const char *prov = NULL;
	int orc = pf_plugin_open(r, o, "striped path: ", &net, &p, &prov);
	if (orc != FH_OK)
		return orc;
	ncclResult_t rc;
	struct pf_stripe_info info;
	memset(&info, 0, sizeof(info));
	snprintf(info.provider, sizeof(info.provider), "%s", prov ? prov : "");
	snprintf(info.device, sizeof(info.device), "%s", p.name ? p.name : "");

	void *sc = NULL, *rcomm = NULL;
	if (fh_link(r, net, o->dev, is_send ? peer : -1, is_send ? -1 : peer, &sc, &rcomm))
		return FH_FAIL;
	struct pf_path path = {net, is_send ? sc : rcomm, NULL, 1};
	pf_rails_get(&info.rails);
	if (pf_stripe_check(r, o, &info.rails))
		return FH_FAIL;
	if (lead && fh_oob_send(r, 0, &info, sizeof(info)))
		return FH_FAIL;

	FILE *csv = NULL;
	if (head) {
		printf("# plugin:   %s (ncclNetPlugin_v%d \"%s\")\n", o->plugin, o->version,
		       fh_net_name(net));
		printf("# provider: %s\n", prov ? prov : "(unknown: plugin exports no tools table)");
		printf("# device:   %d \"%s\", %d Mbps, maxRecvs %d\n", o->dev, info.device, p.speed,
		       p.maxRecvs);
		printf("# striped:  NCCL_FABRIC_RAILS=%d: %s; writes of %lld bytes and more cut "
		       "over the rails\n",
		       o->stripe, info.rails.text, info.rails.cut_from);
		printf("# window %d, %s; the striped plugin only\n", o->window,
		       o->iters ? "fixed iterations" : "timed");
		printf("%14s %10s %12s %10s\n", "bytes", "iters", "seconds", "GB/s");
		fflush(stdout);
		if (o->csv && !(csv = pf_csv_open(r, o->csv)))
			return FH_FAIL;
	}
	for (int i = 0; i < o->nsizes; i++) {
		size_t size = o->sizes[i];
		struct pf_result sres = {0, 0};
		if (lead && fh_oob_recv(r, 0, &t, 1)) /* rank 0: the other paths are done */
			return FH_FAIL;
		if (pf_size(r, &path, o, size, &sres))
			return FH_FAIL;
		if (lead && fh_oob_send(r, 0, &sres, sizeof(sres)))
			return FH_FAIL;
		if (!head)
			continue;
		printf("%14zu %10lld %12.6f %10.3f\n", size, (long long)sres.iters, sres.seconds,
		       pf_gbps(size, &sres));
		fflush(stdout);
		if (csv)
			pf_csv_row(csv, "striped", prov, p.name, o->version, size, o->window, &sres,
				   info.rails.rails, 0);
	}
	if (csv && fclose(csv))
		return fh_fail(r, "writing %s failed", o->csv);
	rc = sc ? fh_net_close_send(net, sc) : ncclSuccess;
	if (rc == ncclSuccess && rcomm)
		rc = fh_net_close_recv(net, rcomm);
	if (rc != ncclSuccess)
		return fh_fail(r, "striped path: close returned %s", fh_result_str(rc));
	if (fh_net_has_finalize(net)) {
		rc = fh_net_finalize(net, net->ctx);
		if (rc != ncclSuccess)
			return fh_fail(r, "striped path: finalize() returned %s", fh_result_str(rc));
		fh_net_unload(net);
	}
	free(net);
	return FH_OK;
}

static int pf_rank(fh_rank_t *r, void *arg)
{
	const struct pf_opts *o = arg;
	int use_plugin = (o->paths & PF_PATH_PLUGIN) != 0;
	int use_raw = (o->paths & PF_PATH_RAW) != 0;
	int use_stripe = (o->paths & PF_PATH_STRIPE) != 0;
	int first_stripe = use_plugin || use_raw ? 2 : 0; /* the striped pair's first rank */
	if (use_stripe && r->rank >= first_stripe)
		return pf_stripe_rank(r, o, first_stripe);
	/* --raw alone with --provider needs no plugin at all; without it, the
	 * plugin is asked which provider it would use. */
	int load_plugin = use_plugin || !o->provider;
	int peer = r->rank == 0 ? 1 : 0;
	fh_net_t *net = NULL;
	fh_props_t p;
	memset(&p, 0, sizeof(p));
	const char *prov = NULL;
	char raw_prov[256] = "", raw_domain[256] = "";
	ncclResult_t rc;

	if (load_plugin) {
		int orc = pf_plugin_open(r, o, "", &net, &p, &prov);
		if (orc != FH_OK)
			return orc;
		if (p.name)
			snprintf(raw_domain, sizeof(raw_domain), "%s", p.name);
	}
	if (use_raw) {
		/* The plugin's own answer first: the provider it measured (--raw with
		 * --provider never loads the plugin). */
		const char *want = prov ? prov : o->provider;
		if (!want)
			return fh_fail(r, "raw: the plugin does not say which provider it uses (no "
					  "ncclFabricTools_v1 table); pass --provider NAME");
		snprintf(raw_prov, sizeof(raw_prov), "%s", want);
	}

	FILE *csv = NULL;
	if (r->rank == 0) {
		if (load_plugin)
			printf("# plugin:   %s (ncclNetPlugin_v%d \"%s\")%s\n", o->plugin, o->version,
			       fh_net_name(net), use_plugin ? "" : ", asked for its provider only");
		else
			printf("# plugin:   not loaded (--raw with --provider)\n");
		if (load_plugin)
			printf("# provider: %s\n",
			       prov ? prov : "(unknown: plugin exports no tools table)");
		else
			printf("# provider: %s (--provider)\n", raw_prov);
		if (use_plugin)
			printf("# device:   %d \"%s\", %d Mbps, maxRecvs %d\n", o->dev,
			       p.name ? p.name : "", p.speed, p.maxRecvs);
		fflush(stdout);
		if (o->csv && !(csv = pf_csv_open(r, o->csv)))
			return FH_FAIL;
	}
	if (load_plugin && !use_plugin && fh_net_has_finalize(net)) {
		/* --raw: the plugin only named the provider; let it go before measuring. */
		rc = fh_net_finalize(net, net->ctx);
		if (rc != ncclSuccess)
			return fh_fail(r, "finalize() returned %s", fh_result_str(rc));
		fh_net_unload(net);
		free(net);
		net = NULL;
		prov = NULL; /* pointed into the plugin */
		memset(&p, 0, sizeof(p));
	}

	void *sc = NULL, *rcomm = NULL;
	struct pf_path plugin_path = {net, NULL, NULL, 0};
	struct pf_path raw_path = {NULL, NULL, NULL, 0};
	struct pf_rails prails;
	memset(&prails, 0, sizeof(prails));
	if (use_plugin) {
		/* ping-pong needs both directions, bandwidth one */
		int send_to = o->latency || o->bidir || r->rank == 0 ? peer : -1;
		int recv_from = o->latency || o->bidir || r->rank == 1 ? peer : -1;
		if (fh_link(r, net, o->dev, send_to, recv_from, &sc, &rcomm))
			return FH_FAIL;
		plugin_path.comm = r->rank == 0 ? sc : rcomm;
		pf_rails_get(&prails);
	}
	if (use_raw) {
		fh_stage(r, "raw: opening provider %s", raw_prov);
		/* A provider named with --raw --provider may just not be here (skip);
		 * one the plugin runs on must open (fail). */
		int st = pf_raw_open(r, peer, raw_prov, raw_domain[0] ? raw_domain : NULL,
				     !load_plugin, o->raw_op, o->window, &raw_path.raw);
		if (st) {
			(void)pf_raw_close(r, raw_path.raw);
			return st;
		}
		if (pf_pair_barrier(r))
			return FH_FAIL;
	}
	/* The striped pair starts now that this pair's device is open; rank 0
	 * hears how it opened. */
	struct pf_stripe_info sinfo;
	memset(&sinfo, 0, sizeof(sinfo));
	const char go = 'G';
	if (use_stripe && fh_oob_send(r, r->rank + first_stripe, &go, 1))
		return FH_FAIL;
	if (use_stripe && r->rank == 0 && fh_oob_recv(r, first_stripe, &sinfo, sizeof(sinfo)))
		return FH_FAIL;

	if (r->rank == 0) {
		if (use_raw) {
			char line[1024];
			pf_raw_describe(raw_path.raw, line, sizeof(line));
			printf("# raw:      %s\n", line);
		}
		if (use_plugin && prails.rails)
			printf("# rails:    %s%s\n", prails.text,
			       prails.rails > 1 && prails.cut_from ?
			       ", large writes cut over them" : "");
		if (use_stripe)
			printf("# striped:  the plugin with NCCL_FABRIC_RAILS=%d (ranks %d, %d): %s; "
			       "writes of %lld bytes and more cut over the rails\n",
			       o->stripe, first_stripe, first_stripe + 1, sinfo.rails.text,
			       sinfo.rails.cut_from);
		const char *alt = use_plugin && use_raw && use_stripe ?
				  "; plugin, raw libfabric and striped plugin alternate, size by size" :
				  use_plugin && use_raw ?
				  "; plugin and raw libfabric alternate, size by size" :
				  use_raw && use_stripe ?
				  "; raw libfabric and striped plugin alternate, size by size" :
				  use_raw ? "; raw libfabric only, no plugin" : "";
		if (o->latency)
			printf("# latency: ping-pong, window 1, half the round trip; %s%s\n",
			       o->iters ? "fixed iterations" : "timed", alt);
		else if (o->bidir)
			printf("# both ways: each rank sends and receives at once, window %d each way, "
			       "%s%s; GB/s per direction, the slower rank's time%s\n", o->window,
			       o->iters ? "fixed iterations" : "timed", alt,
			       o->rounds > 1 ? "; each path's median round and the median of the "
					       "rounds' ratios" : "");
		else if (o->rounds > 1)
			printf("# window %d, %s%s; %d rounds per size, each path's median round "
			       "and the median of the rounds' ratios\n",
			       o->window, o->iters ? "fixed iterations" : "timed", alt, o->rounds);
		else
			printf("# window %d, %s%s\n", o->window, o->iters ? "fixed iterations" : "timed",
			       alt);
		if (o->latency && use_plugin && use_raw)
			printf("%14s %12s %12s %14s\n", "bytes", "plugin us", "raw us", "plugin-raw us");
		else if (o->latency)
			printf("%14s %10s %12s %10s\n", "bytes", "trips", "seconds", "us");
		else if (use_plugin + use_raw + use_stripe > 1)
			pf_print_columns(use_plugin, use_raw, use_stripe);
		else
			printf("%14s %10s %12s %10s\n", "bytes", "iters", "seconds", "GB/s");
		fflush(stdout);
	}

	for (int i = 0; i < o->nsizes; i++) {
		size_t size = o->sizes[i];
		struct pf_result pres = {0, 0}, rres = {0, 0}, sres = {0, 0};
		struct pf_result pr[PF_MAX_ROUNDS], rr[PF_MAX_ROUNDS];
		double vs = 0;
		if (o->latency) {
			if (use_plugin && pf_pp_size(r, &plugin_path, sc, rcomm, o, size, &pres))
				return FH_FAIL;
			if (use_raw && pf_pp_size(r, &raw_path, NULL, NULL, o, size, &rres))
				return FH_FAIL;
		} else {
			/* each round a share of the duration, the paths in turn */
			struct pf_opts ro = *o;
			ro.duration = o->duration / o->rounds;
			memset(pr, 0, sizeof(pr));
			memset(rr, 0, sizeof(rr));
			for (int k = 0; k < o->rounds; k++) {
				if (use_plugin && (o->bidir ? pf_bidir_size(r, &plugin_path, sc, rcomm,
									    &ro, size, &pr[k]) :
							      pf_size(r, &plugin_path, &ro, size, &pr[k])))
					return FH_FAIL;
				if (use_raw && (o->bidir ? pf_bidir_size(r, &raw_path, NULL, NULL, &ro,
									 size, &rr[k]) :
							   pf_size(r, &raw_path, &ro, size, &rr[k])))
					return FH_FAIL;
			}
			pres = pf_median(size, pr, o->rounds);
			rres = pf_median(size, rr, o->rounds);
			if (use_plugin && use_raw)
				vs = pf_median_vs(size, pr, rr, o->rounds);
		}
		if (r->rank != 0)
			continue;
		if (use_stripe && (fh_oob_send(r, first_stripe, &go, 1) ||
				   fh_oob_recv(r, first_stripe, &sres, sizeof(sres))))
			return FH_FAIL;
		if (o->latency) {
			if (use_plugin && use_raw) {
				double pu = pf_pp_us(&pres), ru = pf_pp_us(&rres);
				printf("%14zu %12.2f %12.2f %14.2f\n", size, pu, ru, pu - ru);
			} else {
				const struct pf_result *res = use_plugin ? &pres : &rres;
				printf("%14zu %10lld %12.6f %10.2f\n", size, (long long)res->iters,
				       res->seconds, pf_pp_us(res));
			}
			fflush(stdout);
			if (csv && use_plugin)
				pf_csv_row(csv, "plugin-latency", prov, p.name, o->version, size, 1, &pres,
					   prails.rails, 0);
			if (csv && use_raw)
				pf_csv_row(csv, "raw-latency", pf_raw_provider(raw_path.raw),
					   pf_raw_domain(raw_path.raw), 0, size, 1, &rres, 0, 0);
			continue;
		}
		if (use_plugin + use_raw + use_stripe > 1) {
			pf_print_row(size, use_plugin ? &pres : NULL, use_raw ? &rres : NULL,
				     use_stripe ? &sres : NULL, vs);
		} else {
			const struct pf_result *res = use_plugin ? &pres : &rres;
			printf("%14zu %10lld %12.6f %10.3f\n", size, (long long)res->iters,
			       res->seconds, pf_gbps(size, res));
		}
		fflush(stdout);
		const struct pf_result *raw_res = use_raw ? &rres : NULL;
		if (csv && use_plugin)
			pf_csv_row(csv, o->bidir ? "plugin-bidir" : "plugin", prov, p.name, o->version,
				   size, o->window, &pres, prails.rails, vs);
		if (csv && use_raw)
			pf_csv_row(csv, o->bidir ? "raw-bidir" : o->raw_op == PF_RAW_WRITE ? "raw-write" : "raw",
				   pf_raw_provider(raw_path.raw),
				   pf_raw_domain(raw_path.raw), 0, size, o->window, &rres, 0, 0);
		if (csv && use_stripe)
			pf_csv_row(csv, "striped", sinfo.provider, sinfo.device, o->version, size,
				   o->window, &sres, sinfo.rails.rails, pf_vs(size, &sres, raw_res));
	}
	if (csv && fclose(csv))
		return fh_fail(r, "writing %s failed", o->csv);
	if (use_raw && pf_raw_close(r, raw_path.raw))
		return FH_FAIL;
	if (use_plugin) {
		rc = sc ? fh_net_close_send(net, sc) : ncclSuccess;
		if (rc == ncclSuccess && rcomm)
			rc = fh_net_close_recv(net, rcomm);
		if (rc != ncclSuccess)
			return fh_fail(r, "close returned %s", fh_result_str(rc));
	}
	if (net && fh_net_has_finalize(net)) {
		rc = fh_net_finalize(net, net->ctx);
		if (rc != ncclSuccess)
			return fh_fail(r, "finalize() returned %s", fh_result_str(rc));
		fh_net_unload(net);
	}
	free(net);
	return FH_OK;
}

/* ------------------------------------------------------------ options */


static void pf_usage(FILE *f)
{
	fprintf(f,
		"usage: nccl-fabric-perf [options]\n"
		"One-direction bandwidth between two local processes through the NCCL net\n"
		"plugin (rank 0 isend, rank 1 irecv), loaded as NCCL loads it; with --bidir\n"
		"both ways at once; or, with --latency, ping-pong latency (half the round\n"
		"trip).\n\n"
		"  --plugin PATH     plugin (default: $NCCL_NET_PLUGIN if it has a '/', else\n"
		"                    <exe dir>/../lib/" FH_PLUGIN_FILE ")\n"
		"  --provider NAME   set NCCL_FABRIC_PROVIDER=NAME (tcp, shm, ...)\n"
		"  --compare         also measure raw libfabric (fi_tsend/fi_trecv, same provider,\n"
		"                    sizes and window), alternating with the plugin size by\n"
		"                    size; prints plugin GB/s, raw GB/s and plugin/raw\n"
		"  --stripe N        also measure the plugin with NCCL_FABRIC_RAILS=N (2..8):\n"
		"                    messages of NCCL_FABRIC_STRIPE_MIN bytes (128K) and more\n"
		"                    cut into pieces written on N rails at once, in a second\n"
		"                    pair of processes, in turn with the other paths size by\n"
		"                    size; prints striped GB/s (and striped/raw with --compare\n"
		"                    or --raw). Alone: the striped plugin only. Fails if the\n"
		"                    plugin does not stripe (rails and size shown in the header)\n"
		"  --raw-op OP       what the raw path moves messages with: send (the\n"
		"                    default: fi_tsend into posted fi_trecv) or write\n"
		"                    (fi_writedata with 4 bytes of CQ data into the receiver's\n"
		"                    window, each slot freed again by a 4-byte credit message:\n"
		"                    the plugin's write path without the plugin; the only raw\n"
		"                    baseline where the provider has no tags). Bandwidth only\n"
		"  --raw             raw libfabric only. The provider is the one the plugin\n"
		"                    chooses (the plugin is loaded only to ask), or with\n"
		"                    --provider that libfabric provider name as it is\n"
		"                    (\"tcp;ofi_rxm\", \"tcp\", \"shm\"; no plugin loaded)\n"
		"  --loopback        set FI_{TCP,UDP,SOCKETS,NET}_IFACE=lo when unset\n"
		"  --sizes LIST      message sizes, e.g. 64K,1M,4M,64M (the default)\n"
		"  --window W        messages in flight (default 8)\n"
		"  --bidir           both ways at once: each rank isends to the other and\n"
		"                    irecvs from it, a window each way, as NCCL's send/recv\n"
		"                    and alltoall do; GB/s per direction, the slower rank's\n"
		"                    time; every slot's pattern checked each way. With\n"
		"                    --compare (and --rounds) raw libfabric both ways too\n"
		"  --latency         ping-pong instead: one message each way at a time, half\n"
		"                    the round trip in microseconds (sizes default 8,1K,64K);\n"
		"                    with --compare also raw libfabric and plugin-raw\n"
		"  --rounds N        with --compare: the plugin and raw libfabric alternate N\n"
		"                    times per size, each round a 1/N share of --duration\n"
		"                    (with --iters, that many messages each); prints each\n"
		"                    path's median round and the median of the rounds' own\n"
		"                    ratios, which a machine changing speed for seconds moves\n"
		"                    far less (default 1)\n"
		"  --iters N         messages per size (default: about --duration seconds)\n"
		"  --duration S      seconds per size when --iters is not given (default 1)\n"
		"  --csv FILE        also write the results as CSV (one row per size and path:\n"
		"                    plugin, raw or raw-write, striped; rails, and vs_raw =\n"
		"                    GB/s over raw's)\n"
		"  --version V       table version to use, %d..%d (default %d)\n"
		"  --dev N           device (default 0)\n"
		"GB/s is 1e9 bytes per second, one direction; plugin/raw is the plugin's\n"
		"bandwidth as a fraction of raw libfabric's in the same run. Exit 0 ok,\n"
		"1 failure, 77 no device.\n",
		FH_VERSION_MIN, FH_VERSION_MAX, FH_VERSION_MAX);
}

int main(int argc, char **argv)
{
	static struct pf_opts o;
	const char *plugin_cli = NULL, *provider = NULL;
	int loopback = 0, raw = 0, compare = 0, stripe = 0;
	o.version = FH_VERSION_MAX;
	o.window = 8;
	o.duration = 1.0;
	o.rounds = 1;
	enum { O_PLUGIN = 256, O_PROVIDER, O_LOOPBACK, O_SIZES, O_WINDOW, O_ITERS, O_DURATION,
	       O_CSV, O_VERSION, O_DEV, O_RAW, O_COMPARE, O_LATENCY, O_STRIPE, O_RAW_OP,
	       O_ROUNDS, O_BIDIR, O_HELP };
	static const struct option longopts[] = {
		{"plugin", required_argument, NULL, O_PLUGIN},
		{"provider", required_argument, NULL, O_PROVIDER},
		{"loopback", no_argument, NULL, O_LOOPBACK},
		{"sizes", required_argument, NULL, O_SIZES},
		{"window", required_argument, NULL, O_WINDOW},
		{"iters", required_argument, NULL, O_ITERS},
		{"duration", required_argument, NULL, O_DURATION},
		{"csv", required_argument, NULL, O_CSV},
		{"version", required_argument, NULL, O_VERSION},
		{"dev", required_argument, NULL, O_DEV},
		{"raw", no_argument, NULL, O_RAW},
		{"compare", no_argument, NULL, O_COMPARE},
		{"latency", no_argument, NULL, O_LATENCY},
		{"stripe", required_argument, NULL, O_STRIPE},
		{"raw-op", required_argument, NULL, O_RAW_OP},
		{"rounds", required_argument, NULL, O_ROUNDS},
		{"bidir", no_argument, NULL, O_BIDIR},
		{"help", no_argument, NULL, O_HELP},
		{NULL, 0, NULL, 0},
	};
	int opt;
	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (opt) {
		case O_PLUGIN: plugin_cli = optarg; break;
		case O_PROVIDER: provider = optarg; break;
		case O_LOOPBACK: loopback = 1; break;
		case O_SIZES: {
			char *copy = strdup(optarg), *save = NULL;
			o.nsizes = 0;
			for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
				if (o.nsizes >= PF_MAX_SIZES || fh_parse_size(t, &o.sizes[o.nsizes])) {
					fprintf(stderr, "bad --sizes entry '%s'\n", t);
					free(copy);
					return 2;
				}
				o.nsizes++;
			}
			free(copy);
			break;
		}
		case O_WINDOW: o.window = atoi(optarg); break;
		case O_ITERS: o.iters = atol(optarg); break;
		case O_DURATION: o.duration = atof(optarg); break;
		case O_CSV: o.csv = optarg; break;
		case O_VERSION: o.version = atoi(optarg); break;
		case O_DEV: o.dev = atoi(optarg); break;
		case O_RAW: raw = 1; break;
		case O_COMPARE: compare = 1; break;
		case O_LATENCY: o.latency = 1; break;
		case O_BIDIR: o.bidir = 1; break;
		case O_ROUNDS: {
			char *end = NULL;
			long v = strtol(optarg, &end, 10);
			if (!*optarg || *end || v < 1 || v > PF_MAX_ROUNDS) {
				fprintf(stderr, "bad --rounds '%s': 1..%d\n", optarg, PF_MAX_ROUNDS);
				return 2;
			}
			o.rounds = (int)v;
			break;
		}
		case O_RAW_OP:
			if (!strcmp(optarg, "send")) {
				o.raw_op = PF_RAW_SEND;
			} else if (!strcmp(optarg, "write")) {
				o.raw_op = PF_RAW_WRITE;
			} else {
				fprintf(stderr, "bad --raw-op '%s': send or write\n", optarg);
				return 2;
			}
			break;
		case O_STRIPE: {
			char *end = NULL;
			long v = strtol(optarg, &end, 10);
			if (!*optarg || *end || v < 2 || v > 8) {
				fprintf(stderr, "bad --stripe '%s': rails, 2..8\n", optarg);
				return 2;
			}
			stripe = (int)v;
			break;
		}
		case O_HELP:
		case 'h': pf_usage(stdout); return 0;
		default: pf_usage(stderr); return 2;
		}
	}
	if (optind < argc || o.window < 1 || o.window > PF_MAX_WINDOW || o.iters < 0 ||
	    !(o.duration > 0) || o.version < FH_VERSION_MIN || o.version > FH_VERSION_MAX ||
	    o.dev < 0) {
		fprintf(stderr, "bad arguments (window 1..%d, version %d..%d)\n", PF_MAX_WINDOW,
			FH_VERSION_MIN, FH_VERSION_MAX);
		pf_usage(stderr);
		return 2;
	}
	if (raw && compare) {
		fprintf(stderr, "--raw and --compare exclude each other (--compare runs both)\n");
		return 2;
	}
	if (o.rounds > 1 && (o.latency || stripe)) {
		fprintf(stderr, "--rounds goes with bandwidth runs without --stripe\n");
		return 2;
	}
	if (o.raw_op == PF_RAW_WRITE && o.latency) {
		fprintf(stderr, "--raw-op write measures bandwidth; it does not go with --latency\n");
		return 2;
	}
	if (o.bidir && (stripe || o.latency || o.raw_op == PF_RAW_WRITE)) {
		fprintf(stderr, "--bidir moves tagged messages both ways; it does not go with "
			"--stripe, --latency or --raw-op write\n");
		return 2;
	}
	if (o.bidir && (raw || compare) && o.window > PF_RAW_MAX_OPS / 2) {
		fprintf(stderr, "--bidir with raw libfabric: window 1..%d (one range of operations "
			"each way)\n", PF_RAW_MAX_OPS / 2);
		return 2;
	}
	if (stripe && o.latency) {
		fprintf(stderr, "--stripe measures bandwidth; it does not go with --latency\n");
		return 2;
	}
	o.paths = compare ? PF_PATH_PLUGIN | PF_PATH_RAW : raw ? PF_PATH_RAW :
		  stripe ? 0 : PF_PATH_PLUGIN;
	if (stripe)
		o.paths |= PF_PATH_STRIPE;
	o.stripe = stripe;
	o.provider = provider;
	if (!o.nsizes && o.latency) {
		static const size_t def[] = {8, 1 << 10, 64 << 10};
		for (size_t i = 0; i < sizeof(def) / sizeof(def[0]); i++)
			o.sizes[o.nsizes++] = def[i];
	}
	if (!o.nsizes) {
		static const size_t def[] = {64 << 10, 1 << 20, 4 << 20, 64 << 20};
		for (size_t i = 0; i < sizeof(def) / sizeof(def[0]); i++)
			o.sizes[o.nsizes++] = def[i];
	}
	if (fh_plugin_locate(plugin_cli, o.plugin, sizeof(o.plugin)) && !(raw && provider && !stripe)) {
		fprintf(stderr, "cannot work out where the plugin is; use --plugin PATH\n");
		return 2;
	}
	if (provider)
		setenv("NCCL_FABRIC_PROVIDER", provider, 1);
	if (loopback) {
		setenv("FI_TCP_IFACE", "lo", 0);
		setenv("FI_UDP_IFACE", "lo", 0);
		setenv("FI_SOCKETS_IFACE", "lo", 0);
		setenv("FI_NET_IFACE", "lo", 0);
	}
	/* Generous: calibration + the timed run + setup, per size. */
	int npaths = !!(o.paths & PF_PATH_PLUGIN) + !!(o.paths & PF_PATH_RAW) +
		     !!(o.paths & PF_PATH_STRIPE);
	double per_size = (o.iters ? 120.0 : 10.0 + 3.0 * o.duration) * npaths;
	double limit = (60.0 * (stripe ? 2 : 1) + per_size * o.nsizes) * fh_timeout_multiplier();
	/* --stripe next to another path: a second pair of ranks (pf_stripe_rank) */
	int nranks = stripe && (o.paths & (PF_PATH_PLUGIN | PF_PATH_RAW)) ? 4 : 2;
	fh_outcome_t out;
	fh_launch(nranks, limit, pf_rank, &o, &out);
	if (out.status == FH_SKIP) {
		printf("SKIP: %s\n", out.text);
		return FH_SKIP;
	}
	if (out.status != FH_OK) {
		fprintf(stderr, "nccl-fabric-perf FAILED: %s\n", out.text);
		return 1;
	}
	return 0;
}
