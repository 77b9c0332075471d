/*
 * sha256: FIPS 180-4 SHA-256, incremental.  Used by hub to verify LFS
 * blobs against their ETag before they become visible in the cache.
 */
#ifndef MEMRA_SHA256_H
#define MEMRA_SHA256_H

#include <stddef.h>
#include <stdint.h>

struct sha256 {
	int	ni;		/* use the x86 SHA extensions (set by init when present) */
	uint32_t h[8];
	uint64_t len;		/* bytes hashed so far */
	uint8_t	buf[64];
	size_t	nbuf;
};

void	sha256_init(struct sha256 *);
void	sha256_update(struct sha256 *, const void *data, size_t n);
/* Finish into 32 bytes of digest; the state must be re-initialized to reuse. */
void	sha256_final(struct sha256 *, uint8_t out[32]);
/* Finish into 64 lowercase hex digits and a NUL. */
void	sha256_hex(struct sha256 *, char out[65]);

/* Hash a whole file into hex.  Returns 0, or -1 with errno set. */
int	sha256_file(const char *path, char out[65]);

#endif
