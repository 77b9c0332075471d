/*
 * spec: speculative decoding with a model's MTP (nextn) head.
 *
 * A round drafts k tokens by chaining MTP layer 0 on its own output
 * hidden (a model of several NextN blocks, step35: block j drafts token
 * j, its cache's slots fed by block j-1's outputs and the token j+1
 * ahead, and past the last block that block goes on on its own output
 * one slot further each token), verifies the last emitted token and the k drafts as one batch
 * of k+1 rows (MODEL_VERIFY), keeps the longest accepted prefix plus the
 * token the target gives after it (the bonus), and rolls the recurrent
 * state back to the kept rows.  The MTP head's KV cache is then written
 * for the kept rows from the trunk's hidden states and the tokens that
 * follow them, so it always holds verified positions only.
 *
 * With a DFlash / DFlash2 drafter attached (model_dflash) it drafts
 * instead of the MTP head (two spec programs never coexist): a round is
 * one drafter forward over [last token, mask x (block - 1)] at the last
 * token's position and the verify of up to K of its drafts; the trunk's
 * taps of the kept rows become the drafter's context.  DFlash2's drafts
 * walk its selector's lattice from the last token: greedy, each row's
 * best edge after the previous pick; temp > 0, a draw from the softmax of
 * that row's edges at the temperature, which is the q the rejection
 * sampling of the verify reads (zero off the candidates).
 *
 * A gemma4 assistant whose trimmed head has learned slots
 * (model_assist_learn) is told every committed token; spec_round
 * publishes the slots (model_assist_sync) before its draft, a scheduler
 * between its steps.  A sampled draft reads the rank list's rows only.
 *
 * Greedy (temp 0): a draft is accepted when it equals the target's
 * choice, so the output is the plain greedy decode's, token for token.
 * temp > 0: standard speculative rejection sampling (sample_accept), so
 * the output is distributed as the target's; draws are keyed by
 * (seed, sequence, position) and a seeded rerun is identical.
 */
#ifndef MEMRA_SPEC_H
#define MEMRA_SPEC_H

#include <stdint.h>

#include "sample.h"

/* A verify of K + 1 rows is a step, not a prompt: K + 1 <= BACKEND_ROWS_MIN, the
 * fewest rows a step holds on any backend (lib/backend.h backend_step_rows: CUDA's
 * 16; the CPU's 32 would take more); spec.c checks it. */
#define SPEC_KMAX 15

struct spec_stats {
	long	rounds;		/* verify batches with at least one draft */
	long	drafted;	/* draft tokens proposed */
	long	accepted;	/* draft tokens accepted */
	long	depth[SPEC_KMAX];	/* rounds whose draft j (0-based) was accepted */
	long	tried[SPEC_KMAX];	/* rounds that drafted a j-th token */
};

struct model;
struct spec;
struct state;

/*
 * A speculative decoder for model m (which must have an MTP head, an
 * assistant or a DFlash drafter) drafting up to K (1..SPEC_KMAX; with a
 * DFlash drafter 1..block - 1) tokens a round, over a context of n_ctx
 * positions, sampling with p (copied; NULL: greedy defaults).  NULL with
 * the reason in err (UTIL_ERRLEN).  spec_free frees (NULL is a no-op); m
 * must outlive it.
 */
struct spec *spec_new(struct model *m, int K, int n_ctx, const struct sample_params *p,
	    uint64_t seq, char *err);
void	spec_free(struct spec *);
const char *spec_errmsg(const struct spec *);

/*
 * Start a sequence: run the n-token prompt (the state is reset first) and
 * sample the first new token into *first.  0, or -1 with spec_errmsg set.
 */
int	spec_prefill(struct spec *, const int32_t *prompt, int n, int32_t *first);

/*
 * spec_prefill in parts: rows [from, to) of the n-token prompt, from 0
 * (which resets the sequence) and each part starting where the last one
 * ended; the part that reaches n samples *first (untouched before).  The
 * trunk's state after the parts is the one model_forward gives on the same
 * parts (MODEL_PREFILL each): how a prompt is cut is the caller's, and the
 * same cut gives the same bits.  0, or -1 with spec_errmsg set.
 */
int	spec_prefill_part(struct spec *, const int32_t *prompt, int n, int from, int to,
	    int32_t *first);

/*
 * spec_prefill_part whose last part (to == n) leaves the first token to
 * the caller: the last row's logits go to lg (host, [n_vocab]: e.g. to be
 * masked by a grammar, or for their logprobs) and the sequence waits for
 * spec_first, which takes the token the caller drew from them and brings
 * the MTP cache up to it (a DFlash drafter's context, which needs no
 * token, has the part's rows already); nothing else may run on the
 * sequence between the two.  A part before the last is
 * spec_prefill_part's.  0, or -1 with spec_errmsg set.
 */
