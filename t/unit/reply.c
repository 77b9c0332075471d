/*
 * reply: scripted token streams through a tiny tokenizer, without a
 * scheduler or a socket: what a stream writes (event by event) and the
 * whole reply, parsed back as JSON.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "json.h"
#include "openai.h"
#include "reply.h"
#include "schedule.h"
#include "tokenizer.h"
#include "test.h"
#include "util.h"

enum { UNK, THINK, END_A, END_B, NL, HM, HELLO, WOR, LD, EN, D, CALL, ARGS, CALL_END, C3, A9,
    END_NL };

/* A vocabulary whose pieces split the marks and stop strings across tokens. */
static struct tokenizer *
tiny_tok(void)
{
	static const char *const tokens[] = { "<unk>", "<think>", "</th", "ink>", "\n", "hm",
	    "Hello", "\xE2\x96\x81" "wor", "ld", "EN", "D", "<tool_call>",
	    "{\"name\": \"f\", \"arguments\": {\"x\": 1}}", "</tool_call>", "<0xC3>", "<0xA9>", "ink>\n\n" };
	static const int32_t types[] = { 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 6, 6, 1 };
	struct tokenizer_spec sp = { 0 };
	char err[UTIL_ERRLEN];

	sp.model = TOKENIZER_SPM, sp.n_vocab = 17, sp.tokens = tokens, sp.types = types;
	sp.bos = sp.eos = sp.pad = -1, sp.unk = 0;
	return tokenizer_new(&sp, err);
}

static struct tokenizer *tok;

/* What a stream wrote; fail: writes fail from then on (the client gone). */
struct sink {
	char	buf[1 << 16];
	size_t	n;
	int	fail;
};

static int
sink_write(void *arg, const char *p, size_t n)
{
	struct sink *k = arg;

	if (k->fail || k->n + n >= sizeof k->buf)
		return -1;
	memcpy(k->buf + k->n, p, n);
	k->n += n;
	k->buf[k->n] = '\0';
	return 0;
}

/* A test's request (body: the JSON request), its reply and what it wrote. */
struct run {
	struct json *body;
	struct openai_req q;
	struct reply *rp;
	struct sink out;
};

static int
start(struct run *t, const char *body, int chat, int think, const char *forced, int max_tokens,
    const struct tokenizer *tk)
{
	char err[UTIL_ERRLEN];
	struct reply_req rq = { .q = &t->q, .think = think, .forced = forced,
	    .max_tokens = max_tokens, .write = sink_write, .arg = &t->out };

	memset(t, 0, sizeof *t);
	t->body = json_parse(body, strlen(body), err);
	CHECK(t->body != NULL);
	if (t->body == NULL || openai_request(t->body, chat, &t->q, err) != 0) {
		FAILF("request: %s", err);
		return -1;
	}
	rq.r = (struct openai_resp){ .id = 5, .chat = chat, .model = "m", .created = 1700000000,
	    .prompt_tokens = 3, .tok = tk };
	t->rp = reply_new(&rq);
	CHECK(t->rp != NULL);
	return t->rp != NULL ? 0 : -1;
}

static void
end_run(struct run *t)
{
	reply_free(t->rp);
	openai_request_free(&t->q);
	json_free(t->body);
}

/* Tokens ids[n] into choice 0; the index of the token that ended it, or -1. */
static int
feed(struct run *t, const int32_t *ids, int n)
{
	for (int i = 0; i < n; i++)
		if (reply_take(t->rp, 0, ids[i], NULL))
			return i;
	return -1;
}

/* The whole reply's choice 0 (its JSON in *j, to free). */
static const struct json *
whole(struct run *t, struct json **j)
{
	char err[UTIL_ERRLEN];
	size_t n;
	char *b = reply_whole(t->rp, &n);
	const struct json *c;

	*j = b ? json_parse(b, n, err) : NULL;
	free(b);
	c = *j ? json_get(*j, "choices") : NULL;
	CHECK(c != NULL && c->n == 1);
	return c != NULL && c->n == 1 ? &c->items[0] : NULL;
}

