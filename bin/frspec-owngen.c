/*
 * frspec-owngen: FR-Spec ranks from a model's own generations.  Generates
 * greedily (chat template on) over prompts, counts the ids the model
 * emits, and writes the top N by count as a d2t GGUF and a .txt list.
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend.h"
#include "chat.h"
#include "gguf.h"
#include "hub.h"
#include "json.h"
#include "model.h"
#include "prompt.h"
#include "ranks.h"
#include "sample.h"
#include "spec.h"
#include "state.h"
#include "tokenizer.h"
#include "util.h"

#define FLOOR_FACTOR	4	/* the corpus floor: FLOOR_FACTOR x TOPN own tokens */

/*
 * The built-in prompt packs (--preset).  A pack is the
 * cross product of three short tables: prompt i of a pack of
 * |forms| x |subjects| x |contexts| takes form i % |forms|, subject
 * (i / |forms|) % |subjects|, context i / (|forms| x |subjects|), so that
 * neighbouring prompts differ in every part.  Each pack holds 1024
 * prompts: at 256 greedy tokens each that is 262,144 tokens, twice the
 * corpus floor of a 32768-row head (4 x 32768), so one pack clears the
 * floor even when generations stop early. 
 */

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* %1$s the subject, %2$s the context. */
static const char *const code_forms[] = {
	"Write a %2$s function to %1$s. Keep it short and explain the main idea.",
	"How do I %1$s in %2$s? Show complete code, then a test for it.",
	"Here is my task: %1$s. Implement it in idiomatic %2$s and point out the edge cases.",
	"Review this plan and then write the %2$s code: first validate the input, then %1$s.",
};
static const char *const code_subjects[] = {
	"parse a CSV file and sum one column", "implement binary search over a sorted array",
	"reverse a singly linked list in place", "read a JSON config file with defaults for missing keys",
	"count word frequencies in a text file", "retry an HTTP request with exponential backoff",
	"validate an email address", "merge two sorted lists",
	"compute a SHA-256 checksum of a file", "implement an LRU cache",
	"parse command-line flags", "walk a directory tree and list the largest files",
	"format a duration in seconds as hours, minutes and seconds", "detect a cycle in a directed graph",
	"run tasks in parallel with a worker pool", "tokenize an arithmetic expression and evaluate it",
	"deduplicate records by a key while keeping order", "write a rate limiter with a token bucket",
	"convert a date string between time zones", "paginate the results of a database query",
	"stream a large file line by line without loading it whole", "implement a trie for prefix search",
	"serialize a tree to a string and back", "compute the edit distance of two strings",
	"schedule a job every five minutes", "log structured messages with levels",
	"read environment variables with type conversion", "compress and decompress a byte buffer",
	"find the k most frequent elements", "implement a simple state machine for a traffic light",
	"diff two text files line by line", "handle errors from a function that can fail in three ways",
};
static const char *const code_contexts[] = {
	"Python", "C", "Rust", "Go", "JavaScript", "TypeScript", "Java", "C++",
};

static const char *const chat_forms[] = {
	"Explain %1$s to %2$s.",
	"Write a short essay about %1$s for %2$s.",
	"What are the most common misconceptions about %1$s? Answer for %2$s.",
	"Give me five practical tips about %1$s, written for %2$s.",
};
static const char *const chat_subjects[] = {
	"how photosynthesis works", "the causes of the French Revolution", "saving for retirement",
	"how vaccines train the immune system", "the history of the printing press",
	"learning a second language as an adult", "how interest rates affect house prices",
	"why the sky is blue", "training for a first marathon", "the water cycle",
	"how a bill becomes law", "writing a good cover letter", "the basics of music theory",
	"caring for houseplants", "how the internet routes a message", "the causes of inflation",
	"getting better sleep", "how black holes form", "negotiating a salary",
	"the plot of a classic novel of your choice", "cooking rice perfectly",
	"the difference between weather and climate", "preparing for a job interview",
	"how electric cars work", "the Roman Empire's decline", "meditation for beginners",
	"planning a week-long trip to Japan", "how credit scores work",
	"the ethics of artificial intelligence", "raising a puppy", "public speaking",
	"recycling and what really happens to plastic",
};
static const char *const chat_contexts[] = {
	"a curious ten-year-old", "a busy professional", "a university student", "a retired teacher",
	"someone who is skeptical", "a non-native English speaker", "a newspaper audience",
	"a close friend, in a warm tone",
};

static const char *const agentic_forms[] = {
	"You are a coding agent with shell access in %2$s. Task: %1$s. Think step by step, "
	"then list the exact commands and file edits you would make.",
	"I am working in %2$s and need to %1$s. Plan the work as a numbered list of tool calls "
	"(read_file, edit_file, run_command) with their arguments.",
	"Act as an autonomous assistant in %2$s. Goal: %1$s. Describe what you inspect first, "
	"what you change, and how you verify the result.",
	"Context: %2$s. The user asks you to %1$s. Reply with a short plan, then the first "
	"command to run and what output you expect.",
};
static const char *const agentic_subjects[] = {
	"find why the unit tests fail after the last commit", "add a --verbose flag to the command-line tool",
	"upgrade a dependency with a breaking API change", "set up continuous integration for the project",
	"find and fix a memory leak", "write a migration that adds a column with a default value",
	"profile a slow endpoint and speed it up", "add input validation to a web form handler",
	"rename a module and update every import", "write a Dockerfile for the service",
	"rotate the logs and delete files older than a week", "add pagination to an API endpoint",
	"bisect a performance regression", "configure a reverse proxy with TLS",
	"add retries to a flaky network call", "summarize the open issues by label",
	"back up a database and verify the backup", "add type hints to an untyped module",
	"resolve a merge conflict in a configuration file", "write release notes from the commit log",
	"find which process holds a port open", "add a health-check endpoint",
	"reduce the size of a container image", "translate a shell script into Python",
	"add caching to an expensive function", "fix a race condition in a worker queue",
	"audit the code for hard-coded secrets", "split a large function into smaller ones",
	"set up a cron job that reports disk usage", "add structured logging to a service",
	"write an integration test against a local database", "document the public API in the README",
};
static const char *const agentic_contexts[] = {
	"a Python web service repository", "a C library with a Makefile", "a Rust workspace",
	"a Node.js monorepo", "a Go microservice", "a Linux server over SSH",
	"a Java application built with Gradle", "a data pipeline of shell scripts",
};

struct frspec_pack {
	const char *name;
	const char *const *forms, *const *subjects, *const *contexts;
	size_t	nforms, nsubjects, ncontexts;
};

