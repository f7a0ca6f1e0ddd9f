/*
 * nccl_net.h - NCCL's network-plugin ABI, versions 6 to 12, written in our
 * own words from the layouts NCCL's releases use. NCCL ships no plugin header,
 * so the plugin carries its own; the static asserts at the end pin every
 * struct to the size NCCL's own headers give on x86_64.
 *
 * NCCL's vocabulary, below every layer: the abi/ adapters translate these
 * tables, log/ uses NCCL's logger, and the internal API (net/net.h) names
 * the types it shares with NCCL.
 */
#ifndef NCCL_NET_H
#define NCCL_NET_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
	ncclSuccess = 0,
	ncclUnhandledCudaError = 1,
	ncclSystemError = 2,
	ncclInternalError = 3,
	ncclInvalidArgument = 4,
	ncclInvalidUsage = 5,
	ncclRemoteError = 6,
	ncclInProgress = 7,
	ncclNumResults = 8
} ncclResult_t;

typedef enum {
	NCCL_LOG_NONE = 0,
	NCCL_LOG_VERSION = 1,
	NCCL_LOG_WARN = 2,
	NCCL_LOG_INFO = 3,
	NCCL_LOG_ABORT = 4,
	NCCL_LOG_TRACE = 5
} ncclDebugLogLevel;

typedef enum {
	NCCL_INIT = 0x1,
	NCCL_COLL = 0x2,
	NCCL_P2P = 0x4,
	NCCL_SHM = 0x8,
	NCCL_NET = 0x10,
	NCCL_GRAPH = 0x20,
	NCCL_TUNING = 0x40,
	NCCL_ENV = 0x80,
	NCCL_ALLOC = 0x100,
	NCCL_CALL = 0x200,
	NCCL_PROXY = 0x400,
	NCCL_NVLS = 0x800,
	NCCL_BOOTSTRAP = 0x1000,
	NCCL_REG = 0x2000,
	NCCL_PROFILE = 0x4000,
	NCCL_RAS = 0x8000,
	NCCL_ALL = ~0
} ncclDebugLogSubSys;

typedef void (*ncclDebugLogger_t)(ncclDebugLogLevel level, unsigned long flags,
				  const char *file, int line, const char *fmt, ...);
typedef ncclResult_t (*ncclProfilerCallback_t)(void **eHandle, int type, void *pHandle,
					       int64_t pluginId, void *extData);

#define NCCL_NET_HANDLE_MAXSIZE 128
#define NCCL_PTR_HOST 0x1
#define NCCL_PTR_CUDA 0x2
#define NCCL_PTR_DMABUF 0x4
#define NCCL_NET_MAX_REQUESTS 32
#define NCCL_NET_MAX_REQUESTS_V6 8
#define NCCL_MAX_NET_SIZE_BYTES (1ULL << 40)
#define NCCL_NET_OPTIONAL_RECV_COMPLETION 0x1
#define NCCL_NET_MULTI_REQUEST 0x2
#define NCCL_NET_TRAFFIC_CLASS_UNDEF (-1)

typedef enum {
	NCCL_NET_DEVICE_HOST = 0,
	NCCL_NET_DEVICE_UNPACK = 1,
	NCCL_NET_DEVICE_GIN_PROXY = 2,
	NCCL_NET_DEVICE_GIN_GDAKI = 3
} ncclNetDeviceType;

/* v7+: the same in every later version. */
typedef struct {
	ncclNetDeviceType netDeviceType;
	int netDeviceVersion;
	void *handle;
	size_t size;
	int needsProxyProgress;
} ncclNetDeviceHandle_t;

/* v10+ */
typedef struct {
	int trafficClass;
} ncclNetCommConfig_t;

#define NCCL_NET_MAX_DEVS_PER_NIC_V9 4
#define NCCL_NET_MAX_DEVS_PER_NIC_V12 8

typedef struct {
	int ndevs;
	int devs[NCCL_NET_MAX_DEVS_PER_NIC_V9];
} ncclNetVDeviceProps_v9_t;

typedef struct {
	int ndevs;
	int devs[NCCL_NET_MAX_DEVS_PER_NIC_V12];
} ncclNetVDeviceProps_v12_t;

