/*
 * test_cfg.c - the settings table: defaults and their sources, parsing of each
 * type, invalid values (kept default, marked, rejected text remembered) and the
 * text and JSON dumps. The environment is never read: every load goes through
 * a lookup over a small table of name=value pairs.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cfg/cfg.h"
#include "unit.h"

/* ---- a fake environment ---- */

struct kv {
	const char *name, *value;
};

struct fake_env {
	const struct kv *kv;
	int n;
	int asked[CFG_COUNT]; /* how often each setting was looked up */
	int unknown;              /* lookups of names that are no setting */
};

static const char *fake_lookup(const char *name, void *arg)
{
	struct fake_env *env = arg;
	int id;
	for (id = 0; id < CFG_COUNT; id++)
		if (!strcmp(cfg_descs[id].name, name))
			break;
	if (id == CFG_COUNT)
		env->unknown++;
	else
		env->asked[id]++;
	for (int i = 0; i < env->n; i++)
		if (!strcmp(env->kv[i].name, name))
			return env->kv[i].value;
	return NULL;
}

/* Loads cfg from one name=value pair; returns cfg_load's count. */
static int load1(struct cfg_values *cfg, const char *name, const char *value)
{
	struct kv kv = { name, value };
	struct fake_env env = { &kv, 1, { 0 }, 0 };
	return cfg_load(cfg, fake_lookup, &env);
}

/* ---- a small JSON reader: validates and decodes strings ---- */

struct jr {
	const char *p;
	int err;
};

static void j_ws(struct jr *r)
{
	while (*r->p == ' ' || *r->p == '\n' || *r->p == '\t' || *r->p == '\r')
		r->p++;
}

/* Reads a string into out (decoded, ASCII escapes only); 0 or -1. */
static int j_string(struct jr *r, char *out, size_t outlen)
{
	size_t n = 0;
	if (*r->p != '"')
		return -1;
	r->p++;
	for (;;) {
		unsigned char c = (unsigned char)*r->p++;
		if (c == '\0' || c < 0x20)
			return -1; /* unterminated, or a raw control character */
		if (c == '"')
			break;
		if (c == '\\') {
			char e = *r->p++;
			switch (e) {
			case '"': c = '"'; break;
			case '\\': c = '\\'; break;
			case '/': c = '/'; break;
			case 'n': c = '\n'; break;
			case 't': c = '\t'; break;
			case 'r': c = '\r'; break;
			case 'b': c = '\b'; break;
			case 'f': c = '\f'; break;
			case 'u': {
				unsigned v = 0;
				for (int i = 0; i < 4; i++) {
					char h = *r->p++;
					v <<= 4;
					if (h >= '0' && h <= '9')
						v |= (unsigned)(h - '0');
					else if (h >= 'a' && h <= 'f')
						v |= (unsigned)(h - 'a' + 10);
					else if (h >= 'A' && h <= 'F')
						v |= (unsigned)(h - 'A' + 10);
					else
						return -1;
				}
				if (v >= 0x80)
					return -1; /* the dump escapes only control characters */
				c = (unsigned char)v;
				break;
			}
			default:
				return -1;
			}
		}
		if (out && n + 1 < outlen)
			out[n++] = (char)c;
	}
	if (out && outlen)
		out[n] = '\0';
	return 0;
}

static int j_value(struct jr *r, int depth)
{
	j_ws(r);
	if (depth > 32)
		return -1;
	if (*r->p == '"')
		return j_string(r, NULL, 0);
	if (*r->p == '{' || *r->p == '[') {
		char close = *r->p == '{' ? '}' : ']';
		bool obj = close == '}';
		r->p++;
		j_ws(r);
		if (*r->p == close) {
			r->p++;
			return 0;
		}
		for (;;) {
			j_ws(r);
			if (obj) {
				if (j_string(r, NULL, 0))
					return -1;
				j_ws(r);
				if (*r->p++ != ':')
					return -1;
			}
			if (j_value(r, depth + 1))
				return -1;
			j_ws(r);
			if (*r->p == ',') {
				r->p++;
				continue;
			}
			if (*r->p == close) {
				r->p++;
				return 0;
			}
			return -1;
		}
	}
	if (!strncmp(r->p, "true", 4) || !strncmp(r->p, "null", 4)) {
		r->p += 4;
		return 0;
	}
	if (!strncmp(r->p, "false", 5)) {
		r->p += 5;
		return 0;
	}
	const char *s = r->p;
	if (*r->p == '-')
		r->p++;
	while ((*r->p >= '0' && *r->p <= '9') || *r->p == '.' || *r->p == 'e' || *r->p == 'E' ||
	       *r->p == '+' || *r->p == '-')
		r->p++;
	return r->p > s ? 0 : -1;
}

