/*
 * prompt: a request's text made into the token ids a model expects: the
 * model's chat template applied (one user message, generation prompt on)
 * or the text as is, then its tokenizer; and the tokens that end a reply.
 */
#ifndef MEMRA_PROMPT_H
#define MEMRA_PROMPT_H

#include <stddef.h>
#include <stdint.h>

enum prompt_mode { PROMPT_AUTO, PROMPT_CHAT, PROMPT_RAW };

struct model;
struct tokenizer;
struct prompt;

/*
 * The prompt maker for model m.  PROMPT_AUTO is chat when the model has a
 * template, raw otherwise; PROMPT_CHAT without a template is an error.
 * A model without a tokenizer (see model_tokenizer) gets a prompt maker
 * for token ids only: no template, prompt_tokenizer NULL, text refused by
 * prompt_encode, and PROMPT_CHAT an error.  NULL with the reason in err
 * (UTIL_ERRLEN); prompt_free frees (NULL is a no-op); m must outlive it.
 */
struct prompt *prompt_new(struct model *m, enum prompt_mode mode, char *err);
void	prompt_free(struct prompt *);

/* 1 when the template is applied. */
int	prompt_is_chat(const struct prompt *);
/* The model's tokenizer, owned by the prompt; NULL when it has none. */
const struct tokenizer *prompt_tokenizer(const struct prompt *);

/*
 * The ids of len bytes of text: a chat prompt is rendered and its special
 * tokens parsed; a raw one gets BOS/EOS as the vocabulary asks and its
 * special tokens parsed too.  malloc'd [*n] (caller frees), or NULL with
 * the reason in err ("MODEL: no tokenizer: give the prompt as token ids"
 * when the model has none).
 */
int32_t	*prompt_encode(const struct prompt *, const char *text, size_t len, size_t *n,
	    char *err);

/*
 * The ids of a whole chat context ctx (a JSON object: messages, tools and
 * any template kwargs such as enable_thinking), rendered with the
 * generation prompt on; an error when the prompt is not chat.  *text
 * (when text is not NULL) gets the rendered text, malloc'd.  malloc'd
 * [*n] ids (caller frees), or NULL with the reason in err.
 */
struct json;
int32_t	*prompt_encode_chat(const struct prompt *, const struct json *ctx, char **text,
	    size_t *n, char *err);

/*
 * The prompt of a request given as token ids (OpenAI's and --jsonl's
 * "prompt": [ids]): arr must be a non-empty JSON array of integers, each
 * in 0..n_vocab-1, used as they are (no template, no BOS).  malloc'd [*n]
 * (caller frees), or NULL with one of these in err (UTIL_ERRLEN):
 *   "prompt": not an array of token ids
 *   "prompt": an empty array of token ids
 *   "prompt"[I]: X is not an integer token id  (X: the number, or the type)
 *   "prompt"[I]: id V is outside the vocabulary (N tokens)
 * Needs no model or prompt maker: a server calls it on the request it parsed.
 */
int32_t	*prompt_ids_json(const struct json *arr, int32_t n_vocab, size_t *n, char *err);

/* The tokens that end generation: EOS and the end-of-turn tokens the
 * vocabulary has; [*n], owned by the prompt. */
const int32_t *prompt_stop_ids(const struct prompt *, int *n);

#endif
