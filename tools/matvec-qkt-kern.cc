/*
 * matvec-qkt-kern: cuda/matvec_qkt.cuh's own device code (mvkt_rows,
 * mvkt_moe_block and what they call, compiled with MVKT_HOST) and k_mvk's
 * (cuda/matvec_qk.cu's mvk_row) run on the CPU, for
 * tools/matvec-qkt-emu.c's -k (not built by make).  A block's
 * 256 threads are coroutines on one OS thread (tools/kern-coro.h), each run until
 * it reaches a collective: __syncthreads (all the block's live threads
 * there, then all go on), mvkt_mma (the 32 lanes of a warp there, then
 * the product of their fragments as PTX's mma.m16n8k16 .s32.s8.s8.s32
 * defines them, each lane its C); a warp with some lanes at an mma and
 * others elsewhere, or no thread able to go on, is a divergence and
 * aborts.  cp.async copies (gpu_cp16, gpu_cp8, gpu_cp4: alignment and size
 * checked) land at the wait that covers their group (mvkt_wait: all but
 * the newest QKT_NS - 2 committed groups; mvkt_wait_all: all), not at
 * their issue, so a read of a stage before its wait sees what was there
 * (the caller fills shared memory with garbage first).  __fmul_rn and the
 * rest round once (volatile floats, -ffp-contract=off); fp16 by lib/quant.
 * kern_mvk: the reference the same way, k_mvk's device code (mvk_bs ..
 * mvk_row: cuda/matvec_qk.cuh, as matvec_qk.cu includes it) run lane by
 * lane, then its butterfly; kern_mvks: k_mvk's Q6_K rows staged
 * (mvk_row_s) with the warp's lanes as coroutines, __syncwarp a collective
 * of the 32, its copies landing at their waits or (early) at their issue;
 * for IQ4_XS k_iq4's (xs_row and what it calls:
 * cuda/matvec_iq4.cuh), with gpu_iq4x8 and its table words
 * (cuda/gpu_iq4.cuh, also what k_mvkt's IQ4_XS step calls), prmt.b32 by
 * the host.
 * Build (t/emu.bats), in a directory D:
 *   g++ -O2 -std=c++17 -ffp-contract=off -fno-strict-aliasing -Icuda -Ilib \
 *       -c -o D/kern.o tools/matvec-qkt-kern.cc
 * and link it with tools/matvec-qkt-emu.c built with -DQKT_KERN.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>
#include <vector>

extern "C" {
#include "quant.h"
}

/* --- the CUDA the kernel's device code uses ------------------------------ */

#define MVKT_HOST 1
#include "kern-cuda.h"

/* matvec_qk.cu's, before it includes the file: its types, and k_mvk's
 * device code (mvk_bs .. mvk_row) */
enum { QK_T_Q4_K = 12, QK_T_Q5_K = 13, QK_T_Q6_K = 14, QK_T_IQ4_XS = 23, QK_T_Q6P = 114 };
/* k_mvk's staged rows (mvk_row_s): a shared address is a pointer here; the
 * copies, their groups and __syncwarp are the block's (below) */
typedef uint32_t *mvk_sptr;
static inline mvk_sptr mvk_sp(uint32_t *p, int k) { return p + k; }
static void mvk_cp4(mvk_sptr d, int k, const void *src, int n);
static void mvk_commit(void);
template <int N> static void mvk_wait(void);
static void __syncwarp(void);
#include "matvec_qk.cuh"
#define GPU_MOE_MT 16	/* gpu_impl.cuh's */

/* gpu_impl.cuh's gpu_prmt: mv8-emu.h's prmt (prmt.b32 in its default
 * mode), then its gpu_iq4x8 (gpu_iq4.cuh) and matvec_iq4.cu's IQ4_XS rows
 * (matvec_iq4.cuh) */
#include "mv8-emu.h"
static inline uint32_t
gpu_prmt(uint32_t a, uint32_t b, uint32_t s)
{
	return prmt(a, b, s);
}
#include "gpu_iq4.cuh"
#include "matvec_iq4.cuh"

/* --- the block: 256 coroutines (tools/kern-coro.h) ------------------------ */

