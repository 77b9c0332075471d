#include "hub.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hub_net.h"
#include "json.h"
#include "util.h"

/* --- specs --- */

int
hub_is_spec(const char *s)
{
	return s != NULL && (strncmp(s, "hf:", 3) == 0 || strncmp(s, "hfds:", 5) == 0);
}

static int
repo_char(int c)
{
	return isalnum(c) || c == '-' || c == '_' || c == '.';
}

/* A relative path with no empty, "." or ".." component and no control bytes. */
static int
safe_relpath(const char *s, size_t n)
{
	size_t i, start = 0;

	if (n == 0 || n > 4096 || s[0] == '/')
		return 0;
	for (i = 0; i <= n; i++) {
		if (i < n && ((unsigned char)s[i] < 0x20 || s[i] == '\\' || s[i] == 0x7f))
			return 0;
		if (i == n || s[i] == '/') {
			size_t len = i - start;

			if (len == 0 || (len == 1 && s[start] == '.') ||
			    (len == 2 && s[start] == '.' && s[start + 1] == '.'))
				return 0;
			start = i + 1;
		}
	}
	return 1;
}

static int
copy_part(char *dst, size_t cap, const char *s, size_t n)
{
	if (n >= cap)
		return -1;
	memcpy(dst, s, n);
	dst[n] = '\0';
	return 0;
}

static int
check_repo(const char *repo, char *err)
{
	const char *p, *slash = strchr(repo, '/');

	if (repo[0] == '\0')
		return util_err(err, "no repository named");
	if (slash != NULL && (slash == repo || slash[1] == '\0' || strchr(slash + 1, '/') != NULL))
		return util_err(err, "'%s' is not owner/name", repo);
	for (p = repo; *p != '\0'; p++)
		if (*p != '/' && !repo_char((unsigned char)*p))
			return util_err(err, "'%s' has a character not allowed in a repository name", repo);
	if (strstr(repo, "..") != NULL || repo[0] == '.' || (slash && slash[1] == '.'))
		return util_err(err, "'%s' is not a repository name", repo);
	return 0;
}

int
hub_spec_parse(struct hub_spec *s, const char *spec, char *err)
{
	const char *p, *end;

	memset(s, 0, sizeof *s);
	if (strncmp(spec, "hf:", 3) == 0)
		p = spec + 3;
	else if (strncmp(spec, "hfds:", 5) == 0)
		p = spec + 5, s->dataset = 1;
	else
		return util_err(err, "not an hf: or hfds: spec");
	end = p + strcspn(p, "@:/");
	if (*end == '/')
		end += 1 + strcspn(end + 1, "@:/");
	if (copy_part(s->repo, sizeof s->repo, p, (size_t)(end - p)) != 0)
		return util_err(err, "repository name too long");
	if (check_repo(s->repo, err) != 0)
		return -1;
	p = end;
	if (*p == '/') {	/* owner/name/path: the file at path */
		if (!safe_relpath(p + 1, strlen(p + 1)))
			return util_err(err, "'%s' is not a path in the repository", p + 1);
		if (copy_part(s->pattern, sizeof s->pattern, p + 1, strlen(p + 1)) != 0)
			return util_err(err, "file path too long");
		s->exact = 1;
		return 0;
	}
	if (*p == '@') {
		end = p + 1 + strcspn(p + 1, ":");
		if (copy_part(s->revision, sizeof s->revision, p + 1, (size_t)(end - p - 1)) != 0)
			return util_err(err, "revision too long");
		if (!safe_relpath(s->revision, strlen(s->revision)))
			return util_err(err, "'%s' is not a revision", s->revision);
		p = end;
	}
	if (*p == ':') {
		if (p[1] == '\0')
			return util_err(err, "empty file pattern after ':'");
		if (copy_part(s->pattern, sizeof s->pattern, p + 1, strlen(p + 1)) != 0)
			return util_err(err, "file pattern too long");
	}
	return 0;
}

void
hub_opts_init(struct hub_opts *o)
{
	memset(o, 0, sizeof *o);
	o->offline = -1;
	o->retries = 5;
	o->jobs = 4;
	o->connections = 8;
	o->chunk = (uint64_t)64 << 20;
}

/* --- response headers --- */

void
hub_meta_reset(struct hub_meta *m)
{
	memset(m, 0, sizeof *m);
	m->linked_size = m->content_length = -1;
	m->retry_after = -1;
}

static void
copy_value(char *dst, size_t cap, const char *v, size_t n)
{
	if (n >= cap)
		n = cap - 1;
	memcpy(dst, v, n);
	dst[n] = '\0';
}

/* huggingface_hub's normalization: lstrip("W/"), strip('"'). */
static void
copy_etag(char *dst, size_t cap, const char *v, size_t n)
{
	while (n > 0 && (*v == 'W' || *v == '/'))
		v++, n--;
	while (n > 0 && *v == '"')
		v++, n--;
	while (n > 0 && v[n - 1] == '"')
		n--;
	copy_value(dst, cap, v, n);
}

static int64_t
header_int(const char *v, size_t n, int64_t hi)
{
	int64_t x = 0;
	size_t i;

	if (n == 0 || n > 19)
		return -1;
	for (i = 0; i < n; i++) {
		if (!isdigit((unsigned char)v[i]) || x > (INT64_MAX - (v[i] - '0')) / 10)
			return -1;	/* not a number, or past int64 */
		x = x * 10 + (v[i] - '0');
	}
	return x <= hi ? x : -1;
}

static int
header_is(const char *name, size_t n, const char *want)
{
	return strlen(want) == n && strncasecmp(name, want, n) == 0;
}

