/*
 * model_impl: the model's private layout, shared by model.c (loading and
 * weight binding) and model_fwd.c (the forward passes).
 */
#ifndef MEMRA_MODEL_IMPL_H
#define MEMRA_MODEL_IMPL_H

#include "model.h"
#include "pipeline.h"
#include "util.h"

struct model_layer {
	int	rec;		/* 1: Gated DeltaNet, 0: full attention */
	int	cache;		/* its KV cache or recurrent-state index in a state */
	float	*attn_norm, *post_norm;	/* [n_embd] */
	/* full attention */
	struct backend_weight q;	/* [n_head * head_dim * (gated ? 2 : 1)][n_embd] */
	struct backend_weight k, v;	/* [n_head_kv * head_dim][n_embd] */
	struct backend_weight o;	/* [n_embd][n_head * head_dim] */
	float	*q_norm, *k_norm;	/* [head_dim], NULL without qk_norm */
	/* Gated DeltaNet */
	struct backend_weight qkv;	/* [conv_dim][n_embd] */
	struct backend_weight gate;	/* [n_v * dv][n_embd] (z) */
	struct backend_weight beta, alpha;	/* [n_v][n_embd] */
	struct backend_weight out;	/* [n_embd][n_v * dv] */
	float	*conv;			/* [conv_dim][d_conv] */
	float	*ssm_a, *dt_bias;	/* [n_v] */
	float	*ssm_norm;		/* [dv] */
	/* FFN, dense */
	struct backend_weight ffn_gate, ffn_up;	/* [n_ff][n_embd] */
	struct backend_weight ffn_down;		/* [n_embd][n_ff] */
	/* FFN, a mixture of experts (hp.n_expert > 0; lib/model_moe.c) */
	struct backend_weight router;		/* [n_expert][n_embd] ffn_gate_inp */
	struct backend_weight exp_gate, exp_up;	/* [n_expert * n_ff_exp][n_embd] */
	struct backend_weight exp_down;		/* [n_expert * n_embd][n_ff_exp] */
	struct backend_weight sh_gate, sh_up;	/* [n_ff_shexp][n_embd]; data NULL: none */
	struct backend_weight sh_down;		/* [n_embd][n_ff_shexp] */
	struct backend_weight sh_inp;		/* [1][n_embd] ffn_gate_inp_shexp */
	/* gemma4 (lib/model_gemma4.c) */
	int	swa;		/* 1: a sliding-window layer (step35's too) */
	int	hd, nkv;	/* its head size and K/V heads */
	int	n_ff;		/* its MLP's width */
	int	kv_own;		/* 1: makes its K/V (into cache); 0: reads cache (shared) */
	float	*ffn_norm, *ffn_post_norm;	/* [n_embd] pre/post-feedforward norms */
	float	*ffn_post_norm_1, *ffn_pre_norm_2, *ffn_post_norm_2;	/* [n_embd] MoE */
	float	*router_scale;	/* [n_embd] ffn_gate_inp.scale */
	float	*exp_scale;	/* [n_expert] ffn_down_exps.scale (per_expert_scale) */
	struct backend_weight exp_gate_up;	/* [n_expert * 2 n_ff_exp][n_embd] */
	struct backend_weight pl_gate;	/* [n_pl][n_embd] inp_gate */
	struct backend_weight pl_proj;	/* [n_embd][n_pl] proj */
	float	*pl_norm;	/* [n_embd] post_norm */
	float	out_scale;	/* layer_output_scale (layer_scalar), 1 when absent */
	/* MTP block */
	struct backend_weight eh_proj;	/* [n_embd][2 n_embd] */
	float	*enorm, *hnorm, *head_norm;	/* [n_embd]; head_norm may be NULL */
	struct backend_weight head;	/* [n_vocab][n_embd] step35: the block's own; data NULL:
					 * the model's ([draft_ranks->n] rows: trimmed) */
	const void *head_host;		/* host bytes of head, at load (a self-trim's source) */
	int	head_type;		/* their type (a device's head may hold another) */
	void	*head_buf;		/* a self-trimmed head's gathered rows */
	/* step35 (lib/model_step35.c): this layer's attention and FFN */
	int	n_head, n_rot;		/* its query heads and rotated dims */
	float	theta;			/* RoPE base */
	int	sparse;			/* 1: the MoE FFN, 0: the dense one */
	float	lim_exp, lim_sh;	/* SwiGLU limits, routed and shared/dense (0: none) */
	struct backend_weight g;	/* [n_head][n_embd] attn_gate: the head-wise gate */
	float	*exp_bias;		/* [n_expert] exp_probs_b: the selection bias */
	/* dflash (lib/model_dflash.c): DFlash2's convolutions around attention (0) and FFN (1) */
	struct backend_weight conv_proj[2];	/* [2 conv_k (n_embd / conv_g)][n_embd] */
	float	*conv_base[2];		/* [2][conv_k][n_embd] */
};

