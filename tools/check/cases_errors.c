/*
 * cases_errors.c - misuse and teardown: a message larger than the posted
 * receive, corrupted listen handles, closing comms with requests in flight.
 * Each case ends by showing that a fresh connection still works.
 */
#include "check.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KiB ((size_t)1024)
#define MiB ((size_t)1024 * 1024)

static int ck_link_0to1(ck_t *ck, void **sc, void **rc)
{
	int me = ck->r->rank;
	return fh_link(ck->r, ck->net, ck->dev, me == 0 ? 1 : -1, me == 1 ? 0 : -1, sc, rc);
}

/* After an error case: a new connection between ranks 0 and 1 must work. */
static int ck_fresh_link_works(ck_t *ck, int stream)
{
	void *sc = NULL, *rc = NULL;
	fh_stage(ck->r, "fresh connection after the error");
	if (ck_link_0to1(ck, &sc, &rc))
		return FH_FAIL;
	if (ck_oneway(ck, sc, rc, 0, 1, stream, 4, ck_cap(ck, 256 * KiB), 4))
		return FH_FAIL;
	return ck_close_pair(ck, sc, rc);
}

/* Post op, retrying NULL requests for at most `seconds`. Returns FH_OK with
 * op->state telling whether it got posted. */
static int ck_post_for(ck_t *ck, fh_op_t *op, double seconds)
{
	double until = fh_now() + seconds;
	unsigned idle = 0;
	for (;;) {
		if (fh_op_post(ck->r, ck->net, op))
			return FH_FAIL;
		if (op->state != FH_OP_PENDING || fh_now() > until)
			return FH_OK;
		fh_relax(&idle);
	}
}

/* ck_post_for where the case needs the request: fails when `what` (isend(),
 * irecv()) still gave none after `seconds`. */
static int ck_post_within(ck_t *ck, fh_op_t *op, double seconds, const char *what)
{
	if (ck_post_for(ck, op, seconds))
		return FH_FAIL;
	if (op->state != FH_OP_POSTED)
		return fh_fail(ck->r, "%s kept returning a NULL request for %.0f s", what, seconds);
	return FH_OK;
}

/* After a case's error: the buffer deregistered and the pair closed (both
 * must still work), then a fresh connection must move data. */
static int ck_close_after_error(ck_t *ck, fh_buf_t *b, void *sc, void *rc, const char *what,
				int stream)
{
	fh_stage(ck->r, "closing comms after %s", what);
	if (ck_ok(ck, fh_buf_dereg(ck->net, b), "deregMr() after the error") ||
	    ck_close_pair(ck, sc, rc))
		return FH_FAIL;
	fh_buf_free(b);
	return ck_fresh_link_works(ck, stream);
}

/* ------------------------------------------------------------ send larger than posted */

/* sender_first: the sender posts before the receive exists (and the
 * receiver after 300 ms), so a plugin with early sends hands the message to
 * the provider before it learns the receive's size. */
static int send_larger(ck_t *ck, int sender_first)
{
	fh_rank_t *r = ck->r;
	fh_net_t *net = ck->net;
	int me = r->rank;
	size_t send = ck_cap(ck, ck->c->arg ? ck->c->arg : 1 * MiB);
	size_t post = send / 2;
	double limit = 20.0 * r->timeout_mult;
	void *sc = NULL, *rc = NULL;
	if (ck_link_0to1(ck, &sc, &rc))
		return FH_FAIL;

	fh_buf_t b;
	if (fh_buf_alloc(&b, me == 0 ? send : post, 4096))
		return fh_fail(r, "cannot map a buffer");
	/* The receiver registers the guard too, like a slice of NCCL's larger
	 * buffer: the provider cannot stop an overrun, only the plugin can. */
	if (ck_ok(ck, fh_buf_reg(net, &b, me == 0 ? sc : rc, me == 1), "regMr()"))
		return FH_FAIL;
	fh_op_t op;
	if (me == 1) {
		fh_op_recv(&op, rc, b.ptr, post, CK_TAG, b.mh);
		op.expect[0] = FH_NO_CHECK;
		if (sender_first && fh_oob_barrier(r)) /* the sender has posted */
			return FH_FAIL;
		if (ck_post_within(ck, &op, limit, "irecv()"))
			return FH_FAIL;
		unsigned long warns = fh_log_warn_count();
		if (!sender_first && fh_oob_barrier(r)) /* the sender starts now */
			return FH_FAIL;
		fh_stage(r, "waiting for test() to report the truncation");
		ncclResult_t res;
		int done = 0, size = -1;
		unsigned idle = 0;
		double until = fh_now() + limit;
		for (;;) {
			res = fh_net_test(net, op.req, &done, &size);
			if (res != ncclSuccess || done)
				break;
			if (fh_now() > until)
				return fh_fail(r, "test() neither failed nor completed within %.0fs of a "
						  "%zu-byte message into a %zu-byte receive",
					       limit, send, post);
			fh_relax(&idle);
		}
		if (res == ncclSuccess)
			return fh_fail(r, "test() completed with ncclSuccess (size %d) for a %zu-byte "
					  "message into a %zu-byte receive; expected ncclInvalidUsage",
				       size, send, post);
		if (res != ncclInvalidUsage)
			return fh_fail(r, "test() returned %s for a %zu-byte message into a %zu-byte "
					  "receive; expected ncclInvalidUsage",
				       fh_result_str(res), send, post);
		long bad;
		if (fh_buf_guard_check(&b, &bad))
			return fh_fail(r, "truncated receive wrote past the posted buffer (byte %ld of "
					  "a %zu-byte receive changed)",
				       bad, post);
		if (fh_log_warn_count() == warns)
			return fh_fail(r, "test() returned ncclInvalidUsage but nothing was logged at "
					  "WARN level");
	} else {
		fh_pattern_fill(b.ptr, send, ck_seed(ck, 0, 1, 90, 0));
		fh_op_send(&op, sc, b.ptr, send, CK_TAG, b.mh);
		if (!sender_first && fh_oob_barrier(r)) /* the receive is posted */
			return FH_FAIL;
		fh_stage(r, "sending %zu bytes into a %zu-byte receive", send, post);
		/* The send may complete or fail; it may not hang. */
		ncclResult_t res = ncclSuccess;
		double until = fh_now() + limit;
		double first = fh_now() + 0.3; /* sender_first: before the receive exists */
		unsigned idle = 0;
		while (op.state == FH_OP_PENDING) {
			if (sender_first && first && fh_now() > first) {
				fh_note(r, "isend gave no request before the receive was posted");
				first = 0;
				if (fh_oob_barrier(r)) /* the receiver posts now */
					return FH_FAIL;
			}
			op.req = NULL;
			res = fh_net_isend(net, sc, b.ptr, send, CK_TAG, b.mh, &op.req);
			if (res != ncclSuccess)
				break;
			if (op.req)
				op.state = FH_OP_POSTED;
			else if (fh_now() > until)
				return fh_fail(r, "isend() kept returning a NULL request for %.0fs", limit);
			else
				fh_relax(&idle);
		}
		if (sender_first && first) {
			fh_note(r, "isend %s before the receive was posted",
				res == ncclSuccess ? "went" : "failed");
			if (fh_oob_barrier(r)) /* the receiver posts now */
				return FH_FAIL;
		}
		int done = 0, size = -1;
		while (res == ncclSuccess && op.state == FH_OP_POSTED && !done) {
			res = fh_net_test(net, op.req, &done, &size);
			if (res == ncclSuccess && !done) {
				if (fh_now() > until)
					return fh_fail(r, "the sender's request neither completed nor "
							  "failed within %.0fs after the receiver's "
							  "truncation",
						       limit);
				fh_relax(&idle);
			}
		}
		fh_note(r, "sender %s", res == ncclSuccess ? "completed" : fh_result_str(res));
	}
	if (fh_oob_barrier(r))
		return FH_FAIL;
	return ck_close_after_error(ck, &b, sc, rc, "the truncation", 91);
}

