/*
 * check_proc.c - what a rank can see of itself: threads, loaded objects,
 * signal handlers; and a private network namespace for cases that send
 * garbage addresses (so nothing can leave loopback even if a plugin trusts a
 * corrupted handle).
 */
#include "check.h"

#include <dirent.h>
#include <fcntl.h>
#include <link.h>
#include <net/if.h>
#include <sched.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

int ck_thread_count(void)
{
	DIR *d = opendir("/proc/self/task");
	if (!d)
		return -1;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL)
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

void ck_thread_names(char *out, size_t len)
{
	out[0] = '\0';
	DIR *d = opendir("/proc/self/task");
	if (!d)
		return;
	size_t used = 0;
	struct dirent *e;
	pid_t self = getpid();
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.' || atoi(e->d_name) == self)
			continue;
		char path[300], comm[32] = "?";
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
		FILE *f = fopen(path, "r");
		if (f) {
			if (fgets(comm, sizeof(comm), f))
				comm[strcspn(comm, "\n")] = '\0';
			fclose(f);
		}
		int n = snprintf(out + used, len - used, "%s%s", used ? "," : "", comm);
		if (n < 0 || (size_t)n >= len - used)
			break;
		used += (size_t)n;
	}
	closedir(d);
}

static int ck_objs_cb(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	ck_objs_t *out = data;
	if (out->n >= CK_MAX_OBJS)
		return 1;
	uintptr_t lo = UINTPTR_MAX, hi = 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD)
			continue;
		uintptr_t a = (uintptr_t)info->dlpi_addr + ph->p_vaddr;
		if (a < lo)
			lo = a;
		if (a + ph->p_memsz > hi)
			hi = a + ph->p_memsz;
	}
	if (hi == 0)
		return 0;
	ck_obj_t *o = &out->obj[out->n++];
	snprintf(o->name, sizeof(o->name), "%s",
		 info->dlpi_name && info->dlpi_name[0] ? info->dlpi_name : "(main)");
	o->lo = lo;
	o->hi = hi;
	return 0;
}

void ck_objs_snapshot(ck_objs_t *out)
{
	out->n = 0;
	dl_iterate_phdr(ck_objs_cb, out);
}

static int ck_objs_find(const ck_objs_t *set, const ck_obj_t *o)
{
	for (int i = 0; i < set->n; i++)
		if (set->obj[i].lo == o->lo && !strcmp(set->obj[i].name, o->name))
			return i;
	return -1;
}

void ck_objs_new(const ck_objs_t *before, const ck_objs_t *now, ck_objs_t *out)
{
	for (int i = 0; i < now->n; i++) {
		const ck_obj_t *o = &now->obj[i];
		if (ck_objs_find(before, o) >= 0 || ck_objs_find(out, o) >= 0)
			continue;
		if (out->n < CK_MAX_OBJS)
			out->obj[out->n++] = *o;
	}
}

int ck_handlers_check(const ck_objs_t *gone, char *msg, size_t len)
{
	static const int sigs[] = {SIGSEGV, SIGBUS, SIGINT, SIGTERM};
	ck_objs_t *now = calloc(1, sizeof(*now));
	if (!now) {
		snprintf(msg, len, "out of memory");
		return -1;
	}
	ck_objs_snapshot(now);
	int ret = 0;
	for (size_t s = 0; s < sizeof(sigs) / sizeof(sigs[0]) && !ret; s++) {
		struct sigaction sa;
		if (sigaction(sigs[s], NULL, &sa))
			continue;
		uintptr_t h = (sa.sa_flags & SA_SIGINFO) ? (uintptr_t)sa.sa_sigaction
							 : (uintptr_t)sa.sa_handler;
		if (h == (uintptr_t)SIG_DFL || h == (uintptr_t)SIG_IGN)
			continue;
		for (int i = 0; i < gone->n; i++) {
			const ck_obj_t *o = &gone->obj[i];
			if (h < o->lo || h >= o->hi || ck_objs_find(now, o) >= 0)
				continue;
			snprintf(msg, len, "%s handler %#lx points into %s, which is no longer "
					   "loaded (a signal now jumps into unmapped code)",
				 strsignal(sigs[s]), (unsigned long)h, o->name);
			ret = -1;
			break;
		}
	}
	free(now);
	return ret;
}

/* ------------------------------------------------------------ network namespace */

static int ck_lo_up(void)
{
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -1;
	struct ifreq ifr;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	int ret = -1;
	if (!ioctl(s, SIOCGIFFLAGS, &ifr)) {
		ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
		ret = ioctl(s, SIOCSIFFLAGS, &ifr);
	}
	close(s);
	return ret;
}

