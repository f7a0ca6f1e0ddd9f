/*
 * Provider profiles (TESTHMEM_PROFILE): the attributes a real RDMA provider
 * reports, and its rules, enforced over the tcp or shm base the way the
 * hardware would enforce them, so a consumer that only works on tcp and shm is
 * caught here.
 *
 * Values come from libfabric's source (a snapshot after v2.6.0,
 * af8ddbe92): the file:line of each is in the table's comments.
 *
 * What a profile changes:
 *  - getinfo: caps, mode, mr_mode, key size, CQ data, inject, message size,
 *    iov limits, queue sizes, message order and tag width are the profile's;
 *    libfabric's hint rules apply (caps, mode or mr_mode bits the consumer
 *    did not offer, more CQ data or a message order the profile lacks: no
 *    entry). Entries are named "<provider>;testhmem", as a layered provider.
 *  - registration: FI_MR_PROV_KEY keys are the provider's (random-looking,
 *    of the profile's width, unique on the host); FI_MR_ENDPOINT registrations
 *    reach the base only once bound to an endpoint and enabled;
 *    without FI_MR_VIRT_ADDR a remote address is an offset into the MR (a
 *    virtual address lands outside it and fails at the target).
 *  - data calls: a missing or foreign desc under FI_MR_LOCAL, more iovs than
 *    iov_limit/rma_iov_limit, a message above the message size, an inject
 *    above inject_size, a tag wider than the tag format: -FI_EINVAL; a tagged
 *    call on a profile without tags: -FI_ENOSYS; cxi's writedata without
 *    FI_CXI_ENABLE_WRITEDATA=1: -FI_ENOSYS; under FI_CONTEXT/FI_CONTEXT2 the
 *    caller's context words are overwritten at the post (the provider owns
 *    them until the completion); only cq_data_size low bytes of CQ data
 *    arrive (th_cq_mask).
 *
 *  - queues (th_rules.c): the operations posted on an endpoint whose
 *    completion the consumer has not read (transmits that will complete to it,
 *    as th_xfer_flags decides, against tx size; receives against rx size): a
 *    post beyond the depth answers -FI_EAGAIN, posting nothing, as a full SQ
 *    does (fabric-profiles.md:20, efa_rma.c:313). Each counted operation is a
 *    node keyed by its context in its CQ's table, inserted before the base sees
 *    it and removed by the completion (or error completion, a cancelled
 *    receive's too) the consumer reads, a failed post or the endpoint's close;
 *    injects, FI_PEEK and completions not asked for are not counted. The
 *    reported size is the profile's, or the base's where it holds fewer (shm:
 *    1024). TESTHMEM_QUEUE_LIMIT=0 turns it off.
 *  - order (th_rules.c), on profiles without FI_ORDER_SAS (efa-direct, opx:
 *    msg_order 0): one CQ entry in four (pseudo-random, TESTHMEM_REORDER_SEED)
 *    is held back and returned after the next read's entries, or alone by the
 *    next read that finds the CQ empty (at once to an sread). With
 *    TESTHMEM_REORDER=all (or =sends), one send in four is also held back and
 *    posted to the base after the endpoint's next send, or at the domain's
 *    next CQ read: opt-in, as the plugin's close-inflight/1000 takes three
 *    times as long with it. RMA is left in the base's order. Host mode only;
 *    TESTHMEM_REORDER=0 turns it off.
 *  - FI_RX_CQ_DATA, with TESTHMEM_RX_CQ_DATA=required (efa-direct on a device
 *    without unsolicited write receives, efa_user_info.c:626-645): the entry
 *    carries the mode and only hints that offer it get one. A write with CQ
 *    data goes to the base without it, followed by an empty untagged message
 *    (an inject, queued in order when the base is full) carrying the data and
 *    length, which takes the target's next posted untagged receive in order
 *    with the messages, or waits in the base until one is posted (efa's RNR
 *    retry, infinite by default: efa_base_ep.c:718). The target's entry gets
 *    that receive's context, FI_REMOTE_CQ_DATA|FI_RMA|FI_REMOTE_WRITE, the
 *    write's length and the masked data (efa_cq.c:18-34,66-97). Host mode only.
 *
 * Virtual addresses over a base that addresses by offset (tcp;ofi_rxm, and
 * cuda mode): the initiator turns the address into an offset with the start
 * of the target's registration, which it finds under the key in a table all
 * processes of the host share (/dev/shm/testhmem-keys-<uid>): keys are given
 * out of that table's counter, so the key names its slot.
 */
