/*
 * matvec_q8tc: k_mv8's products by int8 tensor cores, with k_mv8's bits
 * (included by cuda/matvec_q8.cu after k_mv8; GPU_MV8_TC picks it).
 *
 * What k_mv8 computes, for Q8_0, Q4_0 and Q5_0 two lanes a block
 * (mv8_half) and NVFP4 (mv8_nv): a weight row's values fall into 16-value
 * units u (Q8_0, Q4_0, Q5_0: half u % 2 of block u / 2; NVFP4: sub-block
 * u), and lane c of the row's warp sums units c, c + 32, c + 64, ... in
 * that order, one float step a unit on the unit's exact integer dot S
 * (started at MV8_MAGIC, made a float by mv8_i2f):
 *   Q8_0, Q4_0, Q5_0:  acc = fma(i2f(S), dw * dx, acc)
 *   NVFP4:             acc = fma(dx, ws * i2f(S), acc)
 * (dw the block's fp16 scale, ws the sub-block's ue4m3 / 2, dx the scale
 * of x's 32-block), acc from 0; then mv8_store's butterfly over the 32
 * lanes (v += v of lane ^ 16, 8, 4, 2, 1; lane 0's) and the per-tensor
 * scale.  Here a lane of k_mv8 is a chain c = 0..31 of each (weight row,
 * input row), and the kernel keeps every chain's steps in that order:
 * only S comes from elsewhere, one mma.sync m16n8k16 .s32.s8.s8.s32 per
 * unit for 16 weight rows x 8 input rows, started at MV8_MAGIC (an
 * integer sum is exact in any order: the same S).  Q4_0's and Q5_0's
 * fragments are decoded by mv8_q45 (k_mv8's mv8_hw takes the values
 * sixteenfold or eightfold and its sums back to these: the same S).
 *
 * A block of 8 warps takes 16 weight rows (one m16 tile) and all m input
 * rows (NT tiles of 8, m <= 32), in chunks of 512 values: chunk k holds
 * unit 32 k + c of every chain c.  Warp w takes chains 2 w, 2 w + 1
 * (block w of the chunk, its two halves: one dw * dx for both) and
 * 2 w + 16, 2 w + 17 (block w + 8), for all 16 x NT * 8 (row, input)
 * pairs: 16 NT accumulators a lane, in registers through the whole row.
 * Lane (g = lane / 4, tg = lane % 4) holds, per PTX's m16n8k16 .s8
 * fragments, A words of rows g and g + 8 at values 4 tg .. 4 tg + 3 of
 * the unit, the B word of input 8 nt + g at the same values, and C of
 * rows g, g + 8 x inputs 8 nt + 2 tg, + 1.  The chunks come through a
 * ring of MVT_NS shared-memory stages by cp.async (the weight rows'
 * bytes as they are, x's int8 values and scales), MVT_NS - 1 chunks in
 * flight while one is multiplied, one barrier a chunk.  At the end each
 * chain's sum goes to shared memory and one thread per (row, input) adds
 * the 32 in the butterfly's pairs: k_mv8's bits for every row, whatever
 * m and NT (the columns of an mma are independent).
 *
 * Rows: Q8_0, Q4_0, Q5_0 2-byte aligned (as k_mv8 reads them:
 * halfwords), NVFP4 4-byte aligned (k_mv8's word loads); mvt_launch
 * refuses less.  With every row 16-byte aligned (the weight's
 * start and its row bytes) the chunks are copied by 16 bytes, else by
 * aligned 4-byte words from the one that holds a chunk's first byte
 * (2 bytes before it for a row 2 mod 4, as k_mv8's first word),
 * the last word cut to the chunk's end (cp.async's source size).
 */

