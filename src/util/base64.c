/*
 * base64 — decoding and encoding (see src/util/base64.h).  OpenSSL does the
 * decoding; this module only checks first what Go accepts, which
 * EVP_DecodeBlock does not (it takes '=' anywhere and skips blanks only
 * at the ends).
 */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "util/base64.h"

static bool in_alphabet(unsigned char c)
{
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' ||
               c == '/';
}

int base64_decode(const char *s, size_t n, char **ret, size_t *ret_len)
{
        char *clean = malloc(n + 1), *out = NULL;
        size_t len = 0, pad = 0;
        int got;

        if (!clean)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char)s[i];

                if (c == ' ' || c == '\t' || c == '\r' || c == '\n')
                        continue;
                if (c == '=')
                        pad++;
                else if (!in_alphabet(c) || pad > 0)
                        goto bad; /* not base64, or data after padding */
                clean[len++] = (char)c;
        }
        clean[len] = '\0';
        if (len % 4 != 0 || pad > 2)
                goto bad;
        out = malloc(len / 4 * 3 + 1);
        if (!out) {
                free(clean);
                return -ENOMEM;
        }
        got = len ? EVP_DecodeBlock((unsigned char *)out, (const unsigned char *)clean, (int)len) : 0;
        if (got < 0)
                goto bad;
        /* EVP_DecodeBlock counts the padding as zero bytes. */
        out[got - (int)pad] = '\0';
        *ret = out;
        *ret_len = (size_t)got - pad;
        free(clean);
        return 0;
bad:
        free(out);
        free(clean);
        return -EINVAL;
}

int base64_encode(const char *s, size_t n, char **ret)
{
        char *out;

        if (n > (size_t)INT_MAX / 4 * 3 - 3)
                return -ENOMEM;
        out = malloc((n + 2) / 3 * 4 + 1);
        if (!out)
                return -ENOMEM;
        (void)EVP_EncodeBlock((unsigned char *)out, (const unsigned char *)s, (int)n);
        *ret = out;
        return 0;
}
