/*
 * test_addr.c - peer addresses from the wire are checked for the domain's
 * address format before fi_av_insert sees them.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "ofi/ofi.h"
#include "unit.h"

static int check(uint32_t fmt, const void *a, size_t len)
{
	char why[128];
	int rc = ofi_addr_check(fmt, a, len, why, sizeof(why));
	if (rc)
		CHECK(why[0] != '\0'); /* a refusal always says why */
	return rc;
}

static int test_sockaddr(void)
{
	struct sockaddr_in in4;
	memset(&in4, 0, sizeof(in4));
	in4.sin_family = AF_INET;
	in4.sin_port = htons(4242);
	inet_pton(AF_INET, "127.0.0.1", &in4.sin_addr);
	struct sockaddr_in6 in6;
	memset(&in6, 0, sizeof(in6));
	in6.sin6_family = AF_INET6;
	in6.sin6_addr = in6addr_loopback;

	CHECK_EQ(check(FI_SOCKADDR_IN, &in4, sizeof(in4)), 0);
	CHECK_EQ(check(FI_SOCKADDR_IN6, &in6, sizeof(in6)), 0);
	CHECK_EQ(check(FI_SOCKADDR, &in4, sizeof(in4)), 0);
	CHECK_EQ(check(FI_SOCKADDR, &in6, sizeof(in6)), 0);
	/* wrong family for the format, wrong length, garbage family */
	CHECK_EQ(check(FI_SOCKADDR_IN, &in6, sizeof(in6)), -FI_EINVAL);
	CHECK_EQ(check(FI_SOCKADDR_IN6, &in4, sizeof(in4)), -FI_EINVAL);
	CHECK_EQ(check(FI_SOCKADDR_IN, &in4, sizeof(in4) - 1), -FI_EINVAL);
	CHECK_EQ(check(FI_SOCKADDR_IN, &in4, 1), -FI_EINVAL);
	unsigned char junk[OFI_ADDR_MAX];
	memset(junk, 0xa5, sizeof(junk));
	CHECK_EQ(check(FI_SOCKADDR_IN, junk, sizeof(struct sockaddr_in)), -FI_EINVAL);
	CHECK_EQ(check(FI_SOCKADDR, junk, 16), -FI_EINVAL);
	/* an unaligned copy of a good address is still good */
	unsigned char shifted[sizeof(in4) + 1];
	memcpy(shifted + 1, &in4, sizeof(in4));
	CHECK_EQ(check(FI_SOCKADDR_IN, shifted + 1, sizeof(in4)), 0);
	return 0;
}

static int test_string(void)
{
	static const char good[] = "fi_shm://12345:0:3";
	CHECK_EQ(check(FI_ADDR_STR, good, sizeof(good)), 0);
	CHECK_EQ(check(FI_ADDR_STR, good, sizeof(good) + 0), 0);
	/* unterminated within the bytes given: fi_av_insert would read past them */
	CHECK_EQ(check(FI_ADDR_STR, good, strlen(good)), -FI_EINVAL);
	CHECK_EQ(check(FI_ADDR_STR, "", 1), -FI_EINVAL);
	static const char ctl[] = "fi_shm://1\n2";
	CHECK_EQ(check(FI_ADDR_STR, ctl, sizeof(ctl)), -FI_EINVAL);
	unsigned char junk[40];
	memset(junk, 0xff, sizeof(junk));
	junk[39] = 0;
	CHECK_EQ(check(FI_ADDR_STR, junk, sizeof(junk)), -FI_EINVAL);
	return 0;
}

static int test_lengths(void)
{
	unsigned char a[OFI_ADDR_MAX + 1];
	memset(a, 1, sizeof(a));
	/* provider-specific formats: any length up to the handle's room */
	CHECK_EQ(check(FI_ADDR_EFA, a, 32), 0);
	CHECK_EQ(check(FI_ADDR_EFA, a, OFI_ADDR_MAX), 0);
	CHECK_EQ(check(FI_ADDR_EFA, a, OFI_ADDR_MAX + 1), -FI_EINVAL);
	CHECK_EQ(check(FI_ADDR_EFA, a, 0), -FI_EINVAL);
	CHECK_EQ(check(FI_SOCKADDR_IN, NULL, 16), -FI_EINVAL);
	return 0;
}

static const struct unit_test tests[] = {
	TEST_ENTRY(test_sockaddr, "socket addresses: family and length of the domain's format"),
	TEST_ENTRY(test_string, "string addresses: terminated, printable, not empty"),
	TEST_ENTRY(test_lengths, "other formats: 1..OFI_ADDR_MAX bytes"),
};

int main(int argc, char **argv)
{
	return unit_main(tests, argc, argv);
}
