/*
 * fh_net.c - locate and load the plugin, and present every ncclNet_vN_t table
 * through one latest-style interface.
 *
 * This is the only file of the harness that knows the per-version
 * differences; the versions and their shapes come from
 * src/nccl/nccl_versions.h's list:
 *   v6      int sizes; connect/accept without device handles
 *   v7      + device handles on connect/accept, getDeviceMr, irecvConsumed
 *   v8      regMr takes size_t
 *   v9      isend/irecv take size_t; makeVDevice; irecv may find 0x1 in *request
 *   v10     init(logger, profiler); connect(dev, config, ...); phandles
 *   v11/12  init(&ctx, commId, config, ...); listen/connect take ctx; finalize,
 *           setNetAttr (v12: wider properties)
 * Test cases are written once against fh_net_* and run against each version.
 */
#include "harness.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------ per version
 *
 * For each version of nccl_versions.h's list, fh_vN_* functions take the
 * latest-style arguments and call the version's own table, and fh_ops_vN
 * points at them; fh_net_open picks the version's fh_ops. The list's columns
 * pick the shape of each call (FH_<COLUMN>_<value> below), so a version in an
 * existing shape needs nothing here, and every table member is called through
 * its own type. */

/* SINCE: does the version have the members added in v7, v9, v11? */
#define FH_SINCE7_6(yes, no) no
#define FH_SINCE7_7(yes, no) yes
#define FH_SINCE7_9(yes, no) yes
#define FH_SINCE7_11(yes, no) yes
#define FH_SINCE9_6(yes, no) no
#define FH_SINCE9_7(yes, no) no
#define FH_SINCE9_9(yes, no) yes
#define FH_SINCE9_11(yes, no) yes
#define FH_SINCE11_6(yes, no) no
#define FH_SINCE11_7(yes, no) no
#define FH_SINCE11_9(yes, no) no
#define FH_SINCE11_11(yes, no) yes

/* INIT */
#define FH_INIT_LOG(t, net, ctx) (t)->init(fh_logger)
#define FH_INIT_PROF(t, net, ctx) (t)->init(fh_logger, fh_profiler_cb)
#define FH_INIT_CTX(t, net, ctx)                                                          \
	(t)->init((ctx), (net)->comm_id++, &(net)->config, fh_logger, fh_profiler_cb)

/* CONN: listen, connect (dhp: the device-handle argument), accept */
#define FH_LISTEN_PLAIN(t, ctx, dev, handle, lcomm) (t)->listen((dev), (handle), (lcomm))
#define FH_LISTEN_DEV FH_LISTEN_PLAIN
#define FH_LISTEN_CFG FH_LISTEN_PLAIN
#define FH_LISTEN_CTX(t, ctx, dev, handle, lcomm) (t)->listen((ctx), (dev), (handle), (lcomm))
#define FH_CONNECT_PLAIN(t, net, ctx, dev, handle, scomm, dhp)                            \
	((void)(dhp), (t)->connect((dev), (handle), (scomm)))
#define FH_CONNECT_DEV(t, net, ctx, dev, handle, scomm, dhp)                              \
	(t)->connect((dev), (handle), (scomm), (dhp))
#define FH_CONNECT_CFG(t, net, ctx, dev, handle, scomm, dhp)                              \
	(t)->connect((dev), &(net)->config, (handle), (scomm), (dhp))
#define FH_CONNECT_CTX(t, net, ctx, dev, handle, scomm, dhp)                              \
	(t)->connect((ctx), (dev), (handle), (scomm), (dhp))
#define FH_ACCEPT_PLAIN(t, lcomm, rcomm, dhp) ((void)(dhp), (t)->accept((lcomm), (rcomm)))
#define FH_ACCEPT_DEV(t, lcomm, rcomm, dhp) (t)->accept((lcomm), (rcomm), (dhp))
#define FH_ACCEPT_CFG FH_ACCEPT_DEV
#define FH_ACCEPT_CTX FH_ACCEPT_DEV

