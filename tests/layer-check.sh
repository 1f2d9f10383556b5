#!/bin/sh
# Layer check run by `make check`: each layer's library (Makefile.am, "one
# library per layer"; doc/design.md, "Libraries") calls only into itself
# and the layers below it.  For each library, every symbol it leaves
# undefined that one of the project's libraries defines must be defined
# by the library itself or by a layer it may use; what no project library
# defines comes from the system (libc, json-c, curl ...).  So an upward
# call is caught here by name even where a program that links both layers
# would resolve it, as a link with only the layers below would not.
# Reads the libraries of the build tree (PODMUX_BUILDDIR).  Prints TAP.
b=${PODMUX_BUILDDIR:-.}
nm=${NM:-nm}
# layer, its archive, the layers it may use (doc/design.md; plugins may
# use core, though today it calls only util).
layers="util-base src/util/.libs/libutil-base.a -
util src/util/libutil.a util-base
core src/core/libcore.a util util-base
metrics src/metrics/libmetrics.a core util util-base
kube src/kube/libkube.a core util util-base
sources src/sources/libsources.a kube metrics core util util-base
events src/events/libevents.a kube metrics core util util-base
stream src/stream/libstream.a core util util-base
kubeapi src/kubeapi/libkubeapi.a kube core util util-base
plugins src/plugins/libplugins.a core util util-base
client .libs/libpodmux-client.a util-base"
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
# One "symbol" per line: what the archive defines (.def), leaves undefined
# (.und).  nm -P: "name type [value size]" lines under "archive[member]:".
symbols() {
        $nm -P -g "$b/$2" >"$tmp/$1.nm" 2>"$tmp/$1.err" || return 1
        awk 'NF >= 2 && $1 !~ /\]:$/ && $2 !~ /^[Uwv]$/ { print $1 }' "$tmp/$1.nm" | sort -u >"$tmp/$1.def"
        awk 'NF >= 2 && $1 !~ /\]:$/ && $2 ~ /^[Uwv]$/ { print $1 }' "$tmp/$1.nm" | sort -u |
                comm -23 - "$tmp/$1.def" >"$tmp/$1.und"
}
# Within a layer, no module calls back into the module on top of it that
# includes it (the client's API in client.c over its decoder, cache and
# informer; the binary's dispatch in main.c over the subcommands): an
# import circle.  Layer, its objects (a glob), the top module's object.
tops="client src/client/libpodmux_client_la-*.o libpodmux_client_la-client.o
cmd src/cmd/*.o main.o"
count=$(($(echo "$layers" | wc -l) + $(echo "$tops" | wc -l)))
echo "1..$count"
unread=""
while read -r name lib below; do
        symbols "$name" "$lib" || unread="$unread
$lib: $(head -n 1 "$tmp/$name.err")"
done <<EOF
$layers
EOF
if [ -n "$unread" ]; then
        echo "not ok 1 - cannot read the libraries (is the tree built?):"
        echo "$unread" | sed '/^$/d; s/^/# /'
        exit 1
fi
cat "$tmp"/*.def | sort -u >"$tmp/project"
n=0
fail=0
while read -r name lib below; do
        n=$((n + 1))
        : >"$tmp/allowed"
        for l in $below; do
                [ "$l" = - ] || cat "$tmp/$l.def" >>"$tmp/allowed"
        done
        sort -u -o "$tmp/allowed" "$tmp/allowed"
        # Undefined here, defined by a project library, not by one below.
        wrong=$(comm -12 "$tmp/$name.und" "$tmp/project" | comm -23 - "$tmp/allowed")
        if [ -z "$wrong" ]; then
                case $below in
                -) echo "ok $n - $name ($lib) calls only itself" ;;
                *) echo "ok $n - $name ($lib) calls only itself and $below" ;;
                esac
                continue
        fi
        echo "not ok $n - $name ($lib) uses symbols of a layer it may not call:"
        for s in $wrong; do
                where=$(grep -l -x -F -e "$s" "$tmp"/*.def | sed 's|.*/||; s|\.def$||' | tr '\n' ' ')
                echo "# $s (defined in: $where)"
        done
        fail=1
done <<EOF
$layers
EOF
while read -r name glob top; do
        n=$((n + 1))
        topo=$(dirname "$b/$glob")/$top
        if [ ! -f "$topo" ]; then
                echo "not ok $n - $name: no $topo (is the tree built?)"
                fail=1
                continue
        fi
        $nm -P -g "$topo" | awk '$2 !~ /^[Uwv]$/ { print $1 }' | sort -u >"$tmp/top.def"
        wrong=""
        for o in $b/$glob; do
                [ "$o" = "$topo" ] && continue
                s=$($nm -P -g "$o" | awk '$2 ~ /^[Uwv]$/ { print $1 }' | sort -u | comm -12 - "$tmp/top.def")
                [ -z "$s" ] || wrong="$wrong
${o##*/}: $(echo $s)"
        done
        if [ -z "$wrong" ]; then
                echo "ok $n - $name: no module calls back into $top"
                continue
        fi
        echo "not ok $n - $name: modules call back into $top, which includes them:"
        echo "$wrong" | sed '/^$/d; s/^/# /'
        fail=1
done <<EOF
$tops
EOF
exit $fail