/* v11+ */
typedef struct {
	int32_t maxConcurrentPeers;
	int32_t minConcurrentPeers;
	int32_t maxFlowsPerPeer;
	int32_t minFlowsPerPeer;
} ncclNetCommAttr_t;

typedef struct {
	ncclNetCommAttr_t sendCommAttr;
	ncclNetCommAttr_t recvCommAttr;
	uint32_t op;
	uint32_t algo;
	uint32_t proto;
} ncclNetAttr_t;

/* ---- properties, one struct per layout ---- */

typedef struct {
	char *name;
	char *pciPath;
	uint64_t guid;
	int ptrSupport;
	int speed;
	int port;
	float latency;
	int maxComms;
	int maxRecvs;
} ncclNetProperties_v6_t;

typedef struct {
	char *name;
	char *pciPath;
	uint64_t guid;
	int ptrSupport;
	int speed;
	int port;
	float latency;
	int maxComms;
	int maxRecvs;
	ncclNetDeviceType netDeviceType;
	int netDeviceVersion;
} ncclNetProperties_v7_t;

typedef struct {
	char *name;
	char *pciPath;
	uint64_t guid;
	int ptrSupport;
	int regIsGlobal;
	int speed;
	int port;
	float latency;
	int maxComms;
	int maxRecvs;
	ncclNetDeviceType netDeviceType;
	int netDeviceVersion;
} ncclNetProperties_v8_t;

/* v9 and v10 share this layout. */
typedef struct {
	char *name;
	char *pciPath;
	uint64_t guid;
	int ptrSupport;
	int regIsGlobal;
	int forceFlush;
	int speed;
	int port;
	float latency;
	int maxComms;
	int maxRecvs;
	ncclNetDeviceType netDeviceType;
	int netDeviceVersion;
	ncclNetVDeviceProps_v9_t vProps;
	size_t maxP2pBytes;
	size_t maxCollBytes;
} ncclNetProperties_v9_t;

typedef struct {
	char *name;
	char *pciPath;
	uint64_t guid;
	int ptrSupport;
	int regIsGlobal;
	int forceFlush;
	int speed;
	int port;
	float latency;
	int maxComms;
	int maxRecvs;
	ncclNetDeviceType netDeviceType;
	int netDeviceVersion;
	ncclNetVDeviceProps_v9_t vProps;
	size_t maxP2pBytes;
	size_t maxCollBytes;
	int maxMultiRequestSize;
} ncclNetProperties_v11_t;

typedef struct {
	char *name;
	char *pciPath;
	uint64_t guid;
	int ptrSupport;
	int regIsGlobal;
	int forceFlush;
	int speed;
	int port;
	float latency;
	int maxComms;
	int maxRecvs;
	ncclNetDeviceType netDeviceType;
	int netDeviceVersion;
	ncclNetVDeviceProps_v12_t vProps;
	size_t maxP2pBytes;
	size_t maxCollBytes;
	int maxMultiRequestSize;
	int16_t railId;
	int16_t planeId;
} ncclNetProperties_v12_t;

/* ---- function tables ---- */

typedef struct {
	const char *name;
	ncclResult_t (*init)(ncclDebugLogger_t logFunction);
	ncclResult_t (*devices)(int *ndev);
	ncclResult_t (*getProperties)(int dev, ncclNetProperties_v6_t *props);
	ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
	ncclResult_t (*connect)(int dev, void *handle, void **sendComm);
	ncclResult_t (*accept)(void *listenComm, void **recvComm);
	ncclResult_t (*regMr)(void *comm, void *data, int size, int type, void **mhandle);
	ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type,
				    uint64_t offset, int fd, void **mhandle);
	ncclResult_t (*deregMr)(void *comm, void *mhandle);
	ncclResult_t (*isend)(void *sendComm, void *data, int size, int tag, void *mhandle,
			      void **request);
	ncclResult_t (*irecv)(void *recvComm, int n, void **data, int *sizes, int *tags,
			      void **mhandles, void **request);
	ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles,
			       void **request);
	ncclResult_t (*test)(void *request, int *done, int *sizes);
	ncclResult_t (*closeSend)(void *sendComm);
	ncclResult_t (*closeRecv)(void *recvComm);
	ncclResult_t (*closeListen)(void *listenComm);
} ncclNet_v6_t;

