#!/usr/bin/env bash
# The pod across MPI ranks (docs/scale.md): the same job on 1 rank and on R (default 2), one
# thread each, on this machine: an all-reduce of 2048 f32 per chip (ring, host copies included)
# on a 4x4x4 pod of 4x4 chips, link latency 2, 4-byte links (bench_pod's threads4x4x4 job).
# Prints pod-cycles per second of each (the collective and its copies, the pod's set-up not
# counted), the speed-up and rank 0's share of time in the window exchange, and checks that
# both runs took the same cycles and passed their golden checks.
#
#   scripts/bench_mpi.sh [BUILD_DIR] [RANKS]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
RANKS=${2:-2}
TPUSIM=$BUILD/sw/tpusim
[ -x "$TPUSIM" ] || { echo "bench_mpi: $TPUSIM not built" >&2; exit 2; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
cat > "$WORK/pod.yaml" <<'YAML'
pod:
  shape: [4, 4, 4]
  link_latency: 2
  link_width_bytes: 4
chip:
  variant: 4x4
YAML
ARGS="allreduce --config $WORK/pod.yaml --bytes 8192 --algo ring --engine cpp --threads 1 --quiet"
MPIRUN="mpirun -np $RANKS --oversubscribe --bind-to none"
[ "$(id -u)" -eq 0 ] && MPIRUN="$MPIRUN --allow-run-as-root"
num() {  # num FILE KEY: the first number at "KEY": in the JSON report
  grep -o "\"$2\": [0-9.e+-]*" "$1" | head -1 | sed 's/.*: //'
}
"$TPUSIM" $ARGS --json "$WORK/one.json" > /dev/null
$MPIRUN "$TPUSIM" $ARGS --json "$WORK/many.json" > /dev/null
for f in one many; do
  grep -q '"verdict": "pass"' "$WORK/$f.json" || { echo "bench_mpi: $f: golden check failed"; exit 1; }
done
awk -v c1="$(num "$WORK/one.json" cycles)" -v cn="$(num "$WORK/many.json" cycles)" \
    -v l1="$(num "$WORK/one.json" load_cycles)" -v s1="$(num "$WORK/one.json" store_cycles)" \
    -v ln="$(num "$WORK/many.json" load_cycles)" -v sn="$(num "$WORK/many.json" store_cycles)" \
    -v w1="$(num "$WORK/one.json" run_seconds)" -v wn="$(num "$WORK/many.json" run_seconds)" \
    -v xs="$(num "$WORK/many.json" exchange_share)" -v xb="$(num "$WORK/many.json" bytes_sent)" \
    -v xw="$(num "$WORK/many.json" windows)" -v r="$RANKS" 'BEGIN {
  p1 = c1 + l1 + s1; pn = cn + ln + sn; bpw = (xw > 0) ? xb / xw : 0
  printf "{\"bench\": \"mpi4x4x4\", \"ranks\": %d, \"pod_cycles\": %d, \"same_cycles\": %s, ", r, p1, (p1 == pn) ? "true" : "false"
  printf "\"cycles_per_second_1\": %.1f, \"cycles_per_second_n\": %.1f, \"speedup\": %.3f, ", p1 / w1, pn / wn, w1 / wn
  printf "\"exchange_share\": %.4f, \"windows\": %d, \"bytes_per_window\": %.1f}\n", xs, xw, bpw
  printf "mpi4x4x4: %d pod cycles (%s), 1 rank %.0f cycles/s, %d ranks %.0f cycles/s: %.2fx; exchange %.1f%% of rank 0 time, %.0f bytes sent per window\n", p1, (p1 == pn) ? "the same on both" : "DIFFERENT", p1 / w1, r, pn / wn, w1 / wn, 100 * xs, bpw > "/dev/stderr"
  if (p1 != pn) exit 1
}'
