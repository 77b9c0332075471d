/*
 * grammar: constrained decoding.  A JSON Schema (or "any JSON object")
 * compiles to a byte-level pushdown automaton; a state of it says, at each
 * step, which tokens of the vocabulary may come next: token t is allowed
 * when its bytes (tokenizer_piece: byte-level BPE mapping undone, <0xXX>
 * as the byte) can all be consumed from the state.  The automaton works
 * on bytes, so a token may hold several characters or part of one: inside
 * strings it checks UTF-8, a character split across tokens included.
 * A stop token (EOS, end of turn) is allowed only when the document is
 * complete; control tokens never are.
 *
 * The documents: exactly the JSON texts valid under the schema, less what
 * the whitespace and size bounds below cut:
 *   - whitespace (space, tab, CR, LF) between tokens of the document, and
 *     before and after it, at most ws_max bytes in a row (default 20);
 *   - object members come in the order of "properties", each once; an
 *     optional one may be left out; with "properties" no other key is
 *     generated (whatever "additionalProperties" says);
 *   - numbers: at most 15 digits before the point, 15 after it and 2 in
 *     the exponent; "integer" has neither fraction nor exponent;
 *   - strings: \u escapes of surrogates (D800-DFFF) are not generated
 *     (raw UTF-8 instead); keys and enum strings are spelled as
 *     json_put_str spells them;
 *   - nesting at most GRAMMAR_MAX_DEPTH.
 * So each stays finite but for strings, arrays and maps, which max_tokens
 * bounds (see grammar_mask's left).
 *
 * The schema subset (OpenAI strict mode's, and more): type (a name or a
 * list), properties, required, additionalProperties (false, true or a
 * schema: with no "properties" a map of such values), items, minItems,
 * maxItems, enum, const, anyOf, allOf of one schema, $ref to "#", to
 * $defs / definitions or any "#/..." pointer (recursion too); boolean
 * schemas.  Annotations (title, description, default, examples, $comment,
 * $schema, $id, deprecated, readOnly, writeOnly) are ignored.  Any other
 * keyword (pattern, format, minLength, oneOf, minimum, ...) is refused by
 * name, never ignored.
 *
 * In a step loop (one grammar_state per constrained reply):
 *   decode row:  grammar_mask_logits(st, row, n_vocab, tokens_left) on the
 *                host (or grammar_mask's bits uploaded and applied where the
 *                row is), sample, grammar_accept(st, tok);
 *   speculative: walk the drafts d1..dk on a copy (grammar_state_copy):
 *                the first draft !grammar_allows is cut there, like any
 *                wrong draft; verify row i is masked with the copy's state
 *                after d1..di (one copy per row, or mask as you accept);
 *                then grammar_accept the tokens the verify keeps and the
 *                corrected / bonus one on the real state (or copy back the
 *                snapshot of the accepted length).
 * The first mask of a state walks the trie (about 10-25 ms inside a string
 * on a 250k vocabulary); a state seen before costs a copy of its cached
 * bits (under a microsecond), and states recur (string content, the same
 * key of the same schema).
 *
 * Who owns what: a grammar_vocab (one per tokenizer: the trie of the
 * tokens' bytes) outlives the grammars compiled over it; a grammar
 * outlives its states.  A vocab is read-only; a grammar is read-only but
 * for its mask cache, which a lock guards: states of one grammar may run
 * on different threads.  A state is one thread's at a time.
 */
#ifndef MEMRA_GRAMMAR_H
#define MEMRA_GRAMMAR_H

#include <stddef.h>
#include <stdint.h>

struct json;
struct tokenizer;
struct grammar_vocab;
struct grammar;
struct grammar_state;

#define GRAMMAR_MAX_DEPTH	64	/* frames of a parse: nesting + 1 */
#define GRAMMAR_WS_DEFAULT	20

/*
 * The trie of tok's token byte strings: every token but control, unknown
 * and unused ones, empty ones and the stop tokens stop[n_stop] (which
 * come only at the end of a document).  NULL with err (UTIL_ERRLEN) when
 * out of memory.  tok may be freed after.
 */
struct grammar_vocab *grammar_vocab_new(const struct tokenizer *tok, const int32_t *stop,
	    int n_stop, char *err);
