/*
 * serve: an OpenAI-compatible HTTP server over the library.  One process:
 * connection threads parse requests, tokenize prompts and shape the
 * replies; one worker thread owns the models and runs lib/schedule's step
 * loop (continuous batching: MEMRA_MAX_SESSIONS sessions at once, a
 * bounded FIFO queue behind them, then 503 with Retry-After).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "auth.h"
#include "backend.h"
#include "chat.h"
#include "grammar.h"
#include "http.h"
#include "json.h"
#include "metrics.h"
#include "model.h"
#include "openai.h"
#include "prompt.h"
#include "sample.h"
#include "prefix.h"
#include "schedule.h"
#include "spec.h"
#include "state.h"
#include "tokenizer.h"
#include "util.h"

#define MAX_MODELS 8

extern char **environ;

struct cfg {
	const char *models, *host, *port, *api_key, *device, *compat;
	const char *draft, *trim, *full_prec;
	const char *keys_file;	/* MEMRA_API_KEYS_FILE */
	int	ctx, max_sessions, spec_k, threads, serve_spec;
	int	queue, chunk, step_prefill, reuse;
	long	prefix_mb;	/* -1: sized from free memory */
	struct auth_limits lim;	/* MEMRA_RATE_RPM, MEMRA_RATE_TPM: each key's defaults */
	int	drain_s;	/* MEMRA_DRAIN_S */
};

/* One request as the access log and the metrics see it. */
struct acct {
	long	id;
	const char *method, *endpoint;	/* endpoint: a served path, "other" or "-" */
	const char *model;	/* NULL: none */
	int	status, key, gone;
	size_t	n_prompt, n_cached;	/* n_cached: of them, not computed again */
	int	n_gen;
	double	t0, t_first, wait;	/* util_now() at arrival and first token (-1:
					 * none); seconds queued (-1: never admitted) */
};

/* The handles of serve's metric families (struct opsm_fam lists them). */
struct opsm {
	struct metrics *m;
	int	req, prompt, completion, cached, ttft, itl, dur, queue, running, inflight;
	int	draining, rounds, drafted, accepted, steps, gen, prefill, busy, limited;
	int	mem_used, mem_total, cpu, rss, vsize, fds, max_fds, start;
	int	pc_bytes, pc_budget, pc_lookups, pc_hits, pc_hit_tokens, pc_evict, reused, parked;
	pthread_mutex_t scrape;	/* one scrape at a time syncs the counters */
	_Atomic size_t mem_free, mem_all;	/* the device's, sampled by the worker */
};

struct served {
	char	*name, *spec;
	struct model *m;
	struct prompt *pr;
	int	nv, k;		/* k: speculative draft length, 0 plain */
	int	lane;		/* in the scheduler */
	struct grammar_vocab *gv;	/* response_format's: made at its first use */
	struct grammar_cache *gc;
};

struct job {
	struct served *sv;
	int	fd, chat, think, max_tokens;	/* max_tokens: q's, within the context */
	struct openai_req q;
	int32_t	*ids;		/* the prompt, and the forced text's tokens */
	size_t	n_ids;
	char	*forced;	/* what tool_choice makes the reply begin with, or NULL */
	struct grammar *grammar;	/* response_format's (a reference), or NULL */
	long	id;
	struct sched_seq **seq;	/* [q.n] */
	double	wait, first;	/* choice 0's seconds to admission and first token */
	struct acct *acct;	/* what the access log and metrics get */
};

struct server {
	struct cfg c;
	struct backend *be;
	struct served mod[MAX_MODELS];
	int	n_mod;
	struct sched *sc;
	pthread_mutex_t mu;
	long	next_id;
	int	graph_stats;	/* MEMRA_CUDA_GRAPH=stats */
	int	graph_said;	/* a recording failure was reported */
	struct auth *auth;
	struct opsm om;
	atomic_int inflight, draining;	/* requests being answered; 1 after SIGTERM/SIGINT */
};

struct conn {
	struct server *s;
	int	fd;
};

static int
usage(FILE *fp, int status)
{
	fprintf(fp, "usage: %s [--models spec] [--host H] [--port P] [--ctx N] [--max-sessions N]\n"
	    "       [--spec-k K] [--draft file] [--frspec-trim file] [--full-prec 0 | 1]\n"
	    "       [--prefix-cache-mb N] [--compat openai] [--api-key key] [-t N]\n"
	    "       [--device cpu | cuda[:N]] [--queue N] [--prefill-chunk N]\n"
	    "       [--step-prefill N] [--serve-spec 0 | 1] [--reuse-pool 0 | 1]\n"
	    "       [--api-keys-file file] [--rate-rpm N] [--rate-tpm N] [--drain-s N]\n", prog);
	if (fp == stdout)
		fputs("  --models SPEC        name=model[+draft][,name2=model2...] (MEMRA_MODELS)\n"
		    "  --host H, --port P   listening address (MEMRA_HOST 127.0.0.1, MEMRA_PORT 8080)\n"
		    "  --ctx N              context positions per request (MEMRA_CTX, 4096)\n"
		    "  --max-sessions N     sessions running at once (MEMRA_MAX_SESSIONS, 4)\n"
		    "  --queue N            requests waiting beyond them, then 503 (MEMRA_QUEUE, 4 x sessions)\n"
		    "  --prefill-chunk N    prompt tokens a prefill chunk (MEMRA_PREFILL_CHUNK, 512)\n"
		    "  --step-prefill N     prompt tokens a step prefills (MEMRA_STEP_PREFILL, 4 x chunk)\n"
		    "  --serve-spec 0|1     0: no speculative decoding (MEMRA_SERVE_SPEC, 1)\n"
		    "  --spec-k K           MTP draft tokens per round, 0 plain (MEMRA_SPEC_K, 3)\n"
		    "  --draft FILE         external MTP draft GGUF (MEMRA_MTP_DRAFT)\n"
		    "  --frspec-trim FILE   self-trim the draft head (MEMRA_FRSPEC_TRIM)\n"
		    "  --full-prec 0|1      1: the full head drafts (MEMRA_FULL_PREC)\n"
		    "  --prefix-cache-mb N  each model's prefix cache, 0 off (MEMRA_PREFIX_CACHE_MB,\n"
		    "                       from free memory)\n"
		    "  --reuse-pool 0|1     0: no parked conversations (MEMRA_REUSE_POOL, 1)\n"
		    "  --compat openai      the API dialect (MEMRA_COMPAT)\n"
		    "  --api-key KEY        require Authorization: Bearer KEY (MEMRA_API_KEY)\n"
		    "  --api-keys-file FILE accepted keys' sha256 digests, one a line (MEMRA_API_KEYS_FILE)\n"
		    "  --rate-rpm N         requests a minute a key, 0 no limit (MEMRA_RATE_RPM, 0)\n"
		    "  --rate-tpm N         prompt + completion tokens a minute a key (MEMRA_RATE_TPM, 0)\n"
		    "  --drain-s N          SIGTERM/SIGINT: seconds to finish what runs (MEMRA_DRAIN_S, 30)\n"
		    "  -t N                 CPU threads (default: all cores)\n"
		    "  --device D           cpu, cuda or cuda:N (MEMRA_DEVICE)\n"
		    "  -h, --help           this text\n", fp);
	return status;
}

/* --- responses --- */

static int
write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w, n -= w;
	}
	return 0;
}

/* A response with extra header lines xh ("" or lines ending in CRLF). */
static int
respond_x(int fd, int status, const char *ctype, const char *xh, const char *body, size_t n,
    int keep)
{
	char h[512];
	int hl = snprintf(h, sizeof h, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\n%s"
	    "Content-Length: %zu\r\nConnection: %s\r\n\r\n", status, http_reason(status), ctype,
	    xh, n, keep ? "keep-alive" : "close");

	return write_all(fd, h, hl) != 0 || write_all(fd, body, n) != 0 ? -1 : 0;
}

static int
respond(int fd, int status, const char *ctype, const char *body, size_t n, int keep)
{
	return respond_x(fd, status, ctype, "", body, n, keep);
}

static int
respond_error(int fd, int status, const char *msg, int keep)
{
	char *b = NULL;
	size_t n = 0;
	FILE *fp = open_memstream(&b, &n);
	const char *type = status == 401 ? "authentication_error" : status >= 500 ?
	    "server_error" : status == 404 ? "not_found_error" : "invalid_request_error";
	int rc;

	if (fp == NULL)
		return -1;
	fputs("{\"error\": {\"message\": ", fp);
	json_put_str(fp, msg, strlen(msg), 0);
	fprintf(fp, ", \"type\": \"%s\", \"code\": %d}}\n", type, status);
	fclose(fp);
	/* busy: a client may retry after a second (the openai SDK reads it) */
	rc = respond_x(fd, status, "application/json", status == 503 ? "Retry-After: 1\r\n" : "",
	    b, n, keep);
	free(b);
	return rc;
}

/* What a generation request's job was: its model and prompt tokens. */
static void
acct_job(struct acct *a, const char *model, size_t n_prompt)
{
	a->model = model, a->n_prompt = n_prompt;
}

/* What its reply was: tokens, seconds queued, when the first came, the client left. */
static void
acct_generated(struct acct *a, int n_gen, double wait, double t_first, int gone)
{
	a->n_gen = n_gen, a->wait = wait, a->t_first = t_first, a->gone = gone;
}

/* --- generation (the worker) --- */

/* One choice of a reply, as it is generated. */
struct out {
	struct job *j;
	struct sched_seq *seq;	/* NULL once released */
	struct openai_resp r;	/* what every chunk and the reply carry (r.index: the choice) */
	struct tokenizer_stream *ts;
	char	*text;		/* generated text so far (beginning with j->forced) */
	size_t	len, cap, sent;	/* sent: bytes already streamed */
	int32_t	*ids;		/* a model without a tokenizer: the ids generated */
	int	n_gen, in_think, in_tool, dead, ended, failed;
	int32_t	*lp_ids;	/* with logprobs: the tokens generated, [n_lp] */
	struct sched_logprob *lp;
	int	n_lp, cap_lp, lp_sent;	/* lp_sent: streamed */
	size_t	lp_off;		/* bytes of the streamed tokens' text */
	const char *finish;
};

