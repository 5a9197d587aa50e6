#!/usr/bin/env bash
# verilator --lint-only -Wall over every RTL top (each variant / parameter set that is built),
# with the project's waivers, all in rtl/lint.vlt. The 128x128 MXU (same RTL, larger parameters)
# takes Verilator minutes to elaborate, so it is linted only with --all.
set -euo pipefail
cd "$(dirname "$0")/.."
fail=0
# The hardware contract package is generated (configs/tpu_contract.yaml, scripts/gen_contract.cc);
# make it here, into a temporary directory, so that lint needs no prior build.
GEN=$(mktemp -d)
trap 'rm -rf "$GEN"' EXIT
"${CXX:-g++}" -std=c++17 -O1 -o "$GEN/gen_contract" scripts/gen_contract.cc -lyaml-cpp
"$GEN/gen_contract" configs/tpu_contract.yaml "$GEN"
lint() {  # lint <name> <top> <verilator args and sources...>
  local name=$1 top=$2; shift 2
  if verilator --lint-only -Wall --assert -Irtl rtl/lint.vlt --top-module "$top" "$@"; then
    echo "[lint] $name: clean"
  else
    echo "[lint] $name: FAILED"; fail=1
  fi
}
PKG="$GEN/tpu_contract_pkg.sv rtl/tpu_pkg.sv"
MXU="$PKG rtl/tpu_mac_pkg.sv rtl/tpu_shift.sv rtl/tpu_mxu.sv rtl/tpu_mxu_top.sv"
VPU="$PKG rtl/tpu_vpu_pkg.sv rtl/tpu_fma32.sv rtl/tpu_vpu_lane.sv rtl/tpu_vpu_tree.sv rtl/tpu_vpu.sv"
HBM="rtl/tpu_hbm_pkg.sv rtl/tpu_fifo.sv rtl/tpu_hbm_cqueue.sv rtl/tpu_hbm_pick.sv \
rtl/tpu_hbm_chan.sv rtl/tpu_hbm_ctrl.sv"
ICI="rtl/tpu_ici_pkg.sv rtl/tpu_fifo.sv rtl/tpu_ici_delay.sv \
rtl/tpu_ici_input.sv rtl/tpu_ici_output.sv rtl/tpu_ici_swalloc.sv rtl/tpu_ici_xbar.sv \
rtl/tpu_ici_router.sv"
CHIP="rtl/tpu_vpu_pkg.sv rtl/tpu_xcend_pkg.sv rtl/tpu_chip_pkg.sv $HBM rtl/tpu_ici_pkg.sv \
rtl/tpu_ici_input.sv rtl/tpu_ici_output.sv rtl/tpu_ici_swalloc.sv rtl/tpu_ici_xbar.sv \
rtl/tpu_ici_router.sv rtl/tpu_ici_crc.sv rtl/tpu_ici_link_tx.sv rtl/tpu_ici_link_rx.sv \
rtl/tpu_ici_eng.sv rtl/tpu_mac_pkg.sv rtl/tpu_shift.sv rtl/tpu_mxu.sv rtl/tpu_fma32.sv rtl/tpu_vpu_lane.sv \
rtl/tpu_vpu_tree.sv rtl/tpu_vpu.sv rtl/tpu_xcend.sv rtl/tpu_vpu_xcend.sv rtl/tpu_mem.sv \
rtl/tpu_dma.sv rtl/tpu_mxu_unit.sv rtl/tpu_vpu_unit.sv rtl/tpu_seq.sv rtl/tpu_chip.sv"

# shellcheck disable=SC2086
{
  lint tpu_mac tpu_mac $PKG rtl/tpu_mac_pkg.sv rtl/tpu_mac.sv
  ids="0 1 2"; [ "${1:-}" = "--all" ] && ids="0 1 2 3"
  for id in $ids; do lint "tpu_mxu_top (variant $id)" tpu_mxu_top -GVariantId=$id $MXU; done
  lint tpu_fma32 tpu_fma32 $PKG rtl/tpu_fma32.sv
  lint tpu_xcend tpu_xcend $PKG rtl/tpu_xcend_pkg.sv rtl/tpu_xcend.sv
  for lanes in 4 16 128; do lint "tpu_vpu (Lanes=$lanes)" tpu_vpu -GLanes=$lanes $VPU; done
  lint tpu_vpu_xcend tpu_vpu_xcend -GLanes=4 $PKG rtl/tpu_vpu_pkg.sv rtl/tpu_xcend_pkg.sv \
    rtl/tpu_xcend.sv rtl/tpu_vpu_xcend.sv
  lint tpu_hbm_ctrl tpu_hbm_ctrl $HBM
  lint "hbm_subsys_tb_top (sim)" hbm_subsys_tb_top $HBM rtl/sim/hbm_device.sv \
    rtl/sim/hbm_subsys_tb_top.sv
  lint "hbm_secded_tb_top (sim)" hbm_secded_tb_top rtl/tpu_hbm_pkg.sv \
    rtl/sim/hbm_secded_tb_top.sv
  lint tpu_ici_router tpu_ici_router $ICI
  lint tpu_ici_link_tx tpu_ici_link_tx rtl/tpu_ici_pkg.sv rtl/tpu_ici_crc.sv rtl/tpu_ici_link_tx.sv
  lint tpu_ici_link_rx tpu_ici_link_rx rtl/tpu_ici_pkg.sv rtl/tpu_ici_crc.sv rtl/tpu_ici_link_rx.sv
  lint "ici_crc_tb_top (sim)" ici_crc_tb_top rtl/tpu_ici_crc.sv rtl/sim/ici_crc_tb_top.sv
  lint "ici_node_tb_top (sim)" ici_node_tb_top $ICI rtl/sim/ici_node_tb_top.sv
  lint "ici_node_tb_top (sim, LocalPorts=2)" ici_node_tb_top -GLocalPorts=2 $ICI rtl/sim/ici_node_tb_top.sv
  for id in 0 2; do
    lint "tpu_chip (variant $id)" tpu_chip -GVariantId=$id $PKG $CHIP
    lint "tpu_chip_sim_top (sim, variant $id)" tpu_chip_sim_top -GVariantId=$id $PKG $CHIP \
      rtl/sim/hbm_device.sv rtl/sim/tpu_chip_sim_top.sv
  done
}
exit $fail
