/*
 * model: an architecture's hyper-parameters, its weights bound to a
 * backend, and its forward pass written once against the backend op
 * table (lib/backend.h).  Architectures: llama, qwen35 (Gated DeltaNet
 * + gated full attention + the MTP block), qwen35moe (qwen35 with every
 * FFN, the MTP block's too, a mixture of experts: lib/model_moe.c),
 * gemma4 (sliding-window and global attention layers, per-layer inputs,
 * shared K/V, an MoE block beside the MLP: lib/model_gemma4.c) and step35
 * (Step-3.5/3.7 Flash: sliding and full attention with per-layer heads and
 * RoPE, head-wise gates, dense then sigmoid-routed MoE layers:
 * lib/model_step35.c, with its chained NextN blocks), and dflash (a
 * DFlash / DFlash2 block drafter attached to a trunk: lib/model_dflash.c).
 *
 * Weights are named and laid out as in GGUF (llama.cpp's converter
 * semantics: RMSNorm weights multiplicative with the HF "+1" folded in,
 * ssm_a = -exp(A_log), value heads in tiled order); an HF checkpoint is
 * read through lib/safetensors' conversion plan, so both sources feed
 * the same forward.
 */
#ifndef MEMRA_MODEL_H
#define MEMRA_MODEL_H

#include <stdint.h>

#include "backend.h"
#include "pipeline.h"
#include "state.h"

enum model_arch {
	MODEL_ARCH_LLAMA, MODEL_ARCH_QWEN35, MODEL_ARCH_QWEN35MOE, MODEL_ARCH_GEMMA4,
	MODEL_ARCH_STEP35,
	MODEL_ARCH_GEMMA4A,	/* gemma4_assistant: a gemma4 trunk's drafter, attached to it */
	MODEL_ARCH_DFLASH	/* a DFlash / DFlash2 block drafter, attached to a trunk */
};

#define MODEL_DFLASH_TAPS 16	/* the most trunk layers a DFlash drafter reads */

struct model_hparams {
	int	arch;		/* enum model_arch */
	int	n_vocab, n_embd, n_ff, n_ctx_train;
	int	n_layer;	/* trunk layers */
	int	n_mtp;		/* MTP (nextn) layers, after the trunk's */
	int	n_head, n_head_kv, head_dim;
	int	n_rot;		/* rotated dims of each head */
	int	rope_mode;	/* enum backend_rope_mode */
	float	rope_theta;
	float	eps;		/* every RMSNorm, and the GDN L2 norm */
	int	attn_gated;	/* q rows carry [query ; gate] per head (qwen35) */
	int	qk_norm;	/* per-head RMSNorm of q and k (qwen35) */
	int	full_interval;	/* qwen35: layer i is full attention iff (i+1) % it == 0 */
	int	d_conv, n_k_heads, n_v_heads, dk, dv;	/* qwen35 GDN */
	int	n_full;		/* full-attention trunk layers */
	int	n_rec;		/* recurrent (GDN) layers */
	int	tied;		/* no output.weight: the head is token_embd */
	/* qwen35moe: every layer's FFN a mixture of experts (n_expert 0: dense) */
	int	n_expert, n_expert_used;	/* experts, and those routed a row */
	int	n_ff_exp;	/* an expert's width */
	int	n_ff_shexp;	/* the shared expert's width (0: none) */
	/* gemma4 (lib/model_gemma4.c): head_dim, n_head_kv, n_rot and rope_theta
	 * are the global layers' (n_rot of BACKEND_ROPE_PROP), n_ff the widest
	 * MLP; each layer's own shape is in the model's layers */
	int	n_swa;		/* sliding window (gemma4, step35): the query at i
				 * sees keys i-n_swa < j <= i */
	int	head_dim_swa, n_head_kv_swa, n_rot_swa;	/* the sliding layers' */
	float	rope_theta_swa;
	int	n_kv_shared;	/* the last n_kv_shared layers read earlier layers' K/V */
	int	n_pl;		/* per-layer input (PLE) width, 0: none */
	float	softcap;	/* final logit soft-cap, 0: none */
	int	n_bb;		/* gemma4_assistant: its target's hidden size */
	/* step35: n_head is the most query heads of a layer (each layer's in
	 * struct model_layer); the router's */
	float	attn_scale;	/* the attention's scale (0: 1 / sqrt(head_dim)) */
	float	exp_scale;	/* the routed experts' scaling factor */
	int	exp_norm;	/* the chosen weights renormalised to sum to 1 */
	/* dflash: a block drafter (n_swa its sliding layers' window, 0: none) */
	int	block;		/* its trained block: the anchor and block - 1 masks */
	int	mask_id;	/* the mask token, whose trunk embedding the masks get */
	int	n_tap;		/* trunk layers it reads, their outputs (HF's ids: GGUF's
				 * dflash.target_layers less 1, llama.cpp tapping inputs) */
	int	taps[MODEL_DFLASH_TAPS];
	int	causal;		/* 1: block rows attend causally (the reference's rule
				 * for sliding layers without is_causal), 0: not */
	int	conv_k, conv_g;	/* DFlash2's grouped causal convolutions: kernel taps,
				 * channels a group (0: a DFlash drafter, no convs) */
	int	sel_rank, sel_topk;	/* DFlash2's candidate selector */
	float	logit_scale;	/* the draft logits' multiplier (1: none) */
	float	emb_scale;	/* the block embeddings' (1: none) */
};

