/*
 * sched (the file is schedule.h: <sched.h> is the system's): the serving
 * step loop.  One worker thread owns the models and calls sched_step; any number of request threads call sched_submit,
 * sched_read and sched_release.  A step is one batched forward per model
 * over every running session's rows (a decode row each, or a speculative
 * session's verify rows) plus a bounded number of prompt chunks of newly
 * admitted sessions, each chunk its own forward.
 *
 * Exactness: a session's tokens never depend on what else runs.  The
 * decode and verify products keep each row's one-row bits (groups of at
 * most the model's step rows, lib/model.h model_step_rows and
 * model_forward_seqs: 32 on the CPU, 16 on CUDA); a
 * prompt is cut into chunks at the absolute positions chunk, 2 chunk, ...
 * whatever the load, and each chunk runs alone; draws are keyed by the
 * request's seed and the position (sequence 0), as serve drew them when
 * it ran one request at a time; a greedy session decoded speculatively
 * gives the plain greedy tokens.  So a reply is the same alone or beside
 * any number of others, joining at any step.
 *
 * Memory: every session slot's state (KV caches for n_ctx positions,
 * recurrent state, verify snapshots) is allocated when a model is added,
 * after checking that it fits in the backend's free memory: a busy server
 * never runs out of memory in the middle of traffic.
 */
#ifndef MEMRA_SCHED_H
#define MEMRA_SCHED_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "sample.h"
#include "spec.h"

struct sched_note;

/*
 * The fewest tokens a prefill chunk may have: more than BACKEND_ROWS_MIN
 * (16, a step on CUDA, whose products of more rows take a prompt's GEMM).
 * A prompt's forwards are MODEL_PREFILL's, never a step whatever their
 * rows, so a chunk within a step's rows where a step holds more (the
 * CPU's 32, whose products are row-invariant at any m) computes a
 * prompt's bits all the same.
 */
#define SCHED_CHUNK_MIN (BACKEND_ROWS_MIN + 1)

struct sched_config {
	int	n_ctx;		/* positions a session holds (MEMRA_CTX) */
	int	max_sessions;	/* sessions running at once, over all models */
	int	max_queue;	/* requests waiting for a session; more are refused */
	int	chunk;		/* prompt tokens a prefill chunk (>= SCHED_CHUNK_MIN) */
	int	step_prefill;	/* prompt tokens prefilled a step, over all sessions (>= chunk) */
	size_t	reserve;	/* bytes of backend memory left free for activations */
	size_t	prefix_bytes;	/* each model's prefix cache (MEMRA_PREFIX_CACHE_MB): 0 none,
				 * SCHED_PREFIX_AUTO a quarter of the memory the sessions
				 * leave, at most 8 GiB on a GPU, 1 GiB on the CPU */
	int	reuse;		/* 1: the reuse pool (MEMRA_REUSE_POOL) */
	int	host_mask;	/* 1: every grammar masks its rows on the host (the device
				 * path's reference in tests); 0: a session with a grammar
				 * and no logprobs, decoding plain, has its rows masked
				 * (backend_mask) and picked where the logits are */
	int	block;		/* tokens a prefix cache block, the reuse grain
				 * (MEMRA_PREFIX_BLOCK): a divisor of chunk, chunk itself or
				 * a multiple of 64; 0: 64 where it divides chunk and every
				 * backend is backend_cut_exact, else chunk (below) */
	/* the worker's events for the log (may be NULL); called outside the lock */
	void	(*note)(void *arg, const struct sched_note *);
	void	*note_arg;
};

#define SCHED_PREFIX_AUTO ((size_t)-1)

