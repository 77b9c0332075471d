#include "image.h"

#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <jerror.h>
#include <png.h>

#include "util.h"

/*
 * Decoding: libpng and libjpeg report errors through a longjmp out of
 * their error handlers; each decoder keeps everything it allocated in a
 * struct it frees after the jump, and the libraries print nothing (their
 * messages become err).
 */

void
image_free(struct image *img)
{
	if (img == NULL)
		return;
	free(img->rgb);
	img->rgb = NULL;
	img->w = img->h = 0;
}

static int
too_big(const struct image_limits *lim, uint64_t w, uint64_t h, char *err)
{
	if (w == 0 || h == 0)
		return util_err(err, "image of %llux%llu: empty", (unsigned long long)w,
		    (unsigned long long)h);
	if (w > (uint64_t)lim->max_side || h > (uint64_t)lim->max_side ||
	    w * h > (uint64_t)lim->max_pixels)
		return util_err(err, "image of %llux%llu: larger than %dx%d or %lld pixels",
		    (unsigned long long)w, (unsigned long long)h, lim->max_side, lim->max_side,
		    (long long)lim->max_pixels);
	return 0;
}

/* --- EXIF orientation, as Pillow 13 reads it (Image.getexif, TiffImagePlugin) --- */

static uint32_t
rd(const uint8_t *b, int nb, int big)
{
	uint32_t v = 0;

	for (int i = 0; i < nb; i++)
		v |= (uint32_t)b[big ? nb - 1 - i : i] << 8 * i;
	return v;
}

/* Bytes a value of TIFF type t takes (Pillow's _load_dispatch); 0: a type it skips. */
static int
unit_size(int t)
{
	static const uint8_t sz[17] = { 0, 1, 1, 2, 4, 8, 1, 1, 2, 4, 8, 4, 8, 4, 0, 0, 8 };

	return t >= 0 && t < 17 ? sz[t] : 0;
}

/*
 * The first value v[] of type t as Pillow gives the tag: 1..8 when it is
 * that number exactly (an integer, a float or a fraction), else 0 (bytes,
 * text, another number: no orientation of its table).
 */
static int
orientation_value(const uint8_t *v, int t, int big)
{
	uint32_t a = rd(v, unit_size(t) < 4 ? unit_size(t) : 4, big), hi = 0, lo = 0;
	int64_t num, den;
	double x;

	if (unit_size(t) == 8)	/* (its bytes are there: the caller checked) */
		hi = rd(v + (big ? 0 : 4), 4, big), lo = rd(v + (big ? 4 : 0), 4, big);

	switch (t) {
	case 3: case 4: case 13: x = a; break;			/* SHORT, LONG, IFD */
	case 6: x = (int8_t)a; break;				/* SIGNED BYTE */
	case 8: x = (int16_t)a; break;				/* SIGNED SHORT */
	case 9: x = (int32_t)a; break;				/* SIGNED LONG */
	case 16: x = hi == 0 ? lo : 0; break;			/* LONG8 */
	case 11: { float f; memcpy(&f, &a, 4); x = f; break; }	/* FLOAT */
	case 12: {						/* DOUBLE */
		uint64_t d = (uint64_t)hi << 32 | lo;
		memcpy(&x, &d, 8);
		break;
	}
	case 5: case 10:		/* (SIGNED) RATIONAL: a Fraction, equal to an integer */
		num = t == 5 ? (int64_t)a : (int32_t)a;
		den = t == 5 ? (int64_t)rd(v + 4, 4, big) : (int32_t)rd(v + 4, 4, big);
		if (den == 0 || num % den != 0)
			return 0;
		x = (double)(num / den);
		break;
	default:
		return 0;	/* BYTE, ASCII, UNDEFINED: bytes or text */
	}
	return x >= 1 && x <= 8 && x == (int)x ? (int)x : 0;
}

