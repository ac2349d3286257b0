#!/usr/bin/env bash
# One call on a lent GPU machine (see shared/GPU.md): unpack the carried dependency debs, build,
# run the whole C++ and Python suite with the kernel tests on the GPU (BRAZE_TEST_DEVICE=cuda: the
# same tests that run on the simulated device elsewhere) in parallel shards beside compute-sanitizer,
# run the GPU benchmarks, each step under a time limit, and print a short table last. Logs go to $OUT
# when it is set (one per suite, and report.txt). A run took 333 s on an H200 (58 s of it the build), torch.compile timed:
#   BRAZE_GPU_TEST_LIMIT=150 BRAZE_GPU_BENCH_LIMIT=90 BRAZE_BENCH_REPS=30 bash tools/gpu_check.sh
# (BRAZE_BENCH_COMPILE=0 leaves torch.compile out of compare.py's default run.)
# On a machine with an AMD GPU and ROCm (BRAZE_GPU_PLATFORM=hip, chosen by itself where rocminfo sees a
# gfx agent and there is no nvidia-smi) the same steps run through the HIP runtime and hiprtc
# (BRAZE_TEST_DEVICE=hip; torch's ROCm build for the Python GPU tests), without the CUDA-only ones
# (compute-sanitizer, the CUDA-graph host benchmarks). No AMD GPU has been lent yet: that mode has not run.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/braze_gpu_check}
mkdir -p "$out"
# Per-process logs go to $parts and are joined into one log per suite in $out: the device tool brings
# back only a few files.
parts=$(mktemp -d)

