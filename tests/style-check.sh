#!/bin/sh
# Style check run by `make check`, so the build enforces the style rules:
# no banned unsafe functions in src/ and include/ (use the safe forms);
# every header opens with its ownership comment; layers point one way; no
# comment or document sends the reader to a document outside the tree;
# lines changed since the last commit are as .clang-format writes them
# (when git-clang-format is installed); no unexplained fixed sleep in the
# integration tests.  Prints TAP.
top=${PODMUX_SRCDIR:-$(dirname "$0")/..}
n=0
fail=0
echo "1..6"
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
for h in "$top"/include/podmux/*.h "$top"/src/*/*.h; do
        head -n 3 "$h" | grep -q '^/\*' || missing="$missing $h"
done
n=$((n + 1))
if [ -z "$missing" ]; then
        echo "ok $n - every header opens with a comment saying what the module owns"
else
        echo "not ok $n - headers without an opening comment:$missing"
        fail=1
fi
# Layers point one way: util <- core <- kube, metrics <- sources, events;
# kube <- kubeapi; core <- stream, plugins; util <- client; cmd above all.  A private header lives beside
# its .c file and is included by its layer ("util/buf.h"); include/ holds
# only the public API.  The linker enforces the same order (each layer
# is a library of its own, doc/design.md); this names the offending line.
rank() {
        case $1 in
        util) echo 0 ;;
        core | client) echo 1 ;;
        metrics | kube) echo 2 ;;
        sources | events | stream | kubeapi | plugins) echo 3 ;;
        cmd) echo 4 ;;
        *) echo 9 ;;
        esac
}
wrong=""
for f in "$top"/src/*/*.c "$top"/src/*/*.h; do
        [ -f "$f" ] || continue
        mine=$(basename "$(dirname "$f")")
        for h in $(sed -n 's/^#include "\([a-z]*\/[a-z0-9_]*\)\.h".*/\1/p' "$f"); do
                theirs=${h%%/*}
                [ "$theirs" = "$mine" ] && continue
                if [ "$theirs" = podmux ] && [ -f "$top/include/$h.h" ]; then
                        continue
                fi
                if [ ! -f "$top/src/$h.h" ] || [ "$(rank "$theirs")" -ge "$(rank "$mine")" ]; then
                        wrong="$wrong
${f#"$top"/} ($mine) includes $h.h"
                fi
        done
done
if [ "$(ls "$top"/include/podmux)" != client.h ]; then
        wrong="$wrong
include/podmux holds more than the public client.h: $(ls "$top"/include/podmux | tr '\n' ' ')"
fi
n=$((n + 1))
if [ -z "$wrong" ]; then
        echo "ok $n - layers point one way (util <- core <- kube, metrics <- sources, events; kube <- kubeapi; core <- stream, plugins; util <- client; cmd)"
else
        echo "not ok $n - a lower layer includes a higher one's header, or a header not where its path says:"
        echo "$wrong" | sed '/^$/d; s/^/# /'
        fail=1
fi
# Every document a reader is pointed to is in the tree (doc/, README.md,
# or a file path here).  Flagged: the .md files of a spec directory, the
# design and style notes by their upper-case file names, and anything
# under the parent directory's shared folder.  The patterns are spelled
# so that this file does not match itself.  Allowed: a line of
# tests/schema-check.sh that ends with the marker
# "# style-check: external path allowed" (the default location of its
# input file, a data file rather than a document).  Build products an
# in-tree build leaves beside the sources are not looked at.
outside='spec/[A-Za-z0-9_./-]*\.md|DESIGN\.md|STYLE\.md|\.\./shared/'
hits=$(cd "$top" && grep -rnIE --exclude='*.log' --exclude='*.trs' --exclude-dir=.deps \
        --exclude-dir=.libs "$outside" src include tests scripts doc README.md |
        grep -vE '^tests/schema-check\.sh:[0-9]+:.*# style-check: external path allowed$' || true)
n=$((n + 1))
if [ -z "$hits" ]; then
        echo "ok $n - every document referred to is in the tree"
else
        echo "not ok $n - references to documents outside the tree (point to doc/ or README.md instead):"
        echo "$hits" | sed 's/^/# /'
        fail=1
fi
# A fixed sleep in the integration tests says why, on its line or the one
# above: a poll's interval, wall-clock time the daemon's own rule needs,
# and so on.  The pause before asserting an absence is harness.settle()
# (scaled like every bound); what a test waits for is polled
# (harness.wait_for), never slept for.
hits=$(cd "$top" && awk '/time\.sleep\(/ && !/#/ && prev !~ /^[[:space:]]*#/ {
        print FILENAME ":" FNR ": " $0 } { prev = $0 }' tests/integration/*.py)
n=$((n + 1))
if [ -z "$hits" ]; then
        echo "ok $n - every fixed sleep of the integration tests says why"
else
        echo "not ok $n - fixed sleeps without a reason (poll with harness.wait_for, or harness.settle before asserting an absence):"
        echo "$hits" | sed 's/^/# /'
        fail=1
fi
# The house format (.clang-format) on what is being changed: the lines of
# C files that differ from the last commit.  Existing code is not
# reformatted wholesale; it comes into line as it is edited.
n=$((n + 1))
if ! command -v git-clang-format >/dev/null 2>&1 || ! git -C "$top" rev-parse --git-dir >/dev/null 2>&1; then
        echo "ok $n - changed lines formatted # SKIP git-clang-format or a git checkout missing"
else
        out=$(cd "$top" && git clang-format --diff HEAD -- '*.c' '*.h' 2>&1)
        case $out in
        "" | *"no modified files to format"* | *"did not modify any files"*)
                echo "ok $n - changed lines formatted as .clang-format says" ;;
        *)
                echo "not ok $n - changed lines not formatted as .clang-format says (git clang-format applies it):"
                echo "$out" | sed 's/^/# /'
                fail=1 ;;
        esac
fi
exit $fail
