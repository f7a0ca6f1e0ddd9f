#!/usr/bin/env bash
# Every #include in src/ points to its own folder or to a layer below it, and
# no function is called from a layer below the one that defines it. The
# order, top to bottom, is the one src/README.md draws.
#   check_layers.sh SRC_DIR
set -uo pipefail
src=${1:?usage: check_layers.sh SRC_DIR}
order=(abi core rma proto ofi cuda policy cfg log util net nccl)
rank() {
  local i
  for i in "${!order[@]}"; do [ "${order[$i]}" = "$1" ] && { echo "$i"; return; }; done
  echo -1
}
bad=0 n=0
for dir in "$src"/*/; do
  layer=$(basename "$dir")
  lr=$(rank "$layer")
  if [ "$lr" -lt 0 ]; then
    echo "FAIL: src/$layer is not in the layer order (tests/docs/check_layers.sh, src/README.md)"
    bad=$((bad + 1))
    continue
  fi
  while IFS=: read -r file _ inc; do
    target=$(sed -E 's/.*#include "([^/"]+)\/.*/\1/' <<<"$inc")
    [ "$target" = "$inc" ] && continue # no folder: a public header in include/
    n=$((n + 1))
    [ "$target" = "$layer" ] && continue
    tr=$(rank "$target")
    if [ "$tr" -le "$lr" ]; then
      echo "FAIL: ${file#"$src"/} includes $target/, a layer above $layer/"
      bad=$((bad + 1))
    fi
  done < <(grep -n '^#include "' "$dir"*.[ch] /dev/null)
done
[ "$n" -gt 0 ] || { echo "FAIL: no include found under $src"; exit 1; }
echo "$n includes checked, $bad pointing upward"

# Calls too: no function a layer defines (non-static, at the start of a
# line) is called from a layer below it. Declarations in a low header
# (net/net.h) do not make a function low: where it is defined counts.
defs() { # defs LAYER: the functions defined in it
  grep -hoE '^[a-zA-Z_][a-zA-Z0-9_ *]*[ *]([a-z_][a-z0-9_]*)\(' "$src/$1"/*.c 2>/dev/null |
    grep -v '^static' | sed -E 's/.*[ *]([a-z_][a-z0-9_]*)\($/\1/' | sort -u
}
calls=0
for hi in "${order[@]}"; do
  hr=$(rank "$hi")
  names=$(defs "$hi")
  [ -n "$names" ] || continue
  re=$(paste -sd'|' <<<"$names")
  for lo in "${order[@]}"; do
    [ "$(rank "$lo")" -gt "$hr" ] || continue
    [ -d "$src/$lo" ] || continue
    while IFS= read -r hit; do
      [ -n "$hit" ] || continue
      echo "FAIL: ${hit#"$src"/} calls a function of $hi/, a layer above $lo/"
      calls=$((calls + 1))
    done < <(grep -nE "\b($re)\(" "$src/$lo"/*.c 2>/dev/null)
  done
done
echo "calls from a layer to one above: $calls"
[ "$bad" = 0 ] && [ "$calls" = 0 ]