#define KC_NAME "matvec-qkt-kern"
#define KC_NTH 256
#define KC_LANE \
	uint32_t a[2], b;	/* at an mma: its fragments */ \
	int c[4];		/* and its C, when the warp's product is done */
#include "kern-coro.h"

enum { AT_MMA, AT_WSYNC };	/* the warp's collectives (KC_WARP + these) */

/* the warp's 32 lanes there, then all go on (a lane ended or elsewhere:
 * a divergence, as at an mma) */
static void
__syncwarp(void)
{
	yield(KC_WARP + AT_WSYNC);
}

static void
mvkt_mma(const uint32_t *a, uint32_t b, int *c)
{
	th[cur].a[0] = a[0], th[cur].a[1] = a[1], th[cur].b = b;
	yield(KC_WARP + AT_MMA);
	memcpy(c, th[cur].c, sizeof th[cur].c);
}

static void gpu_cp16(void *dst, const void *src, int n) { cp_async(dst, src, 16, n); }
static void gpu_cp8(void *dst, const void *src, int n) { cp_async(dst, src, 8, n); }
static void gpu_cp4(void *dst, const void *src, int n) { cp_async(dst, src, 4, n); }

static void
mvkt_commit(void)
{
	kc_commit();
}

static void mvkt_wait(void);	/* (QKT_NS, below: from the file) */

static void
mvkt_wait_all(void)
{
	kc_wait_all();
}

#include "matvec_qkt.cuh"

static void
mvk_cp4(mvk_sptr d, int k, const void *src, int n)
{
	cp_async(d + k, src, 4, n);
}

static void
mvk_commit(void)
{
	kc_commit();
}

/* all but the newest N committed groups landed */
template <int N>
static void
mvk_wait(void)
{
	kc_wait(N);
}

static void
mvkt_wait(void)
{
	kc_wait(QKT_NS - 2);
}

/* the warp's mma: D = A B from its lanes' fragments, each lane's C */
static void
warp_mma(int w)
{
	int A[16][16], B[16][8];

	for (int l = 0; l < 32; l++) {
		const thr &t = th[32 * w + l];
		int g = l >> 2, tg = l & 3;
		for (int i = 0; i < 4; i++) {
			A[g][4 * tg + i] = (int8_t)(t.a[0] >> 8 * i);
			A[g + 8][4 * tg + i] = (int8_t)(t.a[1] >> 8 * i);
			B[4 * tg + i][g] = (int8_t)(t.b >> 8 * i);
		}
	}
	for (int l = 0; l < 32; l++) {
		thr &t = th[32 * w + l];
		int g = l >> 2, tg = l & 3;
		for (int e = 0; e < 4; e++) {
			int r = g + 8 * (e >> 1), n = 2 * tg + (e & 1);
			int64_t s = 0;
			for (int k = 0; k < 16; k++)
				s += A[r][k] * B[k][n];
			t.c[e] = (int)s;
		}
	}
}

static void
kc_warp(int w, int kind)
{
	if (kind == AT_MMA)
		warp_mma(w);
	for (int l = 0; l < 32; l++)
		th[32 * w + l].state = KC_RUN;
}

static const char *
kc_what(int kind)
{
	return kind == AT_MMA ? "an mma" : "__syncwarp";
}

/* --- the launches --------------------------------------------------------- */

struct rows_job {
	int T, L, nt;
	uint8_t *sm;
	const uint8_t *W;
	size_t rb;
	int64_t rows;
	int nb, m;
	const int8_t *q;
	const float *dk;
	const int16_t *bs;
	const int32_t *perm;
	float *y;
	const float *scale;
	/* k_moe_mvkt's */
	size_t ebytes;
	int n_exp, t0, ntiles;
	const int4 *tile;
};