/*
 * Reuse without recomputing, exactly.  A cold prompt of n tokens is
 * prefilled in forwards that end at the absolute multiples of chunk and
 * at L = floor((n - 1) / block) block, the prompt's last multiple of
 * block before its last token (when that is no multiple of chunk): [...,
 * the last multiple of chunk), [that, L), [L, n).  So the state where a
 * forward ended is the same for every prompt with the same tokens before
 * it, and only there can a sequence resume.  A sequence resumed at S (a
 * multiple of block where some prompt's forward ended) runs [S, the next
 * multiple of chunk), then the cold run's cuts: one cut more than the
 * cold run of its own prompt has, at S.  That computes the cold run's
 * bits because every product is row-invariant past the backend's step
 * rows (backend_step_rows, at most BACKEND_ROWS_MAX = 32; row r of a
 * product depends on row r alone, and every piece but
 * the tail [L, n), which both runs cut alike, has at least block >= 64
 * rows) and the CPU's gated delta rule runs in chunks of GDN_CHUNK (64)
 * positions from a forward's first row, so cutting a prefill at a
 * multiple of 64 changes no chunk of it (t/tools/prefix-exact measures
 * it on the CPU: a
 * cut at a multiple of 64 gives the 512-chunks' bits; other cuts, and
 * decode rows, differ in the last bits).  Hence block is a multiple of 64
 * or the chunk itself (then S is a multiple of chunk: no cut more).  A
 * backend where a prompt row's bits depend on the forward's pieces
 * (backend_cut_exact 0: CUDA, measured) takes the chunk: sched_new's
 * default there, and a smaller block is an error (sched_new, and
 * sched_add_model for a model with a stage on such a backend).
 *
 * The prefix cache (lib/prefix, blocks of `block` tokens) keeps every
 * block's KV rows a prefill passes, and a snapshot of the recurrent state
 * only at a block's end where a forward ended (a multiple of chunk, a
 * prompt's L); a request resumes at the longest cached chain of its
 * prompt that ends at a snapshot and leaves a token to prefill.  A hybrid
 * model's turn so reuses its conversation up to the last multiple of
 * block a forward of an earlier prompt ended at; attention-only blocks
 * past it are kept, but resuming there would need the recurrent state.
 *
 * The reuse pool keeps a finished session's state in its slot (its KV
 * rows stay where they are, and the recurrent state at the prompt's last
 * point a cold prefill stops at, its L or a multiple of chunk, was saved
 * when the prefill passed it); a request whose prompt begins with the
 * tokens before that point and goes past it resumes there.  A parked slot
 * is taken back (least recently parked first) as soon as a request needs
 * a slot and no free one is left.  What a turn generated is prefilled
 * again from that point on: decode rows are other bits than a cold
 * prefill of the same tokens.
 *
 * Images: an image's soft-token rows are one placeholder id for any image
 * of its size, so a block of the prefix cache is keyed by its tokens and
 * the images whose rows it holds (their files' SHA-256, first rows and
 * sizes), and a parked conversation resumes only where the images before
 * its boundary are the same; a different image never matches.  A cold
 * prefill runs an image whole in one forward (its rows see each other
 * both ways), so it does not stop at a chunk boundary or an L that an
 * image runs across: such a block is kept open (its rows for the chains
 * through it, no resuming at its end), and the pool's point is the last
 * one the cold prefill stops at.  Nor does a request resume at a point
 * inside a chunk where its own first forward would stop before an image
 * within the model's step rows (model_step_rows: a step's kernels on a GPU, where the
 * cold run has no cut): it resumes at an earlier snapshot.  So a turn that sends back the same images
 * resumes past them, computing the bits a cold prefill computes.
 *
 * A speculative session resumes with the MTP cache rows of a speculative
 * session's prefill; from a state without them it decodes plain (the same
 * greedy tokens).  Gemma-4's assistant keeps no cache: any state will do.
 * A DFlash drafter's context rows stay in a parked slot (its spec's),
 * and its rings (a sliding layer's last positions, model_dflash_state)
 * were saved at the resume point as the recurrent state was; a DFlash
 * lane's prefix cache is two of as many blocks, the trunk's and the
 * drafter's context rows of the same prompt blocks (a ring's within its
 * reach of the block's end), stored by a speculative session's prefill.
 * sched_seq_cached tells the prompt
 * tokens a session did not recompute.
 */
enum { SCHED_NOTE_REUSE, SCHED_NOTE_COLD };
struct sched_note {
	int	kind;		/* SCHED_NOTE_* */
	int	lane;
	int	tokens;		/* REUSE: prompt tokens resumed from the parked state */
	int	parked;		/* the parked conversation's committed tokens */
	const char *why;	/* COLD: why a request that extends a parked
				 * conversation was not resumed from it */
	int	spec;		/* REUSE: 1 when it decodes speculatively on (a drafter's
				 * rows parked with it came along) */
};

struct backend;

/* Defaults for backend be: chunk 512, step_prefill 2048, max_queue 4 x
 * max_sessions, reserve 1 GiB on a GPU, 512 MiB on the CPU. */
