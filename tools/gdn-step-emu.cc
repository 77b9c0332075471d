/*
 * gdn-step-emu: the CUDA backend's recurrent delta-rule kernels (k_gdn,
 * k_gdn_pad, k_gdn_wide and their _seqs forms, cuda/gdn_step.cuh) run
 * on the CPU, for a machine without a GPU (not built by make).  The
 * kernels' own text, the header as cuda/ has it, is compiled as host
 * C++ over a small shim: a block is 128 std::threads, __syncthreads a
 * barrier of them, a warp shuffle an exchange between barriers of its 32,
 * __shared__ a static (blocks run one at a time).  Against the recurrent
 * form in double (lib/backend.h's definition) at kernel-check's step
 * tolerance, |got - ref| <= 1e-4 (1 + |ref|); an m-row call against m
 * one-row calls, the snapshots against those calls' states and a group of
 * sequences against a call a sequence, bit for bit; k_gdn_pad at dk = DK
 * against k_gdn<DK>, bit for bit.  The host's expf and sqrtf are not the
 * GPU's, so this shows the indexing, the masks and the order of sums, not
 * the GPU's bits.  Keep the shim in step with the kernels' needs.
 * make check runs it as below, in a temporary directory (t/emu.bats):
 *   g++ -O1 -std=c++20 -pthread -ffp-contract=off -Icuda -o /tmp/gstep tools/gdn-step-emu.cc &&
 *   /tmp/gstep
 */
#include <barrier>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <thread>
#include <vector>

#include "gdn-ref.h"

struct dim3 { unsigned x, y, z; };
struct float2 { float x, y; };
static inline float2 make_float2(float x, float y) { return float2{ x, y }; }
static thread_local dim3 threadIdx, blockIdx;
static dim3 blockDim;
static std::barrier<> *blk_bar, *warp_bar[4];
static float xch[4][32];

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static	/* one block at a time: its threads share it */

static inline void pdl_enter(void) {}
static inline void __syncthreads(void) { blk_bar->arrive_and_wait(); }
static inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }

static inline float
__shfl_xor_sync(unsigned, float v, int x)
{
	int w = threadIdx.x >> 5, l = threadIdx.x & 31;
	float r;

	warp_bar[w]->arrive_and_wait();	/* the last exchange read */
	xch[w][l] = v;
	warp_bar[w]->arrive_and_wait();
	r = xch[w][l ^ x];
	return r;
}

static inline float d_sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
static inline float d_softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

#include "gdn_step.cuh"

/* The blocks of grid, one at a time, 128 threads each running f. */
template <class F>
static void
launch(dim3 grid, F f)
{
	blockDim = dim3{ 128, 1, 1 };
	for (unsigned z = 0; z < grid.z; z++)
		for (unsigned y = 0; y < grid.y; y++)
			for (unsigned x = 0; x < grid.x; x++) {
				std::barrier<> b(128), w0(32), w1(32), w2(32), w3(32);
				std::vector<std::thread> th;

				blk_bar = &b, warp_bar[0] = &w0, warp_bar[1] = &w1;
				warp_bar[2] = &w2, warp_bar[3] = &w3;
				for (unsigned t = 0; t < 128; t++)
					th.emplace_back([=] {
						threadIdx = dim3{ t, 0, 0 };
						blockIdx = dim3{ x, y, z };
						f();
					});
				for (auto &t : th)
					t.join();
			}
}

/* gdn_launch's choice (cuda/backend_cuda_gdn.cu); force_pad: k_gdn_pad even at 16/32/64/128. */
#define PAD(DK) (Q ? launch(nb, [&] { k_gdn_pad_seqs<DK>(P, *Q); }) : \
		    launch(nb, [&] { k_gdn_pad<DK>(P); }))
#define REG(DK) (Q ? launch(nb, [&] { k_gdn_seqs<DK>(A, *Q); }) : \
		    launch(nb, [&] { k_gdn<DK>(A); }))
