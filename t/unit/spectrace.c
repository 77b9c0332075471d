/*
 * spectrace: the acceptance trace's parser, builder and writer (each bad
 * line named), and spec_round_forced on fixture model A (../shared/models/A
 * or MEMRA_MODEL_A): with the judge's own count it is spec_round, and with
 * any other the state it leaves is the one the kept tokens give decoded
 * one at a time.
 */
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "model.h"
#include "spec.h"
#include "spectrace.h"
#include "state.h"
#include "test.h"
#include "util.h"

#define HEAD "{\"memra_spec_trace\": 1, \"K\": 2, \"drafter\": \"mtp\", \"model\": \"A\", " \
	"\"n_vocab\": 100, \"n\": 8, \"temp\": 0, \"prompts\": 2}\n"
#define P0 "{\"prompt\": 0, \"ids\": [5, 6, 7], \"rounds\": [[2, 2], [2, 1], [1, 1]], " \
	"\"tokens\": 8, \"out\": [1, 2, 3, 4, 5, 6, 7, 8]}\n"
#define P1 "{\"prompt\": 1, \"ids\": [9], \"rounds\": [[2, 1]], \"tokens\": 2, \"out\": [3, 4]}\n"

static struct spectrace *
P(const char *s, char *err)
{
	return spectrace_parse(s, strlen(s), err);
}

/* The text t writes, malloc'd. */
static char *
written(const struct spectrace *t)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *fp = open_memstream(&buf, &n);

	spectrace_write(t, fp);
	fclose(fp);
	return buf;
}

TEST(parse_reads_sections_prompts_and_rounds)
{
	char err[UTIL_ERRLEN], *w;
	struct spectrace *t = P(HEAD P0 "\n  \r\n" P1, err);
	const struct spectrace_section *s;

	CHECK(t != NULL);
	if (t == NULL)
		return;
	CHECK_EQ_INT(t->n_sec, 1);
	s = spectrace_find(t, 2);
	CHECK(s == &t->sec[0] && spectrace_find(t, 3) == NULL);
	CHECK_EQ_INT(s->n_vocab, 100);
	CHECK_EQ_INT(s->n, 8);
	CHECK_EQ_STR(s->drafter, "mtp");
	CHECK_EQ_STR(s->model, "A");
	CHECK_EQ_INT(s->line, 1);
	CHECK_EQ_INT(s->n_prompts, 2);
	CHECK_EQ_INT(s->p[0].n_ids, 3);
	CHECK_EQ_INT(s->p[0].ids[2], 7);
	CHECK_EQ_INT(s->p[0].n_rounds, 3);
	CHECK_EQ_INT(s->p[0].rounds[1].k, 2);
	CHECK_EQ_INT(s->p[0].rounds[1].accepted, 1);
	CHECK_EQ_INT(s->p[0].tokens, 8);
	CHECK_EQ_INT(s->p[0].out[7], 8);
	CHECK_EQ_INT(s->p[1].n_rounds, 1);
	CHECK_EQ_INT(s->p[1].out[1], 4);
	w = written(t);	/* the blank lines go, the rest is as written */
	CHECK_EQ_STR(w, HEAD P0 P1);
	free(w);
	spectrace_free(t);
	spectrace_free(NULL);
}

