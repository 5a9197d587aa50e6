#!/usr/bin/env bash
# Lint + the default test suite (every CTest label but `soak`). Pass `--soak` to run soaks too.
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
