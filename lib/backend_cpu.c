#include "backend_cpu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define CPU_X86 1
#endif

#include "fexp.h"
#include "quant.h"
#include "sample.h"
#include "util.h"

/*
 * The CPU backend: a small thread pool, one dot product, and the dense
 * ops (memory, weights, embed, norms, matmul, elementwise).  The sequence
 * ops live in backend_cpu_seq.c.
 */

enum {
	MM_TILE = 8,		/* weight rows dequantized together, reused over m */
	MM_ROWS = 16,		/* activation rows a quantized weight row meets at once */
	MM_PACK = 8,		/* ... when packed (a group's blocks stay in L1) */
	CPU_SPIN = 2000,	/* pauses a thread waits busy before it sleeps */
};

/* --- the pool --- */

static void
run_chunks(struct backend_cpu *c, int tid)
{
	for (;;) {
		int64_t i0 = atomic_fetch_add(&c->next, c->chunk);

		if (i0 >= c->n)
			break;
		c->fn(c->ctx, i0, i0 + c->chunk < c->n ? i0 + c->chunk : c->n, tid);
	}
}

/* A short busy wait before sleeping: ops come back to back in a forward. */
static void
relax(void)
{
#ifdef CPU_X86
	_mm_pause();
#endif
}

static void *
worker(void *arg)
{
	struct backend_cpu *c = ((struct backend_cpu_worker *)arg)->c;
	int tid = ((struct backend_cpu_worker *)arg)->tid;
	unsigned seen = 0;

	for (;;) {
		for (int k = 0; k < CPU_SPIN && atomic_load(&c->gen) == seen &&
		    !atomic_load(&c->quit); k++)
			relax();
		pthread_mutex_lock(&c->mu);
		while (atomic_load(&c->gen) == seen && !atomic_load(&c->quit))
			pthread_cond_wait(&c->go, &c->mu);
		pthread_mutex_unlock(&c->mu);
		if (atomic_load(&c->quit))
			break;
		seen = atomic_load(&c->gen);
		run_chunks(c, tid);
		if (atomic_fetch_sub(&c->busy, 1) == 1) {
			pthread_mutex_lock(&c->mu);
			pthread_cond_signal(&c->done);
			pthread_mutex_unlock(&c->mu);
		}
	}
	return NULL;
}

int
backend_cpu_run(struct backend_cpu *c, int64_t n, int64_t chunk,
    backend_cpu_fn *fn, void *ctx)
{
	if (chunk < 1)
		chunk = 1;
	atomic_store(&c->oom, 0);
	if (c->nt == 1 || n <= chunk) {
		fn(ctx, 0, n, 0);
		return atomic_load(&c->oom) ? -1 : 0;
	}
	pthread_mutex_lock(&c->mu);
	c->fn = fn;
	c->ctx = ctx;
	c->n = n;
	c->chunk = chunk;
	atomic_store(&c->next, 0);
	atomic_store(&c->busy, c->nt - 1);
	atomic_fetch_add(&c->gen, 1);
	pthread_cond_broadcast(&c->go);
	pthread_mutex_unlock(&c->mu);
	run_chunks(c, 0);
	for (int k = 0; k < CPU_SPIN && atomic_load(&c->busy) > 0; k++)
		relax();
	pthread_mutex_lock(&c->mu);
	while (atomic_load(&c->busy) > 0)
		pthread_cond_wait(&c->done, &c->mu);
	pthread_mutex_unlock(&c->mu);
	return atomic_load(&c->oom) ? -1 : 0;
}

float *
backend_cpu_scratch(struct backend_cpu *c, int tid, size_t n)
{
	struct backend_cpu_scratch *s = &c->scr[tid];

	if (s->n < n) {
		float *p = NULL;

		if (posix_memalign((void **)&p, 64, n * sizeof *p) != 0) {
			atomic_store(&c->oom, 1);
			return NULL;
		}
		free(s->p);
		s->p = p;
		s->n = n;
	}
	return s->p;
}

/* --- the dot product: every reduction of the backend goes through it --- */

static float
dot_portable(const float *a, const float *b, int64_t n)
{
	float s[8] = { 0 };
	int64_t i = 0;

	for (; i + 8 <= n; i += 8)
		for (int l = 0; l < 8; l++)
			s[l] += a[i + l] * b[i + l];
	float t = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
	for (; i < n; i++)
		t += a[i] * b[i];
	return t;
}

#ifdef CPU_X86
__attribute__((target("avx2,fma"))) UTIL_SAN_HOT static float
dot_avx2(const float *a, const float *b, int64_t n)
{
	__m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
	int64_t i = 0;

	util_san_range(a, (size_t)n * 4);
	util_san_range(b, (size_t)n * 4);

	for (; i + 32 <= n; i += 32) {
		s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
		s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
		s2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), s2);
		s3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), s3);
	}
	for (; i + 8 <= n; i += 8)
		s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
	s0 = _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3));
	__m128 h = _mm_add_ps(_mm256_castps256_ps128(s0), _mm256_extractf128_ps(s0, 1));
	h = _mm_add_ps(h, _mm_movehl_ps(h, h));
	h = _mm_add_ss(h, _mm_movehdup_ps(h));
	float t = _mm_cvtss_f32(h);
	for (; i < n; i++)
		t += a[i] * b[i];
	return t;
}
#endif

#ifdef CPU_X86
__attribute__((target("avx2,fma"))) static float
hsum_avx2(__m256 a, __m256 b, __m256 c, __m256 d)
{
	__m256 s = _mm256_add_ps(_mm256_add_ps(a, b), _mm256_add_ps(c, d));
	__m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));

	h = _mm_add_ps(h, _mm_movehl_ps(h, h));
	h = _mm_add_ss(h, _mm_movehdup_ps(h));
	return _mm_cvtss_f32(h);
}

/*
 * Three dots of one row w with x[0..2] at once, each bit-identical to
 * dot_avx2(w, x[k], n): the same accumulators see the same products in
 * the same order; only the loads of w are shared.
 */
__attribute__((target("avx2,fma"))) UTIL_SAN_HOT static void
dot3_avx2(const float *w, const float *const *x, int64_t n, float *out)
{
	const float *x0 = x[0], *x1 = x[1], *x2 = x[2];	/* (ranges: mm_run's mm_san_ranges) */
	__m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
	__m256 b0 = a0, b1 = a0, b2 = a0, b3 = a0, c0 = a0, c1 = a0, c2 = a0, c3 = a0, v;
	int64_t i = 0;

#define DOT3_STEP(o, A, B, C) \
	v = _mm256_loadu_ps(w + i + (o)); \
	A = _mm256_fmadd_ps(v, _mm256_loadu_ps(x0 + i + (o)), A); \
	B = _mm256_fmadd_ps(v, _mm256_loadu_ps(x1 + i + (o)), B); \
	C = _mm256_fmadd_ps(v, _mm256_loadu_ps(x2 + i + (o)), C)
	for (; i + 32 <= n; i += 32) {
		DOT3_STEP(0, a0, b0, c0);
		DOT3_STEP(8, a1, b1, c1);
		DOT3_STEP(16, a2, b2, c2);
		DOT3_STEP(24, a3, b3, c3);
	}
	for (; i + 8 <= n; i += 8) {
		DOT3_STEP(0, a0, b0, c0);
	}
#undef DOT3_STEP
	out[0] = hsum_avx2(a0, a1, a2, a3);
	out[1] = hsum_avx2(b0, b1, b2, b3);
	out[2] = hsum_avx2(c0, c1, c2, c3);
	for (int64_t j = i; j < n; j++) {
		out[0] += w[j] * x0[j];
		out[1] += w[j] * x1[j];
		out[2] += w[j] * x2[j];
	}
}

/*
 * R dots of one row w with x[0..R) at once (R <= 8) on AVX-512, each
 * bit-identical to dot_avx2(w, x[k], n): a 512-bit accumulator holds two
 * of dot_avx2's four (s0|s1, s2|s3), each lane the same fused chain; the
 * 8-wide steps, the totals and the tail are dot_avx2's.  R a constant
 * after inlining (dotr_avx512), so the 2R accumulators stay in registers.
 */
__attribute__((target("avx2,fma,avx512f"), always_inline)) UTIL_SAN_HOT static inline void
dotr_body(const float *w, const float *const *x, int64_t n, int R, float *out)
{
	__m512 a[8], b[8];
	int64_t i = 0;
	int k;

	_Pragma("GCC unroll 8")
	for (k = 0; k < R; k++)
		a[k] = b[k] = _mm512_setzero_ps();
	for (; i + 32 <= n; i += 32) {
		__m512 w0 = _mm512_loadu_ps(w + i), w1 = _mm512_loadu_ps(w + i + 16);

		_Pragma("GCC unroll 8")
		for (k = 0; k < R; k++) {
			a[k] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x[k] + i), a[k]);
			b[k] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x[k] + i + 16), b[k]);
		}
	}
	for (k = 0; k < R; k++) {
		__m256 s0 = _mm512_castps512_ps256(a[k]), s2 = _mm512_castps512_ps256(b[k]);
		__m256 s1 = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a[k]), 1));
		__m256 s3 = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(b[k]), 1));
		int64_t j = i;

		for (; j + 8 <= n; j += 8)
			s0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + j), _mm256_loadu_ps(x[k] + j), s0);
		out[k] = hsum_avx2(s0, s1, s2, s3);
		for (; j < n; j++)
			out[k] += w[j] * x[k][j];
	}
}

