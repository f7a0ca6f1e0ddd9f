#!/usr/bin/env bash
# real_answers.sh - what real libfabric providers answer to
# FI_OPT_CUDA_API_PERMITTED=false, and what the plugin decides from it, on the
# libfabric these tests run on (scripts/test.sh: Debian 12's 1.17; 2.x without
# CUDA support; 2.x with libfabric's CUDA support loaded under the stub CUDA
# driver and runtime of tests/stubcuda). No test provider: tcp;ofi_rxm, native
# tcp and shm themselves. The expectations are the README's table ("What each
# provider answers"), written out below as data:
#
#   libfabric   tcp;ofi_rxm       native tcp           shm
#   1.17        -FI_ENOPROTOOPT   (none: "tcp" names   -FI_ENOPROTOOPT
#                                  tcp;ofi_rxm)
#   2.x         -FI_EINVAL        -FI_ENOPROTOOPT      -FI_EINVAL
#   2.x + CUDA  0, but no FI_HMEM -FI_ENOPROTOOPT      -FI_EOPNOTSUPP
#
# and, with CUDA, NCCL_FABRIC_HMEM=force moves GPU-registered buffers through
# shm with every byte checked, by libfabric's own CUDA copies (the stub
# runtime's cudaMemcpy is called).
#
# usage: real_answers.sh NCCL_FABRIC_INFO FABRIC_JSON_GET NCCL_FABRIC_CHECK PLUGIN STUBCUDA_DIR CUDA(0|1) NEWEST
# (NEWEST: the newest table version, which runs the hmem/* check)
set -u
info=$1 jget=$2 check=$3 plugin=$4 stubdir=$5 cuda=$6 newest=$7

# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
fabric_test_clean_env
# the stubs first: libfabric's dlopen("libcudart.so") and everyone's
# dlopen("libcuda.so.1") find them, not a toolkit's runtime
export LD_LIBRARY_PATH=$stubdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
if [ ! -e "$stubdir/libcuda.so.1" ] || [ ! -e "$stubdir/libcudart.so" ]; then
	echo "SKIP: needs the stub CUDA driver and runtime in $stubdir (tests/stubcuda)"
	exit 77
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/real_answers.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
failures=0 checks=0 label=""
fail() { echo "FAIL  $label: $*"; failures=$((failures + 1)); }
is() { checks=$((checks + 1)); [ "$2" = "$3" ] || fail "$1 is '$2', expected '$3'"; }
contains() { checks=$((checks + 1)); case $2 in *"$3"*) ;; *) fail "$1 '$2' lacks '$3'" ;; esac; }

# report LABEL VAR=VALUE... : nccl-fabric-info --json; V[] = the fields below
report() {
	label=$1
	shift
	env "$@" "$info" --plugin "$plugin" --json >"$tmp/out.json" 2>"$tmp/err"
	local rc=$?
	[ $rc = 0 ] || { fail "nccl-fabric-info exited $rc"; sed 's/^/    /' "$tmp/err" | head -5; }
	mapfile -t V < <("$jget" "$tmp/out.json" provider devices.0.cuda_api_permitted_rc \
		hmem.probe.attempted hmem.probe.cuda_api_permitted_rc hmem.verdict hmem.answer \
		hmem.reason hmem.remedy hmem.warning devices.0.ptrSupport provider_names \
		libfabric_runtime provider_variable 2>>"$tmp/err")
}

report "runtime"
lf=${V[11]:-}
new=$(fabric_lf_new "$lf") || { echo "FAIL  cannot read the run-time libfabric version"; exit 1; }
if [ "$new" = no ]; then
	kind=old
else
	kind=$([ "$cuda" = 1 ] && echo cuda || echo new)
fi
echo "libfabric $lf at run time; expectations: $kind"

# ---- tcp;ofi_rxm: no FI_HMEM entry, so its answer never decides
report "tcp;ofi_rxm" NCCL_FABRIC_PROVIDER="tcp;ofi_rxm"
is provider "${V[0]}" "tcp;ofi_rxm"
case $kind in
old) is "rxm's answer" "${V[1]}" -92 ;;
new) is "rxm's answer" "${V[1]}" -22 ;;
cuda) is "rxm's answer" "${V[1]}" 0 ;;
esac
is "probe attempted" "${V[2]}" false
is verdict "${V[4]}" "host only (provider has no FI_HMEM)"
is ptrSupport "${V[9]}" 1
contains reason "${V[6]}" "provider tcp;ofi_rxm does not advertise FI_HMEM"
# rxm 2.x: segments off (policy_traits.c, "segments freed as the wrong type")
if [ $kind = old ]; then
	is variable "${V[12]:-}" ""
else
	contains variable "${V[12]:-}" "FI_OFI_RXM_SAR_LIMIT=0 set: rxm of libfabric 2.0 and later crashes"
