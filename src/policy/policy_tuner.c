/* policy_tuner.c - the tuner's decision for one collective (policy_tuner.h). */
#include "policy/policy_tuner.h"

#include <stdio.h>

#include "nccl/nccl_tuner.h"

const char *policy_tune_coll_name(int coll)
{
	static const char *const names[] = {"broadcast",  "reduce",    "all_gather",
					    "reduce_scatter", "all_reduce", "sendrecv",
					    "send",       "recv",      "alltoall",
					    "scatter",    "gather",    "all_gather_v",
					    "put_signal", "signal",    "wait_signal"};
	if (coll < 0 || coll >= (int)(sizeof(names) / sizeof(names[0])))
		return "unknown";
	return names[coll];
}

const char *policy_tune_algo_name(int algo)
{
	static const char *const names[NCCL_TUNER_NUM_ALGOS] = {
		"Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT"};
	if (algo < 0 || algo >= NCCL_TUNER_NUM_ALGOS)
		return "none";
	return names[algo];
}

const char *policy_tune_proto_name(int proto)
{
	static const char *const names[NCCL_TUNER_NUM_PROTOS] = {"LL", "LL128", "Simple"};
	if (proto < 0 || proto >= NCCL_TUNER_NUM_PROTOS)
		return "none";
	return names[proto];
}

void policy_tune(const struct policy_tune_in *in, struct policy_tune_out *out)
{
	*out = (struct policy_tune_out){.verdict = POLICY_TUNE_OFF,
					.algo = -1,
					.proto = -1,
					.from_algo = -1,
					.from_proto = -1,
					.from_cost = -1.0f,
					.ring_cost = -1.0f};
	if (!in->enabled)
		return;
	if (in->nnodes <= 1) {
		out->verdict = POLICY_TUNE_ONE_NODE;
		return;
	}
	if (in->coll < 0 || in->coll >= NCCL_TUNER_NUM_COLLS) {
		out->verdict = POLICY_TUNE_NOT_COLL;
		return;
	}
	if (in->nbytes < POLICY_TUNE_MIN_BYTES) {
		out->verdict = POLICY_TUNE_SMALL;
		return;
	}
	if (!in->table || in->nalgo <= NCCL_ALGO_RING || in->nproto <= NCCL_PROTO_SIMPLE) {
		out->verdict = POLICY_TUNE_NO_TABLE;
		return;
	}
	/* NCCL's own pick: the first lowest entry that is >= 0 */
	float best = 0.0f;
	for (int a = 0; a < in->nalgo; a++) {
		for (int p = 0; p < in->nproto; p++) {
			float c = in->table[a * in->nproto + p];
			if (c >= 0.0f && (out->from_algo < 0 || c < best)) {
				best = c;
				out->from_algo = a;
				out->from_proto = p;
			}
		}
	}
	out->from_cost = best;
	float ring = in->table[NCCL_ALGO_RING * in->nproto + NCCL_PROTO_SIMPLE];
	out->ring_cost = ring;
	if (!(ring >= 0.0f)) { /* also NaN */
		out->verdict = POLICY_TUNE_UNAVAILABLE;
		return;
	}
	if (out->from_algo == NCCL_ALGO_RING && out->from_proto == NCCL_PROTO_SIMPLE) {
		out->verdict = POLICY_TUNE_ALREADY;
		return;
	}
	float target = best * POLICY_TUNE_UNDERCUT;
	if (!(ring <= best * POLICY_TUNE_SLACK) || !(target < best) || target < 0.0f) {
		/* far from NCCL's pick, or that pick costs 0 and nothing is cheaper */
		out->verdict = POLICY_TUNE_FAR;
		return;
	}
	out->verdict = POLICY_TUNE_RING_SIMPLE;
	out->changed = 1;
	out->algo = NCCL_ALGO_RING;
	out->proto = NCCL_PROTO_SIMPLE;
	out->cost = target;
}

void policy_tune_reason(const struct policy_tune_in *in, const struct policy_tune_out *out,
			char *buf, size_t len)
{
	const char *coll = policy_tune_coll_name(in->coll);
	switch (out->verdict) {
	case POLICY_TUNE_OFF:
		snprintf(buf, len, "off (NCCL_FABRIC_TUNER=off): NCCL's choices unchanged");
		break;
	case POLICY_TUNE_ONE_NODE:
		snprintf(buf, len, "%s left to NCCL: one node (%zu), no traffic through the network",
			 coll, in->nnodes);
		break;
	case POLICY_TUNE_NOT_COLL:
		snprintf(buf, len, "%s left to NCCL: not a collective the tuner changes", coll);
		break;
	case POLICY_TUNE_SMALL:
		snprintf(buf, len, "%s below %u bytes left to NCCL (latency-bound sizes)", coll,
			 POLICY_TUNE_MIN_BYTES);
		break;
	case POLICY_TUNE_NO_TABLE:
		snprintf(buf, len, "%s left to NCCL: cost table of %dx%d has no Ring/Simple", coll,
			 in->nalgo, in->nproto);
		break;
	case POLICY_TUNE_UNAVAILABLE:
		snprintf(buf, len,
			 "%s, first at %zu bytes, left to NCCL: Ring/Simple not available (%s/%s picked)",
			 coll, in->nbytes, policy_tune_algo_name(out->from_algo),
			 policy_tune_proto_name(out->from_proto));
		break;
	case POLICY_TUNE_ALREADY:
		snprintf(buf, len, "%s, first at %zu bytes: NCCL already picks Ring/Simple, unchanged",
			 coll, in->nbytes);
		break;
	case POLICY_TUNE_FAR:
		snprintf(buf, len,
			 "%s, first at %zu bytes, left to NCCL: %s/%s (%.1f us) against Ring/Simple "
			 "(%.1f us), more than %.2fx apart",
			 coll, in->nbytes, policy_tune_algo_name(out->from_algo),
			 policy_tune_proto_name(out->from_proto), out->from_cost, out->ring_cost,
			 POLICY_TUNE_SLACK);
		break;
	case POLICY_TUNE_RING_SIMPLE:
		snprintf(buf, len,
			 "%s, first at %zu bytes: Ring/Simple (model %.1f us) instead of %s/%s (%.1f us), "
			 "within %.2fx; the network moves large Simple messages best",
			 coll, in->nbytes, out->ring_cost, policy_tune_algo_name(out->from_algo),
			 policy_tune_proto_name(out->from_proto), out->from_cost, POLICY_TUNE_SLACK);
		break;
	default:
		snprintf(buf, len, "%s: unknown verdict %d", coll, (int)out->verdict);
		break;
	}
}
