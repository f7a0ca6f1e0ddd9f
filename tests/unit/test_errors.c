/*
 * test_errors.c - the internal API's error codes: what NCCL could get wrong
 * fails with -FI_EINVAL, a message larger than its receive with -FI_EMSGSIZE
 * on both sides, and each becomes at the ABI face the ncclResult_t NCCL was
 * always told (abi_result); a receive failed by a stand-in says nothing its
 * payload claims. Runs the plugin's own code (fabric_static) in one
 * process, connected to itself, over the provider NCCL_FABRIC_PROVIDER names;
 * exit 77 when that provider is not here.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "abi/abi.h"
#include "core/core.h"
#include "log/log.h"
#include "proto/proto.h"
#include "unit.h"
#include "unit_pair.h"

static void *lcomm, *sc, *rc;

/* rc_ must be want, and NCCL sees nccl */
#define CHECK_RC(call, want, nccl)                 \
	do {                                       \
		int rc_ = (call);                  \
		CHECK_EQ(rc_, want);               \
		CHECK_EQ(abi_result(rc_), nccl);   \
	} while (0)

static int test_bad_arguments(void)
{
	struct core_plugin *p = core_plugin_get();
	struct net_props props;
	char handle[NCCL_NET_HANDLE_MAXSIZE];
	void *out = NULL, *mh = NULL, *req = NULL;
	char buf[64];
	void *data = buf;
	size_t size = sizeof(buf);
	int tag = 1, done = 0, isize = (int)sizeof(buf);
	CHECK_RC(net_get_properties(-1, &props), -FI_EINVAL, ncclInvalidArgument);
	CHECK_RC(net_get_properties(p->ndevs, &props), -FI_EINVAL, ncclInvalidArgument);
	CHECK_RC(net_listen(p->ndevs, handle, &out), -FI_EINVAL, ncclInvalidArgument);
	CHECK(out == NULL);
	CHECK_RC(net_connect(0, NULL, &out), -FI_EINVAL, ncclInvalidArgument);
	memset(handle, 0, sizeof(handle)); /* no magic: not a handle of this plugin */
	CHECK_RC(net_connect(0, handle, &out), -FI_EINVAL, ncclInvalidArgument);
	CHECK(out == NULL);
	CHECK_RC(net_accept(sc, &out), -FI_EINVAL, ncclInvalidArgument);
	/* each comm where another kind belongs */
	CHECK_RC(net_isend(rc, buf, size, tag, NULL, &req), -FI_EINVAL, ncclInvalidArgument);
	CHECK_RC(net_irecv(sc, 1, &data, &size, &tag, NULL, &req), -FI_EINVAL,
		 ncclInvalidArgument);
	CHECK_RC(net_iflush(sc, 1, &data, &isize, NULL, &req), -FI_EINVAL, ncclInvalidArgument);
	CHECK_RC(net_reg_mr(lcomm, buf, size, NCCL_PTR_HOST, &mh), -FI_EINVAL,
		 ncclInvalidArgument);
	CHECK_RC(net_reg_mr_dmabuf(lcomm, buf, size, NCCL_PTR_HOST, 0, -1, &mh), -FI_EINVAL,
		 ncclInvalidArgument);
	CHECK_RC(net_close_send(rc), -FI_EINVAL, ncclInvalidArgument);
	CHECK_RC(net_close_recv(sc), -FI_EINVAL, ncclInvalidArgument);
	CHECK_RC(net_close_listen(sc), -FI_EINVAL, ncclInvalidArgument);
	/* arguments NCCL never passes */
	CHECK_RC(net_irecv(rc, 0, &data, &size, &tag, NULL, &req), -FI_EINVAL,
		 ncclInvalidArgument);
	CHECK_RC(net_irecv(rc, p->devs[0].props.max_recvs + 1, &data, &size, &tag, NULL, &req),
		 -FI_EINVAL, ncclInvalidArgument);
	CHECK_RC(net_reg_mr(sc, buf, size, 77, &mh), -FI_EINVAL, ncclInvalidArgument);
	CHECK(mh == NULL);
	if (!p->devs[0].plan.hmem)
		CHECK_RC(net_reg_mr(sc, buf, size, NCCL_PTR_CUDA, &mh), -FI_EINVAL,
			 ncclInvalidArgument);
	CHECK_RC(net_test(NULL, &done, NULL), -FI_EINVAL, ncclInvalidArgument);
	CHECK(req == NULL);
	/* what is no error */
	CHECK_RC(net_iflush(rc, 1, &data, &isize, NULL, &req), 0, ncclSuccess); /* host memory */
	CHECK(req == NULL);
	CHECK_RC(net_dereg_mr(sc, NULL), 0, ncclSuccess);
	CHECK_RC(net_close_send(NULL), 0, ncclSuccess);
	CHECK_RC(net_finalize(NULL), 0, ncclSuccess);
	return 0;
}