/* The stream's events, parsed: ev[i] each "data: JSON\n\n" ([DONE]: NULL). */
static int
events(struct run *t, struct json **ev, int max)
{
	char err[UTIL_ERRLEN], *p = t->out.buf;
	int n = 0;

	while (*p != '\0' && n < max) {
		char *e = strstr(p, "\n\n");

		CHECK(strncmp(p, "data: ", 6) == 0 && e != NULL);
		if (strncmp(p, "data: ", 6) != 0 || e == NULL)
			break;
		p += 6;
		ev[n] = strncmp(p, "[DONE]", 6) == 0 ? NULL : json_parse(p, e - p, err);
		CHECK(ev[n] != NULL || strncmp(p, "[DONE]\n\n", 8) == 0);
		n++, p = e + 2;
	}
	return n;
}

/* Event e's choice 0's delta, or NULL. */
static const struct json *
delta(const struct json *e)
{
	const struct json *c = e ? json_get(e, "choices") : NULL;

	return c != NULL && c->n == 1 ? json_get(&c->items[0], "delta") : NULL;
}

static const char *
finish_of(const struct json *e)
{
	const struct json *c = e ? json_get(e, "choices") : NULL;

	return c != NULL && c->n == 1 ? json_get_str(&c->items[0], "finish_reason") : NULL;
}

/* The text a stream's events carry under key, concatenated. */
static void
joined(struct json **ev, int n, const char *key, char *out, size_t max)
{
	size_t l = 0;

	out[0] = '\0';
	for (int i = 0; i < n; i++) {
		const struct json *d = delta(ev[i]), *v = d ? json_get(d, key) : NULL;

		if (v != NULL && v->type == JSON_STRING && l + v->n < max)
			memcpy(out + l, v->str, v->n), l += v->n, out[l] = '\0';
	}
}

static void
free_events(struct json **ev, int n)
{
	for (int i = 0; i < n; i++)
		json_free(ev[i]);
}

#define MSG "\"messages\": [{\"role\": \"user\", \"content\": \"x\"}]"

TEST(a_stop_string_cut_across_tokens_ends_the_reply_before_it)
{
	static const int32_t ids[] = { HELLO, WOR, EN, D, LD };
	struct run t;
	struct json *j;
	const struct json *c, *m;

	if (start(&t, "{" MSG ", \"stop\": [\"END\"]}", 1, 0, NULL, 16, tok) != 0)
		return;
	CHECK_EQ_INT(feed(&t, ids, 5), 3);	/* "D" completes "END" */
	reply_end(t.rp, 0, "length", 0);	/* the finish reply_take set is kept */
	c = whole(&t, &j);
	m = c ? json_get(c, "message") : NULL;
	CHECK(m != NULL && json_get_str(m, "content") != NULL);
	if (m != NULL && json_get_str(m, "content") != NULL)
		CHECK_EQ_STR(json_get_str(m, "content"), "Hello wor");
	CHECK(c != NULL && strcmp(json_get_str(c, "finish_reason"), "stop") == 0);
	CHECK_EQ_INT(t.out.n, 0);	/* not streamed: nothing written */
	json_free(j);
	end_run(&t);
}

TEST(a_stream_holds_back_what_may_become_a_stop_string_and_never_sends_it)
{
	static const int32_t ids[] = { HELLO, HELLO, HELLO, WOR, EN, D };
	struct run t;
	struct json *ev[16];
	char text[256];
	int n;

	if (start(&t, "{" MSG ", \"stop\": [\"END\"], \"stream\": true}", 1, 0, NULL, 16, tok) != 0)
		return;
	CHECK_EQ_INT(feed(&t, ids, 6), 5);
	reply_end(t.rp, 0, NULL, 0);
	reply_close(t.rp);
	n = events(&t, ev, 16);
	joined(ev, n, "content", text, sizeof text);
	CHECK_EQ_STR(text, "HelloHelloHello wor");
	CHECK(strstr(t.out.buf, "EN") == NULL);
	CHECK(n >= 3 && ev[n - 1] == NULL);	/* [DONE] last */
	CHECK(n >= 3 && finish_of(ev[n - 2]) != NULL && strcmp(finish_of(ev[n - 2]), "stop") == 0);
	for (int i = 0; i + 2 < n; i++)
		CHECK(finish_of(ev[i]) == NULL);
	free_events(ev, n);
	end_run(&t);
}

