/*
 * gguf-inspect: print the header, metadata, tensor table and totals of a
 * GGUF file; --json, --tsv and --kv for scripts; --check scans the tensors.
 */
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "json.h"
#include "quant.h"
#include "util.h"

#define ARR_SHOWN	8	/* array elements shown without --full */
#define STR_SHOWN	120	/* string bytes shown without --full */
#define CHUNK_ELEMS	(1 << 20)	/* elements dequantized at a time by --check */

struct inspect_opts {
	int	json, tsv, full, check, stats;
	const char *kv;
};

struct stats {
	uint64_t n, nan, inf;	/* elements; NaN and Inf among them */
	double	min, max, sum, sumsq;	/* over the finite elements */
	int	skipped;	/* no dequantizer for the type */
};

static int
usage(FILE *fp, int status)
{
	fprintf(fp, "usage: %s [-cfjst] [-k key] [file | -]\n", prog);
	if (fp == stdout)
		fputs("  -c, --check    verify the layout and scan every tensor for NaN/Inf\n"
		    "  -f, --full     print long arrays and strings in full\n"
		    "  -j, --json     one JSON document\n"
		    "  -k, --kv KEY   print the value of KEY raw\n"
		    "  -s, --stats    with --check: min/max/mean/rms of every tensor\n"
		    "  -t, --tsv      the tensor table as tab-separated values\n"
		    "  -h, --help     this text\n", fp);
	return status;
}

/* --- values --- */

/* The shortest text that reads back as the same float32 / float64. */
static void
put_float(FILE *fp, double v, int f32, int json)
{
	char b[40];
	int p;

	if (json && !isfinite(v)) {
		fputs("null", fp);
		return;
	}
	for (p = f32 ? 6 : 15; p < (f32 ? 9 : 17); p++) {
		snprintf(b, sizeof b, "%.*g", p, v);
		if (f32 ? strtof(b, NULL) == (float)v : strtod(b, NULL) == v)
			break;
	}
	fprintf(fp, "%.*g", p, v);
}

/* One element of type t at p (not a string): a number, or true/false. */
static void
put_elem(FILE *fp, int t, const void *p, int json)
{
	union { uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32;
		uint64_t u64; int64_t i64; float f32; double f64; } v;
	static const int size[GGUF_TYPE_COUNT] = { 1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8 };

	memcpy(&v, p, size[t]);
	switch (t) {
	case GGUF_TYPE_UINT8: fprintf(fp, "%u", v.u8); break;
	case GGUF_TYPE_INT8: fprintf(fp, "%d", v.i8); break;
	case GGUF_TYPE_UINT16: fprintf(fp, "%u", v.u16); break;
	case GGUF_TYPE_INT16: fprintf(fp, "%d", v.i16); break;
	case GGUF_TYPE_UINT32: fprintf(fp, "%" PRIu32, v.u32); break;
	case GGUF_TYPE_INT32: fprintf(fp, "%" PRId32, v.i32); break;
	case GGUF_TYPE_UINT64: fprintf(fp, "%" PRIu64, v.u64); break;
	case GGUF_TYPE_INT64: fprintf(fp, "%" PRId64, v.i64); break;
	case GGUF_TYPE_FLOAT32: put_float(fp, v.f32, 1, json); break;
	case GGUF_TYPE_FLOAT64: put_float(fp, v.f64, 0, json); break;
	case GGUF_TYPE_BOOL: fputs(v.u8 ? "true" : "false", fp); break;
	}
}

/* A string: JSON-quoted, cut to max bytes (0: no limit) with a note. */
static void
put_str(FILE *fp, const char *s, size_t n, size_t max, int json)
{
	if (max == 0 || n <= max) {
		json_put_str(fp, s, n, json);
		return;
	}
	while (max > 0 && ((unsigned char)s[max] & 0xC0) == 0x80)	/* whole UTF-8 characters */
		max--;
	json_put_str(fp, s, max, 0);
	fprintf(fp, "... (%zu bytes)", n);
}