static const struct frspec_pack frspec_packs[] = {
	{ "code", code_forms, code_subjects, code_contexts,
	  NELEM(code_forms), NELEM(code_subjects), NELEM(code_contexts) },
	{ "chat", chat_forms, chat_subjects, chat_contexts,
	  NELEM(chat_forms), NELEM(chat_subjects), NELEM(chat_contexts) },
	{ "agentic", agentic_forms, agentic_subjects, agentic_contexts,
	  NELEM(agentic_forms), NELEM(agentic_subjects), NELEM(agentic_contexts) },
};


struct plist;

struct opts {
	int64_t	topn, ngen, limit, threads, batch;
	double	temp;
	uint64_t seed;
	int64_t	vngen, vrounds;	/* --validate-ngen, --validate-rounds */
	int	raw, verbose, validate;
	const char *preset, *corpus, *device;
	const char *draft;	/* MODEL+DRAFT: the draft --validate drafts with */
	struct plist *hsrc;	/* --heldout sources */
	struct plist *heldout;	/* the held-out prompts --validate runs */
};

struct plist {
	char	**v;
	size_t	n, cap;
};

/* The model and what drives it. */
struct gen {
	struct backend *be;
	struct model *md;
	struct tokenizer *tok;
	struct chat *tmpl;
	struct sampler *smp;
	int	n_vocab, n_ctx;
	int	pick;		/* greedy: tokens picked on the backend, no logits read */
};

/* A sequence being generated: one of --batch slots. */
struct slot {
	struct state *st;
	size_t	prompt;		/* its index in the prompt list */
	int	busy, np, n;	/* prompt ids, generated ids (in hist after them) */
	int32_t	*hist;		/* [n_ctx] prompt + generated ids */
	int32_t	next;		/* the next token, drawn when its logits were made */
};

/* Finished generations waiting for the earlier prompts: the corpus
 * file is in prompt order, which is what lets a rerun resume. */
struct done_ring {
	size_t	w;		/* entries: prompt i is entry i % w */
	int32_t	*ids;		/* [w][ngen] */
	int	*n;		/* [w] ids, -1: not finished yet */
};

/* What was counted: per id, and the corpus file that holds it. */
struct corpus {
	int64_t	*count;		/* [n_vocab] */
	int64_t	total;
	size_t	done;		/* prompts already generated (resumed + this run) */
	FILE	*fp;
};

static int
usage(FILE *fp, int status)
{
	fprintf(fp, "usage: %s [-v] [--preset name] [--ngen n] [--temp t] [--seed n] [--raw] "
	    "[--batch n] [--corpus-out file] [--limit n] [--validate] [--validate-ngen n] "
	    "[--validate-rounds n] [--heldout prompts] [-t threads] [-d device] model[+draft] out.gguf [topn] [prompts ...]\n",
	    prog);
	if (fp == stdout)
		fputs("  --preset NAME      built-in prompts: code, chat, agentic, mixed (the default\n"
		    "                     when no prompts are given)\n"
		    "  --ngen N           tokens generated per prompt (256)\n"
		    "  --temp T           sampling temperature (0: greedy)\n"
		    "  --seed N           sampling seed (0)\n"
		    "  --raw              no chat template: continue the prompt text\n"
		    "  --batch N          sequences generated together (8); the ranks do not\n"
		    "                     depend on it\n"
		    "  --corpus-out FILE  keep the generated ids; a rerun resumes from it\n"
		    "  --limit N          generate for at most N more prompts (with --corpus-out)\n"
		    "  --validate         then A/B trimmed vs untrimmed drafting (K=3, ABBA)\n"
		    "  --validate-ngen N  tokens per held-out prompt in --validate (64)\n"
		    "  --validate-rounds N  ABBA rounds in --validate (2)\n"
		    "  --heldout SRC      held-out prompts for --validate (repeatable; sources as\n"
		    "                     for the prompts; none may also be ranked)\n"
		    "  -t, --threads N    CPU threads (0: all)\n"
		    "  -d, --device DEV   backend: cpu, cuda[:N] (MEMRA_DEVICE; cuda\n                     when a GPU is present, else cpu)\n"
		    "  -v, --verbose      one line per prompt\n"
		    "  -h, --help         this text\n", fp);
	return status;
}

/* ---- prompts ---- */

static int
plist_add(struct plist *p, const char *s, size_t len)
{
	char **v;

	if (p->n == p->cap) {
		p->cap = p->cap ? 2 * p->cap : 64;
		if ((v = realloc(p->v, p->cap * sizeof *v)) == NULL)
			return -1;
		p->v = v;
	}
	if ((p->v[p->n] = strndup(s, len)) == NULL)
		return -1;
	p->n++;
	return 0;
}

static void
plist_free(struct plist *p)
{
	for (size_t i = 0; i < p->n; i++)
		free(p->v[i]);
	free(p->v);
}

static int
ends_with(const char *s, const char *suf)
{
	size_t n = strlen(s), m = strlen(suf);

	return n >= m && strcmp(s + n - m, suf) == 0;
}

/* One line of a .jsonl or of stdin: a JSON string, {"prompt": ...}, or
 * (stdin only, when it is not JSON) the text itself. */
static int
add_line(struct plist *p, const char *name, size_t lineno, const char *s, size_t len,
    int text_ok, char *err)
{
	char why[UTIL_ERRLEN];
	struct json *j;
	const struct json *v;
	int rc;

	if (len > 0 && s[len - 1] == '\r')
		len--;
	if (len == 0)
		return 0;
	if (text_ok && s[0] != '"' && s[0] != '{')
		return plist_add(p, s, len) ? util_err(err, "out of memory") : 0;
	if ((j = json_parse(s, len, why)) == NULL)
		return util_err(err, "%s: line %zu: %s", name, lineno, why);
	v = j->type == JSON_OBJECT ? json_get(j, "prompt") : j;
	if (v == NULL || v->type != JSON_STRING) {
		json_free(j);
		return util_err(err, "%s: line %zu: want a string or {\"prompt\": string}", name,
		    lineno);
	}
	rc = plist_add(p, v->str, v->n) ? util_err(err, "out of memory") : 0;
	json_free(j);
	return rc;
}

static int
add_lines(struct plist *p, const char *name, const char *buf, size_t len, int text_ok,
    char *err)
{
	size_t lineno = 0;

	for (const char *s = buf, *end = buf + len; s < end;) {
		const char *e = memchr(s, '\n', (size_t)(end - s));

		if (e == NULL)
			e = end;
		if (add_line(p, name, ++lineno, s, (size_t)(e - s), text_ok, err) != 0)
			return -1;
		s = e + 1;
	}
	return 0;
}

