/*
 * freelist.h - a fixed-capacity pool: objects are carved out once (inside
 * their owner) and recycled through an intrusive LIFO list, so the data path
 * never allocates. Thread-safe; the lock is held for a pointer swap.
 */
#ifndef FAB_UTIL_FREELIST_H
#define FAB_UTIL_FREELIST_H

#include <pthread.h>
#include <stddef.h>

struct fab_free_node {
	struct fab_free_node *next;
};

struct fab_freelist {
	pthread_mutex_t lock;
	struct fab_free_node *head;
	int available;
};

static inline void fab_freelist_init(struct fab_freelist *fl)
{
	pthread_mutex_init(&fl->lock, NULL);
	fl->head = NULL;
	fl->available = 0;
}

static inline void fab_freelist_destroy(struct fab_freelist *fl)
{
	pthread_mutex_destroy(&fl->lock);
}

static inline void fab_freelist_push(struct fab_freelist *fl, struct fab_free_node *n)
{
	pthread_mutex_lock(&fl->lock);
	n->next = fl->head;
	fl->head = n;
	fl->available++;
	pthread_mutex_unlock(&fl->lock);
}

/* NULL when the pool is exhausted. */
static inline struct fab_free_node *fab_freelist_pop(struct fab_freelist *fl)
{
	pthread_mutex_lock(&fl->lock);
	struct fab_free_node *n = fl->head;
	if (n) {
		fl->head = n->next;
		fl->available--;
	}
	pthread_mutex_unlock(&fl->lock);
	return n;
}

#endif