#include "testhmem.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#define TH_MR_LEGACY 0x3
#define RMA_ALL (FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE)
#define ORDER_ALL_RMA                                                                      \
	(FI_ORDER_RAR | FI_ORDER_RAW | FI_ORDER_RAS | FI_ORDER_WAR | FI_ORDER_WAW |       \
	 FI_ORDER_WAS | FI_ORDER_SAR | FI_ORDER_SAW | FI_ORDER_SAS)

static const struct th_profile th_profiles[] = {
	{
		/* efa-direct: efa_prov_info.c:12-16,26,46-50,136,156-162,198-208,
		 * 242-253,484,496-500; efa_user_info.c:616-645,709-721; efa_rma.c:43,292-297 */
		.name = "efa-direct",
		.prov = "efa",
		.caps = FI_MSG | FI_SOURCE | FI_LOCAL_COMM | FI_REMOTE_COMM | RMA_ALL,
		.mode = FI_CONTEXT2,
		.mode_hinted = FI_RX_CQ_DATA,
		.mr_mode = FI_MR_LOCAL | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR,
		.mr_key_size = 4,
		.cq_data_size = 4,
		.inject_size = 32,
		.max_msg_size = 1ULL << 30, /* max(MTU, max_rdma) */
		.msg_mtu = 8192,	    /* sends: one MTU (efa_base_ep.c:734-735) */
		.iov_limit = 2,
		.rma_iov_limit = 1,
		.size = 256,
		.msg_order = 0,
		.tag_bits = 0,
		.cuda_api = "ok", /* a no-op (efa_ep.c:141-143) */
	},
	{
		/* efa: efa_prov_info.c:49-50,569-591,606,620-625,647-648,664-679;
		 * efa_cq.h:55; efa_user_info.c:484,515-516; efa_rdm_ep_fiops.c:1611-1632 */
		.name = "efa",
		.prov = "efa",
		.caps = FI_MSG | FI_TAGGED | FI_SOURCE | FI_MULTI_RECV | FI_DIRECTED_RECV |
			FI_LOCAL_COMM | FI_REMOTE_COMM | RMA_ALL,
		.mode = 0,
		.mr_mode = FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR,
		.mr_mode_hinted = FI_MR_LOCAL,
		.mr_key_size = 4,
		.cq_data_size = 4,
		.inject_size = 4096, /* MTU - header, at most 4096 beside shm */
		.max_msg_size = SIZE_MAX,
		.iov_limit = 4,
		.rma_iov_limit = 1,
		.size = 1024,
		.msg_order = FI_ORDER_SAS,
		.tag_bits = 64,
		.cuda_api = "ok", /* with CUDA P2P */
	},
	{
		/* verbs;ofi_rxm: rxm_attr.c:36-44,96; rxm_init.c:93-118,224,329-366,
		 * 382-384,515-520; verbs_info.c:103-105,693-696; rxm_ep.c:327-342 */
		.name = "verbs",
		.prov = "verbs;ofi_rxm",
		.caps = FI_MSG | FI_TAGGED | FI_SOURCE | FI_MULTI_RECV | FI_DIRECTED_RECV |
			FI_LOCAL_COMM | FI_REMOTE_COMM | RMA_ALL,
		.mode = 0,
		.mr_mode = FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR,
		.mr_mode_hinted = FI_MR_LOCAL,
		.mr_key_size = 4,
		.cq_data_size = 4,
		.inject_size = 192, /* verbs inline (256) less rxm's header: inferred */
		.max_msg_size = 1ULL << 30, /* the port's max_msg_sz */
		.iov_limit = 4,
		.rma_iov_limit = 1,
		.size = 2048,
		.msg_order = ORDER_ALL_RMA,
		.tag_bits = 64,
		.cuda_api = "eopnotsupp",
	},
	{
		/* cxi: cxip.h:80,88-96,114,136-154,162,491,540; cxip_info.c:31-136,
		 * 262,313-330,512,686; cxip_dom.c:2019-2035; cxip_rma.c:972-983;
		 * cxip_ep.c:771-781,1400-1418 */
		.name = "cxi",
		.prov = "cxi",
		.caps = FI_MSG | FI_TAGGED | FI_SOURCE | FI_MULTI_RECV | FI_DIRECTED_RECV |
			FI_LOCAL_COMM | FI_REMOTE_COMM | RMA_ALL,
		.mode = 0,
		.mr_mode = FI_MR_ENDPOINT | FI_MR_ALLOCATED | FI_MR_PROV_KEY,
		.mr_key_size = 8,
		.cq_data_size = 8,
		.inject_size = 192, /* C_MAX_IDC_PAYLOAD_UNR (Cassini's header): about 200 */
		.max_msg_size = (1ULL << 32) - 1,
		.iov_limit = 1,
		.rma_iov_limit = 1,
		.size = 1024,
		.msg_order = FI_ORDER_SAS | FI_ORDER_WAW | FI_ORDER_RAR,
		.tag_bits = 48,
		.cuda_api = "eopnotsupp", /* without gdrcopy */
		.writedata_env = "FI_CXI_ENABLE_WRITEDATA",
	},
	{
		/* psm3, the tag60 instance (4 bytes of CQ data): psmx3_attr.c:50-131,
		 * 265-283,356-374,450-494,580-587,738-746; psmx3.h:111-117,438-439 */
		.name = "psm3",
		.prov = "psm3",
		.caps = FI_MSG | FI_TAGGED | FI_SOURCE | FI_MULTI_RECV | FI_DIRECTED_RECV |
			FI_LOCAL_COMM | FI_REMOTE_COMM | RMA_ALL,
		.mode = FI_CONTEXT,
		.mr_mode = 0,
		.mr_key_size = 8,
		.cq_data_size = 4,
		.inject_size = 64,
		.max_msg_size = ((1ULL << 32) - 1) & ~0xFFFULL,
		.iov_limit = 13,
		.rma_iov_limit = 1,
		.size = 1024,
		.msg_order = FI_ORDER_SAS,
		.tag_bits = 60,
		.cuda_api = "ok",
		.tag64_first = 1, /* the tag64 instance (no CQ data) comes first to a hint of 0 */
	},
	{
		/* opx: fi_opx.h:315,322,340-359; fi_opx_init.c:111-139,236;
		 * fi_opx_domain.c:256-273,334,355-361; fi_opx_hfi1_packet.h:79 */
		.name = "opx",
		.prov = "opx",
		.caps = FI_MSG | FI_TAGGED | FI_SOURCE | FI_MULTI_RECV | FI_DIRECTED_RECV |
			FI_LOCAL_COMM | FI_REMOTE_COMM | RMA_ALL,
		.mode = FI_ASYNC_IOV,
		.mr_mode = 0,
		.mr_key_size = 8,
		.cq_data_size = 4,
		.inject_size = 16,
		.max_msg_size = SIZE_MAX,
		.iov_limit = 1,
		.rma_iov_limit = 1,
		.size = 1024,
		.msg_order = 0,
		.tag_bits = 64,
		.cuda_api = "ok",
	},
};