/* (ranges: mm_run's mm_san_ranges) */
__attribute__((target("avx2,fma,avx512f"))) UTIL_SAN_HOT static void
dotr_avx512(const float *w, const float *const *x, int64_t n, int R, float *out)
{
	switch (R) {
	case 8:	dotr_body(w, x, n, 8, out); break;
	case 7:	dotr_body(w, x, n, 7, out); break;
	case 6:	dotr_body(w, x, n, 6, out); break;
	case 5:	dotr_body(w, x, n, 5, out); break;
	case 4:	dotr_body(w, x, n, 4, out); break;
	case 3:	dotr_body(w, x, n, 3, out); break;
	default: dotr_body(w, x, n, 2, out); break;
	}
}
#endif

/*
 * The vector loops of the sequence ops (each element on its own, so the
 * AVX2 forms differ from the portable ones only in FMA rounding).
 *   axpy:    y += a x
 *   decay:   r *= d; acc += r k          (the delta rule's decay and S^T k)
 *   update:  r += k dl; acc += r q       (its rank-1 update and S^T q)
 */
static void
axpy_portable(float *y, float a, const float *x, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		y[i] += a * x[i];
}

static void
decay_portable(float *r, float d, float *acc, float k, int64_t n)
{
	for (int64_t i = 0; i < n; i++) {
		r[i] *= d;
		acc[i] += r[i] * k;
	}
}

static void
update_portable(float *r, float k, const float *dl, float *acc, float q, int64_t n)
{
	for (int64_t i = 0; i < n; i++) {
		r[i] += k * dl[i];
		acc[i] += r[i] * q;
	}
}

#ifdef CPU_X86
/* y += a x fused, 8 at a time; returns where the tail (n % 8 left) starts. */
__attribute__((target("avx2,fma"))) UTIL_SAN_HOT static int64_t
axpy8_avx2(float *y, float a, const float *x, int64_t n)
{
	__m256 av = _mm256_set1_ps(a);
	int64_t i = 0;

	util_san_range(y, (size_t)n * 4);
	util_san_range(x, (size_t)n * 4);

	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(y + i, _mm256_fmadd_ps(av, _mm256_loadu_ps(x + i),
		    _mm256_loadu_ps(y + i)));
	return i;
}

__attribute__((target("avx2,fma"))) static void
decay_avx2(float *r, float d, float *acc, float k, int64_t n)
{
	__m256 dv = _mm256_set1_ps(d), kv = _mm256_set1_ps(k);
	int64_t i = 0;

	for (; i + 8 <= n; i += 8) {
		__m256 v = _mm256_mul_ps(_mm256_loadu_ps(r + i), dv);

		_mm256_storeu_ps(r + i, v);
		_mm256_storeu_ps(acc + i, _mm256_fmadd_ps(v, kv, _mm256_loadu_ps(acc + i)));
	}
	decay_portable(r + i, d, acc + i, k, n - i);
}

__attribute__((target("avx2,fma"))) static void
update_avx2(float *r, float k, const float *dl, float *acc, float q, int64_t n)
{
	__m256 kv = _mm256_set1_ps(k), qv = _mm256_set1_ps(q);
	int64_t i = 0;

	for (; i + 8 <= n; i += 8) {
		__m256 v = _mm256_fmadd_ps(kv, _mm256_loadu_ps(dl + i), _mm256_loadu_ps(r + i));

		_mm256_storeu_ps(r + i, v);
		_mm256_storeu_ps(acc + i, _mm256_fmadd_ps(v, qv, _mm256_loadu_ps(acc + i)));
	}
	update_portable(r + i, k, dl + i, acc + i, q, n - i);
}
#endif

/* y += a x: AVX2's fused 8-wide part where it runs, then the tail fused
 * (fused) or as axpy_portable rounds it. */
static void
axpy(const struct backend_cpu *c, float *y, float a, const float *x, int64_t n, int fused)
{
	int64_t i = 0;

#ifdef CPU_X86
	if (c->avx2)
		i = axpy8_avx2(y, a, x, n);
#endif
	if (!fused)
		axpy_portable(y + i, a, x + i, n - i);
	else
		for (; i < n; i++)
			y[i] = fmaf(a, x[i], y[i]);
}

void
backend_cpu_axpy(const struct backend_cpu *c, float *y, float a, const float *x,
    int64_t n)
{
	axpy(c, y, a, x, n, 0);
}

void
backend_cpu_axpy_fma(const struct backend_cpu *c, float *y, float a, const float *x,
    int64_t n)
{
	axpy(c, y, a, x, n, 1);
}

#ifdef CPU_X86
/* backend_cpu_axpy_rows on AVX2: 64 columns of y in registers while the k rows pass. */
__attribute__((target("avx2,fma"))) UTIL_SAN_HOT static int64_t
axpy_rows_avx2(float *y, int64_t n, const float *a, const float *x, size_t ldx, int k)
{
	int64_t j = 0;

	util_san_range(y, (size_t)n * 4);
	util_san_range(a, (size_t)k * 4);
	for (int i = 0; i < k; i++)
		util_san_range(x + (size_t)i * ldx, (size_t)n * 4);

	for (; j + 64 <= n; j += 64) {
		__m256 r[8];

		_Pragma("GCC unroll 8")
		for (int l = 0; l < 8; l++)
			r[l] = _mm256_loadu_ps(y + j + 8 * l);
		for (int i = 0; i < k; i++) {
			__m256 av = _mm256_set1_ps(a[i]);
			const float *xi = x + (size_t)i * ldx + j;

			_Pragma("GCC unroll 8")
			for (int l = 0; l < 8; l++)
				r[l] = _mm256_fmadd_ps(av, _mm256_loadu_ps(xi + 8 * l), r[l]);
		}
		_Pragma("GCC unroll 8")
		for (int l = 0; l < 8; l++)
			_mm256_storeu_ps(y + j + 8 * l, r[l]);
	}
	for (; j + 8 <= n; j += 8) {
		__m256 r = _mm256_loadu_ps(y + j);

		for (int i = 0; i < k; i++)
			r = _mm256_fmadd_ps(_mm256_set1_ps(a[i]),
			    _mm256_loadu_ps(x + (size_t)i * ldx + j), r);
		_mm256_storeu_ps(y + j, r);
	}
	return j;
}
#endif

void
backend_cpu_axpy_rows(const struct backend_cpu *c, float *y, int64_t n, const float *a,
    const float *x, size_t ldx, int k)
{
#ifdef CPU_X86
	if (c->avx2) {
		int64_t j = axpy_rows_avx2(y, n, a, x, ldx, k);

		for (; j < n; j++)	/* axpy's tail: unfused */
			for (int i = 0; i < k; i++)
				y[j] += a[i] * x[(size_t)i * ldx + j];
		return;
	}
#endif
	for (int i = 0; i < k; i++)
		axpy(c, y, a[i], x + (size_t)i * ldx, n, 0);
}

#ifdef CPU_X86
/* backend_cpu_axpy_fma_lanes on AVX2: axpy8_avx2's fused steps, the tail fused. */
__attribute__((target("avx2,fma"))) static void
axpy_lanes_avx2(float *acc, int w, int64_t n, const float *a, const float *x, size_t ldx,
    int nk)
{
	for (int t = 0; t < nk; t++, x += ldx) {
		float *y = acc + (size_t)(t % w) * n;
		__m256 av = _mm256_set1_ps(a[t]);
		int64_t i = 0;

		for (; i + 8 <= n; i += 8)
			_mm256_storeu_ps(y + i, _mm256_fmadd_ps(av, _mm256_loadu_ps(x + i),
			    _mm256_loadu_ps(y + i)));
		for (; i < n; i++)
			y[i] = fmaf(a[t], x[i], y[i]);
	}
}
#endif

