/*
 * moe: the mixture of experts' routing, activations and weighted sums
 * (the products are cuda/matvec*.cu's gpu_moe_matvec), and the small
 * elementwise ops of Gemma-4 and step35, each with lib/backend_cpu_moe.c's
 * and lib/backend_cpu_gemma.c's operations in their order (every product
 * and sum rounded on its own: no contraction), so that a result differs
 * from the CPU's only where CUDA's expf or tanhf does from the C
 * library's (a few ulp).  Row by row: nothing in a row depends on the
 * other rows of the call (batch-invariant).
 */
#include "gpu_impl.cuh"

#include "moe_route.cuh"

#define MOE_ROUTE_MAX 4096	/* experts a router takes (the CPU's sigmoid router's bound) */

extern "C" int
gpu_moe_route(struct gpu *g, int mode, const float *d_x, int64_t ldx, int m, int n, int k,
    const float *d_bias, int norm, float scale, const float *d_es, int32_t *d_ids, float *d_w)
{
	size_t sm = (size_t)n * 9;

	if (m < 1 || n < 1 || n > MOE_ROUTE_MAX || k < 1 || k > n || ldx < n ||
	    (mode != GPU_ROUTE_SOFTMAX && mode != GPU_ROUTE_SIGMOID))
		return gpu_fail(g, "moe route: mode %d, top %d of %d experts (at most %d), %d rows",
		    mode, k, n, MOE_ROUTE_MAX, m);
	for (int r0 = 0; r0 < m; r0 += 65535) {
		int nr = m - r0 < 65535 ? m - r0 : 65535;
		const float *x = d_x + (int64_t)r0 * ldx;
		if (mode == GPU_ROUTE_SIGMOID)
			gpu_launch(g, k_moe_route<1>, nr, 32, sm, x, ldx, n, k, d_bias, norm, scale,
			    d_es, d_ids + (int64_t)r0 * k, d_w + (int64_t)r0 * k);
		else
			gpu_launch(g, k_moe_route<0>, nr, 32, sm, x, ldx, n, k, d_bias, norm, scale,
			    d_es, d_ids + (int64_t)r0 * k, d_w + (int64_t)r0 * k);
		GPU_LAUNCHED(g, "moe route");
	}
	return 0;
}

/* y[r][i] = sum over j < k of w[r][j] * d[r k + j][i], the first product as
 * is; then A 1: + x[r][i] (k_binary's add), A 2: + sigmoid(gt[r ldg]) *
 * x[r][i] (k_add_gated's), x [m][n]. */
template <int A>
__global__ void
k_moe_combine(const float *d, int m, int k, int64_t n, const float *w, float *y, int64_t ldy,
    const float *x, const float *gt, int64_t ldg)
{
	int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, r, c;

	pdl_enter();
	if (i >= (int64_t)m * n)
		return;
	r = i / n, c = i - r * n;
	float acc = 0.0f;
	for (int j = 0; j < k; j++) {
		int64_t s = r * k + j;
		float v = __fmul_rn(w[s], d[s * n + c]);
		acc = j == 0 ? v : __fadd_rn(acc, v);
	}
	if (A == 1)
		acc = __fadd_rn(acc, x[i]);
	else if (A == 2)
		acc = __fadd_rn(acc, __fmul_rn(gpu_sigmoid(gt[r * ldg]), x[i]));
	y[r * ldy + c] = acc;
}

extern "C" int
gpu_moe_combine_add(struct gpu *g, const float *d_d, int m, int k, int64_t n, const float *d_w,
    float *d_y, int64_t ldy, const float *d_x, const float *d_g, int64_t ldg)
{
	int64_t t = (int64_t)m * n;
	unsigned nb = (unsigned)((t + 255) / 256);

	if (m < 1 || k < 1 || n < 1 || ldy < n || (d_g != NULL && (d_x == NULL || ldg < 1)))
		return gpu_fail(g, "moe combine: %d rows of %lld, %d experts each", m, (long long)n, k);
	if (d_g != NULL)
		gpu_launch(g, k_moe_combine<2>, nb, 256, 0, d_d, m, k, n, d_w, d_y, ldy, d_x, d_g, ldg);
	else if (d_x != NULL)
		gpu_launch(g, k_moe_combine<1>, nb, 256, 0, d_d, m, k, n, d_w, d_y, ldy, d_x, d_g, ldg);
	else
		gpu_launch(g, k_moe_combine<0>, nb, 256, 0, d_d, m, k, n, d_w, d_y, ldy, d_x, d_g, ldg);
	GPU_LAUNCHED(g, "moe combine");
	return 0;
}

