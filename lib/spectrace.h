/*
 * spectrace: acceptance traces of speculative decoding, what run-spec
 * records (--trace-out) and replays on another model (--trace-in).
 *
 * A trace is JSON lines, in sections, one per draft depth K.  A section
 * is a header line and then one line per prompt, in order:
 *
 *   {"memra_spec_trace": 1, "K": 3, "drafter": "mtp", "model": "A",
 *    "n_vocab": 8192, "n": 64, "temp": 0, "prompts": 2}
 *   {"prompt": 0, "ids": [323, 283], "rounds": [[3, 2], [3, 3], [1, 0]],
 *    "tokens": 64, "out": [13, 40, ...]}
 *
 * (each object on one line).  The header: the format's version (1), the
 * drafts a round K (1..SPEC_KMAX), the drafter that drafted ([a-z0-9-],
 * 1 to 31 characters: mtp, mtp-masked, nextn, assistant, dflash,
 * dflash2), the model as it was named (no control characters, at most
 * 1024 bytes), its vocabulary's size, the new tokens a prompt was given
 * (n, 1..1000000), the sampling temperature and how many prompt lines
 * follow.  A prompt line: its index (0, 1, ... in the section), the
 * prompt's token ids (at least one, each below n_vocab), its rounds in
 * order, each [k, a]: k drafts verified (0..K; 0 is a plain step at the
 * end) of which the first a were accepted, so the round kept a + 1
 * tokens; the tokens kept in all (what a stop token left, counting the
 * prefill's first: tokens), and their ids (out; absent where they are not
 * known: a synthetic trace, t/tools/spec-trace-synth.c).  The rounds keep
 * S = 1 + sum(a + 1) tokens, at most n; tokens is at most S and, after
 * one round or more, at least S less the last round's.  Members other
 * than these are ignored; lines of white space only are skipped.  No
 * two sections have the same K.
 */
#ifndef MEMRA_SPECTRACE_H
#define MEMRA_SPECTRACE_H

#include <stdint.h>
#include <stdio.h>

#define SPECTRACE_VERSION	1
#define SPECTRACE_NMAX		1000000	/* "n": run-gen's and run-spec's -n bound */
#define SPECTRACE_MODELMAX	1024	/* bytes of "model" */

struct spectrace_round {
	int	k;		/* drafts verified */
	int	accepted;	/* of them accepted: the round kept accepted + 1 tokens */
};

struct spectrace_prompt {
	int32_t	*ids;		/* [n_ids] the prompt */
	int	n_ids;
	struct spectrace_round *rounds;	/* [n_rounds] */
	int	n_rounds;
	int32_t	*out;		/* [tokens] the tokens kept, or NULL: not known */
	int	tokens;
};

struct spectrace_section {
	int	K, n_vocab, n;
	double	temp;
	char	drafter[32];
	char	*model;
	struct spectrace_prompt *p;	/* [n_prompts] */
	int	n_prompts;
	int	line;		/* its header's line in the file read; 0 when built */
};

struct spectrace {
	struct spectrace_section *sec;	/* [n_sec] */
	int	n_sec;
	int	open;		/* building: a prompt begun and not ended */
	long	kept;		/* building: the tokens its rounds keep so far */
};

/*
 * Read a trace from len bytes (untrusted; need not be NUL-terminated).
 * Returns it (free with spectrace_free), or NULL with "line L: why" in
 * err (UTIL_ERRLEN), e.g. `line 4: "rounds"[2]: 4 accepted of 3 drafts`;
 * a section short of its prompts is "line L (end of file): ..." or named
 * at the next header.
 */
struct spectrace *spectrace_parse(const char *buf, size_t len, char *err);
void	spectrace_free(struct spectrace *);

/*
 * Building a trace: spectrace_new (NULL when out of memory), then for each
 * section spectrace_section (K, n_vocab, n, temp, drafter and model of h;
 * its prompts and line are not read), and for each of its prompts
 * spectrace_prompt (its n ids, copied), spectrace_round for each round and
 * spectrace_end (the count of tokens kept and their ids, copied; out NULL:
 * not known, no "out" written).  Each checks what the parser
 * checks, so what is built is what spectrace_write writes and
 * spectrace_parse reads back: 0, or -1 with the reason in err (UTIL_ERRLEN).
 */
struct spectrace *spectrace_new(void);
int	spectrace_section(struct spectrace *, const struct spectrace_section *h, char *err);
int	spectrace_prompt(struct spectrace *, const int32_t *ids, int n, char *err);
int	spectrace_round(struct spectrace *, int k, int accepted, char *err);
int	spectrace_end(struct spectrace *, const int32_t *out, int tokens, char *err);

/* The section of draft depth K, or NULL. */
const struct spectrace_section *spectrace_find(const struct spectrace *, int K);

/* Write t as the format above (a prompt still open is left out); the
 * caller checks fp for errors. */
void	spectrace_write(const struct spectrace *, FILE *fp);

#endif
