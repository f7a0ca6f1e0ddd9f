/*
 * core_tuner.c - NCCL's tuner plugin behind abi/abi_tuner.c: one context per
 * communicator, the setting, applying policy_tune()'s decision to NCCL's cost
 * table, and logging each distinct choice once at INFO through the logger
 * NCCL gave the tuner's init.
 *
 * Nothing here fails NCCL: an error from the tuner's init fails the
 * communicator and one from getCollInfo the collective, so every path ends in
 * "NCCL's own choice" instead (a context that cannot be allocated is NULL and
 * changes nothing).
 */
#include "core/core.h"

#include <stdatomic.h>
#include <stdlib.h>

#include "cfg/cfg.h"
#include "log/log.h"
#include "nccl/nccl_tuner.h"
#include "policy/policy_tuner.h"

#define CORE_TUNER_MAGIC 0x74756e65u /* "tune" */
#define CORE_TUNER_COLLS 16       /* ncclFunc_t values 0..14, then "other" */
#define CORE_TUNER_PICKS (NCCL_TUNER_NUM_ALGOS * NCCL_TUNER_NUM_PROTOS + 1)

struct core_tuner {
	uint32_t magic;
	int enabled;
	uint64_t comm_id;
	size_t nranks, nnodes;
	ncclDebugLogger_t logger;
	/* choices already logged: [collective][verdict][NCCL's pick before] */
	atomic_uchar seen[CORE_TUNER_COLLS][POLICY_TUNE_VERDICTS][CORE_TUNER_PICKS];
};

/* NCCL_FABRIC_TUNER: the live plugin's frozen settings, else the environment
 * (a tuner can be initialised without the net plugin, e.g. in the tests). */
static int tuner_enabled(ncclDebugLogger_t logger)
{
	struct core_plugin *p = core_plugin_get();
	if (p)
		return p->cfg.v[CFG_TUNER].i != CFG_TUNER_OFF;
	struct cfg_values *cfg = malloc(sizeof(*cfg));
	if (!cfg)
		return 0;
	cfg_load(cfg, NULL, NULL);
	struct cfg_value *v = &cfg->v[CFG_TUNER];
	int on = v->i != CFG_TUNER_OFF;
	if (v->source == CFG_SRC_INVALID_ENV)
		log_msg_to(logger, NCCL_LOG_WARN, NCCL_TUNING | NCCL_ENV, __FILE__, __LINE__,
			   "NET/Fabric : NCCL_FABRIC_TUNER=%s is not on|off; using %s",
			   v->invalid, v->s);
	free(cfg);
	return on;
}

int core_tuner_init(void **ctx, const char *version, uint64_t comm_id, size_t nranks,
		    size_t nnodes, ncclDebugLogger_t logger)
{
	*ctx = NULL;
	if (!logger)
		log_read_env();
	struct core_tuner *t = calloc(1, sizeof(*t));
	if (!t) {
		log_msg_to(logger, NCCL_LOG_WARN, NCCL_TUNING, __FILE__, __LINE__,
			   "NET/Fabric : tuner %s: out of memory; NCCL's choices unchanged",
			   version);
		return 0;
	}
	t->magic = CORE_TUNER_MAGIC;
	t->enabled = tuner_enabled(logger);
	t->comm_id = comm_id;
	t->nranks = nranks;
	t->nnodes = nnodes;
	t->logger = logger;
	*ctx = t;
	const char *state =
		!t->enabled ? "off (NCCL_FABRIC_TUNER=off): NCCL's choices unchanged" :
		nnodes <= 1 ? "on, idle: one node, no traffic through the network" :
			      "on: collectives from 4 MiB may take Ring/Simple";
	LOG_INFO_TO(logger, NCCL_INIT | NCCL_TUNING,
		    "tuner %s for comm 0x%llx (%zu ranks, %zu nodes): %s", version,
		    (unsigned long long)comm_id, nranks, nnodes, state);
	return 0;
}

void core_tuner_coll(void *ctx, int coll, size_t nbytes, float *table, int nalgo, int nproto,
		     int *nchannels)
{
	struct core_tuner *t = ctx;
	if (!t || t->magic != CORE_TUNER_MAGIC || !t->enabled || t->nnodes <= 1)
		return; /* init said so once */
	struct policy_tune_in in = {.enabled = t->enabled,
				    .nnodes = t->nnodes,
				    .coll = coll,
				    .nbytes = nbytes,
				    .table = table,
				    .nalgo = nalgo,
				    .nproto = nproto};
	struct policy_tune_out out;
	policy_tune(&in, &out);
	if (out.changed && out.algo >= 0 && out.algo < nalgo && out.proto >= 0 &&
	    out.proto < nproto && table[out.algo * nproto + out.proto] >= 0.0f)
		table[out.algo * nproto + out.proto] = out.cost;
	if (out.nchannels > 0 && nchannels)
		*nchannels = out.nchannels;

	int c = coll >= 0 && coll < CORE_TUNER_COLLS - 1 ? coll : CORE_TUNER_COLLS - 1;
	int pick = out.from_algo >= 0 && out.from_algo < NCCL_TUNER_NUM_ALGOS &&
				   out.from_proto >= 0 && out.from_proto < NCCL_TUNER_NUM_PROTOS ?
			   out.from_algo * NCCL_TUNER_NUM_PROTOS + out.from_proto :
			   CORE_TUNER_PICKS - 1;
	atomic_uchar *seen = &t->seen[c][out.verdict][pick];
	if (atomic_load_explicit(seen, memory_order_relaxed) || atomic_exchange(seen, 1))
		return;
	char why[POLICY_REASON_LEN];
	policy_tune_reason(&in, &out, why, sizeof(why));
	LOG_INFO_TO(t->logger, NCCL_TUNING, "tuner (comm 0x%llx): %s",
		    (unsigned long long)t->comm_id, why);
}

void core_tuner_finalize(void *ctx)
{
	struct core_tuner *t = ctx;
	if (!t || t->magic != CORE_TUNER_MAGIC)
		return;
	t->magic = 0;
	free(t);
}
