/*
 * NCCL between the devices of one process driven by one thread: lib/pipeline's
 * link between pipeline stages.  Built with NCCL when GNUmakefile finds nccl.h
 * (MEMRA_HAVE_NCCL); without it gpu_nccl_open says so and nothing else runs.
 */
#include <stdio.h>
#include <stdlib.h>

#include "gpu_impl.cuh"

#ifdef MEMRA_HAVE_NCCL
#include <nccl.h>

struct gpu_nccl {
	int	n;
	struct gpu **g;		/* [n] rank s's device and stream */
	ncclComm_t *comm;	/* [n] */
	char	err[GPU_ERRLEN];
};

static int
nfail(struct gpu_nccl *nc, const char *call, ncclResult_t r)
{
	snprintf(nc->err, sizeof nc->err, "nccl: %s: %s", call, ncclGetErrorString(r));
	return -1;
}

#define NCCL_CHECK(nc, call) do {					\
	ncclResult_t r_ = (call);					\
	if (r_ != ncclSuccess)						\
		return nfail((nc), #call, r_);				\
} while (0)

extern "C" struct gpu_nccl *
gpu_nccl_open(struct gpu **g, int n, char *err, size_t errlen)
{
	struct gpu_nccl *nc = (struct gpu_nccl *)calloc(1, sizeof *nc);
	int *dev = (int *)calloc(n, sizeof *dev);
	ncclResult_t r;

	if (nc == NULL || dev == NULL || (nc->g = (struct gpu **)calloc(n, sizeof *g)) == NULL ||
	    (nc->comm = (ncclComm_t *)calloc(n, sizeof *nc->comm)) == NULL) {
		snprintf(err, errlen, "nccl: out of memory");
		goto fail;
	}
	nc->n = n;
	for (int s = 0; s < n; s++)
		nc->g[s] = g[s], dev[s] = g[s]->dev;
	if ((r = ncclCommInitAll(nc->comm, n, dev)) != ncclSuccess) {
		snprintf(err, errlen, "nccl: ncclCommInitAll over %d devices: %s", n,
		    ncclGetErrorString(r));
		free(nc->comm), nc->comm = NULL;
		goto fail;
	}
	free(dev);
	return nc;
fail:
	free(dev);
	gpu_nccl_close(nc);
	return NULL;
}

extern "C" void
gpu_nccl_close(struct gpu_nccl *nc)
{
	if (nc == NULL)
		return;
	for (int s = 0; nc->comm != NULL && s < nc->n; s++)
		if (nc->comm[s] != NULL)
			ncclCommDestroy(nc->comm[s]);
	free(nc->comm);
	free(nc->g);
	free(nc);
}

extern "C" const char *
gpu_nccl_errmsg(const struct gpu_nccl *nc)
{
	return nc->err;
}

extern "C" int
gpu_nccl_group(struct gpu_nccl *nc, int begin)
{
	if (begin)
		NCCL_CHECK(nc, ncclGroupStart());
	else
		NCCL_CHECK(nc, ncclGroupEnd());
	return 0;
}

extern "C" int
gpu_nccl_send(struct gpu_nccl *nc, int rank, const float *d_src, size_t n, int peer)
{
	NCCL_CHECK(nc, ncclSend(d_src, n, ncclFloat32, peer, nc->comm[rank],
	    nc->g[rank]->stream));
	return 0;
}

extern "C" int
gpu_nccl_recv(struct gpu_nccl *nc, int rank, float *d_dst, size_t n, int peer)
{
	NCCL_CHECK(nc, ncclRecv(d_dst, n, ncclFloat32, peer, nc->comm[rank],
	    nc->g[rank]->stream));
	return 0;
}

#else	/* no NCCL: the link refuses in one line */

struct gpu_nccl {
	char	err[GPU_ERRLEN];
};

extern "C" struct gpu_nccl *
gpu_nccl_open(struct gpu **g, int n, char *err, size_t errlen)
{
	snprintf(err, errlen, "nccl: built without NCCL (no nccl.h where the build looked: "
	    "install it and rebuild, or put two stages on one device for the pipe link)");
	return NULL;
}

extern "C" void
gpu_nccl_close(struct gpu_nccl *nc)
{
	free(nc);
}

extern "C" const char *
gpu_nccl_errmsg(const struct gpu_nccl *nc)
{
	return nc->err;
}

extern "C" int
gpu_nccl_group(struct gpu_nccl *nc, int begin)
{
	return -1;
}

extern "C" int
gpu_nccl_send(struct gpu_nccl *nc, int rank, const float *d_src, size_t n, int peer)
{
	return -1;
}

extern "C" int
gpu_nccl_recv(struct gpu_nccl *nc, int rank, float *d_dst, size_t n, int peer)
{
	return -1;
}
#endif
