#!/usr/bin/env bash
# verilator --lint-only -Wall over every RTL top, with the project's waivers (rtl/lint.vlt).
set -euo pipefail
cd "$(dirname "$0")/.."
V="verilator --lint-only -Wall --assert rtl/lint.vlt"
fail=0
lint() {  # lint <top> <sources...> [-- -Gparams]
  local top=$1; shift
  if $V --top-module "$top" "$@"; then echo "[lint] $top: clean"; else echo "[lint] $top: FAILED"; fail=1; fi
}
MXU="rtl/tpu_pkg.sv rtl/tpu_mac.sv rtl/tpu_shift.sv rtl/tpu_pe.sv rtl/tpu_mxu.sv rtl/tpu_mxu_top.sv"
lint tpu_mac rtl/tpu_pkg.sv rtl/tpu_mac.sv
for id in 0 1 2 3; do
  # shellcheck disable=SC2086
  lint tpu_mxu_top $MXU -GVariantId=$id
done
exit $fail