void
hub_meta_header(struct hub_meta *m, const char *line, size_t n)
{
	const char *colon, *v;
	size_t nn, vn;

	while (n > 0 && (line[n - 1] == '\r' || line[n - 1] == '\n'))
		n--;
	if (n > 5 && strncmp(line, "HTTP/", 5) == 0) {
		const char *sp = memchr(line, ' ', n);

		hub_meta_reset(m);
		if (sp != NULL && (size_t)(line + n - sp) >= 4)
			m->status = (int)header_int(sp + 1, 3, 999);
		return;
	}
	if ((colon = memchr(line, ':', n)) == NULL)
		return;
	nn = (size_t)(colon - line);
	for (v = colon + 1; v < line + n && (*v == ' ' || *v == '\t'); v++)
		;
	vn = (size_t)(line + n - v);
	while (vn > 0 && (v[vn - 1] == ' ' || v[vn - 1] == '\t'))
		vn--;
	if (header_is(line, nn, "X-Repo-Commit"))
		copy_value(m->commit, sizeof m->commit, v, vn);
	else if (header_is(line, nn, "ETag"))
		copy_etag(m->etag, sizeof m->etag, v, vn);
	else if (header_is(line, nn, "X-Linked-Etag"))
		copy_etag(m->linked_etag, sizeof m->linked_etag, v, vn);
	else if (header_is(line, nn, "X-Linked-Size"))
		m->linked_size = header_int(v, vn, INT64_MAX / 2);
	else if (header_is(line, nn, "Content-Length"))
		m->content_length = header_int(v, vn, INT64_MAX / 2);
	else if (header_is(line, nn, "Retry-After"))
		m->retry_after = (int)header_int(v, vn, 86400);
	else if (header_is(line, nn, "X-Error-Code"))
		copy_value(m->error_code, sizeof m->error_code, v, vn);
}

/* --- listings --- */

static int
is_hex(const char *s, size_t n)
{
	size_t i;

	if (strlen(s) != n)
		return 0;
	for (i = 0; i < n; i++)
		if (!isxdigit((unsigned char)s[i]) || isupper((unsigned char)s[i]))
			return 0;
	return 1;
}

void
hub_listing_free(struct hub_listing *l)
{
	size_t i;

	if (l == NULL)
		return;
	for (i = 0; i < l->n; i++)
		free(l->e[i].name);
	free(l->e);
	l->e = NULL;
	l->n = 0;
}

/* Fill e from one file's metadata object (either format). */
static int
parse_entry(struct hub_entry *e, const char *name, size_t namelen, const struct json *o,
    int tree, char *err)
{
	const struct json *lfs = tree ? o : json_get(o, "lfs");
	const char *blob = json_get_str(o, tree ? "blob_id" : "blobId");
	const char *sha = lfs ? json_get_str(lfs, tree ? "lfs_sha256" : "sha256") : NULL;
	int64_t sz;

	if (!safe_relpath(name, namelen) || memchr(name, '\0', namelen) != NULL)
		return util_err(err, "unsafe file name in listing");
	if ((e->name = strdup(name)) == NULL)
		return util_err(err, "out of memory");
	e->size = HUB_UNKNOWN_SIZE;
	if (o == NULL)
		return 0;
	if (json_get_i64(o, "size", &sz) == 0 && sz >= 0)
		e->size = (uint64_t)sz;
	if (lfs != NULL && json_get_i64(lfs, tree ? "lfs_size" : "size", &sz) == 0 && sz >= 0)
		e->size = (uint64_t)sz;
	if (blob != NULL && strlen(blob) < sizeof e->blob_id && is_hex(blob, strlen(blob)))
		strcpy(e->blob_id, blob);
	if (sha != NULL) {
		if (!is_hex(sha, 64))
			return util_err(err, "'%s': LFS sha256 is not 64 hex digits", name);
		strcpy(e->sha256, sha);
	}
	return 0;
}

int
hub_listing_parse(struct hub_listing *l, const char *text, size_t n, int tree, char *err)
{
	struct json *root;
	const struct json *arr;
	const char *sha;
	int64_t ver;
	size_t i;
	int r = 0;

	memset(l, 0, sizeof *l);
	if ((root = json_parse(text, n, err)) == NULL)
		return -1;
	if (root->type != JSON_OBJECT) {
		json_free(root);
		return util_err(err, "listing is not a JSON object");
	}
	if (tree) {
		arr = json_get(root, "files");
		if (json_get_i64(root, "format_version", &ver) != 0 || ver != 1 ||
		    arr == NULL || arr->type != JSON_OBJECT)
			r = util_err(err, "not a format 1 tree listing");
	} else {
		arr = json_get(root, "siblings");
		sha = json_get_str(root, "sha");
		if (sha == NULL || !is_hex(sha, 40))
			r = util_err(err, "revision info has no 40-digit commit 'sha'");
		else if (arr == NULL || arr->type != JSON_ARRAY)
			r = util_err(err, "revision info has no 'siblings' list");
		else
			strcpy(l->commit, sha);
	}
	if (r == 0 && (l->e = calloc(arr->n ? arr->n : 1, sizeof *l->e)) == NULL)
		r = util_err(err, "out of memory");
	for (i = 0; r == 0 && i < arr->n; i++) {
		const struct json *o = &arr->items[i];
		const char *name = tree ? arr->keys[i] : json_get_str(o, "rfilename");
		size_t nl = tree ? arr->keylens[i] : 0;

		if (o->type != JSON_OBJECT || name == NULL) {
			r = util_err(err, "listing entry %zu is not a file object", i);
			break;
		}
		if (!tree)
			nl = json_get(o, "rfilename")->n;
		l->n++;
		r = parse_entry(&l->e[i], name, nl, o, tree, err);
	}
	json_free(root);
	if (r != 0)
		hub_listing_free(l);
	return r;
}

/* --- which files a spec names --- */

/*
 * A split GGUF part "<base>-KKKKK-of-NNNNN.gguf": returns K and sets *of
 * and *baselen, or 0 when name is not one.
 */
static int
split_part(const char *name, int *of, size_t *baselen)
{
	static const char tail[] = "-00000-of-00000.gguf";
	size_t n = strlen(name), t = sizeof tail - 1, i;
	const char *p;
	int k = 0, m = 0;

	if (n <= t)
		return 0;
	p = name + n - t;
	for (i = 0; i < t; i++) {
		if (tail[i] == '0') {
			if (!isdigit((unsigned char)p[i]))
				return 0;
			if (i < 6)
				k = k * 10 + (p[i] - '0');
			else
				m = m * 10 + (p[i] - '0');
		} else if (p[i] != tail[i])
			return 0;
	}
	if (k < 1 || k > m)
		return 0;
	*of = m;
	*baselen = n - t;
	return k;
}

