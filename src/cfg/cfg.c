#include "cfg/cfg.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/util.h"
#include "util/json.h"

const struct cfg_desc cfg_descs[CFG_COUNT] = {
#define CFG_DESC(id, type, def, min, max, names, help) \
	[CFG_##id] = { "NCCL_FABRIC_" #id, type, def, min, max, names, help },
	CFG_SETTINGS(CFG_DESC)
#undef CFG_DESC
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

int cfg_parse(const struct cfg_desc *d, const char *text, struct cfg_value *out)
{
	if (strlen(text) >= sizeof(out->s))
		return -EINVAL;
	switch (d->type) {
	case CFG_STR:
		out->i = 0;
		break;
	case CFG_BOOL:
		if (!strcmp(text, "1") || !strcasecmp(text, "true") || !strcasecmp(text, "yes") ||
		    !strcasecmp(text, "on"))
			out->i = 1;
		else if (!strcmp(text, "0") || !strcasecmp(text, "false") ||
			 !strcasecmp(text, "no") || !strcasecmp(text, "off"))
			out->i = 0;
		else
			return -EINVAL;
		break;
	case CFG_INT: {
		/* an integer setting with the name list "auto" also takes that word: 0 */
		if (d->enum_names && !strcmp(d->enum_names, "auto") && !strcasecmp(text, "auto")) {
			out->i = 0;
			break;
		}
		char *end = NULL;
		errno = 0;
		long long v = strtoll(text, &end, 10);
		if (errno || end == text || *end != '\0' || v < d->min || v > d->max)
			return -EINVAL;
		out->i = v;
		break;
	}
	case CFG_ENUM:
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
	util_strlcpy(out->s, text, sizeof(out->s));
	return 0;
}

static const char *env_lookup(const char *name, void *arg)
{
	(void)arg;
	return getenv(name);
}

int cfg_load(struct cfg_values *cfg, cfg_lookup_fn lookup, void *arg)
{
	int invalid = 0;
	if (!lookup)
		lookup = env_lookup;
	memset(cfg, 0, sizeof(*cfg));
	for (int id = 0; id < CFG_COUNT; id++) {
		const struct cfg_desc *d = &cfg_descs[id];
		struct cfg_value *v = &cfg->v[id];
		/* Defaults are compile-time constants: they always parse. */
		(void)cfg_parse(d, d->def, v);
		v->source = CFG_SRC_DEFAULT;
		const char *text = lookup(d->name, arg);
		if (!text)
			continue;
		struct cfg_value parsed = { 0 };
		if (cfg_parse(d, text, &parsed) == 0) {
			*v = parsed;
			v->source = CFG_SRC_ENV;
		} else {
			v->source = CFG_SRC_INVALID_ENV;
			util_strlcpy(v->invalid, text, sizeof(v->invalid));
			invalid++;
		}
	}
	return invalid;
}

const char *cfg_source_name(enum cfg_source src)
{
	switch (src) {
	case CFG_SRC_DEFAULT: return "default";
	case CFG_SRC_ENV: return "environment";
	case CFG_SRC_INVALID_ENV: return "default (invalid environment value ignored)";
	}
	return "?";
}

void cfg_dump(const struct cfg_values *cfg, FILE *out, int json)
{
	if (json) {
		fputc('[', out);
		for (int id = 0; id < CFG_COUNT; id++) {
			const struct cfg_desc *d = &cfg_descs[id];
			const struct cfg_value *v = &cfg->v[id];
			fprintf(out, "%s{\"name\":", id ? "," : "");
			json_str(out, d->name);
			fputs(",\"value\":", out);
			json_str(out, v->s);
			fputs(",\"default\":", out);
			json_str(out, d->def);
			fputs(",\"source\":", out);
			json_str(out, cfg_source_name(v->source));
			if (v->source == CFG_SRC_INVALID_ENV) {
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
	for (int id = 0; id < CFG_COUNT; id++) {
		const struct cfg_desc *d = &cfg_descs[id];
		const struct cfg_value *v = &cfg->v[id];
		fprintf(out, "  %-24s = %-10s (%s", d->name, v->s[0] ? v->s : "\"\"",
			cfg_source_name(v->source));
		if (v->source == CFG_SRC_INVALID_ENV)
			fprintf(out, ": \"%s\"", v->invalid);
		fprintf(out, ")\n      %s\n", d->help);
	}
}