static int
sse(struct out *o, const char *json, size_t n)
{
	if (o->dead || write_all(o->j->fd, "data: ", 6) != 0 || write_all(o->j->fd, json, n) != 0 ||
	    write_all(o->j->fd, "\n\n", 2) != 0)
		o->dead = 1;
	return o->dead ? -1 : 0;
}

/* Send the JSON b[n] as one server-sent event and free it (NULL: out of memory). */
static void
sse_json(struct out *o, char *b, size_t n)
{
	if (b == NULL)
		o->dead = 1;
	else
		sse(o, b, n);
	free(b);
}

/* One streamed chunk: a delta of text under key (content, reasoning_content),
 * with the logprobs of the tokens not yet streamed. */
static void
chunk(struct out *o, const char *key, const char *s, size_t n, const char *finish)
{
	struct openai_lp lp = { o->lp_ids + o->lp_sent, o->lp + o->lp_sent, o->n_lp - o->lp_sent,
	    o->lp_off };
	size_t bl, pl;
	char *b = openai_chunk(&o->r, key, s, n, o->j->q.logprobs ? &lp : NULL, finish, &bl);

	sse_json(o, b, bl);
	for (; o->lp_sent < o->n_lp; o->lp_sent++)
		if (o->r.tok != NULL && tokenizer_piece(o->r.tok, o->lp_ids[o->lp_sent], &pl) != NULL)
			o->lp_off += pl;
}

static size_t
utf8_back(const char *s, size_t n)
{
	while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
		n--;
	return n;
}

/* Stream what is safe of o->text: hold back what may still become a
 * stop string, "</think>" or "<tool_call>". */
static void
stream_more(struct out *o, int final)
{
	size_t hold = final ? 0 : 11;
	int chat = o->j->chat;

	for (int i = 0; i < o->j->q.n_stop; i++)
		if (!final && strlen(o->j->q.stop[i]) > hold)
			hold = strlen(o->j->q.stop[i]);
	if (chat && o->sent == 0 && o->len >= 7 && memcmp(o->text, "<think>", 7) == 0)
		o->sent = 7, o->in_think = 1;	/* a reply that opens its own think block */
	while (!o->dead && !o->in_tool && o->sent < o->len) {
		const char *t = o->text + o->sent, *mark = o->in_think ? "</think>" : "<tool_call>";
		char *hit = chat ? memmem(t, o->len - o->sent, mark, strlen(mark)) : NULL;
		size_t n = hit ? (size_t)(hit - t) : o->len - o->sent > hold ?
		    utf8_back(t, o->len - o->sent - hold) : 0;

		if (n > 0)
			chunk(o, !chat ? NULL : o->in_think ? "reasoning_content" : "content", t, n, NULL);
		o->sent += n;
		if (hit == NULL)
			break;
		o->sent += strlen(mark);
		if (o->in_think) {
			o->in_think = 0;
			while (o->sent < o->len && o->text[o->sent] == '\n')
				o->sent++;
		} else
			o->in_tool = 1;
	}
}

