#!/bin/sh
# Words check run by `make check`: the protocol's words in the daemon and
# the three clients (src/util/proto_words.h, go/words.go,
# python/podmux/_words.py) are exactly what scripts/gen-protocol-words
# writes from scripts/protocol-words.json, so a word changed in the table
# and not regenerated, or changed by hand in one copy, fails here.
# Prints TAP.
top=${PODMUX_SRCDIR:-$(dirname "$0")/..}
echo "1..1"
if out=$(${PYTHON3:-python3} "$top/scripts/gen-protocol-words" --check "$top" 2>&1); then
        echo "ok 1 - the protocol's words are what scripts/gen-protocol-words writes"
        exit 0
fi
echo "not ok 1 - the protocol's words differ from scripts/gen-protocol-words's output (run it)"
printf '%s\n' "$out" | head -40 | sed 's/^/# /'
exit 1
