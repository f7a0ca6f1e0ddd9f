/*
 * nccl_versions.h - the NCCL net API versions the plugin exports and the
 * harness drives, listed once. Everything that goes per version derives from
 * this list: the library's table declarations and getProperties adapters
 * (abi/abi.h, abi/abi_common.c), the abi_vN.c sources and the newest and
 * older versions the functional tests run (CMake reads the X(N, lines), the
 * harness's call interface and FH_VERSION_MIN/MAX (tools/harness), and with
 * them the checker's and the perf tool's version ranges.
 *
 * One line per version, oldest first, no gaps:
 *   X(N, PROPS, INIT, CONN, REGMR, DATA, SINCE)
 *   N      the version: ncclNet_vN_t, exported as ncclNetPlugin_vN (abi_vN.c)
 *   PROPS  its properties layout, ncclNetProperties_vPROPS_t
 *   INIT   init's arguments: LOG (logger), PROF (logger, profiler callback),
 *          CTX (&ctx, commId, config, logger, profiler callback)
 *   CONN   listen/connect/accept: PLAIN (no device handles), DEV (device-handle
 *          out-arguments on connect/accept), CFG (DEV, and a comm config on
 *          connect), CTX (DEV, and the init's ctx on listen/connect)
 *   REGMR  regMr's size: INT or SIZE (size_t)
 *   DATA   isend/irecv: INT sizes, SIZE (size_t) sizes, or PHANDLE (size_t
 *          sizes and profiler handles)
 *   SINCE  the optional members it has: 6 (none), 7 (getDeviceMr,
 *          irecvConsumed), 9 (and makeVDevice), 11 (and finalize, setNetAttr)
 * A new version in the same shape as the newest: its types in nccl_net.h, its
 * line here and its abi_vN.c (src/abi/README.md has the checklist).
 */
#ifndef NCCL_VERSIONS_H
#define NCCL_VERSIONS_H

#include "nccl_net.h"

#define NCCL_NET_VERSIONS(X)                            \
	X(6, 6, LOG, PLAIN, INT, INT, 6)                \
	X(7, 7, LOG, DEV, INT, INT, 7)                  \
	X(8, 8, LOG, DEV, SIZE, INT, 7)                 \
	X(9, 9, LOG, DEV, SIZE, SIZE, 9)                \
	X(10, 9, PROF, CFG, SIZE, PHANDLE, 9)           \
	X(11, 11, CTX, CTX, SIZE, PHANDLE, 11)          \
	X(12, 12, CTX, CTX, SIZE, PHANDLE, 11)

/* The oldest version; the newest follows from the number of lines. Both are
 * plain numbers to the preprocessor (#if works on them). */
#define NCCL_NET_VERSION_MIN 6
#define NCCL_NET_VERSION_ONE_(N, ...) +1
#define NCCL_NET_VERSION_COUNT (0 NCCL_NET_VERSIONS(NCCL_NET_VERSION_ONE_))
#define NCCL_NET_VERSION_MAX (NCCL_NET_VERSION_MIN + NCCL_NET_VERSION_COUNT - 1)

/* The list is what it says: its versions, one bit each, are exactly
 * MIN..MAX, so no version is missing or listed twice; each line names a
 * table and a properties type that nccl_net.h defines. */
#define NCCL_NET_VERSION_BIT_(N, ...) | (1ull << (N))
#define NCCL_NET_VERSION_MASK (0ull NCCL_NET_VERSIONS(NCCL_NET_VERSION_BIT_))
_Static_assert(NCCL_NET_VERSION_MAX < 64 &&
		       NCCL_NET_VERSION_MASK == (((1ull << NCCL_NET_VERSION_MAX) << 1) -
						 (1ull << NCCL_NET_VERSION_MIN)),
	       "nccl_versions.h: the list must hold each version from NCCL_NET_VERSION_MIN up once");
#define NCCL_NET_VERSION_TYPES_(N, P, ...)                                                 \
	_Static_assert(sizeof(ncclNet_v##N##_t) > 0 && sizeof(ncclNetProperties_v##P##_t) > 0, \
		       "nccl_versions.h: v" #N "'s types");
NCCL_NET_VERSIONS(NCCL_NET_VERSION_TYPES_)

#endif /* NCCL_VERSIONS_H */
