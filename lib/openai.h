/*
 * openai: the OpenAI API's response shapes, as JSON text, for
 * /v1/chat/completions and /v1/completions: a whole reply, and the
 * chunks of a streamed one (a text delta, a token-id delta, tool calls,
 * usage).  No I/O: bin/serve writes what these return.
 *
 * Every function returns malloc'd NUL-terminated JSON (one object, no
 * newline), its length in *len, or NULL when out of memory; the caller
 * frees.
 */
#ifndef MEMRA_OPENAI_H
#define MEMRA_OPENAI_H

#include <stddef.h>
#include <stdint.h>

#include "sample.h"

struct json;

#define OPENAI_MAX_STOPS 4	/* stop strings a request gives */
#define OPENAI_N_MAX	128	/* choices a request asks for (serve: at most its sessions) */
#define OPENAI_TOP_MAX	20	/* top_logprobs, and completions' logprobs */

enum openai_tools {
	OPENAI_TOOLS_AUTO,	/* "auto" (or no tool_choice): the model decides */
	OPENAI_TOOLS_NONE,	/* "none": the tools are not shown to the model */
	OPENAI_TOOLS_REQUIRED,	/* "required": the reply is a tool call */
	OPENAI_TOOLS_NAMED,	/* {"type": "function", "function": {"name": ...}}: that one */
};

enum openai_format {
	OPENAI_FORMAT_TEXT,		/* no response_format, or "text" */
	OPENAI_FORMAT_JSON_OBJECT,	/* "json_object": any JSON object */
	OPENAI_FORMAT_JSON_SCHEMA,	/* "json_schema": a document valid under schema */
};

/* A request's generation fields, checked. */
struct openai_req {
	int	chat;
	int	stream, include_usage;	/* include_usage: stream_options's */
	int	n;		/* choices, 1..OPENAI_N_MAX */
	int	max_tokens;	/* max_completion_tokens or max_tokens; 0: not given */
	int	logprobs;	/* chat: logprobs true; completions: logprobs given */
	int	top_logprobs;	/* chat: top_logprobs; completions: logprobs' value */
	int	ignore_eos;
	int	return_token_ids;	/* each choice also lists its ids ("token_ids", vLLM's) */
	struct sample_params sp;	/* temperature 1, penalties over the whole history */
	char	*stop[OPENAI_MAX_STOPS];	/* malloc'd, non-empty */
	int	n_stop;
	int	n_tools;	/* tools given (0 with tool_choice "none") */
	const struct json *tools;	/* "tools", a node of the request's tree (names checked:
					 * 1 to 64 of a-z, A-Z, 0-9, '_', '-', each once; "strict"
					 * a boolean, "parameters" an object), or NULL */
	enum openai_tools tool_choice;
	char	*tool_name;	/* OPENAI_TOOLS_NAMED: the function (malloc'd) */
	int	parallel_tool_calls;	/* 1 unless false */
	enum openai_format format;	/* response_format */
	const struct json *schema;	/* OPENAI_FORMAT_JSON_SCHEMA: json_schema.schema, a
					 * node of the request's tree (NULL: none given,
					 * any object) */
};

/*
 * The generation fields of request q (a JSON object) for chat or
 * completions into r: every field OpenAI documents for the endpoint that
 * serve takes is checked for its type and range (a field it does not
 * know is ignored, as OpenAI's API does).  0, or -1 with the reason in
 * err (UTIL_ERRLEN) naming the field: "'temperature': not a number",
 * "'n': 0: out of range 1..128".  openai_request_free frees r's strings
 * (after a failure too).
 */
int	openai_request(const struct json *q, int chat, struct openai_req *r, char *err);
void	openai_request_free(struct openai_req *r);

/* What every part of one response carries. */
struct openai_resp {
	long	id;		/* "chatcmpl-ID" / "cmpl-ID", and the tool calls' "call_ID_N" */
	int	chat;		/* /v1/chat/completions (else /v1/completions) */
	const char *model;	/* the served model's name */
	long	created;	/* Unix seconds, the same in every chunk */
	size_t	prompt_tokens;
	size_t	cached_tokens;	/* of them, not computed again (prompt_tokens_details) */
	int	index;		/* the choice a chunk is of (n > 1); its calls are
				 * "call_ID_INDEX_N" past choice 0 */
	const struct tokenizer *tok;	/* the logprobs' token texts (NULL: "") */
	const struct chat_types *types;	/* how tool calls' XML values become JSON (lib/chat.h;
					 * NULL: as they parse) */
};

