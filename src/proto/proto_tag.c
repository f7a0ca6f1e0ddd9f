/*
 * proto_tag.c - the per-(connection, NCCL tag) sequence numbers that data
 * tags carry (proto_tag.h): a small table per comm, most recent tag first.
 */
#include "proto/proto_tag.h"

#include <stdlib.h>

struct proto_seq_entry *proto_seq_get(struct proto_seq_table *t, uint32_t tag)
{
	for (int i = 0; i < t->n; i++) {
		if (t->e[i].tag == tag) {
			/* move to front: NCCL uses one or a few tags per connection */
			if (i) {
				struct proto_seq_entry tmp = t->e[i];
				t->e[i] = t->e[0];
				t->e[0] = tmp;
			}
			return &t->e[0];
		}
	}
	if (t->n == t->cap) {
		int cap = t->cap ? t->cap * 2 : 4;
		void *n = realloc(t->e, (size_t)cap * sizeof(*t->e));
		if (!n)
			return NULL;
		t->e = n;
		t->cap = cap;
	}
	t->e[t->n] = t->e[0];
	t->e[0].tag = tag;
	t->e[0].seq = 0;
	t->n++;
	return &t->e[0];
}

void proto_seq_free(struct proto_seq_table *t)
{
	free(t->e);
	t->e = NULL;
	t->n = t->cap = 0;
}