enum {
	MVT_R = 16,		/* weight rows a block (the mma's m) */
	MVT_K = 512,		/* values a chunk: one unit of each of the 32 chains */
	MVT_NS = 3,		/* stages in the ring */
	MVT_WQ = 560,		/* Q8_0: a row's slot in a stage: 16 blocks (544) + 2 before + slack;
				 * 140 words: rows g 12 banks apart, no conflicts */
	MVT_W4 = 304,		/* Q4_0: 16 blocks (288) + 2 + slack; 76 words (12 banks) */
	MVT_W5 = 368,		/* Q5_0: 16 blocks (352) + 2 + slack; 92 words (28 banks) */
	MVT_WN = 304,		/* NVFP4: codes (256) then scales (32) + 16 (76 words) */
	MVT_XS = 528,		/* x: an input row's 512 bytes + 16 (132 words) */
	MVT_DS = 17,		/* x's scales: 16 a chunk + 1 (floats) */
	MVT_THREADS = 256,
};

/* A stage's bytes (weights, x, x's scales) and the block's shared memory
 * (the ring; after the loop the 32 chains' sums, [c][row][MP + 1]). */
template <int T, int NT>
struct mvt_dim {
	enum {
		MP = 8 * NT,
		WST = T == Q8_T_Q8_0 ? MVT_WQ : T == Q8_T_Q4_0 ? MVT_W4 : T == Q8_T_Q5_0 ? MVT_W5 :
		    MVT_WN,
		OX = MVT_R * WST,
		OD = OX + MP * MVT_XS,
		STAGE = OD + MP * MVT_DS * 4,
		RED = 32 * MVT_R * (MP + 1) * 4,
		SMEM = MVT_NS * STAGE > RED ? MVT_NS * STAGE : RED,
	};
};

/* The weight of block blockIdx.x (S.blk in tiles of MVT_R rows) and its
 * first row. */
__device__ __forceinline__ struct mv8_row
mvt_pick(const struct mv8_set &S)
{
	unsigned b0;
	struct mv8_row R = mv8_weight(S, &b0);

	R.r = (int64_t)(blockIdx.x - b0) * MVT_R;
	return R;
}

/*
 * Start copying chunk k of weight rows r0.. (those below rows) and of the
 * m input rows into stage st.  Q8_0, Q4_0, Q5_0 (blocks of BS bytes): a
 * row's BS * nbk bytes from 16 BS k into its slot (16-byte mode: at 0;
 * else from the aligned word holding the first byte, which lands at slot
 * byte o = 0 or 2); NVFP4: its 8 *
 * nsk code bytes from 256 k to slot byte 0 and its nsk scale bytes from 8
 * nsub + 32 k to slot byte 256.  x: 32 * nbk bytes of each input row,
 * its nbk scales.  Nothing past the chunk is read; what it leaves in a
 * stage (past the chunk, input rows >= m, weight rows >= rows) feeds
 * only sums that are never stored.
 */
