/*
 * reply: the reply to a generation request, built from its sessions'
 * tokens: each choice's tokens decoded to text, cut at a stop string,
 * split into reasoning and content at "</think>", its tool calls parsed,
 * its logprobs kept; streamed as server-sent events of lib/openai's
 * chunks as it comes, or made into one whole response at the end.
 *
 * No I/O of its own: what a stream sends goes through the caller's write
 * callback (bin/serve: the socket), and whether the client is still there
 * is the caller's gone callback.
 */
#ifndef MEMRA_REPLY_H
#define MEMRA_REPLY_H

#include <stddef.h>
#include <stdint.h>

#include "openai.h"

struct sched;
struct sched_seq;
struct sched_logprob;

/* What a reply is made of: the request and where its stream goes. */
struct reply_req {
	const struct openai_req *q;	/* stream, n, stop, logprobs, parallel_tool_calls,
					 * include_usage; must outlive the reply */
	struct openai_resp r;	/* id, chat, model, created, prompt_tokens, tok (NULL: a
				 * model without a tokenizer, its replies are ids) */
	int	think;		/* the prompt ends in an open <think> (chat) */
	const char *forced;	/* the text the reply was made to begin with (tool_choice,
				 * a closed think block), or NULL; must outlive the reply */
	int	max_tokens;	/* the most a choice generates */
	/* A stream's bytes, in order: 0, or -1 when the client is gone (then
	 * nothing more is written).  Not called when q->stream is 0. */
	int	(*write)(void *arg, const char *p, size_t n);
	/* 1 when the client has left (NULL: never asked). */
	int	(*gone)(void *arg);
	void	*arg;
};

struct reply;

/*
 * The reply of rq (copied), q->n choices, none begun: NULL when out of
 * memory.  reply_free frees it (NULL is a no-op); it never releases a
 * session (reply_run does).
 */
struct reply *reply_new(const struct reply_req *rq);
void	reply_free(struct reply *);

/*
 * Choice i takes token t (lp: its logprobs, or NULL); streamed, the text
 * that can no longer become a stop string, "</think>" or "<tool_call>" is
 * sent.  1 when the choice ends here: a stop string (the text cut before
 * it, finish "stop"), the client gone ("stop"), out of memory or the ids
 * of a model without a tokenizer full ("length"); 0 while it goes on.
 */
int	reply_take(struct reply *, int i, int32_t t, const struct sched_logprob *lp);

/*
 * Choice i ends with finish ("stop" or "length"; a finish reply_take set
 * is kept): a tool call that tool_choice began and that is still open is
 * closed, and a stream gets the rest of the text, the tool calls (finish
 * "tool_calls", but "length" stays) and the finish chunk.  A choice that failed
 * (reply_run's error) passes failed 1: nothing more is streamed.  A
 * second call is a no-op.
 */
void	reply_end(struct reply *, int i, const char *finish, int failed);

/*
 * Every choice from the scheduler's tokens, choice i from session seq[i]
 * (q->n of them, each released here as its choice ends; all released on
 * return): each streamed as it comes.  0, or -1 with err (UTIL_ERRLEN)
 * when a session failed.  The client gone ends every choice.
 */
int	reply_run(struct reply *, struct sched *, struct sched_seq **seq, char *err);

/* The client is gone: nothing more is written, and each choice ends at its
 * next token. */
void	reply_drop(struct reply *);

/* The end of a stream: the usage chunk (stream_options.include_usage) and
 * "[DONE]"; nothing when the client is gone. */
void	reply_close(struct reply *);

/*
 * The whole (non-streamed) response as JSON (lib/openai's openai_reply),
 * malloc'd, its length in *len; NULL when out of memory.
 */
char	*reply_whole(const struct reply *, size_t *len);

/* What the reply was: tokens generated over every choice, 1 when the
 * client left; choice 0's seconds queued and to its first token (-1:
 * none) and the prompt tokens its session did not compute again. */
struct reply_stats {
	int	n_gen, gone;
	double	wait, first;
	size_t	cached;
};

void	reply_stats(const struct reply *, struct reply_stats *);

#endif
