/*
 * fh_net.c - locate and load the plugin, and present every ncclNet_vN_t table
 * through one latest-style interface.
 *
 * This is the only file that knows the per-version differences:
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

#define T6(net) ((const ncclNet_v6_t *)(net)->table)
#define T7(net) ((const ncclNet_v7_t *)(net)->table)
#define T8(net) ((const ncclNet_v8_t *)(net)->table)
#define T9(net) ((const ncclNet_v9_t *)(net)->table)
#define T10(net) ((const ncclNet_v10_t *)(net)->table)
#define T11(net) ((const ncclNet_v11_t *)(net)->table)
#define T12(net) ((const ncclNet_v12_t *)(net)->table)

/* Every switch on the version below has a case for each of these versions
 * and no other. Raising FH_VERSION_MAX stops the build here until the new
 * version has its case in each switch (src/abi/README.md has the list). */
_Static_assert(FH_VERSION_MIN == 6 && FH_VERSION_MAX == 12,
	       "fh_net.c drives table versions 6..12: give a new version its case in every "
	       "switch on net->version in tools/harness/fh_net.c");

/* A version no switch here has a case for: said on stderr and an error for
 * the caller, never taken as the newest version's table. */
static ncclResult_t fh_net_unknown_version(const fh_net_t *net, const char *call)
{
	fprintf(stderr,
		"harness: %s: NCCL net table version %d is unknown here (the harness drives "
		"versions %d..%d); add its case to each switch in tools/harness/fh_net.c\n",
		call, net->version, FH_VERSION_MIN, FH_VERSION_MAX);
	return ncclInternalError;
}

/* Run the statement with `t` bound to the version's table type; only for
 * members whose signature is the same in every version that has them. An
 * unknown version runs `unknown` instead. */
#define FH_DISPATCH(net, t, unknown, ...)                                                \
	do {                                                                              \
		switch ((net)->version) {                                                 \
		case 6: { const ncclNet_v6_t *t = T6(net); __VA_ARGS__; } break;          \
		case 7: { const ncclNet_v7_t *t = T7(net); __VA_ARGS__; } break;          \
		case 8: { const ncclNet_v8_t *t = T8(net); __VA_ARGS__; } break;          \
		case 9: { const ncclNet_v9_t *t = T9(net); __VA_ARGS__; } break;          \
		case 10: { const ncclNet_v10_t *t = T10(net); __VA_ARGS__; } break;       \
		case 11: { const ncclNet_v11_t *t = T11(net); __VA_ARGS__; } break;       \
		case 12: { const ncclNet_v12_t *t = T12(net); __VA_ARGS__; } break;       \
		default: unknown; break;                                                  \
		}                                                                         \
	} while (0)

/* Same, for members that only exist from v7 on (v6: nothing runs). */
#define FH_DISPATCH7(net, t, unknown, ...)                                               \
	do {                                                                              \
		switch ((net)->version) {                                                 \
		case 6: break;                                                            \
		case 7: { const ncclNet_v7_t *t = T7(net); __VA_ARGS__; } break;          \
		case 8: { const ncclNet_v8_t *t = T8(net); __VA_ARGS__; } break;          \
		case 9: { const ncclNet_v9_t *t = T9(net); __VA_ARGS__; } break;          \
		case 10: { const ncclNet_v10_t *t = T10(net); __VA_ARGS__; } break;       \
		case 11: { const ncclNet_v11_t *t = T11(net); __VA_ARGS__; } break;       \
		case 12: { const ncclNet_v12_t *t = T12(net); __VA_ARGS__; } break;       \
		default: unknown; break;                                                  \
		}                                                                         \
	} while (0)

/* The unknown-version action of a dispatch whose result is `rc`. */
#define FH_UNKNOWN_RC(net, rc) (rc) = fh_net_unknown_version((net), __func__)

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

/* Name of the first member NCCL would call without a NULL check that the
 * table leaves NULL, or NULL when the table is complete. */
