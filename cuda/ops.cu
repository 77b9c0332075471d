/*
 * ops: the fp32 kernels of a forward pass besides the products: norms,
 * RoPE, activations, conv1d, the gated delta rule, attention, argmax, top k.
 * Reductions run in a fixed order (strided per thread, then a fixed tree),
 * so a result never depends on timing.
 */
#include "gpu_impl.cuh"
#include "attn_prefill.cuh"
#include "sample.h"	/* SAMPLE_WONE */

#include <float.h>

__device__ __forceinline__ float
silu(float x)
{
	return gpu_silu(x);
}

__device__ __forceinline__ float
sigmoid(float x)
{
	return gpu_sigmoid(x);
}

/* Sum of v over the block (blockDim.x a multiple of 32, <= 1024); all threads get it. */
template <typename F>
__device__ F
block_sum(F v, F *red)
{
	int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;

	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
	__syncthreads();
	if (lane == 0)
		red[warp] = v;
	__syncthreads();
	if (warp == 0) {
		v = lane < nw ? red[lane] : (F)0;
		for (int o = 16; o > 0; o >>= 1)
			v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
		if (lane == 0)
			red[32] = v;
	}
	__syncthreads();
	return red[32];
}

#define NORM_THREADS 256

/* mode 0: plain; 1: gated by silu(z).  Any d and leading dimension. */
__global__ void
k_rmsnorm(const float *x, int64_t ldx, const float *z, const float *w, float *y,
    int64_t ldy, int d, float eps)
{
	__shared__ double red[33];
	const float *xr = x + blockIdx.x * ldx;
	float *yr = y + blockIdx.x * ldy;
	pdl_enter();
	double s = 0.0;

	for (int i = threadIdx.x; i < d; i += blockDim.x)
		s += (double)__fmul_rn(xr[i], xr[i]);
	s = block_sum(s, red);
	float sc = rms_scale(s, d, eps);
	for (int i = threadIdx.x; i < d; i += blockDim.x) {
		float v = __fmul_rn(xr[i], sc);
		if (w != NULL)
			v = __fmul_rn(v, w[i]);
		if (z != NULL)
			v = __fmul_rn(v, silu(z[blockIdx.x * (int64_t)d + i]));
		yr[i] = v;
	}
}

/*
 * The same for d, the leading dimensions and the pointers multiples of 4
 * floats: the row is loaded once, as float4s held in registers (all loads
 * in flight together, w's and z's too, silu(z) computed while the sum
 * waits), then reduced and written.  Blocks of norm_threads(d / 4)
 * threads, each holding V = norm_vec(d / 4) float4s, summed by
 * norm_sumsq_warp and norm_sumsq_block as matvec_q8.cu's k_rmsnorm_q8x
 * sums them.
 */
template <int V>
__global__ void __launch_bounds__(1024)
k_rmsnorm4(const float *x, int64_t ldx, const float *z, const float *w, float *y,
    int64_t ldy, int d, float eps)
{
	__shared__ double red[32];
	const float4 *xr = (const float4 *)(x + blockIdx.x * ldx);
	float4 *yr = (float4 *)(y + blockIdx.x * ldy);
	int d4 = d / 4;
	float4 v[V], c[V], g[V], zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);

	pdl_enter();
#pragma unroll
	for (int u = 0; u < V; u++) {
		int i = threadIdx.x + u * blockDim.x;
		v[u] = i < d4 ? xr[i] : zero;
		c[u] = w != NULL && i < d4 ? ((const float4 *)w)[i] : zero;
		g[u] = z != NULL && i < d4 ? ((const float4 *)(z + blockIdx.x * (int64_t)d))[i] : zero;
	}
	double s = norm_sumsq_warp<V>(v);
#pragma unroll
	for (int u = 0; u < V; u++)	/* while other warps reach the barrier */
		if (z != NULL)
			g[u] = make_float4(silu(g[u].x), silu(g[u].y), silu(g[u].z), silu(g[u].w));
	float sc = rms_scale(norm_sumsq_block(s, red), d, eps);
#pragma unroll
	for (int u = 0; u < V; u++) {
		int i = threadIdx.x + u * blockDim.x;
		if (i >= d4)
			break;
		float4 o = make_float4(__fmul_rn(v[u].x, sc), __fmul_rn(v[u].y, sc),
		    __fmul_rn(v[u].z, sc), __fmul_rn(v[u].w, sc));
		if (w != NULL) {
			o.x = __fmul_rn(o.x, c[u].x), o.y = __fmul_rn(o.y, c[u].y);
			o.z = __fmul_rn(o.z, c[u].z), o.w = __fmul_rn(o.w, c[u].w);
		}
		if (z != NULL) {
			o.x = __fmul_rn(o.x, g[u].x), o.y = __fmul_rn(o.y, g[u].y);
			o.z = __fmul_rn(o.z, g[u].z), o.w = __fmul_rn(o.w, g[u].w);
		}
		yr[i] = o;
	}
}

/* Kernel k<V> (V = norm_vec(d4): k_rmsnorm4's geometry) on rows blocks of nt threads. */
#define NORM_LAUNCH(g, k, rows, nt, d4, ...) do {					\
	if (norm_vec(d4) == 1)								\
		gpu_launch(g, k<1>, rows, nt, 0, __VA_ARGS__);				\
	else if (norm_vec(d4) == 2)							\
		gpu_launch(g, k<2>, rows, nt, 0, __VA_ARGS__);				\
	else										\
		gpu_launch(g, k<4>, rows, nt, 0, __VA_ARGS__);				\
} while (0)

static bool
al16(const void *p)
{
	return ((uintptr_t)p & 15) == 0;
}

static void
rmsnorm_launch(struct gpu *g, const float *x, int64_t ldx, const float *z,
    const float *w, float *y, int64_t ldy, int rows, int d, float eps)
{
	int d4 = d / 4, nt = norm_threads(d4);

	if (d % 4 == 0 && ldx % 4 == 0 && ldy % 4 == 0 && al16(x) && al16(y) &&
	    (w == NULL || al16(w)) && (z == NULL || al16(z)) && nt <= 1024) {
		NORM_LAUNCH(g, k_rmsnorm4, rows, nt, d4, x, ldx, z, w, y, ldy, d, eps);
	} else
		gpu_launch(g, k_rmsnorm, rows, NORM_THREADS, 0, x, ldx, z, w, y, ldy, d, eps);
}

extern "C" int
gpu_rmsnorm(struct gpu *g, const float *d_x, int64_t ldx, const float *d_w,
    float *d_y, int64_t ldy, int rows, int d, float eps)
{
	if (rows < 1 || d < 1)
		return gpu_fail(g, "rmsnorm: %d rows of %d", rows, d);
	rmsnorm_launch(g, d_x, ldx, NULL, d_w, d_y, ldy, rows, d, eps);
	GPU_LAUNCHED(g, "rmsnorm");
	return 0;
}

/* V float4s of row r (zero past d4) for this thread. */
template <int V>
__device__ __forceinline__ void
load_row4(float4 *v, const float *p, int d4)
{
	float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);

#pragma unroll
	for (int u = 0; u < V; u++) {
		int i = threadIdx.x + u * blockDim.x;
		v[u] = p != NULL && i < d4 ? ((const float4 *)p)[i] : zero;
	}
}

/*
 * gpu_norm_residual's kernel: a block a row, norm_threads(d / 4) threads
 * of V float4s.  Each norm reduces into a red of its own (no barrier
 * between one's last read and the next's first write needed).  A zero
 * past the row stays zero through the norms (0 * sc * 0), so each sum
 * sees what k_rmsnorm4's sees.
 */
template <int V>
__global__ void __launch_bounds__(1024)
k_norm_residual(float *x, const float *a, const float *wa, const float *b, const float *wb,
    const float *w2, int d, float eps, float s)
{
	__shared__ double red[3][32];
	int64_t off = (int64_t)blockIdx.x * d;
	int d4 = d / 4;
	float4 u[V], t[V], c[V];

	pdl_enter();
	load_row4<V>(u, a + off, d4);
	load_row4<V>(c, wa, d4);
	norm_row4<V>(u, c, wa, d, eps, red[0]);
	if (b != NULL) {
		load_row4<V>(t, b + off, d4);
		load_row4<V>(c, wb, d4);
		norm_row4<V>(t, c, wb, d, eps, red[1]);
#pragma unroll
		for (int k = 0; k < V; k++)
			u[k] = make_float4(__fadd_rn(u[k].x, t[k].x), __fadd_rn(u[k].y, t[k].y),
			    __fadd_rn(u[k].z, t[k].z), __fadd_rn(u[k].w, t[k].w));
	}
	if (w2 != NULL) {
		load_row4<V>(c, w2, d4);
		norm_row4<V>(u, c, w2, d, eps, red[2]);
	}
	float4 *xr = (float4 *)(x + off);
#pragma unroll
	for (int k = 0; k < V; k++) {
		int i = threadIdx.x + k * blockDim.x;
		if (i >= d4)
			break;
		float4 o = xr[i];
		o = make_float4(__fadd_rn(o.x, u[k].x), __fadd_rn(o.y, u[k].y),
		    __fadd_rn(o.z, u[k].z), __fadd_rn(o.w, u[k].w));
		if (s != 1.0f)
			o = make_float4(__fmul_rn(o.x, s), __fmul_rn(o.y, s), __fmul_rn(o.z, s),
			    __fmul_rn(o.w, s));
		xr[i] = o;
	}
}

/* gpu_add_rmsnorm's kernel: x += t (the add's one rounding), then k_rmsnorm4's norm of x. */
template <int V>
__global__ void __launch_bounds__(1024)
k_add_rmsnorm(float *x, const float *t, const float *w, float *y, int d, float eps)
{
	__shared__ double red[32];
	int64_t off = (int64_t)blockIdx.x * d;
	int d4 = d / 4;
	float4 u[V], c[V], v[V];

	pdl_enter();
	load_row4<V>(u, x + off, d4);
	load_row4<V>(v, t + off, d4);
	load_row4<V>(c, w, d4);
#pragma unroll
	for (int k = 0; k < V; k++) {
		int i = threadIdx.x + k * blockDim.x;
		u[k] = make_float4(__fadd_rn(u[k].x, v[k].x), __fadd_rn(u[k].y, v[k].y),
		    __fadd_rn(u[k].z, v[k].z), __fadd_rn(u[k].w, v[k].w));
		if (i < d4)
			((float4 *)(x + off))[i] = u[k];
	}
	norm_row4<V>(u, c, w, d, eps, red);
#pragma unroll
	for (int k = 0; k < V; k++) {
		int i = threadIdx.x + k * blockDim.x;
		if (i < d4)
			((float4 *)(y + off))[i] = u[k];
	}
}

extern "C" int
gpu_add_rmsnorm(struct gpu *g, float *d_x, const float *d_t, const float *d_w, float *d_y,
    float eps, int rows, int d)
{
	int d4 = d / 4, nt = norm_threads(d4);

	if (rows < 1 || d < 1)
		return gpu_fail(g, "add_rmsnorm: %d rows of %d", rows, d);
	if (d % 4 == 0 && nt <= 1024 && al16(d_x) && al16(d_t) && al16(d_y) &&
	    (d_w == NULL || al16(d_w))) {
		NORM_LAUNCH(g, k_add_rmsnorm, rows, nt, d4, d_x, d_t, d_w, d_y, d, eps);
		GPU_LAUNCHED(g, "add_rmsnorm");
		return 0;
	}
	if (gpu_add(g, d_x, d_t, d_x, (int64_t)rows * d) != 0)
		return -1;
	rmsnorm_launch(g, d_x, d, NULL, d_w, d_y, d, rows, d, eps);
	GPU_LAUNCHED(g, "rmsnorm");
	return 0;
}

