/*
 * backend_cuda: the op table of lib/backend.h on one CUDA device, over
 * cuda/gpu.h's kernels plus the small ones the table needs in its own files
 * (RoPE in both modes with strides and qk_norm_rope: backend_cuda_attn.cu;
 * conv1d with snapshots and the whole gated delta rule step with its gates
 * and norms: backend_cuda_gdn.cu, gdn_step.cuh; activations, fill: here).
 *
 * Memory is device memory (backend_host() == 0).  Weights are copied to
 * the device once at weight_init.  Every op is queued on the gpu's
 * stream; backend_read waits for it.  Row r of every op is computed by
 * the same code whether it runs alone or with others: Q8_0 and NVFP4
 * products run on int8 activations as the CPU backend's do
 * (gpu_matvec_q8, any m), K-quants (Q4_K, Q5_K, Q6_K) too for m <=
 * the gpu's step rows, other types through gpu_matvec for m <= the step
 * rows (batch-invariant) and cuBLAS beyond (prefill, the K-quants' too),
 * attention in chunks of rows that each see their own positions (flash
 * attention for a prompt of more than the step rows), the recurrent ops
 * row after row.  The step rows (gpu_tune_step_rows) are 32 on the
 * backend (GPU_STEP_ROWS_MAX; backend_rows_set: 16, GPU_MATVEC_MAX_ROWS,
 * the gpu's own default); either way a row of a step up to them runs the
 * decode kernels, 16 rows a launch (Q8_0 and NVFP4: up to 32 by k_mv8t),
 * with the bits it has alone.
 *
 * The fused forms (add_rmsnorm_matmul, ffn, rmsnorm_gated_matmul,
 * mul_sigmoid_matmul) run the op before a product in the kernel that
 * quantizes the product's input (gpu_rmsnorm_matvec_q8_ex,
 * gpu_matvec_q8_pre) when every weight takes the int8 path, with the
 * arithmetic of the plain ops' kernels (the same bits); otherwise as the
 * plain ops.  A decode step of the 9B shape launches about 160 kernels
 * fewer so.
 *
 * Recorded steps (backend_graph_*) are CUDA graphs made by stream
 * capture, one per key (CUDA_GRAPHS kept, least recently used dropped),
 * stale once gpu_generation moves (memory freed, scratch moved).  While
 * recording, nothing may allocate, free, synchronize or upload from host
 * memory: buf_get, gpu_scratch and rope_table refuse, the step fails,
 * and the caller runs it again without graphs.  Whether graphs are on,
 * why they went off and how many were recorded and replayed live in
 * be.graph (backend_graph_set, backend_graph_stats).
 *
 * This file holds the table and what every op leans on; the ops of each
 * family live in their own file (backend_cuda.cuh lists them).
 */
#include "backend_cuda.cuh"

/* The gpu's reason becomes the backend's; always -1. */
int
gfail(struct backend *be, const char *op)
{
	return util_err(be->err, "%s: %s", op, gpu_errmsg(CB(be)->g));
}

void *
buf_get(struct backend *be, struct cuda_buf *b, size_t n)
{
	if (n <= b->n)
		return b->p;
	if (gpu_capturing(CB(be)->g)) {	/* a recorded step allocates nothing */
		util_err(be->err, "scratch of %zu bytes while recording a graph (%zu held)", n,
		    b->n);
		return NULL;
	}
	gpu_free(CB(be)->g, b->p);
	b->n = 0;
	if ((b->p = gpu_alloc(CB(be)->g, n)) == NULL) {
		util_err(be->err, "scratch of %zu bytes: %s", n, gpu_errmsg(CB(be)->g));
		return NULL;
	}
	b->n = n;
	return b->p;
}

/* Rows of n floats from a stride of lds to one of ldd (queued). */
int
copy_rows(struct backend *be, float *d, size_t ldd, const float *s, size_t lds,
    size_t n, size_t rows)
{
	cudaError_t e = cudaMemcpy2DAsync(d, ldd * 4, s, lds * 4, n * 4, rows,
	    cudaMemcpyDeviceToDevice, CB(be)->g->stream);

	if (e != cudaSuccess)
		return util_err(be->err, "copy: %s", cudaGetErrorString(e));
	return 0;
}

__global__ void
k_fill(float *d, float v, size_t n)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;

	pdl_enter();
	if (i < n)
		d[i] = v;
}

__global__ void
k_act(float *x, size_t n, int act)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;

	pdl_enter();
	if (i >= n)
		return;
	float v = x[i];
	x[i] = act == BACKEND_ACT_SILU ? d_silu(v) : act == BACKEND_ACT_SIGMOID ?
	    d_sigmoid(v) : d_softplus(v);
}

/* --- memory ----------------------------------------------------------- */

