/*
 * attn-prefill-emu: a CPU model of k_attn_prefill (cuda/ops.cu) for a
 * machine without a GPU (not built by make).  It includes the kernel's
 * phases (cuda/attn_prefill.cuh) and runs them block by block, thread by
 * thread between the kernel's barriers (in reverse order, then in order:
 * other bits would mean a phase reads what another thread writes in it;
 * apf_smax and apf_sexp, a __syncwarp apart, as two phases), shared memory
 * filled with NaN first (a read of what no phase wrote shows), a K or V
 * buffer NaN from a cp.async's issue to its wait (a read of a tile in
 * flight shows), the output
 * with NaN (a row not written shows), then compares with attention in
 * double at kernel-check's tolerance, |got - ref| <= 1e-5 (1 + |ref|), causal,
 * in full mode (every row every key of the call) and with sliding windows;
 * and that a row's bits do not depend on the call it is in (the rows of
 * each windowed shape and of each causal one of up to 100 rows again as
 * calls of one row: the same tiles, the same steps).
 * Keep it in step with the kernel.
 * make check runs it as below, in a temporary directory (t/emu.bats):
 *   g++ -O2 -std=c++17 -ffp-contract=off -Icuda -o /tmp/aemu tools/attn-prefill-emu.cc && /tmp/aemu
 * "/tmp/aemu I/N" runs shapes I, I + N, ... only (a core each: make check
 * runs 0/2 and 1/2 together); each shape's data is its own (seeded by its
 * index), so a shape checks the same bits in every split.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

struct alignas(16) float4 { float x, y, z, w; };
static inline float4 make_float4(float x, float y, float z, float w) { return float4{ x, y, z, w }; }
#include "attn_prefill.cuh"

static uint64_t rs = 88172645463325252ULL;
static uint64_t rnd(void) { rs ^= rs >> 12; rs ^= rs << 25; rs ^= rs >> 27; return rs * 0x2545F4914F6CDD1DULL; }
static float unif(float lo, float hi) { return lo + (hi - lo) * (float)((rnd() >> 40) * 0x1p-24); }

#define T(n) (int x = 0; x < (n); x++) { int tid = rev ? (n) - 1 - x : x;
template <int HDP, int BQ>
static void
emu(const apf_args &A, int rev)
{
	typedef apf_dim<HDP, BQ> D;
	std::vector<float4> mem(D::FLOATS / 4 + 1);
	std::vector<apf_acc<HDP> > acc(D::NT);
	std::vector<float> mn(D::NT);
	int nt = (A.m * (A.nh / A.nkv) + BQ - 1) / BQ;
	size_t tile = (size_t)APF_BK * D::LD * sizeof(float);

	for (int b = 0; b < nt * A.nkv; b++) {
		apf_sh s;
		int kvh = b % A.nkv, i0 = (nt - 1 - b / A.nkv) * BQ, npos = apf_npos<BQ>(A, i0);

		memset(mem.data(), 0xff, mem.size() * sizeof mem[0]);
		apf_carve<HDP, BQ>((float *)mem.data(), &s);
		if (((uintptr_t)s.q | (uintptr_t)s.k | (uintptr_t)s.v | (uintptr_t)s.pt) & 15)
			fprintf(stderr, "misaligned shared memory\n"), exit(1);
		/* a cp.async lands between its issue and its wait: the buffer
		 * is NaN from the issue, the tile there at the wait */
		for T(D::NT) apf_acc_zero<HDP>(acc[tid]); apf_load_q<HDP, BQ>(A, s, kvh, i0, tid); }
		int js = apf_j0(A, i0), kj = js;	/* the K tile in flight */
		for (int t = 0, j0 = js; j0 < npos; t++, j0 += APF_BK) {
			for T(D::NT) apf_copy<HDP, BQ>(A, A.K, s.k, kvh, kj, npos, tid); }
			memset(s.v, 0xff, tile);
			for T(D::NT) apf_scores<HDP, BQ>(A, s, i0, j0, tid); }
			for T(D::NT) mn[tid] = apf_smax<HDP, BQ>(s, t, tid); }
			for T(D::NT) apf_sexp<HDP, BQ>(s, t, tid, mn[tid]); }
			for T(D::NT) apf_copy<HDP, BQ>(A, A.V, s.v, kvh, j0, npos, tid); }
			if (j0 + APF_BK < npos)
				memset(s.k, 0xff, tile), kj = j0 + APF_BK;
			for T(D::NT) apf_pv<HDP, BQ>(s, tid, acc[tid]); }
		}
		for T(D::NT) apf_out<HDP, BQ>(A, kvh, i0, tid, acc[tid]); }
	}
}
#undef T