static const char *fh_net_missing_member(const fh_net_t *net)
{
	const char *missing = NULL;
	FH_DISPATCH(net, t, missing = "(every member: unknown version)",
		    if (!t->name) missing = "name";
		    else if (!t->init) missing = "init";
		    else if (!t->devices) missing = "devices";
		    else if (!t->getProperties) missing = "getProperties";
		    else if (!t->listen) missing = "listen";
		    else if (!t->connect) missing = "connect";
		    else if (!t->accept) missing = "accept";
		    else if (!t->regMr) missing = "regMr";
		    else if (!t->deregMr) missing = "deregMr";
		    else if (!t->isend) missing = "isend";
		    else if (!t->irecv) missing = "irecv";
		    else if (!t->iflush) missing = "iflush";
		    else if (!t->test) missing = "test";
		    else if (!t->closeSend) missing = "closeSend";
		    else if (!t->closeRecv) missing = "closeRecv";
		    else if (!t->closeListen) missing = "closeListen");
	if (!missing && net->version >= 11 && !fh_net_has_finalize(net))
		missing = "finalize";
	return missing;
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
	const char *missing = fh_net_missing_member(net);
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
	const char *name = NULL;
	FH_DISPATCH(net, t, (void)fh_net_unknown_version(net, __func__), name = t->name);
	return name;
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
	switch (net->version) {
	case 6: case 7: case 8: case 9: case 10: return 0; /* no finalize member */
	case 11: return T11(net)->finalize != NULL;
	case 12: return T12(net)->finalize != NULL;
	default: (void)fh_net_unknown_version(net, __func__); return 0;
	}
}

int fh_net_has_optional(const fh_net_t *net, const char *member)
{
	int has = 0;
	int bad = 0; /* a version no case knows */
	if (!strcmp(member, "regMrDmaBuf"))
		FH_DISPATCH(net, t, bad = 1, has = t->regMrDmaBuf != NULL);
	else if (!strcmp(member, "getDeviceMr"))
		FH_DISPATCH7(net, t, bad = 1, has = t->getDeviceMr != NULL);
	else if (!strcmp(member, "irecvConsumed"))
		FH_DISPATCH7(net, t, bad = 1, has = t->irecvConsumed != NULL);
	else if (!strcmp(member, "makeVDevice")) {
		switch (net->version) {
		case 6: case 7: case 8: break; /* no such member */
		case 9: has = T9(net)->makeVDevice != NULL; break;
		case 10: has = T10(net)->makeVDevice != NULL; break;
		case 11: has = T11(net)->makeVDevice != NULL; break;
		case 12: has = T12(net)->makeVDevice != NULL; break;
		default: bad = 1; break;
		}
	} else if (!strcmp(member, "setNetAttr")) {
		switch (net->version) {
		case 6: case 7: case 8: case 9: case 10: break; /* no such member */
		case 11: has = T11(net)->setNetAttr != NULL; break;
		case 12: has = T12(net)->setNetAttr != NULL; break;
		default: bad = 1; break;
		}
	}
	if (bad)
		(void)fh_net_unknown_version(net, __func__);
	return has;
}

/* ------------------------------------------------------------ init / props */

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

ncclResult_t fh_net_init_ctx(fh_net_t *net, void **ctx)
{
	switch (net->version) {
	case 6: return T6(net)->init(fh_logger);
	case 7: return T7(net)->init(fh_logger);
	case 8: return T8(net)->init(fh_logger);
	case 9: return T9(net)->init(fh_logger);
	case 10: return T10(net)->init(fh_logger, fh_profiler_cb);
	case 11:
		return T11(net)->init(ctx, net->comm_id++, &net->config, fh_logger, fh_profiler_cb);
	case 12:
		return T12(net)->init(ctx, net->comm_id++, &net->config, fh_logger, fh_profiler_cb);
	default:
		return fh_net_unknown_version(net, __func__);
	}
}

ncclResult_t fh_net_init(fh_net_t *net)
{
	net->ctx = NULL;
	return fh_net_init_ctx(net, &net->ctx);
}

ncclResult_t fh_net_finalize(fh_net_t *net, void *ctx)
{
	switch (net->version) {
	case 6: case 7: case 8: case 9: case 10: return ncclSuccess; /* no finalize member */
	case 11: return T11(net)->finalize(ctx);
	case 12: return T12(net)->finalize(ctx);
	default: return fh_net_unknown_version(net, __func__);
	}
}

ncclResult_t fh_net_devices(fh_net_t *net, int *ndev)
{
	ncclResult_t rc = ncclSuccess;
	FH_DISPATCH(net, t, FH_UNKNOWN_RC(net, rc), rc = t->devices(ndev));
	return rc;
}

#define FH_COPY_V6(dst, src)                                                              \
	do {                                                                              \
		(dst)->name = (src).name;                                                 \
		(dst)->pciPath = (src).pciPath;                                           \
		(dst)->guid = (src).guid;                                                 \
		(dst)->ptrSupport = (src).ptrSupport;                                     \
		(dst)->speed = (src).speed;                                               \
		(dst)->port = (src).port;                                                 \
		(dst)->latency = (src).latency;                                           \
		(dst)->maxComms = (src).maxComms;                                         \
		(dst)->maxRecvs = (src).maxRecvs;                                         \
	} while (0)

