/*
 * gdn-chunk-emu: a CPU model of k_gdn_prep and k_gdn_chunk
 * (cuda/backend_cuda_gdn.cu) for a machine without a GPU (not built by make).
 * It includes the kernels' phases (cuda/gdn_chunk.cuh) and runs them block
 * by block, thread by thread between the kernels' barriers (in reverse
 * order, then in order: other bits would mean a phase reads what another
 * thread writes in it), the prompt in pieces as gdn_chunk_run splits it
 * (here of 192 rows),
 * then compares the output and the final state with the recurrent form in
 * double (lib/backend.h's definition) at kernel-check's chunk tolerance,
 * |got - ref| <= 1e-3 (1 + |ref|), on kernel-check's input ranges and on
 * slow decay with keys alike.  Keep it in step with the kernel.
 * make check runs it as below, in a temporary directory (t/emu.bats):
 *   g++ -O1 -std=c++17 -ffp-contract=off -Icuda -o /tmp/gemu tools/gdn-chunk-emu.cc && /tmp/gemu
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include "gdn-ref.h"

struct alignas(16) float4 { float x, y, z, w; };
static inline float4 make_float4(float x, float y, float z, float w) { return float4{ x, y, z, w }; }
#include "gdn_chunk.cuh"

enum { PIECE = 192 };	/* rows a pair of launches (GDNC_PIECE in the backend) */

static uint64_t rs = 88172645463325252ULL;
static uint64_t rnd(void) { rs ^= rs >> 12; rs ^= rs << 25; rs ^= rs >> 27; return rs * 0x2545F4914F6CDD1DULL; }
static float unif(float lo, float hi) { return lo + (hi - lo) * (float)((rnd() >> 40) * 0x1p-24); }

/* the kernels, one block at a time, every phase over all threads: k_gdn_prep
 * over (head, chunk), then k_gdn_chunk over (head, columns) */
#define T(n) (int x = 0; x < (n); x++) { int tid = rev ? (n) - 1 - x : x;
template <int DK, int DKR = DK>
static void
emu(const gdnc_args &A, int rev)
{
	std::vector<float4> mem(gdnc_dim<DK>::FLOATS / 4 + 1);
	std::vector<float4> pmem(gdnc_dim<DK>::PREP_FLOATS / 4 + 1);
	std::vector<float> ys((size_t)GDNC_NT * 8);
	int nc = (A.m + GDNC_C - 1) / GDNC_C;

	for (int h = 0; h < A.nv; h++)
		for (int n = 0; n < nc; n++) {
			gdnc_sh s;
			int t0 = n * GDNC_C, L = A.m - t0 < GDNC_C ? A.m - t0 : GDNC_C;
			int kh = A.v_tiled ? h % A.nk : h / (A.nv / A.nk);
			gdnc_part pt = gdnc_part_of(A, n, h);

			memset(pmem.data(), 0xff, pmem.size() * sizeof pmem[0]);	/* NaN: unwritten reads show */
			gdnc_carve_prep<DK>((float *)pmem.data(), &s);
			if (((uintptr_t)s.k | (uintptr_t)s.A) & 15)
				fprintf(stderr, "misaligned shared memory\n"), exit(1);
			for T(GDNC_NT) gdnc_load<DK, DKR>(A, s, h, kh, t0, L, tid); }
			for T(GDNC_NT) gdnc_norm<DK, DKR>(A, s, tid); }
			for T(GDNC_NT) gdnc_scale<DK>(s, L, tid); }
			for T(GDNC_NT) gdnc_prep_prod<DK>(s, pt, tid); }
			for T(GDNC_C) gdnc_prep_solve(s, pt, tid); }
		}
	for (int h = 0; h < A.nv; h++)
		for (int by = 0; by < A.dv / GDNC_VS; by++) {
			gdnc_sh s;
			int j0 = by * GDNC_VS, kh = A.v_tiled ? h % A.nk : h / (A.nv / A.nk);
			float *Sh = A.S + (size_t)h * DKR * A.dv;

			memset(mem.data(), 0xff, mem.size() * sizeof mem[0]);
			gdnc_carve<DK>((float *)mem.data(), &s);
			if (((uintptr_t)s.k | (uintptr_t)s.S | (uintptr_t)s.P | (uintptr_t)s.Tb |
			    (uintptr_t)s.X | (uintptr_t)s.V) & 15)
				fprintf(stderr, "misaligned shared memory\n"), exit(1);
			for (int i = 0; i < DK * GDNC_VS; i++)	/* the padding's rows zero */
				s.S[i] = i < DKR * GDNC_VS ?
				    Sh[(size_t)(i / GDNC_VS) * A.dv + j0 + i % GDNC_VS] : 0.0f;
			for (int t0 = 0; t0 < A.m; t0 += GDNC_C) {
				int L = A.m - t0 < GDNC_C ? A.m - t0 : GDNC_C;
				gdnc_part pt = gdnc_part_of(A, t0 / GDNC_C, h);

				for T(GDNC_NT) gdnc_mload<DK, DKR>(A, s, pt, kh, t0, L, tid); }
				for T(GDNC_NT) gdnc_ksqs<DK, DKR>(A, s, h, j0, t0, L, tid, &ys[(size_t)tid * 8]); }
				for T(GDNC_NT) gdnc_tx(s, tid); }
				for T(GDNC_NT) gdnc_out<DK>(A, s, h, j0, t0, L, tid, &ys[(size_t)tid * 8]); }
			}
			for (int i = 0; i < DKR * GDNC_VS; i++)
				Sh[(size_t)(i / GDNC_VS) * A.dv + j0 + i % GDNC_VS] = s.S[i];
		}
}
#undef T