static int ck_send_larger(ck_t *ck)
{
	return send_larger(ck, 0);
}

static int ck_send_larger_early(ck_t *ck)
{
	return send_larger(ck, 1);
}

/* ------------------------------------------------------------ a receive half posted */

/* A grouped receive whose first buffer is posted and whose second is refused
 * by the provider with a hard error (testhmem's TESTHMEM_FAIL_TRECV_MIN): its
 * clear-to-send never goes out, so no message comes for the posted buffer
 * either. test() must report the failure in bounded time (not wait for that
 * buffer forever), with a WARN; closing and a new connection must work. */
#define CK_HALF_SMALL (512 * KiB)
#define CK_HALF_LARGE (2 * MiB)

static int ck_recv_half_posted(ck_t *ck)
{
	fh_rank_t *r = ck->r;
	fh_net_t *net = ck->net;
	int me = r->rank;
	const ncclFabricTools_v1_t *tools = fh_net_tools(net);
	const char *prov = tools && tools->provider ? tools->provider() : "";
	if (!strstr(prov, "testhmem"))
		return fh_skip(r, "needs the test provider testhmem to refuse a receive (provider %s)",
			       prov);
	const char *profile = getenv("TESTHMEM_PROFILE");
	if (profile && !strcmp(profile, "efa-direct"))
		return fh_skip(r, "profile %s takes writes only: no tagged receive to refuse", profile);
	double limit = 20.0 * r->timeout_mult;
	void *sc = NULL, *rc = NULL;
	if (ck_link_0to1(ck, &sc, &rc))
		return FH_FAIL;
	fh_buf_t b;
	if (fh_buf_alloc(&b, CK_HALF_SMALL + CK_HALF_LARGE, 4096))
		return fh_fail(r, "cannot map a buffer");
	if (ck_ok(ck, fh_buf_reg(net, &b, me == 0 ? sc : rc, 0), "regMr()"))
		return FH_FAIL;
	if (me == 1) {
		void *data[2] = {b.ptr, b.ptr + CK_HALF_SMALL};
		size_t sizes[2] = {CK_HALF_SMALL, CK_HALF_LARGE};
		int tags[2] = {CK_TAG, CK_TAG + 1};
		void *mh[2] = {b.mh, b.mh};
		void *req = NULL;
		unsigned long warns = fh_log_warn_count();
		setenv("TESTHMEM_FAIL_TRECV_MIN", "1048576", 1);
		fh_stage(r, "irecv of %d and %d KiB, the second refused", (int)(CK_HALF_SMALL / 1024),
			 (int)(CK_HALF_LARGE / 1024));
		ncclResult_t res = fh_net_irecv(net, rc, 2, data, sizes, tags, mh, &req);
		unsetenv("TESTHMEM_FAIL_TRECV_MIN");
		if (res != ncclSuccess)
			return fh_fail(r, "irecv() returned %s although its first buffer was posted; "
					  "expected a request whose test() fails",
				       fh_result_str(res));
		if (!req)
			return fh_fail(r, "irecv() returned no request (the refusal is not -FI_EAGAIN)");
		int done = 0, got[2] = {-1, -1};
		unsigned idle = 0;
		double t0 = fh_now(), until = t0 + limit;
		for (;;) {
			res = fh_net_test(net, req, &done, got);
			if (res != ncclSuccess || done)
				break;
			if (fh_now() > until)
				return fh_fail(r, "test() neither failed nor completed within %.0f s of a "
						  "receive whose second buffer the provider refused: the "
						  "posted first buffer waits for a message that cannot come",
					       limit);
			fh_relax(&idle);
		}
		if (res == ncclSuccess)
			return fh_fail(r, "test() completed with ncclSuccess (sizes %d, %d) although "
					  "the provider refused the second buffer",
				       got[0], got[1]);
		if (fh_log_warn_count() == warns)
			return fh_fail(r, "test() returned %s but nothing was logged at WARN level",
				       fh_result_str(res));
		fh_note(r, "test() returned %s after %.2f s", fh_result_str(res), fh_now() - t0);
		if (fh_oob_barrier(r)) /* the sender may stop trying */
			return FH_FAIL;
	} else {
		/* NCCL's sender: it keeps posting the first message, which waits for
		 * a CTS that never comes, until the receiver has its answer. */
		fh_pattern_fill(b.ptr, CK_HALF_SMALL, ck_seed(ck, 0, 1, 93, 0));
		void *req = NULL;
		unsigned idle = 0;
		fh_stage(r, "isend of %d KiB while the receiver's test() decides",
			 (int)(CK_HALF_SMALL / 1024));
		while (!fh_oob_ready(r, 1)) {
			int done = 0;
			int size = -1;
			ncclResult_t res = req ? fh_net_test(net, req, &done, &size)
					       : fh_net_isend(net, sc, b.ptr, CK_HALF_SMALL, CK_TAG,
							      b.mh, &req);
			if (res != ncclSuccess || done)
				break; /* completed or failed: either may happen, neither may hang */
			fh_relax(&idle);
		}
		if (fh_oob_barrier(r))
			return FH_FAIL;
	}
	return ck_close_after_error(ck, &b, sc, rc, "the refused receive", 94);
}