/* REGMR: an int size above INT_MAX is refused without calling the plugin. */
#define FH_REGMR_INT(t, comm, data, size, type, mhandle)                                  \
	((size) > INT_MAX ? ncclInvalidArgument                                           \
			  : (t)->regMr((comm), (data), (int)(size), (type), (mhandle)))
#define FH_REGMR_SIZE(t, comm, data, size, type, mhandle)                                 \
	(t)->regMr((comm), (data), (size), (type), (mhandle))

/* DATA: isend; irecv (body of a function returning its result). */
#define FH_ISEND_INT(t, scomm, data, size, tag, mhandle, request)                         \
	((size) > INT_MAX ? ncclInvalidArgument                                           \
			  : (t)->isend((scomm), (data), (int)(size), (tag), (mhandle), (request)))
#define FH_ISEND_SIZE(t, scomm, data, size, tag, mhandle, request)                        \
	(t)->isend((scomm), (data), (size), (tag), (mhandle), (request))
#define FH_ISEND_PHANDLE(t, scomm, data, size, tag, mhandle, request)                     \
	(t)->isend((scomm), (data), (size), (tag), (mhandle), NULL, (request))
#define FH_IRECV_INT(t, rcomm, n, data, sizes, tags, mhandles, request)                   \
	int isizes[FH_MAX_GROUP];                                                         \
	for (int i = 0; i < (n); i++) {                                                   \
		if ((sizes)[i] > INT_MAX)                                                 \
			return ncclInvalidArgument;                                       \
		isizes[i] = (int)(sizes)[i];                                              \
	}                                                                                 \
	return (t)->irecv((rcomm), (n), (data), isizes, (tags), (mhandles), (request))
/* NCCL 2.24+ (v9) may pre-store NCCL_NET_OPTIONAL_RECV_COMPLETION to say
 * "completion optional"; the plugin must overwrite it with its request (or
 * NULL to retry). */
#define FH_IRECV_SIZE(t, rcomm, n, data, sizes, tags, mhandles, request)                  \
	*(request) = (void *)(uintptr_t)NCCL_NET_OPTIONAL_RECV_COMPLETION;                \
	return (t)->irecv((rcomm), (n), (data), (sizes), (tags), (mhandles), (request))
#define FH_IRECV_PHANDLE(t, rcomm, n, data, sizes, tags, mhandles, request)               \
	void *phandles[FH_MAX_GROUP] = {0};                                               \
	*(request) = (void *)(uintptr_t)NCCL_NET_OPTIONAL_RECV_COMPLETION;                \
	return (t)->irecv((rcomm), (n), (data), (sizes), (tags), (mhandles), phandles,    \
			  (request))

/* PROPS: one version's properties q copied into the latest-style fh_props_t. */
#define FH_PROPS_6(p, q)                                                                  \
	do {                                                                              \
		(p)->name = (q).name;                                                     \
		(p)->pciPath = (q).pciPath;                                               \
		(p)->guid = (q).guid;                                                     \
		(p)->ptrSupport = (q).ptrSupport;                                         \
		(p)->speed = (q).speed;                                                   \
		(p)->port = (q).port;                                                     \
		(p)->latency = (q).latency;                                               \
		(p)->maxComms = (q).maxComms;                                             \
		(p)->maxRecvs = (q).maxRecvs;                                             \
	} while (0)
#define FH_PROPS_7(p, q)                                                                  \
	do {                                                                              \
		FH_PROPS_6(p, q);                                                         \
		(p)->netDeviceType = (q).netDeviceType;                                   \
		(p)->netDeviceVersion = (q).netDeviceVersion;                             \
		(p)->have |= FH_HAVE_NETDEVICE;                                           \
	} while (0)
#define FH_PROPS_8(p, q)                                                                  \
	do {                                                                              \
		FH_PROPS_7(p, q);                                                         \
		(p)->regIsGlobal = (q).regIsGlobal;                                       \
		(p)->have |= FH_HAVE_REGISGLOBAL;                                         \
	} while (0)