static int add_source(struct plist *p, const char *src, int in_dir, char *err);

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A directory, recursed in name order: its .txt, .md and .jsonl files. */
static int
add_dir(struct plist *p, const char *dir, char *err)
{
	struct plist names = { 0 };
	struct dirent *e;
	DIR *d = opendir(dir);
	int rc = 0;

	if (d == NULL)
		return util_err(err, "%s: %s", dir, strerror(errno));
	while ((e = readdir(d)) != NULL)
		if (e->d_name[0] != '.' && plist_add(&names, e->d_name, strlen(e->d_name)) != 0)
			rc = util_err(err, "out of memory");
	closedir(d);
	if (names.n > 0)
		qsort(names.v, names.n, sizeof *names.v, cmp_str);
	for (size_t i = 0; rc == 0 && i < names.n; i++) {
		char *path;

		if (asprintf(&path, "%s/%s", dir, names.v[i]) < 0)
			rc = util_err(err, "out of memory");
		else {
			rc = add_source(p, path, 1, err);
			free(path);
		}
	}
	plist_free(&names);
	return rc;
}

static int
add_hfds(struct plist *p, const char *spec, char *err)
{
	struct hub_opts o;
	struct hub_result r = { 0 };
	int rc;

	hub_opts_init(&o);
	rc = hub_resolve(spec, &o, &r, err);
	for (size_t i = 0; rc == 0 && i < r.npaths; i++)
		rc = add_source(p, r.paths[i], 0, err);
	hub_result_free(&r);
	return rc;
}

/* A prompt source: -, hfds:, a directory, a .jsonl, or a text file (one
 * prompt).  Inside a directory only .txt, .md and .jsonl count, README.md
 * (a dataset's card) excepted. */
static int
add_source(struct plist *p, const char *src, int in_dir, char *err)
{
	struct stat st;
	size_t len;
	char *buf;
	int rc;

	if (strncmp(src, "hfds:", 5) == 0)
		return add_hfds(p, src, err);
	if (strcmp(src, "-") != 0) {
		if (stat(src, &st) != 0)
			return util_err(err, "%s: %s", src, strerror(errno));
		if (S_ISDIR(st.st_mode))
			return add_dir(p, src, err);
		if (in_dir && ((!ends_with(src, ".txt") && !ends_with(src, ".md") &&
		    !ends_with(src, ".jsonl")) || strcmp(base_name(src), "README.md") == 0))
			return 0;
	}
	if ((buf = util_read_file(src, &len, err)) == NULL)
		return -1;
	if (strcmp(src, "-") == 0)
		rc = add_lines(p, "<stdin>", buf, len, 1, err);
	else if (ends_with(src, ".jsonl"))
		rc = add_lines(p, src, buf, len, 0, err);
	else if (len == 0)
		rc = util_err(err, "%s: empty prompt", src);
	else
		rc = plist_add(p, buf, len) ? util_err(err, "out of memory") : 0;
	free(buf);
	return rc;
}

/* Prompt i of a built-in pack. */
static int
add_pack_prompt(struct plist *p, const struct frspec_pack *k, size_t i)
{
	char buf[1024];
	size_t f = i % k->nforms, s = (i / k->nforms) % k->nsubjects;
	size_t c = i / (k->nforms * k->nsubjects) % k->ncontexts;
	int n = snprintf(buf, sizeof buf, k->forms[f], k->subjects[s], k->contexts[c]);

	return plist_add(p, buf, (size_t)n);
}

static size_t
pack_size(const struct frspec_pack *k)
{
	return k->nforms * k->nsubjects * k->ncontexts;
}

/* --preset NAME: one pack, or "mixed": prompt i from pack i % 3. */
static int
add_preset(struct plist *p, const char *name)
{
	size_t np = NELEM(frspec_packs), n = pack_size(&frspec_packs[0]);

	for (size_t k = 0; k < np; k++)
		if (strcmp(name, frspec_packs[k].name) == 0) {
			for (size_t i = 0; i < pack_size(&frspec_packs[k]); i++)
				if (add_pack_prompt(p, &frspec_packs[k], i) != 0)
					return -1;
			return 0;
		}
	for (size_t i = 0; i < n; i++)
		if (add_pack_prompt(p, &frspec_packs[i % np], i) != 0)
			return -1;
	return 0;
}

static int
valid_preset(const char *s)
{
	return strcmp(s, "code") == 0 || strcmp(s, "chat") == 0 || strcmp(s, "agentic") == 0 ||
	    strcmp(s, "mixed") == 0;
}

/* ---- the model ---- */

/* The chat template of an HF checkpoint directory: tokenizer_config.json's
 * chat_template (a string, or the "default" of a list), else
 * chat_template.jinja.  NULL with err when there is none. */
static char *
hf_template(const char *dir, size_t *len, char *err)
{
	char path[8192], why[UTIL_ERRLEN];
	const struct json *t;
	struct json *j = NULL;
	char *buf, *s = NULL;
	size_t n;

	snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
	if ((buf = util_read_file(path, &n, why)) != NULL && (j = json_parse(buf, n, why)) != NULL &&
	    (t = json_get(j, "chat_template")) != NULL) {
		for (size_t i = 0; t->type == JSON_ARRAY && i < t->n; i++) {
			const char *nm = json_get_str(&t->items[i], "name");

			if (nm != NULL && strcmp(nm, "default") == 0)
				t = json_get(&t->items[i], "template");
		}
		if (t != NULL && t->type == JSON_STRING && (s = strndup(t->str, t->n)) != NULL)
			*len = t->n;
	}
	json_free(j);
	free(buf);
	if (s != NULL)
		return s;
	snprintf(path, sizeof path, "%s/chat_template.jinja", dir);
	if ((s = util_read_file(path, len, why)) == NULL)
		util_err(err, "%s: no chat template (use --raw for pure continuation)", dir);
	return s;
}

/* Tokenizer and chat template beside the weights: a GGUF's metadata or an
 * HF directory's files. */
static int
open_text(struct gen *g, const char *path, int raw, char *err)
{
	struct stat st;
	char *tmpl = NULL, dir[4096];
	size_t tlen = 0;
	int rc = 0;

	if (stat(path, &st) == 0 && (S_ISDIR(st.st_mode) || ends_with(path, ".safetensors"))) {
		const char *slash = strrchr(path, '/');

		if (S_ISDIR(st.st_mode))	/* the checkpoint directory, or the file's */
			snprintf(dir, sizeof dir, "%s", path);
		else if (slash != NULL)
			snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
		else
			snprintf(dir, sizeof dir, ".");
		if ((g->tok = tokenizer_from_json(dir, err)) == NULL)
			return -1;
		if (!raw && (tmpl = hf_template(dir, &tlen, err)) == NULL)
			return -1;
	} else {
		struct gguf *f = gguf_open(path, err);
		int64_t k;
		const char *s;

		if (f == NULL || (g->tok = tokenizer_from_gguf(f, err)) == NULL) {
			gguf_close(f);
			return -1;
		}
		k = gguf_find_key(f, "tokenizer.chat_template");
		if (!raw && (k < 0 || (s = gguf_get_str(f, k, &tlen)) == NULL))
			rc = util_err(err, "%s: no tokenizer.chat_template (use --raw for pure "
			    "continuation)", path);
		else if (!raw && (tmpl = strndup(s, tlen)) == NULL)
			rc = util_err(err, "out of memory");
		gguf_close(f);
	}
	if (rc == 0 && tmpl != NULL && (g->tmpl = chat_new(tmpl, tlen, err)) == NULL)
		rc = -1;
	free(tmpl);
	return rc;
}

