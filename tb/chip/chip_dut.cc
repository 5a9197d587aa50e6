#include "chip_dut.h"

#include "hbm_ports.h"
#include "ici_fields.h"
#include "tpu_contract.h"
#include "verilated_model.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <utility>

#ifdef TPU_HAVE_CHIP_4X4
#include "Vtpu_chip_4x4.h"
#include "Vtpu_chip_4x4___024root.h"
#endif
#ifdef TPU_HAVE_CHIP_8X8
#include "Vtpu_chip_8x8.h"
#include "Vtpu_chip_8x8___024root.h"
#endif
#ifdef TPU_HAVE_CHIP_16X16
#include "Vtpu_chip_16x16.h"
#include "Vtpu_chip_16x16___024root.h"
#endif

namespace tpu {

namespace {

// One evaluation of the model per cycle where the inputs did not change. The harness evaluates
// twice a cycle: the falling edge with the next cycle's inputs (eval(), whose outputs it reads),
// then the rising edge (tick()). When no input changed since the last evaluation (the rising
// edge before), the falling one is skipped: in Verilator 5.006 an evaluation (1) samples the
// signals of the concurrent assertions, (2) runs the logic fed by top-level inputs once, (3)
// runs the processes whose trigger fired. With the inputs unchanged, (2) recomputes the values
// the model already holds; no trigger fires on a falling clock (every process of the chip RTL
// runs on posedge clk_i, negedge rst_ni, posedge bd_stb_i or posedge fi_stb_i, and only clk_i
// moved), so (3) does nothing; and (1)'s samples are read only by the assertions of a later
// triggered region, after the rising edge's evaluation has sampled the very same values again.
// What is left is the edge detector's copy of the clock (`__Vtrigrprev__TOP__clk_i`, what lets
// the next evaluation see a rising edge), set by hand. The rising edge's evaluation, when no
// input changed since the last one, leaves out (2) the same way (tick_inputs_unchanged(),
// tb/common/verilated_model.h): the inputs are those (2) last ran with, the state has not moved
// since (it moves only at this edge, and Verilator re-runs whatever depends on it after the
// edge, in (3)), and none of (2) reads the clock (checked in Verilator's output, 2026-12-07).
// `dirty_`: an input was written with a new value since the last evaluation; every setter
// below keeps it (the per-cycle ones compare, the rare ones set it). A falling edge whose
// inputs did change is evaluated without (1) (eval_falling_unsampled(), the reason as above).
// TPUSIM_FULL_EVAL=1 turns every skip off (chip_full_eval()): the slow path
// tests/system/test_tpusim_full_eval.cc compares against.
template <class VTop>
class ChipDutImpl final : public ChipDut {
 public:
  ChipDutImpl(std::string variant, ChipShape shape)
      : variant_(std::move(variant)), shape_(shape) {
    m_->rst_ni = 1;
    dirty_ = true;
    set_ici_config({0, 0, 0}, {1, 1, 1}, {false, false, false}, 1, 0);  // alone: a 1x1x1 pod
    configure(HbmConfig{});
  }

  const std::string& variant() const override { return variant_; }
  const ChipShape& shape() const override { return shape_; }

  void set_mem_rows(unsigned vmem_rows, unsigned amem_rows) override {
    shape_ = chip_shape(variant_, vmem_rows, amem_rows);
    dirty_ = true;
    m_->mem_vrows_i = static_cast<uint16_t>(shape_.vmem_rows);
    m_->mem_arows_i = static_cast<uint16_t>(shape_.amem_rows);
  }

  void configure(const HbmConfig& h) override {
    drive_hbm_config_ports(m_.top(), h);
    dirty_ = true;
    reset(4);
  }

  void set_cmd(bool valid, const uint32_t words[4]) override {
    put(m_->cmd_valid_i, static_cast<CData>(valid));
    if (words)
      for (int i = 0; i < 4; ++i) put(m_->cmd_i[i], words[i]);
  }
  void set_hm_req(bool valid, bool write, uint32_t addr, unsigned tag,
                  const uint8_t* data64) override {
    put(m_->hm_req_valid_i, static_cast<CData>(valid));
    put(m_->hm_req_write_i, static_cast<CData>(write));
    put(m_->hm_req_addr_i, addr);
    put(m_->hm_req_tag_i, static_cast<CData>(tag & 0x7Fu));
    if (data64) put_bytes(m_->hm_req_data_i.data(), data64, 64);
  }
  void set_hm_rsp_ready(bool ready) override {
    put(m_->hm_rsp_ready_i, static_cast<CData>(ready));
  }
  void set_clear(bool clear) override { put(m_->clear_i, static_cast<CData>(clear)); }
  void set_stat_id(unsigned id) override { put(m_->stat_id_i, static_cast<CData>(id)); }

