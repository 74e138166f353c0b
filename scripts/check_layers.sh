#!/usr/bin/env bash
# The network path's files call only the layers below them (src/rma/net/os_net.h).
# Reads the compiled objects: every function a file uses that another file of
# the folder defines must come from a lower layer. Files of one layer do not
# call each other. Usage: scripts/check_layers.sh BUILD_DIR
set -euo pipefail
build=${1:?usage: check_layers.sh BUILD_DIR}

# Layer of each file, lowest first (os_net.h's list).
declare -A layer=([route_table]=0 [lockword]=0 [datakey]=0 [forward]=1 [request]=2 [serve]=2 [lock]=3 [barrier]=3 [origin]=4
                  [window]=5 [init]=5)

declare -A owner objs
for f in "${!layer[@]}"; do
    o=$(find "$build" -path "*/src/rma/net/$f.c.o" | head -n 1)
    [ -n "$o" ] || { echo "check_layers: no object for net/$f.c under $build" >&2; exit 2; }
    objs[$f]=$o
    for s in $(nm --defined-only -g "$o" | awk '$2 ~ /[TDBR]/ {print $3}'); do
        owner[$s]=$f
    done
done
# Every .o of the folder must have a layer: a new file has to be placed.
for o in $(find "$build" -path "*/src/rma/net/*.c.o"); do
    f=$(basename "$o" .c.o)
    [ -n "${layer[$f]:-}" ] || { echo "check_layers: net/$f.c has no layer here" >&2; exit 2; }
done

bad=0 edges=0
for f in "${!layer[@]}"; do
    for s in $(nm -u "${objs[$f]}" | awk '{print $2}'); do
        g=${owner[$s]:-}
        [ -n "$g" ] || continue
        edges=$((edges + 1))
        if [ "${layer[$g]}" -ge "${layer[$f]}" ]; then
            echo "check_layers: net/$f.c (layer ${layer[$f]}) calls $s of net/$g.c (layer ${layer[$g]})"
            bad=$((bad + 1))
        fi
    done
done
[ "$edges" -gt 0 ] || { echo "check_layers: no calls between the files found (stripped objects?)" >&2; exit 2; }
if [ "$bad" -gt 0 ]; then
    echo "check_layers: $bad call(s) against the layer order"
    exit 1
fi
echo "check_layers: $edges calls between net/ files, all downward"