const struct th_profile *th_profile(void)
{
	const char *env = getenv("TESTHMEM_PROFILE");
	size_t i;

	if (!env || !*env || !strcmp(env, "none"))
		return NULL;
	for (i = 0; i < sizeof(th_profiles) / sizeof(th_profiles[0]); i++)
		if (!strcmp(env, th_profiles[i].name))
			return &th_profiles[i];
	FI_WARN(&th_prov, FI_LOG_CORE,
		"TESTHMEM_PROFILE=%s unknown (efa-direct|efa|verbs|cxi|psm3|opx): none\n", env);
	return NULL;
}

static uint64_t all_caps(const struct fi_info *i)
{
	return i->caps | (i->tx_attr ? i->tx_attr->caps : 0) | (i->rx_attr ? i->rx_attr->caps : 0);
}

int th_profile_rx_cq_data(const struct th_profile *p)
{
	const char *env = getenv("TESTHMEM_RX_CQ_DATA");

	return p && (p->mode_hinted & FI_RX_CQ_DATA) && env && !strcmp(env, "required");
}

/* The mode the profile requires of the consumer. */
static uint64_t th_profile_mode(const struct th_profile *p)
{
	return p->mode | (th_profile_rx_cq_data(p) ? FI_RX_CQ_DATA : 0);
}