/* 1 when the client closed its end of fd (what it sent before stays readable). */
static int
client_gone(int fd)
{
	char c;

	return recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

/* Append s[n] to o->text: 0, or -1 when out of memory. */
static int
text_add(struct out *o, const char *s, size_t n)
{
	if (o->len + n + 1 > o->cap) {
		size_t nc = (o->len + n + 1) * 2;
		char *nt = realloc(o->text, nc);

		if (nt == NULL)
			return -1;
		o->text = nt, o->cap = nc;
	}
	memcpy(o->text + o->len, s, n);
	o->len += n;
	o->text[o->len] = '\0';
	return 0;
}

/* Keep token t's logprobs lp: 0, or -1 when out of memory. */
static int
lp_add(struct out *o, int32_t t, const struct sched_logprob *lp)
{
	if (o->n_lp == o->cap_lp) {
		int nc = o->cap_lp ? 2 * o->cap_lp : 64;
		int32_t *ni = realloc(o->lp_ids, nc * sizeof *ni);
		struct sched_logprob *nl = ni ? realloc(o->lp, nc * sizeof *nl) : NULL;

		if (ni != NULL)
			o->lp_ids = ni;
		if (nl == NULL)
			return -1;
		o->lp = nl, o->cap_lp = nc;
	}
	o->lp_ids[o->n_lp] = t, o->lp[o->n_lp++] = *lp;
	return 0;
}

/* A model without a tokenizer: the ids are the reply (o->ids has max_tokens);
 * 1 when it is full. */
static int
take_id(struct out *o, int32_t t)
{
	if (o->n_gen == o->j->max_tokens)
		return 1;
	o->ids[o->n_gen++] = t;
	if (o->j->q.stream) {
		size_t bl;
		char *b = openai_chunk_ids(&o->r, &t, 1, &bl);

		sse_json(o, b, bl);
	}
	return 0;
}

/* Take token t (lp: its logprobs, or NULL); 1 when the reply ends here (a
 * stop string, or the client is gone: o->finish set). */
static int
take(struct out *o, int32_t t, const struct sched_logprob *lp)
{
	struct job *j = o->j;
	const char *s;
	size_t n = 0, from = o->len;

	if (lp != NULL && lp_add(o, t, lp) != 0)
		return o->finish = "length", 1;
	if (o->ts == NULL) {
		if (take_id(o, t))
			return o->finish = "length", 1;
	} else if (o->n_gen++, (s = tokenizer_stream_push(o->ts, t, &n)) != NULL && n > 0) {
		if (text_add(o, s, n) != 0)
			return o->finish = "length", 1;
		for (int i = 0; i < j->q.n_stop; i++) {
			size_t k = strlen(j->q.stop[i]), at = from > k ? from - k : 0;
			char *hit = strstr(o->text + at, j->q.stop[i]);

			if (hit != NULL) {
				o->len = hit - o->text;
				o->text[o->len] = '\0';
				return o->finish = "stop", 1;
			}
		}
	}
	if (j->q.stream && o->ts != NULL)
		stream_more(o, 0);
	else if (!j->q.stream && client_gone(j->fd))
		o->dead = 1;
	if (o->dead)
		return o->finish = "stop", 1;
	return 0;
}

/*
 * Choice o's tokens that are there, waiting up to wait_s for one; 1 when
 * the choice has ended (o->finish; o->failed with err for a failed one).
 */
static int
pump(struct server *s, struct out *o, double wait_s, char *err)
{
	int32_t buf[64];
	struct sched_logprob lpb[64];
	int fin = SCHED_RUNNING, lp = o->j->q.logprobs;
	int n = sched_read_lp(s->sc, o->seq, buf, lp ? lpb : NULL, 64, &fin, wait_s);

	/* no token for a while (queued, or a long prompt priming): is the client there? */
	if (n == 0 && fin == SCHED_RUNNING && client_gone(o->j->fd)) {
		o->dead = 1, o->finish = "stop";
		return 1;
	}
	for (int i = 0; i < n; i++)
		if (take(o, buf[i], lp ? &lpb[i] : NULL))
			return 1;
	if (fin == SCHED_RUNNING)
		return 0;
	if (fin == SCHED_ERROR) {
		o->failed = 1;
		util_err(err, "%s", sched_seq_errmsg(o->seq));
	}
	o->finish = fin == SCHED_LENGTH ? "length" : "stop";
	return 1;
}

/* The calls of choice o's text, to stream (none: r->ncalls 0). */
static void
stream_calls(struct out *o, struct chat_reply *r)
{
	size_t bl, max = o->j->q.parallel_tool_calls ? r->ncalls : 1;

	for (size_t i = 0; i < r->ncalls && i < max; i++)
		for (int head = 1; head >= 0; head--) {
			char *b = openai_chunk_call(&o->r, &r->calls[i], i, head, &bl);

			sse_json(o, b, bl);
		}
}

/* The end of choice o's stream: tool calls, the finish chunk. */
static void
stream_end(struct out *o)
{
	const char *finish = o->finish;

	if (o->ts != NULL)
		stream_more(o, 1);
	if (o->j->chat && o->in_tool) {
		struct chat_reply r = { 0 };
		char err[UTIL_ERRLEN];

		if (chat_parse_reply(o->text, o->len, o->j->think, &r, err) == 0 && r.ncalls > 0) {
			stream_calls(o, &r);
			finish = "tool_calls";
		}
		chat_reply_free(&r);
	}
	chunk(o, NULL, NULL, 0, finish);
}

/*
 * A reply that tool_choice began with a tool call and that ended inside it
 * (max_tokens, a stop): the call is closed, so that it parses as one (its
 * arguments as far as they came).
 */
static void
close_forced(struct out *o)
{
	const char *open = NULL;

	for (const char *p = o->text; p != NULL && (p = strstr(p, "<tool_call>")) != NULL; p++)
		open = p;
	if (o->j->forced != NULL && open != NULL && strstr(open, "</tool_call>") == NULL &&
	    text_add(o, "\n</tool_call>", 13) != 0)
		o->dead = 1;
}

/* Choice i of o ends: its session goes (choice 0's times and cached prompt
 * tokens, which the usage tells, kept first). */
static void
out_end(struct server *s, struct job *j, struct out *o, int i)
{
	if (o[i].seq == NULL)
		return;
	if (i == 0) {
		sched_seq_times(s->sc, o[i].seq, &j->wait, &j->first);
		o[0].r.cached_tokens = (size_t)sched_seq_cached(s->sc, o[i].seq);
	}
	sched_release(s->sc, o[i].seq);
	o[i].seq = NULL;
}

/*
 * The choices o[n] from the scheduler's tokens, each streamed as it
 * comes and ended as it ends (released then); 0, or -1 with err when one
 * failed.
 */
static int
generate(struct server *s, struct job *j, struct out *o, int n, char *err)
{
	int left = n, rc = 0;

	while (left > 0) {
		int waited = 0, dead = 0;

		for (int i = 0; i < n; i++) {
			if (o[i].ended)
				continue;
			/* one choice: wait for it; several: a short wait on the first */
			if (pump(s, &o[i], n == 1 ? 0.5 : waited++ ? 0 : 0.05, err)) {
				o[i].ended = 1, left--;
				out_end(s, j, o, i);
				if (o[i].text != NULL)
					close_forced(&o[i]);
				rc |= o[i].failed ? -1 : 0;
				if (j->q.stream && !o[i].failed)
					stream_end(&o[i]);
			}
			dead |= o[i].dead;
		}
		if (dead) {	/* the client is gone: every choice with it */
			for (int i = 0; i < n; i++)
				o[i].dead = 1;
			break;
		}
	}
	for (int i = 0; i < n; i++)
		out_end(s, j, o, i);
	return rc;
}

/* The whole (non-streamed) response. */
static void
reply_whole(struct job *j, struct out *o, int n, int completion_tokens)
{
	struct openai_choice *c = calloc(n, sizeof *c);
	size_t bl;
	char *b = NULL;

	for (int i = 0; c != NULL && i < n; i++) {
		c[i] = (struct openai_choice){ .text = o[i].text, .len = o[i].len, .ids = o[i].ids,
		    .n_ids = o[i].ids ? o[i].n_gen : 0, .finish = o[i].finish,
		    .want_lp = j->q.logprobs, .lp = { o[i].lp_ids, o[i].lp, o[i].n_lp, 0 },
		    .max_calls = j->q.parallel_tool_calls ? 0 : 1 };
	}
	if (c != NULL)
		b = openai_reply(&o[0].r, c, n, j->think, completion_tokens, &bl);
	if (b != NULL)
		respond(j->fd, 200, "application/json", b, bl, 1);
	else
		respond_error(j->fd, 500, "out of memory", 1);
	free(b), free(c);
}

/* Choice i of job j's state before its first token: 0, or -1 (out of memory). */
static int
out_init(struct job *j, struct out *o, int i)
{
	const struct tokenizer *tok = prompt_tokenizer(j->sv->pr);

	*o = (struct out){ .j = j, .seq = j->seq[i], .in_think = j->think, .r = { .id = j->id,
	    .chat = j->chat, .model = j->sv->name, .created = (long)time(NULL),
	    .prompt_tokens = j->n_ids, .index = i, .tok = tok } };
	if (tok == NULL)
		return (o->ids = malloc((size_t)j->max_tokens * sizeof *o->ids)) != NULL ? 0 : -1;
	if ((o->ts = tokenizer_stream_new(tok, 0)) == NULL)
		return -1;
	return j->forced != NULL ? text_add(o, j->forced, strlen(j->forced)) : 0;
}

static void
out_free(struct out *o)
{
	tokenizer_stream_free(o->ts);
	free(o->text), free(o->ids), free(o->lp_ids), free(o->lp);
}

/* The end of a stream: usage (stream_options.include_usage), [DONE]. */
static void
stream_close(struct job *j, struct out *o, int completion_tokens)
{
	size_t bl;
	char *b;

	if (o->dead)
		return;
	if (j->q.include_usage) {
		b = openai_chunk_usage(&o->r, completion_tokens, &bl);
		sse_json(o, b, bl);
	}
	sse(o, "[DONE]", 6);
}

/* Job j's reply, on its connection's thread, from the scheduler's tokens. */
static void
run_job(struct server *s, struct job *j, struct out *o)
{
	static const char h[] = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
	    "Cache-Control: no-cache\r\nConnection: close\r\n\r\n";
	char err[UTIL_ERRLEN] = "";
	double t0 = util_now();
	int n = j->q.n, gen = 0, dead = 0, rc;

	if (j->q.stream && write_all(j->fd, h, sizeof h - 1) != 0)
		for (int i = 0; i < n; i++)
			o[i].dead = 1;
	rc = generate(s, j, o, n, err);
	for (int i = 0; i < n; i++)
		gen += o[i].n_gen, dead |= o[i].dead;
	if (rc != 0) {
		warnmsg("request %ld: %s", j->id, err);
		if (!j->q.stream)
			respond_error(j->fd, 500, err, 1), j->acct->status = 500;
	} else if (j->q.stream)
		stream_close(j, &o[0], gen);
	else if (!dead)
		reply_whole(j, o, n, gen);
	acct_generated(j->acct, gen, j->wait, j->first >= 0 ? t0 + j->first : -1, dead);
	j->acct->n_cached = o[0].r.cached_tokens;
}

/* The CUDA graph line when the server goes idle: a recording failure once,
 * and with stats the counts. */
static void
graph_note(struct server *s)
{
	const struct backend_graph_stats *g = backend_graph_stats(s->be);
	char buf[UTIL_ERRLEN + 100];

	if (!s->graph_stats && (g->why[0] == '\0' || s->graph_said))
		return;
	s->graph_said = g->why[0] != '\0';
	if (backend_graph_note(s->be, s->graph_stats, buf, sizeof buf) != NULL)
		fprintf(stderr, "[serve] cuda graph: %s\n", buf);
}

static void ops_mem_sample(struct server *);

/* The worker: the scheduler's steps while there is work. */
static void *
worker(void *arg)
{
	struct server *s = arg;

	while (sched_wait(s->sc) == 0)
		if (sched_step(s->sc) == 0)
			graph_note(s), ops_mem_sample(s);
	return NULL;
}

/* Queue j with the scheduler: 0, or -1 with err (*full when busy). */
static int
submit(struct server *s, struct job *j, int *full, char *err)
{
	int n_stop;
	const int32_t *stop = prompt_stop_ids(j->sv->pr, &n_stop);
	struct sched_req q = { .lane = j->sv->lane, .ids = j->ids, .n_ids = (int)j->n_ids,
	    .sp = j->q.sp, .max_tokens = j->max_tokens, .ignore_eos = j->q.ignore_eos,
	    .stop = stop, .n_stop = n_stop, .logprobs = j->q.logprobs,
	    .top_logprobs = j->q.top_logprobs, .grammar = j->grammar };

	j->id = j->acct->id;
	return sched_submit_n(s->sc, &q, j->q.n, j->seq, full, err);
}

/* --- requests (connection threads) --- */

static struct served *
find_model(struct server *s, const char *name)
{
	if (name == NULL)
		return s->n_mod == 1 ? &s->mod[0] : NULL;
	for (int i = 0; i < s->n_mod; i++)
		if (strcmp(s->mod[i].name, name) == 0)
			return &s->mod[i];
	return NULL;
}

/* The generation fields of request q into j (the context's room for
 * max_tokens); -1 with err on a bad one. */
static int
request_params(const struct json *q, struct job *j, int max_n, char *err)
{
	struct sampler *smp;

	if (openai_request(q, j->chat, &j->q, err) != 0)
		return -1;
	if (j->q.n > max_n)
		return util_err(err, "'n': %d: more than the %d sessions this server runs at once",
		    j->q.n, max_n);
	if ((smp = sample_new(&j->q.sp, j->sv->nv, err)) == NULL)	/* out-of-range values are 400 */
		return -1;
	sample_free(smp);
	return 0;
}

/* The chat template's context of request q, parsed. */
static struct json *
chat_context(const struct json *q, const struct job *j, char *err)
{
	const struct json *m = json_get(q, "messages"), *t = json_get(q, "tools"),
	    *kw = json_get(q, "chat_template_kwargs");
	char *b = NULL;
	size_t bl = 0;
	FILE *fp;
	struct json *ctx;

	if (m == NULL || m->type != JSON_ARRAY || m->n == 0) {
		util_err(err, "'messages': a non-empty array is required");
		return NULL;
	}
	if (kw != NULL && kw->type != JSON_OBJECT && kw->type != JSON_NULL) {
		util_err(err, "'chat_template_kwargs': not an object");
		return NULL;
	}
	if ((fp = open_memstream(&b, &bl)) == NULL) {
		util_err(err, "out of memory");
		return NULL;
	}
	fputs("{", fp);
	for (size_t i = 0; kw != NULL && kw->type == JSON_OBJECT && i < kw->n; i++) {
		json_put_str(fp, kw->keys[i], kw->keylens[i], 0);
		fputs(": ", fp);
		json_dump(fp, &kw->items[i], 0);
		fputs(", ", fp);
	}
	if (j->q.n_tools > 0) {	/* (none with tool_choice "none") */
		fputs("\"tools\": ", fp);
		json_dump(fp, t, 0);
		fputs(", ", fp);
	}
	fputs("\"messages\": ", fp);
	json_dump(fp, m, 0);
	fputs("}", fp);
	fclose(fp);
	ctx = json_parse(b, bl, err);
	free(b);
	return ctx;
}

/*
 * tool_choice "required" or a named function: the text the reply is made
 * to begin with, after the prompt (text, as rendered): a tool call's
 * opening, in the template's form (<function=NAME> where the template
 * shows that form, else the JSON object's), closing an open think block
 * first.  NULL for "auto" and "none"; j->forced.
 */
static int
forced_call(struct job *j, const char *text, char *err)
{
	const char *name = j->q.tool_name, *think = j->think ? "</think>\n\n" : "";
	int xml = strstr(text, "<function=") != NULL;
	char *f = NULL;
	int rc = 0;

	if (j->q.tool_choice == OPENAI_TOOLS_REQUIRED)
		rc = asprintf(&f, "%s<tool_call>\n", think);
	else if (j->q.tool_choice == OPENAI_TOOLS_NAMED && xml)
		rc = asprintf(&f, "%s<tool_call>\n<function=%s>\n", think, name);
	else if (j->q.tool_choice == OPENAI_TOOLS_NAMED) {
		char *b = NULL;
		size_t bl;
		FILE *fp = open_memstream(&b, &bl);

		if (fp != NULL) {
			json_put_str(fp, name, strlen(name), 0);
			fclose(fp);
			rc = asprintf(&f, "%s<tool_call>\n{\"name\": %s, \"arguments\": ", think, b);
		}
		free(b);
		rc = fp == NULL ? -1 : rc;
	}
	if (rc < 0)
		return util_err(err, "out of memory");
	j->forced = f;
	return 0;
}

/* The forced text's tokens after the prompt's: 0, or -1 with err. */
static int
force_tokens(struct job *j, char *err)
{
	const struct tokenizer *tok = prompt_tokenizer(j->sv->pr);
	size_t n;
	int32_t *f, *all;

	if (j->forced == NULL)
		return 0;
	if ((f = tokenizer_encode(tok, j->forced, strlen(j->forced), TOKENIZER_PARSE_SPECIAL, &n,
	    err)) == NULL)
		return -1;
	if ((all = realloc(j->ids, (j->n_ids + n) * sizeof *all)) == NULL) {
		free(f);
		return util_err(err, "out of memory");
	}
	memcpy(all + j->n_ids, f, n * sizeof *f);
	j->ids = all, j->n_ids += n;
	free(f);
	return 0;
}

/* The chat prompt of q into j; -1 with err. */
static int
chat_prompt(const struct json *q, struct job *j, char *err)
{
	struct json *ctx = chat_context(q, j, err);
	char *text = NULL;
	size_t tl;
	int rc;

	if (ctx == NULL)
		return -1;
	j->ids = prompt_encode_chat(j->sv->pr, ctx, &text, &j->n_ids, err);
	json_free(ctx);
	if (j->ids == NULL)
		return -1;
	tl = strlen(text);
	while (tl > 0 && (text[tl - 1] == '\n' || text[tl - 1] == ' '))
		tl--;
	j->think = tl >= 7 && memcmp(text + tl - 7, "<think>", 7) == 0;
	if (j->q.format != OPENAI_FORMAT_TEXT && j->think &&	/* the document is the content */
	    (j->forced = strdup("</think>\n\n")) == NULL)
		return free(text), util_err(err, "out of memory");
	rc = (j->forced == NULL && forced_call(j, text, err) != 0) || force_tokens(j, err) != 0 ?
	    -1 : 0;
	free(text);
	return rc;
}

/* Tokenize the prompt of q into j; -1 with err. */
static int
request_prompt(const struct json *q, struct job *j, char *err)
{
	if (j->chat) {
		if (chat_prompt(q, j, err) != 0)
			return -1;
	} else {
		const struct json *p = json_get(q, "prompt");

		if (p != NULL && p->type == JSON_ARRAY)	/* token ids, used as they are */
			j->ids = prompt_ids_json(p, j->sv->nv, &j->n_ids, err);
		else if (p == NULL || p->type != JSON_STRING)
			return util_err(err, "'prompt': a string or an array of token ids is required");
		else if (prompt_tokenizer(j->sv->pr) == NULL)
			return util_err(err, "model '%s' has no tokenizer: give the prompt as token ids",
			    j->sv->name);
		else
			j->ids = tokenizer_encode(prompt_tokenizer(j->sv->pr), p->str, p->n,
			    TOKENIZER_ADD_SPECIAL | TOKENIZER_PARSE_SPECIAL, &j->n_ids, err);
		if (j->ids == NULL)
			return -1;
	}
	if (j->n_ids == 0)
		return util_err(err, "the prompt has no tokens");
	return 0;
}

static void
job_free(struct job *j)
{
	openai_request_free(&j->q);
	grammar_free(j->grammar);
	free(j->ids), free(j->forced), free(j->seq);
}

/*
 * The grammar of j's response_format (json_object: any object;
 * json_schema: its schema) into j->grammar, compiled over the model's
 * vocabulary or from its cache; 0, or -1 with err naming the field.
 */
static int
format_grammar(struct server *s, struct job *j, char *err)
{
	struct served *sv = j->sv;
	const struct tokenizer *tok = prompt_tokenizer(sv->pr);
	const int32_t *stop;
	char why[UTIL_ERRLEN];
	int n_stop;

	if (j->q.format == OPENAI_FORMAT_TEXT)
		return 0;
	if (tok == NULL)
		return util_err(err, "'response_format': model '%s' has no tokenizer", sv->name);
	if (j->q.ignore_eos)
		return util_err(err, "'ignore_eos': not with 'response_format' (the document ends "
		    "the reply)");
	if (j->q.tool_choice == OPENAI_TOOLS_REQUIRED || j->q.tool_choice == OPENAI_TOOLS_NAMED)
		return util_err(err, "'response_format': not with a 'tool_choice' that forces a call");
	stop = prompt_stop_ids(sv->pr, &n_stop);
	pthread_mutex_lock(&s->mu);
	if (sv->gc == NULL && (sv->gv = grammar_vocab_new(tok, stop, n_stop, why)) != NULL &&
	    (sv->gc = grammar_cache_new(sv->gv, 64)) == NULL) {
		grammar_vocab_free(sv->gv), sv->gv = NULL;
		util_err(why, "out of memory");
	}
	pthread_mutex_unlock(&s->mu);
	if (sv->gc == NULL)
		return util_err(err, "'response_format': %s", why);
	if ((j->grammar = grammar_cache_get(sv->gc, j->q.schema, why)) == NULL)
		return util_err(err, "'response_format%s': %s", j->q.format ==
		    OPENAI_FORMAT_JSON_SCHEMA ? ".json_schema.schema" : "", why);
	return 0;
}

/* Queue j with the scheduler and answer it: 0, or -1 with err (*full when busy). */
static int
serve_job(struct server *s, struct job *j, int *full, char *err)
{
	struct out *o = calloc(j->q.n, sizeof *o);
	int rc = -1, i = 0;

	if (o == NULL || (j->seq = calloc(j->q.n, sizeof *j->seq)) == NULL)
		util_err(err, "out of memory");
	else if (submit(s, j, full, err) == 0) {
		for (i = 0; i < j->q.n && out_init(j, &o[i], i) == 0; i++)
			;
		if (i < j->q.n) {
			util_err(err, "out of memory");
			for (int k = 0; k < j->q.n; k++)
				sched_release(s->sc, j->seq[k]);
			*full = 2;	/* (500) */
		} else
			run_job(s, j, o), rc = 0;
	}
	for (int k = 0; o != NULL && k < j->q.n; k++)
		out_free(&o[k]);
	free(o);
	return rc;
}

/* A generation request; returns 1 when the connection stays open. */
static int
completion(struct server *s, int fd, const struct http_req *req, int chat, struct acct *a)
{
	struct job j = { .fd = fd, .chat = chat, .acct = a };
	char err[UTIL_ERRLEN] = "";
	struct json *q = json_parse(req->body, req->body_len, err);
	int status = 400, keep = 1, full = 0;

	if (q == NULL) {
		respond_error(fd, 400, err, 1), a->status = 400;
		return 1;
	}
	if (q->type != JSON_OBJECT)
		util_err(err, "the request body is not a JSON object");
	else if ((j.sv = find_model(s, json_get_str(q, "model"))) == NULL)
		status = 404, util_err(err, "model '%s': not served here",
		    json_get_str(q, "model") ? json_get_str(q, "model") : "(none)");
	else if (request_params(q, &j, s->c.max_sessions, err) == 0 &&
	    format_grammar(s, &j, err) == 0 && request_prompt(q, &j, err) == 0) {
		if ((int)j.n_ids >= s->c.ctx)
			util_err(err, "prompt of %zu tokens: does not fit in the context of %d",
			    j.n_ids, s->c.ctx);
		else {
			j.max_tokens = s->c.ctx - (int)j.n_ids;	/* past the context: clamped, "length" */
			if (j.q.max_tokens > 0 && j.q.max_tokens < j.max_tokens)
				j.max_tokens = j.q.max_tokens;
			if (serve_job(s, &j, &full, err) != 0)
				status = full == 1 ? 503 : full == 2 ? 500 : 400;
			else
				status = 0, keep = !j.q.stream;
		}
	}
	if (status != 0)
		respond_error(fd, status, err, 1), a->status = status;
	acct_job(a, j.sv ? j.sv->name : NULL, status == 0 ? j.n_ids : 0);	/* ran: counted */
	json_free(q);
	job_free(&j);
	return keep;
}

/* --- operations: keys, limits, metrics, drain, the access log --- */

static const double ttft_b[] = { 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60 };
static const double itl_b[] = { 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
    2.5 };
static const double dur_b[] = { 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600 };

static const struct opsm_fam {
	size_t	off;		/* of the handle in struct opsm */
	enum metrics_type t;
	const char *name, *labels, *help;
	const double *b;
	int	nb;
} opsm_fams[] = {
#define C METRICS_COUNTER
#define G METRICS_GAUGE
#define H METRICS_HISTOGRAM
#define F(f) offsetof(struct opsm, f)
	{ F(req), C, "memra_requests_total", "endpoint,status", "HTTP requests answered, by "
	    "endpoint and status", NULL, 0 },
	{ F(limited), C, "memra_rate_limited_total", "limit", "Requests refused with 429, by the "
	    "limit that held them (requests, tokens)", NULL, 0 },
	{ F(prompt), C, "memra_prompt_tokens_total", "model",
	    "Prompt tokens of generation requests", NULL, 0 },
	{ F(completion), C, "memra_completion_tokens_total", "model", "Tokens generated", NULL, 0 },
	{ F(cached), C, "memra_cached_tokens_total", "model", "Prompt tokens served from the prefix "
	    "cache", NULL, 0 },
	{ F(ttft), H, "memra_time_to_first_token_seconds", "model", "Seconds from a request's "
	    "arrival to its first token", ttft_b, sizeof ttft_b / sizeof *ttft_b },
	{ F(itl), H, "memra_inter_token_latency_seconds", "model", "A request's mean seconds "
	    "between tokens after the first", itl_b, sizeof itl_b / sizeof *itl_b },
	{ F(dur), H, "memra_request_duration_seconds", "model", "Seconds from a generation "
	    "request's arrival to its last byte", dur_b, sizeof dur_b / sizeof *dur_b },
	{ F(queue), G, "memra_queue_depth", "", "Requests waiting for a session", NULL, 0 },
	{ F(running), G, "memra_running_sessions", "", "Sessions generating", NULL, 0 },
	{ F(inflight), G, "memra_requests_in_flight", "", "Requests being answered", NULL, 0 },
	{ F(draining), G, "memra_draining", "",
	    "1 while the server drains after SIGTERM or SIGINT", NULL, 0 },
	{ F(steps), C, "memra_sched_steps_total", "", "Scheduler steps", NULL, 0 },
	{ F(gen), C, "memra_sched_tokens_total", "", "Tokens the scheduler emitted", NULL, 0 },
	{ F(prefill), C, "memra_sched_prefill_tokens_total", "", "Prompt tokens prefilled", NULL, 0 },
	{ F(busy), C, "memra_sched_refused_total", "", "Requests refused as busy (503)", NULL, 0 },
	{ F(rounds), C, "memra_spec_rounds_total", "k", "Speculative verify rounds, by the drafts "
	    "k of the round", NULL, 0 },
	{ F(drafted), C, "memra_spec_drafted_tokens_total", "k", "Draft tokens verified, by k", NULL, 0 },
	{ F(accepted), C, "memra_spec_accepted_tokens_total", "k",
	    "Draft tokens accepted, by k", NULL, 0 },
	{ F(pc_bytes), G, "memra_prefix_cache_bytes", "model", "Bytes of the prefix cache's blocks "
	    "in use", NULL, 0 },
	{ F(pc_budget), G, "memra_prefix_cache_budget_bytes", "model", "The prefix cache's "
	    "allocation (MEMRA_PREFIX_CACHE_MB)", NULL, 0 },
	{ F(pc_lookups), C, "memra_prefix_cache_lookups_total", "model", "Prefix cache lookups",
	    NULL, 0 },
	{ F(pc_hits), C, "memra_prefix_cache_hits_total", "model", "Prefix cache lookups that "
	    "found a cached prefix", NULL, 0 },
	{ F(pc_hit_tokens), C, "memra_prefix_cache_hit_tokens_total", "model", "Prompt tokens the "
	    "prefix cache's hits covered", NULL, 0 },
	{ F(pc_evict), C, "memra_prefix_cache_evictions_total", "model", "Prefix cache blocks "
	    "evicted", NULL, 0 },
	{ F(reused), C, "memra_reuse_pool_resumed_total", "", "Requests resumed from a parked "
	    "conversation (MEMRA_REUSE_POOL)", NULL, 0 },
	{ F(parked), G, "memra_reuse_pool_parked", "", "Session slots holding a parked "
	    "conversation", NULL, 0 },
	{ F(mem_used), G, "memra_device_memory_used_bytes", "", "Device memory in use (total less "
	    "free; the host's on the CPU), sampled at boot and when the server goes idle", NULL, 0 },
	{ F(mem_total), G, "memra_device_memory_total_bytes", "", "Device memory in all", NULL, 0 },
	{ F(cpu), C, "process_cpu_seconds_total", "",
	    "User and system CPU time spent in seconds", NULL, 0 },
	{ F(rss), G, "process_resident_memory_bytes", "", "Resident memory size in bytes", NULL, 0 },
	{ F(vsize), G, "process_virtual_memory_bytes", "", "Virtual memory size in bytes", NULL, 0 },
	{ F(fds), G, "process_open_fds", "", "Number of open file descriptors", NULL, 0 },
	{ F(max_fds), G, "process_max_fds", "", "Maximum number of open file descriptors", NULL, 0 },
	{ F(start), G, "process_start_time_seconds", "", "Start time of the process since unix "
	    "epoch in seconds", NULL, 0 },
#undef C
#undef G
#undef H
#undef F
};

/* The metric families, and a zero series for each model's token counts. */
static void
ops_metrics(struct server *s)
{
	struct opsm *o = &s->om;

	if ((o->m = metrics_new()) == NULL)
		die(1, "out of memory");
	pthread_mutex_init(&o->scrape, NULL);
	for (size_t i = 0; i < sizeof opsm_fams / sizeof *opsm_fams; i++) {
		const struct opsm_fam *f = &opsm_fams[i];
		int h = metrics_family(o->m, f->t, f->name, f->help, f->labels, f->b, f->nb);

		if (h < 0)
			die(1, "metrics: '%s': cannot register", f->name);
		*(int *)((char *)o + f->off) = h;
	}
	for (int i = 0; i < s->n_mod; i++) {
		const char *v[] = { s->mod[i].name };

		metrics_add(o->m, o->prompt, v, 0), metrics_add(o->m, o->completion, v, 0);
		metrics_add(o->m, o->cached, v, 0);
	}
}

/* The device's memory now (the worker's thread: the backend's device is its). */
static void
ops_mem_sample(struct server *s)
{
	size_t fr, all;

	if (backend_mem_info(s->be, &fr, &all) == 0) {
		s->om.mem_free = fr;
		s->om.mem_all = all;
	}
}

/* Counter f (labels v) up to x, a total kept elsewhere. */
static void
sync_ctr(struct metrics *m, int f, const char *const *v, double x)
{
	double d = x - metrics_get(m, f, v);

	if (d > 0)
		metrics_add(m, f, v, d);
}

/* The numbers kept elsewhere (scheduler, device, /proc) into the metrics. */
static void
ops_scrape(struct server *s)
{
	struct opsm *o = &s->om;
	struct sched_stats st;
	struct metrics_proc p;
	size_t fr = o->mem_free, all = o->mem_all;

	sched_stats(s->sc, &st);
	metrics_set(o->m, o->queue, NULL, st.queued);
	metrics_set(o->m, o->running, NULL, st.running);
	metrics_set(o->m, o->inflight, NULL, s->inflight);
	metrics_set(o->m, o->draining, NULL, s->draining);
	sync_ctr(o->m, o->steps, NULL, st.steps), sync_ctr(o->m, o->gen, NULL, st.tokens);
	sync_ctr(o->m, o->prefill, NULL, st.prefill_tokens);
	sync_ctr(o->m, o->busy, NULL, st.refused);
	for (int k = 1; k <= SPEC_KMAX; k++) {
		char kb[8];
		const char *v[] = { kb };

		if (st.rounds_k[k] == 0)
			continue;
		snprintf(kb, sizeof kb, "%d", k);
		sync_ctr(o->m, o->rounds, v, st.rounds_k[k]);
		sync_ctr(o->m, o->drafted, v, (double)k * st.rounds_k[k]);
		sync_ctr(o->m, o->accepted, v, st.accepted_k[k]);
	}
	sync_ctr(o->m, o->reused, NULL, st.reused);
	metrics_set(o->m, o->parked, NULL, st.parked);
	for (int i = 0; i < s->n_mod; i++) {
		struct prefix_stats ps;
		const char *v[] = { s->mod[i].name };

		if (sched_prefix_stats(s->sc, s->mod[i].lane, &ps) != 0)
			continue;
		metrics_set(o->m, o->pc_bytes, v, (double)ps.bytes);
		metrics_set(o->m, o->pc_budget, v, (double)ps.arena);
		sync_ctr(o->m, o->pc_lookups, v, ps.lookups), sync_ctr(o->m, o->pc_hits, v, ps.hits);
		sync_ctr(o->m, o->pc_hit_tokens, v, ps.hit_tokens);
		sync_ctr(o->m, o->pc_evict, v, ps.evictions);
	}
	metrics_set(o->m, o->mem_used, NULL, (double)(all - fr));
	metrics_set(o->m, o->mem_total, NULL, (double)all);
	if (metrics_proc_read(&p) == 0) {
		sync_ctr(o->m, o->cpu, NULL, p.cpu_seconds);
		metrics_set(o->m, o->rss, NULL, p.rss_bytes);
		metrics_set(o->m, o->vsize, NULL, p.vsize_bytes);
		metrics_set(o->m, o->fds, NULL, p.open_fds);
		metrics_set(o->m, o->max_fds, NULL, p.max_fds);
		metrics_set(o->m, o->start, NULL, p.start_time);
	}
}

static void
metrics_page(struct server *s, int fd)
{
	size_t n;
	char *b;

	pthread_mutex_lock(&s->om.scrape);
	ops_scrape(s);
	b = metrics_render(s->om.m, &n);
	pthread_mutex_unlock(&s->om.scrape);
	if (b == NULL)
		respond_error(fd, 500, "out of memory", 1);
	else
		respond(fd, 200, "text/plain; version=0.0.4; charset=utf-8", b, n, 1);
	free(b);
}

/* An error in OpenAI's shape with its type and code, and extra headers xh. */
static void
respond_oai(int fd, int status, const char *msg, const char *type, const char *code,
    const char *xh)
{
	char *b = NULL;
	size_t n = 0;
	FILE *fp = open_memstream(&b, &n);

	if (fp == NULL)
		return;
	fputs("{\"error\": {\"message\": ", fp);
	json_put_str(fp, msg, strlen(msg), 0);
	fprintf(fp, ", \"type\": \"%s\", \"param\": null, \"code\": \"%s\"}}\n", type, code);
	fclose(fp);
	respond_x(fd, status, "application/json", xh, b, n, 1);
	free(b);
}

/* The API key of req: 0 with a->key set, or -1 after a 401. */
static int
ops_key(struct server *s, int fd, const struct http_req *req, struct acct *a)
{
	const char *h = http_header(req, "Authorization");

	a->key = AUTH_ANON;
	if (auth_count(s->auth) == 0)
		return 0;
	if (h != NULL && strncasecmp(h, "Bearer ", 7) == 0)
		a->key = auth_find(s->auth, h + 7, strlen(h + 7));
	else
		a->key = -1;
	if (a->key >= 0)
		return 0;
	a->status = 401;
	respond_oai(fd, 401, "invalid or missing API key", "invalid_request_error",
	    "invalid_api_key", "");
	return -1;
}

/* The key's limits for a generation request: 0, or -1 after a 429. */
static int
ops_limit(struct server *s, int fd, struct acct *a)
{
	struct auth_limits l = auth_limits(s->auth, a->key);
	double retry;
	enum auth_limit r = auth_admit(s->auth, a->key, util_now(), &retry);
	const char *what = r == AUTH_REQUESTS ? "requests" : "tokens";
	char msg[160], xh[64];
	long secs = (long)ceil(retry);

	if (r == AUTH_OK)
		return 0;
	secs = secs < 1 ? 1 : secs;
	snprintf(msg, sizeof msg, "rate limit reached for %s per minute (limit %ld): try again in "
	    "%ld s", what, r == AUTH_REQUESTS ? l.rpm : l.tpm, secs);
	snprintf(xh, sizeof xh, "Retry-After: %ld\r\n", secs);
	metrics_add(s->om.m, s->om.limited, (const char *[]){ what }, 1);
	a->status = 429;
	respond_oai(fd, 429, msg, what, "rate_limit_exceeded", xh);
	return -1;
}

/* A request begins: its id, counted in flight. */
static void
ops_begin(struct server *s, struct acct *a, const char *method)
{
	*a = (struct acct){ .t0 = util_now(), .t_first = -1, .wait = -1, .key = AUTH_ANON,
	    .status = 200, .method = method, .endpoint = "-" };
	pthread_mutex_lock(&s->mu);
	a->id = ++s->next_id;
	pthread_mutex_unlock(&s->mu);
	s->inflight++;
}

/* A request ends: its tokens charged to its key, its metrics, its log line. */
static void
ops_end(struct server *s, struct acct *a)
{
	struct opsm *o = &s->om;
	double now = util_now(), ttft = a->t_first >= 0 ? a->t_first - a->t0 : -1;
	char st[8];
	const char *v[] = { a->model }, *ev[] = { a->endpoint, st };

	snprintf(st, sizeof st, "%d", a->status);
	metrics_add(o->m, o->req, ev, 1);
	if (a->model != NULL && a->n_prompt > 0) {
		if (a->key >= 0)
			auth_charge(s->auth, a->key, (long)a->n_prompt + a->n_gen, now);
		metrics_add(o->m, o->prompt, v, a->n_prompt);
		metrics_add(o->m, o->cached, v, a->n_cached);
		metrics_add(o->m, o->completion, v, a->n_gen);
		if (ttft >= 0)
			metrics_observe(o->m, o->ttft, v, ttft);
		if (a->n_gen > 1 && ttft >= 0)
			metrics_observe(o->m, o->itl, v, (now - a->t_first) / (a->n_gen - 1));
		if (a->status == 200)
			metrics_observe(o->m, o->dur, v, now - a->t0);
	}
	fprintf(stderr, "[serve] request %ld: %s %s %s %d key=%s prompt=%zu completion=%d queued "
	    "%.2f s, first token %.2f s, %.2f s%s\n", a->id, a->model ? a->model : "-", a->method,
	    a->endpoint, a->status, a->key >= 0 ? auth_label(s->auth, a->key) : "-", a->n_prompt,
	    a->n_gen, a->wait, ttft, now - a->t0, a->gone ? " (client gone)" : "");
	s->inflight--;
}

/* A request the HTTP parser refused (status), logged and counted like the others. */
static void
ops_refused(struct server *s, int status)
{
	struct acct a;

	ops_begin(s, &a, "-");
	a.status = status;
	ops_end(s, &a);
}

static void
models_list(struct server *s, int fd)
{
	char *b = NULL;
	size_t bl = 0;
	FILE *fp = open_memstream(&b, &bl);

	if (fp == NULL)
		return;
	fputs("{\"object\": \"list\", \"data\": [", fp);
	for (int i = 0; i < s->n_mod; i++) {
		fputs(i ? ", {\"id\": " : "{\"id\": ", fp);
		json_put_str(fp, s->mod[i].name, strlen(s->mod[i].name), 0);
		fputs(", \"object\": \"model\", \"created\": 0, \"owned_by\": \"memra\"}", fp);
	}
	fputs("]}\n", fp);
	fclose(fp);
	respond(fd, 200, "application/json", b, bl, 1);
	free(b);
}

static const char *const endpoints[] = {
	"/health", "/metrics", "/v1/models", "/v1/chat/completions", "/v1/completions",
};

/* Answer req on its way in: 1 when the connection stays open. */
static int
dispatch(struct server *s, int fd, const struct http_req *req, struct acct *a)
{
	const char *path = a->endpoint;
	int get = strcmp(req->method, "GET") == 0, post = strcmp(req->method, "POST") == 0;
	int gen = strcmp(path, "/v1/chat/completions") == 0 || strcmp(path, "/v1/completions") == 0;

	if (s->draining) {	/* the connection closes: a client retries elsewhere */
		a->status = 503;
		respond_error(fd, 503, "server shutting down", 0);
		return 0;
	}
	if (strcmp(path, "other") == 0 || (gen ? !post : !get)) {
		a->status = strcmp(path, "other") == 0 ? 404 : 405;
		respond_error(fd, a->status, a->status == 404 ? "no such endpoint" : gen ?
		    "method not allowed: use POST" : "method not allowed: use GET", 1);
		return 1;
	}
	if (strcmp(path, "/health") == 0)
		return respond(fd, 200, "application/json", "{\"status\": \"ok\"}\n", 17, 1), 1;
	if (strcmp(path, "/metrics") == 0)
		return metrics_page(s, fd), 1;
	if (ops_key(s, fd, req, a) != 0 || (gen && ops_limit(s, fd, a) != 0))
		return 1;
	if (!gen)
		return models_list(s, fd), 1;
	return completion(s, fd, req, strcmp(path, "/v1/chat/completions") == 0, a);
}

/* One request; 1 when the connection stays open. */
static int
route(struct server *s, int fd, const struct http_req *req)
{
	struct acct a;
	size_t pl = strcspn(req->target, "?");
	int keep;

	ops_begin(s, &a, req->method);
	a.endpoint = "other";
	for (size_t i = 0; i < sizeof endpoints / sizeof *endpoints; i++)
		if (strlen(endpoints[i]) == pl && strncmp(req->target, endpoints[i], pl) == 0)
			a.endpoint = endpoints[i];
	keep = dispatch(s, fd, req, &a);
	ops_end(s, &a);
	return keep;
}

static void *
connection(void *arg)
{
	struct conn *c = arg;
	struct http_limits lim = { HTTP_HEAD_MAX, 16 << 20 };
	struct http_req *req = malloc(sizeof *req);
	char *buf = NULL, err[UTIL_ERRLEN];
	size_t cap = 0, have = 0;
	int status;

	for (long n; req != NULL;) {
		if ((n = http_read(c->fd, &buf, &cap, &have, &lim, req, &status, err)) <= 0) {
			if (n < 0 && status != 0)
				respond_error(c->fd, status, err, 0), ops_refused(c->s, status);
			break;
		}
		if (!route(c->s, c->fd, req) || !req->keep_alive)
			break;
		memmove(buf, buf + n, have - n);
		have -= n;
	}
	close(c->fd);
	free(buf), free(req), free(c);
	return NULL;
}

/* --- boot --- */

static const char *const refused[] = {
	"MEMRA_DSPARK_", "MEMRA_GEMMA_", "MEMRA_PP_", "MEMRA_VISION_DIR",
	"MEMRA_DFLASH_PREC", "MEMRA_DRAFT", "MEMRA_QUANTIZE",
};

/* A MEMRA_* variable the cookbook uses for a feature serve lacks: refuse. */
static void
refuse_unknown(void)
{
	for (char **e = environ; *e != NULL; e++)
		for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
			size_t n = strlen(refused[i]);

			if (strncmp(*e, refused[i], n) == 0 &&
			    (refused[i][n - 1] == '_' || (*e)[n] == '='))
				die(2, "%.*s: not supported by this server (refusing to run a different "
				    "configuration)", (int)strcspn(*e, "="), *e);
		}
}

