#include "pipeline.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef MEMRA_HAVE_CUDA
#include "backend_impl.h"
#include "gpu.h"
#endif
#include "util.h"

/*
 * A link's kind, NCCL's shape: a group of sends and receives, each queued
 * by the stage that makes it (rank s), started together at group_end.
 */
struct link_ops {
	const char *kind;
	int	(*begin)(struct pipeline_link *);
	int	(*send)(struct pipeline_link *, int s, const float *src, size_t n, int peer);
	int	(*recv)(struct pipeline_link *, int s, float *dst, size_t n, int peer);
	int	(*end)(struct pipeline_link *);
	void	(*close)(struct pipeline_link *);
};

struct pipeline_link {
	const struct link_ops *ops;
	struct backend **be;	/* [k] */
	int	k;
	/* pipe: the rows sent, held on the host until group_end moves them */
	int	fd[2];
	float	*buf;		/* [cap] */
	size_t	cap, n;
	int	from, to;	/* the group's sender and receiver (-1: none yet) */
	float	*dst;
	void	*nccl;		/* struct gpu_nccl * */
	char	err[UTIL_ERRLEN];
};

/* The bytes of a stage of layers a..b-1 of n (pre: the prefix sums). */
static uint64_t
stage_cost(const uint64_t *pre, int a, int b, int n, uint64_t h0, uint64_t h1)
{
	return pre[b] - pre[a] + (a == 0 ? h0 : 0) + (b == n ? h1 : 0);
}

int
pipeline_split(const uint64_t *w, int n, uint64_t head0, uint64_t head1, int k,
    int *first, char *err)
{
	uint64_t *pre, *best;
	int *cut;

	if (k < 2 || k > PIPELINE_MAX_STAGES || k > n)
		return util_err(err, "pipeline: %d stages for %d layers", k, n);
	pre = calloc(n + 1, sizeof *pre);
	best = calloc((size_t)k * (n + 1), sizeof *best);
	cut = calloc((size_t)k * (n + 1), sizeof *cut);
	if (pre == NULL || best == NULL || cut == NULL) {
		free(pre), free(best), free(cut);
		return util_err(err, "pipeline: out of memory");
	}
	for (int i = 0; i < n; i++)
		pre[i + 1] = pre[i] + w[i];
	/* best[j][i]: the least largest stage of j+1 stages over layers 0..i-1 */
	for (int i = 1; i <= n; i++)
		best[i] = stage_cost(pre, 0, i, n, head0, head1);
	for (int j = 1; j < k; j++)
		for (int i = j + 1; i <= n; i++) {
			best[j * (n + 1) + i] = UINT64_MAX;
			for (int a = j; a < i; a++) {	/* the last stage: layers a..i-1 */
				uint64_t c = stage_cost(pre, a, i, n, head0, head1), p;

				p = best[(j - 1) * (n + 1) + a];
				c = c > p ? c : p;
				if (c < best[j * (n + 1) + i])
					best[j * (n + 1) + i] = c, cut[j * (n + 1) + i] = a;
			}
		}
	for (int j = k - 1, i = n; j > 0; j--)
		i = first[j - 1] = cut[j * (n + 1) + i];
	free(pre), free(best), free(cut);
	return 0;
}

int
pipeline_parse_splits(const char *list, int k, int n_layer, int *first, char *err)
{
	const char *p = list;

	for (int j = 0; j < k - 1; j++) {
		char *end;
		long v;

		errno = 0;
		v = strtol(p, &end, 10);
		if (end == p || errno || v < 1 || v >= n_layer || (j > 0 && v <= first[j - 1]) ||
		    (j < k - 2 ? *end != ',' : *end != '\0'))
			return util_err(err, "pipeline: splits '%s': want %d increasing first "
			    "layers of stages 1..%d, each in 1..%d", list, k - 1, k - 1,
			    n_layer - 1);
		first[j] = (int)v;
		p = end + 1;
	}
	return 0;
}

/* "N" -> "cuda:N", else d itself, into out. */
static int
device_name(const char *d, size_t len, char *out, char *err)
{
	size_t i = 0;

	while (i < len && d[i] >= '0' && d[i] <= '9')
		i++;
	if (len == 0 || len >= PIPELINE_DEVLEN - 5)
		return util_err(err, "pipeline: device '%.*s': bad name", (int)len, d);
	if (i == len)
		snprintf(out, PIPELINE_DEVLEN, "cuda:%.*s", (int)len, d);
	else
		snprintf(out, PIPELINE_DEVLEN, "%.*s", (int)len, d);
	if (!backend_valid_device(out))
		return util_err(err, "pipeline: device '%s': unknown (cpu, cuda:N or N)", out);
	return 0;
}

