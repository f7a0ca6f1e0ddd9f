/*
 * nccl_bench.c - collective benchmark and data checker for NCCL network paths.
 *
 * Runs all_reduce, all_gather, reduce_scatter, broadcast, alltoall (grouped
 * ncclSend/ncclRecv) and a ring send/recv over a sweep of message sizes, checks
 * every result against values computed exactly on the host, times the
 * collectives with CUDA events and writes one CSV row per collective and size.
 *
 * Symmetric memory (--sym, multi mode, NCCL 2.27+): both buffers come from
 * ncclMemAlloc and are registered as NCCL_WIN_COLL_SYMMETRIC windows, as
 * NCCL's device API and its copy-engine collectives need. With NCCL 2.30+ the
 * put_signal "collective" is a ring of ncclPutSignal into the right
 * neighbour's receive window and ncclWaitSignal on the left one's signal:
 * NCCL carries it across hosts through an RMA plugin. A communicator that
 * gets no window (NCCL: "Symmetric memory is not supported") exits with 4.
 *
 * Two modes:
 *   single  one process drives every GPU (ncclCommInitAll + group calls).
 *   multi   one process per GPU. Ranks come from RANK / WORLD_SIZE / LOCAL_RANK;
 *           rank 0 writes the NCCL unique id to a file in --id-dir and the others
 *           read it, so no MPI is needed. Use a fresh --id-dir for every run.
 *
 * Data: rank r's input element i is pattern(r, i), a small integer (-127..127)
 * held exactly in float32, so every sum over ranks is exact and the expected
 * output of each collective can be computed on the host bit for bit. Outputs
 * are filled with NaN before the checked run, so a result that was not written
 * fails the check. Results up to --full-check bytes are compared element by
 * element; larger ones by a strided sample plus the first and last elements of
 * every block (the header line says which).
 *
 * Sizes follow the usual convention: "bytes" is the size of the largest buffer
 * of one rank (all_gather: the output, reduce_scatter and alltoall: the input),
 * algbw = bytes / time, busbw = algbw x factor (all_reduce 2(n-1)/n,
 * all_gather, reduce_scatter, alltoall (n-1)/n, broadcast and send/recv 1).
 *
 * Exit status: 0 all good, 1 data errors, 2 NCCL/CUDA/usage error, 3 watchdog
 * timeout, 4 no symmetric window (--sym). The file is C11 and also compiles as C++ (the build falls back to
 * C++ when nccl.h does not compile as C).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime.h>
#include <nccl.h>

#define BENCH_MAX_DEVS 64
#define BENCH_CSV_HEADER "path,collective,bytes,time_us,algbw_gbps,busbw_gbps,errors,nranks,mode"
#define BENCH_ID_FILE "nccl-bench.id"
#define BENCH_CHECK_EDGE 1024 /* elements checked at each end of a block when sampling */
#define BENCH_CHECK_STRIDE 61 /* prime, so samples do not line up with chunk sizes */

/* ---------------------------------------------------------------- collectives */

enum {
	COLL_ALL_REDUCE,
	COLL_ALL_GATHER,
	COLL_REDUCE_SCATTER,
	COLL_BROADCAST,
	COLL_ALLTOALL,
	COLL_SENDRECV,
	COLL_PUT_SIGNAL, /* --sym, NCCL 2.30+; not part of "all" */
	COLL_COUNT
};

static const char *const coll_names[COLL_COUNT] = {
	"all_reduce", "all_gather", "reduce_scatter", "broadcast", "alltoall", "sendrecv",
	"put_signal",
};

#if defined(NCCL_VERSION_CODE) && NCCL_VERSION_CODE >= NCCL_VERSION(2, 27, 0)
#define BENCH_HAVE_WINDOWS 1
#endif
#if defined(NCCL_VERSION_CODE) && NCCL_VERSION_CODE >= NCCL_VERSION(2, 30, 0)
#define BENCH_HAVE_PUT_SIGNAL 1
#endif

/* Bus bandwidth factor: how many times each byte of "bytes" crosses the
 * slowest link of a ring, so that busbw is comparable across collectives. */
static double coll_busbw_factor(int coll, int n)
{
	switch (coll) {
	case COLL_ALL_REDUCE:
		return 2.0 * (n - 1) / n;
	case COLL_ALL_GATHER:
	case COLL_REDUCE_SCATTER:
	case COLL_ALLTOALL:
		return (double)(n - 1) / n;
	default: /* broadcast, sendrecv, put_signal */
		return 1.0;
	}
}

/* Outputs made of one block per rank (checked block by block). */
static int coll_blocks(int coll, int n)
{
	return (coll == COLL_ALL_GATHER || coll == COLL_ALLTOALL) ? n : 1;
}

/* What one size means for one collective, in float elements. */
typedef struct {
	size_t count;     /* the count argument given to NCCL (per peer for alltoall) */
	size_t in_count;  /* elements read from each rank's send buffer */
	size_t out_count; /* elements written to each rank's receive buffer */
	size_t bytes;     /* reported size: largest buffer of one rank */
} coll_size_t;

/* Returns 0, or -1 when the size holds fewer elements than the collective needs. */
static int coll_size_get(int coll, size_t nominal_bytes, int n, coll_size_t *s)
{
	size_t elems = nominal_bytes / sizeof(float);

	memset(s, 0, sizeof(*s));
	switch (coll) {
	case COLL_ALL_GATHER:
		s->count = elems / (size_t)n;
		s->in_count = s->count;
		s->out_count = s->count * (size_t)n;
		break;
	case COLL_REDUCE_SCATTER:
		s->count = elems / (size_t)n;
		s->in_count = s->count * (size_t)n;
		s->out_count = s->count;
		break;
	case COLL_ALLTOALL:
		s->count = elems / (size_t)n;
		s->in_count = s->count * (size_t)n;
		s->out_count = s->count * (size_t)n;
		break;
	default: /* all_reduce, broadcast, sendrecv */
		s->count = elems;
		s->in_count = elems;
		s->out_count = elems;
		break;
	}
	if (s->count == 0)
		return -1;
	s->bytes = (s->in_count > s->out_count ? s->in_count : s->out_count) * sizeof(float);
	return 0;
}

/* --------------------------------------------------------------- data pattern */

/* Input element i of rank r: an integer in -127..127, exact in float32 (and
 * any sum over fewer than 2^16 ranks stays exact). */
static float pattern(int rank, size_t i)
{
	uint64_t h = (uint64_t)i * 0x9E3779B97F4A7C15ull + (uint64_t)(rank + 1) * 0xC2B2AE3D27D4EB4Full;

	h ^= h >> 29;
	h *= 0xBF58476D1CE4E5B9ull;
	h ^= h >> 32;
	return (float)((int)(h % 255u) - 127);
}

/* Expected output element of rank r: element i of block blk (blocks as in
 * coll_blocks()), for a collective over n ranks with count c. */