/* the recurrent form in double (gdn-ref.h) */
static void
ref(const gdnc_args &A, int dk, double *S, double *o)
{
	gdn_ref(A, dk, S, o);
}

static int
cmp(const char *what, const float *got, const double *want, size_t n)
{
	double maxd = 0, maxr = 0;
	int ok = 1;

	for (size_t i = 0; i < n; i++) {
		double d = fabs(got[i] - want[i]);

		if (!(d <= 1e-3 * (1 + fabs(want[i]))))
			ok = 0;
		if (d > maxd || d != d)
			maxd = d;
		if (fabs(want[i]) > maxr)
			maxr = fabs(want[i]);
	}
	printf("  %-6s max |d| %.3g (max |ref| %.3g) %s\n", what, maxd, maxr, ok ? "ok" : "FAIL");
	return ok;
}

static int
shape(int m, int nk, int nv, int dk, int dv, int tiled, int hf, float alo = -2, float ahi = -0.1f,
    float kn = 0)
{
	int ld = 2 * nk * dk + nv * dv + 8;
	size_t hs = (size_t)nv * dk * dv, no = (size_t)m * nv * dv;
	std::vector<float> qkv((size_t)m * ld), a((size_t)m * nv), b((size_t)m * nv), sa(nv),
	    dt(nv), S(hs), o(no, NAN);
	std::vector<double> Sd(hs), od(no);
	std::vector<float> scr((size_t)(m + GDNC_C - 1) / GDNC_C * nv * GDNC_PREP);
	gdnc_args A = { qkv.data(), a.data(), b.data(), sa.data(), dt.data(), S.data(), o.data(),
	    scr.data(), ld, m, nk, nv, dv, tiled, hf, 1e-6f };
	int ok;

	for (auto &x : qkv) x = unif(-1, 1);
	if (kn > 0)	/* keys alike: row 0's keys plus noise of kn */
		for (int r = 1; r < m; r++)
			for (int i = 0; i < nk * dk; i++)
				qkv[(size_t)r * ld + nk * dk + i] = qkv[nk * dk + i] + kn * unif(-1, 1);
	for (auto &x : a) x = unif(-3, 3);
	for (auto &x : b) x = unif(-3, 3);
	for (auto &x : sa) x = unif(alo, ahi);
	for (auto &x : dt) x = unif(-1, 1);
	for (size_t i = 0; i < hs; i++)
		S[i] = unif(-0.5f, 0.5f), Sd[i] = S[i];
	std::vector<float> S0 = S, o1, S1;
	ref(A, dk, Sd.data(), od.data());
	for (int rev = 1; rev >= 0; rev--) {	/* threads in reverse order, then in order */
		S = S0;
		for (int r0 = 0; r0 < m; r0 += PIECE) {	/* gdn_chunk_run's loop */
			gdnc_args P = A;

			P.m = m - r0 < PIECE ? m - r0 : PIECE;
			P.qkv = A.qkv + (size_t)r0 * ld;
			P.a = A.a + (size_t)r0 * nv;
			P.b = A.b + (size_t)r0 * nv;
			P.o = A.o + (size_t)r0 * nv * dv;
			memset(scr.data(), 0xff, scr.size() * 4);
			if (dk == 128)
				emu<128>(P, rev);
			else if (dk == 80)	/* cu_gdn_chunk's: the kernels of 96 */
				emu<96, 80>(P, rev);
			else
				emu<64>(P, rev);
		}
		if (rev)
			o1 = o, S1 = S;
	}
	printf("m=%d k%dx%d v%dx%d %s%s ssm_a %g..%g key noise %g\n", m, nk, dk, nv, dv,
	    tiled ? "tiled" : "grouped", hf ? " hf" : "", alo, ahi, kn);
	ok = cmp("out", o.data(), od.data(), no);
	ok = cmp("state", S.data(), Sd.data(), hs) && ok;
	if (memcmp(o.data(), o1.data(), no * 4) || memcmp(S.data(), S1.data(), hs * 4))
		printf("  threads in reverse order: other bits (a race between barriers) FAIL\n"), ok = 0;
	return ok;
}

int
main(void)
{
	int ok = 1;

	ok &= shape(64, 2, 4, 128, 64, 1, 0);
	ok &= shape(100, 2, 4, 64, 64, 0, 1);
	ok &= shape(130, 2, 6, 64, 96, 0, 0);
	ok &= shape(512, 1, 2, 128, 64, 1, 1);
	ok &= shape(512, 2, 4, 64, 32, 0, 0);
	ok &= shape(300, 2, 4, 128, 64, 1, 0, -0.02f, -0.001f);	/* slow decay: long memory */
	ok &= shape(200, 2, 4, 128, 64, 1, 0, -0.02f, -0.001f, 0.3f);	/* and keys alike */
	ok &= shape(200, 2, 4, 64, 64, 0, 1, -0.02f, -0.001f, 0.05f);
	ok &= shape(100, 2, 4, 80, 64, 1, 0);	/* key heads of 80 (a trained model's) */
	ok &= shape(300, 2, 4, 80, 96, 0, 1);
	ok &= shape(200, 2, 4, 80, 64, 1, 0, -0.02f, -0.001f, 0.3f);
	printf(ok ? "ALL OK\n" : "FAILED\n");
	return !ok;
}