/* gpu_rmsnorm_pair's kernel: k_rmsnorm4's sum of x once, each output's two roundings (and s1's). */
template <int V>
__global__ void __launch_bounds__(1024)
k_rmsnorm_pair(const float *x, const float *w1, float s1, float *y1, const float *w2,
    float *y2, int d, float eps)
{
	__shared__ double red[32];
	int64_t off = (int64_t)blockIdx.x * d;
	int d4 = d / 4;
	float4 v[V], c[V];

	pdl_enter();
	load_row4<V>(v, x + off, d4);
	float sc = rms_scale(norm_sumsq_block(norm_sumsq_warp<V>(v), red), d, eps);
	for (int o = 0; o < 2; o++) {
		const float *w = o ? w2 : w1;
		float *y = (o ? y2 : y1) + off;
		load_row4<V>(c, w, d4);
#pragma unroll
		for (int k = 0; k < V; k++) {
			int i = threadIdx.x + k * blockDim.x;
			float4 u = make_float4(__fmul_rn(v[k].x, sc), __fmul_rn(v[k].y, sc),
			    __fmul_rn(v[k].z, sc), __fmul_rn(v[k].w, sc));
			if (w != NULL)
				u = make_float4(__fmul_rn(u.x, c[k].x), __fmul_rn(u.y, c[k].y),
				    __fmul_rn(u.z, c[k].z), __fmul_rn(u.w, c[k].w));
			if (!o && s1 != 1.0f)
				u = make_float4(__fmul_rn(u.x, s1), __fmul_rn(u.y, s1),
				    __fmul_rn(u.z, s1), __fmul_rn(u.w, s1));
			if (i < d4)
				((float4 *)y)[i] = u;
		}
	}
}

extern "C" int
gpu_rmsnorm_pair(struct gpu *g, const float *d_x, const float *d_w1, float s1, float *d_y1,
    const float *d_w2, float *d_y2, float eps, int rows, int d)
{
	int d4 = d / 4, nt = norm_threads(d4);

	if (rows < 1 || d < 1)
		return gpu_fail(g, "rmsnorm_pair: %d rows of %d", rows, d);
	if (d % 4 == 0 && nt <= 1024 && al16(d_x) && al16(d_y1) && al16(d_y2) &&
	    (d_w1 == NULL || al16(d_w1)) && (d_w2 == NULL || al16(d_w2))) {
		NORM_LAUNCH(g, k_rmsnorm_pair, rows, nt, d4, d_x, d_w1, s1, d_y1, d_w2, d_y2, d, eps);
		GPU_LAUNCHED(g, "rmsnorm_pair");
		return 0;
	}
	rmsnorm_launch(g, d_x, d, NULL, d_w1, d_y1, d, rows, d, eps);
	GPU_LAUNCHED(g, "rmsnorm");
	if (s1 != 1.0f && gpu_mul_scalar(g, d_y1, (int64_t)rows * d, s1) != 0)
		return -1;
	rmsnorm_launch(g, d_x, d, NULL, d_w2, d_y2, d, rows, d, eps);
	GPU_LAUNCHED(g, "rmsnorm");
	return 0;
}

extern "C" int
gpu_norm_residual(struct gpu *g, float *d_x, float *d_a, const float *d_wa, float *d_b,
    const float *d_wb, const float *d_w2, float eps, float s, int rows, int d)
{
	int d4 = d / 4, nt = norm_threads(d4);
	int64_t n = (int64_t)rows * d;

	if (rows < 1 || d < 1)
		return gpu_fail(g, "norm_residual: %d rows of %d", rows, d);
	if (d % 4 == 0 && nt <= 1024 && al16(d_x) && al16(d_a) && (d_b == NULL || al16(d_b)) &&
	    (d_wa == NULL || al16(d_wa)) && (d_wb == NULL || al16(d_wb)) &&
	    (d_w2 == NULL || al16(d_w2))) {
		NORM_LAUNCH(g, k_norm_residual, rows, nt, d4, d_x, d_a, d_wa, d_b, d_wb, d_w2, d, eps, s);
		GPU_LAUNCHED(g, "norm_residual");
		return 0;
	}
	rmsnorm_launch(g, d_a, d, NULL, d_wa, d_a, d, rows, d, eps);
	GPU_LAUNCHED(g, "rmsnorm");
	if (d_b != NULL) {
		rmsnorm_launch(g, d_b, d, NULL, d_wb, d_b, d, rows, d, eps);
		GPU_LAUNCHED(g, "rmsnorm");
		if (gpu_add(g, d_a, d_b, d_a, n) != 0)
			return -1;
	}
	if (d_w2 != NULL) {
		rmsnorm_launch(g, d_a, d, NULL, d_w2, d_a, d, rows, d, eps);
		GPU_LAUNCHED(g, "rmsnorm");
	}
	if (gpu_add(g, d_x, d_a, d_x, n) != 0)
		return -1;
	return s != 1.0f ? gpu_mul_scalar(g, d_x, n, s) : 0;
}

extern "C" int
gpu_rmsnorm_gated(struct gpu *g, const float *d_x, const float *d_z,
    const float *d_w, float *d_y, int rows, int d, float eps)
{
	if (rows < 1 || d < 1)
		return gpu_fail(g, "rmsnorm_gated: %d rows of %d", rows, d);
	rmsnorm_launch(g, d_x, d, d_z, d_w, d_y, d, rows, d, eps);
	GPU_LAUNCHED(g, "rmsnorm_gated");
	return 0;
}

__global__ void
k_l2norm(const float *x, int64_t ldx, float *y, int64_t ldy, int d, float eps)
{
	__shared__ double red[33];
	const float *xr = x + blockIdx.x * ldx;
	float *yr = y + blockIdx.x * ldy;
	double s = 0.0;

	pdl_enter();
	for (int i = threadIdx.x; i < d; i += blockDim.x)
		s += (double)xr[i] * (double)xr[i];
	s = block_sum(s, red);
	float sc = 1.0f / fmaxf(sqrtf((float)s), eps);
	for (int i = threadIdx.x; i < d; i += blockDim.x)
		yr[i] = __fmul_rn(xr[i], sc);
}

extern "C" int
gpu_l2norm(struct gpu *g, const float *d_x, int64_t ldx, float *d_y, int64_t ldy,
    int rows, int d, float eps)
{
	if (rows < 1 || d < 1)
		return gpu_fail(g, "l2norm: %d rows of %d", rows, d);
	gpu_launch(g, k_l2norm, rows, 128, 0, d_x, ldx, d_y, ldy, d, eps);
	GPU_LAUNCHED(g, "l2norm");
	return 0;
}

/* theta_i = pos * ts^i by repeated multiplication, as ggml's rope cache does. */
__global__ void
k_rope_neox(float *x, int heads, int64_t ld, int n_rot, const int32_t *pos, float ts)
{
	int half = n_rot / 2, i = threadIdx.x;
	float *p = x + ((int64_t)blockIdx.y * heads + blockIdx.x) * ld;
	float th;

	pdl_enter();
	th = (float)pos[blockIdx.y];
	if (i >= half)
		return;
	for (int k = 0; k < i; k++)
		th = __fmul_rn(th, ts);
	float c = cosf(th), s = sinf(th), x0 = p[i], x1 = p[i + half];
	p[i] = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
	p[i + half] = __fadd_rn(__fmul_rn(x0, s), __fmul_rn(x1, c));
}

extern "C" int
gpu_rope_neox(struct gpu *g, float *d_x, int n, int heads, int64_t ld, int n_rot,
    const int32_t *d_pos, float base)
{
	if (n < 1 || heads < 1 || n_rot < 2 || n_rot % 2 || n_rot > 1024 || n_rot > ld)
		return gpu_fail(g, "rope: n=%d heads=%d n_rot=%d ld=%lld", n, heads, n_rot,
		    (long long)ld);
	float ts = powf(base, -2.0f / (float)n_rot);
	gpu_launch(g, k_rope_neox, dim3(heads, n), n_rot / 2, 0, d_x, heads, ld, n_rot, d_pos, ts);
	GPU_LAUNCHED(g, "rope");
	return 0;
}

/* op 0: silu(a) * b; 1: a + b */
__global__ void
k_binary(const float *a, const float *b, float *o, int64_t n, int op)
{
	int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;

	pdl_enter();
	if (i >= n)
		return;
	o[i] = op == 0 ? __fmul_rn(silu(a[i]), b[i]) : __fadd_rn(a[i], b[i]);
}

static int
binary(struct gpu *g, const float *a, const float *b, float *o, int64_t n, int op)
{
	if (n < 1)
		return gpu_fail(g, "%s: %lld elements", op ? "add" : "swiglu", (long long)n);
	gpu_launch(g, k_binary, (unsigned)((n + 255) / 256), 256, 0, a, b, o, n, op);
	GPU_LAUNCHED(g, op ? "add" : "swiglu");
	return 0;
}

extern "C" int
gpu_swiglu(struct gpu *g, const float *d_gate, const float *d_up, float *d_out, int64_t n)
{
	return binary(g, d_gate, d_up, d_out, n, 0);
}

extern "C" int
gpu_add(struct gpu *g, const float *d_a, const float *d_b, float *d_out, int64_t n)
{
	return binary(g, d_a, d_b, d_out, n, 1);
}

__global__ void
k_sigmoid_mul(const float *x, int64_t ldx, const float *gt, int64_t ldg, float *o,
    int64_t ldo, int d)
{
	int r = blockIdx.y;

	pdl_enter();
	for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < d; i += gridDim.x * blockDim.x)
		o[r * ldo + i] = __fmul_rn(x[r * ldx + i], sigmoid(gt[r * ldg + i]));
}

extern "C" int
gpu_sigmoid_mul(struct gpu *g, const float *d_x, int64_t ldx, const float *d_gate,
    int64_t ldg, float *d_out, int64_t ldo, int rows, int d)
{
	if (rows < 1 || d < 1 || rows > 65535)
		return gpu_fail(g, "sigmoid_mul: %d rows of %d", rows, d);
	gpu_launch(g, k_sigmoid_mul, dim3((d + 255) / 256, rows), 256, 0, d_x, ldx, d_gate,
	    ldg, d_out, ldo, d);
	GPU_LAUNCHED(g, "sigmoid_mul");
	return 0;
}

/* One thread per channel; the window of the last K-1 inputs lives in registers. */
template <int K>
__global__ void
k_conv1d(const float *x, int T, int C, const float *w, float *state, float *out)
{
	int c = blockIdx.x * blockDim.x + threadIdx.x;
	float win[K], wc[K];

	pdl_enter();
	if (c >= C)
		return;
#pragma unroll
	for (int k = 0; k < K; k++)
		wc[k] = w[(int64_t)c * K + k];
#pragma unroll
	for (int k = 0; k < K - 1; k++)
		win[k] = state[(int64_t)k * C + c];
	for (int t = 0; t < T; t++) {
		win[K - 1] = x[(int64_t)t * C + c];
		float s = 0.0f;
#pragma unroll
		for (int k = 0; k < K; k++)
			s = __fadd_rn(s, __fmul_rn(win[k], wc[k]));
		out[(int64_t)t * C + c] = silu(s);
#pragma unroll
		for (int k = 0; k < K - 1; k++)
			win[k] = win[k + 1];
	}
#pragma unroll
	for (int k = 0; k < K - 1; k++)
		state[(int64_t)k * C + c] = win[k];
}

