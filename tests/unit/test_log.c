/*
 * test_log.c - the rate limit on WARNs about what other processes send.
 */
#include "log/log.h"
#include "unit.h"

static int test_ratelimit(void)
{
	struct log_ratelimit rl = {0, 0};
	unsigned held = 99;
	unsigned long long t = 5ULL * LOG_RATELIMIT_NS;
	CHECK(log_ratelimit_take(&rl, t, &held)); /* the first one is logged */
	CHECK_EQ(held, 0);
	for (int i = 0; i < 100; i++) /* a burst within the second: held back */
		CHECK(!log_ratelimit_take(&rl, t + (unsigned long long)i * 1000, &held));
	CHECK(!log_ratelimit_take(&rl, t + LOG_RATELIMIT_NS - 1, &held));
	/* a second later one is logged again, saying how many were held back */
	CHECK(log_ratelimit_take(&rl, t + LOG_RATELIMIT_NS, &held));
	CHECK_EQ(held, 101);
	CHECK(!log_ratelimit_take(&rl, t + LOG_RATELIMIT_NS + 1, &held));
	CHECK(log_ratelimit_take(&rl, t + 10 * LOG_RATELIMIT_NS, &held));
	CHECK_EQ(held, 1);
	return 0;
}

static int test_ratelimit_macro(void)
{
	/* the macro compiles with and without arguments and never crashes */
	for (int i = 0; i < 3; i++) {
		LOG_WARN_LIMITED(NCCL_NET, "test_log: rate-limited line %d", i);
		LOG_WARN_LIMITED(NCCL_NET, "test_log: rate-limited line without arguments");
	}
	return 0;
}

static const struct unit_test tests[] = {
	TEST_ENTRY(test_ratelimit, "one WARN a second per site, the next says how many were held"),
	TEST_ENTRY(test_ratelimit_macro, "LOG_WARN_LIMITED with and without arguments"),
};

int main(int argc, char **argv)
{
	return unit_main(tests, argc, argv);
}