/* The value of kv i: scalars and strings, arrays as [a, b, ...]. */
static void
put_value(FILE *fp, struct gguf *g, int64_t i, int full, int json)
{
	int t = gguf_kv_type(g, i), et = gguf_arr_type(g, i);
	uint64_t j, n = gguf_arr_n(g, i), shown = full || json ? n : ARR_SHOWN;
	uint8_t tmp[8];
	const char *s;
	size_t len;

	if (t == GGUF_TYPE_STRING) {
		s = gguf_get_str(g, i, &len);
		put_str(fp, s, len, full || json ? 0 : STR_SHOWN, json);
		return;
	}
	if (t != GGUF_TYPE_ARRAY) {
		put_elem(fp, t, gguf_kv_data(g, i), json);
		return;
	}
	fputc('[', fp);
	for (j = 0; j < n && j < shown; j++) {
		if (j > 0)
			fputs(", ", fp);
		if (et == GGUF_TYPE_STRING) {
			s = gguf_arr_str(g, i, j, &len);
			put_str(fp, s, len, full || json ? 0 : 40, json);
		} else {
			gguf_arr_get(g, i, j, tmp);
			put_elem(fp, et, tmp, json);
		}
	}
	if (j < n)
		fprintf(fp, ", ... %" PRIu64 " more", n - j);
	fputc(']', fp);
}

/* The type of kv i as text: "uint32", "array[string]". */
static const char *
kv_type(const struct gguf *g, int64_t i, char *buf, size_t n)
{
	if (gguf_kv_type(g, i) != GGUF_TYPE_ARRAY)
		return gguf_type_name(gguf_kv_type(g, i));
	snprintf(buf, n, "array[%s]", gguf_type_name(gguf_arr_type(g, i)));
	return buf;
}

static uint64_t
n_elements(const struct gguf_tensor *t)
{
	return (uint64_t)t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
}

/* "4x3": the dims as stored (n_dims of them; "1" for a scalar). */
static void
put_shape(FILE *fp, const struct gguf_tensor *t, const char *sep)
{
	int j;

	if (t->n_dims == 0)
		fputs("1", fp);
	for (j = 0; j < t->n_dims; j++)
		fprintf(fp, "%s%" PRId64, j ? sep : "", t->ne[j]);
}

/* --- the text report --- */

static void
text_header(FILE *fp, const struct gguf *g)
{
	fprintf(fp, "version %" PRIu32 "\n", gguf_version(g));
	fprintf(fp, "alignment %zu\n", gguf_alignment(g));
	fprintf(fp, "kv %" PRId64 "\n", gguf_n_kv(g));
	fprintf(fp, "tensors %" PRId64 "\n", gguf_n_tensors(g));
	fprintf(fp, "data offset %" PRIu64 "\n", gguf_data_offset(g));
	fprintf(fp, "data size %" PRIu64 "\n", gguf_data_size(g));
	if (gguf_file_size(g) > 0)
		fprintf(fp, "file size %" PRIu64 "\n", gguf_file_size(g));
}

static void
text_metadata(FILE *fp, struct gguf *g, int full)
{
	int64_t i;
	int kw = 0, tw = 0, l;
	char tb[32];

	for (i = 0; i < gguf_n_kv(g); i++) {
		if ((l = strlen(gguf_kv_key(g, i))) > kw)
			kw = l < 48 ? l : 48;
		if ((l = strlen(kv_type(g, i, tb, sizeof tb))) > tw)
			tw = l;
	}
	fputs("\nmetadata\n", fp);
	for (i = 0; i < gguf_n_kv(g); i++) {
		fprintf(fp, "  %-*s  %-*s  ", kw, gguf_kv_key(g, i), tw, kv_type(g, i, tb, sizeof tb));
		put_value(fp, g, i, full, 0);
		fputc('\n', fp);
	}
}

