/*
 * freelist.h - a fixed-capacity pool: objects are carved out once (inside
 * their owner) and recycled through an intrusive LIFO list, so the data path
 * never allocates. Thread-safe; the lock is held for a pointer swap.
 */
#ifndef UTIL_FREELIST_H
#define UTIL_FREELIST_H

#include <pthread.h>
#include <stddef.h>

struct util_free_node {
	struct util_free_node *next;
};

struct util_freelist {
	pthread_mutex_t lock;
	struct util_free_node *head;
	int available;
};

static inline void util_freelist_init(struct util_freelist *fl)
{
	pthread_mutex_init(&fl->lock, NULL);
	fl->head = NULL;
	fl->available = 0;
}

static inline void util_freelist_destroy(struct util_freelist *fl)
{
	pthread_mutex_destroy(&fl->lock);
}

static inline void util_freelist_push(struct util_freelist *fl, struct util_free_node *n)
{
	pthread_mutex_lock(&fl->lock);
	n->next = fl->head;
	fl->head = n;
	fl->available++;
	pthread_mutex_unlock(&fl->lock);
}

/* NULL when the pool is exhausted. */
static inline struct util_free_node *util_freelist_pop(struct util_freelist *fl)
{
	pthread_mutex_lock(&fl->lock);
	struct util_free_node *n = fl->head;
	if (n) {
		fl->head = n->next;
		fl->available--;
	}
	pthread_mutex_unlock(&fl->lock);
	return n;
}

#endif
