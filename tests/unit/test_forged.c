/*
 * test_forged.c - a listen handle whose checksum is right but whose address is
 * not an address of the provider's format (a forged or mis-built handle) makes
 * connect fail at once with a WARN; nothing reaches fi_av_insert, and the
 * endpoint serves a good connection afterwards. Runs the plugin's own code
 * (fabric_static) in one process over the provider named by
 * NCCL_FABRIC_PROVIDER (CTest runs it over tcp and shm on loopback).
 * Exit 77 when that provider is not here.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "abi/abi.h"
#include "core/core.h"
#include "log/log.h"
#include "proto/proto_wire.h"
#include "unit.h"
#include "unit_pair.h"

static void *lcomm;
static char good[NCCL_NET_HANDLE_MAXSIZE];


/* Re-seals the good handle with other address bytes. */
static void forge(char *out, const void *addr, size_t len)
{
	struct proto_handle h;
	memcpy(&h, good, sizeof(h));
	proto_handle_encode((struct proto_handle *)(void *)out, h.listen_id, h.tag_bits, h.prov_hash,
			    h.nonce, addr, len);
}

static int connect_fails(const char *what, const void *addr, size_t len)
{
	char handle[NCCL_NET_HANDLE_MAXSIZE];
	forge(handle, addr, len);
	void *sc = NULL;
	int rc = net_connect(0, handle, &sc);
	if (rc == 0) {
		fprintf(stderr, "  %s: connect returned 0 (comm %p)\n", what, sc);
		if (sc)
			net_close_send(sc);
		return 1;
	}
	/* the handle checks out, its address does not: the endpoint refuses it
	 * (-FI_EINVAL inside), which NCCL has always been told as a system error */
	if (rc != -FI_EOTHER || abi_result(rc) != ncclSystemError) {
		fprintf(stderr, "  %s: connect returned %d (%s), expected -FI_EOTHER\n", what, rc,
			ofi_strerror(rc));
		return 1;
	}
	return 0;
}

static int test_forged_addresses(void)
{
	struct core_plugin *p = core_plugin_get();
	uint32_t fmt = p->devs[0].info->addr_format;
	unsigned before = atomic_load(&p->devs[0].dom->eps[0]->dropped);
	unsigned char junk[OFI_ADDR_MAX];
	memset(junk, 0xa5, sizeof(junk));
	struct proto_handle h;
	memcpy(&h, good, sizeof(h));
	/* the same bytes cut short, garbage of the right length, one byte, too long */
	CHECK_EQ(connect_fails("cut short", h.addr, h.addr_len - 1), 0);
	CHECK_EQ(connect_fails("garbage", junk, h.addr_len), 0);
	CHECK_EQ(connect_fails("one byte", junk, 1), 0);
	if (fmt == FI_ADDR_STR) {
		unsigned char s[OFI_ADDR_MAX];
		memset(s, 'x', sizeof(s)); /* no terminator anywhere */
		CHECK_EQ(connect_fails("unterminated string", s, sizeof(s)), 0);
	}
	/* each refusal is counted (the finalize line reports the total) */
	CHECK(atomic_load(&p->devs[0].dom->eps[0]->dropped) >= before + 3);
	return 0;
}

static unsigned long fuzz_warns;
static void counting_logger(ncclDebugLogLevel level, unsigned long flags, const char *file,
			    int line, const char *fmt, ...)
{
	if (level == NCCL_LOG_WARN)
		fuzz_warns++;
}

/* Writes /dev/shm/<name> of `size` bytes whose header has version byte `ver`
 * and owner pid `pid` (the two fields every libfabric version keeps at 0 and
 * 4); the rest is 0xee, which as a size or offset reaches far outside. */
static int fake_region(const char *name, size_t size, unsigned char ver, int pid)
{
	char path[300];
	snprintf(path, sizeof(path), "/dev/shm/%s", name);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	unsigned char *buf = malloc(size);
	int rc = buf ? 0 : -1;
	if (buf) {
		memset(buf, 0xee, size);
		buf[0] = ver;
		memcpy(buf + 4, &pid, sizeof(pid));
		rc = write(fd, buf, size) == (ssize_t)size ? 0 : -1;
	}
	free(buf);
	close(fd);
	return rc;
}

