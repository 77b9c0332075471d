/*
 * model_impl: the model's private layout, shared by model.c (loading and
 * weight binding) and model_fwd.c (the forward passes).
 */
#ifndef MEMRA_MODEL_IMPL_H
#define MEMRA_MODEL_IMPL_H

#include "model.h"
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
	/* MTP block */
	struct backend_weight eh_proj;	/* [n_embd][2 n_embd] */
	float	*enorm, *hnorm, *head_norm;	/* [n_embd]; head_norm may be NULL */
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
	float	*logits;	/* [cap][n_vocab] */
	/* the mixture of experts (n_expert > 0) */
	float	*rl;		/* [cap][n_expert] router logits */
	float	*rw;		/* [cap][n_expert_used] routing weights */
	int32_t	*rid;		/* [cap][n_expert_used] expert ids, backend memory */
	float	*ef;		/* [cap * n_expert_used][n_ff_exp] the experts' SwiGLU */
	float	*sh;		/* [cap][n_embd] the shared expert's output */
	float	*sg;		/* [cap] its gate's logit */
	int32_t	*pos;		/* host [cap] */
	int32_t	*dpos;		/* [cap] the same in backend memory (a step's _dpos ops) */
};

struct gguf;
struct ranks;

struct model {
	struct model_hparams hp;
	char	*path;			/* the local source (a hub spec resolved) */
	struct gguf *gg;		/* a GGUF source stays open: weights are mapped */
	struct gguf **parts;		/* [n_parts] a split set, parts[0] == gg; else NULL */
	int	n_parts;
	struct backend *be;
	int	hf_l2;		/* GDN L2 norm as HF computes it */
	int	kv_f16;		/* K and V rounded to half when stored */
	int	plain_attn;	/* model_options.plain_attn */
	struct backend_weight tok_embd;	/* [n_vocab][n_embd] */
	struct backend_weight output;	/* [n_vocab][n_embd]; a copy of tok_embd when tied */
	const void *head_host;		/* host bytes of output (tok_embd when tied), at load */
	/* the masked draft head (MEMRA_FRSPEC_TRIM or an external draft) */
	struct backend_weight draft_head;	/* [draft_ranks->n][n_embd]; data NULL: none */
	void	*draft_buf;		/* the gathered rows of a self-trim */
	struct ranks *draft_ranks;	/* d2t: draft row -> target id */
	int	draft_ext;		/* 1: from an external draft GGUF */
	struct gguf *dg;		/* the external draft, mapped */
	float	*output_norm;		/* [n_embd] */
	struct model_layer *layers;	/* [n_layer + n_mtp] */
	struct model_act act;
	float	*pick_val;		/* host [SAMPLE_TOPK_MAX]: model_forward_next's top k */
	int32_t	*pick_id;		/* host [SAMPLE_TOPK_MAX] */
	int32_t	*pen;			/* host [2][pen_cap]: sample_window's tokens, counts */
	int	pen_cap;
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