/* 0 when text is exactly one JSON value (surrounding white space allowed). */
static int json_valid(const char *text)
{
	struct jr r = { text, 0 };
	if (j_value(&r, 0))
		return -1;
	j_ws(&r);
	return *r.p ? -1 : 0;
}

/* Finds the object of the array whose "name" is name and copies the decoded
 * string value of key into out. 0 when found, -1 when absent. The dump is an
 * array of flat objects with string members, which is all this walks. */
static int json_field(const char *text, const char *name, const char *key, char *out, size_t len)
{
	struct jr r = { text, 0 };
	j_ws(&r);
	if (*r.p++ != '[')
		return -1;
	for (;;) {
		j_ws(&r);
		if (*r.p++ != '{')
			return -1;
		char k[64], v[1024], objname[128] = "", want[1024] = "";
		bool have = false;
		for (;;) {
			j_ws(&r);
			if (j_string(&r, k, sizeof(k)))
				return -1;
			j_ws(&r);
			if (*r.p++ != ':')
				return -1;
			j_ws(&r);
			if (j_string(&r, v, sizeof(v)))
				return -1;
			if (!strcmp(k, "name"))
				snprintf(objname, sizeof(objname), "%s", v);
			if (!strcmp(k, key)) {
				snprintf(want, sizeof(want), "%s", v);
				have = true;
			}
			j_ws(&r);
			if (*r.p == ',') {
				r.p++;
				continue;
			}
			if (*r.p++ != '}')
				return -1;
			break;
		}
		if (!strcmp(objname, name)) {
			if (!have)
				return -1;
			snprintf(out, len, "%s", want);
			return 0;
		}
		j_ws(&r);
		if (*r.p == ',') {
			r.p++;
			continue;
		}
		return -1;
	}
}

/* The dump of cfg as a malloc'ed string. */
static char *dump_to_string(const struct cfg_values *cfg, int json)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (!f)
		return NULL;
	cfg_dump(cfg, f, json);
	fclose(f);
	return buf;
}

/* ---- tests ---- */

static int test_json_reader(void)
{
	/* The checker itself must tell good JSON from bad, or the dump tests prove nothing. */
	CHECK_EQ(json_valid("[{\"a\":\"b\\\"c\",\"d\":[1,2,true]}]"), 0);
	CHECK_EQ(json_valid("[]"), 0);
	CHECK(json_valid("[{\"a\":\"b\"}") != 0);      /* unbalanced */
	CHECK(json_valid("[{\"a\":\"b}]") != 0);       /* unterminated string */
	CHECK(json_valid("[{\"a\":\"b\",}]") != 0);    /* trailing comma */
	CHECK(json_valid("[{\"a\":\"b\nc\"}]") != 0);  /* raw newline in a string */
	CHECK(json_valid("[{\"a\":\"\\q\"}]") != 0);   /* unknown escape */
	CHECK(json_valid("[1]x") != 0);                /* trailing garbage */
	char out[16];
	CHECK_EQ(json_field("[{\"name\":\"A\",\"v\":\"x\\u0001\\n\"}]", "A", "v", out, sizeof(out)), 0);
	CHECK_STR_CONTAINS(out, "x\001\n");
	CHECK_EQ(json_field("[{\"name\":\"A\",\"v\":\"x\"}]", "B", "v", out, sizeof(out)), -1);
	return 0;
}

