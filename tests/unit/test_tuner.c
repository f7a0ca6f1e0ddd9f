/*
 * test_tuner.c - the tuner: policy_tune() over synthetic cost tables, and the
 * ncclTunerPlugin_v6/_v5 tables from the shared library (argv[1]) driven the
 * way NCCL drives them: init per communicator, getCollInfo on a cost table
 * laid out as NCCL's float[7][3], finalize.
 */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl/nccl_tuner.h"
#include "policy/policy_tuner.h"
#include "unit.h"

#define NA NCCL_TUNER_NUM_ALGOS
#define NP NCCL_TUNER_NUM_PROTOS
#define IGN ((float)NCCL_ALGO_PROTO_IGNORE)

/* A table like NCCL's for all_reduce of 64 MiB over 2 nodes, one GPU each:
 * Tree and Ring available with LL and Simple, LL128 off, no CollNet, NVLS or
 * PAT. Tree/Simple is NCCL's pick, Ring/Simple within 1.5x of it. */
static void table_2nodes(float t[NA][NP])
{
	for (int a = 0; a < NA; a++)
		for (int p = 0; p < NP; p++)
			t[a][p] = IGN;
	t[NCCL_ALGO_TREE][NCCL_PROTO_LL] = 90000.0f;
	t[NCCL_ALGO_TREE][NCCL_PROTO_SIMPLE] = 20000.0f;
	t[NCCL_ALGO_RING][NCCL_PROTO_LL] = 80000.0f;
	t[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE] = 24000.0f;
}

/* NCCL's selection over the table: the first lowest entry >= 0. */
static void nccl_pick(float t[NA][NP], int *algo, int *proto)
{
	float best = 3600000000.0f;
	*algo = *proto = -1;
	for (int a = 0; a < NA; a++)
		for (int p = 0; p < NP; p++)
			if (t[a][p] != IGN && t[a][p] >= 0.0f && t[a][p] < best) {
				best = t[a][p];
				*algo = a;
				*proto = p;
			}
}

static void run_policy(int enabled, size_t nnodes, int coll, size_t nbytes, float t[NA][NP],
		       struct policy_tune_out *out)
{
	struct policy_tune_in in = {.enabled = enabled,
				    .nnodes = nnodes,
				    .coll = coll,
				    .nbytes = nbytes,
				    .table = &t[0][0],
				    .nalgo = NA,
				    .nproto = NP};
	policy_tune(&in, out);
	char why[256];
	policy_tune_reason(&in, out, why, sizeof(why));
	CHECK(why[0] != '\0');
}

static int test_policy_changes_large(void)
{
	float t[NA][NP];
	table_2nodes(t);
	struct policy_tune_out out;
	run_policy(1, 2, ncclFuncAllReduce, 64u << 20, t, &out);
	CHECK_EQ(out.verdict, POLICY_TUNE_RING_SIMPLE);
	CHECK_EQ(out.changed, 1);
	CHECK_EQ(out.algo, NCCL_ALGO_RING);
	CHECK_EQ(out.proto, NCCL_PROTO_SIMPLE);
	CHECK_EQ(out.from_algo, NCCL_ALGO_TREE);
	CHECK_EQ(out.from_proto, NCCL_PROTO_SIMPLE);
	CHECK(out.cost < 20000.0f && out.cost >= 0.0f);
	CHECK_EQ(out.nchannels, 0);
	t[out.algo][out.proto] = out.cost;
	int a, p;
	nccl_pick(t, &a, &p);
	CHECK_EQ(a, NCCL_ALGO_RING);
	CHECK_EQ(p, NCCL_PROTO_SIMPLE);
	/* every base collective, from exactly the threshold on */
	for (int c = ncclFuncBroadcast; c <= ncclFuncAllReduce; c++) {
		table_2nodes(t);
		run_policy(1, 4, c, POLICY_TUNE_MIN_BYTES, t, &out);
		CHECK_EQ(out.verdict, POLICY_TUNE_RING_SIMPLE);
	}
	/* equal costs: Tree comes first in NCCL's scan, so Ring must undercut */
	table_2nodes(t);
	t[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE] = 20000.0f;
	run_policy(1, 2, ncclFuncAllReduce, 64u << 20, t, &out);
	CHECK_EQ(out.verdict, POLICY_TUNE_RING_SIMPLE);
	CHECK(out.cost < 20000.0f);
	return 0;
}

