#include "auth.h"
#include "test.h"
#include "util.h"

#define ONE "456f1612bd25c6c8455039437bf441f43aa3b7d1c0b0047c712d5036dfebef0d"	/* sk-one */
#define TWO "5E31278545505DB1D65BF1DD696E8EAA1EDFB00BA455E21C83200C04EF643C91"	/* sk-two */

static struct auth *
load(const char *text, long rpm, long tpm, char *err)
{
	struct auth_limits d = { rpm, tpm };
	struct auth *a = auth_new(&d);

	if (a != NULL && auth_load(a, text, strlen(text), "keys", err) != 0) {
		auth_free(a);
		return NULL;
	}
	return a;
}

TEST(keys_file_digests_comments_and_fields)
{
	char err[UTIL_ERRLEN] = "";
	struct auth *a = load("# operators' keys\n\n" ONE "  name=ops rpm=5\n" TWO " # team two\n",
	    60, 0, err);

	CHECK(a != NULL);
	if (a == NULL)
		return;
	CHECK_EQ_INT(auth_count(a), 2);
	CHECK_EQ_INT(auth_find(a, "sk-one", 6), 1);
	CHECK_EQ_INT(auth_find(a, "sk-two", 6), 2);
	CHECK_EQ_INT(auth_find(a, "sk-thr", 6), -1);
	CHECK_EQ_INT(auth_find(a, "", 0), -1);
	CHECK_EQ_STR(auth_label(a, 1), "ops");
	CHECK_EQ_STR(auth_label(a, 2), "sha256:5e312785");
	CHECK_EQ_STR(auth_label(a, AUTH_ANON), "-");
	CHECK_EQ_INT(auth_limits(a, 1).rpm, 5);
	CHECK_EQ_INT(auth_limits(a, 2).rpm, 60);	/* the default */
	auth_free(a);
	auth_free(NULL);
}

TEST(malformed_lines_name_file_and_line)
{
	static const struct { const char *text, *want; } c[] = {
		{ "\n# c\nsk-one\n", "keys:3: not a SHA-256 digest (64 hex digits) of a key" },
		{ ONE "\n" ONE "\n", "keys:2: a digest given twice" },
		{ ONE " rpm=x\n", "keys:1: 'rpm=x': not a number in 0..1099511627776" },
		{ ONE " tpm=-1\n", "keys:1: 'tpm=-1': not a number in 0..1099511627776" },
		{ ONE " burst=3\n", "keys:1: 'burst=3': not name=, rpm= or tpm=" },
		{ "456f1612bd25c6c8455039437bf441f43aa3b7d1c0b0047c712d5036dfebef0g\n",
		  "keys:1: not a SHA-256 digest (64 hex digits) of a key" },
	};

	for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
		char err[UTIL_ERRLEN] = "";
		struct auth *a = load(c[i].text, 0, 0, err);

		CHECK(a == NULL);
		CHECK_EQ_STR(err, c[i].want);
	}
}

TEST(a_failed_load_adds_nothing)
{
	struct auth_limits d = { 0, 0 };
	struct auth *a = auth_new(&d);
	char err[UTIL_ERRLEN];
	const char *bad = ONE "\nnope\n";

	CHECK(auth_load(a, bad, strlen(bad), "k", err) == -1);
	CHECK_EQ_INT(auth_count(a), 0);
	CHECK_EQ_INT(auth_find(a, "sk-one", 6), -1);
	CHECK(auth_add_key(a, "sk-one", 6, NULL, err) == 0);
	CHECK_EQ_INT(auth_find(a, "sk-one", 6), 1);
	CHECK_EQ_STR(auth_label(a, 1), "sha256:456f1612");
	CHECK(auth_add_key(a, "sk-one", 6, NULL, err) == -1);
	CHECK(auth_load(a, ONE "\n", 65, "k", err) == -1);	/* already there */
	CHECK_EQ_STR(err, "k:1: a digest given twice");
	CHECK(auth_add_key(a, "", 0, NULL, err) == -1);
	auth_free(a);
}

