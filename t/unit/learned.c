/*
 * learned: the slot rule of an adaptive trimmed draft head, its file, its
 * save clock; then the gemma4 assistant with slots (t/data/gemma4's
 * g4-dense and g4-assistant, the head trimmed to ranks that miss every
 * token the target says): speculative decoding gives the plain tokens,
 * greedy and seeded-sampled, with and without slots, and the slots make
 * drafts land.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend.h"
#include "learned.h"
#include "model.h"
#include "ranks.h"
#include "spec.h"
#include "state.h"
#include "test.h"
#include "tokenizer.h"
#include "util.h"

/* n slots beside the rank list ids[k] over n_vocab tokens */
static struct learned *
L(int n, const int32_t *ids, int k, int64_t n_vocab)
{
	char err[UTIL_ERRLEN];
	struct ranks r = { (int32_t *)ids, k, n_vocab };
	struct learned *l = learned_new(n, &r, n_vocab, err);

	if (l == NULL)
		printf("#   learned_new: %s\n", err);
	return l;
}

/* The filled slots' tokens as "a b c" (slot order). */
static const char *
slots(struct learned *l)
{
	static char buf[512];
	int32_t ids[64];
	uint64_t v = 0;
	int n = learned_copy(l, ids, &v), k = 0;

	buf[0] = '\0';
	for (int i = 0; i < n; i++)
		k += snprintf(buf + k, sizeof buf - k, "%s%d", i ? " " : "", (int)ids[i]);
	return buf;
}

static void
see(struct learned *l, const char *toks)
{
	int32_t t[64];
	int n = 0;

	for (char *p = (char *)toks, *e; *p; p = e) {
		t[n++] = (int32_t)strtol(p, &e, 10);
		if (e == p)
			break;
	}
	learned_observe(l, t, n);
}

TEST(empty_slots_fill_in_order_with_tokens_outside_the_ranks)
{
	static const int32_t r[] = { 0, 1, 2 };
	struct learned *l = L(3, r, 3, 10);

	CHECK_EQ_INT(learned_slots(l), 3);
	see(l, "5 0 7 5 1 9 2");
	CHECK_EQ_STR(slots(l), "5 7 9");
	CHECK_EQ_INT(learned_filled(l), 3);
	CHECK_EQ_INT(learned_count(l, 5), 2);
	CHECK_EQ_INT(learned_count(l, 0), 0);	/* in the ranks: no miss */
	see(l, "-1 10 99");			/* not tokens: skipped */
	CHECK_EQ_STR(slots(l), "5 7 9");
	learned_free(l);
	learned_free(NULL);
}

TEST(the_weakest_slot_goes_once_a_token_passes_it)
{
	static const int32_t r[] = { 0 };
	struct learned *l = L(2, r, 1, 10);

	see(l, "3 4");
	CHECK_EQ_STR(slots(l), "3 4");
	see(l, "5");		/* 1 does not pass 1 */
	CHECK_EQ_STR(slots(l), "3 4");
	see(l, "5");		/* 2 passes 1: slot 0, the lower of the two weakest */
	CHECK_EQ_STR(slots(l), "5 4");
	see(l, "3");		/* 3 kept its count: 2 passes 4's 1 */
	CHECK_EQ_STR(slots(l), "5 3");
	see(l, "4 4");		/* 4 at 3 passes 3's 2 (5 has 2 too: the lower slot, 0) */
	CHECK_EQ_STR(slots(l), "4 3");
	see(l, "3 3 5 5");	/* 3 at 4 stays; 5 at 4 passes 4's 3 */
	CHECK_EQ_STR(slots(l), "5 3");
	CHECK_EQ_INT(learned_count(l, 4), 3);
	learned_free(l);
}

TEST(the_same_tokens_give_the_same_slots)
{
	static const int32_t r[] = { 1, 2 };
	const char *seq = "3 9 4 3 7 7 7 9 8 8 3 6 6 6 6 4 5 5";
	struct learned *a = L(3, r, 2, 10), *b = L(3, r, 2, 10);
	char sa[512];

	see(a, seq);
	for (const char *p = seq; *p;) {	/* one token a call */
		char one[8];
		int k = (int)strcspn(p, " ");

		snprintf(one, sizeof one, "%.*s", k, p);
		see(b, one);
		p += k + (p[k] == ' ');
	}
	snprintf(sa, sizeof sa, "%s", slots(a));
	CHECK_EQ_STR(slots(b), sa);
	CHECK_EQ_STR(sa, "3 7 6");
	learned_free(a), learned_free(b);
}