static void
text_tensors(FILE *fp, const struct gguf *g)
{
	int64_t i, n = gguf_n_tensors(g);
	int nw = 4, l;
	char (*shape)[96] = calloc(n ? n : 1, sizeof *shape);
	int sw = 5;

	if (shape == NULL)
		die(1, "out of memory");
	for (i = 0; i < n; i++) {
		const struct gguf_tensor *t = gguf_tensor(g, i);
		FILE *s = fmemopen(shape[i], sizeof shape[i], "w");
		if (s != NULL) {
			put_shape(s, t, "x");
			fclose(s);
		}
		if ((l = strlen(shape[i])) > sw)
			sw = l;
		if ((l = strlen(t->name)) > nw)
			nw = l;
	}
	fprintf(fp, "\ntensors\n  %-*s  %-7s  %-*s  %12s  %12s\n", nw, "name", "type", sw, "shape", "offset", "bytes");
	for (i = 0; i < n; i++) {
		const struct gguf_tensor *t = gguf_tensor(g, i);
		fprintf(fp, "  %-*s  %-7s  %-*s  %12" PRIu64 "  %12" PRIu64 "\n", nw, t->name,
		    quant_name(t->type), sw, shape[i], t->offset, t->nbytes);
	}
	free(shape);
}

/* Per-type totals in type-id order. */
struct totals {
	uint64_t n[QUANT_TYPE_COUNT], params[QUANT_TYPE_COUNT], bytes[QUANT_TYPE_COUNT];
	uint64_t all_params, all_bytes;
};

static void
count_totals(const struct gguf *g, struct totals *s)
{
	int64_t i;

	memset(s, 0, sizeof *s);
	for (i = 0; i < gguf_n_tensors(g); i++) {
		const struct gguf_tensor *t = gguf_tensor(g, i);
		s->n[t->type]++;
		s->params[t->type] += n_elements(t);
		s->bytes[t->type] += t->nbytes;
		s->all_params += n_elements(t);
		s->all_bytes += t->nbytes;
	}
}

static void
text_totals(FILE *fp, const struct gguf *g)
{
	struct totals s;
	int t;

	count_totals(g, &s);
	fprintf(fp, "\ntotals\n  parameters %" PRIu64 "\n  bytes %" PRIu64 "\n", s.all_params, s.all_bytes);
	for (t = 0; t < QUANT_TYPE_COUNT; t++)
		if (s.n[t] > 0)
			fprintf(fp, "  %-7s  %6" PRIu64 " tensors  %14" PRIu64 " parameters  %14" PRIu64 " bytes\n",
			    quant_name(t), s.n[t], s.params[t], s.bytes[t]);
}

static void
put_tsv(FILE *fp, const struct gguf *g)
{
	int64_t i;

	for (i = 0; i < gguf_n_tensors(g); i++) {
		const struct gguf_tensor *t = gguf_tensor(g, i);
		fprintf(fp, "%s\t%s\t", t->name, quant_name(t->type));
		put_shape(fp, t, ",");
		fprintf(fp, "\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\n", n_elements(t),
		    t->offset, gguf_data_offset(g) + t->offset, t->nbytes);
	}
}

/* --kv KEY: scalars as text, strings raw, arrays one element a line. */
static int
put_kv_raw(FILE *fp, struct gguf *g, int64_t i)
{
	uint64_t j, n = gguf_arr_n(g, i);
	uint8_t tmp[8];
	const char *s;
	size_t len;

	if (gguf_kv_type(g, i) == GGUF_TYPE_STRING) {
		s = gguf_get_str(g, i, &len);
		fwrite(s, 1, len, fp);
	} else if (gguf_kv_type(g, i) != GGUF_TYPE_ARRAY)
		put_elem(fp, gguf_kv_type(g, i), gguf_kv_data(g, i), 0);
	for (j = 0; j < n; j++) {
		if (gguf_arr_type(g, i) == GGUF_TYPE_STRING) {
			s = gguf_arr_str(g, i, j, &len);
			fwrite(s, 1, len, fp);
		} else {
			gguf_arr_get(g, i, j, tmp);
			put_elem(fp, gguf_arr_type(g, i), tmp, 0);
		}
		if (j + 1 < n)
			fputc('\n', fp);
	}
	fputc('\n', fp);
	return 0;
}

/* --- --check --- */