static int shm_connect_fails(const char *what, const char *name)
{
	char addr[OFI_ADDR_MAX] = {0};
	snprintf(addr, sizeof(addr), "fi_shm://%s", name);
	unsigned long warns = fuzz_warns;
	char handle[NCCL_NET_HANDLE_MAXSIZE];
	forge(handle, addr, strlen(addr) + 1);
	void *sc = NULL;
	int rc = net_connect(0, handle, &sc);
	if (rc == 0) {
		fprintf(stderr, "  %s (%s): connect returned 0 (comm %p)\n", what, addr, sc);
		if (sc)
			net_close_send(sc);
		return 1;
	}
	if (fuzz_warns == warns) {
		fprintf(stderr, "  %s (%s): connect failed without a WARN\n", what, addr);
		return 1;
	}
	return 0;
}

/* shm: a re-sealed handle whose name reaches a region file libfabric must not
 * map (it would take a spinlock inside it, and take its sizes from it): the
 * plugin refuses each before fi_av_insert, and nothing crashes. */
static int test_shm_regions(void)
{
	struct core_plugin *p = core_plugin_get();
	if (!p->devs[0].dom->traits.shm_region) {
		printf("  skipped: provider %s names no shm regions\n", p->devs[0].provider);
		return 0;
	}
	struct ofi_ep *ep = p->devs[0].dom->eps[0];
	struct stat own;
	char own_file[300];
	snprintf(own_file, sizeof(own_file), "/dev/shm/%s", ep->name + strlen("fi_shm://"));
	CHECK_EQ(stat(own_file, &own), 0);
	unsigned char ver = 0;
	FILE *f = fopen(own_file, "rb");
	CHECK(f != NULL);
	if (f) {
		CHECK_EQ(fread(&ver, 1, 1, f), 1);
		fclose(f);
	}
	log_set_logger(counting_logger);
	int me = (int)getpid(), uid = (int)getuid();
	char name[128];
	/* no such file */
	snprintf(name, sizeof(name), "%d:%d:97", me, uid);
	CHECK_EQ(shm_connect_fails("missing region", name), 0);
	/* another layout: the version byte, or the size */
	snprintf(name, sizeof(name), "%d:%d:98", me, uid);
	CHECK_EQ(fake_region(name, (size_t)own.st_size, (unsigned char)(ver ^ 0x5a), me), 0);
	CHECK_EQ(shm_connect_fails("other version", name), 0);
	CHECK_EQ(fake_region(name, 4096, ver, me), 0);
	CHECK_EQ(shm_connect_fails("other size", name), 0);
	/* our layout, but owned by a pid other than its name's */
	CHECK_EQ(fake_region(name, (size_t)own.st_size, ver, me + 1), 0);
	CHECK_EQ(shm_connect_fails("owner is not the name's pid", name), 0);
	/* a name of another user */
	snprintf(name, sizeof(name), "%d:%d:98", me, uid + 1);
	CHECK_EQ(shm_connect_fails("another user's name", name), 0);
	/* a region left by a process that has exited */
	pid_t child = fork();
	if (child == 0)
		_exit(0);
	CHECK(child > 0);
	waitpid(child, NULL, 0);
	snprintf(name, sizeof(name), "%d:%d:0", (int)child, uid);
	CHECK_EQ(fake_region(name, (size_t)own.st_size, ver, (int)child), 0);
	CHECK_EQ(shm_connect_fails("exited owner", name), 0);
	snprintf(own_file, sizeof(own_file), "/dev/shm/%d:%d:98", me, uid);
	unlink(own_file);
	snprintf(own_file, sizeof(own_file), "/dev/shm/%s", name);
	unlink(own_file);
	/* not a name at all */
	CHECK_EQ(shm_connect_fails("path", "../../etc/passwd"), 0);
	log_set_logger(NULL);
	return 0;
}

static uint64_t fuzz_rng = 0x2545f4914f6cdd1dULL;
static uint64_t fuzz_next(void)
{
	fuzz_rng ^= fuzz_rng << 13;
	fuzz_rng ^= fuzz_rng >> 7;
	fuzz_rng ^= fuzz_rng << 17;
	return fuzz_rng;
}

/* 1 when connect took the handle (a comm, or a pending connect) */
static int connect_accepted(char *h)
{
	void *sc = NULL;
	if (net_connect(0, h, &sc) != 0)
		return 0;
	if (sc)
		net_close_send(sc);
	return 1;
}

/* In bulk: 100,000 good handles with 1..16 random bytes changed, and 2,000
 * re-sealed ones (right checksum) with random address bytes and lengths.
 * Every one fails at once, with a WARN, and nothing crashes (run under ASan
 * in the sanitizer variant). Addresses that could be real socket addresses
 * are spoiled first: nothing may leave loopback. */
