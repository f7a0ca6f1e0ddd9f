#!/usr/bin/env bash
# run-gpu.sh - build and run nccl-fabric's GPU checks and benchmarks, in stages.
#
#   bench/run-gpu.sh STAGE [STAGE...]
#
# Stages (each fits a job limited to 10 minutes; results are appended as
# they come, so a killed stage keeps what it finished):
#   nccl                build NCCL from source (NCCL_SRC: a folder or a .tar.*
#                       of NVIDIA's nccl repository) for NCCL_GENCODE into
#                       build-bench/nccl-built, or unpack a build brought back
#                       earlier (NCCL_PREBUILT); with FABRIC_BENCH_OUT set, packs it there as
#                       nccl-built.tar.xz.part-* to carry next time. Later
#                       stages use it with NCCL_HOME=built
#   setup               unpack the carried libfabric .debs, build or pick the
#                       plugin, build nccl_bench against NCCL_HOME's NCCL
#                       (default: the Python wheel's)
#   correctness         every collective, 8 B..16 MiB, through the plugin over
#                       tcp;ofi_rxm and over shm, one process with all GPUs and
#                       one process per GPU; checks data and NCCL's log; then
#                       gpu-buffers' multi runs (GPU buffers, RMA writes on
#                       and off)
#   torch               torch_check.py (PyTorch NCCL backend) through the plugin;
#                       with NCCL_HOME set, that NCCL is preloaded in place of the wheel's
#   bench-fabric-tcp    full sweep to 1 GiB: plugin over tcp;ofi_rxm
#   bench-fabric-tcp-rails  same with NCCL_FABRIC_RAILS=4 (FABRIC_RAILS) and
#                       NCCL_FABRIC_PROGRESS_THREADS=1: four streams, four threads
#   bench-fabric-shm    full sweep to 1 GiB: plugin over shm
#   bench-fabric-tcp-native  full sweep: plugin over libfabric 2.x's native tcp
#   bench-fabric-default  full sweep: plugin with no NCCL_FABRIC_PROVIDER, its own
#                       choice (on an emulated cluster, FABRIC_NETNS=1, what a
#                       real cluster gets)
#   bench-socket        full sweep to 1 GiB: NCCL's internal Socket transport
#   bench-socket-tuned  same, NCCL_SOCKET_NTHREADS=4 NCCL_NSOCKS_PERTHREAD=4
#   bench-socket-best   Socket's best tuning here: 4 threads x 4 sockets and
#                       NCCL_MIN_NCHANNELS=8 (BEST_CHANNELS)
#   bench-fabric-tcp-best  the plugin's best tuning: the rails stage's settings
#                       and NCCL_MIN_NCHANNELS=8 (BEST_CHANNELS)
#   gpu-buffers         plugin with the testhmem provider in CUDA mode (GPU
#                       buffers, GPUDirect path): single mode (2+ GPUs), multi
#                       mode with the default data path and with
#                       NCCL_FABRIC_RMA=0; checks GDRDMA in NCCL's log, data,
#                       the provider's log (RMA writes landed in GPU memory),
#                       and a sweep
#   libfabric           the plugin on the libfabric of this setup (FABRIC_LF2_DIR:
#                       a CUDA-enabled 2.x built on the CPU machine with
#                       scripts/libfabric-2x.sh --cuda): every collective over
#                       the default provider, native tcp, tcp;ofi_rxm, shm, and shm with
#                       NCCL_FABRIC_HMEM=force (GPU buffers to shm, GDRDMA
#                       checked); prints each path's GPU-memory decision lines
#   rma                 NCCL 2.30+ (NCCL_HOME=built): NCCL's RMA plugin from this
#                       .so, multi mode over RMA_PATHS (default fabric-gpu:
#                       testhmem in CUDA mode; fabric-shm-force needs
#                       FABRIC_LF2_DIR's CUDA-enabled shm), buffers in symmetric windows (nccl_bench --sym): ncclPutSignal
#                       rings (put_signal), the copy-engine collectives
#                       (NCCL_CTA_POLICY=ZERO: all_gather, alltoall, whose
#                       inter-host puts go through the RMA proxy) and the default
#                       ones; then a control run with NCCL_FABRIC_RMA_PLUGIN=off
#                       whose outcome (NCCL's own words) is reported, not judged.
#                       Prints NCCL's RMA/GIN lines and the plugin's verdict
#   netns-perf          nccl-fabric-perf --compare (plugin and raw libfabric)
#                       between two emulated hosts (see FABRIC_NETNS; made
#                       here whether or not it is set) and over loopback, per
#                       provider (NETNS_PERF_PROVIDERS, default 'default tcp
#                       tcp;ofi_rxm'; NETNS_PERF_SIZES; NETNS_PERF_RAW_OP=write:
#                       raw RMA writes as the baseline; NETNS_PERF_LOOPBACK=0:
#                       no loopback rows; NETNS_PERF_ARGS: more options,
#                       e.g. "--bidir --rounds 3": both ways at once, the
#                       paths alternating in rounds), and one python3 TCP
#                       stream: the link's raw rate. Rows into netns-perf.csv
#                       (--bidir's paths are plugin-bidir, raw-bidir). FABRIC_PERF:
#                       the binary (default: bin/ beside the plugin's lib/).
#                       Not in 'all'
#   plot                merge the sweep CSVs, print a table, draw busbw.png
#   all                 every stage above in order (needs more than 10 minutes)
#
# Every stage after setup checks that setup ran on this machine with this
# working tree and re-runs it if not (a fresh machine, or changed sources).
# plot needs no GPU and no setup.
#
# Output folder: $FABRIC_BENCH_OUT, else
# bench/out/<date>. It holds summary.txt, correctness.csv, bench.csv,
# torch.txt, results.csv, busbw.png and one logs-<id>.tar.gz per invocation
# (raw logs stay in build-bench/logs). Exit status: 0 when every stage passed,
# 1 when a check failed, 2 on a setup or usage error.
#
# Settings (environment):
#   NCCL_HOME            the NCCL every run uses: a prefix with include/nccl.h and
#                        lib/libnccl.so.2, or 'built' for the nccl stage's build;
#                        default: the nvidia-nccl wheel PyTorch uses. Its lib/
#                        goes first on LD_LIBRARY_PATH, nccl_bench is built
#                        against its headers, and every run checks that NCCL
#                        loaded the newest net API it has (v11 for 2.28/2.29,
#                        v12 from 2.30)
#   NCCL_SRC             NCCL's source for the nccl stage (folder or tarball)
#   NCCL_PREBUILT        folder holding nccl-built.tar.xz.part-* from an earlier
#                        nccl stage: unpacked instead of building
#   NCCL_GENCODE         nvcc -gencode flags for the nccl stage (default sm_90
#                        only: "-gencode=arch=compute_90,code=sm_90")
#   FABRIC_DEBS          folder of Debian libfabric .debs (default .debs/)
#   FABRIC_LF2_DIR       a libfabric install prefix to use instead of the .debs
#                        (lib/, bin/); /usr/local/cuda/lib64 joins the library
#                        path so its CUDA support finds libcudart.so
#   FABRIC_VHOSTS        N >= 2: multi-process runs start N ranks on GPU 0, each
#                        its own "host" (NCCL_HOSTID=vhost<rank>) under CUDA MPS,
#                        so one GPU is enough for the network path
#   FABRIC_PLUGIN_DIR    use the prebuilt libnccl-net-fabric.so in this folder
#                        instead of building the plugin here
#   FABRIC_CMAKE_ARGS    extra cmake arguments for the plugin build
#   FABRIC_TESTPROV      path of libtesthmem-fi.so (default: searched beside
#                        the plugin build: testprov/, lib/)
#   FABRIC_TCP_PROVIDER  NCCL_FABRIC_PROVIDER for the tcp path (default
#                        'tcp;ofi_rxm'; empty: let the plugin choose)
#   FABRIC_EXTRA_ENV     extra NAME=VALUE words for every plugin run
#   BENCH_NCCL_ENV       extra NAME=VALUE words for every run, Socket's too
#                        (NCCL's own settings, e.g. NCCL_NCHANNELS_PER_NET_PEER=2,
#                        so both paths are measured under them)
#   PATH_TAG             appended to the path names in the CSVs (path-TAG), so
#                        runs of one path with other settings stay apart
#   FABRIC_NETNS         1: an emulated cluster (bench/netns.sh). Each rank of a
#                        multi-process run is a host: network namespace fabh<i>
#                        with eth0 at 10.77.0.<i+1>/24, a veth into bridge fabbr0,
#                        and runs under 'ip netns exec fabh<i>'. NCCL and the
#                        plugin are pointed at eth0 instead of lo, sweeps run
#                        multi only, and path names get -netns[-RATE], so one
#                        CSV holds loopback and emulated rows. The hosts are
#                        removed at exit. Needs root, and ip/tc (FABRIC_IPROUTE2).
#                        torch and single-mode runs stay on loopback
#   FABRIC_NETNS_RATE    e.g. 25gbit: tbf on both ends of every veth (a host's
#                        sends and receives); FABRIC_NETNS_BURST (8mb),
#                        FABRIC_NETNS_LATENCY (20ms); default unshaped
#   FABRIC_NETNS_IFACE   interface named to NCCL and libfabric in a host
#                        (default eth0; empty: none, their own choice)
#   FABRIC_NETNS_MTU     MTU of the veths and the bridge (default 1500)
#   FABRIC_IPROUTE2      prefix of the iproute2 unpacked by
#                        scripts/fetch-iproute2.sh (default .device/iproute2
#                        when present, else the system's ip and tc)
#   BENCH_MODE           single | multi | both, for sweeps (default single)
#   SWEEP_MIN SWEEP_MAX SWEEP_FACTOR SWEEP_ITERS SWEEP_WARMUP (8 1G 2 20 5)
#   SWEEP_COLLS          collectives of a sweep, comma-separated (default: nccl_bench's)
#   CORR_MAX             largest correctness size (default 16M)
#   GPU_SWEEP_MAX        largest size of the gpu-buffers sweep (default 256M; 0: none)
#   TORCH_PATHS          paths for the torch stage (default 'fabric-tcp fabric-shm
#                        fabric-gpu')
#   RUN_TIMEOUT          seconds for one benchmark run (default 540)
#   TORCH_TIMEOUT        seconds torch_check gives one collective (default 180)
#   FABRIC_NGPUS         use only the first N GPUs (default: all visible)
#   TIME_BUDGET          seconds for this whole invocation: runs that would not
#                        fit are skipped, as failed (default 0 = no limit;
#                        under a job runner that kills at 600 s, say 570)
#   PLOT_CSVS            extra CSVs for the plot stage (space separated)
#   PYTHON               python with torch / matplotlib (default python3)

