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
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "backend.h"
#include "chat.h"
#include "http.h"
#include "json.h"
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
#define MAX_STOPS 4

extern char **environ;

struct cfg {
	const char *models, *host, *port, *api_key, *device, *compat;
	const char *draft, *trim, *full_prec;
	int	ctx, max_sessions, spec_k, threads, serve_spec;
	int	queue, chunk, step_prefill, reuse;
	long	prefix_mb;	/* -1: sized from free memory */
};

struct served {
	char	*name, *spec;
	struct model *m;
	struct prompt *pr;
	int	nv, k;		/* k: speculative draft length, 0 plain */
	int	lane;		/* in the scheduler */
};

struct job {
	struct served *sv;
	int	fd, stream, chat, think, max_tokens;
	int32_t	*ids;
	size_t	n_ids;
	struct sample_params sp;
	char	*stops[MAX_STOPS];
	int	n_stops;
	int	ignore_eos;
	long	id;
	struct sched_seq *seq;
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
	    "       [--step-prefill N] [--serve-spec 0 | 1] [--reuse-pool 0 | 1]\n", prog);
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

/* --- generation (the worker) --- */

struct out {
	struct job *j;
	struct openai_resp r;	/* what every chunk and the reply carry */
	char	*text;		/* generated text so far */
	size_t	len, cap, sent;	/* sent: bytes already streamed */
	int32_t	*ids;		/* a model without a tokenizer: the ids generated */
	int	n_gen, in_think, in_tool, dead;
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

/* One streamed chunk: a delta of text under key (content, reasoning_content). */
static void
chunk(struct out *o, const char *key, const char *s, size_t n, const char *finish)
{
	size_t bl;
	char *b = openai_chunk(&o->r, key, s, n, finish, &bl);

	sse_json(o, b, bl);
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

	for (int i = 0; i < o->j->n_stops; i++)
		if (!final && strlen(o->j->stops[i]) > hold)
			hold = strlen(o->j->stops[i]);
	if (o->j->chat && o->sent == 0 && o->len >= 7 && memcmp(o->text, "<think>", 7) == 0)
		o->sent = 7, o->in_think = 1;	/* a reply that opens its own think block */
	while (!o->dead && !o->in_tool && o->sent < o->len) {
		const char *t = o->text + o->sent, *mark = o->in_think ? "</think>" : "<tool_call>";
		char *hit = o->j->chat ? memmem(t, o->len - o->sent, mark, strlen(mark)) : NULL;
		size_t n = hit ? (size_t)(hit - t) : o->len - o->sent > hold ?
		    utf8_back(t, o->len - o->sent - hold) : 0;

		if (n > 0)
			chunk(o, !o->j->chat ? NULL : o->in_think ? "reasoning_content" : "content",
			    t, n, NULL);
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

/* Take token t; 1 when the reply ends here (a stop string, or the client
 * is gone: o->finish set). */
static int
take(struct out *o, struct tokenizer_stream *ts, int32_t t)
{
	struct job *j = o->j;
	const char *s;
	size_t n = 0;

	if (ts == NULL) {	/* no tokenizer: the ids are the reply (o->ids has max_tokens) */
		if (o->n_gen == j->max_tokens)
			return o->finish = "length", 1;
		o->ids[o->n_gen++] = t;
		if (j->stream) {
			size_t bl;
			char *b = openai_chunk_ids(&o->r, &t, 1, &bl);

			sse_json(o, b, bl);
		} else if (client_gone(j->fd))
			o->dead = 1;
		return o->dead ? (o->finish = "stop", 1) : 0;
	}
	o->n_gen++;
	if ((s = tokenizer_stream_push(ts, t, &n)) == NULL)
		n = 0;
	if (n > 0) {
		if (o->len + n + 1 > o->cap) {
			size_t nc = (o->len + n + 1) * 2;
			char *nt = realloc(o->text, nc);

			if (nt == NULL)
				return o->finish = "length", 1;
			o->text = nt, o->cap = nc;
		}
		memcpy(o->text + o->len, s, n);
		o->len += n;
		o->text[o->len] = '\0';
		for (int i = 0; i < j->n_stops; i++) {
			char *hit = strstr(o->text, j->stops[i]);

			if (hit != NULL) {
				o->len = hit - o->text;
				o->text[o->len] = '\0';
				return o->finish = "stop", 1;
			}
		}
	}
	if (j->stream)
		stream_more(o, 0);
	else if (client_gone(j->fd))
		o->dead = 1;
	if (o->dead)
		return o->finish = "stop", 1;
	return 0;
}

/* The reply of job j from the scheduler's tokens into o; 0, or -1 with err. */
static int
generate(struct server *s, struct job *j, struct out *o, char *err)
{
	const struct tokenizer *tok = prompt_tokenizer(j->sv->pr);
	struct tokenizer_stream *ts = tok ? tokenizer_stream_new(tok, 0) : NULL;
	int32_t buf[64];
	int fin = SCHED_RUNNING, n;

	if (tok != NULL && ts == NULL)
		return util_err(err, "out of memory");
	for (;;) {
		/* no token for half a second (queued, or a long prompt priming): is the client there? */
		n = sched_read(s->sc, j->seq, buf, 64, &fin, 0.5);
		if (n == 0 && fin == SCHED_RUNNING && client_gone(j->fd)) {
			o->dead = 1, o->finish = "stop";
			break;
		}
		for (int i = 0; i < n; i++)
			if (take(o, ts, buf[i])) {
				tokenizer_stream_free(ts);
				return 0;
			}
		if (fin != SCHED_RUNNING)
			break;
	}
	tokenizer_stream_free(ts);
	if (fin == SCHED_ERROR)
		return util_err(err, "%s", sched_seq_errmsg(j->seq));
	o->finish = fin == SCHED_LENGTH ? "length" : "stop";
	return 0;
}

/* The whole (non-streamed) response. */
static void
reply_whole(struct job *j, struct out *o)
{
	size_t bl;
	char *b = openai_reply(&o->r, o->text, o->len, j->think, o->ids, o->ids ? o->n_gen : 0,
	    o->n_gen, o->finish, &bl);

	if (b != NULL)
		respond(j->fd, 200, "application/json", b, bl, 1);
	else
		respond_error(j->fd, 500, "out of memory", 1);
	free(b);
}

/* The end of a stream: tool calls, the finish chunk, usage, [DONE]. */
static void
reply_stream_end(struct job *j, struct out *o)
{
	const char *finish = o->finish;
	size_t bl;

	stream_more(o, 1);
	if (j->chat && o->in_tool) {
		struct chat_reply r = { 0 };
		char err[UTIL_ERRLEN];

		if (chat_parse_reply(o->text, o->len, j->think, &r, err) == 0 && r.ncalls > 0) {
			char *b = openai_chunk_tools(&o->r, &r, &bl);

			sse_json(o, b, bl);
			finish = "tool_calls";
		}
		chat_reply_free(&r);
	}
	chunk(o, NULL, NULL, 0, finish);
	if (!o->dead) {
		char *b = openai_chunk_usage(&o->r, o->n_gen, &bl);

		sse_json(o, b, bl);
		sse(o, "[DONE]", 6);
	}
}

/* Job j's reply, on its connection's thread, from the scheduler's tokens. */
static void
run_job(struct server *s, struct job *j)
{
	struct out o = { .j = j, .in_think = j->think, .r = { j->id, j->chat, j->sv->name,
	    (long)time(NULL), j->n_ids } };
	char err[UTIL_ERRLEN] = "";
	double t0 = util_now(), wait, first;
	int rc;

	if (prompt_tokenizer(j->sv->pr) == NULL &&
	    (o.ids = malloc((size_t)j->max_tokens * sizeof *o.ids)) == NULL) {
		respond_error(j->fd, 500, "out of memory", 1);
		return;
	}

	if (j->stream) {
		static const char h[] = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
		    "Cache-Control: no-cache\r\nConnection: close\r\n\r\n";

		if (write_all(j->fd, h, sizeof h - 1) != 0)
			return;
	}
	rc = generate(s, j, &o, err);
	o.r.cached_tokens = (size_t)sched_seq_cached(s->sc, j->seq);
	if (rc != 0) {
		warnmsg("request %ld: %s", j->id, err);
		if (!j->stream)
			respond_error(j->fd, 500, err, 1);
	} else if (j->stream)
		reply_stream_end(j, &o);
	else if (!o.dead)
		reply_whole(j, &o);
	sched_seq_times(s->sc, j->seq, &wait, &first);
	fprintf(stderr, "[serve] request %ld: %s prompt=%zu completion=%d queued %.2f s, first "
	    "token %.2f s, %.2f s%s\n", j->id, j->sv->name, j->n_ids, o.n_gen, wait, first,
	    util_now() - t0, o.dead ? " (client gone)" : "");
	free(o.text), free(o.ids);
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

/* The worker: the scheduler's steps while there is work. */
static void *
worker(void *arg)
{
	struct server *s = arg;

	while (sched_wait(s->sc) == 0)
		if (sched_step(s->sc) == 0)
			graph_note(s);
	return NULL;
}

/* Queue j with the scheduler: 0, or -1 with err (*full when busy). */
static int
submit(struct server *s, struct job *j, int *full, char *err)
{
	int n_stop;
	const int32_t *stop = prompt_stop_ids(j->sv->pr, &n_stop);
	struct sched_req q = { .lane = j->sv->lane, .ids = j->ids, .n_ids = (int)j->n_ids,
	    .sp = j->sp, .max_tokens = j->max_tokens, .ignore_eos = j->ignore_eos,
	    .stop = stop, .n_stop = n_stop };

	pthread_mutex_lock(&s->mu);
	j->id = ++s->next_id;
	pthread_mutex_unlock(&s->mu);
	return (j->seq = sched_submit(s->sc, &q, full, err)) != NULL ? 0 : -1;
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

/* The sampling fields of request q into j; -1 with err on a bad one. */
static int
request_params(const struct json *q, struct job *j, int ctx, int nv, char *err)
{
	struct sampler *smp;
	const struct json *v;
	double d;
	int64_t i;

	sample_defaults(&j->sp);
	j->sp.temp = 1;
	j->sp.penalty_last_n = -1;
	j->max_tokens = ctx;
	if (json_get_i64(q, "n", &i) == 0 && i != 1)
		return util_err(err, "'n': only n=1 is supported");
	if (json_get_i64(q, "max_tokens", &i) == 0 ||
	    json_get_i64(q, "max_completion_tokens", &i) == 0) {
		if (i < 1)
			return util_err(err, "'max_tokens': must be at least 1");
		j->max_tokens = i < ctx ? i : ctx;
	}
	if (json_get_num(q, "temperature", &d) == 0)
		j->sp.temp = d;
	if (json_get_num(q, "top_p", &d) == 0)
		j->sp.top_p = d;
	if (json_get_i64(q, "top_k", &i) == 0) {
		if (i < 0 || i > 1 << 30)
			return util_err(err, "'top_k': %lld: out of range 0..%d", (long long)i, 1 << 30);
		j->sp.top_k = i;
	}
	if (json_get_num(q, "min_p", &d) == 0)
		j->sp.min_p = d;
	if (json_get_num(q, "presence_penalty", &d) == 0)
		j->sp.presence_penalty = d;
	if (json_get_num(q, "frequency_penalty", &d) == 0)
		j->sp.frequency_penalty = d;
	if (json_get_num(q, "repetition_penalty", &d) == 0)
		j->sp.repeat_penalty = d;
	if (json_get_i64(q, "seed", &i) == 0)
		j->sp.seed = i;
	if (json_get_bool(q, "ignore_eos", &j->ignore_eos) != 0 &&
	    (v = json_get(q, "ignore_eos")) != NULL && v->type != JSON_NULL)
		return util_err(err, "'ignore_eos': not a boolean");
	if (json_get_bool(q, "stream", &j->stream) != 0 && (v = json_get(q, "stream")) != NULL &&
	    v->type != JSON_NULL)
		return util_err(err, "'stream': not a boolean");
	if ((v = json_get(q, "stop")) != NULL && v->type != JSON_NULL) {
		if (v->type == JSON_STRING)
			v = json_get(q, "stop"), j->stops[j->n_stops++] = strndup(v->str, v->n);
		else if (v->type == JSON_ARRAY && v->n <= MAX_STOPS) {
			for (size_t k = 0; k < v->n; k++) {
				if (v->items[k].type != JSON_STRING || v->items[k].n == 0)
					return util_err(err, "'stop': not a list of strings");
				j->stops[j->n_stops++] = strndup(v->items[k].str, v->items[k].n);
			}
		} else
			return util_err(err, "'stop': a string or up to %d strings", MAX_STOPS);
	}
	if ((smp = sample_new(&j->sp, nv, err)) == NULL)	/* out-of-range values are 400 */
		return -1;
	sample_free(smp);
	return 0;
}

/* The chat template's context of request q, parsed. */
static struct json *
chat_context(const struct json *q, char *err)
{
	const struct json *m = json_get(q, "messages"), *t = json_get(q, "tools"),
	    *kw = json_get(q, "chat_template_kwargs");
	const char *choice = json_get_str(q, "tool_choice");
	char *b = NULL;
	size_t bl = 0;
	FILE *fp;
	struct json *ctx;

	if (m == NULL || m->type != JSON_ARRAY || m->n == 0) {
		util_err(err, "'messages': a non-empty array is required");
		return NULL;
	}
	if (choice != NULL && strcmp(choice, "auto") != 0 && strcmp(choice, "none") != 0) {
		util_err(err, "'tool_choice': '%s': only auto and none are supported", choice);
		return NULL;
	}
	if ((json_get(q, "tool_choice") != NULL && choice == NULL &&
	    json_get(q, "tool_choice")->type != JSON_NULL) ||
	    (t != NULL && t->type != JSON_ARRAY && t->type != JSON_NULL) ||
	    (kw != NULL && kw->type != JSON_OBJECT && kw->type != JSON_NULL)) {
		util_err(err, "'tools', 'tool_choice' or 'chat_template_kwargs': wrong type");
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
	if (t != NULL && t->type == JSON_ARRAY && t->n > 0 &&
	    (choice == NULL || strcmp(choice, "none") != 0)) {
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

/* Tokenize the prompt of q into j; -1 with err. */
static int
request_prompt(const struct json *q, struct job *j, char *err)
{
	char *text = NULL;
	size_t tl;

	if (j->chat) {
		struct json *ctx = chat_context(q, err);

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
		free(text);
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
	for (int i = 0; i < j->n_stops; i++)
		free(j->stops[i]);
	free(j->ids);
}

/* A generation request; returns 1 when the connection stays open. */
static int
completion(struct server *s, int fd, const struct http_req *req, int chat)
{
	struct job j = { .fd = fd, .chat = chat };
	char err[UTIL_ERRLEN] = "";
	struct json *q = json_parse(req->body, req->body_len, err);
	int status = 400, keep = 1, full = 0;

	if (q == NULL) {
		respond_error(fd, 400, err, 1);
		return 1;
	}
	if (q->type != JSON_OBJECT)
		util_err(err, "the request body is not a JSON object");
	else if ((j.sv = find_model(s, json_get_str(q, "model"))) == NULL)
		status = 404, util_err(err, "model '%s': not served here",
		    json_get_str(q, "model") ? json_get_str(q, "model") : "(none)");
	else if (request_params(q, &j, s->c.ctx, j.sv->nv, err) == 0 &&
	    request_prompt(q, &j, err) == 0) {
		if ((int)j.n_ids >= s->c.ctx)
			util_err(err, "prompt of %zu tokens: does not fit in the context of %d",
			    j.n_ids, s->c.ctx);
		else if (submit(s, &j, &full, err) != 0)
			status = full ? 503 : 400;
		else {
			run_job(s, &j);
			sched_release(s->sc, j.seq);
			status = 0, keep = !j.stream;
		}
	}
	if (status != 0)
		respond_error(fd, status, err, 1);
	json_free(q);
	job_free(&j);
	return keep;
}

static int
authorized(const struct server *s, const struct http_req *req)
{
	const char *a = http_header(req, "Authorization");

	if (s->c.api_key == NULL)
		return 1;
	return a != NULL && strncmp(a, "Bearer ", 7) == 0 && strcmp(a + 7, s->c.api_key) == 0;
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

/* One request; 1 when the connection stays open. */
static int
route(struct server *s, int fd, const struct http_req *req)
{
	char path[sizeof req->target];
	int get = strcmp(req->method, "GET") == 0, post = strcmp(req->method, "POST") == 0;

	snprintf(path, sizeof path, "%s", req->target);
	path[strcspn(path, "?")] = '\0';
	if (strcmp(path, "/health") == 0) {
		if (!get)
			return respond_error(fd, 405, "method not allowed: use GET", 1), 1;
		return respond(fd, 200, "application/json", "{\"status\": \"ok\"}\n", 17, 1), 1;
	}
	if (strcmp(path, "/v1/models") != 0 && strcmp(path, "/v1/chat/completions") != 0 &&
	    strcmp(path, "/v1/completions") != 0)
		return respond_error(fd, 404, "no such endpoint", 1), 1;
	if (!authorized(s, req))
		return respond_error(fd, 401, "invalid or missing API key", 1), 1;
	if (strcmp(path, "/v1/models") == 0) {
		if (!get)
			return respond_error(fd, 405, "method not allowed: use GET", 1), 1;
		models_list(s, fd);
		return 1;
	}
	if (!post)
		return respond_error(fd, 405, "method not allowed: use POST", 1), 1;
	return completion(s, fd, req, strcmp(path, "/v1/chat/completions") == 0);
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
				respond_error(c->fd, status, err, 0);
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
		{ "reuse-pool", required_argument, NULL, 'r' },
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
	v['r'] = env("MEMRA_REUSE_POOL");
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
	l = 1, int_setting("MEMRA_REUSE_POOL (--reuse-pool)", v['r'], 0, 1, &l), c->reuse = l;
	l = 8080, int_setting("MEMRA_PORT (--port)", c->port, 0, 65535, &l);
	l = 0, int_setting("-t", v['t'], 0, 4096, &l), c->threads = l;
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
	    "at most 8 GiB: MEMRA_PREFIX_CACHE_MB sets it)" : "", ps.max_blocks, ps.block,
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
announce(int fd, const struct cfg *c)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss;
	char host[128] = "?", port[16] = "?";

	if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
		getnameinfo((struct sockaddr *)&ss, sl, host, sizeof host, port, sizeof port,
		    NI_NUMERICHOST | NI_NUMERICSERV);
	fprintf(stderr, "[serve] listening on http://%s:%s (max sessions %d, compat openai%s)\n",
	    host, port, c->max_sessions, c->api_key ? ", API key required" : "");
}

int
main(int argc, char *argv[])
{
	struct server s = { .mu = PTHREAD_MUTEX_INITIALIZER };
	struct sched_config sc;
	char err[UTIL_ERRLEN], *models, *save = NULL;
	struct timeval idle = { .tv_sec = 300 };	/* a silent client is dropped */
	pthread_t w;
	int lfd;

	prog = base_name(argv[0]);
	refuse_unknown();
	if (parse(argc, argv, &s.c) != 0)
		return usage(stderr, 2);
	signal(SIGPIPE, SIG_IGN);
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
	lfd = listen_on(&s.c);
	if (pthread_create(&w, NULL, worker, &s) != 0)
		die(1, "worker thread: %s", strerror(errno));
	announce(lfd, &s.c);
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
