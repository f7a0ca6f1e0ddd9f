/*
 * fh_ops.c - connection setup and the request engine.
 *
 * Both mimic NCCL's proxy: connect/accept are polled alternately and must
 * never block; isend/irecv returning success with a NULL request means "try
 * again later" (counted, never an error); each comm's requests are posted in
 * order and the oldest one in flight is tested.
 */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Longest a single connect/accept call may take before we call it blocking
 * (scaled up, never down, by the timeout multiplier). */
#define FH_BLOCK_LIMIT_S 5.0

static double fh_block_limit(const fh_rank_t *r)
{
	return FH_BLOCK_LIMIT_S * (r->timeout_mult > 1.0 ? r->timeout_mult : 1.0);
}

static const char *fh_op_kind_name(fh_op_kind_t k)
{
	return k == FH_OP_SEND ? "isend" : k == FH_OP_RECV ? "irecv" : "iflush";
}

/* ------------------------------------------------------------ connections */

static int fh_timed_connect(fh_rank_t *r, fh_net_t *net, int dev, void *handle, void **sc)
{
	double t = fh_now();
	ncclResult_t rc = fh_net_connect(net, net->ctx, dev, handle, sc);
	double dt = fh_now() - t;
	if (rc != ncclSuccess)
		return fh_fail(r, "connect() returned %s", fh_result_str(rc));
	if (dt > fh_block_limit(r))
		return fh_fail(r, "connect() blocked for %.1fs (it must return NULL and be called again)",
			       dt);
	return FH_OK;
}

static int fh_timed_accept(fh_rank_t *r, fh_net_t *net, void *lc, void **rc_out)
{
	double t = fh_now();
	ncclResult_t rc = fh_net_accept(net, lc, rc_out);
	double dt = fh_now() - t;
	if (rc != ncclSuccess)
		return fh_fail(r, "accept() returned %s", fh_result_str(rc));
	if (dt > fh_block_limit(r))
		return fh_fail(r, "accept() blocked for %.1fs (it must return NULL and be called again)",
			       dt);
	return FH_OK;
}

static int fh_listen_checked(fh_rank_t *r, fh_net_t *net, int dev, char *handle, void **lc)
{
	memset(handle, 0, NCCL_NET_HANDLE_MAXSIZE);
	*lc = NULL;
	ncclResult_t rc = fh_net_listen(net, net->ctx, dev, handle, lc);
	if (rc != ncclSuccess)
		return fh_fail(r, "listen(dev %d) returned %s", dev, fh_result_str(rc));
	if (!*lc)
		return fh_fail(r, "listen(dev %d) returned ncclSuccess without a listen comm", dev);
	return FH_OK;
}

int fh_link(fh_rank_t *r, fh_net_t *net, int dev, int send_to, int recv_from, void **scomm,
	    void **rcomm)
{
	char mine[NCCL_NET_HANDLE_MAXSIZE], theirs[NCCL_NET_HANDLE_MAXSIZE];
	void *lc = NULL;
	if (scomm)
		*scomm = NULL;
	if (rcomm)
		*rcomm = NULL;
	if (recv_from >= 0) {
		if (fh_listen_checked(r, net, dev, mine, &lc))
			return FH_FAIL;
		if (fh_oob_send(r, recv_from, mine, sizeof(mine)))
			return FH_FAIL;
	}
	if (send_to >= 0 && fh_oob_recv(r, send_to, theirs, sizeof(theirs)))
		return FH_FAIL;

	static atomic_int links;
	fh_stage(r, "connection setup #%d of this rank (send to rank %d, receive from rank %d)",
		 atomic_fetch_add(&links, 1) + 1, send_to, recv_from);
	unsigned idle = 0;
	for (;;) {
		int need_s = send_to >= 0 && !*scomm;
		int need_r = recv_from >= 0 && !*rcomm;
		if (!need_s && !need_r)
			break;
		/* The same handle buffer every call: connect may keep state in it. */
		if (need_s && fh_timed_connect(r, net, dev, theirs, scomm))
			return FH_FAIL;
		if (need_r && fh_timed_accept(r, net, lc, rcomm))
			return FH_FAIL;
		if ((need_s && *scomm) || (need_r && *rcomm))
			idle = 0;
		else
			fh_relax(&idle);
	}
	if (lc) {
		ncclResult_t rc = fh_net_close_listen(net, lc);
		if (rc != ncclSuccess)
			return fh_fail(r, "closeListen() returned %s", fh_result_str(rc));
	}
	return FH_OK;
}

