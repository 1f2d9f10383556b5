#!/bin/sh
# Type check run by `make check`: mypy, with python/pyproject.toml's
# [tool.mypy] (strict, for the oldest Python the module supports), on the
# Python module (python/podmux) and on examples/consumer.py, which uses it
# as a program would (an event's kind narrows it to its class).  A type
# error fails the check.  Prints TAP; skipped only when mypy is not
# installed (scripts/deps --test installs Debian's mypy).
top=${PODMUX_SRCDIR:-$(dirname "$0")/..}
build=${PODMUX_BUILDDIR:-$(pwd)}
mypy=${MYPY:-mypy}
echo "1..1"
if ! command -v "$mypy" >/dev/null 2>&1; then
        echo "ok 1 # SKIP mypy is not installed (scripts/deps --test installs it)"
        exit 0
fi
"$mypy" --version | sed 's/^/# /'
# The cache goes to the build directory, not the source tree.
if out=$(cd "$top" && "$mypy" --config-file python/pyproject.toml \
        --cache-dir "$build/mypy-cache" python/podmux examples/consumer.py 2>&1); then
        echo "ok 1 - mypy --strict: python/podmux and examples/consumer.py type-check"
        printf '%s\n' "$out" | sed 's/^/# /'
        exit 0
fi
echo "not ok 1 - mypy --strict finds type errors in python/podmux or examples/consumer.py"
printf '%s\n' "$out" | sed 's/^/# /'
exit 1
