#include "backend.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_impl.h"
#include "fexp.h"
#ifdef MEMRA_HAVE_CUDA
#include "gpu.h"
#endif
#include "quant.h"
#include "ranks.h"
#include "sample.h"
#include "util.h"

/*
 * The dispatch half: argument checks shared by every backend, then the
 * op table.  Fused ops a backend leaves out are composed here.
 */

struct backend *
backend_open(const char *device, int n_threads, char *err)
{
	struct backend *be = NULL;

	if (device == NULL || *device == '\0')
		device = "cpu";
	if (n_threads < 0)
		util_err(err, "backend: %d threads", n_threads);
	else if (strcmp(device, "cpu") == 0)
		be = backend_cpu_open("", n_threads, err);
	else if (strncmp(device, "cpu:", 4) == 0)
		be = backend_cpu_open(device + 4, n_threads, err);
	else if (strcmp(device, "cuda") == 0 || strncmp(device, "cuda:", 5) == 0)
#ifdef MEMRA_HAVE_CUDA
		be = backend_cuda_open(device[4] ? device + 5 : "", n_threads, err);
#else
		util_err(err, "backend: '%s': built without CUDA", device);
#endif
	else
		util_err(err, "backend: '%s': unknown device (cpu, cuda[:N])", device);
	if (be != NULL)	/* recording on where the backend records steps */
		backend_graph_set(be, 1);
	return be;
}

int
backend_use(struct backend *be)
{
	return be->ops->use != NULL ? be->ops->use(be) : 0;
}

const char *
backend_default(void)
{
#ifdef MEMRA_HAVE_CUDA
	if (gpu_count() > 0)
		return "cuda";
#endif
	return "cpu";
}

int
backend_valid_device(const char *d)
{
	int64_t n;

	if (strcmp(d, "cpu") == 0 || strncmp(d, "cpu:", 4) == 0 || strcmp(d, "cuda") == 0)
		return 1;
	return strncmp(d, "cuda:", 5) == 0 && util_parse_i64(d + 5, 0, 255, &n) == 0;
}

void
backend_close(struct backend *be)
{
	if (be != NULL) {
		free(be->topk_buf);
		be->ops->close(be);
	}
}

const char *
backend_errmsg(const struct backend *be)
{
	return be->err;
}

/* MemAvailable and MemTotal of /proc/meminfo, in bytes. */
static int
host_mem_info(struct backend *be, size_t *free_b, size_t *total)
{
	FILE *fp = fopen("/proc/meminfo", "r");
	char line[256];
	unsigned long long kb;

	*free_b = *total = 0;
	if (fp == NULL)
		return util_err(be->err, "/proc/meminfo: %s", strerror(errno));
	while (fgets(line, sizeof line, fp) != NULL) {
		if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
			*free_b = (size_t)kb << 10;
		else if (sscanf(line, "MemTotal: %llu kB", &kb) == 1)
			*total = (size_t)kb << 10;
	}
	fclose(fp);
	if (*free_b == 0 || *total == 0)
		return util_err(be->err, "/proc/meminfo: no MemAvailable or MemTotal");
	return 0;
}

int
backend_mem_info(struct backend *be, size_t *free_b, size_t *total)
{
	if (be->ops->mem_info != NULL)
		return be->ops->mem_info(be, free_b, total);
	return host_mem_info(be, free_b, total);
}

const char *
backend_name(const struct backend *be)
{
	return be->name;
}

int
backend_threads(const struct backend *be)
{
	return be->n_threads;
}

int
backend_host(const struct backend *be)
{
	return be->host;
}

int
backend_cut_exact(const struct backend *be)
{
	return be->cut_exact;
}

int
backend_step_rows(const struct backend *be)
{
	return be->step_rows;
}

float *
backend_alloc(struct backend *be, size_t n)
{
	float *p = be->ops->alloc(be, n ? n : 1);

	if (p == NULL)
		util_err(be->err, "alloc: %zu floats: out of memory", n);
	return p;
}

void
backend_mfree(struct backend *be, float *p)
{
	if (p != NULL)
		be->ops->mfree(be, p);
}

float *
backend_host_alloc(struct backend *be, size_t n)
{
	float *p;

	if (be->ops->host_alloc)	/* keeps its own reason */
		return be->ops->host_alloc(be, n ? n : 1);
	if ((p = malloc((n ? n : 1) * sizeof *p)) == NULL)
		util_err(be->err, "host alloc: %zu floats: out of memory", n);
	return p;
}

void
backend_host_free(struct backend *be, float *p)
{
	if (p == NULL)
		return;
	if (be->ops->host_free)
		be->ops->host_free(be, p);
	else
		free(p);
}

int
backend_write(struct backend *be, float *dst, const float *src, size_t n)
{
	return n ? be->ops->write(be, dst, src, n) : 0;
}

int
backend_read(struct backend *be, float *dst, const float *src, size_t n)
{
	return n ? be->ops->read(be, dst, src, n) : 0;
}

int
backend_copy(struct backend *be, float *dst, const float *src, size_t n)
{
	return n && dst != src ? be->ops->copy(be, dst, src, n) : 0;
}

int
backend_fill(struct backend *be, float *dst, float v, size_t n)
{
	return n ? be->ops->fill(be, dst, v, n) : 0;
}

int
backend_sync(struct backend *be)
{
	return be->ops->sync(be);
}

int
backend_supports(const struct backend *be, int type)
{
	return quant_valid(type) && be->ops->supports(be, type);
}

int
backend_weight_init(struct backend *be, struct backend_weight *w, int type,
    int64_t ne0, int64_t ne1, const void *data, float scale)
{
	memset(w, 0, sizeof *w);
	if (!backend_supports(be, type))
		return util_err(be->err, "weight: type '%s' not supported by %s",
		    quant_name(type), be->name);
	if (ne0 <= 0 || ne1 <= 0 || ne0 > INT32_MAX || ne1 > INT32_MAX)
		return util_err(be->err, "weight: bad shape %lld x %lld",
		    (long long)ne1, (long long)ne0);
	w->row_size = quant_row_size(type, ne0);
	if (w->row_size == 0)
		return util_err(be->err, "weight: row length %lld is not a multiple "
		    "of the '%s' block size", (long long)ne0, quant_name(type));
	if (data == NULL)
		return util_err(be->err, "weight: no data");
	w->type = type;
	w->ne0 = ne0;
	w->ne1 = ne1;
	w->scale = scale;
	w->data = data;
	if (be->ops->weight_init(be, w) != 0) {
		memset(w, 0, sizeof *w);
		return -1;
	}
	return 0;
}

void
backend_weight_release(struct backend *be, struct backend_weight *w)
{
	if (w != NULL && w->data != NULL)
		be->ops->weight_release(be, w);
	if (w != NULL)
		memset(w, 0, sizeof *w);
}

int
backend_weight_rows(struct backend *be, struct backend_weight *w, int64_t r0, int64_t n,
    const void *src)
{
	if (w == NULL || w->data == NULL || r0 < 0 || n < 0 || r0 + n > w->ne1 || src == NULL)
		return util_err(be->err, "weight rows: %lld from %lld of %lld", (long long)n,
		    (long long)r0, w != NULL ? (long long)w->ne1 : 0LL);
	if (n == 0)
		return 0;
	if (be->ops->weight_rows == NULL)
		return util_err(be->err, "weight rows: backend '%s' cannot replace rows",
		    backend_name(be));
	return be->ops->weight_rows(be, w, r0, n, src);
}

static int
bad_rows(struct backend *be, const char *op, int ld, int n, int rows)
{
	if (rows < 0 || n <= 0)
		return util_err(be->err, "%s: bad shape %d x %d", op, rows, n);
	if (ld < n)
		return util_err(be->err, "%s: row stride %d < row length %d", op, ld, n);
	return 0;
}

static int
bad_weight(struct backend *be, const char *op, const struct backend_weight *w)
{
	if (w == NULL || w->data == NULL)
		return util_err(be->err, "%s: weight not initialised", op);
	if (w->escale != NULL)
		return util_err(be->err, "%s: a stack of experts with a scale each", op);
	return 0;
}

int
backend_embed(struct backend *be, const struct backend_weight *w,
    const int32_t *ids, int m, float *y, int ldy)
{
	if (bad_weight(be, "embed", w) || bad_rows(be, "embed", ldy, w->ne0, m))
		return -1;
	for (int i = 0; i < m; i++)
		if (ids[i] < 0 || ids[i] >= w->ne1)
			return util_err(be->err, "embed: token %d outside [0, %lld)",
			    ids[i], (long long)w->ne1);
	return m ? be->ops->embed(be, w, ids, m, y, ldy) : 0;
}

int
backend_dev_ids(const struct backend *be)
{
	return be->host || (be->ops->embed_dev != NULL && be->ops->argmax_dev != NULL &&
	    be->ops->argmax_map != NULL);
}

int
backend_embed_dev(struct backend *be, const struct backend_weight *w,
    const int32_t *d_ids, int m, float *y, int ldy)
{
	if (bad_weight(be, "embed", w) || bad_rows(be, "embed", ldy, w->ne0, m))
		return -1;
	if (m == 0)
		return 0;
	if (be->ops->embed_dev != NULL)
		return be->ops->embed_dev(be, w, d_ids, m, y, ldy);
	if (!be->host)
		return util_err(be->err, "embed: backend '%s' reads no ids from its memory",
		    be->name);
	for (int i = 0; i < m; i++) {	/* host memory: the ids as they are now */
		int32_t id = d_ids[i] < 0 ? 0 : d_ids[i];

		if (id >= w->ne1)
			return util_err(be->err, "embed: token %d outside [0, %lld)", id,
			    (long long)w->ne1);
		if (be->ops->embed(be, w, &id, 1, y + (size_t)i * ldy, ldy) != 0)
			return -1;
	}
	return 0;
}