/* Activations in backend memory for up to cap rows. */
struct model_act {
	int	cap;
	float	*x, *xn, *t;	/* [cap][n_embd] */
	float	*cat;		/* [cap][2 n_embd] */
	float	*q;		/* [cap][wide]: q rows, or the GDN mix */
	float	*y;		/* [cap][conv_dim] */
	float	*z, *o;		/* [cap][wide] */
	float	*a, *b;		/* [cap][n_v] */
	float	*f, *u;		/* [cap][n_ff]: the FFN's gate (then SwiGLU) and up */
	float	*logits;	/* [lcap][n_vocab]: a head's rows (a prompt's forward reads
				 * one; grown by a head of more, model_fwd.c) */
	int	lcap;
	/* the mixture of experts (n_expert > 0) */
	float	*rl;		/* [cap][n_expert] router logits */
	float	*rw;		/* [cap][n_expert_used] routing weights */
	int32_t	*rid;		/* [cap][n_expert_used] expert ids, backend memory */
	float	*ef;		/* [cap * n_expert_used][n_ff_exp] the experts' SwiGLU */
	float	*sh;		/* [cap][n_embd] the shared expert's output */
	float	*sg;		/* [cap] its gate's logit */
	float	*g1;		/* [cap][n_embd] gemma4: the MLP's output beside the experts */
	float	*ple, *plp;	/* [cap][n_layer * n_pl] gemma4's per-layer inputs */
	float	*pg;		/* [cap][n_pl] */
	int32_t	*pos;		/* host [cap] */
	/* a forward with embedding rows (model_inject) */
	const struct model_embd *inj;	/* NULL: none */
	int32_t	*hi;		/* host [cap]: each row's last key (backend_attn.hi);
				 * set only when inj has bidir blocks */
	int32_t	*tok;		/* host [cap]: the tokens with inj's rows as its pad */
	int32_t	*dpos;		/* [cap] the same in backend memory (a step's _dpos ops) */
	/* model_mtp_chain's, backend memory: [MODEL_CHAIN_MAX] positions (a chain of n
	 * steps: the last n), [n_embd] h, [1 + MODEL_CHAIN_MAX] tokens (the first, then
	 * each step's pick); chost: the same in host memory (backend_host_alloc);
	 * with a masked draft head cmap, its rank list's ids (backend memory), and
	 * clg, a logits row of the head (host, for the chain run step by step) */
	float	*chain, *chost, *clg;
	int32_t	*cmap;
};

/*
 * A group of model_forward_seqs: n sequences whose rows lie together
 * (sequence i's rows[i] rows after those of 0..i-1; rows NULL: one each),
 * m rows in all (<= model_step_rows), a->pos holding each row's
 * position.  verify: every push keeps snapshots (MODEL_VERIFY).
 */
struct model_seqs {
	struct state **st;
	const int *rows;
	int	n, m, verify;
};
/* Sequence i's rows in group g. */
int	model_seq_rows(const struct model_seqs *g, int i);

/*
 * An architecture's forward, behind one table: lib/model_fwd.c runs the
 * frame every architecture shares (positions and pushes, the token
 * lookup, the head, the picks, the packing of sequences into groups, the
 * recorded steps) and calls these for the rest.  Each hook returns 0, or
 * -1 with md->err set.
 */
struct model_arch_ops {
	/* Activations of the architecture's own for cap rows (NULL: none). */
	int	(*act)(struct model *, int cap);
	/* a->x = the embeddings of tok[m] (NULL: the rows of tok_embd). */
	int	(*embed)(struct model *, const int32_t *tok, int m);
	/* The trunk over m rows of one sequence at p0 (a->pos), x ending as its output (before
	 * output_norm); dpos: p0 in backend memory (a recorded step), else NULL. */
	int	(*layers)(struct model *, struct state *, int p0, int m, int flags,
		    const int32_t *dpos);
	/* The trunk over a group of sequences (model_forward_seqs), each row as layers runs it. */
	int	(*layers_seqs)(struct model *, const struct model_seqs *);
	/* The head's logits a->logits [rows][n_vocab] finished in place (NULL: as they are). */
	int	(*logits)(struct model *, int rows);
	/* MTP block L over m rows of st at p0 (a->pos), x its input, ending as its output
	 * before the head norm (NULL: qwen35's attention and FFN). */
	int	(*mtp_block)(struct model *, struct model_layer *L, struct state *, int p0, int m);
	/* 1: the hidden rows handed out (model_forward's, model_mtp's) are x before the head's
	 * norm (step35's NextN chain); 0: after it. */
	int	prenorm;
	/* 1: embed honours a->inj (model_inject) and the layers a->hi */
	int	inject;
	/* 1: layers queues ops at the host's positions (a->pos), not at dpos, so a step of
	 * it must not be recorded (a replay would run at the recorded positions): a step runs
	 * as a prompt does, unrecorded (the gemma4_assistant, whose layers refuse). */
	int	host_pos;
};
/* llama, qwen35, qwen35moe (lib/model_fwd.c), gemma4 (lib/model_gemma4.c) and step35
 * (lib/model_step35.c). */