extern "C" int
gpu_conv1d_silu(struct gpu *g, const float *d_x, int T, int C, int K,
    const float *d_w, float *d_state, float *d_out)
{
	unsigned nb = (unsigned)((C + 127) / 128);

	if (T < 1 || C < 1)
		return gpu_fail(g, "conv1d: %d tokens of %d channels", T, C);
	switch (K) {
	case 2: gpu_launch(g, k_conv1d<2>, nb, 128, 0, d_x, T, C, d_w, d_state, d_out); break;
	case 3: gpu_launch(g, k_conv1d<3>, nb, 128, 0, d_x, T, C, d_w, d_state, d_out); break;
	case 4: gpu_launch(g, k_conv1d<4>, nb, 128, 0, d_x, T, C, d_w, d_state, d_out); break;
	case 5: gpu_launch(g, k_conv1d<5>, nb, 128, 0, d_x, T, C, d_w, d_state, d_out); break;
	case 6: gpu_launch(g, k_conv1d<6>, nb, 128, 0, d_x, T, C, d_w, d_state, d_out); break;
	case 7: gpu_launch(g, k_conv1d<7>, nb, 128, 0, d_x, T, C, d_w, d_state, d_out); break;
	case 8: gpu_launch(g, k_conv1d<8>, nb, 128, 0, d_x, T, C, d_w, d_state, d_out); break;
	default: return gpu_fail(g, "conv1d: kernel size %d (2..8)", K);
	}
	GPU_LAUNCHED(g, "conv1d");
	return 0;
}

/*
 * Gated delta rule: one block per value head, thread j owns column j of
 * the head's state (SK floats in registers) for all T tokens.
 */
template <int SK>
__global__ void __launch_bounds__(256)
k_gdn(float *S, const float *q, const float *k, const float *v, const float *gl,
    const float *beta, float *out, int T, int hk, int hv, int sv, float scale)
{
	__shared__ float sq[SK], sk[SK];
	int h = blockIdx.x, j = threadIdx.x, kh = h % hk;
	float *Sh = S + (int64_t)h * SK * sv;
	float s[SK];

	pdl_enter();
	if (j < sv) {
#pragma unroll
		for (int i = 0; i < SK; i++)
			s[i] = Sh[(int64_t)i * sv + j];
	}
	for (int t = 0; t < T; t++) {
		__syncthreads();
		for (int i = j; i < SK; i += blockDim.x) {
			sq[i] = q[((int64_t)t * hk + kh) * SK + i];
			sk[i] = k[((int64_t)t * hk + kh) * SK + i];
		}
		__syncthreads();
		if (j >= sv)
			continue;
		float eg = expf(gl[(int64_t)t * hv + h]), b = beta[(int64_t)t * hv + h];
		float kv = 0.0f, o = 0.0f;
#pragma unroll
		for (int i = 0; i < SK; i++)
			kv = __fmaf_rn(s[i], sk[i], kv);
		float dl = __fmul_rn(__fsub_rn(v[((int64_t)t * hv + h) * sv + j], __fmul_rn(eg, kv)), b);
#pragma unroll
		for (int i = 0; i < SK; i++) {
			s[i] = __fmaf_rn(sk[i], dl, __fmul_rn(eg, s[i]));
			o = __fmaf_rn(s[i], sq[i], o);
		}
		out[((int64_t)t * hv + h) * sv + j] = __fmul_rn(o, scale);
	}
	if (j < sv) {
#pragma unroll
		for (int i = 0; i < SK; i++)
			Sh[(int64_t)i * sv + j] = s[i];
	}
}

/*
 * k_gdn's rule for key heads of any other size (or value heads past 256):
 * block (h, c) is value head h, columns c * 128 .., a thread a column, its
 * state read from and written back to memory each token, q and k read
 * where they lie; the same sums in the same order as k_gdn's.  Slow (no
 * model takes it: backend_cuda_gdn.cu has the model's kernels).  UNRUN:
 * compiled for sm_90 with no GPU here.
 */
__global__ void __launch_bounds__(128)
k_gdn_any(float *S, const float *q, const float *k, const float *v, const float *gl,
    const float *beta, float *out, int T, int hk, int hv, int sk, int sv, float scale)
{
	int h = blockIdx.x, j = blockIdx.y * blockDim.x + threadIdx.x, kh = h % hk;
	float *Sh = S + (int64_t)h * sk * sv + j;

	pdl_enter();
	if (j >= sv)
		return;
	for (int t = 0; t < T; t++) {
		const float *qt = q + ((int64_t)t * hk + kh) * sk, *kt = k + ((int64_t)t * hk + kh) * sk;
		float eg = expf(gl[(int64_t)t * hv + h]), b = beta[(int64_t)t * hv + h];
		float kv = 0.0f, o = 0.0f;

		for (int i = 0; i < sk; i++)
			kv = __fmaf_rn(Sh[(int64_t)i * sv], kt[i], kv);
		float dl = __fmul_rn(__fsub_rn(v[((int64_t)t * hv + h) * sv + j], __fmul_rn(eg, kv)), b);
		for (int i = 0; i < sk; i++) {
			float s = __fmaf_rn(kt[i], dl, __fmul_rn(eg, Sh[(int64_t)i * sv]));

			Sh[(int64_t)i * sv] = s;
			o = __fmaf_rn(s, qt[i], o);
		}
		out[((int64_t)t * hv + h) * sv + j] = __fmul_rn(o, scale);
	}
}

extern "C" int
gpu_gdn_step(struct gpu *g, float *d_S, const float *d_q, const float *d_k,
    const float *d_v, const float *d_g, const float *d_beta, float *d_out,
    int T, int hk, int hv, int sk, int sv, float scale)
{
	int nt = (sv + 31) / 32 * 32;

	if (T < 1 || hk < 1 || hv < 1 || hv % hk || sk < 1 || sv < 1 || sv > 65535 * 128)
		return gpu_fail(g, "gdn: T=%d hk=%d hv=%d sk=%d sv=%d", T, hk, hv, sk, sv);
	if (sk == 128 && sv <= 256)
		gpu_launch(g, k_gdn<128>, hv, nt, 0, d_S, d_q, d_k, d_v, d_g, d_beta, d_out, T, hk, hv, sv, scale);
	else if (sk == 64 && sv <= 256)
		gpu_launch(g, k_gdn<64>, hv, nt, 0, d_S, d_q, d_k, d_v, d_g, d_beta, d_out, T, hk, hv, sv, scale);
	else
		gpu_launch(g, k_gdn_any, dim3((unsigned)hv, (unsigned)((sv + 127) / 128)), 128, 0, d_S,
		    d_q, d_k, d_v, d_g, d_beta, d_out, T, hk, hv, sk, sv, scale);
	GPU_LAUNCHED(g, "gdn");
	return 0;
}

/* --- attention: split-K flash-decoding -------------------------------- */

#define ATT_SPLIT 64		/* positions a block takes */
#define ATT_THREADS 128
#define ATT_WARPS (ATT_THREADS / 32)
#define ATT_ROWS 8		/* K or V rows a warp has in flight (of its 16) */

/* The rows in flight of a lane's E elements: ATT_ROWS up to heads of 256
 * (E 8), 4 for heads of 512 (E 16: 4 x 16 floats, as 8 x 8 at 256).  How
 * many are in flight changes no sum: a warp takes its positions in
 * ascending order either way. */
template <int E>
struct att_flight {
	enum { R = E > 8 ? 4 : ATT_ROWS };
};

/* The splits the nq rows at pos0 use: those that hold position pos0 + nq - 1 or less. */
__device__ __forceinline__ int
att_splits(int pos0, int nq, int nsplit)
{
	return min((pos0 + nq + ATT_SPLIT - 1) / ATT_SPLIT, nsplit);
}

/* A lane's E elements of a head row (e < n: the row's length), W floats a load. */
template <int E, int W>
__device__ __forceinline__ void
att_load(const float *__restrict__ p, int lane, int n, float *v)
{
	if (W == 4) {
#pragma unroll
		for (int i = 0; i < E / 4; i++) {
			float4 a = ((const float4 *)(p + lane * E))[i];
			v[4 * i] = a.x, v[4 * i + 1] = a.y, v[4 * i + 2] = a.z, v[4 * i + 3] = a.w;
		}
	} else if (W == 2) {
#pragma unroll
		for (int i = 0; i < E / 2; i++) {
			float2 a = ((const float2 *)(p + lane * E))[i];
			v[2 * i] = a.x, v[2 * i + 1] = a.y;
		}
	} else {
#pragma unroll
		for (int e = 0; e < E; e++)
			v[e] = lane * E + e < n ? p[lane * E + e] : 0.0f;
	}
}

/* Positions p, p + ATT_WARPS, ... of a head's K or V (at X, rows ld apart;
 * position j in row j % ring when RH and ring > 0, else in row j): the
 * att_flight<E>::R of them below p1, all loaded before any is used. */
template <int E, int W, bool RH>
__device__ __forceinline__ void
att_rows(const float *__restrict__ X, int64_t ld, int p, int p1, int ring, int lane, int hd,
    float (*r)[E])
{
#pragma unroll
	for (int i = 0; i < att_flight<E>::R; i++)
		if (p + i * ATT_WARPS < p1) {
			int j = p + i * ATT_WARPS;
			att_load<E, W>(X + (RH && ring > 0 ? j % ring : j) * ld, lane, hd, r[i]);
		}
}

/* The GB heads' scaled scores of one K row k (a lane's E elements) into
 * sc[g * ATT_SPLIT] (lane 0): each the lane's FMA chain, then a butterfly. */
template <int E, int GB>
__device__ __forceinline__ void
att_scores(const float (*qv)[E], const float *k, int lane, float scale, float *sc)
{
#pragma unroll
	for (int g = 0; g < GB; g++) {
		float d = 0.0f;
#pragma unroll
		for (int e = 0; e < E; e++)
			d = __fmaf_rn(qv[g][e], k[e], d);
		for (int o = 16; o > 0; o >>= 1)
			d = __fadd_rn(d, __shfl_xor_sync(0xFFFFFFFFu, d, o));
		if (lane == 0)
			sc[g * ATT_SPLIT] = __fmul_rn(d, scale);
	}
}

