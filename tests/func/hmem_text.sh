#!/usr/bin/env bash
# hmem_text.sh - the story nccl-fabric-info tells in text, against the test
# provider testhmem: the provider named, the FI_OPT_CUDA_API_PERMITTED answer,
# the verdict, what NCCL will do (NCCL_NET_GDR_LEVEL when GPU memory is used,
# staging through host memory when not), the WARNING of a forced decision, and
# exit status 1 with the reason when NCCL_FABRIC_PROVIDER names no provider.
#
# usage: hmem_text.sh NCCL_FABRIC_INFO TESTPROV_DIR STUBCUDA_DIR
# Exit: 0 passed, 1 a check failed, 77 skipped (test provider or stub not built).
set -u

info=$1 provdir=$2 stubdir=$3

if [ ! -e "$provdir/libtesthmem-fi.so" ] || [ ! -e "$stubdir/libcuda.so.1" ]; then
	echo "SKIP: needs $provdir/libtesthmem-fi.so and $stubdir/libcuda.so.1 (tests/testprov, tests/stubcuda)"
	exit 77
fi
# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
fabric_test_clean_env
export FI_PROVIDER_PATH=$provdir
export LD_LIBRARY_PATH=$stubdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/hmem_text.XXXXXX") || exit 1
# What -FI_EINVAL means depends on the run-time libfabric (README table).
lf_runtime=$("$info" 2>/dev/null | sed -n 's/^  libfabric: *\([0-9]*\.[0-9]*\) at run time.*/\1/p')
lf_new=$(fabric_lf_new "$lf_runtime") ||
	{ echo "FAIL  cannot read the run-time libfabric version from nccl-fabric-info"; exit 1; }
echo "libfabric $lf_runtime at run time"
trap 'rm -rf "$tmp"' EXIT
failures=0 label=""

fail() {
	echo "FAIL  $label: $*"
	failures=$((failures + 1))
}

# story LABEL WANT_RC VAR=VALUE... [--json]: the report of one setting.
story() {
	label=$1 want_rc=$2
	shift 2
	local args=()
	if [ "${!#}" = --json ]; then
		args=(--json)
		set -- "${@:1:$#-1}"
	fi
	env "$@" "$info" "${args[@]}" >"$tmp/out" 2>"$tmp/err"
	local rc=$?
	if [ $rc != "$want_rc" ]; then
		fail "exit status $rc, expected $want_rc"
		sed 's/^/    stderr: /' "$tmp/err" | head -10
	fi
}

# has PATTERN [WHAT]: a line of the report matches the extended regex.
has() {
	grep -Eq -- "$1" "$tmp/out" || fail "no line matches /$1/${2:+ ($2)}"
}
hasnt() {
	! grep -Eq -- "$1" "$tmp/out" || fail "a line matches /$1/${2:+ ($2)}: $(grep -Em1 -- "$1" "$tmp/out")"
}
done_ok() {
	[ $failures = "$1" ] && echo "ok    $label"
}

# 1. The provider promises: GPU memory, and the NCCL_NET_GDR_LEVEL caveat.
before=$failures
story "answer ok, NCCL_FABRIC_HMEM=auto, a GPU" 0 \
	NCCL_FABRIC_PROVIDER=testhmem TESTHMEM_CUDA_API_PERMITTED=ok
has '^  provider: +testhmem' "the provider named"
has '^CUDA driver: version [0-9]+, 1 GPU' "the stub's GPU"
has 'ptrSupport HOST\|CUDA[,|]' "device 0 offers CUDA memory"
has 'FI_OPT_CUDA_API_PERMITTED=false answered 0' "the probe's answer"
has '^  verdict: +GPU memory \(provider promised\)'
has '^  NCCL: +.*NCCL_PTR_CUDA.*NCCL_NET_GDR_LEVEL' "what NCCL will do with GPU memory"
hasnt '^  WARNING:' "no warning when the provider promised"
hasnt 'stages every transfer through pinned host memory'
done_ok $before

# 2. The provider's FI_HMEM needs the CUDA API: host memory, NCCL stages.
before=$failures
story "answer -FI_EOPNOTSUPP, NCCL_FABRIC_HMEM=auto, a GPU" 0 \
	NCCL_FABRIC_PROVIDER=testhmem TESTHMEM_CUDA_API_PERMITTED=eopnotsupp
has '^  provider: +testhmem'
has 'ptrSupport HOST,' "device 0 offers host memory only"
has 'FI_OPT_CUDA_API_PERMITTED=false answered -FI_EOPNOTSUPP'
has '^  verdict: +host only \(provider did not promise\)'
has '^  NCCL: +.*stages every transfer through pinned host memory' "the staging sentence"
hasnt '^  NCCL: +.*NCCL_NET_GDR_LEVEL'
hasnt '^  WARNING:'
done_ok $before