static int test_table_sane(void)
{
	for (int id = 0; id < CFG_COUNT; id++) {
		const struct cfg_desc *d = &cfg_descs[id];
		CHECK(d->name != NULL);
		CHECK(!strncmp(d->name, "NCCL_FABRIC_", 12));
		CHECK(d->help && strlen(d->help) > 10);
		CHECK(d->def != NULL);
		/* names: an enum's values, or "auto" for an integer that also takes it */
		CHECK((d->type == CFG_ENUM) == (d->enum_names != NULL) ||
		      (d->type == CFG_INT && !strcmp(d->enum_names, "auto")));
		if (d->type == CFG_INT || d->type == CFG_BOOL)
			CHECK(d->min <= d->max);
		for (int k = 0; k < id; k++)
			CHECK(strcmp(cfg_descs[k].name, d->name) != 0);
		/* every default must parse, and INT defaults lie within their bounds */
		struct cfg_value v = { 0 };
		CHECK_EQ(cfg_parse(d, d->def, &v), 0);
		if (d->type == CFG_INT) {
			CHECK(v.i >= d->min);
			CHECK(v.i <= d->max);
		}
		CHECK(!strcmp(v.s, d->def));
	}
	CHECK(!strcmp(cfg_descs[CFG_PROVIDER].name, "NCCL_FABRIC_PROVIDER"));
	CHECK(!strcmp(cfg_descs[CFG_CQ_BATCH].name, "NCCL_FABRIC_CQ_BATCH"));
	return 0;
}

static int test_defaults(void)
{
	struct cfg_values cfg;
	struct fake_env env = { NULL, 0, { 0 }, 0 };
	memset(&cfg, 0x5a, sizeof(cfg)); /* load must not depend on prior contents */
	CHECK_EQ(cfg_load(&cfg, fake_lookup, &env), 0);
	for (int id = 0; id < CFG_COUNT; id++) {
		CHECK_EQ(cfg.v[id].source, CFG_SRC_DEFAULT);
		CHECK_EQ(env.asked[id], 1); /* each setting looked up exactly once */
		CHECK(!strcmp(cfg.v[id].s, cfg_descs[id].def));
		CHECK_EQ(cfg.v[id].invalid[0], '\0');
	}
	CHECK_EQ(env.unknown, 0);
	CHECK(!strcmp(cfg.v[CFG_PROVIDER].s, ""));
	CHECK_EQ(cfg.v[CFG_HMEM].i, CFG_HMEM_AUTO);
	CHECK_EQ(cfg.v[CFG_DMABUF].i, 1);
	CHECK_EQ(cfg.v[CFG_MAX_RECVS].i, 8);
	CHECK_EQ(cfg.v[CFG_SPEED].i, 0);
	CHECK_EQ(cfg.v[CFG_TIMEOUT].i, 300);
	CHECK_EQ(cfg.v[CFG_CQ_BATCH].i, 32);
	return 0;
}

