/*
 * nccl_tuner.h - NCCL's tuner-plugin ABI, versions 5 and 6, written from the
 * facts in NCCL's sources (2.28.9 and 2.30.7), not copied from its headers.
 *
 * Which NCCL loads what: NCCL 2.28 looks up ncclTunerPlugin_v5, then _v4,
 * _v3, _v2; NCCL 2.30 looks up ncclTunerPlugin_v6 first, then _v5 ... _v2. It
 * looks in the library NCCL_TUNER_PLUGIN names (libnccl-tuner.so when unset),
 * and when that cannot be opened, in the net plugin's library; "none" turns
 * tuners off. init runs once per communicator after its channels are built;
 * an error from init fails the communicator, and an error from getCollInfo
 * fails the collective (NCCLCHECK in both releases), so this plugin never
 * returns one from either.
 *
 * The cost table: NCCL passes a float[numAlgo][numProto] array (contiguous,
 * cast to float **), filled with its model's time in microseconds for each
 * algorithm/protocol, and NCCL_ALGO_PROTO_IGNORE (-1.0) where a pair is not
 * available. After getCollInfo NCCL picks the lowest entry that is >= 0 (ties:
 * the lowest algorithm index, then protocol index). *nChannels starts at 0
 * (0 = NCCL's own count); a value replaces the count NCCL derives for the
 * collective, and for Ring and Tree the scheduler caps it at the channels the
 * communicator was built with. It cannot add channels. Point-to-point
 * (send/recv) never reaches the tuner.
 */
#ifndef NCCL_TUNER_H
#define NCCL_TUNER_H

#include <stddef.h>
#include <stdint.h>

#include "nccl/nccl_net.h"

/* The collective NCCL asks about. 0..10 in NCCL 2.28; 2.30 adds 11..14. Only
 * the first five are collectives that go through the cost table. */
typedef enum {
	ncclFuncBroadcast = 0,
	ncclFuncReduce = 1,
	ncclFuncAllGather = 2,
	ncclFuncReduceScatter = 3,
	ncclFuncAllReduce = 4,
	ncclFuncSendRecv = 5,
	ncclFuncSend = 6,
	ncclFuncRecv = 7,
	ncclFuncAlltoAll = 8,
	ncclFuncScatter = 9,
	ncclFuncGather = 10,
	ncclFuncAllGatherV = 11,
	ncclFuncPutSignal = 12,
	ncclFuncSignal = 13,
	ncclFuncWaitSignal = 14
} ncclFunc_t;
#define NCCL_TUNER_NUM_COLLS 5 /* ncclFuncBroadcast .. ncclFuncAllReduce */

/* Cost-table rows (algorithms) and columns (protocols). */
#define NCCL_ALGO_UNDEF -1
#define NCCL_ALGO_TREE 0
#define NCCL_ALGO_RING 1
#define NCCL_ALGO_COLLNET_DIRECT 2
#define NCCL_ALGO_COLLNET_CHAIN 3
#define NCCL_ALGO_NVLS 4
#define NCCL_ALGO_NVLS_TREE 5
#define NCCL_ALGO_PAT 6
#define NCCL_TUNER_NUM_ALGOS 7

#define NCCL_PROTO_UNDEF -1
#define NCCL_PROTO_LL 0
#define NCCL_PROTO_LL128 1
#define NCCL_PROTO_SIMPLE 2
#define NCCL_TUNER_NUM_PROTOS 3

#define NCCL_ALGO_PROTO_IGNORE -1.0

/* Sizes of the constants' tables: hardware links (NVLink, PCI, network),
 * compute capabilities (Volta, Ampere, Hopper, Blackwell), node scales. */
#define NCCL_TUNER_NUM_HW_LINKS 3
#define NCCL_TUNER_NUM_COMPCAPS 4
#define NCCL_TUNER_NUM_SCALES 3