typedef struct {
	const char *name;
	ncclResult_t (*init)(ncclDebugLogger_t logFunction);
	ncclResult_t (*devices)(int *ndev);
	ncclResult_t (*getProperties)(int dev, ncclNetProperties_v7_t *props);
	ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
	ncclResult_t (*connect)(int dev, void *handle, void **sendComm,
				ncclNetDeviceHandle_t **sendDevComm);
	ncclResult_t (*accept)(void *listenComm, void **recvComm,
			       ncclNetDeviceHandle_t **recvDevComm);
	ncclResult_t (*regMr)(void *comm, void *data, int size, int type, void **mhandle);
	ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type,
				    uint64_t offset, int fd, void **mhandle);
	ncclResult_t (*deregMr)(void *comm, void *mhandle);
	ncclResult_t (*isend)(void *sendComm, void *data, int size, int tag, void *mhandle,
			      void **request);
	ncclResult_t (*irecv)(void *recvComm, int n, void **data, int *sizes, int *tags,
			      void **mhandles, void **request);
	ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles,
			       void **request);
	ncclResult_t (*test)(void *request, int *done, int *sizes);
	ncclResult_t (*closeSend)(void *sendComm);
	ncclResult_t (*closeRecv)(void *recvComm);
	ncclResult_t (*closeListen)(void *listenComm);
	ncclResult_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
	ncclResult_t (*irecvConsumed)(void *recvComm, int n, void *request);
} ncclNet_v7_t;

typedef struct {
	const char *name;
	ncclResult_t (*init)(ncclDebugLogger_t logFunction);
	ncclResult_t (*devices)(int *ndev);
	ncclResult_t (*getProperties)(int dev, ncclNetProperties_v8_t *props);
	ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
	ncclResult_t (*connect)(int dev, void *handle, void **sendComm,
				ncclNetDeviceHandle_t **sendDevComm);
	ncclResult_t (*accept)(void *listenComm, void **recvComm,
			       ncclNetDeviceHandle_t **recvDevComm);
	ncclResult_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
	ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type,
				    uint64_t offset, int fd, void **mhandle);
	ncclResult_t (*deregMr)(void *comm, void *mhandle);
	ncclResult_t (*isend)(void *sendComm, void *data, int size, int tag, void *mhandle,
			      void **request);
	ncclResult_t (*irecv)(void *recvComm, int n, void **data, int *sizes, int *tags,
			      void **mhandles, void **request);
	ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles,
			       void **request);
	ncclResult_t (*test)(void *request, int *done, int *sizes);
	ncclResult_t (*closeSend)(void *sendComm);
	ncclResult_t (*closeRecv)(void *recvComm);
	ncclResult_t (*closeListen)(void *listenComm);
	ncclResult_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
	ncclResult_t (*irecvConsumed)(void *recvComm, int n, void *request);
} ncclNet_v8_t;

typedef struct {
	const char *name;
	ncclResult_t (*init)(ncclDebugLogger_t logFunction);
	ncclResult_t (*devices)(int *ndev);
	ncclResult_t (*getProperties)(int dev, ncclNetProperties_v9_t *props);
	ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
	ncclResult_t (*connect)(int dev, void *handle, void **sendComm,
				ncclNetDeviceHandle_t **sendDevComm);
	ncclResult_t (*accept)(void *listenComm, void **recvComm,
			       ncclNetDeviceHandle_t **recvDevComm);
	ncclResult_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
	ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type,
				    uint64_t offset, int fd, void **mhandle);
	ncclResult_t (*deregMr)(void *comm, void *mhandle);
	ncclResult_t (*isend)(void *sendComm, void *data, size_t size, int tag, void *mhandle,
			      void **request);
	ncclResult_t (*irecv)(void *recvComm, int n, void **data, size_t *sizes, int *tags,
			      void **mhandles, void **request);
	ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles,
			       void **request);
	ncclResult_t (*test)(void *request, int *done, int *sizes);
	ncclResult_t (*closeSend)(void *sendComm);
	ncclResult_t (*closeRecv)(void *recvComm);
	ncclResult_t (*closeListen)(void *listenComm);
	ncclResult_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
	ncclResult_t (*irecvConsumed)(void *recvComm, int n, void *request);
	ncclResult_t (*makeVDevice)(int *d, ncclNetVDeviceProps_v9_t *props);
} ncclNet_v9_t;