TEST(built_traces_are_written_and_read_back)
{
	char err[UTIL_ERRLEN], *w, *w2;
	struct spectrace *t = spectrace_new(), *u;
	struct spectrace_section h = { .K = 3, .n_vocab = 50, .n = 8, .temp = 0.75,
	    .drafter = "dflash2", .model = "dir/m \"x\" q\xc3\xa9" };
	int32_t ids[] = { 1, 2 }, out[] = { 4, 5, 6, 7, 8, 9, 10 };

	CHECK(spectrace_section(t, &h, err) == 0);
	CHECK(spectrace_prompt(t, ids, 2, err) == 0);
	CHECK(spectrace_round(t, 3, 3, err) == 0);
	CHECK(spectrace_round(t, 1, 0, err) == 0);
	CHECK(spectrace_round(t, 0, 0, err) == 0);
	CHECK(spectrace_end(t, out, 6, err) == 0);	/* a stop token cut the last round */
	h.K = 1, h.temp = 0, h.drafter[0] = 'm';
	CHECK(spectrace_section(t, &h, err) == 0);
	CHECK(spectrace_prompt(t, ids, 1, err) == 0);
	CHECK(spectrace_end(t, out, 0, err) == 0);	/* the first token a stop */
	w = written(t);
	u = spectrace_parse(w, strlen(w), err);
	CHECK(u != NULL);
	if (u != NULL) {
		CHECK_EQ_INT(u->n_sec, 2);
		CHECK_EQ_STR(u->sec[0].model, h.model);
		CHECK_EQ_STR(u->sec[0].drafter, "dflash2");
		CHECK_EQ_STR(u->sec[1].drafter, "mflash2");
		CHECK(u->sec[0].temp == 0.75);
		CHECK_EQ_INT(u->sec[0].p[0].n_rounds, 3);
		CHECK_EQ_INT(u->sec[0].p[0].tokens, 6);
		CHECK_EQ_INT(u->sec[1].p[0].tokens, 0);
		w2 = written(u);
		CHECK_EQ_STR(w2, w);
		free(w2);
	}
	spectrace_free(u);
	free(w);
	spectrace_free(t);
}

/* A synthetic trace (t/tools/spec-trace-synth) knows no tokens: "out" absent. */
TEST(a_trace_without_its_tokens_reads_and_writes_without_out)
{
	char err[UTIL_ERRLEN], *w;
	struct spectrace *t = spectrace_new(), *u;
	struct spectrace_section h = { .K = 2, .n_vocab = 100, .n = 5, .drafter = "dflash2",
	    .model = "synthetic" };
	int32_t ids[] = { 7, 8, 9 };
	const char *want = "{\"memra_spec_trace\": 1, \"K\": 2, \"drafter\": \"dflash2\", "
	    "\"model\": \"synthetic\", \"n_vocab\": 100, \"n\": 5, \"temp\": 0, \"prompts\": 1}\n"
	    "{\"prompt\": 0, \"ids\": [7, 8, 9], \"rounds\": [[2, 1], [1, 0]], \"tokens\": 4}\n";

	CHECK(spectrace_section(t, &h, err) == 0);
	CHECK(spectrace_prompt(t, ids, 3, err) == 0);
	CHECK(spectrace_round(t, 2, 1, err) == 0);
	CHECK(spectrace_round(t, 1, 0, err) == 0);
	CHECK(spectrace_end(t, NULL, 5, err) == -1);	/* still checked against the rounds */
	CHECK_EQ_STR(err, "\"tokens\" 5: not what the rounds kept (3..4)");
	CHECK(spectrace_end(t, NULL, 4, err) == 0);
	w = written(t);
	CHECK_EQ_STR(w, want);
	u = spectrace_parse(w, strlen(w), err);
	CHECK(u != NULL);
	if (u != NULL) {
		CHECK(u->sec[0].p[0].out == NULL);
		CHECK_EQ_INT(u->sec[0].p[0].tokens, 4);
		free(w);
		w = written(u);
		CHECK_EQ_STR(w, want);
	}
	spectrace_free(u);
	free(w);
	spectrace_free(t);
}