template <int T, int NT>
__device__ __forceinline__ void
mvt_copy(uint8_t *st, const uint8_t *__restrict__ W, size_t rb, int64_t r0, int64_t rows,
    int nb, int a16, const int8_t *__restrict__ q, const float *__restrict__ dx, int m, int k)
{
	typedef mvt_dim<T, NT> D;
	int t = threadIdx.x, nbk = min(16, nb - 16 * k);
	int nr = (int)min((int64_t)MVT_R, rows - r0);

	if constexpr (mv8_halves(T)) {
		enum { BS = mv8_bs<T>::v, NW = 4 * BS + 1 };
		int len = BS * nbk;
		size_t ck = (size_t)BS * 16 * k;	/* the chunk's first byte in a row */
		if (a16) {	/* BS pieces a row */
			for (int it = t; it < nr * BS; it += MVT_THREADS) {
				int rr = it / BS, i = it % BS, n = min(16, len - 16 * i);
				const uint8_t *src = W + (size_t)(r0 + rr) * rb + ck;
				if (n > 0)
					gpu_cp16(st + rr * D::WST + 16 * i, src + 16 * i, n);
			}
		} else {	/* NW words a row at most: 2 + 16 BS + 2 bytes */
			for (int it = t; it < nr * NW; it += MVT_THREADS) {
				int rr = it / NW, i = it % NW;
				const uint8_t *src = W + (size_t)(r0 + rr) * rb + ck;
				int o = (int)((uintptr_t)src & 3), n = min(4, o + len - 4 * i);
				if (n > 0)
					gpu_cp4(st + rr * D::WST + 4 * i, src - o + 4 * i, n);
			}
		}
	} else {
		int nsub = 2 * nb, nsk = 2 * nbk;
		if (a16) {	/* 16 pieces of codes, 2 of scales a row */
			for (int it = t; it < nr * 18; it += MVT_THREADS) {
				int rr = it / 18, i = it % 18;
				const uint8_t *rp = W + (size_t)(r0 + rr) * rb;
				uint8_t *d = st + rr * D::WST;
				if (i < 16 && 16 * i < 8 * nsk)
					gpu_cp16(d + 16 * i, rp + (size_t)256 * k + 16 * i, 16);
				else if (i >= 16 && 16 * (i - 16) < nsk)
					gpu_cp16(d + 256 + 16 * (i - 16), rp + (size_t)8 * nsub + 32 * k +
					    16 * (i - 16), min(16, nsk - 16 * (i - 16)));
			}
		} else {	/* 64 words of codes, 8 of scales a row */
			for (int it = t; it < nr * 72; it += MVT_THREADS) {
				int rr = it / 72, i = it % 72;
				const uint8_t *rp = W + (size_t)(r0 + rr) * rb;
				uint8_t *d = st + rr * D::WST;
				if (i < 64 && 4 * i < 8 * nsk)
					gpu_cp4(d + 4 * i, rp + (size_t)256 * k + 4 * i, 4);
				else if (i >= 64 && 4 * (i - 64) < nsk)
					gpu_cp4(d + 256 + 4 * (i - 64), rp + (size_t)8 * nsub + 32 * k +
					    4 * (i - 64), 4);
			}
		}
	}
	for (int it = t; it < m * 32; it += MVT_THREADS) {	/* x: 2 nbk pieces a row */
		int j = it >> 5, i = it & 31;
		if (i < 2 * nbk)
			gpu_cp16(st + D::OX + j * MVT_XS + 16 * i,
			    q + ((size_t)j * nb + 16 * k) * 32 + 16 * i, 16);
	}
	for (int it = t; it < m * 16; it += MVT_THREADS) {	/* x's scales */
		int j = it >> 4, i = it & 15;
		if (i < nbk)
			gpu_cp4(st + D::OD + (j * MVT_DS + i) * 4, dx + (size_t)j * nb + 16 * k + i, 4);
	}
}

/* c = MV8_MAGIC + the 16 x 8 int8 product of a (rows g, g + 8) and b
 * (input g) at one unit: mma.sync m16n8k16 .s32.s8.s8.s32. */
__device__ __forceinline__ void
mvt_mma(const uint32_t *a, uint32_t b, int *c)
{
	asm("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 "
	    "{%0,%1,%2,%3}, {%4,%5}, {%6}, {%7,%7,%7,%7};"
	    : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
	    : "r"(a[0]), "r"(a[1]), "r"(b), "r"((int)MV8_MAGIC));
}

/* 4 bytes at a 2-byte aligned shared address. */
__device__ __forceinline__ uint32_t
mvt_ld2x2(const uint8_t *p)
{
	const uint16_t *h = (const uint16_t *)p;

	return (uint32_t)h[0] | (uint32_t)h[1] << 16;
}

