#!/usr/bin/env bash
# The README's second command: builds and runs every test, on every libfabric
# the plugin supports. Variants (all by default; NCCL_FABRIC_TEST_VARIANTS
# picks some, e.g. "release lf2"):
#
#   release     Debian 12's libfabric 1.17, warnings as errors
#   asan        the same under AddressSanitizer + UndefinedBehaviorSanitizer
#   lf2         libfabric 2.x built from Debian 13's source package, without
#               CUDA support; the plugin is still built against the 1.17
#               headers, as users build it, and runs on the newer library
#   lf2-cuda    libfabric 2.x with its CUDA support loaded at run time: the
#               stub CUDA driver and runtime (tests/stubcuda) stand in for a
#               GPU, so real providers give their real answers
#   headers-2x  the whole tree compiled against the 2.x headers (-Werror) and
#               its unit tests run: nothing deprecated or removed is used
#
# libfabric 2.x is built once into a cache (scripts/libfabric-2x.sh); a variant
# whose parts cannot be had here is reported as skipped, with the reason.
# The last line counts every test of every variant.
set -uo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh --test || exit 1
jobs=$(nproc)
variants=${NCCL_FABRIC_TEST_VARIANTS:-release asan lf2 lf2-cuda headers-2x}
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

# run_variant NAME BUILD_DIR LIBDIR|"" EXPECT_VERSION CUDA(0/1) [cmake options...]
run_variant() {
  local name=$1 dir=$2 libdir=$3 expect=$4 cuda=$5
  shift 5
  echo "=== $name: build"
  mkdir -p "$dir"
  local envs=()
  [ -n "$libdir" ] && envs=("LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
  if ! env "${envs[@]}" cmake -S . -B "$dir" -DFABRIC_WERROR=ON \
         "-DFABRIC_EXPECT_LIBFABRIC_VERSION=$expect" "-DFABRIC_EXPECT_LIBFABRIC_CUDA=$cuda" \
         "${lf2_dirs[@]}" "$@" >"$dir/configure.log" 2>&1; then
    cat "$dir/configure.log"
    summary+=("$name: configure FAILED")
    total_fail=$((total_fail + 1))
    return
  fi
  if ! cmake --build "$dir" -j"$jobs" >"$dir/build.log" 2>&1; then
    grep -E 'error|warning' "$dir/build.log" | head -40
    summary+=("$name: build FAILED")
    total_fail=$((total_fail + 1))
    return
  fi
  echo "=== $name: tests${libdir:+ (libfabric from $libdir)}"
  local log=$dir/ctest.log
  local label=()
  [ "$name" = headers-2x ] && label=(-L unit)
  # ASan: libfabric itself is not instrumented; leaks inside it are not ours.
  (cd "$dir" && env "${envs[@]}" ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 \
      UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
      ctest --output-on-failure -j1 --timeout 600 "${label[@]}") 2>&1 | tee "$log"
  local before_fail=$total_fail before_pass=$total_pass before_skip=$total_skip
  ctest_counts "$log"
  summary+=("$name: $((total_pass - before_pass)) passed, $((total_fail - before_fail)) failed, $((total_skip - before_skip)) skipped")
}

# lf2_prefix [--cuda]: the cached libfabric 2.x prefix, or "" with a SKIP line.
lf2_prefix() {
  local out rc
  out=$(scripts/libfabric-2x.sh "$@" 2>"/tmp/libfabric-2x.$$.err")
  rc=$?
  cat "/tmp/libfabric-2x.$$.err" >&2
  rm -f "/tmp/libfabric-2x.$$.err"
  [ $rc = 0 ] && echo "$out"
  return $rc
}

# The 2.x prefixes first, so every variant's tests that use them directly
# (tests/stubcuda: libfabric's CUDA support under the stubs) find them.
declare -A lf2_prefix_of lf2_rc_of
lf2_dirs=()
for flavour in nocuda cuda; do
  case " $variants " in *" lf2"* | *" headers-2x "*) ;; *) break ;; esac
  flag=()
  [ $flavour = cuda ] && flag=(--cuda)
  echo "=== libfabric 2.x ($flavour) from Debian 13's source package"
  lf2_prefix_of[$flavour]=$(lf2_prefix "${flag[@]}")
  lf2_rc_of[$flavour]=$?
  if [ "${lf2_rc_of[$flavour]}" = 0 ]; then
    echo "    ${lf2_prefix_of[$flavour]}"
    up=$(tr a-z A-Z <<<"$flavour")
    lf2_dirs+=("-DFABRIC_TEST_LIBFABRIC_${up}_DIR=${lf2_prefix_of[$flavour]}")
  fi
done

for v in $variants; do
  case $v in
  release)
    run_variant release build-test-release "" "" 0 ;;
  asan)
    run_variant asan build-test-asan "" "" 0 -DFABRIC_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug ;;
  lf2 | lf2-cuda | headers-2x)
    flavour=nocuda
    [ $v = lf2-cuda ] && flavour=cuda
    prefix=${lf2_prefix_of[$flavour]:-}
    rc=${lf2_rc_of[$flavour]:-1}
    if [ $rc = 77 ]; then
      summary+=("$v: SKIPPED (libfabric 2.x: see the SKIP line above)")
      total_skip=$((total_skip + 1))
      continue
    elif [ $rc != 0 ] || [ -z "$prefix" ]; then
      summary+=("$v: libfabric 2.x build FAILED")
      total_fail=$((total_fail + 1))
      continue
    fi
    version=$(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --modversion libfabric)
    version=$(cut -d. -f1,2 <<<"$version")
    case $v in
    lf2) run_variant lf2 build-test-lf2 "$prefix/lib" "$version" 0 ;;
    lf2-cuda) run_variant lf2-cuda build-test-lf2-cuda "$prefix/lib" "$version" 1 ;;
    headers-2x)
      export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
      run_variant headers-2x build-test-headers-2x "$prefix/lib" "$version" 0
      unset PKG_CONFIG_PATH ;;
    esac ;;
  *)
    echo "unknown variant $v" >&2
    total_fail=$((total_fail + 1)) ;;
  esac
done

echo "=== summary"
printf '  %s\n' "${summary[@]}"
echo "$total_pass passed, $total_fail failed, $total_skip skipped"
[ $total_fail = 0 ]
