#include "unit.h"

#include <stdlib.h>
#include <time.h>

int unit_failures;

int unit_run(const struct unit_test *tests, int n, int argc, char **argv)
{
	int passed = 0, failed = 0;
	const char *only = argc > 1 ? argv[1] : NULL;
	for (int i = 0; i < n; i++) {
		if (only && !strstr(tests[i].name, only))
			continue;
		unit_failures = 0;
		int rc = tests[i].fn();
		if (rc == 0 && unit_failures == 0) {
			printf("PASS  %-36s %s\n", tests[i].name, tests[i].what);
			passed++;
		} else {
			printf("FAIL  %-36s %s\n", tests[i].name, tests[i].what);
			failed++;
		}
		fflush(stdout);
	}
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}

double unit_now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}
