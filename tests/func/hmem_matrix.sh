#!/usr/bin/env bash
# hmem_matrix.sh - the GPU-memory decision, end to end: nccl-fabric-info --json
# (which loads the real plugin) against the test provider testhmem, for every
# FI_OPT_CUDA_API_PERMITTED answer x NCCL_FABRIC_HMEM x GPU present/absent, plus
# the FI_HMEM_P2P stances and the default provider choice with and without
# testhmem on FI_PROVIDER_PATH.
#
# The expectations are the README's table ("Will NCCL use my provider's
# FI_HMEM?"), written out below as data: they are not taken from a run.
#
# usage: hmem_matrix.sh NCCL_FABRIC_INFO FABRIC_JSON_GET TESTPROV_DIR STUBCUDA_DIR
# Exit: 0 passed, 1 a check failed, 77 skipped (test provider or stub not built).
set -u

info=$1 jget=$2 provdir=$3 stubdir=$4

if [ ! -e "$provdir/libtesthmem-fi.so" ] || [ ! -e "$stubdir/libcuda.so.1" ]; then
	echo "SKIP: needs $provdir/libtesthmem-fi.so and $stubdir/libcuda.so.1 (tests/testprov, tests/stubcuda)"
	exit 77
fi

# Start from a clean slate: nothing of the caller's may steer the plugin, the
# test provider or the stub.
# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
fabric_test_clean_env
# The caller's library path without the stub (for "no CUDA driver"), and with it first.
ld_plain=""
IFS=: read -ra ld_dirs <<<"${LD_LIBRARY_PATH:-}"
for d in "${ld_dirs[@]}"; do
	[ -n "$d" ] && [ "$d" != "$stubdir" ] && ld_plain=${ld_plain:+$ld_plain:}$d
done
ld_stub=$stubdir${ld_plain:+:$ld_plain}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/hmem_matrix.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

failures=0
checks=0
label=""

# The run-time libfabric: what -FI_EINVAL means depends on it (README table).
lf_runtime=$("$info" --json 2>/dev/null | "$jget" - libfabric_runtime 2>/dev/null)
lf_new=$(fabric_lf_new "$lf_runtime") ||
	{ echo "FAIL  cannot read the run-time libfabric version from nccl-fabric-info --json"; exit 1; }
echo "libfabric $lf_runtime at run time"

fail() {
	echo "FAIL  $label: $*"
	failures=$((failures + 1))
}

# The runs are independent: they are started together (a few at a time, each
# pays ~0.3 s of libfabric start-up) and checked afterwards, in order.
jobs_max=$(($(nproc 2>/dev/null || echo 2) * 2))
[ $jobs_max -gt 8 ] && jobs_max=8
# start ID VAR=VALUE... : nccl-fabric-info --json with exactly these settings.
start() {
	local id=$1
	shift
	while [ "$(jobs -rp | wc -l)" -ge $jobs_max ]; do
		wait -n
	done
	(
		env "$@" "$info" --json >"$tmp/$id.json" 2>"$tmp/$id.err"
		echo $? >"$tmp/$id.rc"
	) &
}

# use ID LABEL : check that run from now on; run_rc is its exit status.
use() {
	label=$2
	cp "$tmp/$1.json" "$tmp/out.json"
	cp "$tmp/$1.err" "$tmp/err"
	run_rc=$(cat "$tmp/$1.rc")
	if [ "$run_rc" != 0 ]; then
		fail "nccl-fabric-info exited $run_rc"
		sed 's/^/    /' "$tmp/err" | head -10
		return 1
	fi
}

# get PATH... : values of the last run's JSON into V[0..]. Returns 1 (after
# reporting) if the JSON is invalid or a path is missing.
get() {
	if ! "$jget" "$tmp/out.json" "$@" >"$tmp/vals" 2>"$tmp/jerr"; then
		fail "JSON: $(tr '\n' ' ' <"$tmp/jerr")"
		sed 's/^/    stderr: /' "$tmp/err" | head -5
		V=()
		return 1
	fi
	mapfile -t V <"$tmp/vals"
	return 0
}

