#include <stdlib.h>

#include "sha256.h"
#include "test.h"

static void
hex_of(const void *p, size_t n, char out[65])
{
	struct sha256 s;

	sha256_init(&s);
	sha256_update(&s, p, n);
	sha256_hex(&s, out);
}

/* FIPS 180-4 / NIST CSRC example vectors */
TEST(fips_one_block_abc)
{
	char h[65];

	hex_of("abc", 3, h);
	CHECK_EQ_STR(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(fips_two_block_message)
{
	const char *m = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
	char h[65];

	hex_of(m, strlen(m), h);
	CHECK_EQ_STR(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(empty_message)
{
	char h[65];

	hex_of("", 0, h);
	CHECK_EQ_STR(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(million_a_fed_in_odd_pieces)
{
	struct sha256 s;
	char chunk[997], h[65];
	size_t left = 1000000, n;

	memset(chunk, 'a', sizeof chunk);
	sha256_init(&s);
	for (; left > 0; left -= n) {
		n = left < sizeof chunk ? left : sizeof chunk;
		sha256_update(&s, chunk, n);
	}
	sha256_hex(&s, h);
	CHECK_EQ_STR(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(padding_boundaries_55_56_64_bytes)
{
	char m[64], h[65];

	memset(m, 'a', sizeof m);
	hex_of(m, 55, h);
	CHECK_EQ_STR(h, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
	hex_of(m, 56, h);
	CHECK_EQ_STR(h, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
	hex_of(m, 64, h);
	CHECK_EQ_STR(h, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
}

/* The SHA-NI path, where this CPU has it, agrees with the portable one. */
TEST(extensions_match_portable_code)
{
	static unsigned char buf[70000];
	struct sha256 a, b;
	char ha[65], hb[65];
	size_t n, i;
	uint32_t x = 12345;

	for (i = 0; i < sizeof buf; i++)
		buf[i] = (unsigned char)((x = x * 1103515245u + 12345u) >> 24);
	sha256_init(&a);
	if (!a.ni)
		printf("# no SHA extensions here: portable code only\n");
	for (n = 0; n < sizeof buf; n = n * 3 + 1) {
		sha256_init(&a);
		sha256_init(&b);
		b.ni = 0;
		sha256_update(&a, buf, n);
		sha256_update(&b, buf, n);
		sha256_hex(&a, ha);
		sha256_hex(&b, hb);
		if (strcmp(ha, hb) != 0)
			FAILF("length %zu: %s != %s", n, ha, hb);
	}
}

int
main(void)
{
	RUN(fips_one_block_abc);
	RUN(fips_two_block_message);
	RUN(empty_message);
	RUN(million_a_fed_in_odd_pieces);
	RUN(padding_boundaries_55_56_64_bytes);
	RUN(extensions_match_portable_code);
	return test_summary();
}