#ifdef CPU_X86
/* axpy_lanes_avx2 16 at a time, then 8, then one (each element one fma) */
__attribute__((target("avx2,fma,avx512f"))) static void
axpy_lanes_avx512(float *acc, int w, int64_t n, const float *a, const float *x, size_t ldx,
    int nk)
{
	for (int t = 0; t < nk; t++, x += ldx) {
		float *y = acc + (size_t)(t % w) * n;
		__m512 av = _mm512_set1_ps(a[t]);
		int64_t i = 0;

		for (; i + 16 <= n; i += 16)
			_mm512_storeu_ps(y + i, _mm512_fmadd_ps(av, _mm512_loadu_ps(x + i),
			    _mm512_loadu_ps(y + i)));
		for (; i + 8 <= n; i += 8)
			_mm256_storeu_ps(y + i, _mm256_fmadd_ps(_mm512_castps512_ps256(av),
			    _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
		for (; i < n; i++)
			y[i] = fmaf(a[t], x[i], y[i]);
	}
}
#endif

void
backend_cpu_axpy_fma_lanes(const struct backend_cpu *c, float *acc, int w, int64_t n,
    const float *a, const float *x, size_t ldx, int nk)
{
#ifdef CPU_X86
	if (c->avx512) {
		axpy_lanes_avx512(acc, w, n, a, x, ldx, nk);
		return;
	}
	if (c->avx2) {
		axpy_lanes_avx2(acc, w, n, a, x, ldx, nk);
		return;
	}
#endif
	for (int t = 0; t < nk; t++)
		axpy(c, acc + (size_t)(t % w) * n, a[t], x + (size_t)t * ldx, n, 1);
}

/*
 * The lanes' tree: y[l] += x[l] for l < n, each element one add, so the
 * vector forms round as the scalar one.  y and x do not overlap.
 */
static void
lanes_add(float *y, const float *x, int n)
{
	int l = 0;

#ifdef CPU_X86
	for (; l + 4 <= n; l += 4)	/* SSE: every x86-64 has it */
		_mm_storeu_ps(y + l, _mm_add_ps(_mm_loadu_ps(y + l), _mm_loadu_ps(x + l)));
#endif
	for (; l < n; l++)
		y[l] += x[l];
}

float
backend_cpu_lanes_total(float *acc, int w)
{
	if (w == 64) {
		lanes_add(acc, acc + 32, 16);
		lanes_add(acc + 16, acc + 48, 16);
		lanes_add(acc, acc + 16, 16);
	}
	for (int h = 8; h >= 1; h /= 2)
		lanes_add(acc, acc + h, h);
	return acc[0];
}

#ifdef CPU_X86
/* lanes_add 8 at a time (the same adds) */
__attribute__((target("avx2,fma"))) static void
lanes_add_avx2(float *y, const float *x, int n)
{
	int l = 0;

	for (; l + 8 <= n; l += 8)
		_mm256_storeu_ps(y + l, _mm256_add_ps(_mm256_loadu_ps(y + l), _mm256_loadu_ps(x + l)));
	for (; l < n; l++)
		y[l] += x[l];
}
#endif

void
backend_cpu_lanes_cols(const struct backend_cpu *c, float *acc, int w, int n, float *out)
{
	void (*add)(float *, const float *, int) = lanes_add;

#ifdef CPU_X86
	if (c->avx2)
		add = lanes_add_avx2;
#endif
	if (w == 64)
		for (int l = 0; l < 16; l++) {
			add(acc + (size_t)l * n, acc + (size_t)(32 + l) * n, n);
			add(acc + (size_t)(16 + l) * n, acc + (size_t)(48 + l) * n, n);
			add(acc + (size_t)l * n, acc + (size_t)(16 + l) * n, n);
		}
	for (int h = 8; h >= 1; h /= 2)
		for (int l = 0; l < h; l++)
			add(acc + (size_t)l * n, acc + (size_t)(l + h) * n, n);
	memcpy(out, acc, (size_t)n * sizeof *out);
}

#ifdef CPU_X86
/*
 * w / 8 AVX2 registers of lanes; the same fused chains as the portable
 * loop.  With no tail (n a multiple of w) the lanes are totalled where
 * they are, by backend_cpu_lanes_total's adds (register k holds lanes
 * 8k..8k+7): returns 1 and the total in *t; else stores them in acc.
 */
__attribute__((target("avx2,fma"), always_inline)) static inline int
lanes_body(float *acc, const float *a, const float *b, int64_t n, int w, float *t)
{
	__m256 r[8];
	int nr = w / 8;
	int64_t i = 0;

	_Pragma("GCC unroll 8")
	for (int k = 0; k < nr; k++)
		r[k] = _mm256_setzero_ps();
	for (; i + w <= n; i += w)
		_Pragma("GCC unroll 8")
		for (int k = 0; k < nr; k++)
			r[k] = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8 * k),
			    _mm256_loadu_ps(b + i + 8 * k), r[k]);
	if (i == n && (w == 16 || w == 64)) {
		__m128 h;

		if (w == 64) {
			r[0] = _mm256_add_ps(r[0], r[4]), r[1] = _mm256_add_ps(r[1], r[5]);
			r[2] = _mm256_add_ps(r[2], r[6]), r[3] = _mm256_add_ps(r[3], r[7]);
			r[0] = _mm256_add_ps(r[0], r[2]), r[1] = _mm256_add_ps(r[1], r[3]);
		}
		r[0] = _mm256_add_ps(r[0], r[1]);
		h = _mm_add_ps(_mm256_castps256_ps128(r[0]), _mm256_extractf128_ps(r[0], 1));
		h = _mm_add_ps(h, _mm_movehl_ps(h, h));
		h = _mm_add_ss(h, _mm_movehdup_ps(h));
		*t = _mm_cvtss_f32(h);
		return 1;
	}
	for (int k = 0; k < nr; k++)
		_mm256_storeu_ps(acc + 8 * k, r[k]);
	for (; i < n; i++)
		acc[i % w] = fmaf(a[i], b[i], acc[i % w]);
	return 0;
}
#endif

#ifdef CPU_X86
__attribute__((target("avx2,fma"))) static int
lanes_avx2(float *acc, const float *a, const float *b, int64_t n, int w, float *t)
{
	return lanes_body(acc, a, b, n, w, t);
}

/* lanes_avx2 over nk rows b + t ldb, each totalled in registers (n % w == 0). */
__attribute__((target("avx2,fma"))) static void
lanes_rows_avx2(const float *a, const float *b, size_t ldb, int nk, int64_t n, int w,
    float scale, float *s)
{
	float acc[64];

	if (w == 64)	/* a constant w each: the lanes stay in registers */
		for (int t = 0; t < nk; t++, b += ldb) {
			lanes_body(acc, a, b, n, 64, &s[t]);
			s[t] *= scale;
		}
	else
		for (int t = 0; t < nk; t++, b += ldb) {
			lanes_body(acc, a, b, n, 16, &s[t]);
			s[t] *= scale;
		}
}
#endif

#ifdef CPU_X86
/*
 * lanes_rows_avx2 on AVX-512: a 512-bit register holds two of its 256-bit
 * lane registers (lanes 16k..16k+15), each lane the same fused chain; the
 * tree's first adds pair such halves as backend_cpu_lanes_total pairs
 * them (w = 64: 0+32 and 16+48, then those; w = 16: none), then the last
 * 16 -> 8 and the 8 lanes as there.
 */
__attribute__((target("avx2,fma,avx512f"), always_inline)) static inline float
lanes512_body(const float *a, const float *b, int64_t n, int w)
{
	__m512 r[4];
	__m256 v;
	__m128 h;

	_Pragma("GCC unroll 4")
	for (int k = 0; k < w / 16; k++)
		r[k] = _mm512_setzero_ps();
	for (int64_t i = 0; i < n; i += w)
		_Pragma("GCC unroll 4")
		for (int k = 0; k < w / 16; k++)
			r[k] = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16 * k),
			    _mm512_loadu_ps(b + i + 16 * k), r[k]);
	if (w == 64) {
		r[0] = _mm512_add_ps(r[0], r[2]), r[1] = _mm512_add_ps(r[1], r[3]);
		r[0] = _mm512_add_ps(r[0], r[1]);
	}
	v = _mm256_add_ps(_mm512_castps512_ps256(r[0]),
	    _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(r[0]), 1)));
	h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	h = _mm_add_ps(h, _mm_movehl_ps(h, h));
	h = _mm_add_ss(h, _mm_movehdup_ps(h));
	return _mm_cvtss_f32(h);
}

__attribute__((target("avx2,fma,avx512f"))) static void
lanes_rows_avx512(const float *a, const float *b, size_t ldb, int nk, int64_t n, int w,
    float scale, float *s)
{
	if (w == 64)	/* a constant w each: the lanes stay in registers */
		for (int t = 0; t < nk; t++, b += ldb)
			s[t] = lanes512_body(a, b, n, 64) * scale;
	else
		for (int t = 0; t < nk; t++, b += ldb)
			s[t] = lanes512_body(a, b, n, 16) * scale;
}
#endif

void
backend_cpu_dot_lanes_rows(const struct backend_cpu *c, const float *a, const float *b,
    size_t ldb, int nk, int64_t n, int w, float scale, float *s)
{
#ifdef CPU_X86
	if (c->avx512 && n % w == 0 && (w == 16 || w == 64)) {
		lanes_rows_avx512(a, b, ldb, nk, n, w, scale, s);
		return;
	}
	if (c->avx2 && n % w == 0 && (w == 16 || w == 64)) {
		lanes_rows_avx2(a, b, ldb, nk, n, w, scale, s);
		return;
	}
#endif
	for (int t = 0; t < nk; t++)
		s[t] = backend_cpu_dot_lanes(c, a, b + (size_t)t * ldb, n, w) * scale;
}

#ifdef CPU_X86
/* The largest of x[0..n) in 8 lanes (NaN skipped: maxps keeps its second operand). */
__attribute__((target("avx2,fma"))) static float
max_avx2(const float *x, int64_t n)
{
	__m256 m = _mm256_set1_ps(-INFINITY);
	float l[8], mx = -INFINITY;
	int64_t i = 0;

	for (; i + 8 <= n; i += 8)
		m = _mm256_max_ps(_mm256_loadu_ps(x + i), m);
	_mm256_storeu_ps(l, m);
	for (int k = 0; k < 8; k++)
		mx = l[k] > mx ? l[k] : mx;
	for (; i < n; i++)
		mx = x[i] > mx ? x[i] : mx;
	return mx;
}

__attribute__((target("avx2,fma"))) static int64_t
affine_avx2(float *x, int64_t n, float a, float b)
{
	__m256 av = _mm256_set1_ps(a), bv = _mm256_set1_ps(b);
	int64_t i = 0;

	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_add_ps(_mm256_loadu_ps(x + i), bv), av));
	return i;
}
#endif

float
backend_cpu_max(const struct backend_cpu *c, const float *x, int64_t n)
{
	float mx = -INFINITY;
	int64_t i = 0;

#ifdef CPU_X86
	if (c->avx2)
		mx = max_avx2(x, n), i = n;
#endif
	for (; i < n; i++)
		mx = x[i] > mx ? x[i] : mx;
	if (mx == 0.0f)	/* the sign of a zero maximum: the first zero, as the scalar loop */
		for (i = 0; i < n; i++)
			if (x[i] == 0.0f)
				return x[i];
	return mx;
}