static const char *
env(const char *name)
{
	const char *v = getenv(name);

	return v != NULL && v[0] != '\0' ? v : NULL;
}

static void
int_setting(const char *name, const char *v, long lo, long hi, long *out)
{
	int64_t i;

	if (v != NULL && util_parse_i64(v, lo, hi, &i) != 0)
		die(2, "%s: '%s': out of range %ld..%ld or not a number", name, v, lo, hi);
	if (v != NULL)
		*out = i;
}

/* The operator's settings: keys, limits, drain. */
static void
parse_ops(const char *const *v, struct cfg *c)
{
	long l;

	c->keys_file = v['K'];
	l = 0, int_setting("MEMRA_RATE_RPM (--rate-rpm)", v['r'], 0, 1L << 30, &l), c->lim.rpm = l;
	l = 0, int_setting("MEMRA_RATE_TPM (--rate-tpm)", v['T'], 0, 1L << 40, &l), c->lim.tpm = l;
	l = 30, int_setting("MEMRA_DRAIN_S (--drain-s)", v['G'], 0, 86400, &l), c->drain_s = l;
}

static int
parse(int argc, char *argv[], struct cfg *c)
{
	static const struct option lopts[] = {
		{ "models", required_argument, NULL, 'm' }, { "host", required_argument, NULL, 'H' },
		{ "port", required_argument, NULL, 'p' }, { "ctx", required_argument, NULL, 'c' },
		{ "max-sessions", required_argument, NULL, 'S' },
		{ "spec-k", required_argument, NULL, 'k' }, { "draft", required_argument, NULL, 'D' },
		{ "frspec-trim", required_argument, NULL, 'R' },
		{ "full-prec", required_argument, NULL, 'F' },
		{ "prefix-cache-mb", required_argument, NULL, 'P' },
		{ "compat", required_argument, NULL, 'C' }, { "api-key", required_argument, NULL, 'A' },
		{ "device", required_argument, NULL, 'd' }, { "help", no_argument, NULL, 'h' },
		{ "serve-spec", required_argument, NULL, 'X' }, { "queue", required_argument, NULL, 'Q' },
		{ "prefill-chunk", required_argument, NULL, 'U' },
		{ "step-prefill", required_argument, NULL, 'B' },
		{ "reuse-pool", required_argument, NULL, 'o' },
		{ "api-keys-file", required_argument, NULL, 'K' },
		{ "rate-rpm", required_argument, NULL, 'r' },
		{ "rate-tpm", required_argument, NULL, 'T' },
		{ "drain-s", required_argument, NULL, 'G' },
		{ NULL, 0, NULL, 0 },
	};
	const char *v[128] = { 0 };
	long l;
	int ch;

	/* environment first, then the flags over it */
	v['m'] = env("MEMRA_MODELS"), v['H'] = env("MEMRA_HOST"), v['p'] = env("MEMRA_PORT");
	v['c'] = env("MEMRA_CTX"), v['S'] = env("MEMRA_MAX_SESSIONS"), v['k'] = env("MEMRA_SPEC_K");
	v['D'] = getenv("MEMRA_MTP_DRAFT"), v['R'] = getenv("MEMRA_FRSPEC_TRIM");
	v['F'] = env("MEMRA_FULL_PREC"), v['P'] = env("MEMRA_PREFIX_CACHE_MB");
	v['C'] = env("MEMRA_COMPAT"), v['A'] = env("MEMRA_API_KEY"), v['d'] = env("MEMRA_DEVICE");
	v['X'] = env("MEMRA_SERVE_SPEC"), v['Q'] = env("MEMRA_QUEUE");
	v['U'] = env("MEMRA_PREFILL_CHUNK"), v['B'] = env("MEMRA_STEP_PREFILL");
	v['o'] = env("MEMRA_REUSE_POOL");
	v['K'] = env("MEMRA_API_KEYS_FILE"), v['r'] = env("MEMRA_RATE_RPM");
	v['T'] = env("MEMRA_RATE_TPM"), v['G'] = env("MEMRA_DRAIN_S");
	while ((ch = getopt_long(argc, argv, "t:h", lopts, NULL)) != -1) {
		if (ch == 'h')
			exit(usage(stdout, 0));
		if (ch == '?' || ch == ':')
			return -1;
		v[ch] = optarg;
	}
	if (optind != argc)
		return -1;
	c->models = v['m'], c->host = v['H'] ? v['H'] : "127.0.0.1";
	c->port = v['p'] ? v['p'] : "8080", c->api_key = v['A'];
	c->draft = v['D'], c->trim = v['R'], c->full_prec = v['F'];
	c->device = v['d'] ? v['d'] : backend_default();
	c->compat = v['C'];
	l = 4096, int_setting("MEMRA_CTX (--ctx)", v['c'], 16, 1 << 24, &l), c->ctx = l;
	l = 4, int_setting("MEMRA_MAX_SESSIONS (--max-sessions)", v['S'], 1, 4096, &l);
	c->max_sessions = l;
	l = 4L * c->max_sessions, int_setting("MEMRA_QUEUE (--queue)", v['Q'], 0, 1 << 20, &l);
	c->queue = l;
	l = 512, int_setting("MEMRA_PREFILL_CHUNK (--prefill-chunk)", v['U'],
	    BACKEND_ROWS_INVARIANT + 1, 1 << 20, &l), c->chunk = l;
	l = 4L * c->chunk, int_setting("MEMRA_STEP_PREFILL (--step-prefill)", v['B'], c->chunk,
	    1 << 24, &l), c->step_prefill = l;
	l = 1, int_setting("MEMRA_SERVE_SPEC (--serve-spec)", v['X'], 0, 1, &l), c->serve_spec = l;
	l = -1, int_setting("MEMRA_SPEC_K (--spec-k)", v['k'], 0, SPEC_KMAX, &l), c->spec_k = l;
	l = -1, int_setting("MEMRA_PREFIX_CACHE_MB (--prefix-cache-mb)", v['P'], 0, 1L << 30, &l);
	c->prefix_mb = l;
	l = 1, int_setting("MEMRA_REUSE_POOL (--reuse-pool)", v['o'], 0, 1, &l), c->reuse = l;
	l = 8080, int_setting("MEMRA_PORT (--port)", c->port, 0, 65535, &l);
	l = 0, int_setting("-t", v['t'], 0, 4096, &l), c->threads = l;
	parse_ops(v, c);
	if (c->models == NULL)
		die(2, "no model: set MEMRA_MODELS or --models (name=spec[+draft],...)");
	if (c->compat != NULL && strcmp(c->compat, "openai") != 0)
		die(2, "MEMRA_COMPAT: '%s': only 'openai' is supported", c->compat);
	if (c->full_prec != NULL && strcmp(c->full_prec, "0") != 0 &&
	    strcmp(c->full_prec, "1") != 0)
		die(2, "MEMRA_FULL_PREC: '%s': not 0 or 1", c->full_prec);
	if (!backend_valid_device(c->device))
		die(2, "MEMRA_DEVICE (--device): '%s': not cpu or cuda[:N]", c->device);
	return 0;
}