extern "C" int
gpu_moe_combine(struct gpu *g, const float *d_d, int m, int k, int64_t n, const float *d_w,
    float *d_y, int64_t ldy)
{
	return gpu_moe_combine_add(g, d_d, m, k, n, d_w, d_y, ldy, NULL, NULL, 0);
}

/* min(silu(g), L) * clamp(u, -L, L) for L > 0 (NaN passes), silu(g) * u for L = 0. */
__device__ __forceinline__ float
gpu_swiglu_lim(float g, float u, float limit)
{
	float a = gpu_silu(g), b = u;

	if (limit > 0.0f) {
		a = a > limit ? limit : a;
		b = b > limit ? limit : b < -limit ? -limit : b;
	}
	return __fmul_rn(a, b);
}

/* f[s][c], s < ns, c < nf: GPU_MOE_SWIGLU of a[s][c], b[s][c]; GPU_MOE_GEGLU of a[s][c], a[s][nf + c]. */
__global__ void
k_moe_act(int act, const float *a, const float *b, int64_t total, int64_t nf, float limit,
    float *f)
{
	int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;

	pdl_enter();
	if (i >= total)
		return;
	if (act == GPU_MOE_GEGLU) {
		int64_t s = i / nf, c = i - s * nf;
		const float *as = a + s * 2 * nf;
		f[i] = __fmul_rn(gpu_gelu_tanh(as[c]), as[nf + c]);
	} else
		f[i] = gpu_swiglu_lim(a[i], b[i], limit);
}

extern "C" int
gpu_moe_act(struct gpu *g, int act, const float *d_a, const float *d_b, int64_t ns, int64_t nf,
    float limit, float *d_f)
{
	int64_t t = ns * nf;

	if (ns < 1 || nf < 1 || !(limit >= 0.0f) || (act != GPU_MOE_SWIGLU && act != GPU_MOE_GEGLU) ||
	    (act == GPU_MOE_SWIGLU && d_b == NULL))
		return gpu_fail(g, "moe act: %d over %lld rows of %lld, limit %g", act, (long long)ns,
		    (long long)nf, limit);
	gpu_launch(g, k_moe_act, (unsigned)((t + 255) / 256), 256, 0, act, d_a, d_b, t, nf, limit,
	    d_f);
	GPU_LAUNCHED(g, "moe act");
	return 0;
}

__global__ void
k_moe_scale(float *w, const int32_t *ids, int64_t n, const float *s)
{
	int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;

	pdl_enter();
	if (i < n && ids[i] >= 0)	/* (-1: no key left; its NaN weight stays) */
		w[i] = __fmul_rn(w[i], s[ids[i]]);
}

extern "C" int
gpu_moe_scale(struct gpu *g, float *d_w, const int32_t *d_ids, int64_t n, const float *d_s)
{
	if (n < 1)
		return gpu_fail(g, "moe scale: %lld weights", (long long)n);
	gpu_launch(g, k_moe_scale, (unsigned)((n + 255) / 256), 256, 0, d_w, d_ids, n, d_s);
	GPU_LAUNCHED(g, "moe scale");
	return 0;
}

/* y[r][c] += sigmoid(gt[r * ldg]) * x[r][c]: the product rounded, then the sum. */
__global__ void
k_add_gated(float *y, int64_t ldy, const float *x, int64_t ldx, const float *gt, int64_t ldg,
    int rows, int64_t n)
{
	int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, r, c;

	pdl_enter();
	if (i >= (int64_t)rows * n)
		return;
	r = i / n, c = i - r * n;
	y[r * ldy + c] = __fadd_rn(y[r * ldy + c], __fmul_rn(gpu_sigmoid(gt[r * ldg]), x[r * ldx + c]));
}

extern "C" int
gpu_add_gated(struct gpu *g, float *d_y, int64_t ldy, const float *d_x, int64_t ldx,
    const float *d_g, int64_t ldg, int rows, int64_t n)
{
	int64_t t = (int64_t)rows * n;

	if (rows < 1 || n < 1 || ldy < n || ldx < n || ldg < 1)
		return gpu_fail(g, "add_gated: %d rows of %lld", rows, (long long)n);
	gpu_launch(g, k_add_gated, (unsigned)((t + 255) / 256), 256, 0, d_y, ldy, d_x, ldx, d_g, ldg,
	    rows, n);
	GPU_LAUNCHED(g, "add_gated");
	return 0;
}

