#!/usr/bin/env bash
# The README's test command: builds and runs every test, on every libfabric
# the plugin supports.
#
#   scripts/test.sh           every variant below
#   scripts/test.sh --quick   the release variant alone (Debian's libfabric, the
#                             tests listed for it below): the edit loop; its
#                             build folder is the release variant's, so a
#                             later full run reuses it
#
# Variants (all by default; NCCL_FABRIC_TEST_VARIANTS picks some, e.g.
# "release lf2"):
#
#   release     Debian 12's libfabric 1.17, warnings as errors; the checker's
#               full case lists over tcp and shm (plain, rails, RMA writes)
#               are left to asan, which runs them on this same libfabric, and
#               to lf2, which runs them optimized; the older API versions over
#               tcp and the no-eager mode (provider-independent code) to lf2,
#               where native tcp makes a case cheapest
#   asan        the same under AddressSanitizer + UndefinedBehaviorSanitizer,
#               less the runs that repeat code other runs cover (older API
#               versions, udp, eager 0, rails and RMA writes over shm (tcp
#               runs them here), the HMEM decision matrix)
#   lf2         libfabric 2.x built from Debian 13's source package, without
#               CUDA support; the plugin is still built against the 1.17
#               headers, as users build it, and runs on the newer library
#   lf2-cuda    libfabric 2.x with its CUDA support loaded at run time: the
#               stub CUDA driver and runtime (tests/stubcuda) stand in for a
#               GPU, so real providers give their real answers. Only the tests
#               whose outcome libfabric's CUDA support can change run here
#               (labels unit, hmem, testprov, stubcuda, libfabric-cuda: see
#               tests/func/CMakeLists.txt); the rest is lf2's
#   headers-2x  the whole tree compiled against the 2.x headers (-Werror) and
#               its unit tests run: nothing deprecated or removed is used
#
# How it runs: libfabric 2.x is built once into a cache (scripts/libfabric-2x.sh;
# a variant whose parts cannot be had here is reported as skipped, with the
# reason), in the background while the first variants build and test. The
# variants are built one after another (ccache, where installed, shares the
# objects of those built alike for the length of the run); as each is built
# its tests start, NCCL_FABRIC_TEST_LANES variants at once (default 1). Within
# a variant ctest runs NCCL_FABRIC_TEST_JOBS tests at once (default: cores +
# 4) with a resource spec of NCCL_FABRIC_TEST_CPUS "cpu" slots (default: the
# cores): every busy test takes one, the fault runs, which mostly wait for a
# peer to be declared dead, take none (tests/CMakeLists.txt). The tests share
# nothing (ports, shm names, namespaces, files), so any of them may run at
# once. Each variant's ctest output is printed as one block when its tests
# end. The checker's time bounds (a dead peer seen within 15 s, connect()
# returning within 5 s, ...) scale by NCCL_FABRIC_TEST_TIMEOUT_MULTIPLIER, 3
# here unless set: the libfabric builds and tests side by side stretch them.
# The last line counts every test of every variant; the exit status is
# non-zero when any failed.
set -uo pipefail
cd "$(dirname "$0")/.."

quick=0
for a in "$@"; do
  case $a in
    --quick) quick=1 ;;
    -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "usage: $0 [--quick]" >&2; exit 2 ;;
  esac
done

if [ $quick = 1 ]; then
  scripts/install-deps.sh || exit 1
  variants=release
else
  scripts/install-deps.sh --test || exit 1
  # asan first: its tests take longest
  variants=${NCCL_FABRIC_TEST_VARIANTS:-asan release lf2 headers-2x lf2-cuda}
fi
ncpu=$(nproc)
cpus=${NCCL_FABRIC_TEST_CPUS:-$ncpu}
jobs=${NCCL_FABRIC_TEST_JOBS:-$((cpus + 4))}
lanes=${NCCL_FABRIC_TEST_LANES:-1}
export NCCL_FABRIC_TEST_TIMEOUT_MULTIPLIER=${NCCL_FABRIC_TEST_TIMEOUT_MULTIPLIER:-3}
# ASan: libfabric itself is not instrumented; leaks inside it are not ours.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