template <int T, int L>
static void
rows_tl(void *p)
{
	rows_job *J = (rows_job *)p;
	int64_t r0 = (int64_t)blockIdx.x * QKT_R;

	if (J->tile != NULL)
		mvkt_moe_block<T, L>(J->sm, J->W, J->ebytes, J->rows, J->nb, J->rb, J->n_exp, J->tile,
		    J->t0, J->ntiles, J->perm, J->q, J->dk, J->bs, J->y, J->scale);
	else if (J->nt == 1)
		mvkt_rows<T, L, 1>(J->sm, J->W, J->rb, r0, J->rows, J->nb, J->q, J->dk, J->bs, J->m,
		    J->perm, J->y, J->scale);
	else if (J->nt == 2)
		mvkt_rows<T, L, 2>(J->sm, J->W, J->rb, r0, J->rows, J->nb, J->q, J->dk, J->bs, J->m,
		    J->perm, J->y, J->scale);
	else
		mvkt_rows<T, L, 4>(J->sm, J->W, J->rb, r0, J->rows, J->nb, J->q, J->dk, J->bs, J->m,
		    J->perm, J->y, J->scale);
}

template <int T>
static void (*pick_l(int L))(void *)
{
	return L == 8 ? rows_tl<T, 8> : rows_tl<T, 4>;
}

static void (*pick(int T, int L))(void *)
{
	if ((T == QK_T_IQ4_XS || T == QK_T_Q6P) && L != 8)
		abort();	/* (their one form) */
	return T == QK_T_Q4_K ? pick_l<QK_T_Q4_K>(L) : T == QK_T_Q5_K ? pick_l<QK_T_Q5_K>(L) :
	    T == QK_T_IQ4_XS ? rows_tl<QK_T_IQ4_XS, 8> : T == QK_T_Q6P ? rows_tl<QK_T_Q6P, 8> :
	    pick_l<QK_T_Q6_K>(L);
}

/* the largest shared memory any of a type's launches asks (mvkt_run's) */
template <int T, int L>
static size_t
smem_tl(void)
{
	size_t a = qkt_dim<T, L, 1>::SMEM, b = qkt_dim<T, L, 2>::SMEM, c = qkt_dim<T, L, 4>::SMEM;

	return a > b ? (a > c ? a : c) : (b > c ? b : c);
}

static uint8_t *
smem(int T, int L, size_t *sz)
{
	static uint8_t *sm;

	*sz = T == QK_T_Q4_K ? (L == 8 ? smem_tl<QK_T_Q4_K, 8>() : smem_tl<QK_T_Q4_K, 4>()) :
	    T == QK_T_Q5_K ? (L == 8 ? smem_tl<QK_T_Q5_K, 8>() : smem_tl<QK_T_Q5_K, 4>()) :
	    T == QK_T_IQ4_XS ? smem_tl<QK_T_IQ4_XS, 8>() : T == QK_T_Q6P ? smem_tl<QK_T_Q6P, 8>() :
	    (L == 8 ? smem_tl<QK_T_Q6_K, 8>() : smem_tl<QK_T_Q6_K, 4>());
	if (sm == NULL && (sm = (uint8_t *)aligned_alloc(16, 256 << 10)) == NULL)
		abort();
	if (*sz > (256 << 10))
		abort();
	return sm;
}

/* one block's shared memory, garbage first (rnd: the caller's stream) */
static void
fill(uint8_t *sm, size_t sz, uint64_t (*rnd)(void))
{
	for (size_t i = 0; i < sz; i++)
		sm[i] = (uint8_t)rnd();
}

/*
 * k_mvkt as mvkt_launch launches it (NT by m) on weight W (rows of rb
 * bytes, nb super-blocks; T = QK_T_Q6P: Q6_K packed four blocks a group,
 * rb unread) and m input rows: y[perm ? perm[j] : j][rows].
 */
extern "C" void
kern_mvkt(int T, int L, const uint8_t *W, int64_t rows, int nb, size_t rb, const int8_t *q,
    const float *dk, const int16_t *bs, int m, const int32_t *perm, float *y, const float *scale,
    uint64_t (*rnd)(void))
{
	rows_job J;
	size_t sz;

	memset(&J, 0, sizeof J);
	J.T = T, J.L = L, J.nt = m <= 8 ? 1 : m <= 16 ? 2 : 4, J.W = W, J.rb = rb, J.rows = rows;
	J.nb = nb, J.m = m, J.q = q, J.dk = dk, J.bs = bs, J.perm = perm, J.y = y, J.scale = scale;
	J.sm = smem(T, L, &sz);
	for (unsigned bx = 0; bx < (unsigned)((rows + QKT_R - 1) / QKT_R); bx++) {
		fill(J.sm, sz, rnd);
		block(bx, 0, pick(T, L), &J);
	}
}