TEST(the_builder_checks_what_the_parser_checks)
{
	char err[UTIL_ERRLEN];
	struct spectrace *t = spectrace_new();
	struct spectrace_section h = { .K = 2, .n_vocab = 10, .n = 5, .drafter = "mtp",
	    .model = "m" };
	int32_t ids[] = { 1, 10 }, out[] = { 1, 2, 3, 4, 5 };

	CHECK(spectrace_prompt(t, ids, 1, err) == -1);
	CHECK_EQ_STR(err, "a prompt before any section");
	CHECK(spectrace_round(t, 1, 1, err) == -1);
	CHECK_EQ_STR(err, "no prompt begun");
	CHECK(spectrace_section(t, &h, err) == 0);
	CHECK(spectrace_section(t, &h, err) == -1);
	CHECK_EQ_STR(err, "a second section of K=2");
	h.K = 16;
	CHECK(spectrace_section(t, &h, err) == -1);
	CHECK_EQ_STR(err, "\"K\" 16: out of range 1..15");
	h.K = 3, h.drafter[0] = 'M';
	CHECK(spectrace_section(t, &h, err) == -1);
	CHECK_EQ_STR(err, "\"drafter\": not 1 to 31 of a-z, 0-9 and -");
	CHECK(spectrace_prompt(t, ids, 2, err) == -1);
	CHECK_EQ_STR(err, "\"ids\"[1]: id 10 is outside the vocabulary (10 tokens)");
	CHECK(spectrace_prompt(t, ids, 1, err) == 0);
	CHECK(spectrace_prompt(t, ids, 1, err) == -1);
	CHECK_EQ_STR(err, "a prompt begun before the last ended");
	CHECK(spectrace_round(t, 3, 0, err) == -1);
	CHECK_EQ_STR(err, "\"rounds\"[0]: 3 drafts, out of range 0..K=2");
	CHECK(spectrace_round(t, 1, 2, err) == -1);
	CHECK_EQ_STR(err, "\"rounds\"[0]: 2 accepted of 1 drafts");
	CHECK(spectrace_round(t, 2, 2, err) == 0);
	CHECK(spectrace_round(t, 2, 1, err) == -1);	/* 1 + 3 + 2 > n = 5 */
	CHECK_EQ_STR(err, "\"rounds\"[1]: the rounds keep 6 tokens, more than \"n\" (5)");
	CHECK(spectrace_round(t, 2, 0, err) == 0);
	CHECK(spectrace_end(t, out, 3, err) == -1);
	CHECK_EQ_STR(err, "\"tokens\" 3: not what the rounds kept (4..5)");
	CHECK(spectrace_section(t, &h, err) == -1);
	CHECK_EQ_STR(err, "a section begun before prompt 0 ended");
	CHECK(spectrace_end(t, out, 5, err) == 0);
	CHECK(spectrace_end(t, out, 5, err) == -1);
	CHECK_EQ_STR(err, "no prompt begun");
	spectrace_free(t);
}

/* The error reading HEAD with its line 2 (a prompt) replaced by s. */
static const char *
bad_prompt(const char *s, char *err)
{
	char buf[1024];

	snprintf(buf, sizeof buf, HEAD "%s" P1, s);
	CHECK(P(buf, err) == NULL);
	return err;
}

