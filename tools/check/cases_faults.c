/*
 * cases_faults.c - a peer that dies or pauses. What a provider author and a
 * user need: a dead peer becomes an error in bounded time, on both sides of
 * a connection, and a peer that is only paused does not.
 *
 * The victim leaves with _exit() at a chosen point, as a killed process would:
 * no close, no finalize; the kernel closes its sockets.
 */
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

#define KiB ((size_t)1024)
#define MiB ((size_t)1024 * 1024)

/* How long a survivor may take to see the death: the plugin pings after 1 s
 * without a sign of life and gives up after NCCL_FABRIC_PEER_TIMEOUT (8 s). */
#define CK_DEATH_BOUND_S 15.0

static int link_0to1(ck_t *ck, void **sc, void **rc)
{
	int me = ck->r->rank;
	return fh_link(ck->r, ck->net, ck->dev, me == 0 ? 1 : -1, me == 1 ? 0 : -1, sc, rc);
}

/* Tests req until it fails or completes; *res is the result, *secs the time. */
static int wait_result(ck_t *ck, void *req, double bound, ncclResult_t *res, int *done,
		       double *secs)
{
	double start = fh_now(), until = start + bound;
	unsigned idle = 0;
	int size = -1;
	*done = 0;
	for (;;) {
		*res = fh_net_test(ck->net, req, done, &size);
		if (*res != ncclSuccess || *done)
			break;
		if (fh_now() > until)
			return fh_fail(ck->r, "test() neither failed nor completed within %.0f s", bound);
		fh_relax(&idle);
	}
	*secs = fh_now() - start;
	return FH_OK;
}

/* The sender's bytes of the mid-transfer case, and the receiver's check. */
static uint8_t ck_pattern_byte(size_t i)
{
	return (uint8_t)((i * 2654435761u) >> 13);
}

static void ck_buf_fill_pattern(fh_buf_t *b, size_t len)
{
	uint8_t *p = b->ptr;
	for (size_t i = 0; i < len; i++)
		p[i] = ck_pattern_byte(i);
}

static int ck_buf_check_pattern(const fh_buf_t *b, size_t len)
{
	const uint8_t *p = b->ptr;
	for (size_t i = 0; i < len; i++)
		if (p[i] != ck_pattern_byte(i))
			return -1;
	return 0;
}

/* A registered buffer of len bytes on this rank's end, then a barrier. */
static int buf_ready(ck_t *ck, void *sc, void *rc, size_t len, fh_buf_t *b)
{
	if (fh_buf_alloc(b, len, 0))
		return fh_fail(ck->r, "cannot map a buffer");
	if (ck_ok(ck, fh_buf_reg(ck->net, b, ck->r->rank == 0 ? sc : rc, 0), "regMr()"))
		return FH_FAIL;
	return fh_oob_barrier(ck->r) ? FH_FAIL : FH_OK;
}

/* A connection from rank 0 to rank 1 and a registered buffer of len bytes
 * on each end (buf_ready). */
static int link_with_buffer(ck_t *ck, void **sc, void **rc, size_t len, fh_buf_t *b)
{
	if (link_0to1(ck, sc, rc))
		return FH_FAIL;
	return buf_ready(ck, *sc, *rc, len, b);
}

/* Posts a receive of len bytes into b and tests it for `secs`: its
 * clear-to-send goes out and the sender's data starts to flow. *done says
 * whether it already completed. */
static int recv_started(ck_t *ck, void *rc, fh_buf_t *b, size_t len, double secs, void **req,
			int *done)
{
	void *data[1] = {b->ptr};
	size_t sz[1] = {len};
	int tags[1] = {CK_TAG};
	void *mhs[1] = {b->mh};
	*req = NULL;
	*done = 0;
	if (ck_ok(ck, fh_net_irecv(ck->net, rc, 1, data, sz, tags, mhs, req), "irecv()") || !*req)
		return fh_fail(ck->r, "irecv() gave no request");
	int size = -1;
	double until = fh_now() + secs;
	while (!*done && fh_now() < until)
		if (ck_ok(ck, fh_net_test(ck->net, *req, done, &size), "test()"))
			return FH_FAIL;
	return FH_OK;
}

/* isend of len bytes from b, retried until the receiver's clear-to-send
 * lets it post (within the death bound). */
static int send_posted(ck_t *ck, void *sc, fh_buf_t *b, size_t len, void **req)
{
	double until = fh_now() + CK_DEATH_BOUND_S * ck->r->timeout_mult;
	unsigned idle = 0;
	*req = NULL;
	while (!*req) {
		if (ck_ok(ck, fh_net_isend(ck->net, sc, b->ptr, len, CK_TAG, b->mh, req), "isend()"))
			return FH_FAIL;
		if (!*req && fh_now() > until)
			return fh_fail(ck->r, "isend() of %zu bytes got no clear-to-send", len);
		if (!*req)
			fh_relax(&idle);
	}
	return FH_OK;
}