#define FH_PROPS_9(p, q)                                                                  \
	do {                                                                              \
		FH_PROPS_8(p, q);                                                         \
		(p)->forceFlush = (q).forceFlush;                                         \
		(p)->vndevs = (q).vProps.ndevs;                                           \
		(p)->vdevs_cap = (int)(sizeof((q).vProps.devs) / sizeof((q).vProps.devs[0])); \
		for (int i_ = 0; i_ < (p)->vdevs_cap; i_++)                               \
			(p)->vdevs[i_] = (q).vProps.devs[i_];                             \
		(p)->maxP2pBytes = (q).maxP2pBytes;                                       \
		(p)->maxCollBytes = (q).maxCollBytes;                                     \
		(p)->have |= FH_HAVE_V9;                                                  \
	} while (0)
#define FH_PROPS_11(p, q)                                                                 \
	do {                                                                              \
		FH_PROPS_9(p, q);                                                         \
		(p)->maxMultiRequestSize = (q).maxMultiRequestSize;                       \
		(p)->have |= FH_HAVE_MULTIREQ;                                            \
	} while (0)
#define FH_PROPS_12(p, q)                                                                 \
	do {                                                                              \
		FH_PROPS_11(p, q);                                                        \
		(p)->railId = (q).railId;                                                 \
		(p)->planeId = (q).planeId;                                               \
		(p)->have |= FH_HAVE_RAIL;                                                \
	} while (0)

/* The latest-style interface one version presents. */
struct fh_net_ops {
	int version;
	const char *(*missing)(const fh_net_t *net);
	const char *(*name)(const fh_net_t *net);
	int (*has_optional)(const fh_net_t *net, const char *member);
	ncclResult_t (*init)(fh_net_t *net, void **ctx);
	ncclResult_t (*finalize)(fh_net_t *net, void *ctx);
	ncclResult_t (*devices)(fh_net_t *net, int *ndev);
	ncclResult_t (*get_properties)(fh_net_t *net, int dev, fh_props_t *p);
	ncclResult_t (*listen)(fh_net_t *net, void *ctx, int dev, void *handle, void **lcomm);
	ncclResult_t (*connect)(fh_net_t *net, void *ctx, int dev, void *handle, void **scomm,
				ncclNetDeviceHandle_t **dhp);
	ncclResult_t (*accept)(fh_net_t *net, void *lcomm, void **rcomm,
			       ncclNetDeviceHandle_t **dhp);
	ncclResult_t (*close_send)(fh_net_t *net, void *scomm);
	ncclResult_t (*close_recv)(fh_net_t *net, void *rcomm);
	ncclResult_t (*close_listen)(fh_net_t *net, void *lcomm);
	ncclResult_t (*set_net_attr)(fh_net_t *net, void *ctx, ncclNetAttr_t *attr);
	ncclResult_t (*reg_mr)(fh_net_t *net, void *comm, void *data, size_t size, int type,
			       void **mhandle);
	ncclResult_t (*reg_mr_dmabuf)(fh_net_t *net, void *comm, void *data, size_t size,
				      int type, uint64_t offset, int fd, void **mhandle);
	ncclResult_t (*dereg_mr)(fh_net_t *net, void *comm, void *mhandle);
	ncclResult_t (*isend)(fh_net_t *net, void *scomm, void *data, size_t size, int tag,
			      void *mhandle, void **request);
	ncclResult_t (*irecv)(fh_net_t *net, void *rcomm, int n, void **data, size_t *sizes,
			      int *tags, void **mhandles, void **request);
	ncclResult_t (*iflush)(fh_net_t *net, void *rcomm, int n, void **data, int *sizes,
			       void **mhandles, void **request);
	ncclResult_t (*test)(fh_net_t *net, void *request, int *done, int *sizes);
};

/* NCCL hands a profiler callback from v10 on; without a profiler it returns
 * no event handle. */
static ncclResult_t fh_profiler_cb(void **eHandle, int type, void *pHandle, int64_t pluginId,
				   void *extData)
{
	(void)type;
	(void)pHandle;
	(void)pluginId;
	(void)extData;
	if (eHandle)
		*eHandle = NULL;
	return ncclSuccess;
}

#define FH_T(N, net) const ncclNet_v##N##_t *t = (const ncclNet_v##N##_t *)(net)->table

