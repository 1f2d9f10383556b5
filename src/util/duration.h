/*
 * duration — Go-style duration strings ("20s", "1m30s", "1.5h", "300ms",
 * "0") to microseconds, as the kubelet's flags and config accept them.
 * Never: allows negative values or overflow (-ERANGE), unknown units or
 * missing units on a non-zero number (-EINVAL).
 */
#ifndef PODMUX_DURATION_H
#define PODMUX_DURATION_H

#include <stdint.h>

int duration_parse(const char *s, uint64_t *ret_usec);

#endif
