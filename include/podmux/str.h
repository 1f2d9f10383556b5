/*
 * str — small helpers for heap strings held in struct fields.
 *
 * Owns: nothing; the caller owns every string it passes in or gets back.
 */
#ifndef PODMUX_STR_H
#define PODMUX_STR_H

/* Replaces *slot with a copy of v (NULL clears it), freeing the old one.
 * 0, or -ENOMEM with *slot unchanged. */
int str_set(char **slot, const char *v);

#endif
