/*
 * unit.h - a tiny table-driven test runner. Each test file defines
 *   static const struct unit_test tests[] = { TEST_ENTRY(fn, "what"), ... };
 * and calls unit_main(). Prints one line per test and "N passed, N failed".
 */
#ifndef UNIT_H
#define UNIT_H

#include <stdio.h>
#include <string.h>

struct unit_test {
	int (*fn)(void);
	const char *name;
	const char *what;
};
#define TEST_ENTRY(fn, what) { fn, #fn, what }

extern int unit_failures; /* CHECK failures within the running test */

#define CHECK(cond)                                                                     \
	do {                                                                            \
		if (!(cond)) {                                                          \
			fprintf(stderr, "  %s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); \
			unit_failures++;                                                \
		}                                                                       \
	} while (0)
#define CHECK_EQ(a, b)                                                                   \
	do {                                                                             \
		long long _a = (long long)(a), _b = (long long)(b);                      \
		if (_a != _b) {                                                          \
			fprintf(stderr, "  %s:%d: %s == %lld, expected %s == %lld\n", __FILE__, \
				__LINE__, #a, _a, #b, _b);                               \
			unit_failures++;                                                 \
		}                                                                        \
	} while (0)
#define CHECK_STR_CONTAINS(s, sub)                                                        \
	do {                                                                              \
		if (!strstr((s), (sub))) {                                                \
			fprintf(stderr, "  %s:%d: \"%s\" does not contain \"%s\"\n", __FILE__,    \
				__LINE__, (s), (sub));                                    \
			unit_failures++;                                                  \
		}                                                                         \
	} while (0)

int unit_run(const struct unit_test *tests, int n, int argc, char **argv);
/* CLOCK_MONOTONIC in seconds, for the tests' deadlines. */
double unit_now_s(void);
#define unit_main(tests, argc, argv) unit_run(tests, (int)(sizeof(tests) / sizeof(tests[0])), argc, argv)

#endif