static int
gen_open(struct gen *g, const char *spec, const struct opts *o, char *err)
{
	struct sample_params sp;
	char *path = hub_path(spec, NULL, err);
	int rc = -1;

	if (path == NULL)
		return -1;
	if ((g->be = backend_open(o->device, (int)o->threads, err)) == NULL)
		goto done;
	backend_graph_env(g->be, getenv("MEMRA_CUDA_GRAPH"), err);	/* checked in main */
	backend_pdl_env(g->be, getenv("MEMRA_CUDA_PDL"), err);		/* checked in main */
	backend_gemm_env(g->be, getenv("MEMRA_CUDA_GEMM"), err);	/* checked in main */
	if ((g->md = model_open(path, g->be, err)) == NULL || open_text(g, path, o->raw, err) != 0)
		goto done;
	g->n_vocab = model_hparams(g->md)->n_vocab;
	g->n_ctx = model_hparams(g->md)->n_ctx_train;
	if (g->n_ctx <= 0 || g->n_ctx > 4096 + o->ngen + 1)
		g->n_ctx = 4096 + (int)o->ngen + 1;	/* prompts keep their last 4096 tokens */
	sample_defaults(&sp);
	sp.temp = (float)o->temp;
	sp.seed = o->seed;
	if ((g->smp = sample_new(&sp, g->n_vocab, err)) == NULL)
		goto done;
	g->pick = sample_plain_greedy(&sp);
	rc = 0;
done:
	free(path);
	return rc;
}

static void
gen_close(struct gen *g)
{
	sample_free(g->smp);
	chat_free(g->tmpl);
	tokenizer_free(g->tok);
	model_close(g->md);
	backend_close(g->be);
}

/* The rendered chat (one user turn, generation prompt on) as ids. */
static int32_t *
encode_prompt(struct gen *g, const char *prompt, size_t *n, char *err)
{
	struct chat_opts co = { .add_generation_prompt = 1 };
	char *ctx = NULL, *text;
	size_t clen = 0, tlen;
	struct json *j;
	int32_t *ids;
	FILE *fp;

	if (g->tmpl == NULL)
		return tokenizer_encode(g->tok, prompt, strlen(prompt), TOKENIZER_ADD_SPECIAL, n, err);
	if ((fp = open_memstream(&ctx, &clen)) == NULL) {
		util_err(err, "out of memory");
		return NULL;
	}
	fputs("{\"messages\": [{\"role\": \"user\", \"content\": ", fp);
	json_put_str(fp, prompt, strlen(prompt), 0);
	fputs("}]}", fp);
	fclose(fp);
	j = json_parse(ctx, clen, err);
	free(ctx);
	if (j == NULL)
		return NULL;
	text = chat_render(g->tmpl, j, &co, &tlen, err);
	json_free(j);
	if (text == NULL)
		return NULL;
	ids = tokenizer_encode(g->tok, text, tlen, TOKENIZER_PARSE_SPECIAL, n, err);
	free(text);
	return ids;
}

/* Start prompt i on slot sl: encode it (keeping its last tokens when it
 * is too long), prefill and draw the first token (lg: a row of logits
 * for the host's draws). */
static int
slot_start(struct gen *g, struct slot *sl, const char *prompt, size_t i, int ngen, float *lg,
    char *err)
{
	size_t np;
	int32_t *ids = encode_prompt(g, prompt, &np, err);
	int keep = g->n_ctx - ngen - 1, off;

	if (ids == NULL)
		return -1;
	if (np == 0) {
		free(ids);
		return util_err(err, "prompt encodes to no tokens");
	}
	off = (int)np > keep ? (int)np - keep : 0;
	np -= (size_t)off;
	memcpy(sl->hist, ids + off, np * sizeof *ids);
	free(ids);
	sl->prompt = i, sl->busy = 1, sl->np = (int)np, sl->n = 0;
	if (state_reset(sl->st) != 0 || model_forward_next(g->md, sl->st, sl->hist, (int)np,
	    MODEL_PREFILL, g->smp, sl->hist, (int)np, 0, np, lg, &sl->next) != 0)
		return util_err(err, "%s", model_errmsg(g->md));
	return 0;
}

/* Take slot sl's next token: 1 when its generation ends there (at most
 * ngen ids, ending at an end-of-turn token, which is kept), 0 when it
 * goes on. */
static int
slot_take(struct gen *g, struct slot *sl, int ngen)
{
	int32_t t = sl->next;

	sl->hist[sl->np + sl->n++] = t;
	return tokenizer_is_control(g->tok, t) || t == tokenizer_eos(g->tok) || sl->n == ngen;
}

/* ---- the corpus: counts, and the file a rerun resumes from ---- */

static void
corpus_header(char *buf, size_t n, const struct opts *o, size_t nprompts)
{
	snprintf(buf, n, "# frspec-owngen corpus v1: prompts=%zu ngen=%" PRId64 " temp=%g seed=%"
	    PRIu64 " %s\n", nprompts, o->ngen, o->temp, o->seed, o->raw ? "raw" : "chat");
}

/* Count one line of ids. */
static int
corpus_line(struct corpus *c, const char *s, const char *e, int n_vocab, size_t lineno,
    char *err)
{
	while (s < e) {
		char *q;
		long v;

		errno = 0;
		v = strtol(s, &q, 10);
		if (q == s || errno != 0 || v < 0 || v >= n_vocab || (q < e && *q != ' '))
			return util_err(err, "line %zu: not a token id of this model", lineno);
		c->count[v]++;
		c->total++;
		s = q < e ? q + 1 : q;
	}
	c->done++;
	return 0;
}

/* Take the counts of an earlier run's corpus, dropping a cut last line. */
static int
corpus_resume(struct corpus *c, const char *path, const char *header, int n_vocab, char *err)
{
	char why[UTIL_ERRLEN];
	size_t len, hl = strlen(header), lineno = 1;
	char *buf = util_read_file(path, &len, why), *s, *e;
	int rc = 0;

	if (buf == NULL)
		return errno == ENOENT ? 1 : util_err(err, "%s", why);
	if (len < hl || memcmp(buf, header, hl) != 0) {
		free(buf);
		return len == 0 ? 1 : util_err(err, "%s: made with other prompts or settings; "
		    "remove it to start over", path);
	}
	for (s = buf + hl; rc == 0 && (e = memchr(s, '\n', len - (size_t)(s - buf))) != NULL;
	    s = e + 1)
		rc = corpus_line(c, s, e, n_vocab, ++lineno, why);
	if (rc != 0)
		util_err(err, "%s: %s", path, why);
	else if (truncate(path, (off_t)(s - buf)) != 0)
		rc = util_err(err, "%s: %s", path, strerror(errno));
	free(buf);
	return rc;
}

