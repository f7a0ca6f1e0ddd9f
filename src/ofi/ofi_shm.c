/*
 * ofi_shm.c - shm peers: their address is the name of a region under /dev/shm
 * ("fi_shm://<pid>:<uid>:<index>"), which libfabric maps and trusts: it takes
 * a spinlock inside the region on every post and reads the region's sizes from
 * its header (at fi_av_insert on 1.17, at the first send on 2.x). So a name
 * that reaches another program's file, a leftover of another libfabric
 * version, or a process that died holding the lock, crashes or hangs the
 * process that posts to it. Before an address is inserted, it must name a live
 * process's region of this user with the same layout as our own (ofi_shm_check);
 * before a silent peer is posted to, its process must still be the one that
 * was checked (ofi_shm_gone). Reads only the file's header with pread and
 * /proc: nothing of the peer's region is mapped here.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ofi/ofi.h"

#define SHM_PREFIX "fi_shm://"
/* The header bytes compared with our own region's: the version byte (offset
 * 0 on every version) and the owner's pid (offset 4, an int). */
#define SHM_HDR_VERSION 0
#define SHM_HDR_PID 4

/* Parses "fi_shm://<pid>:<uid>:<index>\0..." into the file name under
 * /dev/shm (the part after the prefix), the pid and the uid. */
static int shm_parse(const void *addr, size_t len, char *file, size_t file_len, pid_t *pid,
		     uid_t *uid, char *why, size_t n)
{
	const char *s = addr;
	const char *nul = memchr(s, '\0', len);
	size_t plen = sizeof(SHM_PREFIX) - 1;
	if (!nul || (size_t)(nul - s) <= plen || strncmp(s, SHM_PREFIX, plen)) {
		snprintf(why, n, "not an shm address (\"%s<pid>:<uid>:<index>\")", SHM_PREFIX);
		return -FI_EINVAL;
	}
	const char *p = s + plen;
	unsigned long v[3];
	for (int i = 0; i < 3; i++) {
		if (!isdigit((unsigned char)*p)) {
			snprintf(why, n, "shm address \"%.64s\" is not %s<pid>:<uid>:<index>", s,
				 SHM_PREFIX);
			return -FI_EINVAL;
		}
		char *end;
		errno = 0;
		v[i] = strtoul(p, &end, 10);
		if (errno || end - p > 10 || *end != (i < 2 ? ':' : '\0')) {
			snprintf(why, n, "shm address \"%.64s\" is not %s<pid>:<uid>:<index>", s,
				 SHM_PREFIX);
			return -FI_EINVAL;
		}
		p = end + (i < 2);
	}
	if (v[0] == 0 || v[0] > 0x7fffffffUL) {
		snprintf(why, n, "shm address names pid %lu", v[0]);
		return -FI_EINVAL;
	}
	*pid = (pid_t)v[0];
	*uid = (uid_t)v[1];
	snprintf(file, file_len, "/dev/shm/%s", s + plen);
	return 0;
}

/* The start time of process pid (field 22 of /proc/<pid>/stat), which tells
 * a process from a later one that got its pid; 0 when it is gone or a zombie. */
static uint64_t proc_start(pid_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t got = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (got <= 0)
		return 0;
	buf[got] = '\0';
	const char *p = strrchr(buf, ')'); /* the command name may hold spaces */
	if (!p || p[1] != ' ')
		return 0;
	char state = p[2];
	if (state == 'Z' || state == 'X' || state == 'x')
		return 0;
	/* fields 3.. follow: state is field 3, starttime field 22 */
	p += 2;
	for (int field = 3; field < 22; field++) {
		p = strchr(p, ' ');
		if (!p)
			return 0;
		p++;
	}
	return strtoull(p, NULL, 10);
}

/* Reads the header bytes we compare, and the file's facts. */
static int shm_header(const char *file, struct stat *st, uint8_t *version, int32_t *pid, char *why,
		      size_t n)
{
	int fd = open(file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		snprintf(why, n, "%s: %s", file, strerror(errno));
		return errno == ENOENT ? -FI_ENOENT : -FI_EACCES;
	}
	uint8_t hdr[SHM_HDR_PID + sizeof(int32_t)];
	int rc = 0;
	if (fstat(fd, st) || !S_ISREG(st->st_mode)) {
		snprintf(why, n, "%s is not a regular file", file);
		rc = -FI_EINVAL;
	} else if (pread(fd, hdr, sizeof(hdr), 0) != (ssize_t)sizeof(hdr)) {
		snprintf(why, n, "%s: its header cannot be read", file);
		rc = -FI_EINVAL;
	} else {
		*version = hdr[SHM_HDR_VERSION];
		memcpy(pid, hdr + SHM_HDR_PID, sizeof(*pid));
	}
	close(fd);
	return rc;
}