static float expect_value(int coll, int r, int n, int root, size_t c, int blk, size_t i)
{
	double sum = 0.0;
	int q;

	switch (coll) {
	case COLL_ALL_REDUCE:
		for (q = 0; q < n; q++)
			sum += pattern(q, i);
		return (float)sum;
	case COLL_ALL_GATHER:
		return pattern(blk, i);
	case COLL_REDUCE_SCATTER:
		for (q = 0; q < n; q++)
			sum += pattern(q, (size_t)r * c + i);
		return (float)sum;
	case COLL_BROADCAST:
		return pattern(root, i);
	case COLL_ALLTOALL:
		return pattern(blk, (size_t)r * c + i);
	default: /* sendrecv and put_signal: ring, from the left neighbour */
		return pattern((r - 1 + n) % n, i);
	}
}

typedef struct {
	uint64_t errors;
	uint64_t checked;
	size_t bad_index; /* first mismatch, valid when errors > 0 */
	float bad_expected;
	float bad_got;
} check_result_t;

static void check_one(const float *out, int coll, int r, int n, int root, size_t c, int blk,
		      size_t blk_len, size_t i, check_result_t *res)
{
	size_t idx = (size_t)blk * blk_len + i;
	float want = expect_value(coll, r, n, root, c, blk, i);
	float got = out[idx];

	res->checked++;
	if (got != want) { /* NaN (unwritten) never compares equal */
		if (res->errors == 0) {
			res->bad_index = idx;
			res->bad_expected = want;
			res->bad_got = got;
		}
		res->errors++;
	}
}

/* Compares one rank's output with the expected values. sampled != 0 checks the
 * first and last BENCH_CHECK_EDGE elements of every block and every
 * BENCH_CHECK_STRIDE-th element in between; otherwise every element. */
static void check_output(const float *out, int coll, int r, int n, int root, const coll_size_t *s,
			 int sampled, check_result_t *res)
{
	int nblk = coll_blocks(coll, n);
	size_t len = s->out_count / (size_t)nblk;
	int blk;

	memset(res, 0, sizeof(*res));
	for (blk = 0; blk < nblk; blk++) {
		size_t head = sampled && len > BENCH_CHECK_EDGE ? BENCH_CHECK_EDGE : len;
		size_t i;

		for (i = 0; i < head; i++)
			check_one(out, coll, r, n, root, s->count, blk, len, i, res);
		if (head < len) {
			size_t tail = len - BENCH_CHECK_EDGE > head ? len - BENCH_CHECK_EDGE : head;

			for (i = head; i < tail; i += BENCH_CHECK_STRIDE)
				check_one(out, coll, r, n, root, s->count, blk, len, i, res);
			for (i = tail; i < len; i++)
				check_one(out, coll, r, n, root, s->count, blk, len, i, res);
		}
	}
}

/* -------------------------------------------------------------------- options */

typedef struct {
	const char *path;      /* --path: label of the network path, first CSV column */
	const char *csv;       /* --csv FILE, appended */
	const char *id_dir;    /* --id-dir DIR (multi) */
	int colls[COLL_COUNT]; /* selected collectives */
	int multi;             /* 0 single, 1 multi */
	int ngpus;             /* single: GPUs to use (0 = all) */
	size_t min_bytes, max_bytes;
	unsigned factor;
	int iters, warmup, min_iters;
	size_t scale_bytes; /* above this, iterations shrink in proportion to size */
	size_t full_check;  /* above this, results are sampled */
	int root;
	int timeout_s;
	int plan_only;
	int sym; /* --sym: symmetric windows (multi mode) */
} opts_t;

static void usage(FILE *f)
{
	fprintf(f,
		"usage: nccl_bench [options]\n"
		"  --path NAME          label of the network path for the CSV (fabric-tcp, nccl-socket...)\n"
		"  --mode single|multi  single: one process drives all GPUs (default);\n"
		"                       multi: one process per GPU, ranks from RANK, WORLD_SIZE,\n"
		"                       LOCAL_RANK (LOCAL_RANK defaults to RANK)\n"
		"  --id-dir DIR         multi: fresh shared directory for the NCCL unique id\n"
		"                       (default $NCCL_BENCH_ID_DIR)\n"
		"  --ngpus N            single: number of GPUs (default: all visible)\n"
		"  --colls LIST         comma list of all_reduce,all_gather,reduce_scatter,broadcast,\n"
		"                       alltoall,sendrecv or 'all' (default all), and put_signal\n"
		"                       (needs --sym and NCCL 2.30+; not in 'all')\n"
		"  --sym                multi: buffers from ncclMemAlloc, registered as symmetric\n"
		"                       windows (NCCL 2.27+); exit 4 when NCCL gives no window\n"
		"  --min-bytes SIZE     first size (default 8); SIZE takes K, M, G suffixes (x1024)\n"
		"  --max-bytes SIZE     last size (default 1G)\n"
		"  --factor N           size step, integer >= 2 (default 2)\n"
		"  --iters N            timed iterations (default 20)\n"
		"  --warmup N           untimed iterations before timing (default 5)\n"
		"  --scale-bytes SIZE   above this size iterations and warmup shrink in proportion\n"
		"                       (default 64M)\n"
		"  --min-iters N        floor for the shrunk iteration count (default 2)\n"
		"  --full-check SIZE    results up to SIZE are checked in full, larger ones by a\n"
		"                       strided sample plus both ends of every block (default 64M)\n"
		"  --root R             broadcast root (default 0)\n"
		"  --csv FILE           append one row per collective and size (header written\n"
		"                       when the file is new)\n"
		"  --timeout S          watchdog per step (init, one size) in seconds (default 300)\n"
		"  --plan               print the sizes and iteration counts and exit (no GPU needed;\n"
		"                       rank count from --ngpus or WORLD_SIZE, default 2)\n"
		"  -h, --help\n"
		"exit status: 0 ok, 1 data errors, 2 NCCL/CUDA/usage error, 3 watchdog timeout,\n"
		"4 no symmetric window (--sym)\n");
}

static void die_usage(const char *fmt, const char *arg)
{
	fprintf(stderr, "nccl_bench: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\n(see nccl_bench --help)\n");
	exit(2);
}

/* Parses "8", "4K", "64M", "1G", "1GiB", "512KB" (binary multiples). */
static int parse_size(const char *s, size_t *out)
{
	char *end = NULL;
	unsigned long long v, mul = 1;

	if (s == NULL || *s == '\0' || *s == '-')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || end == s)
		return -1;
	switch (*end) {
	case 'k': case 'K': mul = 1ull << 10; end++; break;
	case 'm': case 'M': mul = 1ull << 20; end++; break;
	case 'g': case 'G': mul = 1ull << 30; end++; break;
	default: break;
	}
	if (mul > 1 && *end == 'i')
		end++;
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end != '\0')
		return -1;
	if (v > (unsigned long long)SIZE_MAX / mul)
		return -1;
	*out = (size_t)(v * mul);
	return 0;
}