#define FH_VERSION_OPS_(N, P, INIT, CONN, REGMR, DATA, SINCE)                             \
	/* Name of the first member NCCL would call without a NULL check that the    \
	 * table leaves NULL, or NULL when the table is complete. */                 \
	static const char *fh_v##N##_missing(const fh_net_t *net)                         \
	{                                                                                 \
		FH_T(N, net);                                                             \
		if (!t->name) return "name";                                              \
		if (!t->init) return "init";                                              \
		if (!t->devices) return "devices";                                        \
		if (!t->getProperties) return "getProperties";                            \
		if (!t->listen) return "listen";                                          \
		if (!t->connect) return "connect";                                        \
		if (!t->accept) return "accept";                                          \
		if (!t->regMr) return "regMr";                                            \
		if (!t->deregMr) return "deregMr";                                        \
		if (!t->isend) return "isend";                                            \
		if (!t->irecv) return "irecv";                                            \
		if (!t->iflush) return "iflush";                                          \
		if (!t->test) return "test";                                              \
		if (!t->closeSend) return "closeSend";                                    \
		if (!t->closeRecv) return "closeRecv";                                    \
		if (!t->closeListen) return "closeListen";                                \
		return FH_SINCE11_##SINCE(t->finalize ? NULL : "finalize", NULL);         \
	}                                                                                 \
	static const char *fh_v##N##_name(const fh_net_t *net)                            \
	{                                                                                 \
		FH_T(N, net);                                                             \
		return t->name;                                                           \
	}                                                                                 \
	static int fh_v##N##_has_optional(const fh_net_t *net, const char *member)        \
	{                                                                                 \
		FH_T(N, net);                                                             \
		if (!strcmp(member, "regMrDmaBuf"))                                       \
			return t->regMrDmaBuf != NULL;                                    \
		if (!strcmp(member, "getDeviceMr"))                                       \
			return FH_SINCE7_##SINCE(t->getDeviceMr != NULL, 0);              \
		if (!strcmp(member, "irecvConsumed"))                                     \
			return FH_SINCE7_##SINCE(t->irecvConsumed != NULL, 0);            \
		if (!strcmp(member, "makeVDevice"))                                       \
			return FH_SINCE9_##SINCE(t->makeVDevice != NULL, 0);              \
		if (!strcmp(member, "finalize"))                                          \
			return FH_SINCE11_##SINCE(t->finalize != NULL, 0);                \
		if (!strcmp(member, "setNetAttr"))                                        \
			return FH_SINCE11_##SINCE(t->setNetAttr != NULL, 0);              \
		return 0;                                                                 \
	}                                                                                 \
	static ncclResult_t fh_v##N##_init(fh_net_t *net, void **ctx)                     \
	{                                                                                 \
		FH_T(N, net);                                                             \
		(void)ctx;                                                                \
		return FH_INIT_##INIT(t, net, ctx);                                       \
	}                                                                                 \
	static ncclResult_t fh_v##N##_finalize(fh_net_t *net, void *ctx)                  \
	{                                                                                 \
		FH_T(N, net);                                                             \
		(void)t;                                                                  \
		(void)ctx;                                                                \
		return FH_SINCE11_##SINCE(t->finalize(ctx), ncclSuccess);                 \
	}                                                                                 \
	static ncclResult_t fh_v##N##_devices(fh_net_t *net, int *ndev)                   \
	{                                                                                 \
		FH_T(N, net);                                                             \
		return t->devices(ndev);                                                  \
	}                                                                                 \
	static ncclResult_t fh_v##N##_get_properties(fh_net_t *net, int dev, fh_props_t *p) \
	{                                                                                 \
		FH_T(N, net);                                                             \
		ncclNetProperties_v##P##_t q;                                             \
		memset(&q, 0, sizeof(q));                                                 \
		ncclResult_t rc = t->getProperties(dev, &q);                              \
		FH_PROPS_##P(p, q);                                                       \
		return rc;                                                                \
	}                                                                                 \
	static ncclResult_t fh_v##N##_listen(fh_net_t *net, void *ctx, int dev, void *handle, \
					     void **lcomm)                                \
	{                                                                                 \
		FH_T(N, net);                                                             \
		(void)ctx;                                                                \
		return FH_LISTEN_##CONN(t, ctx, dev, handle, lcomm);                      \
	}                                                                                 \
	static ncclResult_t fh_v##N##_connect(fh_net_t *net, void *ctx, int dev, void *handle, \
					      void **scomm, ncclNetDeviceHandle_t **dhp)  \
	{                                                                                 \
		FH_T(N, net);                                                             \
		(void)ctx;                                                                \
		return FH_CONNECT_##CONN(t, net, ctx, dev, handle, scomm, dhp);           \
	}                                                                                 \
	static ncclResult_t fh_v##N##_accept(fh_net_t *net, void *lcomm, void **rcomm,    \
					     ncclNetDeviceHandle_t **dhp)                 \
	{                                                                                 \
		FH_T(N, net);                                                             \
		return FH_ACCEPT_##CONN(t, lcomm, rcomm, dhp);                            \
	}                                                                                 \
	static ncclResult_t fh_v##N##_close_send(fh_net_t *net, void *scomm)              \
	{                                                                                 \
		FH_T(N, net);                                                             \
		return t->closeSend(scomm);                                               \
	}                                                                                 \
	static ncclResult_t fh_v##N##_close_recv(fh_net_t *net, void *rcomm)              \
	{                                                                                 \
		FH_T(N, net);                                                             \
		return t->closeRecv(rcomm);                                               \
	}                                                                                 \
	static ncclResult_t fh_v##N##_close_listen(fh_net_t *net, void *lcomm)            \
	{                                                                                 \
		FH_T(N, net);                                                             \
		return t->closeListen(lcomm);                                             \
	}                                                                                 \
	static ncclResult_t fh_v##N##_set_net_attr(fh_net_t *net, void *ctx,              \
						   ncclNetAttr_t *attr)                   \
	{                                                                                 \
		FH_T(N, net);                                                             \
		(void)t;                                                                  \
		(void)ctx;                                                                \
		(void)attr;                                                               \
		return FH_SINCE11_##SINCE(t->setNetAttr ? t->setNetAttr(ctx, attr)        \
							: ncclInvalidUsage,               \
					  ncclInvalidUsage);                              \
	}                                                                                 \
	static ncclResult_t fh_v##N##_reg_mr(fh_net_t *net, void *comm, void *data,       \
					     size_t size, int type, void **mhandle)       \
	{                                                                                 \
		FH_T(N, net);                                                             \
		return FH_REGMR_##REGMR(t, comm, data, size, type, mhandle);              \
	}                                                                                 \
	static ncclResult_t fh_v##N##_reg_mr_dmabuf(fh_net_t *net, void *comm, void *data, \
						    size_t size, int type, uint64_t offset, \
						    int fd, void **mhandle)               \
	{                                                                                 \
		FH_T(N, net);                                                             \
		return t->regMrDmaBuf                                                     \
			       ? t->regMrDmaBuf(comm, data, size, type, offset, fd, mhandle) \
			       : ncclInvalidUsage;                                        \
	}                                                                                 \
	static ncclResult_t fh_v##N##_dereg_mr(fh_net_t *net, void *comm, void *mhandle)  \
	{                                                                                 \
		FH_T(N, net);                                                             \
		return t->deregMr(comm, mhandle);                                         \
	}                                                                                 \
	static ncclResult_t fh_v##N##_isend(fh_net_t *net, void *scomm, void *data,       \
					    size_t size, int tag, void *mhandle,          \
					    void **request)                               \
	{                                                                                 \
		FH_T(N, net);                                                             \
		return FH_ISEND_##DATA(t, scomm, data, size, tag, mhandle, request);      \
	}                                                                                 \
	static ncclResult_t fh_v##N##_irecv(fh_net_t *net, void *rcomm, int n, void **data, \
					    size_t *sizes, int *tags, void **mhandles,    \
					    void **request)                               \
	{                                                                                 \
		FH_T(N, net);                                                             \
		FH_IRECV_##DATA(t, rcomm, n, data, sizes, tags, mhandles, request);       \
	}                                                                                 \
	static ncclResult_t fh_v##N##_iflush(fh_net_t *net, void *rcomm, int n, void **data, \
					     int *sizes, void **mhandles, void **request) \
	{                                                                                 \
		FH_T(N, net);                                                             \
		return t->iflush(rcomm, n, data, sizes, mhandles, request);               \
	}                                                                                 \
	static ncclResult_t fh_v##N##_test(fh_net_t *net, void *request, int *done,       \
					   int *sizes)                                    \
	{                                                                                 \
		FH_T(N, net);                                                             \
		return t->test(request, done, sizes);                                     \
	}                                                                                 \
	static const struct fh_net_ops fh_ops_v##N = {                                    \
		.version = N,                                                             \
		.missing = fh_v##N##_missing,                                             \
		.name = fh_v##N##_name,                                                   \
		.has_optional = fh_v##N##_has_optional,                                   \
		.init = fh_v##N##_init,                                                   \
		.finalize = fh_v##N##_finalize,                                           \
		.devices = fh_v##N##_devices,                                             \
		.get_properties = fh_v##N##_get_properties,                               \
		.listen = fh_v##N##_listen,                                               \
		.connect = fh_v##N##_connect,                                             \
		.accept = fh_v##N##_accept,                                               \
		.close_send = fh_v##N##_close_send,                                       \
		.close_recv = fh_v##N##_close_recv,                                       \
		.close_listen = fh_v##N##_close_listen,                                   \
		.set_net_attr = fh_v##N##_set_net_attr,                                   \
		.reg_mr = fh_v##N##_reg_mr,                                               \
		.reg_mr_dmabuf = fh_v##N##_reg_mr_dmabuf,                                 \
		.dereg_mr = fh_v##N##_dereg_mr,                                           \
		.isend = fh_v##N##_isend,                                                 \
		.irecv = fh_v##N##_irecv,                                                 \
		.iflush = fh_v##N##_iflush,                                               \
		.test = fh_v##N##_test,                                                   \
	};

