/*
 * unicode: UTF-8 decoding with replacement, and the character classes the
 * tokenizer's pre-tokenizer patterns use (general categories L, N, M, P and
 * the White_Space property, Unicode 16.0 as the reference tokenizers use),
 * and the NFC normalizer of HF tokenizer.json.
 */
#ifndef MEMRA_UNICODE_H
#define MEMRA_UNICODE_H

#include <stddef.h>
#include <stdint.h>

enum {
	UNICODE_L = 1,		/* letter */
	UNICODE_N = 2,		/* number */
	UNICODE_M = 4,		/* mark */
	UNICODE_P = 8,		/* punctuation */
	UNICODE_SPACE = 16	/* White_Space (the regex \s) */
};

#define UNICODE_REPLACEMENT 0xFFFDu

/* The UNICODE_* flags of code point cp (0 for anything out of range). */
unsigned unicode_flags(uint32_t cp);

/*
 * Decode the character at s[0..n), n > 0, into *cp and return its length in
 * bytes.  An ill-formed or truncated sequence decodes to U+FFFD and its
 * length is that of its maximal subpart (at least 1), the policy of Python's
 * errors="replace" and Rust's from_utf8_lossy.
 */
size_t	unicode_decode(const char *s, size_t n, uint32_t *cp);

/*
 * 1 when s[0..n), n > 0, is a proper prefix of a well-formed sequence:
 * a character that more bytes could still complete.
 */
int	unicode_incomplete(const char *s, size_t n);

/* Write cp (< 0x110000) as UTF-8 into buf[4]; returns the length. */
size_t	unicode_encode(uint32_t cp, char *buf);

/* The most code points one character decomposes into (canonically). */
#define UNICODE_NFD_MAX 4

/*
 * Normalization form C of the n code points in[], written to out[] (room
 * for UNICODE_NFD_MAX * n; out must not overlap in): canonical
 * decomposition, canonical ordering, canonical composition (Hangul
 * algorithmically), with the Unicode 9.0 data HF tokenizers' NFC uses
 * (marks added since are starters there).  Returns the number written (<= the
 * decomposed length).  Never fails.
 */
size_t	unicode_nfc(const uint32_t *in, size_t n, uint32_t *out);

#endif
