/*
 * log.h - the plugin's logging. Under NCCL every line goes through NCCL's
 * logger (so NCCL_DEBUG, NCCL_DEBUG_SUBSYS and NCCL_DEBUG_FILE apply). Driven
 * outside NCCL (tools, tests) the same lines go to stderr, filtered by the same
 * NCCL_DEBUG levels. Messages start with "NET/Fabric" like NCCL's own
 * transports, so `grep NET/Fabric` finds them in a job log.
 */
#ifndef LOG_H
#define LOG_H

#include "nccl/nccl_net.h"

/* Installs NCCL's logger (NULL returns to the stderr fallback). Thread-safe. */
void log_set_logger(ncclDebugLogger_t logger);
/* Re-reads NCCL_DEBUG for the stderr fallback and the TRACE shortcut. */
void log_read_env(void);
/* True when TRACE lines can be printed: lets hot paths skip formatting. */
int log_trace_enabled(void);

void log_msg(ncclDebugLogLevel level, unsigned long subsys, const char *file, int line,
	     const char *fmt, ...) __attribute__((format(printf, 5, 6)));

#define LOG_WARN(sub, fmt, ...) \
	log_msg(NCCL_LOG_WARN, (sub), __FILE__, __LINE__, "NET/Fabric : " fmt, ##__VA_ARGS__)
#define LOG_INFO(sub, fmt, ...) \
	log_msg(NCCL_LOG_INFO, (sub), __FILE__, __LINE__, "NET/Fabric : " fmt, ##__VA_ARGS__)
#define LOG_TRACE(sub, fmt, ...)                                                              \
	do {                                                                                  \
		if (log_trace_enabled())                                                  \
			log_msg(NCCL_LOG_TRACE, (sub), __FILE__, __LINE__, "NET/Fabric : " fmt, \
				##__VA_ARGS__);                                               \
	} while (0)

/* WARNs about what arrives from other processes (malformed or forged
 * messages, refused addresses) are rate-limited per call site: one a second,
 * the next one saying how many were held back, so a hostile or broken peer
 * cannot flood the job log. */
struct log_ratelimit {
	_Atomic unsigned long long next_ns; /* no WARN before this time */
	_Atomic unsigned suppressed;        /* held back since the last one */
};
#define LOG_RATELIMIT_NS 1000000000ULL
/* True when a WARN may be logged at now_ns; *held gets how many were held back
 * before it. Thread-safe; one winner per interval. */
int log_ratelimit_take(struct log_ratelimit *rl, unsigned long long now_ns, unsigned *held);

#define LOG_WARN_LIMITED(sub, fmt, ...)                                                        \
	do {                                                                                   \
		static struct log_ratelimit log_rl_;                                           \
		unsigned log_held_;                                                            \
		if (log_ratelimit_take(&log_rl_, log_now_ns(), &log_held_)) {              \
			if (log_held_)                                                         \
				LOG_WARN(sub, fmt " (%u more like it in the last second)",     \
					 ##__VA_ARGS__, log_held_);                            \
			else                                                                   \
				LOG_WARN(sub, fmt, ##__VA_ARGS__);                             \
		}                                                                              \
	} while (0)
unsigned long long log_now_ns(void);

#endif
