// ShardedMatmul: one matmul Y = epilogue(X @ W) across the chips of a machine, laid out by a
// ShardPlan (shard_plan.h, docs/sharding.md). Each chip's shards of X and W go to its HBM (all
// chips at once through their host ports, or the backdoor); one SPMD program per chip runs the
// gathers the plan asks for, the chip's block of the product, and the reduction or gather into
// Y's spec, in one command stream; Y stays sharded in HBM, where read_y() finds it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "chip_driver.h"
#include "host_port.h"
#include "pod_driver.h"
#include "report.h"
#include "scheduler.h"
#include "shard_plan.h"
#include "spmd_program.h"
#include "tpu/bf16.h"

namespace tpu {

struct ShardedMatmulOptions {
  std::vector<float> bias;  // N values added to every row of Y (VPU), or none
  bool relu = false;        // ReLU after the bias (VPU)
  bool backdoor = false;    // operands in and Y out through the backdoor (no simulated time)
};

// Y's block on one chip as it lies in HBM at the end.
struct ShardBlock {
  HbmMatrix m;   // rows x cols f32, row-major with its pitch
  Range rows;    // the padded rows and columns of Y it holds
  Range cols;
};

struct ShardedRun {
  PodProgramRun prog;   // what the program did: pod and chip cycles, counters, links
  // The program that ran: its phases in program order (each collective, or the matmul with
  // all its pieces; the epilogue), each command labelled with its phase, step and piece.
  SpmdProgram program;
  std::size_t pieces = 1;          // pipeline depth: gathers or reductions overlapped with it
  // Per phase: its span on the chips, from the first command issuing to the last completing on
  // any chip (set_phase_cycles, from the timeline); phases of a pipeline overlap. Empty: unknown.
  std::vector<uint64_t> phase_cycles;
  std::size_t commands = 0;        // all chips
  uint64_t load_cycles = 0;        // X, W (and bias) into HBM: all chips at once (0: backdoor)
  uint64_t store_cycles = 0;       // read_y(): Y's blocks out (0: backdoor)
};

class ShardedMatmul {
 public:
  // Lays the plan out on `host` (addresses in each chip's HBM; every chip the same). Throws
  // std::invalid_argument for what cannot run: the plan's pod is not the machine, HBM too small
  // (naming the chip's HBM and what the plan needs), a bias of the wrong size. With K split, bias
  // and ReLU run after the reduction, on each chip's block of Y (ChipDriver::plan_epilogue).
  ShardedMatmul(HostPort& host, ShardPlan plan, ShardedMatmulOptions opt = {});

  const ShardPlan& plan() const { return plan_; }
  const ShardedMatmulOptions& options() const { return opt_; }
  uint64_t hbm_bytes_per_chip() const { return hbm_used_; }

  // X (M x K) and W (K x N) row-major bf16 bits: every chip's shards (zero padded) into its HBM.
  // Returns the simulated cycles of the copies (0 through the backdoor).
  uint64_t load(const std::vector<bf16_t>& x, const std::vector<bf16_t>& w);
  // The SPMD program, not run (load() not needed). A fully sharded W is gathered in column
  // pieces, each piece's gather overlapping the matmul of the piece before; an all-reduce, or a
  // reduce-scatter onto Y's rows, runs in row pieces, each overlapping the matmul of the next
  // (merged by command count, spmd_program.h): `pieces` of them (1: no overlap).
  SpmdProgram programs();
  // Runs the programs: every chip at once, until every chip is idle.
  ShardedRun run();
  // Each chip's Y block (f32 bits, rows x cols of its ShardBlock), read from HBM; adds the
  // copies' cycles to run->store_cycles when given.
  std::vector<std::vector<uint32_t>> read_y(ShardedRun* run = nullptr);
  const ShardBlock& y_block(int chip) const { return y_[static_cast<std::size_t>(chip)]; }

  // The bit-exact golden of every chip's Y block for these operands: K not split, the
  // single-chip golden of the whole matmul (golden_chip_matmul), cut into blocks; K split, each
  // chip's partial product (golden_chip_matmul of its padded blocks, in MXU order), then the
  // collectives' rounds as the programs ran them (golden_collective).
  std::vector<std::vector<uint32_t>> golden(const std::vector<bf16_t>& x,
                                            const std::vector<bf16_t>& w) const;
  // Y (M x N, f32 bits) assembled from the chips' blocks (each element from the first chip
  // holding it); *replica_mismatches counts elements whose replicas on other chips differ.
  // Elements of want and got (per chip, as golden() and read_y() give them) that differ, Y's
  // padding not counted; real_elements(): the elements compared.
  std::size_t mismatches(const std::vector<std::vector<uint32_t>>& want,
                         const std::vector<std::vector<uint32_t>>& got) const;
  std::size_t real_elements() const;
  std::vector<uint32_t> assemble(const std::vector<std::vector<uint32_t>>& blocks,
                                 std::size_t* replica_mismatches = nullptr) const;

