/*
 * ranks: FR-Spec rank lists, the d2t map of a masked draft head.
 *
 * A rank list is n distinct absolute token ids of the target vocabulary,
 * most frequent first: draft row i of a masked head is target token
 * ids[i] (d2t[i], "draft to target").  Two interchangeable files hold one:
 *   .txt   one decimal id per line, nothing else (a final newline optional)
 *   .gguf  a GGUF whose tensor `d2t` is I32[n] (ours) or I64[n] (the
 *          EAGLE3 / llama.cpp convention), absolute ids in either case
 * The reader tells them apart by the GGUF magic, not by the name.  Both
 * are strict: a blank line, anything but decimal digits on a line (a
 * CRLF line end is accepted), an id out of the vocabulary or a repeated
 * id is an error naming the line (or index) where it is.
 *
 * The gather half turns a weight's rows into a masked head's rows: row i
 * of the result is row ids[i] of the source, bytes copied, never
 * requantized, so a chunk of rows at a time can be produced and written
 * (a head of any size streams through a small buffer).
 */
#ifndef MEMRA_RANKS_H
#define MEMRA_RANKS_H

#include <stddef.h>
#include <stdint.h>

struct backend;
struct backend_weight;
struct gguf;

/* The GGUF metadata key holding the target vocabulary size a .gguf rank
 * list was derived for (UINT32; optional, checked when present). */
#define RANKS_KEY_VOCAB	"frspec.vocab_size"

/* A loaded rank list.  ranks_free releases it (NULL is a no-op). */
struct ranks {
	int32_t	*ids;		/* [n] absolute target ids, most frequent first */
	int64_t	n;
	int64_t	n_vocab;	/* vocabulary it was checked against; 0 unknown */
};

/*
 * Load a rank list from path (.txt or .gguf; "-" reads stdin).  n_vocab > 0
 * bounds the ids to [0, n_vocab) and must equal the file's RANKS_KEY_VOCAB
 * when it has one; n_vocab 0 only asks ids to be >= 0.  Returns a list
 * (caller frees with ranks_free), or NULL with "path: why" in err
 * (UTIL_ERRLEN), e.g. "ranks.txt: line 7: id 9000 is outside the
 * vocabulary (8192 tokens)".
 */
struct ranks *ranks_load(const char *path, int64_t n_vocab, char *err);
void	ranks_free(struct ranks *);

/*
 * Parse len bytes of .txt rank list (need not be NUL-terminated).  Same
 * checks and result as ranks_load; messages start at "line N: ...".
 */
struct ranks *ranks_parse_txt(const char *buf, size_t len, int64_t n_vocab, char *err);

/*
 * The rank list of an open GGUF: its `d2t` tensor (I32 or I64, one dim),
 * read through gguf_read_data so streams work.  Same checks as ranks_load;
 * messages start at "tensor 'd2t': ...".
 */
struct ranks *ranks_from_gguf(struct gguf *g, int64_t n_vocab, char *err);

/*
 * Check ids[n]: n >= 1, every id in [0, n_vocab) (n_vocab 0: >= 0), no
 * repeats.  0, or -1 with "index I: why" in err.  The .txt reader reports
 * index I as line I+1.
 */
int	ranks_check(const int32_t *ids, int64_t n, int64_t n_vocab, char *err);

/*
 * Write ids[n] atomically (util_ofile: a temporary name, fsync, rename;
 * "-" is stdout): as text, one id per line; or as a one-tensor GGUF v3
 * (alignment 32, tensor `d2t` I32[n]) with RANKS_KEY_VOCAB when
 * n_vocab > 0.  0, or -1 with "path: why" in err; no file is left on
 * failure.
 */
int	ranks_write_txt(const char *path, const int32_t *ids, int64_t n, char *err);
int	ranks_write_gguf(const char *path, const int32_t *ids, int64_t n, int64_t n_vocab,
	    char *err);

/*
 * The byte-level gather: rows i0..i0+m-1 of the masked head, in rank order.
 * dst[k] (row_size bytes each) = src row ids[i0 + k], where src holds
 * n_src rows of row_size bytes (any ggml type: rows are whole blocks).
 * 0, or -1 with err when a range is wrong or an id is not a row of src.
 */
int	ranks_gather(void *dst, const void *src, size_t row_size, int64_t n_src,
	    const int32_t *ids, int64_t i0, int64_t m, char *err);

/*
 * The load-time trim (MEMRA_FRSPEC_TRIM): a masked head for backend be,
 * made from the host bytes of a full head (n_src rows of type/ne0, e.g.
 * the mapped output.weight of a GGUF or the converted lm_head of a
 * checkpoint).  Gathers the rows of r into a malloc'd buffer *buf and
 * initializes *w over it (ne1 = r->n, scale as given).  The caller
 * releases w (backend_weight_release) before freeing *buf: the CPU
 * backend reads it in place.  0, or -1 with err (nothing to free then).
 */
int	ranks_head_init(struct backend *be, struct backend_weight *w, void **buf,
	    const struct ranks *r, int type, int64_t ne0, int64_t n_src,
	    const void *src, float scale, char *err);

/*
 * The external draft attach (MEMRA_MTP_DRAFT, MODEL+draft.gguf): check that
 * the open draft GGUF d fits a trunk and return its d2t map.  Checks, each
 * an error naming the key or tensor: general.architecture equals arch;
 * <arch>.embedding_length equals n_embd; the MTP block is blk.<block>
 * (tensor blk.<block>.nextn.eh_proj.weight); token_embd.weight is
 * [n_vocab][n_embd]; output.weight is [n][n_embd] where n is d2t's length;
 * then ranks_from_gguf(d, n_vocab).  NULL with err on a mismatch.
 */
struct ranks *ranks_from_draft(struct gguf *d, const char *arch, int64_t n_embd,
	    int64_t n_vocab, int64_t block, char *err);

/*
 * Map a draft row back to the target: the target id of draft id d, or -1
 * when d is outside [0, n).
 */
int32_t	ranks_target(const struct ranks *, int64_t d);

/*
 * The draft's greedy choice over a masked head's logits[n] (draft row
 * order), as a target id: argmax, the lower target id on ties (what the
 * argmax over the full-vocabulary canvas would pick).  -1 when no logit
 * is finite.
 */
int32_t	ranks_argmax(const struct ranks *, const float *logits);

/*
 * Scatter masked logits[n] onto a full-vocabulary canvas full[n_vocab]:
 * -INFINITY everywhere, logits[i] at ids[i].  For samplers that want the
 * full distribution.  -1 when an id is not below n_vocab.
 */
int	ranks_scatter(const struct ranks *, const float *logits, float *full, int64_t n_vocab);

#endif