static int test_policy_leaves_alone(void)
{
	float t[NA][NP];
	struct policy_tune_out out;
	table_2nodes(t);
	run_policy(1, 2, ncclFuncAllReduce, POLICY_TUNE_MIN_BYTES - 1, t, &out);
	CHECK_EQ(out.verdict, POLICY_TUNE_SMALL);
	CHECK_EQ(out.changed, 0);
	run_policy(1, 2, ncclFuncAllReduce, 8, t, &out);
	CHECK_EQ(out.verdict, POLICY_TUNE_SMALL);
	run_policy(1, 1, ncclFuncAllReduce, 64u << 20, t, &out);
	CHECK_EQ(out.verdict, POLICY_TUNE_ONE_NODE);
	CHECK_EQ(out.changed, 0);
	run_policy(0, 2, ncclFuncAllReduce, 64u << 20, t, &out);
	CHECK_EQ(out.verdict, POLICY_TUNE_OFF);
	CHECK_EQ(out.changed, 0);
	run_policy(1, 2, ncclFuncSendRecv, 64u << 20, t, &out);
	CHECK_EQ(out.verdict, POLICY_TUNE_NOT_COLL);
	run_policy(1, 2, ncclFuncAllGatherV, 64u << 20, t, &out);
	CHECK_EQ(out.verdict, POLICY_TUNE_NOT_COLL);
	run_policy(1, 2, -1, 64u << 20, t, &out);
	CHECK_EQ(out.verdict, POLICY_TUNE_NOT_COLL);
	/* Ring/Simple already NCCL's pick */
	t[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE] = 19000.0f;
	run_policy(1, 2, ncclFuncAllReduce, 64u << 20, t, &out);
	CHECK_EQ(out.verdict, POLICY_TUNE_ALREADY);
	CHECK_EQ(out.changed, 0);
	/* far from NCCL's pick: the model is trusted */
	t[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE] = 20000.0f * POLICY_TUNE_SLACK * 1.01f;
	run_policy(1, 2, ncclFuncAllReduce, 64u << 20, t, &out);
	CHECK_EQ(out.verdict, POLICY_TUNE_FAR);
	CHECK_EQ(out.changed, 0);
	/* NCCL's pick costs 0: nothing can be cheaper */
	table_2nodes(t);
	t[NCCL_ALGO_TREE][NCCL_PROTO_SIMPLE] = 0.0f;
	t[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE] = 0.0f;
	run_policy(1, 2, ncclFuncAllReduce, 64u << 20, t, &out);
	CHECK_EQ(out.changed, 0);
	return 0;
}

