/* gpu: device, stream, memory, graphs, timing. */
#include "gpu_impl.cuh"

#include <string.h>

extern "C" int
gpu_count(void)
{
	int n = 0;

	if (cudaGetDeviceCount(&n) != cudaSuccess) {
		cudaGetLastError();
		return 0;
	}
	return n;
}

__global__ void k_copy16(uint4 *__restrict__ d, const uint4 *__restrict__ s, size_t n);

/*
 * Programmatic launches need the device (sm_90 or later) and kernels
 * compiled for it: code built from older PTX (a JIT for a newer part) has
 * no pdl_wait in it and must run plainly.
 */
static int
gpu_can_pdl(const cudaDeviceProp *p)
{
	cudaFuncAttributes fa;

	if (p->major < 9 || cudaFuncGetAttributes(&fa, k_copy16) != cudaSuccess) {
		cudaGetLastError();
		return 0;
	}
	return fa.ptxVersion >= 90;
}

static int
gpu_init(struct gpu *g, int dev)
{
	cudaDeviceProp p;

	GPU_CHECK(g, cudaSetDevice(dev));
	GPU_CHECK(g, cudaGetDeviceProperties(&p, dev));
	g->nsm = p.multiProcessorCount;
	g->pdl = g->can_pdl = gpu_can_pdl(&p);
	snprintf(g->name, sizeof g->name, "%s sm_%d%d %d SMs %.1f GiB", p.name,
	    p.major, p.minor, p.multiProcessorCount,
	    (double)p.totalGlobalMem / (1024.0 * 1024 * 1024));
	GPU_CHECK(g, cudaStreamCreateWithFlags(&g->stream, cudaStreamNonBlocking));
	for (int i = 0; i < GPU_MARKS; i++)
		GPU_CHECK(g, cudaEventCreate(&g->mark[i]));
	if (cublasCreate(&g->blas) != CUBLAS_STATUS_SUCCESS)
		return gpu_fail(g, "cublasCreate: failed");
	if (cublasSetStream(g->blas, g->stream) != CUBLAS_STATUS_SUCCESS)
		return gpu_fail(g, "cublasSetStream: failed");
	cublasSetMathMode(g->blas, CUBLAS_PEDANTIC_MATH);	/* no TF32 */
	return 0;
}