void	grammar_vocab_free(struct grammar_vocab *v);
size_t	grammar_vocab_size(const struct grammar_vocab *v);

struct grammar_options {
	int	ws_max;		/* whitespace bytes in a row, 0..255 */
	size_t	cache_bytes;	/* the mask cache's bound (masks are n_vocab bits) */
};

/* ws_max GRAMMAR_WS_DEFAULT, a 32 MiB cache. */
void	grammar_defaults(struct grammar_options *o);

/*
 * Compile schema (NULL: any JSON object, response_format json_object)
 * over v.  o NULL is grammar_defaults.  NULL with err (UTIL_ERRLEN) when
 * the schema is refused, as "LOCATION: why" with LOCATION a JSON pointer
 * into the schema ("#/properties/name: 'pattern' is not supported",
 * "#: no finite document satisfies the schema"), or when out of memory.
 * Free with grammar_free.
 */
struct grammar *grammar_compile(const struct json *schema, const struct grammar_vocab *v,
	    const struct grammar_options *o, char *err);

/*
 * Tool calls: the reply of a chat request with tools, in the form the
 * chat template spells a call, every call's name one of the tools' and a
 * strict tool's arguments valid under its parameters (the schema subset
 * above).  The forms:
 *   GRAMMAR_CALLS_JSON  <tool_call>\n{"name": "NAME", "arguments": ARGS}\n</tool_call>
 *                       (Qwen2.5/3, Hermes); ARGS a JSON value under the schema
 *                       (a tool that is not strict: any object)
 *   GRAMMAR_CALLS_XML   <tool_call>\n<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>\n
 *                       ... </function>\n</tool_call> (Qwen3.5): the parameters are the
 *                       schema's "properties" in their order, each once, the required
 *                       ones all there (the schema must be an object with "properties");
 *                       a VALUE is its JSON text, or the raw text of a string (up to
 *                       "</parameter>", never holding "</tool_call>", one newline after it)
 *                       where the property's schema allows a string; a tool that is not
 *                       strict: any text up to "</function>"
 * Where the document begins (what the prompt already holds):
 *   GRAMMAR_CALLS_AUTO      text (with think, first the think block's, up to "</think>"),
 *                           and where it holds "<tool_call>", a call; the document may
 *                           end anywhere outside a call
 *   GRAMMAR_CALLS_REQUIRED  after "<tool_call>\n": a call
 *   GRAMMAR_CALLS_NAMED     after tool `named`'s call up to ARGS (json: `... "arguments": `;
 *                           xml: `<function=NAME>\n`): the rest of that call
 * With parallel, more calls may follow a call (whitespace between); else
 * a call ends the document (grammar_ended).  Whitespace: as above.
 */
enum { GRAMMAR_CALLS_JSON, GRAMMAR_CALLS_XML };
enum { GRAMMAR_CALLS_AUTO, GRAMMAR_CALLS_REQUIRED, GRAMMAR_CALLS_NAMED };

struct grammar_tool {
	const char *name;		/* a-z, A-Z, 0-9, '_', '-' */
	const struct json *params;	/* its parameters' JSON Schema (NULL: no parameters) */
	int	strict;			/* 1: the arguments under params; 0: any */
};

struct grammar_calls {
	int	form;		/* GRAMMAR_CALLS_JSON, GRAMMAR_CALLS_XML */
	int	start;		/* GRAMMAR_CALLS_AUTO, _REQUIRED, _NAMED */
	int	named;		/* _NAMED: the tool's index */
	int	parallel;	/* more calls may follow */
	int	think;		/* _AUTO: the reply begins inside a think block */
};

/*
 * Compile the tool-call document of tools t[n] over v (o as
 * grammar_compile's).  NULL with err when a strict tool's parameters are
 * refused (*bad: its index; err as grammar_compile's, "#/properties/x:
 * 'pattern' is not supported"), a name repeats or is not as above (*bad
 * -1), or out of memory.
 */
struct grammar *grammar_compile_calls(const struct grammar_tool *t, int n,
	    const struct grammar_calls *c, const struct grammar_vocab *v,
	    const struct grammar_options *o, int *bad, char *err);

