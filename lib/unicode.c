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
