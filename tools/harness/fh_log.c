/*
 * fh_log.c - the logger callback handed to the plugin's init().
 *
 * Cases assert that error paths WARN, so WARN lines are counted per process.
 * Each line goes out with a single write() so lines from several ranks and
 * plugin threads do not interleave.
 */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <pthread.h>
#include <unistd.h>

static int fh_log_rank = -1;
static atomic_ulong fh_log_warns;
/* -1: not read yet; else the highest level to print. */
static atomic_int fh_log_level = -1;

void fh_log_set_rank(int rank)
{
	fh_log_rank = rank;
}

unsigned long fh_log_warn_count(void)
{
	return atomic_load(&fh_log_warns);
}

static char fh_log_needle[128];
static atomic_ulong fh_log_watched;

void fh_log_watch(const char *needle)
{
	snprintf(fh_log_needle, sizeof(fh_log_needle), "%s", needle ? needle : "");
	atomic_store(&fh_log_watched, 0);
}

/* The last message, of any level and printed or not, that holds a needle. */
static char fh_log_keep_needle[128];
static char fh_log_kept_text[2048];
static pthread_mutex_t fh_log_keep_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int fh_log_keeping;

void fh_log_keep(const char *needle)
{
	pthread_mutex_lock(&fh_log_keep_lock);
	snprintf(fh_log_keep_needle, sizeof(fh_log_keep_needle), "%s", needle ? needle : "");
	fh_log_kept_text[0] = '\0';
	atomic_store(&fh_log_keeping, fh_log_keep_needle[0] != '\0');
	pthread_mutex_unlock(&fh_log_keep_lock);
}

int fh_log_kept(char *out, size_t len)
{
	pthread_mutex_lock(&fh_log_keep_lock);
	snprintf(out, len, "%s", fh_log_kept_text);
	pthread_mutex_unlock(&fh_log_keep_lock);
	return out[0] != '\0';
}

unsigned long fh_log_watch_count(void)
{
	return atomic_load(&fh_log_watched);
}

static int fh_log_level_get(void)
{
	int lvl = atomic_load(&fh_log_level);
	if (lvl >= 0)
		return lvl;
	const char *env = getenv("NCCL_DEBUG");
	lvl = NCCL_LOG_WARN;
	if (env && !strcasecmp(env, "INFO"))
		lvl = NCCL_LOG_INFO;
	else if (env && !strcasecmp(env, "TRACE"))
		lvl = NCCL_LOG_TRACE;
	atomic_store(&fh_log_level, lvl);
	return lvl;
}

static const char *fh_log_level_name(ncclDebugLogLevel level)
{
	switch (level) {
	case NCCL_LOG_VERSION:
		return "VERSION";
	case NCCL_LOG_WARN:
		return "WARN";
	case NCCL_LOG_INFO:
		return "INFO";
	case NCCL_LOG_ABORT:
		return "ABORT";
	case NCCL_LOG_TRACE:
		return "TRACE";
	default:
		return "NONE";
	}
}

void fh_logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
	       const char *fmt, ...)
{
	(void)flags;
	if (level == NCCL_LOG_WARN)
		atomic_fetch_add(&fh_log_warns, 1);
	int always = level == NCCL_LOG_WARN || level == NCCL_LOG_ABORT;
	int print = 1;
	if (!always) {
		/* ABORT (4) sits between INFO and TRACE in the enum; only TRACE
		 * needs the higher setting. */
		int want = fh_log_level_get();
		if (level == NCCL_LOG_TRACE ? want < NCCL_LOG_TRACE : want < NCCL_LOG_INFO)
			print = 0;
		if (level == NCCL_LOG_NONE)
			return;
	}
	int keep = atomic_load(&fh_log_keeping);
	if (!print && !keep)
		return;

	char buf[2048];
	int off = snprintf(buf, sizeof(buf), "[rank %d] %s %s:%d ", fh_log_rank,
			   fh_log_level_name(level), file ? file : "?", line);
	if (off < 0)
		return;
	if ((size_t)off < sizeof(buf) && fmt) {
		va_list ap;
		va_start(ap, fmt);
		int n = vsnprintf(buf + off, sizeof(buf) - (size_t)off, fmt, ap);
		va_end(ap);
		if (n > 0)
			off += n;
	}
	if ((size_t)off >= sizeof(buf) - 1)
		off = (int)sizeof(buf) - 2;
	buf[off] = '\0';
	if (keep) {
		pthread_mutex_lock(&fh_log_keep_lock);
		if (fh_log_keep_needle[0] && strstr(buf, fh_log_keep_needle))
			snprintf(fh_log_kept_text, sizeof(fh_log_kept_text), "%s", buf);
		pthread_mutex_unlock(&fh_log_keep_lock);
	}
	if (!print)
		return;
	if (level == NCCL_LOG_WARN && fh_log_needle[0] && strstr(buf, fh_log_needle))
		atomic_fetch_add(&fh_log_watched, 1);
	/* The plugin's messages may or may not end in a newline. */
	while (off > 0 && buf[off - 1] == '\n')
		off--;
	buf[off++] = '\n';
	ssize_t w = write(STDERR_FILENO, buf, (size_t)off);
	(void)w;
}
