/*
 * test_dereg.c - deregMr while an operation still uses the buffer: the
 * registration must stay until the operation completes (the provider may be
 * writing into it or reading from it), then go. Runs the plugin's own code
 * (fabric_static) in one process, connected to itself, over the provider
 * NCCL_FABRIC_PROVIDER names; exit 77 when that provider is not here.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "unit.h"
#include "unit_pair.h"

static void *lcomm, *sc, *rc;

static int registrations(void)
{
	return ofi_mr_count(core_plugin_get()->devs[0].dom);
}

/* One message of len bytes; the receive's (or the send's) registration is
 * dropped by deregMr right after posting, before anything completed. */
static int transfer_with_early_dereg(size_t len, int dereg_recv)
{
	unsigned char *out = malloc(len), *in = malloc(len);
	CHECK(out && in);
	for (size_t k = 0; k < len; k++)
		out[k] = (unsigned char)(k * 13 + 5);
	memset(in, 0, len);
	void *smr = NULL, *rmr = NULL, *sreq = NULL, *rreq = NULL;
	int base = registrations();
	CHECK_EQ(net_reg_mr(sc, out, len, NCCL_PTR_HOST, &smr), 0);
	CHECK_EQ(net_reg_mr(rc, in, len, NCCL_PTR_HOST, &rmr), 0);
	int with_both = registrations();
	CHECK(with_both >= base + 1); /* (two pages may share one registration) */
	void *data = in;
	size_t size = len;
	int tag = 3;
	CHECK_EQ(net_irecv(rc, 1, &data, &size, &tag, &rmr, &rreq), 0);
	CHECK(rreq != NULL);
	if (dereg_recv) {
		/* the receive is posted into `in`: deregMr must not free it */
		CHECK_EQ(net_dereg_mr(rc, rmr), 0);
		CHECK_EQ(registrations(), with_both);
	}
	double end = unit_now_s() + 30;
	while (!sreq && unit_now_s() < end)
		CHECK_EQ(net_isend(sc, out, len, tag, smr, &sreq), 0);
	CHECK(sreq != NULL);
	if (!dereg_recv) {
		CHECK_EQ(net_dereg_mr(sc, smr), 0);
		CHECK_EQ(registrations(), with_both);
	}
	int sdone = 0, rdone = 0, sizes[1] = {-1}, ssize = -1;
	while ((!sdone || !rdone) && unit_now_s() < end) {
		if (!sdone)
			CHECK_EQ(net_test(sreq, &sdone, &ssize), 0);
		if (!rdone)
			CHECK_EQ(net_test(rreq, &rdone, sizes), 0);
	}
	CHECK(sdone && rdone);
	CHECK_EQ((size_t)sizes[0], len);
	CHECK_EQ((size_t)ssize, len);
	CHECK(!memcmp(in, out, len));
	/* the deferred deregistration happened at the completion */
	CHECK_EQ(net_dereg_mr(dereg_recv ? sc : rc, dereg_recv ? smr : rmr), 0);
	CHECK_EQ(registrations(), base);
	free(out);
	free(in);
	return 0;
}

static int test_dereg_recv_small(void) { return transfer_with_early_dereg(64 * 1024, 1); }
static int test_dereg_recv_large(void) { return transfer_with_early_dereg(4 << 20, 1); }
static int test_dereg_send_large(void) { return transfer_with_early_dereg(4 << 20, 0); }

static const struct unit_test tests[] = {
	TEST_ENTRY(test_dereg_recv_small, "deregMr of a posted 64 KiB receive: kept until it completes"),
	TEST_ENTRY(test_dereg_recv_large, "deregMr of a posted 4 MiB receive: kept until it completes"),
	TEST_ENTRY(test_dereg_send_large, "deregMr of a 4 MiB send in flight: kept until it completes"),
};

int main(int argc, char **argv)
{
	return unit_pair_run(tests, (int)(sizeof(tests) / sizeof(tests[0])), argc, argv, &lcomm, &sc,
			     &rc);
}