static void
cu_close(struct backend *be)
{
	struct backend_cuda *c = CB(be);

	if (c->rec != NULL)
		gpu_graph_abort(c->g);
	for (int i = 0; i < CUDA_GRAPHS; i++)
		gpu_graph_free(c->graph[i].gr);
	for (int i = 0; i < c->n_rope; i++)
		gpu_free(c->g, c->rope[i].d);
	gpu_free(c->g, c->ids.p);
	gpu_free(c->g, c->t0.p);
	gpu_free(c->g, c->t1.p);
	gpu_free(c->g, c->gdn.p);
	gpu_free(c->g, c->topk.p);
	gpu_free(c->g, c->draw.p);
	gpu_free(c->g, c->pen.p);
	gpu_free(c->g, c->mask.p);
	gpu_free(c->g, c->pad.p);
	gpu_free(c->g, c->moe.p);
	if (c->h_idx != NULL)
		cudaFreeHost(c->h_idx);
	gpu_close(c->g);
	free(c);
}

static float *
cu_alloc(struct backend *be, size_t n)
{
	return (float *)gpu_alloc(CB(be)->g, n * sizeof(float));
}

static void
cu_mfree(struct backend *be, float *p)
{
	gpu_free(CB(be)->g, p);
}

static float *
cu_host_alloc(struct backend *be, size_t n)
{
	float *p = (float *)gpu_host_alloc(CB(be)->g, n * sizeof(float));

	if (p == NULL)
		gfail(be, "host alloc");
	return p;
}

static int
cu_mem_info(struct backend *be, size_t *free_b, size_t *total)
{
	return gpu_mem_info(CB(be)->g, free_b, total) ? gfail(be, "memory info") : 0;
}

static void
cu_host_free(struct backend *be, float *p)
{
	gpu_host_free(CB(be)->g, p);
}

static int
cu_write(struct backend *be, float *dst, const float *src, size_t n)
{
	return gpu_upload(CB(be)->g, dst, src, n * 4) ? gfail(be, "write") : 0;
}

static int
cu_read(struct backend *be, float *dst, const float *src, size_t n)
{
	if (gpu_download(CB(be)->g, dst, src, n * 4) || gpu_sync(CB(be)->g))
		return gfail(be, "read");
	return 0;
}

static int
cu_copy(struct backend *be, float *dst, const float *src, size_t n)
{
	return gpu_copy(CB(be)->g, dst, src, n * 4) ? gfail(be, "copy") : 0;
}

int
launched(struct backend *be, const char *op)
{
	cudaError_t e = cudaGetLastError();

	if (e != cudaSuccess)
		return util_err(be->err, "%s: %s", op, cudaGetErrorString(e));
	if (CB(be)->g->prof != NULL && gpu_prof_mark(CB(be)->g, op) != 0)	/* backend_prof */
		return gfail(be, op);
	return 0;
}

static int
cu_fill(struct backend *be, float *dst, float v, size_t n)
{
	gpu_launch(CB(be)->g, k_fill, nblk(n, 256), 256, 0, dst, v, n);
	return launched(be, "fill");
}

static int
cu_sync(struct backend *be)
{
	return gpu_sync(CB(be)->g) ? gfail(be, "sync") : 0;
}

/* Small host arrays (ids, positions, frequencies) to the device, queued. */
void *
put_small(struct backend *be, const void *h, size_t n)
{
	void *d = buf_get(be, &CB(be)->ids, n);

	if (d != NULL && gpu_upload(CB(be)->g, d, h, n) != 0) {
		gfail(be, "upload");
		return NULL;
	}
	return d;
}

/* --- weights ---------------------------------------------------------- */

/* Types the GPU kernels lack but the CPU dequantizes are held as F32. */
static int
cu_supports(const struct backend *be, int type)
{
	return gpu_can_matvec(type) || quant_can_dequantize(type);
}

/* w's host rows dequantized to F32 rows of np floats, zeros after ne0 (malloc'd), or NULL. */
static float *
dequant_host(struct backend *be, const struct backend_weight *w, int64_t np)
{
	float *f = (float *)calloc((size_t)np * w->ne1, sizeof *f);

	if (f == NULL) {
		util_err(be->err, "weight: out of memory");
		return NULL;
	}
	for (int64_t r = 0; r < w->ne1; r++)
		if (quant_dequantize_row(w->type, (const uint8_t *)w->data + r * w->row_size,
		    f + r * np, w->ne0) != 0) {
			util_err(be->err, "weight: type '%s' does not dequantize",
			    quant_name(w->type));
			free(f);
			return NULL;
		}
	return f;
}

