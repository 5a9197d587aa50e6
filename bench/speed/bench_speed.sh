#!/usr/bin/env bash
# Simulation speed per core, side by side (issue 33, docs/scale.md "One core"): the four jobs of
# the issue on two builds of the simulator, one thread each, run in alternation on this machine
# (old, new, old, new, ...), so that both see the same load. For every job it checks that the
# two builds give the same report (every key but wall time and speed: cycles, counters, golden
# verdicts) and prints, per pair, simulated cycles per CPU-second (user + system time of the
# process) of each build and their ratio; a JSON array goes to OUT (default bench_speed.json).
# Exit 1 when a golden check fails or the two builds' reports differ, 2 on a bad command line.
#
#   bench/speed/bench_speed.sh OLD_BUILD NEW_BUILD [PAIRS] [OUT]
#
# OLD_BUILD is a build folder of the commit to compare with, e.g.
#   git worktree add ../tpu-old 8818b58 && (cd ../tpu-old && cmake --preset default &&
#   cmake --build build -j --target tpusim bench_chip)
# Run from anywhere; the jobs read configs/ of this checkout. JOBS="chip train" runs a subset.
# IGNORE_KEYS="twist|hop" leaves keys that one build's reports have and the other's lack out of
# the comparison (an old baseline predates them); every other key must still be equal.
#
# The jobs; the rate is the report's cycles over the CPU time of the whole process (set-up,
# host copies and golden checks included, the same work on both builds):
#   chip    bench_chip --variant 16x16 --shapes speed (a 256^3 matmul)
#   matmul  tpusim matmul --variant 16x16 --m 512 --k 512 --n 512
#   allred  tpusim allreduce --bytes 1048576 --engine cpp --threads 1 (2x2 pod of 16x16 chips)
#   train   scripts/run.sh's training run with --threads 1 (10 steps, the timeline written)
# Beside it, the tool's own wall-clock rate where it has one (bench_chip's
# chip_cycles_per_second, tpusim's sim_cycles_per_second: the run alone, without host copies).
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# -ge 2 ] || { sed -n '2,/^set /p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; exit 2; }
OLD=$1
NEW=$2
PAIRS=${3:-3}
OUT=${4:-bench_speed.json}
for b in "$OLD" "$NEW"; do
  for t in sw/tpusim bench/chip/bench_chip; do
    [ -x "$b/$t" ] || { echo "bench_speed: $b/$t is not built" >&2; exit 2; }
  done
done
[[ "$PAIRS" =~ ^[1-9][0-9]?$ ]] || { echo "bench_speed: PAIRS must be 1..99, not '$PAIRS'" >&2; exit 2; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# run TAG BUILD JOB: runs one job, leaves $WORK/TAG.json (the report), $WORK/TAG.cpu (CPU s).
run() {
  local tag=$1 b=$2 job=$3
  local -a cmd
  case $job in
    chip) cmd=("$b/bench/chip/bench_chip" --variant 16x16 --shapes speed) ;;
    matmul) cmd=("$b/sw/tpusim" matmul --variant 16x16 --m 512 --k 512 --n 512 --seed 1 --quiet
                 --json "$WORK/$tag.json") ;;
    allred) cmd=("$b/sw/tpusim" allreduce --bytes 1048576 --engine cpp --threads 1 --quiet
                 --json "$WORK/$tag.json") ;;
    train) cmd=("$b/sw/tpusim" train --config configs/pod_2x2.yaml --steps 10 --seed 1
                --threads 1 --trace "$WORK/$tag.trace.json" --quiet --json "$WORK/$tag.json") ;;
  esac
  if [ "$job" = chip ]; then
    /usr/bin/time -f "%U %S" -o "$WORK/$tag.time" "${cmd[@]}" > "$WORK/$tag.json" 2> /dev/null
  else
    /usr/bin/time -f "%U %S" -o "$WORK/$tag.time" "${cmd[@]}" > /dev/null
  fi
  awk '{ print $1 + $2 }' "$WORK/$tag.time" > "$WORK/$tag.cpu"
}

# strip FILE: the report without the keys that measure the host (time, speed, versions, paths).
strip() {
  grep -v -E '"[a-z_.]*(wall|seconds|per_second|elapsed|speed|version|git|trace|json)[a-z_.]*":' "$1" |
    { if [ -n "${IGNORE_KEYS:-}" ]; then grep -v -E "\"(${IGNORE_KEYS})\":"; else cat; fi; } |
    sed -E 's/,$//'
}
num() {  # num FILE KEY: the report's top-level KEY (of its first entry when it is an array)
  python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
d = d[0] if isinstance(d, list) else d
v = d.get(sys.argv[2])
print("" if v is None else v)' "$1" "$2"
}

echo "[" > "$OUT"
first=1
differ=0
printf "%-7s %4s %10s %13s %13s %6s %11s %11s %s\n" job pair cycles "old cyc/CPU-s" \
  "new cyc/CPU-s" ratio "old tool/s" "new tool/s" "same report"
for job in ${JOBS:-chip matmul allred train}; do
  for p in $(seq 1 "$PAIRS"); do
    run old "$OLD" "$job"
    run new "$NEW" "$job"
    same=yes
    cmp -s <(strip "$WORK/old.json") <(strip "$WORK/new.json") || same=NO
    for t in old new; do
      grep -q -E '"(golden|verdict)": "pass"' "$WORK/$t.json" ||
        { echo "bench_speed: $job: the $t build's golden check did not pass" >&2; exit 1; }
    done
    cyc=$(num "$WORK/new.json" cycles)
    ro=$(awk -v c="$cyc" -v s="$(cat "$WORK/old.cpu")" 'BEGIN { printf "%.1f", c / s }')
    rn=$(awk -v c="$cyc" -v s="$(cat "$WORK/new.cpu")" 'BEGIN { printf "%.1f", c / s }')
    key=sim_cycles_per_second
    [ "$job" = chip ] && key=chip_cycles_per_second
    to=$(num "$WORK/old.json" $key); to=${to:-null}
    tn=$(num "$WORK/new.json" $key); tn=${tn:-null}
    ratio=$(awk -v a="$ro" -v b="$rn" 'BEGIN { printf "%.3f", b / a }')
    printf "%-7s %4d %10s %13.0f %13.0f %6s %11s %11s %s\n" "$job" "$p" "$cyc" "$ro" "$rn" "$ratio" \
      "${to%.*}" "${tn%.*}" "$same"
    [ $first -eq 1 ] || echo "," >> "$OUT"
    first=0
    printf '{"job": "%s", "pair": %d, "cycles": %s, "old_cycles_per_cpu_second": %s, "new_cycles_per_cpu_second": %s, "ratio": %s, "same_report": %s, "old_cpu_seconds": %s, "new_cpu_seconds": %s, "old_tool_cycles_per_second": %s, "new_tool_cycles_per_second": %s}' \
      "$job" "$p" "$cyc" "$ro" "$rn" "$ratio" "$([ $same = yes ] && echo true || echo false)" \
      "$(cat "$WORK/old.cpu")" "$(cat "$WORK/new.cpu")" "$to" "$tn" >> "$OUT"
    [ $same = yes ] || { differ=1; echo "bench_speed: $job: the two builds' reports differ" >&2;
                         diff <(strip "$WORK/old.json") <(strip "$WORK/new.json") | head -20 >&2; }
  done
done
echo "]" >> "$OUT"
echo "bench_speed: $OUT"
[ $differ -eq 0 ] || { echo "bench_speed: the builds disagree on bits or cycles (above)" >&2; exit 1; }