int
backend_chain(const struct backend *be)
{
	return !be->chain_off;
}

void
backend_chain_set(struct backend *be, int on)
{
	be->chain_off = !on;
}

int
backend_chain_env(struct backend *be, const char *v, char *err)
{
	int on;

	if (v == NULL || strcmp(v, "") == 0 || strcmp(v, "1") == 0)
		on = 1;
	else if (strcmp(v, "0") == 0)
		on = 0;
	else
		return util_err(err, "'%s': not 0 or 1", v);
	if (be != NULL)
		backend_chain_set(be, on);
	return 0;
}

int
backend_rmsnorm(struct backend *be, const float *x, int ldx, const float *w,
    float *y, int ldy, int rows, int n, float eps)
{
	if (bad_rows(be, "rmsnorm", ldx, n, rows) || bad_rows(be, "rmsnorm", ldy, n, rows))
		return -1;
	return rows ? be->ops->rmsnorm(be, x, ldx, w, y, ldy, rows, n, eps) : 0;
}

int
backend_rmsnorm_gated(struct backend *be, const float *x, const float *z,
    const float *w, float *y, int rows, int n, float eps)
{
	if (bad_rows(be, "rmsnorm_gated", n, n, rows))
		return -1;
	return rows ? be->ops->rmsnorm_gated(be, x, z, w, y, rows, n, eps) : 0;
}

int
backend_matmul(struct backend *be, const struct backend_weight *w,
    const float *x, int ldx, float *y, int ldy, int m)
{
	if (bad_weight(be, "matmul", w) || bad_rows(be, "matmul", ldx, w->ne0, m) ||
	    bad_rows(be, "matmul", ldy, w->ne1, m))
		return -1;
	return m ? be->ops->matmul(be, w, x, ldx, y, ldy, m) : 0;
}

/* nout weights whose rows are n long, taking m rows of n. */
static int
bad_products(struct backend *be, const char *op, int m, int n, int nout,
    const struct backend_weight *const *W)
{
	if (bad_rows(be, op, n, n, m))
		return -1;
	for (int i = 0; i < nout; i++) {
		if (bad_weight(be, op, W[i]))
			return -1;
		if (W[i]->ne0 != n)
			return util_err(be->err, "%s: weight %d has rows of %lld, input of %d",
			    op, i, (long long)W[i]->ne0, n);
	}
	return 0;
}

int
backend_rmsnorm_matmul(struct backend *be, const float *x, int m, int n,
    const float *nw, float eps, int nout, const struct backend_weight *const *W,
    float *const *y)
{
	float *t;
	int rc = 0;

	if (bad_products(be, "rmsnorm_matmul", m, n, nout, W))
		return -1;
	if (m == 0 || nout == 0)
		return 0;
	if (be->ops->rmsnorm_matmul != NULL)
		return be->ops->rmsnorm_matmul(be, x, m, n, nw, eps, nout, W, y);
	if ((t = backend_alloc(be, (size_t)m * n)) == NULL)
		return -1;
	rc = be->ops->rmsnorm(be, x, n, nw, t, n, m, n, eps);
	for (int i = 0; rc == 0 && i < nout; i++)
		rc = be->ops->matmul(be, W[i], t, n, y[i], W[i]->ne1, m);
	backend_mfree(be, t);
	return rc;
}

int
backend_matmul_swiglu(struct backend *be, const struct backend_weight *wg,
    const struct backend_weight *wu, const float *x, int m, float *y)
{
	float *u;
	int rc, n_ff;

	if (bad_weight(be, "matmul_swiglu", wg) || bad_weight(be, "matmul_swiglu", wu))
		return -1;
	if (wg->ne0 != wu->ne0 || wg->ne1 != wu->ne1)
		return util_err(be->err, "matmul_swiglu: gate %lld x %lld, up %lld x %lld",
		    (long long)wg->ne1, (long long)wg->ne0, (long long)wu->ne1,
		    (long long)wu->ne0);
	if (m <= 0)
		return m < 0 ? util_err(be->err, "matmul_swiglu: %d rows", m) : 0;
	if (be->ops->matmul_swiglu != NULL)
		return be->ops->matmul_swiglu(be, wg, wu, x, m, y);
	n_ff = wg->ne1;
	if ((u = backend_alloc(be, (size_t)m * n_ff)) == NULL)
		return -1;
	rc = be->ops->matmul(be, wg, x, wg->ne0, y, n_ff, m);
	if (rc == 0)
		rc = be->ops->matmul(be, wu, x, wu->ne0, u, n_ff, m);
	if (rc == 0)
		rc = be->ops->swiglu(be, y, u, y, (size_t)m * n_ff);
	backend_mfree(be, u);
	return rc;
}

int
backend_mlp(struct backend *be, const struct backend_weight *wg,
    const struct backend_weight *wu, const struct backend_weight *wd, const float *x, int m,
    float lim, float *f, float *u, float *y)
{
	int n_ff;

	if (bad_weight(be, "mlp", wg) || bad_weight(be, "mlp", wu) || bad_weight(be, "mlp", wd))
		return -1;
	if (wg->ne0 != wu->ne0 || wg->ne1 != wu->ne1 || wd->ne0 != wg->ne1)
		return util_err(be->err, "mlp: gate %lld x %lld, up %lld x %lld, down %lld x %lld",
		    (long long)wg->ne1, (long long)wg->ne0, (long long)wu->ne1,
		    (long long)wu->ne0, (long long)wd->ne1, (long long)wd->ne0);
	if (!(lim >= 0))
		return util_err(be->err, "mlp: limit %g", lim);
	if (lim > 0 && be->ops->swiglu_limit == NULL)
		return util_err(be->err, "mlp: backend '%s' has no SwiGLU limit", backend_name(be));
	if (m <= 0)
		return m < 0 ? util_err(be->err, "mlp: %d rows", m) : 0;
	if (be->ops->mlp != NULL)
		return be->ops->mlp(be, wg, wu, wd, x, m, lim, f, u, y);
	n_ff = (int)wg->ne1;
	if (lim > 0 ? be->ops->matmul(be, wg, x, (int)wg->ne0, f, n_ff, m) != 0 ||
	    be->ops->matmul(be, wu, x, (int)wu->ne0, u, n_ff, m) != 0 ||
	    be->ops->swiglu_limit(be, f, u, f, (size_t)m * n_ff, lim) != 0 :
	    backend_matmul_swiglu(be, wg, wu, x, m, f) != 0)
		return -1;
	return be->ops->matmul(be, wd, f, n_ff, y, (int)wd->ne1, m);
}

int
backend_add_rmsnorm_matmul(struct backend *be, float *x, const float *t, int m, int n,
    const float *nw, float eps, int nout, const struct backend_weight *const *W,
    float *const *y)
{
	if (bad_products(be, "add_rmsnorm_matmul", m, n, nout, W))
		return -1;
	if (m == 0)
		return 0;
	if (t != NULL && be->ops->add_rmsnorm_matmul != NULL && nout > 0)
		return be->ops->add_rmsnorm_matmul(be, x, t, m, n, nw, eps, nout, W, y);
	if (t != NULL && be->ops->add(be, x, t, (size_t)m * n) != 0)
		return -1;
	return backend_rmsnorm_matmul(be, x, m, n, nw, eps, nout, W, y);
}

int
backend_norm_residual(struct backend *be, float *x, float *a, const float *wa, float *b,
    const float *wb, const float *w2, float eps, float s, int m, int n)
{
	size_t mn = (size_t)m * n;

	if (bad_rows(be, "norm_residual", n, n, m))
		return -1;
	if (m == 0)
		return 0;
	if (be->ops->norm_residual != NULL)
		return be->ops->norm_residual(be, x, a, wa, b, wb, w2, eps, s, m, n);
	if (be->ops->rmsnorm(be, a, n, wa, a, n, m, n, eps) != 0 ||
	    (b != NULL && (be->ops->rmsnorm(be, b, n, wb, b, n, m, n, eps) != 0 ||
	    be->ops->add(be, a, b, mn) != 0)) ||
	    (w2 != NULL && be->ops->rmsnorm(be, a, n, w2, a, n, m, n, eps) != 0) ||
	    be->ops->add(be, x, a, mn) != 0)
		return -1;
	return s != 1.0f ? be->ops->scale(be, x, mn, s) : 0;
}

int
backend_norm_residual_matmul(struct backend *be, float *x, float *a, const float *wa, float s,
    int m, int n, const float *nw, float eps, int nout, const struct backend_weight *const *W,
    float *const *y)
{
	if (bad_products(be, "norm_residual_matmul", m, n, nout, W))
		return -1;
	if (m == 0)
		return 0;
	if (be->ops->norm_residual_matmul != NULL && nout > 0)
		return be->ops->norm_residual_matmul(be, x, a, wa, s, m, n, nw, eps, nout, W, y);
	if (backend_norm_residual(be, x, a, wa, NULL, NULL, NULL, eps, s, m, n) != 0)
		return -1;
	return backend_rmsnorm_matmul(be, x, m, n, nw, eps, nout, W, y);
}

int
backend_add_rmsnorm(struct backend *be, float *x, const float *t, const float *nw, float *y,
    float eps, int m, int n)
{
	if (bad_rows(be, "add_rmsnorm", n, n, m))
		return -1;
	if (m == 0)
		return 0;
	if (be->ops->add_rmsnorm != NULL)
		return be->ops->add_rmsnorm(be, x, t, nw, y, eps, m, n);
	return be->ops->add(be, x, t, (size_t)m * n) != 0 ? -1 :
	    be->ops->rmsnorm(be, x, n, nw, y, n, m, n, eps);
}