TEST(a_bad_line_is_named)
{
	char err[UTIL_ERRLEN];

	CHECK(P("", err) == NULL);
	CHECK_EQ_STR(err, "no trace: no header line");
	CHECK(P("\n{\"prompt\": 0}\n", err) == NULL);
	CHECK_EQ_STR(err, "line 2: not a trace header ({\"memra_spec_trace\": 1, ...})");
	CHECK(P("[1]", err) == NULL);
	CHECK_EQ_STR(err, "line 1: not a JSON object");
	CHECK(P("{\"memra_spec_trace\": 2}", err) == NULL);
	CHECK_EQ_STR(err, "line 1: \"memra_spec_trace\": not version 1");
	CHECK(P("{\"memra_spec_trace\": 1, \"K\": 0}", err) == NULL);
	CHECK_EQ_STR(err, "line 1: \"K\": not an integer in 1..15");
	CHECK(P("{\"memra_spec_trace\": 1, \"K\": 2, \"n_vocab\": 10, \"n\": 4}", err) == NULL);
	CHECK_EQ_STR(err, "line 1: no \"prompts\"");
	CHECK(P("{\"memra_spec_trace\": 1, \"K\": 2, \"n_vocab\": 10, \"n\": 4, \"prompts\": 1, "
	    "\"temp\": 0, \"drafter\": \"m\\u0000x\", \"model\": \"\"}", err) == NULL);
	CHECK_EQ_STR(err, "line 1: \"drafter\": not 1 to 31 of a-z, 0-9 and -");
	CHECK(P("{\"memra_spec_trace\": 1, \"K\": 2, \"n_vocab\": 10, \"n\": 4, \"prompts\": 1, "
	    "\"temp\": -1, \"drafter\": \"m\", \"model\": \"\"}", err) == NULL);
	CHECK_EQ_STR(err, "line 1: \"temp\" -1: not a temperature");
	CHECK(P("{\"memra_spec_trace\": 1, \"K\": 2, \"n_vocab\": 10, \"n\": 4, \"prompts\": 1, "
	    "\"temp\": 0, \"drafter\": \"m\", \"model\": \"a\\nb\"}", err) == NULL);
	CHECK_EQ_STR(err, "line 1: \"model\": a control character");
	CHECK(P(HEAD "{\"prompt\": 0, \"ids\": [5, 6, 7]\n", err) == NULL);
	CHECK_EQ_STR(err, "line 2: column 31: expected ',' or '}'");
	CHECK_EQ_STR(bad_prompt("{\"prompt\": 1}\n", err), "line 2: \"prompt\" 1 where prompt 0 "
	    "comes next");
	CHECK_EQ_STR(bad_prompt("{\"prompt\": 0, \"ids\": []}\n", err), "line 2: \"ids\": no "
	    "prompt tokens");
	CHECK_EQ_STR(bad_prompt("{\"prompt\": 0, \"ids\": [1, -1]}\n", err), "line 2: \"ids\"[1]: "
	    "not a token id");
	CHECK_EQ_STR(bad_prompt("{\"prompt\": 0, \"ids\": [100]}\n", err), "line 2: \"ids\"[0]: "
	    "id 100 is outside the vocabulary (100 tokens)");
	CHECK_EQ_STR(bad_prompt("{\"prompt\": 0, \"ids\": [1], \"rounds\": {}}\n", err),
	    "line 2: \"rounds\": not an array of [k, accepted] pairs");
	CHECK_EQ_STR(bad_prompt("{\"prompt\": 0, \"ids\": [1], \"rounds\": [[1, 0], [1]]}\n", err),
	    "line 2: \"rounds\"[1]: not a pair [k, accepted] of small integers");
	CHECK_EQ_STR(bad_prompt("{\"prompt\": 0, \"ids\": [1], \"rounds\": [[3, 0]]}\n", err),
	    "line 2: \"rounds\"[0]: 3 drafts, out of range 0..K=2");
	CHECK_EQ_STR(bad_prompt("{\"prompt\": 0, \"ids\": [1], \"rounds\": [[1, 2]]}\n", err),
	    "line 2: \"rounds\"[0]: 2 accepted of 1 drafts");
	CHECK_EQ_STR(bad_prompt("{\"prompt\": 0, \"ids\": [1], \"rounds\": [[2, 2], [2, 2], "
	    "[1, 1]]}\n", err), "line 2: \"rounds\"[2]: the rounds keep 9 tokens, more than "
	    "\"n\" (8)");
	CHECK_EQ_STR(bad_prompt("{\"prompt\": 0, \"ids\": [1], \"rounds\": [[2, 1]], "
	    "\"out\": [1]}\n", err), "line 2: no \"tokens\"");
	CHECK_EQ_STR(bad_prompt("{\"prompt\": 0, \"ids\": [1], \"rounds\": [[2, 1]], "
	    "\"tokens\": 4, \"out\": [1, 2, 3, 4]}\n", err), "line 2: \"tokens\" 4: not what the "
	    "rounds kept (1..3)");
	CHECK_EQ_STR(bad_prompt("{\"prompt\": 0, \"ids\": [1], \"rounds\": [[2, 1]], "
	    "\"tokens\": 3, \"out\": [1, 2]}\n", err), "line 2: \"out\": 2 ids where \"tokens\" "
	    "is 3");
	CHECK_EQ_STR(bad_prompt("{\"prompt\": 0, \"ids\": [1], \"rounds\": [[2, 1]], "
	    "\"tokens\": 3, \"out\": [1, 2, 300]}\n", err), "line 2: \"out\"[2]: id 300 is "
	    "outside the vocabulary (100 tokens)");
}