/* Fold n floats into s. */
static void
accumulate(struct stats *s, const float *x, size_t n)
{
	size_t k;

	for (k = 0; k < n; k++) {
		double v = x[k];
		if (isnan(v))
			s->nan++;
		else if (isinf(v))
			s->inf++;
		else {
			if (s->n == 0 || v < s->min)
				s->min = v;
			if (s->n == 0 || v > s->max)
				s->max = v;
			s->sum += v;
			s->sumsq += v * v;
			s->n++;
		}
	}
}

/* Scan tensor i: every element through quant_dequantize_row, chunk by chunk. */
static int
scan(struct gguf *g, int64_t i, uint8_t *buf, float *x, struct stats *s)
{
	const struct gguf_tensor *t = gguf_tensor(g, i);
	const struct quant_traits *q = quant_traits(t->type);
	const uint8_t *map = gguf_tensor_data(g, i), *src;
	uint64_t per = CHUNK_ELEMS / q->blck, nblk = t->nbytes / q->size, b, k;

	memset(s, 0, sizeof *s);
	if (!quant_can_dequantize(t->type)) {
		s->skipped = 1;
		return 0;
	}
	for (b = 0; b < nblk; b += k) {
		k = nblk - b < per ? nblk - b : per;
		src = map != NULL ? map + b * q->size : buf;
		if (map == NULL && gguf_read_data(g, t->offset + b * q->size, buf, k * q->size) != 0)
			return -1;
		if (quant_dequantize_row(t->type, src, x, (int64_t)(k * q->blck)) != 0) {
			s->skipped = 1;	/* cannot happen for a type quant_can_dequantize */
			return 0;
		}
		accumulate(s, x, k * q->blck);
	}
	return 0;
}

/* The padding after tensor i must be zero: 0, 1 when it is not, -1 on a read error. */
static int
padding_dirty(struct gguf *g, int64_t i, uint8_t *buf)
{
	const struct gguf_tensor *t = gguf_tensor(g, i);
	uint64_t end = t->offset + t->nbytes, p = (end + gguf_alignment(g) - 1) & ~(uint64_t)(gguf_alignment(g) - 1);
	uint64_t k;

	if (p == end)
		return 0;
	if (gguf_read_data(g, end, buf, p - end) != 0)
		return -1;
	for (k = 0; k < p - end; k++)
		if (buf[k] != 0)
			return 1;
	return 0;
}

static void
put_stats_text(FILE *fp, const struct gguf_tensor *t, const struct stats *s, int all)
{
	double n = s->n ? (double)s->n : 1;

	if (s->skipped) {
		fprintf(fp, "  %s: not scanned: no dequantizer for %s\n", t->name, quant_name(t->type));
		return;
	}
	if (s->nan || s->inf)
		fprintf(fp, "  %s: %" PRIu64 " NaN, %" PRIu64 " Inf\n", t->name, s->nan, s->inf);
	if (all)
		fprintf(fp, "  %s: min %.6g max %.6g mean %.6g rms %.6g\n", t->name, s->n ? s->min : 0,
		    s->n ? s->max : 0, s->sum / n, sqrt(s->sumsq / n));
}

static void
put_stats_json(FILE *fp, const struct gguf_tensor *t, const struct stats *s, int pad_bad, int all)
{
	double n = s->n ? (double)s->n : 1;

	fputs("{\"name\": ", fp);
	json_put_str(fp, t->name, strlen(t->name), 1);
	fprintf(fp, ", \"scanned\": %s, \"nan\": %" PRIu64 ", \"inf\": %" PRIu64 ", \"padding_ok\": %s",
	    s->skipped ? "false" : "true", s->nan, s->inf, pad_bad ? "false" : "true");
	if (all && !s->skipped && s->n > 0) {
		fputs(", \"min\": ", fp);
		put_float(fp, s->min, 0, 1);
		fputs(", \"max\": ", fp);
		put_float(fp, s->max, 0, 1);
		fputs(", \"mean\": ", fp);
		put_float(fp, s->sum / n, 0, 1);
		fputs(", \"rms\": ", fp);
		put_float(fp, sqrt(s->sumsq / n), 0, 1);
	}
	fputc('}', fp);
}

