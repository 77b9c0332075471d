/*
 * kernel-check: graph replay against eager launches, and check_all (the
 * kernel checks in order).  Shared declarations: kc.h.
 */
#include "kc.h"

#ifdef MEMRA_HAVE_CUDA

/* --- graph replay vs eager -------------------------------------------- */

struct step {		/* a miniature decode step: norm, FFN, residual, head, argmax */
	int	e, f, v;
	struct wset up, gate, down, out;
	float	*nw, *scale, *x, *n1, *a, *b, *s, *d, *h, *logits;
	int32_t	*idx;
};

static void
step_run(struct kc *k, struct step *st)
{
	struct gpu *g = k->g;

	gchk(k, gpu_rmsnorm(g, st->x, st->e, st->nw, st->n1, st->e, 1, st->e, 1e-6f));
	gchk(k, gpu_matvec(g, st->up.t, st->up.dw, st->f, st->e, st->n1, 1, st->a, NULL));
	gchk(k, gpu_matvec(g, st->gate.t, st->gate.dw, st->f, st->e, st->n1, 1, st->b, NULL));
	gchk(k, gpu_swiglu(g, st->b, st->a, st->s, st->f));
	gchk(k, gpu_matvec(g, st->down.t, st->down.dw, st->e, st->f, st->s, 1, st->d, NULL));
	gchk(k, gpu_add(g, st->x, st->d, st->h, st->e));
	gchk(k, gpu_matvec(g, st->out.t, st->out.dw, st->v, st->e, st->h, 1, st->logits, st->scale));
	gchk(k, gpu_argmax(g, st->logits, 1, st->v, st->idx));
}

static void
check_graph(struct kc *k)
{
	struct step st = { .e = 1024, .f = 2816, .v = 5000 };
	float *xe = frand(k, st.e, -1, 1), *nw = frand(k, st.e, 0.5f, 1.5f), sc = 0.5f;
	float *la = xmalloc((size_t)st.v * 4 + 4), *lb = xmalloc((size_t)st.v * 4 + 4);
	struct gpu_graph *gr;
	char shape[64];

	wset_new(k, &st.up, QUANT_Q4_K, st.f, st.e);
	wset_new(k, &st.gate, QUANT_Q8_0, st.f, st.e);
	wset_new(k, &st.down, QUANT_Q6_K, st.e, st.f);
	wset_new(k, &st.out, QUANT_NVFP4, st.v, st.e);
	st.nw = dput(k, nw, (size_t)st.e * 4), st.scale = dput(k, &sc, 4);
	st.x = dput(k, xe, (size_t)st.e * 4), st.n1 = dput(k, NULL, (size_t)st.e * 4);
	st.a = dput(k, NULL, (size_t)st.f * 4), st.b = dput(k, NULL, (size_t)st.f * 4);
	st.s = dput(k, NULL, (size_t)st.f * 4), st.d = dput(k, NULL, (size_t)st.e * 4);
	st.h = dput(k, NULL, (size_t)st.e * 4), st.logits = dput(k, NULL, (size_t)st.v * 4);
	st.idx = dput(k, NULL, 4);
	step_run(k, &st);
	dget(k, la, st.logits, (size_t)st.v * 4);
	dget(k, la + st.v, st.idx, 4);
	gchk(k, gpu_memset(k->g, st.logits, 0xFF, (size_t)st.v * 4));	/* poison */
	gchk(k, gpu_graph_begin(k->g));
	step_run(k, &st);
	if ((gr = gpu_graph_end(k->g)) == NULL)
		die(1, "gpu: %s", gpu_errmsg(k->g));
	for (int i = 0; i < 3; i++)
		gchk(k, gpu_graph_replay(k->g, gr));
	dget(k, lb, st.logits, (size_t)st.v * 4);
	dget(k, lb + st.v, st.idx, 4);
	brk(k, lb, st.v);
	snprintf(shape, sizeof shape, "ffn %dx%d head %d x3", st.e, st.f, st.v);
	same_bits(k, "graph replay=eager", shape, la, lb, st.v + 1);
	gpu_graph_free(gr);
	wset_free(k, &st.up), wset_free(k, &st.gate), wset_free(k, &st.down), wset_free(k, &st.out);
	float *ds[] = { st.nw, st.scale, st.x, st.n1, st.a, st.b, st.s, st.d, st.h, st.logits };
	for (size_t i = 0; i < sizeof ds / sizeof ds[0]; i++)
		gpu_free(k->g, ds[i]);
	gpu_free(k->g, st.idx);
	free(xe), free(nw), free(la), free(lb);
}

