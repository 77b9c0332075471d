/*
 * tok-cli: drive lib/tokenizer for the peer comparisons (t/peer/tok_*.py).
 *   tok-cli [-s] [-a] encode TOKENIZER [FILE...]  one line of ids per FILE (stdin without)
 *   tok-cli [-k] decode TOKENIZER [FILE...]        ids (whitespace separated) -> text; stdin gives
 *                                                  raw text, each FILE one line (a JSON string)
 *   tok-cli [-k] stream TOKENIZER [FILE...]        the incremental detokenizer: one line per input,
 *                                                  a JSON array of the chunks of each push + flush
 *   tok-cli classes                                 unicode class ranges: "first last flags" (hex)
 *   tok-cli nfc                                     stdin lines (UTF-8) -> their NFC, one a line
 *   tok-cli bench TOKENIZER FILE RUNS               encode FILE RUNS times: one line per run,
 *                                                  "wall-seconds cpu-seconds bytes tokens" 
 * -s parses special tokens, -a adds BOS/EOS, -k skips control tokens when decoding.
 * TOKENIZER is a tokenizer.json, a checkpoint directory or a .gguf file.
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gguf.h"
#include "json.h"
#include "tokenizer.h"
#include "unicode.h"
#include "util.h"

static struct tokenizer *
load(const char *path)
{
	char err[UTIL_ERRLEN];
	struct tokenizer *tok;
	size_t n = strlen(path);

	if (n > 5 && strcmp(path + n - 5, ".gguf") == 0) {
		struct gguf *g = gguf_open(path, err);
		if (g == NULL)
			die(1, "%s", err);
		if ((tok = tokenizer_from_gguf(g, err)) == NULL)
			die(1, "%s: %s", path, err);
		gguf_close(g);
		return tok;
	}
	tok = tokenizer_from_json(path, err);
	if (tok == NULL)
		die(1, "%s", err);
	return tok;
}

static int
encode(struct tokenizer *tok, const char *file, unsigned flags)
{
	char err[UTIL_ERRLEN];
	size_t len, n, i;
	char *text = util_read_file(file, &len, err);
	int32_t *ids;

	if (text == NULL)
		die(1, "%s", err);
	if ((ids = tokenizer_encode(tok, text, len, flags, &n, err)) == NULL)
		die(1, "%s: %s", file, err);
	for (i = 0; i < n; i++)
		printf(i ? " %d" : "%d", ids[i]);
	putchar('\n');
	free(ids);
	free(text);
	return 0;
}

static int32_t *
read_ids(const char *file, size_t *n)
{
	size_t cap = 0;
	int32_t *v = NULL;
	long x;
	FILE *fp = strcmp(file, "-") == 0 ? stdin : fopen(file, "r");

	if (fp == NULL)
		die(1, "%s: cannot open", file);
	*n = 0;
	while (fscanf(fp, "%ld", &x) == 1) {
		if (*n == cap) {
			cap = cap ? 2 * cap : 256;
			if ((v = realloc(v, cap * sizeof(*v))) == NULL)
				die(1, "out of memory");
		}
		v[(*n)++] = (int32_t)x;
	}
	if (!feof(fp))
		die(1, "%s: not a list of ids", file);
	if (fp != stdin)
		fclose(fp);
	return v;
}

static int
decode(struct tokenizer *tok, const char *file, unsigned flags, int stream, int json)
{
	char err[UTIL_ERRLEN];
	size_t n, len, i;
	int32_t *ids = read_ids(file, &n);
	const char *p;
	char *s;

	if (!stream) {
		if ((s = tokenizer_decode(tok, ids, n, flags, &len, err)) == NULL)
			die(1, "%s: %s", file, err);
		if (json) {
			json_put_str(stdout, s, len, 0);
			putchar('\n');
		} else
			fwrite(s, 1, len, stdout);
		free(s);
	} else {
		struct tokenizer_stream *st = tokenizer_stream_new(tok, flags);
		putchar('[');
		for (i = 0; i <= n; i++) {
			p = i < n ? tokenizer_stream_push(st, ids[i], &len) : tokenizer_stream_flush(st, &len);
			if (p == NULL)
				die(1, "%s: stream: id %d failed", file, i < n ? ids[i] : -1);
			if (i)
				putchar(',');
			json_put_str(stdout, p, len, 0);
		}
		puts("]");
		tokenizer_stream_free(st);
	}
	free(ids);
	return 0;
}

static double
cpu_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int
bench(struct tokenizer *tok, const char *file, const char *runs)
{
	char err[UTIL_ERRLEN];
	size_t len, n;
	int64_t r, i;
	char *text = util_read_file(file, &len, err);
	int32_t *ids;
	double t0, c0;

	if (text == NULL)
		die(1, "%s", err);
	if (util_parse_i64(runs, 1, 1000, &r) < 0)
		die(2, "runs '%s' is not in 1..1000", runs);
	for (i = 0; i < r; i++) {
		t0 = util_now();
		c0 = cpu_now();
		if ((ids = tokenizer_encode(tok, text, len, 0, &n, err)) == NULL)
			die(1, "%s: %s", file, err);
		printf("%.6f %.6f %zu %zu\n", util_now() - t0, cpu_now() - c0, len, n);
		free(ids);
	}
	free(text);
	return 0;
}

static int
classes(void)
{
	uint32_t cp, first = 0;
	unsigned f = unicode_flags(0);

	for (cp = 1; cp <= 0x110000; cp++) {
		if (cp < 0x110000 && unicode_flags(cp) == f)
			continue;
		if (f)
			printf("%x %x %x\n", first, cp - 1, f);
		first = cp;
		f = cp < 0x110000 ? unicode_flags(cp) : 0;
	}
	return 0;
}

static int
nfc(void)
{
	char *line = NULL, buf[4];
	size_t cap = 0, i, n, k, m;
	ssize_t len;
	uint32_t *cp = NULL, *out = NULL;

	while ((len = getline(&line, &cap, stdin)) > 0) {
		if (line[len - 1] == '\n')
			len--;
		if ((cp = realloc(cp, (len + 1) * sizeof(uint32_t))) == NULL ||
		    (out = realloc(out, (len + 1) * UNICODE_NFD_MAX * sizeof(uint32_t))) == NULL)
			die(1, "out of memory");
		for (i = n = 0; i < (size_t)len; i += k)
			k = unicode_decode(line + i, len - i, &cp[n++]);
		m = unicode_nfc(cp, n, out);
		for (i = 0; i < m; i++)
			fwrite(buf, 1, unicode_encode(out[i], buf), stdout);
		putchar('\n');
	}
	free(line);
	free(cp);
	free(out);
	return 0;
}

int
main(int argc, char *argv[])
{
	struct tokenizer *tok;
	unsigned flags = 0;
	int ch, i, rc = 0;

	prog = base_name(argv[0]);
	while ((ch = getopt(argc, argv, "sak")) != -1) {
		switch (ch) {
		case 's': flags |= TOKENIZER_PARSE_SPECIAL; break;
		case 'a': flags |= TOKENIZER_ADD_SPECIAL; break;
		case 'k': flags |= TOKENIZER_SKIP_SPECIAL; break;
		default: return 2;
		}
	}
	argc -= optind;
	argv += optind;
	if (argc == 1 && strcmp(argv[0], "classes") == 0)
		return finish(classes());
	if (argc == 1 && strcmp(argv[0], "nfc") == 0)
		return finish(nfc());
	if (argc < 2)
		die(2, "usage: tok-cli [-sak] encode|decode|stream TOKENIZER [FILE...]");
	tok = load(argv[1]);
	if (strcmp(argv[0], "encode") == 0) {
		if (argc == 2)
			rc = encode(tok, "-", flags);
		for (i = 2; i < argc; i++)
			rc |= encode(tok, argv[i], flags);
	} else if (strcmp(argv[0], "bench") == 0 && argc == 4) {
		rc = bench(tok, argv[2], argv[3]);
	} else if (strcmp(argv[0], "decode") == 0 || strcmp(argv[0], "stream") == 0) {
		int stream = strcmp(argv[0], "stream") == 0;
		if (argc == 2)
			rc = decode(tok, "-", flags, stream, 0);
		for (i = 2; i < argc; i++)
			rc |= decode(tok, argv[i], flags, stream, 1);
	} else
		die(2, "unknown command '%s'", argv[0]);
	tokenizer_free(tok);
	return finish(rc);
}