struct model;

/*
 * Open a model for backend be: a GGUF file (weights mapped, read in place
 * by the CPU backend; any part of a split set PREFIX-%05d-of-%05d.gguf
 * loads every part), or an HF checkpoint directory or .safetensors file
 * (converted as lib/safetensors' plan says into host memory).  NULL with
 * the reason in err (UTIL_ERRLEN).  model_close frees (NULL is a no-op);
 * be must outlive the model.
 */
struct model *model_open(const char *path, struct backend *be, char *err);

/*
 * Load-time settings (bin/ fills them from its flags and environment;
 * the library reads no environment).  All fields may be zero.
 */
/*
 * A pipeline split (MEMRA_PP_STAGES): the trunk's layers in n contiguous
 * stages, stage s on backend be[s] (device dev[s]); stage 0 has the
 * embedding, stage n-1 the output head, the MTP layers and any draft
 * head.  first: the first layers of stages 1..n-1 (MEMRA_PP_SPLITS), or
 * NULL for the split whose largest stage has the fewest bytes of weights
 * (pipeline_split).
 */
struct model_split {
	int	n;				/* 2..PIPELINE_MAX_STAGES */
	struct backend **be;			/* [n]; be[0] is model_open_opts's */
	char	(*dev)[PIPELINE_DEVLEN];	/* [n] pipeline_devices */
	const int *first;			/* [n - 1], or NULL */
};

struct model_options {
	const char *ranks;	/* MEMRA_FRSPEC_TRIM: self-trim the draft head to these rows
				 * (step35: each NextN block's own head, the draft's too) */
	const char *draft;	/* MEMRA_MTP_DRAFT: an external masked draft GGUF (trim-head);
				 * a step35 trunk's NextN blocks (llama.cpp's --mtp GGUF,
				 * or trim-head's); on a gemma4 trunk (MEMRA_DRAFT) its
				 * gemma4_assistant */
	const char *asst_ranks;	/* MEMRA_GEMMA_DRAFT_RANKS: trim the assistant's head */
	int	asst_adapt;	/* MEMRA_GEMMA_TRIM_ADAPT: learned slots in that trimmed
				 * head (lib/learned.h), 0 none; needs asst_ranks */
	int	full_prec;	/* MEMRA_FULL_PREC: 1 ignores ranks (the full head drafts) */
	const char *dflash;	/* MEMRA_DSPARK_DRAFT (armed): a DFlash / DFlash2 drafter to
				 * attach (path, HF directory or hf: spec); with ranks its
				 * head is trimmed, and no MTP draft may come with it */
	const char *dflash_prec;	/* MEMRA_DFLASH_PREC: the drafter's products at load:
				 * "q4" (Q4_0, the default), "q8" (Q8_0), "bf16", "f32",
				 * or "keep" (as stored); quantized sources stay as they are */
	int	kv_f16;		/* --kv-type f16: K and V kept in half precision */
	int	plain_attn;	/* 1: a llama model's attention summed in the plain
				 * order (backend_attn.ggml off), not llama.cpp's:
				 * another float order, as right (kernel-check's
				 * noise).  No effect on qwen35 (always plain) nor
				 * with kv_f16 (llama.cpp's F16 order always) */
	int	host_pos;	/* MEMRA_HOST_POS=1 (test tools): a step (decode,
				 * verify) queued at the host's positions and never
				 * recorded, as a prompt runs: the same bits as the
				 * recorded step, the seam to A/B them */
	const struct model_split *split;	/* NULL: one backend, the whole model */
};

/*
 * model_open with options o (NULL: none).  A draft or rank file that is
 * missing or does not fit the trunk (vocabulary, hidden size, MTP block
 * index, architecture) is an error, never a fallback: NULL with err.
 * With a draft, blk.<n_layer>.* and the draft head come from the draft
 * GGUF (a trunk without an MTP block then gets one).
 */
struct model *model_open_opts(const char *path, struct backend *be,
	    const struct model_options *o, char *err);
void	model_close(struct model *);

/*
 * A split model (model_options.split) runs each forward stage after stage
 * on the caller's thread: the embedding and stage 0's layers, the hidden
 * rows [rows][n_embd] through the link (pipeline_pass) to stage 1, ...,
 * the last stage's layers and the head; a state (model_state_new) keeps
 * each stage's caches on its device (state_part).  Every float is the
 * whole model's: the split changes no bit of logits, picks or hidden
 * rows.  Architectures: llama, qwen35, qwen35moe, step35 (gemma4's
 * per-layer inputs do not split yet: an error).
 */

