#!/usr/bin/env bash
# The main job on the default configuration: a small GPT (2 blocks, d 32, 2 heads, S 32, bytes
# of the project's docs/*.md, global batch 8, AdamW lr 0.01) trained for 20 steps on a 2x2
# torus of 16x16 chips (configs/pod_2x2.yaml, SystemC with TLM host sockets), data=2 x model=2
# (Megatron's split of the heads and the MLP). Every step runs the embedding, the layer norms,
# attention, GELU, the cross-entropy, the whole backward, the model and gradient all-reduces over
# ICI and AdamW on the chips; after every step every chip's parameters, Adam moments and loss
# partials are checked bit for bit against the golden model (docs/training.md, "The GPT step on
# the chip"). Prints the loss, MFU and the breakdown per step and the golden verdict; writes
# out/train.json (the report, with the cycles of each op kind), out/trace.json (the timeline of
# step 0: ui.perfetto.dev), out/train.png (the loss and the breakdown per step) and the saved run
# out/run (tokens, parameters, losses: scripts/replay_torch.py out/run replays it in PyTorch);
# then generates 64 bytes from it on the pod (tpusim generate, the keys and values cached in
# HBM, the prompt fed at once, every token's logits checked against the golden; past the
# 32-byte context the window restarts with its last 16 bytes).
# Extra arguments go to `tpusim train` (e.g. --steps 5, --d-model 64, --save out/run). Then the
# pod job: a bf16 matmul on every chip at once and an all-reduce of the results where they lie
# in HBM, golden-checked (out/pod.json). The MLP of earlier runs: `tpusim train` without
# --model gpt.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/deps.sh
tpu_install_deps
echo "[run] building (preset default)"
tpu_build default
mkdir -p out
echo "[run] tpusim train --model gpt on configs/pod_2x2.yaml (data=2, model=2)"
./build/sw/tpusim train --model gpt --config configs/pod_2x2.yaml --mesh data=2,model=2 \
  --steps 20 --seed 1 --json out/train.json --trace out/trace.json --save out/run "$@"
echo "[run] report: out/train.json, timeline: out/trace.json (open in https://ui.perfetto.dev)"
# The picture: loss per step, and each step's breakdown with MFU (python/tpusim/plot.py reads
# the JSON only; Debian's python3 with python3-matplotlib, never a pyenv python3 on PATH).
PYTHONPATH=build/python /usr/bin/python3 -m tpusim.plot out/train.json -o out/train.png
echo "[run] picture: out/train.png (loss and breakdown per step)"
echo "[run] tpusim generate: 64 bytes after a prompt, greedy, on the pod (a context of 32 bytes)"
./build/sw/tpusim generate --config configs/pod_2x2.yaml --load out/run --prompt "The pod " \
  --tokens 64 --json out/generate.json
echo "[run] tpusim pod on configs/pod_2x2.yaml (matmuls on every chip, then an all-reduce)"
./build/sw/tpusim pod --config configs/pod_2x2.yaml --m 64 --k 64 --n 64 --seed 1 --quiet \
  --json out/pod.json
echo "[run] report: out/pod.json"
