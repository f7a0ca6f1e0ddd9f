/*
 * policy_tuner.h - what the tuner (NCCL's tuner plugin, abi/abi_tuner.c)
 * changes in NCCL's cost table for one collective, as a pure function.
 *
 * The rule, conservative by design (the tuner must never make a size slower
 * than NCCL's own choice, so where in doubt it changes nothing):
 *  - only when NCCL_FABRIC_TUNER is on and the communicator spans several
 *    nodes (nNodes > 1: traffic goes through this plugin);
 *  - only for the five collectives that use the cost table (broadcast, reduce,
 *    all_gather, reduce_scatter, all_reduce), and only from
 *    POLICY_TUNE_MIN_BYTES on;
 *  - only when Ring/Simple is available (>= 0) and NCCL's model puts it within
 *    POLICY_TUNE_SLACK of the cheapest entry: then Ring/Simple is made the
 *    cheapest (its cost set just below NCCL's pick), so NCCL picks it. Ring
 *    with the Simple protocol moves the most payload per network message (LL
 *    carries a flag per 8 bytes, LL128 per 128) in one steady stream per
 *    channel, which is what a proxy-driven network plugin moves best; far
 *    from the cheapest, NCCL's model is trusted.
 * Never: an entry NCCL marked unavailable (< 0) is never touched or made
 * available, no other entry changes, and the channel count is left to NCCL
 * (from 2 MiB on NCCL already gives Ring/Simple every channel the
 * communicator has, and a tuner cannot add channels).
 */
#ifndef POLICY_TUNER_H
#define POLICY_TUNER_H

#include <stddef.h>

/* Below this size NCCL's choice stands: small and mid-sized collectives are
 * latency-bound, and the measurements (docs/results.md) show changes there
 * (more channels) costing up to 3x at 128 KiB. */
#define POLICY_TUNE_MIN_BYTES (4u << 20)
/* Ring/Simple is chosen only when NCCL's model rates it at most this many
 * times the cost of NCCL's own pick. */
#define POLICY_TUNE_SLACK 1.5f
/* Ring/Simple's new cost: this fraction of NCCL's pick (strictly cheaper, as
 * NCCL takes the first of equal entries). */
#define POLICY_TUNE_UNDERCUT 0.99f

enum policy_tune_verdict {
	POLICY_TUNE_OFF,         /* NCCL_FABRIC_TUNER=off */
	POLICY_TUNE_ONE_NODE,    /* nNodes <= 1: no traffic through the network */
	POLICY_TUNE_NOT_COLL,    /* not a cost-table collective */
	POLICY_TUNE_SMALL,       /* below POLICY_TUNE_MIN_BYTES */
	POLICY_TUNE_NO_TABLE,    /* no table, or one too small to hold Ring/Simple */
	POLICY_TUNE_UNAVAILABLE, /* Ring/Simple marked unavailable (NCCL_ALGO/PROTO...) */
	POLICY_TUNE_ALREADY,     /* Ring/Simple is already NCCL's pick */
	POLICY_TUNE_FAR,         /* Ring/Simple costs more than SLACK x NCCL's pick */
	POLICY_TUNE_RING_SIMPLE, /* changed: Ring/Simple made the cheapest */
	POLICY_TUNE_VERDICTS
};

struct policy_tune_in {
	int enabled;      /* NCCL_FABRIC_TUNER is not off */
	size_t nnodes;    /* the communicator's nodes (init's nNodes) */
	int coll;         /* ncclFunc_t */
	size_t nbytes;    /* getCollInfo's nBytes */
	const float *table; /* the cost table, [nalgo][nproto], row-major */
	int nalgo, nproto;
};

struct policy_tune_out {
	enum policy_tune_verdict verdict;
	int changed;          /* 1: set table[algo][proto] to cost */
	int algo, proto;      /* the entry to change (-1 when none) */
	float cost;
	int from_algo, from_proto; /* NCCL's pick before (-1 when none) */
	float from_cost, ring_cost;
	int nchannels;        /* 0: NCCL's own channel count */
};

/* Decides; never reads or writes anything but its arguments. */
void policy_tune(const struct policy_tune_in *in, struct policy_tune_out *out);
/* The decision in words, for the log (not needed on the hot path). */
void policy_tune_reason(const struct policy_tune_in *in, const struct policy_tune_out *out,
			char *buf, size_t len);
const char *policy_tune_coll_name(int coll);
const char *policy_tune_algo_name(int algo);
const char *policy_tune_proto_name(int proto);

#endif