TEST(sections_hold_their_prompts_and_no_two_share_a_K)
{
	char err[UTIL_ERRLEN];
	struct spectrace *t;

	CHECK(P(HEAD P0, err) == NULL);
	CHECK_EQ_STR(err, "line 3 (end of file): K=2's section (line 1) has 1 of its 2 prompts");
	CHECK(P(HEAD P0 HEAD, err) == NULL);
	CHECK_EQ_STR(err, "line 3: a header where K=2's section (line 1) has 1 of its 2 prompts");
	CHECK(P(HEAD P0 P1 P1, err) == NULL);
	CHECK_EQ_STR(err, "line 4: a prompt past K=2's 2 (its header's \"prompts\")");
	CHECK(P(HEAD P0 P1 "\n" HEAD, err) == NULL);
	CHECK_EQ_STR(err, "line 5: a second section of K=2 (the first at line 1)");
	/* another K, unknown members ignored, no final newline */
	t = P(HEAD P0 P1 "{\"memra_spec_trace\": 1, \"K\": 1, \"drafter\": \"mtp\", \"model\": "
	    "\"B\", \"n_vocab\": 10, \"n\": 2, \"temp\": 0.5, \"prompts\": 1, \"x\": [1]}\n"
	    "{\"prompt\": 0, \"ids\": [9], \"rounds\": [[1, 0]], \"tokens\": 2, \"out\": [0, 1], "
	    "\"note\": \"hi\"}", err);
	CHECK(t != NULL);
	if (t != NULL) {
		CHECK_EQ_INT(t->n_sec, 2);
		CHECK(spectrace_find(t, 1) == &t->sec[1]);
		CHECK_EQ_INT(t->sec[1].line, 4);
		CHECK_EQ_STR(t->sec[1].model, "B");
	}
	spectrace_free(t);
}

/* --- spec_round_forced on model A --- */

static struct backend *be;
static struct model *md;

static const int32_t prompt[] = { 800, 1545, 368, 479, 292, 503, 2995, 453, 4518, 2126, 198,
	503, 5250, 453, 4484, 198, 503, 3329, 453, 2579, 409, 198 };
#define NP ((int)(sizeof prompt / sizeof prompt[0]))
#define NEW 40

TEST(forced_at_the_judges_count_is_spec_round)
{
	char err[UTIL_ERRLEN];
	int32_t a[NEW + 16], b[NEW + 16];
	struct spec *s = spec_new(md, 3, NP + NEW + 5, NULL, 0, err);
	struct spec *f = spec_new(md, 3, NP + NEW + 5, NULL, 0, err);
	int g = 1, k, nat, rounds = 0;

	CHECK(s != NULL && f != NULL);
	if (s == NULL || f == NULL)
		goto out;
	CHECK(spec_prefill(s, prompt, NP, &a[0]) == 0 && spec_prefill(f, prompt, NP, &b[0]) == 0);
	for (; g < NEW; g += k, rounds++) {
		long acc = spec_stats(s)->accepted;

		k = spec_round(s, a + g, NEW - g);
		CHECK(k >= 1);
		if (k < 1)
			break;
		acc = spec_stats(s)->accepted - acc;
		CHECK_EQ_INT(spec_round_forced(f, b + g, NEW - g, (int)acc, &nat), k);
		CHECK_EQ_INT(nat, acc);
	}
	CHECK(memcmp(a, b, g * sizeof *a) == 0);
	CHECK(memcmp(spec_stats(s), spec_stats(f), sizeof *spec_stats(s)) == 0);
	CHECK(spec_stats(s)->accepted > 0);
	printf("# %d rounds, %ld accepted\n", rounds, spec_stats(s)->accepted);
out:
	spec_free(s), spec_free(f);
}

