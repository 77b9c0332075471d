#include "schedboot.h"

#include <string.h>

#include "prefix.h"
#include "util.h"

int
schedboot_k(const struct model *m, const char *name, int spec_k, int serve_spec, int *k,
    char *err)
{
	const struct model_hparams *dh = model_dflash(m);
	int any = dh != NULL || model_has_assist(m) || model_hparams(m)->n_mtp > 0;

	*k = spec_k >= 0 ? spec_k : dh != NULL ? dh->block - 1 : any ? 3 : 0;
	if (*k > 0 && !any)
		return util_err(err, "MEMRA_SPEC_K %d: model '%s' has no MTP head or drafter to draft "
		    "with", *k, name);
	if (dh != NULL && *k > dh->block - 1)
		return util_err(err, "MEMRA_SPEC_K %d: the DFlash drafter drafts at most %d tokens a "
		    "round (its block of %d)", *k, dh->block - 1, dh->block);
	if (!serve_spec)
		*k = 0;
	return 0;
}

const char *
schedboot_drafter(const struct model *m)
{
	const struct model_hparams *dh = model_dflash(m);

	if (dh != NULL)
		return dh->sel_topk ? "DFlash2 speculative decode for greedy requests" :
		    "DFlash speculative decode for greedy requests";
	return model_has_assist(m) ? "assistant speculative decode for greedy requests" :
	    "MTP speculative decode for greedy requests";
}

const char *
schedboot_stages(unsigned set, char *buf, size_t n)
{
	size_t len = 0;

	buf[0] = '\0';
	for (int a = 0; a < 32 && len < n; a++) {
		int b = a;

		if (!(set & 1u << a))
			continue;
		while (b + 1 < 32 && set & 1u << (b + 1))
			b++;
		len += snprintf(buf + len, n - len, b > a ? "%s%d-%d" : "%s%d", len ? "," : "", a,
		    b);
		a = b;
	}
	return buf;
}

void
schedboot_policy(FILE *fp, const char *name, const char *kind, const struct sched_spec_cost *c,
    int K, int max_sessions)
{
	fprintf(fp, "[sched] %s: a step of m rows (ms):", name);
	for (int m = 1; m <= c->step_rows; m = m < c->step_rows && 2 * m > c->step_rows ?
	    c->step_rows : 2 * m)	/* the powers of 2 and the step's most rows */
		fprintf(fp, " %d: %.3g", m, 1e3 * c->rows[m]);
	if (strcmp(kind, "dflash") == 0)
		fprintf(fp, "; a round's drafts %.3g ms (the drafter's block and a context row)\n",
		    1e3 * c->round);
	else
		fprintf(fp, "; a draft %.3g ms%s\n", 1e3 * c->draft, strcmp(kind, "assist") == 0 ?
		    " (an assistant step)" : "");
	fprintf(fp, "[sched] %s: speculative K by load, up to %d (acceptance 0.5 until "
	    "measured):", name, K);
	for (int n = 1, last = -1; n <= max_sessions; n++) {
		int k = sched_spec_k(c, K, n);

		if (k != last)
			fprintf(fp, " %d+ sessions K=%d", n, k), last = k;
	}
	fputc('\n', fp);
}

/* The boot line of model sv's prefix cache. */
static void
cache_line(FILE *fp, struct sched *sc, const struct schedboot_model *sv,
    const struct schedboot_cfg *c, const struct sched_fit *f)
{
	struct prefix_stats ps;
	double mib = 1 << 20;

	if (sched_prefix_stats(sc, sv->lane, &ps) != 0) {
		fprintf(fp, "[sched] %s: prefix cache: off (%s)\n", sv->name, c->prefix_mb == 0 ?
		    "MEMRA_PREFIX_CACHE_MB=0" : "no memory for a block");
		return;
	}
	fprintf(fp, "[sched] %s: prefix cache: %.0f MiB%s, %d blocks of %d tokens, %.2f MiB "
	    "each (KV rows), %d snapshots, %.2f MiB each (%s)\n", sv->name, f->prefix / mib,
	    c->prefix_mb < 0 ? " (a quarter of the memory the sessions leave, at most 8 GiB on a "
	    "GPU, 1 GiB on the CPU: MEMRA_PREFIX_CACHE_MB sets it)" : "", ps.max_blocks, ps.block,
	    ps.block_bytes / mib, ps.max_snaps, ps.snap_bytes / mib, ps.snap_bytes > 0 ?
	    "the recurrent state where a prefill forward ended: each chunk's end and each "
	    "prompt's last block" : "no recurrent state: one a block");
}

