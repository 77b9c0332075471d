/*
 * moe-route-kern: cuda/moe_route.cuh's own device code (k_moe_route, the
 * mixture of experts' router) run on the CPU, one block (a warp) a row,
 * its 32 lanes as coroutines (tools/kern-coro.h) with __shfl_xor_sync,
 * __shfl_sync and __syncwarp as the warp's collectives, its shared memory
 * starting as NaN; against the router's documented order of operations
 * computed here row by row with the same expf and sigmoid (the host's): p
 * = exp(x - max) summed in index order, each divided by the sum (softmax),
 * or sigmoid(x) and the key p + bias; k picks of the largest key left, the
 * lower id on ties, keys that are NaN never picked by the softmax router
 * (an empty pick: id -1, weight NaN); the weights p / (their sum in pick order) (softmax), (norm ?
 * p / sum : p) * scale (sigmoid); each times es[its id] where es is given.
 * Ids and weights must be the same bits, for softmax and sigmoid routers,
 * with and without a bias, norm, scale and per-expert scales, top 1 to 40
 * (past 32 picks, the lanes' own picks and the later ones lane 0 keeps) of
 * 8 to 256 experts, rows with ties, a row with NaN logits (softmax), rows
 * ldx apart.
 * -p N perturbs the reference (1: the higher id on ties, 2: the weights'
 * sum in reverse pick order, 3: no per-expert scale past pick 32): each
 * must fail.
 * Build (t/emu.bats), in a directory D:
 *   g++ -O1 -std=c++17 -ffp-contract=off -Wno-unknown-pragmas -Icuda \
 *       -o D/route-kern tools/moe-route-kern.cc
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --- the CUDA the device code uses --------------------------------------- */

#include "kern-cuda.h"
/* gpu_impl.cuh's, with the host's expf */
static inline float gpu_sigmoid(float x) { return __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-x))); }

/* --- the warp: 32 coroutines (tools/kern-coro.h) -------------------------- */

#define KC_NAME "moe-route-kern"
#define KC_NTH 32
#define KC_LANE \
	uint32_t v;	/* at a shuffle: its value's bits, then the result's */ \
	int arg;	/* the xor offset or the source lane */
#include "kern-coro.h"

enum { AT_XOR, AT_IDX, AT_SYNC };	/* the warp's collectives (KC_WARP + these) */

static void
kc_warp(int w, int kind)
{
	uint32_t v[32];
	thr *t = th + 32 * w;

	for (int l = 0; l < 32; l++)
		v[l] = t[l].v;
	for (int l = 0; l < 32; l++) {
		if (kind == AT_XOR && t[l].arg != t[0].arg)
			cur = 32 * w + l, die("lanes of one shuffle at different offsets");
		if (kind == AT_XOR)
			t[l].v = v[l ^ t[l].arg];
		else if (kind == AT_IDX)
			t[l].v = v[t[l].arg & 31];
		t[l].state = KC_RUN;
	}
}

static const char *
kc_what(int kind)
{
	return kind == AT_XOR ? "a __shfl_xor_sync" : kind == AT_IDX ? "a __shfl_sync" :
	    "a __syncwarp";
}

static uint32_t
shfl(int kind, uint32_t v, int arg)
{
	th[cur].v = v, th[cur].arg = arg;
	yield(KC_WARP + kind);
	return th[cur].v;
}

/* a float through the shuffle of that kind, as its bits */
static float
shflf(int kind, float v, int arg)
{
	uint32_t u;

	memcpy(&u, &v, 4);
	u = shfl(kind, u, arg);
	memcpy(&v, &u, 4);
	return v;
}

static float
__shfl_xor_sync(unsigned mask, float v, int o)
{
	(void)mask;
	return shflf(AT_XOR, v, o);
}

static int
__shfl_xor_sync(unsigned mask, int v, int o)
{
	(void)mask;
	return (int)shfl(AT_XOR, (uint32_t)v, o);
}

static float
__shfl_sync(unsigned mask, float v, int src)
{
	(void)mask;
	return shflf(AT_IDX, v, src);
}

static void
__syncwarp(void)
{
	shfl(AT_SYNC, 0, 0);
}

enum { NMAX = 256 };
static float rt_sm[NMAX * 3];	/* k_moe_route's dynamic shared memory: 9 n bytes */
#include "moe_route.cuh"

/* --- the rows ------------------------------------------------------------ */

static int perturb;	/* -p */
static long nchecks, nfail;

static uint64_t rs = 88172645463325252ull;

static double
unif(void)
{
	rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
	return (double)(rs >> 11) / 9007199254740992.0;
}

