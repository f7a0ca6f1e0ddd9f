#include "proto/proto_cts.h"

static unsigned slot_of(uint64_t key)
{
	key ^= key >> 33;
	key *= 0xff51afd7ed558ccdULL;
	key ^= key >> 33;
	return (unsigned)(key & (PROTO_CTS_SLOTS - 1));
}

int proto_cts_put(struct proto_cts_table *t, uint64_t key, const struct proto_cts_entry *e)
{
	if (t->used >= PROTO_CTS_SLOTS - 1)
		return -1;
	for (unsigned i = slot_of(key);; i = (i + 1) & (PROTO_CTS_SLOTS - 1)) {
		if (t->slot[i].key == key)
			return -1;
		if (t->slot[i].key == 0) {
			t->slot[i].key = key;
			t->slot[i].e = *e;
			t->used++;
			return 0;
		}
	}
}

bool proto_cts_take(struct proto_cts_table *t, uint64_t key, struct proto_cts_entry *e)
{
	unsigned i = slot_of(key);
	for (;; i = (i + 1) & (PROTO_CTS_SLOTS - 1)) {
		if (t->slot[i].key == 0)
			return false;
		if (t->slot[i].key == key)
			break;
	}
	*e = t->slot[i].e;
	t->used--;
	/* backward-shift deletion keeps every chain unbroken without tombstones */
	unsigned hole = i;
	for (unsigned j = (i + 1) & (PROTO_CTS_SLOTS - 1); t->slot[j].key;
	     j = (j + 1) & (PROTO_CTS_SLOTS - 1)) {
		unsigned home = slot_of(t->slot[j].key);
		/* move j into the hole unless its home lies cyclically in (hole, j] */
		bool stays = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
		if (!stays) {
			t->slot[hole] = t->slot[j];
			hole = j;
		}
	}
	t->slot[hole].key = 0;
	return true;
}