/* What a hint lacks that the profile requires, for the log; NULL when it fits. */
static const char *th_profile_refuses(const struct th_profile *p, const struct fi_info *h,
				      size_t cq_data)
{
	uint64_t want;

	if (!h)
		return NULL;
	want = all_caps(h) & ~(FI_HMEM | FI_RMA_EVENT | FI_TRIGGER | FI_FENCE);
	if (want & ~p->caps)
		return "caps";
	if (h->mode && (th_profile_mode(p) & ~h->mode))
		return "mode";
	if (h->domain_attr) {
		int m = h->domain_attr->mr_mode;

		/* FI_MR_BASIC (1) and FI_MR_SCALABLE (2): the legacy modes, which a
		 * provider maps (named by value: 2.x headers deprecate the names) */
		if (!(m & TH_MR_LEGACY) && (p->mr_mode & ~m))
			return "mr_mode";
		if (h->domain_attr->cq_data_size > cq_data)
			return "cq_data_size";
	}
	if (h->tx_attr && (h->tx_attr->msg_order & ~p->msg_order))
		return "msg_order";
	if (h->rx_attr && (h->rx_attr->msg_order & ~p->msg_order))
		return "msg_order";
	return NULL;
}

static void set_caps(struct fi_info *i, uint64_t caps)
{
	i->caps = caps;
	if (i->tx_attr)
		i->tx_attr->caps = caps;
	if (i->rx_attr)
		i->rx_attr->caps = caps;
}

/* One entry as the profile reports it, from the base's dup; cq_data 0 makes
 * psm3's tag64 instance. */
static int th_profile_edit(const struct th_profile *p, const struct fi_info *hints,
			   struct fi_info *i, size_t cq_data, unsigned tag_bits)
{
	int hinted_mr = hints && hints->domain_attr ? hints->domain_attr->mr_mode : 0;
	uint64_t caps = p->caps;