TEST(slots_are_cut_to_the_tokens_outside_the_ranks)
{
	static const int32_t r[] = { 0, 1, 2 }, all[] = { 0, 1, 2, 3, 4 }, bad[] = { 0, 5 };
	char err[UTIL_ERRLEN];
	struct ranks rr = { (int32_t *)all, 5, 5 }, rb = { (int32_t *)bad, 2, 5 };
	struct learned *l = L(512, r, 3, 5);

	CHECK_EQ_INT(learned_slots(l), 2);
	see(l, "4 3 4");
	CHECK_EQ_STR(slots(l), "4 3");
	learned_free(l);
	CHECK(learned_new(0, &rb, 5, err) == NULL);
	CHECK(learned_new(LEARNED_MAX + 1, &rb, 5, err) == NULL);
	CHECK_EQ_STR(err, "65537 learned slots over 5 tokens: out of range 1..65536");
	CHECK(learned_new(1, &rb, 5, err) == NULL);
	CHECK_EQ_STR(err, "index 1: id 5 is outside the vocabulary (5 tokens)");
	CHECK(learned_new(1, &rr, 5, err) == NULL);
	CHECK_EQ_STR(err, "the rank list holds every token: no learned slot can fill");
}

TEST(copy_says_when_the_slots_changed)
{
	static const int32_t r[] = { 0 };
	struct learned *l = L(2, r, 1, 10);
	int32_t ids[2] = { -7, -7 };
	uint64_t v = 0;

	CHECK_EQ_INT(learned_copy(l, ids, &v), -1);	/* nothing yet */
	see(l, "3");
	CHECK_EQ_INT(learned_copy(l, ids, &v), 1);
	CHECK_EQ_INT(ids[0], 3);
	see(l, "3 3");				/* counts alone: the same slots */
	CHECK_EQ_INT(learned_copy(l, ids, &v), -1);
	see(l, "4");
	CHECK_EQ_INT(learned_copy(l, ids, &v), 2);
	CHECK_EQ_INT(ids[1], 4);
	learned_free(l);
}

/* The file at path as a string (static). */
static const char *
slurp(const char *path)
{
	static char buf[4096];
	char err[UTIL_ERRLEN];
	size_t n;
	char *b = util_read_file(path, &n, err);

	snprintf(buf, sizeof buf, "%s", b != NULL ? b : err);
	free(b);
	return buf;
}

TEST(the_file_keeps_the_slots_strongest_first_and_loads_back)
{
	static const int32_t r[] = { 0, 1 };
	char path[] = "/tmp/learned-unit-XXXXXX", err[UTIL_ERRLEN];
	struct learned *l = L(3, r, 2, 10), *b = L(3, r, 2, 10), *c = L(2, r, 2, 10);
	int fd = mkstemp(path), n, lines;

	CHECK(fd >= 0);
	close(fd);
	unlink(path);
	CHECK_EQ_INT(learned_load(b, path, &lines, err), 1);	/* no file: nothing */
	see(l, "5 9 9 7 9 7 0");
	CHECK_EQ_INT(learned_save(l, path, &n, err), 1);
	CHECK_EQ_INT(n, 3);
	CHECK_EQ_STR(slurp(path), "9 3\n7 2\n5 1\n");
	CHECK_EQ_INT(learned_save(l, path, &n, err), 0);	/* unchanged: not written */
	CHECK_EQ_INT(learned_load(b, path, &lines, err), 0);
	CHECK_EQ_INT(lines, 3);
	CHECK_EQ_STR(slots(b), "9 7 5");
	CHECK_EQ_INT(learned_count(b, 7), 2);
	CHECK_EQ_INT(learned_save(b, path, &n, err), 0);	/* as loaded: not written */
	see(b, "5 5");				/* 5 at 3 now; ties by id */
	CHECK_EQ_INT(learned_save(b, path, &n, err), 1);
	CHECK_EQ_STR(slurp(path), "5 3\n9 3\n7 2\n");
	CHECK_EQ_INT(learned_load(c, path, &lines, err), 0);	/* two slots: the first two */
	CHECK_EQ_INT(lines, 3);
	CHECK_EQ_STR(slots(c), "5 9");
	CHECK_EQ_INT(learned_count(c, 7), 2);	/* its count comes along */
	CHECK_EQ_INT(learned_load(c, path, &lines, err), -1);
	CHECK(strncmp(err, path, strlen(path)) == 0 &&
	    strcmp(err + strlen(path), ": the slots are in use already") == 0);
	unlink(path);
	learned_free(l), learned_free(b), learned_free(c);
}

