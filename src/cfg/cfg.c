#include "cfg/cfg.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/util.h"
#include "util/json.h"

const struct fab_cfg_desc fab_cfg_descs[FAB_CFG_COUNT] = {
#define FAB_CFG_DESC(id, type, def, min, max, names, help) \
	[FAB_CFG_##id] = { "NCCL_FABRIC_" #id, type, def, min, max, names, help },
	FAB_SETTINGS(FAB_CFG_DESC)
#undef FAB_CFG_DESC
};

static int parse_enum(const char *names, const char *text, int64_t *out)
{
	size_t tlen = strlen(text);
	int64_t idx = 0;
	for (const char *p = names; *p; idx++) {
		const char *bar = strchr(p, '|');
		size_t len = bar ? (size_t)(bar - p) : strlen(p);
		if (len == tlen && !strncasecmp(p, text, len)) {
			*out = idx;
			return 0;
		}
		if (!bar)
			break;
		p = bar + 1;
	}
	return -EINVAL;
}

int fab_cfg_parse(const struct fab_cfg_desc *d, const char *text, struct fab_cfg_value *out)
{
	if (strlen(text) >= sizeof(out->s))
		return -EINVAL;
	switch (d->type) {
	case FAB_CFG_STR:
		out->i = 0;
		break;
	case FAB_CFG_BOOL:
		if (!strcmp(text, "1") || !strcasecmp(text, "true") || !strcasecmp(text, "yes") ||
		    !strcasecmp(text, "on"))
			out->i = 1;
		else if (!strcmp(text, "0") || !strcasecmp(text, "false") ||
			 !strcasecmp(text, "no") || !strcasecmp(text, "off"))
			out->i = 0;
		else
			return -EINVAL;
		break;
	case FAB_CFG_INT: {
		char *end = NULL;
		errno = 0;
		long long v = strtoll(text, &end, 10);
		if (errno || end == text || *end != '\0' || v < d->min || v > d->max)
			return -EINVAL;
		out->i = v;
		break;
	}
	case FAB_CFG_ENUM:
		if (parse_enum(d->enum_names, text, &out->i)) {
			/* on|off enums also take the boolean spellings */
			const char *alias = !strcmp(text, "1") || !strcasecmp(text, "true") ? "on" :
					    !strcmp(text, "0") || !strcasecmp(text, "false") ? "off" : NULL;
			int64_t on;
			if (!alias || parse_enum(d->enum_names, "on", &on) ||
			    parse_enum(d->enum_names, alias, &out->i))
				return -EINVAL;
		}
		break;
	}
	fab_strlcpy(out->s, text, sizeof(out->s));
	return 0;
}

static const char *env_lookup(const char *name, void *arg)
{
	(void)arg;
	return getenv(name);
}

int fab_cfg_load(struct fab_cfg *cfg, fab_cfg_lookup_fn lookup, void *arg)
{
	int invalid = 0;
	if (!lookup)
		lookup = env_lookup;
	memset(cfg, 0, sizeof(*cfg));
	for (int id = 0; id < FAB_CFG_COUNT; id++) {
		const struct fab_cfg_desc *d = &fab_cfg_descs[id];
		struct fab_cfg_value *v = &cfg->v[id];
		/* Defaults are compile-time constants: they always parse. */
		(void)fab_cfg_parse(d, d->def, v);
		v->source = FAB_SRC_DEFAULT;
		const char *text = lookup(d->name, arg);
		if (!text)
			continue;
		struct fab_cfg_value parsed = { 0 };
		if (fab_cfg_parse(d, text, &parsed) == 0) {
			*v = parsed;
			v->source = FAB_SRC_ENV;
		} else {
			v->source = FAB_SRC_INVALID_ENV;
			fab_strlcpy(v->invalid, text, sizeof(v->invalid));
			invalid++;
		}
	}
	return invalid;
}

const char *fab_cfg_source_name(enum fab_cfg_source src)
{
	switch (src) {
	case FAB_SRC_DEFAULT: return "default";
	case FAB_SRC_ENV: return "environment";
	case FAB_SRC_OVERRIDE: return "override";
	case FAB_SRC_INVALID_ENV: return "default (invalid environment value ignored)";
	}
	return "?";
}

void fab_cfg_dump(const struct fab_cfg *cfg, FILE *out, int json)
{
	if (json) {
		fputc('[', out);
		for (int id = 0; id < FAB_CFG_COUNT; id++) {
			const struct fab_cfg_desc *d = &fab_cfg_descs[id];
			const struct fab_cfg_value *v = &cfg->v[id];
			fprintf(out, "%s{\"name\":", id ? "," : "");
			json_str(out, d->name);
			fputs(",\"value\":", out);
			json_str(out, v->s);
			fputs(",\"default\":", out);
			json_str(out, d->def);
			fputs(",\"source\":", out);
			json_str(out, fab_cfg_source_name(v->source));
			if (v->source == FAB_SRC_INVALID_ENV) {
				fputs(",\"rejected\":", out);
				json_str(out, v->invalid);
			}
			fputs(",\"help\":", out);
			json_str(out, d->help);
			fputc('}', out);
		}
		fputc(']', out);
		return;
	}
	for (int id = 0; id < FAB_CFG_COUNT; id++) {
		const struct fab_cfg_desc *d = &fab_cfg_descs[id];
		const struct fab_cfg_value *v = &cfg->v[id];
		fprintf(out, "  %-24s = %-10s (%s", d->name, v->s[0] ? v->s : "\"\"",
			fab_cfg_source_name(v->source));
		if (v->source == FAB_SRC_INVALID_ENV)
			fprintf(out, ": \"%s\"", v->invalid);
		fprintf(out, ")\n      %s\n", d->help);
	}
}
