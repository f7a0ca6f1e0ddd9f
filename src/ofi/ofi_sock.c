/*
 * ofi_sock.c - a per-peer reset for providers that move data over TCP sockets
 * (native tcp, rxm over tcp). libfabric cannot withdraw a send or RMA write
 * it has started to one peer: fi_cancel leaves them, and fi_av_remove leaves
 * native tcp's connection up (rxm tears it down only with the process-wide
 * FI_AV_REMOVE_CLEANUP, which then frees what unexpected messages point at).
 * A close whose peer stopped taking data would otherwise return with the
 * provider still holding NCCL's buffer, and once NCCL frees it the provider
 * fails the write part way through its message: the stream goes out of step.
 *
 * The kernel can end such a connection cleanly: TCP_USER_TIMEOUT aborts a
 * socket whose data stays unacknowledged, or unsent behind a zero window,
 * that long, and resets the peer. The provider then sees the error it sees
 * when a peer dies, fails everything queued on that connection, and connects
 * again when next used. The sockets are found under /proc/self/fd: those
 * with bytes waiting to leave (SIOCOUTQ) that either lead to the peer's
 * endpoint address or were accepted on ours from the peer's host. Arming
 * one never hurts a connection that moves: the timer fires only while
 * nothing is acknowledged. A peer that stopped before asking for our data
 * (a rendezvous) leaves nothing unacknowledged: then the connection to its
 * endpoint address, which can be no one else's, is shut down
 * (ofi_sock_shut). Closes in several threads may arm one socket:
 * the process keeps one table of armed sockets, and the last disarm puts
 * back the value the socket had before the first.
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <linux/sockios.h>

#include "ofi/ofi.h"

/* An endpoint name of FI_SOCKADDR_IN or _IN6 as a socket address, or false. */
static bool name_to_sa(const void *name, size_t len, struct sockaddr_storage *sa)
{
	memset(sa, 0, sizeof(*sa));
	if (len >= sizeof(struct sockaddr_in6) &&
	    ((const struct sockaddr *)name)->sa_family == AF_INET6) {
		memcpy(sa, name, sizeof(struct sockaddr_in6));
		return true;
	}
	if (len >= sizeof(struct sockaddr_in) &&
	    ((const struct sockaddr *)name)->sa_family == AF_INET) {
		memcpy(sa, name, sizeof(struct sockaddr_in));
		return true;
	}
	return false;
}

/* Same host (and port, when with_port). */
static bool sa_equal(const struct sockaddr_storage *a, const struct sockaddr_storage *b,
		     bool with_port)
{
	if (a->ss_family != b->ss_family)
		return false;
	if (a->ss_family == AF_INET) {
		const struct sockaddr_in *x = (const void *)a, *y = (const void *)b;
		return x->sin_addr.s_addr == y->sin_addr.s_addr &&
		       (!with_port || x->sin_port == y->sin_port);
	}
	const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)b;
	return !memcmp(&x->sin6_addr, &y->sin6_addr, sizeof(x->sin6_addr)) &&
	       (!with_port || x->sin6_port == y->sin6_port);
}

/* A connected TCP socket of this process, as the walk sees it. */
struct sock_view {
	int fd;
	ino_t ino;
	struct sockaddr_storage local, remote;
};

/* Calls visit on each connected stream socket under /proc/self/fd until it
 * returns false or the record is full. */
static int sock_walk(struct ofi_sock_armed *armed, bool (*visit)(const struct sock_view *v,
								 void *arg),
		     void *arg)
{
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return -errno;
	int dfd = dirfd(d);
	struct dirent *e;
	while ((e = readdir(d)) && armed->n < OFI_SOCK_ARM_MAX) {
		char *end;
		long fd = strtol(e->d_name, &end, 10);
		struct stat st;
		struct sock_view v = {.fd = (int)fd};
		int type = 0;
		socklen_t tl = sizeof(type), ll = sizeof(v.local), rl = sizeof(v.remote);
		if (*end || end == e->d_name || fd == dfd || fd < 0 || fstat(v.fd, &st) ||
		    !S_ISSOCK(st.st_mode) || getsockopt(v.fd, SOL_SOCKET, SO_TYPE, &type, &tl) ||
		    type != SOCK_STREAM || getsockname(v.fd, (struct sockaddr *)&v.local, &ll) ||
		    getpeername(v.fd, (struct sockaddr *)&v.remote, &rl))
			continue;
		v.ino = st.st_ino;
		if (!visit(&v, arg))
			break;
	}
	closedir(d);
	return 0;
}