  void eval() override {
    if (full_eval_) {
      m_.eval();
      dirty_ = false;
    } else if (dirty_ || m_.waves_open()) {
      m_.eval_falling_unsampled();
      dirty_ = false;
    } else {
      skips_.falling_edges += m_.clock_high();
      m_.eval_unchanged([](VTop& t) { t.rootp->__Vtrigrprev__TOP__clk_i = 0; });
    }
  }

  bool cmd_ready() const override { return m_->cmd_ready_o; }
  bool hm_req_ready() const override { return m_->hm_req_ready_o; }
  bool hm_rsp_valid() const override { return m_->hm_rsp_valid_o; }
  bool hm_rsp_write() const override { return m_->hm_rsp_write_o; }
  unsigned hm_rsp_tag() const override { return m_->hm_rsp_tag_o; }
  void hm_rsp_data(uint8_t* data64) const override {
    std::memcpy(data64, m_->hm_rsp_data_o.data(), 64);
  }
  unsigned hm_rsp_ue() const override { return m_->hm_rsp_ue_o; }
  bool busy() const override { return m_->busy_o; }
  bool hbm_idle() const override { return m_->hbm_idle_o; }
  bool halted() const override { return m_->halted_o; }
  unsigned err() const override { return m_->err_o; }
  uint32_t err_cmd() const override { return m_->err_cmd_o; }
  uint32_t err_addr() const override { return m_->err_addr_o; }
  uint64_t stat() const override { return m_->stat_o; }
  uint32_t hbm_violations() const override { return m_->viol_count_o; }
  ChipTracePort trace_port() const override {
    ChipTracePort p;
    p.issue = m_->trc_issue_o;
    p.op = m_->trc_op_o;
    p.index = m_->trc_idx_o;
    p.eng = m_->trc_eng_o;
    p.done = m_->trc_done_o;
    p.wait = m_->trc_wait_o;
    return p;
  }

  void tick() override {
    const bool unchanged = !dirty_ && !full_eval_;
    dirty_ = false;  // evaluated with the inputs as they are
    const bool ok = unchanged ? m_.tick_inputs_unchanged() : m_.tick();
    skips_.input_regions += m_.input_region_skipped();
    if (!ok)
      throw ChipRtlError("chip " + variant_ + ": RTL assertion failed at cycle " +
                         std::to_string(m_.cycle()) + " (see the message above)");
  }

  void reset(unsigned cycles) override {
    m_->cmd_valid_i = 0;
    m_->hm_req_valid_i = 0;
    m_->hm_rsp_ready_i = 1;
    m_->clear_i = 0;
    m_->ici_rx_valid_i = 0;
    m_->ici_tx_ctl_valid_i = 0;
    m_->bd_stb_i = 0;
    const bool ok = m_.reset(cycles);
    dirty_ = false;  // it ends with an evaluation of the inputs as they are
    if (!ok) throw ChipRtlError("chip " + variant_ + ": RTL assertion failed during reset");
  }

  uint64_t cycle() const override { return m_.cycle(); }

  void backdoor_write(uint64_t addr, const uint8_t* data64) override {
    std::memcpy(m_->bd_wdata_i.data(), data64, 64);
    strobe(addr, true);
  }
  void backdoor_read(uint64_t addr, uint8_t* data64) override {
    strobe(addr, false);
    std::memcpy(data64, m_->bd_rdata_o.data(), 64);
  }
  unsigned backdoor_ue() const override { return m_->bd_ue_o; }

  void set_hbm_faults(uint64_t seed, uint32_t single_thr, uint32_t double_thr) override {
    dirty_ = true;
    m_->fi_seed_i = seed;
    m_->fi_sbe_thr_i = single_thr;
    m_->fi_dbe_thr_i = double_thr;
  }
  void arm_hbm_flip(uint64_t addr, uint64_t mask, uint8_t check_mask) override {
    if (addr >= shape_.hbm_bytes)
      throw std::invalid_argument("chip " + variant_ + ": HBM flip address " +
                                  std::to_string(addr) + " is outside the HBM (" +
                                  std::to_string(shape_.hbm_bytes) + " bytes)");
    m_->fi_addr_i = static_cast<uint32_t>(addr);
    m_->fi_mask_i[0] = static_cast<uint32_t>(mask);
    m_->fi_mask_i[1] = static_cast<uint32_t>(mask >> 32);
    m_->fi_mask_i[2] = check_mask;
    m_->fi_stb_i = 1;
    m_.eval();
    m_->fi_stb_i = 0;
    m_.eval();
    dirty_ = false;
  }
  uint32_t hbm_injected_single() const override { return m_->fi_sbe_o; }
  uint32_t hbm_injected_double() const override { return m_->fi_dbe_o; }

