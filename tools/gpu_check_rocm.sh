#!/usr/bin/env bash
# tools/gpu_check.sh's counterpart for a machine with an AMD GPU and ROCm (hiprtc, libamdhip64, and
# torch's ROCm build for the Python GPU tests): build, run the whole C++ suite with the kernel tests on
# the AMD GPU (BRAZE_TEST_DEVICE=hip: the same tests that run on the simulated device elsewhere), the
# Python suite (torch's ROCm tensors are "cuda" tensors, which braze runs through the HIP runtime), the
# demo and the GPU benchmarks, then print a short table. Logs go to $OUT when it is set.
# No AMD GPU has been lent to braze's development: this script has not run on one yet.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/braze_rocm_check}
mkdir -p "$out"
python=${PYTHON:-python3}
generator=""
command -v ninja >/dev/null && generator="-G Ninja"

status() { printf '%-28s %s\n' "$1" "$2" | tee -a "$out/summary.txt"; }
: > "$out/summary.txt"
(rocm-smi --showproductname || rocminfo | grep -m2 -E "Marketing Name|gfx") > "$out/gpu.txt" 2>&1 \
  || echo "no rocm-smi or rocminfo" > "$out/gpu.txt"

t0=$(date +%s)
if cmake -S . -B build-rocm $generator -DCMAKE_BUILD_TYPE=Release -DPython_EXECUTABLE="$(command -v $python)" \
     > "$out/configure.log" 2>&1 && cmake --build build-rocm -j "$(nproc)" > "$out/build.log" 2>&1; then
  status build "ok ($(( $(date +%s) - t0 )) s)"
else
  status build "FAILED (see build.log)"; tail -30 "$out/configure.log" "$out/build.log"; cat "$out/summary.txt"; exit 1
fi
# What braze sees: hiprtc, the HIP runtime and the device's description (ISA, CUs, wavefront).
PYTHONPATH=build-rocm/python $python -c "import braze; braze.show_config()" > "$out/config.log" 2>&1
status "hip device 0" "$(grep -m1 '^hip device 0' "$out/config.log" | cut -d: -f2- || echo 'none: see config.log')"

rc=0
export BRAZE_TEST_DEVICE=hip
if build-rocm/braze_tests --gtest_brief=1 > "$out/cpp_tests.log" 2>&1; then
  status "C++ tests" "$(grep -E '^\[  PASSED' "$out/cpp_tests.log" | head -1)"
else
  status "C++ tests" "FAILED"; rc=1; tail -40 "$out/cpp_tests.log"
fi
if PYTHONPATH=build-rocm/python $python -m pytest -q tests/python > "$out/py_tests.log" 2>&1; then
  status "Python tests" "$(tail -1 "$out/py_tests.log")"
else
  status "Python tests" "FAILED: $(tail -1 "$out/py_tests.log")"; rc=1; tail -40 "$out/py_tests.log"
fi
if PYTHONPATH=build-rocm/python $python examples/layer_norm_demo.py > "$out/demo.log" 2>&1; then
  status "demo (layer_norm)" "$(tail -1 "$out/demo.log")"
else
  status "demo (layer_norm)" "FAILED"; rc=1; tail -20 "$out/demo.log"
fi
if PYTHONPATH=build-rocm/python $python benchmarks/python/compare.py --compile > "$out/compare.log" 2>&1; then
  status "GPU benchmarks" "ok (compare.log)"
else
  status "GPU benchmarks" "FAILED (compare.log)"; rc=1
fi
echo "== braze gpu_check_rocm on $(tr '\n' ' ' < "$out/gpu.txt") =="
cat "$out/summary.txt"
echo "== benchmarks/python/compare.py"
cat "$out/compare.log"
exit $rc
