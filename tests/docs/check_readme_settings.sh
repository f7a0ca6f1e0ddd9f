#!/usr/bin/env bash
# Every NCCL_FABRIC_* setting the plugin declares must be documented in the
# README's settings table. The list comes from the plugin itself.
set -euo pipefail
info="$1"; readme="$2"
names=$("$info" --settings | grep -o '^ *NCCL_FABRIC_[A-Z0-9_]*' | tr -d ' ')
[ -n "$names" ] || { echo "no settings printed by $info"; exit 1; }
missing=0
for n in $names; do
  if grep -q "| \`$n\` |" "$readme"; then
    echo "documented: $n"
  else
    echo "NOT documented in the README settings table: $n"; missing=1
  fi
done
exit $missing
