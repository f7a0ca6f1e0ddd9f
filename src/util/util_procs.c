/*
 * util_procs.c - how many processes on this host use the plugin, for the
 * rails that fit them (policy_rails). Each process holds an exclusive lock
 * (flock) on a file of its own in one folder per user; a count takes every
 * file whose lock it cannot get. A lock ends with its process however that
 * ends, so a crashed process is never counted: its file is removed by the
 * next count that finds it unlocked.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/util.h"

static int self_fd = -1;
static pid_t self_pid;
static char self_name[64];

void util_procs_dir(char *out, size_t len)
{
	struct stat st;
	const char *base = stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) ? "/dev/shm" : "/tmp";
	snprintf(out, len, "%s/nccl-fabric-procs-%u", base, (unsigned)getuid());
}

int util_procs_join(const char *dir)
{
	if (self_fd >= 0 && self_pid == getpid())
		return 0;
	if (self_fd >= 0) { /* a forked child: the lock is its parent's */
		close(self_fd);
		self_fd = -1;
	}
	if (mkdir(dir, 0700) && errno != EEXIST)
		return -errno;
	struct stat st;
	if (lstat(dir, &st) || !S_ISDIR(st.st_mode) || st.st_uid != getuid())
		return -EPERM; /* not ours: counting through it would trust a stranger */
	/* created under a hidden name and locked before it is visible: a count
	 * never sees it unlocked and takes it for a dead process's */
	char tmp[PATH_MAX], fin[PATH_MAX];
	snprintf(self_name, sizeof(self_name), "%ld.%llx", (long)getpid(),
		 (unsigned long long)util_now_ns());
	snprintf(tmp, sizeof(tmp), "%s/.%s", dir, self_name);
	snprintf(fin, sizeof(fin), "%s/%s", dir, self_name);
	int fd = open(tmp, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (flock(fd, LOCK_EX | LOCK_NB) || rename(tmp, fin)) {
		int err = errno;
		unlink(tmp);
		close(fd);
		return -err;
	}
	self_fd = fd; /* held for the process's life */
	self_pid = getpid();
	return 0;
}

int util_procs_count(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return self_fd >= 0 ? 1 : 0;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue; /* ., .., and files not yet locked */
		if (self_fd >= 0 && self_pid == getpid() && !strcmp(e->d_name, self_name)) {
			n++;
			continue;
		}
		int fd = openat(dirfd(d), e->d_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0)
			continue;
		if (flock(fd, LOCK_EX | LOCK_NB) == 0)
			unlinkat(dirfd(d), e->d_name, 0); /* its process is gone */
		else if (errno == EWOULDBLOCK)
			n++;
		close(fd);
	}
	closedir(d);
	return n;
}