/*
 * Block (split s, heads h0 .. h0+GB-1 of one KV head, query t): for each
 * head the scores of its ATT_SPLIT positions, their max m and sum l, and
 * o = sum p V; written to part[t][h][s] = {m, l, o[hd]}.  The GB heads
 * share each K and V row the block loads (grouped-query attention: at a
 * long context those rows are most of a step's bytes, and a block a head
 * read them GB times).  Lane l holds elements lE .. lE+E-1 of a head row
 * (hd <= 32 E; E <= 8, or 16 for heads of 512); warp w takes positions
 * p0 + w, p0 + w + ATT_WARPS, ..., loading att_flight<E>::R of them
 * before it uses any (a block is a chain of
 * memory latencies: at a short context a layer has a few blocks only):
 * a score is the lane's FMA chain then a butterfly, the warps' o sums
 * added in warp order.  A head's sums are the same operations in the
 * same order whatever GB is, and what a position contributes depends
 * only on s and the position, never on the number of rows
 * (batch-invariant).  dpos: NULL, or the device int that holds pos0 (the
 * grid then covers the whole cache and the splits past the rows'
 * positions stop at once).  window > 0: query t sees positions np -
 * window .. np - 1 (np = pos0 + t + 1) only: a split starts at the
 * window's first position when that lies inside it, and one wholly before
 * it is empty (-FLT_MAX, 0: it adds nothing in k_attn_combine).  RH (a
 * call with backend_attn.hi or .ring; without, hi and ring are not read):
 * hi NULL, or query t sees the keys up to hi[t] (>= pos0 + t; device
 * memory, dpos NULL, the host sized the grid to the largest), the window
 * still from pos0 + t + 1 - window, splits past them empty; ring > 0:
 * position j is in row j % ring of K and V.
 */
/*
 * k_attn_split's block (s, h0, t) of a call of nz rows at pos0 (dpos
 * already read): qt and pr are row t's query heads and partial results
 * (q + t nh hd, part + t nh nsplit (hd + 2)); the body k_attn_split and
 * k_attn_split_seqs share, so that a group's rows are its calls' bits.
 */
template <int E, int W, int GB, bool RH>
__device__ __forceinline__ void
att_split_block(const float *__restrict__ qt, const float *__restrict__ K,
    const float *__restrict__ V, float *pr, int nh, int nkv, int hd, int pos0, int nsplit,
    float scale, int window, const int32_t *__restrict__ hi, int ring, int s, int h0, int t,
    int nz)
{
	enum { NR = att_flight<E>::R };
	__shared__ float sc[GB][ATT_SPLIT], red[33], so[ATT_WARPS][32 * E];

	if ((!RH || hi == NULL) && s >= att_splits(pos0, nz, nsplit))
		return;			/* not read by k_attn_combine */
	int kvh = h0 / (nh / nkv), warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
	int p0 = s * ATT_SPLIT, np = (RH && hi != NULL ? hi[t] : pos0 + t) + 1;
	int p1 = min(p0 + ATT_SPLIT, np);
	if (window > 0)		/* the split's positions inside the window: from pos0 + t + 1 - window */
		p0 = max(p0, pos0 + t + 1 - window);
	float *pt = pr + ((int64_t)h0 * nsplit + s) * (hd + 2);
	int64_t ld = (int64_t)nkv * hd, ph = (int64_t)nsplit * (hd + 2);	/* ph: a head's stride */
	const float *Kh = K + (int64_t)kvh * hd, *Vh = V + (int64_t)kvh * hd;
	float qv[GB][E], acc[GB][E];

	if (p0 >= p1) {
		for (int g = 0; g < GB; g++)
			for (int i = threadIdx.x; i < hd + 2; i += blockDim.x)
				pt[g * ph + i] = i == 0 ? -FLT_MAX : 0.0f;
		return;
	}
#pragma unroll
	for (int g = 0; g < GB; g++)
		att_load<E, W>(qt + (int64_t)(h0 + g) * hd, lane, hd, qv[g]);
	for (int p = p0 + warp; p < p1; p += NR * ATT_WARPS) {	/* NR rows in flight */
		float kr[NR][E];
		att_rows<E, W, RH>(Kh, ld, p, p1, ring, lane, hd, kr);
#pragma unroll
		for (int r = 0; r < NR; r++)
			if (p + r * ATT_WARPS < p1)
				att_scores<E, GB>(qv, kr[r], lane, scale, &sc[0][p + r * ATT_WARPS - p0]);
	}
	__syncthreads();
	float mg[GB], lg[GB];
#pragma unroll
	for (int g = 0; g < GB; g++) {
		float m = -FLT_MAX;
		for (int i = threadIdx.x; i < p1 - p0; i += blockDim.x)
			m = fmaxf(m, sc[g][i]);
		for (int o = 16; o > 0; o >>= 1)
			m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFu, m, o));
		if (lane == 0)
			red[warp] = m;
		__syncthreads();
		m = red[0];
		for (int w = 1; w < ATT_WARPS; w++)
			m = fmaxf(m, red[w]);
		__syncthreads();
		float l = 0.0f;
		for (int i = threadIdx.x; i < p1 - p0; i += blockDim.x) {
			float e = expf(sc[g][i] - m);
			sc[g][i] = e;
			l += e;
		}
		mg[g] = m;
		lg[g] = block_sum(l, red);	/* its barriers publish sc[g] */
	}
#pragma unroll
	for (int g = 0; g < GB; g++)
#pragma unroll
		for (int e = 0; e < E; e++)
			acc[g][e] = 0.0f;
	for (int p = p0 + warp; p < p1; p += NR * ATT_WARPS) {
		float vr[NR][E];
		att_rows<E, W, RH>(Vh, ld, p, p1, ring, lane, hd, vr);
#pragma unroll
		for (int g = 0; g < GB; g++)
#pragma unroll
			for (int r = 0; r < NR; r++)
				if (p + r * ATT_WARPS < p1) {
					float w = sc[g][p + r * ATT_WARPS - p0];
#pragma unroll
					for (int e = 0; e < E; e++)
						acc[g][e] = __fmaf_rn(w, vr[r][e], acc[g][e]);
				}
	}
#pragma unroll
	for (int g = 0; g < GB; g++) {
		__syncthreads();	/* so: the last head's sums read */
#pragma unroll
		for (int e = 0; e < E; e++)
			so[warp][lane * E + e] = acc[g][e];
		__syncthreads();
		for (int i = threadIdx.x; i < hd; i += blockDim.x) {
			float o = so[0][i];
			for (int w = 1; w < ATT_WARPS; w++)
				o = __fadd_rn(o, so[w][i]);
			pt[g * ph + 2 + i] = o;
		}
		if (threadIdx.x == 0) {
			pt[g * ph] = mg[g];
			pt[g * ph + 1] = lg[g];
		}
	}
}

template <int E, int W, int GB, bool RH>
__global__ void __launch_bounds__(ATT_THREADS)
k_attn_split(const float *__restrict__ q, const float *__restrict__ K,
    const float *__restrict__ V, float *part, int nh, int nkv, int hd, int pos0, int nsplit,
    float scale, const int32_t *dpos, int window, const int32_t *__restrict__ hi, int ring)
{
	int s = blockIdx.x, h0 = blockIdx.y * GB, t = blockIdx.z;

	pdl_enter();
	if (dpos != NULL)
		pos0 = *dpos;
	att_split_block<E, W, GB, RH>(q + (int64_t)t * nh * hd, K, V,
	    part + (int64_t)t * nh * nsplit * (hd + 2), nh, nkv, hd, pos0, nsplit, scale, window,
	    hi, ring, s, h0, t, gridDim.z);
}

/* Head h of one row: the ns splits at pt (nsplit (hd + 2) floats a head
 * apart, hd + 2 a split) combined into out's hd floats. */
__device__ __forceinline__ void
att_combine_head(const float *pt, float *out, int hd, int ns)
{
	float M = -FLT_MAX, L = 0.0f;

	for (int s = 0; s < ns; s++)
		M = fmaxf(M, pt[s * (hd + 2)]);
	for (int s = 0; s < ns; s++)
		L += pt[s * (hd + 2) + 1] * expf(pt[s * (hd + 2)] - M);
	for (int i = threadIdx.x; i < hd; i += blockDim.x) {
		float o = 0.0f;
		for (int s = 0; s < ns; s++)
			o += pt[s * (hd + 2) + 2 + i] * expf(pt[s * (hd + 2)] - M);
		out[i] = o / L;
	}
}

/* nsplit: the stride of part; the splits summed are att_splits' (all of
 * them when dpos is NULL: the host sized the grid to the rows). */
__global__ void
k_attn_combine(const float *part, float *out, int nh, int hd, int nsplit,
    const int32_t *dpos)
{
	int h = blockIdx.x, t = blockIdx.y, ns;

	pdl_enter();
	ns = dpos != NULL ? att_splits(*dpos, gridDim.y, nsplit) : nsplit;
	att_combine_head(part + ((int64_t)t * nh + h) * nsplit * (hd + 2),
	    out + ((int64_t)t * nh + h) * hd, hd, ns);
}

/*
 * gpu_attention_seqs's launch: sequence i's rows (n of them, r0 the first's
 * row in q, out and part) at pos0 against its K and V.  A launch takes
 * GPU_ATT_SEQS sequences (the parameters well under 4 KiB, by value:
 * graph-safe).
 */
struct att_seq {
	const float *K, *V;
	int	r0, n, pos0, pad;
};
struct att_seqs {
	struct att_seq s[GPU_ATT_SEQS];
	int	n;
};

/* The sequence that holds row R of the launch. */
__device__ __forceinline__ int
att_seq_of(const struct att_seqs &Q, int R)
{
	int i = 0;

	while (i + 1 < Q.n && R >= Q.s[i + 1].r0)
		i++;
	return i;
}

/*
 * Row R of the launch (grid.z) as its own sequence's k_attn_split call
 * makes it: local row t = R - r0 of n at pos0, part rows nh nsplit (hd + 2)
 * apart with nsplit the launch's largest (a split stride; att_splits still
 * gives the sequence's own count, so a block past it returns, as one past
 * the grid of its own call does not exist).
 */
template <int E, int W, int GB>
__global__ void __launch_bounds__(ATT_THREADS)
k_attn_split_seqs(const float *__restrict__ q, float *part, int nh, int nkv, int hd,
    int nsplit, float scale, struct att_seqs Q)
{
	int s = blockIdx.x, h0 = blockIdx.y * GB, R = blockIdx.z;

	pdl_enter();
	const struct att_seq &S = Q.s[att_seq_of(Q, R)];
	att_split_block<E, W, GB, false>(q + (int64_t)R * nh * hd, S.K, S.V,
	    part + (int64_t)R * nh * nsplit * (hd + 2), nh, nkv, hd, S.pos0, nsplit, scale, 0,
	    NULL, 0, s, h0, R - S.r0, S.n);
}

/* Row R's heads: its own sequence's splits only. */
__global__ void
k_attn_combine_seqs(const float *part, float *out, int nh, int hd, int nsplit,
    struct att_seqs Q)
{
	int h = blockIdx.x, R = blockIdx.y;

	pdl_enter();
	const struct att_seq &S = Q.s[att_seq_of(Q, R)];
	att_combine_head(part + ((int64_t)R * nh + h) * nsplit * (hd + 2),
	    out + ((int64_t)R * nh + h) * hd, hd, att_splits(S.pos0, S.n, nsplit));
}

/*
 * The split kernel's shape for heads of hd, nh query heads on nkv, the
 * operands' alignment al (their addresses | together, & 15): E elements a
 * lane (heads past 256: 16, a lane's 16 of 512; shorter heads by the
 * scalar loads), W of them a load, GB query heads a block.  One choice for
 * attention() and gpu_attention_seqs, so a row of a group runs its own
 * call's kernel.
 */
struct att_shape {
	int	E, W, GB;
};