static int parse_int(const char *s, int lo, int hi, int *out)
{
	char *end = NULL;
	long v;

	if (s == NULL || *s == '\0')
		return -1;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
		return -1;
	*out = (int)v;
	return 0;
}

static int parse_colls(const char *list, int *colls)
{
	char buf[256];
	char *tok, *save = NULL;
	int c, any = 0;

	if (strlen(list) >= sizeof(buf))
		return -1;
	strcpy(buf, list);
	memset(colls, 0, sizeof(int) * COLL_COUNT);
	for (tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
		int found = 0;

		if (strcmp(tok, "all") == 0) {
			for (c = 0; c < COLL_COUNT; c++)
				colls[c] = c != COLL_PUT_SIGNAL;
			any = 1;
			continue;
		}
		if (strcmp(tok, "send_recv") == 0 || strcmp(tok, "send/recv") == 0)
			tok = (char *)"sendrecv";
		if (strcmp(tok, "all_to_all") == 0)
			tok = (char *)"alltoall";
		for (c = 0; c < COLL_COUNT; c++) {
			if (strcmp(tok, coll_names[c]) == 0) {
				colls[c] = 1;
				found = 1;
			}
		}
		if (!found)
			return -1;
		any = 1;
	}
	return any ? 0 : -1;
}

static int is_value_opt(const char *a)
{
	static const char *const names[] = {
		"--path", "--csv", "--id-dir", "--mode", "--ngpus", "--colls", "--min-bytes",
		"--max-bytes", "--factor", "--iters", "--warmup", "--min-iters", "--scale-bytes",
		"--full-check", "--root", "--timeout",
	};
	size_t k;

	for (k = 0; k < sizeof(names) / sizeof(names[0]); k++)
		if (strcmp(a, names[k]) == 0)
			return 1;
	return 0;
}

static void opts_parse(int argc, char **argv, opts_t *o)
{
	int i, c;

	memset(o, 0, sizeof(*o));
	o->path = "unnamed";
	o->min_bytes = 8;
	o->max_bytes = (size_t)1 << 30;
	o->factor = 2;
	o->iters = 20;
	o->warmup = 5;
	o->min_iters = 2;
	o->scale_bytes = (size_t)64 << 20;
	o->full_check = (size_t)64 << 20;
	o->timeout_s = 300;
	o->id_dir = getenv("NCCL_BENCH_ID_DIR");
	for (c = 0; c < COLL_COUNT; c++)
		o->colls[c] = c != COLL_PUT_SIGNAL;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		int iv = 0;

		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			usage(stdout);
			exit(0);
		} else if (strcmp(a, "--plan") == 0) {
			o->plan_only = 1;
			continue;
		} else if (strcmp(a, "--sym") == 0) {
			o->sym = 1;
			continue;
		}
		/* every other option takes a value */
		if (!is_value_opt(a))
			die_usage("unknown option '%s'", a);
		if (v == NULL)
			die_usage("option %s needs a value", a);
		i++;
		if (strcmp(a, "--path") == 0) {
			if (*v == '\0' || strpbrk(v, ",\"\n\r") != NULL)
				die_usage("--path '%s' must be non-empty, without commas, quotes or newlines", v);
			o->path = v;
		} else if (strcmp(a, "--csv") == 0) {
			o->csv = v;
		} else if (strcmp(a, "--id-dir") == 0) {
			o->id_dir = v;
		} else if (strcmp(a, "--mode") == 0) {
			if (strcmp(v, "single") == 0)
				o->multi = 0;
			else if (strcmp(v, "multi") == 0)
				o->multi = 1;
			else
				die_usage("--mode must be single or multi, not '%s'", v);
		} else if (strcmp(a, "--ngpus") == 0) {
			if (parse_int(v, 1, BENCH_MAX_DEVS, &o->ngpus) != 0)
				die_usage("--ngpus '%s': expected 1..64", v);
		} else if (strcmp(a, "--colls") == 0) {
			if (parse_colls(v, o->colls) != 0)
				die_usage("--colls '%s': expected a comma list of all_reduce, all_gather, "
					  "reduce_scatter, broadcast, alltoall, sendrecv, or all", v);
		} else if (strcmp(a, "--min-bytes") == 0) {
			if (parse_size(v, &o->min_bytes) != 0 || o->min_bytes == 0)
				die_usage("--min-bytes '%s': expected a positive size such as 8, 4K, 1M", v);
		} else if (strcmp(a, "--max-bytes") == 0) {
			if (parse_size(v, &o->max_bytes) != 0 || o->max_bytes == 0)
				die_usage("--max-bytes '%s': expected a positive size such as 64M, 1G", v);
		} else if (strcmp(a, "--factor") == 0) {
			if (parse_int(v, 2, 1024, &iv) != 0)
				die_usage("--factor '%s': expected an integer 2..1024", v);
			o->factor = (unsigned)iv;
		} else if (strcmp(a, "--iters") == 0) {
			if (parse_int(v, 1, 1000000, &o->iters) != 0)
				die_usage("--iters '%s': expected an integer >= 1", v);
		} else if (strcmp(a, "--warmup") == 0) {
			if (parse_int(v, 0, 1000000, &o->warmup) != 0)
				die_usage("--warmup '%s': expected an integer >= 0", v);
		} else if (strcmp(a, "--min-iters") == 0) {
			if (parse_int(v, 1, 1000000, &o->min_iters) != 0)
				die_usage("--min-iters '%s': expected an integer >= 1", v);
		} else if (strcmp(a, "--scale-bytes") == 0) {
			if (parse_size(v, &o->scale_bytes) != 0 || o->scale_bytes == 0)
				die_usage("--scale-bytes '%s': expected a positive size", v);
		} else if (strcmp(a, "--full-check") == 0) {
			if (parse_size(v, &o->full_check) != 0)
				die_usage("--full-check '%s': expected a size", v);
		} else if (strcmp(a, "--root") == 0) {
			if (parse_int(v, 0, INT_MAX, &o->root) != 0)
				die_usage("--root '%s': expected a rank >= 0", v);
		} else if (strcmp(a, "--timeout") == 0) {
			if (parse_int(v, 1, 86400, &o->timeout_s) != 0)
				die_usage("--timeout '%s': expected seconds 1..86400", v);
		}
	}
	if (o->min_bytes > o->max_bytes)
		die_usage("--min-bytes is larger than --max-bytes%s", "");
	if (o->min_iters > o->iters)
		o->min_iters = o->iters;
#ifndef BENCH_HAVE_WINDOWS
	if (o->sym)
		die_usage("--sym needs NCCL 2.27 or newer (this nccl.h is older)%s", "");
