/*
 * request: an OpenAI generation request (/v1/chat/completions,
 * /v1/completions) made ready for the scheduler: its fields checked, its
 * prompt's token ids (the chat template over its messages, tools and
 * template kwargs, or the completions prompt as text or ids), the text a
 * tool_choice or a response_format makes the reply begin with, and the
 * grammar of its response_format or of its tool calls.
 */
#ifndef MEMRA_REQUEST_H
#define MEMRA_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#include "chat.h"
#include "openai.h"

struct grammar;
struct grammar_cache;
struct json;
struct prompt;
struct tokenizer;

struct request {
	int	chat;		/* /v1/chat/completions (else /v1/completions) */
	int	think;		/* the rendered prompt ends in an open <think> */
	struct openai_req q;
	int32_t	*ids;		/* the prompt, and the forced text's tokens [n_ids] */
	size_t	n_ids;
	char	*forced;	/* what the reply is made to begin with, or NULL */
	int	xml;		/* chat: the template shows the <function=NAME> call form */
	struct grammar *grammar;	/* response_format's or the calls' (a reference), or NULL */
	struct chat_types types;	/* the calls' XML values typed by the grammar */
};

/*
 * The generation fields of request body (a JSON object) for chat or
 * completions into r (lib/openai's openai_request), n at most max_n, the
 * sampling values valid for a vocabulary of n_vocab.  0, or -1 with err
 * (UTIL_ERRLEN) naming the field.  request_free frees r (after a failure
 * too; a zeroed r is a no-op).
 */
int	request_parse(struct request *r, const struct json *body, int chat, int n_vocab,
	    int max_n, char *err);
void	request_free(struct request *r);

/*
 * Whether r needs a grammar, for the model named model with tokenizer tok
 * (NULL: none): 0 none, 1 one (request_grammar gets it): a response_format
 * that is not text, or tools under tool_choice "required" or a named one
 * (the call's name is one of the tools', a strict tool's arguments valid
 * under its parameters) or "auto" with a strict tool (its calls so); -1
 * with err when it cannot have one (no tokenizer, with ignore_eos, a
 * response_format beside a tool_choice that forces a call or beside
 * strict tools).
 */
int	request_format(const struct request *r, const struct tokenizer *tok, const char *model,
	    char *err);

/*
 * r's grammar from gc (compiled at first use) into r->grammar, after
 * request_prompt (the tool calls' form and where they begin are the
 * rendered prompt's): 0, or -1 with err naming the field that cannot be
 * enforced ("'tools[1].function.parameters': #/properties/x: 'pattern' is
 * not supported").
 */
int	request_grammar(struct request *r, struct grammar_cache *gc, char *err);

/* How r's reply's tool calls are typed (lib/openai's openai_resp.types):
 * by its grammar where the calls are strict in the XML form, else NULL. */
const struct chat_types *request_types(const struct request *r);

/*
 * The prompt of request body into r->ids: chat, the template of pr over
 * the messages, tools and chat_template_kwargs (r->think set from the
 * rendered text), then the tokens of the text tool_choice or
 * response_format makes the reply begin with (r->forced); completions,
 * "prompt" as text (pr's tokenizer) or as ids below n_vocab.  0, or -1
 * with err (model: the model's name, for the message).
 */
int	request_prompt(struct request *r, const struct json *body, const struct prompt *pr,
	    int n_vocab, const char *model, char *err);

#endif