extern const struct model_arch_ops model_arch_qwen35;
extern const struct model_arch_ops model_arch_gemma4;
extern const struct model_arch_ops model_arch_step35;
extern const struct model_arch_ops model_arch_gemma4a;

/*
 * The assistant A's head, trimmed to rank list ranks (a path), gets n
 * learned slots (lib/learned.h) after the list's rows, their tokens read
 * from <ranks>.learned when that file is there (model_gemma4.c).  0, or -1
 * with A->err.
 */
int	model_assist_adapt(struct model *A, const char *ranks, int n);

/* The activations for m rows, grown (never shrunk), or -1 with md->err. */
int	model_act_reserve(struct model *md, int m);

struct gguf;
struct learned;
struct ranks;

struct model {
	const struct model_arch_ops *ops;	/* the architecture's forward */
	const struct model_embd *inj;	/* model_inject's, for the next forward */
	struct model_hparams hp;
	char	*path;			/* the local source (a hub spec resolved) */
	char	*draft_path;		/* its MTP draft file's, resolved alike; NULL: none */
	struct gguf *gg;		/* a GGUF source stays open: weights are mapped */
	struct gguf **parts;		/* [n_parts] a split set, parts[0] == gg; else NULL */
	int	n_parts;
	struct backend *be;
	int	hf_l2;		/* GDN L2 norm as HF computes it */
	int	kv_f16;		/* K and V rounded to half when stored */
	int	plain_attn;	/* model_options.plain_attn */
	int	host_pos;	/* model_options.host_pos */
	struct backend_weight tok_embd;	/* [n_vocab][n_embd] */
	struct backend_weight output;	/* [n_vocab][n_embd]; a copy of tok_embd when tied */
	const void *head_host;		/* host bytes of output (tok_embd when tied), at load */
	int	head_type;		/* their type, so draft_buf's rows' (a device's output and
					 * draft_head may hold another: F32 where it has no product) */
	/* the masked draft head (MEMRA_FRSPEC_TRIM or an external draft) */
	struct backend_weight draft_head;	/* [draft_ranks->n][n_embd]; data NULL: none */
	void	*draft_buf;		/* the gathered rows of a self-trim */
	struct ranks *draft_ranks;	/* d2t: draft row -> target id */
	int	draft_ext;		/* 1: from an external draft GGUF */
	int	draft_type;		/* its output.weight's host type (draft_head may hold F32) */
	struct gguf *dg;		/* the external draft, mapped */
	int	draft_nx;		/* step35: NextN blocks of an attached draft GGUF (0: none) */
	int	draft_self;		/* 1: the ranks trimmed the heads at load (a self-trim) */
	float	*output_norm;		/* [n_embd] */
	/* gemma4's per-layer inputs (PLE; data NULL: none) */
	struct backend_weight pl_embd;	/* [n_vocab][n_layer * n_pl] per_layer_token_embd */
	struct backend_weight pl_model_proj;	/* [n_layer * n_pl][n_embd] */
	float	*pl_proj_norm;		/* [n_pl] */
	struct model_layer *layers;	/* [n_layer + n_mtp] */
	/* gemma4_assistant (arch MODEL_ARCH_GEMMA4A) */
	struct backend_weight pre_proj;		/* [n_embd][2 n_bb] nextn.pre_projection */
	struct backend_weight post_proj;	/* [n_bb][n_embd] nextn.post_projection */
	struct model *asst;		/* a trunk's attached assistant drafter, or NULL */
	int	ring_rows;		/* gemma4: model_ring_rows (0: no rings, no pieces) */
	int	states_made;		/* model_state_new has made one: R stays */
	/* an assistant's learned draft slots (MEMRA_GEMMA_TRIM_ADAPT): draft_head's and
	 * draft_ranks' rows n_fixed.. after the rank list's, published by model_assist_sync */
	struct learned *learned;	/* or NULL */
	char	*learned_path;		/* <rank list>.learned */
	int64_t	n_fixed;		/* the rank list's rows */
	uint64_t learned_ver;		/* the slots' version the rows hold */
	int	learned_stale;		/* the head's own copy lags draft_buf's rows */
	int32_t	*learned_ids;		/* [learned_slots] learned_copy's */
	int	learned_lines;		/* the file's lines at attach; -1: no file */
	int	learned_asked;		/* the slots asked for (more than the tokens outside
					 * the list: cut to them) */
	/* dflash (arch MODEL_ARCH_DFLASH; lib/model_dflash.c) */
	struct backend_weight fc;	/* [n_embd][n_tap n_embd] */
	float	*enc_norm;		/* [n_embd] the hidden norm after fc */
	struct backend_weight sel_hidden;	/* [sel_rank][n_embd] */
	struct backend_weight sel_prev, sel_next;	/* [n_vocab][sel_rank] the codebooks */
	int	dfl_type;		/* the products' type at load, -1 as stored */
	char	*dfl_path;		/* a trunk's drafter: where it came from */
	struct model *dfl;		/* a trunk's attached drafter, or NULL */
	struct model_dfl *dx;		/* a drafter's scratch (model_dflash.c) */
	float	*taps;			/* a trunk with a drafter: [n_tap][act cap][n_embd] */
	int	tap_rows;		/* rows of the last forward's taps */
	struct model_act act;
	float	*pick_val;		/* host [SAMPLE_TOPK_MAX]: model_forward_next's top k */
	int32_t	*pick_id;		/* host [SAMPLE_TOPK_MAX] */
	int32_t	*pen;			/* host [2][pen_cap]: sample_window's tokens, counts */
	int	pen_cap;
	/* a stage of a split model (lib/pipeline; part 1): the trunk layers
	 * [l0, l1), the embedding on the first stage, the head and the MTP
	 * layers on the last; a whole model is l0 0, l1 n_layer, both ends */
	int	part;
	int	l0, l1;
	int	first, last;
	int	n_kv_own, n_rec_own;	/* a stage's caches: its part of a state */
	int	*kv_w;		/* [n_kv_own] each cache's row width (gemma4's differ); NULL:
				 * every cache model_kv_dim wide */
	uint64_t wbytes;		/* bytes of the weights bound */
	int	dry_run;		/* 1: a dry bind counts bytes, loads nothing */
	uint64_t *dry;			/* [n_layer + n_mtp + 2]: each layer's bytes, the
					 * embedding's, the head's (output, output_norm) */
	uint64_t *meter;		/* where the dry bind counts now */
	/* a split model: its stages, each a model of its own on its device */
	struct model **stage;		/* [n_stage]; NULL: whole */
	int	n_stage;
	char	(*dev)[PIPELINE_DEVLEN];	/* [n_stage] */
	struct pipeline_link *link;	/* the hidden rows from stage to stage */
	struct model_pp_stats pps;	/* the micro-batches' pipeline (model_fwd.c) */
	struct model_seqs_stats sqs;	/* model_forward_seqs' groups (model_fwd.c) */
	long	steps_dpos;	/* model_steps_dpos: this stage's */
	void	**hbuf;			/* host buffers the weights live in */
	int	n_hbuf;
	float	**dbuf;			/* backend buffers of the vectors */
	int	n_dbuf;
	char	err[UTIL_ERRLEN];
};

