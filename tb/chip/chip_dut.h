// ChipDut: one verilated chip (tpu_chip + HBM device model, any built variant) behind a
// variant-independent, port-level interface. The driver (sw/driver/chip_driver.h) is built on it.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "host_port_types.h"

namespace tpu {

// Raised when the chip RTL reports an error (a failed SVA assertion, an HBM checker violation).
class ChipRtlError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The chip's trace port (tpu_chip trc_*) in one cycle, read after eval: what the harness's
// timeline is built from.
struct ChipTracePort {
  bool issue = false;   // the head command issues this cycle
  unsigned op = 0;      // the head's opcode (ChipOp)
  uint32_t index = 0;   // the head's command index (from 0 after reset or clear)
  unsigned eng = 0;     // the ICI send context an ICI_SEND at the head goes to
  unsigned done = 0;    // done pulses: bit 0 DMA, 1 LOADW, 2 MATMUL, 3 VPU, 4..9 send context
  bool wait = false;    // the head is an ICI_WAIT whose counter is short
};

// Per-link counters of the chip's link layer (tpu_ici_pkg::link_stat_e).
enum LinkStatSel : unsigned {
  kLinkStCrcErr = 0,   // flit words received on the port whose CRC failed
  kLinkStCtlErr = 1,   // control words for the port's outgoing flits whose CRC failed
  kLinkStReplays = 2,  // replays started by the port's sender
  kLinkStReplayed = 3, // flits it sent again
  kLinkStDown = 4,     // 1: its outgoing link is down
  kNumLinkStats = 5
};

class ChipDut {
 public:
  virtual ~ChipDut() = default;
  virtual const std::string& variant() const = 0;
  virtual const ChipShape& shape() const = 0;

  // Run-time HBM timing/policy: applied to the timing inputs, then the chip is reset.
  virtual void configure(const HbmConfig& hbm) = 0;
  // The VMEM and AMEM rows the chip exposes (0: all; chip_shape(variant, vmem, amem)'s rules):
  // its range checks and shape() follow from now on. Set before the first command.
  virtual void set_mem_rows(unsigned vmem_rows, unsigned amem_rows) = 0;

  // Host port inputs for this cycle.
  virtual void set_cmd(bool valid, const uint32_t words[4]) = 0;
  virtual void set_hm_req(bool valid, bool write, uint32_t addr, unsigned tag,
                          const uint8_t* data64) = 0;
  virtual void set_hm_rsp_ready(bool ready) = 0;
  virtual void set_clear(bool clear) = 0;
  virtual void set_stat_id(unsigned id) = 0;

  virtual void eval() = 0;  // settle combinational outputs after inputs change

  virtual bool cmd_ready() const = 0;
  virtual bool hm_req_ready() const = 0;
  virtual bool hm_rsp_valid() const = 0;
  virtual bool hm_rsp_write() const = 0;
  virtual unsigned hm_rsp_tag() const = 0;
  virtual void hm_rsp_data(uint8_t* data64) const = 0;
  // Words of the response (bit i: bytes 8i..8i+7) with an uncorrectable ECC error.
  virtual unsigned hm_rsp_ue() const = 0;
  virtual bool busy() const = 0;
  virtual bool hbm_idle() const = 0;  // the HBM controller holds no request or posted write
  virtual bool halted() const = 0;
  virtual unsigned err() const = 0;
  virtual uint32_t err_cmd() const = 0;
  virtual uint32_t err_addr() const = 0;  // hbm_uncorrectable: the word's HBM byte address
  virtual uint64_t stat() const = 0;  // counter selected by set_stat_id (after eval)
  virtual uint32_t hbm_violations() const = 0;
  virtual ChipTracePort trace_port() const = 0;  // after eval

  // One clock cycle. Throws ChipRtlError if an assertion failed.
  virtual void tick() = 0;
  virtual void reset(unsigned cycles = 4) = 0;
  virtual uint64_t cycle() const = 0;

  // Backdoor into the HBM device model: one 64-byte block at a 64-byte aligned byte address,
  // between clock cycles, in no simulated time (rtl/sim/hbm_device.sv). For test set-up and
  // result checks; it bypasses the controller, so no access to the block may be in flight.
  virtual void backdoor_write(uint64_t addr, const uint8_t* data64) = 0;
  virtual void backdoor_read(uint64_t addr, uint8_t* data64) = 0;
  // ECC: the backdoor writes the check bits of its data, and its read is corrected like a read
  // through the controller; this is the mask of uncorrectable words of the last backdoor read.
  virtual unsigned backdoor_ue() const = 0;

  // HBM fault injection (sim only, rtl/sim/hbm_device.sv). Random flips per word read, with
  // 32-bit thresholds (probability x 2^32, tb/common/fault_config.h): take effect at the next
  // reset, which also seeds the generator. One-time flips of the word at byte address `addr`
  // (data bits `mask`, check bits `check_mask`) at its next read; armed between cycles, lost at
  // a reset. Counts of the words read with one / two or more bits flipped.
  virtual void set_hbm_faults(uint64_t seed, uint32_t single_thr, uint32_t double_thr) = 0;
  virtual void arm_hbm_flip(uint64_t addr, uint64_t mask, uint8_t check_mask) = 0;
  virtual uint32_t hbm_injected_single() const = 0;
  virtual uint32_t hbm_injected_double() const = 0;

