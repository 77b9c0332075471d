/*
 * imgreuse: the scheduler's reuse of prompts with images, on the gemma4
 * fixture t/data/gemma4/g4-vision (its text model; image rows bidirectional)
 * with made-up images: each image a run of soft-token rows of its own values
 * and a digest standing for its file's SHA-256.  Multi-turn conversations
 * with images in their first turns, served from the pool, the prefix cache,
 * both, plain and drafted by Gemma-4's assistant: every turn's tokens and
 * logprobs are the cold ones bit for bit, resumed past the images, never at
 * a chunk boundary an image runs across; an image of the same rows but
 * other bytes never resumes (the pool says why); with blocks of 64 in
 * chunks of 128, no resume at a point inside a chunk that an image starts
 * 16 rows or less after (its first forward would be a step's rows).
 */
#include <pthread.h>
#include <stdlib.h>

#include "backend.h"
#include "model.h"
#include "prefix.h"
#include "schedule.h"
#include "schedrun.h"
#include "sha256.h"
#include "test.h"
#include "util.h"
#include "vision.h"

#define CHUNK 32
#define TURNS 3
#define MAXGEN 10
#define MAXIDS 600
#define NT 32		/* g4-vision's width */
#define BOI 284
#define IMG 285
#define EOI 286
#define PAD 318

static struct backend *be;
static struct model *mp, *md;	/* plain, and with the assistant attached */
static int chunk = CHUNK;	/* the scheduler's chunk (its block: 64 where it divides it) */
static uint64_t rng = 0x2545f4914f6cdd1dULL;

static uint64_t
next(uint64_t *x)
{
	*x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
	return *x;
}

static struct {
	pthread_mutex_t mu;
	int	reuse, cold;
	char	why[128];
} notes = { PTHREAD_MUTEX_INITIALIZER, 0, 0, "" };

static void
on_note(void *arg, const struct sched_note *n)
{
	pthread_mutex_lock(&notes.mu);
	if (n->kind == SCHED_NOTE_REUSE)
		notes.reuse++;
	else
		notes.cold++, snprintf(notes.why, sizeof notes.why, "%s", n->why);
	pthread_mutex_unlock(&notes.mu);
}

/* A conversation: its ids and, turn by turn, the prompt's length and images. */
struct conv {
	int32_t	ids[MAXIDS];
	int	n[TURNS], n_img[TURNS];
	struct vision_prompt_image img[4];	/* every image so far, in order */
	uint64_t seed[4];			/* each image's "bytes" */
	int32_t	reply[TURNS][MAXGEN];
	float	lp[TURNS][MAXGEN];
	int	n_reply[TURNS];
};

/* Image k of c at rows [row, row + n), its values and digest from seed. */
static void
put_image(struct conv *c, int k, int row, int n, uint64_t seed)
{
	struct sha256 h;

	c->img[k].row = row, c->img[k].n = n, c->seed[k] = seed;
	sha256_init(&h);
	sha256_update(&h, &seed, sizeof seed);
	sha256_final(&h, c->img[k].sha256);
	c->ids[row - 1] = BOI, c->ids[row + n] = EOI;
	for (int r = row; r < row + n; r++)
		c->ids[r] = IMG;
}

/* c's images of turn t as a vision_prompt (freed with vision_prompt_free). */
static void
prompt_images(const struct conv *c, int t, struct vision_prompt *vp)
{
	int rows = 0;

	memset(vp, 0, sizeof *vp);
	for (int k = 0; k < c->n_img[t]; k++)
		rows += c->img[k].n;
	vp->n_rows = rows, vp->nt = NT, vp->bidir = 1, vp->pad = PAD, vp->n_img = c->n_img[t];
	vp->row = malloc(rows * sizeof *vp->row);
	vp->x = malloc((size_t)rows * NT * sizeof *vp->x);
	vp->img = malloc(c->n_img[t] * sizeof *vp->img);
	memcpy(vp->img, c->img, c->n_img[t] * sizeof *vp->img);
	for (int k = 0, i = 0; k < c->n_img[t]; k++) {
		uint64_t x = c->seed[k];

		for (int r = 0; r < c->img[k].n; r++, i++) {
			vp->row[i] = c->img[k].row + r;
			for (int j = 0; j < NT; j++)
				vp->x[(size_t)i * NT + j] = (float)((int)(next(&x) % 2001) - 1000) / 500.0f;
		}
	}
}