/* huggingface_hub's filter: a pattern ending in '/' matches what is under it. */
static int
glob_any(char *const *pats, size_t n, const char *name)
{
	char buf[1100];
	size_t i, len;

	for (i = 0; i < n; i++) {
		len = strlen(pats[i]);
		if (len > 0 && pats[i][len - 1] == '/' && len + 2 < sizeof buf) {
			snprintf(buf, sizeof buf, "%s*", pats[i]);
			if (fnmatch(buf, name, 0) == 0)
				return 1;
		} else if (fnmatch(pats[i], name, 0) == 0)
			return 1;
	}
	return 0;
}

/* "a, b, c and N more" of the entries idx[0..n) into err after prefix. */
static int
candidates_err(const struct hub_listing *l, const size_t *idx, size_t n, char *err, const char *fmt, ...)
{
	char buf[UTIL_ERRLEN];
	size_t i, at;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	at = strlen(buf);
	for (i = 0; i < n && i < 8 && at < sizeof buf; i++)
		at += snprintf(buf + at, sizeof buf - at, "%s'%s'", i ? ", " : ": ",
		    l->e[idx ? idx[i] : i].name);
	if (n > 8 && at < sizeof buf)
		snprintf(buf + at, sizeof buf - at, " and %zu more", n - 8);
	return util_err(err, "%s", buf);
}

/* The parts 1..of of the split set that entry i belongs to, in order. */
static int
split_set(const struct hub_listing *l, size_t i, size_t **sel, size_t *nsel, char *err)
{
	size_t base, b, j;
	int of, o, k;

	split_part(l->e[i].name, &of, &base);
	if ((*sel = calloc((size_t)of, sizeof **sel)) == NULL)
		return util_err(err, "out of memory");
	for (k = 0; k < of; k++)
		(*sel)[k] = SIZE_MAX;
	for (j = 0; j < l->n; j++) {
		k = split_part(l->e[j].name, &o, &b);
		if (k > 0 && o == of && b == base && strncmp(l->e[j].name, l->e[i].name, base) == 0)
			(*sel)[k - 1] = j;
	}
	for (k = 0; k < of; k++)
		if ((*sel)[k] == SIZE_MAX)
			return util_err(err, "split part '%.*s-%05d-of-%05d.gguf' (%d of %d) is missing",
			    (int)base, l->e[i].name, k + 1, of, k + 1, of);
	*nsel = (size_t)of;
	return 0;
}

/* Entry i alone, or the split set it is a part of; it is what gets printed. */
static int
select_one(const struct hub_listing *l, size_t i, size_t **sel, size_t *nsel, long *first,
    char *err)
{
	size_t b;
	int of;

	*first = 0;
	if (split_part(l->e[i].name, &of, &b) != 0)
		return split_set(l, i, sel, nsel, err);
	if ((*sel = malloc(sizeof **sel)) == NULL)
		return util_err(err, "out of memory");
	(*sel)[0] = i;
	*nsel = 1;
	return 0;
}

/* name is sub, or its last component is. */
static int
exact_name(const char *name, const char *sub)
{
	const char *base = strrchr(name, '/');

	return strcmp(name, sub) == 0 || (base != NULL && strcmp(base + 1, sub) == 0);
}

static int
select_substring(const struct hub_listing *l, const char *sub, size_t **sel, size_t *nsel,
    long *first, char *err)
{
	size_t *m = calloc(l->n ? l->n : 1, sizeof *m), nm = 0, i, base0 = 0, b;
	int of, of0 = 0, one = 1, r;

	if (m == NULL)
		return util_err(err, "out of memory");
	for (i = 0; i < l->n; i++)
		if (strstr(l->e[i].name, sub) != NULL)
			m[nm++] = i;
	if (nm == 0) {
		r = candidates_err(l, NULL, l->n, err, "no file name contains '%s' (%zu files)", sub, l->n);
		free(m);
		return r;
	}
	/* a name equal to the substring wins: "r.gguf" over "r.gguf.txt" */
	for (i = 0; nm > 1 && i < nm; i++)
		if (exact_name(l->e[m[i]].name, sub)) {
			m[0] = m[i];
			nm = 1;
		}
	/* several matches are fine when they are parts of one split set */
	for (i = 0; i < nm; i++) {
		if (split_part(l->e[m[i]].name, &of, &b) == 0) {
			one = nm == 1;
			break;
		}
		if (i == 0)
			of0 = of, base0 = b;
		else if (of != of0 || b != base0 || strncmp(l->e[m[i]].name, l->e[m[0]].name, b) != 0)
			one = 0;
	}
	if (!one) {
		r = candidates_err(l, m, nm, err, "'%s' matches %zu files", sub, nm);
		free(m);
		return r;
	}
	i = m[0];
	free(m);
	return select_one(l, i, sel, nsel, first, err);
}

/* The file at path exactly (all parts when it is one of a split set). */
static int
select_path(const struct hub_listing *l, const char *path, size_t **sel, size_t *nsel,
    long *first, char *err)
{
	size_t i;

	for (i = 0; i < l->n; i++)
		if (strcmp(l->e[i].name, path) == 0)
			return select_one(l, i, sel, nsel, first, err);
	return candidates_err(l, NULL, l->n, err, "no file '%s' (%zu files)", path, l->n);
}

