/*
 * check_main.c - nccl-fabric-check: runs every case against every requested
 * table version of the plugin, each case in freshly forked ranks under a
 * watchdog, and prints one line per case and version.
 *
 * Exit status: 0 all passed (or skipped), 1 something failed, 77 everything
 * skipped (no device), 2 usage error.
 */
#include "check.h"

#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define CK_MAX_CASES 128
#define CK_MAX_GLOBS 32

struct ck_run {
	const ck_case_t *c;
	int version;
	const struct ck_opts *o;
};

struct ck_totals {
	int passed, failed, skipped;
};

/* ------------------------------------------------------------ rank side */

static int ck_rank_body(fh_rank_t *r, void *arg)
{
	const struct ck_run *run = arg;
	const ck_case_t *c = run->c;
	ck_t ck;
	memset(&ck, 0, sizeof(ck));
	ck.r = r;
	ck.version = run->version;
	ck.dev = run->o->dev;
	ck.o = run->o;
	ck.c = c;
	if ((c->flags & CK_NETNS) && ck_netns_enter(&ck))
		return FH_FAIL;
	if ((c->flags & CK_NETNS_PAIR) && ck_netns_pair(&ck))
		return FH_FAIL;

	fh_net_t *net = NULL;
	if (!(c->flags & CK_OWN_LOAD)) {
		char err[600];
		net = calloc(1, sizeof(*net));
		if (!net)
			return fh_fail(r, "out of memory");
		fh_stage(r, "dlopen and init");
		if (fh_net_open(net, run->o->plugin, run->version, err, sizeof(err)))
			return fh_fail(r, "%s", err);
		ck.net = net;
		if (ck_ok(&ck, fh_net_init(net), "init()") ||
		    ck_ok(&ck, fh_net_devices(net, &ck.ndev), "devices()"))
			return FH_FAIL;
		if (ck.ndev <= ck.dev)
			return fh_fail(r, "devices() returned %d (a moment ago it returned more)",
				       ck.ndev);
		if (ck_ok(&ck, fh_net_get_properties(net, ck.dev, &ck.props), "getProperties()"))
			return FH_FAIL;
	}
	fh_stage(r, "running");
	int ret = c->fn(&ck);
	if (ret == FH_OK && !fh_failed(r) && net && fh_net_has_finalize(net)) {
		/* What NCCL 2.28+ does after the last communicator is gone. */
		fh_stage(r, "finalize and dlclose");
		if (ck_ok(&ck, fh_net_finalize(net, net->ctx), "finalize() at the end of the case"))
			return FH_FAIL;
		fh_net_unload(net);
	}
	/* v6..v10: NCCL never unloads; the library stays until the rank exits. */
	free(net);
	return ret;
}

static int ck_probe_body(fh_rank_t *r, void *arg)
{
	const struct ck_run *run = arg;
	fh_net_t *net = calloc(1, sizeof(*net));
	char err[600];
	if (!net)
		return fh_fail(r, "out of memory");
	if (fh_net_open(net, run->o->plugin, run->version, err, sizeof(err)))
		return fh_fail(r, "%s", err);
	ncclResult_t rc = fh_net_init(net);
	if (rc != ncclSuccess)
		return fh_skip(r, "init() returned %s (no usable provider? NCCL would fall back)",
			       fh_result_str(rc));
	int ndev = 0;
	rc = fh_net_devices(net, &ndev);
	if (rc != ncclSuccess)
		return fh_fail(r, "init() succeeded but devices() returned %s", fh_result_str(rc));
	if (ndev == 0)
		return fh_skip(r, "no device: devices() returned 0");
	if (run->o->dev >= ndev)
		return fh_skip(r, "--dev %d but devices() returned %d", run->o->dev, ndev);
	fh_props_t p;
	rc = fh_net_get_properties(net, run->o->dev, &p);
	if (rc != ncclSuccess)
		return fh_fail(r, "getProperties(%d) returned %s", run->o->dev, fh_result_str(rc));
	const ncclFabricTools_v1_t *tools = fh_net_tools(net);
	const char *prov = tools && tools->provider ? tools->provider() : NULL;
	fh_note(r, "table \"%s\", %d device(s), dev %d \"%s\", maxRecvs %d, provider %s",
		fh_net_name(net), ndev, run->o->dev, p.name ? p.name : "(null)", p.maxRecvs,
		prov ? prov : "(unknown: no tools table)");
	if (fh_net_has_finalize(net)) {
		rc = fh_net_finalize(net, net->ctx);
		if (rc != ncclSuccess)
			return fh_fail(r, "finalize() returned %s", fh_result_str(rc));
		fh_net_unload(net);
	}
	free(net);
	return FH_OK;
}