/* The router's order of operations for row x (n logits): ids[k], w[k]. */
static void
route_ref(int sig, const float *x, int n, int k, const float *bias, int norm, float scale,
    const float *es, int32_t *ids, float *w)
{
	float p[NMAX], key[NMAX], sum = 0.0f, tot = 0.0f;
	char taken[NMAX] = { 0 };

	if (!sig) {
		float mx = x[0];
		for (int i = 0; i < n; i++)
			mx = x[i] > mx ? x[i] : mx;
		for (int i = 0; i < n; i++)
			sum = __fadd_rn(sum, p[i] = expf(__fsub_rn(x[i], mx)));
		for (int i = 0; i < n; i++)
			key[i] = p[i] = __fdiv_rn(p[i], sum);
	} else
		for (int i = 0; i < n; i++) {
			p[i] = gpu_sigmoid(x[i]);
			key[i] = bias != NULL ? __fadd_rn(p[i], bias[i]) : p[i];
		}
	for (int j = 0; j < k; j++) {
		int b = -1;
		for (int i = 0; i < n; i++)
			if (!taken[i] && (sig || key[i] >= 0.0f) && (b < 0 || key[i] > key[b] ||
			    (perturb == 1 && key[i] == key[b])))
				b = i;
		ids[j] = b;
		w[j] = b >= 0 ? p[b] : NAN;
		if (b >= 0)
			taken[b] = 1;
	}
	if (perturb == 2)
		for (int j = k - 1; j >= 0; j--)
			tot = ids[j] >= 0 ? __fadd_rn(tot, w[j]) : tot;
	else
		for (int j = 0; j < k; j++)
			tot = ids[j] >= 0 ? __fadd_rn(tot, w[j]) : tot;
	for (int j = 0; j < k; j++) {
		w[j] = sig ? __fmul_rn(norm ? __fdiv_rn(w[j], tot) : w[j], scale) :
		    __fdiv_rn(w[j], tot);
		if (es != NULL && ids[j] >= 0 && !(perturb == 3 && j >= 32))
			w[j] = __fmul_rn(w[j], es[ids[j]]);
	}
}

struct args {
	const float *x, *bias, *es;
	int64_t ldx;
	int n, k, norm, sig;
	float scale;
	int32_t *ids;
	float *w;
};

static void
run_row(void *p)
{
	const args *a = (const args *)p;

	if (a->sig)
		k_moe_route<1>(a->x, a->ldx, a->n, a->k, a->bias, a->norm, a->scale, a->es, a->ids,
		    a->w);
	else
		k_moe_route<0>(a->x, a->ldx, a->n, a->k, a->bias, a->norm, a->scale, a->es, a->ids,
		    a->w);
}

/* m rows of n logits ldx apart (kind: 0 random, 1 ties, 2 NaNs in row 1) through the kernel's
 * text and the reference */
static void
check(int sig, int n, int k, int kind, int withbias, int norm, float scale, int withes)
{
	enum { M = 3 };
	int64_t ldx = n + 3;
	float *x = (float *)malloc(sizeof(float) * M * ldx), bias[NMAX], es[NMAX];
	int32_t ids[M * 40], rids[40];
	float w[M * 40], rw[40];
	int bad = 0;

	for (int64_t i = 0; i < M * ldx; i++)
		x[i] = kind == 1 ? (float)((int)(unif() * 4)) * 0.5f : (float)(unif() * 8 - 4);
	if (kind == 2)
		for (int i = 0; i < n; i += 3)
			x[ldx + i] = NAN;
	for (int i = 0; i < n; i++)
		bias[i] = (float)(unif() - 0.5), es[i] = (float)(0.5 + unif());
	for (int r = 0; r < M; r++) {
		/* (the launch's pointers: the kernel finds row blockIdx.x) */
		args a = { x, withbias ? bias : NULL, withes ? es : NULL, ldx, n, k, norm, sig,
		    scale, ids, w };
		for (int i = 0; i < NMAX * 3; i++)
			rt_sm[i] = NAN;
		block((unsigned)r, 0, run_row, &a);
	}
	for (int r = 0; r < M; r++) {
		route_ref(sig, x + r * ldx, n, k, withbias ? bias : NULL, norm, scale,
		    withes ? es : NULL, rids, rw);
		for (int j = 0; j < k; j++) {
			nchecks++;
			if (ids[r * k + j] != rids[j] || memcmp(&w[r * k + j], &rw[j], 4) != 0)
				bad++;
		}
	}
	nfail += bad;
	if (bad || perturb == 0)
		printf("%s n=%d top %d%s%s%s%s%s: %s\n", sig ? "sigmoid" : "softmax", n, k,
		    kind == 1 ? " ties" : kind == 2 ? " NaN row" : "", withbias ? " bias" : "",
		    norm ? " norm" : "", scale != 1.0f ? " scale" : "", withes ? " es" : "",
		    bad ? "DIFFER" : "OK");
	free(x);
}

int
main(int argc, char **argv)
{
	static const int ns[] = { 8, 33, 64, 128, 256 }, ks[] = { 1, 2, 8, 31, 32, 33, 40 };

	if (argc == 3 && strcmp(argv[1], "-p") == 0)
		perturb = atoi(argv[2]);
	else if (argc != 1) {
		fprintf(stderr, "usage: moe-route-kern [-p N]\n");
		return 2;
	}
	for (int sig = 0; sig < 2; sig++)
		for (size_t ni = 0; ni < sizeof ns / sizeof *ns; ni++)
			for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++) {
				int n = ns[ni], k = ks[ki];
				if (k > n)
					continue;
				/* (NaN logits: the softmax router's; the sigmoid router's
				 * picks among NaN keys are not the CPU's scan) */
				for (int kind = 0; kind < 3 - sig; kind++)
					check(sig, n, k, kind, sig && kind != 1, sig && k % 2, sig && n > 64 ?
					    2.5f : 1.0f, k % 3 != 0);
			}
	printf("%ld checks, %ld failed%s\n", nchecks, nfail, perturb ? " (perturbed model)" : "");
	return nfail != 0;
}