/* ------------------------------------------------------------ corrupted handles */

static int ck_corrupt_handle(ck_t *ck)
{
	fh_rank_t *r = ck->r;
	fh_net_t *net = ck->net;
	int me = r->rank;
	char handle[NCCL_NET_HANDLE_MAXSIZE];
	void *lc = NULL, *sc = NULL, *rc = NULL;
	const char go = 'G';
	if (me == 1) {
		if (ck_ok(ck, fh_net_listen(net, net->ctx, ck->dev, handle, &lc), "listen()"))
			return FH_FAIL;
		if (!lc)
			return fh_fail(r, "listen() returned no listen comm");
		if (fh_oob_send(r, 0, handle, sizeof(handle)))
			return FH_FAIL;
		/* Keep accepting, as NCCL would while it waits for its real peer. */
		fh_stage(r, "accepting while rank 0 connects with corrupted handles");
		unsigned idle = 0;
		while (!fh_oob_ready(r, 0)) {
			ncclResult_t res = fh_net_accept(net, lc, &rc);
			if (res != ncclSuccess)
				return fh_fail(r, "accept() returned %s while a peer tried corrupted "
						  "handles: stray connection attempts must not break a "
						  "listen comm",
					       fh_result_str(res));
			if (rc)
				return fh_fail(r, "accept() returned a recv comm although every connect "
						  "so far used a corrupted handle");
			fh_relax(&idle);
		}
		char got;
		if (fh_oob_recv(r, 0, &got, 1))
			return FH_FAIL;
		fh_stage(r, "accepting the good connection");
		while (!rc) {
			if (ck_ok(ck, fh_net_accept(net, lc, &rc), "accept()"))
				return FH_FAIL;
			fh_relax(&idle);
		}
	} else {
		if (fh_oob_recv(r, 1, handle, sizeof(handle)))
			return FH_FAIL;
		static const char *what[3] = {"handle with every 8th byte flipped",
					      "handle of 128 random bytes", "all-zero handle"};
		char results[3][32];
		double limit = 20.0 * r->timeout_mult;
		uint64_t rnd = fh_mix64(ck->o->seed ^ 0xbad0ULL);
		for (int v = 0; v < 3; v++) {
			char h[NCCL_NET_HANDLE_MAXSIZE];
			memcpy(h, handle, sizeof(h));
			for (int i = 0; i < (int)sizeof(h); i++) {
				if (v == 0 && i % 8 == 0)
					h[i] = (char)(h[i] ^ 0xff);
				else if (v == 1)
					h[i] = (char)fh_mix64(rnd + (uint64_t)i);
				else if (v == 2)
					h[i] = 0;
			}
			fh_stage(r, "connect with a %s", what[v]);
			int timed_out = 0;
			unsigned long warns = fh_log_warn_count();
			ncclResult_t res = fh_connect_until(r, net, ck->dev, h, &sc, limit, &timed_out);
			if (sc)
				return fh_fail(r, "connect() with a %s returned a send comm", what[v]);
			if (timed_out)
				return fh_fail(r, "connect() with a %s neither failed nor connected within "
						  "%.0fs",
					       what[v], limit);
			snprintf(results[v], sizeof(results[v]), "%s%s", fh_result_str(res),
				 fh_log_warn_count() > warns ? "+WARN" : "");
		}
		if (fh_oob_send(r, 1, &go, 1))
			return FH_FAIL;
		fh_stage(r, "connect with the good handle");
		int timed_out = 0;
		ncclResult_t res = fh_connect_until(r, net, ck->dev, handle, &sc, limit, &timed_out);
		if (res != ncclSuccess || !sc)
			return fh_fail(r, "after the corrupted attempts, connect() with the good handle "
					  "%s",
				       timed_out ? "did not finish" : fh_result_str(res));
		fh_note(r, "flipped: %s, random: %s, zeros: %s%s", results[0], results[1], results[2],
			ck->netns ? "" : " (no private netns)");
	}
	if (ck_oneway(ck, sc, rc, 0, 1, 92, 2, ck_cap(ck, 64 * KiB), 2))
		return FH_FAIL;
	if (ck_close_pair(ck, sc, rc))
		return FH_FAIL;
	if (lc && ck_ok(ck, fh_net_close_listen(net, lc), "closeListen()"))
		return FH_FAIL;
	return FH_OK;
}

/* ------------------------------------------------------------ close in flight */

/* One round: connect, post what `who_posts` says (1: sender, 2: receiver,
 * 3: both), then deregister and close without testing anything. Buffers are
 * unmapped right after: a late write by the plugin faults. */
static int ck_close_round(ck_t *ck, int round, int who_posts)
{
	fh_rank_t *r = ck->r;
	fh_net_t *net = ck->net;
	int me = r->rank;
	void *sc = NULL, *rc = NULL;
	if (ck_link_0to1(ck, &sc, &rc))
		return FH_FAIL;
	enum { N = 4 };
	fh_buf_t b[N];
	fh_op_t op[N];
	int posted = 0;
	int post = (me == 0 && (who_posts & 1)) || (me == 1 && (who_posts & 2));
	for (int i = 0; i < N; i++) {
		size_t len = ck_cap(ck, i % 2 ? 1 * MiB : 4 * KiB);
		if (fh_buf_alloc(&b[i], len, 0))
			return fh_fail(r, "cannot map a buffer");
		if (ck_ok(ck, fh_buf_reg(net, &b[i], me == 0 ? sc : rc, 0), "regMr()"))
			return FH_FAIL;
		if (me == 0) {
			fh_pattern_fill(b[i].ptr, len, ck_seed(ck, 0, 1, 93 + round, i));
			fh_op_send(&op[i], sc, b[i].ptr, len, CK_TAG, b[i].mh);
		} else {
			fh_op_recv(&op[i], rc, b[i].ptr, len, CK_TAG, b[i].mh);
		}
		if (post) {
			if (ck_post_for(ck, &op[i], 0.5))
				return FH_FAIL;
			posted += op[i].state == FH_OP_POSTED;
		}
	}
	if (fh_oob_barrier(r))
		return FH_FAIL;
	fh_stage(r, "round %d: closing with %d requests in flight", round, posted);
	/* NCCL's order on teardown: deregMr each buffer, then close the comm. */
	for (int i = 0; i < N; i++)
		if (ck_ok(ck, fh_buf_dereg(net, &b[i]), "deregMr() with requests in flight"))
			return FH_FAIL;
	if (ck_close_pair(ck, sc, rc))
		return FH_FAIL;
	for (int i = 0; i < N; i++)
		fh_buf_free(&b[i]);
	return fh_oob_barrier(r);
}