int
backend_geglu_matmul(struct backend *be, float *g, const float *u, int m,
    const struct backend_weight *w, float *y)
{
	int n;

	if (bad_weight(be, "geglu_matmul", w) || bad_rows(be, "geglu_matmul", w->ne0, w->ne0, m))
		return -1;
	if (be->ops->geglu == NULL)
		return util_err(be->err, "geglu_matmul: backend '%s' has no GeGLU", backend_name(be));
	if (m == 0)
		return 0;
	if (be->ops->geglu_matmul != NULL)
		return be->ops->geglu_matmul(be, g, u, m, w, y);
	n = (int)w->ne0;
	return be->ops->geglu(be, g, n, u, n, g, n, m, n) != 0 ? -1 :
	    be->ops->matmul(be, w, g, n, y, (int)w->ne1, m);
}

int
backend_rmsnorm_pair(struct backend *be, const float *x, const float *w1, float s1, float *y1,
    const float *w2, float *y2, float eps, int m, int n)
{
	if (bad_rows(be, "rmsnorm_pair", n, n, m))
		return -1;
	if (m == 0)
		return 0;
	if (s1 != 1.0f && be->ops->scale == NULL)
		return util_err(be->err, "rmsnorm_pair: backend '%s' cannot scale",
		    backend_name(be));
	if (be->ops->rmsnorm_pair != NULL)
		return be->ops->rmsnorm_pair(be, x, w1, s1, y1, w2, y2, eps, m, n);
	if (be->ops->rmsnorm(be, x, n, w1, y1, n, m, n, eps) != 0 ||
	    (s1 != 1.0f && be->ops->scale(be, y1, (size_t)m * n, s1) != 0))
		return -1;
	return be->ops->rmsnorm(be, x, n, w2, y2, n, m, n, eps);
}

int
backend_ffn(struct backend *be, float *x, const float *t, int m, int n, const float *nw,
    float eps, const struct backend_weight *wg, const struct backend_weight *wu,
    const struct backend_weight *wd, float *f, float *u, float *y)
{
	const struct backend_weight *W[2] = { wg, wu };

	if (bad_products(be, "ffn", m, n, 2, W) || bad_weight(be, "ffn", wd))
		return -1;
	if (wu->ne1 != wg->ne1 || wd->ne0 != wg->ne1 || wd->ne1 != n)
		return util_err(be->err, "ffn: gate %lld x %d, up %lld x %d, down %lld x %lld",
		    (long long)wg->ne1, n, (long long)wu->ne1, n, (long long)wd->ne1,
		    (long long)wd->ne0);
	if (m == 0)
		return 0;
	if (be->ops->ffn != NULL)
		return be->ops->ffn(be, x, t, m, n, nw, eps, wg, wu, wd, f, u, y);
	if ((t != NULL && be->ops->add(be, x, t, (size_t)m * n) != 0) ||
	    be->ops->rmsnorm(be, x, n, nw, y, n, m, n, eps) != 0 ||
	    backend_matmul_swiglu(be, wg, wu, y, m, f) != 0)
		return -1;
	return be->ops->matmul(be, wd, f, (int)wd->ne0, y, n, m);
}

/* A per-head op before a product: m rows (stride ld) of nh heads of n, w's rows nh * n long. */
static int
bad_heads(struct backend *be, const char *op, const struct backend_weight *w, int ld, int n,
    int m, int nh)
{
	if (bad_weight(be, op, w) || bad_rows(be, op, ld, n, m))
		return -1;
	if (nh <= 0 || (int64_t)nh * n != w->ne0)
		return util_err(be->err, "%s: %d heads of %d, weight rows of %lld", op, nh, n,
		    (long long)w->ne0);
	return 0;
}

int
backend_rmsnorm_gated_matmul(struct backend *be, float *x, const float *z,
    const float *nw, int m, int nh, int n, float eps, const struct backend_weight *w,
    float *y)
{
	if (bad_heads(be, "rmsnorm_gated_matmul", w, n, n, m, nh))
		return -1;
	if (m == 0)
		return 0;
	if (be->ops->rmsnorm_gated_matmul != NULL)
		return be->ops->rmsnorm_gated_matmul(be, x, z, nw, m, nh, n, eps, w, y);
	if (be->ops->rmsnorm_gated(be, x, z, nw, x, m * nh, n, eps) != 0)
		return -1;
	return be->ops->matmul(be, w, x, nh * n, y, (int)w->ne1, m);
}

int
backend_mul_sigmoid_matmul(struct backend *be, float *x, const float *g, int ldg,
    int m, int nh, int hd, const struct backend_weight *w, float *y)
{
	if (bad_heads(be, "mul_sigmoid_matmul", w, ldg, hd, m, nh))
		return -1;
	if (m == 0)
		return 0;
	if (be->ops->mul_sigmoid_matmul != NULL)
		return be->ops->mul_sigmoid_matmul(be, x, g, ldg, m, nh, hd, w, y);
	if (be->ops->mul_sigmoid(be, x, hd, g, ldg, m * nh, hd) != 0)
		return -1;
	return be->ops->matmul(be, w, x, nh * hd, y, (int)w->ne1, m);
}

int
backend_swiglu(struct backend *be, const float *g, const float *u, float *y,
    size_t n)
{
	return n ? be->ops->swiglu(be, g, u, y, n) : 0;
}

static int
bad_rope(struct backend *be, int ldx, int n_head, int hs, int m, int n_rot, int mode)
{
	if (((mode & ~BACKEND_ROPE_GGML) != BACKEND_ROPE_NORM &&
	    (mode & ~BACKEND_ROPE_GGML) != BACKEND_ROPE_NEOX &&
	    mode != (BACKEND_ROPE_NEOX | BACKEND_ROPE_PROP)) ||
	    ((mode & BACKEND_ROPE_PROP) && (!backend_gemma(be) || hs % 2)))
		return util_err(be->err, "rope: unknown mode %d", mode);
	if (n_rot <= 0 || n_rot % 2 || n_rot > hs || n_head <= 0 ||
	    (long long)n_head * hs > ldx || m < 0)
		return util_err(be->err, "rope: bad shape (n_rot %d, %d heads, head "
		    "stride %d, row stride %d)", n_rot, n_head, hs, ldx);
	return 0;
}

int
backend_rope(struct backend *be, float *x, int ldx, int n_head, int hs, int m,
    const int32_t *pos, int n_rot, float theta, int mode)
{
	if (bad_rope(be, ldx, n_head, hs, m, n_rot, mode))
		return -1;
	return m ? be->ops->rope(be, x, ldx, n_head, hs, m, pos, n_rot, theta, mode) : 0;
}

/* A backend without the _dpos ops: positions in host memory, read now. */
static int
no_dpos(struct backend *be, const char *op)
{
	return util_err(be->err, "%s: backend '%s' reads no positions from its memory", op,
	    be->name);
}

int
backend_rope_dpos(struct backend *be, float *x, int ldx, int n_head, int hs, int m,
    const int32_t *d_pos, int n_rot, float theta, int mode)
{
	if (bad_rope(be, ldx, n_head, hs, m, n_rot, mode))
		return -1;
	if (m == 0)
		return 0;
	if (be->ops->rope_dpos != NULL)
		return be->ops->rope_dpos(be, x, ldx, n_head, hs, m, d_pos, n_rot, theta, mode);
	if (!be->host)
		return no_dpos(be, "rope");
	return be->ops->rope(be, x, ldx, n_head, hs, m, d_pos, n_rot, theta, mode);
}

int
backend_kv_store(struct backend *be, float *kc, float *vc, const float *k,
    const float *v, int kvd, int m, const int32_t *d_pos, int n_ctx, int ring)
{
	if (kvd <= 0 || m < 0 || n_ctx < m || ring < 0 || (ring > 0 && ring < m))
		return util_err(be->err, "kv_store: bad shape (%d rows of %d, %d positions, a "
		    "ring of %d)", m, kvd, n_ctx, ring);
	if (m == 0)
		return 0;
	if (be->ops->kv_store != NULL)
		return be->ops->kv_store(be, kc, vc, k, v, kvd, m, d_pos, n_ctx, ring);
	if (!be->host)
		return no_dpos(be, "kv_store");
	if (d_pos[0] < 0 || d_pos[0] > n_ctx - m)
		return util_err(be->err, "kv_store: rows %d..%d of %d", d_pos[0], d_pos[0] + m - 1,
		    n_ctx);
	/* rows from d_pos[0] (in a ring from d_pos[0] % ring, up to its end, then from row 0) */
	for (int r = 0, n; r < m; r += n) {
		int row = ring > 0 ? (d_pos[0] + r) % ring : d_pos[0] + r;
		size_t off = (size_t)row * kvd, in = (size_t)r * kvd;

		n = ring > 0 && m - r > ring - row ? ring - row : m - r;
		if (be->ops->copy(be, kc + off, k + in, (size_t)n * kvd) ||
		    be->ops->copy(be, vc + off, v + in, (size_t)n * kvd))
			return -1;
	}
	return 0;
}

int
backend_head_max(const struct backend *be)
{
	return be->ops->head_max != NULL ? be->ops->head_max(be) : 0;
}

