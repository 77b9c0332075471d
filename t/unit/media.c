/*
 * media: the image parts of a chat request's messages, without a tower (the
 * prompts with their soft tokens are t/serve-vision.bats's).
 */
#include <stdio.h>
#include <stdlib.h>

#include "json.h"
#include "media.h"
#include "test.h"
#include "util.h"

static const struct media_limits lim = { 2, 16, 20 };

/* The messages of one user message with content parts (a JSON array's text), parsed into md. */
static int
parse(const char *parts, const struct media_limits *l, struct media *md, char *err)
{
	char *body;
	struct json *j;
	int rc;

	if (asprintf(&body, "{\"messages\": [{\"role\": \"user\", \"content\": %s}]}", parts) < 0)
		return -2;
	j = json_parse(body, strlen(body), err);
	free(body);
	CHECK(j != NULL);
	if (j == NULL)
		return -2;
	rc = media_parse(json_get(j, "messages"), l, md, err);
	json_free(j);
	return rc;
}

/* One image part whose URL is url. */
static int
one(const char *url, struct media *md, char *err)
{
	char *p;
	int rc;

	if (asprintf(&p, "[{\"type\": \"image_url\", \"image_url\": {\"url\": \"%s\"}}]", url) < 0)
		return -2;
	rc = parse(p, &lim, md, err);
	free(p);
	return rc;
}

TEST(base64_decodes_with_and_without_its_padding)
{
	static const struct { const char *b64, *want; } t[] = {
		{ "QUJD", "ABC" }, { "QUI=", "AB" }, { "QUI", "AB" }, { "QQ==", "A" }, { "QQ", "A" },
		{ "+/8=", "\xfb\xff" }, { "AAEC", "\x00\x01\x02" },
	};
	char err[UTIL_ERRLEN], url[64];
	struct media md;

	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
		size_t n = i == 6 ? 3 : strlen(t[i].want);

		snprintf(url, sizeof url, "data:image/png;base64,%s", t[i].b64);
		CHECK_EQ_INT(one(url, &md, err), 0);
		CHECK_EQ_INT(md.n, 1);
		CHECK(md.n == 1 && md.img[0].n == n && memcmp(md.img[0].data, t[i].want, n) == 0);
		CHECK_EQ_STR(md.img[0].where, "messages[0].content[0]");
		media_free(&md);
	}
	CHECK_EQ_INT(one("DATA:IMAGE/JPEG;BASE64,QUJD", &md, err), 0);	/* case-blind */
	CHECK_EQ_INT(md.bytes, 3);
	media_free(&md);
	CHECK_EQ_INT(one("data:;base64,QUJD", &md, err), 0);	/* no type */
	media_free(&md);
}

TEST(a_bad_uri_or_bad_base64_is_named_with_its_part)
{
	static const struct { const char *url, *err; } t[] = {
		{ "http://example.com/a.png", "'messages[0].content[0].image_url.url': an http(s) URL: "
		  "this server fetches nothing: send the image as a data: URI (base64)" },
		{ "HTTPS://example.com/a.png", "'messages[0].content[0].image_url.url': an http(s) URL: "
		  "this server fetches nothing: send the image as a data: URI (base64)" },
		{ "file:///etc/passwd", "'messages[0].content[0].image_url.url': not a data: URI "
		  "(data:image/png;base64,...)" },
		{ "data:image/png;base64", "'messages[0].content[0].image_url.url': not a data: URI "
		  "(data:image/png;base64,...)" },
		{ "data:image/png,QUJD", "'messages[0].content[0].image_url.url': a data: URI without "
		  "';base64': the image must be base64" },
		{ "data:text/plain;base64,QUJD", "'messages[0].content[0].image_url.url': a data: URI "
		  "of 'text/plain': not an image" },
		{ "data:image/png;base64,QU JD", "'messages[0].content[0].image_url.url': bad base64 "
		  "at byte 2 of the data" },
		{ "data:image/png;base64,QU=D", "'messages[0].content[0].image_url.url': bad base64 "
		  "at byte 2 of the data" },
		{ "data:image/png;base64,QUJDR", "'messages[0].content[0].image_url.url': bad base64 "
		  "at byte 5 of the data" },
		{ "data:image/png;base64,QUJ==", "'messages[0].content[0].image_url.url': bad base64 "
		  "at byte 5 of the data" },
		{ "data:image/png;base64,", "'messages[0].content[0]': an empty image" },
	};
	char err[UTIL_ERRLEN];
	struct media md;

	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
		CHECK_EQ_INT(one(t[i].url, &md, err), -1);
		CHECK_EQ_STR(err, t[i].err);
		media_free(&md);
	}
}

