/*
 * chat: chat templates, and the parse of a model's reply back into parts.
 *
 * A template is the Jinja text a GGUF (tokenizer.chat_template) or an HF
 * tokenizer_config.json carries.  chat_new compiles the subset of Jinja
 * that real chat templates use; chat_render renders it the way
 * transformers' apply_chat_template does: a jinja2 sandboxed environment
 * with trim_blocks and lstrip_blocks, the loopcontrols extension,
 * the {% generation %} tag, tojson as json.dumps(ensure_ascii=False),
 * and the globals raise_exception and strftime_now.  The output is meant
 * to be byte-identical to jinja2's.
 *
 * Anything outside the subset fails at compile time with a message that
 * names the template line ("template line 12: unsupported filter 'xyz'");
 * runtime errors (raise_exception, a type error, a missing variable used
 * as an object) name the line too.  Rendering is bounded: loop steps,
 * macro recursion, memory and output size all have limits, so that a
 * hostile template fails instead of hanging.
 */
#ifndef MEMRA_CHAT_H
#define MEMRA_CHAT_H

#include <stddef.h>
#include <stdint.h>

struct json;
struct chat;	/* a compiled template */

/*
 * Compile len bytes of template text.  Returns NULL with the reason in
 * err (UTIL_ERRLEN) when the text does not parse or uses a construct
 * outside the subset.  Free with chat_free.
 */
struct chat *chat_new(const char *tmpl, size_t len, char *err);
void	chat_free(struct chat *c);

struct chat_opts {
	int	add_generation_prompt;	/* 1, 0, or -1: take ctx's (default false) */
	size_t	max_output;		/* bytes of output; 0: 64 MiB */
	uint64_t max_steps;		/* loop iterations, macro calls, 256-byte units
				   of string work; 0: 10^7 */
};

/*
 * Render with the members of ctx (a JSON object) as template variables:
 * messages, tools, enable_thinking, bos_token and any other kwargs.  As
 * transformers does, tools and documents are none unless ctx gives them,
 * and add_generation_prompt comes from opts (NULL: all defaults).
 * Returns the output, malloc'd and NUL-terminated, its length in *len
 * (may be NULL); or NULL with the reason in err.  Caller frees.
 */
char	*chat_render(const struct chat *c, const struct json *ctx,
	    const struct chat_opts *opts, size_t *len, char *err);

/*
 * A model's reply split into its parts: the text of a leading
 * <think>...</think> block (or of an unclosed one), the content outside
 * think and tool-call blocks, and each <tool_call>...</tool_call> block.
 * A block holding a JSON object {"name": ..., "arguments": {...}} (the
 * Qwen2.5/Qwen3 form) gives name and arguments as JSON text; a block in
 * the XML form (<function=NAME><parameter=P>value</parameter>, Qwen3.5)
 * gives name and arguments re-encoded as a JSON object of strings and,
 * where a value parses as JSON, of that value.
 */
struct chat_call {
	char	*name;
	char	*arguments;	/* JSON object text */
};
struct chat_reply {
	char	*reasoning;	/* NULL when there was no think block */
	char	*content;	/* never NULL */
	struct chat_call *calls;
	size_t	ncalls;
};

/*
 * Parse len bytes of model output.  started_in_think says the prompt
 * ended inside an open <think> (the Qwen3.5 generation prompt does), so
 * the text up to </think> is reasoning.  Returns 0, or -1 with the reason
 * in err (out of memory, or a tool-call block that is not valid); free
 * the parts with chat_reply_free.
 */
int	chat_parse_reply(const char *text, size_t len, int started_in_think,
	    struct chat_reply *out, char *err);

/*
 * How the XML form's parameter values become JSON: value returns the JSON
 * text (malloc'd) of parameter key[kn]'s value v[vn] (the text between
 * "<parameter=KEY>" and "</parameter>", one newline stripped at each end)
 * in a call of function fn, or NULL to take it as chat_parse_reply does.
 */
struct chat_types {
	char	*(*value)(void *arg, const char *fn, const char *key, size_t kn, const char *v,
		    size_t vn);
	void	*arg;
};

/* chat_parse_reply with the XML form's values typed by t (NULL: as it does). */
int	chat_parse_reply_typed(const char *text, size_t len, int started_in_think,
	    const struct chat_types *t, struct chat_reply *out, char *err);
void	chat_reply_free(struct chat_reply *r);

#endif
