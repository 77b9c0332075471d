/*
 * metrics: counters, gauges and histograms with fixed buckets, keyed by
 * label values, rendered in Prometheus's text exposition format (0.0.4).
 * Thread-safe: one mutex per registry; a series is found by a linear scan
 * of its family (families are meant to have few series).
 */
#ifndef MEMRA_METRICS_H
#define MEMRA_METRICS_H

#include <stddef.h>

#define METRICS_MAX_LABELS 4
#define METRICS_MAX_BUCKETS 32

enum metrics_type {
	METRICS_COUNTER,
	METRICS_GAUGE,
	METRICS_HISTOGRAM,
};

struct metrics;

/* An empty registry; NULL: out of memory.  metrics_free(NULL) is a no-op. */
struct metrics *metrics_new(void);
void	metrics_free(struct metrics *);

/*
 * Register a family: name (a counter's ends in _total), help text, up to
 * METRICS_MAX_LABELS label names separated by commas ("" for none) and, for
 * a histogram, nb ascending bucket bounds (+Inf is implied).  A family
 * without labels has its one series (at 0) from the start.  Returns the
 * family's handle (>= 0), or -1 on a bad name, bounds or label list, a
 * name registered twice, or out of memory.
 */
int	metrics_family(struct metrics *, enum metrics_type, const char *name, const char *help,
	    const char *labels, const double *bounds, int nb);

/*
 * Change the series of family f with label values v[] (as many as the
 * family has labels; NULL when it has none), made at its first use:
 * metrics_add adds x to a counter (x >= 0) or a gauge, metrics_set sets a
 * gauge, metrics_observe adds an observation to a histogram.  -1 on a
 * wrong family or type, a negative counter increment, or out of memory.
 */
int	metrics_add(struct metrics *, int f, const char *const *v, double x);
int	metrics_set(struct metrics *, int f, const char *const *v, double x);
int	metrics_observe(struct metrics *, int f, const char *const *v, double x);

/* A series' value now (a histogram's count); 0 when it does not exist. */
double	metrics_get(struct metrics *, int f, const char *const *v);

/*
 * Every family in registration order, HELP and TYPE lines then its series
 * (a histogram's cumulative _bucket lines with le, _sum and _count), into
 * a malloc'd NUL-terminated buffer (*len its length).  NULL: out of memory.
 */
char	*metrics_render(struct metrics *, size_t *len);

/* The process's own numbers, from /proc/self. */
struct metrics_proc {
	double	cpu_seconds;	/* user + system */
	double	rss_bytes, vsize_bytes;
	double	open_fds, max_fds;
	double	start_time;	/* seconds since the epoch */
	double	threads;
};

/* 0, or -1 when /proc could not be read (fields left 0). */
int	metrics_proc_read(struct metrics_proc *);

#endif