/* A scheduler of m (K drafts, pinned) with the pool (reuse) and `blocks` blocks. */
static int
start(struct run *r, struct model *m, int K, int reuse, int blocks)
{
	struct sched_config c;
	char err[UTIL_ERRLEN];
	struct state *st = model_state_new(m, 1, 0, err);
	int B = chunk % 64 == 0 ? 64 : chunk;

	sched_config_defaults(&c, be, MAXIDS + MAXGEN + 8, 2);
	c.chunk = chunk, c.step_prefill = 2 * chunk, c.reserve = 0, c.reuse = reuse;
	c.note = on_note;
	c.prefix_bytes = st != NULL ? blocks * prefix_unit_bytes(state_config(st), NULL, B,
	    chunk / B) : 0;
	state_free(st);
	if ((r->s = sched_new(be, &c, err)) == NULL ||
	    (r->lane = sched_add_model(r->s, m, K, K > 0, NULL, err)) < 0) {
		FAILF("%s", err);
		sched_free(r->s);
		return -1;
	}
	pthread_create(&r->w, NULL, worker, r->s);
	return 0;
}

/* Turn t of c on r, greedy with logprobs: its tokens into out, their logprobs
 * into lp; the count, and its cached tokens in *cached. */
static int
turn(struct run *r, const struct conv *c, int t, int32_t *out, float *lp, int *cached)
{
	static const int32_t stop_ids[] = { 1 };
	struct vision_prompt vp;
	struct sched_logprob l[MAXGEN];
	struct sched_req q = { .lane = r->lane, .ids = c->ids, .n_ids = c->n[t],
	    .max_tokens = MAXGEN, .stop = stop_ids, .n_stop = 1, .logprobs = 1, .vp = &vp };
	char err[UTIL_ERRLEN];
	int full, n = 0, fin;
	struct sched_seq *h;

	sample_defaults(&q.sp);
	prompt_images(c, t, &vp);
	h = sched_submit(r->s, &q, &full, err);
	vision_prompt_free(&vp);
	if (h == NULL) {
		FAILF("submit: %s", err);
		return -1;
	}
	do
		n += sched_read_lp(r->s, h, out + n, l + n, MAXGEN - n, &fin, -1);
	while (fin == SCHED_RUNNING && n < MAXGEN);
	if (fin == SCHED_ERROR)
		FAILF("turn %d: %s", t, sched_seq_errmsg(h));
	for (int i = 0; i < n; i++)
		lp[i] = l[i].logprob;
	*cached = sched_seq_cached(r->s, h);
	sched_release(r->s, h);
	return n;
}

/*
 * Conversation c: turn 0 text, an image of 70 rows from row 6 (across the
 * boundaries at 32 and 64) and text; turn 1 the reply, text, an image of
 * 40 rows and text; turn 2 the reply and text.  Cold replies (nothing
 * reused) on the plain model.
 */
static void
make_conv(struct conv *c, uint64_t s0, uint64_t s1)
{
	struct run r;
	int n = 0, cached;

	memset(c, 0, sizeof *c);
	for (int k = 0; k < MAXIDS; k++)
		c->ids[k] = (int32_t)(next(&rng) % 280) + 2;
	put_image(c, 0, 6, 70, s0);
	c->n[0] = 110, c->n_img[0] = 1;
	if (start(&r, mp, 0, 0, 0) != 0)
		return;
	for (int t = 0; t < TURNS; t++) {
		if (t > 0) {
			n = c->n[t - 1];
			memcpy(c->ids + n, c->reply[t - 1], c->n_reply[t - 1] * sizeof *c->ids);
			n += c->n_reply[t - 1];
			c->n_img[t] = c->n_img[t - 1];
			if (t == 1)
				put_image(c, c->n_img[t]++, n + 9, 40, s1);
			c->n[t] = n + (t == 1 ? 100 : 12);
		}
		c->n_reply[t] = turn(&r, c, t, c->reply[t], c->lp[t], &cached);
		CHECK_EQ_INT(cached, 0);
	}
	run_stop(&r);
}