static void
run(const apf_args &A, int bq, int rev)
{
	int hdp = A.hd <= 64 ? 64 : A.hd <= 128 ? 128 : A.hd <= 256 ? 256 : 512;

	switch (hdp + (bq == 64)) {	/* as gpu_attention_prefill: 32 at 256, 512 */
	case 64: emu<64, 32>(A, rev); break;
	case 65: emu<64, 64>(A, rev); break;
	case 128: emu<128, 32>(A, rev); break;
	case 129: emu<128, 64>(A, rev); break;
	case 256: case 257: emu<256, 32>(A, rev); break;
	default: emu<512, 32>(A, rev); break;
	}
}

static int
check(int m, int nh, int nkv, int hd, int p0, int bq, int full, int win)
{
	int n = p0 + m, G = nh / nkv, bad = 0;
	size_t nq = (size_t)m * nh * hd, nkvel = (size_t)n * nkv * hd;
	std::vector<float> q(nq), K(nkvel), V(nkvel), o(nq);
	std::vector<double> ref(nq), p(n);
	float scale = 2.0f / sqrtf((float)hd);
	apf_args A = { q.data(), K.data(), V.data(), o.data(), m, nh, nkv, hd, p0, scale, full,
	    win };
	double maxd = 0;

	for (auto &x : q) x = unif(-1, 1);
	for (auto &x : K) x = unif(-1, 1);
	for (auto &x : V) x = unif(-1, 1);
	for (int t = 0; t < m; t++)
		for (int h = 0; h < nh; h++) {
			const float *qh = &q[((size_t)t * nh + h) * hd];
			int kvh = h / G, np = full ? n : p0 + t + 1;
			int j1 = win > 0 && p0 + t - win + 1 > 0 ? p0 + t - win + 1 : 0;
			double mx = -INFINITY, l = 0;
			for (int j = j1; j < np; j++) {
				double sc = 0;
				for (int i = 0; i < hd; i++)
					sc += (double)qh[i] * K[((size_t)j * nkv + kvh) * hd + i];
				p[j] = sc * scale;
				mx = p[j] > mx ? p[j] : mx;
			}
			for (int j = j1; j < np; j++)
				l += p[j] = exp(p[j] - mx);
			for (int i = 0; i < hd; i++) {
				double sv = 0;
				for (int j = j1; j < np; j++)
					sv += p[j] * V[((size_t)j * nkv + kvh) * hd + i];
				ref[((size_t)t * nh + h) * hd + i] = sv / l;
			}
		}
	for (int rev = 1; rev >= 0; rev--) {
		std::vector<float> prev = o;
		memset(o.data(), 0xff, nq * sizeof(float));
		run(A, bq, rev);
		for (size_t i = 0; i < nq; i++) {
			double d = fabs((double)o[i] - ref[i]);
			if (!(d <= 1e-5 * (1 + fabs(ref[i]))))
				bad++;
			if (d > maxd || d != d)
				maxd = d;
		}
		if (!rev && memcmp(prev.data(), o.data(), nq * sizeof(float)) != 0) {
			printf("thread orders differ\n");
			bad++;
		}
	}
	if (!full && (win > 0 || m <= 100)) {	/* each row alone, a call of its own at its position */
		std::vector<float> one(nq);
		for (int t = 0; t < m; t++) {
			apf_args B = A;
			B.q = &q[(size_t)t * nh * hd], B.o = &one[(size_t)t * nh * hd];
			B.m = 1, B.p0 = p0 + t;
			run(B, bq, 0);
		}
		if (memcmp(one.data(), o.data(), nq * sizeof(float)) != 0) {
			printf("a row alone differs\n");
			bad++;
		}
	}
	if (hd > 128)
		bq = 32;
	printf("m=%-4d h=%d/%d hd=%-3d p0=%-4d bq=%d%s", m, nh, nkv, hd, p0, bq, full ? " full" : "");
	if (win)
		printf(" window=%d", win);
	printf(" maxdiff=%-10.3g %s\n", maxd, bad ? "FAIL" : "OK");
	return bad != 0;
}

