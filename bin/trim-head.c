/*
 * trim-head: a masked MTP draft head from a trunk GGUF and a rank list.
 * The MTP block is copied byte for byte, the LM head's ranked rows are
 * gathered in rank order (no requantization), and the d2t map is added.
 * A step35 model's NextN blocks each keep a head of their own: each one's
 * rows are gathered under its own name.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf.h"
#include "quant.h"
#include "ranks.h"
#include "util.h"

#define COPY_CHUNK	(4u << 20)	/* bytes copied at a time */
#define GATHER_ROWS	4096		/* head rows gathered at a time */

struct trim_opts {
	int64_t	count;		/* ranks expected; 0 any */
	int	verbose;
};

/* What goes into the draft, in trunk order. */
struct pick {
	int64_t	ti;		/* trunk tensor index */
	int	head;		/* the gathered head (written as output.weight) */
	const char *name;	/* name in the draft */
};

struct trim {
	struct gguf *g;
	const char *trunk;
	char	arch[64];
	int64_t	n_main, n_mtp, n_vocab;
	int64_t	head;		/* trunk index of the head's source (-1: none) */
	char	head_base[GGUF_MAX_NAME];	/* its name without ".weight" */
	int	per_block;	/* step35: each block's own head, gathered under its name */
	int64_t	*bh;		/* [n_mtp] per_block: block k's own head, or -1 (t->head's) */
	struct pick *picks;
	int64_t	npicks;
	struct ranks *r;
};

static int
usage(FILE *fp, int status)
{
	fprintf(fp, "usage: %s [-v] [-n count] trunk ranks [out | -]\n", prog);
	if (fp == stdout)
		fputs("  -n, --count N  require exactly N ranks\n"
		    "  -v, --verbose  one line per tensor on stderr\n"
		    "  -h, --help     this text\n", fp);
	return status;
}

/* An integer hparam "<arch>.<key>", or -1 when absent. */
static int64_t
hparam(struct trim *t, const char *key)
{
	char k[128];
	int64_t i, v;

	snprintf(k, sizeof k, "%s.%s", t->arch, key);
	if ((i = gguf_find_key(t->g, k)) < 0 || gguf_get_int(t->g, i, &v) != 0)
		return -1;
	return v;
}

static int64_t
tensor_named(struct trim *t, const char *fmt, int64_t blk, const char *suffix)
{
	char n[GGUF_MAX_NAME + 32];

	snprintf(n, sizeof n, fmt, blk, suffix);
	return gguf_find_tensor(t->g, n);
}

/* The head source when it is not a block's own: output.weight, else (tied) token_embd. */
static int64_t
main_head(struct trim *t, int64_t emb)
{
	int64_t h = gguf_find_tensor(t->g, "output.weight");

	return h >= 0 ? h : emb;
}

/* The rows of head h must be token_embd's (emb's): the vocabulary. */
static int
head_rows(struct trim *t, int64_t h, int64_t emb, char *err)
{
	if (gguf_tensor(t->g, h)->ne[1] != gguf_tensor(t->g, emb)->ne[1])
		return util_err(err, "%s: head '%s' has %" PRId64 " rows, token_embd %" PRId64,
		    t->trunk, gguf_tensor(t->g, h)->name, gguf_tensor(t->g, h)->ne[1],
		    gguf_tensor(t->g, emb)->ne[1]);
	return 0;
}

/* step35: each block's own head, and the main head when a block has none. */
static int
find_heads(struct trim *t, int64_t emb, char *err)
{
	t->head = -1;
	t->n_vocab = gguf_tensor(t->g, emb)->ne[1];
	if ((t->bh = calloc((size_t)t->n_mtp, sizeof *t->bh)) == NULL)
		return util_err(err, "out of memory");
	for (int64_t k = 0; k < t->n_mtp; k++) {
		t->bh[k] = tensor_named(t, "blk.%" PRId64 ".%s", t->n_main + k,
		    "nextn.shared_head_head.weight");
		if (t->bh[k] < 0 && t->head < 0)
			t->head = main_head(t, emb);
		if (head_rows(t, t->bh[k] >= 0 ? t->bh[k] : t->head, emb, err) != 0)
			return -1;
	}
	return 0;
}