TEST(forced_rounds_leave_the_state_of_the_kept_tokens)
{
	static const int force[] = { 3, 0, 2, 3, 1, 3, 3, 0, 2, 1 };
	char err[UTIL_ERRLEN];
	int32_t out[NEW + 16], seq[NP + NEW + 16], pick[NP + NEW + 16];
	struct spec *s = spec_new(md, 3, NP + NEW + 5, NULL, 0, err);
	struct state *st = model_state_new(md, NP + NEW + 5, 0, err);
	int g = 1, k, nat, over = 0, under = 0, sum = 0, other = 0, bonus[NEW + 16] = { 0 };

	CHECK(s != NULL && st != NULL);
	if (s == NULL || st == NULL)
		goto out;
	CHECK(spec_prefill(s, prompt, NP, &out[0]) == 0);
	bonus[0] = 1;
	for (int r = 0; g < NEW - 4; g += k, r++) {
		int f = force[r % 10];

		k = spec_round_forced(s, out + g, 4, f, &nat);
		CHECK_EQ_INT(k, f + 1);
		if (k != f + 1)
			goto out;
		over += f > nat, under += f < nat, sum += f;
		bonus[g + f] = 1;
	}
	CHECK(spec_round_forced(s, out + g, 4, 4, &nat) == -1);
	CHECK_EQ_STR(spec_errmsg(s), "a forced acceptance of 4 drafts: out of range 0..3");
	CHECK(over > 0 && under > 0);
	CHECK_EQ_INT(spec_stats(s)->accepted, sum);
	/* decoded one token at a time, each bonus is the greedy pick after what was kept */
	memcpy(seq, prompt, sizeof prompt);
	memcpy(seq + NP, out, g * sizeof *out);
	CHECK(model_forward_argmax(md, st, seq, NP, MODEL_PREFILL, &pick[0], NULL) == 0);
	for (int i = 0; i < g - 1; i++)
		CHECK(model_forward_argmax(md, st, &seq[NP + i], 1, 0, &pick[i + 1], NULL) == 0);
	for (int i = 0; i < g; i++)
		if (bonus[i] && pick[i] != out[i])
			FAILF("token %d: %d, the greedy pick after the kept tokens is %d", i,
			    (int)out[i], (int)pick[i]);
	for (int i = 0; i < g; i++)
		other += !bonus[i] && pick[i] != out[i];
	CHECK(other > 0);
	printf("# %d tokens kept, %d drafts kept that the target would not pick; %d rounds over "
	    "and %d under the judge\n", g, other, over, under);
out:
	spec_free(s), state_free(st);
}

int
main(void)
{
	char err[UTIL_ERRLEN];
	const char *dir;

	RUN(parse_reads_sections_prompts_and_rounds);
	RUN(built_traces_are_written_and_read_back);
	RUN(a_trace_without_its_tokens_reads_and_writes_without_out);
	RUN(the_builder_checks_what_the_parser_checks);
	RUN(a_bad_line_is_named);
	RUN(sections_hold_their_prompts_and_no_two_share_a_K);
	if ((dir = test_model_a("spec_round_forced")) == NULL)
		return test_summary();
	if ((be = backend_open("cpu", 0, err)) == NULL || (md = model_open(dir, be, err)) == NULL) {
		printf("not ok model A: %s\n", err);
		return 1;
	}
	RUN(forced_at_the_judges_count_is_spec_round);
	RUN(forced_rounds_leave_the_state_of_the_kept_tokens);
	model_close(md);
	backend_close(be);
	return test_summary();
}