static int
corpus_open(struct corpus *c, const struct opts *o, size_t nprompts, int n_vocab, char *err)
{
	char header[256];
	int r;

	if ((c->count = calloc((size_t)n_vocab, sizeof *c->count)) == NULL)
		return util_err(err, "out of memory");
	if (o->corpus == NULL)
		return 0;
	corpus_header(header, sizeof header, o, nprompts);
	if ((r = corpus_resume(c, o->corpus, header, n_vocab, err)) < 0)
		return -1;
	if ((c->fp = fopen(o->corpus, "a")) == NULL)
		return util_err(err, "%s: %s", o->corpus, strerror(errno));
	if (r == 1 && fputs(header, c->fp) == EOF)
		return util_err(err, "%s: %s", o->corpus, strerror(errno));
	return 0;
}

/* Count a prompt's generation, and append it to the corpus file. */
static int
corpus_add(struct corpus *c, const int32_t *ids, int n, const char *path, char *err)
{
	for (int i = 0; i < n; i++) {
		c->count[ids[i]]++;
		if (c->fp != NULL)
			fprintf(c->fp, i ? " %d" : "%d", ids[i]);
	}
	c->total += n;
	c->done++;
	if (c->fp != NULL && (fputc('\n', c->fp) == EOF || fflush(c->fp) != 0))
		return util_err(err, "%s: %s", path, strerror(errno));
	return 0;
}

static int
corpus_close(struct corpus *c, const char *path, char *err)
{
	int rc = 0;

	if (c->fp != NULL && fclose(c->fp) != 0)
		rc = util_err(err, "%s: %s", path, strerror(errno));
	free(c->count);
	return rc;
}

/* ---- ranking ---- */

static int
cmp_rank(const void *a, const void *b, void *arg)
{
	const int64_t *rank_count = arg;
	int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;

	if (rank_count[x] != rank_count[y])
		return rank_count[x] > rank_count[y] ? -1 : 1;
	return x < y ? -1 : x > y;
}

/* Top n ids by count, ties by id ascending; the counted share in *covered. */
static int32_t *
rank_ids(const struct corpus *c, int n_vocab, int64_t n, int64_t *covered)
{
	int32_t *ids = malloc((size_t)n_vocab * sizeof *ids);

	if (ids == NULL)
		return NULL;
	for (int i = 0; i < n_vocab; i++)
		ids[i] = i;
	qsort_r(ids, (size_t)n_vocab, sizeof *ids, cmp_rank, c->count);
	*covered = 0;
	for (int64_t i = 0; i < n; i++)
		*covered += c->count[ids[i]];
	return ids;
}

/* ---- the run ---- */

/* Batch buffers: nb slots, and a ring of 4 nb finished generations. */
struct batch {
	int	nb;
	struct slot *sl;	/* [nb] */
	struct state **st;	/* [nb] the states of one model_forward_batch */
	int32_t	*tok;		/* [nb] */
	int	*row;		/* [nb] slot of each batch row */
	float	*logits;	/* [nb][n_vocab] the rows' logits (the host's draws) */
	int32_t	*next;		/* [nb] the rows' picks (g->pick) */
	struct done_ring r;
};

static int
batch_new(struct batch *b, struct gen *g, int nb, int ngen, char *err)
{
	b->nb = nb;
	b->r.w = 4 * (size_t)nb;
	b->sl = calloc(nb, sizeof *b->sl);
	b->st = calloc(nb, sizeof *b->st);
	b->tok = calloc(nb, sizeof *b->tok);
	b->row = calloc(nb, sizeof *b->row);
	b->logits = malloc((size_t)nb * g->n_vocab * sizeof *b->logits);
	b->next = malloc((size_t)nb * sizeof *b->next);
	b->r.ids = malloc(b->r.w * ngen * sizeof *b->r.ids);
	b->r.n = malloc(b->r.w * sizeof *b->r.n);
	if (!b->sl || !b->st || !b->tok || !b->row || !b->logits || !b->next || !b->r.ids || !b->r.n)
		return util_err(err, "out of memory");
	for (size_t i = 0; i < b->r.w; i++)
		b->r.n[i] = -1;
	for (int j = 0; j < nb; j++) {
		struct slot *sl = &b->sl[j];

		if ((sl->st = model_state_new(g->md, g->n_ctx, 0, err)) == NULL)
			return -1;
		sl->hist = malloc((size_t)g->n_ctx * sizeof *sl->hist);
		if (sl->hist == NULL)
			return util_err(err, "out of memory");
	}
	return 0;
}

static void
batch_free(struct batch *b)
{
	for (int j = 0; b->sl != NULL && j < b->nb; j++) {
		state_free(b->sl[j].st);
		free(b->sl[j].hist);
	}
	free(b->sl), free(b->st), free(b->tok), free(b->row), free(b->logits), free(b->next);
	free(b->r.ids), free(b->r.n);
}

/*
 * One step of every slot: an idle slot starts the next prompt (while the
 * ring has room for it), every busy slot takes its next token; a slot
 * whose generation ends puts it in the ring.  The slots that go on are
 * left in b->st / b->tok / b->row; returns how many, or -1.
 */
static int
batch_step(struct gen *g, struct batch *b, const struct plist *p, size_t *next, size_t end,
    size_t wr, int ngen, char *err)
{
	char why[UTIL_ERRLEN];
	int n = 0;

	for (int j = 0; j < b->nb; j++) {
		struct slot *sl = &b->sl[j];

		if (!sl->busy) {
			if (*next >= end || *next >= wr + b->r.w)
				continue;
			if (slot_start(g, sl, p->v[*next], *next, ngen, b->logits, why) != 0)
				return util_err(err, "prompt %zu: %s", *next + 1, why);
			(*next)++;
		}
		if (slot_take(g, sl, ngen)) {
			size_t e = sl->prompt % b->r.w;

			memcpy(b->r.ids + e * ngen, sl->hist + sl->np, sl->n * sizeof *b->r.ids);
			b->r.n[e] = sl->n;
			sl->busy = 0;
			continue;
		}
		b->st[n] = sl->st, b->tok[n] = sl->hist[sl->np + sl->n - 1], b->row[n++] = j;
	}
	return n;
}

/*
 * One forward of the batch's n rows and each row's next token drawn into
 * its slot (picked on the backend when greedy).
 */
