/*
 * version — version strings read the way the kubelet reads them: the
 * generic form of k8s.io/apimachinery's util/version (ParseGeneric), its
 * comparison, its String() and HighestSupportedVersion, which the CSI
 * plugin handler uses on the versions a plugin reports.
 *
 * The generic form: optional leading white space (space, \t, \n, \f, \r),
 * an optional lower-case 'v', then two or more numbers separated by single
 * dots, the longest such run; anything after it is ignored ("1.0x",
 * "1.2.3-rc.1", "1.0." are 1.0, 1.2.3, 1.0) unless it holds a newline.
 * The first number has no leading zero (others may: "1.02" is 1.2); each
 * fits in 64 bits.
 *
 * Owns: nothing; a struct version points into the string it was parsed
 * from, which must outlive it.  Never: allocates, except to write an error
 * message or version_format()'s output.
 */
#ifndef PODMUX_VERSION_H
#define PODMUX_VERSION_H

#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"

struct version {
        const char *digits; /* the numbers ("1.2.3"), inside the parsed string */
        size_t len;         /* bytes of digits */
        size_t n;           /* how many numbers, 2 or more */
};

/* 0, or -EINVAL with the reason in err (may be NULL; util/buf.h: it
 * replaces what err held, a success leaves err alone), -ENOMEM when the
 * reason cannot be written; *ret is written only on success. */
int version_parse_generic(const char *s, struct version *ret, struct buf *err);
/* The i-th number (0: major), 0 past the last. */
uint64_t version_component(const struct version *v, size_t i);
/* -1, 0 or 1.  Number by number; when one has more numbers, it is the
 * greater if any of the extra ones is not 0 ("1.0" equals "1.0.0", is
 * less than "1.0.0.1").  O(length). */
int version_compare(const struct version *a, const struct version *b);
/* Appends the numbers, decimal, joined by '.' (the ignored rest left out):
 * Go's String() of a generic version.  0 or -ENOMEM. */
int version_format(const struct version *v, struct buf *out);
/*
 * HighestSupportedVersion: the greatest of versions whose major is at most
 * 1, looking from the last to the first and keeping the first found of
 * equal ones; unparsable entries are skipped.  -EINVAL with the reason in
 * err (replacing what it held) when versions is empty, when none is left,
 * or when the greatest is not 1.x (-ENOMEM if the reason cannot be
 * written); else 0 with *ret (pointing into versions[*ret_index]).
 */
int version_highest_supported(char *const *versions, size_t n, struct version *ret, size_t *ret_index, struct buf *err);

#endif
