/*
 * v1_schema — member lookup in the generated core/v1 table (see
 * src/kube/v1_schema.h; the table is src/kube/v1_schema_table.c).
 */
#include <stddef.h>
#include <string.h>

#include "util/search.h"
#include "kube/v1_schema.h"

struct field_key {
        const struct v1_type *type;
        const char *name;
};

static bool field_before(const void *ctx, size_t i)
{
        const struct field_key *k = ctx;

        return strcmp(k->type->fields[i].name, k->name) < 0;
}

const struct v1_field *v1_schema_field(const struct v1_type *type, const char *name)
{
        struct field_key k = {type, name};
        size_t i;

        /* Members are sorted bytewise by the generator, as strcmp orders. */
        i = search_first(type->n_fields, field_before, &k);
        return i < type->n_fields && strcmp(type->fields[i].name, name) == 0 ? &type->fields[i] : NULL;
}
