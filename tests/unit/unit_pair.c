#include "unit_pair.h"

#include <stdio.h>
#include <stdlib.h>

#include "core/core.h"
#include "unit.h"

int unit_pair_connect(void *lcomm, const void *handle, void **sc, void **rc, double timeout_s)
{
	double end = unit_now_s() + timeout_s;
	while ((!*sc || !*rc) && unit_now_s() < end) {
		if (!*sc && net_connect(0, (void *)handle, sc) != 0)
			return 1;
		if (!*rc && net_accept(lcomm, rc) != 0)
			return 1;
	}
	return *sc && *rc ? 0 : 1;
}

int unit_pair_open(struct unit_pair *p)
{
	*p = (struct unit_pair){ 0 };
	if (net_init(&p->ctx, NULL) != 0) {
		printf("SKIP: no usable provider (NCCL_FABRIC_PROVIDER=%s)\n",
		       getenv("NCCL_FABRIC_PROVIDER") ? getenv("NCCL_FABRIC_PROVIDER") : "");
		return 77;
	}
	if (net_listen(0, p->handle, &p->lcomm) != 0)
		return 1;
	return unit_pair_connect(p->lcomm, p->handle, &p->sc, &p->rc, 30);
}

int unit_pair_run(const struct unit_test *tests, int n, int argc, char **argv, void **lcomm,
		  void **sc, void **rc)
{
	struct unit_pair p;
	int ret = unit_pair_open(&p);
	if (ret == 77)
		return ret;
	if (ret == 0) {
		*lcomm = p.lcomm;
		*sc = p.sc;
		*rc = p.rc;
		ret = unit_run(tests, n, argc, argv);
	}
	unit_pair_close(&p);
	return ret;
}

void unit_pair_close(struct unit_pair *p)
{
	if (p->sc)
		net_close_send(p->sc);
	if (p->rc)
		net_close_recv(p->rc);
	if (p->lcomm)
		net_close_listen(p->lcomm);
	net_finalize(p->ctx);
}

int unit_pair_test_until(void *req, double seconds, int *res, int *size)
{
	int done = 0;
	double end = unit_now_s() + seconds;
	do {
		*res = net_test(req, &done, size);
	} while (!done && !*res && unit_now_s() < end);
	return done;
}