/* The record's entry for the socket, or -1. */
static int record_find(const struct ofi_sock_armed *armed, int fd, ino_t ino)
{
	for (int i = 0; i < armed->n; i++)
		if (armed->s[i].fd == fd && armed->s[i].ino == ino)
			return i;
	return -1;
}

static void record_add(struct ofi_sock_armed *armed, const struct sock_view *v, bool table,
		       bool shut)
{
	armed->s[armed->n].fd = v->fd;
	armed->s[armed->n].ino = v->ino;
	armed->s[armed->n].table = table;
	armed->s[armed->n].shut = shut;
	armed->n++;
}

/* Every socket armed in this process: closes in several threads may arm
 * the same one, and only the last to let go puts its old value back. */
#define SOCK_TABLE 64
static struct {
	int fd;
	ino_t ino;
	int orig;  /* TCP_USER_TIMEOUT before the first arm */
	int refs;
} sock_table[SOCK_TABLE];
static pthread_mutex_t sock_lock = PTHREAD_MUTEX_INITIALIZER;

static bool fd_is(int fd, ino_t ino)
{
	struct stat st;
	return !fstat(fd, &st) && st.st_ino == ino;
}

/* Arms fd (inode ino) under sock_lock; true when it is armed and counted. */
static bool arm_locked(int fd, ino_t ino, unsigned timeout_ms)
{
	int slot = -1, free_slot = -1;
	for (int i = 0; i < SOCK_TABLE; i++) {
		if (sock_table[i].refs && sock_table[i].fd == fd && sock_table[i].ino == ino)
			slot = i;
		else if (!sock_table[i].refs && free_slot < 0)
			free_slot = i;
	}
	int orig = 0;
	if (slot < 0) {
		socklen_t len = sizeof(orig);
		if (free_slot < 0 || getsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &orig, &len))
			return false;
	}
	if (setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &timeout_ms, sizeof(timeout_ms)))
		return false;
	/* the provider may have closed it meanwhile and the number been reused:
	 * then the option goes back at once */
	if (!fd_is(fd, ino)) {
		if (slot < 0)
			(void)setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &orig, sizeof(orig));
		return false;
	}
	if (slot < 0) {
		slot = free_slot;
		sock_table[slot].fd = fd;
		sock_table[slot].ino = ino;
		sock_table[slot].orig = orig;
	}
	sock_table[slot].refs++;
	return true;
}

static void disarm_locked(int fd, ino_t ino)
{
	for (int i = 0; i < SOCK_TABLE; i++) {
		if (!sock_table[i].refs || sock_table[i].fd != fd || sock_table[i].ino != ino)
			continue;
		/* gone (the reset closed it) or another file by now: nothing to undo */
		if (--sock_table[i].refs == 0 && fd_is(fd, ino))
			(void)setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &sock_table[i].orig,
					 sizeof(sock_table[i].orig));
		return;
	}
}

struct arm_walk {
	struct sockaddr_storage self, peer;
	unsigned timeout_ms;
	struct ofi_sock_armed *armed;
};

/* Bytes waiting to leave, on ours to the peer's endpoint or the peer's
 * accepted on our endpoint: armed (again, with the new timeout, where this
 * record holds it already). */
