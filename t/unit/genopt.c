#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "genopt.h"
#include "test.h"
#include "util.h"

static const struct option own[] = {
	{ "ids", no_argument, NULL, 'I' }, { "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
};

/* The val getopt_long would return for --name in a table of sets, or -1. */
static int
val(unsigned sets, const char *name)
{
	struct option t[GENOPT_MAXOPTS];

	if (genopt_longopts(sets, own, t) != 0)
		FAILF("genopt_longopts(%u) failed", sets);
	for (int i = 0; t[i].name != NULL; i++)
		if (strcmp(t[i].name, name) == 0)
			return t[i].val;
	return -1;
}

/* genopt_set of --name (every set) with arg: its return; err gets the message */
static int
set(struct genopt *g, const char *name, const char *arg, char *err)
{
	int v = name[1] == '\0' ? name[0] : val(GENOPT_FILTERS | GENOPT_CTX, name);

	err[0] = '\0';
	return genopt_set(g, v, arg, err);
}

TEST(the_table_holds_the_core_the_sets_asked_for_and_the_tools_own)
{
	static const char *core[] = { "chat", "raw", "temp", "seed", "device", "kv-type", "jsonl",
	    "ignore-eos" };
	static const char *filters[] = { "top-k", "top-p", "min-p", "repeat-penalty" };
	struct option big[60], t[GENOPT_MAXOPTS];

	for (size_t i = 0; i < sizeof core / sizeof core[0]; i++)
		CHECK(val(0, core[i]) >= 256);
	for (size_t i = 0; i < sizeof filters / sizeof filters[0]; i++) {
		CHECK(val(0, filters[i]) == -1);
		CHECK(val(GENOPT_FILTERS, filters[i]) >= 256);
	}
	CHECK(val(GENOPT_FILTERS, "ctx") == -1);
	CHECK(val(GENOPT_CTX, "ctx") >= 256);
	CHECK_EQ_INT(val(0, "ids"), 'I');
	CHECK_EQ_INT(val(0, "help"), 'h');
	for (int i = 0; i < 59; i++)
		big[i] = own[0];
	memset(&big[59], 0, sizeof big[59]);
	CHECK(genopt_longopts(GENOPT_FILTERS | GENOPT_CTX, big, t) == -1);	/* does not fit */
}

TEST(defaults_come_from_the_caller_sample_defaults_and_the_environment)
{
	struct genopt g;

	setenv("MEMRA_DEVICE", "cuda:3", 1);
	setenv("MEMRA_KV_TYPE", "f16", 1);
	genopt_init(&g, 64);
	CHECK_EQ_INT(g.n, 64);
	CHECK_EQ_INT(g.mode, PROMPT_AUTO);
	CHECK_EQ_STR(g.device, "cuda:3");
	CHECK_EQ_STR(g.kv_type, "f16");
	CHECK_NEAR(g.sp.temp, 0, 0);
	CHECK_NEAR(g.sp.top_p, 1, 0);
	CHECK(g.ctx == 0 && g.threads == 0 && !g.jsonl && !g.ignore_eos && g.file == NULL);
	unsetenv("MEMRA_DEVICE");
	unsetenv("MEMRA_KV_TYPE");
	genopt_init(&g, 128);
	CHECK(g.device != NULL && g.kv_type == NULL);
}

TEST(numbers_are_taken_within_their_ranges_and_refused_outside)
{
	struct genopt g;
	char err[UTIL_ERRLEN];

	genopt_init(&g, 128);
	CHECK_EQ_INT(set(&g, "n", "1000000", err), 1);
	CHECK_EQ_INT(g.n, 1000000);
	CHECK_EQ_INT(set(&g, "n", "1000001", err), -1);
	CHECK_EQ_STR(err, "'1000001': out of range or not a number");
	CHECK_EQ_INT(set(&g, "n", "0", err), -1);
	CHECK_EQ_INT(set(&g, "n", "5x", err), -1);
	CHECK_EQ_INT(set(&g, "t", "0", err), 1);
	CHECK_EQ_INT(set(&g, "t", "4097", err), -1);
	CHECK_EQ_INT(set(&g, "ctx", "2", err), 1);
	CHECK_EQ_INT(g.ctx, 2);
	CHECK_EQ_INT(set(&g, "ctx", "1", err), -1);
	CHECK_EQ_INT(set(&g, "temp", "0.7", err), 1);
	CHECK_NEAR(g.sp.temp, 0.7, 1e-6);
	CHECK_EQ_INT(set(&g, "temp", "-1", err), -1);
	CHECK_EQ_INT(set(&g, "top-p", "1", err), 1);
	CHECK_EQ_INT(set(&g, "top-p", "0", err), -1);
	CHECK_EQ_INT(set(&g, "min-p", "1.5", err), -1);
	CHECK_EQ_INT(set(&g, "top-k", "40", err), 1);
	CHECK_EQ_INT(g.sp.top_k, 40);
	CHECK_EQ_INT(set(&g, "top-k", "-1", err), -1);
	CHECK_EQ_INT(set(&g, "repeat-penalty", "0", err), -1);
	CHECK_EQ_INT(set(&g, "seed", "18446744073709551615", err), -1);	/* past int64 */
	CHECK_EQ_INT(set(&g, "seed", "9223372036854775807", err), 1);
	CHECK(g.sp.seed == 9223372036854775807ULL);
}

TEST(words_and_flags_are_set_and_other_options_left_to_the_tool)
{
	struct genopt g;
	char err[UTIL_ERRLEN];

	genopt_init(&g, 128);
	CHECK_EQ_INT(set(&g, "device", "cuda:1", err), 1);
	CHECK_EQ_STR(g.device, "cuda:1");
	CHECK_EQ_INT(set(&g, "device", "tpu", err), -1);
	CHECK_EQ_STR(err, "'tpu': out of range or not a number");
	CHECK_EQ_INT(set(&g, "kv-type", "f16", err), 1);
	CHECK_EQ_INT(set(&g, "kv-type", "f8", err), -1);
	CHECK_EQ_INT(set(&g, "raw", NULL, err), 1);
	CHECK_EQ_INT(g.mode, PROMPT_RAW);
	CHECK_EQ_INT(set(&g, "chat", NULL, err), 1);
	CHECK_EQ_INT(g.mode, PROMPT_CHAT);
	CHECK_EQ_INT(set(&g, "jsonl", NULL, err), 1);
	CHECK_EQ_INT(g.jsonl, 1);
	CHECK_EQ_INT(set(&g, "ignore-eos", NULL, err), 1);
	CHECK_EQ_INT(g.ignore_eos, 1);
	CHECK_EQ_INT(set(&g, "f", "p.txt", err), 1);
	CHECK_EQ_STR(g.file, "p.txt");
	CHECK_EQ_INT(genopt_set(&g, 'I', NULL, err), 0);
	CHECK_EQ_INT(genopt_set(&g, 'K', "3", err), 0);
	CHECK_EQ_INT(genopt_set(&g, '?', NULL, err), 0);
}

TEST(operands_are_a_model_and_a_prompt_unless_f_or_jsonl_gives_it)
{
	struct genopt g;

	genopt_init(&g, 128);
	CHECK(!genopt_operands(&g, 0) && genopt_operands(&g, 1) && genopt_operands(&g, 2) &&
	    !genopt_operands(&g, 3));
	g.file = "p.txt";
	CHECK(genopt_operands(&g, 1) && !genopt_operands(&g, 2));
	g.jsonl = 1;
	CHECK(!genopt_operands(&g, 1));
	g.file = NULL;
	CHECK(genopt_operands(&g, 1) && !genopt_operands(&g, 2));
}

TEST(the_environment_s_device_and_kv_type_are_checked)
{
	struct genopt g;
	char err[UTIL_ERRLEN];
	int f16 = -7;

	setenv("MEMRA_DEVICE", "tpu", 1);
	genopt_init(&g, 128);
	CHECK_EQ_INT(genopt_check(&g, &f16, err), -1);
	CHECK_EQ_STR(err, "MEMRA_DEVICE: 'tpu': not cpu or cuda[:N]");
	CHECK_EQ_INT(set(&g, "device", "cpu", err), 1);	/* the flag wins */
	CHECK_EQ_INT(genopt_check(&g, &f16, err), 0);
	CHECK_EQ_INT(f16, 0);
	unsetenv("MEMRA_DEVICE");
	setenv("MEMRA_KV_TYPE", "bf16", 1);
	genopt_init(&g, 128);
	CHECK_EQ_INT(genopt_check(&g, &f16, err), -1);
	CHECK_EQ_STR(err, "MEMRA_KV_TYPE: 'bf16': not f32 or f16");
	CHECK_EQ_INT(set(&g, "kv-type", "f16", err), 1);
	CHECK_EQ_INT(genopt_check(&g, &f16, err), 0);
	CHECK_EQ_INT(f16, 1);
	unsetenv("MEMRA_KV_TYPE");
}

TEST(the_prompt_is_the_operand_the_file_or_none_with_jsonl)
{
	struct genopt g;
	char err[UTIL_ERRLEN], path[] = "/tmp/genopt-XXXXXX", *text;
	size_t len;
	FILE *fp;
	int fd;

	genopt_init(&g, 128);
	CHECK_EQ_INT(genopt_text(&g, "hello", &text, &len, err), 0);
	CHECK_EQ_STR(text, "hello");
	CHECK_EQ_INT(len, 5);
	free(text);
	CHECK((fd = mkstemp(path)) >= 0 && (fp = fdopen(fd, "w")) != NULL);
	fputs("from a file\n", fp);
	fclose(fp);
	g.file = path;
	CHECK_EQ_INT(genopt_text(&g, NULL, &text, &len, err), 0);
	CHECK_EQ_STR(text, "from a file\n");
	CHECK_EQ_INT(len, 12);
	free(text);
	unlink(path);
	CHECK_EQ_INT(genopt_text(&g, NULL, &text, &len, err), -1);
	CHECK(text == NULL && strstr(err, path) != NULL);
	g.jsonl = 1;
	CHECK_EQ_INT(genopt_text(&g, NULL, &text, &len, err), 0);
	CHECK(text == NULL && len == 0);
}

int
main(void)
{
	RUN(the_table_holds_the_core_the_sets_asked_for_and_the_tools_own);
	RUN(defaults_come_from_the_caller_sample_defaults_and_the_environment);
	RUN(numbers_are_taken_within_their_ranges_and_refused_outside);
	RUN(words_and_flags_are_set_and_other_options_left_to_the_tool);
	RUN(operands_are_a_model_and_a_prompt_unless_f_or_jsonl_gives_it);
	RUN(the_environment_s_device_and_kv_type_are_checked);
	RUN(the_prompt_is_the_operand_the_file_or_none_with_jsonl);
	return test_summary();
}
