#include "chip_dut.h"

#include <verilated.h>
#include <verilated_fst_c.h>

#include <cstring>

#ifdef TPU_HAVE_CHIP_4X4
#include "Vtpu_chip_4x4.h"
#endif
#ifdef TPU_HAVE_CHIP_8X8
#include "Vtpu_chip_8x8.h"
#endif
#ifdef TPU_HAVE_CHIP_16X16
#include "Vtpu_chip_16x16.h"
#endif

namespace tpu {

namespace {

template <class VTop>
class ChipDutImpl final : public ChipDut {
 public:
  ChipDutImpl(std::string variant, ChipShape shape)
      : variant_(std::move(variant)), shape_(shape), ctx_(new VerilatedContext) {
    ctx_->fatalOnError(false);  // a failed assertion becomes a ChipRtlError
    ctx_->traceEverOn(true);
    use_context();
    top_.reset(new VTop(ctx_.get(), "TOP"));
    top_->clk_i = 0;
    top_->rst_ni = 1;
    configure(HbmConfig{});
  }

  ~ChipDutImpl() override {
    use_context();
    if (fst_) fst_->close();
    top_->final();
    top_.reset();
  }

  const std::string& variant() const override { return variant_; }
  const ChipShape& shape() const override { return shape_; }

  void configure(const HbmConfig& h) override {
    const HbmTiming& t = h.timing;
    top_->t_cl_i = static_cast<uint16_t>(t.cl);
    top_->t_cwl_i = static_cast<uint16_t>(t.cwl);
    top_->t_rcd_i = static_cast<uint16_t>(t.rcd);
    top_->t_rp_i = static_cast<uint16_t>(t.rp);
    top_->t_ras_i = static_cast<uint16_t>(t.ras);
    top_->t_rc_i = static_cast<uint16_t>(t.rc);
    top_->t_ccd_s_i = static_cast<uint16_t>(t.ccd_s);
    top_->t_ccd_l_i = static_cast<uint16_t>(t.ccd_l);
    top_->t_rrd_s_i = static_cast<uint16_t>(t.rrd_s);
    top_->t_rrd_l_i = static_cast<uint16_t>(t.rrd_l);
    top_->t_faw_i = static_cast<uint16_t>(t.faw);
    top_->t_wr_i = static_cast<uint16_t>(t.wr);
    top_->t_wtr_s_i = static_cast<uint16_t>(t.wtr_s);
    top_->t_wtr_l_i = static_cast<uint16_t>(t.wtr_l);
    top_->t_rtp_i = static_cast<uint16_t>(t.rtp);
    top_->t_rfc_i = static_cast<uint16_t>(t.rfc);
    top_->t_refi_i = static_cast<uint16_t>(t.refi);
    top_->addr_map_i = static_cast<uint8_t>(h.ctrl.addr_map);
    top_->starve_cap_i = static_cast<uint16_t>(h.ctrl.starve_cap);
    top_->wr_hi_i = static_cast<uint8_t>(h.ctrl.wr_hi);
    top_->wr_lo_i = static_cast<uint8_t>(h.ctrl.wr_lo);
    reset(4);
  }

  void set_cmd(bool valid, const uint32_t words[4]) override {
    top_->cmd_valid_i = valid;
    if (words)
      for (int i = 0; i < 4; ++i) top_->cmd_i[i] = words[i];
  }
  void set_hm_req(bool valid, bool write, uint32_t addr, unsigned tag,
                  const uint8_t* data64) override {
    top_->hm_req_valid_i = valid;
    top_->hm_req_write_i = write;
    top_->hm_req_addr_i = addr;
    top_->hm_req_tag_i = static_cast<uint8_t>(tag & 0x7Fu);
    if (data64) std::memcpy(top_->hm_req_data_i.data(), data64, 64);
  }
  void set_hm_rsp_ready(bool ready) override { top_->hm_rsp_ready_i = ready; }
  void set_clear(bool clear) override { top_->clear_i = clear; }
  void set_stat_id(unsigned id) override { top_->stat_id_i = static_cast<uint8_t>(id); }

  void eval() override {
    use_context();
    top_->eval();
  }

  bool cmd_ready() const override { return top_->cmd_ready_o; }
  bool hm_req_ready() const override { return top_->hm_req_ready_o; }
  bool hm_rsp_valid() const override { return top_->hm_rsp_valid_o; }
  bool hm_rsp_write() const override { return top_->hm_rsp_write_o; }
  unsigned hm_rsp_tag() const override { return top_->hm_rsp_tag_o; }
  void hm_rsp_data(uint8_t* data64) const override {
    std::memcpy(data64, top_->hm_rsp_data_o.data(), 64);
  }
  bool busy() const override { return top_->busy_o; }
  bool halted() const override { return top_->halted_o; }
  unsigned err() const override { return top_->err_o; }
  uint32_t err_cmd() const override { return top_->err_cmd_o; }
  uint64_t stat() const override { return top_->stat_o; }
  uint32_t hbm_violations() const override { return top_->viol_count_o; }

