#include "unicode.h"

#include "unicode_data.inc"

unsigned
unicode_flags(uint32_t cp)
{
	if (cp >= 0x110000)
		return 0;
	return unicode_stage2[unicode_stage1[cp / UNICODE_BLOCK]][cp % UNICODE_BLOCK];
}

/* Well-formed byte ranges (Unicode table 3-7): the second byte's bounds
 * depend on the lead; later bytes are always 80..BF. */
static int
utf8_lead(unsigned char b, unsigned char *lo, unsigned char *hi)
{
	*lo = 0x80;
	*hi = 0xBF;
	if (b >= 0xC2 && b <= 0xDF)
		return 2;
	if (b >= 0xE0 && b <= 0xEF) {
		if (b == 0xE0)
			*lo = 0xA0;
		else if (b == 0xED)
			*hi = 0x9F;
		return 3;
	}
	if (b >= 0xF0 && b <= 0xF4) {
		if (b == 0xF0)
			*lo = 0x90;
		else if (b == 0xF4)
			*hi = 0x8F;
		return 4;
	}
	return 0;
}

/* Number of leading bytes of s[0..n) that follow a well-formed sequence
 * (the maximal subpart), and its full length in *need (0 if no lead). */
static size_t
utf8_valid_prefix(const unsigned char *s, size_t n, size_t *need)
{
	unsigned char lo, hi;
	size_t k, len = utf8_lead(s[0], &lo, &hi);

	*need = len;
	if (len == 0)
		return 0;
	for (k = 1; k < len && k < n; k++) {
		if (s[k] < lo || s[k] > hi)
			break;
		lo = 0x80;
		hi = 0xBF;
	}
	return k;
}

size_t
unicode_decode(const char *str, size_t n, uint32_t *cp)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t need, k, i;
	uint32_t c;

	if (s[0] < 0x80) {
		*cp = s[0];
		return 1;
	}
	k = utf8_valid_prefix(s, n, &need);
	if (need == 0 || k < need) {
		*cp = UNICODE_REPLACEMENT;
		return k ? k : 1;
	}
	c = s[0] & (0x7F >> need);
	for (i = 1; i < need; i++)
		c = c << 6 | (s[i] & 0x3F);
	*cp = c;
	return need;
}

int
unicode_incomplete(const char *str, size_t n)
{
	size_t need, k = utf8_valid_prefix((const unsigned char *)str, n, &need);

	return need > 0 && k == n && n < need;
}

size_t
unicode_encode(uint32_t cp, char *buf)
{
	unsigned char *b = (unsigned char *)buf;

	if (cp < 0x80) {
		b[0] = cp;
		return 1;
	}
	if (cp < 0x800) {
		b[0] = 0xC0 | cp >> 6;
		b[1] = 0x80 | (cp & 0x3F);
		return 2;
	}
	if (cp < 0x10000) {
		b[0] = 0xE0 | cp >> 12;
		b[1] = 0x80 | (cp >> 6 & 0x3F);
		b[2] = 0x80 | (cp & 0x3F);
		return 3;
	}
	b[0] = 0xF0 | cp >> 18;
	b[1] = 0x80 | (cp >> 12 & 0x3F);
	b[2] = 0x80 | (cp >> 6 & 0x3F);
	b[3] = 0x80 | (cp & 0x3F);
	return 4;
}

/* --- normalization form C ---------------------------------------------- */

#include "unicode_nfc.inc"

_Static_assert(UNICODE_DECOMP_MAX <= UNICODE_NFD_MAX, "decompositions longer than UNICODE_NFD_MAX");

/* Hangul syllables (Unicode 3.12): S = SBASE + (L * VCOUNT + V) * TCOUNT + T. */
enum {
	SBASE = 0xAC00, LBASE = 0x1100, VBASE = 0x1161, TBASE = 0x11A7,
	LCOUNT = 19, VCOUNT = 21, TCOUNT = 28, SCOUNT = LCOUNT * VCOUNT * TCOUNT
};