/* Scan every tensor and the padding; the number of problems, or -1 on a read error. */
static int
check(FILE *fp, struct gguf *g, const char *name, const struct inspect_opts *o)
{
	uint8_t *buf = malloc((size_t)CHUNK_ELEMS * 8);
	float *x = malloc((size_t)CHUNK_ELEMS * sizeof *x);
	uint64_t end = gguf_data_offset(g) + gguf_data_size(g), trail = 0;
	int64_t i;
	int bad = 0, d = 0;
	struct stats s;

	if (buf == NULL || x == NULL)
		die(1, "out of memory");
	fputs(o->json ? ",\n\"check\": {\"tensors\": [" : "\ncheck\n", fp);
	for (i = 0; i < gguf_n_tensors(g); i++) {
		const struct gguf_tensor *t = gguf_tensor(g, i);
		if (scan(g, i, buf, x, &s) != 0 || (d = padding_dirty(g, i, buf)) < 0)
			break;
		bad += (s.nan > 0 || s.inf > 0) + d;
		if (o->json) {
			fputs(i ? ",\n  " : "\n  ", fp);
			put_stats_json(fp, t, &s, d, o->stats);
			continue;
		}
		put_stats_text(fp, t, &s, o->stats);
		if (d)
			fprintf(fp, "  %s: nonzero bytes in the padding after it\n", t->name);
	}
	free(buf);
	free(x);
	if (i < gguf_n_tensors(g) || d < 0) {
		warnmsg("%s: %s", name, gguf_errmsg(g));
		return -1;
	}
	if (gguf_file_size(g) > end && gguf_n_tensors(g) > 0) {
		trail = gguf_file_size(g) - end;
		bad++;
		if (!o->json)
			fprintf(fp, "  %" PRIu64 " bytes after the data section\n", trail);
	}
	if (o->json)
		fprintf(fp, "],\n  \"trailing_bytes\": %" PRIu64 ", \"problems\": %d}", trail, bad);
	else if (bad)
		fprintf(fp, "check failed: %d problems\n", bad);
	else
		fputs("check ok\n", fp);
	return bad;
}

/* --- --json --- */

static void
json_metadata(FILE *fp, struct gguf *g)
{
	int64_t i;

	fputs(",\n\"metadata\": {", fp);
	for (i = 0; i < gguf_n_kv(g); i++) {
		const char *k = gguf_kv_key(g, i);
		fputs(i ? ",\n  " : "\n  ", fp);
		json_put_str(fp, k, strlen(k), 1);
		fprintf(fp, ": {\"type\": \"%s\"", gguf_type_name(gguf_kv_type(g, i)));
		if (gguf_kv_type(g, i) == GGUF_TYPE_ARRAY)
			fprintf(fp, ", \"element_type\": \"%s\", \"count\": %" PRIu64,
			    gguf_type_name(gguf_arr_type(g, i)), gguf_arr_n(g, i));
		fputs(", \"value\": ", fp);
		put_value(fp, g, i, 1, 1);
		fputc('}', fp);
	}
	fputs("}", fp);
}

static void
json_tensors(FILE *fp, const struct gguf *g)
{
	int64_t i;

	fputs(",\n\"tensors\": [", fp);
	for (i = 0; i < gguf_n_tensors(g); i++) {
		const struct gguf_tensor *t = gguf_tensor(g, i);
		fputs(i ? ",\n  " : "\n  ", fp);
		fputs("{\"name\": ", fp);
		json_put_str(fp, t->name, strlen(t->name), 1);
		fprintf(fp, ", \"type\": \"%s\", \"type_id\": %d, \"n_dims\": %d, \"shape\": [",
		    quant_name(t->type), t->type, t->n_dims);
		put_shape(fp, t, ", ");
		fprintf(fp, "], \"elements\": %" PRIu64 ", \"offset\": %" PRIu64 ", \"file_offset\": %" PRIu64
		    ", \"bytes\": %" PRIu64 "}", n_elements(t), t->offset, gguf_data_offset(g) + t->offset, t->nbytes);
	}
	fputs("]", fp);
}

