/*
 * digest — SHA-256 through libcrypto, and FNV-1a-128 (see
 * src/util/digest.h).
 */
#include <errno.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/evp.h>

#include "util/digest.h"

int digest_sha256(const void *data, size_t len, uint8_t out[DIGEST_LEN])
{
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned int n = 0;

        /* EVP_Digest makes and frees a context: it fails only when that
         * (or the first fetch of the algorithm) runs out of memory. */
        if (EVP_Digest(data, len, md, &n, EVP_sha256(), NULL) != 1 || n != DIGEST_LEN) {
                ERR_clear_error();
                return -ENOMEM;
        }
        memcpy(out, md, DIGEST_LEN);
        return 0;
}

static const char hex[] = "0123456789abcdef";

void digest_text(const uint8_t d[DIGEST_LEN], char out[DIGEST_TEXT_MAX])
{
        memcpy(out, "sha256:", 7);
        for (size_t i = 0; i < DIGEST_LEN; i++) {
                out[7 + 2 * i] = hex[d[i] >> 4];
                out[8 + 2 * i] = hex[d[i] & 15];
        }
        out[DIGEST_TEXT_MAX - 1] = '\0';
}

static int nibble(char c)
{
        const char *p = c ? strchr(hex, c) : NULL;

        return p ? (int)(p - hex) : -1;
}

int digest_parse(const char *text, uint8_t out[DIGEST_LEN])
{
        uint8_t d[DIGEST_LEN];

        if (!text || strncmp(text, "sha256:", 7) != 0 || strlen(text) != DIGEST_TEXT_MAX - 1)
                return -EINVAL;
        for (size_t i = 0; i < DIGEST_LEN; i++) {
                int hi = nibble(text[7 + 2 * i]), lo = nibble(text[8 + 2 * i]);

                if (hi < 0 || lo < 0)
                        return -EINVAL;
                d[i] = (uint8_t)(hi << 4 | lo);
        }
        memcpy(out, d, DIGEST_LEN);
        return 0;
}

/* FNV-1a 128: offset basis 0x6c62272e07bb014262b821756295c58d, prime
 * 2^88 + 0x13b.  Multiplication done in 64-bit halves. */
void fnv128_init(struct fnv128 *h)
{
        h->hi = 0x6c62272e07bb0142ULL;
        h->lo = 0x62b821756295c58dULL;
}

void fnv128_update(struct fnv128 *h, const void *p, size_t n)
{
        const unsigned char *s = p;
        uint64_t hi = h->hi, lo = h->lo;

        for (size_t i = 0; i < n; i++) {
                unsigned __int128 x, prod;

                lo ^= s[i];
                x = ((unsigned __int128)hi << 64) | lo;
                /* x * (2^88 + 0x13b) mod 2^128 */
                prod = x * 0x13bu + (x << 88);
                hi = (uint64_t)(prod >> 64);
                lo = (uint64_t)prod;
        }
        h->hi = hi;
        h->lo = lo;
}

void fnv128_final(const struct fnv128 *h, uint8_t out[16])
{
        for (int i = 0; i < 8; i++) {
                out[i] = (uint8_t)(h->hi >> (56 - 8 * i));
                out[8 + i] = (uint8_t)(h->lo >> (56 - 8 * i));
        }
}

void fnv128_hex(const uint8_t digest[16], char out[33])
{
        for (int i = 0; i < 16; i++) {
                out[2 * i] = hex[digest[i] >> 4];
                out[2 * i + 1] = hex[digest[i] & 15];
        }
        out[32] = '\0';
}