int
image_exif_orientation(const void *buf, size_t n)
{
	static const char *pre[4] = { "MM\0\x2a", "II\x2a\0", "MM\x2a\0", "II\0\x2a" };
	const uint8_t *p = buf, *o = NULL;
	uint8_t seen[8192] = { 0 };	/* tags stored: the first of a tag wins */
	uint64_t total = 0;
	uint32_t ifd, count;
	int big, ot = 0;

	for (int k = 0; k < 2 && n >= 6 && memcmp(p, "Exif\0\0", 6) == 0; k++)
		p += 6, n -= 6;
	if (n == 0)
		return -1;
	if (n < 8 || (memcmp(p, pre[0], 4) && memcmp(p, pre[1], 4) && memcmp(p, pre[2], 4) &&
	    memcmp(p, pre[3], 4)))
		return -2;	/* no TIFF header (BigTIFF's too): Pillow raises */
	big = p[0] == 'M';
	if ((ifd = rd(p + 4, 4, big)) > n - 2)
		return -1;
	count = rd(p + ifd, 2, big);
	for (uint32_t i = 0; i < count && (size_t)ifd + 2 + 12 * ((size_t)i + 1) <= n; i++) {
		const uint8_t *e = p + ifd + 2 + 12 * (size_t)i, *v = e + 8;
		int tag = rd(e, 2, big), t = rd(e + 2, 2, big);
		uint64_t size = (uint64_t)rd(e + 4, 4, big) * unit_size(t), at = rd(e + 8, 4, big);

		if (seen[tag >> 3] & 1 << (tag & 7) || unit_size(t) == 0)
			continue;
		if (size > 4) {
			if ((total += size) > n)
				continue;	/* "tag data larger than file" */
			if (at + size > n)
				break;		/* a truncated read ends the directory */
			v = p + at;
		}
		if (size == 0)
			continue;
		seen[tag >> 3] |= 1 << (tag & 7);
		if (tag == 274)
			o = v, ot = t;
	}
	return o != NULL ? orientation_value(o, ot, big) : -1;
}

int
image_xmp_orientation(const void *buf, size_t n)
{
	static const char key[] = "tiff:Orientation";
	const size_t k = sizeof key - 1;
	const char *s = buf;

	for (size_t i = 0; i + k + 1 < n; i++) {
		if (memcmp(s + i, key, k) != 0)
			continue;
		if (s[i + k] == '>' && s[i + k + 1] >= '0' && s[i + k + 1] <= '9')
			return s[i + k + 1] - '0';
		if (i + k + 2 < n && s[i + k] == '=' && s[i + k + 1] == '"' &&
		    s[i + k + 2] >= '0' && s[i + k + 2] <= '9')
			return s[i + k + 2] - '0';
	}
	return -1;
}

/* Source pixel (x, y) of output pixel (i, j) of a w x h image turned by orientation o. */
static void
source(int o, int w, int h, int i, int j, int *x, int *y)
{
	switch (o) {
	case 2: *x = w - 1 - i, *y = j; break;		/* FLIP_LEFT_RIGHT */
	case 3: *x = w - 1 - i, *y = h - 1 - j; break;	/* ROTATE_180 */
	case 4: *x = i, *y = h - 1 - j; break;		/* FLIP_TOP_BOTTOM */
	case 5: *x = j, *y = i; break;			/* TRANSPOSE */
	case 6: *x = j, *y = h - 1 - i; break;		/* ROTATE_270 */
	case 7: *x = w - 1 - j, *y = h - 1 - i; break;	/* TRANSVERSE */
	default: *x = w - 1 - j, *y = i; break;		/* 8: ROTATE_90 */
	}
}

