#!/usr/bin/env bash
# Instructions per call of one binding_overhead.py row (floor, plain or thunder), counted by callgrind:
# the row run at two call counts, the difference divided by the calls between them. Unlike timings on a
# shared machine, the count is the same from run to run (a fixed hash seed).
#   tools/instructions_per_call.sh plain [calls]        (needs valgrind and a built build/python)
set -euo pipefail
row=${1:-plain}
calls=${2:-20000}
root=$(cd "$(dirname "$0")/.." && pwd)
python=$(python3 -c "import sys; print(sys.executable)")  # the interpreter itself, not a shim script
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
count() {
  PYTHONHASHSEED=0 PYTHONPATH="$root/build/python" valgrind --tool=callgrind --callgrind-out-file="$out/cg.%p" "$python" \
    "$root/benchmarks/python/binding_overhead.py" --repeat "$row" --calls "$1" 2>&1 |
    sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
few=$(count 1000)
many=$(count $((calls + 1000)))
echo "$row: $(((many - few) / calls)) instructions per call ($calls calls)"