TEST(the_limits_count_images_and_decoded_bytes)
{
	char err[UTIL_ERRLEN];
	struct media md;
	/* 16 bytes each: at the per-image limit; two pass the request's 20 */
	const char *p16 = "{\"type\": \"image_url\", \"image_url\": \"data:image/png;base64,"
	    "AAAAAAAAAAAAAAAAAAAAAA==\"}";
	char *parts;

	CHECK_EQ_INT(one("data:image/png;base64,AAAAAAAAAAAAAAAAAAAAAAA=", &md, err), -1);
	CHECK_EQ_STR(err, "'messages[0].content[0]': an image of 17 bytes: more than the 16 an "
	    "image may have");
	media_free(&md);
	CHECK(asprintf(&parts, "[%s, {\"type\": \"text\", \"text\": \"x\"}, %s]", p16, p16) > 0);
	CHECK_EQ_INT(parse(parts, &lim, &md, err), -1);
	CHECK_EQ_STR(err, "'messages[0].content[2]': the request's images pass the 20 bytes a "
	    "request may send");
	media_free(&md);
	free(parts);
	CHECK_EQ_INT(parse("[{\"type\": \"image_url\", \"image_url\": \"data:;base64,QQ\"}, "
	    "{\"type\": \"image_url\", \"image_url\": \"data:;base64,QQ\"}, "
	    "{\"type\": \"image_url\", \"image_url\": \"data:;base64,QQ\"}]", &lim, &md, err), -1);
	CHECK_EQ_STR(err, "'messages[0].content[2]': more than 2 images in a request");
	media_free(&md);
	CHECK_EQ_INT(parse("[{\"type\": \"text\", \"text\": \"x\"}, {\"type\": \"image_url\", "
	    "\"image_url\": \"data:;base64,QQ\"}]", NULL, &md, err), -1);
	CHECK_EQ_STR(err, "'messages[0].content[1]': images are not enabled on this server");
	media_free(&md);
	CHECK_EQ_INT(parse("[{\"type\": \"image\"}]", &lim, &md, err), -1);
	CHECK_EQ_STR(err, "'messages[0].content[0]': type 'image' carries no image: send an "
	    "'image_url' part with a data: URI");
	media_free(&md);
	CHECK_EQ_INT(parse("[{\"type\": \"image_url\", \"image_url\": {\"detail\": \"low\"}}]", &lim,
	    &md, err), -1);
	CHECK_EQ_STR(err, "'messages[0].content[0].image_url': an object with a 'url' string is "
	    "required");
	media_free(&md);
	CHECK_EQ_INT(parse("\"no parts\"", NULL, &md, err), 0);	/* text alone: no images */
	CHECK_EQ_INT(md.n, 0);
	media_free(&md);
}

TEST(the_template_gets_each_image_part_as_type_image)
{
	const char *in = "[{\"role\": \"system\", \"content\": \"s\"}, {\"role\": \"user\", "
	    "\"content\": [{\"type\": \"image_url\", \"image_url\": {\"url\": \"data:;base64,QQ\", "
	    "\"detail\": \"high\"}}, {\"type\": \"text\", \"text\": \"what?\"}], \"name\": \"u\"}, 7]";
	char err[UTIL_ERRLEN], *b = NULL;
	size_t bl = 0;
	struct json *j = json_parse(in, strlen(in), err);
	FILE *fp = open_memstream(&b, &bl);

	CHECK(j != NULL && fp != NULL);
	media_put_messages(fp, j);
	fclose(fp);
	CHECK_EQ_STR(b, "[{\"role\":\"system\",\"content\":\"s\"},{\"role\":\"user\",\"content\":"
	    "[{\"type\":\"image\"},{\"type\":\"text\",\"text\":\"what?\"}],\"name\":\"u\"},7]");
	free(b), json_free(j);
}

int
main(void)
{
	RUN(base64_decodes_with_and_without_its_padding);
	RUN(a_bad_uri_or_bad_base64_is_named_with_its_part);
	RUN(the_limits_count_images_and_decoded_bytes);
	RUN(the_template_gets_each_image_part_as_type_image);
	return test_summary();
}