/* Stages: 1 for a whole model. */
int	model_stages(const struct model *);

/*
 * Stage s's backend and device (pipeline_devices's name, "cuda:1", "cpu"):
 * a whole model's stage 0 is its backend and device NULL.  NULL for an s
 * out of range.
 */
struct backend *model_stage_backend(const struct model *, int s);
const char *model_stage_device(const struct model *, int s);

/* The bytes stage s's part of model_state_new(n_ctx, n_snap) takes on its
 * device (a whole model's stage 0: model_state_bytes). */
size_t	model_stage_state_bytes(const struct model *, int s, int n_ctx, int n_snap);

/*
 * The most rows a step of this model holds: the least backend_step_rows
 * of its stages' backends (1..BACKEND_ROWS_MAX).  model_forward_seqs packs
 * its sequences into groups of at most this many rows, and a forward of at
 * most this many rows without MODEL_PREFILL is a step.
 */
int	model_step_rows(const struct model *);

/*
 * Activations for forwards of up to m rows on every stage, allocated now:
 * a forward grows them to its rows when they hold fewer, so a scheduler
 * reserves its largest forward (a prompt chunk) before it counts the
 * memory left for sessions.  0, or -1 with model_errmsg ("activations for
 * m rows: out of memory").  model_reserved: the rows every stage holds.
 */
int	model_reserve(struct model *, int m);
int	model_reserved(const struct model *);

/*
 * model_forward_seqs' groups of rows (since the model opened): its
 * forwards that ran, the groups of rows they ran (one sequence: one
 * group), the most rows one group held, and the most rows a group of the
 * last forward held.
 */
struct model_seqs_stats {
	long	forwards, groups;
	int	most, last;
};
void	model_seqs_stats(const struct model *, struct model_seqs_stats *);

/*
 * The steps (decode and verify forwards of one sequence) whose layers read
 * their positions from backend memory, so that the backend may record and
 * replay them (CUDA graphs), since the model opened; a split model's
 * stages' together.  The others ran at the host's positions (an
 * architecture that needs them, or model_options.host_pos).
 */
long	model_steps_dpos(const struct model *);

/*
 * model_forward_seqs on a split model runs its groups of rows (each at
 * most model_step_rows rows: the micro-batches) through the stages
 * as a pipeline: in wave t stage s works on micro-batch t - s, stage 0's
 * work queued first, so that on devices whose work is queued (CUDA
 * streams, the NCCL link) stage 0 runs micro-batch t while stage 1 runs
 * t - 1.  Each micro-batch meets the same ops in the same order as when
 * it runs alone: the order of micro-batches changes no bit.  The counts
 * (since the model opened): forwards of two or more micro-batches, their
 * micro-batches, waves, and waves in which two or more stages had work.
 */
struct model_pp_stats {
	long	forwards, microbatches, waves, busy_waves;
};
void	model_pp_stats(const struct model *, struct model_pp_stats *);

/*
 * Line i of the split's boot proof (no newline) into buf[n]: line 0
 * "[pp] cross-device transport: stage0=dev0 stage1=dev1" (devN for
 * cuda:N, else the device), line 1 "[pp] link: nccl" or "[pp] link: pipe
 * (stand-in: through the host)", then a line a stage: "[pp] stage0: dev0
 * (NAME) layers 0-15 + embedding, weights N.N MiB, free N.N MiB".  0, or
 * -1 past the last line or for a whole model (buf then "").
 */
int	model_pp_line(const struct model *, int i, char *buf, size_t n);
const char *model_errmsg(const struct model *);
const struct model_hparams *model_hparams(const struct model *);
/*
 * How many of md's product weights (its layers', MTP blocks' and output's)
 * take int8 activations (quant_vec_dot_type other than F32: every
 * quantized type): where a float-order difference upstream may flip an
 * activation's rounding and move the logits by far more than float noise.
 */
int	model_int8_weights(const struct model *);

/*
 * n floats of host memory the model's backend fills fastest
 * (backend_host_alloc: page-locked on a GPU) for model_forward's and
 * model_mtp's logits and hidden rows, or NULL with model_errmsg set.
 * Freed by model_host_free (NULL is a no-op) before model_close.
 */
float	*model_host_alloc(struct model *, size_t n);
void	model_host_free(struct model *, float *);

/* The shape of model_state_new(n_ctx, n_snap) into *c (a split model's: the whole
 * model's, its stages' parts each their own). */
void	model_state_shape(const struct model *, int n_ctx, int n_snap, struct state_config *c);

/* The bytes of backend memory model_state_new(n_ctx, n_snap) takes. */
size_t	model_state_bytes(const struct model *, int n_ctx, int n_snap);

