/*
 * reply: a generation request's reply from its sessions' tokens; see reply.h.
 */
#include "reply.h"

#include <stdlib.h>
#include <string.h>

#include "chat.h"
#include "schedule.h"
#include "tokenizer.h"
#include "util.h"

/* One choice of a reply, as it is generated. */
struct choice {
	struct reply *rp;
	struct sched_seq *seq;	/* NULL once released (or never given) */
	struct openai_resp r;	/* what every chunk and the reply carry (r.index: the choice) */
	struct tokenizer_stream *ts;
	char	*text;		/* generated text so far (beginning with forced) */
	size_t	len, cap, sent;	/* sent: bytes already streamed */
	int32_t	*ids;		/* a model without a tokenizer: the ids generated */
	int32_t	*tids;		/* return_token_ids (with a tokenizer): the ids generated */
	int	tids_sent;	/* of them, those already streamed */
	int	n_gen, in_think, in_tool, dead, ended, failed;
	int32_t	*lp_ids;	/* with logprobs: the tokens generated, [n_lp] */
	struct sched_logprob *lp;
	int	n_lp, cap_lp, lp_sent;	/* lp_sent: streamed */
	size_t	lp_off;		/* bytes of the streamed tokens' text */
	const char *finish;
};

struct reply {
	struct reply_req rq;
	const struct openai_req *q;
	int	n;
	struct choice *c;	/* [n] */
	double	wait, first;	/* choice 0's, from its session */
};

static int
sse(struct choice *o, const char *json, size_t n)
{
	const struct reply_req *rq = &o->rp->rq;

	if (o->dead || rq->write(rq->arg, "data: ", 6) != 0 || rq->write(rq->arg, json, n) != 0 ||
	    rq->write(rq->arg, "\n\n", 2) != 0)
		o->dead = 1;
	return o->dead ? -1 : 0;
}