static struct att_shape
att_shape(int hd, int nh, int nkv, int al)
{
	int E = hd <= 256 ? (hd + 31) / 32 : 16, grp = nh / nkv;
	int w = hd == 32 * E && E % 4 == 0 && al == 0 ? 4 : hd == 32 * E && E % 2 == 0 &&
	    al % 8 == 0 ? 2 : 1;
	int gb = grp % 4 == 0 ? 4 : grp % 3 == 0 ? 3 : grp % 2 == 0 ? 2 : 1;

	if (E == 16)		/* 2 heads a block: q and o sums 2 x 2 x 16 floats, as 4 heads at E 8 */
		gb = grp % 2 == 0 ? 2 : 1;
	return (struct att_shape){ E, w, gb };
}

/* Both forms: pos0 from the host (d_pos NULL, grid sized to the rows, or
 * to n_keys keys with d_hi) or from the device (the grid sized to n_ctx). */
static int
attention(struct gpu *g, const float *d_q, const float *d_k, const float *d_v, float *d_out,
    int nq, int nh, int nkv, int hd, int pos0, const int32_t *d_pos, int n_ctx, float scale,
    int window, const int32_t *d_hi, int n_keys, int ring)
{
	int nsplit = ((d_pos ? n_ctx : d_hi ? n_keys : pos0 + nq) + ATT_SPLIT - 1) / ATT_SPLIT;
	float *part;

	if (nq < 1 || nq > GPU_MATVEC_MAX_ROWS || nh < 1 || nkv < 1 || nh % nkv ||
	    hd < 1 || hd > GPU_HEAD_MAX || pos0 < 0 || (d_pos && n_ctx < nq) || window < 0 ||
	    (d_hi && (d_pos || n_keys < pos0 + nq)) || ring < 0 ||
	    (ring > 0 && (window < 1 || window > ring)))
		return gpu_fail(g, "attention: nq=%d nh=%d nkv=%d hd=%d pos0=%d n_ctx=%d window=%d "
		    "keys=%d ring=%d", nq, nh, nkv, hd, pos0, n_ctx, window, n_keys, ring);
	part = (float *)gpu_scratch(g, (size_t)nq * nh * nsplit * (hd + 2) * sizeof(float));
	if (part == NULL)
		return -1;
	struct att_shape sh = att_shape(hd, nh, nkv,
	    (int)(((uintptr_t)d_q | (uintptr_t)d_k | (uintptr_t)d_v) & 15));
	int E = sh.E, w = sh.W, gb = sh.GB;
	dim3 grid(nsplit, nh / gb, nq);
	bool rh = d_hi != NULL || ring > 0;
#define ATT_L(e, v, b, r) gpu_launch(g, k_attn_split<e, v, b, r>, grid, ATT_THREADS, 0, d_q, \
	    d_k, d_v, part, nh, nkv, hd, pos0, nsplit, scale, d_pos, window, d_hi, ring)
#define ATT_G(e, v, b) do { if (rh) ATT_L(e, v, b, true); else ATT_L(e, v, b, false); } while (0)
#define ATT_K(e, v) switch (gb) { \
	case 4: ATT_G(e, v, 4); break; case 3: ATT_G(e, v, 3); break; \
	case 2: ATT_G(e, v, 2); break; default: ATT_G(e, v, 1); break; }
#define ATT_K16(v) do { if (gb == 2) ATT_G(16, v, 2); else ATT_G(16, v, 1); } while (0)
	switch (E * 10 + w) {
	case 164: ATT_K16(4); break;
	case 162: ATT_K16(2); break;
	case 161: ATT_K16(1); break;
	case 84: ATT_K(8, 4); break;
	case 82: ATT_K(8, 2); break;
	case 81: ATT_K(8, 1); break;
	case 71: ATT_K(7, 1); break;
	case 62: ATT_K(6, 2); break;
	case 61: ATT_K(6, 1); break;
	case 51: ATT_K(5, 1); break;
	case 44: ATT_K(4, 4); break;
	case 42: ATT_K(4, 2); break;
	case 41: ATT_K(4, 1); break;
	case 31: ATT_K(3, 1); break;
	case 22: ATT_K(2, 2); break;
	case 21: ATT_K(2, 1); break;
	default: ATT_K(1, 1); break;
	}
#undef ATT_K16
#undef ATT_K
#undef ATT_G
#undef ATT_L
	GPU_LAUNCHED(g, "attention");
	gpu_launch(g, k_attn_combine, dim3(nh, nq), 128, 0, part, d_out, nh, hd, nsplit, d_pos);
	GPU_LAUNCHED(g, "attention combine");
	return 0;
}

extern "C" int
gpu_attention(struct gpu *g, const float *d_q, const float *d_k, const float *d_v,
    float *d_out, int nq, int nh, int nkv, int hd, int pos0, float scale)
{
	return attention(g, d_q, d_k, d_v, d_out, nq, nh, nkv, hd, pos0, NULL, 0, scale, 0, NULL,
	    0, 0);
}

extern "C" int
gpu_attention_dpos(struct gpu *g, const float *d_q, const float *d_k, const float *d_v,
    float *d_out, int nq, int nh, int nkv, int hd, const int32_t *d_pos, int n_ctx,
    float scale)
{
	return attention(g, d_q, d_k, d_v, d_out, nq, nh, nkv, hd, 0, d_pos, n_ctx, scale, 0, NULL,
	    0, 0);
}

extern "C" int
gpu_attention_window(struct gpu *g, const float *d_q, const float *d_k, const float *d_v,
    float *d_out, int nq, int nh, int nkv, int hd, int pos0, const int32_t *d_pos, int n_ctx,
    float scale, int window, int ring)
{
	return attention(g, d_q, d_k, d_v, d_out, nq, nh, nkv, hd, d_pos ? 0 : pos0, d_pos, n_ctx,
	    scale, window, NULL, 0, ring);
}

extern "C" int
gpu_attention_hi(struct gpu *g, const float *d_q, const float *d_k, const float *d_v,
    float *d_out, int nq, int nh, int nkv, int hd, int pos0, float scale, int window,
    const int32_t *d_hi, int n_keys, int ring)
{
	return attention(g, d_q, d_k, d_v, d_out, nq, nh, nkv, hd, pos0, NULL, 0, scale, window,
	    d_hi, n_keys, ring);
}

/*
 * The sequences of gpu_attention_seqs, GPU_ATT_SEQS a launch: the split
 * kernel over every row of the launch (grid.z), the splits strided by the
 * launch's largest count, then the combine; each row's blocks, splits and
 * sums those of its own gpu_attention call (E, W and GB chosen as
 * attention() chooses them, the pointers' alignment over the whole launch:
 * the caller sees that each sequence's own call would choose the same).
 */
extern "C" int
gpu_attention_seqs(struct gpu *g, const float *d_q, float *d_out, int n,
    const struct gpu_att_seq *sq, int nh, int nkv, int hd, float scale)
{
	int64_t rs = (int64_t)nh * hd;

	if (n < 0 || nh < 1 || nkv < 1 || nh % nkv || hd < 1 || hd > GPU_HEAD_MAX)
		return gpu_fail(g, "attention seqs: n=%d nh=%d nkv=%d hd=%d", n, nh, nkv, hd);
	for (int i = 0; i < n; i++)
		if (sq[i].rows < 0 || sq[i].rows > GPU_MATVEC_MAX_ROWS || sq[i].pos0 < 0 ||
		    (sq[i].rows > 0 && (sq[i].k == NULL || sq[i].v == NULL)))
			return gpu_fail(g, "attention seqs: sequence %d: %d rows at %d%s", i + 1,
			    sq[i].rows, sq[i].pos0, sq[i].k == NULL || sq[i].v == NULL ?
			    ", no cache" : "");
	for (int i0 = 0, r0 = 0; i0 < n; ) {
		struct att_seqs Q;
		int rows = 0, nsplit = 1;
		uintptr_t al = (uintptr_t)(d_q + r0 * rs);

		Q.n = 0;
		for (; i0 < n && Q.n < GPU_ATT_SEQS; i0++) {
			if (sq[i0].rows == 0)
				continue;
			int ns = (sq[i0].pos0 + sq[i0].rows + ATT_SPLIT - 1) / ATT_SPLIT;
			Q.s[Q.n++] = (struct att_seq){ sq[i0].k, sq[i0].v, rows, sq[i0].rows,
			    sq[i0].pos0, 0 };
			al |= (uintptr_t)(d_q + (r0 + rows) * rs) | (uintptr_t)sq[i0].k |
			    (uintptr_t)sq[i0].v;
			rows += sq[i0].rows;
			nsplit = ns > nsplit ? ns : nsplit;
		}
		if (rows == 0)
			break;
		float *part = (float *)gpu_scratch(g, (size_t)rows * nh * nsplit * (hd + 2) *
		    sizeof(float));
		if (part == NULL)
			return -1;
		struct att_shape sh = att_shape(hd, nh, nkv, (int)(al & 15));
		int E = sh.E, w = sh.W, gb = sh.GB;
		dim3 grid(nsplit, nh / gb, rows);
		const float *q = d_q + r0 * rs;
#define ATS_L(e, v, b) gpu_launch(g, k_attn_split_seqs<e, v, b>, grid, ATT_THREADS, 0, q, \
	    part, nh, nkv, hd, nsplit, scale, Q)
#define ATS_K(e, v) switch (gb) { \
	case 4: ATS_L(e, v, 4); break; case 3: ATS_L(e, v, 3); break; \
	case 2: ATS_L(e, v, 2); break; default: ATS_L(e, v, 1); break; }
#define ATS_K16(v) do { if (gb == 2) ATS_L(16, v, 2); else ATS_L(16, v, 1); } while (0)
		switch (E * 10 + w) {
		case 164: ATS_K16(4); break;
		case 162: ATS_K16(2); break;
		case 161: ATS_K16(1); break;
		case 84: ATS_K(8, 4); break;
		case 82: ATS_K(8, 2); break;
		case 81: ATS_K(8, 1); break;
		case 71: ATS_K(7, 1); break;
		case 62: ATS_K(6, 2); break;
		case 61: ATS_K(6, 1); break;
		case 51: ATS_K(5, 1); break;
		case 44: ATS_K(4, 4); break;
		case 42: ATS_K(4, 2); break;
		case 41: ATS_K(4, 1); break;
		case 31: ATS_K(3, 1); break;
		case 22: ATS_K(2, 2); break;
		case 21: ATS_K(2, 1); break;
		default: ATS_K(1, 1); break;
		}
#undef ATS_K16
#undef ATS_K
#undef ATS_L
		GPU_LAUNCHED(g, "attention seqs");
		gpu_launch(g, k_attn_combine_seqs, dim3(nh, rows), 128, 0, part, d_out + r0 * rs, nh,
		    hd, nsplit, Q);
		GPU_LAUNCHED(g, "attention seqs combine");
		r0 += rows;
	}
	return 0;
}

/* --- attention: prefill (cuda/attn_prefill.cuh has the tiling) -------- */

/*
 * Block b = (ntile - 1 - tile) nkv + kvh: the query vectors tile * BQ.. of
 * KV head kvh, every position they see (the longest tiles of all heads
 * start first).  A K/V tile: K waited for; the scores while V comes; the
 * softmax (the quad of apf_smax / apf_sexp is one warp's); V waited for;
 * P V while the next K comes.  Its own order of sums: not bit-identical to
 * gpu_attention's rows (within float tolerance).
 */