/*
 * A sequence state shaped for this model: n_ctx positions, rollback over
 * up to n_snap rows of a verify batch.  Free with state_free.
 */
struct state *model_state_new(struct model *, int n_ctx, int n_snap, char *err);

/*
 * The row width of KV cache i of the model's states (0 <= i < their
 * state_config's n_kv): a gemma4 state's caches differ (each is [n_ctx]
 * [its layer's K/V heads x head size], state_config's kv_w; a stage of a
 * split model's at the start of a buffer kv_dim wide); any other model's
 * are kv_dim.  -1 for an i out of range.
 */
int	model_kv_width(const struct model *, int i);

/*
 * gemma4's sliding-window caches as rings: a state of n_ctx positions
 * keeps each sliding layer's last n_swa + R - 1 positions (state_config's
 * rings, window n_swa) instead of n_ctx when that is fewer, R the rows a
 * sliding layer's attention takes at once.  A forward's sliding attention
 * runs in pieces of at most R rows, ring or not, so that a state's bits
 * do not depend on its n_ctx; a piece never ends inside an image (a
 * model_inject bidir block), which must then be at most R rows.  A
 * rings' state goes back (the reuse pool, state_truncate) at most R
 * positions (state_back).
 * model_ring_rows: R, or 0: no rings and no pieces (any other
 * architecture, a gemma4 whose layers share K/V (their source's rows
 * are read after every piece wrote), a split model, or a backend without
 * backend_window and backend_attn_hi).
 * model_set_ring_rows: R (BACKEND_ROWS_MAX or more, so that a step is one
 * piece; the default MODEL_RING_ROWS); a caller whose images run longer
 * (an image budget over 512 soft tokens) sets it to the largest before
 * the model's first state is made.  0, or -1 with model_errmsg set (no
 * rings here, r too small, or a state made already).
 * model_ring_hold: R raised to n where a forward of n rows (a prompt
 * chunk, an image) must be one piece; 0 (nothing to do: no rings, or R
 * holds it already), or model_set_ring_rows's -1.
 */
#define MODEL_RING_ROWS 512
int	model_ring_rows(const struct model *);
int	model_set_ring_rows(struct model *, int r);
int	model_ring_hold(struct model *, int n);

enum {
	MODEL_LOGITS_ALL = 1,	/* logits of every row, not only the last */
	MODEL_VERIFY = 2,	/* keep per-row snapshots: state_rollback may follow */
	MODEL_PREFILL = 4,	/* a fresh prompt: the chunked delta rule may run */
};

/*
 * Run m tokens of one sequence at the state's next positions
 * (state_push(m) inside; on failure the sequence must be reset).
 * logits: NULL, or host [rows][n_vocab], rows = m with MODEL_LOGITS_ALL
 * else 1 (the last row).  hidden: NULL, or host [m][n_embd], the final
 * hidden state after output_norm (the MTP head's input; step35's before
 * it, as its NextN blocks take it).  0, or -1 with
 * model_errmsg set.
 */
int	model_forward(struct model *, struct state *, const int32_t *tok, int m,
	    int flags, float *logits, float *hidden);

/*
 * Rows of the next forward given as embeddings instead of their tokens'
 * (an image's soft tokens, lib/vision): the model_forward,
 * model_forward_argmax or model_forward_next call that follows runs row
 * row[i] - base (0 <= that < its m, ascending) from x[i], the input its first
 * layer takes (no embedding scale), and takes the struct off (it must
 * stay valid until then).  With bidir, each run of consecutive rows is
 * one block (an image) whose rows see each other both ways in the
 * sliding-window layers (transformers' Gemma-4 rule for
 * use_bidirectional_attention "vision": the full-attention layers stay
 * causal); a block must lie whole in that one call.  The rows' per-layer
 * inputs (PLE) take the token pad, as transformers' do.  Only gemma4 on
 * one stage, and a backend with backend_attn_hi for bidir blocks; any
 * other forward (model_forward_seqs, model_mtp) with one pending is an
 * error.  e NULL drops rows given and not yet taken (a caller whose
 * forward did not run).  0, or -1 with model_errmsg set (the struct is not
 * kept then).
 */
struct model_embd {
	int	n;		/* rows given */
	const int32_t *row;	/* [n]: row[i] - base is the index among the forward's rows */
	int	base;
	const float *x;		/* host [n][n_embd] */
	int32_t	pad;		/* the token their per-layer inputs take */
	int	bidir;		/* runs of rows see each other in sliding layers */
};
int	model_inject(struct model *, const struct model_embd *);

/*
 * model_forward with each logits row's greedy pick taken where the logits
 * are (backend_argmax) instead of the row itself: ids[rows] (host) get
 * the id of the largest finite logit, the lowest id on ties, -1 when none
 * is finite, as sample_next picks under sample_plain_greedy.  No logit
 * crosses to the host (on a GPU, 4 bytes a row instead of 4 * n_vocab).
 */
