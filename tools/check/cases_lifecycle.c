/*
 * cases_lifecycle.c - load/init/finalize/unload as NCCL 2.28+ does it.
 *
 * NCCL 2.28 calls init once per communicator (each its own ctx), dlcloses the
 * plugin after the last finalize and may load it again in the same process;
 * it also calls finalize after a failed init. A plugin that leaves a thread or
 * a signal handler behind in unloaded code crashes the application later.
 */
#include "check.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define KiB ((size_t)1024)

/* One load..unload round with a transfer in the middle. */
static int ck_reload_round(ck_t *ck, fh_net_t *net, int round, const ck_objs_t *before,
			   ck_objs_t *loaded)
{
	fh_rank_t *r = ck->r;
	char err[600];
	fh_stage(r, "round %d: load and init", round);
	if (fh_net_open(net, ck->o->plugin, ck->version, err, sizeof(err)))
		return fh_fail(r, "round %d: %s", round, err);
	ck->net = net;
	if (ck_ok(ck, fh_net_init(net), round ? "init() after dlclose and dlopen" : "init()"))
		return FH_FAIL;
	int ndev = 0;
	if (ck_ok(ck, fh_net_devices(net, &ndev), "devices()"))
		return FH_FAIL;
	if (ndev <= ck->dev)
		return fh_fail(r, "round %d: devices() returned %d", round, ndev);
	if (ck_ok(ck, fh_net_get_properties(net, ck->dev, &ck->props), "getProperties()"))
		return FH_FAIL;
	void *sc, *rc;
	if (fh_link_self(r, net, ck->dev, &sc, &rc) ||
	    ck_oneway(ck, sc, rc, 0, 0, 110 + round, 4, ck_cap(ck, 256 * KiB), 4) ||
	    ck_close_pair(ck, sc, rc))
		return FH_FAIL;
	fh_stage(r, "round %d: finalize and dlclose", round);
	if (ck_ok(ck, fh_net_finalize(net, net->ctx), "finalize()"))
		return FH_FAIL;
	ck_objs_t *now = calloc(1, sizeof(*now));
	if (!now)
		return fh_fail(r, "out of memory");
	ck_objs_snapshot(now);
	ck_objs_new(before, now, loaded);
	free(now);
	fh_net_unload(net);
	ck->net = NULL;
	return FH_OK;
}

/* After finalize + dlclose: no thread and no signal handler may be left. */
static int ck_after_unload(ck_t *ck, int round, int threads0, const ck_objs_t *loaded)
{
	fh_rank_t *r = ck->r;
	/* Threads told to exit in finalize may take a moment to be gone. */
	double until = fh_now() + 2.0 * r->timeout_mult;
	int threads = ck_thread_count();
	while (threads > threads0 && fh_now() < until) {
		struct timespec ts = {0, 10 * 1000 * 1000};
		nanosleep(&ts, NULL);
		threads = ck_thread_count();
	}
	if (threads > threads0) {
		char names[256];
		ck_thread_names(names, sizeof(names));
		return fh_fail(r, "round %d: %d thread(s) still running after finalize + dlclose "
				  "(%d before the first dlopen): %s",
			       round, threads - threads0, threads0, names);
	}
	char msg[512];
	int segs = fh_shm_segments(getpid(), 0, msg, sizeof(msg));
	if (segs)
		return fh_fail(r, "round %d: after finalize + dlclose, %d libfabric shm segment(s) "
				  "remain, e.g. %s (an endpoint was not closed)",
			       round, segs, msg);
	if (ck_handlers_check(loaded, msg, sizeof(msg)))
		return fh_fail(r, "round %d: after finalize + dlclose, %s", round, msg);
	return FH_OK;
}

static int ck_reload(ck_t *ck)
{
	fh_rank_t *r = ck->r;
	int threads0 = ck_thread_count();
	ck_objs_t *before = calloc(1, sizeof(*before));
	ck_objs_t *loaded = calloc(1, sizeof(*loaded));
	fh_net_t *net = calloc(1, sizeof(*net));
	if (!before || !loaded || !net)
		return fh_fail(r, "out of memory");
	ck_objs_snapshot(before);
	for (int round = 0; round < 2; round++) {
		if (ck_reload_round(ck, net, round, before, loaded) ||
		    ck_after_unload(ck, round, threads0, loaded))
			return FH_FAIL;
		void *still = dlopen(ck->o->plugin, RTLD_NOW | RTLD_NOLOAD);
		if (still) {
			if (round == 0)
				fh_note(r, "plugin stays mapped after dlclose");
			dlclose(still);
		}
	}
	/* Which of the libraries the plugin brought in stayed (informational). */
	ck_objs_t *now = calloc(1, sizeof(*now));
	if (now) {
		ck_objs_snapshot(now);
		int stayed = 0;
		for (int i = 0; i < loaded->n; i++)
			for (int j = 0; j < now->n; j++)
				if (!strcmp(now->obj[j].name, loaded->obj[i].name))
					stayed++;
		fh_note(r, "%d of %d libraries loaded with the plugin stay after unload", stayed,
			loaded->n);
		free(now);
	}
	free(before);
	free(loaded);
	free(net);
	return FH_OK;
}

