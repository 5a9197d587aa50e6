#!/usr/bin/env bash
# The main job on the default configuration: a small pod (configs/pod_2x2.yaml: a 2x2 torus of
# 16x16 chips, SystemC with TLM host sockets). Every chip runs a bf16 matmul, then the pod
# all-reduces (sum) the f32 results over ICI; every matmul output and every all-reduce output
# is checked bit for bit against the golden model.
# Extra arguments go to `tpusim pod` (e.g. --m 128 --k 64 --n 96, --config configs/pod_4x4.yaml,
# --waves-chips 0,3).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
tpu_install_deps
echo "[run] building (preset default)"
tpu_build default
mkdir -p out
echo "[run] tpusim pod on configs/pod_2x2.yaml"
./build/sw/tpusim pod --config configs/pod_2x2.yaml --m 64 --k 64 --n 64 --seed 1 \
  --json out/pod.json "$@"
echo "[run] report: out/pod.json"