/* init's view of the NVLink domains (v5, v6). */
typedef struct {
	int nNvlDomains;
	int minRanksPerNvlDomain;
	int maxRanksPerNvlDomain;
} ncclNvlDomainInfo_v5_t;

/* NCCL's model constants, in/out at init (v5, v6): latencies in us, the
 * bandwidth caps in GB/s. This plugin leaves them as NCCL set them. */
typedef struct {
	double baseLatencies[NCCL_TUNER_NUM_ALGOS][NCCL_TUNER_NUM_PROTOS];
	double hwLatencies[NCCL_TUNER_NUM_HW_LINKS][NCCL_TUNER_NUM_ALGOS][NCCL_TUNER_NUM_PROTOS];
	double llMaxBws[NCCL_TUNER_NUM_COMPCAPS][NCCL_TUNER_NUM_SCALES];
	double perChMaxRingLL128Bws[NCCL_TUNER_NUM_COMPCAPS][NCCL_TUNER_NUM_SCALES];
	double perChMaxTreeLL128Bws[NCCL_TUNER_NUM_COMPCAPS][NCCL_TUNER_NUM_SCALES];
	double perChMaxTreeBws[NCCL_TUNER_NUM_COMPCAPS][NCCL_TUNER_NUM_SCALES];
	double perChMaxNVLSTreeBws[NCCL_TUNER_NUM_COMPCAPS][NCCL_TUNER_NUM_SCALES];
} ncclTunerConstants_v5_t;

typedef ncclResult_t (*ncclTunerInit_v5_fn)(void **ctx, uint64_t commId, size_t nRanks,
					    size_t nNodes, ncclDebugLogger_t logFunction,
					    ncclNvlDomainInfo_v5_t *nvlDomainInfo,
					    ncclTunerConstants_v5_t *constants);
typedef ncclResult_t (*ncclTunerGetCollInfo_v5_fn)(void *ctx, ncclFunc_t collType, size_t nBytes,
						   int numPipeOps, float **collCostTable,
						   int numAlgo, int numProto, int regBuff,
						   int *nChannels);

/* ncclTunerPlugin_v5: NCCL 2.28 (and 2.29); 2.30 still accepts it. */
typedef struct {
	const char *name;
	ncclTunerInit_v5_fn init;
	ncclTunerGetCollInfo_v5_fn getCollInfo;
	ncclResult_t (*finalize)(void *ctx);
} ncclTuner_v5_t;

/* ncclTunerPlugin_v6: NCCL 2.30. v5's members, the same types, and an
 * optional chunk-size hook (NULL: NCCL's own chunk size). */
typedef struct {
	const char *name;
	ncclTunerInit_v5_fn init;
	ncclTunerGetCollInfo_v5_fn getCollInfo;
	ncclResult_t (*finalize)(void *ctx);
	ncclResult_t (*getChunkSize)(void *ctx, ncclFunc_t collType, size_t nBytes, int algo,
				     int proto, int nChannels, size_t *chunkSize);
} ncclTuner_v6_t;

#if defined(__x86_64__) || defined(__aarch64__)
_Static_assert(sizeof(ncclFunc_t) == 4, "ncclFunc_t");
_Static_assert(sizeof(ncclNvlDomainInfo_v5_t) == 12, "nvl domain info v5");
_Static_assert(sizeof(ncclTunerConstants_v5_t) == (21 + 63 + 5 * 12) * 8, "constants v5");
_Static_assert(offsetof(ncclTunerConstants_v5_t, llMaxBws) == 84 * 8, "constants v5 llMaxBws");
_Static_assert(sizeof(ncclTuner_v5_t) == 32, "tuner v5");
_Static_assert(sizeof(ncclTuner_v6_t) == 40, "tuner v6");
_Static_assert(offsetof(ncclTuner_v6_t, getChunkSize) == 32, "tuner v6 getChunkSize");
#endif

#endif /* NCCL_TUNER_H */