  void open_waves(const std::string& path, double clock_ghz) override {
    m_.open_waves(path, "chip " + variant_, clock_ghz);
  }

  void set_ici_config(const std::array<int, 3>& me, const std::array<int, 3>& k,
                      const std::array<bool, 3>& wrap, unsigned link_gap,
                      unsigned twist) override {
    dirty_ = true;
    m_->ici_link_gap_i = static_cast<uint16_t>(link_gap & kIciLinkGapMax);
    std::array<unsigned, 3> c{}, kk{};
    for (unsigned d = 0; d < 3; ++d) {
      c[d] = static_cast<unsigned>(me[d]);
      kk[d] = static_cast<unsigned>(k[d]);
    }
    m_->ici_me_i = static_cast<uint16_t>(ici_pack_coord(c));
    m_->ici_topo_i = static_cast<uint32_t>(ici_pack_topo(kk, wrap, false, twist));
  }
  void set_ici_replay_timeout(unsigned cycles) override {
    dirty_ = true;
    m_->ici_replay_timeout_i = static_cast<uint16_t>(std::min(cycles, 0xFFFFu));
  }
  unsigned flit_words() const override { return kRowWords + 2; }
  bool ici_tx_valid(unsigned d) const override { return (m_->ici_tx_valid_o >> d) & 1u; }
  unsigned ici_tx_vc(unsigned d) const override { return (m_->ici_tx_vc_o >> (2 * d)) & 3u; }
  const uint32_t* ici_tx_flit(unsigned d) const override {
    std::memcpy(tx_buf_[d], m_->ici_tx_data_o.data() + d * kRowWords, kRowWords * 4);
    tx_buf_[d][kRowWords] = ((m_->ici_tx_ht_o >> (2 * d)) & 3u) |
                            static_cast<uint32_t>((m_->ici_tx_seq_o >> (8 * d)) & 0xFFu) << 8;
    tx_buf_[d][kRowWords + 1] = m_->ici_tx_crc_o[d];
    return tx_buf_[d];
  }
  bool ici_rx_cr_valid(unsigned d) const override { return (m_->ici_rx_cr_valid_o >> d) & 1u; }
  unsigned ici_rx_cr_vc(unsigned d) const override {
    return (m_->ici_rx_cr_vc_o >> (2 * d)) & 3u;
  }
  bool ici_rx_ctl(unsigned d, uint32_t ctl[2]) const override {
    ctl[0] = m_->ici_rx_ctl_o[d];
    ctl[1] = m_->ici_rx_ctl_crc_o[d];
    return (m_->ici_rx_ctl_valid_o >> d) & 1u;
  }
  void set_ici_rx(unsigned d, bool valid, unsigned vc, const uint32_t* flit) override {
    put(m_->ici_rx_valid_i, with_bit(m_->ici_rx_valid_i, d, valid));
    put(m_->ici_rx_vc_i, with_vc(m_->ici_rx_vc_i, d, vc));
    if (flit) {
      put_bytes(m_->ici_rx_data_i.data() + d * kRowWords, flit, kRowWords * 4);
      const uint32_t ht = (flit[kRowWords] & 3u) << (2 * d);
      put(m_->ici_rx_ht_i, static_cast<SData>((m_->ici_rx_ht_i & ~(3u << (2 * d))) | ht));
      const uint64_t seq = static_cast<uint64_t>((flit[kRowWords] >> 8) & 0xFFu) << (8 * d);
      put(m_->ici_rx_seq_i, (m_->ici_rx_seq_i & ~(uint64_t{0xFF} << (8 * d))) | seq);
      put(m_->ici_rx_crc_i[d], flit[kRowWords + 1]);
    }
  }
  void set_ici_tx_ctl(unsigned d, bool valid, const uint32_t* ctl) override {
    put(m_->ici_tx_ctl_valid_i, with_bit(m_->ici_tx_ctl_valid_i, d, valid));
    if (ctl) {
      put(m_->ici_tx_ctl_i[d], ctl[0]);
      put(m_->ici_tx_ctl_crc_i[d], ctl[1]);
    }
  }
  bool ici_link_down(unsigned d) const override { return (m_->ici_link_down_o >> d) & 1u; }
  uint32_t ici_link_stat(unsigned d, unsigned sel) override {
    m_->ici_lstat_dir_i = static_cast<uint8_t>(d & 7u);
    m_->ici_lstat_sel_i = static_cast<uint8_t>(sel & 7u);
    m_.eval();
    dirty_ = false;
    return m_->ici_lstat_o;
  }
  bool ici_idle() const override { return m_->ici_idle_o; }
  EvalSkips eval_skips() const override { return skips_; }