/* 1 when position p of c's turn t lies inside an image's rows (no cut there). */
static int
inside(const struct conv *c, int t, int p)
{
	for (int k = 0; k < c->n_img[t]; k++)
		if (c->img[k].row < p && p < c->img[k].row + c->img[k].n)
			return 1;
	return 0;
}

/* c's turns on a scheduler of m with K drafts, the pool, `blocks` blocks:
 * each the cold reply bit for bit; the turns' cached tokens into cached[]. */
static void
replay(const struct conv *c, struct model *m, int K, int reuse, int blocks, int *cached)
{
	struct run r;
	int32_t got[MAXGEN];
	float lp[MAXGEN];

	if (start(&r, m, K, reuse, blocks) != 0)
		return;
	for (int t = 0; t < TURNS; t++) {
		int n = turn(&r, c, t, got, lp, &cached[t]);

		if (n != c->n_reply[t] || memcmp(got, c->reply[t], n * sizeof *got) != 0 ||
		    memcmp(lp, c->lp[t], n * sizeof *lp) != 0)
			FAILF("K %d pool %d blocks %d turn %d (%d cached): not the cold reply", K,
			    reuse, blocks, t, cached[t]);
		if (cached[t] % CHUNK != 0 || cached[t] >= c->n[t] || inside(c, t, cached[t]))
			FAILF("turn %d: %d cached of %d", t, cached[t], c->n[t]);
	}
	run_stop(&r);
}

static struct conv cv;

TEST(image_turns_resume_past_their_images_with_the_cold_bits)
{
	static const int how[3][2] = { { 1, 0 }, { 0, 64 }, { 1, 64 } };	/* pool, blocks */

	for (int K = 0; K <= 3; K += 3)
		for (int i = 0; i < 3; i++) {
			int cached[TURNS];

			replay(&cv, K ? md : mp, K, how[i][0], how[i][1], cached);
			CHECK_EQ_INT(cached[0], 0);
			if (cached[1] < 96 || cached[2] < cv.img[1].row + cv.img[1].n)
				FAILF("K %d, pool %d, blocks %d: cached %d, %d, %d: not past the "
				    "images (rows 6..75, %d..%d)", K, how[i][0], how[i][1], cached[0],
				    cached[1], cached[2], cv.img[1].row, cv.img[1].row + cv.img[1].n - 1);
		}
}

TEST(an_image_of_the_same_rows_but_other_bytes_never_resumes)
{
	static struct conv other;
	struct run r;
	int32_t got[MAXGEN];
	float lp[MAXGEN];
	int cached;

	other = cv;	/* turn 1's prompt: image 0 another, the rest the same ids */
	put_image(&other, 0, 6, 70, 999);
	if (start(&r, mp, 0, 1, 64) != 0)
		return;
	turn(&r, &cv, 0, got, lp, &cached);
	notes.cold = notes.reuse = 0;
	turn(&r, &other, 1, got, lp, &cached);
	CHECK_EQ_INT(cached, 0);	/* every block holds image 0's rows */
	CHECK_EQ_INT(notes.reuse, 0);
	CHECK_EQ_INT(notes.cold, 1);
	CHECK_EQ_STR(notes.why, "an image before the parked state's point at 96 is "
	    "another");
	run_stop(&r);
	/* and its reply is its own cold one */
	if (start(&r, mp, 0, 0, 0) != 0)
		return;
	{
		int32_t cold[MAXGEN];
		float clp[MAXGEN];
		int k, kc = turn(&r, &other, 1, cold, clp, &cached);

		run_stop(&r);
		if (start(&r, mp, 0, 1, 64) != 0)
			return;
		turn(&r, &cv, 0, got, lp, &cached);
		turn(&r, &cv, 1, got, lp, &cached);	/* cv's turn 1 parked, its blocks cached */
		k = turn(&r, &other, 1, got, lp, &cached);
		CHECK_EQ_INT(cached, 0);
		CHECK(k == kc && memcmp(got, cold, k * sizeof *got) == 0 &&
		    memcmp(lp, clp, k * sizeof *lp) == 0);
		run_stop(&r);
	}
}

