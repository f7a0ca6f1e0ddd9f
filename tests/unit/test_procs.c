/*
 * test_procs.c - the count of plugin processes on this host (util_procs.c),
 * which automatic rails divide the CPUs by: live processes are counted, one
 * killed with SIGKILL is not (its file goes with the next count), and a
 * folder that is not the user's own is refused.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <dirent.h>

#include "unit.h"
#include "util/util.h"

static char dir[128];

/* A child that joins and waits to be killed (or to be told to exit). */
static pid_t child(int *ready_fd)
{
	int p[2];
	if (pipe(p))
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		close(p[0]);
		char ok = util_procs_join(dir) == 0 ? 'y' : 'n';
		(void)!write(p[1], &ok, 1);
		pause();
		_exit(0);
	}
	close(p[1]);
	*ready_fd = p[0];
	return pid;
}

static int files(void)
{
	int n = 0;
	DIR *d = opendir(dir);
	struct dirent *e;
	while (d && (e = readdir(d)))
		n += e->d_name[0] != '.';
	if (d)
		closedir(d);
	return n;
}

static int test_count(void)
{
	snprintf(dir, sizeof(dir), "/tmp/nccl-fabric-test-procs-%ld", (long)getpid());
	CHECK_EQ(util_procs_count(dir), 0); /* no folder yet */
	pid_t kids[3];
	for (int i = 0; i < 3; i++) {
		int fd = -1;
		kids[i] = child(&fd);
		CHECK(kids[i] > 0);
		char ok = 0;
		CHECK_EQ(read(fd, &ok, 1), 1);
		CHECK_EQ(ok, 'y');
		close(fd);
	}
	CHECK_EQ(util_procs_count(dir), 3);
	CHECK_EQ(util_procs_join(dir), 0);
	CHECK_EQ(util_procs_join(dir), 0); /* once per process */
	CHECK_EQ(util_procs_count(dir), 4);
	/* a crash leaves its file, never its lock */
	kill(kids[0], SIGKILL);
	waitpid(kids[0], NULL, 0);
	CHECK_EQ(files(), 4);
	CHECK_EQ(util_procs_count(dir), 3);
	CHECK_EQ(files(), 3); /* removed by that count */
	kill(kids[1], SIGTERM);
	waitpid(kids[1], NULL, 0);
	CHECK_EQ(util_procs_count(dir), 2);
	kill(kids[2], SIGKILL);
	waitpid(kids[2], NULL, 0);
	CHECK_EQ(util_procs_count(dir), 1);
	return 0;
}

static int test_foreign_folder(void)
{
	/* a plain file where the folder should be: refused */
	char path[160];
	snprintf(path, sizeof(path), "/tmp/nccl-fabric-test-procs-file-%ld", (long)getpid());
	FILE *f = fopen(path, "w");
	CHECK(f != NULL);
	fclose(f);
	/* (in a child: this process already joined test_count's folder) */
	pid_t pid = fork();
	if (pid == 0) {
		int rc = util_procs_join(path);
		_exit(rc == 0 ? 1 : 0);
	}
	int st = 0;
	waitpid(pid, &st, 0);
	unlink(path);
	CHECK(WIFEXITED(st));
	CHECK_EQ(WEXITSTATUS(st), 0);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct unit_test tests[] = {
		TEST_ENTRY(test_count, "live processes counted; a killed one is not, its file removed"),
		TEST_ENTRY(test_foreign_folder, "a folder that is not a folder of ours is refused"),
	};
	int rc = unit_run(tests, 2, argc, argv);
	char cmd[200];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	(void)!system(cmd);
	return rc;
}