typedef struct {
	const char *name;
	ncclResult_t (*init)(ncclDebugLogger_t logFunction,
			     ncclProfilerCallback_t profFunction);
	ncclResult_t (*devices)(int *ndev);
	ncclResult_t (*getProperties)(int dev, ncclNetProperties_v9_t *props);
	ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
	ncclResult_t (*connect)(int dev, ncclNetCommConfig_t *config, void *handle,
				void **sendComm, ncclNetDeviceHandle_t **sendDevComm);
	ncclResult_t (*accept)(void *listenComm, void **recvComm,
			       ncclNetDeviceHandle_t **recvDevComm);
	ncclResult_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
	ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type,
				    uint64_t offset, int fd, void **mhandle);
	ncclResult_t (*deregMr)(void *comm, void *mhandle);
	ncclResult_t (*isend)(void *sendComm, void *data, size_t size, int tag, void *mhandle,
			      void *phandle, void **request);
	ncclResult_t (*irecv)(void *recvComm, int n, void **data, size_t *sizes, int *tags,
			      void **mhandles, void **phandles, void **request);
	ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles,
			       void **request);
	ncclResult_t (*test)(void *request, int *done, int *sizes);
	ncclResult_t (*closeSend)(void *sendComm);
	ncclResult_t (*closeRecv)(void *recvComm);
	ncclResult_t (*closeListen)(void *listenComm);
	ncclResult_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
	ncclResult_t (*irecvConsumed)(void *recvComm, int n, void *request);
	ncclResult_t (*makeVDevice)(int *d, ncclNetVDeviceProps_v9_t *props);
} ncclNet_v10_t;

/* v11 and v12 differ only in the properties struct. The macro keeps the member
 * list in one place. */
#define NCCL_NET_V11_MEMBERS(props_t, vprops_t)                                           \
	const char *name;                                                                 \
	ncclResult_t (*init)(void **ctx, uint64_t commId, ncclNetCommConfig_t *config,    \
			     ncclDebugLogger_t logFunction,                               \
			     ncclProfilerCallback_t profFunction);                        \
	ncclResult_t (*devices)(int *ndev);                                               \
	ncclResult_t (*getProperties)(int dev, props_t *props);                           \
	ncclResult_t (*listen)(void *ctx, int dev, void *handle, void **listenComm);      \
	ncclResult_t (*connect)(void *ctx, int dev, void *handle, void **sendComm,        \
				ncclNetDeviceHandle_t **sendDevComm);                     \
	ncclResult_t (*accept)(void *listenComm, void **recvComm,                         \
			       ncclNetDeviceHandle_t **recvDevComm);                      \
	ncclResult_t (*regMr)(void *comm, void *data, size_t size, int type,              \
			      void **mhandle);                                            \
	ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type,        \
				    uint64_t offset, int fd, void **mhandle);             \
	ncclResult_t (*deregMr)(void *comm, void *mhandle);                               \
	ncclResult_t (*isend)(void *sendComm, void *data, size_t size, int tag,           \
			      void *mhandle, void *phandle, void **request);              \
	ncclResult_t (*irecv)(void *recvComm, int n, void **data, size_t *sizes,          \
			      int *tags, void **mhandles, void **phandles,                \
			      void **request);                                            \
	ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes,            \
			       void **mhandles, void **request);                          \
	ncclResult_t (*test)(void *request, int *done, int *sizes);                       \
	ncclResult_t (*closeSend)(void *sendComm);                                        \
	ncclResult_t (*closeRecv)(void *recvComm);                                        \
	ncclResult_t (*closeListen)(void *listenComm);                                    \
	ncclResult_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);      \
	ncclResult_t (*irecvConsumed)(void *recvComm, int n, void *request);              \
	ncclResult_t (*makeVDevice)(int *d, vprops_t *props);                             \
	ncclResult_t (*finalize)(void *ctx);                                              \
	ncclResult_t (*setNetAttr)(void *ctx, ncclNetAttr_t *netAttr)