/* What a survivor does: rank 0 sends a message that waits for its
 * clear-to-send, rank 1 posts a receive; each must end with an error and a
 * WARN within the bound, and the broken connection must close. */
static int ck_expect_peer_error_or(ck_t *ck, void *sc, void *rc, fh_buf_t *bp, size_t len,
				   const char *what, const char *delivered);

static int ck_expect_peer_error(ck_t *ck, void *sc, void *rc, fh_buf_t *bp, size_t len,
				const char *what)
{
	return ck_expect_peer_error_or(ck, sc, rc, bp, len, what, NULL);
}

/* ... where the receive may also complete whole when `delivered` (the
 * provider's explanation) is not NULL: then every byte must be the sender's. */
static int ck_expect_peer_error_or(ck_t *ck, void *sc, void *rc, fh_buf_t *bp, size_t len,
				   const char *what, const char *delivered)
{
	fh_rank_t *r = ck->r;
	fh_net_t *net = ck->net;
	int me = r->rank;
	fh_buf_t b = *bp;
	double bound = CK_DEATH_BOUND_S * r->timeout_mult;
	unsigned long warns = fh_log_warn_count();
	ncclResult_t res = ncclSuccess;
	int done = 0;
	double secs = 0;
	void *req = NULL;
	if (me == 1) {
		fh_stage(r, "receive posted: %s", what);
		void *data[1] = {b.ptr};
		size_t sz[1] = {len};
		int tags[1] = {CK_TAG};
		void *mhs[1] = {b.mh};
		double start = fh_now();
		/* a peer already known to be gone may fail the post itself */
		res = fh_net_irecv(net, rc, 1, data, sz, tags, mhs, &req);
		if (res == ncclSuccess && !req)
			return fh_fail(r, "irecv() returned a NULL request");
		if (res == ncclSuccess && wait_result(ck, req, bound, &res, &done, &secs))
			return FH_FAIL;
		if (!req)
			secs = fh_now() - start;
	} else {
		fh_stage(r, "isend of %zu bytes: %s", len, what);
		double start = fh_now(), until = start + bound;
		unsigned idle = 0;
		for (;;) {
			res = fh_net_isend(net, sc, b.ptr, len, CK_TAG, b.mh, &req);
			if (res != ncclSuccess || req)
				break;
			if (fh_now() > until)
				return fh_fail(r, "isend() kept returning a NULL request for %.0f s after "
						  "the peer was lost", bound);
			fh_relax(&idle);
		}
		if (res == ncclSuccess && req && wait_result(ck, req, bound - (fh_now() - start), &res,
							     &done, &secs))
			return FH_FAIL;
		secs = fh_now() - start;
	}
	if (res == ncclSuccess && delivered) {
		if (me == 1 && ck_buf_check_pattern(&b, len))
			return fh_fail(r, "%s; the receive completed, but its data is not the sender's",
				       what);
		fh_note(r, "%s, but the whole message had been delivered (%s)", what, delivered);
		return ck_ok(ck, me == 0 ? fh_net_close_send(net, sc) : fh_net_close_recv(net, rc),
			     "close") ? FH_FAIL : FH_OK;
	}
	if (res == ncclSuccess)
		return fh_fail(r, "the operation completed with ncclSuccess although %s", what);
	/* NCCL tells a lost peer from a local failure by this code alone */
	if (res != ncclRemoteError)
		return fh_fail(r, "%s, but the operation failed with %s, not ncclRemoteError", what,
			       fh_result_str(res));
	/* a post that failed may come after the WARN of the liveness check that
	 * found the peer gone first: then any WARN of this rank counts */
	if (fh_log_warn_count() == (req ? warns : 0))
		return fh_fail(r, "%s without a WARN", fh_result_str(res));
	fh_note(r, "%s: %s %s after %.2f s", what, fh_result_str(res),
		req ? "from test()" : "from the post", secs);
	/* closing the broken connection must not hang either */
	if (ck_ok(ck, me == 0 ? fh_net_close_send(net, sc) : fh_net_close_recv(net, rc), "close"))
		return FH_FAIL;
	return FH_OK;
}


/* arg 0: the receiver waits on an idle receive, the sender dies.
 * arg 1: the sender waits for a large message's clear-to-send, the receiver dies. */