template <int HDP, int BQ>
__global__ void __launch_bounds__(4 * BQ, HDP > 256 ? 1 : BQ == 64 ? 2 : 3)
k_attn_prefill(apf_args A)
{
	extern __shared__ float4 apf_mem[];
	apf_sh s;
	apf_acc<HDP> r;
	int kvh = blockIdx.x % A.nkv, tid = threadIdx.x;
	int i0 = (gridDim.x / A.nkv - 1 - blockIdx.x / A.nkv) * BQ, npos = apf_npos<BQ>(A, i0);

	pdl_enter();		/* q, K and V are earlier kernels' */
	apf_carve<HDP, BQ>((float *)apf_mem, &s);
	apf_acc_zero<HDP>(r);
	apf_load_q<HDP, BQ>(A, s, kvh, i0, tid);
	int js = apf_j0(A, i0);

	apf_copy<HDP, BQ>(A, A.K, s.k, kvh, js, npos, tid);
	for (int t = 0, j0 = js; j0 < npos; t++, j0 += APF_BK) {
		apf_wait();
		__syncthreads();
		apf_copy<HDP, BQ>(A, A.V, s.v, kvh, j0, npos, tid);
		apf_scores<HDP, BQ>(A, s, i0, j0, tid);
		__syncthreads();
		float mn = apf_smax<HDP, BQ>(s, t, tid);
		__syncwarp();
		apf_sexp<HDP, BQ>(s, t, tid, mn);
		apf_wait();
		__syncthreads();
		if (j0 + APF_BK < npos)
			apf_copy<HDP, BQ>(A, A.K, s.k, kvh, j0 + APF_BK, npos, tid);
		apf_pv<HDP, BQ>(s, tid, r);
		__syncthreads();
	}
	apf_out<HDP, BQ>(A, kvh, i0, tid, r);
}

template <int HDP, int BQ>
static int
attn_prefill_run(struct gpu *g, const apf_args &A)
{
	int sh = (int)(apf_dim<HDP, BQ>::FLOATS * sizeof(float));
	unsigned nt = (unsigned)(((int64_t)A.m * (A.nh / A.nkv) + BQ - 1) / BQ);

	if (gpu_smem(g, k_attn_prefill<HDP, BQ>, sh, "attention prefill") != 0)
		return -1;
	gpu_launch(g, k_attn_prefill<HDP, BQ>, nt * A.nkv, 4 * BQ, sh, A);
	GPU_LAUNCHED(g, "attention prefill");
	return 0;
}

extern "C" int
gpu_attention_prefill(struct gpu *g, const float *d_q, const float *d_k, const float *d_v,
    float *d_out, int nq, int nh, int nkv, int hd, int pos0, float scale, int full,
    int window, int ring)
{
	apf_args A = { d_q, d_k, d_v, d_out, nq, nh, nkv, hd, pos0, scale, full != 0,
	    window, ring };
	uintptr_t al = ((uintptr_t)d_q | (uintptr_t)d_k | (uintptr_t)d_v | (uintptr_t)d_out) & 15;

	if (nq < 1 || nh < 1 || nkv < 1 || nh % nkv || hd < 4 || hd > GPU_HEAD_MAX || hd % 4 ||
	    pos0 < 0 || al != 0 || (int64_t)nq * nh > INT32_MAX / 256 ||
	    (int64_t)pos0 + nq > INT32_MAX / 2 || window < 0 || (full && window > 0) ||
	    ring < 0 || (ring > 0 && (window < 1 || window + nq - 1 > ring)))
		return gpu_fail(g, "attention prefill: nq=%d nh=%d nkv=%d hd=%d pos0=%d window=%d "
		    "ring=%d%s%s", nq, nh, nkv, hd, pos0, window, ring, full ? " full" : "",
		    al ? " (not 16-byte aligned)" : "");
	/* 64 vectors a block while that still fills two blocks a multiprocessor
	 * (heads of 256: always 32, 103 KB of shared memory, two a multiprocessor;
	 * of 512: 32, 199 KB, one) */
	int big = hd <= 128 && ((int64_t)nq * (nh / nkv) + 63) / 64 * nkv >= 2 * (int64_t)g->nsm;
	switch ((hd <= 64 ? 64 : hd <= 128 ? 128 : hd <= 256 ? 256 : 512) + big) {
	case 64: return attn_prefill_run<64, 32>(g, A);
	case 65: return attn_prefill_run<64, 64>(g, A);
	case 128: return attn_prefill_run<128, 32>(g, A);
	case 129: return attn_prefill_run<128, 64>(g, A);
	case 256: return attn_prefill_run<256, 32>(g, A);
	default: return attn_prefill_run<512, 32>(g, A);
	}
}

/* --- argmax ----------------------------------------------------------- */

__global__ void
k_argmax(const float *x, int64_t n, int32_t *idx)
{
	__shared__ float bv[32];
	__shared__ int64_t bi[32];
	const float *r = x + blockIdx.x * n;
	float v = -INFINITY;
	int64_t vi = n;
	int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;

	pdl_enter();
	for (int64_t i0 = threadIdx.x; i0 < n; i0 += 8 * (int64_t)blockDim.x) {
		float xs[8];	/* eight loads in flight a thread */
		for (int u = 0; u < 8; u++)
			xs[u] = i0 + u * blockDim.x < n ? r[i0 + u * blockDim.x] : NAN;
		for (int u = 0; u < 8; u++)	/* ascending indices: the first max stays */
			if (fabsf(xs[u]) < INFINITY && (vi == n || xs[u] > v))	/* NaN, +-inf never win */
				v = xs[u], vi = i0 + u * blockDim.x;
	}
	for (int o = 16; o > 0; o >>= 1) {
		float ov = __shfl_xor_sync(0xFFFFFFFFu, v, o);
		int64_t oi = __shfl_xor_sync(0xFFFFFFFFu, vi, o);
		if (oi < n && (vi == n || ov > v || (ov == v && oi < vi)))
			v = ov, vi = oi;
	}
	if (lane == 0)
		bv[warp] = v, bi[warp] = vi;
	__syncthreads();
	if (threadIdx.x == 0) {
		for (int w = 1; w < (int)(blockDim.x >> 5); w++)
			if (bi[w] < n && (vi == n || bv[w] > v || (bv[w] == v && bi[w] < vi)))
				v = bv[w], vi = bi[w];
		idx[blockIdx.x] = vi == n ? -1 : (int32_t)vi;
	}
}

extern "C" int
gpu_argmax(struct gpu *g, const float *d_x, int rows, int64_t n, int32_t *d_idx)
{
	if (rows < 1 || n < 1 || n > INT32_MAX)
		return gpu_fail(g, "argmax: %d rows of %lld", rows, (long long)n);
	gpu_launch(g, k_argmax, rows, 1024, 0, d_x, n, d_idx);
	GPU_LAUNCHED(g, "argmax");
	return 0;
}

/* (ov, ok) before (v, k) in a masked head's greedy order: larger first, ties
 * to the lower id; k INT_MAX is none. */
__device__ __forceinline__ bool
am_before(float ov, int ok, float v, int k)
{
	return ok != INT_MAX && (k == INT_MAX || ov > v || (ov == v && ok < k));
}

/* A block a row: ranks_argmax's pick of x[r][0..n) mapped through map. */
__global__ void
k_argmax_map(const float *x, int64_t ldx, int n, const int32_t *map, int32_t *out)
{
	__shared__ float bv[32];
	__shared__ int bk[32];
	const float *r = x + blockIdx.x * ldx;
	float v = -INFINITY;
	int k = INT_MAX, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;

	pdl_enter();
	for (int i = threadIdx.x; i < n; i += blockDim.x) {
		float xi = r[i];
		if (!isnan(xi) && xi != -INFINITY && am_before(xi, map[i], v, k))
			v = xi, k = map[i];
	}
	for (int o = 16; o > 0; o >>= 1) {	/* a total order: any tree gives its first */
		float ov = __shfl_xor_sync(0xFFFFFFFFu, v, o);
		int ok = __shfl_xor_sync(0xFFFFFFFFu, k, o);
		if (am_before(ov, ok, v, k))
			v = ov, k = ok;
	}
	if (lane == 0)
		bv[warp] = v, bk[warp] = k;
	__syncthreads();
	if (threadIdx.x == 0) {
		for (int w = 1; w < (int)(blockDim.x >> 5); w++)
			if (am_before(bv[w], bk[w], v, k))
				v = bv[w], k = bk[w];
		out[blockIdx.x] = k == INT_MAX ? -1 : k;
	}
}

extern "C" int
gpu_argmax_map(struct gpu *g, const float *d_x, int64_t ldx, int rows, int n,
    const int32_t *d_map, int32_t *d_out)
{
	if (rows < 1 || n < 1 || ldx < n)
		return gpu_fail(g, "argmax map: %d rows of %d (stride %lld)", rows, n,
		    (long long)ldx);
	gpu_launch(g, k_argmax_map, rows, 1024, 0, d_x, ldx, n, d_map, d_out);
	GPU_LAUNCHED(g, "argmax map");
	return 0;
}

/* --- top k (the sampler's candidates) ---------------------------------- */

/*
 * lib/sample.c's order_key of x / temp at index i: the smaller key the
 * more likely (the float's bits made monotone and inverted above, the
 * index below, so keys are distinct).
 */
__device__ __forceinline__ uint64_t
topk_key(float x, float temp, int64_t i)
{
	float v = __fdiv_rn(x, temp);
	uint32_t u;

	if (v == 0.0f)
		v = 0.0f;		/* -0 sorts as +0 */
	u = __float_as_uint(v);
	u = u & 0x80000000u ? ~u : u | 0x80000000u;
	return (uint64_t)~u << 32 | (uint32_t)i;
}

/*
 * The k smallest keys of a row by a radix select, 8 bits a pass from the
 * top, spread over TOPK_B blocks a row: each pass is a launch whose blocks
 * count the next digit of the keys that share the prefix found so far
 * (warp-aggregated shared atomics, then one global add a bin), and the
 * last block to finish (a ticket) picks the digit's bin that holds the
 * k-th key and writes the longer prefix for the next pass, or stops when
 * that bin holds exactly the keys still needed (at the latest at the 64th
 * bit: keys are distinct); later passes then return at once.  A gather
 * launch puts the keys at or under the prefix in the row's candidates
 * (any order) and a sort launch (one block a row, bitonic) orders them,
 * so the output does not depend on any order of the gathering.
 */
struct topk_row {
	unsigned hist[256];
	unsigned ticket, cnt;
	int	bits, need, stop;	/* stop: 1 the prefix found, 2 all finite values */
	unsigned long long prefix;
};

#define TOPK_T	256		/* threads of a pass or gather block */
#define TOPK_B	256		/* blocks a row (bench/2026-12-01/2026-12-01-s9-cuda-notes.md: 64 -> 256) */
#define TOPK_U	4		/* loads in flight a thread */

/* Add each lane's digit bin (-1: none) to h, one atomic per distinct bin. */
__device__ __forceinline__ void
topk_count(unsigned *h, int bin)
{
	if (__any_sync(0xFFFFFFFFu, bin >= 0)) {
		unsigned peers = __match_any_sync(0xFFFFFFFFu, bin);
		if (bin >= 0 && (threadIdx.x & 31) == __ffs(peers) - 1)
			atomicAdd(&h[bin], (unsigned)__popc(peers));
	}
}