static int ck_failed_init(ck_t *ck)
{
	fh_rank_t *r = ck->r;
	static const char bogus[] = "nonexistent-provider-for-check";
	/* This rank's own environment: the plugin reads it at load/init. */
	setenv("NCCL_FABRIC_PROVIDER", bogus, 1);
	fh_net_t *net = calloc(1, sizeof(*net));
	if (!net)
		return fh_fail(r, "out of memory");
	char err[600];
	if (fh_net_open(net, ck->o->plugin, ck->version, err, sizeof(err)))
		return fh_fail(r, "%s", err);
	ck->net = net;
	unsigned long warns = fh_log_warn_count();
	void *ctx = NULL;
	ncclResult_t res = fh_net_init_ctx(net, &ctx);
	if (res != ncclSuccess) {
		fh_note(r, "init returned %s%s", fh_result_str(res),
			fh_log_warn_count() > warns ? " with a WARN" : " without a WARN");
		if (fh_net_has_finalize(net)) {
			/* NCCL 2.28.9 does this, with whatever init left in ctx. */
			fh_stage(r, "finalize(ctx=%p) after a failed init", ctx);
			ncclResult_t fin = fh_net_finalize(net, ctx);
			fh_note(r, "finalize after it returned %s", fh_result_str(fin));
			fh_net_unload(net);
		}
	} else {
		int ndev = -1;
		res = fh_net_devices(net, &ndev);
		if (res == ncclSuccess && ndev > 0)
			return fh_fail(r, "NCCL_FABRIC_PROVIDER=%s names no provider, yet init() "
					  "succeeded and devices() returned %d",
				       bogus, ndev);
		fh_note(r, "init ok, devices() returned %s/%d", fh_result_str(res), ndev);
		if (fh_net_has_finalize(net)) {
			if (ck_ok(ck, fh_net_finalize(net, ctx), "finalize() after init with no devices"))
				return FH_FAIL;
			fh_net_unload(net);
		}
	}
	/* v6-v10: NCCL never unloads those; the library stays until exit. */
	ck->net = NULL;
	free(net);
	return FH_OK;
}

static int ck_multi_ctx(ck_t *ck)
{
	fh_rank_t *r = ck->r;
	fh_net_t *net = ck->net;
	void *ctx2 = NULL;
	/* A second communicator: its own init and ctx. */
	if (ck_ok(ck, fh_net_init_ctx(net, &ctx2), "second init()"))
		return FH_FAIL;
	int ndev = 0;
	if (ck_ok(ck, fh_net_devices(net, &ndev), "devices() after a second init"))
		return FH_FAIL;
	if (ndev != ck->ndev)
		return fh_fail(r, "devices() returned %d after a second init, %d before", ndev,
			       ck->ndev);
	/* Listen in ctx 1, connect from ctx 2, on one thread. */
	char handle[NCCL_NET_HANDLE_MAXSIZE];
	void *lc = NULL, *sc = NULL, *rc = NULL;
	if (ck_ok(ck, fh_net_listen(net, net->ctx, ck->dev, handle, &lc), "listen(ctx1)"))
		return FH_FAIL;
	if (!lc)
		return fh_fail(r, "listen() returned no listen comm");
	unsigned idle = 0;
	fh_stage(r, "connect from ctx2 to a listen comm of ctx1");
	while (!sc || !rc) {
		if (!sc && ck_ok(ck, fh_net_connect(net, ctx2, ck->dev, handle, &sc), "connect(ctx2)"))
			return FH_FAIL;
		if (!rc && ck_ok(ck, fh_net_accept(net, lc, &rc), "accept()"))
			return FH_FAIL;
		fh_relax(&idle);
	}
	if (ck_ok(ck, fh_net_close_listen(net, lc), "closeListen()"))
		return FH_FAIL;
	if (ck_oneway(ck, sc, rc, 0, 0, 120, 4, ck_cap(ck, 256 * KiB), 4) ||
	    ck_close_pair(ck, sc, rc))
		return FH_FAIL;
	/* Finalizing one communicator's ctx leaves the other working. */
	if (ck_ok(ck, fh_net_finalize(net, ctx2), "finalize(ctx2)"))
		return FH_FAIL;
	if (fh_link_self(r, net, ck->dev, &sc, &rc) ||
	    ck_oneway(ck, sc, rc, 0, 0, 121, 4, ck_cap(ck, 256 * KiB), 4) ||
	    ck_close_pair(ck, sc, rc))
		return FH_FAIL;
	return FH_OK;
}

static const ck_case_t ck_lifecycle[] = {
	{"lifecycle/reload", "init, transfer, finalize, dlclose, twice: no thread or signal "
			     "handler left behind",
	 1, 11, 12, CK_OWN_LOAD, 0, ck_reload, 0},
	{"lifecycle/failed-init", "NCCL_FABRIC_PROVIDER=nonexistent: init fails or 0 devices; "
				  "v11+ finalize after it",
	 1, FH_VERSION_MIN, FH_VERSION_MAX, CK_OWN_LOAD, 0, ck_failed_init, 0},
	{"lifecycle/multi-ctx", "two inits (two ctx), connect across them, finalize one", 1, 11,
	 12, 0, 0, ck_multi_ctx, 0},
};

const ck_case_t *ck_cases_lifecycle(int *n)
{
	*n = (int)(sizeof(ck_lifecycle) / sizeof(ck_lifecycle[0]));
	return ck_lifecycle;
}
