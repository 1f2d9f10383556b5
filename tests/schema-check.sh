#!/bin/sh
# Schema check run by `make check`: the checked-in core/v1 table
# (src/kube/v1_schema_table.c) is exactly what scripts/gen-v1-schema
# writes from the core/v1 Go types of Kubernetes (k8s.io/api core/v1
# types.go), path given by PODMUX_V1_TYPES.  That file is not part of the
# tree; with PODMUX_V1_TYPES unset a fixed default path is tried (the
# line below), and without the file the check is skipped.  Prints TAP.
top=${PODMUX_SRCDIR:-$(dirname "$0")/..}
ref=${PODMUX_V1_TYPES:-$top/../shared/reference/k8s-api-core-v1-types.go} # style-check: external path allowed
echo "1..1"
if [ ! -f "$ref" ]; then
        echo "ok 1 # SKIP no reference types file at $ref (set PODMUX_V1_TYPES)"
        exit 0
fi
if out=$(${PYTHON3:-python3} "$top/scripts/gen-v1-schema" --check "$ref" \
        "$top/src/kube/v1_schema_table.c" 2>&1); then
        echo "ok 1 - src/kube/v1_schema_table.c is what scripts/gen-v1-schema writes"
        exit 0
fi
echo "not ok 1 - src/kube/v1_schema_table.c differs from scripts/gen-v1-schema's output"
printf '%s\n' "$out" | head -40 | sed 's/^/# /'
exit 1