# is WHAT GOT WANT
is() {
	checks=$((checks + 1))
	[ "$2" = "$3" ] || fail "$1 is '$2', expected '$3'"
}

rc_of() {
	case $1 in
	ok) echo 0 ;;
	eopnotsupp) echo -95 ;;   # -FI_EOPNOTSUPP
	einval) echo -22 ;;       # -FI_EINVAL
	enoprotoopt) echo -92 ;;  # -FI_ENOPROTOOPT
	esac
}

# The README's decision, in its order: setting off; provider without FI_HMEM;
# no usable GPU; the answer to FI_OPT_CUDA_API_PERMITTED=false (0: used;
# anything else: host memory only, or GPU memory with a WARN under force).
# Prints: verdict|use_hmem|ptrSupport|warning (yes/no)
expected() {
	local answer=$1 mode=$2 gpu=$3 hmem_prov=${4:-yes}
	if [ "$mode" = off ]; then
		echo "off (setting)|false|1|no"
	elif [ "$hmem_prov" = no ]; then
		echo "host only (provider has no FI_HMEM)|false|1|no"
	elif [ "$gpu" = no ]; then
		echo "host only (no GPU)|false|1|no"
	elif [ "$answer" = ok ]; then
		echo "GPU memory (provider promised)|true|3|no"
	elif [ "$mode" = force ] && [ "$answer" = einval ] && [ "$lf_new" = yes ]; then
		# from libfabric 1.18 on, -FI_EINVAL says libfabric's CUDA support is
		# off: force could not register GPU memory and is refused, with a WARN
		echo "host only (force refused: libfabric CUDA support inactive)|false|1|yes"
	elif [ "$mode" = force ]; then
		echo "GPU memory (forced)|true|3|yes"
	else
		echo "host only (provider did not promise)|false|1|no"
	fi
}

dmabuf_mask=7
# check_decision ANSWER MODE GPU [HMEM_PROVIDER]: the hmem block and device 0.
check_decision() {
	local want use ptr warn
	IFS='|' read -r want use ptr warn <<<"$(expected "$@")"
	get hmem.setting hmem.verdict hmem.use_hmem hmem.ptrSupport devices.0.ptrSupport \
		hmem.warning hmem.reason devices.# || return
	is "hmem.setting" "${V[0]}" "$2"
	is "hmem.verdict" "${V[1]}" "$want"
	is "hmem.use_hmem" "${V[2]}" "$use"
	is "hmem.ptrSupport" "$((V[3] & dmabuf_mask))" "$ptr"
	is "devices[0].ptrSupport" "$((V[4] & dmabuf_mask))" "$ptr"
	if [ "$warn" = yes ]; then
		checks=$((checks + 1))
		[ -n "${V[5]}" ] || fail "hmem.warning is empty; a forced decision must carry a WARN"
	else
		is "hmem.warning" "${V[5]}" ""
	fi
	checks=$((checks + 1))
	[ -n "${V[6]}" ] || fail "hmem.reason is empty"
	checks=$((checks + 1))
	[ "${V[7]}" -ge 1 ] 2>/dev/null || fail "devices[] is empty"
}

# ------------------------------------------------------------ start every run
# GPU present: the stub with one device. Absent: no driver at all (the stub
# not on the path), and a driver that reports no device (STUBCUDA_DEVICES=0).
gpu_env() {
	case $1 in
	stub1) genv=(LD_LIBRARY_PATH="$ld_stub" STUBCUDA_DEVICES=1) has_gpu=yes ;;
	nostub) genv=(LD_LIBRARY_PATH="$ld_plain") has_gpu=no ;;
	stub0) genv=(LD_LIBRARY_PATH="$ld_stub" STUBCUDA_DEVICES=0) has_gpu=no ;;
	esac
}
gpus="stub1 nostub stub0"
answers="ok eopnotsupp einval enoprotoopt"
modes="auto force off"
p2ps="enabled required preferred disabled enoprotoopt"
for gpu in $gpus; do
	gpu_env $gpu
	for answer in $answers; do
		for mode in $modes; do
			start "m-$gpu-$answer-$mode" "${genv[@]}" FI_PROVIDER_PATH="$provdir" \
				NCCL_FABRIC_PROVIDER=testhmem NCCL_FABRIC_HMEM=$mode \
				TESTHMEM_CUDA_API_PERMITTED=$answer
		done
	done
