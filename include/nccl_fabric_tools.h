/*
 * nccl_fabric_tools.h - the one table libnccl-net-fabric.so exports besides
 * NCCL's ncclNetPlugin_vN tables. The project's tools (nccl-fabric-info, the
 * conformance checker, the benchmarks) dlopen the same library NCCL loads and
 * ask it, through this table, what it decided and why. Nothing here is for NCCL.
 *
 * Use: dlopen the plugin, call any ncclNetPlugin_vN.init (that runs discovery and
 * the GPU-memory policy), then dlsym(NCCL_FABRIC_TOOLS_SYMBOL).
 */
#ifndef NCCL_FABRIC_TOOLS_H
#define NCCL_FABRIC_TOOLS_H

#include <stdio.h>

#define NCCL_FABRIC_TOOLS_SYMBOL "ncclFabricTools_v1"
#define NCCL_FABRIC_TOOLS_VERSION 1

#define NCCL_FABRIC_REPORT_JSON 1
#define NCCL_FABRIC_REPORT_CANDIDATES 2

typedef struct {
	int version;                /* NCCL_FABRIC_TOOLS_VERSION */
	const char *plugin_version; /* e.g. "0.1.0" */
	/* Full discovery and policy report: libfabric versions, every discovery
	 * attempt and candidate with the reason it was kept or rejected, the devices
	 * NCCL sees, the GPU-memory decision and every NCCL_FABRIC_* setting.
	 * flags: NCCL_FABRIC_REPORT_JSON writes one JSON object (always with the
	 * candidates); the text puts the verdict first and lists the discovery
	 * attempts and candidates only with NCCL_FABRIC_REPORT_CANDIDATES. Works
	 * before init too (then it runs discovery itself). Returns 0 when a usable
	 * provider exists, else 1. */
	int (*report)(FILE *out, int flags);
	/* Provider the plugin uses ("tcp;ofi_rxm"), or NULL when none/not initialized. */
	const char *(*provider)(void);
	/* Every NCCL_FABRIC_* setting: name, value, source, help. json as above. */
	void (*settings)(FILE *out, int json);
	/* Largest message device dev sends without waiting for the receiver's
	 * clear-to-send (0: every message waits, as without FI_TAGGED), or -1
	 * when there is no such device. */
	long (*eager_max)(int dev);
} ncclFabricTools_v1_t;

#endif
