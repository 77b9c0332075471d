/*
 * kc: what the parts of kernel-check share (bin/kernel-check.c and the .c
 * files beside this header, one per section of the checks): the headers,
 * the types and tables more than one part reads, and the helpers more than
 * one part calls.  Everything else stays static in its part.
 * What needs the GPU is under MEMRA_HAVE_CUDA, as it was in one file.
 */
#ifndef MEMRA_KC_H
#define MEMRA_KC_H

#include <dirent.h>
#include <float.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "gguf.h"
#include "json.h"
#include "model.h"
#include "quant.h"
#include "ranks.h"
#include "sample.h"
#include "state.h"
#include "util.h"
#include "vision.h"
#ifdef MEMRA_HAVE_CUDA
#include "backend_impl.h"	/* backend_cuda_gpu */
#include "gpu.h"
#endif

/* The CPU's float-order noise on a model (be_model), once per model. */
struct noise {
	int	done;
	double	rel, abs;	/* the larger of order and steps: relative to 1 + |logit|, absolute */
	double	order_rel, order_abs;	/* llama.cpp's attention order against the plain one */
	double	steps_rel, steps_abs;	/* the prefill against the prompt token by token */
	int	int8;		/* model_int8_weights: products on int8 activations */
};

/* noise.c */
void	*xmalloc(size_t n);
void	model_prompt(int32_t *pr, int n, int nv);
void	noise_add(const float *a, const float *b, int n, double *rel, double *abs);
void	cpu_noise(struct backend *cpu, const char *path, struct noise *nz);
double	noise_tol(const struct noise *nz);
double	noise_near(const struct noise *nz, double gap);

#ifdef MEMRA_HAVE_CUDA

struct kc {
	struct gpu *g;
	uint64_t rng;
	int	brk;		/* break every GPU result before comparing */
	int	nchk, nfail;
	int	only;		/* bench: just this quant type (-1: all) */
	int	chunk, unroll;	/* gpu_tune values */
};

static const int mv_types[] = {
	QUANT_F32, QUANT_F16, QUANT_BF16, QUANT_Q8_0, QUANT_Q4_0, QUANT_Q4_1,
	QUANT_NVFP4, QUANT_Q4_K, QUANT_Q5_K, QUANT_Q6_K, QUANT_IQ4_NL, QUANT_IQ4_XS,
	QUANT_Q5_0,
};
#define NTYPES (int)(sizeof mv_types / sizeof mv_types[0])

struct wset {		/* one random weight matrix, here and on the device */
	int	t;
	int64_t	rows, ne0;
	uint8_t	*w;
	float	*wf;	/* dequantized by the CPU reference */
	void	*dw;
};

struct bpair {
	struct backend *c, *g;
	char	gname[32];	/* the GPU's backend_open name (cuda:N) */
};

struct bw {		/* one weight on both backends */
	struct backend_weight c, g;
	uint8_t	*w;
	float	*wf;
};

/* An fp32 op on both backends: in[] uploaded, op run, out[] compared. */
struct bop {
	int	nin;
	size_t	n[8];		/* floats per buffer */
	float	*h[8];		/* host copies (inputs; outputs start as these too) */
	float	*c[8], *g[8];	/* device buffers on each backend */
};

/* The deliberately broken arm: one element moved far off (a NaN or an
 * infinity, which no addition moves, made 0: a check of bits whose middle
 * element is NaN, as an ill-routed expert row's, must fail it too). */
static inline void
brk(struct kc *k, float *v, int64_t n)
{
	if (k->brk && n > 0)
		v[n / 2] = isfinite(v[n / 2]) ? v[n / 2] + 1.0f + 0.5f * fabsf(v[n / 2]) : 0.0f;
}

/* helpers.c */
uint64_t	rnd(struct kc *k);
void	gchk(struct kc *k, int rc);
void	*dput(struct kc *k, const void *h, size_t n);
void	dget(struct kc *k, void *h, const void *d, size_t n);
float	*frand(struct kc *k, int64_t n, float lo, float hi);
int	report(struct kc *k, const char *name, const char *shape, double maxdiff, int ok);
int	close_to(struct kc *k, const char *name, const char *shape, const float *got,
	    const double *ref, const double *mag, int64_t n, double tol);