static void
run(const gdn_args &A, int dk, const cu_seqs *Q, unsigned nz, int force_pad)
{
	int wide = dk > GDN_DK_REG;
	unsigned cols = wide ? 128 : GDN_COLS;
	dim3 nb{ (unsigned)A.nv, (unsigned)((A.dv + cols - 1) / cols), nz };
	gdn_pargs P;

	(gdn_args &)P = A, P.dk = dk;
	if (wide) {
		if (Q)
			launch(nb, [&] { k_gdn_wide_seqs(A, *Q, dk); });
		else
			launch(nb, [&] { k_gdn_wide(A, dk); });
		return;
	}
	switch (force_pad ? 0 : dk) {
	case 16: REG(16); return;
	case 32: REG(32); return;
	case 64: REG(64); return;
	case 128: REG(128); return;
	}
	switch ((dk + 15) / 16) {
	case 1: PAD(16); break;
	case 2: PAD(32); break;
	case 3: PAD(48); break;
	case 4: PAD(64); break;
	case 5: PAD(80); break;
	case 6: PAD(96); break;
	case 7: PAD(112); break;
	default: PAD(128); break;
	}
}

static uint64_t rs = 88172645463325252ULL;
static uint64_t rnd(void) { rs ^= rs >> 12; rs ^= rs << 25; rs ^= rs >> 27; return rs * 0x2545F4914F6CDD1DULL; }
static float unif(float lo, float hi) { return lo + (hi - lo) * (float)((rnd() >> 40) * 0x1p-24); }
static void fill(std::vector<float> &v, float lo, float hi) { for (auto &x : v) x = unif(lo, hi); }

/* the recurrent form in double (gdn-ref.h) */
static void
ref(const gdn_args &A, int dk, std::vector<double> &S, std::vector<double> &o)
{
	gdn_ref(A, dk, S.data(), o.data());
}

static int nfail;

static void
check(const char *what, const char *shape, int ok, double maxd)
{
	printf("%-28s %-30s maxdiff=%-10.3g %s\n", what, shape, maxd, ok ? "OK" : "FAIL");
	nfail += !ok;
}

static void
close_to(const char *what, const char *shape, const float *got, const double *want, size_t n)
{
	double maxd = 0;
	int ok = 1;

	for (size_t i = 0; i < n; i++) {
		double d = fabs(got[i] - want[i]);
		if (!(d <= 1e-4 * (1 + fabs(want[i]))))
			ok = 0;
		maxd = d > maxd || d != d ? d : maxd;
	}
	check(what, shape, ok, maxd);
}

static void
same(const char *what, const char *shape, const std::vector<float> &a, const std::vector<float> &b)
{
	double maxd = 0;

	for (size_t i = 0; i < a.size(); i++)
		maxd = fmax(maxd, fabs((double)a[i] - b[i]));
	check(what, shape, a.size() == b.size() && memcmp(a.data(), b.data(), a.size() * 4) == 0,
	    maxd);
}

