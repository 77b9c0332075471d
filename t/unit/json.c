#include <stdlib.h>

#include "json.h"
#include "test.h"
#include "util.h"

static struct json *
P(const char *s, char *err)
{
	return json_parse(s, strlen(s), err);
}

TEST(parses_nested_documents)
{
	char err[UTIL_ERRLEN];
	struct json *j = P(" {\"a\": [1, -2.5e1, true, null], \"b\": {\"c\": \"x\"}, \"a\": 7} ", err);
	int64_t v;

	CHECK(j != NULL);
	CHECK_EQ_INT(j->type, JSON_OBJECT);
	CHECK_EQ_INT(j->n, 3);
	CHECK(json_get_i64(j, "a", &v) == 0);	/* the last duplicate wins */
	CHECK_EQ_INT(v, 7);
	CHECK_EQ_STR(json_get_str(json_get(j, "b"), "c"), "x");
	CHECK_NEAR(json_at(&j->items[0], 1)->num, -25.0, 0);
	CHECK(json_get(j, "zz") == NULL);
	json_free(j);
}

TEST(decodes_escapes_and_surrogates)
{
	char err[UTIL_ERRLEN];
	struct json *j = P("\"a\\n\\u00e9\\ud83d\\ude00\\u0000z\"", err);

	CHECK(j != NULL);
	CHECK_EQ_INT(j->n, 1 + 1 + 2 + 4 + 1 + 1);
	CHECK(memcmp(j->str, "a\n\xc3\xa9\xf0\x9f\x98\x80\0z", 10) == 0);
	json_free(j);
}

TEST(keeps_large_integers_exact)
{
	char err[UTIL_ERRLEN];
	struct json *j = P("[9007199254740993, 1.0, 18446744073709551616]", err);

	CHECK(j != NULL);
	CHECK(j->items[0].is_int);
	CHECK_EQ_INT(j->items[0].i, 9007199254740993LL);
	CHECK(!j->items[1].is_int);
	CHECK(!j->items[2].is_int);	/* out of int64 range: a double only */
	json_free(j);
}

TEST(rejects_malformed_input_with_position)
{
	static const char *bad[] = {
		"", "[1,]", "{\"a\" 1}", "[1 2]", "\"abc", "01", "1.", "-", "tru", "[1] x",
		"\"\x01\"", "\"\\x\"", "\"\xff\"", "{1:2}", "nul",
	};
	char err[UTIL_ERRLEN];
	size_t i;

	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct json *j = P(bad[i], err);
		if (j != NULL) {
			FAILF("accepted %s", bad[i]);
			json_free(j);
		} else
			CHECK(strncmp(err, "line 1 column ", 14) == 0);
	}
}

TEST(limits_nesting_depth)
{
	char err[UTIL_ERRLEN], *s = malloc(2001);
	struct json *j;

	memset(s, '[', 2000);
	s[2000] = '\0';
	j = json_parse(s, 2000, err);
	CHECK(j == NULL);
	CHECK(strstr(err, "nesting too deep") != NULL);
	free(s);
}

TEST(escapes_like_python)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *fp = open_memstream(&buf, &n);

	json_put_str(fp, "a\"\\\n\x01\xc3\xa9\xf0\x9f\x98\x80", 11, 1);
	fputc(' ', fp);
	json_put_str(fp, "\xc3\xa9", 2, 0);
	fclose(fp);
	CHECK_EQ_STR(buf, "\"a\\\"\\\\\\n\\u0001\\u00e9\\ud83d\\ude00\" \"\xc3\xa9\"");
	free(buf);
}

int
main(void)
{
	RUN(parses_nested_documents);
	RUN(decodes_escapes_and_surrogates);
	RUN(keeps_large_integers_exact);
	RUN(rejects_malformed_input_with_position);
	RUN(limits_nesting_depth);
	RUN(escapes_like_python);
	return test_summary();
}