/*
 * Warp w's steps of chunk k (stage st): blocks p = w and w + 8 of the
 * chunk (those below nb), units 2 p + h, h = 0, 1: chains 2 p + h of
 * rows g, g + 8 and inputs 8 nt + 2 tg (+ 1), acc[2 pi + h][nt][e] with
 * e as C's registers (rows g, g, g + 8, g + 8; inputs 2 tg, 2 tg + 1).
 * og, og8: where rows g and g + 8 start in their slots (the halves'
 * types).  Only the tiles nt < ntl (k_mv8t: NT; k_moe_mv8t: those of its
 * tile's rows).
 */
template <int T, int NT>
__device__ __forceinline__ void
mvt_step(const uint8_t *st, int nb, int k, int og, int og8, float (*acc)[NT][4], int ntl)
{
	typedef mvt_dim<T, NT> D;
	int lane = threadIdx.x & 31, w = threadIdx.x >> 5, g = lane >> 2, tg = lane & 3;
	const uint8_t *w0 = st + g * D::WST, *w1 = st + (g + 8) * D::WST;
	const float *ds = (const float *)(st + D::OD);

#pragma unroll
	for (int pi = 0; pi < 2; pi++) {
		int p = w + 8 * pi;
		if (16 * k + p >= nb)	/* (the warp's blocks past the row's end) */
			break;
		uint32_t a[2][2];
		float f0[2], f1[2], n0[2], n1[2];	/* dw in f[0]; NVFP4: ws, -MAGIC's * ws */
		if constexpr (mv8_halves(T)) {
			enum { BS = mv8_bs<T>::v };
			const uint8_t *b0 = w0 + og + BS * p, *b1 = w1 + og8 + BS * p;
			f0[0] = __half2float(__ushort_as_half(*(const unsigned short *)b0));
			f1[0] = __half2float(__ushort_as_half(*(const unsigned short *)b1));
			if (T == Q8_T_Q8_0) {
#pragma unroll
				for (int h = 0; h < 2; h++) {
					a[h][0] = mvt_ld2x2(b0 + 2 + 16 * h + 4 * tg);
					a[h][1] = mvt_ld2x2(b1 + 2 + 16 * h + 4 * tg);
				}
			} else {	/* values 16 h + 4 tg ..: nibble h of qs[4 tg ..] */
				int oq = T == Q8_T_Q5_0 ? 6 : 2;
				uint32_t v0 = mvt_ld2x2(b0 + oq + 4 * tg);
				uint32_t v1 = mvt_ld2x2(b1 + oq + 4 * tg);
				uint32_t h0 = T == Q8_T_Q5_0 ? mvt_ld2x2(b0 + 2) >> 4 * tg : 0u;
				uint32_t h1 = T == Q8_T_Q5_0 ? mvt_ld2x2(b1 + 2) >> 4 * tg : 0u;
#pragma unroll
				for (int h = 0; h < 2; h++) {
					a[h][0] = mv8_q45<T>(v0, h, h0 >> 16 * h);
					a[h][1] = mv8_q45<T>(v1, h, h1 >> 16 * h);
				}
			}
		} else {
#pragma unroll
			for (int h = 0; h < 2; h++) {
				int e = 2 * p + h, lo, hi;
				/* values 4 tg .. 4 tg + 3: half tg % 2 of code word tg / 2 */
				uint32_t c0 = *(const uint32_t *)(w0 + 8 * e + 4 * (tg >> 1));
				uint32_t c1 = *(const uint32_t *)(w1 + 8 * e + 4 * (tg >> 1));
				gpu_fp4x8i(c0 >> 16 * (tg & 1), &lo, &hi);
				a[h][0] = (uint32_t)lo;
				gpu_fp4x8i(c1 >> 16 * (tg & 1), &lo, &hi);
				a[h][1] = (uint32_t)lo;
				/* mv8_ue4m3c2f's values */
				f0[h] = __fmul_rn(__uint_as_float(((uint32_t)w0[256 + e] & 0x7Fu) << 20),
				    0x1p119f);
				f1[h] = __fmul_rn(__uint_as_float(((uint32_t)w1[256 + e] & 0x7Fu) << 20),
				    0x1p119f);
				n0[h] = __fmul_rn(f0[h], -12582912.0f);	/* exact: 4 x 2 significant bits */
				n1[h] = __fmul_rn(f1[h], -12582912.0f);
			}
		}
#pragma unroll
		for (int nt = 0; nt < NT; nt++) {
			if (nt >= ntl)
				break;
			float d0 = ds[(8 * nt + 2 * tg) * MVT_DS + p];
			float d1 = ds[(8 * nt + 2 * tg + 1) * MVT_DS + p];
			const uint8_t *xb = st + D::OX + (8 * nt + g) * MVT_XS + 32 * p + 4 * tg;
			float pr[4];
			if (mv8_halves(T))	/* dw * dx once for the block's two halves */
				pr[0] = __fmul_rn(f0[0], d0), pr[1] = __fmul_rn(f0[0], d1),
				pr[2] = __fmul_rn(f1[0], d0), pr[3] = __fmul_rn(f1[0], d1);
#pragma unroll
			for (int h = 0; h < 2; h++) {
				int c[4];
				float *ac = acc[2 * pi + h][nt];
				mvt_mma(a[h], *(const uint32_t *)(xb + 16 * h), c);
				if (mv8_halves(T)) {
#pragma unroll
					for (int e = 0; e < 4; e++)
						ac[e] = __fmaf_rn(mv8_i2f(c[e]), pr[e], ac[e]);
				} else {
					/* ws * i2f(S) as one fma: ws * (MAGIC's value + S) - that
					 * value * ws is ws * S exactly, a float (k_mv8's product) */
					ac[0] = __fmaf_rn(d0, __fmaf_rn(__int_as_float(c[0]), f0[h], n0[h]), ac[0]);
					ac[1] = __fmaf_rn(d1, __fmaf_rn(__int_as_float(c[1]), f0[h], n0[h]), ac[1]);
					ac[2] = __fmaf_rn(d0, __fmaf_rn(__int_as_float(c[2]), f1[h], n1[h]), ac[2]);
					ac[3] = __fmaf_rn(d1, __fmaf_rn(__int_as_float(c[3]), f1[h], n1[h]), ac[3]);
				}
			}
		}
	}
}