/*
 * Open the GGUF at path into md->gg.  When it is one part of a split set
 * (split.count > 1, parts named PREFIX-%05d-of-%05d.gguf as llama.cpp's
 * gguf-split writes them), every part is opened into md->parts and md->gg
 * is the first, which carries the metadata.  -1 with "file: why" in err.
 */
int	model_gguf_open(struct model *md, const char *path, char *err);
/* Close md->gg and the parts (both NULL afterwards). */
void	model_gguf_close(struct model *md);

/* 2 n_k_heads dk + n_v_heads dv: the GDN mix width */
int	model_conv_dim(const struct model_hparams *);
/* Stage s of md (md itself when whole), and its last stage. */
struct model *model_stage(const struct model *md, int s);
struct model *model_last(const struct model *md);
/* 1 when md binds layer il: a trunk layer in [l0, l1), an MTP layer on the last stage. */
int	model_owns(const struct model *md, int il);

/*
 * dflash (lib/model_dflash.c): a trunk's taps after layer il of m rows
 * (x + t, as the next layer adds them) into md->taps when il is tapped;
 * free a drafter's scratch.
 */
int	model_dflash_tap(struct model *md, int il, int m);
void	model_dflash_free(struct model *md);

/* Free the activations (model_fwd.c grows them on demand). */
void	model_act_free(struct model *);

/*
 * The mixture-of-experts FFN of layer L over m rows (lib/model_moe.c):
 * x += a->t (the block before it), then xn = rmsnorm(x) * post_norm, the
 * router, the routed experts' SwiGLU summed with their weights and the
 * sigmoid-gated shared expert, into a->t.  0, or -1 with md->err set.
 */
int	model_moe_ffn(struct model *md, struct model_layer *L, int m);
/* The activations the MoE FFN needs for cap rows, or -1 (out of memory). */
int	model_moe_act(struct model *md, int cap);

#endif