struct chat_types;
struct sched_logprob;
struct tokenizer;

/*
 * Tokens with their logprobs (lib/schedule.h): ids[n] and lp[n], the
 * text before them offset bytes long (completions' text_offset).  As
 * OpenAI shapes them: chat {"content": [{"token", "logprob", "bytes",
 * "top_logprobs": [...]}], "refusal": null}; completions {"tokens",
 * "token_logprobs", "top_logprobs": [{token: logprob}], "text_offset"}.
 * A token's text is its bytes, as JSON escapes them where they are not
 * UTF-8 by themselves; a logprob of -inf is written -9999.0.
 */
struct openai_lp {
	const int32_t *ids;
	const struct sched_logprob *lp;
	int	n;
	size_t	offset;
};

/*
 * A streamed chunk: text s[n] as the delta under key (chat:
 * "content" or "reasoning_content"; key NULL: an empty delta), or as
 * "text" (completions), with the logprobs of lp (NULL: none) and, tids
 * not NULL (return_token_ids), "token_ids": tids[n_tids] (the ids
 * generated since the last chunk; a stream's chunks together list them
 * all); finish NULL while the stream goes on.
 */
char	*openai_chunk(const struct openai_resp *, const char *key, const char *s, size_t n,
	    const struct openai_lp *lp, const int32_t *tids, int n_tids, const char *finish,
	    size_t *len);

/* A streamed chunk of a model without a tokenizer: "text": "" and the ids. */
char	*openai_chunk_ids(const struct openai_resp *, const int32_t *ids, int n, size_t *len);

struct chat_call;

/*
 * A streamed chunk of tool call i (0, 1, ...) of a reply, as OpenAI
 * streams one: first (head 1) {"index": i, "id", "type": "function",
 * "function": {"name", "arguments": ""}}, then (head 0) {"index": i,
 * "function": {"arguments": FRAGMENT}} with c's arguments text.
 */
char	*openai_chunk_call(const struct openai_resp *, const struct chat_call *c, size_t i,
	    int head, size_t *len);

/* The last chunk before [DONE]: no choices, the usage counts. */
char	*openai_chunk_usage(const struct openai_resp *, int completion_tokens, size_t *len);

/* One choice of a whole reply. */
struct openai_choice {
	const char *text;	/* the text generated (NULL: "") */
	size_t	len;
	const int32_t *ids;	/* a model without a tokenizer: the ids generated */
	int	n_ids;
	const int32_t *tids;	/* return_token_ids: the ids generated, as "token_ids" after
				 * the text or message (NULL: not asked for) */
	int	n_tids;
	const char *finish;	/* "stop" or "length" (tool calls make "stop" "tool_calls") */
	int	want_lp;	/* logprobs were asked for: lp, else "logprobs": null */
	struct openai_lp lp;
	int	max_calls;	/* the tool calls kept, 0: all (parallel_tool_calls false: 1) */
};

/*
 * The whole reply, choices c[n] (index 0..n-1).  Completions: "text", or
 * with ids (a model without a tokenizer) "text": "" and "token_ids".
 * Chat: the text parsed as lib/chat does (think: the prompt ended in an
 * open <think>): its reasoning as "reasoning_content", its tool calls as
 * "tool_calls" with finish "tool_calls" (not "length": a reply cut by
 * max_tokens or the context keeps it; content null when there is
 * nothing else), the text as generated when it has neither, or as it is
 * when it does not parse.  usage counts completion_tokens over them all.
 */
char	*openai_reply(const struct openai_resp *, const struct openai_choice *c, int n, int think,
	    int completion_tokens, size_t *len);

/*
 * An error body: {"error": {"message": msg, "type": type, "code": status}}
 * with status's type (401 authentication_error, 404 not_found_error, 5xx
 * server_error, else invalid_request_error), and a newline.
 */
char	*openai_error(int status, const char *msg, size_t *len);

/* An error body with OpenAI's string code: {"error": {"message": msg,
 * "type": type, "param": null, "code": code}} and a newline. */
char	*openai_error_code(const char *msg, const char *type, const char *code, size_t *len);

/* /v1/models's body: the models names[n] (owned by "memra"), and a newline. */
char	*openai_models(const char *const *names, int n, size_t *len);

#endif