/* Architecture, MTP block and the head(s) to gather. */
static int
find_block(struct trim *t, char *err)
{
	int64_t i = gguf_find_key(t->g, "general.architecture"), nb, emb;
	const char *s;
	size_t len;

	if (i < 0 || (s = gguf_get_str(t->g, i, &len)) == NULL || len == 0 || len >= sizeof t->arch)
		return util_err(err, "%s: no general.architecture", t->trunk);
	memcpy(t->arch, s, len);
	t->arch[len] = '\0';
	nb = hparam(t, "block_count");
	t->n_mtp = hparam(t, "nextn_predict_layers");
	if (t->n_mtp <= 0)
		return util_err(err, "%s: no MTP block (%s.nextn_predict_layers is absent or 0)",
		    t->trunk, t->arch);
	if (nb <= t->n_mtp)
		return util_err(err, "%s: %s.block_count %" PRId64 " leaves no trunk layers",
		    t->trunk, t->arch, nb);
	t->n_main = nb - t->n_mtp;
	if (tensor_named(t, "blk.%" PRId64 ".%s", t->n_main, "nextn.eh_proj.weight") < 0)
		return util_err(err, "%s: no MTP block: tensor 'blk.%" PRId64 ".nextn.eh_proj.weight' "
		    "is missing", t->trunk, t->n_main);
	if (gguf_find_tensor(t->g, "d2t") >= 0)
		return util_err(err, "%s: a trimmed draft already (tensor 'd2t'): trim its trunk",
		    t->trunk);
	if ((emb = gguf_find_tensor(t->g, "token_embd.weight")) < 0)
		return util_err(err, "%s: no tensor 'token_embd.weight'", t->trunk);
	t->per_block = strcmp(t->arch, "step35") == 0;
	if (t->per_block && find_heads(t, emb, err) != 0)
		return -1;
	if (!t->per_block) {
		t->head = tensor_named(t, "blk.%" PRId64 ".%s", t->n_main,
		    "nextn.shared_head_head.weight");
		if (t->head < 0)
			t->head = main_head(t, emb);
		t->n_vocab = gguf_tensor(t->g, t->head)->ne[1];
		if (head_rows(t, t->head, emb, err) != 0)
			return -1;
	}
	if (t->head >= 0) {
		s = gguf_tensor(t->g, t->head)->name;
		snprintf(t->head_base, sizeof t->head_base, "%.*s", (int)(strlen(s) - 7), s);
	}
	return 0;
}

static int
has_prefix(const char *s, const char *p)
{
	return strncmp(s, p, strlen(p)) == 0;
}

/* The draft name of trunk tensor i, or NULL when the draft leaves it out. */
static const char *
draft_name(struct trim *t, int64_t i, int *head)
{
	const char *n = gguf_tensor(t->g, i)->name;
	size_t hb = strlen(t->head_base);
	char blk[48];

	*head = i == t->head;
	for (int64_t k = 0; t->per_block && k < t->n_mtp; k++)
		if (i == t->bh[k])
			return *head = 1, n;	/* a block's own head, gathered under its name */
	if (*head)
		return "output.weight";
	if (t->head >= 0 && strncmp(n, t->head_base, hb) == 0 && strcmp(n + hb, ".scale") == 0)
		return "output.scale";
	for (int64_t k = 0; k < t->n_mtp; k++) {
		snprintf(blk, sizeof blk, "blk.%" PRId64 ".", t->n_main + k);
		if (has_prefix(n, blk))
			return n;
	}
	if (has_prefix(n, "token_embd.") || has_prefix(n, "output_norm."))
		return n;
	return NULL;	/* the trunk's layers; output.* when the block has its own head */
}

static int
plan(struct trim *t, char *err)
{
	int64_t n = gguf_n_tensors(t->g);

	if ((t->picks = calloc((size_t)n + 1, sizeof *t->picks)) == NULL)
		return util_err(err, "out of memory");
	for (int64_t i = 0; i < n; i++) {
		int head;
		const char *dn = draft_name(t, i, &head);

		if (dn != NULL)
			t->picks[t->npicks++] = (struct pick){ i, head, dn };
	}
	/* a tied head is token_embd: the draft keeps it whole before the gathered copy */
	if (t->head >= 0 && t->head == gguf_find_tensor(t->g, "token_embd.weight")) {
		memmove(t->picks + 1, t->picks, (size_t)t->npicks * sizeof *t->picks);
		t->picks[0] = (struct pick){ t->head, 0, "token_embd.weight" };
		t->npicks++;
	}
	return 0;
}

/* The gathered heads' trunk names, in the draft's order (step35's: comma-separated). */
static void
head_source(struct trim *t, char *buf, size_t n)
{
	size_t k = 0;

	buf[0] = '\0';
	for (int64_t i = 0; i < t->npicks && k < n; i++)
		if (t->picks[i].head)
			k += snprintf(buf + k, n - k, "%s%s", k ? "," : "",
			    gguf_tensor(t->g, t->picks[i].ti)->name);
}