# .gpu-deps holds the debs of shared/GPU.md's list and of libssl-dev and libssl3 (OpenSSL's headers and
# libcrypto, which the kernel disk cache's SHA-256 links): apt-get download them here into the folder.
if [ -d .gpu-deps ]; then
  mkdir -p /tmp/deps && for f in .gpu-deps/*.deb; do dpkg -x "$f" /tmp/deps; done
  export CMAKE_PREFIX_PATH=/tmp/deps/usr LD_LIBRARY_PATH=/tmp/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
  # Debian's googletest package ships sources only under /usr/src; libgtest-dev has the built libraries.
fi
python=${PYTHON:-python3}
# .gpu-deps/wheels holds the Python wheels the GPU machine lacks (Lightning Thunder and its dependencies,
# shared/GPU.md says how to download them): installed without a registry, for the Thunder tests.
pydeps=""
if ls .gpu-deps/wheels/*.whl >/dev/null 2>&1; then
  pydeps=/tmp/pydeps
  $python -m pip install -q --no-deps --no-index --target "$pydeps" .gpu-deps/wheels/*.whl > /dev/null 2>&1 || pydeps=""
fi
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
  { grep -E "Marketing Name|  Name: +gfx" <<< "$rocm_info" | head -2 | tr -s ' '; } > "$parts/gpu.txt"
  [ -s "$parts/gpu.txt" ] || echo "no rocminfo" > "$parts/gpu.txt"
else
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$parts/gpu.txt" 2>&1 || echo "no nvidia-smi" > "$parts/gpu.txt"
fi

t0=$(date +%s)
if cmake -S . -B build-gpu $generator -DCMAKE_BUILD_TYPE=Release -DPython_EXECUTABLE="$(command -v $python)" \
     > "$parts/configure.log" 2>&1 && cmake --build build-gpu -j "$(nproc)" > "$parts/build.log" 2>&1; then
  status build "ok ($(( $(date +%s) - t0 )) s)"
else
  # The build log comes back only when the build fails: the device tool returns at most 8 files.
  cp "$parts/build.log" "$out/build.log" 2>/dev/null
  status build "FAILED (see build.log)"; tail -30 "$parts/configure.log" "$parts/build.log"; cat "$out/summary.txt"; exit 1
fi

# What braze sees: the compilers, the runtimes and each device's description.
PYTHONPATH=build-gpu/python $python -c "import braze; braze.show_config()" > "$out/config.log" 2>&1

rc=0
export BRAZE_TEST_DEVICE=$platform
# The suites run at once, split over the machine's cores (gtest shards, pytest file groups) and under
# time limits (BRAZE_GPU_TEST_LIMIT, BRAZE_GPU_BENCH_LIMIT seconds), so that one hang or a slow step
# still leaves the other results: a lent GPU's time is short.
test_limit=${BRAZE_GPU_TEST_LIMIT:-1200}
bench_limit=${BRAZE_GPU_BENCH_LIMIT:-900}
shards=$(( $(nproc) / 2 > 1 ? $(nproc) / 2 : 1 ))
for i in $(seq 0 $((shards - 1))); do
  GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i timeout -k 5 "$test_limit" build-gpu/braze_tests --gtest_brief=1 \
    > "$parts/cpp_tests.$i.log" 2>&1 &
done
groups=$(( shards > 1 ? shards / 2 : 1 ))
# The fuzzers run host arrays on the simulator, never the GPU; CI runs them in full. Here, where the GPU's
# minutes are short, a quarter of the slow ones' cases (test_fuzz.py took 100 s of one core in full, 26 s so);
# the general cases stay whole (20 batches, each needing 90% valid, and cheap).
export BRAZE_FUZZ_MATMUL_CASES=${BRAZE_FUZZ_MATMUL_CASES:-50} BRAZE_FUZZ_LAYOUT_CASES=${BRAZE_FUZZ_LAYOUT_CASES:-250} \
  BRAZE_FUZZ_SHAPES_CASES=${BRAZE_FUZZ_SHAPES_CASES:-50} BRAZE_FUZZ_BACKWARD_CASES=${BRAZE_FUZZ_BACKWARD_CASES:-50} \
  BRAZE_FUZZ_VIEW_CASES=${BRAZE_FUZZ_VIEW_CASES:-250} BRAZE_FUZZ_INTEGER_CASES=${BRAZE_FUZZ_INTEGER_CASES:-250} \
  BRAZE_FUZZ_SCAN_CASES=${BRAZE_FUZZ_SCAN_CASES:-25} BRAZE_FUZZ_IN_PLACE_CASES=${BRAZE_FUZZ_IN_PLACE_CASES:-50}
# test_thunder.py runs as a step of its own below, with the carried wheels on the path.
mapfile -t py_files < <(ls tests/python/test_*.py | grep -v test_thunder.py)
for g in $(seq 0 $((groups - 1))); do
  files=()
  for j in "${!py_files[@]}"; do (( j % groups == g )) && files+=("${py_files[$j]}"); done
  PYTHONPATH=build-gpu/python timeout -k 5 "$test_limit" $python -m pytest -q -p no:cacheprovider "${files[@]}" \
    > "$parts/py_tests.$g.log" 2>&1 &
done
# compute-sanitizer on the GPU tests meanwhile: out-of-bounds or misaligned accesses (memcheck) and
# shared-memory races (racecheck) in the generated kernels.
sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
if [ "$platform" = cuda ] && [ -x "$sanitizer" ]; then
  for tool in memcheck racecheck; do
    timeout -k 5 "$test_limit" "$sanitizer" --tool $tool --print-limit 20 build-gpu/braze_tests \
      --gtest_filter='DeviceFusionCache*:Small/Pipeline*:SharedMemory*:*Schedules*:Transpose*:*Matmul*' \
      --gtest_brief=1 > "$parts/$tool.log" 2>&1 &
  done
fi
wait
cat "$parts"/cpp_tests.*.log > "$out/cpp_tests.log"
passed=$(grep -hoE '^\[  PASSED  \] [0-9]+' "$out/cpp_tests.log" | awk '{s += $4} END {print s + 0}')
failed=$(grep -hE '^\[  FAILED  \] [A-Za-z]' "$out/cpp_tests.log" | sort -u)
finished=$(grep -cE 'test suites? ran\.' "$out/cpp_tests.log")
if [ -z "$failed" ] && [ "$finished" = "$shards" ]; then
  status "C++ tests" "$passed passed ($shards shards)"
else
  status "C++ tests" "FAILED: $passed passed, $(grep -c . <<< "$failed") failed, $finished/$shards shards finished"
  rc=1; echo "$failed" | head -60
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
if [ "$platform" = hip ]; then
  status "compute-sanitizer" "not on AMD GPUs"
elif [ -x "$sanitizer" ]; then
  for tool in memcheck racecheck; do
    summary=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$parts/$tool.log" | tail -1)
    status "$tool" "${summary:-no summary (see sanitizer.log)}"
    { echo "== $tool"; cat "$parts/$tool.log"; } >> "$out/sanitizer.log"
    echo "$summary" | grep -qE "SUMMARY: 0 (errors|hazards)" || rc=1
  done
else
  status "compute-sanitizer" "not found"
fi
# pytest's last line as a status line; its failures listed when there are any.
pytest_status() {
  local line
  line=$(tail -1 "$2")
  if grep -qE "passed|skipped" <<< "$line" && ! grep -qE "failed|error" <<< "$line"; then
    status "$1" "$line"
  else
    status "$1" "FAILED: $line"; rc=1
    grep -E "^(FAILED|ERROR) " "$2" | head -40
  fi
}
for g in $(seq 0 $((groups - 1))); do pytest_status "Python tests ($g)" "$parts/py_tests.$g.log"; done
cat "$parts"/py_tests.*.log > "$out/py_tests.log"
# Lightning Thunder on braze: its tests, then the nanoGPT block's step time against eager.
PYTHONPATH=build-gpu/python${pydeps:+:$pydeps} timeout -k 5 "$test_limit" $python -m pytest -q -p no:cacheprovider \
  -rs tests/python/test_thunder.py > "$out/thunder_tests.log" 2>&1
pytest_status "Thunder tests" "$out/thunder_tests.log"
PYTHONPATH=build-gpu/python${pydeps:+:$pydeps} timeout -k 5 "$bench_limit" $python benchmarks/python/thunder_block.py \
  --reps "${BRAZE_BENCH_REPS:-50}" --profile > "$out/thunder_block.log" 2>&1 || rc=1
# A Llama block (grouped-query attention, RoPE, SwiGLU, RMSNorm) the same way: the step time only.
PYTHONPATH=build-gpu/python${pydeps:+:$pydeps} timeout -k 5 "$bench_limit" $python benchmarks/python/thunder_block.py \
  --model llama --batch 2 --tokens 1024 --reps "${BRAZE_BENCH_REPS:-50}" > "$parts/thunder_llama.log" 2>&1 ||
  { rc=1; status "Thunder llama block" "FAILED (its log is in report.txt)"; }
# nanoGPT's whole model (embeddings, a block, the cross entropy over 50304 logits) and a routed MLP. Their
# logs stay in $parts (report.txt holds them whole): the device tool brings back at most 8 files.
for model in gpt moe; do
  PYTHONPATH=build-gpu/python${pydeps:+:$pydeps} timeout -k 5 "$bench_limit" $python benchmarks/python/thunder_block.py \
    --model $model --reps "${BRAZE_BENCH_REPS:-50}" > "$parts/thunder_$model.log" 2>&1 ||
    { rc=1; status "Thunder $model" "FAILED (its log is in report.txt)"; }
done
if PYTHONPATH=build-gpu/python timeout -k 5 "$bench_limit" $python examples/layer_norm_demo.py > "$parts/demo.log" 2>&1; then
  status "demo (layer_norm)" "$(tail -1 "$parts/demo.log")"
else
  status "demo (layer_norm)" "FAILED"; rc=1; tail -20 "$parts/demo.log"
fi
# GPU benchmarks: braze vs torch eager and torch.compile, the copy roofline, Python host latency; then
# the C++ host-overhead benchmarks (cached execute with no-op launches, and on the GPU).
compile_flag=""
[ "${BRAZE_BENCH_COMPILE:-1}" = 0 ] && compile_flag=--no-compile
if PYTHONPATH=build-gpu/python timeout -k 5 "$bench_limit" $python benchmarks/python/compare.py $compile_flag \
     --reps "${BRAZE_BENCH_REPS:-100}" > "$parts/compare.log" 2>&1; then
  status "GPU benchmarks" "ok (compare.log)"
else
  status "GPU benchmarks" "FAILED (compare.log)"; rc=1
fi
# The rows furthest from their floor, timed again with the L2 left clean before each call and with inputs
# rotated through it (compare.py --flush): how much of each row's time is the dirty lines the default
# flush (a write, as triton.testing.do_bench) leaves for the timed call to write back.
if [ "$platform" = cuda ]; then
  for flush in clean rotate; do
    PYTHONPATH=build-gpu/python timeout -k 5 "$bench_limit" $python benchmarks/python/compare.py --no-compile --flush $flush \
      --only "w8 linear M=1 |w8 linear M=16 |rms_norm 16384|softmax 16384|rope llama-3-70b" --reps "${BRAZE_BENCH_REPS:-100}" \
      > "$parts/flush_$flush.log" 2>&1 && status "rows, L2 flush $flush" "ok" || { status "rows, L2 flush $flush" "FAILED (report)"; rc=1; }
  done
fi
# wgmma's K slices by TMA (the heuristic's choice) against cp.async, the warp-specialized TMA pipeline,
# its persistent grid and that grid in clusters of two blocks multicasting B's boxes (tuned on only), on the
# GEMM rows; the clusters also with 128 blocks, in case a GPC's odd SM cannot take a cluster of two and the
# grid of one per SM then runs in two waves.
if [ "$platform" = cuda ]; then
  PYTHONPATH=build-gpu/python timeout -k 5 "$bench_limit" $python benchmarks/python/compare.py --only gemm --no-compile \
    --sweep --tunings ";matmul_tma=0;matmul_warp_specialized=1;matmul_warp_specialized=1,matmul_persistent=1;matmul_warp_specialized=1,matmul_persistent=1,matmul_cluster=2;matmul_warp_specialized=1,matmul_persistent=1,matmul_cluster=2,matmul_persistent_blocks=128" --reps "${BRAZE_BENCH_REPS:-100}" > "$parts/tma_gemm.log" 2>&1 \
    && status "GEMM pipelines" "ok" || { status "GEMM pipelines" "FAILED (report)"; rc=1; }
fi
# The weight-only int8 linears (M = 1, 16, 32, 64) under each of their schedules: the heuristic's (the
# GEMV on tensor cores from 2 rows), the tiled tensor cores (mma.sync or wgmma, and mma.sync alone), the
# scalar GEMV up to 64 rows, and the GEMV on tensor cores for one row too; then the one-row scalar GEMV
# at 4 and 8 columns per warp (each activation load serving more weight columns) and 8 chunks in flight.
if [ "$platform" = cuda ]; then
  PYTHONPATH=build-gpu/python timeout -k 5 "$bench_limit" $python benchmarks/python/compare.py --only "w8 linear" --no-compile \
    --sweep --tunings ";matmul_gemv=0;matmul_gemv=0,matmul_wgmma=0;matmul_gemv=1;matmul_gemv_mma=1;matmul_gemv_cols=4;matmul_gemv_cols=8;matmul_gemv_unroll=8;matmul_gemv_cols=4,matmul_gemv_unroll=8" \
    --reps "${BRAZE_BENCH_REPS:-100}" \
    > "$parts/w8_linear.log" 2>&1 && status "w8 linear schedules" "ok" || { status "w8 linear schedules" "FAILED (report)"; rc=1; }
fi
# The 16384x4096 rows (norms, softmax, their backwards) with rows kept in registers (the heuristic's) and
# staged in shared memory by cp.async, the next row group's copies in flight during the passes.
if [ "$platform" = cuda ]; then
  PYTHONPATH=build-gpu/python timeout -k 5 "$bench_limit" $python benchmarks/python/compare.py --only "16384x4096" --no-compile \
    --sweep --tunings ";persistent_staged=1" --reps "${BRAZE_BENCH_REPS:-100}" > "$parts/staged_rows.log" 2>&1 \
    && status "staged rows" "ok" || { status "staged rows" "FAILED (report)"; rc=1; }
fi
# Nsight Compute on the rows furthest from their floor or their peer, where the machine has ncu and lets
# it read the GPU's counters: each braze kernel's speed of light, memory traffic and warp stalls, to say
# what holds it back. A profiler that cannot run is reported, not a failure.
ncu_bin=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
if [ "$platform" = cuda ] && [ -n "$ncu_bin" ]; then
  NOPROF=1 PYTHONPATH=build-gpu/python timeout -k 5 "$bench_limit" "$ncu_bin" -k regex:braze_s --launch-count 12 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \
    $python benchmarks/python/kernel_times.py "softmax 16384x4096" "layer_norm 16384x4096" "rope llama-3-70b" \
    "w8 linear M=1 " "bf16 gemm" > "$parts/ncu.log" 2>&1 \
    && status "Nsight Compute" "ok" || status "Nsight Compute" "did not run (report)"
else
  echo "no ncu on this machine" > "$parts/ncu.log"
fi
if [ "$platform" = cuda ]; then
  timeout -k 5 "$bench_limit" build-gpu/braze_benchmarks --benchmark_filter='CachedExecute|GpuLaunch|NewSequence' > "$parts/host_bench.log" 2>&1 || rc=1
  # The same launches with the cache of freed blocks off: every allocation and release through the pool.
  BRAZE_BLOCK_CACHE_BYTES=0 timeout -k 5 "$bench_limit" build-gpu/braze_benchmarks \
    --benchmark_filter='GpuLaunch_(CachedExecute|DriverCalls|Segments)' > "$parts/host_bench_pool.log" 2>&1 || rc=1
else
  timeout -k 5 "$bench_limit" build-gpu/braze_benchmarks --benchmark_filter='CachedExecute|NewSequence' > "$parts/host_bench.log" 2>&1 || rc=1
fi
# BRAZE_SWEEP=1: every case's kernels under other heuristic tunings, fastest first (sweep.log); a few
# minutes, so it is asked for rather than run each time.
if [ "${BRAZE_SWEEP:-0}" = 1 ]; then
  PYTHONPATH=build-gpu/python $python benchmarks/python/compare.py --sweep --reps 30 > "$parts/sweep.log" 2>&1 \
    && status "tuning sweep" "ok (sweep.log)" || { status "tuning sweep" "FAILED (sweep.log)"; rc=1; }
fi
PYTHONPATH=build-gpu/python timeout -k 5 "$bench_limit" $python benchmarks/python/binding_overhead.py > "$parts/binding_bench.log" 2>&1 || rc=1
{
echo "== braze gpu_check ($platform) on $(tr '\n' ' ' < "$parts/gpu.txt") =="
cat "$out/summary.txt"
echo "== benchmarks/python/compare.py"
cat "$parts/compare.log"
echo "== Lightning Thunder on braze (thunder_block.py; kernel tables in thunder_block.log)"
sed -n '1,/^== eager/p' "$out/thunder_block.log" | grep -v '^== eager'
cat "$parts/thunder_llama.log" "$parts/thunder_gpt.log" "$parts/thunder_moe.log"
echo "== host overhead (C++)"
grep -E "^BM_" "$parts/host_bench.log"
[ -f "$parts/host_bench_pool.log" ] && { echo "== the GPU launches with BRAZE_BLOCK_CACHE_BYTES=0 (no cache of freed blocks)"; grep -E "^BM_" "$parts/host_bench_pool.log"; }
echo "== host overhead of the Python binding (no launch)"
cat "$parts/binding_bench.log"
for flush in clean rotate; do
  [ -f "$parts/flush_$flush.log" ] && { echo "== rows furthest from their floor, L2 flush: $flush (compare.py --flush $flush)"; cat "$parts/flush_$flush.log"; }
done
[ -f "$parts/w8_linear.log" ] && { echo "== w8 linears: the heuristic's, matmul_gemv=0 (tiled tensor cores), with matmul_wgmma=0 (mma.sync), matmul_gemv=1 (scalar GEMV), matmul_gemv_mma=1 (GEMV on tensor cores from one row), the one-row GEMV's columns per warp and chunks in flight"; cat "$parts/w8_linear.log"; }
[ -f "$parts/staged_rows.log" ] && { echo "== 16384x4096 rows: kept in registers (the heuristic's), staged by cp.async (persistent_staged=1)"; cat "$parts/staged_rows.log"; }
[ -f "$parts/tma_gemm.log" ] && { echo "== GEMMs: TMA (the heuristic's), cp.async (matmul_tma=0), warp-specialized TMA, and persistent"; cat "$parts/tma_gemm.log"; }
[ -f "$parts/ncu.log" ] && { echo "== Nsight Compute: softmax, layer_norm, RoPE 70B, w8 linear M=1 and bf16 GEMM kernels"; tail -c 60000 "$parts/ncu.log"; }
[ -f "$parts/sweep.log" ] && { echo "== tuning sweep (fastest first per case)"; cat "$parts/sweep.log"; }
} | tee "$out/report.txt"
exit $rc