/* arg: who posts before the close (1: sender, 2: receiver, 3: both). */
static int ck_close_inflight(ck_t *ck)
{
	int who = (int)ck->c->arg;
	if (ck_close_round(ck, 0, who) || ck_close_round(ck, 1, who))
		return FH_FAIL;
	return ck_fresh_link_works(ck, 97);
}

/* A write whose later pieces the provider refused for a moment and whose
 * buffer is deregistered before any test() posts them again: they never will
 * be, so the receiver never takes that message. The sender's closeSend, which
 * waits (bounded) until the receiver took what it was sent, must not wait for
 * that one while the receiver keeps its comm open. Over a provider that takes
 * every piece nothing is dropped and the case checks the plain close;
 * NCCL_FABRIC_CHECK_DROPPED=1 (with TESTHMEM_BUSY_WRITES, two rails) fails
 * when no piece was dropped. */
static int ck_close_dropped(ck_t *ck)
{
	fh_rank_t *r = ck->r;
	fh_net_t *net = ck->net;
	int me = r->rank;
	void *sc = NULL, *rc = NULL;
	if (ck_link_0to1(ck, &sc, &rc))
		return FH_FAIL;
	size_t len = ck_cap(ck, 1 * MiB);
	fh_buf_t b;
	fh_op_t op;
	if (fh_buf_alloc(&b, len, 4096))
		return fh_fail(r, "cannot map a buffer");
	if (ck_ok(ck, fh_buf_reg(net, &b, me == 0 ? sc : rc, 0), "regMr()"))
		return FH_FAIL;
	if (me == 0) {
		fh_pattern_fill(b.ptr, len, ck_seed(ck, 0, 1, 99, 0));
		fh_op_send(&op, sc, b.ptr, len, CK_TAG, b.mh);
	} else {
		fh_op_recv(&op, rc, b.ptr, len, CK_TAG, b.mh);
		if (ck_post_within(ck, &op, 10.0 * r->timeout_mult, "irecv()"))
			return FH_FAIL;
	}
	if (fh_oob_barrier(r)) /* the receive is posted: its CTS is on the way */
		return FH_FAIL;
	if (me == 0) {
		/* posted once the CTS is here; nothing tests it after that */
		if (ck_post_within(ck, &op, 10.0 * r->timeout_mult, "isend()"))
			return FH_FAIL;
		char dropped[2048], waited[2048];
		fh_log_keep("never will be");
		if (ck_ok(ck, fh_buf_dereg(net, &b), "deregMr() with the send in flight"))
			return FH_FAIL;
		int drop = fh_log_kept(dropped, sizeof(dropped));
		fh_log_keep("closing anyway");
		double t0 = fh_now();
		if (ck_ok(ck, fh_net_close_send(net, sc), "closeSend() with the send in flight"))
			return FH_FAIL;
		double dt = fh_now() - t0;
		int waited_in_vain = fh_log_kept(waited, sizeof(waited));
		fh_log_keep(NULL);
		if (waited_in_vain)
			return fh_fail(r, "closeSend waited %.1f s for a message %s: %s", dt,
				       drop ? "whose pieces were dropped" : "the receiver took no part of",
				       waited);
		const char *want = getenv("NCCL_FABRIC_CHECK_DROPPED");
		if (want && atoi(want) == 1 && !drop)
			return fh_fail(r, "no piece of the %zu-byte write was dropped at deregMr "
					  "(NCCL_FABRIC_CHECK_DROPPED=1: a provider that refuses writes "
					  "and two rails are needed)", len);
		fh_note(r, "%s; closeSend took %.2f s with the receiver's comm open",
			drop ? "pieces dropped at deregMr" : "no piece dropped (the provider took them all)",
			dt);
	}
	if (fh_oob_barrier(r)) /* the sender has closed */
		return FH_FAIL;
	if (me == 1) {
		if (ck_ok(ck, fh_buf_dereg(net, &b), "deregMr() with the receive in flight") ||
		    ck_ok(ck, fh_net_close_recv(net, rc), "closeRecv() with the receive in flight"))
			return FH_FAIL;
	}
	fh_buf_free(&b);
	if (fh_oob_barrier(r))
		return FH_FAIL;
	return ck_fresh_link_works(ck, 98);
}

/* arg rounds of a close with what `who` posted in flight (every 4th round
 * the sender's too), then a new connection moves data: nothing such a close
 * takes from the provider (its receive entries, above all) may stay taken. */
static int ck_close_inflight_many(ck_t *ck)
{
	int rounds = (int)ck->c->arg;
	double t0 = fh_now();
	for (int i = 0; i < rounds; i++)
		if (ck_close_round(ck, i, i % 4 == 3 ? 3 : 2))
			return FH_FAIL;
	fh_note(ck->r, "%d closes with receives in flight (every 4th with sends too) in %.1f s",
		rounds, fh_now() - t0);
	return ck_fresh_link_works(ck, 97);
}

/* ------------------------------------------------------------ sender leaves early */

/* The sender's messages all complete before the receiver posts anything (at
 * most 1000 bytes, and no more than the device's eager limit), it closes its
 * send comm and its process exits, as a rank does
 * once its last collective is done. The receiver posts 300 ms later: every
 * message must still arrive whole. closeSend must have waited for the
 * receiver to take them (a provider may drop data of a peer that left: native
 * tcp does), so it returns only after the receiver posted, within its bound. */
