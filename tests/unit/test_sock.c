/*
 * test_sock.c - ofi_sock.c on real loopback sockets: which sockets are armed
 * (bytes waiting to leave, toward the peer's endpoint or accepted on ours
 * from the peer's host), that several holders share one socket and the
 * last puts its old TCP_USER_TIMEOUT back, and that the kernel then resets
 * a connection whose receiver reads nothing.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ofi/ofi.h"
#include "unit.h"

/* A listener on 127.0.0.1, a client connected to it and the accepted end. */
struct pair {
	int lis, cli, acc;
	struct sockaddr_in lis_addr, cli_addr;
};

static int pair_open(struct pair *p)
{
	socklen_t len = sizeof(p->lis_addr);
	p->lis = socket(AF_INET, SOCK_STREAM, 0);
	p->cli = socket(AF_INET, SOCK_STREAM, 0);
	p->acc = -1;
	memset(&p->lis_addr, 0, sizeof(p->lis_addr));
	p->lis_addr.sin_family = AF_INET;
	p->lis_addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (p->lis < 0 || p->cli < 0 ||
	    bind(p->lis, (struct sockaddr *)&p->lis_addr, sizeof(p->lis_addr)) ||
	    getsockname(p->lis, (struct sockaddr *)&p->lis_addr, &len) || listen(p->lis, 4) ||
	    connect(p->cli, (struct sockaddr *)&p->lis_addr, sizeof(p->lis_addr)))
		return -1;
	p->acc = accept(p->lis, NULL, NULL);
	len = sizeof(p->cli_addr);
	if (p->acc < 0 || getsockname(p->cli, (struct sockaddr *)&p->cli_addr, &len))
		return -1;
	return 0;
}

static void pair_close(struct pair *p)
{
	close(p->lis);
	close(p->cli);
	if (p->acc >= 0)
		close(p->acc);
}

/* Writes into fd (non-blocking) until the kernel takes no more: its peer
 * reads nothing, so bytes wait to leave. */
static void fill(int fd)
{
	static char junk[1 << 16];
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	while (write(fd, junk, sizeof(junk)) > 0)
		;
}

static int user_timeout(int fd)
{
	int v = -1;
	socklen_t len = sizeof(v);
	getsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &v, &len);
	return v;
}

/* Another address of the peer's host: the client's host with a port that
 * is not its own. */
static struct sockaddr_in other_port(const struct sockaddr_in *a)
{
	struct sockaddr_in o = *a;
	o.sin_port = htons((uint16_t)(ntohs(a->sin_port) ^ 0x4000));
	return o;
}

static int test_idle_not_armed(void)
{
	struct pair p;
	CHECK_EQ(pair_open(&p), 0);
	struct ofi_sock_armed a = {0};
	/* connected to the listener, but nothing waits to leave */
	struct sockaddr_in self = other_port(&p.cli_addr);
	CHECK_EQ(ofi_sock_arm(&self, sizeof(self), &p.lis_addr, sizeof(p.lis_addr), 700, &a), 0);
	CHECK_EQ(user_timeout(p.cli), 0);
	pair_close(&p);
	return 0;
}

static int test_arm_toward_peer(void)
{
	struct pair p;
	CHECK_EQ(pair_open(&p), 0);
	fill(p.cli);
	struct sockaddr_in self = other_port(&p.cli_addr);
	struct ofi_sock_armed a = {0}, b = {0}, c = {0};
	CHECK_EQ(ofi_sock_arm(&self, sizeof(self), &p.lis_addr, sizeof(p.lis_addr), 700, &a), 1);
	CHECK_EQ(a.s[0].fd, p.cli);
	CHECK_EQ(user_timeout(p.cli), 700);
	CHECK_EQ(ofi_sock_live(&a), 1);
	/* the same holder again: the new timeout, still one reference */
	CHECK_EQ(ofi_sock_arm(&self, sizeof(self), &p.lis_addr, sizeof(p.lis_addr), 500, &a), 1);
	CHECK_EQ(user_timeout(p.cli), 500);
	/* a second holder; the first to let go leaves it armed */
	CHECK_EQ(ofi_sock_arm(&self, sizeof(self), &p.lis_addr, sizeof(p.lis_addr), 300, &b), 1);
	CHECK_EQ(user_timeout(p.cli), 300);
	ofi_sock_disarm(&a);
	CHECK_EQ(a.n, 0);
	CHECK_EQ(user_timeout(p.cli), 300);
	ofi_sock_disarm(&b);
	CHECK_EQ(user_timeout(p.cli), 0);
	/* a name of another family, or too short, arms nothing */
	CHECK_EQ(ofi_sock_arm(&self, 3, &p.lis_addr, sizeof(p.lis_addr), 700, &c), -FI_EINVAL);
	CHECK_EQ(c.n, 0);
	pair_close(&p);
	return 0;
}

/* The accepted end: local address our endpoint's, remote the peer's host
 * from any port. A socket of another endpoint (another local port) is not
 * armed. */