TEST(requests_a_minute_refill_continuously)
{
	char err[UTIL_ERRLEN];
	struct auth *a = load(ONE " rpm=3\n", 0, 0, err);
	double retry = 0, t = 1000;

	for (int i = 0; i < 3; i++)
		CHECK_EQ_INT(auth_admit(a, 1, t, &retry), AUTH_OK);
	CHECK_EQ_INT(auth_admit(a, 1, t, &retry), AUTH_REQUESTS);
	CHECK_NEAR(retry, 20, 1e-9);	/* 3 a minute: one each 20 s */
	CHECK_EQ_INT(auth_admit(a, 1, t + 15, &retry), AUTH_REQUESTS);
	CHECK_NEAR(retry, 5, 1e-9);
	CHECK_EQ_INT(auth_admit(a, 1, t + 20, &retry), AUTH_OK);
	CHECK_EQ_INT(auth_admit(a, 1, t + 20, &retry), AUTH_REQUESTS);
	/* an hour idle: the bucket holds a minute's worth, no more */
	for (int i = 0; i < 3; i++)
		CHECK_EQ_INT(auth_admit(a, 1, t + 3600, &retry), AUTH_OK);
	CHECK_EQ_INT(auth_admit(a, 1, t + 3600, &retry), AUTH_REQUESTS);
	auth_free(a);
}

TEST(tokens_charged_after_the_fact_hold_the_next_request)
{
	char err[UTIL_ERRLEN];
	struct auth *a = load(ONE " tpm=600\n" TWO "\n", 0, 0, err);
	double retry = 0, t = 50;

	CHECK_EQ_INT(auth_admit(a, 1, t, &retry), AUTH_OK);
	CHECK_EQ_INT(auth_admit(a, 1, t, &retry), AUTH_OK);	/* no request limit */
	auth_charge(a, 1, 1000, t);	/* 600 - 1000: 400 in debt */
	CHECK_EQ_INT(auth_admit(a, 1, t, &retry), AUTH_TOKENS);
	CHECK_NEAR(retry, 40.1, 1e-9);	/* 10 a second: 401 tokens */
	CHECK_EQ_INT(auth_admit(a, 1, t + 40.11, &retry), AUTH_OK);
	CHECK_EQ_INT(auth_admit(a, 2, t, &retry), AUTH_OK);	/* another key, no limits */
	auth_charge(a, 2, 1L << 40, t);
	CHECK_EQ_INT(auth_admit(a, 2, t, &retry), AUTH_OK);
	auth_free(a);
}

TEST(both_limits_the_longer_wait_wins)
{
	char err[UTIL_ERRLEN];
	struct auth *a = load("", 1, 60, err);	/* the keyless entry: defaults */
	double retry = 0;

	CHECK_EQ_INT(auth_admit(a, AUTH_ANON, 0, &retry), AUTH_OK);
	auth_charge(a, AUTH_ANON, 59, 0);	/* one token left */
	CHECK_EQ_INT(auth_admit(a, AUTH_ANON, 0, &retry), AUTH_REQUESTS);
	CHECK_NEAR(retry, 60, 1e-9);
	auth_charge(a, AUTH_ANON, 200, 0);	/* 199 in debt: 200 s */
	CHECK_EQ_INT(auth_admit(a, AUTH_ANON, 0, &retry), AUTH_TOKENS);
	CHECK_NEAR(retry, 200, 1e-9);
	CHECK_EQ_INT(auth_admit(a, AUTH_ANON, 200, &retry), AUTH_OK);
	auth_free(a);
}

int
main(void)
{
	RUN(keys_file_digests_comments_and_fields);
	RUN(malformed_lines_name_file_and_line);
	RUN(a_failed_load_adds_nothing);
	RUN(requests_a_minute_refill_continuously);
	RUN(tokens_charged_after_the_fact_hold_the_next_request);
	RUN(both_limits_the_longer_wait_wins);
	return test_summary();
}