#endif
#ifndef BENCH_HAVE_PUT_SIGNAL
	if (o->colls[COLL_PUT_SIGNAL])
		die_usage("put_signal needs NCCL 2.30 or newer (this nccl.h is older)%s", "");
#endif
	if (o->sym && !o->multi && !o->plan_only)
		die_usage("--sym needs --mode multi%s", "");
	if (o->colls[COLL_PUT_SIGNAL] && !o->sym)
		die_usage("put_signal needs --sym (its target is the peer's window)%s", "");
}

/* Iterations for one size: the full count up to scale_bytes, then shrinking in
 * proportion to the size, never below min_iters (warmup never below 1). The
 * result depends only on the options and the size, so every rank agrees. */
static void iters_for(const opts_t *o, size_t bytes, int *iters, int *warmup)
{
	*iters = o->iters;
	*warmup = o->warmup;
	if (bytes > o->scale_bytes) {
		double f = (double)o->scale_bytes / (double)bytes;
		int it = (int)(o->iters * f);
		int wu = (int)(o->warmup * f);

		*iters = it < o->min_iters ? o->min_iters : it;
		*warmup = wu < 1 ? (o->warmup > 0 ? 1 : 0) : wu;
	}
}

/* Sizes min, min*factor, ... up to max. Returns how many were stored. */
static int sizes_make(const opts_t *o, size_t *sizes, int cap)
{
	size_t b = o->min_bytes;
	int n = 0;

	while (b <= o->max_bytes && n < cap) {
		sizes[n++] = b;
		if (b > SIZE_MAX / o->factor)
			break;
		b *= o->factor;
	}
	return n;
}

/* ------------------------------------------------------------ error handling */

static const char *g_phase = "start"; /* what the watchdog names when it fires */
static char g_watchdog_msg[512];
static char g_who[48] = "nccl_bench"; /* message prefix, names the rank once known */

static void bench_watchdog(int sig)
{
	ssize_t rc;

	(void)sig;
	rc = write(STDERR_FILENO, g_watchdog_msg, strlen(g_watchdog_msg));
	(void)rc;
	_exit(3);
}

/* Arms the watchdog for one step; seconds == 0 disarms it. */
static void watchdog_arm(int seconds, const char *what)
{
	g_phase = what;
	snprintf(g_watchdog_msg, sizeof(g_watchdog_msg),
		 "\n%s: FATAL: watchdog: '%s' did not finish within %d s. "
		 "A peer may have died, or the network path is stuck; see the NCCL_DEBUG "
		 "log. Exiting with status 3.\n",
		 g_who, what, seconds);
	alarm((unsigned)seconds);
}

static void nccl_fail(const char *file, int line, const char *call, ncclResult_t r)
{
	const char *last = ncclGetLastError(NULL);

	fflush(stdout);
	fprintf(stderr,
		"%s: FATAL: %s failed at %s:%d during '%s': %s (ncclResult %d)\n"
		"%s: NCCL last error: %s\n"
		"%s: hint: run with NCCL_DEBUG=INFO (and NCCL_DEBUG_FILE) and "
		"check NCCL_NET / NCCL_NET_PLUGIN\n",
		g_who, call, file, line, g_phase, ncclGetErrorString(r), (int)r, g_who,
		last != NULL && *last != '\0' ? last : "(none)", g_who);
	exit(2);
}

static void cuda_fail(const char *file, int line, const char *call, cudaError_t e)
{
	fflush(stdout);
	fprintf(stderr, "%s: FATAL: %s failed at %s:%d during '%s': %s (%s, %d)\n", g_who, call, file,
		line, g_phase, cudaGetErrorString(e), cudaGetErrorName(e), (int)e);
	exit(2);
}