TEST(the_think_split_streams_reasoning_then_content)
{
	static const int32_t ids[] = { HM, END_A, END_NL, HELLO };
	struct run t;
	struct json *ev[16], *j;
	const struct json *c, *m;
	char text[256];
	int n;

	if (start(&t, "{" MSG ", \"stream\": true}", 1, 1, NULL, 16, tok) != 0)
		return;
	CHECK_EQ_INT(feed(&t, ids, 4), -1);
	reply_end(t.rp, 0, "stop", 0);
	reply_close(t.rp);
	n = events(&t, ev, 16);
	joined(ev, n, "reasoning_content", text, sizeof text);
	CHECK_EQ_STR(text, "hm");
	joined(ev, n, "content", text, sizeof text);
	CHECK_EQ_STR(text, "Hello");
	free_events(ev, n);
	end_run(&t);

	/* not streamed, a reply that opens its own think block */
	if (start(&t, "{" MSG "}", 1, 0, NULL, 16, tok) != 0)
		return;
	feed(&t, (const int32_t[]){ THINK, HM, END_A, END_B, NL, HELLO }, 6);
	reply_end(t.rp, 0, "stop", 0);
	c = whole(&t, &j);
	m = c ? json_get(c, "message") : NULL;
	CHECK(m != NULL && json_get_str(m, "reasoning_content") != NULL &&
	    json_get_str(m, "content") != NULL);
	if (m != NULL && json_get_str(m, "content") != NULL) {
		CHECK_EQ_STR(json_get_str(m, "reasoning_content"), "hm");
		CHECK_EQ_STR(json_get_str(m, "content"), "Hello");
	}
	json_free(j);
	end_run(&t);
}

/* The one call of calls: f with arguments {"x":1}. */
static void
check_call(const struct json *calls)
{
	const struct json *f = calls && calls->n == 1 ? json_get(&calls->items[0], "function") : NULL;

	CHECK(f != NULL);
	if (f == NULL)
		return;
	CHECK_EQ_STR(json_get_str(f, "name"), "f");
	CHECK_EQ_STR(json_get_str(f, "arguments"), "{\"x\":1}");
}