__global__ void __launch_bounds__(TOPK_T)
k_topk_pass(const float *x, int64_t ldx, int n, int k, float temp, struct topk_row *st)
{
	__shared__ unsigned h[256];
	__shared__ int last;
	struct topk_row *S = st + blockIdx.y;
	const float *r = x + blockIdx.y * ldx;
	const int tid = threadIdx.x, step = TOPK_B * TOPK_T;

	pdl_enter();
	if (S->stop)
		return;
	const int bits = S->bits;
	const unsigned long long prefix = S->prefix;

	h[tid] = 0;		/* (TOPK_T == 256) */
	__syncthreads();
	for (int wb = blockIdx.x * TOPK_T + (tid & ~31); wb < n; wb += step * TOPK_U) {
		int base = wb + (tid & 31);	/* (the warp goes round together) */
		float xs[TOPK_U];
		for (int u = 0; u < TOPK_U; u++)
			xs[u] = base + u * step < n ? r[base + u * step] : NAN;
		for (int u = 0; u < TOPK_U; u++) {
			int bin = -1;
			if (fabsf(xs[u]) < INFINITY) {
				uint64_t key = topk_key(xs[u], temp, base + u * step);
				if (bits == 0 || key >> (64 - bits) == prefix)
					bin = (int)(key >> (56 - bits) & 255);
			}
			topk_count(h, bin);
		}
	}
	__syncthreads();
	if (h[tid])
		atomicAdd(&S->hist[tid], h[tid]);
	__threadfence();
	__syncthreads();
	if (tid == 0)
		last = atomicAdd(&S->ticket, 1) == gridDim.x - 1;
	__syncthreads();
	if (!last)
		return;
	__threadfence();
	h[tid] = ((volatile unsigned *)S->hist)[tid];	/* one load a bin, side by side */
	__syncthreads();
	if (tid == 0) {		/* the last block: the digit's bin of the k-th key */
		unsigned cum = 0, need = bits ? (unsigned)S->need : (unsigned)k;
		int j = 0;

		while (j < 256 && cum + h[j] < need)
			cum += h[j++];
		if (j == 256) {		/* fewer finite values than k: all of them */
			S->stop = 2;
		} else {
			S->need = (int)(need - cum);
			S->prefix = prefix << 8 | (unsigned long long)j;
			S->bits = bits + 8;
			S->stop = h[j] == need - cum;
		}
		S->ticket = 0;
	}
	__syncthreads();
	S->hist[tid] = 0;	/* for the next pass */
}

/* The rows' select state zeroed (a kernel: ordered as kernels are). */
__global__ void
k_topk_init(struct topk_row *st)
{
	pdl_enter();
	for (int i = threadIdx.x; i < (int)(sizeof *st / 4); i += blockDim.x)
		((unsigned *)(st + blockIdx.x))[i] = 0;
}

/* The keys at or under the prefix (or every finite one) into cand[row][k]. */
__global__ void __launch_bounds__(TOPK_T)
k_topk_gather(const float *x, int64_t ldx, int n, int k, float temp, struct topk_row *st,
    uint64_t *cand)
{
	struct topk_row *S = st + blockIdx.y;
	const float *r = x + blockIdx.y * ldx;
	const int step = TOPK_B * TOPK_T;

	pdl_enter();
	const int bits = S->bits, all = S->stop == 2;
	const unsigned long long prefix = S->prefix;

	for (int i = blockIdx.x * TOPK_T + threadIdx.x; i < n; i += step) {
		float xi = r[i];
		if (fabsf(xi) < INFINITY) {
			uint64_t key = topk_key(xi, temp, i);
			if (all || (bits == 64 ? key : key >> (64 - bits)) <= prefix)
				cand[(int64_t)blockIdx.y * k + atomicAdd(&S->cnt, 1u)] = key;
		}
	}
}

/* Row blockIdx.x's candidates sorted (bitonic, in shared memory) to val, id. */
__global__ void __launch_bounds__(1024)
k_topk_sort(const float *x, int64_t ldx, int k, const struct topk_row *st,
    const uint64_t *cand, float *val, int32_t *id)
{
	__shared__ uint64_t sel[GPU_TOPK_MAX];
	const float *r = x + blockIdx.x * ldx;
	const int tid = threadIdx.x;
	int cnt, p2;

	pdl_enter();
	cnt = (int)st[blockIdx.x].cnt;
	for (p2 = 1; p2 < cnt; p2 <<= 1)
		;
	for (int i = tid; i < p2; i += blockDim.x)
		sel[i] = i < cnt ? cand[(int64_t)blockIdx.x * k + i] : ~0ULL;
	for (int size = 2; size <= p2; size <<= 1)	/* ascending */
		for (int stride = size >> 1; stride > 0; stride >>= 1) {
			__syncthreads();
			int i = tid, j = tid ^ stride;
			if (i < p2 && j > i) {
				uint64_t a = sel[i], b = sel[j];
				if ((a > b) == ((i & size) == 0))
					sel[i] = b, sel[j] = a;
			}
		}
	__syncthreads();
	for (int t = tid; t < k; t += blockDim.x) {
		int32_t ix = t < cnt ? (int32_t)(uint32_t)sel[t] : -1;

		id[(int64_t)blockIdx.x * k + t] = ix;
		val[(int64_t)blockIdx.x * k + t] = ix >= 0 ? r[ix] : NAN;
	}
}

extern "C" size_t
gpu_topk_scratch(int rows, int k)
{
	return (size_t)rows * (sizeof(struct topk_row) + (size_t)k * 8);
}

extern "C" int
gpu_topk(struct gpu *g, const float *d_x, int rows, int64_t ldx, int64_t n, int k, float temp,
    float *d_val, int32_t *d_id, void *d_scratch)
{
	struct topk_row *st = (struct topk_row *)d_scratch;
	uint64_t *cand = (uint64_t *)(st + rows);

	if (rows < 1 || rows > 65535 || n < 1 || n > INT32_MAX - TOPK_B * TOPK_T * TOPK_U ||
	    ldx < n || k < 1 || k > GPU_TOPK_MAX || !(temp > 0) || !(temp < INFINITY))
		return gpu_fail(g, "topk: %d rows of %lld, k %d, temp %g", rows, (long long)n, k,
		    (double)temp);
	gpu_launch(g, k_topk_init, rows, 256, 0, st);
	GPU_LAUNCHED(g, "topk init");
	for (int pass = 0; pass < 8; pass++) {
		gpu_launch(g, k_topk_pass, dim3(TOPK_B, rows), TOPK_T, 0, d_x, ldx, (int)n, k, temp,
		    st);
		GPU_LAUNCHED(g, "topk pass");
	}
	gpu_launch(g, k_topk_gather, dim3(TOPK_B, rows), TOPK_T, 0, d_x, ldx, (int)n, k, temp, st,
	    cand);
	GPU_LAUNCHED(g, "topk gather");
	gpu_launch(g, k_topk_sort, rows, 1024, 0, d_x, ldx, k, (const struct topk_row *)st,
	    (const uint64_t *)cand, d_val, d_id);
	GPU_LAUNCHED(g, "topk sort");
	return 0;
}

/* --- a draw from the whole row (lib/sample.h's integer weights) -------- */

/*
 * The draw sample_next makes from a row without top-k or penalties, in
 * integers so that no order of sums matters: the least order key (the
 * most likely candidate, z_top), the total weight (and the min-p floor's
 * part of it), then radix selects over the order keys, 8 bits a pass as
 * gpu_topk's but by weight: each pass sums the weights of the candidates
 * a digit bin that share the prefix found so far, and the last block (a
 * ticket) takes the bin where the running weight passes the point, until
 * one candidate of positive weight is left in it.  With top-p a first
 * select finds the candidate whose running weight reaches the target (the
 * end of the kept prefix), a sum the kept weight; the second select the
 * one that passes fexp_point(u, kept): that candidate is the draw.
 */
enum { DRAW_CUT = 1, DRAW_PICK = 2 };

struct draw_row {
	unsigned cnt[256];		/* a pass: candidates of positive weight a bin */
	unsigned long long w[256];	/* and their weight */
	unsigned ticket;
	int	phase;			/* DRAW_CUT, DRAW_PICK */
	int	bits, stop;		/* the select: key bits found; 1 found, 2 none */
	unsigned long long prefix, point;
	unsigned long long top;		/* the least key; ~0: nothing finite */
	unsigned long long sum, kept;	/* every weight, the kept ones */
	int	cut_bits;		/* the top-p prefix: keys whose top cut_bits */
	unsigned long long cut;		/* bits are <= cut (cut_bits 0: every key) */
	int	id, done;
};

struct draw_arg {
	float	temp, top_p;
	unsigned long long floor;	/* fexp_min_p */
	double	u;
};

/* What a pass reads of the row's state once. */
struct draw_see {
	unsigned long long top, cut;
	float	ztop;
	int	cut_bits;
};

__device__ __forceinline__ struct draw_see
draw_see(const struct draw_row *S)
{
	struct draw_see v;
	uint32_t u = ~(uint32_t)(S->top >> 32);	/* topk_key's float, back */

	v.top = S->top, v.cut = S->cut, v.cut_bits = S->cut_bits;
	v.ztop = __uint_as_float(u & 0x80000000u ? u & 0x7FFFFFFFu : ~u);
	return v;
}

/* x at i: its order key and its weight (0: not a candidate), in the kept
 * set (pick: the min-p floor and the top-p prefix) or all of them. */
__device__ __forceinline__ unsigned long long
draw_weight(float x, int64_t i, const struct draw_arg &a, const struct draw_see &v, int pick,
    unsigned long long *key)
{
	unsigned long long w;

	if (!(fabsf(x) < INFINITY))
		return 0;
	*key = topk_key(x, a.temp, i);
	w = *key == v.top ? SAMPLE_WONE : fexp_weight(__fsub_rn(__fdiv_rn(x, a.temp), v.ztop));
	if (pick && (w < a.floor || (v.cut_bits && *key >> (64 - v.cut_bits) > v.cut)))
		return 0;
	return w;
}

#define DRAW_T	256		/* threads of a block */
#define DRAW_B	256		/* blocks (bench/2026-12-01/2026-12-01-s9-cuda-notes.md: 64 -> 256) */

/* 1 in the block's last thread block to finish (a ticket), after its
 * global sums are out. */
__device__ __forceinline__ int
draw_last(struct draw_row *S)
{
	__shared__ int last;

	__threadfence();
	__syncthreads();
	if (threadIdx.x == 0)
		last = atomicAdd(&S->ticket, 1) == gridDim.x - 1;
	__syncthreads();
	if (last)
		__threadfence();
	return last;
}

/* A warp's sum of v, on every lane. */
__device__ __forceinline__ unsigned long long
draw_warp_sum(unsigned long long v)
{
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
	return v;
}

__global__ void
k_draw_init(struct draw_row *S, int32_t *id)
{
	pdl_enter();
	for (int i = threadIdx.x; i < (int)(sizeof *S / 4); i += blockDim.x)
		((unsigned *)S)[i] = 0;
	__syncthreads();
	if (threadIdx.x == 0)
		S->top = ~0ULL, S->id = -1, *id = -1;
}

