#!/usr/bin/env bash
# One call on a lent GPU machine (see shared/GPU.md): unpack the carried dependency debs, build,
# run the whole C++ and Python suite with the kernel tests on the GPU (BRAZE_TEST_DEVICE=cuda: the
# same tests that run on the simulated device elsewhere), run the GPU benchmarks, and print a short
# table last. Logs go to $OUT when it is set.
# On a machine with an AMD GPU and ROCm (BRAZE_GPU_PLATFORM=hip, chosen by itself where rocminfo sees a
# gfx agent and there is no nvidia-smi) the same steps run through the HIP runtime and hiprtc
# (BRAZE_TEST_DEVICE=hip; torch's ROCm build for the Python GPU tests), without the CUDA-only ones
# (compute-sanitizer, the CUDA-graph host benchmarks). No AMD GPU has been lent yet: that mode has not run.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/braze_gpu_check}
mkdir -p "$out"

if [ -d .gpu-deps ]; then
  mkdir -p /tmp/deps && for f in .gpu-deps/*.deb; do dpkg -x "$f" /tmp/deps; done
  export CMAKE_PREFIX_PATH=/tmp/deps/usr LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
  # Debian's googletest package ships sources only under /usr/src; libgtest-dev has the built libraries.
fi
python=${PYTHON:-python3}
generator=""
command -v ninja >/dev/null && generator="-G Ninja"

status() { printf '%-28s %s\n' "$1" "$2" | tee -a "$out/summary.txt"; }
: > "$out/summary.txt"
platform=${BRAZE_GPU_PLATFORM:-}
# Read whole before grep looks at it: grep -q stopping early would make rocminfo die of SIGPIPE, and
# pipefail would then read as "no AMD GPU".
rocm_info=$(rocminfo 2>/dev/null || true)
if [ -z "$platform" ]; then
  platform=cuda
  if ! command -v nvidia-smi >/dev/null && grep -q "gfx" <<< "$rocm_info"; then platform=hip; fi
fi
if [ "$platform" = hip ]; then
  { grep -E "Marketing Name|  Name: +gfx" <<< "$rocm_info" | head -2 | tr -s ' '; } > "$out/gpu.txt"
  [ -s "$out/gpu.txt" ] || echo "no rocminfo" > "$out/gpu.txt"
else
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$out/gpu.txt" 2>&1 || echo "no nvidia-smi" > "$out/gpu.txt"
fi

t0=$(date +%s)
if cmake -S . -B build-gpu $generator -DCMAKE_BUILD_TYPE=Release -DPython_EXECUTABLE="$(command -v $python)" \
     > "$out/configure.log" 2>&1 && cmake --build build-gpu -j "$(nproc)" > "$out/build.log" 2>&1; then
  status build "ok ($(( $(date +%s) - t0 )) s)"
else
  status build "FAILED (see build.log)"; tail -30 "$out/configure.log" "$out/build.log"; cat "$out/summary.txt"; exit 1
fi

# What braze sees: the compilers, the runtimes and each device's description.
PYTHONPATH=build-gpu/python $python -c "import braze; braze.show_config()" > "$out/config.log" 2>&1

rc=0
export BRAZE_TEST_DEVICE=$platform
if build-gpu/braze_tests --gtest_brief=1 > "$out/cpp_tests.log" 2>&1; then
  status "C++ tests" "$(grep -E '^\[  PASSED' "$out/cpp_tests.log" | head -1)"
else
  status "C++ tests" "FAILED"; rc=1; tail -40 "$out/cpp_tests.log"
fi
# GPU tests skip (saying why) rather than fail where the driver or NVRTC is missing: say whether they ran.
gpu_skips=$(grep -c "GPU test skipped" "$out/cpp_tests.log")
if [ "$platform" = hip ]; then
  status "GPU tests" "kernel tests on the AMD GPU; the CUDA driver's own tests skip ($gpu_skips)"
elif [ "$gpu_skips" = 0 ]; then
  status "GPU tests" "ran (none skipped)"
else
  status "GPU tests" "$gpu_skips SKIPPED: $(grep -m1 -o 'GPU test skipped: .*' "$out/cpp_tests.log")"; rc=1
fi
# The GPU tests again under compute-sanitizer: out-of-bounds or misaligned accesses (memcheck) and
# shared-memory races (racecheck) in the generated kernels.
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
if [ "$platform" = hip ]; then
  status "compute-sanitizer" "not on AMD GPUs"
elif [ -x "$sanitizer" ]; then
  for tool in memcheck racecheck; do
    "$sanitizer" --tool $tool --print-limit 20 build-gpu/braze_tests \
      --gtest_filter='DeviceFusionCache*:Small/Pipeline*:SharedMemory*:*Schedules*:Transpose*' \
      --gtest_brief=1 > "$out/$tool.log" 2>&1
    summary=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$out/$tool.log" | tail -1)
    status "$tool" "${summary:-no summary (see $tool.log)}"
    echo "$summary" | grep -qE "SUMMARY: 0 (errors|hazards)" || rc=1
  done
else
  status "compute-sanitizer" "not found"
fi
if PYTHONPATH=build-gpu/python $python -m pytest -q tests/python > "$out/py_tests.log" 2>&1; then
  status "Python tests" "$(tail -1 "$out/py_tests.log")"
else
  status "Python tests" "FAILED: $(tail -1 "$out/py_tests.log")"; rc=1; tail -40 "$out/py_tests.log"
fi
if PYTHONPATH=build-gpu/python $python examples/layer_norm_demo.py > "$out/demo.log" 2>&1; then
  status "demo (layer_norm)" "$(tail -1 "$out/demo.log")"
else
  status "demo (layer_norm)" "FAILED"; rc=1; tail -20 "$out/demo.log"
fi
# GPU benchmarks: braze vs torch eager and torch.compile, the copy roofline, Python host latency; then
# the C++ host-overhead benchmarks (cached execute with no-op launches, and on the GPU).
if PYTHONPATH=build-gpu/python $python benchmarks/python/compare.py --compile > "$out/compare.log" 2>&1; then
  status "GPU benchmarks" "ok (compare.log)"
else
  status "GPU benchmarks" "FAILED (compare.log)"; rc=1
fi
if [ "$platform" = cuda ]; then
  build-gpu/braze_benchmarks --benchmark_filter='CachedExecute|GpuLaunch|NewSequence' > "$out/host_bench.log" 2>&1 || rc=1
else
  build-gpu/braze_benchmarks --benchmark_filter='CachedExecute|NewSequence' > "$out/host_bench.log" 2>&1 || rc=1
fi
# BRAZE_SWEEP=1: every case's kernels under other heuristic tunings, fastest first (sweep.log); a few
# minutes, so it is asked for rather than run each time.
if [ "${BRAZE_SWEEP:-0}" = 1 ]; then
  PYTHONPATH=build-gpu/python $python benchmarks/python/compare.py --sweep --reps 30 > "$out/sweep.log" 2>&1 \
    && status "tuning sweep" "ok (sweep.log)" || { status "tuning sweep" "FAILED (sweep.log)"; rc=1; }
fi
PYTHONPATH=build-gpu/python $python benchmarks/python/binding_overhead.py > "$out/binding_bench.log" 2>&1 || rc=1
echo "== braze gpu_check ($platform) on $(tr '\n' ' ' < "$out/gpu.txt") =="
cat "$out/summary.txt"
echo "== benchmarks/python/compare.py"
cat "$out/compare.log"
echo "== host overhead (C++)"
grep -E "^BM_" "$out/host_bench.log"
echo "== host overhead of the Python binding (no launch)"
cat "$out/binding_bench.log"
[ -f "$out/sweep.log" ] && { echo "== tuning sweep (fastest first per case)"; cat "$out/sweep.log"; }
exit $rc
