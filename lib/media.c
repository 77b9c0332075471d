/*
 * media: the images of an OpenAI chat request; see media.h.
 */
#include "media.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "json.h"
#include "util.h"
#include "vision.h"

void
media_free(struct media *md)
{
	if (md == NULL)
		return;
	for (int i = 0; i < md->n; i++)
		free(md->img[i].data);
	free(md->img);
	memset(md, 0, sizeof *md);
}

/* 1 when part (a content part) is an image: {"type": "image_url", ...}. */
static int
is_image(const struct json *part)
{
	const char *t = json_get_str(part, "type");

	return t != NULL && strcmp(t, "image_url") == 0;
}

/* The value of a base64 character, -1 for any other byte. */
static int
b64(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	return c == '+' ? 62 : c == '/' ? 63 : -1;
}

/*
 * The bytes base64 text s[n] decodes to (the standard alphabet; the
 * closing '=' padding may be left out): 0 with *len, or -1 with *bad the
 * offset of the first byte that does not belong.
 */
static int
b64_len(const char *s, size_t n, size_t *len, size_t *bad)
{
	size_t pad = 0, body;

	while (pad < 2 && pad < n && s[n - 1 - pad] == '=')
		pad++;
	body = n - pad;
	for (size_t i = 0; i < body; i++)
		if (b64((unsigned char)s[i]) < 0) {
			*bad = i;
			return -1;
		}
	if (body % 4 == 1 || (pad > 0 && n % 4 != 0)) {
		*bad = n;	/* a truncated quantum */
		return -1;
	}
	*len = body / 4 * 3 + (body % 4 ? body % 4 - 1 : 0);
	return 0;
}

/* Decode base64 s[n] (b64_len accepted it) into out. */
static void
b64_decode(const char *s, size_t n, unsigned char *out)
{
	uint32_t acc = 0;
	int bits = 0;

	for (size_t i = 0; i < n && s[i] != '='; i++) {
		acc = acc << 6 | (uint32_t)b64((unsigned char)s[i]);
		if ((bits += 6) >= 8) {
			bits -= 8;
			*out++ = (unsigned char)(acc >> bits);
		}
	}
}

/*
 * The base64 data of data: URI u[n] into *d, *dn (pointers into u), or -1
 * with err naming `where`.
 */
static int
data_uri(const char *u, size_t n, const char *where, const char **d, size_t *dn, char *err)
{
	const char *comma = memchr(u, ',', n), *semi;
	size_t hl, tl;

	if (n >= 5 && (strncasecmp(u, "http:", 5) == 0 || (n >= 6 && strncasecmp(u, "https:", 6) == 0)))
		return util_err(err, "'%s': an http(s) URL: this server fetches nothing: send the "
		    "image as a data: URI (base64)", where);
	if (n < 5 || strncasecmp(u, "data:", 5) != 0 || comma == NULL)
		return util_err(err, "'%s': not a data: URI (data:image/png;base64,...)", where);
	hl = comma - (u + 5);
	if (hl < 7 || strncasecmp(comma - 7, ";base64", 7) != 0)
		return util_err(err, "'%s': a data: URI without ';base64': the image must be "
		    "base64", where);
	semi = memchr(u + 5, ';', hl);
	tl = semi - (u + 5);
	if (tl > 0 && (tl < 6 || strncasecmp(u + 5, "image/", 6) != 0))
		return util_err(err, "'%s': a data: URI of '%.*s': not an image", where,
		    (int)(tl < 64 ? tl : 64), u + 5);
	*d = comma + 1, *dn = n - (size_t)(comma + 1 - u);
	return 0;
}

/* Image part p (messages[i].content[j]) into md, within lim: 0, or -1 with err. */
static int
take(const struct json *p, size_t i, size_t j, const struct media_limits *lim,
    struct media *md, char *err)
{
	const struct json *iu = json_get(p, "image_url");
	const struct json *u = iu != NULL && iu->type == JSON_OBJECT ? json_get(iu, "url") : iu;
	struct media_image *m;
	char where[96];
	const char *d = NULL;
	size_t dn = 0, len = 0, bad = 0;

