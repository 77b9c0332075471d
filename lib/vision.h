/*
 * vision: Gemma-4's vision tower and its projector (transformers 5.17's
 * Gemma4VisionModel and Gemma4MultimodalEmbedder, float32), run on a
 * backend: an image's patches in, its soft tokens out as rows of the text
 * model's width (model_inject puts them in a prompt).
 *
 * Weights: an HF Gemma4ForConditionalGeneration checkpoint directory
 * (config.json's vision_config, model.vision_tower.* and
 * model.embed_vision.*, preprocessor_config.json's max_soft_tokens) or
 * the mmproj GGUF llama.cpp's converter writes (clip, projector gemma4v).
 *
 * The tower:
 *	x = W_patch . 2(p - 0.5) + pos_x[col] + pos_y[row]
 *	per layer:  x += post_attn_norm(attn(ln1(x)))
 *	            x += post_ffn_norm(down(gelu_tanh(gate(h)) * up(h))), h = ln2(x)
 *	attention:  q, k normed per head (weights), v normed (none), 2-D RoPE
 *	            (the first half of a head turned by the column, the second by
 *	            the row, rotate-half, theta 100), scale 1, every patch sees
 *	            every patch
 *	then the average of each pool x pool block of patches (row-major over
 *	the pooled grid) times sqrt(n_embd), (h - std_bias) * std_scale when the
 *	tower standardizes, RMSNorm without a weight, the projection.
 * Clipped linears clamp their input and output to the checkpoint's bounds.
 * Every RMSNorm is x * (mean(x^2) + eps)^-1/2 * w.
 *
 * Products (the patch embedding, the linears, the projection) follow
 * llama.cpp's rule for a weight's type (backend_matmul_half): a matrix
 * stored as BF16 (F16) multiplies activations rounded to BF16 (F16), the
 * exact products summed in float32 (tensor cores on CUDA); F32 matrices
 * multiply in float32 (and quantized ones as backend_matmul).  So a BF16
 * tower differs from transformers run in float32 by that rounding of the
 * activations (2^-9 relative at most), as llama.cpp's does; an F32 tower
 * (t/data/gemma4/g4-vision's) does not.
 *
 * Differences from llama.cpp's gemma4v that we do not follow (we follow
 * transformers): its FFN is GELU-quick unless the file sets clip.use_gelu
 * (the converter does not); its image preprocessing (lib/image).  And on
 * CUDA its cuBLAS path sums F16 products in F16 (CUBLAS_COMPUTE_16F, F16
 * out, unless the op asks for F32 precision; BF16 in fp32): our F16
 * products sum in float on every backend, as ggml's CPU does.
 */
#ifndef MEMRA_VISION_H
#define MEMRA_VISION_H

#include <stddef.h>
#include <stdint.h>

struct backend;
struct image_limits;

struct vision_hparams {
	int	n_embd, n_ff, n_layer, n_head, n_head_kv, head_dim;
	int	patch;		/* a patch's side in pixels */
	int	pool;		/* pooling kernel: pool x pool patches a soft token */
	int	n_pos;		/* rows of each position table: the largest grid side */
	int	n_embd_text;	/* the projector's output: the text model's width */
	int	max_tokens;	/* soft tokens an image may take (the processor's
				 * max_soft_tokens; 280 unless the checkpoint says) */
	float	eps, theta;
	int	clipped;	/* 1: clipped linears */
	int	standardize;	/* 1: std_bias, std_scale */
	int	bidir;		/* 1: the text model's image rows see each other
				 * (transformers' use_bidirectional_attention
				 * "vision"; an mmproj GGUF: llama.cpp's rule, every
				 * text width but E2B's 1536 and E4B's 2560) */
	int	gguf;		/* 1: read from an mmproj GGUF */
	int	half;		/* 1: some matrices are BF16 or F16, so their
				 * products take activations rounded to it */
};

struct vision;

/*
 * Open the tower at path (an HF checkpoint directory with a vision tower,
 * or an mmproj GGUF) on backend be, which must outlive it.  NULL with
 * "path: why" in err (UTIL_ERRLEN): not a Gemma-4 tower (another
 * projector type, no vision_config), a missing tensor, a shape that does
 * not fit, a backend without the tower's ops (backend_attn_hi,
 * backend_gemma, backend_has_clamp: the CPU's and the CUDA backend's) or
 * heads longer than its backend_head_max.  vision_close frees (NULL is a
 * no-op).
 */
struct vision *vision_open(const char *path, struct backend *be, char *err);

/*
 * Why a checkpoint's config.json (parsed) holds no tower vision_open takes,
 * or NULL when it does (model_type gemma4, a text_config and a
 * vision_config object): Step3p7's checkpoints have a vision_config too.
 */
struct json;
const char *vision_config_why(const struct json *config);
void	vision_close(struct vision *);
const struct vision_hparams *vision_hparams(const struct vision *);
const char *vision_errmsg(const struct vision *);

