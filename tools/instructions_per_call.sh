#!/usr/bin/env bash
# Instructions per call of one binding_overhead.py row (floor, plain, thunder, ...: its --repeat choices),
# counted by callgrind: the row run at two call counts, the difference divided by the calls between them.
# Unlike timings on a shared machine, the count is the same from run to run (a fixed hash seed, one BLAS
# thread).
#   tools/instructions_per_call.sh plain [calls]        (needs valgrind and a built build/python)
set -euo pipefail
command -v valgrind >/dev/null || { echo "instructions_per_call.sh: valgrind is not installed (apt-get install valgrind)" >&2; exit 1; }
row=${1:-plain}
calls=${2:-20000}
root=$(cd "$(dirname "$0")/.." && pwd)
python=$(python3 -c "import sys; print(sys.executable)")  # the interpreter itself, not a shim script
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
count() {  # the instructions of one run; its output is shown where it fails
  # One BLAS thread: numpy's idle BLAS threads spin for a varying count of instructions.
  OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 PYTHONHASHSEED=0 PYTHONPATH="$root/build/python" \
    valgrind --tool=callgrind --callgrind-out-file="$out/cg.%p" \
    --log-file="$out/log" "$python" "$root/benchmarks/python/binding_overhead.py" --repeat "$row" --calls "$1" \
    >"$out/out" 2>&1 || { cat "$out/out" "$out/log" >&2; exit 1; }
  sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$out/log"
}
few=$(count 1000)
many=$(count $((calls + 1000)))
echo "$row: $(((many - few) / calls)) instructions per call ($calls calls)"
