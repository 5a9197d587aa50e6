#!/usr/bin/env bash
# The progress line of long runs in a real terminal (issue 37, part 4; sw/common/progress.h):
# tpusim train runs in a tmux pane of fixed width (tmux: scripts/deps.sh), recorded raw with
# pipe-pane, and
#   1. stdout and stderr on the terminal: the raw bytes hold progress lines rewritten in place
#      (\r ... erase-line), the final pane holds the table and the summary and no progress text;
#   2. stderr on the terminal, stdout to a file: progress on the terminal, none in the file;
#   3. no terminal (stdout and stderr to files): no progress text anywhere, and stdout is byte
#      for byte run 2's;
#   4. --quiet on the terminal: no progress text.
# The tmux server (a private socket in WORK_DIR) is killed at the end, whatever happens.
# Usage: progress_tty.sh TPUSIM SOURCE_DIR WORK_DIR
set -euo pipefail
TPUSIM=$1
SRC=$2
WORK=$3
command -v tmux >/dev/null || { echo "FAIL: tmux is not installed (scripts/deps.sh)"; exit 1; }
rm -rf "$WORK"
mkdir -p "$WORK"
SOCK="$WORK/tmux.sock"  # a private server, its socket in the work folder
T() { tmux -S "$SOCK" -f /dev/null "$@"; }
# Even if this script is killed outright (a CTest time-out): a guard ends the server after
# 15 minutes; on any other end the trap does, and ends the guard.
( sleep 900; tmux -S "$SOCK" -f /dev/null kill-server 2>/dev/null ) >/dev/null 2>&1 &
GUARD=$!
trap 'T kill-server 2>/dev/null || true; pkill -P "$GUARD" 2>/dev/null; kill "$GUARD" 2>/dev/null || true' EXIT
trap 'exit 1' TERM INT HUP
# About 6 s of simulation on an idle machine (more on a busy one): long enough to be shown.
JOB=(train --config "$SRC/configs/pod_2x2.yaml" --engine cpp --threads 1 --steps 3 --seed 3)
fail() {
  echo "FAIL: $*"
  exit 1
}

T new-session -d -s p -x 132 -y 60 "env -i PATH=/usr/bin:/bin HOME=$WORK TERM=xterm bash --norc --noprofile"
[ "$(T display -p -t p '#{pane_width}')" = 132 ] || fail "the pane is not 132 columns wide"
T send-keys -t p "cd $WORK && PS1='$ '" Enter

# Runs a command line in the pane (its stdout and stderr as the line says) and waits for it;
# the pane is recorded raw into $1.raw meanwhile.
in_pane() {
  local name=$1
  shift
  T send-keys -t p "clear" Enter
  T clear-history -t p
  T pipe-pane -t p -o "cat > $WORK/$name.raw"
  T send-keys -t p "$* ; echo \$? > $WORK/$name.rc" Enter
  for _ in $(seq 1 600); do
    [ -s "$WORK/$name.rc" ] && break
    sleep 0.5
  done
  [ -s "$WORK/$name.rc" ] || fail "$name: did not finish within 300 s"
  sleep 0.3
  T pipe-pane -t p
  T capture-pane -p -J -S - -t p > "$WORK/$name.pane"
  [ "$(cat "$WORK/$name.rc")" = 0 ] || { cat "$WORK/$name.pane"; fail "$name: exit $(cat "$WORK/$name.rc")"; }
}

# A progress line in the raw bytes: a carriage return, the line, an erase to the line's end.
has_progress_line() {
  LC_ALL=C grep -aq $'\r\\[tpusim\\] train 64-128-32 on torus2x2: step [0-9]*/3, [0-9]* cycles, [0-9.]*[kM]\\? cycles/s, elapsed [0-9.hms ]*, left [^\r]*\e\\[K' "$1"
}

# 1. Everything on the terminal.
in_pane tty "$TPUSIM ${JOB[*]}"
has_progress_line "$WORK/tty.raw" || { cat -v "$WORK/tty.raw" | tail -20; fail "tty: no progress line was drawn"; }
grep -q '^ *step  *loss  *cycles' "$WORK/tty.pane" || fail "tty: the table's header is not in the pane"
grep -q '^ *2  *[0-9.]*  *[0-9]* .* pass$' "$WORK/tty.pane" || fail "tty: the last step's row is not in the pane"
grep -q 'golden' "$WORK/tty.pane" || fail "tty: the summary is not in the pane"
if grep -n 'tpusim\]\|cycles/s\|elapsed' "$WORK/tty.pane"; then
  fail "tty: progress text was left in the pane"
fi
# Every table row starts a line of its own on the screen (none glued to a progress line).
rows=$(grep -c '^ *[0-2]  *[0-9.]*  *[0-9]*  *[0-9.]* .* pass$' "$WORK/tty.pane" || true)
[ "$rows" = 3 ] || { cat "$WORK/tty.pane"; fail "tty: $rows table rows of 3 on lines of their own"; }

# 2. stderr on the terminal, stdout to a file.
in_pane split "$TPUSIM ${JOB[*]} > $WORK/split.out"
has_progress_line "$WORK/split.raw" || fail "split: no progress line on the terminal"
if grep -a 'tpusim\]\|cycles/s' "$WORK/split.out"; then fail "split: progress text in stdout"; fi

# 3. No terminal at all.
"$TPUSIM" "${JOB[@]}" > "$WORK/file.out" 2> "$WORK/file.err" < /dev/null
if [ -s "$WORK/file.err" ]; then cat -v "$WORK/file.err"; fail "file: stderr is not empty"; fi
[ "$(wc -l < "$WORK/file.out")" -gt 10 ] || fail "file: stdout is too short"
cmp "$WORK/split.out" "$WORK/file.out" || { diff "$WORK/split.out" "$WORK/file.out"; fail "stdout differs with and without a terminal"; }

# 4. --quiet on the terminal.
in_pane quiet "$TPUSIM ${JOB[*]} --quiet"
if LC_ALL=C grep -a 'tpusim\]\|cycles/s' "$WORK/quiet.raw"; then fail "quiet: progress text on the terminal"; fi
grep -q 'golden' "$WORK/quiet.pane" || fail "quiet: the summary is not in the pane"

echo "PASS: progress on a terminal only, erased before the table; none with a file or --quiet"