/* y[r][c] = gelu_tanh(gt[r][c]) * u[r][c] (y may be gt or u). */
__global__ void
k_geglu(const float *gt, int64_t ldg, const float *u, int64_t ldu, float *y, int64_t ldy,
    int rows, int64_t n)
{
	int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, r, c;

	pdl_enter();
	if (i >= (int64_t)rows * n)
		return;
	r = i / n, c = i - r * n;
	y[r * ldy + c] = __fmul_rn(gpu_gelu_tanh(gt[r * ldg + c]), u[r * ldu + c]);
}

extern "C" int
gpu_geglu(struct gpu *g, const float *d_g, int64_t ldg, const float *d_u, int64_t ldu,
    float *d_y, int64_t ldy, int rows, int64_t n)
{
	int64_t t = (int64_t)rows * n;

	if (rows < 1 || n < 1 || ldg < n || ldu < n || ldy < n)
		return gpu_fail(g, "geglu: %d rows of %lld", rows, (long long)n);
	gpu_launch(g, k_geglu, (unsigned)((t + 255) / 256), 256, 0, d_g, ldg, d_u, ldu, d_y, ldy,
	    rows, n);
	GPU_LAUNCHED(g, "geglu");
	return 0;
}

/* op 0: x = cap * tanh(x / cap) (the quotient, tanh, product each rounded); 1: x *= s. */
__global__ void
k_unary(float *x, int64_t n, int op, float s)
{
	int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;

	pdl_enter();
	if (i >= n)
		return;
	x[i] = op == 0 ? __fmul_rn(tanhf(__fdiv_rn(x[i], s)), s) : __fmul_rn(x[i], s);
}

static int
unary(struct gpu *g, float *x, int64_t n, int op, float s, const char *what)
{
	if (n < 1)
		return gpu_fail(g, "%s: %lld elements", what, (long long)n);
	gpu_launch(g, k_unary, (unsigned)((n + 255) / 256), 256, 0, x, n, op, s);
	GPU_LAUNCHED(g, what);
	return 0;
}

extern "C" int
gpu_softcap(struct gpu *g, float *d_x, int64_t n, float cap)
{
	if (!(cap > 0.0f))
		return gpu_fail(g, "softcap: cap %g", cap);
	return unary(g, d_x, n, 0, cap, "softcap");
}

extern "C" int
gpu_mul_scalar(struct gpu *g, float *d_x, int64_t n, float s)
{
	return unary(g, d_x, n, 1, s, "scale");
}

__global__ void
k_clamp(float *x, int64_t n, float lo, float hi)
{
	int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;

	pdl_enter();
	if (i < n) {
		float v = x[i];
		x[i] = v < lo ? lo : v > hi ? hi : v;
	}
}

extern "C" int
gpu_clamp(struct gpu *g, float *d_x, int64_t n, float lo, float hi)
{
	if (n < 1)
		return gpu_fail(g, "clamp: %lld elements", (long long)n);
	gpu_launch(g, k_clamp, (unsigned)((n + 255) / 256), 256, 0, d_x, n, lo, hi);
	GPU_LAUNCHED(g, "clamp");
	return 0;
}

/* DFlash2's grouped dynamic causal convolution (gpu_dconv): one thread an output, the CPU's
 * order (per tap: + base term, then + dynamic term; each product rounded, no fused
 * multiply-add). */
__global__ void
k_dconv(const float *x, int m, int n, const float *dyn, int64_t ldd, int K, int group,
    const float *base, float *y)
{
	int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;

	pdl_enter();
	if (i < (int64_t)m * n) {
		int t = (int)(i / n), c = (int)(i % n), G = n / group;
		const float *dy = dyn + (int64_t)t * ldd;
		float acc = 0.0f;

		for (int o = 0; o < K && o <= t; o++) {
			float xv = x[(int64_t)(t - o) * n + c];

			acc = __fadd_rn(acc, __fmul_rn(base[(int64_t)o * n + c], xv));
			acc = __fadd_rn(acc, __fmul_rn(dy[(int64_t)o * G + c / group], xv));
		}
		y[i] = acc;
	}
}