static int ck_sender_exits(ck_t *ck)
{
	fh_rank_t *r = ck->r;
	int me = r->rank;
	void *sc = NULL, *rc = NULL;
	long eager = ck_eager_max(ck, 1000);
	if (eager == 0)
		return fh_skip(r, "no message leaves before its receive is posted here (eager limit "
				  "0: a provider without FI_TAGGED writes every one)");
	if (ck_link_0to1(ck, &sc, &rc))
		return FH_FAIL;
	enum { N = 6 };
	size_t sizes[N];
	uint64_t seeds[N];
	for (int i = 0; i < N; i++) {
		static const size_t base[N] = {0, 1, 64, 100, 500, 1000};
		sizes[i] = ck_cap(ck, base[i]);
		if (eager > 0 && sizes[i] > (size_t)eager)
			sizes[i] = (size_t)eager;
		seeds[i] = ck_seed(ck, 0, 1, 98, i);
	}
	ck_side_t s;
	ck_side_t *sides[1] = {&s};
	if (me == 0) {
		if (ck_side_send(ck, &s, sc, N, sizes, seeds, CK_TAG) || ck_sides_run(ck, sides, 1, N))
			return FH_FAIL;
		if (fh_oob_barrier(r))
			return FH_FAIL;
		double t0 = fh_now();
		if (ck_ok(ck, fh_net_close_send(ck->net, sc), "closeSend() with messages not yet taken"))
			return FH_FAIL;
		double dt = fh_now() - t0;
		if (ck_side_release(ck, &s))
			return FH_FAIL;
		/* the receiver posts 300 ms after the barrier */
		if (dt < 0.15)
			return fh_fail(r, "closeSend() returned after %.3f s, before the receiver took "
					  "the messages (it posts 300 ms after the sends completed)", dt);
		fh_note(r, "closeSend waited %.3f s for the receiver; this rank now exits", dt);
		return FH_OK; /* the process exits: its endpoints and sockets close */
	}
	if (ck_side_recv(ck, &s, rc, N, sizes, 0, seeds, CK_TAG) || fh_oob_barrier(r))
		return FH_FAIL;
	struct timespec ts = {0, 300 * 1000 * 1000};
	nanosleep(&ts, NULL);
	if (ck_sides_run(ck, sides, 1, N) || ck_side_verify(ck, &s, "sender that left") ||
	    ck_side_release(ck, &s))
		return FH_FAIL;
	return ck_close_pair(ck, NULL, rc);
}

/* ------------------------------------------------------------ close, then reconnect */

/* What several threads of one job do when a communicator is torn down and
 * made again (NCCL's channels each on its own connection): each of CR_THREADS
 * threads of rank 0 connects to its own listen comm of rank 1, posts sends
 * (eager and above the eager limit), closes its send comm while some of them
 * are still in flight, and connects again to the same listen comm; rank 1's
 * thread receives part of them, checked, and closes its receive comm with a
 * receive still posted. Buffers are unmapped right after each close: a
 * provider still using one faults (or fails a later send with "Bad address").
 * Every round's received messages are checked; at the end each thread moves
 * every message over one more connection. */
#define CR_THREADS 4
#define CR_MSGS 8
#define CR_TAKEN 4  /* messages the receiver waits for, checked */
#define CR_POSTED 5 /* ... receives it posts (the last one is in flight at close) */

static const size_t cr_sizes[CR_MSGS] = {4 * KiB, 1 * MiB, 64 * KiB, 100,
					 1 * MiB, 4 * KiB, 16 * KiB, 64 * KiB};

struct cr_thread {
	ck_t *ck;
	int t;
	void *lc;
	char handle[NCCL_NET_HANDLE_MAXSIZE];
	int rounds;
	double close_max; /* the slowest close */
	int both;	  /* 1: each rank sends and receives; 2: ... in bursts closed at once */
	int ret;
};

/* Tests req until it completes with want bytes; FH_FAIL otherwise. */
static int cr_wait(struct cr_thread *w, void *req, size_t want, const char *what, int round,
		   int i)
{
	ck_t *ck = w->ck;
	double until = fh_now() + 30.0 * ck->r->timeout_mult;
	unsigned idle = 0;
	for (;;) {
		int done = 0, size = -1;
		ncclResult_t res = fh_net_test(ck->net, req, &done, &size);
		if (res != ncclSuccess)
			return fh_fail(ck->r, "thread %d round %d: test() of %s %d returned %s", w->t,
				       round, what, i, fh_result_str(res));
		if (done) {
			if ((size_t)size != want)
				return fh_fail(ck->r, "thread %d round %d: %s %d reported %d bytes, "
						  "expected %zu", w->t, round, what, i, size, want);
			return FH_OK;
		}
		if (fh_now() > until)
			return fh_fail(ck->r, "thread %d round %d: %s %d of %zu bytes did not complete "
					  "within %.0f s", w->t, round, what, i, want,
				       30.0 * ck->r->timeout_mult);
		fh_relax(&idle);
	}
}

/* The data of message i of a round, from rank `from` to rank `to`. */
static uint64_t cr_seed(struct cr_thread *w, int from, int to, int round, int i)
{
	return ck_seed(w->ck, from, to, 200 + w->t, round * CR_MSGS + i);
}

/* One direction of a round: the buffers and requests of a comm. */
struct cr_dir {
	void *comm;
	int n; /* buffers mapped and registered */
	fh_buf_t b[CR_MSGS];
	void *req[CR_MSGS];
	int done[CR_MSGS]; /* receives test() already reported done, with size */
	int size[CR_MSGS];
};

/* Tests the receives of d not yet done, once each, as NCCL's proxy does while
 * its sends wait: a receive's CTS may go out only when it is tested. */
static int cr_poke(struct cr_thread *w, struct cr_dir *d)
{
	for (int i = 0; d && i < CR_MSGS; i++) {
		if (!d->req[i] || d->done[i])
			continue;
		ncclResult_t res = fh_net_test(w->ck->net, d->req[i], &d->done[i], &d->size[i]);
		if (res != ncclSuccess)
			return fh_fail(w->ck->r, "thread %d: test() of receive %d returned %s", w->t, i,
				       fh_result_str(res));
	}
	return FH_OK;
}

/* Connects to the peer's listen comm (sc) and/or accepts on our own (rc),
 * alternately as NCCL does, until each asked for is done. */
static int cr_link(struct cr_thread *w, int round, void **sc, void **rc)
{
	ck_t *ck = w->ck;
	double until = fh_now() + 30.0 * ck->r->timeout_mult;
	unsigned idle = 0;
	fh_stage(ck->r, "thread %d round %d: %s", w->t, round,
		 sc && rc ? "connect and accept" : sc ? "connect" : "accept");
	while ((sc && !*sc) || (rc && !*rc)) {
		if (sc && !*sc &&
		    ck_ok(ck, fh_net_connect(ck->net, ck->net->ctx, ck->dev, w->handle, sc),
			  "connect() again"))
			return FH_FAIL;
		if (rc && !*rc && ck_ok(ck, fh_net_accept(ck->net, w->lc, rc), "accept()"))
			return FH_FAIL;
		if (((sc && !*sc) || (rc && !*rc)) && fh_now() > until)
			return fh_fail(ck->r, "thread %d round %d: connecting again to the same peer "
					      "did not finish within %.0f s (send comm %s, receive comm %s)",
				       w->t, round, 30.0 * ck->r->timeout_mult, sc && !*sc ? "missing" : "up",
				       rc && !*rc ? "missing" : "up");
		fh_relax(&idle);
	}
	return FH_OK;
}