set -u -o pipefail
umask 022

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# the caller's search paths: setup starts from these, never from a stale env.sh's
CALLER_LD_LIBRARY_PATH=${LD_LIBRARY_PATH-}
CALLER_PATH=$PATH
WORK=${FABRIC_BENCH_WORK:-$REPO/build-bench}
OUTDIR=${FABRIC_BENCH_OUT:-$REPO/bench/out/$(date +%Y%m%d)}
FABRIC_DEBS=${FABRIC_DEBS:-$REPO/.debs}
FABRIC_TCP_PROVIDER=${FABRIC_TCP_PROVIDER-tcp;ofi_rxm}
PYTHON=${PYTHON:-python3}
RUN_TIMEOUT=${RUN_TIMEOUT:-540}
# FABRIC_NGPUS=N: the first N GPUs only (scale runs on 2, 4 or 8)
if [[ -n ${FABRIC_NGPUS:-} && -z ${CUDA_VISIBLE_DEVICES:-} ]]; then
	CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((FABRIC_NGPUS - 1)))
	export CUDA_VISIBLE_DEVICES
fi
# TIME_BUDGET=0: no limit.
TIME_BUDGET=${TIME_BUDGET:-0}
DEADLINE=$((TIME_BUDGET > 0 ? SECONDS + TIME_BUDGET : 0))
RUN_ID=$(date +%H%M%S)-$$
LOGROOT=$WORK/logs/$RUN_ID
ENVFILE=$WORK/env.sh
RESULTS=$WORK/results # CSVs kept across device calls while the machine stays
SUMMARY=$OUTDIR/summary.txt

NCCL_BUILT=$WORK/nccl-built
[[ ${NCCL_HOME:-} == built ]] && NCCL_HOME=$NCCL_BUILT

# shellcheck source=bench/netns.sh
source "$REPO/bench/netns.sh" # the emulated cluster: netns_up, netns_exec_words, netns_down
NETNS_RUN=0
if [[ ${FABRIC_NETNS:-0} == 1 ]]; then
	netns_tools || exit 2
fi

ALL_STAGES=(setup correctness torch bench-fabric-tcp bench-fabric-tcp-rails bench-fabric-tcp-best bench-fabric-shm
	bench-fabric-tcp-native bench-fabric-default bench-socket bench-socket-tuned bench-socket-best gpu-buffers libfabric rma plot)

# ------------------------------------------------------------------ helpers

say() { # one line to stdout and summary.txt
	printf '%s\n' "$*"
	printf '%s\n' "$*" >>"$SUMMARY"
}

die() {
	say "run-gpu.sh: FATAL: $*"
	exit 2
}

usage() {
	sed -n '2,/^$/s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
	exit 2
}

# Appends the rows of CSV $1 (header skipped) to $2, writing the header first
# when $2 is new.
append_csv() {
	local src=$1 dst=$2
	[[ -s $src ]] || return 0
	if [[ ! -s $dst ]]; then
		head -n 1 "$src" >"$dst"
	fi
	tail -n +2 "$src" >>"$dst"
}

# Fingerprint of the sources that setup builds (plugin, tests, tools, bench),
# so a warm machine notices a changed working tree and rebuilds. Build
# outputs and results are left out; git is not needed.
tree_fingerprint() {
	(cd "$REPO" && find CMakeLists.txt src include tests tools bench -type f \
		\( -name '*.c' -o -name '*.h' -o -name 'CMakeLists.txt' -o -name '*.cmake' -o -name '*.in' \) \
		-not -path 'bench/out/*' -not -path 'bench/results/*' 2>/dev/null |
		LC_ALL=C sort | tr '\n' '\0' | xargs -0 sha1sum 2>/dev/null | sha1sum | cut -c1-16)
}

# nccl_header_version NCCL_H: "2.30.7" from nccl.h's NCCL_MAJOR/MINOR/PATCH.
nccl_header_version() {
	awk '/^#define NCCL_(MAJOR|MINOR|PATCH) / {v[$2] = $3}
		END {if (v["NCCL_MAJOR"] != "") printf "%s.%s.%s\n", v["NCCL_MAJOR"], v["NCCL_MINOR"], v["NCCL_PATCH"]}' "$1" 2>/dev/null
}

# nccl_net_api VERSION: the newest net API that NCCL version loads ("" unknown).
nccl_net_api() {
	local major minor
	IFS=. read -r major minor _ <<<"$1"
	[[ $major == 2 && $minor =~ ^[0-9]+$ ]] || return 0
	if ((minor >= 30)); then echo 12; elif ((minor >= 28)); then echo 11; fi
}

count_gpus() {
	local n
	if [[ -n ${CUDA_VISIBLE_DEVICES:-} ]]; then
		n=$(tr ',' '\n' <<<"$CUDA_VISIBLE_DEVICES" | grep -c .)
	else
		n=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
	fi
	echo "${n:-0}"
}

# Packs this invocation's raw logs into the output folder (one file per call).
pack_logs() {
	[[ -d $LOGROOT ]] || return 0
	tar -czf "$OUTDIR/logs-$RUN_ID.tar.gz" -C "$WORK/logs" "$RUN_ID" 2>/dev/null ||
		say "run-gpu.sh: warning: could not pack logs into $OUTDIR/logs-$RUN_ID.tar.gz"
}

# ------------------------------------------------------------------ environment per path

# Sets ENV_RUN: NAME=VALUE words for env(1) for one network path. $2 is the
# log base name: NCCL writes $2.nccl.<host>.<pid>.log.
ENV_RUN=()
path_env() {
	local path=$1 base=$2
	# loopback, or in an emulated host (NETNS_RUN) its eth0 (FABRIC_NETNS_IFACE;
	# empty: nothing named, the choice left to NCCL and libfabric)
	local ifc=lo
	((NETNS_RUN)) && ifc=${FABRIC_NETNS_IFACE-eth0}
	ENV_RUN=(NCCL_NVLS_ENABLE=0 NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1)
	[[ -n $ifc ]] && ENV_RUN+=("NCCL_SOCKET_IFNAME=$ifc" "FI_TCP_IFACE=$ifc" "FI_SOCKETS_IFACE=$ifc"
		"FI_UDP_IFACE=$ifc" "FI_NET_IFACE=$ifc")
	ENV_RUN+=(NCCL_DEBUG=INFO "NCCL_DEBUG_SUBSYS=${FABRIC_NCCL_SUBSYS:-INIT,NET,ENV,GRAPH}" "NCCL_DEBUG_FILE=$base.nccl.%h.%p.log")
	case $path in
	fabric-tcp | fabric-tcp-rails | fabric-tcp-best | fabric-shm | fabric-gpu | fabric-tcp-native | fabric-shm-force | fabric-default)
		ENV_RUN+=("NCCL_NET_PLUGIN=$PLUGIN" NCCL_NET=Fabric)
		case $path in
		fabric-tcp) [[ -n $FABRIC_TCP_PROVIDER ]] && ENV_RUN+=("NCCL_FABRIC_PROVIDER=$FABRIC_TCP_PROVIDER") ;;
		fabric-tcp-rails | fabric-tcp-best)
			# four tcp streams per connection, each read by its own thread
			[[ -n $FABRIC_TCP_PROVIDER ]] && ENV_RUN+=("NCCL_FABRIC_PROVIDER=$FABRIC_TCP_PROVIDER")
			ENV_RUN+=(NCCL_FABRIC_RAILS=${FABRIC_RAILS:-4} NCCL_FABRIC_PROGRESS_THREADS=on)
			[[ $path == fabric-tcp-best ]] && ENV_RUN+=(NCCL_MIN_NCHANNELS=${BEST_CHANNELS:-8})
			;;
		fabric-shm) ENV_RUN+=(NCCL_FABRIC_PROVIDER=shm) ;;
		fabric-tcp-native) ENV_RUN+=(NCCL_FABRIC_PROVIDER=tcp) ;;
		fabric-default) ;; # no NCCL_FABRIC_PROVIDER: the plugin's own choice
		fabric-shm-force)
			# GPU buffers to shm although it answers -FI_EOPNOTSUPP; SYS lets NCCL
			# hand them over on a host without a PCI path to the "NIC"
			ENV_RUN+=(NCCL_FABRIC_PROVIDER=shm NCCL_FABRIC_HMEM=force NCCL_NET_GDR_LEVEL=SYS)
			;;
		fabric-gpu)
			ENV_RUN+=(NCCL_FABRIC_HMEM=force NCCL_FABRIC_PROVIDER=testhmem "TESTHMEM_BASE=tcp;ofi_rxm"
				TESTHMEM_MODE=cuda "FI_PROVIDER_PATH=$TESTPROV_DIR" NCCL_NET_GDR_LEVEL=SYS
				NCCL_NET_FORCE_FLUSH=1 "TESTHMEM_LOG=$base.testhmem.log"
				TESTHMEM_TRACE=${TESTHMEM_TRACE:-0})
			;;
		esac
		if [[ -n ${FABRIC_EXTRA_ENV:-} ]]; then
			local -a extra
			read -r -a extra <<<"$FABRIC_EXTRA_ENV"
			ENV_RUN+=("${extra[@]}")
		fi
		;;
	nccl-socket) ENV_RUN+=(NCCL_NET_PLUGIN=none NCCL_NET=Socket) ;;
	nccl-socket-tuned)
		ENV_RUN+=(NCCL_NET_PLUGIN=none NCCL_NET=Socket NCCL_SOCKET_NTHREADS=4 NCCL_NSOCKS_PERTHREAD=4)
		;;
	nccl-socket-best)
		# more channels too: the best Socket tuning measured on the H200 host
		ENV_RUN+=(NCCL_NET_PLUGIN=none NCCL_NET=Socket NCCL_SOCKET_NTHREADS=4 NCCL_NSOCKS_PERTHREAD=4
			NCCL_MIN_NCHANNELS=${BEST_CHANNELS:-8})
		;;
	*) die "internal: unknown path $path" ;;
	esac
	if [[ -n ${BENCH_NCCL_ENV:-} ]]; then
		local -a both
		read -r -a both <<<"$BENCH_NCCL_ENV"
		ENV_RUN+=("${both[@]}")
	fi
}

