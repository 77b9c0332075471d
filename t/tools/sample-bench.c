/*
 * sample-bench: the host sampler's time a pick over a full vocabulary (a
 * benchmark, not a test; tools/abba times two builds of it against each
 * other).
 *   sample-bench greedy|topk|full [picks]
 * greedy: temp 0; topk: temp 0.8, top-k 40, top-p 0.95; full: temp 1, no
 * filter.  Logits: 248320 of them (the Qwen3.5 vocabulary), a fixed
 * pseudo-random spread like a model's (a few within 10 of the top, most 15
 * to 30 below), shifted a little each pick.  Prints the mean microseconds a
 * pick and a checksum of the ids picked (two builds that pick alike print
 * the same sum).  Exit 0, 1 on a failure, 2 on misuse.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sample.h"
#include "util.h"

static double
now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

int
main(int argc, char **argv)
{
	enum { NV = 248320 };
	struct sample_params p;
	char err[UTIL_ERRLEN];
	int picks = argc > 2 ? atoi(argv[2]) : 200;
	float *lg = malloc(NV * sizeof *lg);
	uint64_t z = 0x9e3779b97f4a7c15ULL;
	long sum = 0;

	if (argc < 2 || picks < 1 || lg == NULL) {
		fprintf(stderr, "usage: sample-bench greedy|topk|full [picks]\n");
		return 2;
	}
	sample_defaults(&p);
	if (strcmp(argv[1], "topk") == 0)
		p.temp = 0.8f, p.top_k = 40, p.top_p = 0.95f;
	else if (strcmp(argv[1], "full") == 0)
		p.temp = 1;
	else if (strcmp(argv[1], "greedy") != 0) {
		fprintf(stderr, "sample-bench: '%s': not greedy, topk or full\n", argv[1]);
		return 2;
	}
	for (int i = 0; i < NV; i++) {
		z = z * 6364136223846793005ULL + 1442695040888963407ULL;
		double u = (double)(z >> 11) / 9007199254740992.0;
		lg[i] = (float)(-30 * u * u + (u > 0.9995 ? 25 : 0));
	}
	struct sampler *s = sample_new(&p, NV, err);
	if (s == NULL) {
		fprintf(stderr, "sample-bench: %s\n", err);
		return 1;
	}
	double t0 = now();
	for (int r = 0; r < picks; r++) {
		lg[(r * 7919) % NV] += 0.5f;
		sum += sample_next(s, lg, NULL, 0, 0, r);
	}
	printf("pick_us\t%.1f\tchecksum\t%ld\n", (now() - t0) / picks * 1e6, sum);
	sample_free(s);
	free(lg);
	return 0;
}
