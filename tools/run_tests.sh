#!/usr/bin/env bash
# `make test`'s two suites side by side: the C++ suite (GoogleTest) and the Python suite (pytest) each run
# on one process, so on a machine with two cores or more they take the time of the longer one, not the
# sum. The C++ suite's report goes to a file and is printed whole after the Python suite's, so the two
# never interleave; the exit status is non-zero when either failed. Arguments: the build folder and the
# Python interpreter (make passes its BUILD_DIR and PYTHON).
set -u
cd "$(dirname "$0")/.."
build=${1:-build}
python=${2:-python3}
cores=$(nproc 2>/dev/null || echo 1)
if [ "$cores" -ge 2 ]; then
  log=$(mktemp "${TMPDIR:-/tmp}/braze_cpp_tests.XXXXXX")
  "$build/braze_tests" --gtest_brief=1 > "$log" 2>&1 &
  cpp=$!
  # An interrupted run stops the C++ suite too (a background job does not get the terminal's Ctrl-C).
  trap 'kill "$cpp" 2>/dev/null; rm -f "$log"; exit 130' INT TERM
  "$python" -m pytest -q tests/python
  python_status=$?
  wait "$cpp"
  cpp_status=$?
  trap - INT TERM
  echo "--- C++ suite ($build/braze_tests) ---"
  cat "$log"
  rm -f "$log"
else
  "$build/braze_tests" --gtest_brief=1
  cpp_status=$?
  "$python" -m pytest -q tests/python
  python_status=$?
fi
echo "C++ suite: exit status $cpp_status; Python suite: exit status $python_status"
[ "$cpp_status" -eq 0 ] && [ "$python_status" -eq 0 ]