static int
bad_attention(struct backend *be, const struct backend_attn *a, int ldq, int qhs, int m,
    int p0)
{
	if (a->n_head <= 0 || a->n_kv_head <= 0 || a->head_dim <= 0 ||
	    a->n_head % a->n_kv_head != 0)
		return util_err(be->err, "attention: %d heads over %d kv heads",
		    a->n_head, a->n_kv_head);
	if (qhs < a->head_dim || (long long)a->n_head * qhs > ldq || m < 0 || p0 < 0)
		return util_err(be->err, "attention: bad query layout (head stride %d, "
		    "row stride %d)", qhs, ldq);
	if (a->kv_f16 && !backend_kv_f16(be))
		return util_err(be->err, "attention: backend '%s' has no f16 KV cache",
		    be->name);
	if (backend_head_max(be) > 0 && a->head_dim > backend_head_max(be))
		return util_err(be->err, "attention: heads of %d on backend '%s' (at most %d)",
		    a->head_dim, be->name, backend_head_max(be));
	if (a->window < 0 || (a->window > 0 && (!backend_window(be) || a->kv_f16 || a->ggml)))
		return util_err(be->err, "attention: a sliding window of %d: not on backend "
		    "'%s'%s", a->window, be->name, a->kv_f16 || a->ggml ? " with llama.cpp's "
		    "orders" : "");
	if (a->hi != NULL && (!backend_attn_hi(be) || a->kv_f16 || a->ggml))
		return util_err(be->err, "attention: rows that see later keys (an image's): not "
		    "on backend '%s'%s", be->name, a->kv_f16 || a->ggml ? " with llama.cpp's "
		    "orders" : "");
	if (a->ring < 0 || (a->ring > 0 && (!backend_attn_hi(be) || a->kv_f16 || a->ggml)))
		return util_err(be->err, "attention: caches that are rings of %d rows: not on "
		    "backend '%s'%s", a->ring, be->name, a->kv_f16 || a->ggml ? " with llama.cpp's "
		    "orders" : "");
	if (a->ring > 0 && (a->window < 1 || a->window > a->ring))
		return util_err(be->err, "attention: a ring of %d rows needs a window of 1..%d "
		    "keys (window %d)", a->ring, a->ring, a->window);
	for (int r = 0; a->hi != NULL && r < m; r++) {
		int first = p0 + r + 1 - a->window;	/* with a window: the row's first key */

		if (a->hi[r] < p0 + r || a->hi[r] >= p0 + m)
			return util_err(be->err, "attention: row %d at %d sees up to %d, outside "
			    "%d..%d", r, p0 + r, a->hi[r], p0 + r, p0 + m - 1);
		if (a->ring > 0 && a->hi[r] - (first > 0 ? first : 0) + 1 > a->ring)
			return util_err(be->err, "attention: row %d at %d sees keys %d..%d, more "
			    "than a ring of %d rows holds", r, p0 + r, first > 0 ? first : 0,
			    a->hi[r], a->ring);
	}
	return 0;
}

int
backend_attention(struct backend *be, const struct backend_attn *a,
    const float *q, int ldq, int qhs, const float *kc, const float *vc, int m,
    int p0, float *o)
{
	if (bad_attention(be, a, ldq, qhs, m, p0))
		return -1;
	return m ? be->ops->attention(be, a, q, ldq, qhs, kc, vc, m, p0, o) : 0;
}

int
backend_attention_dpos(struct backend *be, const struct backend_attn *a,
    const float *q, int ldq, int qhs, const float *kc, const float *vc, int m,
    const int32_t *d_pos, int n_ctx, float *o)
{
	if (a->hi != NULL)
		return util_err(be->err, "attention: rows that see later keys at positions in "
		    "backend memory: not supported");
	if (bad_attention(be, a, ldq, qhs, m, 0))
		return -1;
	if (n_ctx < m)
		return util_err(be->err, "attention: %d rows, %d positions", m, n_ctx);
	if (m == 0)
		return 0;
	if (be->ops->attention_dpos != NULL)
		return be->ops->attention_dpos(be, a, q, ldq, qhs, kc, vc, m, d_pos, n_ctx, o);
	if (!be->host)
		return no_dpos(be, "attention");
	if (d_pos[0] < 0 || d_pos[0] > n_ctx - m)
		return util_err(be->err, "attention: rows %d..%d of %d", d_pos[0],
		    d_pos[0] + m - 1, n_ctx);
	return be->ops->attention(be, a, q, ldq, qhs, kc, vc, m, d_pos[0], o);
}

int
backend_qk_norm_rope(struct backend *be, const struct backend_qkn *a, float *q, float *k,
    float *v, int m, const int32_t *pos, const int32_t *d_pos, float *kc, float *vc,
    int n_ctx)
{
	int hd = a->head_dim, nh = a->n_head, nkv = a->n_kv_head, kvd = nkv * hd;

	if (nh <= 0 || nkv <= 0 || hd <= 0 || a->qhs < hd || m < 0 || a->qn == NULL ||
	    a->kn == NULL || (a->v_norm && v == NULL))
		return util_err(be->err, "qk_norm_rope: %d heads of %d (stride %d) and %d kv "
		    "heads, %d rows, or a norm or v missing", nh, hd, a->qhs, nkv, m);
	if ((pos == NULL) == (d_pos == NULL) || (kc != NULL && (d_pos == NULL || vc == NULL ||
	    v == NULL || n_ctx < m || a->ring < 0 || (a->ring > 0 && a->ring < m))))
		return util_err(be->err, "qk_norm_rope: positions in host or backend memory, "
		    "a store only at backend positions (%d rows, %d positions, a ring of %d)", m,
		    n_ctx, a->ring);
	if (bad_rope(be, nh * a->qhs, nh, a->qhs, m, a->n_rot, a->mode) ||
	    bad_rope(be, kvd, nkv, hd, m, a->n_rot, a->mode))
		return -1;
	if (m == 0)
		return 0;
	if (be->ops->qk_norm_rope != NULL)
		return be->ops->qk_norm_rope(be, a, q, k, v, m, pos, d_pos, kc, vc, n_ctx);
	if (backend_rmsnorm(be, q, a->qhs, a->qn, q, a->qhs, m * nh, hd, a->eps) ||
	    backend_rmsnorm(be, k, hd, a->kn, k, hd, m * nkv, hd, a->eps) ||
	    (a->v_norm && backend_rmsnorm(be, v, hd, NULL, v, hd, m * nkv, hd, a->eps)))
		return -1;
	if (pos != NULL) {
		if (backend_rope(be, q, nh * a->qhs, nh, a->qhs, m, pos, a->n_rot, a->theta,
		    a->mode) || backend_rope(be, k, kvd, nkv, hd, m, pos, a->n_rot, a->theta,
		    a->mode))
			return -1;
	} else if (backend_rope_dpos(be, q, nh * a->qhs, nh, a->qhs, m, d_pos, a->n_rot,
	    a->theta, a->mode) || backend_rope_dpos(be, k, kvd, nkv, hd, m, d_pos, a->n_rot,
	    a->theta, a->mode))
		return -1;
	return kc != NULL ? backend_kv_store(be, kc, vc, k, v, kvd, m, d_pos, n_ctx, a->ring) : 0;
}

static int
bad_key(struct backend *be, size_t n)
{
	if (n == 0 || n > BACKEND_GRAPH_KEY)
		return util_err(be->err, "graph: key of %zu bytes (1..%d)", n, BACKEND_GRAPH_KEY);
	return 0;
}

int
backend_graph_replay(struct backend *be, const void *key, size_t n)
{
	if (bad_key(be, n))
		return -1;
	return be->ops->graph_replay ? be->ops->graph_replay(be, key, n) : 0;
}

int
backend_graph_begin(struct backend *be, const void *key, size_t n)
{
	if (bad_key(be, n))
		return -1;
	return be->ops->graph_begin ? be->ops->graph_begin(be, key, n) : 0;
}

int
backend_graph_end(struct backend *be, int failed)
{
	if (be->ops->graph_end == NULL)
		return util_err(be->err, "graph: backend '%s' records none", be->name);
	return be->ops->graph_end(be, failed);
}

void
backend_graph_set(struct backend *be, int on)
{
	be->graph.on = on && be->ops->graph_replay != NULL && be->graph.why[0] == '\0';
}

int
backend_prof_begin(struct backend *be)
{
	if (be->ops->prof_begin == NULL)
		return util_err(be->err, "%s: cannot time its kernels", be->name);
	if (be->graph.on)
		return util_err(be->err, "prof: recorded steps are on (backend_graph_set(be, 0))");
	return be->ops->prof_begin(be);
}

int
backend_prof_end(struct backend *be)
{
	if (be->ops->prof_end == NULL)
		return util_err(be->err, "%s: cannot time its kernels", be->name);
	return be->ops->prof_end(be);
}

int
backend_prof_rows(struct backend *be, const struct backend_prof_row **rows)
{
	*rows = NULL;
	return be->ops->prof_rows != NULL ? be->ops->prof_rows(be, rows) : 0;
}

void
backend_prof_reset(struct backend *be)
{
	if (be->ops->prof_reset != NULL)
		be->ops->prof_reset(be);
}

const struct backend_graph_stats *
backend_graph_stats(const struct backend *be)
{
	return &be->graph;
}

int
backend_graph_env(struct backend *be, const char *v, char *err)
{
	if (v == NULL || strcmp(v, "") == 0 || strcmp(v, "1") == 0)
		return 0;
	if (strcmp(v, "0") == 0) {
		if (be != NULL)
			backend_graph_set(be, 0);
		return 0;
	}
	if (strcmp(v, "stats") == 0)
		return 1;
	return util_err(err, "'%s': not 0, 1 or stats", v);
}

int
backend_pdl_set(struct backend *be, int on)
{
	return be->ops->pdl_set != NULL ? be->ops->pdl_set(be, on != 0) : 0;
}