void *
upload(struct backend *be, const void *h, size_t n)
{
	struct gpu *g = CB(be)->g;
	void *d = gpu_alloc(g, n);

	if (d == NULL || gpu_upload_weight(g, d, h, n) != 0) {
		util_err(be->err, "weight: %zu bytes: %s", n, gpu_errmsg(g));
		gpu_free(g, d);
		return NULL;
	}
	return d;
}

/*
 * The weight's bytes go to the device as they are when a GPU product
 * takes the type (NVFP4 then into the GPU layout, gpu_nvfp4_pack); a type
 * without gpu_matvec / gpu_get_rows also gets an F32 copy (for embedding
 * lookups, and for products when no kernel takes the type at all: then the
 * weight becomes F32).  Rows whose length is not a multiple of 32 (F32,
 * F16 and BF16 ones: the quantized types' blocks are whole) become F32
 * rows of ne0p, the length rounded up, zeros after ne0: the products read
 * their input zero-padded likewise (product, input_rows), so the padding
 * adds exact zeros, and the lookups copy ne0 of each row.
 */
static int cu_weight_init(struct backend *, struct backend_weight *);

/*
 * backend_weight_rows: the rows uploaded in place where the device holds
 * the weight's own bytes (NVFP4's then packed to the GPU layout, row by
 * row as gpu_nvfp4_pack does), a bf16 mirror of it dropped (made again
 * when a prompt needs it); a weight held as F32 (no GPU product of its
 * type, or rows padded) or with an F32 copy for lookups cannot.
 */
static int
cu_weight_rows(struct backend *be, struct backend_weight *w, int64_t r0, int64_t n,
    const void *src)
{
	struct cuda_weight *cw = (struct cuda_weight *)w->priv;
	struct gpu *g = CB(be)->g;
	char *d;

	if (cw != NULL && w->type == GPU_T_Q6K_PACKED) {	/* the rows uploaded, then packed in */
		void *t = gpu_alloc(g, (size_t)n * w->row_size);
		int64_t nb = w->ne0 / 256;
		int rc = t == NULL || gpu_upload(g, t, src, (size_t)n * w->row_size) != 0 ||
		    gpu_q6k_pack4(g, cw->d, r0 * nb, t, n * nb) != 0 || gpu_sync(g) != 0;
		gpu_mirror_drop(g, cw->d);
		gpu_free(g, t);
		return rc ? gfail(be, "weight rows") : 0;
	}
	if (cw == NULL || w->type != cw->type0 || cw->ne0p != w->ne0 || cw->d_f32 != NULL)
		return util_err(be->err, "weight rows: the device holds this '%s' weight as %s",
		    quant_name(cw != NULL ? cw->type0 : w->type), cw != NULL && cw->d_f32 != NULL ?
		    "its bytes and F32" : quant_name(w->type));
	gpu_mirror_drop(g, cw->d);
	d = (char *)cw->d + (size_t)r0 * w->row_size;
	if (gpu_upload(g, d, src, (size_t)n * w->row_size) != 0 ||
	    (w->type == QUANT_NVFP4 && gpu_nvfp4_pack(g, d, n, w->ne0) != 0))
		return gfail(be, "weight rows");
	return 0;
}

static int
cu_weight_init(struct backend *be, struct backend_weight *w)
{
	struct cuda_weight *cw = (struct cuda_weight *)calloc(1, sizeof *cw);
	int64_t np = (w->ne0 + 31) / 32 * 32;
	int mv = gpu_can_matvec(w->type) && np == w->ne0, q8 = gpu_can_matvec_q8(w->type);
	int packed = 0;
	float *f = NULL;

	if (cw == NULL)
		return util_err(be->err, "weight: out of memory");
	cw->type0 = w->type;
	q8 = q8 && np == w->ne0;
	cw->ne0p = mv || q8 ? w->ne0 : np;
	if (!mv && ((f = dequant_host(be, w, cw->ne0p)) == NULL ||
	    (cw->d_f32 = (float *)upload(be, f, (size_t)cw->ne0p * w->ne1 * 4)) == NULL)) {
		if (f != NULL && !q8 && !gpu_can_matvec(w->type))	/* why so many bytes */
			util_err(be->err, "weight: type '%s' has no GPU product and is held as F32 "
			    "(%zu bytes): %s", quant_name(w->type), (size_t)cw->ne0p * w->ne1 * 4,
			    gpu_errmsg(CB(be)->g));
		goto fail;
	}
	if ((mv || q8) && (cw->d = upload(be, w->data, w->row_size * (size_t)w->ne1)) == NULL)
		goto fail;
	if ((mv || q8) && w->type == QUANT_NVFP4 &&
	    gpu_nvfp4_pack(CB(be)->g, cw->d, w->ne1, w->ne0) != 0) {
		gfail(be, "weight: NVFP4 layout");
		goto fail;
	}
	if ((mv || q8) && w->type == QUANT_Q6_K && be->q6k_pack) {	/* four blocks a group */
		struct gpu *g = CB(be)->g;
		int64_t nblk = w->ne1 * (w->ne0 / 256);
		void *p = gpu_alloc(g, gpu_q6k_pack4_bytes(nblk));
		if (p == NULL || gpu_q6k_pack4(g, p, 0, cw->d, nblk) != 0 || gpu_sync(g) != 0) {
			gfail(be, "weight: Q6_K packed");
			gpu_free(g, p);
			goto fail;
		}
		gpu_free(g, cw->d);
		cw->d = p;
		packed = 1;
	}
	if (w->scale != 1.0f && (cw->d_scale = (float *)upload(be, &w->scale, 4)) == NULL)
		goto fail;
	free(f);
	if (!mv && !q8) {
		w->type = QUANT_F32;
		w->row_size = (size_t)cw->ne0p * 4;
		cw->d = cw->d_f32;
		cw->d_f32 = NULL;
	}
	if (packed)	/* (the gpu_* calls' id for the layout; row_size stays Q6_K's) */
		w->type = GPU_T_Q6K_PACKED;
	w->data = cw->d;
	w->priv = cw;
	return 0;
fail:
	free(f);
	gpu_free(CB(be)->g, cw->d_f32);
	gpu_free(CB(be)->g, cw->d);
	free(cw);
	return -1;
}

