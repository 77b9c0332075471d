/*
 * moe-gemm-kern: cuda/moe_gemm.cuh's own device code (mg_block, mg_wstep,
 * mg_xstep: k_moe_gemm, the experts' prompt GEMM) run on the CPU, thread
 * by thread (not built by make; t/emu.bats builds and runs it): the
 * evidence, on a machine without a GPU, that the GEMM's tiles, steps,
 * fragments and stores give each slot's product of its bf16 operands.
 * A block's 128 threads are coroutines on one OS thread (tools/kern-coro.h),
 * each run until it reaches a collective: __syncthreads (all the block's
 * live threads there), mg_ldsm4 (the warp's 32 lanes there: ldmatrix .x4, lane
 * 8 m + i giving the address of row i of matrix m, 16-byte aligned and
 * inside the block's shared buffers, lane l getting bf16 pair l % 4 of row
 * l / 4 of each matrix) and mg_mma (the warp's 32 lanes there: PTX's
 * mma.m16n8k16 .row.col .f32.bf16.bf16.f32 on their fragments, A: a0 row
 * g, a1 row g + 8, a2, a3 the same 8 columns on; B: b0 column g, rows 2 tg,
 * 2 tg + 1, b1 8 rows on; C and D: c0, c1 row g columns 2 tg, 2 tg + 1,
 * c2, c3 row g + 8; g = lane / 4, tg = lane % 4; summed in double, rounded
 * once); a warp whose lanes are apart at a collective, or no thread able
 * to go on, aborts.  cp.async copies (gpu_cp16: alignment checked) land at
 * the thread's mg_wait_all, not at their issue, on shared memory that
 * starts as garbage (NaN bytes).  dq_unit is lib/quant's dequantization
 * of the unit's block; bf16_unit rounds to nearest, ties to even.
 *
 * The checks: moe_group_build's perm and tiles (bucket, first, count,
 * index in the bucket; ill ids in bucket n_exp; GPU_MOE_MT zero perm
 * entries after the slots; empty tiles after the used ones) and k_moe_xg's
 * gathered bf16 rows as cuda/gpu_impl.cuh and matvec.cu say, then each
 * block of the grid (weight rows of 64, a tile each), every output of
 * every slot against the sum of its bf16 operands in double within 1e-5
 * of the terms' magnitudes (times the scale), NaN rows for ill ids, every
 * output written; the same bits again with two slots in three routed
 * elsewhere.  Q8_0, Q4_0 and Q4_K experts (32- and 256-value blocks),
 * routings of 0, 1, 5, 17, 32, 40, 16, 9 and 70 slots an expert with ill
 * ids, all on one expert, rows of 37 (a part tile of rows), 64 and 100,
 * rows of 64 to 512 values.  -p N perturbs the model (1: ldmatrix's
 * matrices 1 and 2 swapped; 2: the mma's B fragment halves swapped; 3:
 * the tiles' index in their bucket one more; 4: mg_wait_all landing
 * nothing): each must fail.
 * Build (t/emu.bats), in a directory D, lib/quant*.c and lib/util.c
 * compiled as C into D first:
 *   g++ -O2 -std=c++17 -ffp-contract=off -Wno-unknown-pragmas -Icuda -Ilib \
 *       -c -o D/mg.o tools/moe-gemm-kern.cc
 *   g++ -o D/moe-gemm-kern D/mg.o D/quant*.o D/util.o -lm
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>
#include <vector>

extern "C" {
#include "quant.h"
}

/* --- the CUDA the device code uses --------------------------------------- */

#include "kern-cuda.h"
#define GPU_MOE_MT 16	/* gpu_impl.cuh's */

static int perturb;	/* -p */

/* dq_unit<T> (matvec.cu) for the ggml types here: the 32 values of unit u
 * (of upr a row) of row r0 + u / upr (ids NULL, as the GEMM calls it) */