/*
 * Chunks of 128, blocks of 64: turn 0, 195 ids of text, leaves a snapshot
 * at 192 (its L, inside the chunk [128, 256)); turn 1 sends back its reply
 * and an image right after it, whose rows start 16 rows or less past 192
 * and run across 256: resumed at 192, its first forward would stop before
 * the image within a step's rows (model_step_rows: 32 on the CPU), where
 * the cold run has no cut.  It resumes at 128 from the
 * cache, cold from the pool (which says why), each the cold reply.
 */
TEST(no_resume_inside_a_chunk_just_before_an_image)
{
	static struct conv c;
	struct run r;
	int32_t got[MAXGEN], cold[2][MAXGEN];
	float lp[MAXGEN], clp[2][MAXGEN];
	int cached, kc[2], k;

	chunk = 128;
	memset(&c, 0, sizeof c);
	for (int i = 0; i < MAXIDS; i++)
		c.ids[i] = (int32_t)(next(&rng) % 280) + 2;
	c.n[0] = 195;
	if (start(&r, mp, 0, 0, 0) != 0)
		goto out;
	kc[0] = turn(&r, &c, 0, cold[0], clp[0], &cached);
	memcpy(c.ids + 195, cold[0], kc[0] * sizeof *c.ids);
	put_image(&c, 0, 195 + kc[0] + 1, 70, 7);	/* across 256 */
	c.n[1] = 195 + kc[0] + 1 + 70 + 40, c.n_img[1] = 1;	/* its L inside the image */
	CHECK(c.img[0].row - 192 <= 16);
	kc[1] = turn(&r, &c, 1, cold[1], clp[1], &cached);
	run_stop(&r);
	for (int how = 0; how < 2; how++) {	/* the pool, the cache */
		if (start(&r, mp, 0, how == 0, how == 0 ? 0 : 8) != 0)
			goto out;
		turn(&r, &c, 0, got, lp, &cached);
		notes.cold = notes.reuse = 0, notes.why[0] = '\0';
		k = turn(&r, &c, 1, got, lp, &cached);
		CHECK_EQ_INT(cached, how == 0 ? 0 : 128);
		CHECK(k == kc[1] && memcmp(got, cold[1], k * sizeof *got) == 0 &&
		    memcmp(lp, clp[1], k * sizeof *lp) == 0);
		if (how == 0)
			CHECK_EQ_STR(notes.why, "an image starts within 32 rows of the parked "
			    "state's point at 192");	/* the CPU's step rows */
		run_stop(&r);
	}
out:
	chunk = CHUNK;
}

int
main(void)
{
	static const char *dir = "t/data/gemma4/g4-vision";
	char err[UTIL_ERRLEN];

	if ((be = backend_open("cpu", 2, err)) == NULL) {
		printf("not ok backend: %s\n", err);
		return 1;
	}
	if ((mp = model_open(dir, be, err)) == NULL || (md = model_open_opts(dir, be,
	    &(struct model_options){ .draft = "t/data/gemma4/g4-assistant" }, err)) == NULL) {
		printf("not ok imgreuse: %s\n", err);
		return 1;
	}
	make_conv(&cv, 11, 12);
	RUN(image_turns_resume_past_their_images_with_the_cold_bits);
	RUN(an_image_of_the_same_rows_but_other_bytes_never_resumes);
	RUN(no_resume_inside_a_chunk_just_before_an_image);
	model_close(mp), model_close(md);
	backend_close(be);
	return test_summary();
}
