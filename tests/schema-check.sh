#!/bin/sh
# Schema check run by `make check`: the checked-in core/v1 table
# (src/core/v1_schema_table.c) is exactly what scripts/gen-v1-schema
# writes from the reference Go types file.  That file is not part of the
# tree: it is looked for in $PODMUX_V1_TYPES, else beside the checkout
# (../shared/reference/k8s-api-core-v1-types.go); without it the check is
# skipped.  Prints TAP.
top=${PODMUX_SRCDIR:-$(dirname "$0")/..}
ref=${PODMUX_V1_TYPES:-$top/../shared/reference/k8s-api-core-v1-types.go}
echo "1..1"
if [ ! -f "$ref" ]; then
        echo "ok 1 # SKIP no reference types file at $ref (set PODMUX_V1_TYPES)"
        exit 0
fi
if out=$(${PYTHON3:-python3} "$top/scripts/gen-v1-schema" --check "$ref" \
        "$top/src/core/v1_schema_table.c" 2>&1); then
        echo "ok 1 - src/core/v1_schema_table.c is what scripts/gen-v1-schema writes"
        exit 0
fi
echo "not ok 1 - src/core/v1_schema_table.c differs from scripts/gen-v1-schema's output"
printf '%s\n' "$out" | head -40 | sed 's/^/# /'
exit 1