	if (hints && all_caps(hints))
		caps &= all_caps(hints) | FI_SOURCE | FI_LOCAL_COMM | FI_REMOTE_COMM;
	if (hints && (all_caps(hints) & FI_HMEM))
		caps |= FI_HMEM;
	if (hints && !(all_caps(hints) & FI_SOURCE))
		caps &= ~FI_SOURCE;
	set_caps(i, caps);
	i->mode = th_profile_mode(p) | (hints ? hints->mode & p->mode_hinted : 0);
	if (i->domain_attr) {
		i->domain_attr->mr_mode = p->mr_mode | (hinted_mr & p->mr_mode_hinted) |
					  ((caps & FI_HMEM) && (hinted_mr & FI_MR_HMEM) ? FI_MR_HMEM : 0);
		i->domain_attr->mr_key_size = p->mr_key_size;
		i->domain_attr->cq_data_size = cq_data;
		i->domain_attr->max_ep_tx_ctx = 1;
		i->domain_attr->max_ep_rx_ctx = 1;
	}
	if (i->ep_attr) {
		i->ep_attr->max_msg_size = p->max_msg_size;
		i->ep_attr->mem_tag_format =
			tag_bits >= 64 ? 0xaaaaaaaaaaaaaaaaULL : tag_bits ? (1ULL << tag_bits) - 1 : 0;
	}
	if (i->tx_attr) {
		i->tx_attr->mode = i->mode;
		i->tx_attr->inject_size = p->inject_size;
		i->tx_attr->iov_limit = p->iov_limit;
		i->tx_attr->rma_iov_limit = p->rma_iov_limit;
		/* the profile's depth, enforced (th_rules.c), where the base
		 * holds that many (shm: 1024 against verbs' 2048) */
		i->tx_attr->size = i->tx_attr->size && i->tx_attr->size < p->size ? i->tx_attr->size
										    : p->size;
		i->tx_attr->msg_order = p->msg_order;
		i->tx_attr->comp_order = 0;
	}
	if (i->rx_attr) {
		i->rx_attr->mode = i->mode;
		i->rx_attr->iov_limit = p->iov_limit;
		i->rx_attr->size = i->rx_attr->size && i->rx_attr->size < p->size ? i->rx_attr->size
										    : p->size;
		i->rx_attr->msg_order = p->msg_order;
		i->rx_attr->comp_order = 0;
	}
	free(i->fabric_attr->prov_name);
	i->fabric_attr->prov_name = strdup(p->prov);
	return i->fabric_attr->prov_name ? 0 : -FI_ENOMEM;
}

int th_profile_entries(const struct th_profile *p, const struct fi_info *hints,
		       struct fi_info *base_entry, struct fi_info ***tail)
{
	size_t cq_variants[2] = { p->cq_data_size, 0 };
	unsigned tag_variants[2] = { p->tag_bits, 64 };
	int n = 1, k, ret;

	/* psm3: to a hint of no CQ data, the tag64 instance first, then tag60 */
	if (p->tag64_first && (!hints || !hints->domain_attr || !hints->domain_attr->cq_data_size)) {
		cq_variants[0] = 0;
		tag_variants[0] = 64;
		cq_variants[1] = p->cq_data_size;
		tag_variants[1] = p->tag_bits;
		n = 2;
	}
	for (k = 0; k < n; k++) {
		const char *why = th_profile_refuses(p, hints, cq_variants[k]);
		struct fi_info *dup;

		if (why) {
			th_log("profile %s refuses hints=%s", p->name, why);
			continue;
		}
		dup = fi_dupinfo(base_entry);
		if (!dup)
			return -FI_ENOMEM;
		ret = th_profile_edit(p, hints, dup, cq_variants[k], tag_variants[k]);
		if (ret) {
			fi_freeinfo(dup);
			return ret;
		}
		**tail = dup;
		*tail = &dup->next;
	}
	return 0;
}

int th_profile_writedata_ok(const struct th_profile *p)
{
	const char *env;

	if (!p || !p->writedata_env)
		return 1;
	env = getenv(p->writedata_env);
	return env && (!strcmp(env, "1") || !strcasecmp(env, "true") || !strcasecmp(env, "yes"));
}

/* ---- the host's key table ---- */

#define TH_KEYS_SLOTS (1u << 20)
#define TH_KEYS_MAGIC 0x74684b6579733031ULL /* "thKeys01" */
#define TH_KEY_MUL32 0x9e3779b1u
#define TH_KEY_MUL64 0x9e3779b97f4a7c15ULL
#define TH_KEY_XOR64 0x5bd1e9955bd1e995ULL

struct th_key_slot {
	_Atomic uint64_t key; /* 0: free */
	_Atomic uint64_t va;
	_Atomic uint64_t len;
};

struct th_keys {
	_Atomic uint64_t magic;
	_Atomic uint64_t next;
	struct th_key_slot slot[TH_KEYS_SLOTS];
};

static struct th_keys *th_keys;
static pthread_once_t th_keys_once = PTHREAD_ONCE_INIT;