/* An image made ready for the tower. */
struct vision_image {
	int	w, h;		/* the image's size as decoded */
	int	rw, rh;		/* resized to */
	int	gw, gh;		/* its patch grid */
	int	n_tok;		/* soft tokens: gw * gh / pool^2 */
	float	*px;		/* [gw * gh][patch * patch * 3] (image_patches) */
	uint8_t	sha256[32];	/* the file's SHA-256: which image it is */
};

/*
 * Decode n bytes of a PNG or JPEG (lim: image_decode's), fit them to the
 * tower's budget (max_tokens 0: hp->max_tokens) and make the patches; the
 * bytes' SHA-256 into img->sha256.
 * 0, or -1 with the reason in err (UTIL_ERRLEN): a bad file, a size past
 * lim, a patch grid with a side past the position tables (hp->n_pos: as
 * transformers, which fails there, no position is made up);
 * vision_image_free frees.
 */
int	vision_prepare(const struct vision *, const void *buf, size_t n,
	    const struct image_limits *lim, int max_tokens, struct vision_image *img,
	    char *err);
void	vision_image_free(struct vision_image *);

/*
 * The soft tokens of img into out (host [img->n_tok][n_embd_text]).  0, or
 * -1 with vision_errmsg set (a grid past the position tables, a failed op).
 */
int	vision_encode(struct vision *, const struct vision_image *img, float *out);

/*
 * Make the tower ready for images of up to max_tokens soft tokens (0:
 * hp->max_tokens) before anything else takes its backend's memory: the
 * working buffers of the largest patch grid that budget allows, kept until
 * vision_close and used by every encode that fits them (a larger image
 * still gets buffers of its own), and, on a device backend, one encode of
 * that grid, so the backend's own buffers (its products' and attention's
 * scratch) grow to it now.  What an encode returns does not depend on it.
 * 0, or -1 with vision_errmsg set (out of memory, a budget with no grid
 * inside the position tables).
 */
int	vision_reserve(struct vision *, int max_tokens);

/*
 * The tower's hidden rows part of the way, for checks that name where two
 * backends part (kernel-check): after the patch embedding (stages 0), then
 * each layer's attention (odd stages) and feed-forward block (even ones),
 * into x (host [gw * gh][n_embd]).  stages <= 2 * n_layer; 0, or -1 with
 * vision_errmsg set.
 */
int	vision_hidden(struct vision *, const struct vision_image *img, int stages, float *x);

#endif

/* --- a prompt's images --- */

struct tokenizer;
struct model_embd;

/* The marker tokens: <|image> (boi), <|image|> (img), <image|> (eoi), and the
 * token image rows' per-layer inputs take (<pad>, 0 without one). */
struct vision_tokens {
	int32_t	boi, img, eoi, pad;
};

/* The markers of tok's vocabulary; -1 with err when one of the three is missing. */
int	vision_tokens(const struct tokenizer *tok, struct vision_tokens *vt, char *err);

/* An image of a prompt: where its soft tokens are, and which image it is. */
struct vision_prompt_image {
	int32_t	row;		/* its first soft-token row in the prompt */
	int32_t	n;		/* its soft-token rows: row .. row + n - 1 */
	uint8_t	sha256[32];	/* its file's SHA-256 (vision_image.sha256) */
};

/* A prompt's images: the rows their soft tokens take, and the soft tokens. */
struct vision_prompt {
	int	n_rows;		/* soft-token rows in all */
	int32_t	*row;		/* [n_rows] their indices in the prompt, ascending */
	float	*x;		/* [n_rows][n_embd_text] */
	int	nt;		/* n_embd_text */
	int	bidir;		/* vision_hparams.bidir */
	int32_t	pad;
	int	n_img;
	struct vision_prompt_image *img;	/* [n_img] in prompt order */
};

/*
 * The prompt ids[n] with its images: each img token of ids (one an image,
 * n_img of them, in order) becomes boi, imgs[i].n_tok img tokens and eoi,
 * as transformers' Gemma4Processor expands it; each image is encoded
 * (vision_encode) into vp, and its rows and SHA-256 listed in vp->img.
 * *out: malloc'd [*n_out] ids.  0, or -1 with the reason in err
 * (UTIL_ERRLEN): a count of markers other than n_img, an encoding failure.
 * vision_prompt_free frees vp.
 */
int	vision_prompt_build(struct vision *, const struct vision_tokens *vt, const int32_t *ids,
	    size_t n, const struct vision_image *imgs, int n_img, int32_t **out, size_t *n_out,
	    struct vision_prompt *vp, char *err);
void	vision_prompt_free(struct vision_prompt *);

/* The embedding rows of prompt rows [r0, r0 + m) into e (its arrays point into vp). */
void	vision_prompt_rows(const struct vision_prompt *, int r0, int m, struct model_embd *e);

/*
 * How many of the m prompt rows from r0 a forward may take without cutting
 * an image (a bidir block must lie in one forward): m, or fewer so that an
 * image starting before r0 + m is left whole for the next; an image that
 * starts at r0 is taken whole even past m.
 */
int	vision_prompt_cut(const struct vision_prompt *, int r0, int m);