/*
 * k_moe_mvkt as mvkt_moe_grouped launches it: experts ebytes apart,
 * tile[nt] (expert, first, count, index in the bucket), perm, the gathered
 * rows q, dk, bs.
 */
extern "C" void
kern_moe(int T, int L, const uint8_t *W, size_t ebytes, int64_t rows, int nb, size_t rb,
    int n_exp, const int *tile, int nt, const int32_t *perm, const int8_t *q, const float *dk,
    const int16_t *bs, float *y, const float *scale, uint64_t (*rnd)(void))
{
	std::vector<int4> tl((size_t)nt);
	rows_job J;
	size_t sz;

	for (int t = 0; t < nt; t++)
		tl[t] = int4{ tile[4 * t], tile[4 * t + 1], tile[4 * t + 2], tile[4 * t + 3] };
	memset(&J, 0, sizeof J);
	J.T = T, J.L = L, J.W = W, J.ebytes = ebytes, J.rows = rows, J.nb = nb, J.rb = rb;
	J.n_exp = n_exp, J.tile = tl.data(), J.t0 = 0, J.ntiles = nt, J.perm = perm, J.q = q;
	J.dk = dk;
	J.bs = bs, J.y = y, J.scale = scale;
	J.sm = smem(T, L, &sz);
	for (unsigned by = 0; by < (unsigned)nt; by++)
		for (unsigned bx = 0; bx < (unsigned)((rows + QKT_R - 1) / QKT_R); bx++) {
			fill(J.sm, sz, rnd);
			block(bx, by, pick(T, L), &J);
		}
}

/*
 * k_mvk (k_moe_mvk's mvk_row<T, 16, L>: k_mvk's loop, the same operations
 * in the same order; D = 4: mvk_row<T, 16, L, 4>, k_mvk's four blocks in
 * flight a group) for weight row wr and m input rows, in launches of 16
 * as mv8_products makes them, each lane's sums then k_mvk's butterfly (v +=
 * the v of lane ^ 1, 2, 4, 8, 16; lane 0's), times *scale: y[j].  IQ4_XS:
 * k_iq4<IQ4_XS, 16>'s xs_row (its one form, whatever L and D), then
 * xs_sum's butterfly, the same.
 */
/* k_mvk's butterfly over the lanes' sums acc[lane][j] (v += the v of lane
 * ^ 1, 2, 4, 8, 16; lane 0's), times *scale: y[j], j < mm */
static void
butterfly(float acc[32][16], int mm, const float *scale, float *y)
{
	for (int j = 0; j < mm; j++) {
		float v[32], u[32];
		for (int l = 0; l < 32; l++)
			v[l] = acc[l][j];
		for (int o = 1; o < 32; o <<= 1) {
			for (int l = 0; l < 32; l++)
				u[l] = __fadd_rn(v[l], v[l ^ o]);
			memcpy(v, u, sizeof v);
		}
		y[j] = scale != NULL ? __fmul_rn(v[0], *scale) : v[0];
	}
}

template <int T, int L>
static void
mvk_row_d(int D, const uint8_t *wr, int nb, const int8_t *q, const float *dk,
    const int16_t *bs, int m, int lane, float *acc)
{
	if (D == 4)
		mvk_row<T, 16, L, 4>(wr, nb, q, dk, bs, m, lane, acc);
	else
		mvk_row<T, 16, L>(wr, nb, q, dk, bs, m, lane, acc);
}

