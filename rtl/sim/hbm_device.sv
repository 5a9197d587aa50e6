// hbm_device: SIMULATION-ONLY behavioural model of an HBM2 stack, with a protocol/timing checker.
// *** Not synthesizable *** (associative-array storage, 64-bit time stamps, strings, $error).
//
// NumCh independent channels, each 4 bank groups x 4 banks x RowsPerBank rows x 32 columns of
// one 64-byte BL4 burst. One command per channel per cycle on `cmd_i` (hbm_cmd_t). The 128-bit
// DDR data bus is shown as one 256-bit word per cycle (two beats), so a burst takes two cycles:
//   RD issued in bus cycle t -> `rvalid_o`/`rdata_o` in cycles t+CL (bytes 0..31), t+CL+1 (32..63)
//   WR issued in bus cycle t -> `wvalid_i`/`wdata_i` expected in cycles t+CWL and t+CWL+1
// A bus cycle's command and write data are sampled at the rising edge that ends it. Commands:
// ACT, PRE (a no-op on a closed bank), PREA (precharge all), RD, WR, REF (all-bank); RD and WR
// address the bank's open row (their row field is ignored). Storage is sparse (by row): a block
// never written reads as zero. Data is read from the array when the RD is seen.
//
// The checker flags every command that breaks a rule of hbm_rule_e: timing (tRCD, tRP, tRAS,
// tRC, tCCD_S/L, tRRD_S/L, tFAW, tWR, tWTR_S/L, tRTP, tRFC, tREFI overdue, tRTW), data-bus
// placement (CL, CWL, BL) and illegal commands (RD/WR to a closed bank, ACT to an open bank, REF
// with a bank open, row out of range). Each violation is an immediate assertion failure whose
// message names the rule ("HBM rule tRCD violated: ..."); it is also counted in `viol_count_o`,
// its bit set in `viol_mask_o` (bit = hbm_rule_e value) and the last one shown on `viol_last_o`.
// REF number k (k = 1, 2, ...) must be seen by the end of bus cycle k*tREFI - 1 after reset.
//
// Backdoor (test set-up and result checks, no simulated time): a rising edge of `bd_stb_i`, with
// the clock idle, writes `bd_wdata_i` into block `bd_loc_i` when `bd_we_i` is set, and shows the
// block on `bd_rdata_o` either way. It bypasses the timing model: use it while no access to the
// same block is in flight.
//
// ECC: every 64-bit word is stored with its 8 SECDED check bits (tpu_hbm_pkg, 72,64): they come
// with the write data on `wcheck_i` and go back with the read data on `rcheck_o`. The checker
// requires the check bits of written words to match their data (rule write-ECC, a controller
// bug otherwise). The backdoor writes the check bits of its data, and its read goes through the
// same correction as the controller: `bd_rdata_o` is the corrected block and `bd_ue_o` flags
// its uncorrectable words.
//
// Fault injection (sim only, seeded, reproducible): bits flip on their way out of the device,
// on RD, never in the stored word. Per word read, with a 32-bit threshold as the probability
// x 2^32: `fi_dbe_thr_i` two distinct bits of the 72, else `fi_sbe_thr_i` one bit, drawn from a
// xorshift64* generator seeded with `fi_seed_i` at reset (nothing is drawn while both are 0).
// One-time flips: a rising edge of `fi_stb_i` (clock idle, like the backdoor) arms `fi_mask_i`
// (72 bits: data [63:0], check [71:64]) for word `fi_word_i` of block `fi_loc_i`; the next RD of
// that word applies and disarms it. `fi_sbe_o` / `fi_dbe_o` count the words read with one / two
// or more bits flipped.
`include "tpu_assert.svh"

module hbm_device
  import tpu_hbm_pkg::*;
#(
  parameter int unsigned NumCh = 2,
  parameter int unsigned RowsPerBank = 64
) (
  input  logic                    clk_i,
  input  logic                    rst_ni,
  input  hbm_timing_t             timing_i,
  input  hbm_cmd_t    [NumCh-1:0] cmd_i,
  input  logic        [NumCh-1:0] wvalid_i,
  input  hbm_bus_t    [NumCh-1:0] wdata_i,
  input  hbm_bus_ecc_t [NumCh-1:0] wcheck_i,
  output logic        [NumCh-1:0] rvalid_o,
  output hbm_bus_t    [NumCh-1:0] rdata_o,
  output hbm_bus_ecc_t [NumCh-1:0] rcheck_o,
  output logic        [31:0]      viol_count_o,
  output logic        [31:0]      viol_mask_o,
  output hbm_rule_e               viol_last_o,
  input  logic                    bd_stb_i,
  input  logic                    bd_we_i,
  input  hbm_loc_t                bd_loc_i,
  input  hbm_data_t               bd_wdata_i,
  output hbm_data_t               bd_rdata_o,
  output hbm_word_mask_t          bd_ue_o,
  // fault injection
  input  logic        [63:0]      fi_seed_i,
  input  logic        [31:0]      fi_sbe_thr_i,
  input  logic        [31:0]      fi_dbe_thr_i,
  input  logic                    fi_stb_i,
  input  hbm_loc_t                fi_loc_i,
  input  logic        [2:0]       fi_word_i,
  input  logic        [71:0]      fi_mask_i,
  output logic        [31:0]      fi_sbe_o,
  output logic        [31:0]      fi_dbe_o
);

  localparam int unsigned Ring = 128;  // data-bus schedule horizon: CL, CWL + 2 must stay below
  localparam int unsigned RingW = $clog2(Ring);
  typedef logic [RingW-1:0] slot_t;
  localparam longint Never = -64'sd1000000000;

  typedef enum byte unsigned {BusFree = 0, BusRead = 1, BusWrite = 2} bus_use_e;

  // Bank and timing state (time stamps are bus cycles since reset).
  bit bank_open[NumCh][HBM_BANKS];
  int unsigned bank_row[NumCh][HBM_BANKS];
  longint t_act[NumCh][HBM_BANKS];
  longint t_pre[NumCh][HBM_BANKS];
  longint t_rd[NumCh][HBM_BANKS];
  longint t_wr[NumCh][HBM_BANKS];
  longint t_act_bg[NumCh][HBM_BANK_GROUPS];
  longint t_rd_bg[NumCh][HBM_BANK_GROUPS];
  longint t_wr_bg[NumCh][HBM_BANK_GROUPS];
  longint t_rd_any[NumCh];
  longint t_pre_any[NumCh];
  longint t_ref[NumCh];
  longint act_hist[NumCh][4];  // the last four ACTs, for tFAW
  int unsigned act_ptr[NumCh];  // oldest entry of act_hist
  longint ref_count[NumCh];
  longint ref_due[NumCh];  // REF number ref_due_k must be seen before this bus cycle
  longint ref_due_k[NumCh];

  // Data-bus schedule per channel, indexed by bus cycle modulo Ring.
  bus_use_e bus_use[NumCh][Ring];
  hbm_bus_t rd_slot[NumCh][Ring];
  hbm_bus_ecc_t rdc_slot[NumCh][Ring];
  int unsigned wr_key[NumCh][Ring];
  bit wr_hi[NumCh][Ring];  // second beat pair of the burst

  // Sparse storage by row: the blocks of every row ever written sit in blk_data / blk_ecc (a
  // block never written in it is zero), from index row_at[key_of() >> HBM_COL_W] on. A small tree
  // of rows instead of a large one of blocks: the walks of a per-block tree missed the cache at
  // nearly every step (~4% of a 1 MiB all-reduce's simulation time).
  int unsigned row_at[int unsigned];
  hbm_data_t blk_data[$];
  hbm_ecc_t blk_ecc[$];  // the check bits of each stored block
  // The rows found last, direct-mapped by row (rows never move, so an entry stays right until
  // reset): most accesses stream through a row and skip the tree's walks (which still missed
  // the cache at most steps, the tree being small but the chip's state large).
  localparam int unsigned RowCache = 64;
  typedef logic [$clog2(RowCache)-1:0] rc_idx_t;
  bit rc_valid[RowCache];
  int unsigned rc_row[RowCache];
  int unsigned rc_at[RowCache];
  logic [71:0] fi_pend[longint unsigned];  // armed one-time flips, keyed by {key_of(), word}
  logic [63:0] fi_state;  // xorshift64* state
  int unsigned fi_sbe, fi_dbe;
  assign fi_sbe_o = fi_sbe;
  assign fi_dbe_o = fi_dbe;

  longint now;
  int unsigned viol_count;
  logic [31:0] viol_mask;
  hbm_rule_e viol_last;

  assign viol_count_o = viol_count;
  assign viol_mask_o = viol_mask;
  assign viol_last_o = viol_last;

  function automatic string rule_name(hbm_rule_e r);
    unique case (r)
      RuleTRCD:     return "tRCD";
      RuleTRP:      return "tRP";
      RuleTRAS:     return "tRAS";
      RuleTRC:      return "tRC";
      RuleTCCDS:    return "tCCD_S";
      RuleTCCDL:    return "tCCD_L";
      RuleTRRDS:    return "tRRD_S";
      RuleTRRDL:    return "tRRD_L";
      RuleTFAW:     return "tFAW";
      RuleTWR:      return "tWR";
      RuleTWTRS:    return "tWTR_S";
      RuleTWTRL:    return "tWTR_L";
      RuleTRTP:     return "tRTP";
      RuleTRFC:     return "tRFC";
      RuleTREFI:    return "tREFI";
      RuleCL:       return "CL";
      RuleCWL:      return "CWL";
      RuleBL:       return "BL";
      RuleTRTW:     return "tRTW";
      RuleRdClosed: return "RD-to-closed-bank";
      RuleWrClosed: return "WR-to-closed-bank";
      RuleActOpen:  return "ACT-to-open-bank";
      RuleRefOpen:  return "REF-with-open-bank";
      RuleRowRange: return "row-range";
      RuleWrEcc:    return "write-ECC";
      default:      return "none";
    endcase
  endfunction

  function automatic int unsigned key_of(int unsigned c, int unsigned b, int unsigned row,
                                         int unsigned col);
    return (c << 27) | (b << 23) | ((row & 32'h3FFF) << 5) | (col & 32'h1F);
  endfunction

  // Where block `key` sits in blk_data / blk_ecc (from the row cache, else the tree of rows):
  // `found` is low for a block of a row never written, unless `make` is set, which makes the row
  // (zero).
  task automatic find(int unsigned key, bit make, output bit found, output int unsigned at);
    int unsigned row;
    rc_idx_t ci;
    row = key >> HBM_COL_W;
    ci = rc_idx_t'(row ^ (row >> 12) ^ (row >> 18));
    if (rc_valid[ci] && rc_row[ci] == row) begin
      found = 1'b1;
      at = rc_at[ci] + (key & (HBM_COLS - 1));
      return;
    end
    found = row_at.exists(row) != 0;
    if (!found && make) begin
      row_at[row] = blk_data.size();
      for (int unsigned i = 0; i < HBM_COLS; i++) begin
        blk_data.push_back('0);
        blk_ecc.push_back('0);
      end
      found = 1'b1;
    end
    at = 0;
    if (found) begin
      rc_valid[ci] = 1'b1;
      rc_row[ci] = row;
      rc_at[ci] = row_at[row];
      at = rc_at[ci] + (key & (HBM_COLS - 1));
    end
  endtask

  // A block of the storage (zero when never written), and a block stored.
  task automatic load(int unsigned key, output hbm_data_t d, output hbm_ecc_t e);
    bit found;
    int unsigned at;
    find(key, 1'b0, found, at);
    d = found ? blk_data[at] : '0;
    e = found ? blk_ecc[at] : '0;
  endtask
  task automatic store(int unsigned key, hbm_data_t d, hbm_ecc_t e);
    bit found_unused;
    int unsigned at;
    find(key, 1'b1, found_unused, at);
    blk_data[at] = d;
    blk_ecc[at] = e;
  endtask

  function automatic slot_t slot_of(longint t);
    return slot_t'(t % longint'(Ring));
  endfunction

  // One rule check: `ok` must hold. A failure is an assertion failure naming the rule.
  // Call sites use `HBM_CHECK(ok, c, rule, what): `what` (a $sformatf) is built only when the
  // rule fails, not for every command that passes (it cost ~3% of a chip's simulation time).
