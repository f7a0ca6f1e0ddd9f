/*
 * fh_ranks.c - fork ranks, connect them out of band, and watch them.
 *
 * libfabric is not fork-safe, so the process that forks never loads the
 * plugin: every rank loads it itself after the fork. Ranks talk over a full
 * mesh of socketpairs made before the fork, and report to the parent through
 * a pipe: "S<text>" lines say what the rank is doing (shown if it hangs), one
 * "R<text>" line carries its reason or note; the exit status says PASS (0),
 * FAIL (1) or SKIP (77).
 */
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>

double fh_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void fh_relax(unsigned *idle)
{
	/* Spin politely first (latency), then sleep a little so that on a
	 * 2-core machine the peer ranks and provider threads get to run. */
	if (++*idle < 64) {
		sched_yield();
	} else {
		struct timespec ts = {0, 20000};
		nanosleep(&ts, NULL);
	}
}

double fh_timeout_multiplier(void)
{
	const char *env = getenv("NCCL_FABRIC_TEST_TIMEOUT_MULTIPLIER");
	if (!env || !*env)
		return 1.0;
	char *end = NULL;
	double m = strtod(env, &end);
	if (!end || *end || !(m > 0.0) || m > 1000.0) {
		fprintf(stderr, "ignoring NCCL_FABRIC_TEST_TIMEOUT_MULTIPLIER=%s (want a number > 0)\n",
			env);
		return 1.0;
	}
	return m;
}

/* ------------------------------------------------------------ rank side */

static void fh_sanitize(char *s)
{
	for (; *s; s++)
		if (*s == '\n' || *s == '\r')
			*s = ' ';
}

static void fh_vset(fh_rank_t *r, int fail, const char *fmt, va_list ap)
{
	pthread_mutex_lock(&r->lock);
	if (!r->failed && (fail || !r->reason[0])) {
		vsnprintf(r->reason, sizeof(r->reason), fmt, ap);
		fh_sanitize(r->reason);
	}
	if (fail)
		r->failed = 1;
	pthread_mutex_unlock(&r->lock);
}

int fh_fail(fh_rank_t *r, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fh_vset(r, 1, fmt, ap);
	va_end(ap);
	return FH_FAIL;
}

int fh_skip(fh_rank_t *r, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fh_vset(r, 0, fmt, ap);
	va_end(ap);
	return FH_SKIP;
}

int fh_failed(fh_rank_t *r)
{
	pthread_mutex_lock(&r->lock);
	int f = r->failed;
	pthread_mutex_unlock(&r->lock);
	return f;
}

void fh_note(fh_rank_t *r, const char *fmt, ...)
{
	pthread_mutex_lock(&r->lock);
	size_t used = strlen(r->note);
	if (used && used + 2 < sizeof(r->note)) {
		strcpy(r->note + used, ", ");
		used += 2;
	}
	if (used + 1 < sizeof(r->note)) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(r->note + used, sizeof(r->note) - used, fmt, ap);
		va_end(ap);
		fh_sanitize(r->note);
	}
	pthread_mutex_unlock(&r->lock);
}

static void fh_report_line(fh_rank_t *r, char kind, const char *text)
{
	char line[FH_REASON_MAX + 64];
	int n = snprintf(line, sizeof(line), "%c%s", kind, text);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(line) - 1)
		n = (int)sizeof(line) - 2;
	fh_sanitize(line);
	line[n++] = '\n';
	/* One write below PIPE_BUF: atomic even from several threads. */
	ssize_t w = write(r->result_fd, line, (size_t)n);
	(void)w;
}

