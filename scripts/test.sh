#!/usr/bin/env bash
# The README's second command: builds and runs every test, twice -- a
# warnings-as-errors build and an AddressSanitizer+UBSan build.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh
jobs=$(nproc)
status=0
for variant in release asan; do
  dir=build-test-$variant
  opts=(-DFABRIC_WERROR=ON)
  [ $variant = asan ] && opts+=(-DFABRIC_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug)
  echo "=== $variant build"
  cmake -S . -B "$dir" "${opts[@]}" >/dev/null
  cmake --build "$dir" -j"$jobs"
  echo "=== $variant tests"
  # ASan: libfabric itself is not instrumented; leaks inside it are not ours.
  if ! (cd "$dir" && ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 \
        UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        ctest --output-on-failure -j1 --timeout 600); then
    status=1
  fi
done
exit $status