int
backend_pdl_env(struct backend *be, const char *v, char *err)
{
	if (v == NULL || strcmp(v, "") == 0 || strcmp(v, "1") == 0)
		return 0;
	if (strcmp(v, "0") != 0)
		return util_err(err, "'%s': not 0 or 1", v);
	if (be != NULL && backend_pdl_set(be, 0) < 0)
		return util_err(err, "%s", backend_errmsg(be));
	return 0;
}

int
backend_rows_set(struct backend *be, int rows)
{
	if (rows != BACKEND_ROWS_MIN && rows != BACKEND_ROWS_MAX)
		return util_err(be->err, "step rows %d: not %d or %d", rows, BACKEND_ROWS_MIN,
		    BACKEND_ROWS_MAX);
	return be->ops->rows_set != NULL ? be->ops->rows_set(be, rows) : 0;
}

int
backend_rows_env(struct backend *be, const char *v, char *err)
{
	int rows;

	if (v == NULL || strcmp(v, "") == 0)
		return 0;
	if (strcmp(v, "16") == 0)
		rows = 16;
	else if (strcmp(v, "32") == 0)
		rows = 32;
	else
		return util_err(err, "'%s': not 16 or 32", v);
	if (be != NULL && backend_rows_set(be, rows) < 0)
		return util_err(err, "%s", backend_errmsg(be));
	return 0;
}

int
backend_moe_group_set(struct backend *be, int mode)
{
	if (mode != BACKEND_MOE_GROUP_OFF && mode != BACKEND_MOE_GROUP_AUTO &&
	    mode != BACKEND_MOE_GROUP_ALL && mode != BACKEND_MOE_GROUP_CC)
		return util_err(be->err, "moe group: mode %d (0, 1, 2 or 3)", mode);
	return be->ops->moe_group_set != NULL ? be->ops->moe_group_set(be, mode) : 0;
}

int
backend_moe_group_env(struct backend *be, const char *v, char *err)
{
	int mode;

	if (v == NULL || strcmp(v, "") == 0 || strcmp(v, "1") == 0)
		return 0;
	if (strcmp(v, "0") == 0)
		mode = BACKEND_MOE_GROUP_OFF;
	else if (strcmp(v, "all") == 0)
		mode = BACKEND_MOE_GROUP_ALL;
	else if (strcmp(v, "cc") == 0)
		mode = BACKEND_MOE_GROUP_CC;
	else
		return util_err(err, "'%s': not 0, 1, all or cc", v);
	if (be != NULL && backend_moe_group_set(be, mode) < 0)
		return util_err(err, "%s", backend_errmsg(be));
	return 0;
}

int
backend_qkt_set(struct backend *be, int mode)
{
	if (mode != BACKEND_QKT_OFF && mode != BACKEND_QKT_ON && mode != BACKEND_QKT_AUTO)
		return util_err(be->err, "qkt: mode %d (0, 1 or 2)", mode);
	return be->ops->qkt_set != NULL ? be->ops->qkt_set(be, mode) : 0;
}

int
backend_qkt_env(struct backend *be, const char *v, char *err)
{
	int mode;

	if (v == NULL || strcmp(v, "") == 0)
		return 0;
	if (strcmp(v, "0") == 0)
		mode = BACKEND_QKT_OFF;
	else if (strcmp(v, "1") == 0)
		mode = BACKEND_QKT_ON;
	else if (strcmp(v, "auto") == 0)
		mode = BACKEND_QKT_AUTO;
	else
		return util_err(err, "'%s': not 0, 1 or auto", v);
	if (be != NULL && backend_qkt_set(be, mode) < 0)
		return util_err(err, "%s", backend_errmsg(be));
	return 0;
}

int
backend_qk_stage_set(struct backend *be, int on)
{
	if (on != 0 && on != 1)
		return util_err(be->err, "qk stage: %d (0 or 1)", on);
	return be->ops->qk_stage_set != NULL ? be->ops->qk_stage_set(be, on) : 0;
}

/* A 0-or-1 knob's value v applied to be by set (NULL or "": left as it
 * is; be NULL: v checked only): 0, or -1 with err. */
static int
onoff_env(struct backend *be, const char *v, char *err, int (*set)(struct backend *, int))
{
	if (v == NULL || strcmp(v, "") == 0)
		return 0;
	if (strcmp(v, "0") != 0 && strcmp(v, "1") != 0)
		return util_err(err, "'%s': not 0 or 1", v);
	if (be != NULL && set(be, v[0] == '1') < 0)
		return util_err(err, "%s", backend_errmsg(be));
	return 0;
}

int
backend_qk_stage_env(struct backend *be, const char *v, char *err)
{
	return onoff_env(be, v, err, backend_qk_stage_set);
}

int
backend_q6k_pack_set(struct backend *be, int on)
{
	if (on != 0 && on != 1)
		return util_err(be->err, "q6k pack: %d (0 or 1)", on);
	return be->ops->q6k_pack_set != NULL ? be->ops->q6k_pack_set(be, on) : 0;
}

int
backend_q6k_pack(const struct backend *be)
{
	return be->q6k_pack;
}

int
backend_q6k_pack_env(struct backend *be, const char *v, char *err)
{
	return onoff_env(be, v, err, backend_q6k_pack_set);
}

int
backend_gemm_set(struct backend *be, int kind)
{
	return be->ops->gemm_set != NULL ? be->ops->gemm_set(be, kind) : 0;
}

int
backend_gemm_env(struct backend *be, const char *v, char *err)
{
	int kind;

	if (v == NULL || strcmp(v, "") == 0)
		return 0;
	if (strcmp(v, "int8") == 0)
		kind = BACKEND_GEMM_INT8;
	else if (strcmp(v, "bf16") == 0)
		kind = BACKEND_GEMM_BF16;
	else if (strcmp(v, "bf16-mirror") == 0)
		kind = BACKEND_GEMM_BF16_MIRROR;
	else
		return util_err(err, "'%s': not int8, bf16 or bf16-mirror", v);
	if (be != NULL && backend_gemm_set(be, kind) < 0)
		return util_err(err, "%s", backend_errmsg(be));
	return 0;
}

const char *
backend_graph_note(const struct backend *be, int stats, char *buf, size_t n)
{
	const struct backend_graph_stats *g = &be->graph;

	if (g->why[0] != '\0' && !stats)
		snprintf(buf, n, "%s; ran without graphs", g->why);
	else if (g->why[0] != '\0')
		snprintf(buf, n, "%s; ran without graphs after %lu recorded, %lu replayed, %lu stale",
		    g->why, g->recorded, g->replayed, g->stale);
	else if (stats)
		snprintf(buf, n, "%lu recorded, %lu replayed, %lu stale%s", g->recorded,
		    g->replayed, g->stale, g->on ? "" : " (graphs off)");
	else
		return NULL;
	return buf;
}

int
backend_kv_f16(const struct backend *be)
{
	return be->ops->round_f16 != NULL;
}

int
backend_round_f16(struct backend *be, float *x, int ldx, int rows, int n)
{
	if (!backend_kv_f16(be))
		return util_err(be->err, "round_f16: backend '%s' has no f16 KV cache",
		    be->name);
	if (bad_rows(be, "round_f16", ldx, n, rows))
		return -1;
	return rows ? be->ops->round_f16(be, x, ldx, rows, n) : 0;
}

int
backend_mul_sigmoid(struct backend *be, float *x, int ldx, const float *g,
    int ldg, int rows, int n)
{
	if (bad_rows(be, "mul_sigmoid", ldx, n, rows) ||
	    bad_rows(be, "mul_sigmoid", ldg, n, rows))
		return -1;
	return rows ? be->ops->mul_sigmoid(be, x, ldx, g, ldg, rows, n) : 0;
}

int
backend_conv1d_silu(struct backend *be, const float *x, int ldx, int m,
    int n_ch, const float *w, int d_conv, float *state, float *snap, float *y)
{
	if (bad_rows(be, "conv1d", ldx, n_ch, m))
		return -1;
	if (d_conv < 2)
		return util_err(be->err, "conv1d: kernel size %d", d_conv);
	return m ? be->ops->conv1d_silu(be, x, ldx, m, n_ch, w, d_conv, state,
	    snap, y) : 0;
}

static int
bad_gdn(struct backend *be, const struct backend_gdn *g, int m, int ld)
{
	if (g->n_k_heads <= 0 || g->n_v_heads <= 0 || g->dk <= 0 || g->dv <= 0 ||
	    g->n_v_heads % g->n_k_heads != 0)
		return util_err(be->err, "gdn: %d value heads over %d key heads",
		    g->n_v_heads, g->n_k_heads);
	return bad_rows(be, "gdn", ld, 2 * g->n_k_heads * g->dk + g->n_v_heads * g->dv, m);
}

int
backend_gdn_step(struct backend *be, const struct backend_gdn *g, int m,
    const float *qkv, int ld, const float *a, const float *b,
    const float *ssm_a, const float *dt_bias, float *S, float *snap, float *o)
{
	if (bad_gdn(be, g, m, ld))
		return -1;
	return m ? be->ops->gdn_step(be, g, m, qkv, ld, a, b, ssm_a, dt_bias, S,
	    snap, o) : 0;
}

/* The group's rows into *m: each sequence's >= 0, a state each, distinct. */
static int
bad_seqs(struct backend *be, const char *op, int n, const struct backend_seq *sq, int *m)
{
	long long t = 0;

	if (n < 0 || (n > 0 && sq == NULL))
		return util_err(be->err, "%s: %d sequences", op, n);
	for (int i = 0; i < n; i++) {
		if (sq[i].rows < 0 || sq[i].state == NULL)
			return util_err(be->err, "%s: sequence %d: %d rows%s", op, i + 1,
			    sq[i].rows, sq[i].state == NULL ? ", no state" : "");
		for (int j = 0; j < i; j++)
			if (sq[j].state == sq[i].state)
				return util_err(be->err, "%s: sequences %d and %d share a state",
				    op, j + 1, i + 1);
		t += sq[i].rows;
	}
	if (t > INT_MAX)
		return util_err(be->err, "%s: %lld rows", op, t);
	*m = (int)t;
	return 0;
}

