/*
 * pipeline: a model's layers split into stages, each on a device of its
 * own (MEMRA_PP_STAGES, MEMRA_PP_DEVICES), and the link that carries a
 * step's hidden rows [rows][n_embd] from one stage to the next.
 *
 * This module knows no model: it plans the split from byte counts, names
 * the stages' devices, and moves floats between backends.  lib/model
 * opens a stage per device and runs a forward stage after stage through
 * a link (model_options.split).
 *
 * A link has two kinds behind one interface, chosen by the devices:
 * "nccl" (cuda/nccl.cu: ncclSend and ncclRecv on the two stages' streams,
 * in one NCCL group) when every stage is a CUDA device of its own, and
 * "pipe", the stand-in for everything else (CPU stages, two stages on one
 * GPU): the rows are read to the host, pass through a pipe(2) and are
 * written into the next stage's memory.  Either carries the same floats,
 * so a split changes no bit.
 */
#ifndef MEMRA_PIPELINE_H
#define MEMRA_PIPELINE_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"

/* The most stages a pipeline has. */
#define PIPELINE_MAX_STAGES 16

/* The longest device name a stage takes ("cuda:15", "cpu:scalar"). */
#define PIPELINE_DEVLEN 32

/*
 * The split of n layers of weights w[n] (bytes) into k contiguous stages
 * whose largest total is the least it can be, stage 0 carrying head0
 * bytes more (the embedding) and stage k-1 head1 more (the output head,
 * the MTP layers): first[k-1] gets the first layer of stages 1..k-1
 * (increasing, each stage at least one layer; among splits of the same
 * largest total, the one whose cuts come earliest).  0, or -1 with the
 * reason in err (UTIL_ERRLEN) when k is not in 2..min(n, PIPELINE_MAX_STAGES).
 */
int	pipeline_split(const uint64_t *w, int n, uint64_t head0, uint64_t head1, int k,
	    int *first, char *err);

/*
 * Parse list, the first layers of stages 1..k-1 as MEMRA_PP_SPLITS and
 * --pp-splits give them ("12" or "8,16,24"), into first[k-1]: increasing,
 * each in 1..n_layer-1.  0, or -1 with the reason in err.
 */
int	pipeline_parse_splits(const char *list, int k, int n_layer, int *first, char *err);

/*
 * The devices of k stages into dev[k] from list as MEMRA_PP_DEVICES and
 * --pp-devices give it: comma-separated, a number N meaning cuda:N, else
 * a device as --device takes it (cpu, cpu:scalar, cuda:N).  NULL list:
 * cuda:0..cuda:k-1 when def (the --device) is a CUDA device, else def for
 * every stage.  A list of another length than k stages is an error (a
 * split that did not happen is what the boot line rules out).  0, or -1
 * with the reason in err.
 */
int	pipeline_devices(const char *list, int k, const char *def,
	    char (*dev)[PIPELINE_DEVLEN], char *err);

/* How the boot line names device d: "devN" for cuda:N, else d itself. */
const char *pipeline_dev_tag(const char *d, char *buf, size_t n);

struct pipeline_link;

/*
 * A link between k stages whose backends are be[k] on devices dev[k] (as
 * pipeline_devices gives them): "nccl" when every device is cuda:N, each
 * N once (NULL with the reason when this build has no NCCL), else
 * "pipe".  NULL with the reason in err.  pipeline_link_close frees (NULL
 * is a no-op); the backends must outlive the link.
 */
struct pipeline_link *pipeline_link_open(struct backend **be, char (*dev)[PIPELINE_DEVLEN],
	    int k, char *err);
void	pipeline_link_close(struct pipeline_link *);
const char *pipeline_link_errmsg(const struct pipeline_link *);
/* "nccl" or "pipe". */
const char *pipeline_link_kind(const struct pipeline_link *);

/*
 * Stage s sends n floats at src (its backend's memory) and stage s+1
 * receives them into dst (its backend's memory), as one exchange: NCCL's
 * group of a send and a recv, queued after the work already queued on the
 * sending stage and before the work queued next on the receiving one.
 * 0, or -1 with pipeline_link_errmsg set.
 */
int	pipeline_pass(struct pipeline_link *, int s, const float *src, float *dst, size_t n);

#endif
