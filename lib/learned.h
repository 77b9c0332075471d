/*
 * learned: the learned slots of an adaptive trimmed draft head
 * (MEMRA_GEMMA_TRIM_ADAPT).
 *
 * A head trimmed to a rank list drafts only the listed tokens.  Its N
 * learned slots hold tokens outside the list that the target emitted,
 * chosen by one rule:
 *   - every committed token outside the rank list counts a miss (a count
 *     per token, saturating at UINT32_MAX, never decaying; a token in a
 *     slot keeps counting);
 *   - a missed token in no slot takes the first empty slot (slots fill
 *     in order 0, 1, ...);
 *   - when every slot is full it takes the weakest slot (the lowest
 *     count, the lowest slot on ties) once its count passes that slot's
 *     (strictly greater); the token it evicts keeps its count, so it can
 *     come back the same way.
 * The rule reads the committed tokens alone, so the slots after a run are
 * a function of the tokens observed, in order.  No more than the tokens
 * outside the list can ever fill: N is cut to that many.
 *
 * The file, <rank list>.learned: one line a filled slot, "ID COUNT"
 * (decimal, one space, a final newline), the strongest first (count
 * descending, the lower id on ties).  Loading fills slots 0.. in file
 * order and sets each token's count; with more lines than slots the first
 * N are kept (the strongest, as written).  Strict: a blank line, anything
 * but "digits space digits" (a CRLF line end is accepted), an id outside
 * the vocabulary or in the rank list, a repeated id or a count of 0 is an
 * error naming the line.  An empty file holds no slot.
 *
 * Thread safety: every call but learned_new / learned_free locks the
 * structure (a step loop observes while a signal thread may save);
 * saves are serialized among themselves.
 */
#ifndef MEMRA_LEARNED_H
#define MEMRA_LEARNED_H

#include <stddef.h>
#include <stdint.h>

struct ranks;

#define LEARNED_MAX	65536	/* MEMRA_GEMMA_TRIM_ADAPT's bound */
#define LEARNED_SAVE_S	60.0	/* learned_due: seconds between periodic saves */

struct learned;

/*
 * n_slots (1..LEARNED_MAX) slots beside rank list r (ids below n_vocab,
 * checked), cut to the tokens outside it (n_vocab - r->n).  NULL with err
 * (UTIL_ERRLEN).  learned_free frees (NULL is a no-op).
 */
struct learned *learned_new(int n_slots, const struct ranks *r, int64_t n_vocab, char *err);
void	learned_free(struct learned *);

/* The slots (n_slots as cut), and how many are filled now. */
int	learned_slots(struct learned *);
int	learned_filled(struct learned *);

/*
 * The committed tokens tok[n], in order, through the rule above; tokens
 * outside [0, n_vocab) are skipped.  Returns how many times a slot took
 * a token.
 */
int	learned_observe(struct learned *, const int32_t *tok, int n);

/*
 * The filled slots' tokens into ids[learned_slots()] (slot order) when the
 * slots changed since *version (0 before the first call), which is then
 * updated: returns how many are filled, or -1 when nothing changed (ids
 * untouched).
 */
int	learned_copy(struct learned *, int32_t *ids, uint64_t *version);

/* Token tok's count of misses (0 for one never missed). */
uint32_t learned_count(struct learned *, int32_t tok);

/*
 * Fill the slots of a fresh structure (nothing observed yet) from len
 * bytes of a .learned file.  *n_lines gets its lines.  0, or -1 with
 * "line N: why" in err (the slots then stay empty).
 */
int	learned_parse(struct learned *, const char *buf, size_t len, int *n_lines, char *err);

/*
 * learned_parse of the file at path: 0 loaded, 1 no file there (nothing
 * changed, *n_lines 0), or -1 with "path: why" in err.
 */
int	learned_load(struct learned *, const char *path, int *n_lines, char *err);

/*
 * Write the filled slots to path atomically (util_ofile: a temporary name
 * beside it, fsync, rename), in the file's format, when a count or a slot
 * changed since the last write or load.  Returns 1 written (*n_written
 * slots), 0 nothing changed, or -1 with "path: why" in err (no file left
 * behind; the changes stay unsaved, for the next call).
 */
int	learned_save(struct learned *, const char *path, int *n_written, char *err);

/*
 * Whether a periodic save is due at time now (seconds, monotonic): the
 * first call starts the clock; then 1 once LEARNED_SAVE_S have passed since
 * the last time it said 1 (or the start) and something changed since the
 * last write, which restarts the clock.
 */
int	learned_due(struct learned *, double now);

#endif