static int ck_peer_death(ck_t *ck)
{
	fh_rank_t *r = ck->r;
	int me = r->rank;
	/* The plugin learns of a dead peer from pings that go unanswered (or
	 * that the provider fails): the same on every provider, shared memory
	 * included, where a send into a dead process's queue completes. */
	int victim = ck->c->arg == 0 ? 0 : 1;
	void *sc = NULL, *rc = NULL;
	size_t len = ck_cap(ck, ck->c->arg == 0 ? 64 * KiB : 1 * MiB);
	fh_buf_t b;
	if (link_with_buffer(ck, &sc, &rc, len, &b))
		return FH_FAIL;
	if (me == victim) {
		fh_stage(r, "dying without closing anything");
		fh_rank_die(r, "died on purpose");
	}
	return ck_expect_peer_error(ck, sc, rc, &b, len, me == 1 ? "the sender died" :
						      "the receiver died");
}

/* The receiver dies with a large receive under way (arg 1): over shm on
 * libfabric 1.17 its progress may hold its region's lock, and a post to it
 * would spin forever. The sender must end with ncclRemoteError, or complete
 * where the receiver had already copied everything. */
static int ck_peer_death_mid_recv_side(ck_t *ck, void *sc, void *rc, fh_buf_t *b, size_t len)
{
	fh_rank_t *r = ck->r;
	if (r->rank == 0)
		return ck_expect_peer_error_or(ck, sc, rc, b, len, "the receiver died mid-transfer",
					       "the provider had moved it all before the death");
	void *req = NULL;
	int done = 0;
	if (recv_started(ck, rc, b, len, 0.005, &req, &done))
		return FH_FAIL;
	fh_stage(r, "dying %s a receive of %zu bytes", done ? "after" : "in the middle of", len);
	fh_rank_die(r, "died on purpose");
	return FH_FAIL;
}

/* The sender dies part way through a large message, with its data moving
 * (arg 0): the receive fails with ncclRemoteError, whatever error the provider
 * reports for the broken transfer. */
static int ck_peer_death_mid(ck_t *ck)
{
	fh_rank_t *r = ck->r;
	int me = r->rank;
	void *sc = NULL, *rc = NULL;
	size_t len = ck_cap(ck, 256 * MiB);
	fh_buf_t b;
	if (link_with_buffer(ck, &sc, &rc, len, &b))
		return FH_FAIL;
	if (ck->c->arg == 1)
		return ck_peer_death_mid_recv_side(ck, sc, rc, &b, len);
	if (me == 1)
		return ck_expect_peer_error_or(ck, sc, rc, &b, len, "the sender died mid-transfer",
					       "the provider had moved it all before the death");
	ck_buf_fill_pattern(&b, len);
	void *req = NULL;
	if (send_posted(ck, sc, &b, len, &req))
		return FH_FAIL;
	int done = 0, size = -1;
	for (int i = 0; i < 3 && !done; i++) /* a few steps: part of the data is on its way */
		if (ck_ok(ck, fh_net_test(ck->net, req, &done, &size), "test()"))
			return FH_FAIL;
	/* (a shared-memory receiver may have copied it all already) */
	fh_stage(r, "dying %s a transfer of %zu bytes", done ? "after" : "in the middle of", len);
	fh_rank_die(r, "died on purpose");
	return FH_FAIL;
}

/* The receiver dies without closing while three connections to it each hold
 * a message it never took (eager: the sends completed). closeSend waits for
 * the receiver to take what it was sent, bounded; a peer that let one close
 * wait in vain (shm: the ping completes into the dead process's queue) is not
 * waited for again, so a job whose peer is gone tears down at once. */
static int ck_peer_gone_close(ck_t *ck)
{
	fh_rank_t *r = ck->r;
	int me = r->rank;
	enum { N = 3 };
	void *sc[N] = {NULL}, *rc[N] = {NULL};
	long eager = ck_eager_max(ck, 100);
	if (eager == 0)
		return fh_skip(r, "no message leaves before its receive is posted here (eager limit "
				  "0: a provider without FI_TAGGED writes every one)");
	for (int i = 0; i < N; i++)
		if (link_0to1(ck, &sc[i], &rc[i]))
			return FH_FAIL;
	ck_side_t side[N];
	ck_side_t *sides[N];
	if (me == 0) {
		for (int i = 0; i < N; i++) {
			size_t size = eager > 0 && eager < 100 ? (size_t)eager : 100;
			uint64_t seed = ck_seed(ck, 0, 1, 120 + i, 0);
			if (ck_side_send(ck, &side[i], sc[i], 1, &size, &seed, CK_TAG))
				return FH_FAIL;
			sides[i] = &side[i];
		}
		if (ck_sides_run(ck, sides, N, 1))
			return FH_FAIL;
	}
	if (fh_oob_barrier(r))
		return FH_FAIL;
	if (me == 1) {
		fh_stage(r, "dying with %d messages untaken", N);
		fh_rank_die(r, "died on purpose");
	}
	struct timespec ts = {0, 200 * 1000 * 1000};
	nanosleep(&ts, NULL);
	double t[N], total = 0;
	for (int i = 0; i < N; i++) {
		double t0 = fh_now();
		if (ck_ok(ck, fh_net_close_send(ck->net, sc[i]), "closeSend() to a dead peer"))
			return FH_FAIL;
		t[i] = fh_now() - t0;
		total += t[i];
		if (ck_side_release(ck, &side[i]))
			return FH_FAIL;
	}
	if (t[1] > 1.0 || t[2] > 1.0 || total > 4.0)
		return fh_fail(r, "closeSend to a dead peer took %.2f, %.2f and %.2f s: only the first "
				  "may wait (bounded at 2 s)", t[0], t[1], t[2]);
	fh_note(r, "closeSend to the dead peer: %.2f, %.2f, %.2f s", t[0], t[1], t[2]);
	return FH_OK;
}