static bool arm_visit(const struct sock_view *v, void *arg)
{
	struct arm_walk *w = arg;
	int outq = 0;
	if (v->local.ss_family != w->peer.ss_family || ioctl(v->fd, SIOCOUTQ, &outq) || outq <= 0 ||
	    !(sa_equal(&v->remote, &w->peer, true) ||
	      (sa_equal(&v->local, &w->self, true) && sa_equal(&v->remote, &w->peer, false))))
		return true;
	if (record_find(w->armed, v->fd, v->ino) >= 0)
		(void)setsockopt(v->fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &w->timeout_ms,
				 sizeof(w->timeout_ms));
	else if (arm_locked(v->fd, v->ino, w->timeout_ms))
		record_add(w->armed, v, true, false);
	return true;
}

int ofi_sock_arm(const void *self_name, size_t self_len, const void *peer_name,
		 size_t peer_len, unsigned timeout_ms, struct ofi_sock_armed *armed)
{
	struct arm_walk w = {.timeout_ms = timeout_ms, .armed = armed};
	if (!name_to_sa(self_name, self_len, &w.self) || !name_to_sa(peer_name, peer_len, &w.peer))
		return -FI_EINVAL;
	pthread_mutex_lock(&sock_lock);
	int rc = sock_walk(armed, arm_visit, &w);
	pthread_mutex_unlock(&sock_lock);
	return rc < 0 ? rc : armed->n;
}

void ofi_sock_disarm(struct ofi_sock_armed *armed)
{
	pthread_mutex_lock(&sock_lock);
	for (int i = 0; i < armed->n; i++)
		if (armed->s[i].table)
			disarm_locked(armed->s[i].fd, armed->s[i].ino);
	pthread_mutex_unlock(&sock_lock);
	armed->n = 0;
}

/* Only the connection to the peer's own endpoint address: one accepted
 * from its host could be another process's. */
static bool shut_visit(const struct sock_view *v, void *arg)
{
	struct arm_walk *w = arg;
	if (!sa_equal(&v->remote, &w->peer, true) || shutdown(v->fd, SHUT_RDWR))
		return true;
	int i = record_find(w->armed, v->fd, v->ino);
	if (i >= 0)
		w->armed->s[i].shut = true;
	else
		record_add(w->armed, v, false, true);
	return true;
}

int ofi_sock_shut(const void *peer_name, size_t peer_len, struct ofi_sock_armed *armed)
{
	struct arm_walk w = {.armed = armed};
	if (!name_to_sa(peer_name, peer_len, &w.peer))
		return -FI_EINVAL;
	int rc = sock_walk(armed, shut_visit, &w);
	return rc < 0 ? rc : armed->n;
}

int ofi_sock_live(const struct ofi_sock_armed *armed)
{
	int n = 0;
	for (int i = 0; i < armed->n; i++) {
		if (armed->s[i].shut)
			continue;
		struct sockaddr_storage remote;
		socklen_t len = sizeof(remote);
		/* reset by the kernel: no longer connected, though the provider
		 * may not have closed it yet */
		n += fd_is(armed->s[i].fd, armed->s[i].ino) &&
		     !getpeername(armed->s[i].fd, (struct sockaddr *)&remote, &len);
	}
	return n;
}

/* The endpoint a TCP provider's peer listens on lives as long as the peer's
 * endpoint: a refused connection says the process behind it has gone, where
 * the provider itself may only answer -FI_EAGAIN while it tries again. An
 * accepted probe is closed at once; the provider at the other end drops a
 * connection that never sends its request. */
int ofi_sock_refused(const void *peer_name, size_t peer_len, unsigned wait_ms)
{
	struct sockaddr_storage sa;
	if (!name_to_sa(peer_name, peer_len, &sa))
		return -FI_EINVAL;
	socklen_t salen = sa.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) :
						     sizeof(struct sockaddr_in);
	int fd = socket(sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	int refused = 0;
	if (connect(fd, (struct sockaddr *)&sa, salen) != 0) {
		if (errno == ECONNREFUSED) {
			refused = 1;
		} else if (errno == EINPROGRESS) {
			struct pollfd p = { .fd = fd, .events = POLLOUT };
			int err = 0;
			socklen_t elen = sizeof(err);
			if (poll(&p, 1, (int)wait_ms) == 1 &&
			    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) == 0)
				refused = err == ECONNREFUSED;
		}
	}
	close(fd);
	return refused;
}