static void
cu_weight_release(struct backend *be, struct backend_weight *w)
{
	struct cuda_weight *cw = (struct cuda_weight *)w->priv;

	if (cw != NULL) {
		gpu_free(CB(be)->g, cw->d);
		gpu_free(CB(be)->g, cw->d_f32);
		gpu_free(CB(be)->g, cw->d_scale);
		free(cw);
	}
}

/* cu_embed of ids already on the device (gpu_get_rows embeds a negative id as row 0). */
/* --- embedding, elementwise ops, argmax and sampling ------------------ */

static int
cu_embed_dev(struct backend *be, const struct backend_weight *w, const int32_t *d_ids,
    int m, float *y, int ldy)
{
	struct backend_cuda *c = CB(be);
	const struct cuda_weight *cw = CW(w);
	int64_t np = cw->ne0p;
	float *out = y;

	if ((ldy != w->ne0 || np != w->ne0) &&
	    (out = (float *)buf_get(be, &c->t1, (size_t)m * np * 4)) == NULL)
		return -1;
	if (gpu_get_rows(c->g, cw->d_f32 ? QUANT_F32 : w->type, cw->d_f32 ? cw->d_f32 : w->data,
	    np, d_ids, m, out) != 0)
		return gfail(be, "embed");
	return out == y ? 0 : copy_rows(be, y, ldy, out, np, w->ne0, m);
}

/* backend_embed: the ids to the device, then cu_embed_dev. */
static int
cu_embed(struct backend *be, const struct backend_weight *w, const int32_t *ids,
    int m, float *y, int ldy)
{
	int32_t *d_ids = (int32_t *)put_small(be, ids, (size_t)m * 4);

	return d_ids == NULL ? -1 : cu_embed_dev(be, w, d_ids, m, y, ldy);
}

static int
cu_l2norm(struct backend *be, float *x, int ldx, int rows, int n, float eps)
{
	return gpu_l2norm(CB(be)->g, x, ldx, x, ldx, rows, n, eps) ? gfail(be, "l2norm") : 0;
}

static int
cu_act(struct backend *be, enum backend_act act, float *x, size_t n)
{
	gpu_launch(CB(be)->g, k_act, nblk(n, 256), 256, 0, x, n, (int)act);
	return launched(be, "act");
}

static int
cu_add(struct backend *be, float *y, const float *x, size_t n)
{
	return gpu_add(CB(be)->g, y, x, y, n) ? gfail(be, "add") : 0;
}

static int
cu_argmax(struct backend *be, const float *x, int ldx, int m, int n, int32_t *out)
{
	struct backend_cuda *c = CB(be);
	int32_t *d = (int32_t *)buf_get(be, &c->ids, (size_t)m * 4);

	if (d == NULL)
		return -1;
	if (ldx == n) {
		if (gpu_argmax(c->g, x, m, n, d) != 0)
			return gfail(be, "argmax");
	} else {
		for (int r = 0; r < m; r++)
			if (gpu_argmax(c->g, x + (size_t)r * ldx, 1, n, d + r) != 0)
				return gfail(be, "argmax");
	}
	if (gpu_download(c->g, out, d, (size_t)m * 4) || gpu_sync(c->g))
		return gfail(be, "argmax");
	return 0;
}