/* Two ranks in two network namespaces joined by a veth pair (CK_NETNS_PAIR)
 * stream checked data; then rank 0 cuts the link (arg 0: sets its end down,
 * arg 1: deletes the pair). Neither process dies and the kernel resets
 * nothing: tcp takes every send into its buffer. Both sides must still end
 * their operations with an error and a WARN within the bound, close, and
 * finalize cleanly. */
static int ck_link_cut(ck_t *ck)
{
	fh_rank_t *r = ck->r;
	fh_net_t *net = ck->net;
	int me = r->rank;
	if (!ck->netns)
		return fh_skip(r, "%s", ck->netns_why);
	const ncclFabricTools_v1_t *tools = fh_net_tools(net);
	const char *prov = tools && tools->provider ? tools->provider() : "";
	/* the test provider emulating a fabric moves its bytes over its base */
	const char *base = strstr(prov, "testhmem") ? getenv("TESTHMEM_BASE") : NULL;
	if (!strcmp(prov, "shm") || !strcmp(prov, "sm2") ||
	    (base && (!strncmp(base, "shm", 3) || !strncmp(base, "sm2", 3))))
		return fh_skip(r, "%s moves data through shared memory%s%s: there is no link to cut",
			       prov, base ? " over its base " : "", base ? base : "");
	void *sc = NULL, *rc = NULL;
	if (link_0to1(ck, &sc, &rc))
		return FH_FAIL;
	/* the link works: a stream of checked messages first */
	enum { N = 8 };
	size_t sizes[N];
	uint64_t seeds[N];
	for (int i = 0; i < N; i++) {
		sizes[i] = ck_cap(ck, (size_t)(i + 1) * 64 * KiB);
		seeds[i] = ck_seed(ck, 0, 1, 11, i);
	}
	ck_side_t side, *sp = &side;
	if (me == 0 ? ck_side_send(ck, &side, sc, N, sizes, seeds, CK_TAG)
		    : ck_side_recv(ck, &side, rc, N, sizes, 0, seeds, CK_TAG))
		return FH_FAIL;
	if (ck_sides_run(ck, &sp, 1, 2) || ck_side_verify(ck, &side, "before the cut") ||
	    ck_side_release(ck, &side))
		return FH_FAIL;
	size_t len = ck_cap(ck, 1 * MiB);
	fh_buf_t b;
	if (buf_ready(ck, sc, rc, len, &b))
		return FH_FAIL;
	const char *how = ck->c->arg == 0 ? "link set dev " CK_LINK_IFACE " down"
					  : "link del " CK_LINK_IFACE;
	if (me == 0) {
		fh_stage(r, "cutting the link: ip %s", how);
		if (ck_ip("%s", how))
			return fh_fail(r, "ip %s failed", how);
	}
	if (fh_oob_barrier(r))
		return FH_FAIL;
	return ck_expect_peer_error(ck, sc, rc, &b, len, ck->c->arg == 0 ? "the link is down" :
									 "the link is gone");
}

/* The sender is stopped (SIGSTOP) for longer than the liveness interval and
 * then resumed: the receiver must not give up on it, and the data arrives. */
static int ck_peer_pause(ck_t *ck)
{
	fh_rank_t *r = ck->r;
	int me = r->rank;
	void *sc = NULL, *rc = NULL;
	if (link_0to1(ck, &sc, &rc))
		return FH_FAIL;
	size_t sizes[1] = {ck_cap(ck, 64 * KiB)};
	uint64_t seeds[1] = {ck_seed(ck, 0, 1, 7, 0)};
	ck_side_t side, *sp = &side;
	if (me == 0 ? ck_side_send(ck, &side, sc, 1, sizes, seeds, CK_TAG)
		    : ck_side_recv(ck, &side, rc, 1, sizes, 0, seeds, CK_TAG))
		return FH_FAIL;
	if (fh_oob_barrier(r))
		return FH_FAIL;
	if (me == 0) {
		fh_stage(r, "stopped for 3 s");
		pid_t self = getpid(), helper = fork();
		if (helper < 0)
			return fh_fail(r, "fork failed");
		if (helper == 0) {
			sleep(3);
			kill(self, SIGCONT);
			_exit(0);
		}
		raise(SIGSTOP);
		waitpid(helper, NULL, 0);
	}
	if (ck_sides_run(ck, &sp, 1, 1))
		return FH_FAIL;
	if (ck_side_verify(ck, &side, "after the pause") || ck_side_release(ck, &side))
		return FH_FAIL;
	if (me == 1)
		fh_note(r, "a paused sender (3 s) was not declared dead; data checked");
	return ck_close_pair(ck, me == 0 ? sc : NULL, me == 1 ? rc : NULL);
}