/* S->top = the least order key of the finite x. */
__global__ void __launch_bounds__(DRAW_T)
k_draw_top(const float *x, int n, float temp, struct draw_row *S)
{
	unsigned long long m = ~0ULL;

	pdl_enter();
	for (int i = blockIdx.x * DRAW_T + threadIdx.x; i < n; i += DRAW_B * DRAW_T)
		if (fabsf(x[i]) < INFINITY)
			m = min(m, (unsigned long long)topk_key(x[i], temp, i));
	for (int o = 16; o > 0; o >>= 1)
		m = min(m, __shfl_xor_sync(0xFFFFFFFFu, m, o));
	if ((threadIdx.x & 31) == 0 && m != ~0ULL)
		atomicMin(&S->top, m);
}

/*
 * The weights summed: pick 0 every candidate's (S->sum) and those at the
 * min-p floor (S->kept), then the top-p target's select or the draw's;
 * pick 1 the kept ones after the top-p select (S->kept), then the draw's.
 */
__global__ void __launch_bounds__(DRAW_T)
k_draw_sum(const float *x, int n, struct draw_arg a, struct draw_row *S, int pick)
{
	__shared__ unsigned long long ps[DRAW_T / 32], pk[DRAW_T / 32];
	unsigned long long s = 0, k = 0, key;

	pdl_enter();
	if (S->done || S->top == ~0ULL)
		return;		/* (nothing finite: the id stays -1) */
	const struct draw_see v = draw_see(S);
	for (int i = blockIdx.x * DRAW_T + threadIdx.x; i < n; i += DRAW_B * DRAW_T) {
		unsigned long long w = draw_weight(x[i], i, a, v, pick, &key);
		s += w;
		k += w >= a.floor ? w : 0;
	}
	s = draw_warp_sum(s), k = draw_warp_sum(k);
	if ((threadIdx.x & 31) == 0)
		ps[threadIdx.x >> 5] = s, pk[threadIdx.x >> 5] = k;
	__syncthreads();
	if (threadIdx.x == 0) {
		for (int w = 1; w < DRAW_T / 32; w++)
			s += ps[w], k += pk[w];
		if (!pick)
			atomicAdd(&S->sum, s);
		atomicAdd(&S->kept, k);
	}
	if (!draw_last(S) || threadIdx.x != 0)
		return;
	S->ticket = 0, S->bits = 0, S->stop = 0, S->prefix = 0;
	if (!pick && a.top_p < 1.0f) {	/* the end of the top-p prefix first */
		S->phase = DRAW_CUT;
		S->point = fexp_top_p(a.top_p, S->sum) - 1;	/* (>= 1: sum >= 2^44) */
		S->kept = 0;
	} else {
		S->phase = DRAW_PICK;
		S->point = fexp_point(a.u, S->kept);
	}
}

/* Add each lane's weight w to its bin (-1: none) of c and s: one atomic
 * a distinct bin, its lanes' weights summed in the lowest one. */
__device__ __forceinline__ void
draw_count(unsigned *c, unsigned long long *s, int bin, unsigned long long w)
{
	if (!__any_sync(0xFFFFFFFFu, bin >= 0))
		return;
	unsigned peers = __match_any_sync(0xFFFFFFFFu, bin);
	unsigned long long t = 0;

	if (peers == 0xFFFFFFFFu) {	/* one bin (the top digits' passes): a butterfly */
		t = draw_warp_sum(w);
	} else {
		for (int l = 0; l < 32; l++) {
			unsigned long long o = __shfl_sync(0xFFFFFFFFu, w, l);
			if (peers >> l & 1)
				t += o;
		}
	}
	if (bin >= 0 && (threadIdx.x & 31) == __ffs(peers) - 1) {
		atomicAdd(&c[bin], (unsigned)__popc(peers));
		atomicAdd(&s[bin], t);
	}
}

/* The last block of a pass: the bin whose weight takes the running sum
 * past the point (c, s: the pass's bins in shared memory). */
__device__ void
draw_choose(struct draw_row *S, const unsigned *c, const unsigned long long *s)
{
	unsigned long long cum = 0;
	int j = 0;

	while (j < 256 && cum + s[j] <= S->point)
		cum += s[j++];
	if (j == 256) {
		S->stop = 2;	/* (top-p: the target past the sum; all kept) */
	} else {
		S->point -= cum;
		S->prefix = S->prefix << 8 | (unsigned long long)j;
		S->bits += 8;
		S->stop = c[j] == 1 || S->bits == 64;
	}
	if (S->stop && S->phase == DRAW_CUT) {
		S->cut_bits = S->stop == 1 ? S->bits : 0;
		S->cut = S->prefix;
	} else if (S->stop && S->bits == 64) {
		S->id = (int)(uint32_t)S->prefix;
		S->done = 1;
	} else if (S->stop == 2) {
		S->done = 1;	/* (not reached: the point is under the kept sum) */
	}
	S->ticket = 0;
}

__global__ void __launch_bounds__(DRAW_T)
k_draw_pass(const float *x, int n, struct draw_arg a, struct draw_row *S)
{
	__shared__ unsigned c[256];
	__shared__ unsigned long long s[256];
	const int tid = threadIdx.x;

	pdl_enter();
	if (S->done || S->stop || S->top == ~0ULL)
		return;
	const struct draw_see v = draw_see(S);
	const int bits = S->bits, pick = S->phase == DRAW_PICK;
	const unsigned long long prefix = S->prefix;

	c[tid] = 0, s[tid] = 0;		/* (DRAW_T == 256) */
	__syncthreads();
	for (int wb = blockIdx.x * DRAW_T + (tid & ~31); wb < n; wb += DRAW_B * DRAW_T) {
		int i = wb + (tid & 31), bin = -1;	/* (the warp goes round together) */
		unsigned long long key = 0, w = i < n ? draw_weight(x[i], i, a, v, pick, &key) : 0;
		if (w > 0 && (bits == 0 || key >> (64 - bits) == prefix))
			bin = (int)(key >> (56 - bits) & 255);
		draw_count(c, s, bin, w);
	}
	__syncthreads();
	if (c[tid]) {
		atomicAdd(&S->cnt[tid], c[tid]);
		atomicAdd(&S->w[tid], s[tid]);
	}
	if (!draw_last(S))
		return;
	c[tid] = ((volatile unsigned *)S->cnt)[tid];
	s[tid] = ((volatile unsigned long long *)S->w)[tid];
	S->cnt[tid] = 0, S->w[tid] = 0;		/* for the next pass */
	__syncthreads();
	if (tid == 0)
		draw_choose(S, c, s);
}

/* The draw to *id: the one candidate of positive kept weight under the
 * prefix found, unless a pass named it already. */
__global__ void __launch_bounds__(DRAW_T)
k_draw_emit(const float *x, int n, struct draw_arg a, struct draw_row *S, int32_t *id)
{
	pdl_enter();
	if (S->done || S->top == ~0ULL) {
		if (blockIdx.x == 0 && threadIdx.x == 0)
			*id = S->id;
		return;
	}
	const struct draw_see v = draw_see(S);
	const int bits = S->bits;
	const unsigned long long prefix = S->prefix;

	for (int i = blockIdx.x * DRAW_T + threadIdx.x; i < n; i += DRAW_B * DRAW_T) {
		unsigned long long key, w = draw_weight(x[i], i, a, v, 1, &key);
		if (w > 0 && key >> (64 - bits) == prefix)
			*id = i;
	}
}

extern "C" size_t
gpu_draw_scratch(void)
{
	return sizeof(struct draw_row);
}

extern "C" int
gpu_draw(struct gpu *g, const float *d_x, int64_t n, float temp, float top_p, float min_p,
    double u, int32_t *d_id, void *d_scratch)
{
	struct draw_row *S = (struct draw_row *)d_scratch;
	struct draw_arg a = { temp, top_p, fexp_min_p(min_p), u };

	if (n < 1 || n > INT32_MAX - DRAW_B * DRAW_T || !(temp > 0) || !(temp < INFINITY) ||
	    !(top_p > 0 && top_p <= 1) || !(min_p >= 0 && min_p <= 1) || !(u >= 0 && u < 1))
		return gpu_fail(g, "draw: %lld values, temp %g, top-p %g, min-p %g, u %g",
		    (long long)n, (double)temp, (double)top_p, (double)min_p, u);
	gpu_launch(g, k_draw_init, 1, 256, 0, S, d_id);
	GPU_LAUNCHED(g, "draw init");
	gpu_launch(g, k_draw_top, DRAW_B, DRAW_T, 0, d_x, (int)n, temp, S);
	GPU_LAUNCHED(g, "draw top");
	gpu_launch(g, k_draw_sum, DRAW_B, DRAW_T, 0, d_x, (int)n, a, S, 0);
	GPU_LAUNCHED(g, "draw sum");
	for (int cut = top_p < 1 ? 1 : 0; cut >= 0; cut--) {
		for (int pass = 0; pass < 8; pass++) {
			gpu_launch(g, k_draw_pass, DRAW_B, DRAW_T, 0, d_x, (int)n, a, S);
			GPU_LAUNCHED(g, "draw pass");
		}
		if (cut) {
			gpu_launch(g, k_draw_sum, DRAW_B, DRAW_T, 0, d_x, (int)n, a, S, 1);
			GPU_LAUNCHED(g, "draw sum");
		}
	}
	gpu_launch(g, k_draw_emit, DRAW_B, DRAW_T, 0, d_x, (int)n, a, S, d_id);
	GPU_LAUNCHED(g, "draw emit");
	return 0;
}

/* --- a draw's penalties on the row (lib/sample.h's sample_window) ------- */

__global__ void
k_penalize(float *x, const int32_t *tok, const int32_t *cnt, int k, float repeat,
    float presence, float frequency)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	pdl_enter();
	if (i < k)
		x[tok[i]] = fexp_penalty(x[tok[i]], repeat, presence, frequency, cnt[i]);
}

extern "C" int
gpu_penalize(struct gpu *g, float *d_x, const int32_t *d_tok, const int32_t *d_cnt, int k,
    float repeat, float presence, float frequency)
{
	if (k < 0 || !(repeat > 0))
		return gpu_fail(g, "penalize: %d tokens, repeat %g", k, (double)repeat);
	if (k == 0)
		return 0;
	gpu_launch(g, k_penalize, (k + 255) / 256, 256, 0, d_x, d_tok, d_cnt, k, repeat, presence,
	    frequency);
	GPU_LAUNCHED(g, "penalize");
	return 0;
}

/* --- a token mask on the row (lib/grammar.h's grammar_mask) ------------- */

/* A thread a value: the 32 of a warp read one word of bits. */
__global__ void
k_mask(float *x, int64_t n, const uint32_t *bits)
{
	int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;

	pdl_enter();
	if (i < n && !(bits[i >> 5] >> (i & 31) & 1))
		x[i] = -INFINITY;
}

extern "C" int
gpu_mask(struct gpu *g, float *d_x, int64_t n, const uint32_t *d_bits)
{
	if (n < 0)
		return gpu_fail(g, "mask: a row of %lld", (long long)n);
	if (n == 0)
		return 0;
	gpu_launch(g, k_mask, (unsigned)((n + 255) / 256), 256, 0, d_x, n, d_bits);
	GPU_LAUNCHED(g, "mask");
	return 0;
}