/* The measured costs of sv's steps and the K each load gets from them. */
static void
spec_policy_lines(struct server *s, struct served *sv)
{
	struct sched_spec_cost c;
	static const int m[] = { 1, 2, 4, 8, 16 };

	sched_spec_costs(s->sc, sv->lane, &c);
	fprintf(stderr, "[sched] %s: a step of m rows (ms):", sv->name);
	for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
		fprintf(stderr, " %d: %.3g", m[i], 1e3 * c.rows[m[i]]);
	fprintf(stderr, "; a draft %.3g ms\n", 1e3 * c.draft);
	fprintf(stderr, "[sched] %s: speculative K by load, up to %d (acceptance 0.5 until "
	    "measured):", sv->name, sv->k);
	for (int n = 1, last = -1; n <= s->c.max_sessions; n++) {
		int k = sched_spec_k(&c, sv->k, n);

		if (k != last)
			fprintf(stderr, " %d+ sessions K=%d", n, k), last = k;
	}
	fputc('\n', stderr);
}

/* The boot line of model sv's prefix cache. */
static void
cache_line(struct server *s, struct served *sv, const struct sched_fit *f)
{
	struct prefix_stats ps;
	double mib = 1 << 20;

	if (sched_prefix_stats(s->sc, sv->lane, &ps) != 0) {
		fprintf(stderr, "[sched] %s: prefix cache: off (%s)\n", sv->name, s->c.prefix_mb == 0 ?
		    "MEMRA_PREFIX_CACHE_MB=0" : "no memory for a block");
		return;
	}
	fprintf(stderr, "[sched] %s: prefix cache: %.0f MiB%s, %d blocks of %d tokens, %.2f MiB "
	    "each (KV rows and recurrent state at each prefill chunk's end)\n", sv->name,
	    f->prefix / mib, s->c.prefix_mb < 0 ? " (a quarter of the memory the sessions leave, "
	    "at most 8 GiB on a GPU, 1 GiB on the CPU: MEMRA_PREFIX_CACHE_MB sets it)" : "", ps.max_blocks, ps.block,
	    ps.block_bytes / mib);
}

