#!/usr/bin/env bash
# Lint + the default test suite (every CTest label but `soak`), then the unit tests, the parser
# fuzz and a system subset on 4x4 chips again under ASan and UBSan (the `debug` preset, label
# `sanitize`; any report fails the test). Pass `--soak` to run soaks too.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
tpu_install_deps
preset=default
[ "${CI:-}" = "true" ] && preset=ci
echo "[test] lint"
scripts/lint.sh
echo "[test] building (preset $preset)"
tpu_build "$preset"
jobs=$(nproc 2>/dev/null || echo 2)
if [ "${1:-}" = "--soak" ]; then
  ctest --preset "$preset" -j "$jobs" -L soak
fi
echo "[test] ctest (preset $preset)"
ctest --preset "$preset" -j "$jobs"
echo "[test] sanitizers: unit tests, parser fuzz and a system subset under ASan + UBSan (preset debug)"
tpu_build debug --target sanitize_tests
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  ctest --test-dir build-debug -L sanitize -LE soak -j "$jobs" --output-on-failure