int	model_forward_argmax(struct model *, struct state *, const int32_t *tok, int m,
	    int flags, int32_t *ids, float *hidden);

struct sampler;

/*
 * model_forward, then the next token as sampler s picks it from the last
 * row (sample_next with hist[n_hist], sequence seq, position pos; the
 * logits of every other row are not made): a greedy pick is taken on the
 * backend (model_forward_argmax), a top-k draw from the row's top k the
 * backend selects (backend_topk, sample_next_top: the same draw), a draw
 * from the whole row on the backend (backend_draw), each after the
 * sampler's penalties are put on the row there (backend_penalize); only a
 * top-k past SAMPLE_TOPK_MAX reads the row back into lg (host [n_vocab],
 * as model_host_alloc gives; only then used, so NULL will do below it).
 * *next gets the token;
 * 0, or -1 with model_errmsg set (a row without a finite logit too).
 */
int	model_forward_next(struct model *, struct state *, const int32_t *tok, int m,
	    int flags, struct sampler *s, const int32_t *hist, int n_hist, uint64_t seq,
	    int64_t pos, float *lg, int32_t *next);

/*
 * model_forward_next with a token mask put on the row first, where the
 * logits are (backend_mask): mask NULL (none), or host bits over the
 * row's n_vocab tokens as grammar_mask gives them (bit t % 32 of word
 * t / 32: 0 sets logit t to -inf).  The pick is then sample_next's from
 * the row grammar_mask_logits masks on the host, bit for bit (the mask
 * before the sampler's penalties, as sample_next takes such a row).  -1
 * with model_errmsg also for a mask on a backend without backend_mask.
 */
int	model_forward_next_mask(struct model *, struct state *, const int32_t *tok, int m,
	    int flags, struct sampler *s, const int32_t *hist, int n_hist, uint64_t seq,
	    int64_t pos, const uint32_t *mask, float *lg, int32_t *next);
/* 1 when the model's logits can be masked where they are (its last
 * stage's backend_has_mask), else 0. */
int	model_can_mask(const struct model *);

/*
 * One step over n sequences at once: sequence i runs rows[i] (1 ..
 * model_step_rows) consecutive tokens at its own state st[i]'s
 * next positions (state_push(rows[i]) inside), as model_forward(st[i],
 * its tokens, rows[i], flags | MODEL_LOGITS_ALL) runs them: a scheduler's
 * decode rows (one a sequence) and speculative verify rows (the last
 * token and the drafts) together.  tok: the sum of rows[] tokens,
 * sequence after sequence.  flags: 0 or MODEL_VERIFY (every push keeps
 * its snapshots, so that state_rollback may follow for each sequence;
 * then rows[i] <= st[i]'s n_snap); MODEL_LOGITS_ALL is implied, and
 * MODEL_PREFILL is an error (a prompt runs alone, through model_forward).
 * The weight products run on whole sequences packed in order into groups
 * of up to model_step_rows rows (a longer product may take a
 * prompt's kernel, other bits), attention and the recurrent ops per
 * sequence, so each of sequence i's rows is bit-identical to the same row
 * of model_forward(st[i], ...) alone, and its pick to model_forward_argmax's.
 * One sequence (n = 1) runs as that model_forward itself: a step the
 * backend may replay from a recording (CUDA graphs).
 * Outputs, each NULL or host memory with a row per token, in tok's order:
 * logits [rows][n_vocab], or (not both) ids [rows], each row's greedy pick
 * as model_forward_argmax picks it; hidden [rows][n_embd], after
 * output_norm (the MTP head's input).  0, or -1 with model_errmsg set:
 * states shared, of another model, a sequence of more rows than a step,
 * without room for its rows in the context (or the snapshots) are found
 * before any state moves; a later failure leaves every sequence to be
 * reset.
 */
int	model_forward_seqs(struct model *, struct state **st, const int *rows, int n,
	    const int32_t *tok, int flags, float *logits, int32_t *ids, float *hidden);

/*
 * model_forward_seqs on a trunk with a DFlash drafter attached, with
 * each row's taps into taps (NULL, or host [rows][n_tap * n_embd], in
 * tok's order) too: what model_taps gives after the same rows' forward
 * alone (the rows' bits are the same).  A scheduler's verify rows, the
 * drafter's context to be.  mask: NULL, or with ids, host [rows] each
 * row's token mask (NULL: none; as model_forward_next_mask's) put on it
 * before its pick.  -1 with model_errmsg set also for taps without a
 * drafter, a mask without ids or on a backend without backend_mask.
 */
int	model_forward_seqs_taps(struct model *, struct state **st, const int *rows, int n,
	    const int32_t *tok, int flags, float *logits, int32_t *ids,
	    const uint32_t *const *mask, float *hidden, float *taps);

/*
 * model_forward_seqs with one row a sequence and no flags: decode n
 * sequences, one new token tok[i] each; row i is bit-identical to
 * model_forward(st[i], &tok[i], 1, 0) alone.  logits: NULL, or host
 * [n][n_vocab]; hidden: NULL, or host [n][n_embd].
 */