extern "C" int
gpu_dconv(struct gpu *g, const float *d_x, int m, int n, const float *d_dyn, int64_t ldd,
    int K, int group, const float *d_base, float *d_y)
{
	int64_t e = (int64_t)m * n;

	if (m < 1 || n < 1 || K < 1 || group < 1 || n % group != 0 || ldd < (int64_t)K * (n / group))
		return gpu_fail(g, "dconv: %d rows of %d channels, %d taps, groups of %d", m, n, K,
		    group);
	gpu_launch(g, k_dconv, (unsigned)((e + 255) / 256), 256, 0, d_x, m, n, d_dyn, ldd, K,
	    group, d_base, d_y);
	GPU_LAUNCHED(g, "dconv");
	return 0;
}

__global__ void
k_swiglu_limit(const float *gt, const float *u, float *y, int64_t n, float limit)
{
	int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;

	pdl_enter();
	if (i < n)
		y[i] = gpu_swiglu_lim(gt[i], u[i], limit);
}

extern "C" int
gpu_swiglu_limit(struct gpu *g, const float *d_g, const float *d_u, float *d_y, int64_t n,
    float limit)
{
	if (n < 1 || !(limit >= 0.0f))
		return gpu_fail(g, "swiglu_limit: %lld elements, limit %g", (long long)n, limit);
	gpu_launch(g, k_swiglu_limit, (unsigned)((n + 255) / 256), 256, 0, d_g, d_u, d_y, n, limit);
	GPU_LAUNCHED(g, "swiglu_limit");
	return 0;
}

/* x[r][h hd + c] *= sigmoid(gt[r ldg + h]). */
__global__ void
k_head_gate(float *x, int64_t ldx, const float *gt, int64_t ldg, int rows, int nh, int hd)
{
	int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, n = (int64_t)nh * hd, r, c;

	pdl_enter();
	if (i >= (int64_t)rows * n)
		return;
	r = i / n, c = i - r * n;
	x[r * ldx + c] = __fmul_rn(x[r * ldx + c], gpu_sigmoid(gt[r * ldg + c / hd]));
}

extern "C" int
gpu_head_gate(struct gpu *g, float *d_x, int64_t ldx, const float *d_g, int64_t ldg, int rows,
    int nh, int hd)
{
	int64_t t = (int64_t)rows * nh * hd;

	if (rows < 1 || nh < 1 || hd < 1 || ldx < (int64_t)nh * hd || ldg < nh)
		return gpu_fail(g, "head_gate: %d rows of %d heads of %d", rows, nh, hd);
	gpu_launch(g, k_head_gate, (unsigned)((t + 255) / 256), 256, 0, d_x, ldx, d_g, ldg, rows,
	    nh, hd);
	GPU_LAUNCHED(g, "head_gate");
	return 0;
}

/* --- the experts' slots grouped by expert (gpu_moe_matvec's grouped form) -- */

/*
 * The exclusive prefix over the block (blockDim.x = MOE_GROUP_THREADS) of
 * each thread's v, and the total into *tot: the warps' inclusive scans by
 * shuffles, then the warps' totals by warp 0.  Integers: any order gives
 * the same sums.
 */
#define MOE_GROUP_THREADS 1024

__device__ __forceinline__ int
grp_scan(int v, int *wsum, int *tot)
{
	int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, x = v;

#pragma unroll
	for (int o = 1; o < 32; o <<= 1) {
		int y = __shfl_up_sync(0xFFFFFFFFu, x, o);
		if (lane >= o)
			x += y;
	}
	if (lane == 31)
		wsum[warp] = x;
	__syncthreads();
	if (warp == 0) {
		int w = lane < MOE_GROUP_THREADS / 32 ? wsum[lane] : 0, z = w;
#pragma unroll
		for (int o = 1; o < 32; o <<= 1) {
			int y = __shfl_up_sync(0xFFFFFFFFu, z, o);
			if (lane >= o)
				z += y;
		}
		wsum[lane] = z - w;	/* the warps before it */
		if (lane == 31)
			wsum[32] = z;
	}
	__syncthreads();
	int r = wsum[warp] + x - v;
	*tot = wsum[32];
	__syncthreads();	/* wsum free for the next scan */
	return r;
}

/* Slot s's bucket: expert ids[s], n_exp for an id outside [0, n_exp), n_exp
 * + 1 past the slots. */
