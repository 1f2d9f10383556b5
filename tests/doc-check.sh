#!/bin/sh
# Documentation check run by `make check`: every flag of `podmux run`,
# `watch`, `validate` and `status` (as their --help lists them) is in the
# man page, and every subcommand has its section there.  Prints TAP.
top=${PODMUX_SRCDIR:-$(dirname "$0")/..}
bin=${PODMUX_BIN:-./podmux}
man="$top/doc/podmux.8"
echo "1..5"
n=0
for cmd in run watch validate status; do
        n=$((n + 1))
        missing=""
        flags=$("$bin" "$cmd" --help | grep -oE -- '--[a-z][a-z-]+' | sort -u)
        [ -n "$flags" ] || missing="(no flags in --help)"
        for f in $flags; do
                # groff writes "-" as "\-".
                esc=$(printf '%s' "$f" | sed 's/-/\\\\-/g')
                grep -q -- "$esc" "$man" || missing="$missing $f"
        done
        if grep -q "^\.SH PODMUX $(echo "$cmd" | tr a-z A-Z)\$" "$man" && [ -z "$missing" ]; then
                echo "ok $n - podmux(8) documents podmux $cmd and its flags"
        else
                echo "not ok $n - podmux(8) lacks for podmux $cmd:$missing (or its .SH section)"
        fi
done
n=$((n + 1))
if "$bin" --help | grep -q "status" && "$bin" --help | grep -q "validate"; then
        echo "ok $n - podmux --help lists the subcommands"
else
        echo "not ok $n - podmux --help lacks a subcommand"
fi
