#!/usr/bin/env bash
# A "current" performance table may only stand between the markers
#
#   <!-- perf-table settings: NCCL_FABRIC_X=VALUE NCCL_FABRIC_Y=VALUE ... -->
#   ...the table...
#   <!-- /perf-table -->
#
# each on a line of its own, where the settings are the NCCL_FABRIC_* values
# the run had (as `nccl-fabric-info --settings` prints them; "" or nothing
# for an empty value). This fails when a marker names a setting whose value
# differs from the plugin's default today, names a setting the plugin does not
# have, leaves out one it has (a setting added after the run: the table cannot
# say it ran with its default), or is malformed or unclosed. No marker at all passes, saying that no
# current table exists. The defaults come from the plugin itself, read with
# every NCCL_FABRIC_* variable of the environment unset.
#
# usage: check_perf_table.sh NCCL_FABRIC_INFO MARKDOWN
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 NCCL_FABRIC_INFO MARKDOWN"; exit 2; }
info="$1"; doc="$2"
[ -r "$doc" ] || { echo "FAIL: cannot read $doc"; exit 1; }

# The defaults: "  NAME   = VALUE   (default)" per setting, "" for empty.
unset_args=()
for v in $(env | sed -n 's/^\(NCCL_FABRIC_[A-Za-z0-9_]*\)=.*/\1/p'); do
  unset_args+=(-u "$v")
done
settings=$(env ${unset_args[@]+"${unset_args[@]}"} "$info" --settings)
declare -A def=()
while read -r name eq value _; do
  [ "$eq" = "=" ] || continue
  [ "$value" = '""' ] && value=""
  def[$name]=$value
done < <(printf '%s\n' "$settings" | grep '^ *NCCL_FABRIC_[A-Z0-9_]* *= ')
[ ${#def[@]} -gt 0 ] || { echo "FAIL: no settings printed by $info --settings"; exit 1; }

fail=0 tables=0 open_line=0 lineno=0
while IFS= read -r line || [ -n "$line" ]; do
  lineno=$((lineno + 1))
  case $line in
  '<!-- perf-table settings:'*)
    if [ $open_line -ne 0 ]; then
      echo "FAIL $doc:$lineno: a perf-table marker inside the one opened at line $open_line"
      fail=1
    fi
    open_line=$lineno tables=$((tables + 1))
    case $line in
    *'-->') ;;
    *) echo "FAIL $doc:$lineno: the perf-table marker does not end with --> on its line"; fail=1; continue ;;
    esac
    list=${line#'<!-- perf-table settings:'}
    list=${list%'-->'}
    count=0
    declare -A named=()
    for pair in $list; do
      count=$((count + 1))
      name=${pair%%=*}
      named[$name]=1
      if [ "$name" = "$pair" ]; then
        echo "FAIL $doc:$lineno: \"$pair\" is not NAME=VALUE"; fail=1; continue
      fi
      value=${pair#*=}
      [ "$value" = '""' ] && value=""
      if [ -z "${def[$name]+set}" ]; then
        echo "FAIL $doc:$lineno: $name is not a setting of the plugin"; fail=1
      elif [ "$value" != "${def[$name]}" ]; then
        echo "FAIL $doc:$lineno: the table ran with $name=${value:-\"\"}, today's default is ${def[$name]:-\"\"}: move it to the dated records"
        fail=1
      else
        echo "ok   $doc:$lineno: $name=${value:-\"\"} is today's default"
      fi
    done
    if [ $count -eq 0 ]; then
      echo "FAIL $doc:$lineno: the perf-table marker names no setting"; fail=1
    fi
    for name in $(printf '%s\n' "${!def[@]}" | sort); do
      if [ -z "${named[$name]+set}" ]; then
        echo "FAIL $doc:$lineno: the marker does not name $name: the table cannot say it ran with its default ${def[$name]:-\"\"}; measure again with today's defaults"
        fail=1
      fi
    done
    unset named
    ;;
  '<!-- /perf-table -->'*)
    if [ $open_line -eq 0 ]; then
      echo "FAIL $doc:$lineno: /perf-table without a perf-table marker before it"; fail=1
    fi
    open_line=0
    ;;
  '<!-- perf-table'* | '<!-- /perf-table'*)
    echo "FAIL $doc:$lineno: malformed perf-table marker: $line"; fail=1
    ;;
  esac
done < "$doc"
if [ $open_line -ne 0 ]; then
  echo "FAIL $doc:$open_line: the perf-table marker is never closed by <!-- /perf-table -->"
  fail=1
fi
if [ $tables -eq 0 ]; then
  echo "no current performance table in $doc (no perf-table marker): nothing to check"
elif [ $fail -eq 0 ]; then
  echo "$tables current performance table(s) in $doc, measured with today's defaults"
fi
exit $fail
