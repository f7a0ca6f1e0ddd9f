/*
 * test_shm_stale.c - a dead process's shm regions under /dev/shm whose pid
 * this process now has (a killed or _exit'ed rank leaves them; pids wrap at
 * pid_max) make shm fail fi_enable with -FI_EBUSY. The endpoint removes the
 * regions of its own pid that are older than the process and enables again;
 * a region of another pid, or a newer one, is left alone. Over shm only
 * (skipped elsewhere).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ofi/ofi.h"
#include "unit.h"
#include "unit_pair.h"

/* A plain file under /dev/shm, its times an hour back when old. */
static int make(const char *name, int old)
{
	char path[128];
	snprintf(path, sizeof(path), "/dev/shm/%s", name);
	int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0600);
	if (fd < 0)
		return -1;
	if (ftruncate(fd, 4096))
		return close(fd), -1;
	if (old) {
		struct timespec t[2];
		clock_gettime(CLOCK_REALTIME, &t[0]);
		t[0].tv_sec -= 3600;
		t[1] = t[0];
		futimens(fd, t);
	}
	close(fd);
	return 0;
}

/* Still the dead process's file (ours are regions of megabytes). */
static int is_fake(const char *name)
{
	char path[128];
	struct stat st;
	snprintf(path, sizeof(path), "/dev/shm/%s", name);
	return stat(path, &st) == 0 && st.st_size == 4096;
}

static char stale[4][64];

static int test_enable_after_stale(void)
{
	/* the regions this process's endpoints want were left by a dead one */
	struct unit_pair p;
	int rc = unit_pair_open(&p);
	if (rc == 77)
		return 77;
	CHECK_EQ(rc, 0);
	/* gone, or this process's own regions in their place */
	CHECK(!is_fake(stale[0]) && !is_fake(stale[1]));
	unit_pair_close(&p);
	return 0;
}

static int test_others_left(void)
{
	/* another pid's old region and our own newer one stay */
	CHECK(is_fake(stale[2]) && is_fake(stale[3]));
	CHECK_EQ(ofi_shm_unlink_stale_own(), 0);
	CHECK(is_fake(stale[2]) && is_fake(stale[3]));
	return 0;
}

int main(int argc, char **argv)
{
	const char *prov = getenv("NCCL_FABRIC_PROVIDER");
	if (!prov || strcmp(prov, "shm")) {
		printf("SKIP: shm regions only (NCCL_FABRIC_PROVIDER=shm)\n");
		return 77;
	}
	int pid = (int)getpid(), uid = (int)getuid();
	snprintf(stale[0], sizeof(stale[0]), "%d:%d:0", pid, uid);
	snprintf(stale[1], sizeof(stale[1]), "%d:%d:1", pid, uid);
	snprintf(stale[2], sizeof(stale[2]), "%d:%d:7", pid == 1 ? 2 : 1, uid);
	snprintf(stale[3], sizeof(stale[3]), "%d:%d:9", pid, uid);
	if (make(stale[0], 1) || make(stale[1], 1) || make(stale[2], 1)) {
		printf("SKIP: cannot write under /dev/shm\n");
		return 77;
	}
	static const struct unit_test tests[] = {
		TEST_ENTRY(test_enable_after_stale, "endpoints enable over a dead process's regions of this pid"),
		TEST_ENTRY(test_others_left, "another pid's region and a newer one of ours are left"),
	};
	int rc = unit_run(tests, 1, argc, argv);
	if (!rc) {
		if (make(stale[3], 0))
			return 1;
		rc = unit_run(tests + 1, 1, argc, argv);
	}
	for (int i = 0; i < 4; i++) {
		char path[128];
		snprintf(path, sizeof(path), "/dev/shm/%s", stale[i]);
		unlink(path);
	}
	return rc;
}
