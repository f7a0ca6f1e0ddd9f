/*
 * ofi_addr.c - checks a peer address from the wire before libfabric sees it.
 * Pure: no libfabric call. A handle or a CONNECT from another process carries
 * bytes that fi_av_insert would parse as an address of the domain's format;
 * a sockaddr with the wrong family or length, or an unterminated string,
 * makes providers read past the buffer or poison the address vector for every
 * later connection. Such an address is refused here, with the reason.
 */
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "ofi/ofi.h"

const char *ofi_addr_format_name(uint32_t f)
{
	switch (f) {
	case FI_SOCKADDR: return "FI_SOCKADDR";
	case FI_SOCKADDR_IN: return "FI_SOCKADDR_IN";
	case FI_SOCKADDR_IN6: return "FI_SOCKADDR_IN6";
	case FI_ADDR_STR: return "FI_ADDR_STR";
	default: return "provider-specific";
	}
}

static int sockaddr_check(const void *addr, size_t len, int want_family, char *why, size_t n)
{
	sa_family_t fam;
	if (len < sizeof(fam)) {
		snprintf(why, n, "%zu bytes cannot hold a socket address", len);
		return -FI_EINVAL;
	}
	memcpy(&fam, addr, sizeof(fam)); /* the bytes may be unaligned */
	size_t need = fam == AF_INET ? sizeof(struct sockaddr_in) :
		      fam == AF_INET6 ? sizeof(struct sockaddr_in6) : 0;
	if (!need || (want_family && fam != want_family)) {
		snprintf(why, n, "socket address family %u where %s was expected", (unsigned)fam,
			 want_family == AF_INET ? "AF_INET" :
			 want_family == AF_INET6 ? "AF_INET6" : "AF_INET or AF_INET6");
		return -FI_EINVAL;
	}
	if (len != need) {
		snprintf(why, n, "%zu bytes for a socket address of %zu", len, need);
		return -FI_EINVAL;
	}
	return 0;
}

int ofi_addr_check(uint32_t addr_format, const void *addr, size_t len, char *why, size_t why_len)
{
	why[0] = '\0';
	if (!addr || len == 0 || len > OFI_ADDR_MAX) {
		snprintf(why, why_len, "address of %zu bytes (1..%d allowed)", len, OFI_ADDR_MAX);
		return -FI_EINVAL;
	}
	switch (addr_format) {
	case FI_SOCKADDR: return sockaddr_check(addr, len, 0, why, why_len);
	case FI_SOCKADDR_IN: return sockaddr_check(addr, len, AF_INET, why, why_len);
	case FI_SOCKADDR_IN6: return sockaddr_check(addr, len, AF_INET6, why, why_len);
	case FI_ADDR_STR: {
		/* "proto://...": terminated inside the bytes, printable, not empty */
		const unsigned char *s = addr;
		const unsigned char *nul = memchr(s, '\0', len);
		if (!nul) {
			snprintf(why, why_len, "string address of %zu bytes without its terminator", len);
			return -FI_EINVAL;
		}
		if (nul == s) {
			snprintf(why, why_len, "empty string address");
			return -FI_EINVAL;
		}
		for (const unsigned char *p = s; p < nul; p++) {
			if (*p < 0x20 || *p > 0x7e) {
				snprintf(why, why_len, "string address with byte 0x%02x at offset %zu",
					 *p, (size_t)(p - s));
				return -FI_EINVAL;
			}
		}
		return 0;
	}
	default:
		/* a provider's own binary format: only its length can be checked */
		return 0;
	}
}