# 3. Forced over -FI_EINVAL: GPU memory, with the WARNING repeating the answer.
before=$failures
story "answer -FI_EINVAL, NCCL_FABRIC_HMEM=force, a GPU" 0 \
	NCCL_FABRIC_PROVIDER=testhmem TESTHMEM_CUDA_API_PERMITTED=einval NCCL_FABRIC_HMEM=force
has '^  provider: +testhmem'
has 'FI_OPT_CUDA_API_PERMITTED=false answered -FI_EINVAL'
if [ "$lf_new" = yes ]; then
	# libfabric >= 1.18: -FI_EINVAL is libfabric's own CUDA support saying it is
	# off; force could not work and is refused, and the remedy says what to do
	has '^  verdict: +host only \(force refused' "force refused"
	has '^  NCCL: +.*stages every transfer through pinned host memory'
	has '^  WARNING: +NCCL_FABRIC_HMEM=force ignored: .*-FI_EINVAL' "the refusal's warning"
	has '^  remedy: +.*--with-cuda.*libcudart\.so' "the remedy for an inactive CUDA support"
	has '^  remedy: +.*FI_LOG_LEVEL=info' "how to tell why"
	hasnt '^  remedy: +.*uses it anyway'
else
	has '^  verdict: +GPU memory \(forced\)'
	has '^  NCCL: +.*NCCL_NET_GDR_LEVEL'
	has '^  WARNING: +.*NCCL_FABRIC_HMEM=force.*-FI_EINVAL' "the forced decision's warning"
fi
has 'NCCL_FABRIC_HMEM += force +\(environment\)' "the setting and its source"
done_ok $before

# The layout: the verdict first, the candidates only with --candidates.
before=$failures
story "verdict first" 0 NCCL_FABRIC_PROVIDER=testhmem TESTHMEM_CUDA_API_PERMITTED=eopnotsupp
first=$(grep -n -m1 '^Verdict:' "$tmp/out" | cut -d: -f1)
devs=$(grep -n -m1 '^Devices NCCL sees' "$tmp/out" | cut -d: -f1)
[ -n "$first" ] && [ -n "$devs" ] && [ "$first" -lt "$devs" ] || fail "no Verdict: block before the devices"
[ -n "$first" ] && [ "$first" -le 4 ] || fail "the Verdict: block is not at the top (line ${first:-none})"
has '^  libfabric: +[0-9]+\.[0-9]+ at run time \(/[^)]*libfabric\.so[^)]*\), plugin built against 1\.17 headers'
has '^  remedy: +.*copies GPU memory with the CUDA API' "the remedy for -FI_EOPNOTSUPP"
has '^Discovery: [0-9]+ fi_getinfo attempts, [0-9]+ candidates?, [0-9]+ kept; nccl-fabric-info --candidates'
hasnt '^Candidates:' "candidates only with --candidates"
done_ok $before
before=$failures
label="--candidates"
env NCCL_FABRIC_PROVIDER=testhmem TESTHMEM_CUDA_API_PERMITTED=eopnotsupp "$info" --candidates >"$tmp/out" 2>"$tmp/err" ||
	fail "nccl-fabric-info --candidates exited $?"
has '^Candidates:'
has '^ +[0-9]+\. testhmem .*\(API 1\.17\)' "testhmem (built against 1.17 headers) found at API 1.17"
has '-> KEPT: usable'
done_ok $before

# 4. No GPU (the stub reports none): host memory, and the report says why.
before=$failures
story "answer ok, NCCL_FABRIC_HMEM=auto, no GPU" 0 \
	NCCL_FABRIC_PROVIDER=testhmem TESTHMEM_CUDA_API_PERMITTED=ok STUBCUDA_DEVICES=0
has '^  provider: +testhmem'
has '^  verdict: +host only \(no GPU\)'
has '^  NCCL: +.*stages every transfer through pinned host memory'
done_ok $before

# 5. A provider that does not exist: exit 1, the reason, the name.
before=$failures
story "NCCL_FABRIC_PROVIDER=nosuchprovider" 1 NCCL_FABRIC_PROVIDER=nosuchprovider
has '^  provider: +NONE'
has 'nosuchprovider' "the reason names what was asked for"
grep -q 'no usable provider' "$tmp/err" || fail "stderr does not say 'no usable provider'"
done_ok $before
before=$failures
story "NCCL_FABRIC_PROVIDER=nosuchprovider, --json" 1 NCCL_FABRIC_PROVIDER=nosuchprovider --json
has '"provider":(""|null),' "--json: no provider"
has '"provider_reason":"[^"]*nosuchprovider' "--json: the reason names what was asked for"
done_ok $before

echo "$failures failed"
[ $failures = 0 ] || exit 1
exit 0