int
hub_select(const struct hub_listing *l, const struct hub_spec *s, const struct hub_opts *o,
    size_t **sel, size_t *nsel, long *first, char *err)
{
	size_t i, n = 0;

	*sel = NULL;
	*nsel = 0;
	*first = -1;
	if (s->exact)
		return select_path(l, s->pattern, sel, nsel, first, err);
	if (s->pattern[0] != '\0' && !s->dataset)
		return select_substring(l, s->pattern, sel, nsel, first, err);
	if ((*sel = calloc(l->n ? l->n : 1, sizeof **sel)) == NULL)
		return util_err(err, "out of memory");
	for (i = 0; i < l->n; i++) {
		const char *name = l->e[i].name;

		if (s->pattern[0] != '\0') {
			if (fnmatch(s->pattern, name, 0) != 0)
				continue;
		} else if ((o->ninclude > 0 && !glob_any(o->include, o->ninclude, name)) ||
		    glob_any(o->exclude, o->nexclude, name))
			continue;
		(*sel)[n++] = i;
	}
	*nsel = n;
	if (n > 0)
		return 0;
	free(*sel);
	*sel = NULL;
	if (s->pattern[0] != '\0')
		return candidates_err(l, NULL, l->n, err, "no file matches '%s' (%zu files)", s->pattern, l->n);
	return util_err(err, "no file left after --include/--exclude (%zu files)", l->n);
}

/* --- one resolve call --- */

struct hub {
	const struct hub_opts *o;
	struct hub_spec spec;
	char	*cache;		/* the hub cache directory */
	char	*endpoint;	/* no trailing '/' */
	char	*token;		/* NULL: none */
	int	offline;
	const char *rev;	/* the revision asked for */
	char	*folder;	/* models--owner--name */
	char	*storage;	/* cache/folder */
	struct hub_net net;
	pthread_mutex_t mu;	/* guards what follows and the callbacks */
	uint64_t done, total;
	size_t	next;		/* next file to fetch */
	int	failed;
	char	err[UTIL_ERRLEN];
	struct hub_listing l;
	struct hub_result *r;
	size_t	*todo;		/* [ntodo] indices into r->files still to fetch */
	size_t	ntodo;
};

static char *
xasprintf(const char *fmt, ...)
{
	char *s = NULL;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	return n < 0 ? NULL : s;
}

static void
hub_log(void *arg, const char *msg)
{
	struct hub *h = arg;

	if (h->o->log == NULL)
		return;
	pthread_mutex_lock(&h->mu);
	h->o->log(h->o->arg, msg);
	pthread_mutex_unlock(&h->mu);
}

static void
logf_(struct hub *h, const char *fmt, ...)
{
	char msg[UTIL_ERRLEN];
	va_list ap;

	if (h->o->log == NULL)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	hub_log(h, msg);
}

static void
hub_bytes(void *arg, int64_t delta)
{
	struct hub *h = arg;

	pthread_mutex_lock(&h->mu);
	h->done = delta < 0 && (uint64_t)-delta > h->done ? 0 : h->done + (uint64_t)delta;
	if (h->o->progress != NULL)
		h->o->progress(h->o->arg, h->done, h->total);
	pthread_mutex_unlock(&h->mu);
}

static int
env_true(const char *v)
{
	static const char *yes[] = { "1", "ON", "YES", "TRUE" };
	size_t i;

	for (i = 0; v != NULL && i < sizeof yes / sizeof yes[0]; i++)
		if (strcasecmp(v, yes[i]) == 0)
			return 1;
	return 0;
}

/* The first line of a token file, or NULL. */
static char *
read_token_file(const char *path)
{
	char err[UTIL_ERRLEN], *t;
	size_t n;

	if (path == NULL || (t = util_read_file(path, &n, err)) == NULL)
		return NULL;
	t[strcspn(t, "\r\n")] = '\0';
	if (t[0] == '\0') {
		free(t);
		return NULL;
	}
	return t;
}

static char *
home_dir(void)
{
	const char *v;

	if ((v = getenv("HF_HOME")) != NULL && v[0] != '\0')
		return strdup(v);
	if ((v = getenv("XDG_CACHE_HOME")) != NULL && v[0] != '\0')
		return xasprintf("%s/huggingface", v);
	return xasprintf("%s/.cache/huggingface", (v = getenv("HOME")) != NULL ? v : ".");
}

/* Settle endpoint, cache, token and offline from opts and the environment. */
static int
hub_setup(struct hub *h, char *err)
{
	const char *v;
	char *home = home_dir(), *tokpath;

	if (home == NULL)
		return util_err(err, "out of memory");
	if (h->o->cache != NULL)
		h->cache = strdup(h->o->cache);
	else if ((v = getenv("HF_HUB_CACHE")) != NULL && v[0] != '\0')
		h->cache = strdup(v);
	else if ((v = getenv("HUGGINGFACE_HUB_CACHE")) != NULL && v[0] != '\0')
		h->cache = strdup(v);
	else
		h->cache = xasprintf("%s/hub", home);
	v = h->o->endpoint != NULL ? h->o->endpoint : getenv("HF_ENDPOINT");
	h->endpoint = strdup(v != NULL && v[0] != '\0' ? v : "https://huggingface.co");
	if (h->endpoint != NULL)
		for (size_t n = strlen(h->endpoint); n > 0 && h->endpoint[n - 1] == '/'; n--)
			h->endpoint[n - 1] = '\0';
	if (h->o->token != NULL)
		h->token = h->o->token[0] != '\0' ? strdup(h->o->token) : NULL;
	else if ((v = getenv("HF_TOKEN")) != NULL && v[0] != '\0')
		h->token = strdup(v);
	else {
		v = getenv("HF_TOKEN_PATH");
		tokpath = v != NULL && v[0] != '\0' ? strdup(v) : xasprintf("%s/token", home);
		h->token = read_token_file(tokpath);
		free(tokpath);
	}
	free(home);
	h->offline = h->o->offline >= 0 ? h->o->offline :
	    env_true(getenv("HF_HUB_OFFLINE")) || env_true(getenv("TRANSFORMERS_OFFLINE"));
	if (h->cache == NULL || h->endpoint == NULL)
		return util_err(err, "out of memory");
	return 0;
}