static int test_env_values(void)
{
	static const struct kv kv[] = {
		{ "NCCL_FABRIC_PROVIDER", "tcp,^shm" },
		{ "NCCL_FABRIC_HMEM", "off" },
		{ "NCCL_FABRIC_DMABUF", "0" },
		{ "NCCL_FABRIC_FLUSH", "cuda" },
		{ "NCCL_FABRIC_MAX_RECVS", "1" },
		{ "NCCL_FABRIC_RAILS", "4" },
		{ "NCCL_FABRIC_PROGRESS_THREADS", "1" },
		{ "NCCL_FABRIC_EAGER_MAX", "65536" },
		{ "NCCL_FABRIC_EARLY_SENDS", "2" },
		{ "NCCL_FABRIC_EARLY_MAX", "1048576" },
		{ "NCCL_FABRIC_RMA", "0" },
		{ "NCCL_FABRIC_STRIPE_MIN", "65536" },
		{ "NCCL_FABRIC_SPREAD", "1" },
		{ "NCCL_FABRIC_RMA_PLUGIN", "force" },
		{ "NCCL_FABRIC_PEER_TIMEOUT", "30" },
		{ "NCCL_FABRIC_SPEED", "400000" },
		{ "NCCL_FABRIC_TIMEOUT", "86400" },
		{ "NCCL_FABRIC_CQ_BATCH", "256" },
		{ "NCCL_FABRIC_NOT_A_SETTING", "x" },
	};
	struct fake_env env = { kv, (int)(sizeof(kv) / sizeof(kv[0])), { 0 }, 0 };
	struct cfg_values cfg;
	CHECK_EQ(cfg_load(&cfg, fake_lookup, &env), 0);
	for (int id = 0; id < CFG_COUNT; id++)
		CHECK_EQ(cfg.v[id].source, CFG_SRC_ENV);
	CHECK(!strcmp(cfg.v[CFG_PROVIDER].s, "tcp,^shm"));
	CHECK_EQ(cfg.v[CFG_HMEM].i, CFG_HMEM_OFF);
	CHECK(!strcmp(cfg.v[CFG_HMEM].s, "off"));
	CHECK_EQ(cfg.v[CFG_DMABUF].i, 0);
	CHECK_EQ(cfg.v[CFG_MAX_RECVS].i, 1);
	CHECK_EQ(cfg.v[CFG_SPEED].i, 400000);
	CHECK_EQ(cfg.v[CFG_TIMEOUT].i, 86400);
	CHECK_EQ(cfg.v[CFG_CQ_BATCH].i, 256);
	CHECK_EQ(cfg.v[CFG_RAILS].i, 4);
	CHECK_EQ(cfg.v[CFG_PROGRESS_THREADS].i, 1); /* "1" is the enum's "on" */
	CHECK_EQ(cfg.v[CFG_EAGER_MAX].i, 65536);
	CHECK_EQ(cfg.v[CFG_EARLY_SENDS].i, 2);
	CHECK_EQ(cfg.v[CFG_EARLY_MAX].i, 1048576);
	CHECK_EQ(cfg.v[CFG_RMA].i, 0);
	CHECK_EQ(cfg.v[CFG_STRIPE_MIN].i, 65536);
	CHECK_EQ(cfg.v[CFG_SPREAD].i, 1);
	CHECK_EQ(cfg.v[CFG_RMA_PLUGIN].i, CFG_RMA_PLUGIN_FORCE);
	CHECK_EQ(cfg.v[CFG_PEER_TIMEOUT].i, 30);
	return 0;
}

static int test_str(void)
{
	struct cfg_values cfg;
	CHECK_EQ(load1(&cfg, "NCCL_FABRIC_PROVIDER", ""), 0);
	CHECK_EQ(cfg.v[CFG_PROVIDER].source, CFG_SRC_ENV); /* set but empty is still "set" */
	CHECK(!strcmp(cfg.v[CFG_PROVIDER].s, ""));

	char longest[256];
	memset(longest, 'p', 255);
	longest[255] = '\0';
	CHECK_EQ(load1(&cfg, "NCCL_FABRIC_PROVIDER", longest), 0);
	CHECK_EQ(cfg.v[CFG_PROVIDER].source, CFG_SRC_ENV);
	CHECK_EQ(strlen(cfg.v[CFG_PROVIDER].s), 255);

	/* one byte more does not fit: rejected, default kept, rejected text cut to fit */
	char too_long[300];
	memset(too_long, 'q', 299);
	too_long[299] = '\0';
	CHECK_EQ(load1(&cfg, "NCCL_FABRIC_PROVIDER", too_long), 1);
	CHECK_EQ(cfg.v[CFG_PROVIDER].source, CFG_SRC_INVALID_ENV);
	CHECK(!strcmp(cfg.v[CFG_PROVIDER].s, ""));
	CHECK_EQ(strlen(cfg.v[CFG_PROVIDER].invalid), sizeof(cfg.v[0].invalid) - 1);
	CHECK_EQ(cfg.v[CFG_PROVIDER].invalid[0], 'q');
	return 0;
}