for v in $variants; do
  case $v in
    release | asan | lf2 | lf2-cuda | headers-2x) ;;
    *) echo "unknown variant $v (NCCL_FABRIC_TEST_VARIANTS)" >&2; exit 2 ;;
  esac
done

# Background jobs get their own process groups (set -m), so that an
# interrupted run stops them with everything they started.
set -m
state=$(mktemp -d "${TMPDIR:-/tmp}/nccl-fabric-test.XXXXXX") || exit 1
bg_pids=()
cleanup() {
  for p in "${bg_pids[@]}"; do
    kill -0 "$p" 2>/dev/null && kill -TERM -- "-$p" 2>/dev/null
  done
  rm -rf "$state"
}
trap cleanup EXIT
launcher=(-DCMAKE_C_COMPILER_LAUNCHER=)
if command -v ccache >/dev/null; then
  # the build folders differ, the sources and flags do not
  export CCACHE_DIR=$state/ccache CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=1
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
trap 'exit 130' INT TERM

# ctest's resources: a "cpu" slot per core, one per busy test (the fault
# runs take none: tests/CMakeLists.txt).
printf '{"version": {"major": 1, "minor": 0}, "local": [{"cpu": [{"id": "0", "slots": %d}]}]}\n' \
  "$cpus" >"$state/resources.json"

start_all=$(date +%s)
stamp() { echo "[$(( $(date +%s) - start_all )) s]"; }

# --- libfabric 2.x, in the background --------------------------------------------
# Built into the cache when missing (minutes); the variants' builds go on
# meanwhile. Results: $state/lf2.<flavour>.{prefix,err,rc}.
need_lf2=0
case " $variants " in *" lf2"* | *" headers-2x "*) need_lf2=1 ;; esac
if [ $need_lf2 = 1 ]; then
  (
    for flavour in nocuda cuda; do
      flag=()
      [ $flavour = cuda ] && flag=(--cuda)
      scripts/libfabric-2x.sh "${flag[@]}" >"$state/lf2.$flavour.prefix" 2>"$state/lf2.$flavour.err"
      echo $? >"$state/lf2.$flavour.rc"
    done
  ) &
  bg_pids+=($!)
fi

# lf2_wait FLAVOUR: until that flavour is settled (nocuda is built first).
lf2_wait() {
  [ $need_lf2 = 1 ] || return 0
  while [ ! -f "$state/lf2.$1.rc" ]; do sleep 1; done
}
# lf2_get FLAVOUR: prints the prefix; status 0, 77 (skipped) or 1 (failed).
lf2_get() {
  local rc
  rc=$(cat "$state/lf2.$1.rc")
  [ "$rc" = 0 ] && [ -s "$state/lf2.$1.prefix" ] && { cat "$state/lf2.$1.prefix"; return 0; }
  [ "$rc" = 77 ] && return 77
  return 1
}
# lf2_dirs: the prefixes for lf2-cuda's stubcuda tests (cmake -D).
lf2_dirs() {
  local f p up
  [ $need_lf2 = 1 ] || return 0
  for f in nocuda cuda; do
    p=$(lf2_get $f) || continue
    up=$(tr a-z A-Z <<<"$f")
    echo "-DFABRIC_TEST_LIBFABRIC_${up}_DIR=$p"
  done
}

