/*
 * test_abi.c - abi_result, the one place an internal -FI_* code becomes an
 * ncclResult_t, and the helpers that pick the codes (ofi_err_sys, ofi_err_cq,
 * proto_gone_rc): NCCL must be told what it was told before errors travelled
 * as -FI_* codes, for every code. Fails if a mapping changes.
 */
#include <string.h>

#include "abi/abi.h"
#include "ofi/ofi.h"
#include "proto/proto.h"
#include "unit.h"

/* Every code a provider could hand back, and the plugin's own. */
#define CODE_MAX (FI_ERRNO_OFFSET + 64)

static int test_table(void)
{
	static const struct {
		int rc;
		ncclResult_t want;
	} table[] = {
		{0, ncclSuccess},
		{-FI_EINVAL, ncclInvalidArgument},
		{-FI_EMSGSIZE, ncclInvalidUsage},
		{-FI_ETRUNC, ncclInvalidUsage},
		{-FI_ECONNRESET, ncclRemoteError},
		{-FI_ECONNREFUSED, ncclRemoteError},
		{-FI_ECONNABORTED, ncclRemoteError},
		{-FI_ENOTCONN, ncclRemoteError},
		{-FI_EHOSTUNREACH, ncclRemoteError},
		{-FI_ENETUNREACH, ncclRemoteError},
		{-FI_ETIMEDOUT, ncclRemoteError},
		{-FI_EIO, ncclRemoteError},
		{-FI_EOPBADSTATE, ncclInternalError},
		{-OFI_ECUDA, ncclUnhandledCudaError},
		{-FI_ENOMEM, ncclSystemError},
		{-FI_EOTHER, ncclSystemError},
		{-FI_ECANCELED, ncclSystemError},
		{-FI_EAGAIN, ncclSystemError},
		{-FI_ENOSPC, ncclSystemError},
		{-FI_ENODATA, ncclSystemError},
		{-FI_ENOSYS, ncclSystemError},
		{-FI_EBADF, ncclSystemError},
		{-FI_ESHUTDOWN, ncclSystemError},
		{-FI_EINPROGRESS, ncclSystemError},
		{-FI_EACCES, ncclSystemError},
		{FI_EINVAL, ncclSystemError}, /* (a positive code is no code) */
	};
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
		if (abi_result(table[i].rc) != table[i].want)
			fprintf(stderr, "  abi_result(%d) is %d\n", table[i].rc, abi_result(table[i].rc));
		CHECK_EQ(abi_result(table[i].rc), table[i].want);
	}
	return 0;
}

/* What NCCL was told for a failed completion before: classify_error of
 * proto_data.c, with a cancellation a system error. */
static ncclResult_t completion_before(int err)
{
	switch (err) {
	case FI_ETRUNC:
	case FI_EMSGSIZE:
		return ncclInvalidUsage;
	case FI_ECONNRESET:
	case FI_ECONNREFUSED:
	case FI_ECONNABORTED:
	case FI_ENOTCONN:
	case FI_EHOSTUNREACH:
	case FI_ENETUNREACH:
	case FI_ETIMEDOUT:
	case FI_EIO:
		return ncclRemoteError;
	default:
		return ncclSystemError;
	}
}

static int test_completion_codes(void)
{
	for (int err = 0; err <= CODE_MAX + 1; err++) {
		int code = err == CODE_MAX + 1 ? OFI_ECUDA : err;
		int rc = ofi_err_cq(code);
		CHECK(rc < 0);
		if (abi_result(rc) != completion_before(code))
			fprintf(stderr, "  a completion with error %d: %d\n", code, abi_result(rc));
		CHECK_EQ(abi_result(rc), completion_before(code));
		/* libfabric's reason is kept, except where it would pass for the plugin's own */
		if (code && code != FI_EINVAL && code != FI_EOPBADSTATE && code != OFI_ECUDA)
			CHECK_EQ(rc, -code);
	}
	return 0;
}

static int test_call_failures(void)
{
	CHECK_EQ(ofi_err_sys(0), -FI_EOTHER);
	CHECK_EQ(ofi_err_sys(FI_EINVAL), -FI_EOTHER);
	for (int err = 1; err <= CODE_MAX + 1; err++) {
		int code = err == CODE_MAX + 1 ? OFI_ECUDA : err;
		int rc = ofi_err_sys(-code);
		if (abi_result(rc) != ncclSystemError)
			fprintf(stderr, "  a call failing with -%d: %d\n", code, abi_result(rc));
		CHECK_EQ(abi_result(rc), ncclSystemError);
		/* a code that means "system error" anyway travels as it is */
		if (abi_result(-code) == ncclSystemError)
			CHECK_EQ(rc, -code);
		else
			CHECK_EQ(rc, -FI_EOTHER);
	}
	return 0;
}

static int test_peer_gone(void)
{
	CHECK_EQ(proto_gone_rc(FI_ETIMEDOUT), -FI_ETIMEDOUT);
	for (int err = 0; err <= CODE_MAX; err++)
		CHECK_EQ(abi_result(proto_gone_rc(err)), ncclRemoteError);
	return 0;
}

static int test_strerror(void)
{
	CHECK_STR_CONTAINS(ofi_strerror(-OFI_ECUDA), "CUDA");
	CHECK(!strcmp(ofi_strerror(-FI_EINVAL), fi_strerror(FI_EINVAL)));
	CHECK(!strcmp(ofi_strerror(-FI_ETRUNC), fi_strerror(FI_ETRUNC)));
	return 0;
}

/* Every version of nccl_versions.h's list has its table (abi_vN.c), named
 * as the plugin, with the members NCCL calls unconditionally, and its
 * getProperties is the list's (the properties layout the list gives it). */
#define TABLE_CHECK_(N, ...)                                                             \
	do {                                                                             \
		const ncclNet_v##N##_t *t = &ncclNetPlugin_v##N;                         \
		CHECK(!strcmp(t->name, CORE_PLUGIN_NAME));                               \
		CHECK(t->getProperties == abi_get_properties_v##N);                      \
		CHECK(t->init && t->devices && t->listen && t->connect && t->accept);    \
		CHECK(t->regMr && t->regMrDmaBuf && t->deregMr);                         \
		CHECK(t->isend && t->irecv && t->iflush && t->test);                     \
		CHECK(t->closeSend && t->closeRecv && t->closeListen);                   \
		versions++;                                                              \
	} while (0);

static int test_tables(void)
{
	int versions = 0;
	NCCL_NET_VERSIONS(TABLE_CHECK_)
	CHECK_EQ(versions, NCCL_NET_VERSION_MAX - NCCL_NET_VERSION_MIN + 1);
	return 0;
}

static const struct unit_test tests[] = {
	TEST_ENTRY(test_tables, "one ncclNetPlugin_vN per version of the list, complete"),
	TEST_ENTRY(test_table, "abi_result: each internal code and the ncclResult_t NCCL gets"),
	TEST_ENTRY(test_completion_codes, "a failed completion: libfabric's code kept, NCCL told as before"),
	TEST_ENTRY(test_call_failures, "a failed call: libfabric's code kept, always ncclSystemError"),
	TEST_ENTRY(test_peer_gone, "a peer gone: ncclRemoteError whatever showed it"),
	TEST_ENTRY(test_strerror, "ofi_strerror names OFI_ECUDA and libfabric's codes"),
};

int main(int argc, char **argv)
{
	return unit_main(tests, argc, argv);
}