#define NCCL_CHECK(call)                                              \
	do {                                                          \
		ncclResult_t r_ = (call);                             \
		if (r_ != ncclSuccess)                                \
			nccl_fail(__FILE__, __LINE__, #call, r_);     \
	} while (0)

#define CUDA_CHECK(call)                                              \
	do {                                                          \
		cudaError_t e_ = (call);                              \
		if (e_ != cudaSuccess)                                \
			cuda_fail(__FILE__, __LINE__, #call, e_);     \
	} while (0)

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (p == NULL) {
		fprintf(stderr, "nccl_bench: FATAL: out of host memory (%zu bytes)\n", n);
		exit(2);
	}
	return p;
}

/* ------------------------------------------------------------- bench state */

typedef struct {
	int nlocal;   /* GPUs driven by this process */
	int nranks;   /* ranks in the communicator */
	int rank0;    /* global rank of local GPU 0 */
	int devs[BENCH_MAX_DEVS];
	ncclComm_t comms[BENCH_MAX_DEVS];
	cudaStream_t streams[BENCH_MAX_DEVS];
	cudaEvent_t ev_start[BENCH_MAX_DEVS];
	cudaEvent_t ev_stop[BENCH_MAX_DEVS];
	float *sendbuf[BENCH_MAX_DEVS];
	float *recvbuf[BENCH_MAX_DEVS];
	float *host_out; /* one rank's output copied back */
	/* multi mode: small device buffers to combine errors and time over ranks */
	int64_t *dev_err;
	double *dev_time;
	int sym; /* buffers from ncclMemAlloc, registered as windows below */
#ifdef BENCH_HAVE_WINDOWS
	ncclWindow_t sendwin, recvwin;
#endif
} bench_t;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Waits for every local stream, polling NCCL for asynchronous errors (a
 * failing network plugin surfaces here, not as a CUDA error). The watchdog
 * armed by the caller bounds the wait. */
static void bench_wait(bench_t *b)
{
	for (;;) {
		int pending = 0;
		int d;

		for (d = 0; d < b->nlocal; d++) {
			cudaError_t e;

			CUDA_CHECK(cudaSetDevice(b->devs[d]));
			e = cudaStreamQuery(b->streams[d]);
			if (e == cudaErrorNotReady)
				pending = 1;
			else if (e != cudaSuccess)
				cuda_fail(__FILE__, __LINE__, "cudaStreamQuery", e);
		}
		if (!pending)
			return;
		for (d = 0; d < b->nlocal; d++) {
			ncclResult_t ar = ncclSuccess;

			NCCL_CHECK(ncclCommGetAsyncError(b->comms[d], &ar));
			if (ar != ncclSuccess && ar != ncclInProgress)
				nccl_fail(__FILE__, __LINE__, "asynchronous NCCL error (ncclCommGetAsyncError)", ar);
		}
		sched_yield();
	}
}

/* Launches one instance of the collective on every local GPU, as one group. */
static void bench_launch(bench_t *b, int coll, const coll_size_t *s, int root)
{
	int d, p;

	NCCL_CHECK(ncclGroupStart());
	for (d = 0; d < b->nlocal; d++) {
		int rank = b->rank0 + d;
		int n = b->nranks;
		ncclComm_t comm = b->comms[d];
		cudaStream_t st = b->streams[d];
		float *in = b->sendbuf[d];
		float *out = b->recvbuf[d];

		switch (coll) {
		case COLL_ALL_REDUCE:
			NCCL_CHECK(ncclAllReduce(in, out, s->count, ncclFloat32, ncclSum, comm, st));
			break;
		case COLL_ALL_GATHER:
			NCCL_CHECK(ncclAllGather(in, out, s->count, ncclFloat32, comm, st));
			break;
		case COLL_REDUCE_SCATTER:
			NCCL_CHECK(ncclReduceScatter(in, out, s->count, ncclFloat32, ncclSum, comm, st));
			break;
		case COLL_BROADCAST:
			NCCL_CHECK(ncclBroadcast(in, out, s->count, ncclFloat32, root, comm, st));
			break;
		case COLL_ALLTOALL:
			for (p = 0; p < n; p++) {
				NCCL_CHECK(ncclSend(in + (size_t)p * s->count, s->count, ncclFloat32, p, comm, st));
				NCCL_CHECK(ncclRecv(out + (size_t)p * s->count, s->count, ncclFloat32, p, comm, st));
			}
			break;
		case COLL_PUT_SIGNAL:
			break; /* outside the group: bench_launch_put_signal() */
		default: /* sendrecv: ring, send right, receive from the left */
			NCCL_CHECK(ncclSend(in, s->count, ncclFloat32, (rank + 1) % n, comm, st));
			NCCL_CHECK(ncclRecv(out, s->count, ncclFloat32, (rank - 1 + n) % n, comm, st));
			break;
		}
	}
	NCCL_CHECK(ncclGroupEnd());
}

/* put_signal (multi mode, one GPU per process): the send buffer into the right
 * neighbour's receive window with signal 0, then wait for the left one's. */
static void bench_launch_put_signal(bench_t *b, const coll_size_t *s)
{
#ifdef BENCH_HAVE_PUT_SIGNAL
	int n = b->nranks, rank = b->rank0;
	ncclWaitSignalDesc_t want;

	NCCL_CHECK(ncclPutSignal(b->sendbuf[0], s->count, ncclFloat32, (rank + 1) % n, b->recvwin, 0,
				 0, 0, 0, b->comms[0], b->streams[0]));
	memset(&want, 0, sizeof(want));
	want.opCnt = 1;
	want.peer = (rank - 1 + n) % n;
	NCCL_CHECK(ncclWaitSignal(1, &want, b->comms[0], b->streams[0]));
#else
	(void)b;
	(void)s;
#endif
}

/* One instance of collective coll on every local GPU. */
static void bench_run(bench_t *b, int coll, const coll_size_t *s, int root)
{
	if (coll == COLL_PUT_SIGNAL)
		bench_launch_put_signal(b, s);
	else
		bench_launch(b, coll, s, root);
}

/* Multi mode: every rank has reached this point (a one-element all_reduce). */
static void bench_barrier(bench_t *b)
{
	if (b->dev_err == NULL)
		return;
	NCCL_CHECK(ncclAllReduce(b->dev_err, b->dev_err, 1, ncclInt64, ncclSum, b->comms[0],
				 b->streams[0]));
	bench_wait(b);
}

/* Copies every local output back and checks it. Returns the error count over
 * local GPUs and prints the first mismatch of each. */
static uint64_t bench_check(bench_t *b, int coll, const coll_size_t *s, int root, int sampled,
			    const char *when)
{
	uint64_t errors = 0;
	int d;

	for (d = 0; d < b->nlocal; d++) {
		check_result_t res;
		int rank = b->rank0 + d;

		CUDA_CHECK(cudaSetDevice(b->devs[d]));
		CUDA_CHECK(cudaMemcpy(b->host_out, b->recvbuf[d], s->out_count * sizeof(float),
				      cudaMemcpyDeviceToHost));
		check_output(b->host_out, coll, rank, b->nranks, root, s, sampled, &res);
		if (res.errors > 0) {
			fprintf(stderr,
				"nccl_bench[rank %d]: DATA ERROR %s %zu bytes (%s): %llu of %llu checked "
				"elements wrong; first at element %zu: expected %g, got %g\n",
				rank, coll_names[coll], s->bytes, when, (unsigned long long)res.errors,
				(unsigned long long)res.checked, res.bad_index, (double)res.bad_expected,
				(double)res.bad_got);
		}
		errors += res.errors;
	}
	return errors;
}

/* Multi mode: sums errors and takes the largest time over all ranks, with
 * NCCL itself. Each rank's exit status still reflects its own checks, so a
 * broken path cannot hide its errors by corrupting this exchange. */
static void bench_combine(bench_t *b, uint64_t *errors, double *time_us)
{
	int64_t e = (int64_t)*errors;

	if (b->dev_err == NULL)
		return;
	/* everything on the communicator's stream, so the copies and the
	 * reductions are ordered; bench_wait() covers the copies back */
	CUDA_CHECK(cudaSetDevice(b->devs[0]));
	CUDA_CHECK(cudaMemcpyAsync(b->dev_err, &e, sizeof(e), cudaMemcpyHostToDevice, b->streams[0]));
	CUDA_CHECK(cudaMemcpyAsync(b->dev_time, time_us, sizeof(*time_us), cudaMemcpyHostToDevice,
				   b->streams[0]));
	NCCL_CHECK(ncclGroupStart());
	NCCL_CHECK(ncclAllReduce(b->dev_err, b->dev_err, 1, ncclInt64, ncclSum, b->comms[0], b->streams[0]));
	NCCL_CHECK(ncclAllReduce(b->dev_time, b->dev_time, 1, ncclFloat64, ncclMax, b->comms[0],
				 b->streams[0]));
	NCCL_CHECK(ncclGroupEnd());
	CUDA_CHECK(cudaMemcpyAsync(&e, b->dev_err, sizeof(e), cudaMemcpyDeviceToHost, b->streams[0]));
	CUDA_CHECK(cudaMemcpyAsync(time_us, b->dev_time, sizeof(*time_us), cudaMemcpyDeviceToHost,
				   b->streams[0]));
	bench_wait(b);
	*errors = e < 0 ? UINT64_MAX : (uint64_t)e;
}

/* ------------------------------------------------------------- setup, teardown */

/* Multi mode: rank 0 publishes the unique id; the others wait for it. */
static void id_exchange(const opts_t *o, int rank, ncclUniqueId *id)
{
	char path[4096], tmp[4200];
	double deadline = now_s() + o->timeout_s;

	if (o->id_dir == NULL || *o->id_dir == '\0') {
		fprintf(stderr, "nccl_bench[rank %d]: FATAL: multi mode needs --id-dir DIR (or "
			"NCCL_BENCH_ID_DIR): a fresh directory all ranks can read\n", rank);
		exit(2);
	}
	snprintf(path, sizeof(path), "%s/%s", o->id_dir, BENCH_ID_FILE);
	if (rank == 0) {
		int fd;
		ssize_t w;

		NCCL_CHECK(ncclGetUniqueId(id));
		snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
		fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0600);
		if (fd < 0) {
			fprintf(stderr, "nccl_bench[rank 0]: FATAL: cannot create %s: %s\n", tmp, strerror(errno));
			exit(2);
		}
		w = write(fd, id, sizeof(*id));
		if (w != (ssize_t)sizeof(*id) || fsync(fd) != 0 || close(fd) != 0) {
			fprintf(stderr, "nccl_bench[rank 0]: FATAL: cannot write %s\n", tmp);
			exit(2);
		}
		/* link() never replaces: a leftover id from an earlier run is an error,
		 * since other ranks might already have read it. */
		if (link(tmp, path) != 0) {
			int err = errno;

			unlink(tmp);
			fprintf(stderr, "nccl_bench[rank 0]: FATAL: cannot publish %s: %s%s\n", path,
				strerror(err),
				err == EEXIST ? " (left over from an earlier run: use a fresh --id-dir)" : "");
			exit(2);
		}
		unlink(tmp);
		return;
	}
	for (;;) {
		int fd = open(path, O_RDONLY);

		if (fd >= 0) {
			ssize_t r = read(fd, id, sizeof(*id));

			close(fd);
			if (r == (ssize_t)sizeof(*id))
				return;
			fprintf(stderr, "nccl_bench[rank %d]: FATAL: %s holds %zd bytes, expected %zu\n", rank,
				path, r, sizeof(*id));
			exit(2);
		}
		if (now_s() > deadline) {
			fprintf(stderr, "nccl_bench[rank %d]: FATAL: no NCCL id appeared at %s within %d s "
				"(did rank 0 start, with the same --id-dir?)\n", rank, path, o->timeout_s);
			exit(3);
		}
		usleep(20000);
	}
}