/* A handle whose listen comm is closed: connect must fail promptly (the
 * listener's endpoint answers with a REJECT), not wait for the connect
 * timeout; a good handle of the same endpoint still connects. The listener
 * meanwhile only calls accept on its other listen comm, as NCCL would. */
static int ck_stale_handle(ck_t *ck)
{
	fh_rank_t *r = ck->r;
	fh_net_t *net = ck->net;
	int me = r->rank;
	char h[2][NCCL_NET_HANDLE_MAXSIZE];
	double bound = 5.0 * r->timeout_mult;
	if (me == 1) {
		void *stale = NULL, *good = NULL, *rc = NULL;
		if (ck_ok(ck, fh_net_listen(net, net->ctx, ck->dev, h[0], &stale), "listen()") ||
		    ck_ok(ck, fh_net_listen(net, net->ctx, ck->dev, h[1], &good), "listen()") ||
		    ck_ok(ck, fh_net_close_listen(net, stale), "closeListen()"))
			return FH_FAIL;
		if (fh_oob_send(r, 0, h, sizeof(h)))
			return FH_FAIL;
		double until = fh_now() + 4 * bound;
		unsigned idle = 0;
		while (!rc) {
			if (ck_ok(ck, fh_net_accept(net, good, &rc), "accept()"))
				return FH_FAIL;
			if (!rc && fh_now() > until)
				return fh_fail(r, "accept() saw no good connection within %.0f s", 4 * bound);
			fh_relax(&idle);
		}
		if (ck_ok(ck, fh_net_close_listen(net, good), "closeListen()"))
			return FH_FAIL;
		return ck_close_pair(ck, NULL, rc);
	}
	if (fh_oob_recv(r, 1, h, sizeof(h)))
		return FH_FAIL;
	unsigned long warns = fh_log_warn_count();
	double start = fh_now();
	int timed_out = 0;
	void *sc = NULL;
	ncclResult_t res = fh_connect_until(r, net, ck->dev, h[0], &sc, bound, &timed_out);
	double secs = fh_now() - start;
	if (sc)
		return fh_fail(r, "connect() through the handle of a closed listen comm succeeded");
	if (timed_out || res == ncclSuccess)
		return fh_fail(r, "connect() through the handle of a closed listen comm did not fail "
				  "within %.0f s", bound);
	if (fh_log_warn_count() == warns)
		return fh_fail(r, "connect() failed with %s but nothing was logged at WARN level",
			       fh_result_str(res));
	fh_note(r, "stale handle: %s after %.3f s", fh_result_str(res), secs);
	res = fh_connect_until(r, net, ck->dev, h[1], &sc, 4 * bound, &timed_out);
	if (!sc)
		return fh_fail(r, "connect() through a good handle of the same endpoint failed: %s%s",
			       fh_result_str(res), timed_out ? " (timed out)" : "");
	return ck_close_pair(ck, sc, NULL);
}

/* A listener that exits without closing: its handle names an address where
 * nothing of the plugin answers any more. connect() must fail within the
 * answer bound (5 s) with a WARN, not wait for NCCL_FABRIC_TIMEOUT. */