int ck_netns_enter(ck_t *ck)
{
	fh_rank_t *r = ck->r;
	int orig = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	int32_t msg = -1, ok = 0, verdict = 0;
	ck->netns = 0;
	if (r->rank == 0) {
		if (orig >= 0 && !unshare(CLONE_NEWNET)) {
			if (!ck_lo_up())
				ok = 1;
			else if (setns(orig, CLONE_NEWNET))
				return fh_fail(r, "cannot return to the original network namespace");
		}
		msg = ok ? (int32_t)getpid() : -1;
		for (int p = 1; p < r->nranks; p++)
			if (fh_oob_send(r, p, &msg, sizeof(msg)))
				return FH_FAIL;
		verdict = ok;
		if (ok) {
			for (int p = 1; p < r->nranks; p++) {
				int32_t peer_ok = 0;
				if (fh_oob_recv(r, p, &peer_ok, sizeof(peer_ok)))
					return FH_FAIL;
				verdict &= peer_ok;
			}
			for (int p = 1; p < r->nranks; p++)
				if (fh_oob_send(r, p, &verdict, sizeof(verdict)))
					return FH_FAIL;
		}
	} else {
		if (fh_oob_recv(r, 0, &msg, sizeof(msg)))
			return FH_FAIL;
		if (msg > 0) {
			char path[64];
			snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)msg);
			int fd = open(path, O_RDONLY | O_CLOEXEC);
			ok = fd >= 0 && orig >= 0 && !setns(fd, CLONE_NEWNET);
			if (fd >= 0)
				close(fd);
			if (fh_oob_send(r, 0, &ok, sizeof(ok)) ||
			    fh_oob_recv(r, 0, &verdict, sizeof(verdict)))
				return FH_FAIL;
		}
	}
	/* All or nobody: ranks in different namespaces could not reach each other. */
	if (ok && !verdict && setns(orig, CLONE_NEWNET))
		return fh_fail(r, "cannot return to the original network namespace");
	if (orig >= 0)
		close(orig);
	ck->netns = verdict;
	return FH_OK;
}

int ck_ip(const char *fmt, ...)
{
	char args[256], cmd[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(args, sizeof(args), fmt, ap);
	va_end(ap);
	snprintf(cmd, sizeof(cmd), "ip %s >/dev/null 2>&1", args);
	return system(cmd) == 0 ? 0 : -1;
}

/* Rank 1 makes its namespace first and tells rank 0 its pid; rank 0 makes
 * its own and the veth pair with one end in each (the same name on both
 * sides, so one FI_TCP_IFACE serves both), and each side brings its end up. */
int ck_netns_pair(ck_t *ck)
{
	fh_rank_t *r = ck->r;
	int32_t pid = -1, ok = 0, peer_ok = 0;
	const char *step = "unshare(CLONE_NEWNET)";
	ck->netns = 0;
	if (r->rank == 1) {
		if (!unshare(CLONE_NEWNET))
			pid = (int32_t)getpid();
		if (fh_oob_send(r, 0, &pid, sizeof(pid)) || fh_oob_recv(r, 0, &peer_ok, sizeof(peer_ok)))
			return FH_FAIL;
		if (peer_ok) {
			step = "configuring the link's end";
			ok = !ck_ip("link set dev lo up") &&
			     !ck_ip("addr add 10.231.7.2/24 dev " CK_LINK_IFACE) &&
			     !ck_ip("link set dev " CK_LINK_IFACE " up");
		}
		if (fh_oob_send(r, 0, &ok, sizeof(ok)))
			return FH_FAIL;
		ok = ok && peer_ok;
	} else if (r->rank == 0) {
		if (fh_oob_recv(r, 1, &pid, sizeof(pid)))
			return FH_FAIL;
		if (pid > 0 && !unshare(CLONE_NEWNET)) {
			step = "ip link add ... type veth (iproute2)";
			ok = !ck_ip("link add " CK_LINK_IFACE " type veth peer name " CK_LINK_IFACE
				    " netns %d", (int)pid) &&
			     !ck_ip("link set dev lo up") &&
			     !ck_ip("addr add 10.231.7.1/24 dev " CK_LINK_IFACE) &&
			     !ck_ip("link set dev " CK_LINK_IFACE " up");
		}
		if (fh_oob_send(r, 1, &ok, sizeof(ok)) || fh_oob_recv(r, 1, &peer_ok, sizeof(peer_ok)))
			return FH_FAIL;
		if (ok && !peer_ok)
			step = "configuring the other end";
		ok = ok && peer_ok;
	}
	if (!ok) {
		snprintf(ck->netns_why, sizeof(ck->netns_why),
			 "two network namespaces joined by a veth pair could not be made (%s failed; "
			 "needs root and iproute2)", step);
		return FH_OK;
	}
	/* Wait until the link carries traffic: a provider enumerating interfaces
	 * before that would not list it (and fall back to loopback). */
	for (int i = 0; i < 300; i++) {
		char state[16] = "";
		FILE *f = fopen("/sys/class/net/" CK_LINK_IFACE "/operstate", "r");
		if (f) {
			if (!fgets(state, sizeof(state), f))
				state[0] = '\0';
			fclose(f);
		}
		if (!strncmp(state, "up", 2))
			break;
		usleep(10000);
	}
	/* the providers look for the interface by these names */
	const char *vars[] = {"FI_TCP_IFACE", "FI_UDP_IFACE", "FI_SOCKETS_IFACE", "FI_NET_IFACE"};
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		setenv(vars[i], CK_LINK_IFACE, 1);
	ck->netns = 1;
	return FH_OK;
}
