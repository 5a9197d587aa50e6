#!/usr/bin/env bash
# Check the GTKWave save files by looking (docs/profiling.md, "Waves"): for each waves/NAME.gtkw
# (all of them, or the NAMEs given), run the command its "[*] Dump:" header line names, open the
# dump with the save file in GTKWave under Xvfb, and save a screenshot of the screen to
# out/waves/NAME.png (ImageMagick's import). A screenshot that is missing or of one colour
# (GTKWave did not draw) fails the run. Run from the repository root after a build:
#
#   scripts/wave_shots.sh            # every save file
#   scripts/wave_shots.sh mxu chip   # waves/mxu.gtkw and waves/chip.gtkw
#
# Needs xvfb (xvfb-run), xauth, gtkwave and imagemagick (scripts/deps.sh: TPU_DEBS).
# WAVE_SHOT_WAIT: seconds GTKWave gets to draw before the shot (default 4). TPU_BUILD: the build
# tree the commands' build/ stands for (default build).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
wait_s=${WAVE_SHOT_WAIT:-4}
out=out/waves
mkdir -p "$out"

for tool in xvfb-run gtkwave import identify; do
  command -v "$tool" >/dev/null || {
    echo "wave_shots: $tool not found: scripts/deps.sh installs it (TPU_DEBS)" >&2
    exit 2
  }
done

names=("$@")
if [ ${#names[@]} -eq 0 ]; then
  for f in waves/*.gtkw; do names+=("$(basename "$f" .gtkw)"); done
fi

# The value of a "[*] KEY: ..." header line of a save file ("" when it has none).
header() { sed -n "s/^\[\*\] $2: //p" "$1" | head -1; }

fail=0
for name in "${names[@]}"; do
  gtkw=waves/$name.gtkw
  if [ ! -f "$gtkw" ]; then
    echo "wave_shots: $gtkw: no such save file" >&2
    exit 2
  fi
  dump_cmd=$(header "$gtkw" Dump)
  open_cmd=$(header "$gtkw" Open)
  if [ -z "$dump_cmd" ] || [ -z "$open_cmd" ]; then
    echo "wave_shots: $gtkw: needs '[*] Dump: CMD' and '[*] Open: gtkwave FST GTKW' lines" >&2
    exit 2
  fi
  dump_cmd=${dump_cmd%%   (*}  # a trailing "   (where the dump goes)" note is not the command
  dump_cmd=${dump_cmd/#build\//${TPU_BUILD:-build}/}
  fst=$(echo "$open_cmd" | awk '{print $2}')
  echo "[$name] $dump_cmd"
  start=$(date +%s)
  bash -c "$dump_cmd" >"$out/$name.log" 2>&1 || {
    echo "wave_shots: $name: the dump command failed (see $out/$name.log)" >&2
    fail=1
    continue
  }
  if [[ "$fst" == *"<"*">"* ]]; then  # a family of dumps (waves/vpu_<test>.fst): the largest
    fst=$(find "$(dirname "$fst")" -maxdepth 1 -name "$(basename "$fst" | sed 's/<[^>]*>/*/')" \
            -newermt "@$start" -printf '%s %p\n' | sort -rn | head -1 | cut -d' ' -f2-)
  fi
  if [ -z "$fst" ] || [ ! -f "$fst" ] || [ "$(stat -c %Y "$fst")" -lt "$start" ]; then
    echo "wave_shots: $name: the dump command wrote no new ${fst:-dump}" >&2
    fail=1
    continue
  fi
  png=$out/$name.png
  rm -f "$png"
  # GTKWave on a 1600x1000 screen; the shot once it has drawn; then GTKWave is ended.
  xvfb-run -a -s "-screen 0 1600x1000x24" bash -c '
    gtkwave "$1" "$2" >"$4.gtkwave.log" 2>&1 &
    pid=$!
    sleep "$3"
    import -window root "$4"
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true' _ "$fst" "$gtkw" "$wait_s" "$png"
  colours=$( [ -f "$png" ] && identify -format %k "$png" 2>/dev/null || echo 0)
  if [ "${colours:-0}" -le 1 ]; then
    echo "wave_shots: $name: $png is missing or blank ($colours colours)" >&2
    fail=1
    continue
  fi
  echo "[$name] $png ($colours colours) from $fst"
done
exit $fail