NCCL_NET_VERSIONS(FH_VERSION_OPS_)

/* Every version of the list, by version - FH_VERSION_MIN. */
#define FH_OPS_ENTRY_(N, ...) [(N) - FH_VERSION_MIN] = &fh_ops_v##N,
static const struct fh_net_ops *const fh_ops[] = {NCCL_NET_VERSIONS(FH_OPS_ENTRY_)};
_Static_assert(sizeof(fh_ops) / sizeof(fh_ops[0]) == FH_VERSION_MAX - FH_VERSION_MIN + 1,
	       "one fh_ops per version");

const char *fh_result_str(ncclResult_t rc)
{
	switch ((int)rc) {
	case ncclSuccess:
		return "ncclSuccess";
	case ncclUnhandledCudaError:
		return "ncclUnhandledCudaError";
	case ncclSystemError:
		return "ncclSystemError";
	case ncclInternalError:
		return "ncclInternalError";
	case ncclInvalidArgument:
		return "ncclInvalidArgument";
	case ncclInvalidUsage:
		return "ncclInvalidUsage";
	case ncclRemoteError:
		return "ncclRemoteError";
	case ncclInProgress:
		return "ncclInProgress";
	case 8:
		return "ncclTimeout";
	default:
		return "(unknown ncclResult_t)";
	}
}