int
pipeline_devices(const char *list, int k, const char *def, char (*dev)[PIPELINE_DEVLEN],
    char *err)
{
	int j = 0;

	if (k < 1 || k > PIPELINE_MAX_STAGES)
		return util_err(err, "pipeline: %d stages (1..%d)", k, PIPELINE_MAX_STAGES);
	if (list == NULL) {
		for (j = 0; j < k; j++)
			if (def != NULL && strncmp(def, "cuda", 4) == 0)
				snprintf(dev[j], PIPELINE_DEVLEN, "cuda:%d", j);
			else if (device_name(def ? def : "cpu", strlen(def ? def : "cpu"), dev[j],
			    err) != 0)
				return -1;
		return 0;
	}
	for (const char *p = list; ; p++) {
		size_t len = strcspn(p, ",");

		if (j == k)
			return util_err(err, "pipeline: devices '%s': more than %d stages", list, k);
		if (device_name(p, len, dev[j++], err) != 0)
			return -1;
		p += len;
		if (*p == '\0')
			break;
	}
	if (j != k)
		return util_err(err, "pipeline: devices '%s': %d for %d stages", list, j, k);
	return 0;
}

const char *
pipeline_dev_tag(const char *d, char *buf, size_t n)
{
	if (strncmp(d, "cuda:", 5) == 0)
		snprintf(buf, n, "dev%s", d + 5);
	else
		snprintf(buf, n, "%s", d);
	return buf;
}

/* --- the stand-in: a pipe through the host --- */

static int
pipe_begin(struct pipeline_link *l)
{
	l->from = l->to = -1;
	l->n = 0;
	return 0;
}

static int
pipe_send(struct pipeline_link *l, int s, const float *src, size_t n, int peer)
{
	if (n > l->cap) {
		float *b = realloc(l->buf, n * sizeof *b);

		if (b == NULL)
			return util_err(l->err, "pipe: %zu floats: out of memory", n);
		l->buf = b, l->cap = n;
	}
	if (backend_read(l->be[s], l->buf, src, n) != 0)
		return util_err(l->err, "pipe: stage %d: %s", s, backend_errmsg(l->be[s]));
	l->from = s, l->to = peer, l->n = n;
	return 0;
}

static int
pipe_recv(struct pipeline_link *l, int s, float *dst, size_t n, int peer)
{
	if (peer != l->from || s != l->to || n != l->n)
		return util_err(l->err, "pipe: stage %d receives %zu floats from %d, "
		    "stage %d sent %zu to %d", s, n, peer, l->from, l->n, l->to);
	l->dst = dst;
	return 0;
}

/* Through the pipe a chunk at a time (one thread writes and reads it), back in place. */
static int
pipe_move(struct pipeline_link *l)
{
	char *p = (char *)l->buf;
	size_t left = l->n * sizeof *l->buf;

	while (left > 0) {
		size_t c = left < 65536 ? left : 65536, got = 0;
		ssize_t r = write(l->fd[1], p, c);

		if (r <= 0)
			return util_err(l->err, "pipe: write: %s", strerror(errno));
		while (got < (size_t)r) {
			ssize_t q = read(l->fd[0], p + got, (size_t)r - got);

			if (q <= 0)
				return util_err(l->err, "pipe: read: %s",
				    q ? strerror(errno) : "end of file");
			got += (size_t)q;
		}
		p += r, left -= (size_t)r;
	}
	return 0;
}

static int
pipe_end(struct pipeline_link *l)
{
	if (l->to < 0 || l->dst == NULL)
		return util_err(l->err, "pipe: a send without its receive");
	if (pipe_move(l) != 0)
		return -1;
	if (backend_write(l->be[l->to], l->dst, l->buf, l->n) != 0)
		return util_err(l->err, "pipe: stage %d: %s", l->to, backend_errmsg(l->be[l->to]));
	l->dst = NULL;
	return 0;
}

static void
pipe_close(struct pipeline_link *l)
{
	close(l->fd[0]), close(l->fd[1]);
	free(l->buf);
}

static const struct link_ops pipe_ops = {
	"pipe", pipe_begin, pipe_send, pipe_recv, pipe_end, pipe_close,
};

/* --- NCCL (cuda/nccl.cu) --- */

