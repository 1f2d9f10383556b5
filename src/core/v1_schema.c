/*
 * v1_schema — member lookup in the generated core/v1 table (see
 * include/podmux/v1_schema.h; the table is src/core/v1_schema_table.c).
 */
#include <stddef.h>
#include <string.h>

#include "podmux/v1_schema.h"

const struct v1_field *v1_schema_field(const struct v1_type *type, const char *name)
{
        unsigned lo = 0, hi = type->n_fields;

        /* Members are sorted bytewise by the generator, as strcmp orders. */
        while (lo < hi) {
                unsigned mid = lo + (hi - lo) / 2;
                int c = strcmp(name, type->fields[mid].name);

                if (c == 0)
                        return &type->fields[mid];
                if (c < 0)
                        hi = mid;
                else
                        lo = mid + 1;
        }
        return NULL;
}