template <int T>
static void
dq_unit(const uint8_t *src, size_t rowbytes, int64_t r0, int64_t upr, int64_t u,
    const int32_t *ids, float w[32])
{
	const struct quant_traits *tr = quant_traits(T);
	int upb = tr->blck / 32;
	int64_t r = u / upr, ur = u - r * upr;
	float v[256];

	if (ids != NULL || tr->blck > 256)
		abort();
	if (quant_dequantize_row(T, src + (r0 + r) * rowbytes + (size_t)(ur / upb) * tr->size, v,
	    tr->blck) != 0)
		abort();
	memcpy(w, v + 32 * (ur % upb), 32 * sizeof(float));
}

static uint16_t
bf16_bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, 4);
	return (uint16_t)((u + 0x7FFFu + (u >> 16 & 1)) >> 16);
}

static float
bf16_float(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;

	memcpy(&f, &u, 4);
	return f;
}

/* bf16_unit (matvec.cu): 32 values as bf16, value 2 k low in word k */
static void
bf16_unit(uint4 *o, const float w[32])
{
	for (int i = 0; i < 4; i++) {
		unsigned h[4];
		for (int k = 0; k < 4; k++)
			h[k] = bf16_bits(w[8 * i + 2 * k]) | (unsigned)bf16_bits(w[8 * i + 2 * k + 1]) << 16;
		o[i] = uint4{ h[0], h[1], h[2], h[3] };
	}
}

/* --- the block: 128 coroutines (tools/kern-coro.h) ------------------------ */

#define KC_NAME "moe-gemm-kern"
#define KC_NTH 128
#define KC_LANE \
	const uint16_t *ldsm;	/* at an ldmatrix: its row address */ \
	unsigned r[4];		/* and what it got */ \
	unsigned a[4], b[2];	/* at an mma: its fragments */ \
	float c[4];		/* its C in, D out */
#include "kern-coro.h"

enum { AT_LDSM, AT_MMA };	/* the warp's collectives (KC_WARP + these) */

static const uint8_t *sm_lo, *sm_hi;	/* the block's shared buffers */

static void
mg_ldsm4(unsigned r[4], const uint16_t *p)
{
	th[cur].ldsm = p;
	yield(KC_WARP + AT_LDSM);
	memcpy(r, th[cur].r, sizeof th[cur].r);
}

static void
mg_mma(float c[4], const unsigned a[4], unsigned b0, unsigned b1)
{
	memcpy(th[cur].a, a, sizeof th[cur].a);
	th[cur].b[0] = b0, th[cur].b[1] = b1;
	memcpy(th[cur].c, c, sizeof th[cur].c);
	yield(KC_WARP + AT_MMA);
	memcpy(c, th[cur].c, sizeof th[cur].c);
}

static void
gpu_cp16(void *dst, const void *src, int n)
{
	if ((const uint8_t *)dst < sm_lo || (const uint8_t *)dst + 16 > sm_hi)
		die("cp.async outside the shared buffers");
	cp_async(dst, src, 16, n);
}

static void
mg_commit(void)
{
	kc_commit();
}

static void
mg_wait_all(void)
{
	if (perturb != 4)
		kc_wait_all();
}

#include "moe_gemm.cuh"

/* the warp's ldmatrix .x4 */
static void
warp_ldsm(int w)
{
	for (int l = 0; l < 32; l++) {
		const uint16_t *p = th[32 * w + l].ldsm;
		if (((uintptr_t)p & 15) != 0 || (const uint8_t *)p < sm_lo ||
		    (const uint8_t *)(p + 8) > sm_hi)
			cur = 32 * w + l, die("ldmatrix row address misaligned or outside");
	}
	for (int l = 0; l < 32; l++) {
		thr &t = th[32 * w + l];
		for (int m = 0; m < 4; m++) {
			int mm = perturb == 1 && (m == 1 || m == 2) ? 3 - m : m;
			const uint16_t *row = th[32 * w + 8 * mm + l / 4].ldsm;
			t.r[m] = row[2 * (l % 4)] | (unsigned)row[2 * (l % 4) + 1] << 16;
		}
	}
}