/* One level of mv8_store's butterfly on the sums of chains 0 .. 2 O - 1:
 * v[l] += v[l + O] (lane l's v += lane l ^ O's). */
template <int O>
__device__ __forceinline__ void
mvt_fold(float *v)
{
#pragma unroll
	for (int l = 0; l < O; l++)
		v[l] = __fadd_rn(v[l], v[l + O]);
}

/*
 * The chains' sums to shared memory red[c][row][MP + 1], then y[j][r] for
 * the block's rows below rows and j < m (y[slot[j]][r] when slot is not
 * NULL): the 32 chains added in mv8_store's pairs (v[l] += v[l + o], o =
 * 16, 8, 4, 2, 1), times the per-tensor scale.  After the ring's last
 * reads (the caller's barrier).
 */
template <int T, int NT>
__device__ __forceinline__ void
mvt_store(float *red, float (*acc)[NT][4], const struct mv8_row &R, int m,
    const int32_t *__restrict__ slot)
{
	enum { MP = 8 * NT, LD = MP + 1 };
	int lane = threadIdx.x & 31, w = threadIdx.x >> 5, g = lane >> 2, tg = lane & 3;

#pragma unroll
	for (int u = 0; u < 4; u++)	/* chain 2 w + 16 (u / 2) + u % 2 */
#pragma unroll
		for (int nt = 0; nt < NT; nt++)
#pragma unroll
			for (int e = 0; e < 4; e++) {
				int c = 2 * w + 16 * (u >> 1) + (u & 1);
				red[(c * MVT_R + g + 8 * (e >> 1)) * LD + 8 * nt + 2 * tg + (e & 1)] =
				    acc[u][nt][e];
			}
	__syncthreads();
	for (int it = threadIdx.x; it < MVT_R * m; it += MVT_THREADS) {
		int rr = it % MVT_R, j = it / MVT_R;
		float v[32];
		if (R.r + rr >= R.rows)
			continue;
#pragma unroll
		for (int c = 0; c < 32; c++)
			v[c] = red[(c * MVT_R + rr) * LD + j];
		mvt_fold<16>(v), mvt_fold<8>(v), mvt_fold<4>(v), mvt_fold<2>(v), mvt_fold<1>(v);
		R.y[(size_t)(slot != NULL ? slot[j] : j) * R.rows + R.r + rr] = R.scale != NULL ?
		    __fmul_rn(v[0], *R.scale) : v[0];
	}
}

