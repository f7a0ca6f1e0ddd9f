/*
 * json_get.c - fabric_json_get, a test helper: reads one JSON document and
 * prints the values at the paths given, one line each, so that shell tests can
 * check `nccl-fabric-info --json` without python or jq (CI has neither).
 *
 *   fabric_json_get FILE PATH...      (FILE "-" reads stdin)
 *
 * A path is dot-separated: object keys, array indexes ("devices.0.ptrSupport"),
 * and a final "#" for the number of members or elements ("candidates.#").
 * Strings print decoded (control characters as spaces, so each value stays on
 * one line); numbers, true, false and null as written; objects and arrays as
 * their JSON text. The whole document is validated first.
 *
 * Exit status: 0 every path found; 1 a path is missing (named on stderr, the
 * value line left empty); 2 the input is not one valid JSON document, or usage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JG_MAX_DEPTH 64

struct jg {
	const char *s;
	size_t n, i;
};

static void jg_ws(struct jg *j)
{
	while (j->i < j->n && (j->s[j->i] == ' ' || j->s[j->i] == '\t' || j->s[j->i] == '\n' ||
			       j->s[j->i] == '\r'))
		j->i++;
}

static int jg_hex4(const char *p, unsigned *out)
{
	unsigned v = 0;
	for (int k = 0; k < 4; k++) {
		char c = p[k];
		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (unsigned)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (unsigned)(c - 'A' + 10);
		else
			return -1;
	}
	*out = v;
	return 0;
}

/* A string at j->i (the opening quote). Decoded into out (may be NULL). */
static int jg_string(struct jg *j, FILE *out)
{
	if (j->i >= j->n || j->s[j->i] != '"')
		return -1;
	j->i++;
	while (j->i < j->n) {
		unsigned char c = (unsigned char)j->s[j->i++];
		if (c == '"')
			return 0;
		if (c < 0x20)
			return -1;
		if (c != '\\') {
			if (out)
				fputc(c, out);
			continue;
		}
		if (j->i >= j->n)
			return -1;
		char e = j->s[j->i++];
		unsigned u = 0;
		switch (e) {
		case '"': case '\\': case '/': u = (unsigned char)e; break;
		case 'b': case 'f': case 'n': case 'r': case 't': u = ' '; break;
		case 'u':
			if (j->i + 4 > j->n || jg_hex4(j->s + j->i, &u))
				return -1;
			j->i += 4;
			if (u < 0x20)
				u = ' ';
			break;
		default: return -1;
		}
		if (!out)
			continue;
		/* UTF-8 for the BMP; surrogate halves are written as they come. */
		if (u < 0x80) {
			fputc((int)u, out);
		} else if (u < 0x800) {
			fputc((int)(0xc0 | (u >> 6)), out);
			fputc((int)(0x80 | (u & 0x3f)), out);
		} else {
			fputc((int)(0xe0 | (u >> 12)), out);
			fputc((int)(0x80 | ((u >> 6) & 0x3f)), out);
			fputc((int)(0x80 | (u & 0x3f)), out);
		}
	}
	return -1;
}

static int jg_value(struct jg *j, int depth);

static int jg_literal(struct jg *j, const char *word)
{
	size_t l = strlen(word);
	if (j->i + l > j->n || strncmp(j->s + j->i, word, l))
		return -1;
	j->i += l;
	return 0;
}

static int jg_number(struct jg *j)
{
	size_t start = j->i;
	if (j->i < j->n && j->s[j->i] == '-')
		j->i++;
	size_t digits = j->i;
	while (j->i < j->n && j->s[j->i] >= '0' && j->s[j->i] <= '9')
		j->i++;
	if (j->i == digits)
		return -1;
	if (j->i < j->n && j->s[j->i] == '.') {
		j->i++;
		size_t frac = j->i;
		while (j->i < j->n && j->s[j->i] >= '0' && j->s[j->i] <= '9')
			j->i++;
		if (j->i == frac)
			return -1;
	}
	if (j->i < j->n && (j->s[j->i] == 'e' || j->s[j->i] == 'E')) {
		j->i++;
		if (j->i < j->n && (j->s[j->i] == '+' || j->s[j->i] == '-'))
			j->i++;
		size_t exp = j->i;
		while (j->i < j->n && j->s[j->i] >= '0' && j->s[j->i] <= '9')
			j->i++;
		if (j->i == exp)
			return -1;
	}
	return j->i > start ? 0 : -1;
}

/* Skips (and validates) the value at j->i. */
static int jg_value(struct jg *j, int depth)
{
	if (depth > JG_MAX_DEPTH)
		return -1;
	jg_ws(j);
	if (j->i >= j->n)
		return -1;
	char c = j->s[j->i];
	if (c == '"')
		return jg_string(j, NULL);
	if (c == 't')
		return jg_literal(j, "true");
	if (c == 'f')
		return jg_literal(j, "false");
	if (c == 'n')
		return jg_literal(j, "null");
	if (c == '{' || c == '[') {
		char close = c == '{' ? '}' : ']';
		j->i++;
		jg_ws(j);
		if (j->i < j->n && j->s[j->i] == close) {
			j->i++;
			return 0;
		}
		for (;;) {
			if (c == '{') {
				jg_ws(j);
				if (jg_string(j, NULL))
					return -1;
				jg_ws(j);
				if (j->i >= j->n || j->s[j->i++] != ':')
					return -1;
			}
			if (jg_value(j, depth + 1))
				return -1;
			jg_ws(j);
			if (j->i >= j->n)
				return -1;
			char d = j->s[j->i++];
			if (d == close)
				return 0;
			if (d != ',')
				return -1;
		}
	}
	return jg_number(j);
}