/* 1 MiB into a 512 KiB receive (both above every eager limit: the sender
 * learns the size from the CTS): both requests fail with -FI_EMSGSIZE, which
 * NCCL is told as ncclInvalidUsage, and none of the message is written. */
static int test_message_too_large(void)
{
	size_t len = 1 << 20, cap = len / 2;
	unsigned char *out = malloc(len), *in = malloc(cap);
	CHECK(out && in);
	memset(out, 0x5a, len);
	memset(in, 0, cap);
	void *smr = NULL, *rmr = NULL, *sreq = NULL, *rreq = NULL;
	CHECK_EQ(net_reg_mr(sc, out, len, NCCL_PTR_HOST, &smr), 0);
	CHECK_EQ(net_reg_mr(rc, in, cap, NCCL_PTR_HOST, &rmr), 0);
	void *data = in;
	int tag = 9;
	CHECK_EQ(net_irecv(rc, 1, &data, &cap, &tag, &rmr, &rreq), 0);
	CHECK(rreq != NULL);
	double end = unit_now_s() + 30;
	int sres = 0, rres = 0, sdone = 0, rdone = 0, ssize = -1, rsize = -1;
	while ((!sreq || !sdone || !rdone) && unit_now_s() < end) {
		if (!sreq)
			CHECK_EQ(net_isend(sc, out, len, tag, smr, &sreq), 0);
		if (sreq && !sdone)
			sres = net_test(sreq, &sdone, &ssize);
		if (rreq && !rdone)
			rres = net_test(rreq, &rdone, &rsize);
		if ((sres && !sdone) || (rres && !rdone))
			break; /* failed without completing: reported below */
	}
	CHECK(sdone && rdone);
	CHECK_EQ(sres, -FI_EMSGSIZE);
	CHECK_EQ(rres, -FI_EMSGSIZE);
	CHECK_EQ(abi_result(sres), ncclInvalidUsage);
	CHECK(memchr(in, 0x5a, cap) == NULL); /* (the stand-in carries only the size) */
	/* a request test() has finished is no request any more */
	if (sdone)
		CHECK_RC(net_test(sreq, &sdone, NULL), -FI_EINVAL, ncclInvalidArgument);
	CHECK_EQ(net_dereg_mr(sc, smr), 0);
	CHECK_EQ(net_dereg_mr(rc, rmr), 0);
	free(out);
	free(in);
	return 0;
}

/* The WARNs of one test, as printed. */
static char warns[8][512];
static int nwarns;
static void capture_logger(ncclDebugLogLevel level, unsigned long flags, const char *file,
			   int line, const char *fmt, ...)
{
	if (level != NCCL_LOG_WARN || nwarns >= 8)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(warns[nwarns++], sizeof(warns[0]), fmt, ap);
	va_end(ap);
}

static void forged_done(struct ofi_op *op, const struct fi_cq_tagged_entry *e,
			const struct fi_cq_err_entry *err)
{
	*(int *)op->owner = 1;
}