done
for p2p in $p2ps; do
	start "p2p-$p2p" LD_LIBRARY_PATH="$ld_stub" FI_PROVIDER_PATH="$provdir" \
		NCCL_FABRIC_PROVIDER=testhmem TESTHMEM_CUDA_API_PERMITTED=ok TESTHMEM_P2P=$p2p
done
for mode in auto force; do
	start "default-path-$mode" LD_LIBRARY_PATH="$ld_stub" FI_PROVIDER_PATH="$provdir" \
		NCCL_FABRIC_HMEM=$mode TESTHMEM_CUDA_API_PERMITTED=ok
	start "default-nopath-$mode" LD_LIBRARY_PATH="$ld_stub" NCCL_FABRIC_HMEM=$mode
done
wait

# ------------------------------------------------------------ libfabric version
use m-stub1-ok-auto "libfabric version" || exit 1
get libfabric_runtime || exit 1
fi_ver=${V[0]}
fi_major=${fi_ver%%.*} fi_minor=${fi_ver#*.}
if [ "$fi_major" -gt 1 ] || [ "$fi_minor" -ge 20 ]; then
	# FI_MR_DMABUF exists: whether NCCL_PTR_DMABUF is added is not this test's matter.
	dmabuf_mask=3
	echo "# libfabric $fi_ver: NCCL_PTR_DMABUF not checked (>= 1.20)"
else
	get hmem.dmabuf && is "hmem.dmabuf (libfabric $fi_ver < 1.20)" "${V[0]}" false
fi

# ------------------------------------------------------------ the matrix
real_driver=no
for gpu in $gpus; do
	gpu_env $gpu
	for answer in $answers; do
		for mode in $modes; do
			before=$failures
			use "m-$gpu-$answer-$mode" "gpu=$gpu answer=$answer NCCL_FABRIC_HMEM=$mode" || continue
			get provider cuda.driver cuda.gpus hmem.probe.attempted hmem.probe.opened \
				hmem.probe.cuda_api_permitted_rc devices.0.cuda_api_permitted_rc || continue
			if [ $gpu = nostub ] && [ "${V[1]}" = true ]; then
				# A real libcuda.so.1 on this machine: "no driver" cannot be made here.
				real_driver=yes
				break 2
			fi
			is "provider" "${V[0]}" testhmem
			case $gpu in
			stub1) is "cuda.gpus" "${V[2]}" 1 ;;
			nostub) is "cuda.driver" "${V[1]}" false ;;
			stub0) is "cuda.driver" "${V[1]}" true && is "cuda.gpus" "${V[2]}" 0 ;;
			esac
			# The probe endpoint is opened whenever the provider has FI_HMEM, and
			# every endpoint hears the question: the answers are the provider's.
			is "hmem.probe.attempted" "${V[3]}" true
			is "hmem.probe.opened" "${V[4]}" true
			is "hmem.probe.cuda_api_permitted_rc" "${V[5]}" "$(rc_of $answer)"
			is "devices[0].cuda_api_permitted_rc" "${V[6]}" "$(rc_of $answer)"
			check_decision $answer $mode $has_gpu
			[ $failures = "$before" ] &&
				echo "ok    $label -> $(expected $answer $mode $has_gpu | cut -d'|' -f1)"
		done
	done
done
if [ $real_driver = yes ]; then
	echo "# gpu=nostub: skipped, a real libcuda.so.1 is on this machine (cuda.driver true without the stub)"
fi