  void tick() override {
    use_context();
    top_->clk_i = 1;
    top_->eval();
    ctx_->timeInc(1);
    if (fst_) fst_->dump(ctx_->time());
    top_->clk_i = 0;
    top_->eval();
    ctx_->timeInc(1);
    if (fst_) fst_->dump(ctx_->time());
    ++cycle_;
    if (ctx_->gotError()) {
      if (fst_) fst_->flush();
      throw ChipRtlError("chip " + variant_ + ": RTL assertion failed at cycle " +
                         std::to_string(cycle_) + " (see the message above)");
    }
  }

  void reset(unsigned cycles) override {
    use_context();
    top_->cmd_valid_i = 0;
    top_->hm_req_valid_i = 0;
    top_->hm_rsp_ready_i = 1;
    top_->clear_i = 0;
    top_->rst_ni = 0;
    top_->eval();
    for (unsigned c = 0; c < cycles; ++c) tick();
    top_->rst_ni = 1;
    top_->eval();
  }

  uint64_t cycle() const override { return cycle_; }

  void open_waves(const std::string& path) override {
    use_context();
    fst_.reset(new VerilatedFstC);
    top_->trace(fst_.get(), 99);
    fst_->open(path.c_str());
    if (!fst_->isOpen()) throw std::runtime_error(path + ": cannot open the wave file for writing");
    fst_->dump(ctx_->time());
  }

 private:
  // Verilator 5.006: point the thread's context at this model before it runs or is destroyed,
  // or teardown deadlocks with several models in one thread (see tb/mxu/mxu_dut_impl.h).
  void use_context() { Verilated::threadContextp(ctx_.get()); }

  std::string variant_;
  ChipShape shape_;
  std::unique_ptr<VerilatedContext> ctx_;
  std::unique_ptr<VTop> top_;
  std::unique_ptr<VerilatedFstC> fst_;
  uint64_t cycle_ = 0;
};

}  // namespace

// Mirrors rtl/tpu_pkg.sv variant_cfg (HBM: 2 channels x 16 banks x 256 rows x 2 KiB = 16 MiB).
ChipShape chip_shape(const std::string& variant) {
  ChipShape s;
  s.hbm_channels = 2;
  s.hbm_bytes = 2ull * 16 * 256 * 2048;
  if (variant == "4x4") {
    s.rows = s.cols = 4;
    s.vmem_rows = 4096;
    s.amem_rows = 2048;
  } else if (variant == "8x8") {
    s.rows = s.cols = 8;
    s.vmem_rows = 2048;
    s.amem_rows = 1024;
  } else if (variant == "16x16") {
    s.rows = s.cols = 16;
    s.vmem_rows = 8192;
    s.amem_rows = 4096;
  } else {
    throw std::invalid_argument("unknown chip variant '" + variant +
                                "' (chip variants: 4x4, 8x8, 16x16)");
  }
  return s;
}

std::vector<std::string> built_chip_variants() {
  std::vector<std::string> v;
#ifdef TPU_HAVE_CHIP_4X4
  v.push_back("4x4");
#endif
#ifdef TPU_HAVE_CHIP_8X8
  v.push_back("8x8");
#endif
#ifdef TPU_HAVE_CHIP_16X16
  v.push_back("16x16");
#endif
  return v;
}

std::unique_ptr<ChipDut> make_chip(const std::string& variant) {
  const ChipShape s = chip_shape(variant);
#ifdef TPU_HAVE_CHIP_4X4
  if (variant == "4x4") return std::make_unique<ChipDutImpl<Vtpu_chip_4x4>>(variant, s);
#endif
#ifdef TPU_HAVE_CHIP_8X8
  if (variant == "8x8") return std::make_unique<ChipDutImpl<Vtpu_chip_8x8>>(variant, s);
#endif
#ifdef TPU_HAVE_CHIP_16X16
  if (variant == "16x16") return std::make_unique<ChipDutImpl<Vtpu_chip_16x16>>(variant, s);
#endif
  std::string list;
  for (const auto& b : built_chip_variants()) list += (list.empty() ? "" : ", ") + b;
  throw std::invalid_argument("chip variant '" + variant + "' is not built in this binary (built: " +
                              list + "); build it with -DTPU_CHIP_VARIANTS=\"4x4:0;" + variant +
                              ":<VariantId>\"");
}

}  // namespace tpu
