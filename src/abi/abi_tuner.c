/*
 * abi_tuner.c - NCCL's tuner plugin from this library: ncclTunerPlugin_v6
 * (NCCL 2.30) and ncclTunerPlugin_v5 (NCCL 2.28, 2.29; 2.30 takes v6 first).
 * NCCL finds them in the net plugin's library when NCCL_TUNER_PLUGIN names no
 * tuner it can open. Both versions share init, getCollInfo and finalize's
 * signatures; v6's optional getChunkSize is NULL (NCCL's own chunk size). The
 * entries only translate to core_tuner_* (core/core_tuner.c) and always return
 * ncclSuccess: NCCL fails the communicator or the collective on an error.
 */
#include "abi/abi.h"
#include "nccl/nccl_tuner.h"
#include "util/util.h"

static ncclResult_t tuner_init_v5(void **ctx, uint64_t comm_id, size_t nranks, size_t nnodes,
				  ncclDebugLogger_t logger, ncclNvlDomainInfo_v5_t *nvl,
				  ncclTunerConstants_v5_t *constants)
{
	(void)nvl;
	(void)constants; /* NCCL's model constants stay as they are */
	core_tuner_init(ctx, "v5", comm_id, nranks, nnodes, logger);
	return ncclSuccess;
}

static ncclResult_t tuner_init_v6(void **ctx, uint64_t comm_id, size_t nranks, size_t nnodes,
				  ncclDebugLogger_t logger, ncclNvlDomainInfo_v5_t *nvl,
				  ncclTunerConstants_v5_t *constants)
{
	(void)nvl;
	(void)constants;
	core_tuner_init(ctx, "v6", comm_id, nranks, nnodes, logger);
	return ncclSuccess;
}

/* collCostTable is NCCL's float[numAlgo][numProto], passed as float **. */
static ncclResult_t tuner_get_coll_info(void *ctx, ncclFunc_t coll, size_t nbytes,
					int num_pipe_ops, float **cost_table, int nalgo,
					int nproto, int reg_buff, int *nchannels)
{
	(void)num_pipe_ops;
	(void)reg_buff;
	core_tuner_coll(ctx, (int)coll, nbytes, (float *)cost_table, nalgo, nproto, nchannels);
	return ncclSuccess;
}

static ncclResult_t tuner_finalize(void *ctx)
{
	core_tuner_finalize(ctx);
	return ncclSuccess;
}

UTIL_EXPORT const ncclTuner_v6_t ncclTunerPlugin_v6 = {
	.name = CORE_PLUGIN_NAME,
	.init = tuner_init_v6,
	.getCollInfo = tuner_get_coll_info,
	.finalize = tuner_finalize,
	.getChunkSize = NULL,
};

UTIL_EXPORT const ncclTuner_v5_t ncclTunerPlugin_v5 = {
	.name = CORE_PLUGIN_NAME,
	.init = tuner_init_v5,
	.getCollInfo = tuner_get_coll_info,
	.finalize = tuner_finalize,
};