static int test_policy_never_enables(void)
{
	float t[NA][NP];
	struct policy_tune_out out;
	/* Ring/Simple unavailable (NCCL_ALGO=tree, NCCL_PROTO=^simple ...) */
	table_2nodes(t);
	t[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE] = IGN;
	run_policy(1, 2, ncclFuncAllReduce, 64u << 20, t, &out);
	CHECK_EQ(out.verdict, POLICY_TUNE_UNAVAILABLE);
	CHECK_EQ(out.changed, 0);
	t[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE] = -0.5f; /* any negative */
	run_policy(1, 2, ncclFuncAllReduce, 64u << 20, t, &out);
	CHECK_EQ(out.changed, 0);
	float nan = __builtin_nanf("");
	t[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE] = nan;
	run_policy(1, 2, ncclFuncAllReduce, 64u << 20, t, &out);
	CHECK_EQ(out.changed, 0);
	/* only Ring/Simple available: already the pick */
	for (int a = 0; a < NA; a++)
		for (int p = 0; p < NP; p++)
			t[a][p] = IGN;
	t[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE] = 500.0f;
	run_policy(1, 2, ncclFuncAllReduce, 64u << 20, t, &out);
	CHECK_EQ(out.verdict, POLICY_TUNE_ALREADY);
	/* a table without a Simple column or a Ring row, or none at all */
	struct policy_tune_in in = {.enabled = 1, .nnodes = 2, .coll = ncclFuncAllReduce,
				    .nbytes = 64u << 20, .table = &t[0][0], .nalgo = NA,
				    .nproto = 2};
	policy_tune(&in, &out);
	CHECK_EQ(out.verdict, POLICY_TUNE_NO_TABLE);
	in.nproto = NP;
	in.nalgo = 1;
	policy_tune(&in, &out);
	CHECK_EQ(out.verdict, POLICY_TUNE_NO_TABLE);
	in.nalgo = NA;
	in.table = NULL;
	policy_tune(&in, &out);
	CHECK_EQ(out.verdict, POLICY_TUNE_NO_TABLE);
	CHECK_EQ(out.changed, 0);
	return 0;
}

static int test_policy_reasons(void)
{
	float t[NA][NP];
	table_2nodes(t);
	struct policy_tune_in in = {.enabled = 1, .nnodes = 2, .coll = ncclFuncAllReduce,
				    .nbytes = 64u << 20, .table = &t[0][0], .nalgo = NA,
				    .nproto = NP};
	struct policy_tune_out out;
	char why[256];
	policy_tune(&in, &out);
	policy_tune_reason(&in, &out, why, sizeof(why));
	CHECK_STR_CONTAINS(why, "all_reduce");
	CHECK_STR_CONTAINS(why, "Ring/Simple");
	CHECK_STR_CONTAINS(why, "instead of Tree/Simple");
	in.nbytes = 1024;
	policy_tune(&in, &out);
	policy_tune_reason(&in, &out, why, sizeof(why));
	CHECK_STR_CONTAINS(why, "left to NCCL");
	in.enabled = 0;
	policy_tune(&in, &out);
	policy_tune_reason(&in, &out, why, sizeof(why));
	CHECK_STR_CONTAINS(why, "NCCL_FABRIC_TUNER=off");
	return 0;
}

/* ---- the tables from the shared library ---- */
static const char *plugin_path;
static int log_lines, log_tuner_choices;
static char log_last[1024];

static void capture(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
		    const char *fmt, ...)
{
	(void)flags;
	(void)file;
	(void)line;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(log_last, sizeof(log_last), fmt, ap);
	va_end(ap);
	log_lines++;
	if (level == NCCL_LOG_INFO && strstr(log_last, "tuner (comm"))
		log_tuner_choices++;
}

struct tuner_view { /* v5 and v6 share the first four members */
	const char *name;
	ncclTunerInit_v5_fn init;
	ncclTunerGetCollInfo_v5_fn getCollInfo;
	ncclResult_t (*finalize)(void *ctx);
};

static void *lib;
static const ncclTuner_v5_t *v5;
static const ncclTuner_v6_t *v6;

static int open_lib(void)
{
	if (lib)
		return 0;
	if (!plugin_path) {
		printf("  (no plugin path given: tables not loaded)\n");
		return 1;
	}
	lib = dlopen(plugin_path, RTLD_NOW | RTLD_LOCAL);
	CHECK(lib != NULL);
	if (!lib)
		return 1;
	v5 = dlsym(lib, "ncclTunerPlugin_v5");
	v6 = dlsym(lib, "ncclTunerPlugin_v6");
	CHECK(v5 && v6);
	return v5 && v6 ? 0 : 1;
}