__device__ __forceinline__ int
grp_bucket(const int32_t *__restrict__ ids, int s, int ns, int n_exp)
{
	if (s >= ns)
		return n_exp + 1;
	int e = ids[s];
	return e >= 0 && e < n_exp ? e : n_exp;
}

/*
 * One block: the slots' buckets (expert ids[s], or n_exp for an id outside
 * [0, n_exp): their NaN rows), counted, the buckets' offsets and tiles by
 * grp_scan over chunks of buckets, the tiles (bucket, first, count <=
 * GPU_MOE_MT, index in the bucket) of each bucket in order into
 * tile[0..), tile[used..nt) empty (count 0); then warp 0 places the slots
 * 32 at a time in slot order (lanes of one bucket by __match_any_sync,
 * each at the bucket's cursor plus its rank among them; the buckets
 * staged in shared memory by the block): perm[i] is the slot at sorted
 * position i, stable within an expert, and perm[ns .. ns + GPU_MOE_MT) = 0 (the rows a
 * tile's kernel may read past the last).  Shared memory: 2 (n_exp + 1)
 * ints dynamic, 2 MOE_GROUP_THREADS + 33 static.
 */
__global__ void __launch_bounds__(MOE_GROUP_THREADS)
k_moe_group(const int32_t *__restrict__ ids, int ns, int n_exp, int nt, int32_t *perm,
    int4 *tile)
{
	extern __shared__ int grp_sm[];
	__shared__ int wsum[33], stage[2][MOE_GROUP_THREADS];
	int nbk = n_exp + 1, *cnt = grp_sm, *cur = grp_sm + nbk, tid = threadIdx.x;
	int bpt = (nbk + MOE_GROUP_THREADS - 1) / MOE_GROUP_THREADS;	/* buckets a thread */
	int b0 = min(tid * bpt, nbk), b1 = min(b0 + bpt, nbk), tot, ntot;

	pdl_enter();	/* the ids are an earlier kernel's */
	for (int b = tid; b < nbk; b += MOE_GROUP_THREADS)
		cnt[b] = 0;
	__syncthreads();
	for (int s = tid; s < ns; s += MOE_GROUP_THREADS)
		atomicAdd(&cnt[grp_bucket(ids, s, ns, n_exp)], 1);
	__syncthreads();
	int c = 0, t = 0;
	for (int b = b0; b < b1; b++)
		c += cnt[b], t += (cnt[b] + GPU_MOE_MT - 1) / GPU_MOE_MT;
	int off = grp_scan(c, wsum, &tot), toff = grp_scan(t, wsum, &ntot);
	for (int b = b0; b < b1; b++) {
		int n = cnt[b];
		for (int f = 0; f < n; f += GPU_MOE_MT)
			tile[toff++] = make_int4(b, off + f, min(GPU_MOE_MT, n - f),
			    f / GPU_MOE_MT);
		cur[b] = off;
		off += n;
	}
	for (int i = ntot + tid; i < nt; i += MOE_GROUP_THREADS)
		tile[i] = make_int4(0, 0, 0, 0);
	for (int i = tid; i < GPU_MOE_MT; i += MOE_GROUP_THREADS)
		perm[ns + i] = 0;
	/* the buckets of the slots, a chunk of MOE_GROUP_THREADS at a time, staged
	 * in shared memory by every thread (the next chunk while warp 0 places
	 * this one: its loop waits on no load) */
	stage[0][tid] = grp_bucket(ids, tid, ns, n_exp);
	__syncthreads();
	for (int c0 = 0, st = 0; c0 < ns; c0 += MOE_GROUP_THREADS, st ^= 1) {
		if (c0 + MOE_GROUP_THREADS < ns)
			stage[st ^ 1][tid] = grp_bucket(ids, c0 + MOE_GROUP_THREADS + tid, ns, n_exp);
		if (tid < 32)
			for (int i = 0; i < MOE_GROUP_THREADS && c0 + i < ns; i += 32) {
				int s = c0 + i + tid, b = stage[st][i + tid];	/* nbk: no slot */
				unsigned peers = __match_any_sync(0xFFFFFFFFu, b);
				int rank = __popc(peers & ((1u << tid) - 1u)), base = s < ns ? cur[b] : 0;
				__syncwarp();
				if (s < ns) {
					perm[base + rank] = s;
					if (tid == 31 - __clz((int)peers))	/* the bucket's last lane */
						cur[b] = base + __popc(peers);
				}
				__syncwarp();
			}
		__syncthreads();
	}
}