static int test_int_bounds(void)
{
	static const struct {
		enum cfg_id id;
		const char *text;
		int ok;
		long long value;
	} cases[] = {
		{ CFG_MAX_RECVS, "1", 1, 1 },
		{ CFG_MAX_RECVS, "8", 1, 8 },
		{ CFG_MAX_RECVS, "0", 0, 0 },
		{ CFG_MAX_RECVS, "9", 0, 0 },
		{ CFG_MAX_RECVS, "-1", 0, 0 },
		{ CFG_MAX_RECVS, "0x8", 0, 0 }, /* decimal only */
		{ CFG_TIMEOUT, "010", 1, 10 },
		{ CFG_MAX_RECVS, "4abc", 0, 0 },
		{ CFG_MAX_RECVS, "4 ", 0, 0 },
		{ CFG_MAX_RECVS, "", 0, 0 },
		{ CFG_MAX_RECVS, "four", 0, 0 },
		{ CFG_MAX_RECVS, "4.0", 0, 0 },
		{ CFG_SPEED, "0", 1, 0 },
		{ CFG_SPEED, "100000000", 1, 100000000 },
		{ CFG_SPEED, "100000001", 0, 0 },
		{ CFG_SPEED, "-5", 0, 0 },
		{ CFG_SPEED, "99999999999999999999", 0, 0 }, /* overflows long long */
		{ CFG_SPEED, "-99999999999999999999", 0, 0 },
		{ CFG_TIMEOUT, "1", 1, 1 },
		{ CFG_TIMEOUT, "0", 0, 0 },
		{ CFG_TIMEOUT, "86401", 0, 0 },
		{ CFG_CQ_BATCH, "257", 0, 0 },
		{ CFG_CQ_BATCH, "1", 1, 1 },
		{ CFG_RAILS, "0", 1, 0 }, /* auto */
		{ CFG_RAILS, "auto", 1, 0 },
		{ CFG_RAILS, "AUTO", 1, 0 },
		{ CFG_MAX_RECVS, "auto", 0, 0 }, /* only where the setting takes it */
		{ CFG_RAILS, "8", 1, CFG_MAX_RAILS },
		{ CFG_RAILS, "9", 0, 0 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct cfg_desc *d = &cfg_descs[cases[i].id];
		struct cfg_values cfg;
		int n = load1(&cfg, d->name, cases[i].text);
		const struct cfg_value *v = &cfg.v[cases[i].id];
		struct cfg_value def = { 0 };
		cfg_parse(d, d->def, &def);
		if (cases[i].ok) {
			if (n != 0 || v->source != CFG_SRC_ENV || v->i != cases[i].value)
				fprintf(stderr, "  case %zu: %s=\"%s\"\n", i, d->name, cases[i].text);
			CHECK_EQ(n, 0);
			CHECK_EQ(v->source, CFG_SRC_ENV);
			CHECK_EQ(v->i, cases[i].value);
			CHECK(!strcmp(v->s, cases[i].text));
		} else {
			if (n != 1 || v->source != CFG_SRC_INVALID_ENV)
				fprintf(stderr, "  case %zu: %s=\"%s\"\n", i, d->name, cases[i].text);
			CHECK_EQ(n, 1);
			CHECK_EQ(v->source, CFG_SRC_INVALID_ENV);
			CHECK_EQ(v->i, def.i);
			CHECK(!strcmp(v->s, d->def));
			CHECK(!strcmp(v->invalid, cases[i].text));
		}
	}
	return 0;
}

static int test_bool(void)
{
	static const char *const yes[] = { "1", "true", "TRUE", "True", "yes", "YES", "on", "On" };
	static const char *const no[] = { "0", "false", "FALSE", "no", "No", "off", "OFF" };
	static const char *const bad[] = { "", "2", "-1", "y", "n", "enable", "truee", " 1", "01" };
	struct cfg_values cfg;
	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		/* the default of DMABUF is 1: start from a 0 via parse to see the change */
		struct cfg_value v = { .i = 0 };
		CHECK_EQ(cfg_parse(&cfg_descs[CFG_DMABUF], yes[i], &v), 0);
		CHECK_EQ(v.i, 1);
		CHECK_EQ(load1(&cfg, "NCCL_FABRIC_DMABUF", yes[i]), 0);
		CHECK_EQ(cfg.v[CFG_DMABUF].i, 1);
		CHECK_EQ(cfg.v[CFG_DMABUF].source, CFG_SRC_ENV);
	}
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
		CHECK_EQ(load1(&cfg, "NCCL_FABRIC_DMABUF", no[i]), 0);
		CHECK_EQ(cfg.v[CFG_DMABUF].i, 0);
		CHECK_EQ(cfg.v[CFG_DMABUF].source, CFG_SRC_ENV);
		CHECK(!strcmp(cfg.v[CFG_DMABUF].s, no[i]));
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK_EQ(load1(&cfg, "NCCL_FABRIC_DMABUF", bad[i]), 1);
		CHECK_EQ(cfg.v[CFG_DMABUF].i, 1); /* the default */
		CHECK_EQ(cfg.v[CFG_DMABUF].source, CFG_SRC_INVALID_ENV);
		CHECK(!strcmp(cfg.v[CFG_DMABUF].invalid, bad[i]));
	}
	return 0;
}

