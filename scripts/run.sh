#!/usr/bin/env bash
# The main job on the default configuration: data-parallel training of a small MLP
# (64-128-32, global batch 256, SGD lr 0.5) on a 2x2 torus of 16x16 chips
# (configs/pod_2x2.yaml, SystemC with TLM host sockets). Every step runs forward, loss,
# backward, the gradient all-reduce over ICI and the SGD update on the chips; after every step
# every chip's weights and loss are checked bit for bit against the golden model.
# Prints the loss, MFU and the breakdown per step and the golden verdict; writes
# out/train.json (the report), out/trace.json (the timeline of step 0: ui.perfetto.dev) and
# out/train.png (the loss and the breakdown per step: python3 -m tpusim.plot).
# Extra arguments go to `tpusim train` (e.g. --steps 20, --layers 256,256,256 --batch 1024,
# --config configs/pod_4x4.yaml, --save out/run, --waves-chips 0). Then the pod job: a bf16
# matmul on every chip at once and an all-reduce of the results where they lie in HBM, golden-
# checked (out/pod.json).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
tpu_install_deps
echo "[run] building (preset default)"
tpu_build default
mkdir -p out
echo "[run] tpusim train on configs/pod_2x2.yaml"
./build/sw/tpusim train --config configs/pod_2x2.yaml --steps 10 --seed 1 \
  --json out/train.json --trace out/trace.json "$@"
echo "[run] report: out/train.json, timeline: out/trace.json (open in https://ui.perfetto.dev)"
# The picture: loss per step, and each step's breakdown with MFU (python/tpusim/plot.py reads
# the JSON only; Debian's python3 with python3-matplotlib, never a pyenv python3 on PATH).
PYTHONPATH=build/python /usr/bin/python3 -m tpusim.plot out/train.json -o out/train.png
echo "[run] picture: out/train.png (loss and breakdown per step)"
echo "[run] tpusim pod on configs/pod_2x2.yaml (matmuls on every chip, then an all-reduce)"
./build/sw/tpusim pod --config configs/pod_2x2.yaml --m 64 --k 64 --n 64 --seed 1 --quiet \
  --json out/pod.json
echo "[run] report: out/pod.json"