size_t
moe_group_bytes(int ns, int n_exp)
{
	size_t a = 256, np = (size_t)ns + GPU_MOE_MT;

	return (np * 4 + a - 1) / a * a + (size_t)moe_group_tiles(ns, n_exp) * sizeof(int4);
}

int
moe_group_tiles(int ns, int n_exp)
{
	/* a bucket of c slots has ceil(c / MT) < c / MT + 1 tiles; at most
	 * n_exp + 1 buckets hold any, and no tile is empty */
	int64_t t = ((int64_t)ns + GPU_MOE_MT - 1) / GPU_MOE_MT + n_exp + 1;

	return (int)(t < ns ? t : ns);
}

int
moe_group_build(struct gpu *g, const int32_t *d_ids, int ns, int n_exp, void *mem,
    struct moe_group *G)
{
	size_t a = 256, np = (size_t)ns + GPU_MOE_MT;

	if (ns < 1 || n_exp < 1 || n_exp > GPU_MOE_GROUP_EXPERTS)
		return gpu_fail(g, "moe group: %d slots over %d experts (1..%d)", ns, n_exp,
		    GPU_MOE_GROUP_EXPERTS);
	G->perm = (int32_t *)mem;
	G->tile = (int4 *)((uint8_t *)mem + (np * 4 + a - 1) / a * a);
	G->nt = moe_group_tiles(ns, n_exp);
	gpu_launch(g, k_moe_group, 1, MOE_GROUP_THREADS, (size_t)(n_exp + 1) * 2 * sizeof(int),
	    d_ids, ns, n_exp, G->nt, G->perm, G->tile);
	GPU_LAUNCHED(g, "moe group");
	return 0;
}

/* Row i < n of dst[a] (rb[a] bytes, a multiple of 4) = row perm[i] / per
 * of src[a], for the array a = blockIdx.z: word blockIdx.x * blockDim.x +
 * threadIdx.x of rows blockIdx.y, + gridDim.y, ... */
struct grp_rows {
	const uint8_t *src[3];
	uint8_t *dst[3];
	int64_t rb[3];
};

__global__ void
k_moe_gather(const struct grp_rows R, const int32_t *__restrict__ perm, int64_t n, int per)
{
	int a = blockIdx.z;	/* (picked so, not indexed: no copy of R in local memory) */
	const uint32_t *src = (const uint32_t *)(a == 0 ? R.src[0] : a == 1 ? R.src[1] : R.src[2]);
	uint32_t *dst = (uint32_t *)(a == 0 ? R.dst[0] : a == 1 ? R.dst[1] : R.dst[2]);
	int64_t w = (a == 0 ? R.rb[0] : a == 1 ? R.rb[1] : R.rb[2]) / 4;
	int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;

	pdl_enter();	/* perm, and the rows, are earlier kernels' */
	if (c >= w)
		return;
	for (int64_t r = blockIdx.y; r < n; r += gridDim.y)
		dst[r * w + c] = src[(int64_t)(perm[r] / per) * w + c];
}

int
moe_gather(struct gpu *g, const struct moe_group *G, int ns, int per, int na,
    const void *const *src, void *const *dst, const size_t *rb)
{
	struct grp_rows R = {};
	int64_t n = (int64_t)ns + GPU_MOE_MT, w = 0;

	if (na < 1 || na > 3 || per < 1)
		return gpu_fail(g, "moe gather: %d arrays, %d slots a row", na, per);
	for (int a = 0; a < na; a++) {
		if (rb[a] % 4 != 0 || ((uintptr_t)src[a] & 3) || ((uintptr_t)dst[a] & 3))
			return gpu_fail(g, "moe gather: rows of %zu bytes, or unaligned", rb[a]);
		R.src[a] = (const uint8_t *)src[a];
		R.dst[a] = (uint8_t *)dst[a];
		R.rb[a] = (int64_t)rb[a];
		w = max(w, (int64_t)rb[a] / 4);
	}
	dim3 grid((unsigned)((w + 127) / 128), (unsigned)min(n, (int64_t)65535), (unsigned)na);
	gpu_launch(g, k_moe_gather, grid, 128, 0, R, G->perm, n, per);
	GPU_LAUNCHED(g, "moe gather");
	return 0;
}