int	model_forward_batch(struct model *, struct state **st, const int32_t *tok, int n,
	    float *logits, float *hidden);

/* model_forward_batch with each sequence's greedy pick in ids[n] (host),
 * as model_forward_argmax picks, instead of its logits. */
int	model_forward_batch_argmax(struct model *, struct state **st, const int32_t *tok, int n,
	    int32_t *ids, float *hidden);

/*
 * MTP layer k (< n_mtp) over m slots at positions p0..p0+m-1 of its own
 * KV cache (the caller keeps that cache's length): slot i combines the
 * hidden h[i] (host [m][n_embd], after output_norm or the previous MTP
 * output) with the embedding of tok[i].  logits: host
 * [m][model_draft_vocab] (a masked head's rows are in rank order:
 * ranks_target maps them back);
 * hout: NULL or host [m][n_embd], the output after the head norm (the
 * next chained step's h; step35's before it).  A step35 NextN block
 * scores with its own head (shared_head_head) when it has one.  0, or -1.
 */
int	model_mtp(struct model *, struct state *, int k, int p0, const float *h,
	    const int32_t *tok, int m, float *logits, float *hout);

/*
 * The attached gemma4_assistant (model_options.draft on a gemma4 trunk)
 * drafting one token at position pos of state st (a sequence of this
 * trunk holding K/V for positions 0..pos-1, pos >= 1; nothing is
 * written to it): tok is the token at pos, h (host [n_embd]) the trunk's
 * hidden state after output_norm at the position that predicted it, or
 * the previous draft's hout.  Its layers attend with their queries only
 * over the trunk's K/V (a sliding layer over the last n_swa + 1).
 * logits: NULL or host [model_draft_vocab]; id: NULL or its greedy pick
 * (as model_mtp_argmax); hout: host [n_embd], the next step's h.  0, or
 * -1 (no assistant attached too).
 */
int	model_assist(struct model *, struct state *st, int pos, const float *h, int32_t tok,
	    float *logits, int32_t *id, float *hout);
/* 1 when a gemma4_assistant is attached, else 0. */
int	model_has_assist(const struct model *);

/*
 * The assistant's learned draft slots (model_options.asst_adapt, see
 * lib/learned.h): its trimmed head drafts over the rank list's rows and
 * the filled slots' rows after them, each gathered byte for byte from the
 * full head (kept in memory for them).  Without slots each of these does
 * nothing (model_assist_save returns 0, model_assist_adapt_line -1).
 *
 * model_assist_learn takes the committed tokens tok[n] of a sequence (the
 * slots' rule runs at once); model_assist_sync publishes the slots to the
 * head (its rows and model_draft_ranks' list), between steps only: the
 * drafts of a step all read one set.  It does not fail: on a device, whose
 * head is uploaded again when the slots change, a failed upload leaves the
 * head as it was (drafts, never the output, see that) and the next sync
 * tries again.  Both on the thread that drafts.
 *
 * model_assist_save writes <rank list>.learned (lib/learned.h's
 * learned_save) when it changed: at_exit 1 now, at_exit 0 when a periodic
 * save is due (learned_due at util_now()).  Any thread.  1 written
 * (*n_written slots), 0 not, or -1 with "path: why" in err.
 *
 * model_assist_adapt_line: the boot line (no newline) into buf[n]:
 * "[gemma-draft] trim adapt: N learned slots after the R ranks, ..."; 0,
 * or -1 without slots (buf then "").
 */
void	model_assist_learn(struct model *, const int32_t *tok, int n);
void	model_assist_sync(struct model *);
int	model_assist_save(struct model *, int at_exit, int *n_written, char *err);
int	model_assist_adapt_line(const struct model *, char *buf, size_t n);
/* The file of the learned slots, or NULL without them. */
const char *model_assist_learned_path(const struct model *);

/*
 * A DFlash / DFlash2 block drafter (model_options.dflash), lib/model_dflash.c.
 * The trunk's forwards (model_forward, _argmax, _next) keep the outputs of
 * the layers the drafter reads for every row they run; the drafter keeps
 * its context K/V a position in a state of its own.
 *
 * model_dflash: the attached drafter's hyper-parameters, or NULL when none.
 */
const struct model_hparams *model_dflash(const struct model *);

/*
 * The tapped rows of the last model_forward (_argmax, _next) of this
 * trunk (of model_forward_seqs: its last group's; model_forward_seqs_taps
 * hands back every row's): taps [m][n_tap * n_embd] (host), row r the outputs of the
 * drafter's layers (in its order) for row r of that forward (m <= its
 * rows).  0, or -1 with model_errmsg set (no drafter; m out of range).
 */
int	model_taps(struct model *, float *taps, int m);