/* cu_argmax's picks left on the device, queued (nothing waits). */
static int
cu_argmax_dev(struct backend *be, const float *x, int ldx, int m, int n, int32_t *d_out)
{
	struct backend_cuda *c = CB(be);

	if (ldx == n)
		return gpu_argmax(c->g, x, m, n, d_out) != 0 ? gfail(be, "argmax") : 0;
	for (int r = 0; r < m; r++)
		if (gpu_argmax(c->g, x + (size_t)r * ldx, 1, n, d_out + r) != 0)
			return gfail(be, "argmax");
	return 0;
}

static int
cu_argmax_map(struct backend *be, const float *x, int ldx, int m, int n, const int32_t *d_map,
    int32_t *d_out)
{
	return gpu_argmax_map(CB(be)->g, x, ldx, m, n, d_map, d_out) ? gfail(be, "argmax") : 0;
}

static_assert(GPU_TOPK_MAX == BACKEND_TOPK_MAX, "gpu_topk takes what backend_topk may ask");

static int
cu_topk(struct backend *be, const float *x, int ldx, int m, int n, int k, float temp,
    float *val, int32_t *id)
{
	struct backend_cuda *c = CB(be);
	size_t nk = (size_t)m * k;
	float *d = (float *)buf_get(be, &c->topk, nk * 8 + gpu_topk_scratch(m, k));

	if (d == NULL)
		return -1;
	if (gpu_topk(c->g, x, m, ldx, n, k, temp, d, (int32_t *)(d + nk), d + 2 * nk) != 0 ||
	    gpu_download(c->g, val, d, nk * 4) || gpu_download(c->g, id, d + nk, nk * 4) ||
	    gpu_sync(c->g))
		return gfail(be, "topk");
	return 0;
}

static int
cu_draw(struct backend *be, const float *x, int n, float temp, float top_p, float min_p,
    double u, int32_t *out)
{
	struct backend_cuda *c = CB(be);
	size_t sc = gpu_draw_scratch();
	char *d = (char *)buf_get(be, &c->draw, sc + 8);

	if (d == NULL)
		return -1;
	if (gpu_draw(c->g, x, n, temp, top_p, min_p, u, (int32_t *)(d + sc), d) != 0 ||
	    gpu_download(c->g, out, d + sc, 4) || gpu_sync(c->g))
		return gfail(be, "draw");
	return 0;
}

static int
cu_penalize(struct backend *be, float *x, const int32_t *tok, const int32_t *cnt, int k,
    float repeat, float presence, float frequency)
{
	struct backend_cuda *c = CB(be);
	int32_t *d = (int32_t *)buf_get(be, &c->pen, (size_t)k * 8);

	if (d == NULL)
		return -1;
	if (gpu_upload(c->g, d, tok, (size_t)k * 4) || gpu_upload(c->g, d + k, cnt, (size_t)k * 4) ||
	    gpu_penalize(c->g, x, d, d + k, k, repeat, presence, frequency) != 0)
		return gfail(be, "penalize");
	return 0;
}

/* The bits go up on the stream (queued before the kernel that reads them;
 * a pageable source is copied before gpu_upload returns), then the kernel. */
static int
cu_mask(struct backend *be, float *x, int n, const uint32_t *bits)
{
	struct backend_cuda *c = CB(be);
	size_t words = ((size_t)n + 31) / 32;
	uint32_t *d = (uint32_t *)buf_get(be, &c->mask, words * 4);

	if (d == NULL)
		return -1;
	if (gpu_upload(c->g, d, bits, words * 4) || gpu_mask(c->g, x, n, d) != 0)
		return gfail(be, "mask");
	return 0;
}

static int
cu_softcap(struct backend *be, float *x, size_t n, float cap)
{
	return gpu_softcap(CB(be)->g, x, (int64_t)n, cap) ? gfail(be, "softcap") : 0;
}

static int
cu_scale(struct backend *be, float *x, size_t n, float s)
{
	return gpu_mul_scalar(CB(be)->g, x, (int64_t)n, s) ? gfail(be, "scale") : 0;
}

static int
cu_clamp(struct backend *be, float *x, size_t n, float lo, float hi)
{
	return gpu_clamp(CB(be)->g, x, (int64_t)n, lo, hi) ? gfail(be, "clamp") : 0;
}

/* --- recorded steps (backend_graph_*) ---------------------------------- */

/* Graphs off for good, keeping the first reason (backend_graph_stats). */
static void
graphs_off(struct backend *be, const char *why)
{
	if (be->graph.why[0] == '\0')
		snprintf(be->graph.why, sizeof be->graph.why, "%s", why);
	be->graph.on = 0;
}