void
check_all(struct kc *k)
{
	check_quant(k);
	/* the prefill GEMM: rows and inputs past whole tiles (64 x 128, the
	 * first kernel's 64 x 64), ne0 past whole steps (64, 256 values) */
	check_mmq(k, QUANT_Q8_0, 300, 512, 17, 0);
	check_mmq(k, QUANT_Q8_0, 1000, 1024, 64, 0);
	check_mmq(k, QUANT_Q8_0, 257, 4096, 100, 1);
	check_mmq(k, QUANT_Q8_0, 45, 320, 33, 0);
	check_mmq(k, QUANT_NVFP4, 300, 512, 17, 1);
	check_mmq(k, QUANT_NVFP4, 257, 768, 64, 0);
	check_mmq(k, QUANT_NVFP4, 1000, 1024, 100, 0);
	check_mmq(k, QUANT_NVFP4, 45, 320, 33, 0);
	check_mmq(k, QUANT_Q8_0, 130, 4128, 257, 1);	/* odd blocks a row: rows 2 mod 4 bytes */
	check_mmq(k, QUANT_Q8_0, 70, 352, 130, 0);
	check_mmq(k, QUANT_NVFP4, 70, 448, 130, 1);
	/* IQ4_XS's prefill (cuda/mmq_iq4.cu, on Q8_K x): 64 x 64 tiles cut by the
	 * shape, rows of 1 to 44 super-blocks */
	check_mmq(k, QUANT_IQ4_XS, 300, 512, 17, 0);
	check_mmq(k, QUANT_IQ4_XS, 1000, 1024, 64, 1);
	check_mmq(k, QUANT_IQ4_XS, 257, 4096, 100, 0);
	check_mmq(k, QUANT_IQ4_XS, 45, 256, 33, 0);
	check_mmq(k, QUANT_IQ4_XS, 130, 1280, 130, 1);
	check_mmq(k, QUANT_IQ4_XS, 70, 11264, 20, 0);
	check_qk_all(k);
	check_iq4_all(k);
	check_moe_group_all(k);
	check_rmsnorm(k, 7, 4096, 4096, 0);
	check_rmsnorm(k, 5, 1000, 1000, 1);
	check_rmsnorm(k, 3 * 16, 256, 512, 0);	/* per head, q half of q+gate */
	check_rmsnorm(k, 2 * 32, 128, 128, 2);
	check_rmsnorm(k, 3, 5120, 5120, 0);	/* 2 and 4 float4s a thread */
	check_rmsnorm(k, 2, 12288, 12288, 1);
	check_l2norm(k, 2 * 16, 128);
	check_rope(k, 3, 16, 256, 512, 64, 4000);
	check_rope(k, 2, 8, 64, 64, 64, 100000);
	check_elementwise(k, 0, 3, 12288);
	check_elementwise(k, 1, 3, 4096);
	check_elementwise(k, 2, 16 * 2, 256);
	check_conv1d(k, 1, 8192, 4);
	check_conv1d(k, 5, 1000, 4);
	check_conv1d(k, 2, 300, 3);
	check_gdn(k, 1, 16, 32, 128, 128);
	check_gdn(k, 4, 16, 16, 128, 128);
	check_gdn(k, 3, 2, 6, 64, 100);
	/* other key heads, value heads past 256: k_gdn_any (unrun as yet) */
	check_gdn(k, 3, 2, 6, 80, 128);
	check_gdn(k, 2, 4, 8, 48, 64);
	check_gdn(k, 2, 2, 4, 96, 300);
	check_gdn(k, 1, 1, 2, 200, 64);
	check_attention(k, 1, 16, 4, 256, 0, 0);
	check_attention(k, 1, 16, 4, 256, 1000, 0);
	check_attention(k, 1, 32, 8, 128, 5000, 0);
	check_attention(k, 4, 16, 4, 256, 700, 0);
	check_attention(k, 16, 8, 8, 64, 255, 0);
	check_attention(k, 2, 6, 2, 80, 130, 0);	/* head rows of 80, 96, 192: scalar and float2 loads */
	check_attention(k, 3, 12, 4, 96, 63, 0);
	check_attention(k, 1, 4, 1, 192, 2100, 0);
	/* Gemma-4's global heads of 512 (E 16: 2 heads a block of a KV head's 8, 3's 1;
	 * 480: the scalar loads) */
	check_attention(k, 1, 16, 2, 512, 0, 0);
	check_attention(k, 1, 32, 4, 512, 3000, 0);
	check_attention(k, 4, 16, 2, 512, 700, 0);
	check_attention(k, 16, 6, 2, 512, 130, 0);
	check_attention(k, 2, 4, 4, 480, 63, 0);
	/* prompts: gpu_attention_prefill's blocks of 32 and 64 vectors, hd 32..256, GQA 1..8 */
	check_attention(k, 17, 16, 4, 256, 0, 1);
	check_attention(k, 40, 8, 8, 128, 300, 1);
	check_attention(k, 100, 8, 1, 64, 2047, 1);
	check_attention(k, 512, 16, 4, 256, 0, 1);
	check_attention(k, 512, 8, 1, 128, 300, 1);
	check_attention(k, 100, 12, 2, 256, 2047, 1);
	check_attention(k, 1100, 4, 1, 64, 0, 1);
	check_attention(k, 300, 64, 8, 128, 0, 1);	/* 64 vectors a block (hd <= 128) */
	check_attention(k, 300, 64, 32, 64, 100, 1);
	check_attention(k, 150, 16, 2, 256, 600, 1);
	check_attention(k, 70, 6, 2, 96, 130, 1);	/* hd < the tile's: columns past hd */
	check_attention(k, 33, 3, 3, 160, 63, 1);
	check_attention(k, 20, 2, 2, 32, 5, 1);
	/* heads of 512 (Gemma-4's global layers): blocks of 32, 199 KB; 320 in a tile of 512 */
	check_attention(k, 17, 16, 2, 512, 0, 1);
	check_attention(k, 100, 8, 1, 512, 300, 1);
	/* heads of a multiple of 4 but not of 32 (the kernel takes them; the backend
	 * sends only full-mode ones: the 31B vision tower's 72) */
	check_attention(k, 50, 4, 2, 72, 10, 1);
	/* full mode: every row sees every key of the call (a vision tower's image) */
	check_attention(k, 300, 16, 16, 72, 0, 2);
	check_attention(k, 100, 8, 2, 72, 50, 2);
	check_attention(k, 70, 4, 4, 64, 0, 2);
	check_attention(k, 40, 6, 2, 256, 10, 2);
	check_attention(k, 33, 2, 2, 20, 0, 2);
	check_attention(k, 65, 4, 1, 128, 0, 2);
	check_attention(k, 300, 32, 4, 512, 0, 1);
	check_attention(k, 40, 6, 2, 320, 70, 1);
	/* sliding windows (gemma4's and step35's sliding layers): blocks start at
	 * their first row's window, vectors whose window starts a tile later
	 * (G 8: 4 rows a block), a window of 1, one past every key (= causal) */
	check_attention_win(k, 600, 16, 8, 256, 0, 1, 512);
	check_attention_win(k, 300, 16, 8, 256, 1000, 1, 1024);
	check_attention_win(k, 100, 16, 2, 128, 1000, 1, 33);
	check_attention_win(k, 200, 8, 8, 64, 40, 1, 100);
	check_attention_win(k, 300, 64, 8, 128, 0, 1, 64);
	check_attention_win(k, 70, 4, 4, 128, 5, 1, 1);
	check_attention_win(k, 100, 8, 1, 512, 300, 1, 40);
	check_attention_win(k, 150, 4, 2, 256, 0, 1, 4096);
	/* weights' uploads: plain, one staging buffer's worth, three (the first again) */
	check_upload_weight(k, 1000);
	check_upload_weight(k, (16 << 20) / 4);
	check_upload_weight(k, (40 << 20) / 4 + 3086);
	check_argmax(k, 3, 248320);
	check_argmax(k, 5, 1000);
	check_topk(k, 3, 248320, 40, 0.7f);
	check_topk(k, 2, 248320, 1, 1.0f);
	check_topk(k, 2, 151936, 1024, 3.0f);
	check_topk(k, 4, 1000, 50, 0.3f);
	check_topk(k, 2, 70, 64, 1.5f);	/* k near n: the last row 32 finite of 64 */
	check_draw(k, 248320, 0.8f, 1.0f, 0.0f, 24);
	check_draw(k, 248320, 1.0f, 0.9f, 0.0f, 24);
	check_draw(k, 248320, 0.7f, 0.95f, 0.05f, 24);
	check_draw(k, 151936, 1.5f, 1.0f, 0.1f, 16);
	check_draw(k, 248320, 0.05f, 1.0f, 0.0f, 8);	/* cold: a few candidates weigh */
	check_draw(k, 1000, 3.0f, 0.5f, 0.0f, 64);
	check_draw(k, 70, 1.0f, 0.8f, 0.02f, 64);
	check_penalize(k, 248320, 200, 64, 1.3f, 0.4f, 0.25f);
	check_penalize(k, 151936, 500, -1, 0.8f, -0.5f, 0.1f);
	check_penalize(k, 1000, 30, 30, 1.1f, 0.0f, 0.0f);
	check_graph(k);
}

#endif	/* MEMRA_HAVE_CUDA */