TEST(a_forced_tool_call_cut_by_max_tokens_is_closed_and_parses_with_finish_length)
{
	struct run t;
	struct json *ev[16], *j;
	const struct json *c, *m, *calls = NULL;
	int n;

	if (start(&t, "{" MSG ", \"tools\": [{\"type\": \"function\", \"function\": {\"name\": "
	    "\"f\"}}], \"tool_choice\": \"required\"}", 1, 0, "<tool_call>\n", 16, tok) != 0)
		return;
	feed(&t, (const int32_t[]){ ARGS }, 1);
	reply_end(t.rp, 0, "length", 0);
	c = whole(&t, &j);
	m = c ? json_get(c, "message") : NULL;
	check_call(m ? json_get(m, "tool_calls") : NULL);
	CHECK(c != NULL && strcmp(json_get_str(c, "finish_reason"), "length") == 0);
	json_free(j);
	end_run(&t);

	/* streamed: the call's head and arguments, then finish length */
	if (start(&t, "{" MSG ", \"stream\": true, \"tools\": [{\"type\": \"function\", "
	    "\"function\": {\"name\": \"f\"}}], \"tool_choice\": \"required\"}", 1, 0,
	    "<tool_call>\n", 16, tok) != 0)
		return;
	feed(&t, (const int32_t[]){ ARGS }, 1);
	reply_end(t.rp, 0, "length", 0);
	reply_close(t.rp);
	n = events(&t, ev, 16);
	CHECK_EQ_INT(n, 4);	/* head, arguments, finish, [DONE] */
	for (int i = 0; n == 4 && i < 2; i++) {
		const struct json *d = delta(ev[i]);

		CHECK(d != NULL && (calls = json_get(d, "tool_calls")) != NULL);
		CHECK(json_get_str(d, "content") == NULL);
	}
	if (n == 4 && calls != NULL) {	/* the arguments chunk */
		const struct json *f = json_get(&calls->items[0], "function");

		CHECK(f != NULL && strcmp(json_get_str(f, "arguments"), "{\"x\":1}") == 0);
		CHECK(json_get_str(json_get(&json_get(delta(ev[0]), "tool_calls")->items[0],
		    "function"), "name") != NULL);
	}
	CHECK(n == 4 && finish_of(ev[2]) && strcmp(finish_of(ev[2]), "length") == 0);
	free_events(ev, n);
	end_run(&t);
}

/* Logprobs lp of token t. */
static struct sched_logprob
lp_of(float x)
{
	struct sched_logprob l = { x, 2, { HELLO, LD }, { x, x - 1 } };

	return l;
}

TEST(logprobs_come_one_entry_a_token_whole_or_streamed)
{
	static const int32_t ids[] = { HELLO, WOR, C3, A9, LD };
	struct run t;
	struct json *ev[16], *j;
	const struct json *c, *lp;
	int n, got = 0;

	for (int stream = 0; stream <= 1; stream++) {
		if (start(&t, stream ? "{" MSG ", \"logprobs\": true, \"top_logprobs\": 2, "
		    "\"stream\": true}" : "{" MSG ", \"logprobs\": true, \"top_logprobs\": 2}", 1, 0,
		    NULL, 16, tok) != 0)
			return;
		for (int i = 0; i < 5; i++) {
			struct sched_logprob l = lp_of(-0.5f * i);

			CHECK_EQ_INT(reply_take(t.rp, 0, ids[i], &l), 0);
		}
		reply_end(t.rp, 0, "length", 0);
		if (!stream) {
			c = whole(&t, &j);
			lp = c ? json_get(json_get(c, "logprobs"), "content") : NULL;
			CHECK(lp != NULL && lp->n == 5);
			CHECK(lp != NULL && lp->n == 5 &&
			    json_get(&lp->items[1], "top_logprobs")->n == 2);
			CHECK(lp != NULL && lp->n == 5 &&
			    strcmp(json_get_str(&lp->items[1], "token"), " wor") == 0);
			json_free(j);
		} else {
			reply_close(t.rp);
			n = events(&t, ev, 16);
			for (int i = 0; i < n; i++) {
				const struct json *cs = ev[i] ? json_get(ev[i], "choices") : NULL;
				const struct json *l = cs && cs->n ? json_get(&cs->items[0], "logprobs") :
				    NULL;

				if (l != NULL && l->type == JSON_OBJECT)
					got += (int)json_get(l, "content")->n;
			}
			CHECK_EQ_INT(got, 5);
			free_events(ev, n);
		}
		end_run(&t);
	}
}

