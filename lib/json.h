/*
 * json: a strict RFC 8259 parser into a read-only tree, and an escaper.
 *
 * Every node of one document lives in one arena owned by the root:
 * json_free(root) releases the whole tree.  Strings are decoded to UTF-8
 * (escapes resolved, lone surrogates kept as 3-byte sequences as Python
 * does) and NUL-terminated; `n` is their byte length, which counts any
 * embedded NUL.  Objects keep every member in file order; json_get
 * returns the last member of a key, as Python's json module would.
 */
#ifndef MEMRA_JSON_H
#define MEMRA_JSON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum json_type {
	JSON_NULL, JSON_FALSE, JSON_TRUE, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT
};

struct json {
	enum json_type type;
	int	is_int;		/* number written without fraction or exponent, fits int64 */
	int64_t	i;		/* the value when is_int */
	double	num;		/* every number */
	size_t	n;		/* string bytes, or number of elements / members */
	char	*str;		/* JSON_STRING: decoded text; JSON_NUMBER: the literal */
	struct json *items;	/* [n] array elements or member values */
	char	**keys;		/* [n] object member names (NUL-terminated) */
	size_t	*keylens;	/* [n] their byte lengths */
};

/*
 * Parse len bytes (need not be NUL-terminated).  Returns the root, or NULL
 * with "line L column C: why" in err (UTIL_ERRLEN).  Nesting deeper than
 * 512 is an error, as is trailing text.  Free with json_free.
 */
struct json *json_parse(const char *s, size_t len, char *err);
void	json_free(struct json *root);

/* Lookups; NULL when absent or when j is not of the needed type. */
const struct json *json_get(const struct json *obj, const char *key);
const struct json *json_at(const struct json *arr, size_t i);
/* The string of obj[key], or NULL when absent or not a string. */
const char *json_get_str(const struct json *obj, const char *key);
/* obj[key] as an integer / number / bool into *out: 0, or -1 when absent
 * or of another type (out untouched). */
int	json_get_i64(const struct json *obj, const char *key, int64_t *out);
int	json_get_num(const struct json *obj, const char *key, double *out);
int	json_get_bool(const struct json *obj, const char *key, int *out);

/* Write s[0..n) as a JSON string literal with quotes.  ascii=1 escapes
 * every non-ASCII character as \uXXXX (Python's ensure_ascii=True). */
void	json_put_str(FILE *fp, const char *s, size_t n, int ascii);
/* Write a tree compactly (", " and ": " separators when spaced=1). */
void	json_dump(FILE *fp, const struct json *j, int spaced);

#endif