void
backend_cpu_affine(const struct backend_cpu *c, float *x, int64_t n, float a, float b)
{
	int64_t i = 0;

#ifdef CPU_X86
	if (c->avx2)
		i = affine_avx2(x, n, a, b);
#endif
	for (; i < n; i++)
		x[i] = (x[i] + b) * a;
}

float
backend_cpu_dot_lanes(const struct backend_cpu *c, const float *a, const float *b,
    int64_t n, int w)
{
	float acc[64] = { 0 };

#ifdef CPU_X86
	if (c->avx2) {
		float t;

		if (lanes_avx2(acc, a, b, n, w, &t))
			return t;
		return backend_cpu_lanes_total(acc, w);
	}
#endif
	for (int64_t i = 0; i < n; i++)
		acc[i % w] = fmaf(a[i], b[i], acc[i % w]);
	return backend_cpu_lanes_total(acc, w);
}

#ifdef CPU_X86
/*
 * backend_cpu_decay / backend_cpu_update over the k rows of S [k][n] in
 * order, acc's 64 columns a block kept in registers between the rows:
 * the same operations per element as one row at a time.  Return the
 * columns done (the rest, n % 8, for the portable loops).
 */
__attribute__((target("avx2,fma"))) static int64_t
decay_rows_avx2(float *S, int k, int64_t n, float d, float *acc, const float *kk)
{
	__m256 dv = _mm256_set1_ps(d);
	int64_t j = 0;

	for (; j + 8 <= n; j += 8 * (j + 64 <= n ? 8 : 1)) {
		int nb = j + 64 <= n ? 8 : 1;
		__m256 a[8];

		for (int l = 0; l < nb; l++)
			a[l] = _mm256_loadu_ps(acc + j + 8 * l);
		for (int i = 0; i < k; i++) {
			__m256 kv = _mm256_set1_ps(kk[i]);
			float *r = S + (size_t)i * n + j;

			for (int l = 0; l < nb; l++) {
				__m256 v = _mm256_mul_ps(_mm256_loadu_ps(r + 8 * l), dv);

				_mm256_storeu_ps(r + 8 * l, v);
				a[l] = _mm256_fmadd_ps(v, kv, a[l]);
			}
		}
		for (int l = 0; l < nb; l++)
			_mm256_storeu_ps(acc + j + 8 * l, a[l]);
	}
	return j;
}

__attribute__((target("avx2,fma"))) static int64_t
update_rows_avx2(float *S, int k, int64_t n, const float *kk, const float *dl, float *acc,
    const float *q)
{
	int64_t j = 0;

	for (; j + 8 <= n; j += 8 * (j + 64 <= n ? 8 : 1)) {
		int nb = j + 64 <= n ? 8 : 1;
		__m256 a[8], dlv[8];

		for (int l = 0; l < nb; l++) {
			a[l] = _mm256_loadu_ps(acc + j + 8 * l);
			dlv[l] = _mm256_loadu_ps(dl + j + 8 * l);
		}
		for (int i = 0; i < k; i++) {
			__m256 kv = _mm256_set1_ps(kk[i]), qv = _mm256_set1_ps(q[i]);
			float *r = S + (size_t)i * n + j;

			for (int l = 0; l < nb; l++) {
				__m256 v = _mm256_fmadd_ps(kv, dlv[l], _mm256_loadu_ps(r + 8 * l));

				_mm256_storeu_ps(r + 8 * l, v);
				a[l] = _mm256_fmadd_ps(v, qv, a[l]);
			}
		}
		for (int l = 0; l < nb; l++)
			_mm256_storeu_ps(acc + j + 8 * l, a[l]);
	}
	return j;
}
#endif

void
backend_cpu_decay_rows(const struct backend_cpu *c, float *S, int k, int64_t n, float d,
    float *acc, const float *kk)
{
	int64_t j = 0;

#ifdef CPU_X86
	if (c->avx2)
		j = decay_rows_avx2(S, k, n, d, acc, kk);
#endif
	for (int i = 0; j < n && i < k; i++)
		decay_portable(S + (size_t)i * n + j, d, acc + j, kk[i], n - j);
}

void
backend_cpu_update_rows(const struct backend_cpu *c, float *S, int k, int64_t n,
    const float *kk, const float *dl, float *acc, const float *q)
{
	int64_t j = 0;

#ifdef CPU_X86
	if (c->avx2)
		j = update_rows_avx2(S, k, n, kk, dl, acc, q);
#endif
	for (int i = 0; j < n && i < k; i++)
		update_portable(S + (size_t)i * n + j, kk[i], dl + j, acc + j, q[i], n - j);
}

void
backend_cpu_decay(const struct backend_cpu *c, float *r, float d, float *acc,
    float k, int64_t n)
{
#ifdef CPU_X86
	if (c->avx2) {
		decay_avx2(r, d, acc, k, n);
		return;
	}
#endif
	decay_portable(r, d, acc, k, n);
}

void
backend_cpu_update(const struct backend_cpu *c, float *r, float k, const float *dl,
    float *acc, float q, int64_t n)
{
#ifdef CPU_X86
	if (c->avx2) {
		update_avx2(r, k, dl, acc, q, n);
		return;
	}
#endif
	update_portable(r, k, dl, acc, q, n);
}

/* x / (1 + exp(-x)) with ggml's exp, as its SiLU and SwiGLU compute it. */
float
backend_cpu_silu(float x)
{
	return x / (1.0f + backend_cpu_expf_ggml(0.0f - x));
}

/*
 * FMA, decided once at load time (as lib/quant_dot.c decides AVX2): with
 * it, fexp_ggml's fmaf are instructions instead of calls into libm (the
 * same single rounding either way).  Written by the constructor before
 * main, only read after.
 */
#ifdef CPU_X86
static int cpu_fma;

__attribute__((constructor)) static void
detect_fma(void)
{
	__builtin_cpu_init();
	cpu_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

__attribute__((target("avx2,fma"))) static float
expf_ggml_fma(float x)
{
	return fexp_ggml(x);
}
#endif

/* ggml's exp (lib/fexp.h): the softmax of an F16 cache and SiLU use it. */
float
backend_cpu_expf_ggml(float x)
{
#ifdef CPU_X86
	if (cpu_fma)
		return expf_ggml_fma(x);
#endif
	return fexp_ggml(x);
}

#ifdef CPU_X86
/*
 * fexp_ggml of 8 floats, lane for lane its operations: the same fused
 * multiply-adds (fnmadd is fma(-n, c, x): the same exact value rounded
 * once), n to int exactly (it is whole), the scale by 2^k as fexp_scale's
 * products, NaN and |n| > 192 as fexp_ggml returns them.
 */
__attribute__((target("avx2,fma"))) static __m256
fexp8(__m256 x)
{
	const __m256 sh = _mm256_set1_ps(0x1.8p23f);
	__m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), sh), n = _mm256_sub_ps(z, sh);
	__m256 b = _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.7f7d1cp-20f),
	    _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.62e4p-1f), x)), u = _mm256_mul_ps(b, b);
	__m256 p = _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b,
	    _mm256_set1_ps(0x1.573e2ep-5f)), u, _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b,
	    _mm256_set1_ps(0x1.fffdb6p-2f))), u, _mm256_fmadd_ps(_mm256_set1_ps(0x1.ffffecp-1f), b,
	    _mm256_set1_ps(1.0f)));
	__m256i k = _mm256_cvttps_epi32(n);
	__m256i lo = _mm256_cmpgt_epi32(_mm256_set1_epi32(-126), k);
	__m256i hi = _mm256_cmpgt_epi32(k, _mm256_set1_epi32(127));
	__m256 post = _mm256_blendv_ps(_mm256_blendv_ps(_mm256_set1_ps(1.0f), _mm256_set1_ps(0x1p-100f),
	    _mm256_castsi256_ps(lo)), _mm256_set1_ps(0x1p100f), _mm256_castsi256_ps(hi));
	__m256 r, big;

	k = _mm256_add_epi32(k, _mm256_and_si256(lo, _mm256_set1_epi32(100)));
	k = _mm256_sub_epi32(k, _mm256_and_si256(hi, _mm256_set1_epi32(100)));
	r = _mm256_mul_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_slli_epi32(
	    _mm256_add_epi32(k, _mm256_set1_epi32(127)), 23))), post);
	big = _mm256_cmp_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), n), _mm256_set1_ps(192.0f),
	    _CMP_GT_OQ);
	r = _mm256_blendv_ps(r, _mm256_blendv_ps(_mm256_set1_ps(INFINITY), _mm256_setzero_ps(),
	    _mm256_cmp_ps(n, _mm256_setzero_ps(), _CMP_LE_OQ)), big);
	return _mm256_blendv_ps(r, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

__attribute__((target("avx2,fma"))) static int64_t
expf_n_avx2(float *x, int64_t n)
{
	int64_t i = 0;

	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(x + i, fexp8(_mm256_loadu_ps(x + i)));
	return i;
}

/* x / (1 + exp(0 - x)), as backend_cpu_silu */
__attribute__((target("avx2,fma"))) static int64_t
silu_n_avx2(float *x, int64_t n)
{
	int64_t i = 0;

	for (; i + 8 <= n; i += 8) {
		__m256 v = _mm256_loadu_ps(x + i);

		_mm256_storeu_ps(x + i, _mm256_div_ps(v, _mm256_add_ps(_mm256_set1_ps(1.0f),
		    fexp8(_mm256_sub_ps(_mm256_setzero_ps(), v)))));
	}
	return i;
}
#endif

void
backend_cpu_expf_ggml_n(float *x, int64_t n)
{
	int64_t i = 0;

#ifdef CPU_X86
	if (cpu_fma)
		i = expf_n_avx2(x, n);
#endif
	for (; i < n; i++)
		x[i] = backend_cpu_expf_ggml(x[i]);
}

void
backend_cpu_silu_n(float *x, int64_t n)
{
	int64_t i = 0;

#ifdef CPU_X86
	if (cpu_fma)
		i = silu_n_avx2(x, n);
#endif
	for (; i < n; i++)
		x[i] = backend_cpu_silu(x[i]);
}

float
backend_cpu_sigmoid(float x)
{
	return 1.0f / (1.0f + expf(-x));
}

float
backend_cpu_softplus(float x)
{
	return x > 20.0f ? x : log1pf(expf(x));
}

/* --- memory --- */

/*
 * Zeroed memory for n floats, 64-byte aligned.  From CPU_MAP_MIN bytes on
 * an anonymous mapping populated at once (MAP_POPULATE): committed here,
 * as a memset would, but filled with the kernel's zeroed pages in one call
 * rather than a fault a page (the prefix cache's 1 GiB pool was most of a
 * CPU boot); smaller ones are zeroed here.  cpu_mfree tells the two apart
 * by the mappings the backend keeps.
 */
enum { CPU_MAP_MIN = 1 << 20 };

static float *
cpu_alloc(struct backend *be, size_t n)
{
	struct backend_cpu *c = (struct backend_cpu *)be;
	size_t bytes = n * sizeof(float);
	void *p = NULL;

	if (n > SIZE_MAX / sizeof(float))
		return NULL;
	if (bytes < CPU_MAP_MIN) {
		if (posix_memalign(&p, 64, bytes) != 0)
			return NULL;
		return memset(p, 0, bytes);
	}
	pthread_mutex_lock(&c->map_mu);
	if (c->n_map == c->cap_map) {
		int cap = c->cap_map ? 2 * c->cap_map : 16;
		struct backend_cpu_map *m = realloc(c->map, (size_t)cap * sizeof *m);

		if (m == NULL) {
			pthread_mutex_unlock(&c->map_mu);
			return NULL;
		}
		c->map = m, c->cap_map = cap;
	}
	p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
	    -1, 0);
	if (p == MAP_FAILED)
		p = NULL;
	else
		c->map[c->n_map++] = (struct backend_cpu_map){ p, bytes };
	pthread_mutex_unlock(&c->map_mu);
	return p;
}