/* the warp's mma: D = A B + C from its lanes' fragments */
static void
warp_mma(int w)
{
	float A[16][16], B[16][8], C[16][8];

	for (int l = 0; l < 32; l++) {
		const thr &t = th[32 * w + l];
		int g = l >> 2, tg = l & 3;
		for (int h = 0; h < 2; h++) {
			A[g][2 * tg + h] = bf16_float((uint16_t)(t.a[0] >> 16 * h));
			A[g + 8][2 * tg + h] = bf16_float((uint16_t)(t.a[1] >> 16 * h));
			A[g][8 + 2 * tg + h] = bf16_float((uint16_t)(t.a[2] >> 16 * h));
			A[g + 8][8 + 2 * tg + h] = bf16_float((uint16_t)(t.a[3] >> 16 * h));
			int b0 = perturb == 2, b1 = !b0;
			B[2 * tg + h][g] = bf16_float((uint16_t)(t.b[b0] >> 16 * h));
			B[8 + 2 * tg + h][g] = bf16_float((uint16_t)(t.b[b1] >> 16 * h));
		}
		C[g][2 * tg] = t.c[0], C[g][2 * tg + 1] = t.c[1];
		C[g + 8][2 * tg] = t.c[2], C[g + 8][2 * tg + 1] = t.c[3];
	}
	for (int l = 0; l < 32; l++) {
		thr &t = th[32 * w + l];
		int g = l >> 2, tg = l & 3;
		for (int e = 0; e < 4; e++) {
			int r = g + 8 * (e >> 1), n = 2 * tg + (e & 1);
			double s = C[r][n];
			for (int k = 0; k < 16; k++)
				s += (double)A[r][k] * B[k][n];
			t.c[e] = (float)s;
		}
	}
}

static void
kc_warp(int w, int kind)
{
	if (kind == AT_LDSM)
		warp_ldsm(w);
	else
		warp_mma(w);
	for (int l = 0; l < 32; l++)
		th[32 * w + l].state = KC_RUN;
}

static const char *
kc_what(int kind)
{
	return kind == AT_LDSM ? "an ldmatrix" : "an mma";
}

/* --- the launch ---------------------------------------------------------- */

struct gemm_job {
	uint16_t (*ws)[MG_BM][MG_LD], (*xs)[MG_BN][MG_LD];
	const uint8_t *W;
	size_t rowbytes;
	int64_t rows, ne0;
	int n_exp, nt;
	const int4 *tile;
	const int32_t *perm;
	const uint16_t *xg;
	float *y;
	const float *scale;
};

template <int T>
static void
gemm_block(void *p)
{
	gemm_job *J = (gemm_job *)p;

	mg_block<T>(J->ws, J->xs, J->W, J->rowbytes, J->rows, J->ne0, J->n_exp, J->tile, 0, J->nt,
	    J->perm, J->xg, J->y, J->scale);
}

static void (*pick(int t))(void *)
{
	return t == QUANT_Q8_0 ? gemm_block<QUANT_Q8_0> : t == QUANT_Q4_0 ?
	    gemm_block<QUANT_Q4_0> : gemm_block<QUANT_Q4_K>;
}

/* moe_group_build's output for ids[ns] (gpu_impl.cuh): perm, tiles, and
 * nt (the used tiles and 3 empty ones) */
static int
group(const int32_t *ids, int ns, int n_exp, std::vector<int32_t> &perm,
    std::vector<int4> &tile)
{
	std::vector<int> cnt(n_exp + 1, 0), first(n_exp + 1, 0);

	for (int s = 0; s < ns; s++)
		cnt[ids[s] >= 0 && ids[s] < n_exp ? ids[s] : n_exp]++;
	for (int b = 1; b <= n_exp; b++)
		first[b] = first[b - 1] + cnt[b - 1];
	perm.assign((size_t)ns + GPU_MOE_MT, 0);
	std::vector<int> at(first);
	for (int s = 0; s < ns; s++)
		perm[at[ids[s] >= 0 && ids[s] < n_exp ? ids[s] : n_exp]++] = s;
	tile.clear();
	for (int b = 0; b <= n_exp; b++)
		for (int i = 0; GPU_MOE_MT * i < cnt[b]; i++) {
			int c = cnt[b] - GPU_MOE_MT * i;
			int w = perturb == 3 ? i + 1 : i;
			tile.push_back(int4{ b, first[b] + GPU_MOE_MT * i, c < GPU_MOE_MT ? c :
			    GPU_MOE_MT, w });
		}
	for (int i = 0; i < 3; i++)
		tile.push_back(int4{ 0, 0, 0, 0 });
	return (int)tile.size();
}

