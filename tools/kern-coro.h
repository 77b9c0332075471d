/*
 * kern-coro.h: a CUDA block's threads as coroutines (ucontext) on one OS
 * thread, for the CPU runs of kernels' own device code
 * (tools/matvec-qkt-kern.cc, tools/moe-gemm-kern.cc; not built by make).
 * Each thread runs until it reaches a collective: __syncthreads (all the
 * block's live threads there, then all go on) or one of the warp's (the
 * includer's: a thread yields KC_WARP + kind; when its warp's 32 lanes
 * are all at that kind, kc_warp(w, kind) computes their results and sets
 * them running; a warp with some lanes at a collective and others
 * elsewhere, or no thread able to go on, is a divergence and aborts).
 * cp.async copies (cp_async: alignment and size checked) land at the wait
 * that covers their group (kc_wait, kc_wait_all), or with eager set at
 * their issue, so a read before its wait, or a stage refilled while
 * another lane still reads it, is caught.
 *
 * The includer defines KC_NAME (its name, for die), KC_NTH (threads a
 * block) and KC_LANE (the fields its collectives keep a thread, a struct
 * body), and the idx3 threadIdx and blockIdx its device code reads
 * (tools/kern-cuda.h's), before
 * including this; and, after, kc_warp(w, kind) and kc_what(kind) (the
 * collective's name: "an mma").
 */
#ifndef MEMRA_KERN_CORO_H
#define MEMRA_KERN_CORO_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>
#include <vector>

enum { KC_STK = 1 << 16, KC_RUN = 0, KC_SYNC, KC_DONE, KC_WARP };

struct cpy { uint8_t *dst; const uint8_t *src; int sz, n; };

struct thr {
	ucontext_t ctx;
	int state;
	KC_LANE
	std::vector<cpy> open;		/* cp.async since the last commit */
	std::vector<std::vector<cpy> > groups;	/* committed, not yet landed */
};

static thr th[KC_NTH];
static ucontext_t sched;
static int cur;
static char *stacks;
static void (*job)(void *);
static void *job_arg;
static int eager;	/* 1: copies land at their issue (the earliest they may) */

static void kc_warp(int w, int kind);
static const char *kc_what(int kind);

static void
die(const char *why)
{
	fprintf(stderr, "%s: block (%u, %u) thread %d: %s\n", KC_NAME, blockIdx.x, blockIdx.y,
	    cur, why);
	abort();
}

static void
yield(int state)
{
	th[cur].state = state;
	swapcontext(&th[cur].ctx, &sched);
}

static void
__syncthreads(void)
{
	yield(KC_SYNC);
}

static void
land(std::vector<cpy> &v)
{
	for (const cpy &x : v) {
		memcpy(x.dst, x.src, (size_t)x.n);
		memset(x.dst + x.n, 0, (size_t)(x.sz - x.n));
	}
	v.clear();
}

/* cp.async of sz bytes (n from src, the rest zeros) */
static void
cp_async(void *dst, const void *src, int sz, int n)
{
	if (((uintptr_t)dst | (uintptr_t)src) & (uintptr_t)(sz - 1))
		die("cp.async misaligned");
	if (n < 0 || n > sz)
		die("cp.async source size");
	th[cur].open.push_back(cpy{ (uint8_t *)dst, (const uint8_t *)src, sz, n });
	if (eager)
		land(th[cur].open);
}

static void
kc_commit(void)
{
	th[cur].groups.push_back(th[cur].open);
	th[cur].open.clear();
}

/* all but the newest keep committed groups of this thread's copies landed */
static void
kc_wait(size_t keep)
{
	auto &G = th[cur].groups;

	while (G.size() > keep) {
		land(G.front());
		G.erase(G.begin());
	}
}

/* every copy of this thread's landed (cp.async.wait_all: a commit, then all) */
static void
kc_wait_all(void)
{
	kc_commit();
	kc_wait(0);
}

static void
entry(void)
{
	job(job_arg);
	if (!th[cur].open.empty() || !th[cur].groups.empty()) {
		/* copies never waited for: harmless on the device only if never read */
		th[cur].open.clear(), th[cur].groups.clear();
	}
	yield(KC_DONE);
}

/* Run job(arg) as block (bx, by) of KC_NTH threads to the end. */
static void
block(unsigned bx, unsigned by, void (*fn)(void *), void *arg)
{
	if (stacks == NULL && (stacks = (char *)malloc((size_t)KC_NTH * KC_STK)) == NULL)
		abort();
	job = fn, job_arg = arg, blockIdx = idx3{ bx, by, 0 };
	for (int t = 0; t < KC_NTH; t++) {
		getcontext(&th[t].ctx);
		th[t].ctx.uc_stack.ss_sp = stacks + (size_t)t * KC_STK;
		th[t].ctx.uc_stack.ss_size = KC_STK;
		th[t].ctx.uc_link = NULL;
		makecontext(&th[t].ctx, entry, 0);
		th[t].state = KC_RUN;
		th[t].open.clear(), th[t].groups.clear();
	}
	for (;;) {
		int ran = 0, live = 0, sync = 0;
		for (int t = 0; t < KC_NTH; t++)
			if (th[t].state == KC_RUN) {
				cur = t, threadIdx = idx3{ (unsigned)t, 0, 0 };
				swapcontext(&sched, &th[t].ctx);
				ran = 1;
			}
		for (int w = 0; w < KC_NTH / 32; w++) {
			int s0 = th[32 * w].state, same = 1, any = 0;
			for (int l = 0; l < 32; l++) {
				same &= th[32 * w + l].state == s0;
				any |= th[32 * w + l].state >= KC_WARP;
			}
			if (any && same)
				kc_warp(w, s0 - KC_WARP), ran = 1;
			else if (any) {
				int k = KC_WARP;
				for (int l = 31; l >= 0; l--)	/* the first lane's at one */
					k = th[32 * w + l].state >= KC_WARP ? th[32 * w + l].state : k;
				char why[64];
				snprintf(why, sizeof why, "a warp's lanes apart at %s", kc_what(k - KC_WARP));
				cur = 32 * w, die(why);
			}
		}
		for (int t = 0; t < KC_NTH; t++) {
			live += th[t].state != KC_DONE;
			sync += th[t].state == KC_SYNC;
		}
		if (live == 0)
			return;
		if (sync == live) {	/* every live thread at the barrier */
			for (int t = 0; t < KC_NTH; t++)
				if (th[t].state == KC_SYNC)
					th[t].state = KC_RUN;
			ran = 1;
		}
		if (!ran)
			die("no thread can go on");
	}
}

#endif
