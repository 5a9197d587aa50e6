// Drives the HBM run-time configuration ports (timing, address map, scheduler policy) that every
// verilated top holding a tpu_hbm_ctrl exposes under the same names (t_cl_i .. wr_lo_i).
#pragma once

#include <cstdint>

#include "hbm_config.h"

namespace tpu {

template <class Top>
void drive_hbm_config_ports(Top& t, const HbmConfig& h) {
  const HbmTiming& tm = h.timing;
  t.t_cl_i = static_cast<uint16_t>(tm.cl);
  t.t_cwl_i = static_cast<uint16_t>(tm.cwl);
  t.t_rcd_i = static_cast<uint16_t>(tm.rcd);
  t.t_rp_i = static_cast<uint16_t>(tm.rp);
  t.t_ras_i = static_cast<uint16_t>(tm.ras);
  t.t_rc_i = static_cast<uint16_t>(tm.rc);
  t.t_ccd_s_i = static_cast<uint16_t>(tm.ccd_s);
  t.t_ccd_l_i = static_cast<uint16_t>(tm.ccd_l);
  t.t_rrd_s_i = static_cast<uint16_t>(tm.rrd_s);
  t.t_rrd_l_i = static_cast<uint16_t>(tm.rrd_l);
  t.t_faw_i = static_cast<uint16_t>(tm.faw);
  t.t_wr_i = static_cast<uint16_t>(tm.wr);
  t.t_wtr_s_i = static_cast<uint16_t>(tm.wtr_s);
  t.t_wtr_l_i = static_cast<uint16_t>(tm.wtr_l);
  t.t_rtp_i = static_cast<uint16_t>(tm.rtp);
  t.t_rfc_i = static_cast<uint16_t>(tm.rfc);
  t.t_refi_i = static_cast<uint16_t>(tm.refi);
  t.addr_map_i = static_cast<uint8_t>(h.ctrl.addr_map);
  t.starve_cap_i = static_cast<uint16_t>(h.ctrl.starve_cap);
  t.wr_hi_i = static_cast<uint8_t>(h.ctrl.wr_hi);
  t.wr_lo_i = static_cast<uint8_t>(h.ctrl.wr_lo);
}

}  // namespace tpu