static int test_fuzz_bulk(void)
{
	log_set_logger(counting_logger);
	int accepted = 0;
	unsigned long want = 0;
	for (int i = 0; i < 100000; i++) {
		char h[NCCL_NET_HANDLE_MAXSIZE];
		memcpy(h, good, sizeof(h));
		int flips = 1 + (int)(fuzz_next() % 16);
		for (int k = 0; k < flips; k++)
			h[fuzz_next() % sizeof(struct proto_handle)] ^= (char)(1 + fuzz_next() % 255);
		if (!memcmp(h, good, sizeof(h)))
			continue;
		want++;
		accepted += connect_accepted(h);
	}
	for (int i = 0; i < 2000; i++) {
		unsigned char addr[OFI_ADDR_MAX];
		for (size_t k = 0; k < sizeof(addr); k++)
			addr[k] = (unsigned char)fuzz_next();
		addr[0] = 0x7f; /* sa_family 0x??7f (little-endian): never AF_INET or AF_INET6 */
		addr[1] |= 0x40;
		size_t len = 1 + fuzz_next() % OFI_ADDR_MAX;
		char h[NCCL_NET_HANDLE_MAXSIZE];
		forge(h, addr, len);
		want++;
		accepted += connect_accepted(h);
	}
	log_set_logger(NULL);
	printf("  %lu corrupt handles: %d accepted, %lu WARNs\n", want, accepted, fuzz_warns);
	CHECK_EQ(accepted, 0);
	CHECK(fuzz_warns >= want);
	return 0;
}

/* Which address bytes a re-sealed forgery may flip: those that keep it on
 * this machine (the port, 127.x.y.z, IPv4's padding; the port and flow label
 * of IPv6, whose loopback address stays; anything in a shm name). Returns how
 * many offsets it wrote, 0 for a format this test cannot keep local. */