/* Runs one communicator's worth of calls through a table; returns 0. */
static int drive(const struct tuner_view *tv, size_t nranks, size_t nnodes, int expect_change)
{
	void *ctx = (void *)0x1;
	ncclNvlDomainInfo_v5_t nvl = {1, 1, 1};
	ncclTunerConstants_v5_t k;
	memset(&k, 0x5a, sizeof(k));
	ncclTunerConstants_v5_t k0 = k;
	log_lines = log_tuner_choices = 0;
	CHECK_EQ(tv->init(&ctx, 0x1234abcdULL, nranks, nnodes, capture, &nvl, &k), ncclSuccess);
	CHECK(log_lines >= 1); /* the init line, through the logger given to init */
	CHECK_STR_CONTAINS(log_last, "tuner");
	CHECK(memcmp(&k, &k0, sizeof(k)) == 0); /* constants untouched */

	float t[NA][NP], before[NA][NP];
	/* small sizes: the table is left exactly as NCCL made it */
	for (size_t n = 8; n < POLICY_TUNE_MIN_BYTES; n *= 4) {
		table_2nodes(t);
		memcpy(before, t, sizeof(t));
		int nch = 0;
		CHECK_EQ(tv->getCollInfo(ctx, ncclFuncAllReduce, n, 1, (float **)t, NA, NP, 0, &nch),
			 ncclSuccess);
		CHECK(memcmp(t, before, sizeof(t)) == 0);
		CHECK_EQ(nch, 0);
	}
	/* point-to-point, should NCCL ever ask: untouched */
	table_2nodes(t);
	int nch = 0;
	CHECK_EQ(tv->getCollInfo(ctx, ncclFuncSendRecv, 64u << 20, 1, (float **)t, NA, NP, 0, &nch),
		 ncclSuccess);
	table_2nodes(before);
	CHECK(memcmp(t, before, sizeof(t)) == 0);

	/* large all_reduce, many times: the same answer, logged once */
	int choices_before = log_tuner_choices;
	for (int i = 0; i < 50; i++) {
		table_2nodes(t);
		memcpy(before, t, sizeof(t));
		nch = 0;
		CHECK_EQ(tv->getCollInfo(ctx, ncclFuncAllReduce, 64u << 20, 1, (float **)t, NA, NP,
					 0, &nch),
			 ncclSuccess);
		CHECK_EQ(nch, 0);
		for (int a = 0; a < NA; a++)
			for (int p = 0; p < NP; p++) {
				if (before[a][p] < 0.0f) /* unavailable stays unavailable */
					CHECK(t[a][p] == before[a][p]);
				else if (!(expect_change && a == NCCL_ALGO_RING &&
					   p == NCCL_PROTO_SIMPLE))
					CHECK(t[a][p] == before[a][p]);
			}
		int a, p;
		nccl_pick(t, &a, &p);
		CHECK_EQ(a, expect_change ? NCCL_ALGO_RING : NCCL_ALGO_TREE);
		CHECK_EQ(p, NCCL_PROTO_SIMPLE);
	}
	if (expect_change) {
		CHECK_EQ(log_tuner_choices - choices_before, 1);
		CHECK_STR_CONTAINS(log_last, "Ring/Simple");
	} else {
		CHECK_EQ(log_tuner_choices - choices_before, 0);
	}
	/* Ring/Simple unavailable: never made available */
	table_2nodes(t);
	t[NCCL_ALGO_RING][NCCL_PROTO_SIMPLE] = IGN;
	memcpy(before, t, sizeof(t));
	CHECK_EQ(tv->getCollInfo(ctx, ncclFuncAllGather, 256u << 20, 1, (float **)t, NA, NP, 0,
				 &nch),
		 ncclSuccess);
	CHECK(memcmp(t, before, sizeof(t)) == 0);
	CHECK_EQ(tv->finalize(ctx), ncclSuccess);
	return 0;
}