# Name of a path in the CSVs: PATH_TAG appended, and for runs in the emulated
# cluster "netns" and the rate (fabric-tcp-native-netns-25gbit).
path_name() {
	local name=$1${PATH_TAG:+-$PATH_TAG}
	[[ ${2:-} == multi && ${FABRIC_NETNS:-0} == 1 ]] && name+=-netns${FABRIC_NETNS_RATE:+-$FABRIC_NETNS_RATE}
	echo "$name"
}

# Network name NCCL must report for a path.
path_net() {
	case $1 in
	nccl-socket*) echo Socket ;;
	*) echo Fabric ;;
	esac
}

# env(1) arguments that drop inherited NCCL_*, FI_* and TESTHMEM_* settings,
# so every path runs with exactly the settings above.
unset_args() {
	local v
	UNSET=()
	for v in $(compgen -e); do
		case $v in
		NCCL_* | FI_* | TESTHMEM_*) UNSET+=(-u "$v") ;;
		esac
	done
}

# Checks the NCCL logs of one run. $1 log base, $2 network name, $3 "gdr" to
# require GPUDirect on the net channels. Prints a short verdict; returns 1 on
# a failed check.
check_nccl_logs() {
	local base=$1 net=$2 want_gdr=${3:-} ok=0 f
	local -a logs=()
	# only logs of processes that made a communicator (or failed trying)
	for f in "$base".nccl.*.log; do
		[[ -e $f ]] && grep -q -E 'Using network|Init COMPLETE|NCCL WARN' "$f" && logs+=("$f")
	done
	if ((${#logs[@]} == 0)); then
		CHECK_MSG="no NCCL log with a communicator ($base.nccl.*.log)"
		return 1
	fi
	local nlogs=${#logs[@]} with_net other chans chans_other gdr nowarn
	with_net=$(grep -l "NCCL INFO Using network $net\$" "${logs[@]}" | wc -l)
	other=$(grep -h -o 'NCCL INFO Using network [A-Za-z0-9_]*' "${logs[@]}" |
		grep -v "Using network $net\$" | sort -u | sed 's/.*Using network //' | tr '\n' ' ')
	chans=$(grep -h -c "via NET/$net/" "${logs[@]}" | awk '{s+=$1} END {print s+0}')
	chans_other=$(grep -h -E ' via (P2P|SHM|NET/[A-Za-z]+)' "${logs[@]}" | grep -v -c "via NET/$net/")
	gdr=$(grep -h -c -E "via NET/$net/[0-9]+(\([0-9]+\))?/GDRDMA" "${logs[@]}" | awk '{s+=$1} END {print s+0}')
	nowarn=$(grep -h -c 'NCCL WARN' "${logs[@]}" | awk '{s+=$1} END {print s+0}')
	CHECK_MSG="net=$net in $with_net/$nlogs logs, NET/$net channels $chans"
	# which NCCL ran, which net API it loaded, and the rail/plane it read (v12)
	local nver napi want railplane
	nver=$(grep -h -o 'NCCL version [0-9.]*' "${logs[@]}" | head -n 1 | sed 's/NCCL version //')
	napi=$(grep -h -o "Loaded net plugin $net (v[0-9]*)" "${logs[@]}" | head -n 1 | sed 's/.*(v\([0-9]*\))/\1/')
	railplane=$(grep -h -o 'Filled [^ ]* in topo with .* rail=-\{0,1\}[0-9]* plane=-\{0,1\}[0-9]*' "${logs[@]}" |
		head -n 1 | sed 's/.* rail=\([-0-9]*\) plane=\([-0-9]*\)/rail \1 plane \2/')
	CHECK_MSG+=", NCCL ${nver:-?} loaded net API v${napi:-?}${railplane:+ ($railplane)}"
	if [[ -n ${NCCL_USED_VERSION:-} && $nver != "$NCCL_USED_VERSION" ]]; then
		CHECK_MSG+=" [setup chose NCCL $NCCL_USED_VERSION, the run loaded $nver]"
		ok=1
	fi
	want=$(nccl_net_api "$nver")
	[[ $net == Fabric ]] || want= # NCCL's own transports load no plugin
	if [[ -n $want && $napi != "$want" ]]; then
		CHECK_MSG+=" [NCCL $nver should load the plugin's net API v$want]"
		ok=1
	fi
	[[ $want_gdr == gdr ]] && CHECK_MSG+=", GDRDMA $gdr/$chans"
	((nowarn > 0)) && CHECK_MSG+=", $nowarn NCCL WARN"
	if ((with_net != nlogs)); then
		CHECK_MSG+=" [not every process used $net${other:+; saw: $other}]"
		ok=1
	fi
	if ((chans == 0)); then
		CHECK_MSG+=" [no 'via NET/$net' channel: traffic did not use the network path]"
		ok=1
	fi
	if ((chans_other > 0)); then
		CHECK_MSG+=" [$chans_other channels via another transport]"
		ok=1
	fi
	if [[ $want_gdr == gdr ]] && ((gdr == 0)); then
		CHECK_MSG+=" [no GDRDMA channel: NCCL did not give the plugin GPU buffers]"
		ok=1
	fi
	return $ok
}

# The testhmem provider's own account (TESTHMEM_LOG): bytes it moved from and
# to CUDA memory, and its error lines and check counters, which must be zero.
# Appends to CHECK_MSG; returns 1 on errors.
check_testhmem_log() {
	local log=$1.testhmem.log
	if [[ ! -s $log ]]; then
		CHECK_MSG+=" [no testhmem log: the provider was not loaded]"
		return 1
	fi
	local cuda_bytes nerr bad nops landed refreshed
	nops=$(grep -c '^ops iface=cuda ' "$log")
	# messages and RMA from or into CUDA memory (writes count at the initiator)
	cuda_bytes=$(sed -n 's/^ops iface=cuda .* bytes=\([0-9]*\) .* rma_bytes=\([0-9]*\) .*/\1 \2/p' "$log" |
		awk '{s+=$1+$2} END {print s+0}')
	# remote writes the target moved from its shadow to the GPU, read requests answered
	landed=$(sed -n 's/^rma landed=\([0-9]*\) .*/\1/p' "$log" | awk '{s+=$1} END {print s+0}')
	refreshed=$(sed -n 's/^rma landed=[0-9]* refreshed=\([0-9]*\) .*/\1/p' "$log" | awk '{s+=$1} END {print s+0}')
	nerr=$(grep -c '^error ' "$log")
	bad=$(sed -n 's/^check bad_desc=\([0-9]*\) nodesc_cuda=\([0-9]*\) copy_errors=\([0-9]*\) .*/\1 \2 \3/p' "$log" |
		awk '{s+=$1+$2+$3} END {print s+0}')
	if ((nops == 0)); then
		CHECK_MSG+=", testhmem: no domain summary (domains not closed?)"
	else
		CHECK_MSG+=", testhmem: $((cuda_bytes >> 20)) MiB via CUDA memory, $landed RMA writes landed in GPU memory, $refreshed RMA reads of it"
	fi
	if ((nerr > 0 || bad > 0)); then
		CHECK_MSG+=" [testhmem: $nerr error lines, $bad bad descriptors/copy errors: $(grep -m1 '^error ' "$log" | cut -c1-120)]"
		return 1
	fi
	if ((nops > 0 && cuda_bytes == 0)); then
		CHECK_MSG+=" [testhmem moved no CUDA memory: the plugin gave it host buffers]"
		return 1
	fi
	return 0
}

# First few NCCL WARN lines and, when $2 names the program's output, its
# diagnosis, for a FAIL.
show_failure() {
	local base=$1 out=$2 f
	for f in "$base".nccl.*.log; do
		[[ -e $f ]] && grep -h 'NCCL WARN' "$f" | head -n 3 | cut -c1-240 | sed 's/^/    warn: /'
	done | head -n 6
	[[ -n $out && -e $out ]] || return 0
	# the program's own diagnosis first (from every rank), else the end of its output
	local -a outs=()
	for f in "$base".out "$base".rank*.out; do [[ -e $f ]] && outs+=("$f"); done
	if grep -q -E 'FATAL|DATA ERROR|FAIL' "${outs[@]}"; then
		grep -h -E 'FATAL|DATA ERROR|FAIL|NCCL last error' "${outs[@]}" | head -n 6
	else
		grep -v '^  ' "$out" | tail -n 6
	fi | cut -c1-240 | sed 's/^/    out: /'
}

# Sets RUN_LIMIT to the seconds one run may take: RUN_TIMEOUT, cut to what
# is left of TIME_BUDGET. Returns 1 (and says so) when under 30 s are left.
run_limit() {
	local label=$1 left
	RUN_LIMIT=$RUN_TIMEOUT
	((DEADLINE > 0)) || return 0
	left=$((DEADLINE - SECONDS))
	if ((left < 30)); then
		say "$(printf '%-4s %-28s %4ds  not run: %ds left of TIME_BUDGET=%s' FAIL "$label" 0 "$left" "$TIME_BUDGET")"
		return 1
	fi
	((left < RUN_LIMIT)) && RUN_LIMIT=$left
	return 0
}

# Runs nccl_bench once. run_bench LABEL PATH MODE CSVNAME [nccl_bench args]
# Appends its rows to $OUTDIR/CSVNAME and $RESULTS/CSVNAME. Returns 0 on PASS.
run_bench() {
	local label=$1 path=$2 mode=$3 csvname=$4
	shift 4
	local base=$STAGE_LOG/$label net rc=0 t0=$SECONDS x r pid verdict=PASS why=""
	local csv=$STAGE_LOG/$label.csv out
	local -a pids=()
	run_limit "$label" || return 1
	net=$(path_net "$path")
	# FABRIC_NETNS=1: the ranks of a multi run are hosts of the emulated cluster
	NETNS_RUN=0
	[[ $mode == multi && ${FABRIC_NETNS:-0} == 1 ]] && NETNS_RUN=1
	local pname
	pname=$(path_name "$path" "$mode")
	path_env "$path" "$base"
	unset_args
	printf '%s\n' "${ENV_RUN[@]}" >"$base.env"
	rm -f "$csv"
	if [[ $mode == single ]]; then
		out=$base.out
		timeout -k 10 "$RUN_LIMIT" env "${UNSET[@]}" "${ENV_RUN[@]}" "$BENCH" --mode single \
			--path "$pname" --csv "$csv" "$@" >"$out" 2>&1 || rc=$?
	else
		out=$base.rank0.out
		local iddir nranks=$NGPUS
		local -a rank_env
		iddir=$(mktemp -d "$WORK/id.XXXXXX")
		((${FABRIC_VHOSTS:-0} >= 2)) && nranks=$FABRIC_VHOSTS
		((NETNS_RUN)) && netns_ensure "$nranks"
		NETNS_EXEC=()
		for ((r = 0; r < nranks; r++)); do
			((NETNS_RUN)) && netns_exec_words "$r" # ip netns exec fabh$r
			# one GPU, several hosts: every rank on GPU 0 under its own host id
			if ((${FABRIC_VHOSTS:-0} >= 2)); then
				rank_env=(LOCAL_RANK=0 "NCCL_HOSTID=vhost$r" "CUDA_MPS_PIPE_DIRECTORY=$MPS_PIPE")
			else
				rank_env=(LOCAL_RANK=$r)
			fi
			timeout -k 10 "$RUN_LIMIT" "${NETNS_EXEC[@]}" env "${UNSET[@]}" "${ENV_RUN[@]}" RANK=$r WORLD_SIZE="$nranks" \
				"${rank_env[@]}" "$BENCH" --mode multi --id-dir "$iddir" --path "$pname" --csv "$csv" "$@" \
				>"$base.rank$r.out" 2>&1 &
			pids+=($!)
		done
		for pid in "${pids[@]}"; do
			wait "$pid"
			x=$?
			((x > rc)) && rc=$x
		done
		rm -rf "$iddir"
	fi
	append_csv "$csv" "$OUTDIR/$csvname"
	append_csv "$csv" "$RESULTS/$csvname"

	local result
	result=$(grep -h '^# nccl_bench: \(PASS\|FAIL\)' "$out" 2>/dev/null | tail -n 1 | sed 's/^# nccl_bench: //')
	if ((rc != 0)); then
		verdict=FAIL
		case $rc in
		1) why="data errors" ;;
		3) why="nccl_bench watchdog timeout" ;;
		4) verdict=SKIP why="NCCL gave no symmetric window: device-initiated networking is not available on this path" ;;
		124 | 137) why="killed after ${RUN_LIMIT}s" ;;
		*) why="exit $rc" ;;
		esac
	fi
	if [[ $verdict != SKIP ]] && ! check_nccl_logs "$base" "$net" "${GDR_CHECK:-}"; then
		verdict=FAIL
	fi
	if [[ $verdict != SKIP && $path == fabric-gpu ]] && ! check_testhmem_log "$base"; then
		verdict=FAIL
	fi
	if [[ $verdict != SKIP ]] && ((NETNS_RUN)) && ! check_netns_iface "$base"; then
		verdict=FAIL
	fi
	say "$(printf '%-4s %-28s %4ds  %s; %s%s' "$verdict" "$label" $((SECONDS - t0)) \
		"${result:-no result line}" "$CHECK_MSG" "${why:+ [$why]}")"
	# what the plugin held at finalize, per process (NCCL 2.28 finalizes)
	grep -h 'resources at finalize' "$base".nccl.*.log 2>/dev/null | grep -v ' 0 endpoint' |
		sed 's/.*resources at finalize: /    resources: /' | sort | uniq -c |
		sed 's/^ *\([0-9]*\) /    \1 x/' | tee -a "$SUMMARY"
	[[ $verdict == SKIP ]] && return 77
	if [[ $verdict != PASS ]]; then
		show_failure "$base" "$( ((rc != 0)) && echo "$out")" | tee -a "$SUMMARY"
		return 1
	fi
	return 0
}