typedef struct {
	NCCL_NET_V11_MEMBERS(ncclNetProperties_v11_t, ncclNetVDeviceProps_v9_t);
} ncclNet_v11_t;

typedef struct {
	NCCL_NET_V11_MEMBERS(ncclNetProperties_v12_t, ncclNetVDeviceProps_v12_t);
} ncclNet_v12_t;

/* ---- layout checks against the fact sheet (x86_64, LP64) ---- */
#if defined(__x86_64__) || defined(__aarch64__)
_Static_assert(sizeof(ncclNetDeviceHandle_t) == 32, "device handle");
_Static_assert(sizeof(ncclNetCommConfig_t) == 4, "comm config");
_Static_assert(sizeof(ncclNetVDeviceProps_v9_t) == 20, "vprops v9");
_Static_assert(sizeof(ncclNetVDeviceProps_v12_t) == 36, "vprops v12");
_Static_assert(sizeof(ncclNetAttr_t) == 44, "net attr");

_Static_assert(sizeof(ncclNetProperties_v6_t) == 48, "props v6");
_Static_assert(offsetof(ncclNetProperties_v6_t, speed) == 28, "props v6 speed");
_Static_assert(offsetof(ncclNetProperties_v6_t, maxRecvs) == 44, "props v6 maxRecvs");
_Static_assert(sizeof(ncclNetProperties_v7_t) == 56, "props v7");
_Static_assert(offsetof(ncclNetProperties_v7_t, netDeviceVersion) == 52, "props v7 ndv");
_Static_assert(sizeof(ncclNetProperties_v8_t) == 64, "props v8");
_Static_assert(offsetof(ncclNetProperties_v8_t, regIsGlobal) == 28, "props v8 regIsGlobal");
_Static_assert(offsetof(ncclNetProperties_v8_t, latency) == 40, "props v8 latency");
_Static_assert(sizeof(ncclNetProperties_v9_t) == 104, "props v9");
_Static_assert(offsetof(ncclNetProperties_v9_t, forceFlush) == 32, "props v9 forceFlush");
_Static_assert(offsetof(ncclNetProperties_v9_t, vProps) == 64, "props v9 vProps");
_Static_assert(offsetof(ncclNetProperties_v9_t, maxP2pBytes) == 88, "props v9 maxP2p");
_Static_assert(offsetof(ncclNetProperties_v9_t, maxCollBytes) == 96, "props v9 maxColl");
_Static_assert(sizeof(ncclNetProperties_v11_t) == 112, "props v11");
_Static_assert(offsetof(ncclNetProperties_v11_t, maxMultiRequestSize) == 104, "props v11 mmrs");
_Static_assert(sizeof(ncclNetProperties_v12_t) == 128, "props v12");
_Static_assert(offsetof(ncclNetProperties_v12_t, maxP2pBytes) == 104, "props v12 maxP2p");
_Static_assert(offsetof(ncclNetProperties_v12_t, maxMultiRequestSize) == 120, "props v12 mmrs");
_Static_assert(offsetof(ncclNetProperties_v12_t, railId) == 124, "props v12 railId");
_Static_assert(offsetof(ncclNetProperties_v12_t, planeId) == 126, "props v12 planeId");

_Static_assert(sizeof(ncclNet_v6_t) == 136, "table v6");
_Static_assert(sizeof(ncclNet_v7_t) == 152, "table v7");
_Static_assert(sizeof(ncclNet_v8_t) == 152, "table v8");
_Static_assert(sizeof(ncclNet_v9_t) == 160, "table v9");
_Static_assert(sizeof(ncclNet_v10_t) == 160, "table v10");
_Static_assert(sizeof(ncclNet_v11_t) == 176, "table v11");
_Static_assert(sizeof(ncclNet_v12_t) == 176, "table v12");
#endif

#endif /* NCCL_NET_H */
