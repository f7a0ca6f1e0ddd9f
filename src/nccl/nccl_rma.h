/*
 * nccl_rma.h - NCCL's RMA plugin ABI (the host side of device-initiated
 * networking), versions 13 and 14, written from the layouts of NCCL 2.30
 * (the same conventions as nccl_net.h). NCCL finds them in the net plugin's
 * own library:
 * ncclRmaPlugin_v14 first, then ncclRmaPlugin_v13.
 *
 *   v13: the GIN v13 layout. createContext hands back a device handle and
 *        regMrSym a GIN handle (both ignored by NCCL's RMA loader); iputSignal
 *        has no strength argument: every signal is strong. NCCL refuses the
 *        table unless getProperties(0) reports netDeviceType GIN_PROXY.
 *   v14: createContext takes ncclRmaConfig_v14_t (contexts, traffic class,
 *        rank stride); iputSignal takes isStrongSignal.
 */
#ifndef NCCL_RMA_H
#define NCCL_RMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nccl/nccl_net.h"

/* regMrSym flags. FORCE_SO: NCCL relies on puts and signals into this window
 * arriving in order (its signal and flush windows); SIGNAL_NEVER_RESET: a
 * hint that the window only ever grows by signals. */
#define NCCL_NET_MR_FLAG_FORCE_SO (1 << 0)
#define NCCL_NET_MR_FLAG_SIGNAL_NEVER_RESET (1 << 1)
/* iputSignal's signalOp: add 1, or add signalValue, to the 64-bit word. */
#define NCCL_NET_SIGNAL_OP_INC 0x1
#define NCCL_NET_SIGNAL_OP_ADD 0x2

typedef struct {
	int nSignals;
	int nCounters;
	int nContexts;
	int queueDepth;
	int trafficClass;
} ncclGinConfig_v13_t;

typedef struct {
	int nContexts;
	int trafficClass;
	int rankStride;
} ncclRmaConfig_v14_t;

/* Members both versions share, in order, up to createContext. */
#define NCCL_RMA_HEAD_MEMBERS                                                          \
	const char *name;                                                              \
	ncclResult_t (*init)(void **ctx, uint64_t commId, ncclDebugLogger_t logFunction); \
	ncclResult_t (*devices)(int *ndev);                                            \
	ncclResult_t (*getProperties)(int dev, ncclNetProperties_v12_t *props);        \
	ncclResult_t (*listen)(void *ctx, int dev, void *handle, void **listenComm);   \
	ncclResult_t (*connect)(void *ctx, void *handles[], int nranks, int rank,       \
				void *listenComm, void **collComm)

/* ... and from iput to the end, with iputSignal's own form per version. */
#define NCCL_RMA_TAIL_MEMBERS(IPUT_SIGNAL)                                             \
	ncclResult_t (*iput)(void *rmaCtx, int context, uint64_t srcOff, void *srcMhandle, \
			     size_t size, uint64_t dstOff, void *dstMhandle, uint32_t rank, \
			     void **request);                                          \
	IPUT_SIGNAL;                                                                   \
	ncclResult_t (*iget)(void *rmaCtx, int context, uint64_t remoteOff,            \
			     void *remoteMhandle, size_t size, uint64_t localOff,      \
			     void *localMhandle, uint32_t rank, void **request);       \
	ncclResult_t (*iflush)(void *rmaCtx, int context, void *mhandle, uint32_t rank, \
			       void **request);                                        \
	ncclResult_t (*test)(void *collComm, void *request, int *done);               \
	ncclResult_t (*progress)(void *rmaCtx);                                        \
	ncclResult_t (*queryLastError)(void *rmaCtx, bool *hasError);                  \
	ncclResult_t (*finalize)(void *ctx)

typedef struct {
	NCCL_RMA_HEAD_MEMBERS;
	ncclResult_t (*createContext)(void *collComm, ncclGinConfig_v13_t *config, void **ctx,
				      ncclNetDeviceHandle_t **devHandle);
	ncclResult_t (*regMrSym)(void *collComm, void *data, size_t size, int type,
				 uint64_t mrFlags, void **mhandle, void **ginHandle);
	ncclResult_t (*regMrSymDmaBuf)(void *collComm, void *data, size_t size, int type,
				       uint64_t offset, int fd, uint64_t mrFlags, void **mhandle,
				       void **ginHandle);
	ncclResult_t (*deregMrSym)(void *collComm, void *mhandle);
	ncclResult_t (*destroyContext)(void *ctx);
	ncclResult_t (*closeColl)(void *collComm);
	ncclResult_t (*closeListen)(void *listenComm);
	NCCL_RMA_TAIL_MEMBERS(ncclResult_t (*iputSignal)(
		void *ctx, int context, uint64_t srcOff, void *srcMhandle, size_t size,
		uint64_t dstOff, void *dstMhandle, uint32_t rank, uint64_t signalOff,
		void *signalMhandle, uint64_t signalValue, uint32_t signalOp, void **request));
} ncclRma_v13_t;

typedef struct {
	NCCL_RMA_HEAD_MEMBERS;
	ncclResult_t (*createContext)(void *collComm, ncclRmaConfig_v14_t *config, void **rmaCtx);
	ncclResult_t (*regMrSym)(void *collComm, void *data, size_t size, int type,
				 uint64_t mrFlags, void **mhandle);
	ncclResult_t (*regMrSymDmaBuf)(void *collComm, void *data, size_t size, int type,
				       uint64_t offset, int fd, uint64_t mrFlags, void **mhandle);
	ncclResult_t (*deregMrSym)(void *collComm, void *mhandle);
	ncclResult_t (*destroyContext)(void *rmaCtx);
	ncclResult_t (*closeColl)(void *collComm);
	ncclResult_t (*closeListen)(void *listenComm);
	NCCL_RMA_TAIL_MEMBERS(ncclResult_t (*iputSignal)(
		void *rmaCtx, int context, uint64_t srcOff, void *srcMhandle, size_t size,
		uint64_t dstOff, void *dstMhandle, uint32_t rank, uint64_t signalOff,
		void *signalMhandle, uint64_t signalValue, uint32_t signalOp,
		bool isStrongSignal, void **request));
} ncclRma_v14_t;

#if defined(__x86_64__) || defined(__aarch64__)
_Static_assert(sizeof(ncclGinConfig_v13_t) == 20, "gin config v13");
_Static_assert(sizeof(ncclRmaConfig_v14_t) == 12, "rma config v14");
_Static_assert(sizeof(ncclRma_v13_t) == 21 * sizeof(void *), "rma table v13");
_Static_assert(sizeof(ncclRma_v14_t) == 21 * sizeof(void *), "rma table v14");
_Static_assert(offsetof(ncclRma_v14_t, createContext) == 6 * sizeof(void *), "rma v14 ctx");
_Static_assert(offsetof(ncclRma_v14_t, iput) == 13 * sizeof(void *), "rma v14 iput");
_Static_assert(offsetof(ncclRma_v14_t, test) == 17 * sizeof(void *), "rma v14 test");
_Static_assert(offsetof(ncclRma_v13_t, finalize) == 20 * sizeof(void *), "rma v13 finalize");
#endif

#endif /* NCCL_RMA_H */