/* A stand-in (the abort bit) whose payload claims a size, as a broken or
 * hostile peer may send one: the receive fails with -FI_EMSGSIZE, and its
 * WARN names what this side knows (the buffer's size), never a number read
 * from the peer's bytes. Sent raw from the send comm's home rail, as the
 * sender's stand-in would be. */
static int test_stand_in_claims_a_size(void)
{
	struct proto_send *s = container_of(proto_comm_from(sc, PROTO_SEND), struct proto_send, c);
	struct proto_comm *c = &s->c;
	const struct proto_tag_layout *lay = &c->dev->layout;
	unsigned char in[64];
	memset(in, 0, sizeof(in));
	static uint64_t claim = 0x3131313131313131ULL; /* "11111111": 3544668469065756977 */
	void *rmr = NULL, *cmr = NULL, *rreq = NULL;
	CHECK_EQ(net_reg_mr(rc, in, sizeof(in), NCCL_PTR_HOST, &rmr), 0);
	CHECK_EQ(net_reg_mr(sc, &claim, sizeof(claim), NCCL_PTR_HOST, &cmr), 0);
	void *data = in;
	size_t cap = sizeof(in);
	int tag = 77; /* no message had this tag: sequence number 0 on both sides */
	CHECK_EQ(net_irecv(rc, 1, &data, &cap, &tag, &rmr, &rreq), 0);
	CHECK(rreq != NULL);
	static struct ofi_op op;
	static int sent;
	memset(&op, 0, sizeof(op));
	op.complete = forged_done;
	op.owner = &sent;
	struct ofi_ep *ep = c->rails[c->home];
	uint64_t wire = proto_tag_data(lay, s->remote_id, 0, tag) | lay->abort_bit;
	nwarns = 0;
	log_set_logger(capture_logger);
	double end = unit_now_s() + 30;
	ssize_t prc;
	while ((prc = ofi_ep_tsend(ep, &claim, sizeof(claim), ((struct ofi_mr *)cmr)->desc,
				   s->peer[c->home], wire, &op.ctx)) == -FI_EAGAIN &&
	       unit_now_s() < end)
		(void)ofi_ep_progress(ep);
	int rres = 0, rdone = 0, rsize = -1;
	while (prc == 0 && (!rdone || !sent) && unit_now_s() < end) {
		if (!rdone)
			rres = net_test(rreq, &rdone, &rsize);
		else
			(void)ofi_ep_progress(ep);
		if (rres && !rdone)
			break;
	}
	log_set_logger(NULL);
	CHECK_EQ(prc, 0);
	CHECK(sent && rdone);
	CHECK_EQ(rres, -FI_EMSGSIZE);
	const char *w = NULL;
	for (int i = 0; i < nwarns; i++) {
		fprintf(stderr, "  WARN: %s\n", warns[i]);
		if (strstr(warns[i], "receive from"))
			w = warns[i];
	}
	CHECK(w != NULL);
	CHECK(strstr(w, "buffer of 64 bytes") != NULL);
	CHECK(strstr(w, "3544668469065756977") == NULL);
	CHECK_EQ(net_dereg_mr(rc, rmr), 0);
	CHECK_EQ(net_dereg_mr(sc, cmr), 0);
	return 0;
}

static const struct unit_test tests[] = {
	TEST_ENTRY(test_bad_arguments, "wrong comms, handles, sizes, types, requests: -FI_EINVAL"),
	TEST_ENTRY(test_message_too_large, "1 MiB into a 512 KiB receive: -FI_EMSGSIZE on both sides"),
	TEST_ENTRY(test_stand_in_claims_a_size,
		   "a stand-in claiming 0x3131313131313131 bytes: -FI_EMSGSIZE, and a WARN without it"),
};

int main(int argc, char **argv)
{
	return unit_pair_run(tests, (int)(sizeof(tests) / sizeof(tests[0])), argc, argv, &lcomm, &sc,
			     &rc);
}
