#!/usr/bin/env bash
# The C++ tests that run several threads or processes, built with a sanitizer in a build folder of its
# own: `tools/sanitize.sh thread` (ThreadSanitizer: data races in the FusionCache, the kernel caches,
# parallel compilation, the disk cache's locks) or `tools/sanitize.sh address` (AddressSanitizer with
# leak checks, over the whole C++ suite). Not part of `make test`: a sanitized build takes minutes on
# two cores. Pass a gtest filter as the second argument to choose other tests.
set -euo pipefail
cd "$(dirname "$0")/.."
kind=${1:-thread}
case "$kind" in
  thread) flags="-fsanitize=thread"; default_filter='FusionCache.*:KernelCache*:KernelDiskCache*:ParallelCompile*:DeviceOps*' ;;
  address) flags="-fsanitize=address -fno-omit-frame-pointer"; default_filter='*' ;;
  *) echo "usage: $0 thread|address [gtest filter]" >&2; exit 2 ;;
esac
filter=${2:-$default_filter}
dir=build-$kind-sanitizer
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS="$flags -O1 -g" \
  -DCMAKE_EXE_LINKER_FLAGS="$flags" -DCMAKE_SHARED_LINKER_FLAGS="$flags" \
  -DBRAZE_BUILD_PYTHON=OFF -DBRAZE_BUILD_BENCHMARKS=OFF > /dev/null
cmake --build "$dir" -j "$(nproc)" --target braze_tests
# halt_on_error: the first report fails the run instead of scrolling past.
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" ASAN_OPTIONS="detect_leaks=1"
"$dir/braze_tests" --gtest_filter="$filter" --gtest_brief=1
echo "$kind sanitizer: no reports over '$filter'"