#define FH_COPY_V9(dst, src, cap)                                                         \
	do {                                                                              \
		FH_COPY_V6(dst, src);                                                     \
		(dst)->netDeviceType = (src).netDeviceType;                               \
		(dst)->netDeviceVersion = (src).netDeviceVersion;                         \
		(dst)->regIsGlobal = (src).regIsGlobal;                                   \
		(dst)->forceFlush = (src).forceFlush;                                     \
		(dst)->vndevs = (src).vProps.ndevs;                                       \
		(dst)->vdevs_cap = (cap);                                                 \
		for (int i_ = 0; i_ < (cap); i_++)                                        \
			(dst)->vdevs[i_] = (src).vProps.devs[i_];                         \
		(dst)->maxP2pBytes = (src).maxP2pBytes;                                   \
		(dst)->maxCollBytes = (src).maxCollBytes;                                 \
	} while (0)

ncclResult_t fh_net_get_properties(fh_net_t *net, int dev, fh_props_t *p)
{
	ncclResult_t rc;
	memset(p, 0, sizeof(*p));
	switch (net->version) {
	case 6: {
		ncclNetProperties_v6_t q;
		memset(&q, 0, sizeof(q));
		rc = T6(net)->getProperties(dev, &q);
		FH_COPY_V6(p, q);
		break;
	}
	case 7: {
		ncclNetProperties_v7_t q;
		memset(&q, 0, sizeof(q));
		rc = T7(net)->getProperties(dev, &q);
		FH_COPY_V6(p, q);
		p->netDeviceType = q.netDeviceType;
		p->netDeviceVersion = q.netDeviceVersion;
		p->have = FH_HAVE_NETDEVICE;
		break;
	}
	case 8: {
		ncclNetProperties_v8_t q;
		memset(&q, 0, sizeof(q));
		rc = T8(net)->getProperties(dev, &q);
		FH_COPY_V6(p, q);
		p->netDeviceType = q.netDeviceType;
		p->netDeviceVersion = q.netDeviceVersion;
		p->regIsGlobal = q.regIsGlobal;
		p->have = FH_HAVE_NETDEVICE | FH_HAVE_REGISGLOBAL;
		break;
	}
	case 9:
	case 10: {
		ncclNetProperties_v9_t q;
		memset(&q, 0, sizeof(q));
		rc = net->version == 9 ? T9(net)->getProperties(dev, &q)
				       : T10(net)->getProperties(dev, &q);
		FH_COPY_V9(p, q, NCCL_NET_MAX_DEVS_PER_NIC_V9);
		p->have = FH_HAVE_NETDEVICE | FH_HAVE_REGISGLOBAL | FH_HAVE_V9;
		break;
	}
	case 11: {
		ncclNetProperties_v11_t q;
		memset(&q, 0, sizeof(q));
		rc = T11(net)->getProperties(dev, &q);
		FH_COPY_V9(p, q, NCCL_NET_MAX_DEVS_PER_NIC_V9);
		p->maxMultiRequestSize = q.maxMultiRequestSize;
		p->have = FH_HAVE_NETDEVICE | FH_HAVE_REGISGLOBAL | FH_HAVE_V9 | FH_HAVE_MULTIREQ;
		break;
	}
	case 12: {
		ncclNetProperties_v12_t q;
		memset(&q, 0, sizeof(q));
		rc = T12(net)->getProperties(dev, &q);
		FH_COPY_V9(p, q, NCCL_NET_MAX_DEVS_PER_NIC_V12);
		p->maxMultiRequestSize = q.maxMultiRequestSize;
		p->railId = q.railId;
		p->planeId = q.planeId;
		p->have = FH_HAVE_NETDEVICE | FH_HAVE_REGISGLOBAL | FH_HAVE_V9 | FH_HAVE_MULTIREQ |
			  FH_HAVE_RAIL;
		break;
	}
	default:
		return fh_net_unknown_version(net, __func__);
	}
	if (rc == ncclSuccess && (p->have & FH_HAVE_NETDEVICE))
		net->props_device_type = p->netDeviceType;
	return rc;
}

/* ------------------------------------------------------------ connections */