#ifdef MEMRA_HAVE_CUDA
static int
nccl_begin(struct pipeline_link *l)
{
	return gpu_nccl_group(l->nccl, 1) ? util_err(l->err, "%s", gpu_nccl_errmsg(l->nccl)) : 0;
}

static int
nccl_send(struct pipeline_link *l, int s, const float *src, size_t n, int peer)
{
	return gpu_nccl_send(l->nccl, s, src, n, peer) ?
	    util_err(l->err, "%s", gpu_nccl_errmsg(l->nccl)) : 0;
}

static int
nccl_recv(struct pipeline_link *l, int s, float *dst, size_t n, int peer)
{
	return gpu_nccl_recv(l->nccl, s, dst, n, peer) ?
	    util_err(l->err, "%s", gpu_nccl_errmsg(l->nccl)) : 0;
}

static int
nccl_end(struct pipeline_link *l)
{
	return gpu_nccl_group(l->nccl, 0) ? util_err(l->err, "%s", gpu_nccl_errmsg(l->nccl)) : 0;
}

static void
nccl_close(struct pipeline_link *l)
{
	gpu_nccl_close(l->nccl);
}

static const struct link_ops nccl_ops = {
	"nccl", nccl_begin, nccl_send, nccl_recv, nccl_end, nccl_close,
};

/* The NCCL communicators over the stages' GPUs. */
static int
nccl_open(struct pipeline_link *l, char *err)
{
	struct gpu *g[PIPELINE_MAX_STAGES];

	for (int s = 0; s < l->k; s++)
		if ((g[s] = backend_cuda_gpu(l->be[s])) == NULL)
			return util_err(err, "pipeline: stage %d: not a CUDA backend", s);
	if ((l->nccl = gpu_nccl_open(g, l->k, err, UTIL_ERRLEN)) == NULL)
		return -1;
	l->ops = &nccl_ops;
	return 0;
}
#else
static int
nccl_open(struct pipeline_link *l, char *err)
{
	return util_err(err, "pipeline: the NCCL link: built without CUDA");
}
#endif

/* 1 when every device is cuda:N, each N once: NCCL's ranks. */
static int
wants_nccl(char (*dev)[PIPELINE_DEVLEN], int k)
{
	for (int s = 0; s < k; s++) {
		if (strncmp(dev[s], "cuda:", 5) != 0)
			return 0;
		for (int t = 0; t < s; t++)
			if (strcmp(dev[t], dev[s]) == 0)
				return 0;
	}
	return 1;
}

struct pipeline_link *
pipeline_link_open(struct backend **be, char (*dev)[PIPELINE_DEVLEN], int k, char *err)
{
	struct pipeline_link *l;

	if (k < 2 || k > PIPELINE_MAX_STAGES) {
		util_err(err, "pipeline: a link of %d stages", k);
		return NULL;
	}
	if ((l = calloc(1, sizeof *l)) == NULL || (l->be = calloc(k, sizeof *be)) == NULL) {
		free(l);
		util_err(err, "pipeline: out of memory");
		return NULL;
	}
	memcpy(l->be, be, k * sizeof *be);
	l->k = k;
	l->fd[0] = l->fd[1] = -1;
	l->from = l->to = -1;
	if (wants_nccl(dev, k)) {
		if (nccl_open(l, err) == 0)
			return l;
	} else if (pipe(l->fd) == 0) {
		l->ops = &pipe_ops;
		return l;
	} else
		util_err(err, "pipeline: pipe: %s", strerror(errno));
	free(l->be);
	free(l);
	return NULL;
}

void
pipeline_link_close(struct pipeline_link *l)
{
	if (l == NULL)
		return;
	if (l->ops != NULL)
		l->ops->close(l);
	free(l->be);
	free(l);
}

const char *
pipeline_link_errmsg(const struct pipeline_link *l)
{
	return l->err;
}

const char *
pipeline_link_kind(const struct pipeline_link *l)
{
	return l->ops->kind;
}

int
pipeline_pass(struct pipeline_link *l, int s, const float *src, float *dst, size_t n)
{
	if (s < 0 || s + 1 >= l->k)
		return util_err(l->err, "pipeline: no stage after stage %d of %d", s, l->k);
	if (l->ops->begin(l) != 0)
		return -1;
	if (l->ops->send(l, s, src, n, s + 1) != 0 || l->ops->recv(l, s + 1, dst, n, s) != 0) {
		char why[UTIL_ERRLEN];

		memcpy(why, l->err, sizeof why);
		l->ops->end(l);		/* an NCCL group must be closed */
		memcpy(l->err, why, sizeof why);
		return -1;
	}
	return l->ops->end(l);
}