/*
 * The kernel: one block per 16 rows of a weight of the set S (S.blk in
 * such tiles), m <= 8 NT input rows (q, dx: k_q8x's), nb 32-blocks a
 * row of rb bytes; a16: every row 16-byte aligned.
 */
template <int T, int NT>
__global__ void __launch_bounds__(MVT_THREADS, 2)
k_mv8t(const struct mv8_set S, int nb, size_t rb, const int8_t *__restrict__ q,
    const float *__restrict__ dx, int m, int a16)
{
	typedef mvt_dim<T, NT> D;
	extern __shared__ int4 mvt_sm[];
	uint8_t *sm = (uint8_t *)mvt_sm;
	const struct mv8_row R = mvt_pick(S);
	int g = (threadIdx.x & 31) >> 2, nch = (nb + 15) / 16, og = 0, og8 = 0;
	float acc[4][NT][4];

#pragma unroll
	for (int u = 0; u < 4; u++)
#pragma unroll
		for (int nt = 0; nt < NT; nt++)
#pragma unroll
			for (int e = 0; e < 4; e++)
				acc[u][nt][e] = 0.0f;
	if (mv8_halves(T) && !a16) {	/* a row's chunks start where its row does, mod 4 */
		og = (int)((uintptr_t)(R.W + (size_t)(R.r + g) * rb) & 3);
		og8 = (int)((uintptr_t)(R.W + (size_t)(R.r + g + 8) * rb) & 3);
	}
	pdl_enter();
#pragma unroll
	for (int s = 0; s < MVT_NS - 1; s++) {
		if (s < nch)
			mvt_copy<T, NT>(sm + s * D::STAGE, R.W, rb, R.r, R.rows, nb, a16, q, dx, m, s);
		asm volatile("cp.async.commit_group;");
	}
	for (int k = 0; k < nch; k++) {
		asm volatile("cp.async.wait_group %0;" : : "n"(MVT_NS - 2) : "memory");
		__syncthreads();	/* chunk k landed; chunk k - 1's stage read by all */
		if (k + MVT_NS - 1 < nch)
			mvt_copy<T, NT>(sm + (k + MVT_NS - 1) % MVT_NS * D::STAGE, R.W, rb, R.r, R.rows,
			    nb, a16, q, dx, m, k + MVT_NS - 1);
		asm volatile("cp.async.commit_group;");
		mvt_step<T, NT>(sm + k % MVT_NS * D::STAGE, nb, k, og, og8, acc, NT);
	}
	asm volatile("cp.async.wait_all;" : : : "memory");
	__syncthreads();	/* the ring's last reads before red overwrites it */
	mvt_store<T, NT>((float *)sm, acc, R, m, (const int32_t *)NULL);
}