static void
cpu_mfree(struct backend *be, float *p)
{
	struct backend_cpu *c = (struct backend_cpu *)be;

	if (p == NULL)
		return;
	pthread_mutex_lock(&c->map_mu);
	for (int i = c->n_map - 1; i >= 0; i--)
		if (c->map[i].p == (void *)p) {
			munmap(p, c->map[i].n);
			c->map[i] = c->map[--c->n_map];
			pthread_mutex_unlock(&c->map_mu);
			return;
		}
	pthread_mutex_unlock(&c->map_mu);
	free(p);
}

static int
cpu_move(struct backend *be, float *dst, const float *src, size_t n)
{
	memmove(dst, src, n * sizeof *dst);
	return 0;
}

static int
cpu_fill(struct backend *be, float *dst, float v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = v;
	return 0;
}

static int
cpu_sync(struct backend *be)
{
	return 0;
}

/* --- weights: referenced in place (mapped files stay mapped) --- */

static int
cpu_supports(const struct backend *be, int type)
{
	return quant_can_dequantize(type);
}

static int
cpu_weight_init(struct backend *be, struct backend_weight *w)
{
	w->priv = NULL;
	return 0;
}

static void
cpu_weight_release(struct backend *be, struct backend_weight *w)
{
}

/*
 * cpu:copy, a test seam: weights as a device takes them, their bytes
 * copied at init (a later write to the caller's bytes does not reach
 * them) and freed at release; everything else is cpu's.
 */
static int
cpu_weight_copy(struct backend *be, struct backend_weight *w)
{
	size_t n = w->row_size * (size_t)w->ne1;

	if ((w->priv = malloc(n)) == NULL)
		return util_err(be->err, "weight: out of memory");
	memcpy(w->priv, w->data, n);
	w->data = w->priv;
	return 0;
}

static void
cpu_weight_free(struct backend *be, struct backend_weight *w)
{
	free(w->priv);
}

/* backend_weight_rows: the rows are w->data's (the caller's bytes, or
 * cpu:copy's own); copied unless src is them already. */
static int
cpu_weight_rows(struct backend *be, struct backend_weight *w, int64_t r0, int64_t n,
    const void *src)
{
	char *dst = (char *)w->data + (size_t)r0 * w->row_size;

	if (dst != src)
		memmove(dst, src, (size_t)n * w->row_size);
	return 0;
}

static void
bf16_row(const uint16_t *s, float *y, int64_t n)
{
	for (int64_t i = 0; i < n; i++) {
		uint32_t u = (uint32_t)s[i] << 16;

		memcpy(&y[i], &u, 4);
	}
}

#ifdef CPU_X86
__attribute__((target("avx2,fma"))) UTIL_SAN_HOT static void
bf16_row_avx2(const uint16_t *s, float *y, int64_t n)
{
	int64_t i = 0;

	util_san_range(s, (size_t)n * 2);
	util_san_range(y, (size_t)n * 4);

	for (; i + 8 <= n; i += 8) {
		__m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(s + i)));

		_mm256_storeu_si256((__m256i *)(y + i), _mm256_slli_epi32(v, 16));
	}
	bf16_row(s + i, y + i, n - i);
}

__attribute__((target("avx2,fma,f16c"))) static void
f16_row_f16c(const uint16_t *s, float *y, int64_t n)
{
	int64_t i = 0;

	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i))));
	for (; i < n; i++)
		y[i] = quant_f16_to_f32(s[i]);
}
#endif

/* Row j of w as floats: the weight itself for F32, else decoded into buf
 * (F16 and BF16 here, exactly; the rest by quant_dequantize_row). */
static const float *
weight_row(const struct backend_cpu *c, const struct backend_weight *w, int64_t j, float *buf)
{
	const char *src = (const char *)w->data + (size_t)j * w->row_size;

	if (w->type == QUANT_F32)
		return (const float *)src;
#ifdef CPU_X86
	if (w->type == QUANT_BF16 && c->avx2 && ((uintptr_t)src & 1) == 0)
		bf16_row_avx2((const uint16_t *)src, buf, w->ne0);
	else
#endif
	if (w->type == QUANT_BF16 && ((uintptr_t)src & 1) == 0)
		bf16_row((const uint16_t *)src, buf, w->ne0);
#ifdef CPU_X86
	else if (w->type == QUANT_F16 && c->f16c && ((uintptr_t)src & 1) == 0)
		f16_row_f16c((const uint16_t *)src, buf, w->ne0);
#endif
	else
		quant_dequantize_row(w->type, src, buf, w->ne0);	/* type checked at init */
	return buf;
}

static int cpu_swiglu(struct backend *, const float *, const float *, float *, size_t);

/* --- embed --- */

struct embed_job {
	const struct backend_cpu *c;
	const struct backend_weight *w;
	const int32_t *ids;
	float	*y;
	int	ldy;
};

static void
embed_rows(void *ctx, int64_t i0, int64_t i1, int tid)
{
	struct embed_job *j = ctx;

	for (int64_t i = i0; i < i1; i++) {
		float *y = j->y + i * j->ldy;
		const float *r = weight_row(j->c, j->w, j->ids[i], y);

		if (r != y)
			memcpy(y, r, j->w->ne0 * sizeof *y);
	}
}

static int
cpu_embed(struct backend *be, const struct backend_weight *w, const int32_t *ids,
    int m, float *y, int ldy)
{
	struct embed_job j = { (struct backend_cpu *)be, w, ids, y, ldy };

	return backend_cpu_run((struct backend_cpu *)be, m, 4, embed_rows, &j);
}

/* --- norms --- */

struct norm_job {
	struct backend_cpu *c;
	const float *x, *z, *w;
	float	*y;
	int	ldx, ldy, n;
	float	eps;
};

static void
rmsnorm_rows(void *ctx, int64_t r0, int64_t r1, int tid)
{
	struct norm_job *j = ctx;

	for (int64_t r = r0; r < r1; r++) {
		const float *x = j->x + r * j->ldx;
		float *y = j->y + r * j->ldy;
		double ss = 0.0;
		float s;

		/* as ggml's rms_norm: float squares summed in double, the mean rounded to float */
		for (int i = 0; i < j->n; i++)
			ss += (double)(x[i] * x[i]);
		s = 1.0f / sqrtf((float)(ss / j->n) + j->eps);

		for (int i = 0; i < j->n; i++)
			y[i] = j->w ? x[i] * s * j->w[i] : x[i] * s;
		for (int i0 = 0; j->z != NULL && i0 < j->n; i0 += 256) {	/* y *= silu(z) */
			int nz = j->n - i0 < 256 ? j->n - i0 : 256;
			float g[256];

			memcpy(g, j->z + r * j->n + i0, nz * sizeof *g);
			backend_cpu_silu_n(g, nz);
			for (int i = 0; i < nz; i++)
				y[i0 + i] *= g[i];
		}
	}
}

static int
cpu_rmsnorm(struct backend *be, const float *x, int ldx, const float *w, float *y,
    int ldy, int rows, int n, float eps)
{
	struct backend_cpu *c = (struct backend_cpu *)be;
	struct norm_job j = { c, x, NULL, w, y, ldx, ldy, n, eps };

	return backend_cpu_run(c, rows, 16, rmsnorm_rows, &j);
}