static int env_int(const char *name, int dflt, int lo, int hi)
{
	const char *s = getenv(name);
	int v;

	if (s == NULL || *s == '\0')
		return dflt;
	if (parse_int(s, lo, hi, &v) != 0) {
		fprintf(stderr, "nccl_bench: FATAL: environment %s='%s' is not an integer in %d..%d\n", name,
			s, lo, hi);
		exit(2);
	}
	return v;
}

static void bench_init(bench_t *b, const opts_t *o)
{
	size_t max_elems = o->max_bytes / sizeof(float);
	float *host_in;
	int ndev_visible = 0;
	int d;
	size_t i;

	memset(b, 0, sizeof(*b));
	b->sym = o->sym;
	CUDA_CHECK(cudaGetDeviceCount(&ndev_visible));
	if (ndev_visible < 1) {
		fprintf(stderr, "nccl_bench: FATAL: no CUDA device visible\n");
		exit(2);
	}
	if (o->multi) {
		int ws = env_int("WORLD_SIZE", -1, 1, 1 << 20);
		int rank = env_int("RANK", -1, 0, 1 << 20);
		int lr;

		if (ws < 0 || rank < 0) {
			fprintf(stderr, "nccl_bench: FATAL: multi mode needs RANK and WORLD_SIZE in the "
				"environment\n");
			exit(2);
		}
		if (rank >= ws) {
			fprintf(stderr, "nccl_bench: FATAL: RANK %d >= WORLD_SIZE %d\n", rank, ws);
			exit(2);
		}
		lr = env_int("LOCAL_RANK", rank, 0, 1 << 20);
		if (lr >= ndev_visible) {
			fprintf(stderr, "nccl_bench[rank %d]: FATAL: LOCAL_RANK %d but only %d CUDA device(s) "
				"visible\n", rank, lr, ndev_visible);
			exit(2);
		}
		b->nlocal = 1;
		b->nranks = ws;
		b->rank0 = rank;
		b->devs[0] = lr;
	} else {
		int n = o->ngpus > 0 ? o->ngpus : ndev_visible;

		if (n > ndev_visible) {
			fprintf(stderr, "nccl_bench: FATAL: --ngpus %d but only %d CUDA device(s) visible\n", n,
				ndev_visible);
			exit(2);
		}
		if (n > BENCH_MAX_DEVS)
			n = BENCH_MAX_DEVS;
		b->nlocal = n;
		b->nranks = n;
		b->rank0 = 0;
		for (d = 0; d < n; d++)
			b->devs[d] = d;
	}
	snprintf(g_who, sizeof(g_who), "nccl_bench[rank %d]", b->rank0);
	if (o->root >= b->nranks) {
		fprintf(stderr, "nccl_bench: FATAL: --root %d but only %d ranks\n", o->root, b->nranks);
		exit(2);
	}

	/* Buffers first (so an allocation failure shows before NCCL starts). The
	 * send buffer of rank r holds pattern(r, i) for the largest count; every
	 * collective reads a prefix of it, and out-of-place collectives never
	 * write it, so it is filled once. */
	watchdog_arm(o->timeout_s, "buffer setup");
	host_in = (float *)xmalloc(max_elems * sizeof(float));
	b->host_out = (float *)xmalloc(max_elems * sizeof(float));
	for (d = 0; d < b->nlocal; d++) {
		int rank = b->rank0 + d;

		CUDA_CHECK(cudaSetDevice(b->devs[d]));
		CUDA_CHECK(cudaStreamCreateWithFlags(&b->streams[d], cudaStreamNonBlocking));
		CUDA_CHECK(cudaEventCreate(&b->ev_start[d]));
		CUDA_CHECK(cudaEventCreate(&b->ev_stop[d]));
		if (o->sym) {
			NCCL_CHECK(ncclMemAlloc((void **)&b->sendbuf[d], max_elems * sizeof(float)));
			NCCL_CHECK(ncclMemAlloc((void **)&b->recvbuf[d], max_elems * sizeof(float)));
		} else {
			CUDA_CHECK(cudaMalloc((void **)&b->sendbuf[d], max_elems * sizeof(float)));
			CUDA_CHECK(cudaMalloc((void **)&b->recvbuf[d], max_elems * sizeof(float)));
		}
		for (i = 0; i < max_elems; i++)
			host_in[i] = pattern(rank, i);
		CUDA_CHECK(cudaMemcpy(b->sendbuf[d], host_in, max_elems * sizeof(float),
				      cudaMemcpyHostToDevice));
		/* a pageable copy may return before its DMA lands; NCCL runs on a
		 * non-blocking stream that would not wait for it */
		CUDA_CHECK(cudaDeviceSynchronize());
	}
	free(host_in);

	watchdog_arm(o->timeout_s, "NCCL communicator init");
	if (o->multi) {
		ncclUniqueId id;

		id_exchange(o, b->rank0, &id);
		CUDA_CHECK(cudaSetDevice(b->devs[0]));
		NCCL_CHECK(ncclCommInitRank(&b->comms[0], b->nranks, id, b->rank0));
		if (b->rank0 == 0) {
			char path[4096];

			/* every rank has joined, so the id file is no longer needed */
			snprintf(path, sizeof(path), "%s/%s", o->id_dir, BENCH_ID_FILE);
			unlink(path);
		}
		CUDA_CHECK(cudaMalloc((void **)&b->dev_err, sizeof(int64_t)));
		CUDA_CHECK(cudaMalloc((void **)&b->dev_time, sizeof(double)));
#ifdef BENCH_HAVE_WINDOWS
		if (o->sym) {
			size_t bytes = max_elems * sizeof(float);

			watchdog_arm(o->timeout_s, "symmetric window registration");
			NCCL_CHECK(ncclCommWindowRegister(b->comms[0], b->sendbuf[0], bytes, &b->sendwin,
							  NCCL_WIN_COLL_SYMMETRIC));
			NCCL_CHECK(ncclCommWindowRegister(b->comms[0], b->recvbuf[0], bytes, &b->recvwin,
							  NCCL_WIN_COLL_SYMMETRIC));
			if (b->sendwin == NULL || b->recvwin == NULL) {
				fprintf(stderr, "%s: NOT SUPPORTED: NCCL gave no symmetric window (its "
					"INFO log says why: 'Symmetric memory is not supported ...'); "
					"exiting with status 4\n", g_who);
				exit(4);
			}
			printf("%s: symmetric windows registered (send and receive, %zu bytes each)\n",
			       g_who, bytes);
		}
#endif
	} else {
		NCCL_CHECK(ncclCommInitAll(b->comms, b->nlocal, b->devs));
	}
	watchdog_arm(0, "idle");
}

