#!/usr/bin/env bash
# Installs the Debian packages the project needs, when missing. Sourced by run.sh and test.sh.
# As root it runs apt-get; otherwise it prints the exact command and stops.
set -euo pipefail

TPU_DEBS=(build-essential cmake ccache verilator libsystemc-dev libyaml-cpp-dev libgtest-dev
          libeigen3-dev zlib1g-dev gtkwave libopenmpi-dev openmpi-bin libcli11-dev
          nlohmann-json3-dev python3 python3-dev pybind11-dev python3-numpy python3-pytest
          python3-matplotlib tmux
          xvfb xauth imagemagick)  # scripts/wave_shots.sh: GTKWave under Xvfb, screenshots

tpu_missing_debs() {
  local missing=()
  for p in "${TPU_DEBS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
      || missing+=("$p")
  done
  echo "${missing[@]:-}"
}

tpu_install_deps() {
  local missing
  missing=$(tpu_missing_debs)
  [ -z "$missing" ] && return 0
  if [ "$(id -u)" -eq 0 ]; then
    echo "[deps] installing: $missing"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # shellcheck disable=SC2086
    apt-get install -y -qq --no-install-recommends $missing
  else
    echo "[deps] missing Debian packages: $missing" >&2
    echo "[deps] run: sudo apt-get install -y $missing" >&2
    exit 1
  fi
}

# Configures and builds with the given preset (default: "default").
tpu_build() {  # tpu_build PRESET [cmake --build options, e.g. --target T]
  local preset=${1:-default}
  shift || true
  local jobs
  jobs=$(nproc 2>/dev/null || echo 2)
  # Paths relative to the checkout, so a fresh clone elsewhere still hits the ccache.
  export CCACHE_BASEDIR="$PWD"
  cmake --preset "$preset" >/dev/null
  cmake --build --preset "$preset" -j "$jobs" "$@"
}