/* The canonical combining class of cp. */
static unsigned
nfc_ccc(uint32_t cp)
{
	size_t lo = 0, hi = sizeof(unicode_ccc) / sizeof(unicode_ccc[0]);

	if (cp < 0x300)
		return 0;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (cp < unicode_ccc[mid].lo)
			hi = mid;
		else if (cp > unicode_ccc[mid].hi)
			lo = mid + 1;
		else
			return unicode_ccc[mid].ccc;
	}
	return 0;
}

/* Append the full canonical decomposition of cp at out; returns its length. */
static size_t
nfc_decompose(uint32_t cp, uint32_t *out)
{
	size_t lo = 0, hi = sizeof(unicode_decomp) / sizeof(unicode_decomp[0]), k;

	if (cp >= SBASE && cp < SBASE + SCOUNT) {
		uint32_t s = cp - SBASE, t = s % TCOUNT;
		out[0] = LBASE + s / (VCOUNT * TCOUNT);
		out[1] = VBASE + s % (VCOUNT * TCOUNT) / TCOUNT;
		if (t == 0)
			return 2;
		out[2] = TBASE + t;
		return 3;
	}
	while (cp >= 0xC0 && lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (cp < unicode_decomp[mid].cp)
			hi = mid;
		else if (cp > unicode_decomp[mid].cp)
			lo = mid + 1;
		else {
			for (k = 0; k < unicode_decomp[mid].n; k++)
				out[k] = unicode_decomp_pool[unicode_decomp[mid].at + k];
			return k;
		}
	}
	out[0] = cp;
	return 1;
}

/* The primary composite of a and b, or 0. */
static uint32_t
nfc_compose(uint32_t a, uint32_t b)
{
	size_t lo = 0, hi = sizeof(unicode_comp) / sizeof(unicode_comp[0]);

	if (a >= LBASE && a < LBASE + LCOUNT && b >= VBASE && b < VBASE + VCOUNT)
		return SBASE + ((a - LBASE) * VCOUNT + (b - VBASE)) * TCOUNT;
	if (a >= SBASE && a < SBASE + SCOUNT && (a - SBASE) % TCOUNT == 0 &&
	    b > TBASE && b < TBASE + TCOUNT)
		return a + (b - TBASE);
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (a < unicode_comp[mid].a || (a == unicode_comp[mid].a && b < unicode_comp[mid].b))
			hi = mid;
		else if (a == unicode_comp[mid].a && b == unicode_comp[mid].b)
			return unicode_comp[mid].c;
		else
			lo = mid + 1;
	}
	return 0;
}

size_t
unicode_nfc(const uint32_t *in, size_t n, uint32_t *out)
{
	size_t i, j, m = 0, o = 0, starter = SIZE_MAX;
	unsigned last = 0, cc;
	uint32_t c;

	for (i = 0; i < n; i++)
		m += nfc_decompose(in[i], out + m);
	/* canonical ordering: a stable sort of each run of non-starters */
	for (i = 1; i < m; i++) {
		c = out[i];
		if ((cc = nfc_ccc(c)) == 0)
			continue;
		for (j = i; j > 0 && nfc_ccc(out[j - 1]) > cc; j--)
			out[j] = out[j - 1];
		out[j] = c;
	}
	/* composition: c joins the last starter unless a character between
	 * them is a starter or has a class >= its own (blocked) */
	for (i = 0; i < m; i++) {
		c = out[i];
		cc = nfc_ccc(c);
		if (starter != SIZE_MAX && (last < cc || (last == 0 && o == starter + 1))) {
			uint32_t k = nfc_compose(out[starter], c);
			if (k != 0) {
				out[starter] = k;
				continue;
			}
		}
		if (cc == 0)
			starter = o;
		last = cc;
		out[o++] = c;
	}
	return o;
}
