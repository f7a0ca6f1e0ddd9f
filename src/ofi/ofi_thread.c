/*
 * ofi_thread.c - an endpoint's progress thread: it reads the endpoint's
 * completions all the time while bulk work is under way (busy threads, one
 * per rail), else only when no other thread has for OFI_EP_IDLE_NS; and the
 * bulk count that wakes it.
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ofi/ofi.h"
#include "ofi/ofi_int.h"
#include "log/log.h"
#include "util/util.h"

/* Every endpoint with a running thread, so that exit() stops them before
 * libfabric's destructors close the providers under them (NCCL before 2.28
 * never finalizes). atexit from a shared object also runs at its dlclose. */
static pthread_mutex_t threads_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ofi_ep *threads_eps[64];
static int threads_n;
static bool threads_atexit;

static void threads_forget(struct ofi_ep *ep)
{
	pthread_mutex_lock(&threads_lock);
	for (int i = 0; i < threads_n; i++) {
		if (threads_eps[i] == ep) {
			threads_eps[i] = threads_eps[--threads_n];
			break;
		}
	}
	pthread_mutex_unlock(&threads_lock);
}

static void thread_wake(struct ofi_ep *ep)
{
	pthread_mutex_lock(&ep->wake_lock);
	pthread_cond_signal(&ep->wake);
	pthread_mutex_unlock(&ep->wake_lock);
}

static void thread_stop(struct ofi_ep *ep)
{
	atomic_store(&ep->thread_run, false);
	thread_wake(ep);
	pthread_join(ep->thread, NULL);
	ep->has_thread = false;
}

static void threads_stop_all(void)
{
	pthread_mutex_lock(&threads_lock);
	for (int i = 0; i < threads_n; i++)
		thread_stop(threads_eps[i]);
	threads_n = 0;
	pthread_mutex_unlock(&threads_lock);
}

/* Sleeps until bulk work starts on a busy thread's endpoint, or for the idle
 * interval; then reads the CQ if no other thread has for that long. */
static void thread_idle(struct ofi_ep *ep)
{
	struct timespec until;
	clock_gettime(CLOCK_MONOTONIC, &until);
	uint64_t ns = (uint64_t)until.tv_nsec + OFI_EP_IDLE_NS;
	until.tv_sec += (time_t)(ns / 1000000000ULL);
	until.tv_nsec = (long)(ns % 1000000000ULL);
	pthread_mutex_lock(&ep->wake_lock);
	if (atomic_load_explicit(&ep->thread_run, memory_order_relaxed) &&
	    !(ep->thread_busy && atomic_load_explicit(&ep->bulk, memory_order_acquire) > 0))
		(void)pthread_cond_timedwait(&ep->wake, &ep->wake_lock, &until);
	pthread_mutex_unlock(&ep->wake_lock);
	uint64_t last = atomic_load_explicit(&ep->last_read_ns, memory_order_relaxed);
	if (util_coarse_ns() - last >= OFI_EP_IDLE_NS)
		(void)ofi_ep_progress(ep);
}

static void *progress_main(void *arg)
{
	struct ofi_ep *ep = arg;
	unsigned idle = 0;
	while (atomic_load_explicit(&ep->thread_run, memory_order_relaxed)) {
		if (!ep->thread_busy || atomic_load_explicit(&ep->bulk, memory_order_acquire) == 0) {
			thread_idle(ep);
			idle = 0;
			continue;
		}
		int n = ofi_ep_progress(ep);
		if (n > 0) {
			idle = 0;
			continue;
		}
		/* Spin while data is likely, then back off: a transfer waiting on
		 * its peer costs little CPU, and test() still progresses on NCCL's
		 * thread. */
		if (++idle < 256) {
			sched_yield();
		} else {
			struct timespec ts = { 0, idle < 4096 ? 20000 : 200000 };
			nanosleep(&ts, NULL);
		}
	}
	return NULL;
}

void ofi_ep_bulk_hold(struct ofi_ep *ep)
{
	if (atomic_fetch_add_explicit(&ep->bulk, 1, memory_order_acq_rel) == 0 && ep->thread_busy)
		thread_wake(ep);
}

void ofi_ep_bulk_begin(struct ofi_op *op)
{
	op->bulk = true;
	ofi_ep_bulk_hold(op->ep);
}

int ofi_ep_start_progress_thread(struct ofi_ep *ep, bool busy)
{
	pthread_mutex_lock(&threads_lock);
	if (threads_n == (int)UTIL_ARRAY_SIZE(threads_eps)) {
		pthread_mutex_unlock(&threads_lock);
		LOG_WARN(NCCL_INIT | NCCL_NET, "device %s: more than %d progress threads; rail %d "
			 "progresses only when NCCL tests", ep->dom->name, threads_n, ep->index);
		return 0;
	}
	if (!threads_atexit)
		threads_atexit = atexit(threads_stop_all) == 0;
	threads_eps[threads_n++] = ep;
	pthread_mutex_unlock(&threads_lock);
	atomic_store(&ep->thread_run, true);
	ep->thread_busy = busy;
	int rc = pthread_create(&ep->thread, NULL, progress_main, ep);
	if (rc) {
		threads_forget(ep);
		LOG_WARN(NCCL_INIT | NCCL_NET, "device %s: cannot start a progress thread: %s",
			 ep->dom->name, strerror(rc));
		return -FI_ENOMEM;
	}
	ep->has_thread = true;
	return 0;
}

void ofi_thread_end(struct ofi_ep *ep)
{
	threads_forget(ep);
	thread_stop(ep);
}