/* Maps and registers n buffers of the round's sizes on d->comm. */
static int cr_bufs(struct cr_thread *w, struct cr_dir *d, int n)
{
	ck_t *ck = w->ck;
	for (int i = 0; i < n; i++) {
		size_t len = ck_cap(ck, cr_sizes[i]);
		if (fh_buf_alloc(&d->b[i], len, 0))
			return fh_fail(ck->r, "cannot map a buffer");
		d->n = i + 1;
		if (ck_ok(ck, fh_buf_reg(ck->net, &d->b[i], d->comm, 0), "regMr()"))
			return FH_FAIL;
	}
	return FH_OK;
}

/* Posts every message in order; those past `last` need not start (one above
 * the eager limit waits for a receive the peer never posts, and is given up
 * after a moment; the later eager ones still go). */
static int cr_post_sends(struct cr_thread *w, struct cr_dir *d, int round, int last, int to,
			 struct cr_dir *rx)
{
	ck_t *ck = w->ck;
	if (cr_bufs(w, d, CR_MSGS))
		return FH_FAIL;
	for (int i = 0; i < CR_MSGS; i++) {
		fh_buf_t *b = &d->b[i];
		fh_pattern_fill(b->ptr, b->size, cr_seed(w, ck->r->rank, to, round, i));
		double until = fh_now() + (i < last ? 30.0 * ck->r->timeout_mult : 0.02);
		unsigned idle = 0;
		while (!d->req[i]) {
			if (ck_ok(ck, fh_net_isend(ck->net, d->comm, b->ptr, b->size, CK_TAG, b->mh,
						   &d->req[i]), "isend()"))
				return FH_FAIL;
			if (d->req[i] || fh_now() > until)
				break;
			if (cr_poke(w, rx))
				return FH_FAIL;
			fh_relax(&idle);
		}
		if (!d->req[i] && i < last)
			return fh_fail(ck->r, "thread %d round %d: isend() of message %d (%zu bytes) "
					      "got no request", w->t, round, i, b->size);
	}
	return FH_OK;
}

static int cr_post_recvs(struct cr_thread *w, struct cr_dir *d, int round, int posted)
{
	ck_t *ck = w->ck;
	if (cr_bufs(w, d, posted))
		return FH_FAIL;
	for (int i = 0; i < posted; i++) {
		fh_buf_t *b = &d->b[i];
		memset(b->ptr, 0xee, b->size);
		void *data[1] = {b->ptr};
		size_t sz[1] = {b->size};
		int tags[1] = {CK_TAG};
		void *mh[1] = {b->mh};
		double until = fh_now() + 30.0 * ck->r->timeout_mult;
		unsigned idle = 0;
		while (!d->req[i]) {
			if (ck_ok(ck, fh_net_irecv(ck->net, d->comm, 1, data, sz, tags, mh, &d->req[i]),
				  "irecv()"))
				return FH_FAIL;
			if (!d->req[i] && fh_now() > until)
				return fh_fail(ck->r, "thread %d round %d: irecv() got no request", w->t,
					       round);
			if (!d->req[i])
				fh_relax(&idle);
		}
	}
	return FH_OK;
}

/* Waits for the first n receives and checks their bytes (from: the sender). */
static int cr_take(struct cr_thread *w, struct cr_dir *d, int round, int n, int from)
{
	ck_t *ck = w->ck;
	for (int i = 0; i < n; i++) {
		if (d->done[i] && (size_t)d->size[i] != d->b[i].size)
			return fh_fail(ck->r, "thread %d round %d: receive %d reported %d bytes, expected "
					      "%zu", w->t, round, i, d->size[i], d->b[i].size);
		if (!d->done[i] && cr_wait(w, d->req[i], d->b[i].size, "receive", round, i))
			return FH_FAIL;
		size_t bad = 0;
		if (fh_pattern_check(d->b[i].ptr, d->b[i].size, cr_seed(w, from, ck->r->rank, round, i),
				     &bad))
			return fh_fail(ck->r, "thread %d round %d: message %d (%zu bytes) is corrupt at "
					      "byte %zu", w->t, round, i, d->b[i].size, bad);
	}
	return FH_OK;
}

/* Deregisters, closes the comm with what is still in flight, and unmaps the
 * buffers: a provider still using one faults (or fails with "Bad address"). */
static int cr_close(struct cr_thread *w, struct cr_dir *d, int is_send, int round)
{
	ck_t *ck = w->ck;
	int inflight = 0;
	for (int i = 0; i < CR_MSGS; i++)
		inflight += d->req[i] != NULL;
	for (int i = 0; i < d->n; i++)
		if (ck_ok(ck, fh_buf_dereg(ck->net, &d->b[i]),
			  is_send ? "deregMr() with sends in flight" : "deregMr() with receives in flight"))
			return FH_FAIL;
	fh_stage(ck->r, "thread %d round %d: close%s with %d request(s) not yet tested done", w->t,
		 round, is_send ? "Send" : "Recv", inflight);
	double t0 = fh_now();
	if (ck_ok(ck, is_send ? fh_net_close_send(ck->net, d->comm) : fh_net_close_recv(ck->net, d->comm),
		  is_send ? "closeSend() with sends in flight" : "closeRecv() with receives in flight"))
		return FH_FAIL;
	double dt = fh_now() - t0;
	if (dt > w->close_max)
		w->close_max = dt;
	for (int i = 0; i < d->n; i++)
		fh_buf_free(&d->b[i]);
	memset(d, 0, sizeof(*d));
	return FH_OK;
}

/* Rank 0's side of one round; all: every message is received (the last round). */
static int cr_send_round(struct cr_thread *w, int round, int all)
{
	struct cr_dir d;
	memset(&d, 0, sizeof(d));
	int last = all ? CR_MSGS : CR_TAKEN;
	if (cr_link(w, round, &d.comm, NULL) || cr_post_sends(w, &d, round, last, 1, NULL))
		return FH_FAIL;
	for (int i = 0; i < last; i++)
		if (cr_wait(w, d.req[i], d.b[i].size, "send", round, i))
			return FH_FAIL;
	return cr_close(w, &d, 1, round);
}