static int
batch_forward(struct gen *g, struct batch *b, int n, char *err)
{
	if (g->pick) {
		if (model_forward_batch_argmax(g->md, b->st, b->tok, n, b->next, NULL) != 0)
			return util_err(err, "%s", model_errmsg(g->md));
		for (int r = 0; r < n; r++)
			b->sl[b->row[r]].next = b->next[r];
		return 0;
	}
	if (model_forward_batch(g->md, b->st, b->tok, n, b->logits, NULL) != 0)
		return util_err(err, "%s", model_errmsg(g->md));
	for (int r = 0; r < n; r++) {
		struct slot *sl = &b->sl[b->row[r]];
		int at = sl->np + sl->n;

		if ((sl->next = sample_next(g->smp, b->logits + (size_t)r * g->n_vocab, sl->hist, at,
		    0, at)) < 0)
			return util_err(err, "prompt %zu: no finite logit", sl->prompt + 1);
	}
	return 0;
}

/*
 * Generate for the prompts not yet in the corpus (at most --limit),
 * --batch sequences at a time; the corpus gets them in prompt order.
 */
static int
generate_all(struct gen *g, struct corpus *c, const struct plist *p, const struct opts *o,
    char *err)
{
	struct batch b = { 0 };
	struct util_progress pr;
	size_t start = c->done, end = p->n, next = start, wr = start;
	int ngen = (int)o->ngen, n, rc = batch_new(&b, g, (int)o->batch, ngen, err);
	int64_t total0 = c->total;
	double t0 = util_now();

	if (o->limit > 0 && end - start > (size_t)o->limit)
		end = start + (size_t)o->limit;
	util_progress_begin(&pr, !o->verbose && isatty(STDERR_FILENO), "prompts");
	while (rc == 0 && wr < end) {
		if ((n = batch_step(g, &b, p, &next, end, wr, ngen, err)) < 0)
			rc = -1;
		for (size_t e; rc == 0 && wr < end && b.r.n[e = wr % b.r.w] >= 0; wr++) {
			if ((rc = corpus_add(c, b.r.ids + e * ngen, b.r.n[e], o->corpus, err)) == 0 &&
			    o->verbose)
				fprintf(stderr, "[frspec-owngen] prompt %zu/%zu: +%d tokens (total %"
				    PRId64 ")\n", wr + 1, p->n, b.r.n[e], c->total);
			b.r.n[e] = -1;
			util_progress(&pr, wr + 1 - start, p->n - start);	/* this run's share */
		}
		if (rc == 0 && n > 0)
			rc = batch_forward(g, &b, n, err);
	}
	util_progress_end(&pr);
	batch_free(&b);
	if (rc == 0 && o->verbose && wr > start)
		fprintf(stderr, "[frspec-owngen] %zu prompts, %" PRId64 " tokens in %.2f s: %.1f "
		    "tok/s (batch %" PRId64 ")\n", wr - start, c->total - total0, util_now() - t0,
		    (double)(c->total - total0) / (util_now() - t0), o->batch);
	return rc;
}

static int
write_ranks(const struct corpus *c, int n_vocab, const char *out, const struct opts *o,
    char *err)
{
	int64_t covered, distinct = 0;
	int32_t *ids = rank_ids(c, n_vocab, o->topn, &covered);
	char *txt = NULL;
	int rc;

	if (ids == NULL || asprintf(&txt, "%s.txt", out) < 0) {
		free(ids);
		return util_err(err, "out of memory");
	}
	rc = ranks_write_gguf(out, ids, o->topn, n_vocab, err);
	if (rc == 0)
		rc = ranks_write_txt(txt, ids, o->topn, err);
	for (int i = 0; i < n_vocab; i++)
		distinct += c->count[i] > 0;
	if (rc == 0) {
		printf("top %" PRId64 " covers %.2f%% of %" PRId64 " own-generated tokens (%" PRId64
		    " distinct)\n", o->topn, 100.0 * (double)covered / (double)c->total, c->total,
		    distinct);
		fflush(stdout);
		if (c->total < FLOOR_FACTOR * o->topn)
			warnmsg("warning: %" PRId64 " own-generated tokens is below the corpus floor of "
			    "%d x %" PRId64 " = %" PRId64 "; ranks past the head of the distribution "
			    "are noise: add prompts", c->total, FLOOR_FACTOR, o->topn,
			    FLOOR_FACTOR * o->topn);
		printf("serve with: MEMRA_FRSPEC_TRIM=%s\n", txt);
	}
	free(txt);
	free(ids);
	return rc;
}

static int
owngen(const char *model, const char *out, const struct plist *p, const struct opts *o)
{
	char err[UTIL_ERRLEN], why[UTIL_ERRLEN];
	struct gen g = { 0 };
	struct corpus c = { 0 };
	int rc = -1;

	if (gen_open(&g, model, o, err) != 0)
		goto done;
	if (o->topn > g.n_vocab) {
		warnmsg("topn %" PRId64 " is larger than the vocabulary (%d tokens)", o->topn, g.n_vocab);
		gen_close(&g);
		return 2;
	}
	if (corpus_open(&c, o, p->n, g.n_vocab, err) != 0 || generate_all(&g, &c, p, o, err) != 0)
		goto done;
	if (c.total == 0) {
		util_err(err, "no tokens generated");
		goto done;
	}
	rc = write_ranks(&c, g.n_vocab, out, o, err);
	if (rc == 0 && c.done < p->n)
		warnmsg("%zu of %zu prompts done; run again to continue from '%s'", c.done, p->n,
		    o->corpus);
done:
	if (corpus_close(&c, o->corpus, rc ? why : err) != 0)
		rc = -1;
	if (rc != 0)
		warnmsg("%s", err);
	gen_close(&g);
	return rc ? 1 : 0;
}

/* ---- --validate: trimmed vs untrimmed drafting, interleaved A B B A ---- */

enum { VALIDATE_K = 3 };

/* The built-in held-out prompts (no --heldout): none is a pack prompt
 * (their forms are not the packs'). */
static const char *const heldout_builtin[] = {
	"Write a small program that checks whether a string is a palindrome, ignoring case "
	"and punctuation, and show two example runs.",
	"In a few paragraphs, tell me how a refrigerator keeps food cold.",
	"You maintain a web service whose build started failing with a missing module error. "
	"List, in order, the commands you would run to find and fix the cause.",
};

/* One side of the A/B: a model (trimmed or not) and its speculative decoder. */
struct arm {
	struct model *md;
	struct prompt *pr;
	struct spec *sp;
	double	*tps;		/* [2 rounds] end-to-end tok/s of each run */
	int	n_tps;
	int32_t	*out;		/* [held-out prompts][vngen] the first run's tokens */
	long	drafted, accepted;	/* over the first run */
};