void
backend_per_seq_set(struct backend *be, int on)
{
	be->per_seq = on != 0;
}

int
backend_conv1d_silu_seqs(struct backend *be, const float *x, int ldx, int n,
    const struct backend_seq *sq, int n_ch, const float *w, int d_conv, float *y)
{
	int m;

	if (bad_seqs(be, "conv1d", n, sq, &m) || bad_rows(be, "conv1d", ldx, n_ch, m))
		return -1;
	if (d_conv < 2)
		return util_err(be->err, "conv1d: kernel size %d", d_conv);
	if (m == 0)
		return 0;
	if (be->ops->conv1d_silu_seqs != NULL && !be->per_seq)
		return be->ops->conv1d_silu_seqs(be, x, ldx, n, sq, n_ch, w, d_conv, y);
	for (int i = 0, r = 0; i < n; r += sq[i++].rows)
		if (sq[i].rows > 0 && be->ops->conv1d_silu(be, x + (size_t)r * ldx, ldx, sq[i].rows,
		    n_ch, w, d_conv, sq[i].state, sq[i].snap, y + (size_t)r * n_ch) != 0)
			return -1;
	return 0;
}

int
backend_gdn_step_seqs(struct backend *be, const struct backend_gdn *g, int n,
    const struct backend_seq *sq, const float *qkv, int ld, const float *a, const float *b,
    const float *ssm_a, const float *dt_bias, float *o)
{
	size_t nv = (size_t)g->n_v_heads, vd = nv * (size_t)g->dv;
	int m;

	if (bad_seqs(be, "gdn", n, sq, &m) || bad_gdn(be, g, m, ld))
		return -1;
	if (m == 0)
		return 0;
	if (be->ops->gdn_step_seqs != NULL && !be->per_seq)
		return be->ops->gdn_step_seqs(be, g, n, sq, qkv, ld, a, b, ssm_a, dt_bias, o);
	for (int i = 0, r = 0; i < n; r += sq[i++].rows)
		if (sq[i].rows > 0 && be->ops->gdn_step(be, g, sq[i].rows, qkv + (size_t)r * ld, ld,
		    a + r * nv, b + r * nv, ssm_a, dt_bias, sq[i].state, sq[i].snap,
		    o + r * vd) != 0)
			return -1;
	return 0;
}

/* The group's rows into *m: each sequence's >= 0 at a position >= 0, its caches given. */
static int
bad_kv_seqs(struct backend *be, const char *op, int n, const struct backend_kv_seq *sq, int *m)
{
	long long t = 0;

	if (n < 0 || (n > 0 && sq == NULL))
		return util_err(be->err, "%s: %d sequences", op, n);
	for (int i = 0; i < n; i++) {
		if (sq[i].rows < 0 || sq[i].pos < 0 || sq[i].kc == NULL || sq[i].vc == NULL)
			return util_err(be->err, "%s: sequence %d: %d rows at %d%s", op, i + 1,
			    sq[i].rows, sq[i].pos, sq[i].kc == NULL || sq[i].vc == NULL ?
			    ", no cache" : "");
		t += sq[i].rows;
	}
	if (t > INT_MAX)
		return util_err(be->err, "%s: %lld rows", op, t);
	*m = (int)t;
	return 0;
}

int
backend_kv_store_seqs(struct backend *be, const float *k, const float *v, int kvd, int n,
    const struct backend_kv_seq *sq)
{
	int m;

	if (kvd <= 0)
		return util_err(be->err, "kv store: rows of %d", kvd);
	if (bad_kv_seqs(be, "kv store", n, sq, &m))
		return -1;
	if (be->ops->kv_store_seqs != NULL && !be->per_seq)
		return m ? be->ops->kv_store_seqs(be, k, v, kvd, n, sq) : 0;
	for (int i = 0, r = 0; i < n; r += sq[i++].rows) {
		size_t at = (size_t)sq[i].pos * kvd, nr = (size_t)sq[i].rows * kvd;

		if (sq[i].rows > 0 && (backend_copy(be, sq[i].kc + at, k + (size_t)r * kvd, nr) ||
		    backend_copy(be, sq[i].vc + at, v + (size_t)r * kvd, nr)))
			return -1;
	}
	return 0;
}

int
backend_attention_seqs(struct backend *be, const struct backend_attn *a, int n,
    const struct backend_kv_seq *sq, const float *q, int ldq, int qhs, float *o)
{
	size_t od = (size_t)a->n_head * a->head_dim;
	int m;

	if (a->hi != NULL)
		return util_err(be->err, "attention: rows that see later keys in a group of "
		    "sequences: not supported");
	if (bad_kv_seqs(be, "attention", n, sq, &m))
		return -1;
	for (int i = 0; i < n; i++)
		if (bad_attention(be, a, ldq, qhs, sq[i].rows, sq[i].pos))
			return -1;
	if (m == 0)
		return 0;
	if (be->ops->attention_seqs != NULL && !be->per_seq)
		return be->ops->attention_seqs(be, a, n, sq, q, ldq, qhs, o);
	for (int i = 0, r = 0; i < n; r += sq[i++].rows) {
		struct backend_attn ai = *a;

		ai.batched = a->batched && sq[i].rows >= 2;
		if (sq[i].rows > 0 && be->ops->attention(be, &ai, q + (size_t)r * ldq, ldq, qhs,
		    sq[i].kc, sq[i].vc, sq[i].rows, sq[i].pos, o + r * od) != 0)
			return -1;
	}
	return 0;
}

int
backend_gdn_chunk(struct backend *be, const struct backend_gdn *g, int m,
    const float *qkv, int ld, const float *a, const float *b,
    const float *ssm_a, const float *dt_bias, float *S, float *o)
{
	if (bad_gdn(be, g, m, ld))
		return -1;
	return m ? be->ops->gdn_chunk(be, g, m, qkv, ld, a, b, ssm_a, dt_bias, S,
	    o) : 0;
}

int
backend_l2norm(struct backend *be, float *x, int ldx, int rows, int n, float eps)
{
	if (bad_rows(be, "l2norm", ldx, n, rows))
		return -1;
	return rows ? be->ops->l2norm(be, x, ldx, rows, n, eps) : 0;
}

int
backend_act(struct backend *be, enum backend_act act, float *x, size_t n)
{
	if (act != BACKEND_ACT_SILU && act != BACKEND_ACT_SIGMOID &&
	    act != BACKEND_ACT_SOFTPLUS)
		return util_err(be->err, "act: unknown activation %d", (int)act);
	return n ? be->ops->act(be, act, x, n) : 0;
}

int
backend_add(struct backend *be, float *y, const float *x, size_t n)
{
	return n ? be->ops->add(be, y, x, n) : 0;
}

int
backend_moe(const struct backend *be)
{
	return be->ops->moe_route != NULL && be->ops->moe_swiglu != NULL &&
	    be->ops->moe_down != NULL && be->ops->add_gated != NULL;
}

static int
no_moe(struct backend *be, const char *op)
{
	if (backend_moe(be))
		return 0;
	return util_err(be->err, "%s: backend '%s' has no mixture-of-experts ops", op,
	    backend_name(be));
}

int
backend_weight_expert_scales(struct backend *be, struct backend_weight *w, int n,
    const float *s)
{
	if (w == NULL || w->data == NULL)
		return util_err(be->err, "weight: not initialised");
	if (!backend_moe(be))
		return util_err(be->err, "weight: a scale an expert needs the mixture-of-experts "
		    "ops, which backend '%s' lacks", backend_name(be));
	if (n < 1 || w->ne1 % n != 0 || s == NULL)
		return util_err(be->err, "weight: %lld rows are not %d experts", (long long)w->ne1,
		    n);
	w->escale = s;
	w->n_escale = n;
	return 0;
}

/* A stack of n_exp experts in w, of rows n long (n 0: any). */
static int
bad_stack(struct backend *be, const char *op, const struct backend_weight *w, int n_exp,
    int64_t n)
{
	if (w == NULL || w->data == NULL)
		return util_err(be->err, "%s: weight not initialised", op);
	if (n_exp < 1 || w->ne1 % n_exp != 0)
		return util_err(be->err, "%s: %lld rows are not %d experts", op,
		    (long long)w->ne1, n_exp);
	if (w->escale != NULL && w->n_escale != n_exp)
		return util_err(be->err, "%s: a scale for each of %d experts, not %d", op,
		    w->n_escale, n_exp);
	if (n > 0 && w->ne0 != n)
		return util_err(be->err, "%s: expert rows of %lld, input of %lld", op,
		    (long long)w->ne0, (long long)n);
	return 0;
}

int
backend_moe_route(struct backend *be, const float *x, int ldx, int m, int n, int k,
    int32_t *ids, float *w)
{
	if (no_moe(be, "moe_route") || bad_rows(be, "moe_route", ldx, n, m))
		return -1;
	if (k < 1 || k > n)
		return util_err(be->err, "moe_route: top %d of %d experts", k, n);
	return m ? be->ops->moe_route(be, x, ldx, m, n, k, ids, w) : 0;
}

int
backend_moe_swiglu(struct backend *be, const struct backend_weight *wg,
    const struct backend_weight *wu, int n_exp, const float *x, int ldx, int m,
    const int32_t *ids, int k, float *f)
{
	return backend_moe_swiglu_limit(be, wg, wu, n_exp, x, ldx, m, ids, k, 0.0f, f);
}