  // FST dump of every signal from now on; closed when the DUT is destroyed. Its time 0 is now,
  // and each later cycle n starts at n x the period of a `clock_ghz` clock (WaveClock).
  virtual void open_waves(const std::string& path, double clock_ghz) = 0;

  // ICI (docs/pod.md). The chip's coordinate {x, y, z} and the pod shape: chips per dimension
  // (1..8) and whether each dimension wraps; link_gap: cycles a link needs per flit (1..1023: a
  // link 1/link_gap as wide as a row); twist: ici_topo_t.twist (tpu::twist_bits, 0: a plain
  // torus). Held from now on (set them before traffic).
  virtual void set_ici_config(const std::array<int, 3>& me, const std::array<int, 3>& k,
                              const std::array<bool, 3>& wrap, unsigned link_gap = 1,
                              unsigned twist = 0) = 0;
  // Link layer (docs/ici.md "Link layer"): cycles without an ACK before a replay (0: never).
  virtual void set_ici_replay_timeout(unsigned cycles) = 0;
  // Link ports, direction d = 0..5 (+X -X +Y -Y +Z -Z), as the wire carries them. A flit word is
  // flit_words() 32-bit words: the memory row (lanes x 32 bits, lane 0 first), one word with
  // tail (bit 0), head (bit 1) and the link sequence number (bits 15:8), then the CRC-32C; its VC
  // beside it. A control word (ACK/NAK, credit counts; for the flits sent on d) is
  // kIciCtlWords words: the payload (kIciCtlBits bits), then its CRC-32C.
  static constexpr unsigned kIciCtlWords = 2;
  static constexpr unsigned kIciCtlBits = 29;
  virtual unsigned flit_words() const = 0;
  virtual bool ici_tx_valid(unsigned d) const = 0;
  virtual unsigned ici_tx_vc(unsigned d) const = 0;
  virtual const uint32_t* ici_tx_flit(unsigned d) const = 0;  // valid until the next eval/tick
  // The router's credit for a flit received on d (observation: it travels in the control word).
  virtual bool ici_rx_cr_valid(unsigned d) const = 0;
  virtual unsigned ici_rx_cr_vc(unsigned d) const = 0;
  // The control word the chip sends back for the flits it received on d.
  virtual bool ici_rx_ctl(unsigned d, uint32_t ctl[kIciCtlWords]) const = 0;
  virtual void set_ici_rx(unsigned d, bool valid, unsigned vc, const uint32_t* flit) = 0;
  // The control word that came back for the flits sent on d.
  virtual void set_ici_tx_ctl(unsigned d, bool valid, const uint32_t* ctl) = 0;
  // The outgoing link on d was declared down (its replays failed); sticky until reset.
  virtual bool ici_link_down(unsigned d) const = 0;
  // A per-link counter of direction d (sel: tpu_ici_pkg::link_stat_e, kLinkSt*), between cycles.
  virtual uint32_t ici_link_stat(unsigned d, unsigned sel) = 0;
  virtual bool ici_idle() const = 0;  // no flit buffered in the router

  // Evaluations the harness left out since construction because no input had changed (the
  // proof atop ChipDutImpl, tb/chip/chip_dut.cc): falling edges not evaluated at all, rising
  // edges evaluated without the model's input region. Both 0 with TPUSIM_FULL_EVAL=1 in the
  // environment (every evaluation as Verilator wrote it: the slow path the fast one is
  // compared against) or while a wave dump is open.
  struct EvalSkips {
    uint64_t falling_edges = 0;
    uint64_t input_regions = 0;
  };
  virtual EvalSkips eval_skips() const = 0;
};

// TPUSIM_FULL_EVAL from the environment: unset, empty or "0" false, "1" true; any other value
// std::invalid_argument naming the variable and its values.
bool chip_full_eval();

// Variants compiled into this build, e.g. {"4x4", "16x16"}.
std::vector<std::string> built_chip_variants();
// The command that builds the whole chip for `variant` too (the built ones kept), as it works
// when typed in the source tree: cmake --preset default -DTPU_CHIP_VARIANTS="4x4:0;8x8:1;16x16:2"
// && cmake --build --preset default (the ids are the contract's, configs/tpu_contract.yaml).
std::string chip_build_command(const std::string& variant);
// "chip variant '8x8' is not built in this binary (chips built: 4x4, 16x16); build it with: ..."
std::string chip_not_built(const std::string& variant);
// chip_shape(variant): host_port_types.h.
// Makes a chip of the named variant; std::invalid_argument naming the variant and how to build
// it when it was not built.
std::unique_ptr<ChipDut> make_chip(const std::string& variant);

}  // namespace tpu