static void bench_fini(bench_t *b)
{
	int d;

#ifdef BENCH_HAVE_WINDOWS
	if (b->sym) { /* windows go before the communicator's finalize */
		NCCL_CHECK(ncclCommWindowDeregister(b->comms[0], b->sendwin));
		NCCL_CHECK(ncclCommWindowDeregister(b->comms[0], b->recvwin));
	}
#endif
	/* Finalize as one group so the communicators quiesce together, then free. */
	NCCL_CHECK(ncclGroupStart());
	for (d = 0; d < b->nlocal; d++)
		NCCL_CHECK(ncclCommFinalize(b->comms[d]));
	NCCL_CHECK(ncclGroupEnd());
	for (d = 0; d < b->nlocal; d++)
		NCCL_CHECK(ncclCommDestroy(b->comms[d]));
	for (d = 0; d < b->nlocal; d++) {
		CUDA_CHECK(cudaSetDevice(b->devs[d]));
		if (b->sym) {
			NCCL_CHECK(ncclMemFree(b->sendbuf[d]));
			NCCL_CHECK(ncclMemFree(b->recvbuf[d]));
		} else {
			CUDA_CHECK(cudaFree(b->sendbuf[d]));
			CUDA_CHECK(cudaFree(b->recvbuf[d]));
		}
		CUDA_CHECK(cudaEventDestroy(b->ev_start[d]));
		CUDA_CHECK(cudaEventDestroy(b->ev_stop[d]));
		CUDA_CHECK(cudaStreamDestroy(b->streams[d]));
	}
	if (b->dev_err != NULL) {
		CUDA_CHECK(cudaSetDevice(b->devs[0]));
		CUDA_CHECK(cudaFree(b->dev_err));
		CUDA_CHECK(cudaFree(b->dev_time));
	}
	free(b->host_out);
}

/* -------------------------------------------------------------------- CSV */

static FILE *csv_open(const char *path)
{
	FILE *f;
	long size;

	f = fopen(path, "a+");
	if (f == NULL) {
		fprintf(stderr, "nccl_bench: FATAL: cannot open CSV %s: %s\n", path, strerror(errno));
		exit(2);
	}
	if (fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0) {
		fprintf(stderr, "nccl_bench: FATAL: cannot seek CSV %s\n", path);
		exit(2);
	}
	if (size == 0) {
		fprintf(f, "%s\n", BENCH_CSV_HEADER);
	} else {
		char line[512];

		/* appending to an existing file: its header must be ours */
		rewind(f);
		if (fgets(line, sizeof(line), f) == NULL ||
		    strncmp(line, BENCH_CSV_HEADER, strlen(BENCH_CSV_HEADER)) != 0 ||
		    (line[strlen(BENCH_CSV_HEADER)] != '\n' && line[strlen(BENCH_CSV_HEADER)] != '\r')) {
			fprintf(stderr, "nccl_bench: FATAL: %s exists with another header; expected\n  %s\n",
				path, BENCH_CSV_HEADER);
			exit(2);
		}
		fseek(f, 0, SEEK_END);
	}
	fflush(f);
	return f;
}

static void csv_row(FILE *f, const char *path, int coll, size_t bytes, double time_us, double algbw,
		    double busbw, uint64_t errors, int nranks, int multi)
{
	fprintf(f, "%s,%s,%zu,%.3f,%.4f,%.4f,%llu,%d,%s\n", path, coll_names[coll], bytes, time_us, algbw,
		busbw, (unsigned long long)errors, nranks, multi ? "multi" : "single");
	fflush(f);
}

/* -------------------------------------------------------------------- main */

static void print_plan(const opts_t *o, const size_t *sizes, int nsizes, int n)
{
	int c, k;

	printf("# plan: %d ranks, sizes %zu..%zu x%u, iters %d (min %d above %zu B), warmup %d, "
	       "full check up to %zu B\n",
	       n, o->min_bytes, o->max_bytes, o->factor, o->iters, o->min_iters, o->scale_bytes,
	       o->warmup, o->full_check);
	printf("# %-14s %12s %12s %6s %6s %s\n", "collective", "bytes", "count", "iters", "warmup",
	       "check");
	for (c = 0; c < COLL_COUNT; c++) {
		if (!o->colls[c])
			continue;
		for (k = 0; k < nsizes; k++) {
			coll_size_t s;
			int it, wu;

			if (coll_size_get(c, sizes[k], n, &s) != 0) {
				printf("  %-14s %12zu %12s skipped: fewer elements than ranks\n", coll_names[c],
				       sizes[k], "-");
				continue;
			}
			iters_for(o, s.bytes, &it, &wu);
			printf("  %-14s %12zu %12zu %6d %6d %s\n", coll_names[c], s.bytes, s.count, it, wu,
			       s.bytes > o->full_check ? "sampled" : "full");
		}
	}
}