/* A gemma4 lane's line where its sessions keep the sliding layers' caches as rings
 * (model_ring_rows): which caches, how many positions, how far the pool resumes. */
static void
rings_line(FILE *fp, const struct schedboot_model *sv, const struct schedboot_cfg *c)
{
	struct state_config sc;
	int R = model_ring_rows(sv->m);

	model_state_shape(sv->m, c->ctx, 1, &sc);
	if (sc.n_ring == 0)
		return;
	fprintf(fp, "[sched] %s: %d of %d KV caches (the sliding layers') rings of %d positions "
	    "(window %d + %d rows a piece - 1), the rest ctx; a conversation resumes from the "
	    "pool within %d positions of where it parked\n", sv->name, sc.n_ring, sc.n_kv, sc.ring,
	    sc.window, R, R);
}

/* A DFlash lane's line: what a session's drafter context cache takes (f's, within its
 * session's bytes) and how: its sliding layers' rings, the others' every position. */
static void
dflash_cache_line(FILE *fp, const struct schedboot_model *sv, const struct schedboot_cfg *c,
    const struct sched_fit *f)
{
	const struct model_hparams *dh = model_dflash(sv->m);
	struct state_config sc;
	char how[160];

	if (f->drafter == 0 || model_dflash_state_shape(sv->m, c->ctx, &sc) != 0)
		return;
	if (sc.n_ring == 0)
		snprintf(how, sizeof how, "every layer every position (ctx + block %d)", dh->block);
	else
		snprintf(how, sizeof how, "%d of %d layers (sliding, window %d) a ring of %d "
		    "positions%s", sc.n_ring, sc.n_kv, dh->n_swa, sc.ring, sc.n_ring < sc.n_kv ?
		    ", the rest every position (ctx + block)" : "");
	fprintf(fp, "[dspark] %s: context cache %.3g MiB a session%s: %s\n", sv->name,
	    f->drafter / (double)(1 << 20), c->reuse && sc.n_ring > 0 ? " (the pool's copy of "
	    "its rings included)" : "", how);
}

void
schedboot_lines(FILE *fp, struct sched *sc, const struct schedboot_model *sv,
    const struct schedboot_cfg *c, const struct sched_fit *f)
{
	double mib = 1 << 20;
	int n = c->max_sessions;
	char line[64];

	fprintf(fp, "[sched] %s: %d sessions x ctx %d: %.1f MiB each, %.1f MiB in all "
	    "(%.0f MiB free before; room for %d)\n", sv->name, n, c->ctx, f->session / mib,
	    f->session * n / mib, f->avail / mib, f->fit);
	for (int d = 0; model_stages(sv->m) > 1 && d < f->n_dev; d++)
		fprintf(fp, "[sched] %s: stages %s on %s: %.1f MiB a session (%.0f MiB free "
		    "before; room for %d)\n", sv->name, schedboot_stages(f->dev[d].stages, line,
		    sizeof line), f->dev[d].name, f->dev[d].session / mib, f->dev[d].avail / mib,
		    f->dev[d].fit);
	rings_line(fp, sv, c);
	dflash_cache_line(fp, sv, c, f);
	cache_line(fp, sc, sv, c, f);
	if (sv->k > 0 && c->k_pinned)
		fprintf(fp, "[sched] %s: speculative K pinned at %d (MEMRA_SPEC_K)\n", sv->name,
		    sv->k);
	else if (sv->k > 0) {
		struct sched_spec_cost cost;

		sched_spec_costs(sc, sv->lane, &cost);
		schedboot_policy(fp, sv->name, model_dflash(sv->m) != NULL ? "dflash" :
		    model_has_assist(sv->m) ? "assist" : "mtp", &cost, sv->k, n);
	}
}

void
schedboot_note(FILE *fp, const char *name, int dspark, const struct sched_note *n)
{
	if (n->kind == SCHED_NOTE_REUSE && dspark && n->spec)
		fprintf(fp, "[worker] dspark-reuse: %d committed tokens resumed (%s: of %d parked, "
		    "with the drafter's context; prefilled again from that point on)\n",
		    n->tokens, name, n->parked);
	else if (n->kind == SCHED_NOTE_REUSE)
		fprintf(fp, "[worker] %s: reuse: %d committed tokens resumed (of %d parked; "
		    "prefilled again from that point on)\n", name, n->tokens, n->parked);
	else
		fprintf(fp, "[worker] %s: reuse: served cold: %s\n", name, n->why);
}