/* The experts' gate and up side's arguments (backend_moe_swiglu_limit's,
 * backend_moe_ffn's): -1 with the error of op when they are not a call. */
static int
bad_moe_up(struct backend *be, const char *op, const struct backend_weight *wg,
    const struct backend_weight *wu, int n_exp, int ldx, int m, int k, float limit)
{
	if (!(limit >= 0))
		return util_err(be->err, "%s: limit %g", op, limit);
	if (no_moe(be, op) || bad_stack(be, op, wg, n_exp, 0) ||
	    bad_stack(be, op, wu, n_exp, wg->ne0) || bad_rows(be, op, ldx, wg->ne0, m))
		return -1;
	if (wu->ne1 != wg->ne1 || k < 1 || k > n_exp)
		return util_err(be->err, "%s: gate %lld rows, up %lld, %d of %d experts", op,
		    (long long)wg->ne1, (long long)wu->ne1, k, n_exp);
	return 0;
}

/* The experts' down side's (backend_moe_down's, _down_add's, _ffn's: nf > 0
 * the rows each expert's down takes, g the shared sum's gate or NULL). */
static int
bad_moe_down(struct backend *be, const char *op, const struct backend_weight *wd, int n_exp,
    int64_t nf, int ldy, int m, int k, const float *g, int ldg)
{
	if (no_moe(be, op) || bad_stack(be, op, wd, n_exp, nf) ||
	    bad_rows(be, op, ldy, (int)(wd->ne1 / n_exp), m))
		return -1;
	if (k < 1 || k > n_exp)
		return util_err(be->err, "%s: %d of %d experts", op, k, n_exp);
	if (g != NULL && ldg < 1)
		return util_err(be->err, "%s: gate stride %d", op, ldg);
	return 0;
}

int
backend_moe_swiglu_limit(struct backend *be, const struct backend_weight *wg,
    const struct backend_weight *wu, int n_exp, const float *x, int ldx, int m,
    const int32_t *ids, int k, float limit, float *f)
{
	if (bad_moe_up(be, "moe_swiglu", wg, wu, n_exp, ldx, m, k, limit))
		return -1;
	return m ? be->ops->moe_swiglu(be, wg, wu, n_exp, x, ldx, m, ids, k, limit, f) : 0;
}

int
backend_moe_down(struct backend *be, const struct backend_weight *wd, int n_exp,
    const float *f, int m, const int32_t *ids, const float *w, int k, float *y, int ldy)
{
	if (bad_moe_down(be, "moe_down", wd, n_exp, 0, ldy, m, k, NULL, 0))
		return -1;
	return m ? be->ops->moe_down(be, wd, n_exp, f, m, ids, w, k, y, ldy) : 0;
}

int
backend_moe_down_add(struct backend *be, const struct backend_weight *wd, int n_exp,
    const float *f, int m, const int32_t *ids, const float *w, int k, const float *x,
    const float *g, int ldg, float *y, int ldy)
{
	int n;

	if (bad_moe_down(be, "moe_down_add", wd, n_exp, 0, ldy, m, k, g, ldg))
		return -1;
	if (m == 0)
		return 0;
	if (be->ops->moe_down_add != NULL)
		return be->ops->moe_down_add(be, wd, n_exp, f, m, ids, w, k, x, g, ldg, y, ldy);
	n = (int)(wd->ne1 / n_exp);
	if (be->ops->moe_down(be, wd, n_exp, f, m, ids, w, k, y, ldy) != 0)
		return -1;
	if (g != NULL)
		return be->ops->add_gated(be, y, ldy, x, n, g, ldg, m, n);
	if (ldy == n)
		return be->ops->add(be, y, x, (size_t)m * n);
	for (int r = 0; r < m; r++)
		if (be->ops->add(be, y + (size_t)r * ldy, x + (size_t)r * n, (size_t)n) != 0)
			return -1;
	return 0;
}

int
backend_moe_ffn(struct backend *be, const struct backend_weight *wg,
    const struct backend_weight *wu, const struct backend_weight *wd, int n_exp,
    const float *x, int ldx, int m, const int32_t *ids, const float *w, int k, float lim,
    float *f, const float *xs, const float *g, int ldg, float *y, int ldy)
{
	if (bad_moe_up(be, "moe_ffn", wg, wu, n_exp, ldx, m, k, lim) ||
	    bad_moe_down(be, "moe_ffn", wd, n_exp, wg->ne1 / n_exp, ldy, m, k, xs ? g : NULL, ldg))
		return -1;
	if (m == 0)
		return 0;
	if (be->ops->moe_ffn != NULL)
		return be->ops->moe_ffn(be, wg, wu, wd, n_exp, x, ldx, m, ids, w, k, lim, f, xs, g,
		    ldg, y, ldy);
	if (backend_moe_swiglu_limit(be, wg, wu, n_exp, x, ldx, m, ids, k, lim, f) != 0)
		return -1;
	return xs != NULL ? backend_moe_down_add(be, wd, n_exp, f, m, ids, w, k, xs, g, ldg, y,
	    ldy) : backend_moe_down(be, wd, n_exp, f, m, ids, w, k, y, ldy);
}

int
backend_add_gated(struct backend *be, float *y, int ldy, const float *x, int ldx,
    const float *g, int ldg, int m, int n)
{
	if (no_moe(be, "add_gated") || bad_rows(be, "add_gated", ldy, n, m) ||
	    bad_rows(be, "add_gated", ldx, n, m))
		return -1;
	if (ldg < 1)
		return util_err(be->err, "add_gated: gate stride %d", ldg);
	return m ? be->ops->add_gated(be, y, ldy, x, ldx, g, ldg, m, n) : 0;
}

int
backend_gemma(const struct backend *be)
{
	return be->ops->geglu != NULL && be->ops->softcap != NULL && be->ops->scale != NULL &&
	    be->ops->moe_geglu != NULL && be->ops->moe_scale != NULL;
}

static int
no_gemma(struct backend *be, const char *op)
{
	if (backend_gemma(be))
		return 0;
	return util_err(be->err, "%s: backend '%s' has no Gemma-4 ops", op, backend_name(be));
}

int
backend_geglu(struct backend *be, const float *g, int ldg, const float *u, int ldu,
    float *y, int ldy, int rows, int n)
{
	if (no_gemma(be, "geglu") || bad_rows(be, "geglu", ldg, n, rows) ||
	    bad_rows(be, "geglu", ldu, n, rows) || bad_rows(be, "geglu", ldy, n, rows))
		return -1;
	return rows && n ? be->ops->geglu(be, g, ldg, u, ldu, y, ldy, rows, n) : 0;
}

int
backend_softcap(struct backend *be, float *x, size_t n, float cap)
{
	if (no_gemma(be, "softcap"))
		return -1;
	if (!(cap > 0))
		return util_err(be->err, "softcap: cap %g", cap);
	return n ? be->ops->softcap(be, x, n, cap) : 0;
}

int
backend_scale(struct backend *be, float *x, size_t n, float s)
{
	if (no_gemma(be, "scale"))
		return -1;
	return n ? be->ops->scale(be, x, n, s) : 0;
}

int
backend_moe_geglu(struct backend *be, const struct backend_weight *wgu, int n_exp,
    const float *x, int ldx, int m, const int32_t *ids, int k, float *f)
{
	if (no_gemma(be, "moe_geglu") || bad_stack(be, "moe_geglu", wgu, n_exp, 0) ||
	    bad_rows(be, "moe_geglu", ldx, (int)wgu->ne0, m))
		return -1;
	if (wgu->ne1 / n_exp % 2 != 0)
		return util_err(be->err, "moe_geglu: %lld rows an expert, not gate and up",
		    (long long)(wgu->ne1 / n_exp));
	if (k < 1 || k > n_exp)
		return util_err(be->err, "moe_geglu: %d of %d experts", k, n_exp);
	return m ? be->ops->moe_geglu(be, wgu, n_exp, x, ldx, m, ids, k, f) : 0;
}

int
backend_moe_scale(struct backend *be, float *w, const int32_t *ids, int m, int k,
    const float *s, int n_exp)
{
	if (no_gemma(be, "moe_scale"))
		return -1;
	if (k < 1 || k > n_exp)
		return util_err(be->err, "moe_scale: %d of %d experts", k, n_exp);
	return m ? be->ops->moe_scale(be, w, ids, m, k, s) : 0;
}

int
backend_moe_route_scale(struct backend *be, const float *x, int ldx, int m, int n, int k,
    const float *s, int32_t *ids, float *w)
{
	if (no_gemma(be, "moe_route_scale") || no_moe(be, "moe_route_scale") ||
	    bad_rows(be, "moe_route_scale", ldx, n, m))
		return -1;
	if (k < 1 || k > n)
		return util_err(be->err, "moe_route_scale: top %d of %d experts", k, n);
	if (m == 0)
		return 0;
	if (be->ops->moe_route_scale != NULL)
		return be->ops->moe_route_scale(be, x, ldx, m, n, k, s, ids, w);
	return be->ops->moe_route(be, x, ldx, m, n, k, ids, w) != 0 ? -1 :
	    be->ops->moe_scale(be, w, ids, m, k, s);
}

int
backend_step35(const struct backend *be)
{
	return backend_moe(be) && be->ops->moe_route_sigmoid != NULL &&
	    be->ops->swiglu_limit != NULL && be->ops->head_gate != NULL;
}

static int
no_step35(struct backend *be, const char *op)
{
	if (backend_step35(be))
		return 0;
	return util_err(be->err, "%s: backend '%s' has no step35 ops", op, backend_name(be));
}