# ------------------------------------------------------------ FI_HMEM_P2P
# The GPUDirect stance is reported, and both stances are usable (README, step 4).
for p2p in $p2ps; do
	before=$failures
	use "p2p-$p2p" "TESTHMEM_P2P=$p2p" || continue
	get hmem.probe.p2p_rc hmem.probe.p2p hmem.gpudirect || continue
	case $p2p in
	enabled) rc=0 val=0 words="GPUDirect enabled" ;;
	required) rc=0 val=1 words="GPUDirect required" ;;
	preferred) rc=0 val=2 words="GPUDirect preferred" ;;
	disabled) rc=0 val=3 words="no GPUDirect" ;;
	enoprotoopt) rc=-92 val="" words="not reported" ;;
	esac
	gpudirect=${V[2]}
	is "hmem.probe.p2p_rc" "${V[0]}" $rc
	[ -n "$val" ] && is "hmem.probe.p2p" "${V[1]}" $val
	checks=$((checks + 1))
	case $gpudirect in
	*"$words"*) ;;
	*) fail "hmem.gpudirect is '$gpudirect', expected it to say '$words'" ;;
	esac
	check_decision ok auto yes
	[ $failures = "$before" ] && echo "ok    $label -> gpudirect: $gpudirect"
done

# ------------------------------------------------------------ default provider
# No NCCL_FABRIC_PROVIDER, testhmem on FI_PROVIDER_PATH: FI_HMEM-capable
# providers come first, so testhmem wins over tcp;ofi_rxm.
for mode in auto force; do
	before=$failures
	use "default-path-$mode" "default provider, testhmem on the path, NCCL_FABRIC_HMEM=$mode" ||
		continue
	get provider candidates.# attempts.0.label || continue
	prov=${V[0]} ncand=${V[1]} first_attempt=${V[2]}
	if [ "$prov" != testhmem ] && [ "$prov" != "tcp;ofi_rxm" ]; then
		echo "# $label: skipped, this machine's first provider is $prov"
		continue
	fi
	is "provider" "$prov" testhmem
	checks=$((checks + 1))
	case $first_attempt in
	FI_HMEM*) ;;
	*) fail "the first discovery attempt is '$first_attempt', expected an FI_HMEM one" ;;
	esac
	kept_hmem=no rxm_passed=no
	for ((c = 0; c < ncand; c++)); do
		get candidates.$c.provider candidates.$c.kept candidates.$c.hmem candidates.$c.attempt ||
			break
		if [ "${V[1]}" = true ]; then
			is "kept candidate $c's provider" "${V[0]}" testhmem
			# attempt 1, or on libfabric >= 1.18 its API 1.17 twin (attempt 2):
			# testhmem is built against 1.17 headers
			[ "${V[2]}" = true ] && { [ "${V[3]}" = 1 ] || { [ "$lf_new" = yes ] && [ "${V[3]}" = 2 ]; }; } &&
				kept_hmem=yes
		fi
		[ "${V[0]}" = "tcp;ofi_rxm" ] && [ "${V[1]}" = false ] && rxm_passed=yes
	done
	is "a kept FI_HMEM candidate from the first FI_HMEM ask" $kept_hmem yes
	is "tcp;ofi_rxm offered and passed over" $rxm_passed yes
	check_decision ok $mode yes
	[ $failures = "$before" ] && echo "ok    $label -> testhmem (FI_HMEM first)"
done

# Without FI_PROVIDER_PATH: tcp;ofi_rxm, which has no FI_HMEM: host memory only,
# whatever NCCL_FABRIC_HMEM says, and no probe endpoint.
for mode in auto force; do
	before=$failures
	use "default-nopath-$mode" "default provider, no FI_PROVIDER_PATH, NCCL_FABRIC_HMEM=$mode" ||
		continue
	get provider hmem.probe.attempted || continue
	if [ "${V[0]}" != "tcp;ofi_rxm" ] && [ "${V[0]}" != testhmem ]; then
		echo "# $label: skipped, this machine's first provider is ${V[0]}"
		continue
	fi
	is "provider" "${V[0]}" "tcp;ofi_rxm"
	is "hmem.probe.attempted" "${V[1]}" false
	check_decision ok $mode yes no
	[ $failures = "$before" ] && echo "ok    $label -> tcp;ofi_rxm, host memory only"
done

echo "$checks checks, $failures failed"
[ $failures = 0 ] || exit 1
exit 0