`define HBM_CHECK(ok_, c_, r_, what_) if (!(ok_)) check(1'b0, c_, r_, what_)
  task automatic check(bit ok, int unsigned c, hbm_rule_e r, string what);
    if (!ok) begin
      viol_count = viol_count + 1;
      viol_mask[r] = 1'b1;
      viol_last = r;
    end
    `TPU_ASSERT_I(HbmRule_A, ok,
        ("HBM rule %s violated: ch%0d bus cycle %0d: %s", rule_name(r), c, now, what))
  endtask

  // At least `need` cycles between an earlier event at `t0` and now.
  function automatic bit gap_ok(longint t0, hbm_cyc_t need);
    return (now - t0) >= longint'(need);
  endfunction

  function automatic string cmd_desc(hbm_cmd_t k);
    return $sformatf("%s bg%0d ba%0d row %0d col %0d", k.cmd.name(), k.bg, k.ba, k.row, k.col);
  endfunction

  task automatic do_act(int unsigned c, hbm_cmd_t k);
    hbm_bank_t b;
    b = {k.bg, k.ba};
    `HBM_CHECK(!bank_open[c][b], c, RuleActOpen, cmd_desc(k));
    `HBM_CHECK(32'(k.row) < RowsPerBank, c, RuleRowRange, cmd_desc(k));
    `HBM_CHECK(gap_ok(t_act[c][b], timing_i.rc), c, RuleTRC,
          $sformatf("%s %0d cycles after ACT of the bank", cmd_desc(k), now - t_act[c][b]));
    `HBM_CHECK(gap_ok(t_pre[c][b], timing_i.rp), c, RuleTRP,
          $sformatf("%s %0d cycles after PRE of the bank", cmd_desc(k), now - t_pre[c][b]));
    `HBM_CHECK(gap_ok(t_ref[c], timing_i.rfc), c, RuleTRFC,
          $sformatf("%s %0d cycles after REF", cmd_desc(k), now - t_ref[c]));
    for (int unsigned g = 0; g < HBM_BANK_GROUPS; g++) begin
      if (g == 32'(k.bg)) begin
        `HBM_CHECK(gap_ok(t_act_bg[c][g], timing_i.rrd_l), c, RuleTRRDL,
              $sformatf("%s %0d cycles after an ACT in the same bank group", cmd_desc(k),
                        now - t_act_bg[c][g]));
      end else begin
        `HBM_CHECK(gap_ok(t_act_bg[c][g], timing_i.rrd_s), c, RuleTRRDS,
              $sformatf("%s %0d cycles after an ACT in bank group %0d", cmd_desc(k),
                        now - t_act_bg[c][g], g));
      end
    end
    `HBM_CHECK(gap_ok(act_hist[c][act_ptr[c]], timing_i.faw), c, RuleTFAW,
          $sformatf("%s is the fifth ACT within %0d cycles", cmd_desc(k),
                    now - act_hist[c][act_ptr[c]]));
    bank_open[c][b] = 1'b1;
    bank_row[c][b] = 32'(k.row);
    t_act[c][b] = now;
    t_act_bg[c][k.bg] = now;
    act_hist[c][act_ptr[c]] = now;
    act_ptr[c] = (act_ptr[c] + 1) % 4;
  endtask

  task automatic do_pre(int unsigned c, hbm_cmd_t k);
    hbm_bank_t b;
    b = {k.bg, k.ba};
    if (bank_open[c][b]) begin  // PRE of a closed bank is a no-op
      `HBM_CHECK(gap_ok(t_act[c][b], timing_i.ras), c, RuleTRAS,
            $sformatf("%s %0d cycles after ACT", cmd_desc(k), now - t_act[c][b]));
      `HBM_CHECK(gap_ok(t_rd[c][b], timing_i.rtp), c, RuleTRTP,
            $sformatf("%s %0d cycles after RD", cmd_desc(k), now - t_rd[c][b]));
      `HBM_CHECK(gap_ok(t_wr[c][b], hbm_wr_to_pre(timing_i.cwl, timing_i.wr)), c, RuleTWR,
            $sformatf("%s %0d cycles after WR (needs CWL + BL/2 + tWR)", cmd_desc(k),
                      now - t_wr[c][b]));
      bank_open[c][b] = 1'b0;
      t_pre[c][b] = now;
      t_pre_any[c] = now;
    end
  endtask

  task automatic do_prea(int unsigned c);
    for (int unsigned b = 0; b < HBM_BANKS; b++) begin
      hbm_cmd_t k;
      k = '{cmd: HbmPrea, bg: hbm_bg_t'(b >> HBM_BA_W), ba: hbm_ba_t'(b), row: '0, col: '0};
      do_pre(c, k);
    end
  endtask

  task automatic do_col(int unsigned c, hbm_cmd_t k, bit is_wr);
    hbm_bank_t b;
    longint lat;
    hbm_data_t rd_d;
    hbm_ecc_t rd_e;
    b = {k.bg, k.ba};
    `HBM_CHECK(bank_open[c][b], c, is_wr ? RuleWrClosed : RuleRdClosed, cmd_desc(k));
    `HBM_CHECK(gap_ok(t_act[c][b], timing_i.rcd), c, RuleTRCD,
          $sformatf("%s %0d cycles after ACT", cmd_desc(k), now - t_act[c][b]));
    for (int unsigned g = 0; g < HBM_BANK_GROUPS; g++) begin
      if (is_wr) begin
        `HBM_CHECK(gap_ok(t_wr_bg[c][g], (g == 32'(k.bg)) ? timing_i.ccd_l : timing_i.ccd_s), c,
              (g == 32'(k.bg)) ? RuleTCCDL : RuleTCCDS,
              $sformatf("%s %0d cycles after a WR in bank group %0d", cmd_desc(k),
                        now - t_wr_bg[c][g], g));
      end else begin
        `HBM_CHECK(gap_ok(t_rd_bg[c][g], (g == 32'(k.bg)) ? timing_i.ccd_l : timing_i.ccd_s), c,
              (g == 32'(k.bg)) ? RuleTCCDL : RuleTCCDS,
              $sformatf("%s %0d cycles after a RD in bank group %0d", cmd_desc(k),
                        now - t_rd_bg[c][g], g));
        `HBM_CHECK(gap_ok(t_wr_bg[c][g], hbm_wr_to_rd(timing_i.cwl, (g == 32'(k.bg)) ?
                                                 timing_i.wtr_l : timing_i.wtr_s)), c,
              (g == 32'(k.bg)) ? RuleTWTRL : RuleTWTRS,
              $sformatf("%s %0d cycles after a WR in bank group %0d (needs CWL + BL/2 + tWTR)",
                        cmd_desc(k), now - t_wr_bg[c][g], g));
      end
    end
    if (!is_wr) begin  // the burst read (with its faults) once, for both bus cycles
      int unsigned key;
      key = key_of(c, 32'(b), bank_row[c][b], 32'(k.col));
      load(key, rd_d, rd_e);
      inject(key, rd_d, rd_e);
    end
    if (is_wr) begin
      `HBM_CHECK(gap_ok(t_rd_any[c], hbm_rd_to_wr(timing_i.cl, timing_i.cwl)), c, RuleTRTW,
            $sformatf("%s %0d cycles after a RD (needs CL + BL/2 + 2 - CWL)", cmd_desc(k),
                      now - t_rd_any[c]));
      lat = longint'(timing_i.cwl);
    end else begin
      lat = longint'(timing_i.cl);
    end
    for (int unsigned i = 0; i < HBM_BURST_CYCLES; i++) begin
      slot_t s;
      s = slot_of(now + lat + longint'(i));
      `HBM_CHECK(bus_use[c][s] == BusFree, c, is_wr ? RuleCWL : RuleCL,
            $sformatf("%s: its data cycle %0d collides with another burst on the bus",
                      cmd_desc(k), now + lat + longint'(i)));
      if (is_wr) begin
        bus_use[c][s] = BusWrite;
        wr_key[c][s] = key_of(c, 32'(b), bank_row[c][b], 32'(k.col));
        wr_hi[c][s] = (i != 0);
      end else begin
        bus_use[c][s] = BusRead;
        rd_slot[c][s] = rd_d[i*HBM_BUS_BITS+:HBM_BUS_BITS];
        rdc_slot[c][s] = rd_e[i*HBM_BUS_WORDS*HBM_ECC_BITS+:HBM_BUS_WORDS*HBM_ECC_BITS];
      end
    end
    if (is_wr) begin
      t_wr[c][b] = now;
      t_wr_bg[c][k.bg] = now;
    end else begin
      t_rd[c][b] = now;
      t_rd_bg[c][k.bg] = now;
      t_rd_any[c] = now;
    end
  endtask

  task automatic do_ref(int unsigned c, hbm_cmd_t k);
    int unsigned n_open;
    n_open = 0;
    for (int unsigned b = 0; b < HBM_BANKS; b++) n_open += 32'(bank_open[c][b]);
    `HBM_CHECK(n_open == 0, c, RuleRefOpen, $sformatf("REF with %0d banks open", n_open));
    `HBM_CHECK(gap_ok(t_pre_any[c], timing_i.rp), c, RuleTRP,
          $sformatf("%s %0d cycles after a PRE", cmd_desc(k), now - t_pre_any[c]));
    `HBM_CHECK(gap_ok(t_ref[c], timing_i.rfc), c, RuleTRFC,
          $sformatf("%s %0d cycles after the previous REF", cmd_desc(k), now - t_ref[c]));
    t_ref[c] = now;
    ref_count[c] = ref_count[c] + 1;
  endtask

  // xorshift64* (Vigna): the next 64 random bits.
  task automatic fi_next(output logic [63:0] r);
    logic [63:0] x;
    x = fi_state;
    x = x ^ (x >> 12);
    x = x ^ (x << 25);
    x = x ^ (x >> 27);
    fi_state = x;
    r = x * 64'h2545F4914F6CDD1D;
  endtask

  // Faults on the way out: the armed one-time flips of the block's words, then the random ones.
  // The data of a burst is drawn once (at its first bus cycle), so both halves agree.
  task automatic inject(int unsigned key, inout hbm_data_t d, inout hbm_ecc_t e);
    for (int unsigned w = 0; w < HBM_BURST_WORDS; w++) begin
      logic [71:0] m;
      longint unsigned pk;
      m = '0;
      pk = (longint'(key) << 3) | longint'(w);
      if (fi_pend.exists(pk) != 0) begin
        m = fi_pend[pk];
        fi_pend.delete(pk);
      end
      if (fi_sbe_thr_i != '0 || fi_dbe_thr_i != '0) begin
        logic [63:0] r;
        logic [6:0] b1, b2;
        fi_next(r);
        b1 = 7'(32'(r[63:32]) % 72);  // the bit, and a second one != b1
        b2 = 7'((32'(b1) + 1 + (32'(r[63:32]) / 72) % 71) % 72);
        if (r[31:0] < fi_dbe_thr_i) begin
          m[b1] = ~m[b1];
          m[b2] = ~m[b2];
        end else if (33'(r[31:0]) < 33'(fi_dbe_thr_i) + 33'(fi_sbe_thr_i)) begin
          m[b1] = ~m[b1];
        end
      end
      if ($countones(m) == 1) fi_sbe = fi_sbe + 1;
      if ($countones(m) >= 2) fi_dbe = fi_dbe + 1;
      d[w*64+:64] = d[w*64+:64] ^ m[63:0];
      e[w*8+:8] = e[w*8+:8] ^ m[71:64];
    end
  endtask

  // Write data of bus cycle `now`, expected from an earlier WR.
  task automatic do_wdata(int unsigned c);
    slot_t s;
    s = slot_of(now);
    if (bus_use[c][s] == BusWrite) begin
      `HBM_CHECK(wvalid_i[c], c, RuleCWL,
            $sformatf("no write data in cycle %0d, CWL after its WR", now));
      if (wvalid_i[c]) begin
        hbm_data_t d;
        hbm_ecc_t e;
        bit found_unused;
        int unsigned at;
        find(wr_key[c][s], 1'b1, found_unused, at);  // one find for the read and the write
        d = blk_data[at];
        e = blk_ecc[at];
        d[32'(wr_hi[c][s])*HBM_BUS_BITS+:HBM_BUS_BITS] = wdata_i[c];
        e[32'(wr_hi[c][s])*HBM_BUS_WORDS*HBM_ECC_BITS+:HBM_BUS_WORDS*HBM_ECC_BITS] = wcheck_i[c];
        blk_data[at] = d;
        blk_ecc[at] = e;
        `HBM_CHECK(wcheck_i[c] == hbm_ecc_enc_bus(wdata_i[c]), c, RuleWrEcc,
              $sformatf("write data in cycle %0d with check bits %h, not %h", now, wcheck_i[c],
                        hbm_ecc_enc_bus(wdata_i[c])));
      end
    end else begin
      `HBM_CHECK(!wvalid_i[c], c, RuleBL,
            $sformatf("write data in cycle %0d is not part of a BL4 write burst", now));
    end
  endtask

  // Backdoor: its own strobe, never together with a clock edge (the harness strobes it between
  // cycles), so it is ordered with the clocked process by the harness, not by the simulator.
  hbm_data_t bd_rdata_q;
  hbm_word_mask_t bd_ue_q;
  logic bd_unused_q;  // the syndromes and corrected flags of the backdoor read: not shown
  assign bd_rdata_o = bd_rdata_q;
  assign bd_ue_o = bd_ue_q;
  always_ff @(posedge bd_stb_i) begin
    int unsigned key;
    hbm_data_t d;
    hbm_ecc_t e;
    key = key_of(32'(bd_loc_i.ch), 32'({bd_loc_i.bg, bd_loc_i.ba}), 32'(bd_loc_i.row),
                 32'(bd_loc_i.col));
    if (bd_we_i) begin
      for (int unsigned w = 0; w < HBM_BURST_WORDS; w++)
        e[w*8+:8] = hbm_secded_enc(bd_wdata_i[w*64+:64]);
      store(key, bd_wdata_i, e);
    end
    load(key, d, e);
    for (int unsigned w = 0; w < HBM_BURST_WORDS; w++) begin
      hbm_secded_dec_t dw;
      dw = hbm_secded_dec(d[w*64+:64], e[w*8+:8]);
      bd_rdata_q[w*64+:64] = dw.data;
      bd_ue_q[w] = dw.ue;
      bd_unused_q = ^{dw.syndrome, dw.ce};
    end
  end

  // One-time flips, armed between cycles like the backdoor.
  always_ff @(posedge fi_stb_i) begin
    longint unsigned pk;
    pk = (longint'(key_of(32'(fi_loc_i.ch), 32'({fi_loc_i.bg, fi_loc_i.ba}), 32'(fi_loc_i.row),
                          32'(fi_loc_i.col))) << 3) | longint'(fi_word_i);
    fi_pend[pk] = ((fi_pend.exists(pk) != 0) ? fi_pend[pk] : '0) ^ fi_mask_i;
  end

  // The device is behavioural: blocking assignments model its internal state in program order
  // (waived in rtl/lint.vlt for rtl/sim/); its outputs are non-blocking like any flop.
  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      now = 0;
      viol_count = 0;
      viol_mask = '0;
      viol_last = RuleNone;
      row_at.delete();
      blk_data.delete();
      blk_ecc.delete();
      for (int unsigned i = 0; i < RowCache; i++) rc_valid[i] = 1'b0;
      fi_pend.delete();
      fi_state = (fi_seed_i != '0) ? fi_seed_i : 64'h9E3779B97F4A7C15;
      fi_sbe = 0;
      fi_dbe = 0;
      for (int unsigned c = 0; c < NumCh; c++) begin
        for (int unsigned b = 0; b < HBM_BANKS; b++) begin
          bank_open[c][b] = 1'b0;
          bank_row[c][b] = 0;
          t_act[c][b] = Never;
          t_pre[c][b] = Never;
          t_rd[c][b] = Never;
          t_wr[c][b] = Never;
        end
        for (int unsigned g = 0; g < HBM_BANK_GROUPS; g++) begin
          t_act_bg[c][g] = Never;
          t_rd_bg[c][g] = Never;
          t_wr_bg[c][g] = Never;
        end
        for (int unsigned i = 0; i < 4; i++) act_hist[c][i] = Never;
        for (int unsigned s = 0; s < Ring; s++) begin
          bus_use[c][s] = BusFree;
          rd_slot[c][s] = '0;
          rdc_slot[c][s] = '0;
          wr_key[c][s] = 0;
          wr_hi[c][s] = 1'b0;
        end
        act_ptr[c] = 0;
        t_rd_any[c] = Never;
        t_pre_any[c] = Never;
        t_ref[c] = Never;
        ref_count[c] = 0;
        ref_due_k[c] = 1;
        ref_due[c] = longint'(timing_i.refi);
      end
      rvalid_o <= '0;
      rdata_o <= '0;
      rcheck_o <= '0;
    end else begin
      for (int unsigned c = 0; c < NumCh; c++) begin
        unique case (cmd_i[c].cmd)
          HbmAct: do_act(c, cmd_i[c]);
          HbmPre: do_pre(c, cmd_i[c]);
          HbmRd:  do_col(c, cmd_i[c], 1'b0);
          HbmWr:  do_col(c, cmd_i[c], 1'b1);
          HbmRef: do_ref(c, cmd_i[c]);
          HbmPrea: do_prea(c);
          default: ;
        endcase
        do_wdata(c);
        // Refresh deadline: REF number k must have been seen by the end of cycle k*tREFI - 1.
        if (now + 1 == ref_due[c]) begin
          `HBM_CHECK(ref_count[c] >= ref_due_k[c], c, RuleTREFI,
                $sformatf("refresh overdue: %0d REFs by cycle %0d, %0d due (tREFI = %0d)",
                          ref_count[c], now, ref_due_k[c], timing_i.refi));
          ref_due_k[c] = ref_due_k[c] + 1;
          ref_due[c] = ref_due[c] + longint'(timing_i.refi);
        end
        // Retire this cycle's slot and drive the next cycle's read data.
        bus_use[c][slot_of(now)] = BusFree;
        rvalid_o[c] <= (bus_use[c][slot_of(now + 1)] == BusRead);
        rdata_o[c] <= (bus_use[c][slot_of(now + 1)] == BusRead) ? rd_slot[c][slot_of(now + 1)] : '0;
        rcheck_o[c] <= (bus_use[c][slot_of(now + 1)] == BusRead) ?
                       rdc_slot[c][slot_of(now + 1)] : '0;
      end
      now = now + 1;
    end
  end

`undef HBM_CHECK
endmodule