static struct cuda_graph *
graph_find(struct backend_cuda *c, const void *key, size_t n)
{
	for (int i = 0; i < CUDA_GRAPHS; i++)
		if (c->graph[i].nkey == n && memcmp(c->graph[i].key, key, n) == 0)
			return &c->graph[i];
	return NULL;
}

/* A free entry, or the least recently used one emptied. */
static struct cuda_graph *
graph_slot(struct backend_cuda *c)
{
	struct cuda_graph *e = &c->graph[0];

	for (int i = 0; i < CUDA_GRAPHS; i++) {
		if (c->graph[i].nkey == 0)
			return &c->graph[i];
		if (c->graph[i].used < e->used)
			e = &c->graph[i];
	}
	gpu_graph_free(e->gr);
	memset(e, 0, sizeof *e);
	return e;
}

static int
cu_graph_replay(struct backend *be, const void *key, size_t n)
{
	struct backend_cuda *c = CB(be);
	struct cuda_graph *e;

	if (!be->graph.on || c->rec != NULL || (e = graph_find(c, key, n)) == NULL || e->gr == NULL)
		return 0;
	if (e->gen != gpu_generation(c->g)) {	/* memory it names may be gone: record anew */
		gpu_graph_free(e->gr);
		e->gr = NULL;
		e->seen = 0;
		be->graph.stale++;
		return 0;
	}
	if (gpu_graph_replay(c->g, e->gr) != 0)
		return gfail(be, "graph");
	e->used = ++c->clock;
	be->graph.replayed++;
	return 1;
}

static int
cu_graph_begin(struct backend *be, const void *key, size_t n)
{
	struct backend_cuda *c = CB(be);
	struct cuda_graph *e;

	if (!be->graph.on)
		return 0;
	if (c->rec != NULL)
		return util_err(be->err, "graph: already recording");
	if ((e = graph_find(c, key, n)) == NULL) {	/* first step under key: runs as is */
		e = graph_slot(c);
		memcpy(e->key, key, n);
		e->nkey = n;
		e->seen = 1;
		e->used = ++c->clock;
		return 0;
	}
	e->used = ++c->clock;
	if (!e->seen) {
		e->seen = 1;
		return 0;
	}
	gpu_graph_free(e->gr);
	e->gr = NULL;
	if (gpu_graph_begin(c->g) != 0) {
		graphs_off(be, gpu_errmsg(c->g));
		return 0;
	}
	e->gen = gpu_generation(c->g);
	c->rec = e;
	return 1;
}

static int
cu_graph_end(struct backend *be, int failed)
{
	struct backend_cuda *c = CB(be);
	struct cuda_graph *e = c->rec;
	struct gpu_graph *gr;
	char why[UTIL_ERRLEN];

	if (e == NULL)
		return util_err(be->err, "graph: not recording");
	c->rec = NULL;
	if (failed || e->gen != gpu_generation(c->g)) {
		snprintf(why, sizeof why, "recording a step: %s", failed ? be->err :
		    "device memory freed while recording");
		gpu_graph_abort(c->g);
		graphs_off(be, why);
		return util_err(be->err, "%s", why);
	}
	if ((gr = gpu_graph_end(c->g)) == NULL || gpu_graph_replay(c->g, gr) != 0) {
		snprintf(why, sizeof why, "%s", gpu_errmsg(c->g));
		gpu_graph_free(gr);
		cudaGetLastError();
		graphs_off(be, why);
		return util_err(be->err, "graph: %s", why);
	}
	e->gr = gr;
	be->graph.recorded++;
	return 0;
}

/* backend_prof_*: gpu_prof, BACKEND_PROF_SPIN_S of spin ahead of the ops. */
static int
cu_prof_begin(struct backend *be)
{
	return gpu_prof_begin(CB(be)->g, BACKEND_PROF_SPIN_S * 1e3) ? gfail(be, "prof") : 0;
}

static int
cu_prof_end(struct backend *be)
{
	return gpu_prof_end(CB(be)->g) ? gfail(be, "prof") : 0;
}

static int
cu_prof_rows(struct backend *be, const struct backend_prof_row **rows)
{
	const struct gpu_prof_row *r;
	int n = gpu_prof_rows(CB(be)->g, &r), max = (int)(sizeof CB(be)->prof / sizeof CB(be)->prof[0]);

	n = n < max ? n : max;
	for (int i = 0; i < n; i++) {
		CB(be)->prof[i].name = r[i].name;
		CB(be)->prof[i].s = r[i].s;
		CB(be)->prof[i].n = r[i].n;
	}
	*rows = CB(be)->prof;
	return n;
}

static void
cu_prof_reset(struct backend *be)
{
	gpu_prof_reset(CB(be)->g);
}

/* backend_pdl_set: gpu_pdl, refused while a step is being recorded (the
 * generation it moves would end the recording as stale). */
