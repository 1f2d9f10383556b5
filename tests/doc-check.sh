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
#  - doc/design.md's module map has a row for every src/DIR/*.c in the
#    table of its layer (### src/DIR), and every file design.md names
#    exists where it says;
#  - every link between the documents (relative markdown links in
#    README.md, doc/*.md and go/README.md, with their #anchors as GitHub
#    makes them, and every doc/FILE path they mention) resolves;
#  - README.md is at most 300 lines: a user's guide, the rest in doc/.
# Needs man(1) and groff (Debian: man-db, groff-base).
top=${PODMUX_SRCDIR:-$(dirname "$0")/..}
bin=${PODMUX_BIN:-./podmux}
py=${PYTHON3:-python3}
man="$top/doc/podmux.8"
pages=$(cd "$top" && ls doc/*.[1-8])
echo "1..$((11 + $(echo "$pages" | wc -l)))"
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

# ---- defaults, against the code ------------------------------------------
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

print("\n".join(bad))
sys.exit(1 if bad else 0)
EOF
); then
        echo "ok $n - the defaults the documents state are run --help's"
else
        echo "not ok $n - documents disagree with the code"
        printf '%s\n' "$out" | sed 's/^/# /'
fi

# ---- doc/design.md's module map, against the tree ----------------------
n=$((n + 1))
if out=$("$py" - "$top" <<'EOF' 2>&1
import glob, os, re, sys

top = sys.argv[1]
design = open(os.path.join(top, "doc", "design.md")).read()
bad = []
m = re.search(r"^## Module map\n(.*?)^## ", design, re.S | re.M)
if not m:
    sys.exit("doc/design.md: no \"## Module map\" section")
# Each "### src/DIR — ..." table names the files of src/DIR in its rows'
# first cell; "### Outside src" names paths from the top of the tree.
tables = {}
for sec in re.split(r"^### ", m.group(1), flags=re.M)[1:]:
    title, body = sec.split("\n", 1)
    names = []
    for row in re.findall(r"^\|([^|\n]*)\|", body, re.M):
        names += re.findall(r"`([^`]+)`", row)
    d = re.match(r"(src/\w+)\b", title)
    key = d.group(1) if d else ("" if title.startswith("Outside src") else None)
    if key is not None:
        tables[key] = names
for d in sorted(glob.glob(os.path.join(top, "src", "*", ""))):
    rel = os.path.relpath(d, top)
    have = {os.path.basename(f) for f in glob.glob(os.path.join(d, "*.c"))}
    if rel not in tables:
        bad.append("doc/design.md: no table \"### %s\" in the module map" % rel)
        continue
    for f in sorted(have - set(tables[rel])):
        bad.append("doc/design.md: %s/%s has no row in the %s table" % (rel, f, rel))
for key, names in sorted(tables.items()):
    for name in names:
        if any(c in name for c in "*<> "):
            continue
        if not os.path.exists(os.path.join(top, key, name)):
            bad.append("doc/design.md names %s, which is not in the tree" % os.path.join(key, name))
# Every other backticked path the page gives from the top of the tree;
# a library (.a, .la) is a build product: Makefile.am must build it.
makefile = open(os.path.join(top, "Makefile.am")).read()
for path in sorted(set(re.findall(
        r"`((?:src|include|tests|scripts|doc|python|go|examples|manifests)/[\w./-]+)`", design))):
    if path.endswith((".a", ".la")):
        if not re.search(r"(^|\s)%s(\s|$)" % re.escape(path), makefile, re.M):
            bad.append("doc/design.md names %s, which Makefile.am does not build" % path)
    elif not os.path.exists(os.path.join(top, path)):
        bad.append("doc/design.md names %s, which is not in the tree" % path)
print("\n".join(bad))
sys.exit(1 if bad else 0)
EOF
); then
        echo "ok $n - doc/design.md's module map has a row for every module, and names only files that exist"
else
        echo "not ok $n - doc/design.md's module map disagrees with the tree"
        printf '%s\n' "$out" | sed 's/^/# /'
fi

# ---- links between the documents ----------------------------------------
n=$((n + 1))
if out=$("$py" - "$top" <<'EOF' 2>&1
import glob, os, re, sys

top = sys.argv[1]
docs = ["README.md", "go/README.md"] + sorted(
    os.path.relpath(f, top) for f in glob.glob(os.path.join(top, "doc", "*.md")))


def prose(path):
    """The file's text outside fenced code blocks."""
    out, fence = [], False
    for line in open(os.path.join(top, path)):
        if line.lstrip().startswith("```"):
            fence = not fence
        elif not fence:
            out.append(line)
    return "".join(out)


slugs_of = {}


def slugs(path):
    """The anchors GitHub makes for the headings of a markdown file."""
    if path not in slugs_of:
        seen, out = {}, set()
        for h in re.findall(r"^#{1,6} +(.*?) *#*$", prose(path), re.M):
            s = re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
            k = seen.get(s, 0)
            seen[s] = k + 1
            out.add(s if k == 0 else "%s-%d" % (s, k))
        slugs_of[path] = out
    return slugs_of[path]


bad = []
for doc in docs:
    if not os.path.exists(os.path.join(top, doc)):
        continue
    text = prose(doc)
    here = os.path.dirname(doc)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):
            continue                        # http:, https:, mailto:
        path, _, anchor = target.partition("#")
        rel = os.path.normpath(os.path.join(here, path)) if path else doc
        if not os.path.exists(os.path.join(top, rel)):
            bad.append("%s: link to %s: no such file" % (doc, target))
        elif anchor and rel.endswith(".md") and anchor not in slugs(rel):
            bad.append("%s: link to %s: no heading makes #%s" % (doc, target, anchor))
    # Paths named in the text: doc/FILE, from the top of the tree.
    for path in sorted(set(re.findall(r"(?<![\w/.-])(doc/[\w.-]*\w\.(?:md|[1-8]))", text))):
        if not os.path.exists(os.path.join(top, path)):
            bad.append("%s: names %s: no such file" % (doc, path))
print("\n".join(bad))
sys.exit(1 if bad else 0)
EOF
); then
        echo "ok $n - every link between the documents resolves"
else
        echo "not ok $n - links between the documents do not resolve"
        printf '%s\n' "$out" | sed 's/^/# /'
fi

# ---- the README stays a user's guide --------------------------------------
n=$((n + 1))
lines=$(wc -l <"$top/README.md")
if [ "$lines" -le 300 ]; then
        echo "ok $n - README.md is at most 300 lines ($lines)"
else
        echo "not ok $n - README.md has $lines lines, more than 300: move the detail to doc/"
fi