 private:
  static CData with_bit(CData v, unsigned bit, bool on) {
    return static_cast<CData>(on ? (v | (1u << bit)) : (v & ~(1u << bit)));
  }
  static SData with_vc(SData v, unsigned d, unsigned vc) {  // 2 bits per direction
    return static_cast<SData>((v & ~(3u << (2 * d))) | ((vc & 3u) << (2 * d)));
  }
  // An input written with its value: dirty_ when it changes.
  template <class T>
  void put(T& port, T v) {
    if (port != v) {
      port = v;
      dirty_ = true;
    }
  }
  void put_bytes(void* port, const void* v, std::size_t n) {
    if (std::memcmp(port, v, n) != 0) {
      std::memcpy(port, v, n);
      dirty_ = true;
    }
  }
  // One backdoor access: a rising edge of bd_stb_i with the clock idle (no cycle passes).
  void strobe(uint64_t addr, bool write) {
    if (addr % 64 != 0 || addr + 64 > shape_.hbm_bytes)
      throw std::invalid_argument("chip " + variant_ + ": backdoor address " +
                                  std::to_string(addr) +
                                  " must be 64-byte aligned and inside the HBM (" +
                                  std::to_string(shape_.hbm_bytes) + " bytes)");
    m_->bd_addr_i = static_cast<uint32_t>(addr);
    m_->bd_we_i = write;
    m_->bd_stb_i = 1;
    m_.eval();
    m_->bd_stb_i = 0;
    m_->bd_we_i = 0;
    m_.eval();
    dirty_ = false;
  }
  static constexpr unsigned kRowWords =
      sizeof(std::declval<VTop>().ici_tx_data_o) / sizeof(uint32_t) / 6;
  mutable uint32_t tx_buf_[6][kRowWords + 2] = {};

  std::string variant_;
  ChipShape shape_;
  VerilatedModel<VTop> m_;
  bool dirty_ = true;
  const bool full_eval_ = chip_full_eval();
  EvalSkips skips_;
};

}  // namespace

// From the contract's variant table (configs/tpu_contract.yaml, which also generates the RTL's
// variant_cfg). HBM capacity: channels x 16 banks x rows per bank x 2 KiB rows (tpu_hbm_pkg).
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
  throw std::invalid_argument(chip_not_built(variant));
}

std::string chip_build_command(const std::string& variant) {
  const std::vector<std::string> built = built_chip_variants();
  std::string list;
  for (const auto& k : kChipVariants) {
    const std::string name = k.name;
    if (name == variant || std::find(built.begin(), built.end(), name) != built.end())
      list += (list.empty() ? "" : ";") + name + ":" + std::to_string(k.id);
  }
  return "cmake --preset default -DTPU_CHIP_VARIANTS=\"" + list +
         "\" && cmake --build --preset default";
}

bool chip_full_eval() {
  const char* v = std::getenv("TPUSIM_FULL_EVAL");
  if (v == nullptr || *v == '\0' || std::strcmp(v, "0") == 0) return false;
  if (std::strcmp(v, "1") == 0) return true;
  throw std::invalid_argument(std::string("environment variable TPUSIM_FULL_EVAL='") + v +
                              "': must be 0 (skip evaluations that change nothing, the default) "
                              "or 1 (every evaluation, the slow path)");
}

std::string chip_not_built(const std::string& variant) {
  std::string list;
  for (const auto& b : built_chip_variants()) list += (list.empty() ? "" : ", ") + b;
  return "chip variant '" + variant + "' is not built in this binary (chips built: " + list +
         "); build it with: " + chip_build_command(variant);
}

}  // namespace tpu