int
main(int argc, char **argv)
{
	int part = 0, parts = 1;

	if (argc > 2 || (argc == 2 && (sscanf(argv[1], "%d/%d", &part, &parts) != 2 || parts < 1 ||
	    part < 0 || part >= parts))) {
		fprintf(stderr, "usage: attn-prefill-emu [I/N]\n");
		return 2;
	}
	static const int sh[][8] = {	/* m, nh, nkv, hd, p0, bq, full, window */
		{ 17, 4, 1, 256, 0, 32 }, { 17, 16, 4, 256, 300, 32 }, { 40, 8, 8, 128, 0, 32 },
		{ 40, 8, 1, 64, 2047, 64 }, { 100, 4, 1, 128, 300, 32 }, { 100, 8, 1, 64, 0, 64 },
		{ 512, 4, 1, 256, 0, 32 }, { 300, 8, 4, 128, 10, 64 }, { 100, 6, 2, 96, 130, 32 },
		{ 33, 3, 3, 160, 63, 64 }, { 70, 6, 1, 192, 40, 32 }, { 1100, 1, 1, 64, 0, 64 },
		{ 20, 2, 2, 32, 5, 32 }, { 65, 12, 4, 224, 1000, 32 },
		/* Gemma-4's global heads of 512 (and a shorter head in their tile) */
		{ 17, 16, 2, 512, 0, 32 }, { 100, 8, 1, 512, 300, 32 }, { 40, 4, 4, 512, 70, 32 },
		{ 50, 6, 2, 320, 33, 32 },
		/* heads of a multiple of 4, not of 32 (the 31B vision tower's 72); full: every
		 * row sees every key of the call (a tower's whole image) */
		{ 50, 4, 2, 72, 10, 32 }, { 300, 16, 16, 72, 0, 64, 1 }, { 100, 8, 2, 72, 50, 32, 1 },
		{ 70, 4, 4, 64, 0, 64, 1 }, { 40, 6, 2, 256, 10, 32, 1 }, { 33, 2, 2, 20, 0, 32, 1 },
		/* sliding windows (gemma4's, step35's sliding layers): blocks start at their
		 * first row's window; vectors whose window starts a tile later (G 8: 4 rows
		 * a block of 32, 8 of 64); windows of 1, not a multiple of the tile, past
		 * every key (= causal) */
		{ 200, 16, 8, 256, 0, 32, 0, 64 }, { 100, 16, 2, 128, 1000, 32, 0, 33 },
		{ 150, 8, 8, 64, 40, 64, 0, 100 }, { 120, 64, 8, 128, 0, 64, 0, 40 },
		{ 70, 4, 4, 128, 5, 32, 0, 1 }, { 60, 8, 1, 512, 300, 32, 0, 40 },
		{ 90, 4, 2, 256, 0, 32, 0, 4096 }, { 40, 8, 2, 96, 700, 32, 0, 257 },
	};
	int bad = 0;

	for (size_t i = part; i < sizeof sh / sizeof sh[0]; i += parts) {
		rs = 88172645463325252ULL + 0x9E3779B97F4A7C15ULL * i;
		bad += check(sh[i][0], sh[i][1], sh[i][2], sh[i][3], sh[i][4], sh[i][5], sh[i][6],
		    sh[i][7]);
	}
	printf(bad ? "%d FAILED\n" : "ALL OK\n", bad);
	return bad != 0;
}