# variant_setup NAME: sets dir, libdir, expect, cuda, cmake_args, ctest_args,
# pkgconfig; status 77 or 1 when its libfabric 2.x cannot be had (reason in
# $why). Waits for libfabric 2.x where the variant needs it.
variant_setup() {
  dir=build-test-$1 libdir="" expect="" cuda=0 cmake_args=() ctest_args=() pkgconfig="" why=""
  case $1 in
    release)
      # asan runs the full lists on the same libfabric, lf2 all of them (see
      # above); the whole checker over each emulated RDMA profile runs here on
      # 1.17's shm base and in lf2 on 2.x's
      ctest_args=(-E '^func[.]check[.]((tcp|shm)[.](full|rails|rma)|tcp[.]older|tcp[.]eager0)$') ;;
    asan)
      cmake_args=(-DFABRIC_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug)
      # what other runs of the same code cover: the older API versions (their
      # adapters: unit.abi, here too), udp, eager 0, the HMEM decision matrix
      # the emulated RDMA profiles: the no-tag path (efa-direct) and cxi's
      # endpoint-bound registrations only
      ctest_args=(-E '^func[.]check[.](tcp[.]older|shm[.]older|udp|tcp[.]eager0|shm[.]rails|shm[.]rma)|^func[.]hmem[.](matrix|text)$|^func[.]check[.]profile[.]((efa|verbs|psm3|opx|cxi-tagged)[.]|.*[.]shm$)') ;;
    lf2 | lf2-cuda | headers-2x)
      local flavour=nocuda prefix rc
      [ "$1" = lf2-cuda ] && flavour=cuda
      lf2_wait $flavour
      [ "$1" = lf2-cuda ] && lf2_wait nocuda # its stubcuda tests take both
      prefix=$(lf2_get $flavour)
      rc=$?
      if [ $rc != 0 ]; then
        why="libfabric 2.x ($flavour): $(tail -3 "$state/lf2.$flavour.err" | tr '\n' ' ')"
        return $rc
      fi
      expect=$(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --modversion libfabric | cut -d. -f1,2)
      libdir=$prefix/lib
      case $1 in
        lf2)
          # the profiles' fault runs over tcp;ofi_rxm, whose 2.x receiver
          # crashes when an RMA write's sender dies (rxm_handle_comp_error,
          # policy_traits.c): the emulation's base, not the plugin; release and
          # asan run them on 1.17, their shm twins run here
          ctest_args=(-E '^func[.]check[.]profile[.][^.]+[.]faults$') ;;
        lf2-cuda)
          cuda=1
          ctest_args=(-L '^(unit|hmem|testprov|stubcuda|libfabric-cuda)$') ;;
        headers-2x)
          pkgconfig=$prefix/lib/pkgconfig
          ctest_args=(-L '^unit$') ;;
      esac ;;
  esac
  return 0
}