void fh_stage(fh_rank_t *r, const char *fmt, ...)
{
	char text[FH_REASON_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	fh_report_line(r, 'S', text);
}

int fh_oob_send(fh_rank_t *r, int peer, const void *buf, size_t len)
{
	const char *p = buf;
	while (len) {
		ssize_t n = send(r->oob[peer], p, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return fh_fail(r, "out-of-band send to rank %d failed: %s (did it exit?)",
				       peer, n < 0 ? strerror(errno) : "closed");
		p += n;
		len -= (size_t)n;
	}
	return FH_OK;
}

int fh_oob_recv(fh_rank_t *r, int peer, void *buf, size_t len)
{
	char *p = buf;
	while (len) {
		ssize_t n = recv(r->oob[peer], p, len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return fh_fail(r, "out-of-band receive from rank %d failed: %s", peer,
				       strerror(errno));
		if (n == 0)
			return fh_fail(r, "rank %d exited before sending what this rank waits for",
				       peer);
		p += n;
		len -= (size_t)n;
	}
	return FH_OK;
}

int fh_oob_ready(fh_rank_t *r, int peer)
{
	struct pollfd pfd = {.fd = r->oob[peer], .events = POLLIN};
	return poll(&pfd, 1, 0) > 0;
}

int fh_oob_barrier(fh_rank_t *r)
{
	const char token = 'B';
	for (int p = 0; p < r->nranks; p++)
		if (p != r->rank && fh_oob_send(r, p, &token, 1))
			return FH_FAIL;
	for (int p = 0; p < r->nranks; p++) {
		char got = 0;
		if (p == r->rank)
			continue;
		if (fh_oob_recv(r, p, &got, 1))
			return FH_FAIL;
		if (got != token)
			return fh_fail(r, "out-of-band channel to rank %d out of step (barrier)", p);
	}
	return FH_OK;
}

/* LeakSanitizer calls this at exit when it is linked in. A failing rank
 * exits mid-case holding comms and buffers on purpose, so only ranks that
 * passed are leak-checked (their leaks are the plugin's or ours). */
int __lsan_is_turned_off(void);
static volatile int fh_no_leak_check;
int __lsan_is_turned_off(void)
{
	return fh_no_leak_check;
}

void fh_rank_die(fh_rank_t *r, const char *note)
{
	fh_report_line(r, 'R', note);
	fflush(NULL);
	_exit(FH_OK); /* no close, no finalize, no destructors: as if killed */
}

static void fh_rank_main(fh_rank_t *r, fh_rank_fn fn, void *arg)
{
	int rc = fn(r, arg);
	if (rc == FH_OK && fh_failed(r))
		rc = FH_FAIL;
	if (rc != FH_OK && rc != FH_SKIP)
		rc = FH_FAIL;
	if (rc != FH_OK && !r->reason[0])
		snprintf(r->reason, sizeof(r->reason), "%s (no reason given)",
			 rc == FH_SKIP ? "skipped" : "failed");
	fh_report_line(r, 'R', rc == FH_OK ? r->note : r->reason);
	fh_no_leak_check = rc != FH_OK;
	fflush(NULL);
	/* exit(), not _exit(): the plugin and libfabric get their destructors
	 * (shm unlinks its segments there). */
	exit(rc);
}

/* NCCL_FABRIC_TEST_NETNS="a,b,...": rank i enters the i-th network namespace
 * (a name under /run/netns, as `ip netns add` makes, or a path) right after
 * the fork, before it loads the plugin, so forked ranks are hosts with their
 * own interfaces. The out-of-band socketpairs were made before the fork and
 * cross namespaces. A rank without an entry stays where it is. Needs
 * CAP_SYS_ADMIN. Returns FH_FAIL with the reason in r. */
static int fh_enter_netns(fh_rank_t *r)
{
	const char *env = getenv("NCCL_FABRIC_TEST_NETNS");
	if (!env || !*env)
		return FH_OK;
	const char *p = env;
	for (int i = 0; i < r->rank && p; i++) {
		p = strchr(p, ',');
		if (p)
			p++;
	}
	if (!p || !*p || *p == ',')
		return FH_OK;
	size_t n = strcspn(p, ",");
	char name[256], path[300];
	if (n >= sizeof(name))
		return fh_fail(r, "NCCL_FABRIC_TEST_NETNS: entry %d too long", r->rank);
	memcpy(name, p, n);
	name[n] = '\0';
	snprintf(path, sizeof(path), "%s%s", strchr(name, '/') ? "" : "/run/netns/", name);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return fh_fail(r, "NCCL_FABRIC_TEST_NETNS: open %s: %s", path, strerror(errno));
	int rc = setns(fd, CLONE_NEWNET);
	int err = errno;
	close(fd);
	if (rc)
		return fh_fail(r, "NCCL_FABRIC_TEST_NETNS: setns %s: %s", path, strerror(err));
	return FH_OK;
}

/* ------------------------------------------------------------ parent side */

struct fh_child {
	pid_t pid;
	int alive;
	int fd; /* result pipe, -1 once at EOF */
	int wstatus;
	int order;  /* exit order, for "first failure" */
	int killed; /* by the watchdog */
	char line[FH_REASON_MAX + 64];
	size_t line_len;
	char stage[FH_REASON_MAX];
	char result[FH_REASON_MAX];
	int have_result;
};

static void fh_child_consume(struct fh_child *c)
{
	char buf[4096];
	for (;;) {
		ssize_t n = read(c->fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0) {
			close(c->fd);
			c->fd = -1;
			return;
		}
		for (ssize_t i = 0; i < n; i++) {
			char ch = buf[i];
			if (ch != '\n') {
				if (c->line_len < sizeof(c->line) - 1)
					c->line[c->line_len++] = ch;
				continue;
			}
			c->line[c->line_len] = '\0';
			if (c->line[0] == 'S')
				snprintf(c->stage, sizeof(c->stage), "%s", c->line + 1);
			else if (c->line[0] == 'R') {
				snprintf(c->result, sizeof(c->result), "%s", c->line + 1);
				c->have_result = 1;
			}
			c->line_len = 0;
		}
	}
}

/* libfabric's shm provider backs each endpoint with /dev/shm/<pid>:<uid>:<n>
 * and unlinks it when the endpoint is closed; a rank that exits without
 * closing (a failure, a kill, or v6-v10 where NCCL never finalizes) leaves
 * 16 MiB behind. Only segments of our own, dead ranks are ever removed. */
int fh_shm_segments(pid_t pid, int remove, char *first, size_t len)
{
	DIR *d = opendir("/dev/shm");
	if (!d)
		return 0;
	char prefix[32];
	int plen = snprintf(prefix, sizeof(prefix), "%d:", (int)pid);
	int count = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		if (strncmp(e->d_name, prefix, (size_t)plen))
			continue;
		if (first && !count)
			snprintf(first, len, "/dev/shm/%s", e->d_name);
		count++;
		if (remove) {
			char path[512];
			snprintf(path, sizeof(path), "/dev/shm/%s", e->d_name);
			unlink(path);
		}
	}
	closedir(d);
	return count;
}

static void fh_kill_all(struct fh_child *kids, int n)
{
	int any = 0;
	for (int i = 0; i < n; i++)
		if (kids[i].alive) {
			kill(kids[i].pid, SIGTERM);
			kids[i].killed = 1;
			any = 1;
		}
	if (!any)
		return;
	/* SIGTERM first so providers' handlers can clean up; then SIGKILL. */
	double until = fh_now() + 1.0;
	while (fh_now() < until) {
		int left = 0;
		for (int i = 0; i < n; i++) {
			if (!kids[i].alive)
				continue;
			if (waitpid(kids[i].pid, &kids[i].wstatus, WNOHANG) == kids[i].pid)
				kids[i].alive = 0;
			else
				left = 1;
		}
		if (!left)
			break;
		struct timespec ts = {0, 10 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	for (int i = 0; i < n; i++) {
		if (!kids[i].alive)
			continue;
		kill(kids[i].pid, SIGKILL);
		waitpid(kids[i].pid, &kids[i].wstatus, 0);
		kids[i].alive = 0;
	}
}

static void fh_describe_exit(const struct fh_child *c, int rank, char *out, size_t len)
{
	int st = c->wstatus;
	if (WIFSIGNALED(st)) {
		int sig = WTERMSIG(st);
		snprintf(out, len, "rank %d killed by signal %d (%s)%s%s", rank, sig, strsignal(sig),
			 c->stage[0] ? "; last stage: " : "", c->stage);
		return;
	}
	int code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	if (code == FH_FAIL && c->have_result) {
		snprintf(out, len, "rank %d: %s", rank, c->result);
	} else if (code == FH_SKIP && c->have_result) {
		snprintf(out, len, "%s", c->result);
	} else if (c->have_result && c->result[0]) {
		/* e.g. 23 from LeakSanitizer, or a sanitizer abort after the case. */
		snprintf(out, len, "rank %d exited with status %d%s after: %s", rank, code,
			 code == 23 ? " (LeakSanitizer found leaks)" : "", c->result);
	} else {
		snprintf(out, len, "rank %d exited with status %d without a result%s%s", rank, code,
			 c->stage[0] ? "; last stage: " : "", c->stage);
	}
}

static int fh_child_status(const struct fh_child *c)
{
	if (!WIFEXITED(c->wstatus))
		return FH_FAIL;
	int code = WEXITSTATUS(c->wstatus);
	if (code == 0 && c->have_result)
		return FH_OK;
	if (code == FH_SKIP && c->have_result)
		return FH_SKIP;
	return FH_FAIL;
}

void fh_launch(int nranks, double timeout_s, fh_rank_fn fn, void *arg, fh_outcome_t *out)
{
	memset(out, 0, sizeof(*out));
	out->status = FH_FAIL;
	if (nranks < 1 || nranks > FH_MAX_RANKS) {
		snprintf(out->text, sizeof(out->text), "bad rank count %d", nranks);
		return;
	}

	int sp[FH_MAX_RANKS][FH_MAX_RANKS];
	int res[FH_MAX_RANKS][2];
	for (int i = 0; i < nranks; i++)
		for (int j = 0; j < nranks; j++)
			sp[i][j] = -1;
	for (int i = 0; i < nranks; i++) {
		for (int j = i + 1; j < nranks; j++) {
			int fds[2];
			if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds)) {
				snprintf(out->text, sizeof(out->text), "socketpair: %s",
					 strerror(errno));
				return; /* fds leak only in this already-failed path */
			}
			sp[i][j] = fds[0]; /* rank i's end towards j */
			sp[j][i] = fds[1];
		}
		if (pipe2(res[i], O_CLOEXEC)) {
			snprintf(out->text, sizeof(out->text), "pipe: %s", strerror(errno));
			return;
		}
	}

	struct fh_child kids[FH_MAX_RANKS];
	memset(kids, 0, sizeof(kids));
	pid_t parent = getpid();
	double mult = fh_timeout_multiplier();
	double t0 = fh_now();
	fflush(NULL); /* nothing buffered may be written twice */

	for (int i = 0; i < nranks; i++) {
		pid_t pid = fork();
		if (pid == 0) {
			/* Die with the parent (ctest timeout, ^C): never orphan a rank. */
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			if (getppid() != parent)
				_exit(FH_FAIL);
			signal(SIGINT, SIG_DFL);
			fh_rank_t r;
			memset(&r, 0, sizeof(r));
			pthread_mutex_init(&r.lock, NULL);
			r.rank = i;
			r.nranks = nranks;
			r.timeout_mult = mult;
			for (int a = 0; a < nranks; a++) {
				for (int b = 0; b < nranks; b++) {
					if (sp[a][b] < 0)
						continue;
					if (a == i)
						r.oob[b] = sp[a][b];
					else
						close(sp[a][b]);
				}
				if (a != i) {
					close(res[a][1]);
				}
				close(res[a][0]);
			}
			r.oob[i] = -1;
			r.result_fd = res[i][1];
			fh_log_set_rank(i);
			if (fh_enter_netns(&r) != FH_OK) {
				fh_report_line(&r, 'R', r.reason);
				fflush(NULL);
				_exit(FH_FAIL);
			}
			fh_rank_main(&r, fn, arg);
		}
		if (pid < 0) {
			snprintf(out->text, sizeof(out->text), "fork: %s", strerror(errno));
			fh_kill_all(kids, i);
			return;
		}
		kids[i].pid = pid;
		kids[i].alive = 1;
	}
	for (int i = 0; i < nranks; i++) {
		for (int j = 0; j < nranks; j++)
			if (sp[i][j] >= 0)
				close(sp[i][j]);
		close(res[i][1]);
		kids[i].fd = res[i][0];
		fcntl(kids[i].fd, F_SETFL, O_NONBLOCK);
	}

	double deadline = t0 + timeout_s;
	double grace = 0; /* set when a rank failed: the others get a moment */
	int exited = 0;
	while (exited < nranks) {
		struct pollfd pfd[FH_MAX_RANKS];
		int np = 0;
		for (int i = 0; i < nranks; i++)
			if (kids[i].fd >= 0)
				pfd[np++] = (struct pollfd){.fd = kids[i].fd, .events = POLLIN};
		if (np)
			poll(pfd, (nfds_t)np, 20);
		else {
			struct timespec ts = {0, 20 * 1000 * 1000};
			nanosleep(&ts, NULL);
		}
		for (int i = 0; i < nranks; i++)
			if (kids[i].fd >= 0)
				fh_child_consume(&kids[i]);
		for (int i = 0; i < nranks; i++) {
			if (!kids[i].alive)
				continue;
			pid_t w = waitpid(kids[i].pid, &kids[i].wstatus, WNOHANG);
			if (w != kids[i].pid)
				continue;
			kids[i].alive = 0;
			kids[i].order = exited++;
			if (kids[i].fd >= 0)
				fh_child_consume(&kids[i]);
			if (fh_child_status(&kids[i]) != FH_OK && grace == 0)
				grace = fh_now() + 3.0 * mult;
		}
		double now = fh_now();
		if (exited < nranks && now > deadline) {
			out->timed_out = 1;
			break;
		}
		if (exited < nranks && grace > 0 && now > grace)
			break;
	}

	char alive_stages[1024] = "";
	if (out->timed_out) {
		size_t used = 0;
		for (int i = 0; i < nranks; i++) {
			if (used >= sizeof(alive_stages))
				break;
			int st = kids[i].alive ? -1 : fh_child_status(&kids[i]);
			int n = snprintf(alive_stages + used, sizeof(alive_stages) - used,
					 "; rank %d: %s", i,
					 st == FH_OK	 ? "had finished (passed)"
					 : st == FH_SKIP ? "had finished (skipped)"
					 : st == FH_FAIL ? "had failed"
					 : kids[i].stage[0] ? kids[i].stage
							    : "(no stage reported)");
			if (n > 0)
				used += (size_t)n;
		}
	}
	fh_kill_all(kids, nranks);
	for (int i = 0; i < nranks; i++)
		if (kids[i].fd >= 0) {
			fh_child_consume(&kids[i]);
			if (kids[i].fd >= 0)
				close(kids[i].fd);
		}
	out->seconds = fh_now() - t0;
	for (int i = 0; i < nranks; i++)
		out->shm_left += fh_shm_segments(kids[i].pid, 1, NULL, 0);

	if (out->timed_out) {
		out->status = FH_FAIL;
		snprintf(out->text, sizeof(out->text), "timeout (hang) after %.0fs%s", timeout_s,
			 alive_stages);
		return;
	}
	/* Ranks we killed after another one gave up are not the cause. */
	int pick = -1, skip = -1;
	for (int i = 0; i < nranks; i++) {
		if (kids[i].killed)
			continue;
		int st = fh_child_status(&kids[i]);
		if (st == FH_FAIL && (pick < 0 || kids[i].order < kids[pick].order))
			pick = i;
		if (st == FH_SKIP && (skip < 0 || kids[i].order < kids[skip].order))
			skip = i;
	}
	if (pick >= 0 || skip >= 0) {
		int who = pick >= 0 ? pick : skip;
		out->status = pick >= 0 ? FH_FAIL : FH_SKIP;
		fh_describe_exit(&kids[who], who, out->text, sizeof(out->text));
		return;
	}
	out->status = FH_OK;
	size_t used = 0;
	for (int i = 0; i < nranks; i++) {
		if (!kids[i].result[0] || used >= sizeof(out->text))
			continue;
		int n = snprintf(out->text + used, sizeof(out->text) - used, "%s%s",
				 used ? "; " : "", kids[i].result);
		if (n > 0)
			used += (size_t)n;
	}
}
