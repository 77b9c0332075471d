/*
 * schedboot: the K rule, the stage lists, the K-by-load policy lines and
 * the scheduler's notes as serve's boot log prints them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "model.h"
#include "schedboot.h"
#include "schedule.h"
#include "test.h"
#include "util.h"

static struct backend *be;

/* What f printed into a buffer (freed by the caller). */
#define CAPTURE(buf, call) do {						\
	size_t n_;							\
	FILE *fp = open_memstream(&(buf), &n_);				\
	call;								\
	fclose(fp);							\
} while (0)

TEST(stage_sets_print_as_runs)
{
	char b[64];

	CHECK(strcmp(schedboot_stages(0x1, b, sizeof b), "0") == 0);
	CHECK(strcmp(schedboot_stages(0x3, b, sizeof b), "0-1") == 0);
	CHECK(strcmp(schedboot_stages(0x5, b, sizeof b), "0,2") == 0);
	CHECK(strcmp(schedboot_stages(0x27, b, sizeof b), "0-2,5") == 0);
	CHECK(strcmp(schedboot_stages(0, b, sizeof b), "") == 0);
}

TEST(notes_say_what_was_resumed_and_why_not)
{
	struct sched_note r = { .kind = SCHED_NOTE_REUSE, .tokens = 64, .parked = 90, .spec = 1 };
	struct sched_note c = { .kind = SCHED_NOTE_COLD, .why = "the prompt does not extend it" };
	char *t = NULL;

	CAPTURE(t, schedboot_note(fp, "a", 0, &r));
	CHECK(strcmp(t, "[worker] a: reuse: 64 committed tokens resumed (of 90 parked; "
	    "prefilled again from that point on)\n") == 0);
	free(t);
	CAPTURE(t, schedboot_note(fp, "q38", 1, &r));
	CHECK(strcmp(t, "[worker] dspark-reuse: 64 committed tokens resumed (q38: of 90 parked, "
	    "with the drafter's context; prefilled again from that point on)\n") == 0);
	free(t);
	CAPTURE(t, schedboot_note(fp, "a", 1, &c));
	CHECK(strcmp(t, "[worker] a: reuse: served cold: the prompt does not extend it\n") == 0);
	free(t);
}

TEST(the_policy_lines_give_the_k_each_load_gets)
{
	struct sched_spec_cost c = { .step_rows = 16, .draft = 0.0005 };
	char *t = NULL, want[512], *p = want;

	for (int m = 1; m <= BACKEND_ROWS_MAX; m++)
		c.rows[m] = 0.001 * m;	/* a step costs its rows: drafts never pay at load */
	for (int k = 0; k < SPEC_KMAX; k++)
		c.accept[k] = 0.9;
	CAPTURE(t, schedboot_policy(fp, "a", "mtp", &c, 3, 8));
	p += sprintf(p, "[sched] a: a step of m rows (ms): 1: 1 2: 2 4: 4 8: 8 16: 16; a draft "
	    "0.5 ms\n[sched] a: speculative K by load, up to 3 (acceptance 0.5 until measured):");
	for (int n = 1, last = -1; n <= 8; n++)
		if (sched_spec_k(&c, 3, n) != last)
			last = sched_spec_k(&c, 3, n), p += sprintf(p, " %d+ sessions K=%d", n, last);
	sprintf(p, "\n");
	CHECK(t != NULL && strcmp(t, want) == 0);
	CHECK(strstr(t, " 1+ sessions K=") != NULL);
	free(t);
	CAPTURE(t, schedboot_policy(fp, "a", "assist", &c, 3, 1));
	CHECK(strstr(t, "; a draft 0.5 ms (an assistant step)\n") != NULL);
	free(t);
	c.step_rows = 32;	/* the CPU's steps: up to 32 rows */
	CAPTURE(t, schedboot_policy(fp, "a", "mtp", &c, 3, 8));
	CHECK(t != NULL && strstr(t, "[sched] a: a step of m rows (ms): 1: 1 2: 2 4: 4 8: 8 16: 16 "
	    "32: 32; a draft 0.5 ms\n") == t);
	free(t);
	c.step_rows = 24;	/* a limit no power of 2: the powers below it, then it */
	CAPTURE(t, schedboot_policy(fp, "a", "mtp", &c, 3, 8));
	CHECK(t != NULL && strstr(t, " 8: 8 16: 16 24: 24; a draft") != NULL);
	free(t);
}

static const char *model_a_dir;