/* mkdir -p of the directory part of path (the whole path when dir=1). */
static int
mkdirs(const char *path, int dir)
{
	char *p = strdup(path), *s;
	int r = 0;

	if (p == NULL)
		return -1;
	if (!dir && (s = strrchr(p, '/')) != NULL)
		*s = '\0';
	for (s = p + 1; r == 0; s++) {
		if (*s != '/' && *s != '\0')
			continue;
		char c = *s;

		*s = '\0';
		if (mkdir(p, 0777) != 0 && errno != EEXIST)
			r = -1;
		*s = c;
		if (c == '\0')
			break;
	}
	free(p);
	return r;
}

/* Write text to path atomically (temp + rename). */
static int
write_atomic(const char *path, const char *text, size_t n)
{
	char *tmp = xasprintf("%s.%d.tmp", path, (int)getpid());
	int fd, r = -1;

	if (tmp == NULL || mkdirs(path, 0) != 0)
		goto out;
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666)) < 0)
		goto out;
	if (write(fd, text, n) == (ssize_t)n && close(fd) == 0)
		r = rename(tmp, path);
	else
		close(fd);
	if (r != 0)
		unlink(tmp);
out:
	free(tmp);
	return r;
}

/* --- the cache --- */

static int
is_commit(const char *s)
{
	return is_hex(s, 40);
}

/* refs/<rev> of the repo into commit[41]; 0, or -1 when absent or odd. */
static int
read_ref(struct hub *h, char commit[41])
{
	char err[UTIL_ERRLEN], *path = xasprintf("%s/refs/%s", h->storage, h->rev), *t;
	size_t n;

	t = path ? util_read_file(path, &n, err) : NULL;
	free(path);
	if (t == NULL)
		return -1;
	t[strcspn(t, " \t\r\n")] = '\0';
	if (!is_commit(t)) {
		free(t);
		return -1;
	}
	memcpy(commit, t, 41);
	free(t);
	return 0;
}

static int
read_tree_cache(struct hub *h, const char *commit, struct hub_listing *l)
{
	char err[UTIL_ERRLEN], *path = xasprintf("%s/trees/%s.json", h->storage, commit), *t;
	size_t n;
	int r;

	t = path ? util_read_file(path, &n, err) : NULL;
	free(path);
	if (t == NULL)
		return -1;
	r = hub_listing_parse(l, t, n, 1, err);
	free(t);
	if (r == 0)
		memcpy(l->commit, commit, 41);
	return r;
}

static int
listing_add(struct hub_listing *l, size_t *cap, const char *name)
{
	if (l->n == *cap) {
		size_t c = *cap ? *cap * 2 : 16;
		struct hub_entry *e = realloc(l->e, c * sizeof *e);

		if (e == NULL)
			return -1;
		l->e = e;
		*cap = c;
	}
	memset(&l->e[l->n], 0, sizeof l->e[0]);
	l->e[l->n].size = HUB_UNKNOWN_SIZE;
	if ((l->e[l->n].name = strdup(name)) == NULL)
		return -1;
	l->n++;
	return 0;
}

/* Every file present under dir (relative names after rel). */
static int
walk(const char *dir, const char *rel, struct hub_listing *l, size_t *cap, int depth)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	struct stat st;
	int r = 0;

	if (d == NULL)
		return -1;
	while (r == 0 && (e = readdir(d)) != NULL) {
		char *full, *name;

		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		full = xasprintf("%s/%s", dir, e->d_name);
		name = rel[0] ? xasprintf("%s/%s", rel, e->d_name) : strdup(e->d_name);
		if (full == NULL || name == NULL)
			r = -1;
		else if (stat(full, &st) != 0)
			;	/* a dangling pointer: its blob is gone */
		else if (S_ISDIR(st.st_mode) && depth < 32)
			r = walk(full, name, l, cap, depth + 1);
		else if (S_ISREG(st.st_mode))
			r = listing_add(l, cap, name);
		free(full);
		free(name);
	}
	closedir(d);
	return r;
}

static char *
snapshot_path(struct hub *h, const char *commit, const char *name)
{
	return name ? xasprintf("%s/snapshots/%s/%s", h->storage, commit, name) :
	    xasprintf("%s/snapshots/%s", h->storage, commit);
}

static int
present(struct hub *h, const char *commit, const char *name)
{
	char *p = snapshot_path(h, commit, name);
	struct stat st;
	int r = p != NULL && stat(p, &st) == 0 && S_ISREG(st.st_mode);

	free(p);
	return r;
}

/* Store the listing as huggingface_hub's trees/<commit>.json, when complete. */
static void
write_tree_cache(struct hub *h, const struct hub_listing *l)
{
	char *buf = NULL, *path;
	size_t len = 0, i;
	FILE *fp = open_memstream(&buf, &len);

	if (fp == NULL)
		return;
	for (i = 0; i < l->n; i++)
		if (l->e[i].size == HUB_UNKNOWN_SIZE || l->e[i].blob_id[0] == '\0')
			break;
	fputs("{\n \"format_version\": 1,\n \"files\": {", fp);
	for (size_t j = 0; i == l->n && j < l->n; j++) {
		const struct hub_entry *e = &l->e[j];

		fputs(j ? ",\n  " : "\n  ", fp);
		json_put_str(fp, e->name, strlen(e->name), 0);
		fprintf(fp, ": {\"size\": %llu, \"blob_id\": \"%s\"", (unsigned long long)e->size, e->blob_id);
		if (e->sha256[0] != '\0')
			fprintf(fp, ", \"lfs_sha256\": \"%s\", \"lfs_size\": %llu", e->sha256,
			    (unsigned long long)e->size);
		fputc('}', fp);
	}
	fputs("\n }\n}", fp);
	fclose(fp);
	path = xasprintf("%s/trees/%s.json", h->storage, l->commit);
	if (i == l->n && path != NULL && write_atomic(path, buf, len) != 0)
		logf_(h, "%s: cannot write the tree listing: %s", path, strerror(errno));
	free(path);
	free(buf);
}