int
backend_moe_route_sigmoid(struct backend *be, const float *x, int ldx, int m, int n, int k,
    const float *bias, int norm, float scale, int32_t *ids, float *w)
{
	if (no_step35(be, "moe_route_sigmoid") || bad_rows(be, "moe_route_sigmoid", ldx, n, m))
		return -1;
	if (k < 1 || k > n)
		return util_err(be->err, "moe_route_sigmoid: top %d of %d experts", k, n);
	return m ? be->ops->moe_route_sigmoid(be, x, ldx, m, n, k, bias, norm, scale, ids, w) : 0;
}

int
backend_swiglu_limit(struct backend *be, const float *g, const float *u, float *y, size_t n,
    float limit)
{
	if (no_step35(be, "swiglu_limit"))
		return -1;
	if (!(limit >= 0))
		return util_err(be->err, "swiglu_limit: limit %g", limit);
	return n ? be->ops->swiglu_limit(be, g, u, y, n, limit) : 0;
}

int
backend_head_gate(struct backend *be, float *x, int ldx, const float *g, int ldg, int m, int nh,
    int hd)
{
	if (no_step35(be, "head_gate") || bad_rows(be, "head_gate", ldx, nh * hd, m) ||
	    bad_rows(be, "head_gate", ldg, nh, m))
		return -1;
	return m ? be->ops->head_gate(be, x, ldx, g, ldg, m, nh, hd) : 0;
}

int
backend_window(const struct backend *be)
{
	return backend_gemma(be) || backend_step35(be);
}

int
backend_attn_hi(const struct backend *be)
{
	return be->ops->attn_hi != NULL && be->ops->attn_hi(be);
}

int
backend_clamp(struct backend *be, float *x, size_t n, float lo, float hi)
{
	if (be->ops->clamp == NULL)
		return util_err(be->err, "clamp: not on backend '%s'", be->name);
	return n ? be->ops->clamp(be, x, n, lo, hi) : 0;
}

int
backend_has_clamp(const struct backend *be)
{
	return be->ops->clamp != NULL;
}

int
backend_matmul_half(struct backend *be, const struct backend_weight *w,
    const float *x, int ldx, float *y, int ldy, int m)
{
	if (be->ops->matmul_half == NULL)
		return util_err(be->err, "matmul_half: not on backend '%s'", be->name);
	if (bad_weight(be, "matmul_half", w) || bad_rows(be, "matmul_half", ldx, w->ne0, m) ||
	    bad_rows(be, "matmul_half", ldy, w->ne1, m))
		return -1;
	return m ? be->ops->matmul_half(be, w, x, ldx, y, ldy, m) : 0;
}

int
backend_has_matmul_half(const struct backend *be)
{
	return be->ops->matmul_half != NULL;
}

int
backend_dconv(struct backend *be, const float *x, int m, int n, const float *dyn, int ldd,
    int K, int group, const float *base, float *y)
{
	if (be->ops->dconv == NULL)
		return util_err(be->err, "dconv: not on backend '%s'", be->name);
	if (m < 0 || n < 1 || K < 1 || group < 1 || n % group != 0 ||
	    ldd < (long long)K * (n / group))
		return util_err(be->err, "dconv: %d rows of %d channels, %d taps, groups of %d, "
		    "coefficient rows %d apart", m, n, K, group, ldd);
	if (m > 0 && x < y + (size_t)m * n && y < x + (size_t)m * n)
		return util_err(be->err, "dconv: output overlaps input");
	return m ? be->ops->dconv(be, x, m, n, dyn, ldd, K, group, base, y) : 0;
}

int
backend_has_dconv(const struct backend *be)
{
	return be->ops->dconv != NULL;
}

int
backend_argmax(struct backend *be, const float *x, int ldx, int m, int n,
    int32_t *out)
{
	if (bad_rows(be, "argmax", ldx, n, m))
		return -1;
	return m ? be->ops->argmax(be, x, ldx, m, n, out) : 0;
}

int
backend_argmax_dev(struct backend *be, const float *x, int ldx, int m, int n,
    int32_t *d_out)
{
	if (bad_rows(be, "argmax", ldx, n, m))
		return -1;
	if (m == 0)
		return 0;
	if (be->ops->argmax_dev != NULL)
		return be->ops->argmax_dev(be, x, ldx, m, n, d_out);
	if (!be->host)
		return util_err(be->err, "argmax: backend '%s' writes no ids to its memory",
		    be->name);
	return be->ops->argmax(be, x, ldx, m, n, d_out);
}

int
backend_argmax_map(struct backend *be, const float *x, int ldx, int m, int n,
    const int32_t *d_map, int32_t *d_out)
{
	if (bad_rows(be, "argmax", ldx, n, m))
		return -1;
	if (m == 0)
		return 0;
	if (be->ops->argmax_map != NULL)
		return be->ops->argmax_map(be, x, ldx, m, n, d_map, d_out);
	if (!be->host)
		return util_err(be->err, "argmax: backend '%s' maps no picks in its memory",
		    be->name);
	/* host memory: ranks_argmax over the map as a rank list */
	const struct ranks rk = { (int32_t *)d_map, n, 0 };

	for (int r = 0; r < m; r++)
		d_out[r] = ranks_argmax(&rk, x + (size_t)r * ldx);
	return 0;
}

/* Host scratch of at least need bytes, kept (a draw a token must not allocate). */
static void *
host_scratch(struct backend *be, const char *op, size_t need)
{
	if (need > be->topk_cap) {
		void *p = realloc(be->topk_buf, need);
		if (p == NULL) {
			util_err(be->err, "%s: out of memory", op);
			return NULL;
		}
		be->topk_buf = p, be->topk_cap = need;
	}
	return be->topk_buf;
}

_Static_assert(BACKEND_TOPK_MAX == SAMPLE_TOPK_MAX, "the sampler takes what backends give");

int
backend_topk(struct backend *be, const float *x, int ldx, int m, int n, int k, float temp,
    float *val, int32_t *id)
{
	size_t need = (size_t)n * (sizeof(uint64_t) + (be->host ? 0 : sizeof(float)));
	uint64_t *key;
	float *row;
	int rc = 0;

	if (bad_rows(be, "topk", ldx, n, m))
		return -1;
	if (k < 1 || k > BACKEND_TOPK_MAX || !(temp > 0) || !isfinite(temp))
		return util_err(be->err, "topk: k %d, temperature %g", k, temp);
	if (m == 0)
		return 0;
	if (be->ops->topk != NULL)
		return be->ops->topk(be, x, ldx, m, n, k, temp, val, id);
	if ((key = host_scratch(be, "topk", need)) == NULL)
		return -1;
	row = (float *)(key + n);
	for (int r = 0; r < m && rc == 0; r++) {
		const float *xr = x + (size_t)r * ldx;

		if (!be->host && (rc = backend_read(be, row, xr, (size_t)n)) != 0)
			break;
		sample_top(be->host ? xr : row, n, k, temp, val + (size_t)r * k, id + (size_t)r * k,
		    key);
	}
	return rc;
}

int
backend_draw(struct backend *be, const float *x, struct sampler *s, uint64_t seq, int64_t pos,
    int32_t *out)
{
	const struct sample_params *p = sample_params(s), q = sample_unpenalized(p);
	int n = sample_vocab(s);
	float *row = (float *)x;

	if (!sample_row_draw(&q))
		return util_err(be->err, "draw: the sampler needs more than the row");
	if (be->ops->draw != NULL)
		return be->ops->draw(be, x, n, p->temp, p->top_p, p->min_p,
		    sample_uniform(p->seed, seq, pos, SAMPLE_STREAM_TOKEN), out);
	if (!be->host && ((row = host_scratch(be, "draw", (size_t)n * sizeof *row)) == NULL ||
	    backend_read(be, row, x, (size_t)n) != 0))
		return -1;
	*out = sample_next(s, row, NULL, 0, seq, pos);	/* (no history: no penalty again) */
	return 0;
}

int
backend_has_mask(const struct backend *be)
{
	return be->ops->mask != NULL;
}

int
backend_mask(struct backend *be, float *x, int n, const uint32_t *bits)
{
	if (be->ops->mask == NULL)
		return util_err(be->err, "mask: not on backend '%s'", be->name);
	if (bad_rows(be, "mask", n, n, 1))
		return -1;
	return be->ops->mask(be, x, n, bits);
}

int
backend_penalize(struct backend *be, float *x, int n, const int32_t *tok, const int32_t *cnt,
    int k, float repeat, float presence, float frequency)
{
	float *row = x;

	if (bad_rows(be, "penalize", n, n, 1))
		return -1;
	if (k < 0 || !(repeat > 0) || !isfinite(repeat) || !isfinite(presence) ||
	    !isfinite(frequency))
		return util_err(be->err, "penalize: %d tokens, penalties %g %g %g", k, repeat,
		    presence, frequency);
	for (int i = 0; i < k; i++)
		if (tok[i] < 0 || tok[i] >= n)
			return util_err(be->err, "penalize: token %d of a row of %d", tok[i], n);
	if (k == 0)
		return 0;
	if (be->ops->penalize != NULL)
		return be->ops->penalize(be, x, tok, cnt, k, repeat, presence, frequency);
	if (!be->host && ((row = host_scratch(be, "penalize", (size_t)n * sizeof *row)) == NULL ||
	    backend_read(be, row, x, (size_t)n) != 0))
		return -1;
	for (int i = 0; i < k; i++)
		row[tok[i]] = fexp_penalty(row[tok[i]], repeat, presence, frequency, cnt[i]);
	return be->host ? 0 : backend_write(be, x, row, (size_t)n);
}