/* ------------------------------------------------------------ loading */

int fh_plugin_locate(const char *cli, char *out, size_t outlen)
{
	if (cli && *cli) {
		snprintf(out, outlen, "%s", cli);
		return 0;
	}
	const char *env = getenv("NCCL_NET_PLUGIN");
	if (env && strchr(env, '/')) {
		snprintf(out, outlen, "%s", env);
		return 0;
	}
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return -1;
	exe[n] = '\0';
	char *slash = strrchr(exe, '/');
	if (!slash)
		return -1;
	*slash = '\0';
	char guess[PATH_MAX + 64];
	snprintf(guess, sizeof(guess), "%s/../lib/%s", exe, FH_PLUGIN_FILE);
	char real[PATH_MAX];
	/* Show a clean path when it exists; dlopen errors will tell otherwise. */
	snprintf(out, outlen, "%s", realpath(guess, real) ? real : guess);
	return 0;
}

int fh_net_open(fh_net_t *net, const char *path, int version, char *err, size_t errlen)
{
	memset(net, 0, sizeof(*net));
	if (version < FH_VERSION_MIN || version > FH_VERSION_MAX) {
		snprintf(err, errlen, "NCCL net table version %d is not supported: the harness drives "
			 "versions %d..%d", version, FH_VERSION_MIN, FH_VERSION_MAX);
		return -1;
	}
	net->version = version;
	net->ops = fh_ops[version - FH_VERSION_MIN];
	snprintf(net->path, sizeof(net->path), "%s", path);
	net->config.trafficClass = NCCL_NET_TRAFFIC_CLASS_UNDEF;
	net->devcomm_mode = FH_DEVCOMM_PTR_TO_NULL;
	net->props_device_type = -1;
	net->comm_id = ((uint64_t)getpid() << 20) ^ 0x5eedc0ffeeULL;

	dlerror();
	net->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!net->dl) {
		const char *e = dlerror();
		snprintf(err, errlen, "dlopen(%s): %s", path, e ? e : "failed");
		return -1;
	}
	char sym[32];
	snprintf(sym, sizeof(sym), "ncclNetPlugin_v%d", version);
	net->table = dlsym(net->dl, sym);
	if (!net->table) {
		snprintf(err, errlen, "%s does not export %s", path, sym);
		dlclose(net->dl);
		net->dl = NULL;
		return -1;
	}
	const char *missing = net->ops->missing(net);
	if (missing) {
		snprintf(err, errlen, "%s.%s is NULL", sym, missing);
		dlclose(net->dl);
		net->dl = NULL;
		net->table = NULL;
		return -1;
	}
	return 0;
}

