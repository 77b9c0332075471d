/*
 * schedboot: a served model's lane in the scheduler (lib/schedule) as the
 * server sets it up and reports it: the speculative K rule, the boot
 * lines that say what its sessions, its prefix cache, its drafter's
 * context cache and its K-by-load policy cost, and the scheduler's notes
 * (a conversation resumed from the reuse pool, or served cold and why).
 * The text is serve's boot log, which the cookbook's proof lines and the
 * tests read: change a format only with them.
 */
#ifndef MEMRA_SCHEDBOOT_H
#define MEMRA_SCHEDBOOT_H

#include <stdio.h>

#include "model.h"
#include "schedule.h"

/* What the lines need of the server's settings. */
struct schedboot_cfg {
	int	ctx, max_sessions, reuse;
	int	k_pinned;	/* 1: MEMRA_SPEC_K given */
	long	prefix_mb;	/* -1: sized from free memory, 0: off */
};

/* A served model: its name, the model and its lane, its K (schedboot_k). */
struct schedboot_model {
	const char *name;
	const struct model *m;
	int	lane, k;
};

/*
 * Model m's (called name) K: spec_k when given (>= 0), else a DFlash drafter's block
 * less one, else 3 with an MTP head or an assistant, else 0; 0 when
 * serve_spec is 0.  0, or -1 with the reason in err (UTIL_ERRLEN): a K for
 * a model with nothing to draft with, or past a DFlash drafter's block.
 */
int	schedboot_k(const struct model *m, const char *name, int spec_k, int serve_spec, int *k,
	    char *err);

/* What drafts for model m, as the boot line says it. */
const char *schedboot_drafter(const struct model *m);

/* The stages of a bit set ("0", "0-1", "0,2") into buf[n]; buf. */
const char *schedboot_stages(unsigned set, char *buf, size_t n);

/*
 * The boot lines of model sv's sessions (f: sched_add_model's fit): what
 * each costs (a line a device for a split model), a DFlash drafter's
 * context cache, the prefix cache, and K (pinned, or the measured step
 * costs and the K each load gets).
 */
void	schedboot_lines(FILE *fp, struct sched *sc, const struct schedboot_model *sv,
	    const struct schedboot_cfg *c, const struct sched_fit *f);

/* The K-by-load policy lines of a lane of up to K drafts (kind: "dflash", "assist" or
 * "mtp") from its measured costs c, for 1..max_sessions sessions. */
void	schedboot_policy(FILE *fp, const char *name, const char *kind,
	    const struct sched_spec_cost *c, int K, int max_sessions);

/* The line of scheduler note n about model name (dspark: its drafter is DFlash's). */
void	schedboot_note(FILE *fp, const char *name, int dspark, const struct sched_note *n);

#endif
