/*
 * moe_route.cuh: the router's kernel (k_moe_route), the text cuda/moe.cu
 * compiles for the GPU and tools/moe-route-kern.cc runs on the CPU, a
 * warp's lanes as coroutines with its shuffles and __syncwarp as
 * collectives.  The includer provides pdl_enter, gpu_sigmoid and, on the
 * host, the CUDA intrinsics used here.
 */

/*
 * The router of row blockIdx.x, one warp: the keys (softmax: p = exp(x -
 * max) by expf, their sum in index order by one lane, each p divided by
 * it; SIG: p = gpu_sigmoid(x), the key p + bias), then k picks of the
 * largest key left, the lower id on ties (a lane's stride in index order,
 * then a butterfly preferring the larger key, the lower id on equal ones:
 * the CPU's scan for keys without NaN), ids[r][j] and the weights: the
 * picked p summed in pick order, softmax p / sum, SIG (norm ? p / sum : p)
 * * scale; then (es not NULL) each times es[its id], as k_moe_scale
 * multiplies.  Pick j < 32 is kept by lane j, which finishes its weight
 * and stores it with its id after the picks (the lanes at once: one
 * store, the es loads in parallel); later picks (k > 32) are stored as
 * they come and finished by lane 0 in order, as every pick was before.
 * Shared memory: n floats of p, n of keys, n bytes taken.
 */
template <int SIG>
__global__ void
k_moe_route(const float *x, int64_t ldx, int n, int k, const float *bias, int norm,
    float scale, const float *es, int32_t *ids, float *w)
{
	extern __shared__ float rt_sm[];
	float *p = rt_sm, *key = rt_sm + n;
	unsigned char *taken = (unsigned char *)(rt_sm + 2 * n);
	int r = blockIdx.x, lane = threadIdx.x;
	const float *xr = x + (int64_t)r * ldx;
	int32_t *id = ids + (int64_t)r * k;
	float *wr = w + (int64_t)r * k, sum = 0.0f;

	pdl_enter();
	if (!SIG) {
		float mx = xr[0];
		for (int i = lane; i < n; i += 32)
			mx = xr[i] > mx ? xr[i] : mx;
		for (int o = 16; o > 0; o >>= 1) {
			float v = __shfl_xor_sync(0xFFFFFFFFu, mx, o);
			mx = v > mx ? v : mx;
		}
		for (int i = lane; i < n; i += 32)
			p[i] = expf(__fsub_rn(xr[i], mx));
		__syncwarp();
		if (lane == 0)
			for (int i = 0; i < n; i++)
				sum = __fadd_rn(sum, p[i]);
		sum = __shfl_sync(0xFFFFFFFFu, sum, 0);
		for (int i = lane; i < n; i += 32)
			key[i] = p[i] = __fdiv_rn(p[i], sum);
	} else {
		for (int i = lane; i < n; i += 32) {
			p[i] = gpu_sigmoid(xr[i]);
			key[i] = bias != NULL ? __fadd_rn(p[i], bias[i]) : p[i];
		}
	}
	for (int i = lane; i < n; i += 32)
		taken[i] = 0;
	__syncwarp();
	float tot = 0.0f, mp = 0.0f;	/* lane 0's sum; pick lane's p */
	int mb = -1;			/* pick lane's id */
	for (int j = 0; j < k; j++) {
		int b = -1;
		float bv = 0.0f;
		for (int i = lane; i < n; i += 32)
			if (!taken[i] && (SIG || key[i] >= 0.0f) && (b < 0 || key[i] > bv))
				b = i, bv = key[i];
		for (int o = 16; o > 0; o >>= 1) {
			int b2 = __shfl_xor_sync(0xFFFFFFFFu, b, o);
			float v2 = __shfl_xor_sync(0xFFFFFFFFu, bv, o);
			if (b2 >= 0 && (b < 0 || v2 > bv || (v2 == bv && b2 < b)))
				b = b2, bv = v2;
		}
		/* (every lane has the pick; no key left: NaN keys, a NaN weight) */
		float pb = b >= 0 ? p[b] : __int_as_float(0x7FC00000);
		if (lane == 0 && b >= 0)
			taken[b] = 1, tot = __fadd_rn(tot, pb);
		if (lane == j)
			mb = b, mp = pb;
		else if (j >= 32 && lane == 0)
			wr[j] = pb, id[j] = b;
		__syncwarp();
	}
	tot = __shfl_sync(0xFFFFFFFFu, tot, 0);
	if (lane < k) {
		float v = SIG ? __fmul_rn(norm ? __fdiv_rn(mp, tot) : mp, scale) : __fdiv_rn(mp, tot);
		if (es != NULL && mb >= 0)
			v = __fmul_rn(v, es[mb]);
		wr[lane] = v, id[lane] = mb;
	}
	if (lane == 0)
		for (int j = 32; j < k; j++) {
			wr[j] = SIG ? __fmul_rn(norm ? __fdiv_rn(wr[j], tot) : wr[j], scale) :
			    __fdiv_rn(wr[j], tot);
			if (es != NULL && id[j] >= 0)
				wr[j] = __fmul_rn(wr[j], es[id[j]]);
		}
}