fi
echo "ok    $label: answers ${V[1]}, host memory (no FI_HMEM entry), variable '${V[12]:-}'"
if [ $kind != old ]; then
	report "tcp;ofi_rxm, FI_OFI_RXM_SAR_LIMIT set" NCCL_FABRIC_PROVIDER="tcp;ofi_rxm" \
		FI_OFI_RXM_SAR_LIMIT=65536
	contains variable "${V[12]:-}" "FI_OFI_RXM_SAR_LIMIT=65536 kept from the environment"
	echo "ok    $label: the environment's value kept and reported"
	report "tcp;ofi_rxm, FI_OFI_RXM_SAR_LIMIT=0 already" NCCL_FABRIC_PROVIDER="tcp;ofi_rxm" \
		FI_OFI_RXM_SAR_LIMIT=0
	contains variable "${V[12]:-}" "FI_OFI_RXM_SAR_LIMIT=0 already set: rxm of"
	echo "ok    $label: the plugin's own value is no warning"
fi

# ---- native tcp (2.x) / "tcp" names tcp;ofi_rxm (1.17)
report "tcp" NCCL_FABRIC_PROVIDER=tcp
if [ $kind = old ]; then
	is provider "${V[0]}" "tcp;ofi_rxm"
	contains names "${V[10]}" '"tcp" names the layered providers with tcp in them'
else
	is provider "${V[0]}" tcp
	contains names "${V[10]}" '"tcp" names provider tcp'
	is "native tcp's answer" "${V[1]}" -92
fi
is verdict "${V[4]}" "host only (provider has no FI_HMEM)"
[ $kind = old ] || is variable "${V[12]:-}" ""
echo "ok    $label: provider ${V[0]}, answers ${V[1]}"

# ---- shm, auto
report "shm, auto" NCCL_FABRIC_PROVIDER=shm
is provider "${V[0]}" shm
is "probe attempted" "${V[2]}" true
is verdict "${V[4]}" "host only (provider did not promise)"
is ptrSupport "${V[9]}" 1
is warning "${V[8]}" ""
case $kind in
old)
	is "shm's answer" "${V[3]}" -92
	is answer "${V[5]}" "-FI_ENOPROTOOPT: does not know the option (libfabric < 1.18 has no FI_OPT_CUDA_API_PERMITTED), so it cannot promise"
	contains remedy "${V[7]}" "predates FI_OPT_CUDA_API_PERMITTED (1.18)" ;;
new)
	is "shm's answer" "${V[3]}" -22
	is answer "${V[5]}" "-FI_EINVAL: libfabric's CUDA support is not active (built without CUDA, libcudart.so or libcuda.so.1 not found, or no GPU)"
	contains remedy "${V[7]}" "NCCL_FABRIC_HMEM=force cannot help"
	contains remedy "${V[7]}" "--with-cuda" ;;
cuda)
	is "shm's answer" "${V[3]}" -95
	is answer "${V[5]}" "-FI_EOPNOTSUPP: its FI_HMEM support needs the CUDA API"
	contains reason "${V[6]}" "NCCL forbids CUDA calls under it"
	contains remedy "${V[7]}" "shm copies GPU memory with the CUDA API" ;;
esac
echo "ok    $label: answers ${V[3]}, host memory"

# ---- shm, force
report "shm, force" NCCL_FABRIC_PROVIDER=shm NCCL_FABRIC_HMEM=force
case $kind in
old)
	is verdict "${V[4]}" "GPU memory (forced)"
	contains warning "${V[8]}" "NCCL_FABRIC_HMEM=force: GPU buffers go to shm" ;;
new)
	is verdict "${V[4]}" "host only (force refused: libfabric CUDA support inactive)"
	is ptrSupport "${V[9]}" 1
	contains warning "${V[8]}" "NCCL_FABRIC_HMEM=force ignored: shm answered FI_OPT_CUDA_API_PERMITTED with -FI_EINVAL" ;;
cuda)
	is verdict "${V[4]}" "GPU memory (forced)"
	is "ptrSupport & CUDA" $(( ${V[9]:-0} & 2 )) 2
	contains warning "${V[8]}" "deadlock" ;;
esac
echo "ok    $label: ${V[4]}"

# ---- shm, force, with libfabric's CUDA support: GPU buffers through shm
if [ $kind = cuda ]; then
	label="shm, force: data through libfabric's CUDA copies"
	log=$tmp/stub.log
	env NCCL_FABRIC_PROVIDER=shm NCCL_FABRIC_HMEM=force STUBCUDA_LOG="$log" \
		"$check" --plugin "$plugin" --provider shm --versions "$newest" --case 'hmem/*' >"$tmp/check" 2>&1
	rc=$?
	grep -E '^(PASS|FAIL|SKIP)|passed' "$tmp/check" | sed 's/^/    /'
	is "nccl-fabric-check exit status" $rc 0
	grep -q '^0 passed' "$tmp/check" && fail "no hmem case ran"
	grep -q 'NCCL_FABRIC_HMEM=force' "$tmp/check" || fail "no WARN about the forced decision"
	copies=$(grep -c '^cudaMemcpy$' "$log" 2>/dev/null)
	checks=$((checks + 1))
	[ "${copies:-0}" -gt 0 ] || fail "the stub runtime saw no cudaMemcpy: libfabric did not copy GPU memory"
	echo "ok    $label: ${copies:-0} cudaMemcpy calls by libfabric"
fi

echo "$((checks - failures)) passed, $failures failed"
[ $failures = 0 ]