static uint64_t rs = 0x9E3779B97F4A7C15ULL;
static uint64_t rnd(void) { rs ^= rs >> 12; rs ^= rs << 25; rs ^= rs >> 27; return rs * 0x2545F4914F6CDD1DULL; }
static float unif(void) { return (float)((rnd() >> 40) * 0x1p-24) * 2.0f - 1.0f; }

static long nchecks, nfail;

/* the GEMM for ids into y (NaN bytes first); the launches' grid as mg_type's */
static void
run(int t, const uint8_t *W, size_t rowbytes, int64_t rows, int64_t ne0, int n_exp,
    const int32_t *ids, int ns, int per, const float *x, const float *scale, float *y)
{
	static uint8_t *sm;
	std::vector<int32_t> perm;
	std::vector<int4> tile;
	int nt = group(ids, ns, n_exp, perm, tile);
	int64_t nr = (int64_t)ns + MG_BN;
	std::vector<uint16_t> xg((size_t)nr * ne0, 0);
	size_t smb = sizeof(uint16_t) * 2 * (MG_BM + MG_BN) * MG_LD;

	for (int64_t i = 0; i < ns + GPU_MOE_MT; i++)	/* k_moe_xg */
		for (int64_t c = 0; c < ne0; c++)
			xg[(size_t)i * ne0 + c] = bf16_bits(x[(size_t)(perm[i] / per) * ne0 + c]);
	if (sm == NULL && (sm = (uint8_t *)aligned_alloc(16, smb)) == NULL)
		abort();
	memset(y, 0xFF, (size_t)ns * rows * 4);
	gemm_job J = { (uint16_t (*)[MG_BM][MG_LD])sm,
	    (uint16_t (*)[MG_BN][MG_LD])(sm + sizeof(uint16_t) * 2 * MG_BM * MG_LD), W, rowbytes,
	    rows, ne0, n_exp, nt, tile.data(), perm.data(), xg.data(), y, scale };
	sm_lo = sm, sm_hi = sm + smb;
	for (unsigned by = 0; by < (unsigned)nt; by++)
		for (unsigned bx = 0; bx < (unsigned)((rows + MG_BM - 1) / MG_BM); bx++) {
			memset(sm, 0xFF, smb);	/* garbage: NaN bf16 */
			block(bx, by, pick(t), &J);
		}
}

/* the routings: 0 runs (0, 1, 5, 17, 32, 40, 16, 9, 70 an expert, the rest
 * at random, shuffled, ill ids), 1 all on the last expert */
static void
route(int32_t *ids, int ns, int n_exp, int how)
{
	static const int runs[] = { 0, 1, 5, 17, 32, 40, 16, 9, 70 };
	int s = 0;

	for (int e = 0; how == 0 && e < n_exp; e++)
		for (int i = 0; i < runs[e % 9] && s < ns; i++)
			ids[s++] = e;
	for (; s < ns; s++)
		ids[s] = how == 1 ? n_exp - 1 : (int32_t)(rnd() % (uint64_t)n_exp);
	for (int i = ns - 1; how == 0 && i > 0; i--) {
		int j = (int)(rnd() % (uint64_t)(i + 1));
		int32_t v = ids[i];
		ids[i] = ids[j], ids[j] = v;
	}
	const int32_t bad[] = { -1, n_exp, INT32_MIN, INT32_MAX };
	for (int i = 0; how == 0 && i < 4 && i < ns; i++)
		ids[rnd() % (uint64_t)ns] = bad[i];
}

