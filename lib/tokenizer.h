/*
 * tokenizer: text <-> token ids, exactly as the reference implementations
 * (HF tokenizers, llama.cpp) do it.
 *
 * Two models.  BPE: byte-level (GPT-2 byte mapping) or raw UTF-8 with byte
 * fallback, a pre-tokenizer that splits text into words (qwen2, qwen35,
 * llama3, gpt2, smollm, falcon, deepseek-coder, deepseek-llm, default: the
 * split patterns of llama.cpp's llama-vocab.cpp), then merges by lowest rank.  SPM: the
 * SentencePiece-BPE of llama/gemma vocabularies: U+2581 for spaces, merges
 * by highest score, unknown characters as <0xXX> byte tokens.  Gemma-4
 * (pre "gemma4"): BPE on raw UTF-8 with spaces as U+2581, split into runs of
 * newlines and of other text, a newline run that is a token kept whole.
 * An HF NFC normalizer (spec.nfc) puts each text fragment in form C first.
 * HF SentencePiece-style BPE (Llama-2, Gemma tokenizer.json: spec.metaspace)
 * is BPE on raw UTF-8 with spaces as U+2581 and byte fallback <0xXX>.
 *
 * The core takes plain arrays (struct tokenizer_spec); tokenizer_from_json
 * and tokenizer_from_gguf fill one from a checkpoint.  Added tokens
 * (control and user-defined) are split out of the text first: control
 * tokens only with TOKENIZER_PARSE_SPECIAL, user-defined ones always.
 * Invalid UTF-8 in the input is read as U+FFFD per maximal ill-formed
 * subpart (what Python's errors="replace" feeds the reference).
 *
 * A built tokenizer is read-only: encode and decode may run on many threads.
 */
#ifndef MEMRA_TOKENIZER_H
#define MEMRA_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

struct tokenizer;

enum tokenizer_model { TOKENIZER_BPE, TOKENIZER_SPM };

/* Token types, numbered as GGUF's tokenizer.ggml.token_type. */
enum tokenizer_type {
	TOKENIZER_NORMAL = 1, TOKENIZER_UNKNOWN = 2, TOKENIZER_CONTROL = 3,
	TOKENIZER_USER_DEFINED = 4, TOKENIZER_UNUSED = 5, TOKENIZER_BYTE = 6
};

/* Per-token attributes of added tokens (HF added_tokens fields). */
enum { TOKENIZER_LSTRIP = 1, TOKENIZER_RSTRIP = 2 };

struct tokenizer_spec {
	enum tokenizer_model model;
	const char *pre;		/* pre-tokenizer name as GGUF tokenizer.ggml.pre
					   ("qwen2", "qwen35", "llama-bpe", "gpt2", "smollm",
					   "falcon", "deepseek-llm", "default"...);
					   NULL = "default"; unused by SPM */
	int	byte_level;		/* BPE: 1 = GPT-2 byte mapping, 0 = raw UTF-8 + <0xXX> */
	size_t	n_vocab;
	const char *const *tokens;	/* [n_vocab] token text as the vocabulary stores it */
	const size_t *token_lens;	/* [n_vocab] byte lengths, or NULL for strlen */
	const int32_t *types;		/* [n_vocab] enum tokenizer_type, or NULL: all normal */
	const uint8_t *attrs;		/* [n_vocab] TOKENIZER_LSTRIP|RSTRIP, or NULL */
	const float *scores;		/* [n_vocab] SPM merge scores, or NULL */
	size_t	n_merges;
	const char *const *merges;	/* [n_merges] BPE "left right", rank = index */
	int32_t	bos, eos, unk, pad;	/* -1 when the vocabulary has none */
	int	add_bos, add_eos;	/* added by TOKENIZER_ADD_SPECIAL */
	int	add_space_prefix;	/* SPM: a space before each text fragment;
					   metaspace BPE: TOKENIZER_PREFIX_* */
	int	ignore_merges;		/* BPE: a word that is a token is emitted whole */
	int	casefold_contractions;	/* HF (?i:'s|...) also matches Unicode case folds */
	int	nfc;			/* HF normalizer NFC: text between added tokens
					   is put in normalization form C first */
	int	metaspace;		/* BPE, not byte_level (HF SentencePiece-style:
					   Replace(" ", "▁") or Metaspace): spaces become
					   U+2581 before the merges, and decoding turns
					   U+2581 into a space in every token, added ones too */
	int	strip_space;		/* decode: the text's first space is dropped
					   (HF Strip decoder; SPM with add_space_prefix
					   always) */
};

/* Where metaspace BPE puts a U+2581 (add_space_prefix); a fragment is the
 * text between added tokens. */