void fh_net_unload(fh_net_t *net)
{
	if (net->dl)
		dlclose(net->dl);
	net->dl = NULL;
	net->table = NULL;
	net->ctx = NULL;
}

const char *fh_net_name(const fh_net_t *net)
{
	return net->ops->name(net);
}

int fh_net_max_requests(const fh_net_t *net)
{
	return net->version == 6 ? NCCL_NET_MAX_REQUESTS_V6 : NCCL_NET_MAX_REQUESTS;
}

const ncclFabricTools_v1_t *fh_net_tools(const fh_net_t *net)
{
	if (!net->dl)
		return NULL;
	const ncclFabricTools_v1_t *tools = dlsym(net->dl, NCCL_FABRIC_TOOLS_SYMBOL);
	if (!tools || tools->version < 1)
		return NULL;
	return tools;
}

int fh_net_has_finalize(const fh_net_t *net)
{
	return net->ops->has_optional(net, "finalize");
}

int fh_net_has_optional(const fh_net_t *net, const char *member)
{
	return net->ops->has_optional(net, member);
}

/* ------------------------------------------------------------ init / props */

ncclResult_t fh_net_init_ctx(fh_net_t *net, void **ctx)
{
	return net->ops->init(net, ctx);
}

ncclResult_t fh_net_init(fh_net_t *net)
{
	net->ctx = NULL;
	return fh_net_init_ctx(net, &net->ctx);
}

ncclResult_t fh_net_finalize(fh_net_t *net, void *ctx)
{
	return net->ops->finalize(net, ctx);
}

ncclResult_t fh_net_devices(fh_net_t *net, int *ndev)
{
	return net->ops->devices(net, ndev);
}

ncclResult_t fh_net_get_properties(fh_net_t *net, int dev, fh_props_t *p)
{
	memset(p, 0, sizeof(*p));
	ncclResult_t rc = net->ops->get_properties(net, dev, p);
	if (rc == ncclSuccess && (p->have & FH_HAVE_NETDEVICE))
		net->props_device_type = p->netDeviceType;
	return rc;
}

/* ------------------------------------------------------------ connections */