int ofi_shm_self_init(struct ofi_shm_self *self, const void *name, size_t len)
{
	char file[320], why[160];
	pid_t pid;
	uid_t uid;
	struct stat st;
	int32_t hpid;
	memset(self, 0, sizeof(*self));
	if (shm_parse(name, len, file, sizeof(file), &pid, &uid, why, sizeof(why)) ||
	    shm_header(file, &st, &self->version, &hpid, why, sizeof(why)))
		return -FI_EINVAL;
	/* the layout we know: our own header names our pid where we look for it */
	if (hpid != (int32_t)getpid())
		return -FI_EINVAL;
	self->size = st.st_size;
	self->valid = true;
	return 0;
}

int ofi_shm_check(const struct ofi_shm_self *self, const void *addr, size_t len, pid_t *pid_out,
		  uint64_t *start_out, char *why, size_t n)
{
	char file[320];
	pid_t pid;
	uid_t uid;
	int rc = shm_parse(addr, len, file, sizeof(file), &pid, &uid, why, n);
	if (rc)
		return rc;
	if (uid != getuid()) {
		snprintf(why, n, "shm address of user %u, not this process's user %u", (unsigned)uid,
			 (unsigned)getuid());
		return -FI_EACCES;
	}
	uint64_t start = proc_start(pid);
	if (!start) {
		snprintf(why, n, "process %d behind the shm address has exited", (int)pid);
		return -FI_ECONNREFUSED;
	}
	struct stat st;
	uint8_t version;
	int32_t hpid;
	rc = shm_header(file, &st, &version, &hpid, why, n);
	if (rc)
		return rc == -FI_ENOENT ? -FI_ECONNREFUSED : rc;
	if (st.st_uid != geteuid() || (st.st_mode & 077)) {
		snprintf(why, n, "%s belongs to user %u with mode %03o, not to this user with 0600",
			 file, (unsigned)st.st_uid, (unsigned)(st.st_mode & 0777));
		return -FI_EACCES;
	}
	if (self->valid && (version != self->version || st.st_size != self->size)) {
		snprintf(why, n, "%s is a region of another layout (version %u, %lld bytes; ours %u, "
			 "%lld bytes): another libfabric or other FI_SHM_* sizes", file, version,
			 (long long)st.st_size, self->version, (long long)self->size);
		return -FI_EINVAL;
	}
	if (hpid != (int32_t)pid) {
		snprintf(why, n, "%s is owned by pid %d, not by pid %d of its name", file, (int)hpid,
			 (int)pid);
		return -FI_ECONNREFUSED;
	}
	*pid_out = pid;
	*start_out = start;
	return 0;
}

bool ofi_shm_gone(pid_t pid, uint64_t start)
{
	return pid > 0 && proc_start(pid) != start;
}

int ofi_shm_unlink_stale_own(void)
{
	/* a region is named "<pid>:<uid>:<index>": one of our pid older than
	 * this process is a dead process's, left by an exit without cleanup */
	struct stat self;
	if (stat("/proc/self", &self))
		return 0;
	char prefix[32];
	int plen = snprintf(prefix, sizeof(prefix), "%d:", (int)getpid());
	DIR *d = opendir("/dev/shm");
	if (!d)
		return 0;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (strncmp(e->d_name, prefix, (size_t)plen))
			continue;
		struct stat st;
		if (fstatat(dirfd(d), e->d_name, &st, 0) || st.st_uid != getuid() ||
		    st.st_mtim.tv_sec > self.st_mtim.tv_sec ||
		    (st.st_mtim.tv_sec == self.st_mtim.tv_sec && st.st_mtim.tv_nsec >= self.st_mtim.tv_nsec))
			continue;
		n += unlinkat(dirfd(d), e->d_name, 0) == 0;
	}
	closedir(d);
	return n;
}

int ofi_enable(struct fid_ep *ep, bool shm_region, int *stale)
{
	int rc = fi_enable(ep);
	*stale = 0;
	/* shm refuses a region of the endpoint's name whose recorded owner
	 * lives, which is this process when a dead one of the same pid left it,
	 * and removes that region as it refuses: once more then succeeds */
	if (rc == -FI_EBUSY && shm_region) {
		*stale = ofi_shm_unlink_stale_own();
		rc = fi_enable(ep);
	}
	return rc;
}