static int
cpu_rmsnorm_gated(struct backend *be, const float *x, const float *z,
    const float *w, float *y, int rows, int n, float eps)
{
	struct backend_cpu *c = (struct backend_cpu *)be;
	struct norm_job j = { c, x, z, w, y, n, n, n, eps };

	return backend_cpu_run(c, rows, 16, rmsnorm_rows, &j);
}

static void
l2norm_rows(void *ctx, int64_t r0, int64_t r1, int tid)
{
	struct norm_job *j = ctx;

	for (int64_t r = r0; r < r1; r++) {
		float *x = j->y + r * j->ldy;
		float nrm = sqrtf(j->c->dot(x, x, j->n));
		float s = 1.0f / (nrm > j->eps ? nrm : j->eps);

		for (int i = 0; i < j->n; i++)
			x[i] *= s;
	}
}

static int
cpu_l2norm(struct backend *be, float *x, int ldx, int rows, int n, float eps)
{
	struct backend_cpu *c = (struct backend_cpu *)be;
	struct norm_job j = { c, x, NULL, NULL, x, ldx, ldx, n, eps };

	return backend_cpu_run(c, rows, 16, l2norm_rows, &j);
}

/*
 * matmul: split by weight rows; y[r][j] is one dot, whatever m.  How a
 * dot is taken depends on the weight type only (never on m):
 *   F32: the backend's dot on the row in place;
 *   quantized types with a ggml vec_dot: the activation row is quantized
 *     once per call (quant_quantize_act) and quant_vec_dot runs, as in
 *     ggml's CPU backend (quant_vec_dot_rows: a weight row against up to
 *     MM_ROWS activation rows at once, each row's bits its own dot's; with
 *     AVX-512 VNNI, rows packed once per call, quant_vec_dot_packed);
 *   F16, BF16 and the rest: the row is dequantized (MM_TILE rows at a
 *     time, reused over the m activation rows) and the backend's dot runs.
 */

struct mm_job {
	struct backend_cpu *c;
	const struct backend_weight *w;
	const struct backend_weight *wu;	/* NULL, or up: y = silu(x.w) * (x.wu) */
	const float *x;
	float	*y;
	int	ldx, ldy, m;
	const char *xq;			/* NULL, or [m][xq_size] quantized x */
	size_t	xq_size;
	const char *pk;			/* NULL, or xq packed by MM_PACK rows (quant_pack) */
	size_t	pk_size;		/* bytes a group of MM_PACK rows takes there */
};

static int
mm_quantized(int type)
{
	return type != QUANT_F32 && type != QUANT_F16 && type != QUANT_BF16 &&
	    quant_vec_dot_type(type) >= 0;
}

/*
 * The outputs of a tile: G[t][k] holds weight row j + t's dot with
 * activation row r + k (t < nt, k < nr; U[t][k] the same with wu); into
 * y[r + k][j + t] goes w->scale times it, or with wu (the fused swiglu)
 * silu of that times wu->scale times U's, each element as one row alone
 * computes it (the SiLU of the whole tile at once, backend_cpu_silu_n).
 */
static void
mm_out(struct mm_job *jb, float (*G)[MM_ROWS], float (*U)[MM_ROWS], int64_t j, int nt,
    int r, int nr)
{
	const struct backend_weight *w = jb->w, *wu = jb->wu;
	float *y = jb->y + (size_t)r * jb->ldy + j, v[MM_ROWS * MM_TILE];

	for (int k = 0; k < nr; k++)	/* v: row-major [nr][nt], as y */
		for (int t = 0; t < nt; t++)
			v[k * nt + t] = w->scale != 1.0f ? G[t][k] * w->scale : G[t][k];
	if (wu != NULL) {
		backend_cpu_silu_n(v, nr * nt);
		for (int k = 0; k < nr; k++)
			for (int t = 0; t < nt; t++)
				v[k * nt + t] *= wu->scale != 1.0f ? U[t][k] * wu->scale : U[t][k];
	}
	for (int k = 0; k < nr; k++)
		memcpy(y + (size_t)k * jb->ldy, v + k * nt, nt * sizeof *v);
}

/*
 * Float weight rows wr[t] (t < nt) against activation rows r..: up to 8
 * at once through dotr_avx512, or 3 through dot3, or one (the same bits
 * as one at a time) into G[t][k] (U from ur); returns the rows done.
 * Under the sanitizers the kernels' loads are not checked one by one: mm_run
 * checks the weights and the activation rows whole first, and weight_row's
 * decode (bf16_row_avx2) the rows it writes into the scratch.
 */
static int
mm_rows_f(struct mm_job *jb, const float *const *wr, const float *const *ur, int nt, int r,
    float (*G)[MM_ROWS], float (*U)[MM_ROWS])
{
	int n = (int)jb->w->ne0, R = 1;
	const float *x[8];
	float g[8], u[8];

#ifdef CPU_X86
	if (jb->c->avx512 && r + 2 <= jb->m)
		R = jb->m - r < 8 ? jb->m - r : 8;
	else if (jb->c->avx2 && r + 3 <= jb->m)
		R = 3;
#endif
	for (int k = 0; k < R; k++)
		x[k] = jb->x + (size_t)(r + k) * jb->ldx;
	for (int t = 0; t < nt; t++) {
		for (int pass = 0; pass < (ur != NULL ? 2 : 1); pass++) {
			const float *wt = pass ? ur[t] : wr[t];
			float *o = pass ? u : g;

#ifdef CPU_X86
			if (R > 3)
				dotr_avx512(wt, x, n, R, o);
			else if (R == 3 && !jb->c->avx512)
				dot3_avx2(wt, x, n, o);
			else if (R > 1)
				dotr_avx512(wt, x, n, R, o);
			else
#endif
				o[0] = jb->c->dot(wt, x[0], n);
		}
		for (int k = 0; k < R; k++) {
			G[t][k] = g[k];
			if (ur != NULL)
				U[t][k] = u[k];
		}
	}
	return R;
}

/*
 * Quantized weights: MM_TILE weight rows at a time, each against MM_ROWS
 * activation rows at a time, or MM_PACK packed ones (the tile, and a
 * group of packed rows, stay in L1 while the other passes).
 */
static void
mm_rows_q(struct mm_job *jb, int64_t j0, int64_t j1)
{
	const struct backend_weight *w = jb->w, *wu = jb->wu;
	float G[MM_TILE][MM_ROWS], U[MM_TILE][MM_ROWS];

	for (int64_t jt = j0; jt < j1; jt += MM_TILE) {
		int nt = j1 - jt < MM_TILE ? (int)(j1 - jt) : MM_TILE;

		for (int r = 0, g = jb->pk ? MM_PACK : MM_ROWS; r < jb->m; r += g) {
			int nr = jb->m - r < g ? jb->m - r : g;
			const char *xq = jb->xq + (size_t)r * jb->xq_size;
			const char *pk = jb->pk + (size_t)(r / MM_PACK) * jb->pk_size;

			for (int t = 0; t < nt; t++) {
				const char *wr = (const char *)w->data + (size_t)(jt + t) * w->row_size;
				const char *ur = wu ? (const char *)wu->data +
				    (size_t)(jt + t) * wu->row_size : NULL;

				if (jb->pk != NULL)
					quant_vec_dot_packed(w->type, w->ne0, wr, pk, nr, G[t]);
				else
					quant_vec_dot_rows(w->type, w->ne0, wr, xq, jb->xq_size, nr, G[t]);
				if (wu != NULL && jb->pk != NULL)
					quant_vec_dot_packed(wu->type, wu->ne0, ur, pk, nr, U[t]);
				else if (wu != NULL)
					quant_vec_dot_rows(wu->type, wu->ne0, ur, xq, jb->xq_size, nr, U[t]);
			}
			mm_out(jb, G, U, jt, nt, r, nr);
		}
	}
}

static void
mm_rows(void *ctx, int64_t j0, int64_t j1, int tid)
{
	struct mm_job *jb = ctx;
	const struct backend_weight *w = jb->w, *wu = jb->wu;
	const float *wr[MM_TILE] = { 0 }, *ur[MM_TILE] = { 0 };
	float G[MM_TILE][MM_ROWS], U[MM_TILE][MM_ROWS], *buf = NULL;

	if (jb->xq != NULL) {
		mm_rows_q(jb, j0, j1);
		return;
	}
	if (w->type != QUANT_F32)
		if ((buf = backend_cpu_scratch(jb->c, tid, 2 * MM_TILE * (size_t)w->ne0)) == NULL)
			return;
	for (int64_t j = j0; j < j1; j += MM_TILE) {
		int nt = j1 - j < MM_TILE ? (int)(j1 - j) : MM_TILE;

		for (int t = 0; t < nt; t++) {
			wr[t] = weight_row(jb->c, w, j + t, buf + t * w->ne0);
			if (wu != NULL)
				ur[t] = weight_row(jb->c, wu, j + t, buf + (MM_TILE + t) * w->ne0);
		}
		for (int r = 0, R; r < jb->m; r += R) {
			R = mm_rows_f(jb, wr, wu ? ur : NULL, nt, r, G, U);
			mm_out(jb, G, U, j, nt, r, R);
		}
	}
}

struct quant_job {
	struct mm_job *jb;
	char	*xq, *pk;
};