/* (model A: an MTP head; llama-tiny: nothing to draft with) */
TEST(an_mtp_heads_round_picks_its_first_draft)
{
	/* a step of 1 or 2 rows 1 ms, a draft 0.6 ms, a round (the append) 0.3 ms,
	 * half the first drafts accepted: 1.5 tokens a round */
	struct sched_spec_cost c = { .step_rows = 16, .draft = 0.0006, .round = 0.0003 };

	for (int m = 1; m <= BACKEND_ROWS_MAX; m++)
		c.rows[m] = 0.001;
	for (int k = 0; k < SPEC_KMAX; k++)
		c.accept[k] = 0.5;
	/* a drafter whose k drafts are k steps of their own (an assistant):
	 * 1.5 tokens in 1.9 ms lose to 1 in 1 ms */
	CHECK_EQ_INT(sched_spec_k(&c, 1, 1), 0);
	/* an MTP head's append picks the first draft: 1.5 tokens in 1.3 ms pay */
	c.first = 1;
	CHECK_EQ_INT(sched_spec_k(&c, 1, 1), 1);
	/* a second draft costs a chain step: 1.75 tokens in 1.9 ms do not */
	CHECK_EQ_INT(sched_spec_k(&c, 2, 1), 1);
}

TEST(k_is_three_with_a_drafter_and_never_without_one)
{
	char err[UTIL_ERRLEN] = "";
	struct model *mtp = model_open(model_a_dir, be, err);
	struct model *none = model_open("t/data/tiny/llama-tiny", be, err);
	int k = -1;

	CHECK(mtp != NULL && none != NULL);
	if (mtp == NULL || none == NULL) {
		model_close(mtp), model_close(none);
		return;
	}
	CHECK(model_hparams(mtp)->n_mtp > 0);
	CHECK(schedboot_k(mtp, "q", -1, 1, &k, err) == 0 && k == 3);
	CHECK(schedboot_k(mtp, "q", 5, 1, &k, err) == 0 && k == 5);
	CHECK(schedboot_k(mtp, "q", -1, 0, &k, err) == 0 && k == 0);	/* MEMRA_SERVE_SPEC=0 */
	CHECK(schedboot_k(none, "l", -1, 1, &k, err) == 0 && k == 0);
	CHECK(schedboot_k(none, "l", 2, 1, &k, err) == -1);
	CHECK(strcmp(err, "MEMRA_SPEC_K 2: model 'l' has no MTP head or drafter to draft with") ==
	    0);
	CHECK(strcmp(schedboot_drafter(mtp), "MTP speculative decode for greedy requests") == 0);
	model_close(mtp), model_close(none);
}

/*
 * A gemma4 lane (g4-dense, window 5) at ctx 1024 keeps its three sliding
 * layers' caches as rings of 5 + 512 - 1 positions, and its boot says so;
 * a session's bytes are the rings' (sched_fit: the lesser of the two
 * lines); at ctx 256, under the rings' rows, whole caches and no line.
 */
TEST(a_gemma4_lane_says_its_rings)
{
	char err[UTIL_ERRLEN] = "", *t = NULL;
	struct model *m = model_open("t/data/gemma4/g4-dense", be, err);

	CHECK(m != NULL);
	for (int ctx = 1024; m != NULL && ctx >= 256; ctx /= 4) {
		struct sched_config c;
		struct sched_fit f;
		struct sched *s;
		struct schedboot_cfg bc = { ctx, 2, 0, 0, 0 };
		struct schedboot_model sv = { "g", m, 0, 0 };

		sched_config_defaults(&c, be, ctx, 2);
		c.chunk = 64, c.step_prefill = 128, c.prefix_bytes = 0, c.reserve = 0;
		CHECK((s = sched_new(be, &c, err)) != NULL);
		if (s == NULL)
			break;
		CHECK((sv.lane = sched_add_model(s, m, 0, 0, &f, err)) == 0);
		CHECK_EQ_INT(f.session, model_state_bytes(m, ctx, 1));
		CAPTURE(t, schedboot_lines(fp, s, &sv, &bc, &f));
		if (ctx == 1024) {
			CHECK_EQ_INT(f.session, 2 * 4 * (2 * 64 * 1024 + 3 * 32 * 516));
			CHECK(strstr(t, "[sched] g: 3 of 5 KV caches (the sliding layers') rings of 516 "
			    "positions (window 5 + 512 rows a piece - 1), the rest ctx; a conversation "
			    "resumes from the pool within 512 positions of where it parked\n") != NULL);
		} else
			CHECK(strstr(t, "rings") == NULL);
		free(t);
		sched_free(s);
	}
	model_close(m);
}

int
main(void)
{
	char err[UTIL_ERRLEN];

	if ((be = backend_open("cpu", 1, err)) == NULL) {
		printf("not ok backend: %s\n", err);
		return 1;
	}
	RUN(stage_sets_print_as_runs);
	RUN(notes_say_what_was_resumed_and_why_not);
	RUN(the_policy_lines_give_the_k_each_load_gets);
	RUN(an_mtp_heads_round_picks_its_first_draft);
	RUN(a_gemma4_lane_says_its_rings);
	if ((model_a_dir = test_model_a("schedboot")) != NULL)
		RUN(k_is_three_with_a_drafter_and_never_without_one);
	backend_close(be);
	return test_summary();
}