TEST(a_file_that_cannot_be_written_is_an_error_and_the_changes_wait)
{
	static const int32_t r[] = { 0 };
	char err[UTIL_ERRLEN], path[] = "/tmp/learned-unit-XXXXXX", name[64];
	struct learned *l = L(2, r, 1, 10);
	int n, fd = mkstemp(path);

	CHECK(fd >= 0);
	close(fd);
	see(l, "4");
	/* the temporary name taken by a directory: the write fails as in a read-only one */
	snprintf(name, sizeof name, "%s.tmp.%ld", path, (long)getpid());
	CHECK(mkdir(name, 0700) == 0);
	CHECK_EQ_INT(learned_save(l, path, &n, err), -1);
	CHECK(strncmp(err, path, strlen(path)) == 0 && strstr(err, ": Is a directory") != NULL);
	CHECK_EQ_STR(slurp(path), "");		/* the old file stands */
	rmdir(name);
	CHECK_EQ_INT(learned_save(l, path, &n, err), 1);	/* still unsaved, so written now */
	CHECK_EQ_STR(slurp(path), "4 1\n");
	unlink(path);
	learned_free(l);
}

/* learned_parse of s into a fresh structure (ranks {0, 1}, 10 tokens, 2 slots): its err. */
static const char *
P(const char *s)
{
	static const int32_t r[] = { 0, 1 };
	static char err[UTIL_ERRLEN];
	struct learned *l = L(2, r, 2, 10);
	int lines;

	if (learned_parse(l, s, strlen(s), &lines, err) == 0)
		snprintf(err, sizeof err, "ok %d: %s", lines, slots(l));
	learned_free(l);
	return err;
}

TEST(a_malformed_file_is_an_error_naming_the_line)
{
	CHECK_EQ_STR(P(""), "ok 0: ");
	CHECK_EQ_STR(P("3 1\r\n4 2"), "ok 2: 3 4");
	CHECK_EQ_STR(P("3 1\n\n4 2\n"), "line 2: blank line");
	CHECK_EQ_STR(P("3 1\n4\n"), "line 2: not 'ID COUNT': '4'");
	CHECK_EQ_STR(P("3  1\n"), "line 1: not 'ID COUNT': '3  1'");
	CHECK_EQ_STR(P("-3 1\n"), "line 1: not 'ID COUNT': '-3 1'");
	CHECK_EQ_STR(P("3 1 2\n"), "line 1: not 'ID COUNT': '3 1 2'");
	CHECK_EQ_STR(P("3 x\n"), "line 1: not 'ID COUNT': '3 x'");
	CHECK_EQ_STR(P("3 4294967296\n"), "line 1: '3 4294967296': a number too large");
	CHECK_EQ_STR(P("2147483648 1\n"), "line 1: '2147483648 1': a number too large");
	CHECK_EQ_STR(P("3 1\n10 1\n"), "line 2: id 10 is outside the vocabulary (10 tokens)");
	CHECK_EQ_STR(P("1 5\n"), "line 1: id 1 is in the rank list");
	CHECK_EQ_STR(P("3 0\n"), "line 1: id 3 has a count of 0");
	CHECK_EQ_STR(P("3 1\n4 1\n3 2\n"), "line 3: id 3 repeats line 1");
}

TEST(a_periodic_save_is_due_after_a_while_with_changes)
{
	static const int32_t r[] = { 0 };
	char path[] = "/tmp/learned-unit-XXXXXX", err[UTIL_ERRLEN];
	struct learned *l = L(2, r, 1, 10);
	int n, fd = mkstemp(path);

	CHECK(fd >= 0);
	close(fd);
	CHECK_EQ_INT(learned_due(l, 1000), 0);	/* the clock starts */
	CHECK_EQ_INT(learned_due(l, 1000 + LEARNED_SAVE_S), 0);	/* nothing changed */
	see(l, "4");
	CHECK_EQ_INT(learned_due(l, 1000 + LEARNED_SAVE_S - 1), 0);
	CHECK_EQ_INT(learned_due(l, 1000 + LEARNED_SAVE_S), 1);
	CHECK_EQ_INT(learned_due(l, 1000 + LEARNED_SAVE_S + 1), 0);	/* the clock restarted */
	CHECK_EQ_INT(learned_save(l, path, &n, err), 1);
	CHECK_EQ_INT(learned_due(l, 1000 + 3 * LEARNED_SAVE_S), 0);	/* saved: not due */
	see(l, "4");
	CHECK_EQ_INT(learned_due(l, 1000 + 3 * LEARNED_SAVE_S), 1);
	unlink(path);
	learned_free(l);
}