TEST(a_stream_is_chunks_then_usage_then_done)
{
	static const int32_t ids[] = { HELLO, HELLO, HELLO, LD };
	struct run t;
	struct json *ev[16];
	struct reply_stats st;
	const struct json *u;
	int n;

	if (start(&t, "{\"prompt\": \"x\", \"stream\": true, \"stream_options\": "
	    "{\"include_usage\": true}}", 0, 0, NULL, 16, tok) != 0)
		return;
	CHECK_EQ_INT(feed(&t, ids, 4), -1);
	reply_end(t.rp, 0, "length", 0);
	reply_close(t.rp);
	n = events(&t, ev, 16);
	/* "Hell", "oH" (the last 11 bytes held back), the rest, finish, usage, [DONE] */
	CHECK_EQ_INT(n, 6);
	if (n == 6) {
		static const char *const want[] = { "Hell", "oH", "elloHellold" };

		for (int i = 0; i < 3; i++) {
			CHECK_EQ_STR(json_get_str(&json_get(ev[i], "choices")->items[0], "text"),
			    want[i]);
			CHECK(finish_of(ev[i]) == NULL);
		}
		CHECK(finish_of(ev[3]) != NULL && strcmp(finish_of(ev[3]), "length") == 0);
		u = json_get(ev[4], "usage");
		CHECK(u != NULL && json_get(u, "completion_tokens")->i == 4);
		CHECK(u != NULL && json_get(u, "prompt_tokens")->i == 3);
		CHECK(ev[5] == NULL);
		CHECK_EQ_STR(json_get_str(ev[0], "id"), "cmpl-5");
	}
	reply_stats(t.rp, &st);
	CHECK_EQ_INT(st.n_gen, 4);
	CHECK_EQ_INT(st.gone, 0);
	free_events(ev, n);
	end_run(&t);
}

TEST(without_a_tokenizer_the_reply_is_ids_up_to_max_tokens)
{
	struct run t;
	struct json *ev[16];
	int n;

	if (start(&t, "{\"prompt\": [1, 2], \"stream\": true}", 0, 0, NULL, 2, NULL) != 0)
		return;
	CHECK_EQ_INT(feed(&t, (const int32_t[]){ 7, 8, 9 }, 3), 2);
	reply_end(t.rp, 0, NULL, 0);
	reply_close(t.rp);
	n = events(&t, ev, 16);
	CHECK_EQ_INT(n, 4);
	if (n == 4) {
		const struct json *c = &json_get(ev[1], "choices")->items[0];

		CHECK(json_get(c, "token_ids") != NULL && json_get(c, "token_ids")->items[0].i == 8);
		CHECK_EQ_STR(finish_of(ev[2]), "length");
	}
	free_events(ev, n);
	end_run(&t);
}

TEST(a_client_gone_ends_the_reply_and_writes_nothing_more)
{
	struct run t;
	struct reply_stats st;
	size_t before;

	if (start(&t, "{\"prompt\": \"x\", \"stream\": true}", 0, 0, NULL, 16, tok) != 0)
		return;
	CHECK_EQ_INT(feed(&t, (const int32_t[]){ HELLO, HELLO, HELLO }, 3), -1);
	t.out.fail = 1;
	before = t.out.n;
	CHECK_EQ_INT(feed(&t, (const int32_t[]){ HELLO, HELLO }, 2), 0);
	reply_end(t.rp, 0, NULL, 0);
	reply_close(t.rp);
	reply_stats(t.rp, &st);
	CHECK_EQ_INT(st.gone, 1);
	CHECK_EQ_INT(t.out.n, before);
	end_run(&t);
}

int
main(void)
{
	if ((tok = tiny_tok()) == NULL) {
		printf("not ok tiny_tok\n");
		return 1;
	}
	RUN(a_stop_string_cut_across_tokens_ends_the_reply_before_it);
	RUN(a_stream_holds_back_what_may_become_a_stop_string_and_never_sends_it);
	RUN(the_think_split_streams_reasoning_then_content);
	RUN(a_forced_tool_call_cut_by_max_tokens_is_closed_and_parses_with_finish_length);
	RUN(logprobs_come_one_entry_a_token_whole_or_streamed);
	RUN(a_stream_is_chunks_then_usage_then_done);
	RUN(without_a_tokenizer_the_reply_is_ids_up_to_max_tokens);
	RUN(a_client_gone_ends_the_reply_and_writes_nothing_more);
	tokenizer_free(tok);
	return test_summary();
}
