#!/usr/bin/env bash
# Every NCCL_FABRIC_* setting the plugin declares must have a row in each
# settings table given: the README's one-line table and docs/settings.md's
# full one (a row starts with "| `NAME` |"). The list comes from the plugin
# itself; a row for a setting the plugin does not have fails too.
#
# usage: check_readme_settings.sh NCCL_FABRIC_INFO MARKDOWN...
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 NCCL_FABRIC_INFO MARKDOWN..."; exit 2; }
info="$1"; shift
names=$("$info" --settings | grep -o '^ *NCCL_FABRIC_[A-Z0-9_]*' | tr -d ' ')
[ -n "$names" ] || { echo "no settings printed by $info"; exit 1; }
missing=0
for doc in "$@"; do
  [ -r "$doc" ] || { echo "FAIL: cannot read $doc"; missing=1; continue; }
  for n in $names; do
    if grep -q "^| \`$n\` |" "$doc"; then
      echo "documented in $doc: $n"
    else
      echo "NOT documented in the settings table of $doc: $n"; missing=1
    fi
  done
  # rows naming settings the plugin does not have
  for n in $(grep -o '^| `NCCL_FABRIC_[A-Z0-9_]*` |' "$doc" | tr -d '|` '); do
    if ! printf '%s\n' $names | grep -qx "$n"; then
      echo "NOT a setting of the plugin, but a row in $doc: $n"; missing=1
    fi
  done
done
exit $missing