void	sched_config_defaults(struct sched_config *, const struct backend *be, int n_ctx,
	    int max_sessions);

struct sched;
struct model;

/*
 * A scheduler over backend be.  NULL with the reason in err (UTIL_ERRLEN)
 * for a bad config.  sched_free frees it and every session (NULL is a
 * no-op); no other thread may use it then.
 */
struct sched *sched_new(struct backend *be, const struct sched_config *, char *err);
void	sched_free(struct sched *);

/*
 * What serving model m costs: the bytes of one session's state (n_ctx
 * positions, snapshots for a verify of K + 1 rows) and how many such
 * sessions fit in the backend's free memory less the reserve.  The
 * model's activations for a prompt chunk's forward are allocated first
 * (model_reserve), so the memory counted free is what sessions can have.
 *
 * A model split into pipeline stages (model_stages) keeps each stage's
 * part of a state on the stage's device: each device is counted on its
 * own (stages on one device together, the host's memory once for every
 * CPU stage), with a reserve each, and the sessions that fit are those
 * that fit on every device.
 */
#define SCHED_FIT_DEVS 16

struct sched_fit_dev {
	char	name[32];	/* the device: a split model's stage device ("cuda:1",
				 * "cpu"), else the backend's name */
	unsigned stages;	/* the stages on it (bit s: stage s) */
	size_t	session;	/* bytes of a session's state there */
	size_t	avail;		/* its memory free now, less the reserve */
	int	fit;		/* sessions that fit there */
};

struct sched_fit {
	size_t	session;	/* bytes a session's state takes (on all its devices) */
	size_t	avail;		/* backend memory free now, less the reserve (all devices) */
	int	fit;		/* sessions of n_ctx that fit (on every device) */
	int	max_ctx;	/* the longest n_ctx (a multiple of 256) at which
				 * max_sessions sessions fit; 0 when none */
	size_t	prefix;		/* sched_add_model: the bytes of the lane's prefix cache */
	int	n_dev;		/* devices: 1, or a split model's */
	struct sched_fit_dev dev[SCHED_FIT_DEVS];
	size_t	drafter;	/* of session: a DFlash drafter's context cache (with the
				 * reuse pool, its rings' copy too); 0: none */
};
int	sched_fit(struct sched *, struct model *m, int K, struct sched_fit *f, char *err);

/*
 * Serve model m (which must outlive the scheduler) as lane number
 * returned, greedy requests decoded speculatively with up to K drafts a
 * round (0: plain; K needs a drafter: an attached DFlash drafter, K up to
 * its block - 1, or else an attached Gemma-4 assistant, or else the MTP
 * head; each speculative session keeps the drafter's own state, a
 * DFlash drafter's context cache too: model_dflash_state): pin 1, every greedy session
 * drafts K; pin 0, a greedy session is admitted speculative when
 * sched_spec_k finds drafting pays at the load it joins (and one
 * admission in 16 while the lane's acceptance has few counts), plain
 * otherwise (no MTP work at all), and each step gives the speculative ones
 * sched_spec_k's k, at least 1, from what the lane measured at boot
 * (sched_spec_costs).  Allocates max_sessions session states (with the
 * reuse pool, each with room for a saved recurrent state and a DFlash
 * drafter's rings) and the prefix
 * cache; a max_sessions x n_ctx that does not fit is an error naming
 * what fits, and so is a prefix cache past what the sessions leave.  f (may be NULL) gets sched_fit's account from before the
 * allocation.  -1 with the reason in err.
 */
int	sched_add_model(struct sched *, struct model *m, int K, int pin, struct sched_fit *f,
	    char *err);

struct grammar;
struct vision_prompt;

/*
 * A request: lane from sched_add_model, the prompt's ids (copied).  With a
 * grammar, each token is drawn from the logits with the tokens the grammar
 * does not allow at that point masked out (grammar_mask_logits, closing
 * the document within what max_tokens and the context leave), on the host,
 * so a greedy reply is the argmax of the masked rows; logprobs then come
 * from the masked distribution.  A greedy session with a grammar or
 * logprobs drafts where the lane would draft it without: its verify rows'
 * logits come to the host, each row's token is drawn there as plain decode
 * draws it (masked) while the drafts before it were those tokens, and a
 * draft that differs (one the grammar refuses included) is cut there like
 * any wrong draft; so its tokens and logprobs are plain decode's, bit for
 * bit.  A grammar with ignore_eos is refused (the grammar ends the reply
 * with a stop id).
 */
