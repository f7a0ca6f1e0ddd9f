/*
 * nccl-fabric-info - what the plugin will do on this machine, and why.
 *
 * Loads libnccl-net-fabric.so exactly as NCCL does (dlopen RTLD_NOW|RTLD_LOCAL)
 * and prints its discovery and GPU-memory report: libfabric versions, every
 * discovery attempt and candidate with the reason it was kept or rejected, the
 * devices NCCL will see, the FI_OPT_CUDA_API_PERMITTED answers, the FI_HMEM
 * decision, and every NCCL_FABRIC_* setting with its source.
 * Exit status: 0 when a usable provider exists, 1 when none does, 2 on usage
 * or load errors.
 */
#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nccl_fabric_tools.h"

static void usage(FILE *out)
{
	fprintf(out,
		"usage: nccl-fabric-info [--json] [--candidates] [--settings] [--plugin PATH]\n"
		"                        [--provider LIST] [--hmem auto|force|off]\n"
		"\n"
		"The verdict comes first: libfabric version, provider, the devices, the\n"
		"FI_OPT_CUDA_API_PERMITTED answer, the GPU-memory decision, what NCCL will\n"
		"do, and the remedy; then the devices, the settings and the CUDA driver.\n"
		"\n"
		"  --json           one JSON object instead of text (with the candidates)\n"
		"  --candidates     also every discovery attempt and candidate, with the\n"
		"                   reason each was kept or rejected\n"
		"  --settings       only the NCCL_FABRIC_* settings\n"
		"  --plugin PATH    the plugin to load (default: NCCL_NET_PLUGIN when it is a\n"
		"                   path, else ../lib/libnccl-net-fabric.so beside this tool)\n"
		"  --provider LIST  same as NCCL_FABRIC_PROVIDER=LIST\n"
		"  --hmem MODE      same as NCCL_FABRIC_HMEM=MODE\n");
}

static void default_plugin_path(char *buf, size_t len)
{
	const char *env = getenv("NCCL_NET_PLUGIN");
	if (env && strchr(env, '/')) {
		snprintf(buf, len, "%s", env);
		return;
	}
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n > 0) {
		exe[n] = '\0';
		snprintf(buf, len, "%s/../lib/libnccl-net-fabric.so", dirname(exe));
		if (access(buf, R_OK) == 0)
			return;
	}
	snprintf(buf, len, "libnccl-net-fabric.so"); /* the loader's search path */
}

int main(int argc, char **argv)
{
	int json = 0, settings_only = 0, candidates = 0;
	char plugin[PATH_MAX] = "";
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			json = 1;
		} else if (!strcmp(argv[i], "--candidates") || !strcmp(argv[i], "--all")) {
			candidates = 1;
		} else if (!strcmp(argv[i], "--settings")) {
			settings_only = 1;
		} else if (!strcmp(argv[i], "--plugin") && i + 1 < argc) {
			snprintf(plugin, sizeof(plugin), "%s", argv[++i]);
		} else if (!strcmp(argv[i], "--provider") && i + 1 < argc) {
			setenv("NCCL_FABRIC_PROVIDER", argv[++i], 1);
		} else if (!strcmp(argv[i], "--hmem") && i + 1 < argc) {
			setenv("NCCL_FABRIC_HMEM", argv[++i], 1);
		} else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			usage(stdout);
			return 0;
		} else {
			usage(stderr);
			return 2;
		}
	}
	if (!plugin[0])
		default_plugin_path(plugin, sizeof(plugin));

	void *lib = dlopen(plugin, RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		fprintf(stderr, "nccl-fabric-info: cannot load %s: %s\n", plugin, dlerror());
		return 2;
	}
	const ncclFabricTools_v1_t *tools = dlsym(lib, NCCL_FABRIC_TOOLS_SYMBOL);
	if (!tools || tools->version < NCCL_FABRIC_TOOLS_VERSION) {
		fprintf(stderr, "nccl-fabric-info: %s has no %s table: not this project's plugin?\n",
			plugin, NCCL_FABRIC_TOOLS_SYMBOL);
		return 2;
	}
	if (settings_only) {
		tools->settings(stdout, json);
		return 0;
	}
	if (!json)
		printf("plugin: %s\n", plugin);
	int rc = tools->report(stdout, (json ? NCCL_FABRIC_REPORT_JSON : 0) |
					       (candidates ? NCCL_FABRIC_REPORT_CANDIDATES : 0));
	fflush(stdout);
	if (rc)
		fprintf(stderr, "nccl-fabric-info: no usable provider (see \"provider:\" above; "
				"--candidates says why each was rejected)\n");
	return rc ? 1 : 0;
}