static int
write_ref(struct hub *h, const char *commit)
{
	char *path, err[UTIL_ERRLEN], *old;
	size_t n;
	int r = 0;

	if (strcmp(h->rev, commit) == 0)
		return 0;
	if ((path = xasprintf("%s/refs/%s", h->storage, h->rev)) == NULL)
		return -1;
	old = util_read_file(path, &n, err);
	if (old == NULL || strcmp(old, commit) != 0)
		r = write_atomic(path, commit, strlen(commit));
	free(old);
	free(path);
	return r;
}

/* --- fetching --- */

/* Percent-encode s, keeping unreserved bytes and, when slash=1, '/'. */
static char *
quote(const char *s, int slash)
{
	static const char hex[] = "0123456789ABCDEF";
	char *q = malloc(strlen(s) * 3 + 1), *o = q;

	if (q == NULL)
		return NULL;
	for (; *s != '\0'; s++) {
		unsigned char c = (unsigned char)*s;

		if (isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || (slash && c == '/'))
			*o++ = (char)c;
		else {
			*o++ = '%';
			*o++ = hex[c >> 4];
			*o++ = hex[c & 15];
		}
	}
	*o = '\0';
	return q;
}

static int
safe_etag(const char *e)
{
	size_t i, n = strlen(e);

	if (n == 0 || n > 128 || strcmp(e, ".") == 0 || strcmp(e, "..") == 0)
		return 0;
	for (i = 0; i < n; i++)
		if (!repo_char((unsigned char)e[i]))
			return 0;
	return 1;
}

/* snapshots/<commit>/<name> -> ../../[../]blobs/<etag>, replaced atomically. */
static int
link_pointer(struct hub *h, const char *pointer, const char *name, const char *etag)
{
	char *target, *tmp = xasprintf("%s.%d.lnk", pointer, (int)getpid()), *p;
	size_t depth = 0;
	int r = -1;

	for (p = strchr(name, '/'); p != NULL; p = strchr(p + 1, '/'))
		depth++;
	target = malloc(3 * depth + strlen(etag) + 16);
	if (target == NULL || tmp == NULL || mkdirs(pointer, 0) != 0)
		goto out;
	strcpy(target, "../../");
	while (depth-- > 0)
		strcat(target, "../");
	strcat(target, "blobs/");
	strcat(target, etag);
	unlink(tmp);
	if (symlink(target, tmp) == 0 && (r = rename(tmp, pointer)) != 0)
		unlink(tmp);
out:
	free(target);
	free(tmp);
	return r;
}

/* Download into blob (we hold the lock), verify, and publish it. */
static int
fetch_blob(struct hub *h, const char *url, const char *blob, const char *etag, uint64_t size,
    const char *name, char *err)
{
	char *inc = xasprintf("%s.incomplete", blob), got[65];
	struct stat st;
	int r = -1;

	if (inc == NULL)
		return util_err(err, "out of memory");
	logf_(h, "fetching '%s' (%llu bytes)", name, (unsigned long long)size);
	if (hub_net_fetch(&h->net, url, inc, size, is_hex(etag, 64) ? got : NULL, err) != 0)
		goto out;
	if (size != HUB_UNKNOWN_SIZE && (stat(inc, &st) != 0 || (uint64_t)st.st_size != size)) {
		unlink(inc);
		util_err(err, "'%s': got %lld bytes, expected %llu", name, (long long)st.st_size,
		    (unsigned long long)size);
		goto out;
	}
	if (is_hex(etag, 64) && strcmp(got, etag) != 0) {
		unlink(inc);
		util_err(err, "'%s': sha256 mismatch: expected %s, got %s (download deleted)", name, etag, got);
		goto out;
	}
	if (rename(inc, blob) != 0) {
		util_err(err, "%s: %s", blob, strerror(errno));
		goto out;
	}
	r = 0;
out:
	free(inc);
	return r;
}

/* Under the blob's lock: fetch it unless someone did, then point at it. */
static int
fetch_locked(struct hub *h, struct hub_file *f, const char *url, const char *etag,
    uint64_t size, char *err)
{
	char *blob = xasprintf("%s/blobs/%s", h->storage, etag);
	char *lock = xasprintf("%s/.locks/%s/%s.lock", h->cache, h->folder, etag);
	int fd = -1, r = -1;

	if (blob == NULL || lock == NULL) {
		util_err(err, "out of memory");
		goto out;
	}
	if (mkdirs(blob, 0) != 0) {
		util_err(err, "%s: %s", blob, strerror(errno));
		goto out;
	}
	if (mkdirs(lock, 0) != 0 || (fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0664)) < 0) {
		util_err(err, "%s: %s", lock, strerror(errno));
		goto out;
	}
	while (flock(fd, LOCK_EX) != 0)
		if (errno != EINTR || (h->o->cancel != NULL && *h->o->cancel)) {
			util_err(err, "%s: %s", lock, errno == EINTR ? "interrupted" : strerror(errno));
			goto out;
		}
	if (access(blob, F_OK) == 0) {
		logf_(h, "'%s': blob %s already in the cache", f->name, etag);
		if (size != HUB_UNKNOWN_SIZE)
			hub_bytes(h, (int64_t)size);
	} else if (fetch_blob(h, url, blob, etag, size, f->name, err) != 0)
		goto out;
	if (link_pointer(h, f->path, f->name, etag) != 0) {
		util_err(err, "%s: %s", f->path, strerror(errno));
		goto out;
	}
	r = 0;
out:
	if (fd >= 0)
		close(fd);	/* releases the lock */
	free(blob);
	free(lock);
	return r;
}