/* ------------------------------------------------------------ options */

static void ck_usage(FILE *f)
{
	fprintf(f,
		"usage: nccl-fabric-check [options]\n"
		"Conformance checker for the NCCL net plugin libnccl-net-fabric.so: loads it\n"
		"as NCCL does (dlopen, ncclNetPlugin_vN) in forked ranks and checks the\n"
		"contract NCCL relies on, for each table version.\n\n"
		"  --plugin PATH      plugin to test (default: $NCCL_NET_PLUGIN if it has a '/',\n"
		"                     else <exe dir>/../lib/" FH_PLUGIN_FILE ")\n"
		"  --provider NAME    set NCCL_FABRIC_PROVIDER=NAME (e.g. tcp, shm, udp)\n"
		"  --versions LIST    table versions, e.g. %d,%d-%d (default %d-%d)\n"
		"  --case GLOB[,GLOB] run only matching cases (repeatable); ^GLOB leaves them out\n"
		"  --list             list the cases and exit\n"
		"  --loopback         set FI_TCP_IFACE/FI_UDP_IFACE/FI_SOCKETS_IFACE/FI_NET_IFACE=lo\n"
		"                     when unset\n"
		"  --max-size BYTES   cap message sizes (suffixes K, M, G); larger cases SKIP\n"
		"  --quick            fewer messages and rounds; no size above 16 MiB\n"
		"  --seed N           seed for random sizes and patterns (default: random)\n"
		"  --dev N            device to test (default 0)\n"
		"  --soak-messages N  the soak case runs until N messages went each way\n"
		"                     (instead of 20 s); its time limit grows by N / 1000 s\n\n"
		"Environment: NCCL_FABRIC_TEST_TIMEOUT_MULTIPLIER scales every timeout;\n"
		"NCCL_DEBUG=INFO|TRACE shows the plugin's log (WARN lines always show).\n"
		"Exit status: 0 passed, 1 a case failed, 77 everything skipped, 2 usage.\n",
		FH_VERSION_MIN, FH_VERSION_MIN + 3, FH_VERSION_MAX, FH_VERSION_MIN, FH_VERSION_MAX);
}

/* "6,7,9-12" -> bit mask of versions (bit v: version v). */
_Static_assert(FH_VERSION_MAX < 32, "ck_parse_versions keeps the versions in an unsigned");
static int ck_parse_versions(const char *s, unsigned *mask)
{
	*mask = 0;
	char *copy = strdup(s), *save = NULL;
	if (!copy)
		return -1;
	int ret = 0;
	for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *end;
		while (*tok == 'v' || *tok == 'V' || *tok == ' ')
			tok++;
		long a = strtol(tok, &end, 10), b = a;
		if (*end == '-')
			b = strtol(end + 1 + (end[1] == 'v'), &end, 10);
		if (*end || a < FH_VERSION_MIN || b > FH_VERSION_MAX || a > b) {
			ret = -1;
			break;
		}
		for (long v = a; v <= b; v++)
			*mask |= 1u << v;
	}
	free(copy);
	return ret || !*mask ? -1 : 0;
}

static int ck_add_globs(const char *s, char **globs, int *n)
{
	char *copy = strdup(s), *save = NULL;
	if (!copy)
		return -1;
	for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (*n >= CK_MAX_GLOBS) {
			free(copy);
			return -1;
		}
		globs[(*n)++] = strdup(tok);
	}
	free(copy);
	return 0;
}

/* A glob selects the cases it matches; one starting with '^' leaves them out.
 * With only exclusions, every other case runs. */
static int ck_selected(const ck_case_t *c, char **globs, int nglobs)
{
	int includes = 0, hit = 0;
	for (int i = 0; i < nglobs; i++) {
		if (globs[i][0] == '^') {
			if (!fnmatch(globs[i] + 1, c->name, 0))
				return 0;
			continue;
		}
		includes++;
		hit |= !fnmatch(globs[i], c->name, 0);
	}
	return !includes || hit;
}

static int ck_collect(const ck_case_t **out)
{
	const ck_case_t *(*tables[])(int *) = {ck_cases_basic, ck_cases_traffic, ck_cases_errors,
					       ck_cases_lifecycle, ck_cases_hmem, ck_cases_faults};
	int total = 0;
	for (size_t t = 0; t < sizeof(tables) / sizeof(tables[0]); t++) {
		int n = 0;
		const ck_case_t *cs = tables[t](&n);
		for (int i = 0; i < n && total < CK_MAX_CASES; i++)
			out[total++] = &cs[i];
	}
	return total;
}