/* The scheduler's events: a conversation resumed from the pool, or one
 * that extends a parked conversation served cold and why. */
static void
note(void *arg, const struct sched_note *n)
{
	struct server *s = arg;
	const char *name = "?";

	for (int i = 0; i < s->n_mod; i++)
		if (s->mod[i].lane == n->lane)
			name = s->mod[i].name;
	if (n->kind == SCHED_NOTE_REUSE)
		fprintf(stderr, "[worker] %s: reuse: %d committed tokens resumed (of %d parked; "
		    "prefilled again from that chunk boundary on)\n", name, n->tokens, n->parked);
	else
		fprintf(stderr, "[worker] %s: reuse: served cold: %s\n", name, n->why);
}

/* Model sv's sessions in the scheduler, and the boot lines that say what they cost. */
static void
sessions(struct server *s, struct served *sv)
{
	struct sched_fit f;
	char err[UTIL_ERRLEN];
	double mib = 1 << 20;
	int n = s->c.max_sessions;

	if ((sv->lane = sched_add_model(s->sc, sv->m, sv->k, s->c.spec_k >= 0, &f, err)) < 0)
		die(1, "%s: MEMRA_MAX_SESSIONS x MEMRA_CTX: %s", sv->name, err);
	fprintf(stderr, "[sched] %s: %d sessions x ctx %d: %.1f MiB each, %.1f MiB in all "
	    "(%.0f MiB free before; room for %d)\n", sv->name, n, s->c.ctx, f.session / mib,
	    f.session * n / mib, f.avail / mib, f.fit);
	cache_line(s, sv, &f);
	if (sv->k > 0 && s->c.spec_k >= 0)
		fprintf(stderr, "[sched] %s: speculative K pinned at %d (MEMRA_SPEC_K)\n", sv->name,
		    sv->k);
	else if (sv->k > 0)
		spec_policy_lines(s, sv);
}

