/*
 * digest — the SHA-256 of a byte string (libcrypto), and its text form
 * "sha256:<64 hex digits>", the way the daemon and `podmux wait` name the
 * bytes of a manifest they read.
 * And FNV-1a-128, streaming: the cheap hash of the pods' digests, the
 * manifest UIDs and the event correlator's keys (not cryptographic).
 *
 * Owns: nothing.  Never: logs, or keeps anything between calls.
 * Cost: one pass over the bytes (for SHA-256, libcrypto's context is made
 * and freed per call, so a digest may run out of memory).
 */
#ifndef PODMUX_DIGEST_H
#define PODMUX_DIGEST_H

#include <stddef.h>
#include <stdint.h>

#define DIGEST_LEN 32
/* "sha256:" and 64 hex digits, with the NUL. */
#define DIGEST_TEXT_MAX (7 + 2 * DIGEST_LEN + 1)

/* The SHA-256 of data[0..len) into out.  0 or -ENOMEM (out unchanged). */
int digest_sha256(const void *data, size_t len, uint8_t out[DIGEST_LEN]);
/* d as "sha256:<hex>" (lower case) into out. */
void digest_text(const uint8_t d[DIGEST_LEN], char out[DIGEST_TEXT_MAX]);
/* The digest a text of digest_text() names into out.  0, or -EINVAL for
 * anything else (another algorithm, a wrong length, upper case). */
int digest_parse(const char *text, uint8_t out[DIGEST_LEN]);

/* 128-bit FNV-1a, streaming. */
struct fnv128 {
        uint64_t hi, lo;
};
void fnv128_init(struct fnv128 *h);
void fnv128_update(struct fnv128 *h, const void *p, size_t n);
/* 16 bytes, big-endian. */
void fnv128_final(const struct fnv128 *h, uint8_t out[16]);
/* 32 lowercase hex digits + NUL. */
void fnv128_hex(const uint8_t digest[16], char out[33]);

#endif