/* Rank 1's side of one round. */
static int cr_recv_round(struct cr_thread *w, int round, int all)
{
	struct cr_dir d;
	memset(&d, 0, sizeof(d));
	if (cr_link(w, round, NULL, &d.comm) ||
	    cr_post_recvs(w, &d, round, all ? CR_MSGS : CR_POSTED) ||
	    cr_take(w, &d, round, all ? CR_MSGS : CR_TAKEN, 0))
		return FH_FAIL;
	return cr_close(w, &d, 0, round);
}

/* Both ranks alike (close-reconnect/both): a send comm to the peer and a
 * receive comm from it; each posts its receives, then its sends, takes part of
 * what comes, and closes both with sends and receives in flight (half the
 * threads the send comm first); the last round moves everything. */
static int cr_both_round(struct cr_thread *w, int round, int all)
{
	int peer = 1 - w->ck->r->rank, last = all ? CR_MSGS : CR_TAKEN;
	struct cr_dir tx, rx;
	memset(&tx, 0, sizeof(tx));
	memset(&rx, 0, sizeof(rx));
	if (cr_link(w, round, &tx.comm, &rx.comm) ||
	    cr_post_recvs(w, &rx, round, all ? CR_MSGS : CR_POSTED) ||
	    cr_post_sends(w, &tx, round, last, peer, &rx) || cr_take(w, &rx, round, last, peer))
		return FH_FAIL;
	for (int i = 0; i < last; i++)
		if (cr_wait(w, tx.req[i], tx.b[i].size, "send", round, i))
			return FH_FAIL;
	/* rank 1 closes first what rank 0 closes last: neither close waits on the other */
	if ((w->t + w->ck->r->rank) % 2)
		return cr_close(w, &rx, 0, round) || cr_close(w, &tx, 1, round) ? FH_FAIL : FH_OK;
	return cr_close(w, &tx, 1, round) || cr_close(w, &rx, 0, round) ? FH_FAIL : FH_OK;
}

/* What another plugin's suite does (close-reconnect/burst): both ranks link
 * both ways; rank 0 posts CR_BURST sends of 1 MiB, rank 1 as many receives,
 * and each closes its comms at once, deregistered first, nothing tested. */
#define CR_BURST 32
static int cr_burst_round(struct cr_thread *w, int round)
{
	ck_t *ck = w->ck;
	int me = ck->r->rank;
	size_t len = ck_cap(ck, 1 * MiB);
	struct cr_dir tx, rx, *d;
	memset(&tx, 0, sizeof(tx));
	memset(&rx, 0, sizeof(rx));
	if (cr_link(w, round, &tx.comm, &rx.comm))
		return FH_FAIL;
	d = me == 0 ? &tx : &rx;
	fh_buf_t bufs[CR_BURST];
	void *req[CR_BURST] = {0};
	for (int i = 0; i < CR_BURST; i++) {
		if (fh_buf_alloc(&bufs[i], len, 0))
			return fh_fail(ck->r, "cannot map a buffer");
		fh_pattern_fill(bufs[i].ptr, len, cr_seed(w, 0, 1, round, i));
		if (ck_ok(ck, fh_buf_reg(ck->net, &bufs[i], d->comm, 0), "regMr()"))
			return FH_FAIL;
		if (me == 0) {
			if (ck_ok(ck, fh_net_isend(ck->net, d->comm, bufs[i].ptr, len, CK_TAG, bufs[i].mh,
						   &req[i]), "isend()"))
				return FH_FAIL;
		} else {
			void *data[1] = {bufs[i].ptr};
			size_t sz[1] = {len};
			int tags[1] = {CK_TAG};
			void *mh[1] = {bufs[i].mh};
			if (ck_ok(ck, fh_net_irecv(ck->net, d->comm, 1, data, sz, tags, mh, &req[i]),
				  "irecv()"))
				return FH_FAIL;
		}
	}
	for (int i = 0; i < CR_BURST; i++)
		if (ck_ok(ck, fh_buf_dereg(ck->net, &bufs[i]), "deregMr() with operations in flight"))
			return FH_FAIL;
	fh_stage(ck->r, "thread %d round %d: closeSend and closeRecv at once", w->t, round);
	double t0 = fh_now();
	if (ck_ok(ck, fh_net_close_send(ck->net, tx.comm), "closeSend() with sends in flight") ||
	    ck_ok(ck, fh_net_close_recv(ck->net, rx.comm), "closeRecv() with receives in flight"))
		return FH_FAIL;
	double dt = fh_now() - t0;
	if (dt > w->close_max)
		w->close_max = dt;
	for (int i = 0; i < CR_BURST; i++)
		fh_buf_free(&bufs[i]);
	return FH_OK;
}

static void *cr_main(void *arg)
{
	struct cr_thread *w = arg;
	int me = w->ck->r->rank;
	for (int round = 0; round <= w->rounds; round++) {
		int all = round == w->rounds;
		int rc = w->both == 2 && !all ? cr_burst_round(w, round) :
			 w->both ? cr_both_round(w, round, all) :
			 me == 0 ? cr_send_round(w, round, all) : cr_recv_round(w, round, all);
		if (rc) {
			w->ret = FH_FAIL;
			return NULL;
		}
	}
	return NULL;
}

/* arg: rounds per thread (closes with operations in flight), then one more
 * that moves every message; both: each rank sends and receives (its own
 * listen comm per thread, handles swapped). */