# variant_env: the environment the variant's configure and tests run in.
variant_env() {
  envs=()
  [ -n "$libdir" ] && envs+=("LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
  [ -n "$pkgconfig" ] && envs+=("PKG_CONFIG_PATH=$pkgconfig")
  return 0
}

# --- builds, one after another, in the background --------------------------------
# $state/<variant>.build: ok, failed, skipped or failed-lf2; the messages that
# go with it in $state/<variant>.build.out.
build_one() {
  local v=$1 out=$state/$1.build.out rc
  variant_setup "$v"
  rc=$?
  if [ $rc = 77 ]; then
    echo "$why" >"$out"; echo skipped >"$state/$v.build"; return
  elif [ $rc != 0 ]; then
    echo "$why" >"$out"; echo failed-lf2 >"$state/$v.build"; return
  fi
  variant_env
  mkdir -p "$dir"
  # lf2-cuda also runs the stubcuda tests on both 2.x prefixes (settled by
  # variant_setup): libfabric's CUDA support under the stubs
  local dirs=()
  [ "$v" = lf2-cuda ] && mapfile -t dirs < <(lf2_dirs)
  if ! env "${envs[@]}" cmake -S . -B "$dir" -DFABRIC_WERROR=ON \
         "-DFABRIC_EXPECT_LIBFABRIC_VERSION=$expect" "-DFABRIC_EXPECT_LIBFABRIC_CUDA=$cuda" \
         "${launcher[@]}" "${dirs[@]}" "${cmake_args[@]}" >"$dir/configure.log" 2>&1; then
    cat "$dir/configure.log" >"$out"
    echo failed >"$state/$v.build"; return
  fi
  if ! cmake --build "$dir" -j"$ncpu" >"$dir/build.log" 2>&1; then
    grep -E 'error|warning' "$dir/build.log" | head -40 >"$out"
    echo failed >"$state/$v.build"; return
  fi
  echo ok >"$state/$v.build"
}
(
  for v in $variants; do
    echo "$(stamp) === $v: build"
    build_one "$v"
  done
) &
bg_pids+=($!)

# --- tests: as each variant is built, NCCL_FABRIC_TEST_LANES at once ----------
total_pass=0 total_fail=0 total_skip=0
summary=()

# ctest_counts LOG: adds the log's results to the totals.
ctest_counts() {
  local log=$1 line total failed skipped
  line=$(grep -E 'tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -1)
  if [ -z "$line" ]; then
    total_fail=$((total_fail + 1)) # ctest itself did not finish
    return
  fi
  failed=$(sed -E 's/.* ([0-9]+) tests? failed out of ([0-9]+).*/\1/' <<<"$line")
  total=$(sed -E 's/.* failed out of ([0-9]+).*/\1/' <<<"$line")
  skipped=$(grep -cE '\*\*\*Skipped|Not Run' "$log" || true)
  total_pass=$((total_pass + total - failed - skipped))
  total_fail=$((total_fail + failed))
  total_skip=$((total_skip + skipped))
}

# test_start NAME: starts ctest in the background; its pid in test_pid[NAME].
declare -A test_pid test_t0
test_start() {
  local v=$1
  variant_setup "$v" >/dev/null
  variant_env
  echo "$(stamp) === $v: tests started${libdir:+ (libfabric from $libdir)}"
  (cd "$dir" && exec env "${envs[@]}" ctest --output-on-failure -j"$jobs" --timeout 600 \
     --resource-spec-file "$state/resources.json" \
     "${ctest_args[@]}") >"$dir/ctest.log" 2>&1 &
  test_pid[$v]=$!
  bg_pids+=($!)
  test_t0[$v]=$(date +%s)
}

# test_end NAME: prints the variant's ctest output as one block, counts it.
test_end() {
  local v=$1
  wait "${test_pid[$v]}"
  variant_setup "$v" >/dev/null
  echo "$(stamp) === $v: tests ($(( $(date +%s) - test_t0[$v] )) s)${libdir:+, libfabric from $libdir}"
  cat "$dir/ctest.log"
  local before_fail=$total_fail before_pass=$total_pass before_skip=$total_skip
  ctest_counts "$dir/ctest.log"
  summary+=("$v: $((total_pass - before_pass)) passed, $((total_fail - before_fail)) failed, $((total_skip - before_skip)) skipped")
}

pending=($variants)
running=()
while [ ${#pending[@]} -gt 0 ] || [ ${#running[@]} -gt 0 ]; do
  still=()
  for v in "${running[@]}"; do
    if kill -0 "${test_pid[$v]}" 2>/dev/null; then still+=("$v"); else test_end "$v"; fi
  done
  running=("${still[@]}")
  while [ ${#pending[@]} -gt 0 ] && [ ${#running[@]} -lt "$lanes" ]; do
    v=${pending[0]}
    [ -f "$state/$v.build" ] || break # builds finish in order
    pending=("${pending[@]:1}")
    case $(cat "$state/$v.build") in
      ok) test_start "$v"; running+=("$v") ;;
      skipped)
        echo "SKIP: $v: $(cat "$state/$v.build.out")"
        summary+=("$v: SKIPPED ($(cat "$state/$v.build.out"))")
        total_skip=$((total_skip + 1)) ;;
      failed-lf2)
        echo "=== $v: libfabric 2.x build FAILED"; cat "$state/$v.build.out"
        summary+=("$v: libfabric 2.x build FAILED")
        total_fail=$((total_fail + 1)) ;;
      *)
        echo "=== $v: configure or build FAILED"; cat "$state/$v.build.out"
        summary+=("$v: build FAILED")
        total_fail=$((total_fail + 1)) ;;
    esac
  done
  sleep 1
done

echo "=== summary ($(( $(date +%s) - start_all )) s)"
printf '  %s\n' "${summary[@]}"
echo "$total_pass passed, $total_fail failed, $total_skip skipped"
[ $total_fail = 0 ]