static void
quantize_rows(void *ctx, int64_t r0, int64_t r1, int tid)
{
	struct quant_job *q = ctx;
	struct mm_job *jb = q->jb;

	for (int64_t r = r0; r < r1; r++)
		quant_quantize_act(jb->w->type, jb->x + r * jb->ldx,
		    q->xq + r * jb->xq_size, jb->w->ne0);
}

/* Groups g0..g1 of MM_PACK quantized rows into their packed form. */
static void
pack_groups(void *ctx, int64_t g0, int64_t g1, int tid)
{
	struct quant_job *q = ctx;
	struct mm_job *jb = q->jb;

	for (int64_t g = g0; g < g1; g++) {
		int r = (int)g * MM_PACK, nr = jb->m - r < MM_PACK ? jb->m - r : MM_PACK;

		quant_pack(jb->w->type, jb->w->ne0, q->xq + (size_t)r * jb->xq_size, jb->xq_size,
		    nr, q->pk + (size_t)g * jb->pk_size);
	}
}

/* The caller's scratch s, at least n bytes (64-byte aligned); NULL if out of memory. */
static char *
grow(struct backend_cpu_scratch *s, size_t n)
{
	size_t need = (n + sizeof(float) - 1) / sizeof(float);

	if (s->n < need) {
		float *p = NULL;

		if (posix_memalign((void **)&p, 64, need * sizeof *p) != 0)
			return NULL;
		free(s->p);
		s->p = p;
		s->n = need;
	}
	return (char *)s->p;
}

/*
 * Quantize the activations for jb's weight type into the caller's
 * scratch, and for products of several rows pack them where the CPU has
 * a packed kernel for the type (quant_pack_size).
 */
static int
mm_prepare(struct backend_cpu *c, struct mm_job *jb)
{
	struct quant_job q = { jb, NULL, NULL };
	int t = jb->w->type, ng = (jb->m + MM_PACK - 1) / MM_PACK;

	if (!mm_quantized(t))
		return 0;
	jb->xq_size = quant_row_size(quant_vec_dot_type(t), jb->w->ne0);
	if ((q.xq = grow(&c->xq, jb->xq_size * jb->m)) == NULL)
		return -1;
	if (backend_cpu_run(c, jb->m, 4, quantize_rows, &q) != 0)
		return -1;
	jb->xq = q.xq;
	jb->pk_size = jb->m > 1 ? quant_pack_size(t, jb->w->ne0, MM_PACK) : 0;
	if (jb->pk_size == 0)
		return 0;
	if ((q.pk = grow(&c->pk, jb->pk_size * ng)) == NULL)
		return -1;
	if (backend_cpu_run(c, ng, 1, pack_groups, &q) != 0)
		return -1;
	jb->pk = q.pk;
	return 0;
}

/* Under the sanitizers (util_san_range): the weights and activation rows a
 * float product reads, whole, once a product (its kernels check nothing). */
static void
mm_san_ranges(const struct mm_job *jb)
{
	util_san_range(jb->w->data, jb->w->row_size * (size_t)jb->w->ne1);
	if (jb->wu != NULL)
		util_san_range(jb->wu->data, jb->wu->row_size * (size_t)jb->wu->ne1);
	for (int r = 0; r < jb->m; r++)
		util_san_range(jb->x + (size_t)r * jb->ldx, (size_t)jb->w->ne0 * 4);
}

static int
mm_run(struct backend_cpu *c, struct mm_job *jb)
{
	int64_t per = jb->w->ne1 / ((int64_t)c->nt * 4 * MM_TILE);

	int emu;

	if (jb->xq == NULL && mm_prepare(c, jb) != 0)	/* else prepared for this type */
		return util_err(c->be.err, "matmul: out of memory");
	if (jb->xq == NULL)
		mm_san_ranges(jb);
	/* backend_cpu_gemm_emulate: a GPU's prompt numerics instead (kernel-check) */
	if ((emu = backend_cpu_emu_mm(c, jb->w, jb->wu, jb->x, jb->ldx, jb->xq, jb->xq_size,
	    jb->y, jb->ldy, jb->m)) != 0)
		return emu < 0 ? util_err(c->be.err, "matmul: gemm emulation failed") : 0;
	if (backend_cpu_run(c, jb->w->ne1, (per > 1 ? per : 1) * MM_TILE, mm_rows, jb) != 0)
		return util_err(c->be.err, "matmul: out of memory");
	return 0;
}

static int
cpu_matmul(struct backend *be, const struct backend_weight *w, const float *x,
    int ldx, float *y, int ldy, int m)
{
	struct backend_cpu *c = (struct backend_cpu *)be;
	struct mm_job jb = { c, w, NULL, x, y, ldx, ldy, m, NULL, 0, NULL, 0 };

	return mm_run(c, &jb);
}

static int
cpu_matmul_swiglu(struct backend *be, const struct backend_weight *wg,
    const struct backend_weight *wu, const float *x, int m, float *y)
{
	struct backend_cpu *c = (struct backend_cpu *)be;
	struct mm_job jb = { c, wg, wu, x, y, wg->ne0, wg->ne1, m, NULL, 0, NULL, 0 };
	float *u;
	int rc;

	if (wg->type == wu->type)
		return mm_run(c, &jb);
	/* different types would need two activation encodings: two passes */
	if ((u = cpu_alloc(be, (size_t)m * wu->ne1)) == NULL)
		return util_err(be->err, "matmul: out of memory");
	rc = cpu_matmul(be, wg, x, wg->ne0, y, wg->ne1, m);
	if (rc == 0)
		rc = cpu_matmul(be, wu, x, wu->ne0, u, wu->ne1, m);
	if (rc == 0)
		rc = cpu_swiglu(be, y, u, y, (size_t)m * wu->ne1);
	free(u);
	return rc;
}

int
backend_cpu_matmul(struct backend *be, const struct backend_weight *w, const float *x,
    int ldx, float *y, int ldy, int m)
{
	return cpu_matmul(be, w, x, ldx, y, ldy, m);
}

int
backend_cpu_matmul_swiglu(struct backend *be, const struct backend_weight *wg,
    const struct backend_weight *wu, const float *x, int m, float *y)
{
	return cpu_matmul_swiglu(be, wg, wu, x, m, y);
}

static int
cpu_rmsnorm_matmul(struct backend *be, const float *x, int m, int n,
    const float *nw, float eps, int nout, const struct backend_weight *const *W,
    float *const *y)
{
	struct backend_cpu *c = (struct backend_cpu *)be;
	size_t need = (size_t)m * n;
	float *t;

	if (c->tmp.n < need) {
		if ((t = cpu_alloc(be, need)) == NULL)
			return util_err(be->err, "rmsnorm_matmul: out of memory");
		free(c->tmp.p);
		c->tmp.p = t;
		c->tmp.n = need;
	}
	t = c->tmp.p;
	if (cpu_rmsnorm(be, x, n, nw, t, n, m, n, eps) != 0)
		return util_err(be->err, "rmsnorm_matmul: out of memory");
	/* the products of one weight type share t's quantized (and packed) rows */
	struct mm_job jb = { c, NULL, NULL, t, NULL, n, 0, m, NULL, 0, NULL, 0 };

	for (int i = 0; i < nout; i++) {
		if (i > 0 && W[i]->type != W[i - 1]->type)
			jb.xq = NULL, jb.pk = NULL;
		jb.w = W[i], jb.y = y[i], jb.ldy = (int)W[i]->ne1;
		if (mm_run(c, &jb) != 0)
			return -1;
	}
	return 0;
}

/* --- elementwise --- */

struct ew_job {
	float	*y;
	const float *a, *b;
	int	lda, ldb, n;		/* 2-D jobs: rows of n */
	enum backend_act act;
};

static void
swiglu_range(void *ctx, int64_t i0, int64_t i1, int tid)
{
	struct ew_job *j = ctx;

	float t[256];

	for (int64_t i = i0; i < i1; i += 256) {
		int n = i1 - i < 256 ? (int)(i1 - i) : 256;

		memcpy(t, j->a + i, n * sizeof *t);
		backend_cpu_silu_n(t, n);
		for (int k = 0; k < n; k++)
			j->y[i + k] = t[k] * j->b[i + k];
	}
}

static int
cpu_swiglu(struct backend *be, const float *g, const float *u, float *y, size_t n)
{
	struct ew_job j = { y, g, u, 0, 0, 0, 0 };

	return backend_cpu_run((struct backend_cpu *)be, n, 16384, swiglu_range, &j);
}

static void
add_range(void *ctx, int64_t i0, int64_t i1, int tid)
{
	struct ew_job *j = ctx;

	for (int64_t i = i0; i < i1; i++)
		j->y[i] += j->a[i];
}

static int
cpu_add(struct backend *be, float *y, const float *x, size_t n)
{
	struct ew_job j = { y, x, NULL, 0, 0, 0, 0 };

	return backend_cpu_run((struct backend_cpu *)be, n, 16384, add_range, &j);
}

static void
act_range(void *ctx, int64_t i0, int64_t i1, int tid)
{
	struct ew_job *j = ctx;

	if (j->act == BACKEND_ACT_SILU) {
		backend_cpu_silu_n(j->y + i0, i1 - i0);
		return;
	}
	for (int64_t i = i0; i < i1; i++) {
		float v = j->y[i];

		j->y[i] = j->act == BACKEND_ACT_SILU ? backend_cpu_silu(v) :
		    j->act == BACKEND_ACT_SIGMOID ? backend_cpu_sigmoid(v) :
		    backend_cpu_softplus(v);
	}
}