/* Send the JSON b[n] as one server-sent event and free it (NULL: out of memory). */
static void
sse_json(struct choice *o, char *b, size_t n)
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
chunk(struct choice *o, const char *key, const char *s, size_t n, const char *finish)
{
	struct openai_lp lp = { o->lp_ids + o->lp_sent, o->lp + o->lp_sent, o->n_lp - o->lp_sent,
	    o->lp_off };
	size_t bl, pl;
	char *b = openai_chunk(&o->r, key, s, n, o->rp->q->logprobs ? &lp : NULL,
	    o->tids ? o->tids + o->tids_sent : NULL, o->n_gen - o->tids_sent, finish, &bl);

	if (o->tids != NULL)
		o->tids_sent = o->n_gen;
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
stream_more(struct choice *o, int final)
{
	const struct openai_req *q = o->rp->q;
	size_t hold = final ? 0 : 11;
	int chat = o->r.chat;

	for (int i = 0; i < q->n_stop; i++)
		if (!final && strlen(q->stop[i]) > hold)
			hold = strlen(q->stop[i]);
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

/* 1 when the client has left. */
static int
client_gone(const struct reply *rp)
{
	return rp->rq.gone != NULL && rp->rq.gone(rp->rq.arg);
}

/* Append s[n] to o->text: 0, or -1 when out of memory. */
static int
text_add(struct choice *o, const char *s, size_t n)
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
lp_add(struct choice *o, int32_t t, const struct sched_logprob *lp)
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
take_id(struct choice *o, int32_t t)
{
	if (o->n_gen == o->rp->rq.max_tokens)
		return 1;
	o->ids[o->n_gen++] = t;
	if (o->rp->q->stream) {
		size_t bl;
		char *b = openai_chunk_ids(&o->r, &t, 1, &bl);

		sse_json(o, b, bl);
	}
	return 0;
}

/* o's text from byte from on holds a stop string: cut it there; 1 when it did. */
static int
stop_cut(struct choice *o, size_t from)
{
	const struct openai_req *q = o->rp->q;

	for (int i = 0; i < q->n_stop; i++) {
		size_t k = strlen(q->stop[i]), at = from > k ? from - k : 0;
		char *hit = strstr(o->text + at, q->stop[i]);

		if (hit != NULL) {
			o->len = hit - o->text;
			o->text[o->len] = '\0';
			return 1;
		}
	}
	return 0;
}

int
reply_take(struct reply *rp, int i, int32_t t, const struct sched_logprob *lp)
{
	struct choice *o = &rp->c[i];
	const char *s;
	size_t n = 0, from = o->len;

	if (lp != NULL && lp_add(o, t, lp) != 0)
		return o->finish = "length", 1;
	if (o->ts == NULL) {
		if (take_id(o, t))
			return o->finish = "length", 1;
	} else {
		if (o->tids != NULL) {	/* return_token_ids: it has room for max_tokens */
			if (o->n_gen == rp->rq.max_tokens)
				return o->finish = "length", 1;
			o->tids[o->n_gen] = t;
		}
		o->n_gen++;
		if ((s = tokenizer_stream_push(o->ts, t, &n)) != NULL && n > 0) {
			if (text_add(o, s, n) != 0)
				return o->finish = "length", 1;
			if (stop_cut(o, from))
				return o->finish = "stop", 1;
		}
	}
	if (rp->q->stream && o->ts != NULL)
		stream_more(o, 0);
	else if (!rp->q->stream && client_gone(rp))
		o->dead = 1;
	if (o->dead)
		return o->finish = "stop", 1;
	return 0;
}

/*
 * Choice i's tokens that are there, waiting up to wait_s for one; 1 when
 * the choice has ended (its finish; failed with err for a failed one).
 */
static int
pump(struct reply *rp, struct sched *sc, int i, double wait_s, char *err)
{
	struct choice *o = &rp->c[i];
	int32_t buf[64];
	struct sched_logprob lpb[64];
	int fin = SCHED_RUNNING, lp = rp->q->logprobs;
	int n = sched_read_lp(sc, o->seq, buf, lp ? lpb : NULL, 64, &fin, wait_s);

	/* no token for a while (queued, or a long prompt priming): is the client there? */
	if (n == 0 && fin == SCHED_RUNNING && client_gone(rp)) {
		o->dead = 1, o->finish = "stop";
		return 1;
	}
	for (int k = 0; k < n; k++)
		if (reply_take(rp, i, buf[k], lp ? &lpb[k] : NULL))
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
stream_calls(struct choice *o, struct chat_reply *r)
{
	size_t bl, max = o->rp->q->parallel_tool_calls ? r->ncalls : 1;

	for (size_t i = 0; i < r->ncalls && i < max; i++)
		for (int head = 1; head >= 0; head--) {
			char *b = openai_chunk_call(&o->r, &r->calls[i], i, head, &bl);

			sse_json(o, b, bl);
		}
}

/* The end of choice o's stream: tool calls, the finish chunk. */
static void
stream_end(struct choice *o)
{
	const char *finish = o->finish;

	if (o->ts != NULL)
		stream_more(o, 1);
	if (o->r.chat && o->in_tool) {
		struct chat_reply r = { 0 };
		char err[UTIL_ERRLEN];

		if (chat_parse_reply_typed(o->text, o->len, o->rp->rq.think, o->r.types, &r,
		    err) == 0 && r.ncalls > 0) {
			stream_calls(o, &r);
			if (strcmp(finish, "length") != 0)	/* cut: as far as it came */
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
close_forced(struct choice *o)
{
	const char *open = NULL;

	for (const char *p = o->text; p != NULL && (p = strstr(p, "<tool_call>")) != NULL; p++)
		open = p;
	if (o->rp->rq.forced != NULL && open != NULL && strstr(open, "</tool_call>") == NULL &&
	    text_add(o, "\n</tool_call>", 13) != 0)
		o->dead = 1;
}

void
reply_end(struct reply *rp, int i, const char *finish, int failed)
{
	struct choice *o = &rp->c[i];

	if (o->ended)
		return;
	o->ended = 1, o->failed |= failed;
	if (o->finish == NULL)
		o->finish = finish != NULL ? finish : "stop";
	if (o->text != NULL)
		close_forced(o);
	if (rp->q->stream && !o->failed)
		stream_end(o);
}

/* Choice i's session goes (choice 0's times and cached prompt tokens, which
 * the usage tells, kept first). */
static void
seq_end(struct reply *rp, struct sched *sc, int i)
{
	struct choice *o = &rp->c[i];

	if (o->seq == NULL)
		return;
	if (i == 0) {
		sched_seq_times(sc, o->seq, &rp->wait, &rp->first);
		o->r.cached_tokens = (size_t)sched_seq_cached(sc, o->seq);
	}
	sched_release(sc, o->seq);
	o->seq = NULL;
}

int
reply_run(struct reply *rp, struct sched *sc, struct sched_seq **seq, char *err)
{
	int n = rp->n, left = n, rc = 0;

	for (int i = 0; i < n; i++)
		rp->c[i].seq = seq[i];
	while (left > 0) {
		int waited = 0, dead = 0;

		for (int i = 0; i < n; i++) {
			struct choice *o = &rp->c[i];

			if (o->ended)
				continue;
			/* one choice: wait for it; several: a short wait on the first */
			if (pump(rp, sc, i, n == 1 ? 0.5 : waited++ ? 0 : 0.05, err)) {
				left--;
				seq_end(rp, sc, i);
				reply_end(rp, i, NULL, 0);
				rc |= o->failed ? -1 : 0;
			}
			dead |= o->dead;
		}
		if (dead) {	/* the client is gone: every choice with it */
			reply_drop(rp);
			break;
		}
	}
	for (int i = 0; i < n; i++)
		seq_end(rp, sc, i);
	return rc;
}

void
reply_drop(struct reply *rp)
{
	for (int i = 0; i < rp->n; i++)
		rp->c[i].dead = 1;
}

char *
reply_whole(const struct reply *rp, size_t *len)
{
	const struct openai_req *q = rp->q;
	struct openai_choice *c = calloc(rp->n, sizeof *c);
	struct reply_stats st;
	char *b = NULL;

	reply_stats(rp, &st);
	for (int i = 0; c != NULL && i < rp->n; i++) {
		const struct choice *o = &rp->c[i];

		c[i] = (struct openai_choice){ .text = o->text, .len = o->len, .ids = o->ids,
		    .n_ids = o->ids ? o->n_gen : 0, .tids = o->tids, .n_tids = o->n_gen,
		    .finish = o->finish,
		    .want_lp = q->logprobs, .lp = { o->lp_ids, o->lp, o->n_lp, 0 },
		    .max_calls = q->parallel_tool_calls ? 0 : 1 };
	}
	if (c != NULL)
		b = openai_reply(&rp->c[0].r, c, rp->n, rp->rq.think, st.n_gen, len);
	free(c);
	return b;
}

void
reply_close(struct reply *rp)
{
	struct choice *o = &rp->c[0];
	struct reply_stats st;
	size_t bl;
	char *b;

	if (o->dead)
		return;
	reply_stats(rp, &st);
	if (rp->q->include_usage) {
		b = openai_chunk_usage(&o->r, st.n_gen, &bl);
		sse_json(o, b, bl);
	}
	sse(o, "[DONE]", 6);
}

void
reply_stats(const struct reply *rp, struct reply_stats *st)
{
	*st = (struct reply_stats){ .wait = rp->wait, .first = rp->first,
	    .cached = rp->c[0].r.cached_tokens };
	for (int i = 0; i < rp->n; i++)
		st->n_gen += rp->c[i].n_gen, st->gone |= rp->c[i].dead;
}

/* Choice i's state before its first token: 0, or -1 (out of memory). */
static int
choice_init(struct reply *rp, int i)
{
	struct choice *o = &rp->c[i];
	const struct tokenizer *tok = rp->rq.r.tok;

	*o = (struct choice){ .rp = rp, .in_think = rp->rq.think, .r = rp->rq.r };
	o->r.index = i;
	if (tok == NULL)
		return (o->ids = malloc((size_t)rp->rq.max_tokens * sizeof *o->ids)) != NULL ? 0 : -1;
	if ((o->ts = tokenizer_stream_new(tok, 0)) == NULL ||
	    (rp->q->return_token_ids &&
	    (o->tids = malloc((size_t)rp->rq.max_tokens * sizeof *o->tids)) == NULL))
		return -1;
	return rp->rq.forced != NULL ? text_add(o, rp->rq.forced, strlen(rp->rq.forced)) : 0;
}

struct reply *
reply_new(const struct reply_req *rq)
{
	struct reply *rp = calloc(1, sizeof *rp);

	if (rp == NULL)
		return NULL;
	rp->rq = *rq, rp->q = rq->q, rp->n = rq->q->n;
	if ((rp->c = calloc(rp->n, sizeof *rp->c)) == NULL) {
		free(rp);
		return NULL;
	}
	for (int i = 0; i < rp->n; i++)
		if (choice_init(rp, i) != 0) {
			rp->n = i + 1;
			reply_free(rp);
			return NULL;
		}
	return rp;
}

void
reply_free(struct reply *rp)
{
	if (rp == NULL)
		return;
	for (int i = 0; i < rp->n; i++) {
		struct choice *o = &rp->c[i];

		tokenizer_stream_free(o->ts);
		free(o->text), free(o->ids), free(o->tids), free(o->lp_ids), free(o->lp);
	}
	free(rp->c), free(rp);
}