static int ck_stale_exited(ck_t *ck)
{
	fh_rank_t *r = ck->r;
	fh_net_t *net = ck->net;
	char h[NCCL_NET_HANDLE_MAXSIZE];
	if (r->rank == 1) {
		void *lc = NULL;
		if (ck_ok(ck, fh_net_listen(net, net->ctx, ck->dev, h, &lc), "listen()") ||
		    fh_oob_send(r, 0, h, sizeof(h)))
			return FH_FAIL;
		fh_rank_die(r, "exited holding a listen comm");
	}
	if (fh_oob_recv(r, 1, h, sizeof(h)))
		return FH_FAIL;
	struct timespec ts = {0, 300 * 1000 * 1000}; /* the listener is gone by then */
	nanosleep(&ts, NULL);
	double bound = 7.0 * r->timeout_mult; /* 5 s of silence, and the start of a provider */
	unsigned long warns = fh_log_warn_count();
	double start = fh_now();
	int timed_out = 0;
	void *sc = NULL;
	ncclResult_t res = fh_connect_until(r, net, ck->dev, h, &sc, bound, &timed_out);
	double secs = fh_now() - start;
	if (sc)
		return fh_fail(r, "connect() to a listener that exited succeeded");
	if (timed_out)
		return fh_fail(r, "connect() to a listener that exited did not fail within %.0f s", bound);
	if (res != ncclRemoteError)
		return fh_fail(r, "connect() to a listener that exited failed with %s, not "
				  "ncclRemoteError", fh_result_str(res));
	if (fh_log_warn_count() == warns)
		return fh_fail(r, "connect() failed with %s but nothing was logged at WARN level",
			       fh_result_str(res));
	fh_note(r, "listener exited: %s after %.2f s", fh_result_str(res), secs);
	return FH_OK;
}

/* A burst of connects through the handle of a closed listen comm, all at
 * once: every one must fail within 5 s with ncclRemoteError, refused by an
 * answer or, where the listener's budget of answers ran short, by the
 * connector's own timeout. */
#define CK_BURST 500
static int ck_stale_burst(ck_t *ck)
{
	fh_rank_t *r = ck->r;
	fh_net_t *net = ck->net;
	char h[NCCL_NET_HANDLE_MAXSIZE];
	if (r->rank == 1) {
		void *lc = NULL;
		if (ck_ok(ck, fh_net_listen(net, net->ctx, ck->dev, h, &lc), "listen()") ||
		    ck_ok(ck, fh_net_close_listen(net, lc), "closeListen()") ||
		    fh_oob_send(r, 0, h, sizeof(h)))
			return FH_FAIL;
		return fh_oob_barrier(r) ? FH_FAIL : FH_OK; /* answer until rank 0 is done */
	}
	if (fh_oob_recv(r, 1, h, sizeof(h)))
		return FH_FAIL;
	/* one handle buffer per connect: the plugin keys a pending connect by it */
	static char hs[CK_BURST][NCCL_NET_HANDLE_MAXSIZE];
	static double failed_at[CK_BURST];
	int left = CK_BURST, remote = 0;
	for (int i = 0; i < CK_BURST; i++) {
		memcpy(hs[i], h, sizeof(h));
		failed_at[i] = 0;
	}
	double bound = 5.0 * r->timeout_mult, start = fh_now(), worst = 0;
	unsigned idle = 0;
	fh_log_watch("nothing answered"); /* the connect's own timeout: an answer was lost */
	while (left > 0) {
		for (int i = 0; i < CK_BURST; i++) {
			if (failed_at[i] > 0)
				continue;
			void *sc = NULL;
			ncclResult_t res = fh_net_connect(net, net->ctx, ck->dev, hs[i], &sc);
			if (sc)
				return fh_fail(r, "connect %d through a closed listen comm's handle succeeded", i);
			if (res == ncclSuccess)
				continue;
			failed_at[i] = fh_now() - start;
			if (failed_at[i] > worst)
				worst = failed_at[i];
			remote += res == ncclRemoteError;
			left--;
		}
		if (left > 0 && fh_now() - start > bound)
			return fh_fail(r, "%d of %d connects through a closed listen comm's handle got no "
					  "answer within %.0f s", left, CK_BURST, bound);
		if (left > 0)
			fh_relax(&idle);
	}
	if (remote != CK_BURST)
		return fh_fail(r, "%d of %d refused connects failed with another code than "
				  "ncclRemoteError", CK_BURST - remote, CK_BURST);
	unsigned long silent = fh_log_watch_count();
	fh_log_watch(NULL);
	fh_note(r, "%d connects failed, the last after %.2f s (%lu by the connector's own timeout, "
		   "the rest refused by an answer)", CK_BURST, worst, silent);
	return fh_oob_barrier(r) ? FH_FAIL : FH_OK;
}


/* ------------------------------------------------------------ a stalled peer at close */

/* How long the receiver of peer-stall/close stays stopped: longer than the
 * sender's close may take (2 s for its messages to be taken, 5 s for the
 * provider, 4 s for the reset), so the close happens while nothing moves. */
#define CK_STALL_S 14

/* Rank 1 sends to rank 0: a fresh connection the other way round. */
static int link_1to0(ck_t *ck, void **sc, void **rc)
{
	int me = ck->r->rank;
	return fh_link(ck->r, ck->net, ck->dev, me == 1 ? 0 : -1, me == 0 ? 1 : -1, sc, rc);
}