static int
cpu_act(struct backend *be, enum backend_act act, float *x, size_t n)
{
	struct ew_job j = { x, NULL, NULL, 0, 0, 0, act };

	return backend_cpu_run((struct backend_cpu *)be, n, 16384, act_range, &j);
}

static void
mul_sigmoid_rows(void *ctx, int64_t r0, int64_t r1, int tid)
{
	struct ew_job *j = ctx;

	for (int64_t r = r0; r < r1; r++)
		for (int i = 0; i < j->n; i++)
			j->y[r * j->lda + i] *= backend_cpu_sigmoid(j->b[r * j->ldb + i]);
}

static int
cpu_mul_sigmoid(struct backend *be, float *x, int ldx, const float *g, int ldg,
    int rows, int n)
{
	struct ew_job j = { x, NULL, g, ldx, ldg, n, 0 };

	return backend_cpu_run((struct backend_cpu *)be, rows, 64, mul_sigmoid_rows, &j);
}

static int
cpu_argmax(struct backend *be, const float *x, int ldx, int m, int n, int32_t *out)
{
	for (int r = 0; r < m; r++)
		out[r] = sample_argmax(x + (size_t)r * ldx, n);
	return 0;
}

/* x[t] = -inf where bit t of bits is 0 (grammar_mask_logits's loop). */
static int
cpu_mask(struct backend *be, float *x, int n, const uint32_t *bits)
{
	for (int i = 0; i < (n + 31) / 32; i++) {
		uint32_t w = bits[i];

		for (int k = 0; w != 0xffffffffu && k < 32 && i * 32 + k < n; k++)
			if (!(w >> k & 1))
				x[i * 32 + k] = -INFINITY;
	}
	return 0;
}

/* DFlash2's grouped dynamic causal convolution (backend_dconv), the reference's order. */
static int
cpu_dconv(struct backend *be, const float *x, int m, int n, const float *dyn, int ldd, int K,
    int group, const float *base, float *y)
{
	for (int t = 0; t < m; t++) {
		const float *dy = dyn + (size_t)t * ldd;

		for (int c = 0; c < n; c++) {
			float acc = 0;

			for (int o = 0; o < K && o <= t; o++) {
				float xv = x[(size_t)(t - o) * n + c];

				acc = acc + base[(size_t)o * n + c] * xv;
				acc = acc + dy[(size_t)o * (n / group) + c / group] * xv;
			}
			y[(size_t)t * n + c] = acc;
		}
	}
	return 0;
}

/* --- open / close --- */

#ifdef CPU_X86
/* CPUID.1:ECX bit 29 (clang 14's __builtin_cpu_supports has no "f16c") */
static int
has_f16c(void)
{
	unsigned a, b, c, d;

	return __get_cpuid(1, &a, &b, &c, &d) && (c >> 29 & 1);
}
#endif

static void
cpu_close(struct backend *be)
{
	struct backend_cpu *c = (struct backend_cpu *)be;

	if (c->th != NULL) {
		pthread_mutex_lock(&c->mu);
		atomic_store(&c->quit, 1);
		pthread_cond_broadcast(&c->go);
		pthread_mutex_unlock(&c->mu);
		for (int i = 0; i < c->nt - 1; i++)
			pthread_join(c->th[i], NULL);
	}
	for (int i = 0; c->scr != NULL && i < c->nt; i++)
		free(c->scr[i].p);
#ifdef MEMRA_SAN
	if (c->n_map > 0) {	/* the leak checker does not see mappings: say so here */
		fprintf(stderr, "backend: cpu: %d allocations of %zu bytes and more never freed\n",
		    c->n_map, (size_t)CPU_MAP_MIN);
		abort();
	}
#endif
	for (int i = 0; i < c->n_map; i++)
		munmap(c->map[i].p, c->map[i].n);
	free(c->map);
	pthread_mutex_destroy(&c->map_mu);
	pthread_mutex_destroy(&c->mu);
	pthread_cond_destroy(&c->go);
	pthread_cond_destroy(&c->done);
	free(c->tmp.p);
	free(c->xq.p);
	free(c->pk.p);
	free(c->moe.p);
	free(c->emu.p);
	free(c->scr);
	free(c->wk);
	free(c->th);
	free(c);
}

int
backend_cpu_is(const struct backend *be)
{
	return be->ops->close == cpu_close;
}

/* backend_attn_hi: backend_cpu_attention honours hi and ring. */
static int
cpu_attn_hi(const struct backend *be)
{
	return 1;
}

static const struct backend_ops cpu_ops = {
	.close = cpu_close, .alloc = cpu_alloc, .mfree = cpu_mfree,
	.write = cpu_move, .read = cpu_move, .copy = cpu_move, .fill = cpu_fill,
	.sync = cpu_sync, .weight_init = cpu_weight_init, .weight_rows = cpu_weight_rows,
	.weight_release = cpu_weight_release, .supports = cpu_supports,
	.embed = cpu_embed, .rmsnorm = cpu_rmsnorm, .rmsnorm_gated = cpu_rmsnorm_gated,
	.matmul = cpu_matmul, .rmsnorm_matmul = cpu_rmsnorm_matmul,
	.matmul_swiglu = cpu_matmul_swiglu, .swiglu = cpu_swiglu,
	.rope = backend_cpu_rope, .attention = backend_cpu_attention,
	.mul_sigmoid = cpu_mul_sigmoid, .conv1d_silu = backend_cpu_conv1d_silu,
	.gdn_step = backend_cpu_gdn_step, .gdn_chunk = backend_cpu_gdn_chunk,
	.l2norm = cpu_l2norm, .act = cpu_act, .add = cpu_add, .argmax = cpu_argmax,
	.round_f16 = backend_cpu_round_f16,
	.moe_route = backend_cpu_moe_route, .moe_swiglu = backend_cpu_moe_swiglu,
	.moe_down = backend_cpu_moe_down, .add_gated = backend_cpu_add_gated,
	.geglu = backend_cpu_geglu, .softcap = backend_cpu_softcap, .scale = backend_cpu_scale,
	.moe_geglu = backend_cpu_moe_geglu, .moe_scale = backend_cpu_moe_scale,
	.moe_route_sigmoid = backend_cpu_moe_route_sigmoid,
	.swiglu_limit = backend_cpu_swiglu_limit, .head_gate = backend_cpu_head_gate,
	.clamp = backend_cpu_clamp, .attn_hi = cpu_attn_hi, .mask = cpu_mask,
	.dconv = cpu_dconv, .gdn_step_seqs = backend_cpu_gdn_step_seqs,
	.matmul_half = backend_cpu_matmul_half,
};

static int
start_workers(struct backend_cpu *c, char *err)
{
	c->scr = calloc(c->nt, sizeof *c->scr);
	c->wk = calloc(c->nt, sizeof *c->wk);
	c->th = calloc(c->nt, sizeof *c->th);
	if (c->scr == NULL || c->wk == NULL || c->th == NULL)
		return util_err(err, "backend: cpu: out of memory");
	for (int i = 0; i < c->nt - 1; i++) {
		c->wk[i].c = c;
		c->wk[i].tid = i + 1;
		if (pthread_create(&c->th[i], NULL, worker, &c->wk[i]) != 0) {
			c->nt = i + 1;	/* the ones started, plus the caller */
			return util_err(err, "backend: cpu: cannot start thread %d", i + 1);
		}
	}
	return 0;
}

struct backend *
backend_cpu_open(const char *opts, int n_threads, char *err)
{
	struct backend_cpu *c;
	int simd = strcmp(opts, "scalar") != 0, nofuse = strcmp(opts, "nofuse") == 0;
	int copy = strcmp(opts, "copy") == 0;

	if (*opts != '\0' && simd && !nofuse && !copy) {
		util_err(err, "backend: 'cpu:%s': unknown option (cpu, cpu:scalar, "
		    "cpu:nofuse, cpu:copy)", opts);
		return NULL;
	}
	if (n_threads == 0) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);
		n_threads = n > 0 ? (int)n : 1;
	}
	if ((c = calloc(1, sizeof *c)) == NULL) {
		util_err(err, "backend: cpu: out of memory");
		return NULL;
	}
	pthread_mutex_init(&c->mu, NULL);
	pthread_mutex_init(&c->map_mu, NULL);
	pthread_cond_init(&c->go, NULL);
	pthread_cond_init(&c->done, NULL);
	c->ops = cpu_ops;
	if (nofuse)	/* backend.c composes the fused ops: tests that path */
		c->ops.rmsnorm_matmul = NULL, c->ops.matmul_swiglu = NULL;
	c->be.ops = &c->ops;
	c->be.impl = c;
	if (copy)	/* weights as a device's: copied (cpu_weight_copy) */
		c->ops.weight_init = cpu_weight_copy, c->ops.weight_release = cpu_weight_free;
	c->be.host = 1;
	c->be.cut_exact = 1;
	c->be.step_rows = BACKEND_ROWS_MAX;	/* every product is row-invariant at any m */
	c->emu_kind = -1;	/* backend_cpu_gemm_emulate: off */
	c->nt = n_threads;
	c->dot = dot_portable;
	snprintf(c->be.name, sizeof c->be.name, "cpu-scalar");
#ifdef CPU_X86
	if (simd && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
		c->dot = dot_avx2;
		c->avx2 = 1;
		c->f16c = has_f16c();
		c->avx512 = __builtin_cpu_supports("avx512f");
		snprintf(c->be.name, sizeof c->be.name, "cpu-avx2");
	}
#endif
	if (start_workers(c, err) != 0) {
		cpu_close(&c->be);
		return NULL;
	}
	c->be.n_threads = c->nt;
	return &c->be;
}