/* --- the assistant with slots --- */

#define G "t/data/gemma4/"
#define NGEN 32

static const char *const prompt_text[] = { "hello world, the quick brown fox",
	"once upon a time", "the cat sat on the mat" };

struct fix {
	struct backend *be;
	int32_t	prompt[3][64];
	int	n_prompt[3];
	int32_t	plain[3][NGEN];		/* the plain greedy tokens */
	char	ranks[64];		/* every token the plain runs do not say */
};

/* The trunk with the assistant, its head trimmed to f's ranks, n slots (0: none). */
static struct model *
open_g4(struct fix *f, int n)
{
	struct model_options mo = { .draft = G "g4-assistant", .asst_ranks = f->ranks,
	    .asst_adapt = n };
	char err[UTIL_ERRLEN];
	struct model *m = model_open_opts(G "g4-dense", f->be, &mo, err);

	if (m == NULL)
		printf("#   %s\n", err);
	return m;
}

/* Prompt i spoken by m (spec, K): the tokens into out[NGEN]; drafted and accepted added. */
static int
speak(struct model *m, const struct sample_params *sp, int K, const int32_t *prompt, int n,
    int32_t *out, long *drafted, long *accepted)
{
	char err[UTIL_ERRLEN];
	struct spec *s = spec_new(m, K, n + NGEN + K + 2, sp, 0, err);
	int g = 1, k = 0;

	if (s == NULL || spec_prefill(s, prompt, n, &out[0]) != 0)
		return printf("#   %s\n", s ? spec_errmsg(s) : err), spec_free(s), -1;
	for (int32_t buf[SPEC_KMAX + 1]; g < NGEN; g += k) {
		if ((k = spec_round(s, buf, NGEN - g)) < 0)
			return printf("#   %s\n", spec_errmsg(s)), spec_free(s), -1;
		memcpy(out + g, buf, k * sizeof *buf);
	}
	*drafted += spec_stats(s)->drafted, *accepted += spec_stats(s)->accepted;
	spec_free(s);
	return 0;
}

/* The plain greedy decode of prompt[n] by m: NGEN tokens into out.  0, or -1. */
static int
plain(struct model *m, const int32_t *prompt, int n, int32_t *out)
{
	char err[UTIL_ERRLEN];
	struct state *st = model_state_new(m, n + NGEN + 1, 0, err);
	int rc = st == NULL ? -1 : model_forward_argmax(m, st, prompt, n, MODEL_PREFILL, &out[0],
	    NULL);

	for (int i = 1; rc == 0 && i < NGEN; i++)
		rc = model_forward_argmax(m, st, &out[i - 1], 1, 0, &out[i], NULL);
	state_free(st);
	return rc;
}

/* The prompts, their plain greedy tokens, the ranks. */
static int
fix_init(struct fix *f)
{
	char err[UTIL_ERRLEN], said[320] = { 0 };
	struct model *m;
	struct tokenizer *tk;
	FILE *fp;
	size_t n;

	if ((f->be = backend_open("cpu", 2, err)) == NULL ||
	    (m = model_open(G "g4-dense", f->be, err)) == NULL ||
	    (tk = model_tokenizer(m, err)) == NULL)
		return printf("#   %s\n", err), -1;
	for (int i = 0; i < 3; i++) {
		int32_t *ids = tokenizer_encode(tk, prompt_text[i], strlen(prompt_text[i]), 0, &n,
		    err);

		if (ids == NULL || n > 64)
			return -1;
		memcpy(f->prompt[i], ids, n * sizeof *ids), f->n_prompt[i] = (int)n, free(ids);
		if (plain(m, f->prompt[i], f->n_prompt[i], f->plain[i]) != 0)
			return -1;
		for (int j = 0; j < NGEN; j++)
			said[f->plain[i][j]] = 1;
	}
	tokenizer_free(tk);
	model_close(m);
	snprintf(f->ranks, sizeof f->ranks, "/tmp/learned-unit-ranks-%ld.txt", (long)getpid());
	if ((fp = fopen(f->ranks, "w")) == NULL)
		return -1;
	for (int t = 0; t < 320; t++)
		if (!said[t])
			fprintf(fp, "%d\n", t);
	return fclose(fp);
}

