#!/bin/sh
# Documentation check run by `make check`.  Prints TAP.
#  - every flag of `podmux run`, `watch`, `validate`, `status` and `wait` (as their
#    --help lists them) is in podmux(8), and every subcommand has its
#    section there;
#  - every manual page in doc/ renders from the source tree (`man -l`, as
#    a reader of the tree would, with groff's warnings on) with no warning
#    or error, and no two words of its text run together;
#  - every default of `podmux run --help` that podmux(8), README.md or
#    doc/*.md states is the one --help gives;
#  - README.md's Layout names every module under src/ in its directory,
#    and no module that is not there.
# Needs man(1) and groff (Debian: man-db, groff-base).
top=${PODMUX_SRCDIR:-$(dirname "$0")/..}
bin=${PODMUX_BIN:-./podmux}
py=${PYTHON3:-python3}
man="$top/doc/podmux.8"
pages=$(cd "$top" && ls doc/*.[1-8])
echo "1..$((8 + $(echo "$pages" | wc -l)))"
n=0
for cmd in run watch validate status wait; do
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
if "$bin" --help | grep -q "status" && "$bin" --help | grep -q "validate" && "$bin" --help | grep -q "wait"; then
        echo "ok $n - podmux --help lists the subcommands"
else
        echo "not ok $n - podmux --help lacks a subcommand"
fi

# ---- the manual pages, rendered as a reader of the tree would ------------
# man-db's `man -l` resolves a ".so" from the working directory, not the
# page's: an alias page must be a symbolic link in the tree (Makefile.am).
# man(1) exits 0 whatever groff says, so its standard error is the verdict;
# writing to a pipe, it prints plain text (no bold, no pager).  The seccomp
# sandbox of man-db is off: containers may lack what it needs.
render() { # page: its text on stdout, man's and groff's messages in $tmp.err
        (cd "$top" && LC_ALL=C.UTF-8 MANWIDTH=80 MAN_DISABLE_SECCOMP=1 MANPAGER=cat PAGER=cat \
                man --warnings=w -l "$1" 2>"$tmp.err")
}
tmp=$(mktemp)
trap 'rm -f "$tmp" "$tmp.err"' EXIT
have_man=yes
command -v man >/dev/null 2>&1 && command -v groff >/dev/null 2>&1 || have_man=no
joined=""
for p in $pages; do
        n=$((n + 1))
        if [ "$have_man" = no ]; then
                echo "not ok $n - $p: cannot render it: man or groff missing (install man-db and groff-base)"
                continue
        fi
        render "$p" >"$tmp"
        if [ -s "$tmp.err" ] || [ "$(grep -c . "$tmp")" -lt 10 ] || ! grep -q '^NAME' "$tmp"; then
                echo "not ok $n - $p renders from the tree with no warning"
                sed 's/^/# /' "$tmp.err"
                echo "# $(grep -c . "$tmp") lines rendered"
        else
                echo "ok $n - $p renders from the tree with no warning"
        fi
        # Words run together: a sentence's end glued to the next one,
        # as an alternating macro (.BR) with prose after its arguments
        # makes ("podmux watch.Exitstatus:0onan").
        hits=$(grep -nE '[a-z0-9)][.,;:][A-Z][a-z]' "$tmp")
        [ -z "$hits" ] || joined="$joined$(printf '\n%s: %s' "$p" "$hits")"
done
n=$((n + 1))
if [ "$have_man" = yes ] && [ -z "$joined" ]; then
        echo "ok $n - no words run together in the rendered pages"
else
        echo "not ok $n - words run together in the rendered pages (or man missing)"
        printf '%s\n' "$joined" | sed '/^$/d; s/^/# /'
fi

# ---- defaults and the Layout, against the code --------------------------
n=$((n + 1))
"$bin" run --help >"$tmp"
if out=$("$py" - "$top" "$tmp" <<'EOF' 2>&1
import os, re, sys

top, help_file = sys.argv[1], sys.argv[2]
help_text = open(help_file).read()
UNITS = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def norm(v, unit=None):
    """A value as compared: bytes for a size with a unit, else the text."""
    return str(int(v) * UNITS[unit]) if unit in UNITS else v


# Flag -> its default, from the entries of --help (an entry is a line
# "  --flag ..." and the deeper-indented lines after it).
defaults, entry = {}, None
for line in help_text.splitlines() + [""]:
    if re.match(r"^  -", line) or not line.startswith("   "):
        if entry:
            m = re.search(r"\(default ([\w.-]+)\)", " ".join(entry.split()))
            for f in re.findall(r"--[a-z][a-z-]+", entry.split("  ")[1]):
                if m and m.group(1) != "off":
                    defaults[f] = m.group(1)
        entry = line if line.startswith("  -") else None
    elif entry:
        entry += "\n" + line
bad = []
if len(defaults) < 5:
    bad.append("only %d defaults found in run --help" % len(defaults))

# podmux(8): the paragraph of each flag says "default V" or "V (default)".
page = open(os.path.join(top, "doc", "podmux.8")).read()
for tp in page.split(".TP\n")[1:]:
    para = re.split(r"\n\.(?:TP|SH|SS|PP)\b", tp)[0].replace("\\-", "-")
    m = re.match(r"\.B[IR]? (--[a-z-]+)", para)
    if not m or m.group(1) not in defaults:
        continue
    f, v = m.group(1), defaults[m.group(1)]
    text = " ".join(para.split())
    if "default %s" % v not in text and "%s (default)" % v not in text:
        bad.append("podmux(8) %s: no \"default %s\" in: %s" % (f, v, text[:160]))

# Markdown: "`--flag` (default V)", "`--flag`, default V", "`--flag` (V)"
# with V a number and unit or `word`.  Some statements must be there.
MD_RE = re.compile(r"`(--[a-z][a-z-]+)`(?: \(|, )(?:default )?"
                   r"(?:`([a-z][\w.-]*)`|(\d+(?:\.\d+)?[a-z]*)(?: (KiB|MiB|GiB))?)")
required = {"doc/protocol.md": {"--history", "--history-bytes",
                                "--max-consumer-backlog"}}
docs = ["README.md"] + sorted(os.path.join("doc", f)
                              for f in os.listdir(os.path.join(top, "doc"))
                              if f.endswith(".md"))
for doc in docs:
    text = " ".join(open(os.path.join(top, doc)).read().split())
    seen = set()
    for m in MD_RE.finditer(text):
        f = m.group(1)
        if f not in defaults:
            continue
        seen.add(f)
        said = m.group(2) or norm(m.group(3), m.group(4))
        if said != norm(defaults[f]):
            bad.append("%s: %s says %s, run --help %s" % (doc, f, m.group(0), defaults[f]))
    for f in sorted(required.get(doc, set()) - seen):
        bad.append("%s: states no default for %s (as \"`%s` (default %s)\")" % (doc, f, f, defaults.get(f)))

# README.md's Layout: a row "src/DIR/  a, b (what), c and d" names
# modules of src/DIR (a.c); every module of src/DIR is named in its row.
readme = open(os.path.join(top, "README.md")).read()
layout = re.search(r"^## Layout\n+```\n(.*?)```", readme, re.S | re.M)
rows, cur = {}, None
for line in (layout.group(1).splitlines() if layout else []):
    m = re.match(r"^(\S+)\s+(.*)", line)
    if m:
        cur = m.group(1) if re.match(r"^src/\w+/$", m.group(1)) else None
        if cur:
            rows[cur] = m.group(2)
    elif cur:
        rows[cur] += " " + line.strip()
if not rows:
    bad.append("README.md: no Layout rows for src/")
for d, text in sorted(rows.items()):
    while re.search(r"\([^()]*\)", text):
        text = re.sub(r"\([^()]*\)", "", text)
    named = set()
    for piece in re.split(r",|;| and ", text):
        piece = piece.strip()
        m = re.match(r"^(?:[\w-]+: )?([a-z][a-z0-9_]*)$", piece)
        if m:
            named.add(m.group(1))
    have = {f[:-2] for f in os.listdir(os.path.join(top, d)) if f.endswith(".c")}
    for x in sorted(named - have):
        bad.append("README.md Layout: %s names %s, which is not %s%s.c" % (d, x, d, x))
    for x in sorted(have - named):
        bad.append("README.md Layout: %s does not name %s (%s%s.c)" % (d, x, d, x))
print("\n".join(bad))
sys.exit(1 if bad else 0)
EOF
); then
        echo "ok $n - the defaults the documents state are run --help's; README's Layout is the tree's"
else
        echo "not ok $n - documents disagree with the code"
        printf '%s\n' "$out" | sed 's/^/# /'
fi