/* img turned upright by EXIF orientation o (2..8), as ImageOps.exif_transpose: 0, or -1. */
static int
orient(struct image *img, int o, char *err)
{
	int w = o >= 5 ? img->h : img->w, h = o >= 5 ? img->w : img->h;
	uint8_t *px = malloc((size_t)w * h * 3);

	if (px == NULL)
		return util_err(err, "image of %dx%d: out of memory", img->w, img->h);
	for (int j = 0; j < h; j++)
		for (int i = 0; i < w; i++) {
			int x, y;

			source(o, img->w, img->h, i, j, &x, &y);
			memcpy(px + ((size_t)j * w + i) * 3, img->rgb + ((size_t)y * img->w + x) * 3,
			    3);
		}
	free(img->rgb);
	img->rgb = px, img->w = w, img->h = h;
	return 0;
}

/* --- PNG --- */

static uint32_t
be32(const uint8_t *b)
{
	return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

struct png_src {
	const uint8_t *buf;
	size_t	n, off;
	char	*err;
	const struct image_limits *lim;
	uint8_t	*pix;
	png_bytep *rows;
};

static void
png_fail(png_structp p, png_const_charp msg)
{
	struct png_src *s = png_get_error_ptr(p);

	util_err(s->err, "PNG: %s", msg);
	png_longjmp(p, 1);
}

static void
png_quiet(png_structp p, png_const_charp msg)
{
	(void)p, (void)msg;
}

static void
png_read_mem(png_structp p, png_bytep out, png_size_t n)
{
	struct png_src *s = png_get_io_ptr(p);

	if (n > s->n - s->off)
		png_error(p, "truncated file");
	memcpy(out, s->buf + s->off, n);
	s->off += n;
}

/* The transforms to 8-bit RGB: PIL's convert("RGB") of each mode. */
static void
png_to_rgb(png_structp p, png_infop info)
{
	int ct = png_get_color_type(p, info);

	png_set_expand(p);		/* palette -> RGB, gray < 8 bits -> 8, tRNS -> alpha */
	png_set_strip_16(p);		/* the high byte */
	png_set_strip_alpha(p);
	if (ct == PNG_COLOR_TYPE_GRAY || ct == PNG_COLOR_TYPE_GRAY_ALPHA)
		png_set_gray_to_rgb(p);
	png_set_interlace_handling(p);
	png_read_update_info(p, info);
}

static int
png_rows(png_structp p, png_infop info, struct png_src *s, struct image *img)
{
	png_uint_32 w = png_get_image_width(p, info), h = png_get_image_height(p, info);

	if (too_big(s->lim, w, h, s->err) != 0)
		return -1;
	png_to_rgb(p, info);
	if (png_get_rowbytes(p, info) != (size_t)w * 3)
		return util_err(s->err, "PNG: unexpected row layout");
	if ((s->pix = malloc((size_t)w * h * 3)) == NULL ||
	    (s->rows = malloc(h * sizeof *s->rows)) == NULL)
		return util_err(s->err, "image of %ux%u: out of memory", (unsigned)w, (unsigned)h);
	for (png_uint_32 y = 0; y < h; y++)
		s->rows[y] = s->pix + (size_t)y * w * 3;
	png_read_image(p, s->rows);
	png_read_end(p, NULL);
	img->w = w, img->h = h, img->rgb = s->pix;
	s->pix = NULL;
	return 0;
}

static int
png_decode(const uint8_t *buf, size_t n, const struct image_limits *lim, struct image *img,
    char *err)
{
	struct png_src s = { buf, n, 0, err, lim, NULL, NULL };
	png_structp p = png_create_read_struct(PNG_LIBPNG_VER_STRING, &s, png_fail, png_quiet);
	png_infop info = p != NULL ? png_create_info_struct(p) : NULL;
	volatile int rc = -1;

	if (info == NULL) {
		png_destroy_read_struct(&p, NULL, NULL);
		return util_err(err, "PNG: out of memory");
	}
	/* the size from IHDR, the first chunk, before libpng reads on */
	if (n >= 24 && memcmp(buf + 12, "IHDR", 4) == 0 && too_big(lim, be32(buf + 16),
	    be32(buf + 20), err) != 0) {
		png_destroy_read_struct(&p, &info, NULL);
		return -1;
	}
	if (setjmp(png_jmpbuf(p)) == 0) {
		png_set_read_fn(p, &s, png_read_mem);
		png_set_chunk_malloc_max(p, 8 << 20);
		png_read_info(p, info);
		rc = png_rows(p, info, &s, img);
	}
	free(s.pix);
	free(s.rows);
	png_destroy_read_struct(&p, &info, NULL);
	return rc;
}

/* --- JPEG --- */

struct jpeg_fail {
	struct jpeg_error_mgr pub;
	struct jpeg_progress_mgr prog;
	jmp_buf	jb;
	char	*err;
	int	truncated;
	int	o;		/* the EXIF orientation (jpeg_orientation) */
};

static void
jpeg_exit(j_common_ptr c)
{
	struct jpeg_fail *f = (struct jpeg_fail *)c->err;
	char msg[JMSG_LENGTH_MAX];

	(*c->err->format_message)(c, msg);
	util_err(f->err, "JPEG: %s", msg);
	longjmp(f->jb, 1);
}

/* Warnings are quiet; a premature end of data is an error at the end (PIL's "truncated"). */
static void
jpeg_emit(j_common_ptr c, int level)
{
	struct jpeg_fail *f = (struct jpeg_fail *)c->err;

	if (level < 0 && c->err->msg_code == JWRN_JPEG_EOF)
		f->truncated = 1;
}

/* A progressive file of very many scans decodes slowly: past 256, an error. */
static void
jpeg_progress(j_common_ptr c)
{
	if (c->is_decompressor && ((j_decompress_ptr)c)->input_scan_number > 256) {
		struct jpeg_fail *f = (struct jpeg_fail *)c->err;

		util_err(f->err, "JPEG: more than 256 scans");
		longjmp(f->jb, 1);
	}
}

/*
 * The orientation (1..8; else none) of the APP1 markers libjpeg saved, as
 * Pillow reads a JPEG's: its Exif segments joined (the first whole, each
 * later one past its "Exif\0\0") and the Orientation of their IFD0, or
 * where they have none, the last XMP packet's tiff:Orientation (but not
 * beside an Exif segment that is no TIFF: Pillow, reading the JPEG's DPI
 * from it as it opens a JPEG without JFIF's, fails and keeps no tag; with
 * JFIF's DPI, exif_transpose raises instead).  0, or -1 (out of memory)
 * with err.
 */
static int
jpeg_orientation(struct jpeg_decompress_struct *d, int *o, char *err)
{
	static const char xmp[] = "http://ns.adobe.com/xap/1.0/";
	jpeg_saved_marker_ptr m, x = NULL;
	uint8_t *ex;
	size_t n = 0;

	*o = -1;
	for (m = d->marker_list; m != NULL; m = m->next)
		if (m->marker == JPEG_APP0 + 1 && m->data_length >= 6 &&
		    memcmp(m->data, "Exif\0\0", 6) == 0)
			n += m->data_length - (n > 0 ? 6 : 0);
		else if (m->marker == JPEG_APP0 + 1 && m->data_length >= sizeof xmp &&
		    memcmp(m->data, xmp, sizeof xmp) == 0)	/* the name and its NUL */
			x = m;
	if (n > 0) {
		if ((ex = malloc(n)) == NULL)
			return util_err(err, "JPEG: EXIF of %zu bytes: out of memory", n);
		n = 0;
		for (m = d->marker_list; m != NULL; m = m->next)
			if (m->marker == JPEG_APP0 + 1 && m->data_length >= 6 &&
			    memcmp(m->data, "Exif\0\0", 6) == 0) {
				size_t skip = n > 0 ? 6 : 0;

				memcpy(ex + n, m->data + skip, m->data_length - skip);
				n += m->data_length - skip;
			}
		*o = image_exif_orientation(ex, n);
		free(ex);
	}
	if (*o == -1 && x != NULL)
		*o = image_xmp_orientation(x->data + sizeof xmp, x->data_length - sizeof xmp);
	return 0;
}

static int
jpeg_pixels(struct jpeg_decompress_struct *d, struct jpeg_fail *f,
    const struct image_limits *lim, uint8_t *volatile *pix, char *err)
{
	jpeg_read_header(d, TRUE);
	if (too_big(lim, d->image_width, d->image_height, err) != 0 ||
	    jpeg_orientation(d, &f->o, err) != 0)
		return -1;
	if (d->jpeg_color_space == JCS_CMYK || d->jpeg_color_space == JCS_YCCK)
		return util_err(err, "JPEG: a CMYK image (only RGB and gray are read)");
	d->out_color_space = JCS_RGB;
	jpeg_start_decompress(d);
	if (d->output_components != 3)
		return util_err(err, "JPEG: %d components out", d->output_components);
	if ((*pix = malloc((size_t)d->output_width * d->output_height * 3)) == NULL)
		return util_err(err, "image of %ux%u: out of memory", d->output_width,
		    d->output_height);
	while (d->output_scanline < d->output_height) {
		JSAMPROW row = *pix + (size_t)d->output_scanline * d->output_width * 3;
		jpeg_read_scanlines(d, &row, 1);
	}
	jpeg_finish_decompress(d);
	if (f->truncated)
		return util_err(err, "JPEG: truncated file");
	return 0;
}

static int
jpeg_decode(const uint8_t *buf, size_t n, const struct image_limits *lim, struct image *img,
    char *err)
{
	struct jpeg_decompress_struct d;
	struct jpeg_fail f = { .err = err, .o = -1 };
	uint8_t *volatile pix = NULL;
	volatile int rc = -1;

	d.err = jpeg_std_error(&f.pub);
	f.pub.error_exit = jpeg_exit;
	f.pub.emit_message = jpeg_emit;
	f.prog.progress_monitor = jpeg_progress;
	if (setjmp(f.jb) == 0) {
		jpeg_create_decompress(&d);
		d.progress = &f.prog;
		jpeg_save_markers(&d, JPEG_APP0 + 1, 0xffff);	/* EXIF and XMP */
		jpeg_mem_src(&d, buf, n);
		if ((rc = jpeg_pixels(&d, &f, lim, &pix, err)) == 0) {
			img->w = d.output_width, img->h = d.output_height, img->rgb = pix;
			pix = NULL;
		}
	}
	jpeg_destroy_decompress(&d);
	free(pix);
	if (rc == 0 && f.o >= 2 && orient(img, f.o, err) != 0) {
		image_free(img);
		return -1;
	}
	return rc;
}

int
image_decode(const void *buf, size_t n, const struct image_limits *lim, struct image *img,
    char *err)
{
	static const uint8_t png_sig[8] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n' };
	static const struct image_limits dflt = { IMAGE_MAX_SIDE, IMAGE_MAX_PIXELS };
	const uint8_t *b = buf;

	img->w = img->h = 0, img->rgb = NULL;
	if (lim == NULL)
		lim = &dflt;
	if (n >= 8 && memcmp(b, png_sig, 8) == 0)
		return png_decode(b, n, lim, img, err);
	if (n >= 3 && b[0] == 0xff && b[1] == 0xd8 && b[2] == 0xff)
		return jpeg_decode(b, n, lim, img, err);
	return util_err(err, "not a PNG or JPEG image");
}

/* --- Gemma-4's size policy --- */

int
image_fit(int w, int h, int patch, int pool, int max_tokens, int *tw, int *th, char *err)
{
	int side = patch * pool;
	int64_t max_patches = (int64_t)max_tokens * pool * pool;
	double target = (double)max_patches * patch * patch;
	double f = sqrt(target / ((double)h * w));
	int64_t ch = (int64_t)floor(f * h / side) * side, cw = (int64_t)floor(f * w / side) * side;
	int64_t max_side = (max_patches / ((int64_t)pool * pool)) * side;

	if (w < 1 || h < 1 || patch < 1 || pool < 1 || max_tokens < 1)
		return util_err(err, "image of %dx%d: no size for patch %d, pool %d, %d tokens", w,
		    h, patch, pool, max_tokens);
	if (ch == 0 && cw == 0)
		return util_err(err, "image of %dx%d: resizes to 0x0", w, h);
	if (ch == 0) {
		ch = side;
		cw = (int64_t)floor((double)w / h) * side;
		cw = cw < max_side ? cw : max_side;
	} else if (cw == 0) {
		cw = side;
		ch = (int64_t)floor((double)h / w) * side;
		ch = ch < max_side ? ch : max_side;
	}
	if ((double)ch * cw > target)
		return util_err(err, "image of %dx%d: %lldx%lld is past %lld patches", w, h,
		    (long long)cw, (long long)ch, (long long)max_patches);
	*tw = (int)cw, *th = (int)ch;
	return 0;
}

/* --- the resize: PyTorch's uint8 antialiased bicubic --- */

/* Keys' cubic with a = -0.5, as PyTorch's HelperInterpCubic::aa_filter (and PIL). */
static double
cubic(double x)
{
	const double a = -0.5;

	if (x < 0.0)
		x = -x;
	if (x < 1.0)
		return ((a + 2) * x - (a + 3)) * x * x + 1;
	if (x < 2.0)
		return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
	return 0.0;
}

/* One axis' filter from in to out samples: output i reads n[i] inputs from lo[i]. */
struct taps {
	int	k;		/* weights a row */
	int	prec;		/* fraction bits of w */
	int	*lo, *n;	/* [out] */
	int16_t	*w;		/* [out][k] */
};

static void
taps_free(struct taps *t)
{
	free(t->lo), free(t->n), free(t->w);
}

/* The weights in double (normalised per output), as _compute_weights_aa. */
static void
taps_f64(int in, int out, int k, double *wd, int *lo, int *n)
{
	double scale = (double)in / out, support = scale >= 1.0 ? 2.0 * scale : 2.0;
	double inv = scale >= 1.0 ? 1.0 / scale : 1.0;

	for (int i = 0; i < out; i++) {
		double center = scale * (i + 0.5), total = 0, *w = wd + (size_t)i * k;
		int64_t x0 = (int64_t)(center - support + 0.5), x1 = (int64_t)(center + support + 0.5);

		x0 = x0 > 0 ? x0 : 0;
		x1 = x1 < in ? x1 : in;
		lo[i] = (int)x0, n[i] = (int)(x1 - x0);
		for (int j = 0; j < n[i]; j++)
			total += w[j] = cubic((j + x0 - center + 0.5) * inv);
		for (int j = 0; j < n[i]; j++)
			if (total != 0.0)
				w[j] /= total;
	}
}

static int
taps_make(int in, int out, struct taps *t)
{
	double scale = (double)in / out, support = scale >= 1.0 ? 2.0 * scale : 2.0, wmax;
	int k = (int)ceil(support) * 2 + 1;
	double *wd = calloc((size_t)out * k, sizeof *wd);

	t->k = k;
	t->lo = malloc(out * sizeof *t->lo), t->n = malloc(out * sizeof *t->n);
	t->w = calloc((size_t)out * k, sizeof *t->w);
	if (wd == NULL || t->lo == NULL || t->n == NULL || t->w == NULL) {
		free(wd);
		taps_free(t);
		return -1;
	}
	taps_f64(in, out, k, wd, t->lo, t->n);
	wmax = wd[0];
	for (size_t i = 0; i < (size_t)out * k; i++)
		wmax = wd[i] > wmax ? wd[i] : wmax;
	for (t->prec = 0; t->prec < 22; t->prec++)
		if ((int)(0.5 + wmax * (1 << (t->prec + 1))) >= (1 << 15))
			break;
	for (size_t i = 0; i < (size_t)out * k; i++)
		t->w[i] = (int16_t)(wd[i] < 0 ? (int)(-0.5 + wd[i] * (1 << t->prec)) :
		    (int)(0.5 + wd[i] * (1 << t->prec)));
	free(wd);
	return 0;
}

static uint8_t
clip8(int32_t v, int prec)
{
	v >>= prec;
	return v < 0 ? 0 : v > 255 ? 255 : (uint8_t)v;
}

/* out[y][x] from in[y][lo..]: the horizontal pass (out is w wide, in iw wide, h rows). */
static void
pass_h(const uint8_t *in, int iw, int h, const struct taps *t, int w, uint8_t *out)
{
	for (int y = 0; y < h; y++)
		for (int x = 0; x < w; x++) {
			const int16_t *k = t->w + (size_t)x * t->k;
			const uint8_t *p = in + ((size_t)y * iw + t->lo[x]) * 3;

			for (int c = 0; c < 3; c++) {
				int32_t s = 1 << (t->prec - 1);
				for (int j = 0; j < t->n[x]; j++)
					s += k[j] * p[j * 3 + c];
				out[((size_t)y * w + x) * 3 + c] = clip8(s, t->prec);
			}
		}
}

/* The vertical pass: out[y] from rows lo[y].. of in (w wide). */
static void
pass_v(const uint8_t *in, int w, const struct taps *t, int h, uint8_t *out)
{
	for (int y = 0; y < h; y++) {
		const int16_t *k = t->w + (size_t)y * t->k;

		for (int i = 0; i < w * 3; i++) {
			int32_t s = 1 << (t->prec - 1);
			for (int j = 0; j < t->n[y]; j++)
				s += k[j] * in[(size_t)(t->lo[y] + j) * w * 3 + i];
			out[(size_t)y * w * 3 + i] = clip8(s, t->prec);
		}
	}
}

int
image_resize(const struct image *in, int w, int h, struct image *out, char *err)
{
	struct taps th = { 0 }, tv = { 0 };
	uint8_t *mid = NULL, *px = malloc((size_t)w * h * 3);
	int rc = -1;

	out->w = out->h = 0, out->rgb = NULL;
	if (px == NULL || (w != in->w && taps_make(in->w, w, &th) != 0) ||
	    (h != in->h && taps_make(in->h, h, &tv) != 0) ||
	    (w != in->w && h != in->h && (mid = malloc((size_t)w * in->h * 3)) == NULL)) {
		util_err(err, "resize %dx%d to %dx%d: out of memory", in->w, in->h, w, h);
		goto out;
	}
	if (w != in->w && h != in->h) {
		pass_h(in->rgb, in->w, in->h, &th, w, mid);
		pass_v(mid, w, &tv, h, px);
	} else if (w != in->w)
		pass_h(in->rgb, in->w, in->h, &th, w, px);
	else if (h != in->h)
		pass_v(in->rgb, w, &tv, h, px);
	else
		memcpy(px, in->rgb, (size_t)w * h * 3);
	out->w = w, out->h = h, out->rgb = px;
	px = NULL;
	rc = 0;
out:
	free(px), free(mid);
	taps_free(&th), taps_free(&tv);
	return rc;
}

void
image_patches(const struct image *img, int patch, float *out)
{
	const float s = (float)(1.0 / 255.0);
	int gw = img->w / patch, gh = img->h / patch, pd = patch * patch * 3;

	for (int gy = 0; gy < gh; gy++)
		for (int gx = 0; gx < gw; gx++) {
			float *o = out + ((size_t)gy * gw + gx) * pd;

			for (int py = 0; py < patch; py++) {
				const uint8_t *row = img->rgb + ((size_t)(gy * patch + py) * img->w +
				    (size_t)gx * patch) * 3;
				for (int i = 0; i < patch * 3; i++)
					o[py * patch * 3 + i] = (float)row[i] * s;
			}
		}
}