int fh_link_self(fh_rank_t *r, fh_net_t *net, int dev, void **scomm, void **rcomm)
{
	char handle[NCCL_NET_HANDLE_MAXSIZE];
	void *lc = NULL;
	*scomm = *rcomm = NULL;
	if (fh_listen_checked(r, net, dev, handle, &lc))
		return FH_FAIL;
	fh_stage(r, "connect/accept to itself on one thread");
	unsigned idle = 0;
	while (!*scomm || !*rcomm) {
		int before = (*scomm != NULL) + (*rcomm != NULL);
		if (!*scomm && fh_timed_connect(r, net, dev, handle, scomm))
			return FH_FAIL;
		if (!*rcomm && fh_timed_accept(r, net, lc, rcomm))
			return FH_FAIL;
		if ((*scomm != NULL) + (*rcomm != NULL) > before)
			idle = 0;
		else
			fh_relax(&idle);
	}
	ncclResult_t rc = fh_net_close_listen(net, lc);
	if (rc != ncclSuccess)
		return fh_fail(r, "closeListen() returned %s", fh_result_str(rc));
	return FH_OK;
}

ncclResult_t fh_connect_until(fh_rank_t *r, fh_net_t *net, int dev, void *handle, void **scomm,
			      double seconds, int *timed_out)
{
	double until = fh_now() + seconds;
	unsigned idle = 0;
	*scomm = NULL;
	*timed_out = 0;
	(void)r;
	for (;;) {
		ncclResult_t rc = fh_net_connect(net, net->ctx, dev, handle, scomm);
		if (rc != ncclSuccess || *scomm)
			return rc;
		if (fh_now() > until) {
			*timed_out = 1;
			return ncclSuccess;
		}
		fh_relax(&idle);
	}
}

/* ------------------------------------------------------------ requests */

void fh_op_send(fh_op_t *op, void *comm, void *data, size_t size, int tag, void *mh)
{
	memset(op, 0, sizeof(*op));
	op->kind = FH_OP_SEND;
	op->comm = comm;
	op->n = 1;
	op->data[0] = data;
	op->size[0] = size;
	op->tag[0] = tag;
	op->mh[0] = mh;
	op->expect[0] = size;
}

void fh_op_recv_add(fh_op_t *op, void *data, size_t size, int tag, void *mh, size_t expect)
{
	int i = op->n++;
	op->data[i] = data;
	op->size[i] = size;
	op->tag[i] = tag;
	op->mh[i] = mh;
	op->expect[i] = expect;
}

void fh_op_recv(fh_op_t *op, void *comm, void *data, size_t size, int tag, void *mh)
{
	memset(op, 0, sizeof(*op));
	op->kind = FH_OP_RECV;
	op->comm = comm;
	fh_op_recv_add(op, data, size, tag, mh, size);
}

void fh_op_flush(fh_op_t *op, void *comm, void *data, size_t size, void *mh)
{
	memset(op, 0, sizeof(*op));
	op->kind = FH_OP_FLUSH;
	op->comm = comm;
	op->n = 1;
	op->data[0] = data;
	op->size[0] = size;
	op->mh[0] = mh;
	op->expect[0] = FH_NO_CHECK;
}

int fh_op_post(fh_rank_t *r, fh_net_t *net, fh_op_t *op)
{
	ncclResult_t rc;
	op->req = NULL;
	switch (op->kind) {
	case FH_OP_SEND:
		rc = fh_net_isend(net, op->comm, op->data[0], op->size[0], op->tag[0], op->mh[0],
				  &op->req);
		break;
	case FH_OP_RECV:
		rc = fh_net_irecv(net, op->comm, op->n, op->data, op->size, op->tag, op->mh,
				  &op->req);
		if (rc == ncclSuccess && net->version >= 9 &&
		    op->req == (void *)(uintptr_t)NCCL_NET_OPTIONAL_RECV_COMPLETION)
			return fh_fail(r, "irecv() returned ncclSuccess but left "
					  "NCCL_NET_OPTIONAL_RECV_COMPLETION (0x1) in *request; "
					  "it must store its request or NULL");
		break;
	default: {
		int isz[FH_MAX_GROUP];
		for (int i = 0; i < op->n; i++)
			isz[i] = (int)op->size[i];
		rc = fh_net_iflush(net, op->comm, op->n, op->data, isz, op->mh, &op->req);
		break;
	}
	}
	if (rc != ncclSuccess)
		return fh_fail(r, "%s(n=%d, size=%zu, tag=%d) returned %s", fh_op_kind_name(op->kind),
			       op->n, op->size[0], op->tag[0], fh_result_str(rc));
	if (op->req) {
		op->state = FH_OP_POSTED;
		return FH_OK;
	}
	if (op->kind == FH_OP_FLUSH) {
		op->state = FH_OP_DONE; /* NULL: nothing to flush */
		return FH_OK;
	}
	op->retries++;
	atomic_fetch_add(op->kind == FH_OP_SEND ? &net->send_retries : &net->recv_retries, 1);
	return FH_OK;
}