static void
load(struct server *s, char *spec)
{
	struct served *sv = &s->mod[s->n_mod];
	struct model_options mo = { 0 };
	char *eq = strchr(spec, '='), err[UTIL_ERRLEN] = "", line[256];
	int nmtp;

	if (s->n_mod == MAX_MODELS)
		die(2, "MEMRA_MODELS: more than %d models", MAX_MODELS);
	if (eq == NULL || eq == spec || eq[1] == '\0')
		die(2, "MEMRA_MODELS: '%s': not name=spec", spec);
	*eq = '\0';
	sv->name = spec, sv->spec = eq + 1;
	for (int i = 0; i < s->n_mod; i++)
		if (strcmp(s->mod[i].name, sv->name) == 0)
			die(2, "MEMRA_MODELS: model name '%s' given twice", sv->name);
	model_options_set(&mo, sv->spec, NULL, s->c.draft, s->c.trim, s->c.full_prec);
	if (mo.draft != NULL)
		fprintf(stderr, "[mtp-draft] loading external MTP draft: %s\n", mo.draft);
	if ((sv->m = model_open_opts(sv->spec, s->be, &mo, err)) == NULL)
		die(1, "%s", err);
	fprintf(stderr, "[model] %s: %s\n", sv->name, model_path(sv->m));
	if (model_attach_line(sv->m, line, sizeof line) == 0)
		fprintf(stderr, "%s\n", line);
	if ((sv->pr = prompt_new(sv->m, PROMPT_AUTO, err)) == NULL)
		die(1, "%s: %s", sv->spec, err);
	sv->nv = model_hparams(sv->m)->n_vocab;
	nmtp = model_hparams(sv->m)->n_mtp;
	sv->k = s->c.spec_k >= 0 ? s->c.spec_k : nmtp > 0 ? 3 : 0;
	if (sv->k > 0 && nmtp == 0)
		die(2, "MEMRA_SPEC_K %d: model '%s' has no MTP head to draft with", sv->k, sv->name);
	if (!s->c.serve_spec)
		sv->k = 0;
	fprintf(stderr, "[model] %s: ctx=%d K=%d (%s)%s\n", sv->name, s->c.ctx, sv->k,
	    sv->k ? "MTP speculative decode for greedy requests" : s->c.serve_spec ?
	    "plain decode" : "plain decode: MEMRA_SERVE_SPEC=0",
	    prompt_tokenizer(sv->pr) == NULL ? ", no tokenizer: token-id prompts only" :
	    prompt_is_chat(sv->pr) ? "" : ", no chat template");
	sessions(s, sv);
	s->n_mod++;
}

