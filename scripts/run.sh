#!/usr/bin/env bash
# The main job on the default configuration: a bf16 matmul on the MXU of the default chip
# (configs/default.yaml), every output checked bit for bit against the golden model.
# Extra arguments go to `tpusim matmul` (e.g. --m 300 --k 70 --n 40 --variant 8x8).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
tpu_install_deps
echo "[run] building (preset default)"
tpu_build default
mkdir -p out
echo "[run] tpusim matmul on configs/default.yaml"
./build/sw/tpusim matmul --config configs/default.yaml --m 128 --k 128 --n 128 --seed 1 \
  --out out/C.npy --json out/matmul.json "$@"
echo "[run] report: out/matmul.json, result: out/C.npy"
