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

/* What every part of one response carries. */
struct openai_resp {
	long	id;		/* "chatcmpl-ID" / "cmpl-ID", and the tool calls' "call_ID_N" */
	int	chat;		/* /v1/chat/completions (else /v1/completions) */
	const char *model;	/* the served model's name */
	long	created;	/* Unix seconds, the same in every chunk */
	size_t	prompt_tokens;
	size_t	cached_tokens;	/* of them, not computed again (prompt_tokens_details) */
};

/*
 * A streamed chunk: text s[n] as the delta under key (chat:
 * "content" or "reasoning_content"; key NULL: an empty delta), or as
 * "text" (completions); finish NULL while the stream goes on.
 */
char	*openai_chunk(const struct openai_resp *, const char *key, const char *s, size_t n,
	    const char *finish, size_t *len);

/* A streamed chunk of a model without a tokenizer: "text": "" and the ids. */
char	*openai_chunk_ids(const struct openai_resp *, const int32_t *ids, int n, size_t *len);

struct chat_reply;

/* The streamed chunk of the reply's tool calls (r->ncalls > 0), indexed. */
char	*openai_chunk_tools(const struct openai_resp *, const struct chat_reply *r, size_t *len);

/* The last chunk before [DONE]: no choices, the usage counts. */
char	*openai_chunk_usage(const struct openai_resp *, int completion_tokens, size_t *len);

/*
 * The whole reply.  Completions: "text" text[n], or with ids (a model
 * without a tokenizer) "text": "" and "token_ids".  Chat: the text parsed
 * as lib/chat does (think: the prompt ended in an open <think>): its
 * reasoning as "reasoning_content", its tool calls as "tool_calls" with
 * finish "tool_calls" (content null when there is nothing else), the text
 * as generated when it has neither, or as it is when it does not parse.
 * finish: "stop" or "length" (tool calls make it "tool_calls").
 */
char	*openai_reply(const struct openai_resp *, const char *text, size_t n, int think,
	    const int32_t *ids, int n_ids, int completion_tokens, const char *finish,
	    size_t *len);

#endif