# ------------------------------------------------------------------ setup

# Writes a pkg-config stand-in that answers CMake's FindPkgConfig questions
# about libfabric alone, from the (rewritten) libfabric.pc $1, to file $2.
# Only for machines without pkg-config.
write_pkgconfig_shim() {
	local pc=$1 shim=$2 prefix version
	prefix=$(sed -n 's/^prefix=//p' "$pc")
	version=$(sed -n 's/^Version: *//p' "$pc")
	mkdir -p "$(dirname "$shim")"
	cat >"$shim" <<EOF
#!/bin/sh
# pkg-config stand-in written by bench/run-gpu.sh: knows only libfabric $version
inc='$prefix/include' lib='$prefix/lib/x86_64-linux-gnu' what=
for a in "\$@"; do
	case \$a in
	--version) echo 0.29.2; exit 0 ;;
	--static | --print-errors | --short-errors | '>=' | '=' | '<=' | [0-9]*) ;;
	--*) what=\$a ;;
	libfabric | libfabric[!a-zA-Z0-9_-]*) ;; # also 'libfabric >= 1.17' as one word
	*) echo "Package \$a was not found (this pkg-config stand-in knows only libfabric)" >&2; exit 1 ;;
	esac
done
case \$what in
--modversion) echo '$version' ;;
--cflags | --cflags-only-I) echo "-I\$inc" ;;
--libs) echo "-L\$lib -lfabric" ;;
--libs-only-L) echo "-L\$lib" ;;
--libs-only-l) echo "-lfabric" ;;
--variable=prefix) echo '$prefix' ;;
--variable=includedir) echo "\$inc" ;;
--variable=libdir) echo "\$lib" ;;
--variable=*) echo ;;
*) echo ;;
esac
exit 0
EOF
	chmod +x "$shim"
}

# Loads env.sh when it describes a usable setup of this working tree.
setup_is_current() {
	[[ -f $ENVFILE ]] || return 1
	# shellcheck source=/dev/null
	source "$ENVFILE" || return 1
	[[ ${SETUP_FINGERPRINT:-} == "$(tree_fingerprint)" ]] || return 1
	[[ ${SETUP_PLUGIN_SOURCE:-} == "${FABRIC_PLUGIN_DIR:-build}" ]] || return 1
	[[ ${NCCL_ASKED-unset} == "${NCCL_HOME:-}" ]] || return 1
	[[ -x ${BENCH:-/nonexistent} && -f ${PLUGIN:-/nonexistent} ]] || return 1
	command -v fi_info >/dev/null 2>&1 || return 1
	return 0
}

ensure_setup() {
	if setup_is_current; then
		return 0
	fi
	if ((DEADLINE > 0 && DEADLINE - SECONDS < 120)); then
		die "setup is missing or stale and under 120 s are left of TIME_BUDGET=$TIME_BUDGET: run setup first"
	fi
	say "-- setup is missing or stale on this machine: running setup first"
	stage_setup || exit 2
	setup_is_current || die "setup finished but $ENVFILE is not usable"
}