static void
check(int t, int n_exp, int64_t rows, int64_t ne0, int nx, int per, int how, int sc)
{
	int ns = nx * per;
	size_t rowbytes = quant_row_size(t, ne0);
	std::vector<float> wf((size_t)n_exp * rows * ne0), x((size_t)nx * ne0);
	std::vector<uint8_t> W(rowbytes * n_exp * rows + 64);
	std::vector<float> y((size_t)ns * rows), y2((size_t)ns * rows);
	std::vector<int32_t> ids(ns), id2(ns);
	float scale = 0.75f;
	double worst = 0;
	long bad = 0, unwritten = 0, same = 0, differ = 0;

	for (auto &v : wf)
		v = unif() * (rnd() % 13 == 0 ? 4.0f : 1.0f);
	for (int64_t r = 0; r < (int64_t)n_exp * rows; r++)
		if (quant_quantize_row(t, wf.data() + (size_t)r * ne0, W.data() + r * rowbytes, ne0,
		    NULL) != 0 || quant_dequantize_row(t, W.data() + r * rowbytes,
		    wf.data() + (size_t)r * ne0, ne0) != 0)
			abort();
	for (auto &v : x)
		v = unif();
	route(ids.data(), ns, n_exp, how);
	run(t, W.data(), rowbytes, rows, ne0, n_exp, ids.data(), ns, per, x.data(),
	    sc ? &scale : NULL, y.data());
	for (int s = 0; s < ns; s++)
		for (int64_t r = 0; r < rows; r++) {
			float g = y[(size_t)s * rows + r];
			uint32_t gb;
			memcpy(&gb, &g, 4);
			nchecks++;
			if (gb == 0xFFFFFFFFu) {
				unwritten++;
				continue;
			}
			int e = ids[s];
			if (e < 0 || e >= n_exp) {
				bad += !isnan(g);
				continue;
			}
			const float *wr = wf.data() + ((size_t)e * rows + r) * ne0;
			const float *xr = x.data() + (size_t)(s / per) * ne0;
			double v = 0, m = 0;
			for (int64_t i = 0; i < ne0; i++) {
				double p = (double)bf16_float(bf16_bits(wr[i])) *
				    bf16_float(bf16_bits(xr[i]));
				v += p, m += fabs(p);
			}
			double f = sc ? scale : 1.0, d = fabs(g - v * f);
			if (!(d <= 1e-5 * (m * f + 1e-30)))
				bad++;
			if (d > worst || d != d)
				worst = d;
		}
	for (int s = 0; s < ns; s++)
		id2[s] = s % 3 == 0 ? ids[s] : (int32_t)(rnd() % (uint64_t)n_exp);
	run(t, W.data(), rowbytes, rows, ne0, n_exp, id2.data(), ns, per, x.data(),
	    sc ? &scale : NULL, y2.data());
	for (int s = 0; s < ns; s += 3)
		for (int64_t r = 0; r < rows; r++) {
			nchecks++;
			if (memcmp(&y[(size_t)s * rows + r], &y2[(size_t)s * rows + r], 4) == 0)
				same++;
			else
				differ++;
		}
	int ok = bad == 0 && unwritten == 0 && differ == 0;
	nfail += bad + unwritten + differ;
	printf("%s %d of %lldx%lld ns=%d/%d %s%s: worst %.3g, %ld off, %ld unwritten, alone "
	    "%ld same %ld differ: %s\n", quant_name(t), n_exp, (long long)rows, (long long)ne0, ns,
	    per, how ? "one" : "runs", sc ? " *s" : "", worst, bad, unwritten, same, differ,
	    ok ? "OK" : "FAIL");
}

int
main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "-p") == 0)
		perturb = atoi(argv[2]);
	else if (argc != 1) {
		fprintf(stderr, "usage: moe-gemm-kern [-p N]\n");
		return 2;
	}
	static const int ts[] = { QUANT_Q8_0, QUANT_Q4_0, QUANT_Q4_K };
	for (int i = 0; i < 3; i++) {
		int t = ts[i], k = t == QUANT_Q4_K;
		check(t, 12, 37, k ? 256 : 64, 30, 8, 0, 0);
		check(t, 10, 64, k ? 512 : 128, 40, 8, 0, 1);
		check(t, 4, 100, 256, 90, 1, 1, 0);
	}
	printf("%ld checks, %ld failed%s\n", nchecks, nfail, perturb ? " (perturbed model)" : "");
	return nfail != 0;
}