int	same_bits_if(struct kc *k, const char *name, const char *shape, const float *a,
	    const float *b, int64_t n, int cond);
int	same_bits(struct kc *k, const char *name, const char *shape, const float *a,
	    const float *b, int64_t n);
unsigned long	prof_launches(struct kc *k, const char *what);
uint8_t	*qrand(struct kc *k, int t, int64_t rows, int64_t ne0, size_t *nbytes);
float	*qdeq(int t, const uint8_t *w, int64_t rows, int64_t ne0);
void	dot_ref(const float *wf, const float *x, int64_t rows, int64_t ne0, int m,
	    double scale, double *ref, double *mag);

/* products.c */
void	wset_new(struct kc *k, struct wset *s, int t, int64_t rows, int64_t ne0);
void	wset_free(struct kc *k, struct wset *s);
int	float_type(int t);
float	bf16_round(float f);
void	check_quant(struct kc *k);
void	check_mmq(struct kc *k, int t, int64_t rows, int64_t ne0, int n, int with_scale);
void	check_iq4(struct kc *k, int t, int64_t rows, int64_t ne0, int m);
void	check_iq4_all(struct kc *k);
void	check_qk_all(struct kc *k);

/* moe_group.c */
void	check_moe_group_all(struct kc *k);

/* fp32.c */
void	check_rmsnorm(struct kc *k, int rows, int d, int ld, int mode);
void	check_l2norm(struct kc *k, int rows, int d);
void	check_rope(struct kc *k, int n, int heads, int hd, int ld, int n_rot, int maxpos);
void	check_elementwise(struct kc *k, int op, int rows, int d);
void	check_conv1d(struct kc *k, int T, int C, int K);
void	check_gdn(struct kc *k, int T, int hk, int hv, int sk, int sv);
void	check_attention_win(struct kc *k, int nq, int nh, int nkv, int hd, int pos0, int pf, int win);
void	check_attention(struct kc *k, int nq, int nh, int nkv, int hd, int pos0, int pf);
void	check_upload_weight(struct kc *k, int64_t n);
void	check_argmax(struct kc *k, int rows, int64_t n);
void	check_topk(struct kc *k, int rows, int64_t n, int kk, float temp);
void	check_draw(struct kc *k, int64_t n, float temp, float top_p, float min_p, int npos);
void	check_penalize(struct kc *k, int64_t n, int nhist, int window, float rep, float pres, float freq);

/* graph.c */
void	check_all(struct kc *k);

/* backend.c */
float	*bput(struct backend *be, const float *h, size_t n);
float	*bget(struct backend *be, const float *d, size_t n);
void	bchk(struct backend *be, int rc);
void	becmp(struct kc *k, const char *name, const char *shape, float *got, const float *ref,
	    const double *mag, int64_t n, double tol);
void	bsame(struct kc *k, const char *name, const char *shape, float *a, const float *b,
	    int64_t n);
void	bw_new(struct kc *k, struct bpair *p, struct bw *b, int t, int64_t rows, int64_t ne0,
	    float scale);
void	bw_free(struct bpair *p, struct bw *b);
double	*bmag(const struct bw *b, const float *x, int ldx, int m, float scale);
void	be_matmul(struct kc *k, struct bpair *p, int t, int64_t rows, int64_t ne0, int m,
	    int pad, float scale);
void	bop_new(struct kc *k, struct bpair *p, struct bop *o, int nbuf, const size_t *n,
	    const float *lo, const float *hi);
void	bop_cmp(struct kc *k, struct bpair *p, struct bop *o, int i, const char *name,
	    const char *shape, double tol);
void	bop_free(struct bpair *p, struct bop *o);
void	be_norms(struct kc *k, struct bpair *p, int rows, int n, int ld);
void	be_norm_residual(struct kc *k, struct bpair *p, int m, int n, int form);
void	be_rmsnorm_pair(struct kc *k, struct bpair *p, int m, int n, float s1);
void	be_add_rmsnorm(struct kc *k, struct bpair *p, int m, int n);
void	be_elementwise(struct kc *k, struct bpair *p, int n);
void	be_rope(struct kc *k, struct bpair *p, int m, int nh, int hs, int n_rot, int mode, int p0);
void	be_qkrope(struct kc *k, struct bpair *p, int m, int nh, int nkv, int hd, int qhs, int n_rot,
	    int mode, int p0, int dev, int vnorm, int ring);