ncclResult_t fh_net_listen(fh_net_t *net, void *ctx, int dev, void *handle, void **lcomm)
{
	return net->ops->listen(net, ctx, dev, handle, lcomm);
}

/* Records what a device handle returned from connect/accept looked like. */
static void fh_net_note_devcomm(fh_net_t *net, ncclNetDeviceHandle_t *dh)
{
	if (!dh)
		return;
	atomic_store(&net->devcomm_seen, 1);
	if (net->props_device_type >= 0 && (int)dh->netDeviceType != net->props_device_type)
		atomic_store(&net->devcomm_bad_type, 1);
}

ncclResult_t fh_net_connect(fh_net_t *net, void *ctx, int dev, void *handle, void **scomm)
{
	ncclNetDeviceHandle_t *dh = NULL;
	ncclNetDeviceHandle_t **dhp = net->devcomm_mode == FH_DEVCOMM_NULL ? NULL : &dh;
	ncclResult_t rc = net->ops->connect(net, ctx, dev, handle, scomm, dhp);
	if (rc == ncclSuccess && *scomm)
		fh_net_note_devcomm(net, dh);
	return rc;
}

ncclResult_t fh_net_accept(fh_net_t *net, void *lcomm, void **rcomm)
{
	ncclNetDeviceHandle_t *dh = NULL;
	ncclNetDeviceHandle_t **dhp = net->devcomm_mode == FH_DEVCOMM_NULL ? NULL : &dh;
	ncclResult_t rc = net->ops->accept(net, lcomm, rcomm, dhp);
	if (rc == ncclSuccess && *rcomm)
		fh_net_note_devcomm(net, dh);
	return rc;
}

ncclResult_t fh_net_close_send(fh_net_t *net, void *scomm)
{
	return net->ops->close_send(net, scomm);
}

ncclResult_t fh_net_close_recv(fh_net_t *net, void *rcomm)
{
	return net->ops->close_recv(net, rcomm);
}

ncclResult_t fh_net_close_listen(fh_net_t *net, void *lcomm)
{
	return net->ops->close_listen(net, lcomm);
}

ncclResult_t fh_net_set_net_attr(fh_net_t *net, void *ctx, ncclNetAttr_t *attr)
{
	return net->ops->set_net_attr(net, ctx, attr);
}

/* ------------------------------------------------------------ memory */

ncclResult_t fh_net_reg_mr(fh_net_t *net, void *comm, void *data, size_t size, int type,
			   void **mhandle)
{
	return net->ops->reg_mr(net, comm, data, size, type, mhandle);
}

ncclResult_t fh_net_reg_mr_dmabuf(fh_net_t *net, void *comm, void *data, size_t size, int type,
				  uint64_t offset, int fd, void **mhandle)
{
	return net->ops->reg_mr_dmabuf(net, comm, data, size, type, offset, fd, mhandle);
}

ncclResult_t fh_net_dereg_mr(fh_net_t *net, void *comm, void *mhandle)
{
	return net->ops->dereg_mr(net, comm, mhandle);
}

/* ------------------------------------------------------------ data path */

ncclResult_t fh_net_isend(fh_net_t *net, void *scomm, void *data, size_t size, int tag,
			  void *mhandle, void **request)
{
	return net->ops->isend(net, scomm, data, size, tag, mhandle, request);
}

ncclResult_t fh_net_irecv(fh_net_t *net, void *rcomm, int n, void **data, size_t *sizes,
			  int *tags, void **mhandles, void **request)
{
	if (n < 1 || n > FH_MAX_GROUP)
		return ncclInvalidArgument;
	return net->ops->irecv(net, rcomm, n, data, sizes, tags, mhandles, request);
}

ncclResult_t fh_net_iflush(fh_net_t *net, void *rcomm, int n, void **data, int *sizes,
			   void **mhandles, void **request)
{
	return net->ops->iflush(net, rcomm, n, data, sizes, mhandles, request);
}

ncclResult_t fh_net_test(fh_net_t *net, void *request, int *done, int *sizes)
{
	return net->ops->test(net, request, done, sizes);
}