/* One shape: m rows, nk/nv heads of dk/dv, n sequences for the _seqs form. */
static void
shape(int m, int nk, int nv, int dk, int dv, int tiled, int hf)
{
	int ld = 2 * nk * dk + nv * dv + 8;
	size_t hs = (size_t)nv * dk * dv, od = (size_t)nv * dv;
	std::vector<float> qkv((size_t)m * ld), a((size_t)m * nv), b((size_t)m * nv), sa(nv), dt(nv);
	std::vector<float> S0(hs), S(hs), snap((size_t)m * hs), o((size_t)m * od);
	std::vector<double> Sd(hs), od_(m * od);
	char sh[64];

	fill(qkv, -1, 1), fill(a, -3, 3), fill(b, -3, 3), fill(sa, -2, -0.1f), fill(dt, -1, 1);
	fill(S0, -0.5f, 0.5f);
	snprintf(sh, sizeof sh, "m=%d k%dx%d v%dx%d%s%s", m, nk, dk, nv, dv, tiled ? " tiled" : "",
	    hf ? " hf" : "");
	gdn_args A = { qkv.data(), a.data(), b.data(), sa.data(), dt.data(), S.data(), snap.data(),
	    o.data(), ld, m, nk, nv, dv, tiled, hf, 1e-6f };

	/* the m-row call against the double reference */
	S = S0;
	run(A, dk, NULL, 1, 0);
	for (size_t i = 0; i < hs; i++)
		Sd[i] = S0[i];
	ref(A, dk, Sd, od_);
	close_to("emu gdn out", sh, o.data(), od_.data(), o.size());
	close_to("emu gdn state", sh, S.data(), Sd.data(), hs);

	/* m one-row calls: the same bits, their states the snapshots */
	std::vector<float> o1(o.size()), S1 = S0, snap1(snap.size());
	for (int r = 0; r < m; r++) {
		gdn_args B = A;
		B.qkv += (size_t)r * ld, B.a += (size_t)r * nv, B.b += (size_t)r * nv;
		B.o = o1.data() + r * od, B.S = S1.data(), B.snap = NULL, B.m = 1;
		run(B, dk, NULL, 1, 0);
		memcpy(snap1.data() + r * hs, S1.data(), hs * 4);
	}
	same("emu gdn m=1xm", sh, o1, o);
	same("emu gdn state 1xm", sh, S1, S);
	same("emu gdn snap", sh, snap1, snap);

	/* k_gdn_pad at dk = DK: k_gdn's bits */
	if (dk == 16 || dk == 32 || dk == 64 || dk == 128) {
		std::vector<float> op(o.size()), Sp = S0;
		gdn_args B = A;
		B.o = op.data(), B.S = Sp.data(), B.snap = NULL;
		run(B, dk, NULL, 1, 1);
		same("emu gdn pad = k_gdn", sh, op, o);
	}

	/* three sequences of rows 2, 1, m - 3 (one of none when m = 3), each its own
	 * state and snapshots: one _seqs launch against a call a sequence */
	int rows[3] = { 2, 1, m - 3 };
	std::vector<float> Sq(3 * hs), snq((size_t)m * hs), oq(o.size());
	std::vector<float> Sc(3 * hs), snc((size_t)m * hs), oc(o.size());
	cu_seqs Q = {};
	for (int i = 0, r0 = 0; i < 3; r0 += rows[i++]) {
		memcpy(Sq.data() + i * hs, S0.data(), hs * 4);
		memcpy(Sc.data() + i * hs, S0.data(), hs * 4);
		Q.s[i] = cu_seq{ Sq.data() + i * hs, snq.data() + r0 * hs, r0, rows[i] };
		gdn_args B = A;
		B.qkv += (size_t)r0 * ld, B.a += (size_t)r0 * nv, B.b += (size_t)r0 * nv;
		B.o = oc.data() + r0 * od, B.S = Sc.data() + i * hs, B.snap = snc.data() + r0 * hs;
		B.m = rows[i];
		if (rows[i] > 0)
			run(B, dk, NULL, 1, 0);
	}
	gdn_args B = A;
	B.o = oq.data(), B.S = NULL, B.snap = NULL, B.m = 0;
	run(B, dk, &Q, 3, 0);
	same("emu gdn seqs out", sh, oq, oc);
	same("emu gdn seqs state", sh, Sq, Sc);
	same("emu gdn seqs snap", sh, snq, snc);
}

int
main(void)
{
	shape(5, 2, 4, 80, 80, 1, 0);	/* k_gdn_pad<80>: the trained model's heads */
	shape(4, 2, 4, 80, 160, 0, 1);
	shape(3, 2, 4, 20, 40, 1, 0);	/* k_gdn_pad<32>, 20 of them used */
	shape(4, 4, 8, 48, 96, 0, 1);
	shape(3, 2, 6, 96, 128, 1, 0);
	shape(3, 1, 2, 100, 300, 0, 0);	/* k_gdn_pad<112>, value heads past 256 */
	shape(4, 1, 2, 160, 64, 1, 1);	/* k_gdn_wide */
	shape(3, 1, 2, 300, 40, 0, 0);
	shape(4, 2, 4, 64, 64, 1, 0);	/* k_gdn<64>; k_gdn_pad<64> at 64 its bits */
	shape(3, 1, 2, 128, 64, 0, 1);
	shape(3, 2, 4, 16, 40, 1, 0);
	printf(nfail ? "FAILED: %d\n" : "ALL GREEN\n", nfail);
	return nfail != 0;
}