 private:
  struct Job {  // one plan_matmul of a chip: a block of its product
    HbmMatrix c, a, w, bias;
    bool has_bias = false;
    std::size_t piece = 0;
  };
  struct Coll {  // one collective of the program
    CollectiveSpec spec;
    CollectiveBuffers bufs;
    bool post = false;      // after the matmul
    std::size_t src = 0;    // its ShardCollective in plan().pre / post
    std::size_t piece = 0;  // which pipeline piece
  };
  struct Image {  // bytes of one chip's HBM as load() writes them
    int chip;
    uint64_t addr;
    std::vector<uint8_t> bytes;
  };
  enum class Pipe { kNone, kGatherW, kReduceY };
  struct Placed;
  struct CBlock;
  // The constructor, in steps: the pipeline's depth; each chip's layout (W's shards and
  // gathers, the product's blocks, the jobs, the collectives after the matmul).
  void choose_pipeline();
  Coll& coll_at(std::size_t i);  // collective i, made on first use
  void layout_chip(int c);
  std::vector<Placed> layout_w(int c, std::size_t* ic);
  std::vector<CBlock> layout_product(int c, ShardBlock* y);
  void cut_jobs(int c, const std::vector<Placed>& wb, const std::vector<CBlock>& cb);
  void layout_post(int c, const std::vector<CBlock>& cb, ShardBlock* y, std::size_t* ic);
  // Chip c's next buffer: declared (and allocated on every chip) by chip 0's layout, the same
  // one again for the other chips (every chip's layout is the same).
  HbmMatrix alloc_buf(int c, Buffer b);
  // The op list programs() schedules: the gathers, the matmul's jobs (each chip's), the
  // reductions, the epilogue, in the order of the stream (pipelined or not).
  std::string coll_name(std::size_t i) const;
  int add_coll_op(std::size_t i, bool lead);
  void add_matmul_ops(std::size_t piece);
  void add_ops();
  std::vector<Image> images(const std::vector<bf16_t>& x, const std::vector<bf16_t>& w) const;
  HostPort& host_;
  ShardPlan plan_;
  ShardedMatmulOptions opt_;
  int P_ = 0;
  Pipe pipe_ = Pipe::kNone;
  std::size_t pieces_ = 1;
  std::unique_ptr<Workload> wl_;
  std::vector<int> decl_;  // buffers in chip 0's order of declaration
  std::size_t next_decl_ = 0;
  std::vector<HbmMatrix> xs_, bias_;
  std::vector<std::vector<HbmMatrix>> ws_;   // per chip: W's shard (in column pieces)
  std::vector<std::vector<Range>> ws_cols_;  // their columns
  std::vector<std::vector<Job>> jobs_;       // per chip
  std::vector<Coll> coll_;                   // pre, then post
  std::vector<std::vector<CollectiveRound>> rounds_;  // as compiled (programs())
  std::vector<ShardBlock> y_;
  uint64_t hbm_used_ = 0;
};

// The independent check: every element of Y's blocks within the f64 bound of the exact product
// (u = 2^-24): |y - y64| <= (K + p + 2) u (sum_k |x w| + |b|), p the chips K is split over.
// Elements whose result, exact value or magnitude is not finite (NaN or Inf among the inputs,
// or an overflow) are left to the golden's bit-for-bit check and counted in `non_finite`.
struct ShardF64Check {
  std::size_t checked = 0, outside = 0, non_finite = 0;
  double worst = 0;  // largest |error| / bound
};
ShardF64Check shard_f64_check(const ShardedMatmul& sm, const std::vector<bf16_t>& x,
                              const std::vector<bf16_t>& w, const std::vector<float>& bias,
                              bool relu, const std::vector<std::vector<uint32_t>>& blocks);

// Fills run->phase_cycles from the timeline of the run (HostPort::take_trace; each command
// carries its phase's name as its label).
void set_phase_cycles(ShardedRun* run, const std::vector<TraceEvent>& events);

// Every check of a run's Y blocks: bit-exact against golden(), replicas equal, the f64 bound.
struct ShardCheck {
  std::size_t compared = 0, mismatches = 0, replica_mismatches = 0;
  ShardF64Check f64;
  std::vector<uint32_t> y;  // Y assembled (M x N f32 bits)
  bool pass() const { return mismatches == 0 && replica_mismatches == 0 && f64.outside == 0; }
};
ShardCheck check_sharded(const ShardedMatmul& sm, const std::vector<bf16_t>& x,
                         const std::vector<bf16_t>& w,
                         const std::vector<std::vector<uint32_t>>& blocks);

// The report of a sharded run (the keys of docs/sharding.md): group "sharding" (mesh, specs,
// shape, padding, the plan), cycles / ideal_cycles / mfu, collectives (name, kind, axis,
// bytes), per chip the Y block, host copy cycles, f64_check, golden.
void fill_shard_report(ReportGroup& rep, const ShardedMatmul& sm, const ShardedRun& run,
                       const ShardCheck& chk, const MachineInfo& mi);

}  // namespace tpu