TEST(the_assistant_with_slots_speaks_the_plain_tokens_and_its_drafts_land)
{
	static struct fix f;
	struct sample_params sp;
	int32_t out[NGEN], ref[3][NGEN];
	long d0 = 0, a0 = 0, d1 = 0, a1 = 0;
	char path[96], err[UTIL_ERRLEN];
	struct model *m0, *m1;
	int n;

	if (fix_init(&f) != 0 || (m0 = open_g4(&f, 0)) == NULL || (m1 = open_g4(&f, 64)) == NULL) {
		CHECK(0);
		return;
	}
	snprintf(path, sizeof path, "%s.learned", f.ranks);
	CHECK_EQ_STR(model_assist_learned_path(m1), path);
	CHECK(model_assist_learned_path(m0) == NULL);
	for (int pass = 0; pass < 2; pass++)	/* the second pass with what the first learned */
		for (int i = 0; i < 3; i++) {
			CHECK(speak(m0, NULL, 3, f.prompt[i], f.n_prompt[i], out, &d0, &a0) == 0);
			CHECK(memcmp(out, f.plain[i], sizeof out) == 0);
			CHECK(speak(m1, NULL, 3, f.prompt[i], f.n_prompt[i], out, &d1, &a1) == 0);
			CHECK(memcmp(out, f.plain[i], sizeof out) == 0);
		}
	CHECK_EQ_INT(a0, 0);	/* the ranks miss every token said */
	CHECK(a1 > 0);
	printf("#   greedy K=3: accepted %ld/%ld without slots, %ld/%ld with\n", a0, d0, a1, d1);
	sample_defaults(&sp);
	sp.temp = 0.8f, sp.top_k = 40, sp.seed = 5;
	for (int i = 0; i < 3; i++) {	/* seeded sampling: the same draws with slots or not */
		long x = 0;

		CHECK(speak(m0, &sp, 3, f.prompt[i], f.n_prompt[i], ref[i], &x, &x) == 0);
		CHECK(speak(m1, &sp, 3, f.prompt[i], f.n_prompt[i], out, &x, &x) == 0);
		CHECK(memcmp(out, ref[i], sizeof out) == 0);
	}
	CHECK_EQ_INT(model_assist_save(m0, 1, &n, err), 0);
	CHECK_EQ_INT(model_assist_save(m1, 1, &n, err), 1);
	CHECK(n > 0 && n <= 64);
	model_close(m1);
	if ((m1 = open_g4(&f, 64)) != NULL) {	/* the next boot starts from the file */
		char line[1024], want[1024];

		CHECK_EQ_INT(model_assist_adapt_line(m1, line, sizeof line), 0);
		snprintf(want, sizeof want, "[gemma-draft] trim adapt: %d learned slots after the "
		    "%d ranks (all the tokens outside them), %d from %s;", n, 320 - n, n, path);
		CHECK(strncmp(line, want, strlen(want)) == 0);
		model_close(m1);
	}
	model_close(m0);
	unlink(path), unlink(f.ranks);
	backend_close(f.be);
}

int
main(void)
{
	RUN(empty_slots_fill_in_order_with_tokens_outside_the_ranks);
	RUN(the_weakest_slot_goes_once_a_token_passes_it);
	RUN(the_same_tokens_give_the_same_slots);
	RUN(slots_are_cut_to_the_tokens_outside_the_ranks);
	RUN(copy_says_when_the_slots_changed);
	RUN(the_file_keeps_the_slots_strongest_first_and_loads_back);
	RUN(a_file_that_cannot_be_written_is_an_error_and_the_changes_wait);
	RUN(a_malformed_file_is_an_error_naming_the_line);
	RUN(a_periodic_save_is_due_after_a_while_with_changes);
	RUN(the_assistant_with_slots_speaks_the_plain_tokens_and_its_drafts_land);
	return test_summary();
}