stage_setup() {
	local root=$WORK/fabric-root deb n t0=$SECONDS
	mkdir -p "$WORK" "$STAGE_LOG"
	local slog=$STAGE_LOG/setup.log
	: >"$slog"
	export PATH=$CALLER_PATH LD_LIBRARY_PATH=$CALLER_LD_LIBRARY_PATH
	[[ -n $LD_LIBRARY_PATH ]] || unset LD_LIBRARY_PATH

	command -v nvidia-smi >/dev/null || die "nvidia-smi not found: is this the GPU machine?"
	NGPUS=$(count_gpus)
	say "gpus: $NGPUS x $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n 1)"
	((NGPUS >= 2)) || say "WARNING: $NGPUS GPU(s): the network path needs 2 (use a host with 2 GPUs, or FABRIC_VHOSTS=N)"

	# CUDA toolkit (for nccl_bench) and NCCL from the Python wheel
	if ! command -v nvcc >/dev/null && [[ -x /usr/local/cuda/bin/nvcc ]]; then
		export PATH=/usr/local/cuda/bin:$PATH
	fi
	local wheel
	wheel=$("$PYTHON" -c 'import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])' 2>>"$slog") ||
		die "cannot find the nvidia-nccl wheel with $PYTHON (import nvidia.nccl failed; see $slog)"
	[[ -f $wheel/include/nccl.h ]] || die "$wheel/include/nccl.h missing"
	local torchver
	torchver=$("$PYTHON" -c 'import torch; print(torch.__version__, "NCCL", ".".join(map(str, torch.cuda.nccl.version())))' 2>>"$slog") ||
		torchver="(torch import failed)"
	say "python: torch $torchver; NCCL wheel $wheel"
	local ncclhome=${NCCL_HOME:-$wheel} ncclver
	[[ -f $ncclhome/include/nccl.h && -e $ncclhome/lib/libnccl.so.2 ]] ||
		die "NCCL_HOME=$ncclhome has no include/nccl.h and lib/libnccl.so.2 (NCCL_HOME=built needs the nccl stage first)"
	ncclver=$(nccl_header_version "$ncclhome/include/nccl.h")
	say "NCCL for every run: ${ncclver:-unknown version} from $ncclhome"

	# libfabric from the carried Debian packages, unpacked into a scratch root
	local -a debs=()
	for deb in "$FABRIC_DEBS"/*.deb; do [[ -e $deb ]] && debs+=("$deb"); done
	if [[ -n ${FABRIC_LF2_DIR:-} ]]; then
		local lf2
		lf2=$(cd "$FABRIC_LF2_DIR" 2>/dev/null && pwd) || die "FABRIC_LF2_DIR=$FABRIC_LF2_DIR does not exist"
		[[ -e $lf2/lib/libfabric.so.1 ]] || die "FABRIC_LF2_DIR=$lf2 has no lib/libfabric.so.1"
		export LD_LIBRARY_PATH=$lf2/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
		export PATH=$lf2/bin:$PATH
		# the prefix names where it was built: point its .pc at where it is now
		mkdir -p "$WORK/pkgconfig"
		sed "s|^prefix=.*|prefix=$lf2|; s|^libdir=.*|libdir=$lf2/lib|; s|^includedir=.*|includedir=$lf2/include|" \
			"$lf2/lib/pkgconfig/libfabric.pc" >"$WORK/pkgconfig/libfabric.pc" 2>/dev/null || true
		say "libfabric: from FABRIC_LF2_DIR=$lf2"
	elif ((${#debs[@]} > 0)); then
		local stamp=$root/.debs-list want
		want=$(for deb in "${debs[@]}"; do basename "$deb"; done | sha1sum | cut -c1-16)
		if [[ ! -f $stamp || $(cat "$stamp") != "$want" ]]; then
			rm -rf "$root"
			mkdir -p "$root"
			for deb in "${debs[@]}"; do
				dpkg -x "$deb" "$root" >>"$slog" 2>&1 || die "dpkg -x $deb failed (see $slog)"
			done
			# libpsm-infinipath1 keeps its library in usr/lib/libpsm1 and links it
			# into the multiarch folder from its postinst (update-alternatives),
			# which dpkg -x does not run: make that link here.
			local psm
			for psm in "$root"/usr/lib/libpsm1/libpsm_infinipath.so.1.*; do
				[[ -e $psm ]] && ln -sf "../libpsm1/${psm##*/}" \
					"$root/usr/lib/x86_64-linux-gnu/libpsm_infinipath.so.1"
			done
			echo "$want" >"$stamp"
		fi
		export LD_LIBRARY_PATH=$root/usr/lib/x86_64-linux-gnu:$root/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
		export PATH=$root/usr/bin:$PATH
		local missing
		missing=$(ldd "$root/usr/lib/x86_64-linux-gnu/libfabric.so.1" 2>&1 | grep 'not found')
		[[ -z $missing ]] || die "libfabric's dependencies are missing from $FABRIC_DEBS: $missing"
	elif ! ldconfig -p 2>/dev/null | grep -q 'libfabric\.so\.1 '; then
		die "no .deb in $FABRIC_DEBS and no system libfabric. On the CPU machine: mkdir -p .debs && (cd .debs && apt-get download libfabric1 libfabric-bin libfabric-dev libibverbs1 librdmacm1 libpsm-infinipath1 libpsm2-2 ibverbs-providers libnl-3-200 libnl-route-3-200 libnuma1), then carry .debs"
	fi
	command -v fi_info >/dev/null || die "fi_info not found (is libfabric-bin among the .debs?)"
	local provs
	provs=$(FI_TCP_IFACE=lo fi_info -l 2>>"$slog" | sed -n 's/:$//p' | tr '\n' ' ')
	[[ -n $provs ]] || die "fi_info -l lists no provider (see $slog)"
	say "libfabric: $(fi_info --version 2>/dev/null | grep -m1 -i 'libfabric:' | sed 's/.*: *//'); providers: $provs"

	# CMake's generator: make where there is one, else ninja (the GPU image lists
	# CMake and ninja)
	command -v cmake >/dev/null || die "cmake not found"
	local -a gen=()
	if ! command -v make >/dev/null; then
		command -v ninja >/dev/null || die "neither make nor ninja found for cmake"
		gen=(-G Ninja)
	fi

	# The plugin: prebuilt, or built here
	local pbuild=$WORK/plugin-build
	if [[ -n ${FABRIC_PLUGIN_DIR:-} ]]; then
		PLUGIN=$(cd "$FABRIC_PLUGIN_DIR" 2>/dev/null && pwd)/libnccl-net-fabric.so
		[[ -f $PLUGIN ]] || die "FABRIC_PLUGIN_DIR=$FABRIC_PLUGIN_DIR has no libnccl-net-fabric.so"
		say "plugin: prebuilt $PLUGIN"
	else
		local pcdir=$WORK/pkgconfig pc=$root/usr/lib/x86_64-linux-gnu/pkgconfig/libfabric.pc
		mkdir -p "$pcdir"
		if [[ -f $pc ]]; then
			# the .pc names prefix=/usr: point it at the unpacked root
			sed "s|^prefix=.*|prefix=$root/usr|" "$pc" >"$pcdir/libfabric.pc"
		fi
		local -a pkgarg=()
		if ! command -v pkg-config >/dev/null && ! command -v pkgconf >/dev/null; then
			[[ -f $pcdir/libfabric.pc ]] ||
				die "no pkg-config here and no libfabric.pc among the .debs (libfabric-dev): build the plugin on the CPU machine and set FABRIC_PLUGIN_DIR=build/lib, carrying build/lib and build/testprov"
			write_pkgconfig_shim "$pcdir/libfabric.pc" "$WORK/bin/pkg-config"
			pkgarg=("-DPKG_CONFIG_EXECUTABLE=$WORK/bin/pkg-config")
			say "plugin: no pkg-config on this machine: using a stand-in that knows only libfabric"
		fi
		say "plugin: building from source in $pbuild"
		# shellcheck disable=SC2086 # FABRIC_CMAKE_ARGS is a list of words
		if ! PKG_CONFIG_PATH=$pcdir${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH} cmake "${gen[@]}" -S "$REPO" -B "$pbuild" \
			-DCMAKE_BUILD_TYPE=RelWithDebInfo -DFABRIC_BENCH=OFF "${pkgarg[@]}" ${FABRIC_CMAKE_ARGS:-} \
			>>"$slog" 2>&1; then
			tail -n 15 "$slog"
			die "cmake configure of the plugin failed (see above; log in $slog)"
		fi
		if ! cmake --build "$pbuild" -j "$(nproc)" >>"$slog" 2>&1; then
			grep -E 'error|Error' "$slog" | head -n 15
			[[ -f $pbuild/lib/libnccl-net-fabric.so ]] ||
				die "plugin build failed (see above; log in $slog)"
			say "WARNING: the build failed, but the plugin itself was built; going on (log in $slog)"
		fi
		PLUGIN=$pbuild/lib/libnccl-net-fabric.so
		[[ -f $PLUGIN ]] || die "the build made no $PLUGIN"
	fi
	if ldd "$PLUGIN" | grep -q 'not found'; then
		ldd "$PLUGIN" | grep 'not found'
		die "the plugin's libraries do not all resolve (LD_LIBRARY_PATH=$LD_LIBRARY_PATH)"
	fi
	local syms
	syms=$(nm -D --defined-only "$PLUGIN" 2>/dev/null | awk '{print $3}' | grep -E '^ncclNetPlugin_v[0-9]+$' | sort -V | tr '\n' ' ')
	[[ -n $syms ]] || die "$PLUGIN exports no ncclNetPlugin_vN table"
	say "plugin: $PLUGIN exports $syms"

	# The test provider for gpu-buffers (optional here; that stage fails without it)
	TESTPROV_DIR=""
	local cand plugdir
	plugdir=$(dirname "$PLUGIN")
	for cand in ${FABRIC_TESTPROV:-} "$plugdir/../testprov/libtesthmem-fi.so" "$plugdir/libtesthmem-fi.so" \
		"$pbuild/testprov/libtesthmem-fi.so" "$REPO/build/testprov/libtesthmem-fi.so"; do
		if [[ -f $cand ]]; then
			TESTPROV_DIR=$(cd "$(dirname "$cand")" && pwd)
			break
		fi
	done
	if [[ -z $TESTPROV_DIR ]]; then
		cand=$(find "$plugdir/.." "$pbuild" "$REPO/build" -name libtesthmem-fi.so 2>/dev/null | head -n 1)
		[[ -n $cand ]] && TESTPROV_DIR=$(cd "$(dirname "$cand")" && pwd)
	fi
	say "testhmem provider: ${TESTPROV_DIR:-not found (gpu-buffers will fail; set FABRIC_TESTPROV)}"

	# nccl_bench, against that NCCL (one build folder per NCCL)
	local bbuild
	bbuild=$WORK/bench-build-$(sha1sum <<<"$ncclhome" | cut -c1-8)
	[[ -n ${NCCL_HOME:-} ]] && export LD_LIBRARY_PATH=$ncclhome/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	if ! cmake "${gen[@]}" -S "$REPO/bench" -B "$bbuild" -DCMAKE_BUILD_TYPE=Release -DNCCL_HOME="$ncclhome" \
		-DNCCL_INCLUDE_DIR= -DNCCL_LIBRARY= >>"$slog" 2>&1; then
		tail -n 15 "$slog"
		die "cmake configure of bench/ failed (log in $slog)"
	fi
	grep -h '^-- bench:' "$slog" | tail -n 1 | sed 's/^-- //' | while read -r line; do say "$line"; done
	if ! cmake --build "$bbuild" -j "$(nproc)" >>"$slog" 2>&1; then
		grep -E 'error|warning' "$slog" | head -n 15
		die "nccl_bench build failed (log in $slog)"
	fi
	BENCH=$bbuild/bin/nccl_bench
	[[ -x $BENCH ]] || die "no $BENCH after the build (see the 'bench:' line above)"
	local ncclso
	ncclso=$(ldd "$BENCH" | awk '/libnccl/ {print $3}')
	[[ $(readlink -f "$ncclso") == "$(readlink -f "$ncclhome")"/* ]] ||
		say "WARNING: nccl_bench resolves libnccl to $ncclso, not to $ncclhome's"

	cat >"$ENVFILE" <<EOF
# written by bench/run-gpu.sh setup, $(date -u +%FT%TZ)
export LD_LIBRARY_PATH='$LD_LIBRARY_PATH'
export PATH='$PATH'
PLUGIN='$PLUGIN'
BENCH='$BENCH'
TESTPROV_DIR='$TESTPROV_DIR'
NCCL_WHEEL='$wheel'
NCCL_USED='$ncclhome'
NCCL_USED_VERSION='$ncclver'
NCCL_ASKED='${NCCL_HOME:-}'
NGPUS='$NGPUS'
SETUP_FINGERPRINT='$(tree_fingerprint)'
SETUP_PLUGIN_SOURCE='${FABRIC_PLUGIN_DIR:-build}'
EOF
	say "setup: done in $((SECONDS - t0)) s"
}

# ------------------------------------------------------------------ stages

# NCCL from source, or from the packed parts of an earlier build.
stage_nccl() {
	local t0=$SECONDS slog=$STAGE_LOG/nccl.log ver
	mkdir -p "$STAGE_LOG" "$WORK"
	: >"$slog"
	if [[ -n ${NCCL_PREBUILT:-} ]]; then
		local -a parts=("$NCCL_PREBUILT"/nccl-built.tar.xz.part-*)
		[[ -e ${parts[0]} ]] || die "NCCL_PREBUILT=$NCCL_PREBUILT holds no nccl-built.tar.xz.part-*"
		rm -rf "$NCCL_BUILT"
		mkdir -p "$NCCL_BUILT"
		cat "${parts[@]}" | xz -dc | tar -x -C "$NCCL_BUILT" || die "unpacking $NCCL_PREBUILT failed"
		say "nccl: unpacked ${#parts[@]} part(s) from $NCCL_PREBUILT"
	else
		[[ -n ${NCCL_SRC:-} ]] ||
			die "the nccl stage needs NCCL_SRC (NCCL's source: a folder or a tarball) or NCCL_PREBUILT"
		local src=$WORK/nccl-src
		if [[ -d $NCCL_SRC ]]; then
			src=$(cd "$NCCL_SRC" && pwd)
		else
			rm -rf "$src"
			mkdir -p "$src"
			tar -xf "$NCCL_SRC" -C "$src" >>"$slog" 2>&1 || die "cannot unpack NCCL_SRC=$NCCL_SRC (see $slog)"
		fi
		[[ -f $src/makefiles/version.mk ]] || die "NCCL_SRC=$NCCL_SRC is not NCCL's source (no makefiles/version.mk)"
		if ! command -v nvcc >/dev/null && [[ -x /usr/local/cuda/bin/nvcc ]]; then
			export PATH=/usr/local/cuda/bin:$PATH
		fi
		local gencode=${NCCL_GENCODE:--gencode=arch=compute_90,code=sm_90}
		ver=$(awk '/^NCCL_(MAJOR|MINOR|PATCH)/ {v[$1] = $3} END {printf "%s.%s.%s", v["NCCL_MAJOR"], v["NCCL_MINOR"], v["NCCL_PATCH"]}' \
			"$src/makefiles/version.mk")
		say "nccl: building NCCL $ver ($gencode) with $(nproc) jobs"
		rm -rf "$NCCL_BUILT"
		if ! make -C "$src" -j"$(nproc)" src.lib BUILDDIR="$NCCL_BUILT" CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}" \
			NVCC_GENCODE="$gencode" >>"$slog" 2>&1; then
			tail -n 20 "$slog"
			die "NCCL's build failed (log in $slog)"
		fi
		rm -rf "$NCCL_BUILT/obj" "$NCCL_BUILT"/lib/*.a
		if [[ -n ${FABRIC_BENCH_OUT:-} ]]; then
			# 12 MiB parts: small enough to bring back and carry next time
			rm -f "$OUTDIR"/nccl-built.tar.xz.part-*
			tar -C "$NCCL_BUILT" -cf - . | xz -6 -T0 | split -b 12M - "$OUTDIR/nccl-built.tar.xz.part-" ||
				say "WARNING: packing the build into $OUTDIR failed"
			say "nccl: packed into $(ls "$OUTDIR"/nccl-built.tar.xz.part-* | wc -l) part(s) in $OUTDIR (NCCL_PREBUILT next time)"
		fi
	fi
	[[ -f $NCCL_BUILT/include/nccl.h && -e $NCCL_BUILT/lib/libnccl.so.2 ]] ||
		die "no include/nccl.h and lib/libnccl.so.2 in $NCCL_BUILT"
	say "nccl: NCCL $(nccl_header_version "$NCCL_BUILT/include/nccl.h") in $NCCL_BUILT ($((SECONDS - t0)) s); runs use it with NCCL_HOME=built"
}

need_gpus() {
	if ((${FABRIC_VHOSTS:-0} >= 2)); then
		((NGPUS >= 1)) || die "no GPU visible"
		mps_start
		return 0
	fi
	((NGPUS >= 2)) || die "$NGPUS GPU(s) visible: the network path between GPUs needs 2, or FABRIC_VHOSTS=N ranks as hosts on one GPU"
}

# The emulated cluster (bench/netns.sh): made when a run first needs $1 hosts,
# removed at exit.
netns_ensure() {
	((NETNS_N >= $1)) && return 0
	netns_up "$1" >>"$STAGE_LOG/netns.log" 2>&1 || {
		cat "$STAGE_LOG/netns.log" >&2
		die "could not make $1 emulated hosts (FABRIC_NETNS=1; log in $STAGE_LOG/netns.log)"
	}
	say "netns: $1 hosts, ip/tc from $(dirname "$(dirname "$NETNS_IP")")"
	netns_show | sed 's/^/    /' | tee -a "$SUMMARY"
}

# The interface a netns run's NCCL logs name (the plugin's device 0, or
# Socket's first interface) must be FABRIC_NETNS_IFACE's. Appends to CHECK_MSG.
check_netns_iface() {
	local want=${FABRIC_NETNS_IFACE-eth0} got
	got=$(cat "$1".nccl.*.log 2>/dev/null | grep -o -E 'NET/(Fabric|Socket) : (device 0: [^,]+|Using \[0\][^:]+)' |
		head -n 1 | sed -E 's/.*(device 0: |Using \[0\])//')
	CHECK_MSG+=", host iface ${got:-?}"
	if [[ -n $want && -n $got && $got != "$want" ]]; then
		CHECK_MSG+=" [not $want: the run did not use the emulated link]"
		return 1
	fi
	return 0
}

# nccl-fabric-perf (plugin and raw libfabric, --compare) between two emulated
# hosts, and over loopback for comparison, per provider; plus one TCP stream
# (python3). Rows go to netns-perf.csv with the link first.
stage_netns_perf() {
	ensure_setup
	local perf=${FABRIC_PERF:-$(dirname "$PLUGIN")/../bin/nccl-fabric-perf} fail=0 prov link out csv rc
	[[ -x $perf ]] || die "no nccl-fabric-perf at $perf (set FABRIC_PERF)"
	netns_ensure 2
	local rate=netns${FABRIC_NETNS_RATE:+-$FABRIC_NETNS_RATE}
	if command -v python3 >/dev/null; then
		say "    $(netns_tcp_rate 0 1 3 2>&1)"
	fi
	local ifc=${FABRIC_NETNS_IFACE-eth0}
	unset_args
	for prov in ${NETNS_PERF_PROVIDERS:-default tcp tcp;ofi_rxm}; do
		for link in "$rate" loopback; do
			[[ $link == loopback && ${NETNS_PERF_LOOPBACK:-1} == 0 ]] && continue
			local -a args=(--compare --raw-op "${NETNS_PERF_RAW_OP:-send}" --sizes "${NETNS_PERF_SIZES:-64K,1M,4M,64M}")
			local -a extra
			read -r -a extra <<<"${NETNS_PERF_ARGS:-}"
			args+=("${extra[@]}")
			local -a env=("NCCL_NET_PLUGIN=$PLUGIN")
			[[ $prov != default ]] && args+=(--provider "$prov")
			if [[ $link == loopback ]]; then
				args+=(--loopback)
			else
				env+=("NCCL_FABRIC_TEST_NETNS=fabh0,fabh1")
				[[ -n $ifc ]] && env+=("FI_TCP_IFACE=$ifc" "FI_SOCKETS_IFACE=$ifc" "FI_UDP_IFACE=$ifc" "FI_NET_IFACE=$ifc")
			fi
			out=$STAGE_LOG/perf-$link-${prov//;/+}
			[[ " ${extra[*]} " == *" --bidir "* ]] && out+=-bidir
			csv=$out.csv
			rc=0
			run_limit "netns-perf $link $prov" || return 1
			timeout -k 10 "$RUN_LIMIT" env "${UNSET[@]}" "${env[@]}" "$perf" "${args[@]}" --csv "$csv" >"$out.out" 2>&1 || rc=$?
			say "$(printf '%-4s netns-perf %s, provider %s: %s' "$( ((rc == 0)) && echo PASS || echo FAIL)" "$link" "$prov" \
				"$(grep -h -E '^# (provider|device):' "$out.out" | sed 's/^# *//' | tr -s ' ' | paste -sd';')")"
			grep -E '^ +(bytes|[0-9])' "$out.out" | tee -a "$SUMMARY"
			((rc == 0)) || {
				tail -n 5 "$out.out" | sed 's/^/    out: /' | tee -a "$SUMMARY"
				fail=1
			}
			if [[ -s $csv ]]; then
				[[ -s $OUTDIR/netns-perf.csv ]] || sed -n '1s/^/link,/p' "$csv" >"$OUTDIR/netns-perf.csv"
				tail -n +2 "$csv" | sed "s/^/$link,/" >>"$OUTDIR/netns-perf.csv"
			fi
		done
	done
	return $fail
}

# CUDA MPS for the virtual hosts: without it the GPU time-slices the ranks'
# kernels and every path caps at the same speed. Stopped at exit.
MPS_PIPE=""
mps_start() {
	[[ -n $MPS_PIPE ]] && return 0
	MPS_PIPE=$WORK/mps
	mkdir -p "$MPS_PIPE" "$WORK/mpslog"
	if ! CUDA_MPS_PIPE_DIRECTORY=$MPS_PIPE CUDA_MPS_LOG_DIRECTORY=$WORK/mpslog nvidia-cuda-mps-control -d \
		>>"$STAGE_LOG/mps.log" 2>&1; then
		say "WARNING: nvidia-cuda-mps-control -d failed (see $STAGE_LOG/mps.log): ranks time-slice the GPU"
	fi
	export CUDA_MPS_PIPE_DIRECTORY=$MPS_PIPE
}
mps_stop() {
	[[ -n $MPS_PIPE ]] || return 0
	echo quit | CUDA_MPS_PIPE_DIRECTORY=$MPS_PIPE nvidia-cuda-mps-control >/dev/null 2>&1 || true
	MPS_PIPE=""
}

# The plugin on this setup's libfabric: every collective over each provider,
# with the GPU-memory decision each run logged.
stage_libfabric() {
	ensure_setup
	need_gpus
	local path fail=0 base
	say "libfabric: $(fi_info --version 2>/dev/null | grep -m1 -i 'libfabric:' | sed 's/.*: *//')"
	for path in ${LF_PATHS:-fabric-default fabric-tcp-native fabric-tcp fabric-shm fabric-shm-force}; do
		local gdr=""
		[[ $path == fabric-shm-force ]] && gdr=gdr
		GDR_CHECK=$gdr run_bench "lf-$path-multi" "$path" multi correctness.csv \
			--min-bytes 8 --max-bytes "${CORR_MAX:-16M}" --factor 4 --iters 5 --warmup 2 \
			--timeout 120 || fail=1
		base=$STAGE_LOG/lf-$path-multi
		# the decision, as NCCL_DEBUG=INFO shows it (rank 0's log)
		local f
		f=$(ls "$base".nccl.*.log 2>/dev/null | head -n 1)
		[[ -n $f ]] && grep -h -E 'NET/Fabric : (libfabric [0-9]|NCCL_FABRIC_PROVIDER:|GPU memory|FI_OPT_CUDA_API_PERMITTED|What NCCL|device 0:)|NET/Fabric.*WARN|Using network' "$f" |
			sed 's/^[^ ]* [^ ]* //; s/^/    info: /' | cut -c1-400 | tee -a "$SUMMARY"
	done
	return $fail
}

stage_correctness() {
	ensure_setup
	need_gpus
	local path mode fail=0
	local -a modes=(single multi)
	if ((NGPUS < 2)); then
		# one process driving one GPU has no peer: nothing crosses the network
		say "SKIP corr-*-single: $NGPUS GPU visible (one process, all GPUs needs 2); multi mode runs FABRIC_VHOSTS ranks"
		modes=(multi)
	fi
	for path in fabric-tcp fabric-shm; do
		for mode in "${modes[@]}"; do
			run_bench "corr-$path-$mode" "$path" "$mode" correctness.csv \
				--min-bytes 8 --max-bytes "${CORR_MAX:-16M}" --factor 4 --iters 5 --warmup 2 \
				--timeout 120 || fail=1
		done
	done
	# the GPUDirect path wherever correctness runs
	gpu_buffers_multi || fail=1
	return $fail
}

# GPU buffers through testhmem in CUDA mode, multi mode: with the plugin's
# default data path (RMA writes where the policy takes them) and with RMA
# writes off (tagged messages), every collective, data and GDRDMA checked.
gpu_buffers_multi() {
	local fail=0 rma
	if [[ -z $TESTPROV_DIR ]]; then
		say "FAIL gpu-multi: no libtesthmem-fi.so found (build the project's tests, or set FABRIC_TESTPROV)"
		return 1
	fi
	for rma in default 0; do
		local tag="" extra=${FABRIC_EXTRA_ENV:-}
		if [[ $rma == 0 ]]; then
			tag=rma0
			extra+=" NCCL_FABRIC_RMA=0"
		fi
		FABRIC_EXTRA_ENV=$extra PATH_TAG=$tag GDR_CHECK=gdr run_bench "gpu-multi${tag:+-$tag}" fabric-gpu multi \
			correctness.csv --min-bytes 8 --max-bytes "${CORR_MAX:-16M}" --factor 4 --iters 5 --warmup 2 \
			--timeout 120 || fail=1
	done
	return $fail
}

stage_torch() {
	ensure_setup
	need_gpus
	local path fail=0 base out rc net t0 result
	for path in ${TORCH_PATHS:-fabric-tcp fabric-shm fabric-gpu}; do
		base=$STAGE_LOG/torch-$path
		out=$base.out
		net=$(path_net "$path")
		path_env "$path" "$base"
		# testhmem's CUDA mode copies from NCCL's proxy thread while NCCL's kernel
		# waits for the data. PyTorch loads its kernels lazily: the first one
		# launched after the collective is loaded under a context-wide wait for
		# that kernel, the copy queues behind the load, and neither moves. A
		# GPUDirect NIC makes no CUDA call, so eager loading keeps the emulation
		# faithful (CUDA_MODULE_LOADING=LAZY reproduces the hang).
		[[ $path == fabric-gpu ]] && ENV_RUN+=("CUDA_MODULE_LOADING=${CUDA_MODULE_LOADING:-EAGER}")
		# PyTorch finds the wheel's libnccl through its own search path: another
		# NCCL (NCCL_HOME) only takes its place when loaded first
		[[ -n ${NCCL_ASKED:-} ]] && ENV_RUN+=("LD_PRELOAD=$NCCL_USED/lib/libnccl.so.2")
		unset_args
		printf '%s\n' "${ENV_RUN[@]}" >"$base.env"
		t0=$SECONDS
		rc=0
		run_limit "torch-$path" || {
			fail=1
			continue
		}
		timeout -k 10 "$RUN_LIMIT" env "${UNSET[@]}" "${ENV_RUN[@]}" PYTHONUNBUFFERED=1 \
			"$PYTHON" "$REPO/bench/torch_check.py" --timeout "${TORCH_TIMEOUT:-180}" \
			$( ((${FABRIC_VHOSTS:-0} >= 2)) && echo "--vhosts $FABRIC_VHOSTS") >"$out" 2>&1 || rc=$?
		{
			echo "== torch_check through $path (exit $rc)"
			grep -E '^(# |FAIL|rank [0-9]+ error|torch_check)|passed, .* failed' "$out"
		} >>"$OUTDIR/torch.txt"
		result=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$out" | tail -n 1)
		local verdict=PASS
		((rc == 0)) || verdict=FAIL
		check_nccl_logs "$base" "$net" || verdict=FAIL
		[[ $path == fabric-gpu ]] && { check_testhmem_log "$base" || verdict=FAIL; }
		say "$(printf '%-4s %-28s %4ds  %s; %s%s' "$verdict" "torch-$path" $((SECONDS - t0)) \
			"${result:-no result line}" "$CHECK_MSG" "$( ((rc == 0)) || echo " [exit $rc]")")"
		if [[ $verdict != PASS ]]; then
			grep -E '^FAIL' "$out" | head -n 5 | cut -c1-200 | sed 's/^/    /' | tee -a "$SUMMARY"
			show_failure "$base" "$out" | tee -a "$SUMMARY"
			fail=1
		fi
	done
	return $fail
}

# Full sweep for one path: stage_sweep PATH
stage_sweep() {
	local path=$1 mode fail=0
	ensure_setup
	need_gpus
	local -a modes
	case ${BENCH_MODE:-single} in
	single | multi) modes=("${BENCH_MODE:-single}") ;;
	both) modes=(single multi) ;;
	*) die "BENCH_MODE must be single, multi or both" ;;
	esac
	if [[ ${FABRIC_NETNS:-0} == 1 && ${modes[*]} != multi ]]; then
		say "note: FABRIC_NETNS=1 places the ranks of multi runs in hosts: this sweep runs multi only"
		modes=(multi)
	fi
	for mode in "${modes[@]}"; do
		run_bench "bench-$path-$mode" "$path" "$mode" bench.csv \
			--min-bytes "${SWEEP_MIN:-8}" --max-bytes "${SWEEP_MAX:-1G}" --factor "${SWEEP_FACTOR:-2}" \
			--iters "${SWEEP_ITERS:-20}" --warmup "${SWEEP_WARMUP:-5}" --timeout 300 \
			${SWEEP_COLLS:+--colls "$SWEEP_COLLS"} || fail=1
	done
	# compact table for this path (plot.py needs no matplotlib for it)
	"$PYTHON" "$REPO/bench/plot.py" --table --paths "$(path_name "$path" "${modes[0]}")" "$RESULTS/bench.csv" 2>&1 |
		grep -E 'all_reduce|alltoall|sendrecv|^path' | tee -a "$SUMMARY"
	return $fail
}

