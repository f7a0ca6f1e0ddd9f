#!/usr/bin/env bash
# data_path.sh - the data path the plugin picks for a provider, as
# nccl-fabric-info --json reports it for device 0: RMA writes or not, with the
# reason. Used with the test provider's emulations (4 bytes of CQ data, ...).
# usage: data_path.sh NCCL_FABRIC_INFO WANT_RMA(true|false) [REASON_SUBSTRING]
set -u
info=$1 want=$2 reason=${3:-}
out=$("$info" --json 2>/dev/null)
got=$(grep -o '"rma_writes":[a-z]*' <<<"$out" | head -n 1 | cut -d: -f2)
why=$(grep -o '"data_path":"[^"]*"' <<<"$out" | head -n 1 | cut -d'"' -f4)
echo "device 0: rma_writes=${got:-?}: $why"
fail=0
[ "$got" = "$want" ] || { echo "FAIL  rma_writes is ${got:-missing}, expected $want"; fail=1; }
if [ -n "$reason" ] && [[ $why != *"$reason"* ]]; then
	echo "FAIL  the reason does not say: $reason"
	fail=1
fi
[ $fail = 0 ] && echo "1 passed, 0 failed" || echo "0 passed, 1 failed"
exit $fail