void	be_attention(struct kc *k, struct bpair *p, int m, int nh, int nkv, int hd, int p0, int win);
void	be_attention_hi(struct kc *k, struct bpair *p, int m, int nh, int nkv, int hd, int p0,
	    int b0, int nb, int win);
void	be_attention_hi_ring(struct kc *k, struct bpair *p, int m, int nh, int nkv, int hd,
	    int p0, int b0, int nb, int win);
void	be_attention_ring(struct kc *k, struct bpair *p, int m, int nh, int nkv, int hd, int p0,
	    int win, int ring);
void	be_clamp(struct kc *k, struct bpair *p, int n);
void	be_matmul_half(struct kc *k, struct bpair *p, int t, int64_t rows, int64_t ne0, int m, int pad);
void	be_dconv(struct kc *k, struct bpair *p, int m, int n, int K, int g, int side);
void	be_conv(struct kc *k, struct bpair *p, int m, int n_ch, int dc);
void	be_gdn(struct kc *k, struct bpair *p, int m, int nk, int nv, int dk, int dv, int tiled,
	    int hf, int chunk);
void	be_seqs(struct kc *k, struct bpair *p, int n, int pat, int nk, int nv, int dk, int dv,
	    int dc, int snaps);
void	be_kv_seqs(struct kc *k, struct bpair *p, int n, int ones, int kvd);
void	be_attention_seqs(struct kc *k, struct bpair *p, int n, int ones, int nh, int nkv, int hd);
void	fused_mags(const struct bw *wg, const struct bw *wu, const float *x, const float *nw,
	    int m, int n, int nff, double *mn, double *my);
void	be_fused(struct kc *k, struct bpair *p, int t, int m, int n, int nff);
void	be_embed_argmax(struct kc *k, struct bpair *p, int t);
void	be_model(struct kc *k, struct bpair *p, const char *path, int np, int ng, struct noise *nz,
	    const char *gemm, int ring);
void	be_pdl(struct kc *k, struct bpair *p, const char *path);

#define BOTH(p, call_c, call_g) do { bchk((p)->c, call_c); bchk((p)->g, call_g); } while (0)

/* vision.c */
void	be_vision(struct kc *k, struct bpair *p, const char *path);
void	be_fuse(struct kc *k, struct bpair *p, int t, int m, int nh, int hd, int nout, float s);
void	be_set(struct kc *k, struct bpair *p, int t, int m, int n);

/* moe.c */
void	moe_ids(struct kc *k, int32_t *ids, int m, int kk, int n_exp);
void	be_moe_swiglu(struct kc *k, struct bpair *p, int t, int n_exp, int nf, int n, int m, int kk,
	    int pad, float limit, float sg);
void	be_moe_geglu(struct kc *k, struct bpair *p, int t, int n_exp, int nf, int n, int m, int kk);
void	be_moe_down(struct kc *k, struct bpair *p, int t, int n_exp, int ne, int nf, int m, int kk,
	    int pad, float sd);
void	be_moe_ffn(struct kc *k, struct bpair *p, int t, int n_exp, int nf, int n, int m, int kk,
	    float lim, int xs);
void	be_moe_route(struct kc *k, struct bpair *p, int n, int kk, int m, int sig, int with_bias,
	    int norm, float scale);
void	be_arch_small(struct kc *k, struct bpair *p, int rows, int n);
void	be_odd_rows(struct kc *k, struct bpair *p, int t, int ne0);
void	be_mask(struct kc *k, struct bpair *p);
void	be_head_max(struct kc *k, struct bpair *p);
void	be_model_types(struct kc *k, const char *path);

/* rows32.c */
void	check_backend(struct kc *k, int dev, char *const *models, int nmodel);

/* bandwidth.c */
void	bench(struct kc *k);
void	bench_attn(struct kc *k, int NH, int NKV, int HD, int M, int W);
void	bench_gdn(struct kc *k, int dev);

#endif	/* MEMRA_HAVE_CUDA */

#endif	/* MEMRA_KC_H */