/*
 * The experts grouped (gpu_impl.cuh's moe_group) by tensor cores: block
 * (x, y) takes weight rows 16 x .. of expert e against up to MVT_MAX_M of
 * e's gathered input rows, those of tile t = t0 + y and, when t is the
 * first of a pair (its index in the bucket even) and its bucket goes on
 * in tile t + 1, of that tile too (their rows follow on: a bucket's tiles
 * but its last hold GPU_MOE_MT), each row's result into y[slot][rows] as
 * k_moe_mv8g writes it.  k_mv8t's steps at NT = 4 with the column tiles
 * past the rows' skipped (ntl): row j's chains are the same operations
 * whatever the count n (the columns of an mma are independent, every float
 * step its own), so k_mv8's bits, which k_moe_mv8 gives a slot alone.
 * The tiles are shared with k_moe_mv8g by tc (the least count of a pair
 * this kernel takes, 1 ..  GPU_MOE_MT): a pair whose first tile holds at
 * least tc rows (every pair of two tiles) is this kernel's, a lone tile of
 * fewer k_moe_mv8g's; the second tile of a pair is taken by its first's
 * block.  An empty tile writes nothing; bucket n_exp (an id outside [0,
 * n_exp)) NaN rows.  Rows as mvt_launch takes them (a16: the experts'
 * rows 16-byte aligned); x as moe_gather wrote it (q, dx: row i the slot
 * perm[i]'s).  Shared memory: the stages of the chunks there are (up to
 * MVT_NS), or the sums' red if more (mvt_moe_smem).
 */
template <int T>
__global__ void __launch_bounds__(MVT_THREADS, 2)
k_moe_mv8t(const uint8_t *__restrict__ W, size_t ebytes, size_t rb, int nb, int64_t rows,
    int n_exp, const int4 *__restrict__ tile, int t0, int nt, const int32_t *__restrict__ perm,
    const int8_t *__restrict__ q, const float *__restrict__ dx, float *y,
    const float *scale, int a16, int tc)
{
	typedef mvt_dim<T, 4> D;
	extern __shared__ int4 mvt_sm[];
	uint8_t *sm = (uint8_t *)mvt_sm;
	int t = t0 + (int)blockIdx.y, g = (threadIdx.x & 31) >> 2, nch = (nb + 15) / 16;
	int64_t r0 = (int64_t)blockIdx.x * MVT_R;
	float acc[4][4][4];

	pdl_enter();	/* the tiles and the gathered rows are earlier kernels' */
	int4 tl = tile[t];
	int e = tl.x, f = tl.y, n = tl.z;
	if (n == 0 || (tl.w & 1) || n < tc)	/* empty; a pair's second; k_moe_mv8g's */
		return;
	if (n == GPU_MOE_MT && t + 1 < nt) {
		int4 t2 = tile[t + 1];
		if (t2.z > 0 && t2.x == e)
			n += t2.z;
	}
	const int32_t *slot = perm + f;
	if (e < 0 || e >= n_exp) {
		for (int it = threadIdx.x; it < MVT_R * n; it += MVT_THREADS)
			if (r0 + it % MVT_R < rows)
				y[(size_t)slot[it / MVT_R] * rows + r0 + it % MVT_R] =
				    __int_as_float(0x7FC00000);
		return;
	}
	const struct mv8_row R = { W + (size_t)e * ebytes, y, scale, rows, r0 };
	const int8_t *qf = q + (size_t)f * nb * 32;
	const float *df = dx + (size_t)f * nb;
	int og = 0, og8 = 0, ntl = (n + 7) / 8;
#pragma unroll
	for (int u = 0; u < 4; u++)
#pragma unroll
		for (int c = 0; c < 4; c++)
#pragma unroll
			for (int i = 0; i < 4; i++)
				acc[u][c][i] = 0.0f;
	if (mv8_halves(T) && !a16) {	/* a row's chunks start where its row does, mod 4 */
		og = (int)((uintptr_t)(R.W + (size_t)(r0 + g) * rb) & 3);
		og8 = (int)((uintptr_t)(R.W + (size_t)(r0 + g + 8) * rb) & 3);
	}
#pragma unroll
	for (int s = 0; s < MVT_NS - 1; s++) {
		if (s < nch)
			mvt_copy<T, 4>(sm + s * D::STAGE, R.W, rb, r0, rows, nb, a16, qf, df, n, s);
		asm volatile("cp.async.commit_group;");
	}
	for (int k = 0; k < nch; k++) {
		asm volatile("cp.async.wait_group %0;" : : "n"(MVT_NS - 2) : "memory");
		__syncthreads();	/* chunk k landed; chunk k - 1's stage read by all */
		if (k + MVT_NS - 1 < nch)
			mvt_copy<T, 4>(sm + (k + MVT_NS - 1) % MVT_NS * D::STAGE, R.W, rb, r0, rows,
			    nb, a16, qf, df, n, k + MVT_NS - 1);
		asm volatile("cp.async.commit_group;");
		mvt_step<T, 4>(sm + k % MVT_NS * D::STAGE, nb, k, og, og8, acc, ntl);
	}
	asm volatile("cp.async.wait_all;" : : : "memory");
	__syncthreads();	/* the ring's last reads before red overwrites it */
	mvt_store<T, 4>((float *)sm, acc, R, n, slot);
}