/*
 * The quant type MEMRA_DFLASH_PREC's name gives a drafter's products:
 * NULL or "q4" Q4_0, "q8" Q8_0, "bf16", "f32"; "keep" -1 (as stored);
 * anything else -2.
 */
int	model_dflash_prec(const char *name);

/*
 * The drafter's context cache for a sequence of n_ctx positions (and a
 * block past them), NULL with err: each sliding layer's K/V a ring of
 * window - 1 + block rows (what its block rows see: lib/model_dflash.c;
 * the state's last n_ring caches), each full-attention layer's every
 * position; whole 1 (or a ring not shorter than n_ctx + block): every
 * layer's every position, the same drafts bit for bit.
 */
struct state *model_dflash_state(struct model *, int n_ctx, int whole, char *err);

/*
 * The shape of model_dflash_state(n_ctx, 0) into *c: its caches, c->n_ring
 * of them rings of c->ring rows (0: none).  0, or -1 (no drafter).
 */
int	model_dflash_state_shape(const struct model *, int n_ctx, struct state_config *c);

/* The bytes of backend memory model_dflash_state(n_ctx, 0) takes (0: no drafter). */
size_t	model_dflash_state_bytes(const struct model *, int n_ctx);

/*
 * Context rows p0..p0+m-1 of ds from their taps [m][n_tap * n_embd]
 * (host): fc, the hidden norm, each layer's K (normed, roped at its
 * position) and V into ds (a ring: the rows of its last ring positions
 * alone).  0, or -1.
 */
int	model_dflash_context(struct model *, struct state *ds, int p0, const float *taps, int m);

/*
 * What one drafter forward hands back (each NULL or host memory):
 * hidden [block][n_embd] the block's rows after the final norm; logits
 * [block - 1][nl] rows 1.. through the trunk's head (nl = model_draft_vocab:
 * a trimmed head's rows in rank order), scaled and soft-capped as the
 * reference; and for DFlash2 the selector's lattice: cand [block - 1][k]
 * each row's top k (target ids; the largest logit first, ties to the
 * lower row) and lat [block - 1][k][k], lat[t][a][b] the edge score of
 * cand[t][b] after cand[t-1][a] (row 0: after the anchor, every a alike).
 */
struct model_dflash_out {
	float	*hidden, *logits, *lat;
	int32_t	*cand;
};

/*
 * One drafter forward over the block [anchor, mask x (block - 1)] at
 * positions p0..p0+block-1 of ds, whose context rows 0..p0-1 are in
 * (model_dflash_context); the block's own K/V are written past them
 * (scratch, overwritten by later context; in a ring, over positions no
 * later block sees).  0, or -1 with model_errmsg.
 */
int	model_dflash_draft(struct model *, struct state *ds, int p0, int32_t anchor,
	    const struct model_dflash_out *o);

/*
 * Line i of the drafter's boot proof into buf[n] (no newline), name the
 * trunk's name in the lines: 0 "[dspark] NAME: DFlash2 drafter PATH: L
 * layers, block B, taps [..], window W, weights TYPE", 1 (a trimmed head)
 * "[dspark] NAME: DFlash2 draft head TRIMMED to N rows".  0, or -1 past
 * the last line (buf then "").
 */
int	model_dflash_line(const struct model *, const char *name, int i, char *buf, size_t n);

/*
 * model_mtp with each slot's greedy pick over its logits row (as
 * model_forward_argmax) in ids[m]: a column of model_mtp's logits (a
 * masked head's rank-order row, the lowest row on ties; ranks_target maps
 * it back).
 */
int	model_mtp_argmax(struct model *, struct state *, int k, int p0, const float *h,
	    const int32_t *tok, int m, int32_t *ids, float *hout);

/*
 * The MTP head's draft chain: n (1..MODEL_CHAIN_MAX) steps of MTP layer 0,
 * step j one slot at position p0 + j of its cache, its token tok (j 0) or
 * step j-1's pick, its hidden h (j 0; host [n_embd]) or step j-1's hout;
 * each step's greedy pick into ids[n] (host) and, hout not NULL, the last
 * step's output (host [n_embd]; may be h).  The picks and the cache it
 * leaves are those of n model_mtp_argmax(md, st, 0, p0 + j, h_j, &tok_j,
 * 1, &ids[j], h_j+1) calls, bit for bit.  Where it can (an architecture
 * whose MTP layer reads positions from backend memory, a backend with
 * backend_dev_ids, backend_chain on) each pick
 * stays in backend memory as the next step's token, the positions are
 * read there, and the n steps are recorded once per (model, state, n) and
 * replayed (backend_graph_*): one write, one read of the n ids.  Else it
 * runs those calls.  A pick of -1 (no finite logit) makes every id after
 * it -1 (the cache past it holds what the chain ran on).  With a masked
 * draft head the picks are ranks_argmax's (lib/ranks.h: target ids, ties
 * to the lowest id; backend_argmax_map where it is chained) from
 * model_mtp's logits rows instead.  0, or -1.
 */
