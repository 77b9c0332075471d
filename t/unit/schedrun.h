/*
 * schedrun: what the scheduler's unit tests share: a scheduler with its
 * worker thread (sched_wait, then one sched_step, until shut down).
 */
#ifndef MEMRA_T_SCHEDRUN_H
#define MEMRA_T_SCHEDRUN_H

#include <pthread.h>

#include "schedule.h"

/* The worker thread of scheduler arg. */
static inline void *
worker(void *arg)
{
	struct sched *s = arg;

	while (sched_wait(s) == 0)
		sched_step(s);
	return NULL;
}

/* A scheduler, its worker thread and the lane of the model under test. */
struct run {
	struct sched *s;
	pthread_t w;
	int	lane;
};

/* Shut r's scheduler down, join its worker and free it. */
static inline void
run_stop(struct run *r)
{
	sched_shutdown(r->s);
	pthread_join(r->w, NULL);
	sched_free(r->s);
}

#endif