enum {
	TOKENIZER_PREFIX_ALWAYS = 1,	/* before every fragment (HF Prepend("▁")) */
	TOKENIZER_PREFIX_UNLESS_SPACE,	/* before one that starts with neither a
					   space nor U+2581 (HF Metaspace "always") */
	TOKENIZER_PREFIX_FIRST		/* the same, the text's first fragment only
					   (HF Metaspace "first") */
};

/*
 * Build a tokenizer from plain arrays (copied: the spec may be freed after).
 * Returns NULL with the reason in err (UTIL_ERRLEN).  Free with tokenizer_free.
 */
struct tokenizer *tokenizer_new(const struct tokenizer_spec *spec, char *err);

/*
 * Load an HF tokenizer: path is a tokenizer.json file or a checkpoint
 * directory holding tokenizer.json (and tokenizer_config.json, read for
 * add_bos_token / add_eos_token when present).  NULL with err on failure,
 * naming the file and the unsupported feature.
 */
struct tokenizer *tokenizer_from_json(const char *path, char *err);

/*
 * Load the tokenizer.ggml.* metadata of an open GGUF (model "gpt2": BPE,
 * "llama": SPM), with llama.cpp's defaults for absent keys.  NULL with err
 * naming the key on failure.  g may be closed after.
 */
struct gguf;
struct tokenizer *tokenizer_from_gguf(struct gguf *g, char *err);

void	tokenizer_free(struct tokenizer *tok);

enum {
	TOKENIZER_ADD_SPECIAL = 1,	/* encode: BOS/EOS as the vocabulary asks */
	TOKENIZER_PARSE_SPECIAL = 2,	/* encode: control tokens in the text are tokens */
	TOKENIZER_SKIP_SPECIAL = 4	/* decode: drop control tokens */
};

/*
 * Encode len bytes of text.  Returns a malloc'd array of *n ids (caller
 * frees; non-NULL even when *n is 0), or NULL with err when out of memory
 * or when tok is NULL ("no tokenizer": a model without one).
 */
int32_t	*tokenizer_encode(const struct tokenizer *tok, const char *text, size_t len,
	    unsigned flags, size_t *n, char *err);

/*
 * Decode n ids into a malloc'd NUL-terminated string of *len bytes (caller
 * frees): the pieces concatenated, then ill-formed UTF-8 replaced by U+FFFD
 * as the reference decoders do (per maximal subpart; metaspace BPE as HF's
 * ByteFallback: a run of <0xXX> tokens that is not UTF-8 as a whole becomes
 * one U+FFFD per token).  NULL with err for an id out of range.
 */
char	*tokenizer_decode(const struct tokenizer *tok, const int32_t *ids, size_t n,
	    unsigned flags, size_t *len, char *err);

/* The raw bytes of token id (byte-level mapping undone, U+2581 -> space,
 * <0xXX> -> the byte); NULL when id is out of range. */
const char *tokenizer_piece(const struct tokenizer *tok, int32_t id, size_t *len);

/* The token's text as the vocabulary stores it, its type; -1/NULL out of range. */
const char *tokenizer_token(const struct tokenizer *tok, int32_t id);
int	tokenizer_type(const struct tokenizer *tok, int32_t id);
/* The id of a token text, or -1. */
int32_t	tokenizer_find(const struct tokenizer *tok, const char *text, size_t len);

size_t	tokenizer_n_vocab(const struct tokenizer *tok);
int32_t	tokenizer_bos(const struct tokenizer *tok);
int32_t	tokenizer_eos(const struct tokenizer *tok);
/* 1 when id is a control token (end of turn, BOS, ...). */
int	tokenizer_is_control(const struct tokenizer *tok, int32_t id);

/*
 * Incremental detokenizer: text for a stream of ids, never splitting a
 * UTF-8 character.  Bytes that may still become a character are held back
 * until the next id completes them (metaspace BPE: a run of <0xXX> tokens
 * until the next other token); the concatenated output of push calls and
 * the final flush equals tokenizer_decode of all the ids.
 */
struct tokenizer_stream;
struct tokenizer_stream *tokenizer_stream_new(const struct tokenizer *tok, unsigned flags);
void	tokenizer_stream_free(struct tokenizer_stream *st);
/* Feed one id; returns the text ready now (*len bytes, valid until the
 * next call; NUL-terminated), or NULL for an id out of range or out of
 * memory. */
const char *tokenizer_stream_push(struct tokenizer_stream *st, int32_t id, size_t *len);
/* End of stream: held-back bytes come out as U+FFFD.  Resets the stream. */
const char *tokenizer_stream_flush(struct tokenizer_stream *st, size_t *len);

#endif