static void th_keys_map(void)
{
	char path[96];
	int fd, created = 1;

	snprintf(path, sizeof(path), "/dev/shm/testhmem-keys-%u", (unsigned)getuid());
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0 && errno == EEXIST) {
		created = 0;
		fd = open(path, O_RDWR | O_CLOEXEC);
	}
	if (fd < 0) {
		FI_WARN(&th_prov, FI_LOG_MR, "%s: %s\n", path, strerror(errno));
		return;
	}
	if (ftruncate(fd, sizeof(struct th_keys))) {
		FI_WARN(&th_prov, FI_LOG_MR, "%s: %s\n", path, strerror(errno));
		close(fd);
		return;
	}
	void *m = mmap(NULL, sizeof(struct th_keys), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

	close(fd);
	if (m == MAP_FAILED)
		return;
	th_keys = m;
	if (created) {
		uint64_t start = 0;

		if (getrandom(&start, sizeof(start), 0) != sizeof(start))
			start = (uint64_t)getpid() << 20;
		atomic_store(&th_keys->next, start & 0xffffffffULL);
		atomic_store(&th_keys->magic, TH_KEYS_MAGIC);
	} else {
		/* another process is setting it up */
		for (int i = 0; i < 1000 && atomic_load(&th_keys->magic) != TH_KEYS_MAGIC; i++)
			usleep(1000);
	}
}

static uint64_t inv64(uint64_t a)
{
	uint64_t x = a; /* Newton's iteration: a*x = 1 mod 2^64 for odd a */

	for (int i = 0; i < 6; i++)
		x *= 2 - a * x;
	return x;
}

/* The key for counter value n, and back: a bijection that looks random. */
static uint64_t key_of(uint64_t n, size_t width)
{
	if (width == 4)
		return (uint32_t)((uint32_t)n * TH_KEY_MUL32) ^ 0x5bd1e995u;
	return (n * TH_KEY_MUL64) ^ TH_KEY_XOR64;
}

static uint64_t counter_of(uint64_t key, size_t width)
{
	if (width == 4)
		return (uint32_t)(((uint32_t)key ^ 0x5bd1e995u) * (uint32_t)inv64(TH_KEY_MUL32));
	return (key ^ TH_KEY_XOR64) * inv64(TH_KEY_MUL64);
}

uint64_t th_profile_key_new(const struct th_profile *p, uint64_t va, uint64_t len)
{
	uint64_t n, key;
	struct th_key_slot *s;

	pthread_once(&th_keys_once, th_keys_map);
	if (!th_keys || atomic_load(&th_keys->magic) != TH_KEYS_MAGIC)
		return 0;
	do {
		n = atomic_fetch_add(&th_keys->next, 1);
		if (p->mr_key_size == 4)
			n &= 0xffffffffULL;
		key = key_of(n, p->mr_key_size);
	} while (!key || key == FI_KEY_NOTAVAIL);
	s = &th_keys->slot[n % TH_KEYS_SLOTS];
	atomic_store(&s->key, 0);
	atomic_store(&s->va, va);
	atomic_store(&s->len, len);
	atomic_store(&s->key, key);
	return key;
}

void th_profile_key_free(const struct th_profile *p, uint64_t key)
{
	struct th_key_slot *s;

	if (!th_keys || !key)
		return;
	s = &th_keys->slot[counter_of(key, p->mr_key_size) % TH_KEYS_SLOTS];
	uint64_t k = key;
	atomic_compare_exchange_strong(&s->key, &k, 0);
}

int th_profile_key_va(const struct th_profile *p, uint64_t key, uint64_t *va, uint64_t *len)
{
	struct th_key_slot *s;

	pthread_once(&th_keys_once, th_keys_map);
	if (!th_keys || !key)
		return 0;
	s = &th_keys->slot[counter_of(key, p->mr_key_size) % TH_KEYS_SLOTS];
	if (atomic_load(&s->key) != key)
		return 0;
	*va = atomic_load(&s->va);
	*len = atomic_load(&s->len);
	return atomic_load(&s->key) == key;
}