static int
fetch_one(struct hub *h, struct hub_file *f, char *err)
{
	char *rq = quote(h->r->commit, 0), *nq = quote(f->name, 1), *url = NULL, *loc = NULL;
	struct hub_meta m;
	const char *etag;
	uint64_t size = f->size;
	int r = -1;

	if (rq == NULL || nq == NULL ||
	    (url = xasprintf("%s/%s%s/resolve/%s/%s", h->endpoint, h->spec.dataset ? "datasets/" : "",
	    h->spec.repo, rq, nq)) == NULL) {
		util_err(err, "out of memory");
		goto out;
	}
	if (hub_net_head(&h->net, url, &m, &loc, err) != 0)
		goto out;
	etag = m.linked_etag[0] ? m.linked_etag : m.etag;
	if (m.commit[0] == '\0') {
		util_err(err, "HEAD %s: no X-Repo-Commit header: is HF_ENDPOINT a Hugging Face hub?", url);
		goto out;
	}
	if (!safe_etag(etag)) {
		util_err(err, "HEAD %s: missing or unusable ETag", url);
		goto out;
	}
	if (m.linked_size >= 0)
		size = (uint64_t)m.linked_size;
	else if (m.status / 100 == 2 && m.content_length >= 0)
		size = (uint64_t)m.content_length;
	if (size != f->size) {	/* the listing was off: so was the total */
		pthread_mutex_lock(&h->mu);
		h->total += (size == HUB_UNKNOWN_SIZE ? 0 : size) - (f->size == HUB_UNKNOWN_SIZE ? 0 : f->size);
		pthread_mutex_unlock(&h->mu);
	}
	r = fetch_locked(h, f, loc, etag, size, err);
out:
	free(rq);
	free(nq);
	free(url);
	free(loc);
	return r;
}

static void *
worker(void *arg)
{
	struct hub *h = arg;
	char err[UTIL_ERRLEN];
	size_t i;

	for (;;) {
		pthread_mutex_lock(&h->mu);
		if (h->failed || h->next >= h->ntodo || (h->o->cancel != NULL && *h->o->cancel)) {
			pthread_mutex_unlock(&h->mu);
			return NULL;
		}
		i = h->todo[h->next++];
		pthread_mutex_unlock(&h->mu);
		if (fetch_one(h, &h->r->files[i], err) != 0) {
			pthread_mutex_lock(&h->mu);
			if (!h->failed)
				memcpy(h->err, err, sizeof h->err);
			h->failed = 1;
			pthread_mutex_unlock(&h->mu);
		}
	}
}

/* Mark the cache for backup tools, as huggingface_hub does. */
static void
cachedir_tag(struct hub *h)
{
	static const char tag[] = "Signature: 8a477f597d28d172789f06886806bc55\n"
	    "# This file is a cache directory tag created by huggingface_hub.\n"
	    "# For information about cache directory tags, see:\n"
	    "#\thttps://bford.info/cachedir/\n";
	char *path = xasprintf("%s/CACHEDIR.TAG", h->cache);

	if (path != NULL && access(path, F_OK) != 0 && write_atomic(path, tag, sizeof tag - 1) != 0)
		logf_(h, "%s: %s", path, strerror(errno));
	free(path);
}

/* Fetch every file of r not yet cached, jobs at a time. */
static int
fetch_all(struct hub *h, char *err)
{
	pthread_t tid[64];
	size_t i, nt;

	if ((h->todo = calloc(h->r->nfiles + 1, sizeof *h->todo)) == NULL)
		return util_err(err, "out of memory");
	for (i = 0; i < h->r->nfiles; i++)
		if (!h->r->files[i].cached) {
			h->todo[h->ntodo++] = i;
			if (h->r->files[i].size != HUB_UNKNOWN_SIZE)
				h->total += h->r->files[i].size;
		}
	if (h->ntodo == 0)
		return 0;
	cachedir_tag(h);
	nt = h->o->jobs < 1 ? 1 : h->o->jobs > 64 ? 64 : (size_t)h->o->jobs;
	if (nt > h->ntodo)
		nt = h->ntodo;
	for (i = 0; i < nt; i++)
		if (i > 0 && pthread_create(&tid[i], NULL, worker, h) != 0)
			break;
	nt = i;
	worker(h);
	for (i = 1; i < nt; i++)
		pthread_join(tid[i], NULL);
	if (h->failed)
		return util_err(err, "%s", h->err);
	if (h->o->cancel != NULL && *h->o->cancel)
		return util_err(err, "interrupted");
	return 0;
}

/* --- resolving --- */

void
hub_result_free(struct hub_result *r)
{
	size_t i;

	if (r == NULL)
		return;
	for (i = 0; i < r->nfiles; i++) {
		free(r->files[i].name);
		free(r->files[i].path);
	}
	for (i = 0; i < r->npaths; i++)
		free(r->paths[i]);
	free(r->files);
	free(r->paths);
	memset(r, 0, sizeof *r);
}

static int
build_result(struct hub *h, const struct hub_listing *l, const size_t *sel, size_t nsel,
    long first, char *err)
{
	struct hub_result *r = h->r;
	size_t i, np = h->spec.pattern[0] == '\0' || first >= 0 ? 1 : nsel;
	struct stat st;

	memcpy(r->commit, l->commit, 41);
	if ((r->files = calloc(nsel ? nsel : 1, sizeof *r->files)) == NULL ||
	    (r->paths = calloc(np, sizeof *r->paths)) == NULL)
		return util_err(err, "out of memory");
	for (i = 0; i < nsel; i++) {
		struct hub_file *f = &r->files[i];

		r->nfiles++;
		f->name = strdup(l->e[sel[i]].name);
		f->path = snapshot_path(h, l->commit, l->e[sel[i]].name);
		if (f->name == NULL || f->path == NULL)
			return util_err(err, "out of memory");
		f->size = l->e[sel[i]].size;
		f->cached = present(h, l->commit, f->name);
		if (f->cached && f->size == HUB_UNKNOWN_SIZE && stat(f->path, &st) == 0)
			f->size = (uint64_t)st.st_size;
	}
	for (i = 0; i < np; i++) {
		if (h->spec.pattern[0] == '\0')
			r->paths[i] = snapshot_path(h, l->commit, NULL);
		else
			r->paths[i] = strdup(r->files[first >= 0 ? (size_t)first : i].path);
		if (r->paths[i] == NULL)
			return util_err(err, "out of memory");
		r->npaths++;
	}
	return 0;
}