extern "C" struct gpu *
gpu_open(int dev, char *err, size_t errlen)
{
	struct gpu *g;
	int n = gpu_count();

	if (n == 0) {
		snprintf(err, errlen, "no CUDA device");
		return NULL;
	}
	if (dev < 0 || dev >= n) {
		snprintf(err, errlen, "device %d: only %d CUDA device%s", dev, n,
		    n == 1 ? "" : "s");
		return NULL;
	}
	g = (struct gpu *)calloc(1, sizeof *g);
	if (g == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	g->dev = dev;
	g->mv_chunk = 2560;
	g->step_rows = GPU_MATVEC_MAX_ROWS;
	g->moe_group = GPU_MOE_GROUP_AUTO;
	g->moe_tc = GPU_MOE_TC_AUTO;
	g->qkt = GPU_QKT_OFF;
	g->mv_unroll = 1;
	if (gpu_init(g, dev) != 0) {
		snprintf(err, errlen, "%s", g->err);
		gpu_close(g);
		return NULL;
	}
	return g;
}

static void gpu_prof_free(struct gpu *);

extern "C" void
gpu_close(struct gpu *g)
{
	if (g == NULL)
		return;
	cudaSetDevice(g->dev);
	if (g->stream)
		cudaStreamSynchronize(g->stream);
	cudaFree(g->scratch);
	cudaFree(g->gemm);
	gpu_mirror_drop(g, NULL);
	if (g->blas)
		cublasDestroy(g->blas);
	for (int i = 0; i < GPU_MARKS; i++)
		if (g->mark[i])
			cudaEventDestroy(g->mark[i]);
	for (int i = 0; i < 2; i++) {
		cudaFreeHost(g->stage[i]);
		if (g->stage_ev[i])
			cudaEventDestroy(g->stage_ev[i]);
	}
	gpu_prof_free(g);
	if (g->stream)
		cudaStreamDestroy(g->stream);
	free(g);
}

extern "C" const char *
gpu_errmsg(const struct gpu *g)
{
	return g ? g->err : "no gpu";
}

extern "C" const char *
gpu_name(const struct gpu *g)
{
	return g->name;
}

extern "C" void *
gpu_alloc(struct gpu *g, size_t n)
{
	void *d = NULL;
	cudaError_t e = cudaMalloc(&d, n + 16);

	if (e != cudaSuccess) {
		gpu_fail(g, "cudaMalloc %zu bytes: %s", n, cudaGetErrorString(e));
		return NULL;
	}
	e = cudaMemsetAsync(d, 0, n + 16, g->stream);
	if (e != cudaSuccess) {
		cudaFree(d);
		gpu_fail(g, "cudaMemsetAsync: %s", cudaGetErrorString(e));
		return NULL;
	}
	return d;
}

extern "C" void
gpu_free(struct gpu *g, void *d)
{
	if (d != NULL) {
		cudaStreamSynchronize(g->stream);
		gpu_mirror_drop(g, d);	/* a weight's bf16 copy goes with it */
		cudaFree(d);
		g->gen++;
	}
}

extern "C" int
gpu_use(struct gpu *g)
{
	GPU_CHECK(g, cudaSetDevice(g->dev));
	return 0;
}

extern "C" int
gpu_mem_info(struct gpu *g, size_t *free_b, size_t *total)
{
	cudaError_t e = cudaMemGetInfo(free_b, total);

	if (e != cudaSuccess) {
		cudaGetLastError();
		return gpu_fail(g, "cudaMemGetInfo: %s", cudaGetErrorString(e)), -1;
	}
	return 0;
}

extern "C" void *
gpu_host_alloc(struct gpu *g, size_t n)
{
	void *p = NULL;
	cudaError_t e = cudaMallocHost(&p, n);

	if (e != cudaSuccess) {
		cudaGetLastError();
		gpu_fail(g, "cudaMallocHost %zu bytes: %s", n, cudaGetErrorString(e));
		return NULL;
	}
	return p;
}

extern "C" void
gpu_host_free(struct gpu *g, void *p)
{
	if (p != NULL) {
		cudaStreamSynchronize(g->stream);	/* no copy may still target it */
		cudaFreeHost(p);
	}
}

/* Grow *p (*size bytes) to at least n bytes, contents lost; what: the
 * buffer's name in a failure. */
static void *
scratch_grow(struct gpu *g, void **p, size_t *size, size_t n, const char *what)
{
	if (n <= *size)
		return *p;
	if (gpu_capturing(g)) {
		gpu_fail(g, "%s: %zu bytes needed while capturing a graph (%zu held)", what, n,
		    *size);
		return NULL;
	}
	cudaStreamSynchronize(g->stream);
	cudaFree(*p);
	g->gen++;
	*p = NULL;
	*size = 0;
	n = (n + (1 << 20) - 1) & ~(size_t)((1 << 20) - 1);
	if (cudaMalloc(p, n) != cudaSuccess) {
		cudaGetLastError();
		*p = NULL;
		gpu_fail(g, "%s: cudaMalloc %zu bytes failed", what, n);
		return NULL;
	}
	*size = n;
	return *p;
}

void *
gpu_scratch(struct gpu *g, size_t n)
{
	return scratch_grow(g, &g->scratch, &g->scratch_size, n, "scratch");
}

void *
gpu_scratch_gemm(struct gpu *g, size_t n)
{
	return scratch_grow(g, &g->gemm, &g->gemm_size, n, "gemm scratch");
}

extern "C" int
gpu_upload(struct gpu *g, void *d_dst, const void *src, size_t n)
{
	GPU_CHECK(g, cudaMemcpyAsync(d_dst, src, n, cudaMemcpyHostToDevice, g->stream));
	return g->prof != NULL ? gpu_prof_mark(g, "memcpy to device") : 0;
}

/*
 * Bytes a staging buffer of gpu_upload_weight holds.  Why staged: a
 * pageable copy of mmap'd file bytes is paced by the driver's own staging
 * and the page faults; gemma4 26B-A4B's 14.8 GB took 23 s to load on an
 * H100 (session 24) while its page cache read at 7-8 GB/s, that load also
 * turning its Q5_0 experts into F32 on the host then: what each costs
 * alone is unmeasured (model-bench's load_s will say).
 */
#define GPU_STAGE (16u << 20)

/* 1 when gpu_upload_weight's pinned buffers and events are there (made
 * the first time); 0 when pinned memory cannot be had (plain copies then). */
static int
stage_ready(struct gpu *g)
{
	for (int i = 0; i < 2; i++) {
		if (g->stage[i] == NULL && cudaMallocHost(&g->stage[i], GPU_STAGE) != cudaSuccess) {
			cudaGetLastError();
			g->stage[i] = NULL;
			return 0;
		}
		if (g->stage_ev[i] == NULL &&
		    cudaEventCreateWithFlags(&g->stage_ev[i], cudaEventDisableTiming) != cudaSuccess) {
			cudaGetLastError();
			g->stage_ev[i] = NULL;
			return 0;
		}
	}
	return 1;
}

extern "C" int
gpu_upload_weight(struct gpu *g, void *d_dst, const void *src, size_t n)
{
	const uint8_t *s = (const uint8_t *)src;

	if (n < GPU_STAGE || g->prof != NULL || gpu_capturing(g) || !stage_ready(g))
		return gpu_upload(g, d_dst, src, n) != 0 || gpu_sync(g) != 0 ? -1 : 0;
	/* the CPU fills one buffer while the device copies out of the other */
	for (size_t off = 0, k = 0; off < n; off += GPU_STAGE, k++) {
		size_t len = n - off < GPU_STAGE ? n - off : GPU_STAGE;
		int b = (int)(k & 1);
		if (k >= 2)
			GPU_CHECK(g, cudaEventSynchronize(g->stage_ev[b]));
		memcpy(g->stage[b], s + off, len);
		GPU_CHECK(g, cudaMemcpyAsync((uint8_t *)d_dst + off, g->stage[b], len,
		    cudaMemcpyHostToDevice, g->stream));
		GPU_CHECK(g, cudaEventRecord(g->stage_ev[b], g->stream));
	}
	return gpu_sync(g);
}

extern "C" int
gpu_download(struct gpu *g, void *dst, const void *d_src, size_t n)
{
	GPU_CHECK(g, cudaMemcpyAsync(dst, d_src, n, cudaMemcpyDeviceToHost, g->stream));
	return g->prof != NULL ? gpu_prof_mark(g, "memcpy to host") : 0;
}

/* 16 bytes a thread, four loads in flight, grid-stride. */
__global__ void
k_copy16(uint4 *__restrict__ d, const uint4 *__restrict__ s, size_t n)
{
	size_t i = (size_t)blockIdx.x * blockDim.x * 4 + threadIdx.x;
	size_t step = (size_t)gridDim.x * blockDim.x * 4;

	pdl_enter();
	for (; i < n; i += step) {
		uint4 v[4];
#pragma unroll
		for (int k = 0; k < 4; k++)
			if (i + k * blockDim.x < n)
				v[k] = s[i + k * blockDim.x];
#pragma unroll
		for (int k = 0; k < 4; k++)
			if (i + k * blockDim.x < n)
				d[i + k * blockDim.x] = v[k];
	}
}

extern "C" int
gpu_copy(struct gpu *g, void *d_dst, const void *d_src, size_t n)
{
	if (((uintptr_t)d_dst | (uintptr_t)d_src | n) % 16 == 0 && n >= ((size_t)1 << 20)) {
		gpu_launch(g, k_copy16, g->nsm * 8, 256, 0, (uint4 *)d_dst, (const uint4 *)d_src,
		    n / 16);
		GPU_LAUNCHED(g, "copy");
		return 0;
	}
	GPU_CHECK(g, cudaMemcpyAsync(d_dst, d_src, n, cudaMemcpyDeviceToDevice, g->stream));
	return g->prof != NULL ? gpu_prof_mark(g, "memcpy on device") : 0;
}

extern "C" int
gpu_memset(struct gpu *g, void *d, int byte, size_t n)
{
	GPU_CHECK(g, cudaMemsetAsync(d, byte, n, g->stream));
	return g->prof != NULL ? gpu_prof_mark(g, "memset") : 0;
}

extern "C" int
gpu_sync(struct gpu *g)
{
	GPU_CHECK(g, cudaStreamSynchronize(g->stream));
	GPU_CHECK(g, cudaGetLastError());
	return 0;
}

extern "C" int
gpu_graph_begin(struct gpu *g)
{
	GPU_CHECK(g, cudaStreamBeginCapture(g->stream, cudaStreamCaptureModeThreadLocal));
	return 0;
}

extern "C" struct gpu_graph *
gpu_graph_end(struct gpu *g)
{
	cudaGraph_t graph = NULL;
	struct gpu_graph *gr;
	cudaError_t e = cudaStreamEndCapture(g->stream, &graph);

	if (e != cudaSuccess) {
		gpu_fail(g, "cudaStreamEndCapture: %s", cudaGetErrorString(e));
		return NULL;
	}
	gr = (struct gpu_graph *)calloc(1, sizeof *gr);
	if (gr == NULL) {
		cudaGraphDestroy(graph);
		gpu_fail(g, "graph: out of memory");
		return NULL;
	}
	e = cudaGraphInstantiate(&gr->exec, graph, 0);
	cudaGraphDestroy(graph);
	if (e != cudaSuccess) {
		free(gr);
		gpu_fail(g, "cudaGraphInstantiate: %s", cudaGetErrorString(e));
		return NULL;
	}
	return gr;
}

extern "C" void
gpu_graph_abort(struct gpu *g)
{
	cudaGraph_t graph = NULL;

	if (cudaStreamEndCapture(g->stream, &graph) == cudaSuccess && graph != NULL)
		cudaGraphDestroy(graph);
	cudaGetLastError();	/* the reason stays in g->err */
}

extern "C" unsigned
gpu_generation(const struct gpu *g)
{
	return g->gen;
}

extern "C" int
gpu_graph_replay(struct gpu *g, struct gpu_graph *gr)
{
	GPU_CHECK(g, cudaGraphLaunch(gr->exec, g->stream));
	return 0;
}

extern "C" void
gpu_graph_free(struct gpu_graph *gr)
{
	if (gr == NULL)
		return;
	cudaGraphExecDestroy(gr->exec);
	free(gr);
}

extern "C" int
gpu_mark(struct gpu *g, int slot)
{
	if (slot < 0 || slot >= GPU_MARKS)
		return gpu_fail(g, "mark: slot %d out of 0..%d", slot, GPU_MARKS - 1);
	GPU_CHECK(g, cudaEventRecord(g->mark[slot], g->stream));
	return 0;
}

extern "C" int
gpu_pdl(struct gpu *g, int on)
{
	on = on && g->can_pdl;
	if (on != g->pdl)
		g->gen++;	/* graphs recorded the other way are stale */
	g->pdl = on;
	return on;
}

extern "C" int
gpu_elapsed(struct gpu *g, int from, int to, float *ms)
{
	if (from < 0 || from >= GPU_MARKS || to < 0 || to >= GPU_MARKS)
		return gpu_fail(g, "elapsed: slot out of 0..%d", GPU_MARKS - 1);
	GPU_CHECK(g, cudaEventElapsedTime(ms, g->mark[from], g->mark[to]));
	return 0;
}

/* --- gpu_prof ---------------------------------------------------------- */

enum { PROF_ROWS = 256 };

struct gpu_prof {
	int	on, n;				/* marks queued since begin */
	int	khz;				/* the SM clock: k_spin's cycles a ms */
	cudaEvent_t ev[GPU_PROF_MARKS + 1];	/* ev[0]: begin */
	const char *what[GPU_PROF_MARKS + 1];
	struct gpu_prof_row row[PROF_ROWS];
	int	nrow;
};

__global__ void
k_spin(long long cycles)
{
	long long t0;

	pdl_enter();
	t0 = clock64();
	while (clock64() - t0 < cycles)
		;
}

static void
gpu_prof_free(struct gpu *g)
{
	if (g->prof == NULL)
		return;
	for (int i = 0; i <= GPU_PROF_MARKS; i++)
		if (g->prof->ev[i])
			cudaEventDestroy(g->prof->ev[i]);
	free(g->prof);
	g->prof = NULL;
}

int
gpu_launch_pdl(const struct gpu *g)
{
	return g->pdl && (g->prof == NULL || !g->prof->on);
}

int
gpu_prof_mark(struct gpu *g, const char *what)
{
	struct gpu_prof *p = g->prof;

	if (!p->on)
		return 0;
	if (p->n >= GPU_PROF_MARKS)
		return gpu_fail(g, "prof: more than %d launches between begin and end",
		    GPU_PROF_MARKS);
	p->n++;
	p->what[p->n] = what;
	GPU_CHECK(g, cudaEventRecord(p->ev[p->n], g->stream));
	return 0;
}

extern "C" int
gpu_prof_begin(struct gpu *g, double spin_ms)
{
	struct gpu_prof *p = g->prof;
	cudaStreamCaptureStatus cs;

	GPU_CHECK(g, cudaStreamIsCapturing(g->stream, &cs));
	if (cs != cudaStreamCaptureStatusNone)
		return gpu_fail(g, "prof: the stream is being captured into a graph");
	if (p == NULL) {
		if ((p = (struct gpu_prof *)calloc(1, sizeof *p)) == NULL)
			return gpu_fail(g, "prof: out of memory");
		g->prof = p;
		for (int i = 0; i <= GPU_PROF_MARKS; i++)
			GPU_CHECK(g, cudaEventCreate(&p->ev[i]));
		GPU_CHECK(g, cudaDeviceGetAttribute(&p->khz, cudaDevAttrClockRate, g->dev));
	}
	if (p->on)
		return gpu_fail(g, "prof: begin twice");
	if (spin_ms > 0) {
		gpu_launch(g, k_spin, 1, 1, 0, (long long)(spin_ms * p->khz));
		GPU_CHECK(g, cudaGetLastError());
	}
	GPU_CHECK(g, cudaEventRecord(p->ev[0], g->stream));
	p->n = 0;
	p->on = 1;
	return 0;
}

static int
prof_cmp(const void *a, const void *b)
{
	double x = ((const struct gpu_prof_row *)a)->s, y = ((const struct gpu_prof_row *)b)->s;

	return x < y ? 1 : x > y ? -1 : 0;
}

extern "C" int
gpu_prof_end(struct gpu *g)
{
	struct gpu_prof *p = g->prof;

	if (p == NULL || !p->on)
		return gpu_fail(g, "prof: end without begin");
	p->on = 0;
	GPU_CHECK(g, cudaStreamSynchronize(g->stream));
	for (int i = 1; i <= p->n; i++) {
		float ms;
		int r;
		GPU_CHECK(g, cudaEventElapsedTime(&ms, p->ev[i - 1], p->ev[i]));
		for (r = 0; r < p->nrow && strcmp(p->row[r].name, p->what[i]) != 0; r++)
			;
		if (r == p->nrow) {
			if (r == PROF_ROWS)
				return gpu_fail(g, "prof: more than %d launch names", PROF_ROWS);
			p->row[p->nrow++].name = p->what[i];
		}
		p->row[r].s += ms * 1e-3;
		p->row[r].n++;
	}
	qsort(p->row, p->nrow, sizeof p->row[0], prof_cmp);
	return 0;
}

extern "C" int
gpu_prof_rows(struct gpu *g, const struct gpu_prof_row **rows)
{
	*rows = g->prof != NULL ? g->prof->row : NULL;
	return g->prof != NULL ? g->prof->nrow : 0;
}

extern "C" void
gpu_prof_reset(struct gpu *g)
{
	if (g->prof != NULL) {
		memset(g->prof->row, 0, sizeof g->prof->row);
		g->prof->nrow = 0;
	}
}
