#!/usr/bin/env bash
# check_perf_table.sh judged on made-up pages: a marker with every default
# passes; one that leaves a setting out, names a value other than the default,
# or names a setting the plugin lacks fails; a page without a marker passes.
#
# usage: check_perf_table_self.sh NCCL_FABRIC_INFO CHECK_PERF_TABLE
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 NCCL_FABRIC_INFO CHECK_PERF_TABLE"; exit 2; }
info=$1 check=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset_args=()
for v in $(env | sed -n 's/^\(NCCL_FABRIC_[A-Za-z0-9_]*\)=.*/\1/p'); do
  unset_args+=(-u "$v")
done
# NAME=VALUE for every setting, as --settings prints its default
mapfile -t pairs < <(env ${unset_args[@]+"${unset_args[@]}"} "$info" --settings |
  awk '$2 == "=" && $1 ~ /^NCCL_FABRIC_/ {print $1 "=" $3}')
[ ${#pairs[@]} -ge 2 ] || { echo "FAIL: $info --settings printed ${#pairs[@]} settings"; exit 1; }
page() { # page FILE PAIRS...: a marked table with these settings
  local f=$1; shift
  printf '# t\n\n<!-- perf-table settings: %s -->\n| a |\n|---|\n| 1 |\n<!-- /perf-table -->\n' "$*" >"$f"
}
fail=0
expect() { # expect 0|1 WHAT FILE
  local want=$1 what=$2 f=$3 rc=0 out
  out=$(env ${unset_args[@]+"${unset_args[@]}"} "$check" "$info" "$f" 2>&1) || rc=$?
  if { [ "$want" = 0 ] && [ $rc = 0 ]; } || { [ "$want" = 1 ] && [ $rc != 0 ]; }; then
    echo "ok   $what (exit $rc)"
  else
    echo "FAIL $what: exit $rc, expected $([ "$want" = 0 ] && echo 0 || echo nonzero)"
    printf '%s\n' "$out" | sed 's/^/    /'
    fail=1
  fi
}
page "$tmp/all.md" "${pairs[@]}"
expect 0 "every setting at its default" "$tmp/all.md"
last=$((${#pairs[@]} - 1))
page "$tmp/missing.md" "${pairs[@]:0:$last}"
expect 1 "${pairs[$last]%%=*} left out" "$tmp/missing.md"
grep -q "does not name ${pairs[$last]%%=*}" <(env ${unset_args[@]+"${unset_args[@]}"} "$check" "$info" "$tmp/missing.md" 2>&1 || true) ||
  { echo "FAIL: the missing setting is not named in the checker's output"; fail=1; }
page "$tmp/changed.md" "${pairs[@]:1}" "${pairs[0]%%=*}=not-the-default"
expect 1 "${pairs[0]%%=*} not at its default" "$tmp/changed.md"
page "$tmp/unknown.md" "${pairs[@]}" NCCL_FABRIC_NO_SUCH=1
expect 1 "a setting the plugin lacks" "$tmp/unknown.md"
printf '# no table\n' >"$tmp/none.md"
expect 0 "no marker" "$tmp/none.md"
exit $fail
