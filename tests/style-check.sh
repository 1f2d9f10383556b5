#!/bin/sh
# Style check run by `make check` (STYLE.md habit 13): no banned unsafe
# functions in src/ and include/; every header opens with its ownership
# comment.  Prints TAP.
top=${PODMUX_SRCDIR:-$(dirname "$0")/..}
n=0
fail=0
echo "1..2"
banned='\<(sprintf|vsprintf|strcpy|strcat|strtok|atoi|atol|gmtime|localtime|strerror|gets)[[:space:]]*\('
hits=$(grep -rnE "$banned" "$top/src" "$top/include" --include='*.c' --include='*.h' | grep -vE '^\S+:[0-9]+:\s*(\*|/\*)' || true)
n=$((n + 1))
if [ -z "$hits" ]; then
        echo "ok $n - no banned functions (sprintf strcpy strcat strtok atoi gmtime localtime strerror gets)"
else
        echo "not ok $n - banned functions used"
        echo "$hits" | sed 's/^/# /'
        fail=1
fi
missing=""
for h in "$top"/include/podmux/*.h; do
        head -n 3 "$h" | grep -q '^/\*' || missing="$missing $h"
done
n=$((n + 1))
if [ -z "$missing" ]; then
        echo "ok $n - every header opens with a comment saying what the module owns"
else
        echo "not ok $n - headers without an opening comment:$missing"
        fail=1
fi
exit $fail