static int test_lib_tables(void)
{
	if (open_lib())
		return plugin_path ? 1 : 0;
	CHECK_STR_CONTAINS(v5->name, "Fabric");
	CHECK_STR_CONTAINS(v6->name, "Fabric");
	CHECK(v5->init && v5->getCollInfo && v5->finalize);
	CHECK(v6->init && v6->getCollInfo && v6->finalize);
	CHECK(v6->getChunkSize == NULL); /* optional: NCCL's own chunk size */
	CHECK(dlsym(lib, "ncclTunerPlugin_v4") == NULL);
	/* robust against what NCCL might hand back */
	float t[NA][NP], before[NA][NP];
	table_2nodes(t);
	memcpy(before, t, sizeof(t));
	int nch = 0;
	CHECK_EQ(v6->getCollInfo(NULL, ncclFuncAllReduce, 64u << 20, 1, (float **)t, NA, NP, 0, &nch),
		 ncclSuccess);
	CHECK(memcmp(t, before, sizeof(t)) == 0);
	CHECK_EQ(v6->finalize(NULL), ncclSuccess);
	CHECK_EQ(v5->finalize(NULL), ncclSuccess);
	return 0;
}

static int test_lib_multi_node(void)
{
	if (open_lib())
		return plugin_path ? 1 : 0;
	setenv("NCCL_FABRIC_TUNER", "on", 1); /* (off by default) */
	drive((const struct tuner_view *)v6, 4, 2, 1);
	drive((const struct tuner_view *)v5, 16, 4, 1);
	unsetenv("NCCL_FABRIC_TUNER");
	return 0;
}

static int test_lib_one_node(void)
{
	if (open_lib())
		return plugin_path ? 1 : 0;
	unsetenv("NCCL_FABRIC_TUNER");
	drive((const struct tuner_view *)v6, 8, 1, 0);
	drive((const struct tuner_view *)v5, 2, 1, 0);
	return 0;
}

static int test_lib_off(void)
{
	if (open_lib())
		return plugin_path ? 1 : 0;
	setenv("NCCL_FABRIC_TUNER", "off", 1);
	drive((const struct tuner_view *)v6, 4, 2, 0);
	drive((const struct tuner_view *)v5, 4, 2, 0);
	setenv("NCCL_FABRIC_TUNER", "0", 1);
	drive((const struct tuner_view *)v6, 4, 2, 0);
	/* the init line says so */
	void *ctx = NULL;
	ncclNvlDomainInfo_v5_t nvl = {1, 1, 1};
	ncclTunerConstants_v5_t k;
	memset(&k, 0, sizeof(k));
	setenv("NCCL_FABRIC_TUNER", "off", 1);
	log_lines = 0;
	CHECK_EQ(v6->init(&ctx, 7, 4, 2, capture, &nvl, &k), ncclSuccess);
	CHECK_EQ(log_lines, 1);
	CHECK_STR_CONTAINS(log_last, "NCCL_FABRIC_TUNER=off");
	CHECK_EQ(v6->finalize(ctx), ncclSuccess);
	unsetenv("NCCL_FABRIC_TUNER");
	return 0;
}

static const struct unit_test tests[] = {
	TEST_ENTRY(test_policy_changes_large, "from 4 MiB across nodes: Ring/Simple made cheapest"),
	TEST_ENTRY(test_policy_leaves_alone, "small, one node, off, p2p, already, far: unchanged"),
	TEST_ENTRY(test_policy_never_enables, "unavailable entries never made available"),
	TEST_ENTRY(test_policy_reasons, "each decision in words"),
	TEST_ENTRY(test_lib_tables, "ncclTunerPlugin_v6/_v5 exported, no v4"),
	TEST_ENTRY(test_lib_multi_node, "2 and 4 nodes: large changed once-logged, small untouched"),
	TEST_ENTRY(test_lib_one_node, "one node: every table untouched"),
	TEST_ENTRY(test_lib_off, "NCCL_FABRIC_TUNER=off: init succeeds, nothing changes"),
};

int main(int argc, char **argv)
{
	if (argc > 1 && strchr(argv[1], '/')) {
		plugin_path = argv[1];
		argc--;
		argv++;
	}
	int rc = unit_main(tests, argc, argv);
	if (lib)
		dlclose(lib);
	return rc;
}