static int
cu_pdl_set(struct backend *be, int on)
{
	if (CB(be)->rec != NULL)
		return util_err(be->err, "pdl: switched while recording a graph");
	return gpu_pdl(CB(be)->g, on);
}

/* backend_gemm_set: the prefill products' kernel (gpu_tune_mmq) and the
 * weights' bf16 copies (gpu_tune_mirror), refused while a step is being
 * recorded. */
static int
cu_gemm_set(struct backend *be, int kind)
{
	struct gpu *g = CB(be)->g;

	if (CB(be)->rec != NULL)
		return util_err(be->err, "gemm: switched while recording a graph");
	if (kind != BACKEND_GEMM_INT8 && kind != BACKEND_GEMM_BF16 &&
	    kind != BACKEND_GEMM_BF16_MIRROR)
		return util_err(be->err, "gemm: kind %d (int8, bf16 or bf16-mirror)", kind);
	return gpu_tune_mmq(g, kind == BACKEND_GEMM_INT8 ? GPU_MMQ_MMA : GPU_MMQ_BF16) ||
	    gpu_tune_mirror(g, kind == BACKEND_GEMM_BF16_MIRROR) ? gfail(be, "gemm") : 0;
}

/* backend_rows_set: gpu_tune_step_rows and the backend's step rows, refused
 * while a step is being recorded. */
static int
cu_rows_set(struct backend *be, int rows)
{
	if (CB(be)->rec != NULL)
		return util_err(be->err, "step rows: switched while recording a graph");
	if (gpu_tune_step_rows(CB(be)->g, rows) != 0)
		return gfail(be, "step rows");
	be->step_rows = gpu_step_rows(CB(be)->g);
	return 0;
}

/* backend_moe_group_set: gpu_tune_moe_group and gpu_tune_moe_tc (off for
 * BACKEND_MOE_GROUP_CC), refused while a step is being recorded. */
static int
cu_moe_group_set(struct backend *be, int mode)
{
	if (CB(be)->rec != NULL)
		return util_err(be->err, "moe group: switched while recording a graph");
	return gpu_tune_moe_group(CB(be)->g, mode == BACKEND_MOE_GROUP_OFF ? GPU_MOE_GROUP_OFF :
	    mode == BACKEND_MOE_GROUP_ALL ? GPU_MOE_GROUP_ALL : GPU_MOE_GROUP_AUTO) ||
	    gpu_tune_moe_tc(CB(be)->g, mode == BACKEND_MOE_GROUP_CC ? GPU_MOE_TC_OFF :
	    GPU_MOE_TC_AUTO) ? gfail(be, "moe group") : 0;
}

/* backend_qkt_set: gpu_tune_qkt, refused while a step is being recorded. */
static int
cu_qkt_set(struct backend *be, int mode)
{
	if (CB(be)->rec != NULL)
		return util_err(be->err, "qkt: switched while recording a graph");
	return gpu_tune_qkt(CB(be)->g, mode == BACKEND_QKT_ON ? GPU_QKT_ON :
	    mode == BACKEND_QKT_AUTO ? GPU_QKT_AUTO : GPU_QKT_OFF) ? gfail(be, "qkt") : 0;
}

/* backend_q6k_pack_set: Q6_K weights initialized from now on packed four
 * blocks a group (gpu_q6k_pack4) or not; those already loaded stay as
 * they are. */
static int
cu_q6k_pack_set(struct backend *be, int on)
{
	be->q6k_pack = on;
	return 0;
}

/* backend_qk_stage_set: gpu_tune_qk_stage, refused while a step is being recorded. */
static int
cu_qk_stage_set(struct backend *be, int on)
{
	if (CB(be)->rec != NULL)
		return util_err(be->err, "qk stage: switched while recording a graph");
	return gpu_tune_qk_stage(CB(be)->g, on) ? gfail(be, "qk stage") : 0;
}

static int
cu_use(struct backend *be)
{
	return gpu_use(CB(be)->g) ? gfail(be, "use") : 0;
}

/* This file's ops: into the op table (backend_cuda_open; round_f16 stays
 * NULL: no half-precision KV cache). */