stage_gpu_buffers() {
	ensure_setup
	need_gpus
	[[ -n $TESTPROV_DIR ]] ||
		die "no libtesthmem-fi.so found: build the project's tests (build/testprov) or set FABRIC_TESTPROV"
	local fail=0 sweep=single
	if ((NGPUS < 2)); then
		# as correctness says: one process driving one GPU has no peer
		say "SKIP gpu-single, bench-fabric-gpu-single: $NGPUS GPU visible (one process, all GPUs needs 2); multi mode runs FABRIC_VHOSTS ranks"
		sweep=multi
	else
		GDR_CHECK=gdr run_bench "gpu-single" fabric-gpu single correctness.csv \
			--min-bytes 8 --max-bytes "${CORR_MAX:-16M}" --factor 4 --iters 5 --warmup 2 --timeout 120 ||
			fail=1
	fi
	gpu_buffers_multi || fail=1
	if [[ ${GPU_SWEEP_MAX:-256M} != 0 ]]; then
		GDR_CHECK=gdr run_bench "bench-fabric-gpu-$sweep" fabric-gpu "$sweep" bench.csv \
			--min-bytes "${SWEEP_MIN:-8}" --max-bytes "${GPU_SWEEP_MAX:-256M}" --factor "${SWEEP_FACTOR:-2}" \
			--iters "${SWEEP_ITERS:-20}" --warmup "${SWEEP_WARMUP:-5}" --timeout 300 || fail=1
	fi
	return $fail
}