static int test_enum(void)
{
	static const struct {
		const char *text;
		int idx; /* -1: invalid */
	} cases[] = {
		{ "auto", CFG_HMEM_AUTO }, { "AUTO", CFG_HMEM_AUTO },   { "force", CFG_HMEM_FORCE },
		{ "Force", CFG_HMEM_FORCE }, { "off", CFG_HMEM_OFF },   { "OFF", CFG_HMEM_OFF },
		{ "", -1 },                  { "forced", -1 },          { "of", -1 },
		{ "auto|force", -1 },        { "|", -1 },               { "on", -1 },
		{ "0", -1 },                 { " auto", -1 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct cfg_values cfg;
		int n = load1(&cfg, "NCCL_FABRIC_HMEM", cases[i].text);
		const struct cfg_value *v = &cfg.v[CFG_HMEM];
		if (cases[i].idx >= 0) {
			CHECK_EQ(n, 0);
			CHECK_EQ(v->source, CFG_SRC_ENV);
			CHECK_EQ(v->i, cases[i].idx);
		} else {
			if (n != 1)
				fprintf(stderr, "  case \"%s\" accepted\n", cases[i].text);
			CHECK_EQ(n, 1);
			CHECK_EQ(v->source, CFG_SRC_INVALID_ENV);
			CHECK_EQ(v->i, CFG_HMEM_AUTO);
			CHECK(!strcmp(v->s, "auto"));
			CHECK(!strcmp(v->invalid, cases[i].text));
		}
	}
	return 0;
}

static int test_invalid_count(void)
{
	static const struct kv kv[] = {
		{ "NCCL_FABRIC_HMEM", "sometimes" },
		{ "NCCL_FABRIC_DMABUF", "maybe" },
		{ "NCCL_FABRIC_MAX_RECVS", "64" },
		{ "NCCL_FABRIC_TIMEOUT", "60" }, /* valid */
	};
	struct fake_env env = { kv, 4, { 0 }, 0 };
	struct cfg_values cfg;
	CHECK_EQ(cfg_load(&cfg, fake_lookup, &env), 3);
	CHECK_EQ(cfg.v[CFG_HMEM].source, CFG_SRC_INVALID_ENV);
	CHECK(!strcmp(cfg.v[CFG_HMEM].invalid, "sometimes"));
	CHECK(!strcmp(cfg.v[CFG_DMABUF].invalid, "maybe"));
	CHECK(!strcmp(cfg.v[CFG_MAX_RECVS].invalid, "64"));
	CHECK_EQ(cfg.v[CFG_MAX_RECVS].i, 8);
	CHECK_EQ(cfg.v[CFG_TIMEOUT].source, CFG_SRC_ENV);
	CHECK_EQ(cfg.v[CFG_TIMEOUT].i, 60);
	CHECK_EQ(cfg.v[CFG_TIMEOUT].invalid[0], '\0');
	CHECK_EQ(cfg.v[CFG_PROVIDER].source, CFG_SRC_DEFAULT);
	return 0;
}

static int test_parse_rejects_keep_output(void)
{
	/* cfg_parse on failure leaves the value alone (load parses into a
	 * scratch copy, but other callers may parse over a live value). */
	struct cfg_value v = { .i = 5, .s = "five" };
	CHECK_EQ(cfg_parse(&cfg_descs[CFG_MAX_RECVS], "nine", &v), -EINVAL);
	CHECK_EQ(v.i, 5);
	CHECK(!strcmp(v.s, "five"));
	CHECK_EQ(cfg_parse(&cfg_descs[CFG_MAX_RECVS], "3", &v), 0);
	CHECK_EQ(v.i, 3);
	CHECK(!strcmp(v.s, "3"));
	return 0;
}

static int test_getenv_default_lookup(void)
{
	/* NULL lookup reads the real environment. */
	setenv("NCCL_FABRIC_CQ_BATCH", "17", 1);
	setenv("NCCL_FABRIC_TIMEOUT", "never", 1);
	struct cfg_values cfg;
	int n = cfg_load(&cfg, NULL, NULL);
	unsetenv("NCCL_FABRIC_CQ_BATCH");
	unsetenv("NCCL_FABRIC_TIMEOUT");
	CHECK(n >= 1);
	CHECK_EQ(cfg.v[CFG_CQ_BATCH].source, CFG_SRC_ENV);
	CHECK_EQ(cfg.v[CFG_CQ_BATCH].i, 17);
	CHECK_EQ(cfg.v[CFG_TIMEOUT].source, CFG_SRC_INVALID_ENV);
	CHECK(!strcmp(cfg.v[CFG_TIMEOUT].invalid, "never"));
	return 0;
}

static int test_source_names(void)
{
	CHECK(!strcmp(cfg_source_name(CFG_SRC_DEFAULT), "default"));
	CHECK(!strcmp(cfg_source_name(CFG_SRC_ENV), "environment"));
	CHECK_STR_CONTAINS(cfg_source_name(CFG_SRC_INVALID_ENV), "invalid");
	CHECK(!strcmp(cfg_source_name((enum cfg_source)42), "?"));
	return 0;
}

static int test_dump_text(void)
{
	static const struct kv kv[] = {
		{ "NCCL_FABRIC_HMEM", "bogus" },
		{ "NCCL_FABRIC_TIMEOUT", "77" },
	};
	struct fake_env env = { kv, 2, { 0 }, 0 };
	struct cfg_values cfg;
	cfg_load(&cfg, fake_lookup, &env);
	char *text = dump_to_string(&cfg, 0);
	CHECK(text != NULL);
	if (!text)
		return 1;
	for (int id = 0; id < CFG_COUNT; id++) {
		CHECK_STR_CONTAINS(text, cfg_descs[id].name);
		char head[64];
		snprintf(head, sizeof(head), "%.40s", cfg_descs[id].help);
		CHECK_STR_CONTAINS(text, head);
	}
	CHECK_STR_CONTAINS(text, "= 77");
	CHECK_STR_CONTAINS(text, "(environment)");
	CHECK_STR_CONTAINS(text, "(default (invalid environment value ignored): \"bogus\")");
	CHECK_STR_CONTAINS(text, "NCCL_FABRIC_PROVIDER     = \"\"");  /* empty shown as "" */
	CHECK_EQ(text[strlen(text) - 1], '\n');
	/* one line per setting plus one help line each */
	int lines = 0;
	for (const char *p = text; *p; p++)
		lines += *p == '\n';
	CHECK_EQ(lines, 2 * CFG_COUNT);
	free(text);
	return 0;
}

static int test_dump_json(void)
{
	/* hostile text in a STR setting: quotes, backslash, newline, tab, control char */
	static const char hostile[] = "a\"b\\c\nd\te\001f}{],";
	static const struct kv kv[] = {
		{ "NCCL_FABRIC_PROVIDER", hostile },
		{ "NCCL_FABRIC_HMEM", "x\"y" }, /* invalid: the rejected text must be escaped too */
		{ "NCCL_FABRIC_SPEED", "1000" },
	};
	struct fake_env env = { kv, 3, { 0 }, 0 };
	struct cfg_values cfg;
	CHECK_EQ(cfg_load(&cfg, fake_lookup, &env), 1);
	char *text = dump_to_string(&cfg, 1);
	CHECK(text != NULL);
	if (!text)
		return 1;
	if (json_valid(text))
		fprintf(stderr, "  invalid JSON: %s\n", text);
	CHECK_EQ(json_valid(text), 0);

	char v[1024];
	CHECK_EQ(json_field(text, "NCCL_FABRIC_PROVIDER", "value", v, sizeof(v)), 0);
	CHECK(!strcmp(v, hostile));
	CHECK_EQ(json_field(text, "NCCL_FABRIC_PROVIDER", "source", v, sizeof(v)), 0);
	CHECK(!strcmp(v, "environment"));
	CHECK_EQ(json_field(text, "NCCL_FABRIC_HMEM", "rejected", v, sizeof(v)), 0);
	CHECK(!strcmp(v, "x\"y"));
	CHECK_EQ(json_field(text, "NCCL_FABRIC_HMEM", "value", v, sizeof(v)), 0);
	CHECK(!strcmp(v, "auto"));
	CHECK_EQ(json_field(text, "NCCL_FABRIC_SPEED", "value", v, sizeof(v)), 0);
	CHECK(!strcmp(v, "1000"));
	/* "rejected" only where a value was rejected */
	CHECK_EQ(json_field(text, "NCCL_FABRIC_SPEED", "rejected", v, sizeof(v)), -1);
	for (int id = 0; id < CFG_COUNT; id++) {
		const struct cfg_desc *d = &cfg_descs[id];
		CHECK_EQ(json_field(text, d->name, "default", v, sizeof(v)), 0);
		CHECK(!strcmp(v, d->def));
		CHECK_EQ(json_field(text, d->name, "help", v, sizeof(v)), 0);
		CHECK(!strcmp(v, d->help));
	}
	free(text);

	/* all defaults: still valid JSON, and no "rejected" anywhere */
	cfg_load(&cfg, fake_lookup, &(struct fake_env){ NULL, 0, { 0 }, 0 });
	text = dump_to_string(&cfg, 1);
	CHECK(text && json_valid(text) == 0);
	CHECK(text && !strstr(text, "rejected"));
	free(text);
	return 0;
}

static const struct unit_test tests[] = {
	TEST_ENTRY(test_json_reader, "the test's JSON checker rejects broken JSON"),
	TEST_ENTRY(test_table_sane, "every setting: prefixed unique name, help, default parses in bounds"),
	TEST_ENTRY(test_defaults, "empty environment: documented defaults, source default, one lookup each"),
	TEST_ENTRY(test_env_values, "valid values of every setting are taken, source environment"),
	TEST_ENTRY(test_str, "STR: empty, longest accepted, too long rejected with cut text"),
	TEST_ENTRY(test_int_bounds, "INT: bounds inclusive, junk/overflow/out-of-range keep the default"),
	TEST_ENTRY(test_bool, "BOOL: 1/true/yes/on and 0/false/no/off any case; others rejected"),
	TEST_ENTRY(test_enum, "ENUM: names case-insensitive, partial/combined names rejected"),
	TEST_ENTRY(test_invalid_count, "load returns the number of invalid values and marks each"),
	TEST_ENTRY(test_parse_rejects_keep_output, "a failed parse leaves the output value untouched"),
	TEST_ENTRY(test_getenv_default_lookup, "NULL lookup reads the process environment"),
	TEST_ENTRY(test_source_names, "source names, including the invalid marker"),
	TEST_ENTRY(test_dump_text, "text dump: every name and help, source, rejected text"),
	TEST_ENTRY(test_dump_json, "JSON dump parses, escapes hostile text, round-trips values"),
};

int main(int argc, char **argv)
{
	return unit_main(tests, argc, argv);
}