static int test_arm_accepted(void)
{
	struct pair p;
	CHECK_EQ(pair_open(&p), 0);
	fill(p.acc);
	struct sockaddr_in peer = other_port(&p.cli_addr), wrong = other_port(&p.lis_addr);
	struct ofi_sock_armed a = {0};
	CHECK_EQ(ofi_sock_arm(&wrong, sizeof(wrong), &peer, sizeof(peer), 700, &a), 0);
	CHECK_EQ(ofi_sock_arm(&p.lis_addr, sizeof(p.lis_addr), &peer, sizeof(peer), 700, &a), 1);
	CHECK_EQ(a.s[0].fd, p.acc);
	CHECK_EQ(user_timeout(p.acc), 700);
	CHECK_EQ(user_timeout(p.cli), 0);
	ofi_sock_disarm(&a);
	CHECK_EQ(user_timeout(p.acc), 0);
	pair_close(&p);
	return 0;
}

/* The connection to the peer's endpoint address itself is shut down even
 * with nothing waiting; one accepted from the peer's host is not (it could
 * be another process's). */
static int test_shut_exact(void)
{
	struct pair p;
	CHECK_EQ(pair_open(&p), 0);
	struct ofi_sock_armed a = {0};
	CHECK_EQ(ofi_sock_shut(&p.lis_addr, sizeof(p.lis_addr), &a), 1);
	CHECK_EQ(a.n, 1);
	CHECK_EQ(a.s[0].fd, p.cli);
	CHECK_EQ(ofi_sock_live(&a), 0);
	char c;
	CHECK_EQ(read(p.acc, &c, 1), 0); /* the other end sees it end */
	/* the exact remote address, whichever end accepted */
	struct ofi_sock_armed b = {0};
	CHECK_EQ(ofi_sock_shut(&p.cli_addr, sizeof(p.cli_addr), &b), 1);
	CHECK_EQ(b.s[0].fd, p.acc);
	struct sockaddr_in other = other_port(&p.lis_addr);
	struct ofi_sock_armed d = {0};
	CHECK_EQ(ofi_sock_shut(&other, sizeof(other), &d), 0);
	ofi_sock_disarm(&a);
	ofi_sock_disarm(&b);
	pair_close(&p);
	return 0;
}

/* What close relies on: the receiver reads nothing (its window shuts), and
 * the kernel resets the armed connection; the sender sees an error and the
 * socket no longer counts as open once closed. */
static int test_kernel_resets(void)
{
	struct pair p;
	CHECK_EQ(pair_open(&p), 0);
	int small = 4096;
	setsockopt(p.acc, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
	fill(p.cli);
	struct sockaddr_in self = other_port(&p.cli_addr);
	struct ofi_sock_armed a = {0};
	CHECK_EQ(ofi_sock_arm(&self, sizeof(self), &p.lis_addr, sizeof(p.lis_addr), 200, &a), 1);
	double until = unit_now_s() + 30;
	int err = 0;
	while (!err && unit_now_s() < until) {
		struct pollfd pf = {.fd = p.cli, .events = POLLOUT};
		poll(&pf, 1, 100);
		socklen_t len = sizeof(err);
		getsockopt(p.cli, SOL_SOCKET, SO_ERROR, &err, &len);
	}
	CHECK_EQ(err, ETIMEDOUT);
	/* reset: no longer live, though still open */
	CHECK_EQ(ofi_sock_live(&a), 0);
	close(p.cli);
	p.cli = socket(AF_INET, SOCK_STREAM, 0); /* (pair_close closes a socket there) */
	CHECK_EQ(ofi_sock_live(&a), 0);
	ofi_sock_disarm(&a);
	pair_close(&p);
	return 0;
}

/* A listening endpoint address accepts the probe (no verdict); once nothing
 * listens there, the probe is refused; a name that is no socket address is
 * an error, never a verdict. */
static int test_refused(void)
{
	struct pair p;
	CHECK_EQ(pair_open(&p), 0);
	struct sockaddr_in a = p.lis_addr;
	CHECK_EQ(ofi_sock_refused(&a, sizeof(a), 200), 0);
	pair_close(&p);
	CHECK_EQ(ofi_sock_refused(&a, sizeof(a), 200), 1);
	unsigned char junk[4] = { 0 };
	CHECK(ofi_sock_refused(junk, sizeof(junk), 200) < 0);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct unit_test tests[] = {
		TEST_ENTRY(test_idle_not_armed, "a socket with nothing waiting to leave is left alone"),
		TEST_ENTRY(test_arm_toward_peer, "armed toward the peer's endpoint; shared holders, "
						 "the last puts the old value back"),
		TEST_ENTRY(test_arm_accepted, "armed where accepted on our endpoint from the peer's "
					      "host, not on another endpoint"),
		TEST_ENTRY(test_shut_exact, "the connection to the peer's endpoint address is shut "
					    "down, no other"),
		TEST_ENTRY(test_kernel_resets, "the kernel resets an armed connection whose "
					       "receiver reads nothing"),
		TEST_ENTRY(test_refused, "a probe of a peer's endpoint address: accepted while it "
					 "listens, refused after"),
	};
	return unit_main(tests, argc, argv);
}