/* Resolve from the cache alone: 0 hit, 1 miss, -1 error (err set). */
static int
from_cache(struct hub *h, char *err)
{
	struct hub_listing l = { 0 };
	size_t *sel = NULL, nsel = 0, i, cap = 0;
	char commit[41], *dir;
	long first;
	int tree, r = 1;

	if (is_commit(h->rev))
		memcpy(commit, h->rev, 41);
	else if (read_ref(h, commit) != 0)
		return 1;
	tree = read_tree_cache(h, commit, &l) == 0;
	if (!tree) {
		memset(&l, 0, sizeof l);
		dir = snapshot_path(h, commit, NULL);
		if (dir == NULL || walk(dir, "", &l, &cap, 0) != 0) {
			free(dir);
			hub_listing_free(&l);
			return 1;
		}
		free(dir);
		memcpy(l.commit, commit, 41);
	}
	if (hub_select(&l, &h->spec, h->o, &sel, &nsel, &first, err) != 0) {
		r = h->offline ? -1 : 1;
		goto out;
	}
	for (i = 0; i < nsel; i++)
		if (!present(h, commit, l.e[sel[i]].name))
			goto out;
	if (!tree && h->spec.pattern[0] == '\0' && !h->offline)
		goto out;	/* a whole repo is complete only by its listing */
	r = build_result(h, &l, sel, nsel, first, err) == 0 ? 0 : -1;
out:
	free(sel);
	hub_listing_free(&l);
	return r;
}

static int
online(struct hub *h, char *err)
{
	struct hub_listing *l = &h->l;
	char *rq = quote(h->rev, 0), *url = NULL, *body = NULL;
	size_t *sel = NULL, nsel, len;
	struct hub_meta m;
	long first;
	int r = -1;

	if (rq == NULL || (url = xasprintf("%s/api/%s/%s/revision/%s?blobs=true", h->endpoint,
	    h->spec.dataset ? "datasets" : "models", h->spec.repo, rq)) == NULL) {
		util_err(err, "out of memory");
		goto out;
	}
	if (hub_net_get(&h->net, url, &body, &len, &m, err) != 0)
		goto out;
	if (hub_listing_parse(l, body, len, 0, err) != 0) {
		char why[UTIL_ERRLEN];

		memcpy(why, err, sizeof why);
		util_err(err, "GET %s: %s", url, why);
		goto out;
	}
	if (!h->o->dry_run) {
		if (write_ref(h, l->commit) != 0)
			logf_(h, "%s: cannot write refs/%s: %s", h->storage, h->rev, strerror(errno));
		write_tree_cache(h, l);
	}
	if (hub_select(l, &h->spec, h->o, &sel, &nsel, &first, err) != 0 ||
	    build_result(h, l, sel, nsel, first, err) != 0)
		goto out;
	r = h->o->dry_run ? 0 : fetch_all(h, err);
out:
	free(rq);
	free(url);
	free(body);
	free(sel);
	return r;
}

static int
resolve(struct hub *h, const char *spec, char *err)
{
	const char *slash, *kind;
	int r;

	if (hub_spec_parse(&h->spec, spec, err) != 0 || hub_setup(h, err) != 0)
		return -1;
	kind = h->spec.dataset ? "datasets" : "models";
	h->rev = h->spec.revision[0] ? h->spec.revision : h->o->revision ? h->o->revision : "main";
	if (!safe_relpath(h->rev, strlen(h->rev)))
		return util_err(err, "'%s' is not a revision", h->rev);
	slash = strchr(h->spec.repo, '/');
	h->folder = slash == NULL ? xasprintf("%s--%s", kind, h->spec.repo) :
	    xasprintf("%s--%.*s--%s", kind, (int)(slash - h->spec.repo), h->spec.repo, slash + 1);
	if (h->folder == NULL)
		return util_err(err, "out of memory");
	if ((h->storage = xasprintf("%s/%s", h->cache, h->folder)) == NULL)
		return util_err(err, "out of memory");
	if ((!h->o->refresh || h->offline) && (r = from_cache(h, err)) <= 0)
		return r;
	hub_result_free(h->r);
	if (h->offline)
		return util_err(err, "not in the cache %s (HF_HUB_OFFLINE is set)", h->cache);
	if (!hub_net_available())
		return util_err(err, "not in the cache %s, and hf: specs need a libcurl build (this one has none)",
		    h->cache);
	h->net.endpoint = h->endpoint;
	h->net.token = h->token;
	h->net.retries = h->o->retries;
	h->net.connections = h->o->connections;
	h->net.chunk = h->o->chunk;
	h->net.cancel = h->o->cancel;
	h->net.log = hub_log;
	h->net.bytes = hub_bytes;
	h->net.arg = h;
	hub_net_global_init();
	r = online(h, err);
	hub_net_global_cleanup();
	return r;
}

int
hub_resolve(const char *spec, const struct hub_opts *o, struct hub_result *r, char *err)
{
	struct hub h = { .o = o, .r = r };
	char why[UTIL_ERRLEN];
	int rc;

	memset(r, 0, sizeof *r);
	pthread_mutex_init(&h.mu, NULL);
	rc = resolve(&h, spec, why);
	if (rc != 0)
		util_err(err, "%s: %s", spec, why);
	pthread_mutex_destroy(&h.mu);
	if (h.token != NULL)
		memset(h.token, 0, strlen(h.token));
	free(h.token);
	free(h.cache);
	free(h.endpoint);
	free(h.folder);
	free(h.storage);
	free(h.todo);
	hub_listing_free(&h.l);
	return rc;
}

char *
hub_path(const char *spec, const struct hub_opts *o, char *err)
{
	struct hub_opts def;
	struct hub_result r;
	char *p;

	if (!hub_is_spec(spec)) {
		if ((p = strdup(spec)) == NULL)
			util_err(err, "out of memory");
		return p;
	}
	if (o == NULL) {
		hub_opts_init(&def);
		o = &def;
	}
	if (hub_resolve(spec, o, &r, err) != 0) {
		hub_result_free(&r);
		return NULL;
	}
	if ((p = strdup(r.paths[0])) == NULL)
		util_err(err, "out of memory");
	hub_result_free(&r);
	return p;
}