extern "C" void
kern_mvk(int T, int L, int D, const uint8_t *wr, int nb, const int8_t *q, const float *dk,
    const int16_t *bs, int m, const float *scale, float *y)
{
	static float acc[32][16];

	for (int j0 = 0; j0 < m; j0 += 16) {
		int mm = m - j0 < 16 ? m - j0 : 16;
		const int8_t *qj = q + (size_t)j0 * nb * 256;
		const float *dj = dk + (size_t)j0 * nb;
		const int16_t *bj = bs + (size_t)j0 * nb * 16;
		for (int lane = 0; lane < 32; lane++) {
			if (T == QK_T_IQ4_XS)
				xs_row<16>(wr, nb, qj, dj, mm, lane, acc[lane]);
			else if (T == QK_T_Q4_K)
				L == 8 ? mvk_row_d<QK_T_Q4_K, 8>(D, wr, nb, qj, dj, bj, mm, lane, acc[lane]) :
				    mvk_row_d<QK_T_Q4_K, 4>(D, wr, nb, qj, dj, bj, mm, lane, acc[lane]);
			else if (T == QK_T_Q5_K)
				L == 8 ? mvk_row_d<QK_T_Q5_K, 8>(D, wr, nb, qj, dj, bj, mm, lane, acc[lane]) :
				    mvk_row_d<QK_T_Q5_K, 4>(D, wr, nb, qj, dj, bj, mm, lane, acc[lane]);
			else
				L == 8 ? mvk_row_d<QK_T_Q6_K, 8>(D, wr, nb, qj, dj, bj, mm, lane, acc[lane]) :
				    mvk_row_d<QK_T_Q6_K, 4>(D, wr, nb, qj, dj, bj, mm, lane, acc[lane]);
		}
		butterfly(acc, mm, scale, y + j0);
	}
}

/* k_mvk's Q6_K rows at 8 lanes on a weight packed four blocks a group
 * (MVK_X4: mvk_row_x4<16, 8>), the row's first block rb0 of W, m input rows
 * in launches of 16, then k_mvk's butterfly */
extern "C" void
kern_mvkx4(const uint8_t *W, int64_t rb0, int nb, const int8_t *q, const float *dk,
    const int16_t *bs, int m, const float *scale, float *y)
{
	static float acc[32][16];

	for (int j0 = 0; j0 < m; j0 += 16) {
		int mm = m - j0 < 16 ? m - j0 : 16;
		for (int lane = 0; lane < 32; lane++)
			mvk_row_x4<16, 8>(W, rb0, nb, q + (size_t)j0 * nb * 256, dk + (size_t)j0 * nb,
			    bs + (size_t)j0 * nb * 16, mm, lane, acc[lane]);
		butterfly(acc, mm, scale, y + j0);
	}
}

/* k_mvk's Q6_K rows at 8 lanes read from a staged copy (MVK_STAGED:
 * mvk_row_s<16, 8, MVK_NS>) for weight row wr and m input rows, the warp's
 * 32 lanes as coroutines (cp.async's copies landing at their waits, or at
 * their issue when early; the stages garbage first: rnd), in launches of
 * 16, then k_mvk's butterfly */
struct stage_job {
	uint32_t *buf;
	const uint8_t *wr;
	int nb, m;
	const int8_t *q;
	const float *dk;
	const int16_t *bs;
	float (*acc)[16];
};

static void
stage_lane(void *p)
{
	stage_job *J = (stage_job *)p;
	int t = (int)threadIdx.x;

	if (t < 32)	/* the row's warp; the block's other seven have rows of their own */
		mvk_row_s<16, 8, MVK_NS>(J->buf, J->wr, J->nb, J->q, J->dk, J->bs, J->m, t,
		    J->acc[t]);
}

extern "C" void
kern_mvks(const uint8_t *wr, int nb, const int8_t *q, const float *dk, const int16_t *bs, int m,
    const float *scale, float *y, uint64_t (*rnd)(void), int early)
{
	static uint32_t buf[MVK_NS * mvk_stage<8>::W];
	static float acc[32][16];
	stage_job J = { buf, wr, nb, 0, NULL, NULL, NULL, acc };

	for (int j0 = 0; j0 < m; j0 += 16) {
		J.m = m - j0 < 16 ? m - j0 : 16;
		J.q = q + (size_t)j0 * nb * 256, J.dk = dk + (size_t)j0 * nb;
		J.bs = bs + (size_t)j0 * nb * 16;
		fill((uint8_t *)buf, sizeof buf, rnd);
		eager = early;
		block(0, 0, stage_lane, &J);
		eager = 0;
		butterfly(acc, J.m, scale, y + j0);
	}
}