static void
json_totals(FILE *fp, const struct gguf *g)
{
	struct totals s;
	int t, first = 1;

	count_totals(g, &s);
	fprintf(fp, ",\n\"totals\": {\"parameters\": %" PRIu64 ", \"bytes\": %" PRIu64 ", \"by_type\": {",
	    s.all_params, s.all_bytes);
	for (t = 0; t < QUANT_TYPE_COUNT; t++) {
		if (s.n[t] == 0)
			continue;
		fprintf(fp, "%s\"%s\": {\"tensors\": %" PRIu64 ", \"parameters\": %" PRIu64 ", \"bytes\": %"
		    PRIu64 "}", first ? "" : ", ", quant_name(t), s.n[t], s.params[t], s.bytes[t]);
		first = 0;
	}
	fputs("}}", fp);
}

static void
json_header(FILE *fp, const struct gguf *g, const char *name)
{
	fputs("{\"file\": ", fp);
	json_put_str(fp, name, strlen(name), 1);
	fprintf(fp, ", \"version\": %" PRIu32 ", \"alignment\": %zu, \"kv_count\": %" PRId64
	    ", \"tensor_count\": %" PRId64 ", \"data_offset\": %" PRIu64 ", \"data_size\": %" PRIu64,
	    gguf_version(g), gguf_alignment(g), gguf_n_kv(g), gguf_n_tensors(g), gguf_data_offset(g),
	    gguf_data_size(g));
	if (gguf_file_size(g) > 0)
		fprintf(fp, ", \"file_size\": %" PRIu64, gguf_file_size(g));
	else
		fputs(", \"file_size\": null", fp);
}

/* --- main --- */

static int
inspect(const char *path, FILE *fp, const struct inspect_opts *o)
{
	char err[UTIL_ERRLEN];
	struct gguf *g = gguf_open(path, err);
	const char *name = strcmp(path, "-") == 0 ? "<stdin>" : path;
	int64_t i;
	int rc = 0;

	if (g == NULL) {
		warnmsg("%s", err);
		return 1;
	}
	if (o->kv != NULL) {
		if ((i = gguf_find_key(g, o->kv)) < 0) {
			warnmsg("%s: no key '%s'", name, o->kv);
			rc = 1;
		} else
			put_kv_raw(fp, g, i);
	} else if (o->tsv) {
		put_tsv(fp, g);
	} else if (o->json) {
		json_header(fp, g, name);
		json_metadata(fp, g);
		json_tensors(fp, g);
		json_totals(fp, g);
		rc = o->check && check(fp, g, name, o) != 0;
		fputs("}\n", fp);
	} else {
		text_header(fp, g);
		text_metadata(fp, g, o->full);
		text_tensors(fp, g);
		text_totals(fp, g);
		rc = o->check && check(fp, g, name, o) != 0;
	}
	gguf_close(g);
	return rc;
}

int
main(int argc, char *argv[])
{
	static const struct option lopts[] = {
		{ "check", no_argument, NULL, 'c' }, { "full", no_argument, NULL, 'f' },
		{ "json", no_argument, NULL, 'j' }, { "kv", required_argument, NULL, 'k' },
		{ "stats", no_argument, NULL, 's' }, { "tsv", no_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
	};
	struct inspect_opts o = { 0 };
	int ch;

	prog = base_name(argv[0]);
	while ((ch = getopt_long(argc, argv, "cfjk:sth", lopts, NULL)) != -1) {
		switch (ch) {
		case 'c': o.check = 1; break;
		case 'f': o.full = 1; break;
		case 'j': o.json = 1; break;
		case 'k': o.kv = optarg; break;
		case 's': o.stats = o.check = 1; break;
		case 't': o.tsv = 1; break;
		case 'h': return usage(stdout, 0);
		default:  return usage(stderr, 2);	/* getopt already said why */
		}
	}
	argc -= optind;
	argv += optind;
	if (argc > 1)
		return usage(stderr, 2);
	if (o.json + o.tsv + (o.kv != NULL) > 1 || ((o.tsv || o.kv) && o.check)) {
		warnmsg("--json, --tsv and --kv exclude each other, and --check goes with text or --json");
		return usage(stderr, 2);
	}
	return finish(inspect(argc ? argv[0] : "-", stdout, &o));
}