ncclResult_t fh_net_listen(fh_net_t *net, void *ctx, int dev, void *handle, void **lcomm)
{
	switch (net->version) {
	case 6: return T6(net)->listen(dev, handle, lcomm);
	case 7: return T7(net)->listen(dev, handle, lcomm);
	case 8: return T8(net)->listen(dev, handle, lcomm);
	case 9: return T9(net)->listen(dev, handle, lcomm);
	case 10: return T10(net)->listen(dev, handle, lcomm);
	case 11: return T11(net)->listen(ctx, dev, handle, lcomm);
	case 12: return T12(net)->listen(ctx, dev, handle, lcomm);
	default: return fh_net_unknown_version(net, __func__);
	}
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
	ncclResult_t rc;
	switch (net->version) {
	case 6: return T6(net)->connect(dev, handle, scomm);
	case 7: rc = T7(net)->connect(dev, handle, scomm, dhp); break;
	case 8: rc = T8(net)->connect(dev, handle, scomm, dhp); break;
	case 9: rc = T9(net)->connect(dev, handle, scomm, dhp); break;
	case 10: rc = T10(net)->connect(dev, &net->config, handle, scomm, dhp); break;
	case 11: rc = T11(net)->connect(ctx, dev, handle, scomm, dhp); break;
	case 12: rc = T12(net)->connect(ctx, dev, handle, scomm, dhp); break;
	default: return fh_net_unknown_version(net, __func__);
	}
	if (rc == ncclSuccess && *scomm)
		fh_net_note_devcomm(net, dh);
	return rc;
}

ncclResult_t fh_net_accept(fh_net_t *net, void *lcomm, void **rcomm)
{
	if (net->version == 6)
		return T6(net)->accept(lcomm, rcomm);
	ncclNetDeviceHandle_t *dh = NULL;
	ncclNetDeviceHandle_t **dhp = net->devcomm_mode == FH_DEVCOMM_NULL ? NULL : &dh;
	ncclResult_t rc = ncclSuccess;
	FH_DISPATCH7(net, t, FH_UNKNOWN_RC(net, rc), rc = t->accept(lcomm, rcomm, dhp));
	if (rc == ncclSuccess && *rcomm)
		fh_net_note_devcomm(net, dh);
	return rc;
}

ncclResult_t fh_net_close_send(fh_net_t *net, void *scomm)
{
	ncclResult_t rc = ncclSuccess;
	FH_DISPATCH(net, t, FH_UNKNOWN_RC(net, rc), rc = t->closeSend(scomm));
	return rc;
}

ncclResult_t fh_net_close_recv(fh_net_t *net, void *rcomm)
{
	ncclResult_t rc = ncclSuccess;
	FH_DISPATCH(net, t, FH_UNKNOWN_RC(net, rc), rc = t->closeRecv(rcomm));
	return rc;
}

ncclResult_t fh_net_close_listen(fh_net_t *net, void *lcomm)
{
	ncclResult_t rc = ncclSuccess;
	FH_DISPATCH(net, t, FH_UNKNOWN_RC(net, rc), rc = t->closeListen(lcomm));
	return rc;
}

ncclResult_t fh_net_set_net_attr(fh_net_t *net, void *ctx, ncclNetAttr_t *attr)
{
	switch (net->version) {
	case 6: case 7: case 8: case 9: case 10: return ncclInvalidUsage; /* no such member */
	case 11: return T11(net)->setNetAttr ? T11(net)->setNetAttr(ctx, attr) : ncclInvalidUsage;
	case 12: return T12(net)->setNetAttr ? T12(net)->setNetAttr(ctx, attr) : ncclInvalidUsage;
	default: return fh_net_unknown_version(net, __func__);
	}
}

/* ------------------------------------------------------------ memory */

ncclResult_t fh_net_reg_mr(fh_net_t *net, void *comm, void *data, size_t size, int type,
			   void **mhandle)
{
	if (net->version <= 7) {
		if (size > INT_MAX)
			return ncclInvalidArgument;
		return net->version == 6 ? T6(net)->regMr(comm, data, (int)size, type, mhandle)
					 : T7(net)->regMr(comm, data, (int)size, type, mhandle);
	}
	ncclResult_t rc = ncclSuccess;
	switch (net->version) {
	case 8: rc = T8(net)->regMr(comm, data, size, type, mhandle); break;
	case 9: rc = T9(net)->regMr(comm, data, size, type, mhandle); break;
	case 10: rc = T10(net)->regMr(comm, data, size, type, mhandle); break;
	case 11: rc = T11(net)->regMr(comm, data, size, type, mhandle); break;
	case 12: rc = T12(net)->regMr(comm, data, size, type, mhandle); break;
	default: rc = fh_net_unknown_version(net, __func__); break;
	}
	return rc;
}