static int
arm_open(struct arm *a, struct backend *be, const char *path, const char *ranks,
    const struct opts *o, char *err)
{
	struct model_options mo = { .ranks = ranks, .draft = o->draft };
	struct sample_params sp;

	sample_defaults(&sp);
	if ((a->md = model_open_opts(path, be, &mo, err)) == NULL ||
	    (a->pr = prompt_new(a->md, o->raw ? PROMPT_RAW : PROMPT_CHAT, err)) == NULL ||
	    (a->sp = spec_new(a->md, VALIDATE_K, 4096 + (int)o->vngen + VALIDATE_K + 2, &sp, 0,
	    err)) == NULL)
		return -1;
	if (model_hparams(a->md)->n_mtp < 1)
		return util_err(err, "%s: model has no MTP head to draft with", path);
	a->tps = calloc(2 * o->vrounds, sizeof *a->tps);
	a->out = calloc(o->heldout->n * o->vngen, sizeof *a->out);
	return a->tps && a->out ? 0 : util_err(err, "out of memory");
}

static void
arm_close(struct arm *a)
{
	spec_free(a->sp);
	prompt_free(a->pr);
	model_close(a->md);
	free(a->tps), free(a->out);
}

/* One run: every held-out prompt, vngen tokens each (no stop: equal work). */
static int
arm_run(struct arm *a, const struct opts *o, char *err)
{
	int ngen = (int)o->vngen, first = a->n_tps == 0;
	int32_t out[VALIDATE_K + 1], *ids;
	double t0 = util_now();
	size_t n;

	spec_stats_reset(a->sp);
	for (size_t i = 0; i < o->heldout->n; i++) {
		const char *h = o->heldout->v[i];
		int32_t *dst = a->out + i * ngen, tok;
		int have = 1, r;

		if ((ids = prompt_encode(a->pr, h, strlen(h), &n, err)) == NULL)
			return -1;
		r = spec_prefill(a->sp, ids, n > 4096 ? 4096 : (int)n, &tok);
		free(ids);
		if (r != 0)
			return util_err(err, "held-out prompt %zu: %s", i + 1, spec_errmsg(a->sp));
		if (first)
			dst[0] = tok;
		while (have < ngen) {
			if ((r = spec_round(a->sp, out, ngen - have)) < 0)
				return util_err(err, "held-out prompt %zu: %s", i + 1,
				    spec_errmsg(a->sp));
			if (first)
				memcpy(dst + have, out, r * sizeof *out);
			have += r;
		}
	}
	a->tps[a->n_tps++] = o->heldout->n * ngen / (util_now() - t0);
	if (first)
		a->drafted = spec_stats(a->sp)->drafted, a->accepted = spec_stats(a->sp)->accepted;
	return 0;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* median of v[n] (sorts v); spread (max - min) / median into *spread */
static double
median(double *v, int n, double *spread)
{
	double m;

	qsort(v, n, sizeof *v, cmp_double);
	m = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
	*spread = m > 0 ? (v[n - 1] - v[0]) / m : 0;
	return m;
}

static void
arm_print(const char *name, struct arm *a, double *tps)
{
	double spread;

	*tps = median(a->tps, a->n_tps, &spread);
	printf("%-9s acceptance %ld/%ld = %.1f%% %.1f tok/s (median of %d, spread %.1f%%)\n", name,
	    a->accepted, a->drafted, a->drafted ? 100.0 * a->accepted / a->drafted : 0.0, *tps,
	    a->n_tps, 100 * spread);
}

/* GOOD: trimmed faster or equal; WASH: 0 to 2% slower; BAD: more. */
static const char *
verdict(double ratio)
{
	return ratio >= 1 ? "GOOD" : ratio >= 0.98 ? "WASH" : "BAD";
}

static int
validate_run(struct backend *be, const char *model, const char *ranks, const struct opts *o,
    char *err)
{
	struct arm a = { 0 }, b = { 0 };	/* a: trimmed, b: untrimmed */
	double ta, tb;
	int rc = -1;

	if (arm_open(&a, be, model, ranks, o, err) != 0 || arm_open(&b, be, model, NULL, o, err))
		goto done;
	printf("validate: K=%d, %zu held-out prompts x %" PRId64 " tokens, %" PRId64
	    " ABBA round%s\n", VALIDATE_K, o->heldout->n, o->vngen, o->vrounds,
	    o->vrounds == 1 ? "" : "s");
	fflush(stdout);
	for (int64_t r = 0; r < o->vrounds; r++)
		if (arm_run(&a, o, err) || arm_run(&b, o, err) || arm_run(&b, o, err) ||
		    arm_run(&a, o, err))
			goto done;
	if (memcmp(a.out, b.out, o->heldout->n * o->vngen * sizeof *a.out) != 0) {
		util_err(err, "trimmed drafting changed the output (it must be identical)");
		goto done;
	}
	arm_print("trimmed", &a, &ta);
	arm_print("untrimmed", &b, &tb);
	printf("verdict %s (trimmed %.3fx untrimmed)\n", verdict(tb > 0 ? ta / tb : 0),
	    tb > 0 ? ta / tb : 0);
	rc = 0;
done:
	arm_close(&a);
	arm_close(&b);
	return rc;
}

/* --validate after the ranks are written: 0, or 1 with the reason printed. */
static int
validate(const char *spec, const char *out, const struct opts *o)
{
	char err[UTIL_ERRLEN] = "", *path = hub_path(spec, NULL, err), *txt = NULL;
	struct backend *be = NULL;
	int rc = -1;

	if (path == NULL)
		goto done;
	if (asprintf(&txt, "%s.txt", out) < 0) {
		txt = NULL;
		util_err(err, "out of memory");
		goto done;
	}
	if ((be = backend_open(o->device, (int)o->threads, err)) != NULL &&
	    backend_graph_env(be, getenv("MEMRA_CUDA_GRAPH"), err) == 0 &&
	    backend_pdl_env(be, getenv("MEMRA_CUDA_PDL"), err) == 0 &&
	    backend_gemm_env(be, getenv("MEMRA_CUDA_GEMM"), err) == 0)
		rc = validate_run(be, path, txt, o, err);
done:
	if (rc != 0)
		warnmsg("validate: %s", err);
	backend_close(be);
	free(txt), free(path);
	return rc ? 1 : 0;
}

static int
cmp_pstr(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * The held-out set: --heldout's prompts, else the built-in ones.  A
 * held-out prompt that is also ranked would let the ranks see the test:
 * refused (1, the reason in err) before any generation.
 */
static int
heldout_set(struct plist *h, const struct plist *p, char *err)
{
	char **sorted;

	if (h->n == 0)
		for (size_t i = 0; i < NELEM(heldout_builtin); i++)
			if (plist_add(h, heldout_builtin[i], strlen(heldout_builtin[i])) != 0)
				return util_err(err, "out of memory");
	if ((sorted = malloc((p->n + 1) * sizeof *sorted)) == NULL)
		return util_err(err, "out of memory");
	memcpy(sorted, p->v, p->n * sizeof *sorted);
	qsort(sorted, p->n, sizeof *sorted, cmp_pstr);
	for (size_t i = 0; i < h->n; i++)
		if (bsearch(&h->v[i], sorted, p->n, sizeof *sorted, cmp_pstr) != NULL) {
			free(sorted);
			return util_err(err, "held-out prompt %zu is also a prompt to rank ('%.40s%s'): "
			    "validate on prompts the ranks have not seen", i + 1, h->v[i],
			    strlen(h->v[i]) > 40 ? "..." : "");
		}
	free(sorted);
	return 0;
}

static int
parse_num(const char *what, const char *s, int64_t lo, int64_t hi, int64_t *out)
{
	if (util_parse_i64(s, lo, hi, out) == 0)
		return 0;
	warnmsg("%s '%s' is not an integer in [%" PRId64 ", %" PRId64 "]", what, s, lo, hi);
	return -1;
}

enum { O_PRESET = 256, O_NGEN, O_TEMP, O_SEED, O_RAW, O_CORPUS, O_LIMIT, O_VALIDATE, O_VNGEN,
	O_VROUNDS, O_BATCH, O_HELDOUT };

static int
parse_opt(int ch, struct opts *o)
{
	int64_t v;

	switch (ch) {
	case O_PRESET:
		if (!valid_preset(optarg)) {
			warnmsg("unknown preset '%s' (code, chat, agentic, mixed)", optarg);
			return -1;
		}
		o->preset = optarg;
		return 0;
	case O_NGEN: return parse_num("--ngen", optarg, 1, 1 << 20, &o->ngen);
	case O_TEMP:
		if (util_parse_f64(optarg, 0, 100, &o->temp) == 0)
			return 0;
		warnmsg("--temp '%s' is not a number in [0, 100]", optarg);
		return -1;
	case O_SEED:
		if (parse_num("--seed", optarg, 0, INT64_MAX, &v) != 0)
			return -1;
		o->seed = (uint64_t)v;
		return 0;
	case O_RAW: o->raw = 1; return 0;
	case O_CORPUS: o->corpus = optarg; return 0;
	case O_LIMIT: return parse_num("--limit", optarg, 1, INT64_MAX, &o->limit);
	case O_BATCH: return parse_num("--batch", optarg, 1, 64, &o->batch);
	case O_HELDOUT: return plist_add(o->hsrc, optarg, strlen(optarg));
	case O_VALIDATE: o->validate = 1; return 0;
	case O_VNGEN: return parse_num("--validate-ngen", optarg, 1, 4096, &o->vngen);
	case O_VROUNDS: return parse_num("--validate-rounds", optarg, 1, 1000, &o->vrounds);
	case 't': return parse_num("--threads", optarg, 0, 1024, &o->threads);
	case 'd': o->device = optarg; return 0;
	case 'v': o->verbose = 1; return 0;
	}
	return -1;
}

int
main(int argc, char *argv[])
{
	static const struct option lopts[] = {
		{ "preset", required_argument, NULL, O_PRESET }, { "ngen", required_argument, NULL, O_NGEN },
		{ "temp", required_argument, NULL, O_TEMP }, { "seed", required_argument, NULL, O_SEED },
		{ "raw", no_argument, NULL, O_RAW }, { "corpus-out", required_argument, NULL, O_CORPUS },
		{ "limit", required_argument, NULL, O_LIMIT },
		{ "batch", required_argument, NULL, O_BATCH },
		{ "heldout", required_argument, NULL, O_HELDOUT },
		{ "validate", no_argument, NULL, O_VALIDATE },
		{ "validate-ngen", required_argument, NULL, O_VNGEN },
		{ "validate-rounds", required_argument, NULL, O_VROUNDS },
		{ "threads", required_argument, NULL, 't' }, { "device", required_argument, NULL, 'd' },
		{ "verbose", no_argument, NULL, 'v' }, { "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct opts o = { .topn = 32768, .ngen = 256, .batch = 8, .vngen = 64, .vrounds = 2 };
	struct plist p = { 0 }, hsrc = { 0 }, held = { 0 };
	char err[UTIL_ERRLEN];
	int ch, rc = 0;

	o.hsrc = &hsrc, o.heldout = &held;

	prog = base_name(argv[0]);
	o.device = getenv("MEMRA_DEVICE") ? getenv("MEMRA_DEVICE") : backend_default();
	if (backend_graph_env(NULL, getenv("MEMRA_CUDA_GRAPH"), err) < 0)
		die(2, "MEMRA_CUDA_GRAPH: %s", err);
	if (backend_pdl_env(NULL, getenv("MEMRA_CUDA_PDL"), err) < 0)
		die(2, "MEMRA_CUDA_PDL: %s", err);
	if (backend_gemm_env(NULL, getenv("MEMRA_CUDA_GEMM"), err) < 0)
		die(2, "MEMRA_CUDA_GEMM: %s", err);
	while ((ch = getopt_long(argc, argv, "t:d:vh", lopts, NULL)) != -1) {
		if (ch == 'h')
			return usage(stdout, 0);
		if (ch == '?' || parse_opt(ch, &o) != 0)
			return usage(stderr, 2);
	}
	argc -= optind;
	argv += optind;
	if (argc < 2)
		return usage(stderr, 2);
	if ((o.draft = model_spec_draft(argv[0])) != NULL && !o.validate)
		die(2, "%s+%s: a draft is for --validate (the ranks come from the model alone)",
		    argv[0], o.draft);
	if (argc > 2 && parse_num("topn", argv[2], 1, INT32_MAX, &o.topn) != 0)
		return usage(stderr, 2);
	if (o.limit > 0 && o.corpus == NULL)
		die(2, "--limit needs --corpus-out, so that a rerun can continue");
	if (hsrc.n > 0 && !o.validate)
		die(2, "--heldout needs --validate");
	for (int i = 3; rc == 0 && i < argc; i++)
		rc = add_source(&p, argv[i], 0, err);
	if (rc == 0 && (o.preset != NULL || argc <= 3))
		rc = add_preset(&p, o.preset ? o.preset : "mixed") ? util_err(err, "out of memory") : 0;
	for (size_t i = 0; rc == 0 && i < hsrc.n; i++)
		rc = add_source(&held, hsrc.v[i], 0, err);
	if (rc == 0 && hsrc.n > 0 && held.n == 0)
		rc = util_err(err, "--heldout: no prompts");
	if (rc == 0 && o.validate)
		rc = heldout_set(&held, &p, err);
	if (rc == 0)
		rc = owngen(argv[0], argv[1], &p, &o);
	else
		warnmsg("%s", err), rc = 1;
	if (rc == 0 && o.validate)
		rc = validate(argv[0], argv[1], &o);
	plist_free(&p), plist_free(&hsrc), plist_free(&held);
	return finish(rc);
}