static void ck_print(const char *verdict, int version, const char *name, double secs,
		     const char *text)
{
	if (!strcmp(verdict, "PASS"))
		printf("PASS  v%d  %s  %.2fs%s%s\n", version, name, secs, text[0] ? "  " : "", text);
	else
		printf("%s  v%d  %s  %s\n", verdict, version, name, text);
	fflush(stdout);
}

/* ------------------------------------------------------------ main */

int main(int argc, char **argv)
{
	static struct ck_opts o;
	const char *plugin_cli = NULL, *provider = NULL;
	unsigned vmask = 0;
	char *globs[CK_MAX_GLOBS];
	int nglobs = 0, list = 0, loopback = 0, seed_set = 0;
	o.max_size = SIZE_MAX;

	enum { O_PLUGIN = 256, O_PROVIDER, O_VERSIONS, O_CASE, O_LIST, O_LOOPBACK, O_MAXSIZE,
	       O_QUICK, O_SEED, O_DEV, O_SOAK, O_HELP };
	static const struct option longopts[] = {
		{"plugin", required_argument, NULL, O_PLUGIN},
		{"provider", required_argument, NULL, O_PROVIDER},
		{"versions", required_argument, NULL, O_VERSIONS},
		{"case", required_argument, NULL, O_CASE},
		{"list", no_argument, NULL, O_LIST},
		{"loopback", no_argument, NULL, O_LOOPBACK},
		{"max-size", required_argument, NULL, O_MAXSIZE},
		{"quick", no_argument, NULL, O_QUICK},
		{"seed", required_argument, NULL, O_SEED},
		{"dev", required_argument, NULL, O_DEV},
		{"soak-messages", required_argument, NULL, O_SOAK},
		{"help", no_argument, NULL, O_HELP},
		{NULL, 0, NULL, 0},
	};
	int opt;
	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (opt) {
		case O_PLUGIN: plugin_cli = optarg; break;
		case O_PROVIDER: provider = optarg; break;
		case O_VERSIONS:
			if (ck_parse_versions(optarg, &vmask)) {
				fprintf(stderr, "bad --versions '%s' (versions %d to %d, e.g. %d,%d-%d)\n",
					optarg, FH_VERSION_MIN, FH_VERSION_MAX, FH_VERSION_MIN,
					FH_VERSION_MIN + 3, FH_VERSION_MAX);
				return 2;
			}
			break;
		case O_CASE:
			if (ck_add_globs(optarg, globs, &nglobs)) {
				fprintf(stderr, "too many --case patterns\n");
				return 2;
			}
			break;
		case O_LIST: list = 1; break;
		case O_LOOPBACK: loopback = 1; break;
		case O_MAXSIZE:
			if (fh_parse_size(optarg, &o.max_size) || o.max_size == 0) {
				fprintf(stderr, "bad --max-size '%s'\n", optarg);
				return 2;
			}
			break;
		case O_QUICK: o.quick = 1; break;
		case O_SEED:
			o.seed = strtoull(optarg, NULL, 0);
			seed_set = 1;
			break;
		case O_DEV:
			o.dev = atoi(optarg);
			if (o.dev < 0) {
				fprintf(stderr, "bad --dev '%s'\n", optarg);
				return 2;
			}
			break;
		case O_SOAK: {
			char *end = NULL;
			double n = strtod(optarg, &end); /* 1e7 as well as 10000000 */
			if (!end || *end || n < 1 || n > 1e12) {
				fprintf(stderr, "bad --soak-messages '%s'\n", optarg);
				return 2;
			}
			o.soak_msgs = (unsigned long)n;
			break;
		}
		case O_HELP:
		case 'h': ck_usage(stdout); return 0;
		default: ck_usage(stderr); return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "unexpected argument '%s'\n", argv[optind]);
		ck_usage(stderr);
		return 2;
	}
	if (!vmask)
		for (int v = FH_VERSION_MIN; v <= FH_VERSION_MAX; v++)
			vmask |= 1u << v;
	if (!seed_set)
		o.seed = fh_mix64((uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32));

	const ck_case_t *cases[CK_MAX_CASES];
	int ncases = ck_collect(cases);
	int nsel = 0;
	for (int i = 0; i < ncases; i++)
		nsel += ck_selected(cases[i], globs, nglobs);
	if (list) {
		for (int i = 0; i < ncases; i++)
			if (ck_selected(cases[i], globs, nglobs))
				printf("%-22s %d rank%s  v%d-v%d  %s\n", cases[i]->name, cases[i]->nranks,
				       cases[i]->nranks > 1 ? "s" : " ", cases[i]->vmin, cases[i]->vmax,
				       cases[i]->desc);
		for (int i = 0; i < nglobs; i++)
			free(globs[i]);
		return 0;
	}
	if (!nsel) {
		fprintf(stderr, "no case matches --case (see --list)\n");
		return 2;
	}
	if (fh_plugin_locate(plugin_cli, o.plugin, sizeof(o.plugin))) {
		fprintf(stderr, "cannot work out where the plugin is; use --plugin PATH\n");
		return 2;
	}
	/* The ranks inherit the environment; this process never loads the plugin. */
	if (provider)
		setenv("NCCL_FABRIC_PROVIDER", provider, 1);
	if (loopback) {
		static const char *ifaces[] = {"FI_TCP_IFACE", "FI_SOCKETS_IFACE", "FI_UDP_IFACE",
					       "FI_NET_IFACE"};
		for (size_t i = 0; i < sizeof(ifaces) / sizeof(ifaces[0]); i++)
			setenv(ifaces[i], "lo", 0);
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	const char *penv = getenv("NCCL_FABRIC_PROVIDER");
	printf("# nccl-fabric-check: plugin %s\n", o.plugin);
	printf("# NCCL_FABRIC_PROVIDER=%s seed=0x%llx%s%s", penv ? penv : "(unset)",
	       (unsigned long long)o.seed, o.quick ? " --quick" : "", loopback ? " --loopback" : "");
	if (o.max_size != SIZE_MAX)
		printf(" --max-size %zu", o.max_size);
	printf("\n");

	double mult = fh_timeout_multiplier();
	struct ck_totals tot = {0, 0, 0};
	for (int v = FH_VERSION_MIN; v <= FH_VERSION_MAX; v++) {
		if (!(vmask & (1u << v)))
			continue;
		int any = 0;
		for (int i = 0; i < ncases; i++)
			any |= ck_selected(cases[i], globs, nglobs) && v >= cases[i]->vmin &&
			       v <= cases[i]->vmax;
		if (!any)
			continue;
		struct ck_run run = {NULL, v, &o};
		int shm_left = 0;
		fh_outcome_t probe;
		fh_launch(1, CK_DEFAULT_TIMEOUT_S * mult, ck_probe_body, &run, &probe);
		printf("# v%d: %s%s\n", v,
		       probe.status == FH_OK ? "" : probe.status == FH_SKIP ? "SKIP " : "FAIL ",
		       probe.text);
		for (int i = 0; i < ncases; i++) {
			const ck_case_t *c = cases[i];
			if (!ck_selected(c, globs, nglobs) || v < c->vmin || v > c->vmax)
				continue;
			if (probe.status != FH_OK) {
				ck_print(probe.status == FH_SKIP ? "SKIP" : "FAIL", v, c->name, 0,
					 probe.text);
				if (probe.status == FH_SKIP)
					tot.skipped++;
				else
					tot.failed++;
				continue;
			}
			run.c = c;
			fh_outcome_t out;
			double limit = (c->timeout_s > 0 ? c->timeout_s : CK_DEFAULT_TIMEOUT_S) * mult;
			/* a soak counted in messages: at least 1000 a second each way */
			if (o.soak_msgs && strcmp(c->name, "soak") == 0)
				limit += (double)o.soak_msgs / 1000.0 * mult;
			fh_launch(c->nranks, limit, ck_rank_body, &run, &out);
			if (out.status != FH_FAIL)
				shm_left += out.shm_left;
			if (out.status == FH_OK) {
				ck_print("PASS", v, c->name, out.seconds, out.text);
				tot.passed++;
			} else if (out.status == FH_SKIP) {
				ck_print("SKIP", v, c->name, out.seconds, out.text);
				tot.skipped++;
			} else {
				ck_print("FAIL", v, c->name, out.seconds, out.text);
				tot.failed++;
			}
		}
		if (shm_left)
			printf("# v%d: ranks that passed left %d /dev/shm segment(s) behind at exit "
			       "(endpoints never closed%s); the checker removed them\n",
			       v, shm_left, v < 11 ? ": NCCL never finalizes before v11" : "");
	}
	for (int i = 0; i < nglobs; i++)
		free(globs[i]);
	printf("%d passed, %d failed, %d skipped\n", tot.passed, tot.failed, tot.skipped);
	if (tot.failed)
		return 1;
	if (!tot.passed && tot.skipped)
		return FH_SKIP;
	return 0;
}