ncclResult_t fh_net_reg_mr_dmabuf(fh_net_t *net, void *comm, void *data, size_t size, int type,
				  uint64_t offset, int fd, void **mhandle)
{
	ncclResult_t rc = ncclSuccess;
	FH_DISPATCH(net, t, FH_UNKNOWN_RC(net, rc),
		    rc = t->regMrDmaBuf ? t->regMrDmaBuf(comm, data, size, type, offset, fd, mhandle)
					: ncclInvalidUsage);
	return rc;
}

ncclResult_t fh_net_dereg_mr(fh_net_t *net, void *comm, void *mhandle)
{
	ncclResult_t rc = ncclSuccess;
	FH_DISPATCH(net, t, FH_UNKNOWN_RC(net, rc), rc = t->deregMr(comm, mhandle));
	return rc;
}

/* ------------------------------------------------------------ data path */

ncclResult_t fh_net_isend(fh_net_t *net, void *scomm, void *data, size_t size, int tag,
			  void *mhandle, void **request)
{
	if (net->version <= 8) {
		if (size > INT_MAX)
			return ncclInvalidArgument;
		ncclResult_t rc = ncclSuccess;
		switch (net->version) {
		case 6: rc = T6(net)->isend(scomm, data, (int)size, tag, mhandle, request); break;
		case 7: rc = T7(net)->isend(scomm, data, (int)size, tag, mhandle, request); break;
		case 8: rc = T8(net)->isend(scomm, data, (int)size, tag, mhandle, request); break;
		default: rc = fh_net_unknown_version(net, __func__); break;
		}
		return rc;
	}
	switch (net->version) {
	case 9: return T9(net)->isend(scomm, data, size, tag, mhandle, request);
	case 10: return T10(net)->isend(scomm, data, size, tag, mhandle, NULL, request);
	case 11: return T11(net)->isend(scomm, data, size, tag, mhandle, NULL, request);
	case 12: return T12(net)->isend(scomm, data, size, tag, mhandle, NULL, request);
	default: return fh_net_unknown_version(net, __func__);
	}
}

ncclResult_t fh_net_irecv(fh_net_t *net, void *rcomm, int n, void **data, size_t *sizes,
			  int *tags, void **mhandles, void **request)
{
	if (n < 1 || n > FH_MAX_GROUP)
		return ncclInvalidArgument;
	if (net->version <= 8) {
		int isizes[FH_MAX_GROUP];
		for (int i = 0; i < n; i++) {
			if (sizes[i] > INT_MAX)
				return ncclInvalidArgument;
			isizes[i] = (int)sizes[i];
		}
		switch (net->version) {
		case 6: return T6(net)->irecv(rcomm, n, data, isizes, tags, mhandles, request);
		case 7: return T7(net)->irecv(rcomm, n, data, isizes, tags, mhandles, request);
		case 8: return T8(net)->irecv(rcomm, n, data, isizes, tags, mhandles, request);
		default: return fh_net_unknown_version(net, __func__);
		}
	}
	/* NCCL 2.24+ may pre-store this to say "completion optional"; the plugin
	 * must overwrite it with its request (or NULL to retry). */
	*request = (void *)(uintptr_t)NCCL_NET_OPTIONAL_RECV_COMPLETION;
	void *phandles[FH_MAX_GROUP] = {0};
	switch (net->version) {
	case 9: return T9(net)->irecv(rcomm, n, data, sizes, tags, mhandles, request);
	case 10: return T10(net)->irecv(rcomm, n, data, sizes, tags, mhandles, phandles, request);
	case 11: return T11(net)->irecv(rcomm, n, data, sizes, tags, mhandles, phandles, request);
	case 12: return T12(net)->irecv(rcomm, n, data, sizes, tags, mhandles, phandles, request);
	default: return fh_net_unknown_version(net, __func__);
	}
}

ncclResult_t fh_net_iflush(fh_net_t *net, void *rcomm, int n, void **data, int *sizes,
			   void **mhandles, void **request)
{
	ncclResult_t rc = ncclSuccess;
	FH_DISPATCH(net, t, FH_UNKNOWN_RC(net, rc), rc = t->iflush(rcomm, n, data, sizes, mhandles, request));
	return rc;
}

ncclResult_t fh_net_test(fh_net_t *net, void *request, int *done, int *sizes)
{
	ncclResult_t rc = ncclSuccess;
	FH_DISPATCH(net, t, FH_UNKNOWN_RC(net, rc), rc = t->test(request, done, sizes));
	return rc;
}