static int local_offsets(uint32_t fmt, size_t len, unsigned char *off)
{
	int n = 0;
	if (fmt == FI_SOCKADDR_IN && len >= 16) {
		static const unsigned char in4[] = {2, 3, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
		memcpy(off, in4, sizeof(in4));
		return (int)sizeof(in4);
	}
	if (fmt == FI_SOCKADDR_IN6 && len >= 28) {
		for (int i = 2; i < 8; i++)
			off[n++] = (unsigned char)i;
		return n;
	}
	if (fmt == FI_ADDR_STR) {
		for (size_t i = strlen("fi_shm://"); i + 1 < len && n < OFI_ADDR_MAX; i++)
			off[n++] = (unsigned char)i;
		return n;
	}
	return 0;
}

/* Connects in flight at once, and how long one may take to end. */
#define BURST_WINDOW 512
#define BURST_BOUND_S 5.0

/* A burst of re-sealed handles (right checksum) whose address has 1..3 bits
 * flipped: each names another port, address or shm region of this machine,
 * where nothing or something else listens. Every connect must end within
 * 5 s, with an error, or with a connection where the flips did not change the
 * endpoint (IPv4's padding) and so reached this listener; nothing crashes.
 * FORGED_RESEALED sets how many (2,000 by default; the README's fault section
 * runs 100,000). */
static int test_resealed_burst(void)
{
	struct core_plugin *p = core_plugin_get();
	uint32_t fmt = p->devs[0].info->addr_format;
	struct proto_handle gh;
	memcpy(&gh, good, sizeof(gh));
	unsigned char off[OFI_ADDR_MAX];
	int noff = local_offsets(fmt, gh.addr_len, off);
	if (noff == 0) {
		printf("  skipped: address format %u has no bytes this test can flip and stay local\n",
		       fmt);
		return 0;
	}
	const char *env = getenv("FORGED_RESEALED");
	long total = env ? strtol(env, NULL, 10) : 2000;
	if (total <= 0)
		total = 2000;
	const char *m = getenv("NCCL_FABRIC_TEST_TIMEOUT_MULTIPLIER");
	double bound = BURST_BOUND_S * (m && atof(m) > 1.0 ? atof(m) : 1.0);
	static char hs[BURST_WINDOW][NCCL_NET_HANDLE_MAXSIZE];
	double started[BURST_WINDOW];
	bool busy[BURST_WINDOW] = {false};
	bool lost[BURST_WINDOW] = {false}; /* a connect still pending past the bound keeps its buffer */
	long begun = 0, ended = 0, failed = 0, reached = 0, slow = 0, late = 0;
	double worst = 0, t0 = unit_now_s();
	log_set_logger(counting_logger); /* the refusals' WARNs, counted, not printed */
	while (ended < total) {
		for (int w = 0; w < BURST_WINDOW; w++) {
			if (lost[w])
				continue;
			if (!busy[w]) {
				if (begun == total)
					continue;
				unsigned char addr[OFI_ADDR_MAX];
				memcpy(addr, gh.addr, gh.addr_len);
				int flips = 1 + (int)(fuzz_next() % 3);
				for (int k = 0; k < flips; k++)
					addr[off[fuzz_next() % (unsigned)noff]] ^=
						(unsigned char)(1u << (fuzz_next() % 8));
				forge(hs[w], addr, gh.addr_len);
				busy[w] = true;
				started[w] = unit_now_s();
				begun++;
			}
			void *sc = NULL;
			int rc = net_connect(0, hs[w], &sc);
			double took = unit_now_s() - started[w];
			if (rc == 0 && !sc) {
				if (took > bound) {
					late++;
					lost[w] = true;
					ended++;
				}
				continue;
			}
			if (sc) {
				reached++;
				net_close_send(sc);
			} else {
				failed++;
			}
			slow += took > 1.0;
			if (took > worst)
				worst = took;
			busy[w] = false;
			ended++;
		}
		void *rcomm = NULL; /* the forgeries that still name this listener */
		while (net_accept(lcomm, &rcomm) == 0 && rcomm) {
			net_close_recv(rcomm);
			rcomm = NULL;
		}
	}
	log_set_logger(NULL);
	printf("  %ld re-sealed handles in %.1f s: %ld failed, %ld reached this listener, %ld took "
	       "over 1 s, the slowest %.2f s, %ld unanswered after %.0f s\n",
	       total, unit_now_s() - t0, failed, reached, slow, worst, late, bound);
	CHECK_EQ(late, 0);
	CHECK_EQ(failed + reached, total);
	return 0;
}

/* After the forgeries the endpoint still connects: connect and accept on one thread. */
static int test_good_after(void)
{
	void *sc = NULL, *rc = NULL;
	(void)unit_pair_connect(lcomm, good, &sc, &rc, 30);
	double end = unit_now_s() + 30;
	CHECK(sc != NULL);
	CHECK(rc != NULL);
	if (sc && rc) {
		/* one message each way is the proof that the connection works */
		char out[64] = "after the forged handles", in[64] = "";
		void *smr = NULL, *rmr = NULL, *sreq = NULL, *rreq = NULL;
		CHECK_EQ(net_reg_mr(sc, out, sizeof(out), NCCL_PTR_HOST, &smr), 0);
		CHECK_EQ(net_reg_mr(rc, in, sizeof(in), NCCL_PTR_HOST, &rmr), 0);
		void *data = in;
		size_t size = sizeof(in);
		int tag = 7;
		CHECK_EQ(net_irecv(rc, 1, &data, &size, &tag, &rmr, &rreq), 0);
		int sdone = 0, rdone = 0, sizes[1] = {0};
		while ((!sreq || !sdone || !rdone) && unit_now_s() < end) {
			if (!sreq)
				CHECK_EQ(net_isend(sc, out, sizeof(out), 7, smr, &sreq), 0);
			if (sreq && !sdone)
				CHECK_EQ(net_test(sreq, &sdone, NULL), 0);
			if (rreq && !rdone)
				CHECK_EQ(net_test(rreq, &rdone, sizes), 0);
		}
		CHECK(sdone && rdone);
		CHECK_EQ(sizes[0], sizeof(out));
		CHECK(!strcmp(in, out));
		net_dereg_mr(sc, smr);
		net_dereg_mr(rc, rmr);
	}
	if (sc)
		net_close_send(sc);
	if (rc)
		net_close_recv(rc);
	return 0;
}

static const struct unit_test tests[] = {
	TEST_ENTRY(test_forged_addresses, "a sealed handle with a bad address: connect fails at once"),
	TEST_ENTRY(test_shm_regions, "shm: names of regions libfabric must not map are refused"),
	TEST_ENTRY(test_fuzz_bulk, "102,000 corrupt or re-sealed handles: each fails at once with a WARN"),
	TEST_ENTRY(test_resealed_burst, "re-sealed handles naming other local endpoints, 512 at once: "
					"each ends within 5 s"),
	TEST_ENTRY(test_good_after, "the endpoint still connects and moves data afterwards"),
};

int main(int argc, char **argv)
{
	void *ctx = NULL;
	if (net_init(&ctx, NULL) != 0) {
		printf("SKIP: no usable provider (NCCL_FABRIC_PROVIDER=%s)\n",
		       getenv("NCCL_FABRIC_PROVIDER") ? getenv("NCCL_FABRIC_PROVIDER") : "");
		return 77;
	}
	if (net_listen(0, good, &lcomm) != 0) {
		fprintf(stderr, "listen failed\n");
		return 1;
	}
	int rc = unit_main(tests, argc, argv);
	net_close_listen(lcomm);
	net_finalize(ctx);
	return rc;
}