/* The API keys: the keys file's digests and MEMRA_API_KEY's (the
 * plaintext is wiped from the environment or the command line). */
static void
ops_keys(struct server *s)
{
	struct cfg *c = &s->c;
	char err[UTIL_ERRLEN], *text;
	size_t n;
	int from_file = 0;

	if ((s->auth = auth_new(&c->lim)) == NULL)
		die(1, "out of memory");
	if (c->keys_file != NULL) {
		if ((text = util_read_file(c->keys_file, &n, err)) == NULL)
			die(1, "MEMRA_API_KEYS_FILE: %s", err);
		if (auth_load(s->auth, text, n, c->keys_file, err) != 0)
			die(2, "MEMRA_API_KEYS_FILE: %s", err);
		free(text);
		if ((from_file = auth_count(s->auth)) == 0)
			die(2, "MEMRA_API_KEYS_FILE: %s: no key in it", c->keys_file);
	}
	if (c->api_key != NULL) {
		if (auth_add_key(s->auth, c->api_key, strlen(c->api_key), "MEMRA_API_KEY", err) != 0)
			die(2, "MEMRA_API_KEY (--api-key): %s", err);
		explicit_bzero((char *)c->api_key, strlen(c->api_key));
		unsetenv("MEMRA_API_KEY");
	}
	if (auth_count(s->auth) > 0 || c->lim.rpm > 0 || c->lim.tpm > 0)
		fprintf(stderr, "[serve] API keys: %d (%d from %s, %d from MEMRA_API_KEY); a key's "
		    "limits by default: %ld requests, %ld tokens a minute (0: none)\n",
		    auth_count(s->auth), from_file, c->keys_file ? c->keys_file : "no file",
		    auth_count(s->auth) - from_file, c->lim.rpm, c->lim.tpm);
}

/*
 * SIGTERM and SIGINT (blocked in every other thread): the first drains
 * (new requests get 503; the process exits 0 once no request is in
 * flight, 1 when MEMRA_DRAIN_S runs out first), a second exits at once.
 */
static void *
drainer(void *arg)
{
	struct server *s = arg;
	struct timespec tick = { 0, 50 * 1000 * 1000 };
	sigset_t set;
	int sig = 0;
	double end;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM), sigaddset(&set, SIGINT);
	while (sigwait(&set, &sig) != 0)
		;
	s->draining = 1;
	end = util_now() + s->c.drain_s;
	fprintf(stderr, "[serve] %s: draining: %d requests in flight, up to %d s (MEMRA_DRAIN_S)\n",
	    sig == SIGTERM ? "SIGTERM" : "SIGINT", (int)s->inflight, s->c.drain_s);
	for (;;) {
		if (s->inflight == 0) {
			fprintf(stderr, "[serve] drained: exiting\n");
			exit(0);
		}
		if (util_now() >= end) {
			warnmsg("drain: %d requests still in flight after %d s: exiting",
			    (int)s->inflight, s->c.drain_s);
			exit(1);
		}
		if ((sig = sigtimedwait(&set, NULL, &tick)) > 0) {
			warnmsg("%s again: exiting at once", sig == SIGTERM ? "SIGTERM" : "SIGINT");
			_exit(1);
		}
	}
}

static int
listen_on(const struct cfg *c)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
	    .ai_flags = AI_PASSIVE }, *ai;
	int fd, one = 1, rc = getaddrinfo(c->host, c->port, &hints, &ai);

	if (rc != 0)
		die(1, "%s:%s: %s", c->host, c->port, gai_strerror(rc));
	if ((fd = socket(ai->ai_family, ai->ai_socktype, 0)) < 0)
		die(1, "socket: %s", strerror(errno));
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 64) != 0)
		die(1, "%s:%s: %s", c->host, c->port, strerror(errno));
	freeaddrinfo(ai);
	return fd;
}

static void
announce(int fd, const struct cfg *c, int n_keys)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss;
	char host[128] = "?", port[16] = "?";

	if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
		getnameinfo((struct sockaddr *)&ss, sl, host, sizeof host, port, sizeof port,
		    NI_NUMERICHOST | NI_NUMERICSERV);
	fprintf(stderr, "[serve] listening on http://%s:%s (max sessions %d, compat openai%s)\n",
	    host, port, c->max_sessions, n_keys > 0 ? ", API key required" : "");
}

int
main(int argc, char *argv[])
{
	struct server s = { .mu = PTHREAD_MUTEX_INITIALIZER };
	struct sched_config sc;
	char err[UTIL_ERRLEN], *models, *save = NULL;
	struct timeval idle = { .tv_sec = 300 };	/* a silent client is dropped */
	pthread_t w, d;
	sigset_t sigs;
	int lfd;

	prog = base_name(argv[0]);
	refuse_unknown();
	if (parse(argc, argv, &s.c) != 0)
		return usage(stderr, 2);
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM), sigaddset(&sigs, SIGINT);
	if (pthread_sigmask(SIG_BLOCK, &sigs, NULL) != 0 ||
	    pthread_create(&d, NULL, drainer, &s) != 0)
		die(1, "signal thread: %s", strerror(errno));
	ops_keys(&s);
	if ((s.be = backend_open(s.c.device, s.c.threads, err)) == NULL)
		die(1, "%s", err);
	if ((s.graph_stats = backend_graph_env(s.be, getenv("MEMRA_CUDA_GRAPH"), err)) < 0)
		die(2, "MEMRA_CUDA_GRAPH: %s", err);
	if (backend_pdl_env(s.be, getenv("MEMRA_CUDA_PDL"), err) < 0)
		die(2, "MEMRA_CUDA_PDL: %s", err);
	if (backend_gemm_env(s.be, getenv("MEMRA_CUDA_GEMM"), err) < 0)
		die(2, "MEMRA_CUDA_GEMM: %s", err);
	fprintf(stderr, "[serve] device %s\n", backend_name(s.be));
	sched_config_defaults(&sc, s.be, s.c.ctx, s.c.max_sessions);
	sc.max_queue = s.c.queue, sc.chunk = s.c.chunk, sc.step_prefill = s.c.step_prefill;
	sc.prefix_bytes = s.c.prefix_mb < 0 ? SCHED_PREFIX_AUTO : (size_t)s.c.prefix_mb << 20;
	sc.reuse = s.c.reuse, sc.note = note, sc.note_arg = &s;
	if ((s.sc = sched_new(s.be, &sc, err)) == NULL)
		die(2, "%s", err);
	fprintf(stderr, "[sched] continuous batching: %d sessions, queue %d (then 503), prompt "
	    "chunks of %d, %d prompt tokens a step\n", sc.max_sessions, sc.max_queue, sc.chunk,
	    sc.step_prefill);
	fprintf(stderr, "[sched] reuse pool: %s\n", sc.reuse ? "on: a finished conversation stays "
	    "parked in its slot until the slot is needed (MEMRA_REUSE_POOL=0 turns it off)" :
	    "off (MEMRA_REUSE_POOL=0)");
	if ((models = strdup(s.c.models)) == NULL)
		die(1, "out of memory");
	for (char *m = strtok_r(models, ",", &save); m != NULL; m = strtok_r(NULL, ",", &save))
		load(&s, m);
	if (s.n_mod == 0)
		die(2, "MEMRA_MODELS: no model named");
	ops_metrics(&s);
	ops_mem_sample(&s);
	lfd = listen_on(&s.c);
	if (pthread_create(&w, NULL, worker, &s) != 0)
		die(1, "worker thread: %s", strerror(errno));
	announce(lfd, &s.c, auth_count(s.auth));
	for (;;) {
		struct conn *c = malloc(sizeof *c);
		pthread_t t;

		if (c == NULL || (c->fd = accept(lfd, NULL, NULL)) < 0) {
			if (c != NULL && errno != EINTR && errno != ECONNABORTED)
				warnmsg("accept: %s", strerror(errno));
			free(c);
			continue;
		}
		c->s = &s;
		setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &idle, sizeof idle);
		if (pthread_create(&t, NULL, connection, c) != 0) {
			close(c->fd), free(c);
			continue;
		}
		pthread_detach(t);
	}
}
