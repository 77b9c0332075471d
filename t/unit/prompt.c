#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "prompt.h"
#include "test.h"
#include "util.h"

/* prompt_ids_json of the JSON text s with a vocabulary of nv; err gets the reason */
static int32_t *
ids(const char *s, int32_t nv, size_t *n, char *err)
{
	struct json *j = json_parse(s, strlen(s), err);
	int32_t *r;

	if (j == NULL) {
		FAILF("json_parse(%s): %s", s, err);
		return NULL;
	}
	err[0] = '\0';
	r = prompt_ids_json(j, nv, n, err);
	json_free(j);
	return r;
}

TEST(an_array_of_ids_in_the_vocabulary_is_taken_as_it_is)
{
	char err[UTIL_ERRLEN];
	size_t n = 0;
	int32_t *r = ids("[0, 7, 319, 7]", 320, &n, err);

	CHECK(r != NULL);
	CHECK_EQ_INT(n, 4);
	CHECK(r != NULL && r[0] == 0 && r[1] == 7 && r[2] == 319 && r[3] == 7);
	free(r);
	r = ids("[-0]", 1, &n, err);
	CHECK(r != NULL && n == 1 && r[0] == 0);
	free(r);
}

TEST(what_is_not_a_non_empty_array_of_integers_is_refused_by_name)
{
	char err[UTIL_ERRLEN];
	size_t n = 99;

	CHECK(ids("\"hi\"", 320, &n, err) == NULL);
	CHECK_EQ_STR(err, "\"prompt\": not an array of token ids");
	CHECK(ids("[]", 320, &n, err) == NULL);
	CHECK_EQ_STR(err, "\"prompt\": an empty array of token ids");
	CHECK(ids("[1, 2.5]", 320, &n, err) == NULL);
	CHECK_EQ_STR(err, "\"prompt\"[1]: 2.5 is not an integer token id");
	CHECK(ids("[1e2]", 320, &n, err) == NULL);
	CHECK_EQ_STR(err, "\"prompt\"[0]: 1e2 is not an integer token id");
	CHECK(ids("[3, \"4\"]", 320, &n, err) == NULL);
	CHECK_EQ_STR(err, "\"prompt\"[1]: a string is not an integer token id");
	CHECK(ids("[[1]]", 320, &n, err) == NULL);
	CHECK_EQ_STR(err, "\"prompt\"[0]: an array is not an integer token id");
	CHECK(ids("[null]", 320, &n, err) == NULL);
	CHECK_EQ_STR(err, "\"prompt\"[0]: null is not an integer token id");
	CHECK(ids("[1, 99999999999999999999]", 320, &n, err) == NULL);	/* past int64 */
	CHECK_EQ_STR(err, "\"prompt\"[1]: 99999999999999999999 is not an integer token id");
	CHECK_EQ_INT(n, 99);
	CHECK(prompt_ids_json(NULL, 320, &n, err) == NULL);
}

TEST(ids_outside_the_vocabulary_are_refused_with_the_id_and_the_size)
{
	char err[UTIL_ERRLEN];
	size_t n = 0;

	CHECK(ids("[1, 2, 320]", 320, &n, err) == NULL);
	CHECK_EQ_STR(err, "\"prompt\"[2]: id 320 is outside the vocabulary (320 tokens)");
	CHECK(ids("[-1]", 320, &n, err) == NULL);
	CHECK_EQ_STR(err, "\"prompt\"[0]: id -1 is outside the vocabulary (320 tokens)");
	CHECK(ids("[4294967296]", 320, &n, err) == NULL);
	CHECK_EQ_STR(err, "\"prompt\"[0]: id 4294967296 is outside the vocabulary (320 tokens)");
}

int
main(void)
{
	RUN(an_array_of_ids_in_the_vocabulary_is_taken_as_it_is);
	RUN(what_is_not_a_non_empty_array_of_integers_is_refused_by_name);
	RUN(ids_outside_the_vocabulary_are_refused_with_the_id_and_the_size);
	return test_summary();
}
