/*
 * list.h - intrusive doubly linked list. Nodes live inside their owners; the
 * list never allocates. Recover the owner with container_of.
 */
#ifndef UTIL_LIST_H
#define UTIL_LIST_H

#include <stddef.h>
#include <stdbool.h>

#ifndef container_of /* libfabric's fabric.h defines the same */
#define container_of(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))
#endif

struct dlist {
	struct dlist *next, *prev;
};

static inline void dlist_init(struct dlist *head) { head->next = head->prev = head; }
static inline bool dlist_empty(const struct dlist *head) { return head->next == head; }

static inline void dlist_insert_tail(struct dlist *head, struct dlist *item)
{
	item->prev = head->prev;
	item->next = head;
	head->prev->next = item;
	head->prev = item;
}

static inline void dlist_insert_head(struct dlist *head, struct dlist *item)
{
	item->next = head->next;
	item->prev = head;
	head->next->prev = item;
	head->next = item;
}

/* Removes item and leaves it self-linked, so a second remove is harmless. */
static inline void dlist_remove(struct dlist *item)
{
	item->prev->next = item->next;
	item->next->prev = item->prev;
	dlist_init(item);
}

static inline struct dlist *dlist_pop_head(struct dlist *head)
{
	struct dlist *item = head->next;
	if (item == head)
		return NULL;
	dlist_remove(item);
	return item;
}

#define dlist_foreach(head, it) for ((it) = (head)->next; (it) != (head); (it) = (it)->next)
/* Safe against removal of `it` inside the loop body. */
#define dlist_foreach_safe(head, it, tmp)                                                 \
	for ((it) = (head)->next, (tmp) = (it)->next; (it) != (head); (it) = (tmp), (tmp) = (it)->next)

#endif