# NCCL's RMA plugin (device-initiated networking, NCCL 2.30+): see the usage.
rma_lines() { # rank 0's RMA/GIN lines of one run, into the summary
	local f
	f=$(ls "$1".nccl.*.log 2>/dev/null | head -n 1)
	[[ -n $f ]] || return 0
	grep -h -E 'RMA/Plugin|GIN/Plugin|GIN |Symmetric memory|symmetric|RmaProxy|devCommCreate|device-initiated|RMA plugin|CTA policy|NCCL WARN' "$f" |
		sed 's/^[^ ]* [^ ]* //; s/^/    nccl: /' | sort -u | head -n 25 | cut -c1-300 | tee -a "$SUMMARY"
}
stage_rma() {
	ensure_setup
	need_gpus
	[[ -n $TESTPROV_DIR ]] ||
		die "no libtesthmem-fi.so found: build the project's tests (build/testprov) or set FABRIC_TESTPROV"
	local ver=$NCCL_USED_VERSION fail=0 rc run
	if ! awk -v v="$ver" 'BEGIN { split(v, a, "."); exit !(a[1] > 2 || (a[1] == 2 && a[2] >= 30)) }'; then
		say "SKIP rma: NCCL $ver has no RMA plugin interface (2.30+; NCCL_HOME=built after the nccl stage)"
		return 0
	fi
	local args=(--min-bytes 8 --max-bytes "${CORR_MAX:-16M}" --factor 4 --iters 5 --warmup 2
		--timeout "${RMA_TIMEOUT:-120}" --sym)
	local subsys=INIT,NET,ENV,GRAPH,ALLOC,REG,PROXY
	# name, extra environment, collectives
	local -a runs=("rma-put-signal||put_signal"
		"rma-ce|NCCL_CTA_POLICY=ZERO|all_gather,alltoall"
		"rma-sym||all_reduce,all_gather,reduce_scatter,alltoall,sendrecv")
	local path name extra colls
	for path in ${RMA_PATHS:-fabric-gpu}; do
		for run in "${runs[@]}"; do
			IFS='|' read -r name extra colls <<<"$run"
			name=$name-$path
			rc=0
			FABRIC_NCCL_SUBSYS=$subsys GDR_CHECK=gdr FABRIC_EXTRA_ENV="${FABRIC_EXTRA_ENV:-} $extra" \
				run_bench "$name" "$path" multi correctness.csv "${args[@]}" --colls "$colls" || rc=$?
			((rc == 0 || rc == 77)) || fail=1
			rma_lines "$STAGE_LOG/$name"
		done
		# control: the same puts without the plugin's RMA tables
		name=rma-control-put-signal-$path
		rc=0
		FABRIC_NCCL_SUBSYS=$subsys GDR_CHECK=gdr FABRIC_EXTRA_ENV="${FABRIC_EXTRA_ENV:-} NCCL_FABRIC_RMA_PLUGIN=off" \
			run_bench "$name" "$path" multi correctness.csv "${args[@]}" --colls put_signal \
			--max-bytes 64K >/dev/null || rc=$?
		say "rma control over $path (NCCL_FABRIC_RMA_PLUGIN=off, reported, not judged): nccl_bench status $rc; what NCCL said:"
		rma_lines "$STAGE_LOG/$name"
		grep -h -E 'FATAL|NOT SUPPORTED|last error' "$STAGE_LOG/$name".rank0.out 2>/dev/null |
			head -n 3 | cut -c1-300 | sed 's/^/    rank 0: /' | tee -a "$SUMMARY"
	done
	return $fail
}