int fh_op_test(fh_rank_t *r, fh_net_t *net, fh_op_t *op)
{
	int done = 0;
	int sizes[FH_MAX_GROUP];
	for (int i = 0; i < FH_MAX_GROUP; i++)
		sizes[i] = -1;
	ncclResult_t rc = fh_net_test(net, op->req, &done, op->kind == FH_OP_FLUSH ? NULL : sizes);
	if (rc != ncclSuccess)
		return fh_fail(r, "test() of %s(size=%zu, tag=%d) returned %s",
			       fh_op_kind_name(op->kind), op->size[0], op->tag[0], fh_result_str(rc));
	if (!done)
		return FH_OK;
	op->state = FH_OP_DONE;
	for (int i = 0; i < op->n; i++)
		op->got[i] = sizes[i];
	if (op->kind == FH_OP_SEND) {
		/* The plugin need not report a send's size; if it does it must be right. */
		if (sizes[0] != -1 && op->expect[0] != FH_NO_CHECK && (size_t)sizes[0] != op->expect[0])
			return fh_fail(r, "test() of isend(size=%zu) reported size %d", op->size[0],
				       sizes[0]);
	} else if (op->kind == FH_OP_RECV) {
		for (int i = 0; i < op->n; i++) {
			if (op->expect[i] == FH_NO_CHECK)
				continue;
			if (sizes[i] < 0 || (size_t)sizes[i] != op->expect[i])
				return fh_fail(r, "test() of irecv reported %d bytes for buffer %d/%d "
						  "(tag %d, posted %zu), expected %zu",
					       sizes[i], i, op->n, op->tag[i], op->size[i],
					       op->expect[i]);
		}
	}
	return FH_OK;
}

int fh_ops_run(fh_rank_t *r, fh_net_t *net, fh_op_t *ops, int nops, int window)
{
	if (nops <= 0)
		return FH_OK;
	if (window < 1)
		window = 1;
	/* Chain the ops of each comm in array order. */
	int *next = malloc(sizeof(int) * (size_t)nops);
	int *cpost = malloc(sizeof(int) * (size_t)nops); /* per comm: next to post */
	int *ctest = malloc(sizeof(int) * (size_t)nops); /* per comm: oldest not done */
	int *cflight = calloc((size_t)nops, sizeof(int));
	int *ctail = malloc(sizeof(int) * (size_t)nops);
	void **comms = malloc(sizeof(void *) * (size_t)nops);
	int ret = FH_OK;
	if (!next || !cpost || !ctest || !cflight || !ctail || !comms) {
		ret = fh_fail(r, "out of memory");
		goto out;
	}
	int ncomms = 0;
	for (int i = 0; i < nops; i++) {
		ops[i].state = FH_OP_PENDING;
		ops[i].req = NULL;
		next[i] = -1;
		int c;
		for (c = 0; c < ncomms; c++)
			if (comms[c] == ops[i].comm)
				break;
		if (c == ncomms) {
			comms[ncomms++] = ops[i].comm;
			cpost[c] = ctest[c] = i;
		} else {
			next[ctail[c]] = i;
		}
		ctail[c] = i;
	}

	int done = 0;
	unsigned idle = 0;
	double last_progress = fh_now(), last_stage = 0;
	while (done < nops) {
		int progress = 0;
		for (int c = 0; c < ncomms; c++) {
			while (cpost[c] >= 0 && cflight[c] < window) {
				fh_op_t *op = &ops[cpost[c]];
				if (fh_op_post(r, net, op)) {
					ret = FH_FAIL;
					goto out;
				}
				if (op->state == FH_OP_PENDING)
					break; /* retry later, after testing */
				progress = 1;
				if (op->state == FH_OP_DONE)
					done++;
				else
					cflight[c]++;
				cpost[c] = next[cpost[c]];
			}
			while (ctest[c] >= 0 && ops[ctest[c]].state == FH_OP_DONE)
				ctest[c] = next[ctest[c]];
			if (ctest[c] >= 0 && ops[ctest[c]].state == FH_OP_POSTED) {
				fh_op_t *op = &ops[ctest[c]];
				if (fh_op_test(r, net, op)) {
					ret = FH_FAIL;
					goto out;
				}
				if (op->state == FH_OP_DONE) {
					done++;
					cflight[c]--;
					ctest[c] = next[ctest[c]];
					progress = 1;
				}
			}
		}
		double now = fh_now();
		if (progress) {
			idle = 0;
			last_progress = now;
			continue;
		}
		if (now - last_progress > 2.0 && now - last_stage > 2.0) {
			int first = -1;
			for (int i = 0; i < nops && first < 0; i++)
				if (ops[i].state != FH_OP_DONE)
					first = i;
			fh_stage(r, "requests %d/%d done; oldest unfinished: #%d %s(size=%zu, tag=%d) %s, "
				    "no progress for %.0fs",
				 done, nops, first, fh_op_kind_name(ops[first].kind), ops[first].size[0],
				 ops[first].tag[0],
				 ops[first].state == FH_OP_POSTED ? "posted, test() not done"
								  : "not yet accepted (NULL request)",
				 now - last_progress);
			last_stage = now;
		}
		fh_relax(&idle);
	}
out:
	free(next);
	free(cpost);
	free(ctest);
	free(cflight);
	free(ctail);
	free(comms);
	return ret;
}