int main(int argc, char **argv)
{
	opts_t o;
	bench_t b;
	size_t sizes[64];
	int nsizes, c, k, d, lead, nccl_version = 0;
	uint64_t local_errors = 0, total_errors = 0;
	int lines = 0, bad_lines = 0;
	FILE *csv = NULL;
	struct sigaction sa;
	double t_begin;

	setvbuf(stdout, NULL, _IOLBF, 0);
	opts_parse(argc, argv, &o);
	nsizes = sizes_make(&o, sizes, (int)(sizeof(sizes) / sizeof(sizes[0])));

	if (o.plan_only) {
		int n = o.ngpus > 0 ? o.ngpus : env_int("WORLD_SIZE", 2, 1, 1 << 20);

		print_plan(&o, sizes, nsizes, n);
		return 0;
	}

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = bench_watchdog;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGALRM, &sa, NULL);

	/* the CSV is checked before the (slow) NCCL init, by the rank that writes it */
	lead = o.multi ? env_int("RANK", -1, -1, 1 << 20) == 0 : 1;
	if (lead && o.csv != NULL)
		csv = csv_open(o.csv);

	t_begin = now_s();
	bench_init(&b, &o);
	lead = b.rank0 == 0;
	NCCL_CHECK(ncclGetVersion(&nccl_version));
	if (lead) {
		const char *envs[] = { "NCCL_NET", "NCCL_NET_PLUGIN", "NCCL_FABRIC_PROVIDER",
				       "NCCL_FABRIC_HMEM", "NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE",
				       "NCCL_NET_GDR_LEVEL", "NCCL_SOCKET_NTHREADS", "NCCL_NSOCKS_PERTHREAD" };
		size_t e;

		printf("# nccl_bench: path %s, mode %s, %d ranks (%d GPU(s) in this process), NCCL %d, "
		       "float32, init %.1f s\n",
		       o.path, o.multi ? "multi (one process per GPU)" : "single (one process, all GPUs)",
		       b.nranks, b.nlocal, nccl_version, now_s() - t_begin);
		printf("# env:");
		for (e = 0; e < sizeof(envs) / sizeof(envs[0]); e++) {
			const char *v = getenv(envs[e]);

			if (v != NULL)
				printf(" %s=%s", envs[e], v);
		}
		printf("\n# check: every element up to %zu bytes; above, first/last %d elements of each "
		       "block and every %dth between (\"sampled\")\n",
		       o.full_check, BENCH_CHECK_EDGE, BENCH_CHECK_STRIDE);
		printf("# bytes = largest buffer of one rank; count = NCCL count argument (per peer for "
		       "alltoall); time = mean per iteration, slowest rank\n");
		printf("# %-14s %12s %12s %6s %12s %10s %10s %8s %s\n", "collective", "bytes", "count", "iters",
		       "time_us", "algbw_GB/s", "busbw_GB/s", "errors", "check");
	}

	for (c = 0; c < COLL_COUNT; c++) {
		if (!o.colls[c])
			continue;
		for (k = 0; k < nsizes; k++) {
			coll_size_t s;
			int it, wu, i, sampled;
			uint64_t errors;
			double time_us = 0.0, algbw, busbw;
			char what[128];

			if (coll_size_get(c, sizes[k], b.nranks, &s) != 0)
				continue; /* fewer elements than ranks */
			iters_for(&o, s.bytes, &it, &wu);
			sampled = s.bytes > o.full_check;
			snprintf(what, sizeof(what), "%s %zu bytes", coll_names[c], s.bytes);
			watchdog_arm(o.timeout_s, what);

			/* 1. checked run into NaN-filled outputs */
			for (d = 0; d < b.nlocal; d++) {
				CUDA_CHECK(cudaSetDevice(b.devs[d]));
				CUDA_CHECK(cudaMemsetAsync(b.recvbuf[d], 0xff, s.out_count * sizeof(float),
							   b.streams[d]));
			}
			if (c == COLL_PUT_SIGNAL) {
				/* a put lands without a receive: the NaN fill must be
				 * done everywhere before anyone puts */
				bench_wait(&b);
				bench_barrier(&b);
			}
			bench_run(&b, c, &s, o.root);
			bench_wait(&b);
			errors = bench_check(&b, c, &s, o.root, sampled, "first run");

			/* 2. warmup, then timed iterations */
			for (i = 0; i < wu; i++)
				bench_run(&b, c, &s, o.root);
			for (d = 0; d < b.nlocal; d++) {
				CUDA_CHECK(cudaSetDevice(b.devs[d]));
				CUDA_CHECK(cudaEventRecord(b.ev_start[d], b.streams[d]));
			}
			for (i = 0; i < it; i++)
				bench_run(&b, c, &s, o.root);
			for (d = 0; d < b.nlocal; d++) {
				CUDA_CHECK(cudaSetDevice(b.devs[d]));
				CUDA_CHECK(cudaEventRecord(b.ev_stop[d], b.streams[d]));
			}
			bench_wait(&b);
			for (d = 0; d < b.nlocal; d++) {
				float ms = 0.0f;

				CUDA_CHECK(cudaEventElapsedTime(&ms, b.ev_start[d], b.ev_stop[d]));
				if (ms * 1000.0 / it > time_us)
					time_us = ms * 1000.0 / it;
			}

			/* 3. the last timed iteration's output must be right too */
			errors += bench_check(&b, c, &s, o.root, sampled, "after timing");
			local_errors += errors;

			bench_combine(&b, &errors, &time_us);
			watchdog_arm(0, "idle");
			algbw = time_us > 0.0 ? (double)s.bytes / (time_us * 1e3) : 0.0;
			busbw = algbw * coll_busbw_factor(c, b.nranks);
			total_errors += errors;
			lines++;
			if (errors > 0)
				bad_lines++;
			if (lead) {
				printf("  %-14s %12zu %12zu %6d %12.2f %10.3f %10.3f %8llu %s\n", coll_names[c],
				       s.bytes, s.count, it, time_us, algbw, busbw, (unsigned long long)errors,
				       sampled ? "sampled" : "full");
				if (csv != NULL)
					csv_row(csv, o.path, c, s.bytes, time_us, algbw, busbw, errors, b.nranks,
						o.multi);
			}
		}
	}

	watchdog_arm(o.timeout_s, "teardown");
	bench_fini(&b);
	watchdog_arm(0, "idle");
	if (csv != NULL)
		fclose(csv);
	if (lines == 0) {
		fprintf(stderr, "nccl_bench: FATAL: no size was run (sizes too small for %d ranks?)\n", b.nranks);
		return 2;
	}
	if (lead) {
		if (total_errors == 0)
			printf("# nccl_bench: PASS: %d lines, 0 data errors, %.1f s\n", lines, now_s() - t_begin);
		else
			printf("# nccl_bench: FAIL: %llu data errors in %d of %d lines\n",
			       (unsigned long long)total_errors, bad_lines, lines);
	}
	if (local_errors > 0 && !lead)
		fprintf(stderr, "nccl_bench[rank %d]: FAIL: %llu data errors on this rank\n", b.rank0,
			(unsigned long long)local_errors);
	return (local_errors > 0 || total_errors > 0) ? 1 : 0;
}