/* The receiver of a large message is stopped (SIGSTOP) with the data part
 * way; the sender closes its send comm with the transfer in flight and then
 * frees its buffer, as NCCL does once close returned. The close returns in
 * bounded time; a provider that still holds the transfer then reads unmapped
 * memory, which must fail the transfer, never the sender's process. When the
 * receiver resumes, its receive ends with an error, or whole with the
 * sender's bytes. Then a connection each way between the same processes
 * works; the sender's process keeps its provider moving (it waits in test())
 * until the receiver has seen the old transfer end.
 *
 * Over TCP sockets close has the kernel reset the peer's connection
 * (ofi/ofi_sock.c); before that, it returned with the provider holding the
 * buffer, and the write failed with EFAULT part way once the buffer was
 * gone: the resumed receiver crashed in libfabric, or the two processes
 * could not connect again. Over shm the peer copies from the buffer itself
 * when it resumes: unmapped, that fails (README, known limits). */
static int ck_peer_stall_close(ck_t *ck)
{
	fh_rank_t *r = ck->r;
	fh_net_t *net = ck->net;
	int me = r->rank;
	void *sc = NULL, *rc = NULL;
	size_t len = ck_cap(ck, 64 * MiB);
	fh_buf_t b;
	if (link_with_buffer(ck, &sc, &rc, len, &b))
		return FH_FAIL;
	double bound = CK_DEATH_BOUND_S * r->timeout_mult;
	void *req = NULL;
	int done = 0, size = -1;
	if (me == 1) {
		if (recv_started(ck, rc, &b, len, 0.05, &req, &done) || fh_oob_barrier(r))
			return FH_FAIL;
		fh_stage(r, "stopped for %d s with a receive of %zu bytes under way", CK_STALL_S, len);
		pid_t self = getpid(), helper = fork();
		if (helper < 0)
			return fh_fail(r, "fork failed");
		if (helper == 0) {
			sleep(CK_STALL_S);
			kill(self, SIGCONT);
			_exit(0);
		}
		raise(SIGSTOP);
		waitpid(helper, NULL, 0);
		/* the old transfer ends: an error (its sender closed), or whole */
		ncclResult_t res = ncclSuccess;
		double secs = 0;
		if (!done && wait_result(ck, req, 2 * bound, &res, &done, &secs))
			return FH_FAIL;
		if (res == ncclSuccess && ck_buf_check_pattern(&b, len))
			return fh_fail(r, "the receive completed, but not with the sender's bytes");
		fh_note(r, "the stalled transfer ended %.2f s after the resume: %s", secs,
			res == ncclSuccess ? "whole, the sender's original bytes" : fh_result_str(res));
		if (ck_ok(ck, fh_net_dereg_mr(net, rc, b.mh), "deregMr()") ||
		    ck_ok(ck, fh_net_close_recv(net, rc), "closeRecv()"))
			return FH_FAIL;
		fh_buf_free(&b);
	} else {
		ck_buf_fill_pattern(&b, len);
		if (send_posted(ck, sc, &b, len, &req) || fh_oob_barrier(r))
			return FH_FAIL;
		/* the receiver stops now: push until the provider holds what it cannot send */
		double until = fh_now() + 0.5;
		while (!done && fh_now() < until)
			if (ck_ok(ck, fh_net_test(net, req, &done, &size), "test()"))
				return FH_FAIL;
		if (done)
			return fh_skip(r, "the whole message (%zu bytes) moved before the receiver "
					  "stopped", len);
		fh_log_watch("still use NCCL's buffers");
		fh_stage(r, "closing with %zu bytes in flight to a stopped receiver", len);
		double t0 = fh_now();
		/* NCCL's order on teardown: deregMr, then close */
		if (ck_ok(ck, fh_net_dereg_mr(net, sc, b.mh), "deregMr()") ||
		    ck_ok(ck, fh_net_close_send(net, sc), "closeSend() with a transfer in flight"))
			return FH_FAIL;
		double secs = fh_now() - t0;
		/* NCCL frees the buffer: its pages go (kept unmapped, PROT_NONE, so that
		 * nothing else is placed there while the test runs) */
		if (mmap(b.base, b.map_len, PROT_NONE, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1,
			 0) == MAP_FAILED)
			return fh_fail(r, "cannot unmap the buffer");
		unsigned long gave_up = fh_log_watch_count();
		fh_log_watch(NULL);
		/* over shm the stopped peer itself copies from the buffer: nothing
		 * here can take that back; and a peer stopped holding its region's
		 * lock holds every post to it until it runs again, close included
		 * (README, known limits) */
		const ncclFabricTools_v1_t *tools = fh_net_tools(net);
		const char *prov = tools && tools->provider ? tools->provider() : "";
		bool shared = !strcmp(prov, "shm") || !strcmp(prov, "sm2");
		/* only over sockets can the plugin take its buffers back (a reset);
		 * an RDMA provider, as shm, gives up with a WARN */
		bool sockets = !strncmp(prov, "tcp", 3) || !strncmp(prov, "udp", 3) ||
			       !strcmp(prov, "testhmem");
		if (secs > (shared ? CK_STALL_S + 5 : CK_STALL_S - 2) * r->timeout_mult)
			return fh_fail(r, "closeSend() took %.2f s", secs);
		if (gave_up && sockets)
			return fh_fail(r, "closeSend() returned after %.2f s while the provider could "
					  "still read the buffer (its WARN)", secs);
		fh_note(r, "closeSend() with %zu bytes in flight to a stopped receiver: %.2f s%s", len,
			secs, gave_up ? " (gave up waiting for the provider, with a WARN: no reset "
					"over this provider)" : "");
	}
	/* rank 0 tests a receive from rank 1 (driving its provider) until rank 1
	 * has seen the old transfer end and sends */
	void *sc2 = NULL, *rc2 = NULL;
	if (link_1to0(ck, &sc2, &rc2))
		return FH_FAIL;
	if (ck_oneway(ck, sc2, rc2, 1, 0, 131, 1, ck_cap(ck, 4 * KiB), 1) ||
	    ck_close_pair(ck, sc2, rc2))
		return FH_FAIL;
	if (me == 0)
		fh_buf_free(&b);
	void *sc3 = NULL, *rc3 = NULL;
	if (link_0to1(ck, &sc3, &rc3) ||
	    ck_oneway(ck, sc3, rc3, 0, 1, 132, 4, ck_cap(ck, 1 * MiB), 4))
		return FH_FAIL;
	return ck_close_pair(ck, sc3, rc3);
}