/* k_moe_mv8t's shared memory for rows of nb 32-blocks: the stages of its
 * chunks (at most MVT_NS) or red. */
template <int T>
static int
mvt_moe_smem(int nb)
{
	typedef mvt_dim<T, 4> D;
	int nch = (nb + 15) / 16, st = (nch < MVT_NS ? nch : MVT_NS) * D::STAGE;

	return st > D::RED ? st : D::RED;
}

template <int T, int NT>
static int
mvt_run(struct gpu *g, const struct mv8_set &S, unsigned grid, int nb, size_t rb,
    const int8_t *q, const float *dx, int m, int a16)
{
	int sh = mvt_dim<T, NT>::SMEM;

	if (gpu_smem(g, k_mv8t<T, NT>, sh, "matvec_q8 tc") != 0)
		return -1;
	gpu_launch(g, k_mv8t<T, NT>, grid, MVT_THREADS, (size_t)sh, S, nb, rb, q, dx, m, a16);
	GPU_LAUNCHED(g, "matvec_q8 tc");
	return 0;
}

/*
 * k_mv8t for the set S (built by mv8_products in tiles of 8 rows: here
 * re-tiled by MVT_R) and m <= MVT_MAX_M input rows.
 */
#define MVT_MAX_M 32

template <int T>
static int
mvt_launch(struct gpu *g, const struct mv8_set &S, int nb, size_t rb, const int8_t *q,
    const float *dx, int m)
{
	struct mv8_set St = S;
	uintptr_t or_ = rb;
	int a16;

	for (int i = 0; i < S.nw; i++) {
		or_ |= (uintptr_t)S.W[i];
		St.blk[i + 1] = St.blk[i] + (unsigned)((S.rows[i] + MVT_R - 1) / MVT_R);
	}
	if (m < 1 || m > MVT_MAX_M)
		return gpu_fail(g, "matvec_q8 tc: %d input rows (1..%d)", m, MVT_MAX_M);
	if ((or_ & mvt_amask(T)) != 0)
		return gpu_fail(g, "matvec_q8 tc: rows not %d-byte aligned", mvt_amask(T) + 1);
	a16 = (or_ & 15) == 0;
	switch ((m + 7) / 8) {
	case 1: return mvt_run<T, 1>(g, St, St.blk[S.nw], nb, rb, q, dx, m, a16);
	case 2: return mvt_run<T, 2>(g, St, St.blk[S.nw], nb, rb, q, dx, m, a16);
	case 3: return mvt_run<T, 3>(g, St, St.blk[S.nw], nb, rb, q, dx, m, a16);
	default: return mvt_run<T, 4>(g, St, St.blk[S.nw], nb, rb, q, dx, m, a16);
	}
}