struct sched_req {
	int	lane;
	const int32_t *ids;
	int	n_ids;
	struct sample_params sp;
	int	max_tokens;	/* new tokens at most (>= 1) */
	int	ignore_eos;	/* 1: the stop ids do not end it */
	const int32_t *stop;	/* ids that end generation (not emitted) */
	int	n_stop;
	int	logprobs;	/* 1: each token's logprob comes with it (sched_read_lp) */
	int	top_logprobs;	/* and its 0..SCHED_TOP_MAX likeliest alternatives */
	struct grammar *grammar;	/* NULL, or what the reply must be (lib/grammar.h):
					 * each choice holds a reference of its own */
	const struct vision_prompt *vp;	/* NULL, or the prompt's images (lib/vision.h,
					 * rows within ids; copied): each prefill chunk
					 * gives their rows' soft tokens (model_inject)
					 * and is cut so that an image lies whole in one
					 * forward; a greedy session drafts on a lane of
					 * Gemma-4's assistant (on an MTP or DFlash lane
					 * it decodes plain); reuse keys image rows by
					 * the images' SHA-256 (see above) */
};

/* The most alternatives a token's logprobs list. */
#define SCHED_TOP_MAX 20

/*
 * A token's logprobs, from the distribution it was drawn from before
 * top-k, top-p and min-p cut it (sample_logprobs: the penalized logits
 * over the temperature, or over 1 when greedy): the token's, and the
 * n_top likeliest tokens' (most likely first, the lower id on ties).
 * A session that asks for them has its rows' logits (a speculative
 * session's verify rows') brought to the host; the tokens are those it
 * gets without them.
 */
struct sched_logprob {
	float	logprob;	/* -inf when its logit was not finite */
	int	n_top;
	int32_t	top_id[SCHED_TOP_MAX];
	float	top_lp[SCHED_TOP_MAX];
};

enum sched_finish {
	SCHED_RUNNING,
	SCHED_STOP,		/* a stop id, or cancelled */
	SCHED_LENGTH,		/* max_tokens, or the context is full */
	SCHED_ERROR,		/* sched_seq_errmsg says why */
};

struct sched_seq;

/*
 * Queue request q (thread-safe).  NULL with err when it cannot run here
 * (a prompt that does not fit in n_ctx, a bad lane) and *full = 0, or
 * when the running sessions and the queue are full: *full = 1 (the
 * caller answers busy).  The handle is the caller's until sched_release.
 */
struct sched_seq *sched_submit(struct sched *, const struct sched_req *q, int *full,
	    char *err);

/*
 * n choices of request q sharing one prompt (thread-safe): the prompt is
 * prefilled once, by choice 0, and its state copied into the others'
 * slots, then each draws its own tokens with seed q->sp.seed + i, as the
 * request with that seed and n = 1 draws them (none is decoded
 * speculatively).  The n sessions are admitted together.  Handles into
 * seqs[n], each the caller's until sched_release.  0, or -1 as
 * sched_submit (n outside 1..max_sessions: err, *full = 0).
 */
int	sched_submit_n(struct sched *, const struct sched_req *q, int n, struct sched_seq **seqs,
	    int *full, char *err);

/*
 * The session's next tokens (thread-safe): waits until at least one is
 * there or the session has ended, or wait_s seconds have passed (wait_s <
 * 0: no limit); copies up to max into out and returns how many; *finish
 * gets the session's end (SCHED_RUNNING while more may come).  0 with
 * *finish != SCHED_RUNNING: all tokens were read; 0 with SCHED_RUNNING:
 * the wait ran out (a reader's chance to see whether its client is still
 * there, e.g. while the request waits in the queue).
 */
int	sched_read(struct sched *, struct sched_seq *, int32_t *out, int max, int *finish,
	    double wait_s);

/* sched_read with each token's logprobs into lp[max] too (NULL: none; a
 * session submitted without logprobs leaves them unspecified). */
int	sched_read_lp(struct sched *, struct sched_seq *, int32_t *out, struct sched_logprob *lp,
	    int max, int *finish, double wait_s);