#define ALLV FH_VERSION_MIN, FH_VERSION_MAX

static const ck_case_t ck_faults[] = {
	{"peer-death/recv", "the sender dies while a receive waits: test() fails with "
			    "ncclRemoteError and a WARN within 15 s; closeRecv returns",
	 2, ALLV, 0, 40, ck_peer_death, 0},
	{"peer-death/send", "the receiver dies while isend waits for its clear-to-send: "
			    "ncclRemoteError with a WARN within 15 s; closeSend returns",
	 2, ALLV, 0, 40, ck_peer_death, 1},
	{"peer-death/mid-recv", "the sender dies part way through a 256 MiB message: the receive "
				"fails with ncclRemoteError and a WARN within 15 s",
	 2, ALLV, 0, 40, ck_peer_death_mid, 0},
	{"peer-death/mid-send", "the receiver dies part way through a 256 MiB message: the send "
				"fails with ncclRemoteError and a WARN within 15 s (or completes, "
				"where the receiver had copied it all), never hangs",
	 2, ALLV, 0, 40, ck_peer_death_mid, 1},
	{"peer-death/close", "the receiver dies holding untaken messages of 3 connections: "
			     "only the first closeSend waits (at most 2 s)",
	 2, ALLV, 0, 30, ck_peer_gone_close, 0},
	{"stale-handle", "connect through the handle of a closed listen comm fails within 5 s "
			 "(REJECT), then a good connection works",
	 2, ALLV, 0, 40, ck_stale_handle, 0},
	{"stale-handle/exited", "connect through the handle of a listener whose process exited "
				"fails with ncclRemoteError within 5 s of silence",
	 2, ALLV, 0, 40, ck_stale_exited, 0},
	{"stale-handle/burst", "500 connects at once through the handle of a closed listen comm: "
			       "each fails with ncclRemoteError within 5 s",
	 2, ALLV, 0, 60, ck_stale_burst, 0},
	{"link-cut/down", "two namespaces joined by veth; after checked traffic one end is set "
			  "down: both sides fail with a WARN within 15 s, close and finalize",
	 2, ALLV, CK_NETNS_PAIR, 60, ck_link_cut, 0},
	{"link-cut/delete", "as link-cut/down, but the veth pair is deleted",
	 2, ALLV, CK_NETNS_PAIR, 60, ck_link_cut, 1},
	{"peer-stall/close", "the receiver of 64 MiB is stopped mid-transfer; the sender closes with "
			     "it in flight and unmaps its buffer: close returns within 12 s, having "
			     "made the provider let go (shm: a WARN, and up to the resume if the "
			     "peer stopped holding its lock), the receive ends with an error or "
			     "the sender's bytes; then connections both ways work",
	 2, ALLV, 0, 90, ck_peer_stall_close, 0},
	{"peer-pause", "the sender is stopped for 3 s (SIGSTOP) and resumed: not declared dead, "
		       "the data arrives",
	 2, ALLV, 0, 40, ck_peer_pause, 0},
};

const ck_case_t *ck_cases_faults(int *n)
{
	*n = (int)(sizeof(ck_faults) / sizeof(ck_faults[0]));
	return ck_faults;
}