/* The trunk's metadata (frspec.* of an earlier trim left out), then ours. */
static int
write_kv(struct trim *t, struct gguf_writer *w)
{
	const char *base = strcmp(t->trunk, "-") ? base_name(t->trunk) : "<stdin>";
	char src[4 * GGUF_MAX_NAME];
	int rc = 0;

	head_source(t, src, sizeof src);

	for (int64_t i = 0; rc == 0 && i < gguf_n_kv(t->g); i++)
		if (!has_prefix(gguf_kv_key(t->g, i), "frspec."))
			rc = gguf_writer_copy_kv(w, t->g, i);
	if (rc == 0)
		rc = gguf_writer_add_str(w, "frspec.trunk", base, strlen(base));
	if (rc == 0)
		rc = gguf_writer_add_str(w, "frspec.head_source", src, strlen(src));
	if (rc == 0)
		rc = gguf_writer_add_u32(w, "frspec.mtp_block", (uint32_t)t->n_main);
	if (rc == 0)
		rc = gguf_writer_add_u32(w, "frspec.head_vocab", (uint32_t)t->r->n);
	if (rc == 0)
		rc = gguf_writer_add_u32(w, RANKS_KEY_VOCAB, (uint32_t)t->n_vocab);
	return rc;
}

static int
write_infos(struct trim *t, struct gguf_writer *w)
{
	int64_t ne[GGUF_MAX_DIMS], d2t[1] = { t->r->n };

	for (int64_t k = 0; k < t->npicks; k++) {
		const struct gguf_tensor *x = gguf_tensor(t->g, t->picks[k].ti);

		memcpy(ne, x->ne, sizeof ne);
		if (t->picks[k].head)
			ne[1] = t->r->n;
		if (gguf_writer_add_tensor(w, t->picks[k].name, x->type, x->n_dims, ne) != 0)
			return -1;
	}
	return gguf_writer_add_tensor(w, "d2t", QUANT_I32, 1, d2t);
}

/* A tensor's bytes as they are, a chunk at a time. */
static int
copy_tensor(struct trim *t, struct gguf_writer *w, const struct gguf_tensor *x, void *buf,
    char *err)
{
	for (uint64_t off = 0; off < x->nbytes; off += COPY_CHUNK) {
		size_t n = x->nbytes - off < COPY_CHUNK ? x->nbytes - off : COPY_CHUNK;

		if (gguf_read_data(t->g, x->offset + off, buf, n) != 0)
			return util_err(err, "%s: %s", t->trunk, gguf_errmsg(t->g));
		if (gguf_writer_write(w, buf, n) != 0)
			return util_err(err, "%s", gguf_writer_errmsg(w));
	}
	return 0;
}

/* Head ti's ranked rows, GATHER_ROWS at a time, from the mapping or a copy. */
static int
gather_head(struct trim *t, struct gguf_writer *w, int64_t ti, char *err)
{
	const struct gguf_tensor *x = gguf_tensor(t->g, ti);
	size_t rs = quant_row_size(x->type, x->ne[0]);
	const void *src = gguf_tensor_data(t->g, ti);
	void *whole = NULL, *buf = malloc(rs * GATHER_ROWS);
	int rc = buf == NULL ? util_err(err, "out of memory") : 0;

	if (rc == 0 && src == NULL) {	/* a stream: hold the whole head */
		if ((whole = malloc(x->nbytes)) == NULL)
			rc = util_err(err, "out of memory for the %" PRIu64 "-byte head", x->nbytes);
		else if (gguf_read_data(t->g, x->offset, whole, x->nbytes) != 0)
			rc = util_err(err, "%s: %s", t->trunk, gguf_errmsg(t->g));
		src = whole;
	}
	for (int64_t i = 0; rc == 0 && i < t->r->n; i += GATHER_ROWS) {
		int64_t m = t->r->n - i < GATHER_ROWS ? t->r->n - i : GATHER_ROWS;

		if (ranks_gather(buf, src, rs, x->ne[1], t->r->ids, i, m, err) != 0)
			rc = -1;
		else if (gguf_writer_write(w, buf, rs * (size_t)m) != 0)
			rc = util_err(err, "%s", gguf_writer_errmsg(w));
	}
	free(whole);
	free(buf);
	return rc;
}

static int
write_data(struct trim *t, struct gguf_writer *w, int verbose, char *err)
{
	void *buf = malloc(COPY_CHUNK);
	int rc = buf == NULL ? util_err(err, "out of memory") : 0;

	for (int64_t k = 0; rc == 0 && k < t->npicks; k++) {
		const struct gguf_tensor *x = gguf_tensor(t->g, t->picks[k].ti);

		rc = t->picks[k].head ? gather_head(t, w, t->picks[k].ti, err) :
		    copy_tensor(t, w, x, buf, err);
		if (rc == 0 && verbose)
			fprintf(stderr, "%s: %-40s %-6s %s\n", prog, t->picks[k].name,
			    quant_name(x->type), t->picks[k].head ? "rows gathered" : "verbatim");
	}
	if (rc == 0 && gguf_writer_write(w, t->r->ids, (size_t)t->r->n * sizeof *t->r->ids) != 0)
		rc = util_err(err, "%s", gguf_writer_errmsg(w));
	free(buf);
	return rc;
}