#define MODEL_CHAIN_MAX 32
int	model_mtp_chain(struct model *, struct state *, int p0, const float *h, int32_t tok,
	    int n, int32_t *ids, float *hout);

struct tokenizer;

struct ranks;

/*
 * The masked draft head, or NULL when the MTP head drafts over the full
 * vocabulary.  *type (may be NULL) gets its rows' ggml type, *external
 * (may be NULL) 1 when it came from a draft GGUF, 0 for a self-trim.
 * The list belongs to the model.
 */
const struct ranks *model_draft_ranks(const struct model *, int *type, int *external);

/* Columns of model_mtp's logits: the draft head's rows, else n_vocab (with
 * learned slots, the rows they may come to: the buffers' size). */
int	model_draft_vocab(const struct model *);

/*
 * The rows of the masked draft head that its rank list fixes: the first
 * ones of model_draft_ranks' list; with learned slots the filled slots'
 * follow them (the list's n counts both).  0 without a masked head.
 */
int64_t	model_draft_fixed(const struct model *);

/*
 * The proof line of an attached draft head (no newline) into buf[n]:
 * "[mtp-draft] external draft head: blk.N, head_vocab=N (trimmed, d2t map)"
 * or "[frspec-trim] self-trimmed head: N rows of main output.weight (TYPE)";
 * for step35, "[mtp-draft] external NextN draft: blk.A-B (N blocks), ..."
 * (its heads whole, trimmed or self-trimmed) or "[frspec-trim]
 * self-trimmed heads: N rows of the NextN blocks' own heads, blk.A-B
 * (TYPE)".  Returns 0, or -1 when no draft head is attached (buf then "").
 */
int	model_attach_line(const struct model *, char *buf, size_t n);

/*
 * Split "MODEL+DRAFT" in place when spec as a whole names no file: the
 * '+' becomes a NUL and the draft part is returned.  NULL when there is
 * no suffix (spec untouched).
 */
char	*model_spec_draft(char *spec);

/*
 * Fill mo from the settings bin/ gathered: the model spec (a "+DRAFT"
 * suffix is split off in place and wins), then flag_draft (--draft), then
 * env_draft (MEMRA_MTP_DRAFT); ranks (MEMRA_FRSPEC_TRIM); full_prec is on
 * when its text is "1" (MEMRA_FULL_PREC).  An empty draft or ranks name
 * means none (an empty --draft also hides MEMRA_MTP_DRAFT).
 */
void	model_options_set(struct model_options *mo, char *spec, const char *flag_draft,
	    const char *env_draft, const char *ranks, const char *full_prec);

/*
 * Open only the text side of a model source (a GGUF's metadata mapped, or
 * an HF checkpoint directory or a file in it; an hf: spec resolved), for
 * model_tokenizer, model_chat_template and model_path: no weights are read,
 * no backend is needed, and nothing else may be called on it.  NULL with
 * the reason in err.  Close with model_close_text (NULL is a no-op).
 */
struct model *model_open_text(const char *path, char *err);
void	model_close_text(struct model *);

/*
 * The KV cache type named name ("f32" or "f16", as --kv-type and
 * MEMRA_KV_TYPE give it): 1 for f16, 0 for f32, -1 for anything else.
 * NULL names the default, f32.
 */
int	model_kv_type(const char *name);

/* The local path the model was read from (an hf: spec resolved). */
const char *model_path(const struct model *);

/* The local path of its external MTP draft file (an hf: spec resolved), or NULL. */
const char *model_draft_path(const struct model *);

/*
 * The model's tokenizer: a GGUF's tokenizer.ggml.* metadata, or the
 * tokenizer.json beside an HF checkpoint.  NULL with the reason in err,
 * or NULL with err empty when the source has none at all (a GGUF without
 * tokenizer.ggml.model and tokenizer.ggml.tokens, such as a random-weight
 * benchmark file; an HF checkpoint without tokenizer.json and
 * tokenizer.model): the model then takes prompts as token ids only.
 * Free with tokenizer_free.
 */
struct tokenizer *model_tokenizer(struct model *, char *err);

/*
 * The model's chat template text (a GGUF's tokenizer.chat_template, or
 * an HF checkpoint's chat_template.jinja or tokenizer_config.json
 * "chat_template"), malloc'd and NUL-terminated; caller frees.  NULL
 * with err empty when the model has none, or with the reason in err.
 */
char	*model_chat_template(struct model *, char *err);

/*
 * The ids that end generation by the model's own word: a GGUF's
 * tokenizer.ggml.eos_token_id, eot_token_id and eom_token_id, or an HF
 * checkpoint's generation_config.json eos_token_id (a number or a list).
 * Stores at most max ids, no duplicates; returns how many (0 when the
 * source names none or its generation_config.json is unreadable).
 */
int	model_stop_ids(struct model *, int32_t *ids, int max);

#endif