/* Key at j->i equals name? Leaves j->i after the key. */
static int jg_key_is(struct jg *j, const char *name, int *eq)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);
	if (!m)
		return -1;
	int rc = jg_string(j, m);
	fclose(m);
	*eq = rc == 0 && !strcmp(buf, name);
	free(buf);
	return rc;
}

/* The value at j->i, following the path's remaining components. 1 found
 * (printed), 0 missing, -1 malformed. */
static int jg_find(struct jg *j, char **comp, int ncomp, FILE *out)
{
	jg_ws(j);
	if (ncomp == 0) {
		size_t start = j->i;
		if (j->s[j->i] == '"')
			return jg_string(j, out) ? -1 : 1;
		if (jg_value(j, 0))
			return -1;
		fwrite(j->s + start, 1, j->i - start, out);
		return 1;
	}
	char c = j->i < j->n ? j->s[j->i] : 0;
	if (c != '{' && c != '[')
		return 0;
	int count_only = ncomp == 1 && !strcmp(comp[0], "#");
	long want = -1;
	if (c == '[' && !count_only) {
		char *end;
		want = strtol(comp[0], &end, 10);
		if (*end || want < 0)
			return 0;
	}
	char close = c == '{' ? '}' : ']';
	j->i++;
	jg_ws(j);
	long k = 0;
	if (j->i < j->n && j->s[j->i] == close) {
		if (count_only) {
			fputs("0", out);
			return 1;
		}
		return 0;
	}
	for (;; k++) {
		int hit = 0;
		if (c == '{') {
			jg_ws(j);
			if (jg_key_is(j, count_only ? "" : comp[0], &hit))
				return -1;
			jg_ws(j);
			if (j->i >= j->n || j->s[j->i++] != ':')
				return -1;
			if (count_only)
				hit = 0;
		} else {
			hit = k == want;
		}
		if (hit)
			return jg_find(j, comp + 1, ncomp - 1, out);
		if (jg_value(j, 0))
			return -1;
		jg_ws(j);
		if (j->i >= j->n)
			return -1;
		char d = j->s[j->i++];
		if (d == close)
			break;
		if (d != ',')
			return -1;
	}
	if (count_only) {
		fprintf(out, "%ld", k + 1);
		return 1;
	}
	return 0;
}

static char *jg_read(const char *path, size_t *len)
{
	FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
	if (!f)
		return NULL;
	size_t cap = 1 << 16, n = 0;
	char *buf = malloc(cap);
	while (buf) {
		size_t got = fread(buf + n, 1, cap - n, f);
		n += got;
		if (n < cap)
			break;
		char *nb = realloc(buf, cap * 2);
		if (!nb) {
			free(buf);
			buf = NULL;
			break;
		}
		buf = nb;
		cap *= 2;
	}
	if (f != stdin)
		fclose(f);
	if (buf) {
		/* NUL-terminated, so a look at the next character never reads past it */
		char *nb = realloc(buf, n + 1);
		if (!nb) {
			free(buf);
			return NULL;
		}
		buf = nb;
		buf[n] = '\0';
	}
	*len = n;
	return buf;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: fabric_json_get FILE|- PATH...\n");
		return 2;
	}
	size_t len = 0;
	char *doc = jg_read(argv[1], &len);
	if (!doc) {
		fprintf(stderr, "fabric_json_get: cannot read %s\n", argv[1]);
		return 2;
	}
	struct jg j = {doc, len, 0};
	if (jg_value(&j, 0) || (jg_ws(&j), j.i != j.n)) {
		fprintf(stderr, "fabric_json_get: %s is not one valid JSON document (error near byte %zu)\n",
			argv[1], j.i);
		free(doc);
		return 2;
	}
	int status = 0;
	for (int a = 2; a < argc; a++) {
		char *copy = strdup(argv[a]);
		char *comp[JG_MAX_DEPTH];
		int ncomp = 0;
		char *save = NULL;
		for (char *t = strtok_r(copy, ".", &save); t && ncomp < JG_MAX_DEPTH;
		     t = strtok_r(NULL, ".", &save))
			comp[ncomp++] = t;
		struct jg w = {doc, len, 0};
		int rc = jg_find(&w, comp, ncomp, stdout);
		fputc('\n', stdout);
		if (rc != 1) {
			fprintf(stderr, "fabric_json_get: no value at %s\n", argv[a]);
			status = 1;
		}
		free(copy);
	}
	free(doc);
	return status;
}