static int
write_draft(struct trim *t, const char *out, int verbose, char *err)
{
	struct util_ofile *f = util_ofile_open(out, err);
	struct gguf_writer *w = f ? gguf_writer_new(f->fp) : NULL;
	int rc;

	if (f == NULL)
		return -1;
	if (w == NULL) {
		util_ofile_abort(f);
		return util_err(err, "out of memory");
	}
	rc = write_kv(t, w) == 0 && write_infos(t, w) == 0 && gguf_writer_write_header(w) == 0
	    ? 0 : util_err(err, "%s: %s", out, gguf_writer_errmsg(w));
	if (rc == 0)
		rc = write_data(t, w, verbose, err);
	if (rc == 0 && gguf_writer_finish(w) != 0)
		rc = util_err(err, "%s: %s", out, gguf_writer_errmsg(w));
	gguf_writer_free(w);
	if (rc != 0) {
		util_ofile_abort(f);
		return -1;
	}
	return util_ofile_commit(f, err);
}

/* -v's last line: the blocks, the rows, the heads they came from and their type. */
static void
summary(struct trim *t, const char *out)
{
	char src[4 * GGUF_MAX_NAME], blk[48];
	int64_t h = -1;

	head_source(t, src, sizeof src);
	for (int64_t i = 0; h < 0 && i < t->npicks; i++)
		if (t->picks[i].head)
			h = t->picks[i].ti;
	if (t->n_mtp > 1)
		snprintf(blk, sizeof blk, "blk.%" PRId64 "-%" PRId64, t->n_main,
		    t->n_main + t->n_mtp - 1);
	else
		snprintf(blk, sizeof blk, "blk.%" PRId64, t->n_main);
	fprintf(stderr, "%s: %s + %" PRId64 " of %" PRId64 " rows of '%s' (%s) -> %s\n", prog, blk,
	    t->r->n, t->n_vocab, src, quant_name(gguf_tensor(t->g, h)->type),
	    strcmp(out, "-") ? out : "<stdout>");
}

static int
trim(const char *trunk, const char *ranks, const char *out, const struct trim_opts *o)
{
	char err[UTIL_ERRLEN];
	struct trim t = { .trunk = trunk };
	int rc = -1;

	if ((t.g = gguf_open(trunk, err)) == NULL || find_block(&t, err) != 0)
		goto done;
	if ((t.r = ranks_load(ranks, t.n_vocab, err)) == NULL)
		goto done;
	if (o->count > 0 && t.r->n != o->count) {
		util_err(err, "%s: %" PRId64 " ranks, --count asks for %" PRId64, ranks, t.r->n,
		    o->count);
		goto done;
	}
	if (t.head >= 0 && gguf_tensor_data(t.g, t.head) == NULL &&
	    t.head == gguf_find_tensor(t.g, "token_embd.weight")) {
		util_err(err, "%s: a tied head needs a trunk file, not a stream", trunk);
		goto done;
	}
	if (plan(&t, err) == 0 && write_draft(&t, out, o->verbose, err) == 0)
		rc = 0;
	if (rc == 0 && o->verbose)
		summary(&t, out);
done:
	if (rc != 0)
		warnmsg("%s", err);
	free(t.picks);
	free(t.bh);
	ranks_free(t.r);
	gguf_close(t.g);
	return rc ? 1 : 0;
}

int
main(int argc, char *argv[])
{
	static const struct option lopts[] = {
		{ "count", required_argument, NULL, 'n' }, { "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
	};
	struct trim_opts o = { 0 };
	const char *out;
	int ch;

	prog = base_name(argv[0]);
	while ((ch = getopt_long(argc, argv, "n:vh", lopts, NULL)) != -1) {
		switch (ch) {
		case 'n':
			if (util_parse_i64(optarg, 1, INT32_MAX, &o.count) != 0) {
				warnmsg("bad --count '%s'", optarg);
				return usage(stderr, 2);
			}
			break;
		case 'v': o.verbose = 1; break;
		case 'h': return usage(stdout, 0);
		default: return usage(stderr, 2);
		}
	}
	argc -= optind;
	argv += optind;
	if (argc < 2 || argc > 3)
		return usage(stderr, 2);
	out = argc == 3 ? argv[2] : "-";
	if (strcmp(argv[0], "-") == 0 && strcmp(argv[1], "-") == 0)
		die(2, "trunk and ranks cannot both be standard input");
	if (strcmp(out, "-") == 0 && isatty(STDOUT_FILENO))
		die(2, "refusing to write a GGUF to a terminal; name an output or redirect");
	return finish(trim(argv[0], argv[1], out, &o));
}
