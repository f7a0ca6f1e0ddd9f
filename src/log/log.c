#include "log/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>

#include "util/util.h"

static _Atomic(ncclDebugLogger_t) nccl_logger;
static atomic_int stderr_level = NCCL_LOG_WARN;
static atomic_int trace_enabled;

void log_read_env(void)
{
	const char *v = getenv("NCCL_DEBUG");
	int level = NCCL_LOG_WARN; /* NCCL's own default prints WARN only */
	if (v) {
		if (!strcasecmp(v, "NONE"))
			level = NCCL_LOG_NONE;
		else if (!strcasecmp(v, "VERSION"))
			level = NCCL_LOG_VERSION;
		else if (!strcasecmp(v, "WARN"))
			level = NCCL_LOG_WARN;
		else if (!strcasecmp(v, "INFO"))
			level = NCCL_LOG_INFO;
		else if (!strcasecmp(v, "ABORT"))
			level = NCCL_LOG_ABORT;
		else if (!strcasecmp(v, "TRACE"))
			level = NCCL_LOG_TRACE;
	}
	atomic_store(&stderr_level, level);
	atomic_store(&trace_enabled, level >= NCCL_LOG_TRACE);
}

void log_set_logger(ncclDebugLogger_t logger)
{
	atomic_store(&nccl_logger, logger);
	log_read_env();
}

int log_trace_enabled(void) { return atomic_load_explicit(&trace_enabled, memory_order_relaxed); }

static const char *level_name(ncclDebugLogLevel level)
{
	switch (level) {
	case NCCL_LOG_WARN: return "WARN";
	case NCCL_LOG_INFO: return "INFO";
	case NCCL_LOG_TRACE: return "TRACE";
	case NCCL_LOG_ABORT: return "ABORT";
	case NCCL_LOG_VERSION: return "VERSION";
	default: return "";
	}
}

void log_msg(ncclDebugLogLevel level, unsigned long subsys, const char *file, int line,
	     const char *fmt, ...)
{
	ncclDebugLogger_t logger = atomic_load(&nccl_logger);
	if (!logger && (int)level > atomic_load(&stderr_level))
		return;

	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);

	if (logger) {
		logger(level, subsys, file, line, "%s", msg);
		return;
	}
	/* Same shape as NCCL's lines: host:pid:tid [fabric] LEVEL message. */
	char host[64] = "";
	gethostname(host, sizeof(host) - 1);
	fprintf(stderr, "%s:%d:%ld [fabric] %s %s\n", host, (int)getpid(), (long)syscall(SYS_gettid),
		level_name(level), msg);
}

unsigned long long log_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000000000ULL + (unsigned long long)ts.tv_nsec;
}

int log_ratelimit_take(struct log_ratelimit *rl, unsigned long long now_ns, unsigned *held)
{
	unsigned long long next = atomic_load(&rl->next_ns);
	if (now_ns < next ||
	    !atomic_compare_exchange_strong(&rl->next_ns, &next, now_ns + LOG_RATELIMIT_NS)) {
		atomic_fetch_add(&rl->suppressed, 1);
		*held = 0;
		return 0;
	}
	*held = atomic_exchange(&rl->suppressed, 0);
	return 1;
}