int	spec_prefill_logits(struct spec *, const int32_t *prompt, int n, int from, int to,
	    float *lg);
int	spec_first(struct spec *, int32_t first);

/*
 * Start a sequence of the n-token prompt at row from (1 <= from < n)
 * instead of 0: the caller has restored the trunk's state to position
 * from (state_seek on spec_state) and, for the drafts, the MTP cache's
 * rows below from, or a DFlash drafter's context (spec_drafter_state: its
 * rows below from, a ring's last ring of them) (they only change how
 * many drafts are accepted, never a token).  spec_prefill_part(from, ...)
 * follows.  0, or -1 with spec_errmsg set.
 */
int	spec_resume(struct spec *, const int32_t *prompt, int n, int from);

/*
 * One round after spec_prefill (or a previous round): writes 1..limit new
 * tokens to out (limit >= 1; it bounds the drafts to limit-1) and returns
 * how many, or -1 with spec_errmsg set (the sequence must then restart).
 */
int	spec_round(struct spec *, int32_t *out, int limit);

/*
 * spec_round with its acceptance given, for replaying an acceptance trace
 * (run-spec --trace-in) on a model of other weights: the same drafts
 * (min(K, limit-1) of them), the same verify forward, then exactly acc
 * drafts kept (0 <= acc <= the drafts; fewer drafts than acc is an error)
 * and the verify's greedy pick after them, whatever the picks say; the
 * state rolled back, the stats and the drafter's cache brought up to the
 * kept tokens as spec_round does.  *natural (when not NULL) gets the
 * drafts spec_round would have accepted.  Plain greedy only (as
 * spec_draft).  Returns acc + 1, or -1 with spec_errmsg set (the sequence
 * must then restart).
 */
int	spec_round_forced(struct spec *, int32_t *out, int limit, int acc, int *natural);

/*
 * A greedy round in phases, for a caller that verifies many sequences in
 * one forward (a scheduler's step: model_forward_seqs).  Plain greedy
 * only (temp 0, no penalties: sample_plain_greedy), where a draft is
 * accepted when it equals the target's greedy pick: for any other
 * sampler each returns -1 with spec_errmsg set (spec_round draws).
 *
 * spec_draft, after spec_prefill or a previous round: the verify rows
 * into rows[] (room for K+1): the last emitted token, then up to
 * min(K, limit-1) drafts (limit >= 1, as spec_round's); returns their
 * count m (1..K+1), or -1 (also when a draft already waits for its
 * spec_accept).
 * In between, the caller runs those m rows on spec_state(s), the trunk
 * state they go to, with MODEL_VERIFY, taking each row's greedy pick and
 * its hidden row: model_forward_seqs(md, st, rows, n, tok, MODEL_VERIFY,
 * NULL, ids, hidden) with st[i] = spec_state(s) and rows[i] = m among the
 * other sequences (or model_forward_argmax(md, spec_state(s), rows, m,
 * MODEL_LOGITS_ALL | MODEL_VERIFY, ids, hidden) alone), and nothing else
 * on that state.  With a DFlash drafter the rows' drafter input is their
 * taps instead (model_forward_seqs_taps among others, or model_taps after
 * model_forward_argmax alone).
 * spec_accept then takes this sequence's ids[m] and hidden[m][n_embd]
 * (host; DFlash: the taps [m][n_tap * n_embd]): keeps the longest prefix of
 * drafts that equal the picks and the pick after it (the bonus; a caller that
 * picks on the host, from the rows' logits, passes its picks: ids past the
 * first that differs from its draft are not read), rolls the state back to
 * them, brings the MTP
 * cache and the stats up to them, writes the new tokens to out (room for
 * m) and returns how many (1..m), or -1 (no draft waiting, no finite
 * logit).  The tokens are spec_round's, which is spec_draft, the verify
 * alone, spec_accept.  After a -1 from either, or a failed verify, the
 * sequence must restart with spec_prefill.
 */
int	spec_draft(struct spec *, int limit, int32_t *rows);
struct state *spec_state(struct spec *);

/* The DFlash drafter's context cache (model_dflash_state: the positions
 * verified so far, a ring's last of them), or NULL without a DFlash
 * drafter: a scheduler stores and restores its rows beside the trunk's
 * (spec_resume then takes them). */
struct state *spec_drafter_state(struct spec *);
int	spec_accept(struct spec *, const int32_t *ids, const float *hidden, int32_t *out);

/* Counters since spec_new (or spec_stats_reset). */
const struct spec_stats *spec_stats(const struct spec *);
void	spec_stats_reset(struct spec *);

#endif