	snprintf(where, sizeof where, "messages[%zu].content[%zu]", i, j);
	if (lim == NULL || lim->max_images == 0)
		return util_err(err, "'%s': images are not enabled on this server", where);
	if (md->n == lim->max_images)
		return util_err(err, "'%s': more than %d images in a request", where,
		    lim->max_images);
	if (u == NULL || u->type != JSON_STRING)
		return util_err(err, "'%s.image_url': an object with a 'url' string is required",
		    where);
	snprintf(where, sizeof where, "messages[%zu].content[%zu].image_url.url", i, j);
	if (data_uri(u->str, u->n, where, &d, &dn, err) != 0)
		return -1;
	if (b64_len(d, dn, &len, &bad) != 0)
		return util_err(err, "'%s': bad base64 at byte %zu of the data", where, bad);
	snprintf(where, sizeof where, "messages[%zu].content[%zu]", i, j);
	if (len == 0)
		return util_err(err, "'%s': an empty image", where);
	if (len > lim->image_bytes)
		return util_err(err, "'%s': an image of %zu bytes: more than the %zu an image may "
		    "have", where, len, lim->image_bytes);
	if (len > lim->request_bytes - md->bytes)
		return util_err(err, "'%s': the request's images pass the %zu bytes a request may "
		    "send", where, lim->request_bytes);
	if ((m = realloc(md->img, (md->n + 1) * sizeof *m)) == NULL)
		return util_err(err, "out of memory");
	md->img = m, m += md->n;
	memset(m, 0, sizeof *m);
	if ((m->data = malloc(len)) == NULL)
		return util_err(err, "out of memory");
	b64_decode(d, dn, m->data);
	m->n = len;
	snprintf(m->where, sizeof m->where, "messages[%zu].content[%zu]", i, j);
	md->n++, md->bytes += len;
	return 0;
}

int
media_parse(const struct json *messages, const struct media_limits *lim, struct media *md,
    char *err)
{
	memset(md, 0, sizeof *md);
	if (messages == NULL || messages->type != JSON_ARRAY)
		return 0;
	for (size_t i = 0; i < messages->n; i++) {
		const struct json *c = json_get(&messages->items[i], "content");

		for (size_t j = 0; c != NULL && c->type == JSON_ARRAY && j < c->n; j++) {
			const struct json *p = &c->items[j];
			const char *t = json_get_str(p, "type");

			if (t != NULL && strcmp(t, "image") == 0)
				return util_err(err, "'messages[%zu].content[%zu]': type 'image' carries "
				    "no image: send an 'image_url' part with a data: URI", i, j);
			if (is_image(p) && take(p, i, j, lim, md, err) != 0)
				return -1;
		}
	}
	return 0;
}

/* Content array c, each image part as {"type": "image"}. */
static void
put_content(FILE *fp, const struct json *c)
{
	fputc('[', fp);
	for (size_t j = 0; j < c->n; j++) {
		if (j > 0)
			fputc(',', fp);
		if (is_image(&c->items[j]))
			fputs("{\"type\":\"image\"}", fp);
		else
			json_dump(fp, &c->items[j], 0);
	}
	fputc(']', fp);
}

void
media_put_messages(FILE *fp, const struct json *messages)
{
	if (messages == NULL || messages->type != JSON_ARRAY) {
		if (messages != NULL)
			json_dump(fp, messages, 0);
		else
			fputs("null", fp);
		return;
	}
	fputc('[', fp);
	for (size_t i = 0; i < messages->n; i++) {
		const struct json *m = &messages->items[i];

		if (i > 0)
			fputc(',', fp);
		if (m->type != JSON_OBJECT) {
			json_dump(fp, m, 0);
			continue;
		}
		fputc('{', fp);
		for (size_t k = 0; k < m->n; k++) {
			if (k > 0)
				fputc(',', fp);
			json_put_str(fp, m->keys[k], m->keylens[k], 0);
			fputc(':', fp);
			if (strcmp(m->keys[k], "content") == 0 && m->items[k].type == JSON_ARRAY)
				put_content(fp, &m->items[k]);
			else
				json_dump(fp, &m->items[k], 0);
		}
		fputc('}', fp);
	}
	fputc(']', fp);
}

int
media_prompt(const struct media *md, struct vision *v, const struct vision_tokens *vt,
    const struct image_limits *lim, int max_tokens, const int32_t *ids, size_t n,
    int32_t **out, size_t *n_out, struct vision_prompt *vp, char *err)
{
	struct vision_image *vi = calloc(md->n + 1, sizeof *vi);
	char why[UTIL_ERRLEN];
	int rc = -1, i;

	*out = NULL;
	if (vi == NULL)
		return util_err(err, "out of memory");
	for (i = 0; i < md->n; i++)
		if (vision_prepare(v, md->img[i].data, md->img[i].n, lim, max_tokens, &vi[i],
		    why) != 0) {
			util_err(err, "'%s': %s", md->img[i].where, why);
			goto out;
		}
	rc = vision_prompt_build(v, vt, ids, n, vi, md->n, out, n_out, vp, err);
out:
	for (int k = 0; k < md->n; k++)
		vision_image_free(&vi[k]);
	free(vi);
	return rc;
}
