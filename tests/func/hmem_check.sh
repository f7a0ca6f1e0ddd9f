#!/usr/bin/env bash
# hmem_check.sh - runs nccl-fabric-check (the hmem/* cases) against the test
# provider testhmem, then reads the provider's own log (TESTHMEM_LOG) to prove
# that the buffers the checker registered as GPU memory reached the provider
# as GPU memory: `reg iface=cuda` lines, and at domain close an
# `ops iface=cuda` summary with sends and receives. The plugin is a black box
# to the checker; the log is the provider's side of the story.
#
# usage: hmem_check.sh [--ops|--ops-writes] [--answer ANSWER] [--warn TEXT] -- NCCL-FABRIC-CHECK ARGS...
#   --ops          require an `ops iface=cuda` line with sends>0 and recvs>0. The
#                  line is written when a domain closes: the plugin closes its
#                  domains at the last finalize, which NCCL (and the checker)
#                  calls from net v11 on; ranks of v6-v10 exit with the domain
#                  open, so their traffic is never summarised.
#   --ops-writes   require one with writes>0 instead: a provider without tags
#                  moves every message as an RMA write from GPU memory
#   --answer A     every `setopt cuda_api_permitted=` line answers A (the plugin
#                  asked the question on its endpoints and heard the provider)
#   --warn TEXT    the checker's output has a WARN line containing TEXT
# Environment: TESTHMEM_LOG (required; removed before the run).
# Exit: the checker's status if it is not 0 (77: everything skipped), else 1 if
# a log check failed, else 0.
set -u

want_ops=no answer="" warn=""
while [ $# -gt 0 ]; do
	case $1 in
	--ops) want_ops=yes ;;
	--ops-writes) want_ops=writes ;;
	--answer) answer=$2; shift ;;
	--warn) warn=$2; shift ;;
	--) shift; break ;;
	*) echo "hmem_check.sh: unknown option $1" >&2; exit 2 ;;
	esac
	shift
done
log=${TESTHMEM_LOG:?hmem_check.sh needs TESTHMEM_LOG}
rm -f "$log"

out=$(mktemp "${TMPDIR:-/tmp}/hmem_check.XXXXXX") || exit 1
trap 'rm -f "$out"' EXIT
"$@" 2>&1 | tee "$out"
rc=${PIPESTATUS[0]}
if [ "$rc" != 0 ]; then
	[ "$rc" = 77 ] && echo "# everything skipped: no log to check"
	exit "$rc"
fi

echo "# TESTHMEM_LOG $log"
failures=0
fail() {
	echo "FAIL  log: $*"
	failures=$((failures + 1))
}
if [ ! -s "$log" ]; then
	fail "the provider wrote nothing: testhmem was not used?"
	exit 1
fi

# 1. GPU registrations reached the provider as FI_HMEM_CUDA.
nreg=$(grep -c '^reg iface=cuda ' "$log")
[ "$nreg" -gt 0 ] || fail "no 'reg iface=cuda' line: no buffer reached the provider as GPU memory"
echo "# reg iface=cuda: $nreg registration(s)"

# 2. The traffic of those buffers, summarised at domain close.
nops=0 nbusy=0
while read -r line; do
	nops=$((nops + 1))
	sends=$(sed -n 's/.* sends=\([0-9]*\).*/\1/p' <<<"$line")
	recvs=$(sed -n 's/.* recvs=\([0-9]*\).*/\1/p' <<<"$line")
	writes=$(sed -n 's/.* writes=\([0-9]*\).*/\1/p' <<<"$line")
	if [ $want_ops = writes ]; then
		sends=${writes:-0} recvs=${writes:-0}
	fi
	if [ "${sends:-0}" -gt 0 ] && [ "${recvs:-0}" -gt 0 ]; then
		nbusy=$((nbusy + 1))
		[ $nbusy = 1 ] && echo "# $line"
	fi
done < <(grep '^ops iface=cuda ' "$log")
echo "# ops iface=cuda: $nops summaries, $nbusy with sends and receives"
if [ $want_ops = writes ] && [ $nbusy = 0 ]; then
	fail "no 'ops iface=cuda' summary with writes>0 (domains closed: $(grep -c '^domain close' "$log"))"
elif [ $want_ops = yes ] && [ $nbusy = 0 ]; then
	fail "no 'ops iface=cuda' summary with sends>0 and recvs>0 (domains closed: $(grep -c '^domain close' "$log"))"
fi

# 3. Every data operation carried a registered descriptor that holds its buffer.
bad=$(grep -E '^error (bad-desc|desc-range|nodesc-cuda)' "$log" | head -3)
[ -z "$bad" ] || fail "the provider saw operations with a wrong or missing descriptor: $bad"
badcheck=$(grep '^check ' "$log" | grep -v 'bad_desc=0 nodesc_cuda=0 copy_errors=0' | head -3)
[ -z "$badcheck" ] || fail "a domain closed with errors: $badcheck"

# 4. The plugin asked FI_OPT_CUDA_API_PERMITTED and got the configured answer.
if [ -n "$answer" ]; then
	nset=$(grep -c '^setopt cuda_api_permitted=' "$log")
	other=$(grep '^setopt cuda_api_permitted=' "$log" | grep -v "^setopt cuda_api_permitted=$answer " | head -3)
	[ "$nset" -gt 0 ] || fail "the plugin never set FI_OPT_CUDA_API_PERMITTED"
	[ -z "$other" ] || fail "setopt answers other than $answer: $other"
	echo "# setopt cuda_api_permitted=$answer: $nset endpoint(s)"
fi

# 5. The WARN the setting demands.
if [ -n "$warn" ]; then
	grep -F -- "$warn" "$out" | grep -q 'WARN' ||
		fail "no WARN line containing '$warn' in the checker's output"
fi

[ $failures = 0 ] || exit 1
echo "# log checks passed"
exit 0
