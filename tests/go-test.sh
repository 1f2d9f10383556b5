#!/bin/sh
# The Go package (go/, podmux.dev/podmux) run by `make check`: `go vet`
# and `go test -race` against the daemon this build made (PODMUX_BIN),
# offline (GOPROXY=off, GOFLAGS=-mod=mod) and with Go's caches in the
# build directory.  Prints TAP: one line for go vet and one per top-level
# Go test (the fuzz targets' seeds among them), so the suite counts each;
# Go's own output follows as comments.  Skipped only when go is not
# installed (scripts/deps installs golang-go).
top=${PODMUX_SRCDIR:-$(dirname "$0")/..}
build=${PODMUX_BUILDDIR:-$(pwd)}
go=${GO:-go}
if ! command -v "$go" >/dev/null 2>&1; then
        echo "1..0 # SKIP go is not installed (scripts/deps installs golang-go)"
        exit 0
fi
export PODMUX_BIN=${PODMUX_BIN:-$build/podmux}
export GOPROXY=off GOFLAGS=-mod=mod GOTOOLCHAIN=local GOENV=off
export GOCACHE="$build/go-cache" GOPATH="$build/go-path"
out="$build/go-test.out"
cd "$top/go" || exit 1
n=0
status=0
comment() { sed 's/^/# /' "$1"; }

n=$((n + 1))
if "$go" vet ./... >"$out" 2>&1; then
        echo "ok $n - go vet ./..."
else
        echo "not ok $n - go vet ./..."
        status=1
fi
comment "$out"

"$go" version | sed 's/^/# /'
"$go" test -race -count=1 -v ./... >"$out" 2>&1
rc=$?
# Top-level results are the "--- PASS/FAIL/SKIP: Name (time)" lines at
# the start of a line; a skip's reason is the test's last line of output
# (indented, before its result).
results=$(awk '
        /^=== / { msg = ""; next }
        /^    [^ ]/ { msg = $0; sub(/^ +/, "", msg); next }
        /^--- (PASS|FAIL|SKIP): / {
                if ($2 == "SKIP:")
                        print "skip " $3 " " msg
                else
                        print ($2 == "PASS:" ? "ok" : "not ok") " " $3
        }' "$out")
failed=0
passed=0
while IFS= read -r line; do
        [ -n "$line" ] || continue
        n=$((n + 1))
        case $line in
        "ok "*) echo "ok $n - go test: ${line#ok }"; passed=$((passed + 1)) ;;
        "not ok "*) echo "not ok $n - go test: ${line#not ok }"; failed=$((failed + 1)) ;;
        "skip "*)
                rest=${line#skip }
                echo "ok $n - go test: ${rest%% *} # SKIP ${rest#* }" ;;
        esac
done <<EOF
$results
EOF
# A build failure, a panic or a timeout can leave no result line of its
# own: go test's status says it all the same.
if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
        n=$((n + 1))
        echo "not ok $n - go test -race ./... exited with status $rc"
fi
if [ "$rc" -eq 0 ] && [ "$passed" -eq 0 ]; then
        n=$((n + 1))
        echo "not ok $n - go test -race ./... ran no test"
fi
[ "$rc" -eq 0 ] || status=1
comment "$out"
rm -f "$out"
echo "1..$n"
exit $status
