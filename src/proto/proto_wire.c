#include "proto/proto_wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

uint64_t proto_prov_hash(const char *prov_name, uint32_t addr_format, unsigned tag_bits)
{
	uint64_t h = util_fnv1a64(prov_name, strlen(prov_name), 0);
	h = util_fnv1a64(&addr_format, sizeof(addr_format), h);
	return util_fnv1a64(&tag_bits, sizeof(tag_bits), h);
}

void proto_handle_encode(struct proto_handle *h, uint32_t listen_id, unsigned tag_bits,
			 uint64_t prov_hash, uint64_t nonce, const void *addr, size_t addr_len)
{
	memset(h, 0, sizeof(*h));
	h->magic = PROTO_MAGIC;
	h->version = PROTO_VERSION;
	h->addr_len = (uint8_t)addr_len;
	h->listen_id = listen_id;
	h->tag_bits = tag_bits;
	h->prov_hash = prov_hash;
	h->nonce = nonce;
	memcpy(h->addr, addr, addr_len);
	h->checksum = util_fnv1a64(h, offsetof(struct proto_handle, checksum), 0);
}

int proto_handle_check(const void *buf, uint64_t prov_hash, char *why, size_t why_len)
{
	struct proto_handle h;
	memcpy(&h, buf, sizeof(h)); /* NCCL's buffer carries no alignment promise */
	if (h.magic != PROTO_MAGIC) {
		snprintf(why, why_len, "not a Fabric plugin handle (magic 0x%08x)", h.magic);
		return -1;
	}
	/* version before checksum: a future layout may move the checksum */
	if (h.version != PROTO_VERSION) {
		snprintf(why, why_len, "handle version %u, this plugin speaks %u: mixed plugin versions",
			 h.version, PROTO_VERSION);
		return -1;
	}
	if (h.checksum != util_fnv1a64(&h, offsetof(struct proto_handle, checksum), 0)) {
		snprintf(why, why_len, "checksum mismatch: the handle was corrupted in transit");
		return -1;
	}
	if (h.addr_len == 0 || h.addr_len > OFI_ADDR_MAX) {
		snprintf(why, why_len, "address length %u out of range", h.addr_len);
		return -1;
	}
	if (h.prov_hash != prov_hash) {
		snprintf(why, why_len,
			 "the handle comes from another provider or address format: every rank must "
			 "select the same provider (check FI_PROVIDER and NCCL_FABRIC_PROVIDER)");
		return -1;
	}
	if (h.listen_id == 0) {
		snprintf(why, why_len, "listen id 0 is invalid");
		return -1;
	}
	return 0;
}

void proto_msg_seal(struct proto_msg *m, uint64_t route)
{
	m->route = route;
	m->magic = PROTO_MAGIC;
	m->version = PROTO_VERSION;
	m->checksum = util_fnv1a64(m, offsetof(struct proto_msg, checksum), 0);
}

int proto_msg_check(const struct proto_msg *m, size_t len, char *why, size_t why_len)
{
	if (len != sizeof(*m)) {
		snprintf(why, why_len, "control message of %zu bytes, expected %zu", len, sizeof(*m));
		return -1;
	}
	if (m->magic != PROTO_MAGIC ||
	    m->checksum != util_fnv1a64(m, offsetof(struct proto_msg, checksum), 0)) {
		snprintf(why, why_len, "corrupt control message");
		return -1;
	}
	if (m->version != PROTO_VERSION) {
		snprintf(why, why_len, "control message version %u, expected %u", m->version,
			 PROTO_VERSION);
		return -1;
	}
	if (m->type < PROTO_MSG_CONNECT || m->type > PROTO_MSG_HELD) {
		snprintf(why, why_len, "unknown control message type %u", m->type);
		return -1;
	}
	if (m->type == PROTO_MSG_REJECT || m->type == PROTO_MSG_HELD)
		return 0;
	if (m->nrails < 1 || m->nrails > PROTO_MAX_RAILS) {
		snprintf(why, why_len, "%u rails out of range", m->nrails);
		return -1;
	}
	if (m->rail >= m->nrails) {
		snprintf(why, why_len, "rail %u of %u rails out of range", m->rail, m->nrails);
		return -1;
	}
	for (unsigned i = 0; i < m->nrails; i++) {
		if (m->alen[i] == 0 || m->alen[i] > OFI_ADDR_MAX) {
			snprintf(why, why_len, "address length %u of rail %u out of range", m->alen[i], i);
			return -1;
		}
	}
	return 0;
}

const char *proto_reject_text(uint32_t reason)
{
	switch (reason) {
	case PROTO_REJECT_NONCE:
		return "the handle does not belong to the listener's current listen comm (stale handle)";
	case PROTO_REJECT_PROVIDER:
		return "the two sides use different providers or tag layouts";
	case PROTO_REJECT_RESOURCES:
		return "the listener could not create the connection (see its log)";
	case PROTO_REJECT_NO_LISTENER:
		return "no listen comm with that id on the peer: it was closed, or the handle is stale";
	default:
		return "unknown reason";
	}
}