stage_plot() {
	local -a csvs=()
	local f
	for f in "$RESULTS/bench.csv" "$OUTDIR/bench.csv" ${PLOT_CSVS:-}; do
		[[ -s $f ]] && csvs+=("$f")
	done
	if ((${#csvs[@]} == 0)); then
		say "FAIL plot: no sweep CSV (run a bench-* stage first, or set PLOT_CSVS)"
		return 1
	fi
	mkdir -p "$REPO/bench/results"
	if ! "$PYTHON" "$REPO/bench/plot.py" --merged-csv "$OUTDIR/results.csv" -o "$OUTDIR/busbw.png" \
		--table "${csvs[@]}" 2>&1 | tee -a "$SUMMARY"; then
		say "FAIL plot: plot.py failed"
		return 1
	fi
	cp "$OUTDIR/results.csv" "$REPO/bench/results/results.csv"
	cp "$OUTDIR/busbw.png" "$REPO/bench/results/busbw.png"
	say "plot: $OUTDIR/results.csv, $OUTDIR/busbw.png (copied to bench/results/)"
}

run_stage() {
	local stage=$1 rc=0
	STAGE_LOG=$LOGROOT/$stage
	mkdir -p "$STAGE_LOG"
	say "== $stage ($(date -u +%H:%M:%S) UTC)"
	case $stage in
	nccl) stage_nccl || rc=$? ;;
	setup) stage_setup || rc=$? ;;
	correctness) stage_correctness || rc=$? ;;
	torch) stage_torch || rc=$? ;;
	bench-fabric-tcp) stage_sweep fabric-tcp || rc=$? ;;
	bench-fabric-tcp-rails) stage_sweep fabric-tcp-rails || rc=$? ;;
	bench-fabric-shm) stage_sweep fabric-shm || rc=$? ;;
	bench-fabric-tcp-native) stage_sweep fabric-tcp-native || rc=$? ;;
	bench-fabric-default) stage_sweep fabric-default || rc=$? ;;
	netns-perf) stage_netns_perf || rc=$? ;;
	bench-socket) stage_sweep nccl-socket || rc=$? ;;
	bench-socket-tuned) stage_sweep nccl-socket-tuned || rc=$? ;;
	bench-socket-best) stage_sweep nccl-socket-best || rc=$? ;;
	bench-fabric-tcp-best) stage_sweep fabric-tcp-best || rc=$? ;;
	gpu-buffers) stage_gpu_buffers || rc=$? ;;
	libfabric) stage_libfabric || rc=$? ;;
	rma) stage_rma || rc=$? ;;
	plot) stage_plot || rc=$? ;;
	esac
	pack_logs # after every stage, so a later kill keeps the logs so far
	return $rc
}

# ------------------------------------------------------------------ main

(($# > 0)) || usage
stages=()
for s in "$@"; do
	case $s in
	-h | --help) usage ;;
	all) stages+=("${ALL_STAGES[@]}") ;;
	*)
		found=0
		for a in nccl netns-perf "${ALL_STAGES[@]}"; do [[ $s == "$a" ]] && found=1; done
		((found)) || {
			echo "run-gpu.sh: unknown stage '$s' (stages: nccl netns-perf ${ALL_STAGES[*]} all)" >&2
			exit 2
		}
		stages+=("$s")
		;;
	esac
done

mkdir -p "$OUTDIR" "$WORK" "$RESULTS" "$LOGROOT" || exit 2
# also after die(), and after SIGTERM/SIGINT (timeout, ^C): the emulated hosts go
trap 'mps_stop; ((NETNS_N > 0)) && netns_down; pack_logs' EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
NGPUS=0
PLUGIN="" BENCH="" TESTPROV_DIR=""
say "# run-gpu.sh $* (run $RUN_ID, $(hostname), output $OUTDIR)"
failed=()
for s in "${stages[@]}"; do
	run_stage "$s" || failed+=("$s")
done
if ((${#failed[@]} == 0)); then
	say "# run-gpu.sh: all ${#stages[@]} stage(s) passed: ${stages[*]}"
	exit 0
fi
say "# run-gpu.sh: FAILED stage(s): ${failed[*]} (of: ${stages[*]})"
exit 1