static void
cu_ops_core(struct backend_ops *o)
{
	o->close = cu_close;
	o->alloc = cu_alloc;
	o->mfree = cu_mfree;
	o->write = cu_write;
	o->read = cu_read;
	o->copy = cu_copy;
	o->fill = cu_fill;
	o->sync = cu_sync;
	o->weight_init = cu_weight_init;
	o->weight_release = cu_weight_release;
	o->supports = cu_supports;
	o->embed = cu_embed;
	o->l2norm = cu_l2norm;
	o->act = cu_act;
	o->add = cu_add;
	o->argmax = cu_argmax;
	o->graph_replay = cu_graph_replay;
	o->graph_begin = cu_graph_begin;
	o->graph_end = cu_graph_end;
	o->prof_begin = cu_prof_begin;
	o->prof_end = cu_prof_end;
	o->prof_rows = cu_prof_rows;
	o->prof_reset = cu_prof_reset;
	o->host_alloc = cu_host_alloc;
	o->host_free = cu_host_free;
	o->pdl_set = cu_pdl_set;
	o->topk = cu_topk;
	o->draw = cu_draw;
	o->penalize = cu_penalize;
	o->gemm_set = cu_gemm_set;
	o->mem_info = cu_mem_info;
	o->softcap = cu_softcap;
	o->scale = cu_scale;
	o->use = cu_use;
	o->clamp = cu_clamp;
	o->rows_set = cu_rows_set;
	o->mask = cu_mask;
	o->moe_group_set = cu_moe_group_set;
	o->qkt_set = cu_qkt_set;
	o->qk_stage_set = cu_qk_stage_set;
	o->q6k_pack_set = cu_q6k_pack_set;
	o->embed_dev = cu_embed_dev;
	o->argmax_dev = cu_argmax_dev;
	o->argmax_map = cu_argmax_map;
	o->weight_rows = cu_weight_rows;
}

extern "C" struct gpu *
backend_cuda_gpu(struct backend *be)
{
	return be->ops->close == cu_close ? CB(be)->g : NULL;
}

extern "C" struct backend *
backend_cuda_open(const char *opts, int n_threads, char *err)
{
	struct backend_cuda *c;
	long dev = 0;
	char *end;

	if (opts != NULL && *opts != '\0') {
		dev = strtol(opts, &end, 10);
		if (*end != '\0' || dev < 0 || dev > 255) {
			util_err(err, "backend: 'cuda:%s': bad device number", opts);
			return NULL;
		}
	}
	if ((c = (struct backend_cuda *)calloc(1, sizeof *c)) == NULL) {
		util_err(err, "backend: out of memory");
		return NULL;
	}
	if ((c->g = gpu_open((int)dev, err, UTIL_ERRLEN)) == NULL) {
		free(c);
		return NULL;
	}
	if (gpu_tune_mmq(c->g, BACKEND_GEMM_DEFAULT == BACKEND_GEMM_BF16 ? GPU_MMQ_BF16 :
	    GPU_MMQ_MMA) != 0) {
		util_err(err, "backend: %s", gpu_errmsg(c->g));
		gpu_close(c->g);
		free(c);
		return NULL;
	}
	cu_ops_core(&c->ops);
	cu_ops_products(&c->ops);
	cu_ops_attn(&c->ops);
	cu_ops_gdn(&c->ops);
	cu_ops_moe(&c->ops);
	c->be.ops = &c->ops;
	c->be.impl = c;
	c->be.n_threads = 1;
	c->be.host = 0;
	c->be.cut_exact = 0;	/* (backend_cut_exact: the prefix cache resumes at chunks) */
	/* backend_step_rows: cu_matmul takes the decode kernels for a product of up to
	 * gpu_step_rows rows (k_mv8t takes 32 for Q8_0 and NVFP4 in one launch, the other
	 * types launches of 16) and attention's decode path in pieces of 16, each row with
	 * its one-row bits (kernel-check's "rows32" lines, bit for bit); a product of more
	 * takes the prompt GEMM (other bits).  32 by default (backend_rows_set: 16). */
	/* K-quant and IQ4_XS products on tensor cores from matvec_qk.cu's
	 * qkt_auto_m rows (the same bits: kernel-check's tc=mvk lines): session
	 * 25's H100, with 12 rows for every type then, 512-token prefill 1.38x
	 * (26B-A4B Q4_K), 1.87x (35B-A3B Q4_K), 1.32x (196B-A11B's IQ4_XS
	 * experts), decode unchanged (bench/2026-12-06, s25) */
	/* Q6_K weights packed four blocks a group (backend_q6k_pack_set; the
	 * same bits): session 34's H100 at the 31B shape, decode 1.067x, a K = 3
	 * verify 1.30x (bench/2026-12-07/2026-12-07-s34-notes.md) */
	c->be.q6k_pack = 1;
	if (gpu_tune_step_rows(c->g, GPU_STEP_ROWS_MAX) != 0 ||
	    gpu_tune_qkt(c->g, GPU_QKT_AUTO) != 0) {
		util_err(err, "backend: %s", gpu_errmsg(c->g));
		gpu_close(c->g);
		free(c);
		return NULL;
	}
	c->be.step_rows = gpu_step_rows(c->g);
	snprintf(c->be.name, sizeof c->be.name, "cuda:%ld (%s)", dev, gpu_name(c->g));
	return &c->be;
}