/*
 * The JSON of an xml call's parameter value as the grammar generated it:
 * tool fn's parameter key[kn] with raw text v[vn] (the text between
 * "<parameter=KEY>\n" and "\n</parameter>"): its JSON text when it is a
 * whole value of the property's JSON (not string) part, else v as a JSON
 * string when the property allows a string.  malloc'd; NULL when fn is
 * not a strict tool of g, key not its parameter, v fits neither, or out
 * of memory (then the caller reads v as it parses).
 */
char	*grammar_call_value(const struct grammar *g, const char *fn, const char *key, size_t kn,
	    const char *v, size_t vn);
/*
 * A grammar is counted: grammar_compile's caller holds one reference,
 * grammar_retain adds one (thread-safe; returns g), and grammar_free
 * drops one and frees the grammar with the last.  So a grammar shared by
 * a cache and the requests running under it lives until all are done.
 */
struct grammar *grammar_retain(struct grammar *g);
void	grammar_free(struct grammar *g);

/*
 * A cache of compiled grammars over one vocabulary, keyed by the schema's
 * compact JSON text (NULL: any object), at most max of them, the least
 * recently used dropped (its reference; requests holding it keep it).
 * grammar_cache_get returns a grammar for schema with a reference for the
 * caller (grammar_free it), compiled or from the cache (thread-safe), or
 * NULL with err as grammar_compile says.  A cache owns neither v (which
 * must outlive it) nor the grammars it handed out.
 */
struct grammar_cache;
struct grammar_cache *grammar_cache_new(const struct grammar_vocab *v, int max);
void	grammar_cache_free(struct grammar_cache *c);
struct grammar *grammar_cache_get(struct grammar_cache *c, const struct json *schema,
	    char *err);
/* The same for grammar_compile_calls's document, keyed by all it is made of. */
struct grammar *grammar_cache_calls(struct grammar_cache *c, const struct grammar_tool *t, int n,
	    const struct grammar_calls *cl, int *bad, char *err);

/* A state at the start of a document; NULL when out of memory. */
struct grammar_state *grammar_state_new(const struct grammar *g);
void	grammar_state_free(struct grammar_state *s);
/* dst = src (states of one grammar): a snapshot, or a rollback to one.
 * Scratch memory is not copied; cannot fail. */
void	grammar_state_copy(struct grammar_state *dst, const struct grammar_state *src);

/*
 * The tokens allowed next, as bits[(n + 31) / 32] (bit t of word t / 32:
 * token t; ids from the tokenizer's vocabulary up, as when a model has
 * more logit rows than tokens, are never allowed).  left: the tokens that
 * may still be generated, this one included, or -1 for no bound.  When
 * left comes within the distance to the nearest end of the document
 * (in bytes: one byte token each) plus a margin, the mask closes: only
 * tokens after which the document can still end within left - 1 tokens,
 * or where none can, those that bring the end nearest.  So a reply ends
 * complete when max_tokens leaves room for it at all.
 * Returns how many tokens are allowed (0 once a stop token was taken),
 * or -1 when out of memory.
 */
int	grammar_mask(struct grammar_state *s, uint32_t *bits, int n, int left);
/* grammar_mask, then logits[i] = -INFINITY for each i < n not allowed. */
int	grammar_mask_logits(struct grammar_state *s, float *logits, int n, int left);

/* 1 when token tok may come next (the bytes of it walked alone: a
 * speculative draft's check), 0 when not. */
int	grammar_allows(struct grammar_state *s, int32_t tok);
/* Take token tok: 0, or -1 when it is not allowed (the state unchanged). */
int	grammar_accept(struct grammar_state *s, int32_t tok);
/* 1 when the document is complete (a stop token is allowed now). */
int	grammar_done(const struct grammar_state *s);
/* 1 when the reply must end now (only a stop token, or whitespace, may
 * come): a JSON document complete (as grammar_done), a tool-call document
 * after its last call. */
int	grammar_ended(struct grammar_state *s);
/* 1 once a stop token was taken: nothing more is allowed. */
int	grammar_finished(const struct grammar_state *s);
/* Fewest bytes that complete the document (0: done). */
int	grammar_distance(const struct grammar_state *s);

/* Accept len bytes as if generated (tests, a forced prefix): 0, or -1 at
 * the first byte not allowed (the state unchanged). */
int	grammar_feed(struct grammar_state *s, const char *bytes, size_t len);

#endif