static int cr_run(ck_t *ck, int both)
{
	fh_rank_t *r = ck->r;
	int me = r->rank, peer = 1 - me;
	struct cr_thread w[CR_THREADS];
	memset(w, 0, sizeof(w));
	for (int t = 0; t < CR_THREADS; t++) {
		w[t].ck = ck;
		w[t].t = t;
		w[t].both = both;
		w[t].rounds = (int)ck->c->arg;
		if ((both || me == 1) &&
		    ck_ok(ck, fh_net_listen(ck->net, ck->net->ctx, ck->dev, w[t].handle, &w[t].lc),
			  "listen()"))
			return FH_FAIL;
	}
	for (int t = 0; t < CR_THREADS; t++) {
		char theirs[NCCL_NET_HANDLE_MAXSIZE];
		if ((both || me == 1) && fh_oob_send(r, peer, w[t].handle, sizeof(w[t].handle)))
			return FH_FAIL;
		if ((both || me == 0) && fh_oob_recv(r, peer, theirs, sizeof(theirs)))
			return FH_FAIL;
		/* w.handle: the peer's listen comm, where this thread connects */
		if (both || me == 0)
			memcpy(w[t].handle, theirs, sizeof(theirs));
	}
	/* a close that gave up waiting for the provider to let go of a buffer,
	 * and a reset of a connection to a peer that is alive (closing too) */
	fh_log_watch("still use NCCL's buffers");
	fh_log_keep("TCP connection");
	pthread_t th[CR_THREADS];
	for (int t = 0; t < CR_THREADS; t++)
		if (pthread_create(&th[t], NULL, cr_main, &w[t]))
			return fh_fail(r, "pthread_create failed");
	double close_max = 0;
	int failed = 0;
	for (int t = 0; t < CR_THREADS; t++) {
		pthread_join(th[t], NULL);
		failed |= w[t].ret;
		if (w[t].close_max > close_max)
			close_max = w[t].close_max;
	}
	unsigned long gave_up = fh_log_watch_count();
	char reset[512];
	fh_log_kept(reset, sizeof(reset));
	fh_log_watch(NULL);
	fh_log_keep(NULL);
	if (failed || fh_failed(r))
		return FH_FAIL;
	if (gave_up)
		return fh_fail(r, "%lu close(s) returned while the provider could still use NCCL's "
				  "buffers (slowest close %.2f s)", gave_up, close_max);
	if (reset[0])
		return fh_fail(r, "a close reset the TCP connection to a peer that is alive: %s", reset);
	for (int t = 0; t < CR_THREADS; t++)
		if ((both || me == 1) &&
		    ck_ok(ck, fh_net_close_listen(ck->net, w[t].lc), "closeListen()"))
			return FH_FAIL;
	fh_note(r, "%d threads x %d closes in flight + 1 full round; slowest close %.2f s",
		CR_THREADS, (int)ck->c->arg, close_max);
	return fh_oob_barrier(r);
}

static int ck_close_reconnect(ck_t *ck)
{
	return cr_run(ck, 0);
}

static int ck_close_reconnect_both(ck_t *ck)
{
	return cr_run(ck, 1);
}

static int ck_close_reconnect_burst(ck_t *ck)
{
	return cr_run(ck, 2);
}

/* ------------------------------------------------------------ table */

#define ALLV FH_VERSION_MIN, FH_VERSION_MAX

static const ck_case_t ck_errors[] = {
	{"send-larger/eager", "8 KiB into a 4 KiB receive: ncclInvalidUsage + WARN, guard intact",
	 2, ALLV, 0, 0, ck_send_larger, 8 * KiB},
	{"send-larger/lazy", "20 KiB into a 10 KiB receive (spilled or bounced, so the "
			     "length shows it): ncclInvalidUsage + WARN, guard intact",
	 2, ALLV, 0, 0, ck_send_larger, 20 * KiB},
	{"send-larger/lazy-cts", "96 KiB into a 48 KiB receive: above tcp's eager limit, into a "
				 "receive whose CTS is lazy: ncclInvalidUsage + WARN, guard intact",
	 2, ALLV, 0, 0, ck_send_larger, 96 * KiB},
	{"send-larger/early", "192 KiB into a 96 KiB receive posted after the send: above tcp's "
			      "eager limit, an early send: ncclInvalidUsage + WARN, guard intact",
	 2, ALLV, 0, 0, ck_send_larger_early, 192 * KiB},
	{"send-larger/rndv", "1 MiB into a 512 KiB receive: ncclInvalidUsage + WARN, guard intact",
	 2, ALLV, 0, 0, ck_send_larger, 0},
	{"recv-half-posted", "a grouped receive whose second buffer the provider refuses "
			     "(testhmem): test() fails with a WARN in bounded time, close works",
	 2, ALLV, 0, 0, ck_recv_half_posted, 0},
	{"corrupt-handle", "connect with flipped/random/zero handles fails, then a good one works",
	 2, ALLV, CK_NETNS, 120, ck_corrupt_handle, 0},
	{"close-inflight/both", "close comms with sends and receives in flight, twice; then a new "
				"connection works",
	 2, ALLV, 0, 0, ck_close_inflight, 3},
	{"close-inflight/recvs", "close with receives in flight that nothing will match", 2, ALLV,
	 0, 0, ck_close_inflight, 2},
	{"close-inflight/sends", "close with sends in flight that no receive matches", 2, ALLV, 0,
	 0, ck_close_inflight, 1},
	{"close-inflight/dropped", "a 1 MiB write's refused pieces dropped at deregMr: closeSend "
				   "does not wait for the receiver to take that message; then a new "
				   "connection works (NCCL_FABRIC_CHECK_DROPPED=1 insists on a drop)",
	 2, ALLV, 0, 0, ck_close_dropped, 0},
	{"close-inflight/1000", "1000 closes with receives in flight (every 4th with sends too), "
				"then a new connection moves data",
	 2, ALLV, 0, 0, ck_close_inflight_many, 1000},
	{"close-early/sender-exits", "eager sends complete, the sender closes and exits; the "
				     "receiver posts 300 ms later: every byte arrives",
	 2, ALLV, 0, 0, ck_sender_exits, 0},
	{"close-reconnect", "4 threads each close a send comm with sends in flight (and the peer "
			    "its receive comm with a receive in flight), then connect again to the "
			    "same peer, 6 times; received data checked, buffers unmapped at close",
	 2, ALLV, 0, 0, ck_close_reconnect, 6},
	{"close-reconnect/both", "4 threads on each rank send and receive, close both comms with "
				 "sends and receives in flight, connect again, 20 times; received "
				 "data checked, buffers unmapped at close, no reset of a live peer",
	 2, ALLV, 0, 0, ck_close_reconnect_both, 20},
	{"close-reconnect/burst", "4 threads link both ways; rank 0 posts 32 sends of 1 MiB, rank 1 "
				  "32 receives, both deregister and close at once, 20 times; then "
				  "every message both ways, checked; no reset of a live peer",
	 2, ALLV, 0, 0, ck_close_reconnect_burst, 20},
};

const ck_case_t *ck_cases_errors(int *n)
{
	*n = (int)(sizeof(ck_errors) / sizeof(ck_errors[0]));
	return ck_errors;
}