/* The reason of a SCHED_ERROR end. */
const char *sched_seq_errmsg(const struct sched_seq *);

/* Seconds from submit to admission and to the first token (-1: not yet). */
void	sched_seq_times(struct sched *, const struct sched_seq *, double *wait,
	    double *first);

/*
 * The caller is done with the session (thread-safe): a session still
 * running stops at the next step and frees its slot; the handle is
 * invalid after this.
 */
void	sched_release(struct sched *, struct sched_seq *);

/*
 * The worker's step: admits queued requests into free slots, then runs
 * one step of every running session.  Returns how many sessions are
 * running or queued after it (0: idle), or -1 on a failure of the whole
 * step (each session it touched ends with SCHED_ERROR; the scheduler
 * goes on).  sched_wait blocks until there is work or sched_shutdown.
 */
int	sched_step(struct sched *);
int	sched_wait(struct sched *);

/* Wake sched_wait for good (it returns -1 from then on). */
void	sched_shutdown(struct sched *);

struct sched_stats {
	int	running, queued;
	long	steps, tokens, prefill_tokens, refused;	/* refused: busy */
	long	spec_rounds, drafted, accepted;	/* verify rounds with drafts, their drafts */
	long	reused, cached_tokens;	/* resumed from the pool; prompt tokens not recomputed */
	int	parked;			/* slots holding a parked conversation */
	long	rounds_k[SPEC_KMAX + 1], accepted_k[SPEC_KMAX + 1];	/* the same by the
					 * round's drafts k (1..SPEC_KMAX) */
	/* split models' pipelines (model_pp_stats, over every lane, as of the
	 * last step): micro-batches, waves, and waves with two stages at work */
	long	pp_microbatches, pp_waves, pp_busy_waves;
	/* the steps' forwards of the sessions' decode and verify rows
	 * (model_forward_seqs' groups, over every lane, as of the last step):
	 * the groups of rows they ran, and the most rows one group held (at
	 * most each model's step rows) */
	long	step_groups;
	int	step_rows_most;
	long	masked;		/* grammar picks taken where the logits are (backend_mask) */
};
void	sched_stats(struct sched *, struct sched_stats *);

/* The prompt tokens session q did not compute (resumed from the pool or
 * the prefix cache); set when it is admitted. */
int	sched_seq_cached(struct sched *, const struct sched_seq *q);

struct prefix_stats;

/* Lane `lane`'s prefix cache as of the last step; -1 when it has none. */
int	sched_prefix_stats(struct sched *, int lane, struct prefix_stats *ps);

/*
 * What speculation costs and yields on a lane, measured: the seconds a
 * forward of m rows of one sequence takes (m = 1..step_rows, the lane's
 * model_step_rows, by sched_add_model at boot), the seconds one draft token takes and a
 * round takes besides its drafts (by the drafter: the MTP head, a row a
 * draft and a row for its cache's append; Gemma-4's assistant, a step a
 * draft and nothing else; a DFlash drafter, none a draft and its block's
 * forward and a context row a round), and the chance that draft j is
 * accepted when the drafts before it were (the lane's own counts so far,
 * (hits + 1) / (tries + 2): 0.5 before any).
 */
struct sched_spec_cost {
	int	step_rows;	/* the most rows a step's group holds (model_step_rows) */
	double	rows[BACKEND_ROWS_MAX + 1];	/* [1..step_rows]; [0] unused */
	double	draft, round;
	int	first;		/* drafts the round gives (the MTP head's append: 1) */
	double	accept[SPEC_KMAX];
};

/*
 * The k <= K drafts a step gives each of `sessions` greedy sessions: the
 * one with the most expected tokens a second, sessions x (1 + a1 + a1 a2 +
 * ...) over the step's time, which is the forwards of its row groups (the
 * sessions' k + 1 rows each, packed whole into groups of at most
 * step_rows) plus, for k > 0, sessions x ((k - first) draft + round): an
 * MTP head's round (its cache's append) picks the first draft, the chain
 * the k - 1 after it; k + 1 <= step_rows.
 * 0 when no k > 0 pays.
 */
int	sched_spec_k(const struct sched_spec_cost *c, int K, int sessions);

/* Lane `lane`'s costs now (its measured rows and draft, its acceptance so far). */
void	sched_spec_costs(struct sched *, int lane, struct sched_spec_cost *c);

#endif
