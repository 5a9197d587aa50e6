// tpu_hbm_pkg: types, constants and helpers of the HBM subsystem (controller and device model).
//
// The modelled device is HBM2 in legacy (128-bit channel) mode: per channel 4 bank groups x 4
// banks, 2 KiB rows, BL4. The 128-bit DQ bus is double data rate, so one tCK carries two beats;
// the model shows the bus as one 256-bit word per cycle and a BL4 burst (64 bytes) takes
// HBM_BURST_CYCLES = 2 cycles. One access of the controller is one such 64-byte burst.
//
// Timing is a run-time input (`hbm_timing_t`, filled from YAML by the C++ side and held constant
// after reset), never a parameter. Channel count and rows per bank (capacity) are parameters of
// the tops. The C++ harness (tb/hbm) mirrors the enums below (rules, statistics, maps) by value.
package tpu_hbm_pkg;

  // ---------------------------------------------------------------------------------------------
  // Geometry fixed by the modelled standard
  // ---------------------------------------------------------------------------------------------
  localparam int unsigned HBM_BANK_GROUPS = 4;
  localparam int unsigned HBM_BANKS_PER_GROUP = 4;
  localparam int unsigned HBM_BANKS = HBM_BANK_GROUPS * HBM_BANKS_PER_GROUP;
  localparam int unsigned HBM_BG_W = 2;
  localparam int unsigned HBM_BA_W = 2;
  localparam int unsigned HBM_BANK_W = HBM_BG_W + HBM_BA_W;
  localparam int unsigned HBM_DQ_BITS = 128;  // channel data width (one beat)
  localparam int unsigned HBM_BL = 4;  // burst length in beats
  localparam int unsigned HBM_BURST_CYCLES = HBM_BL / 2;  // DDR: two beats per tCK
  localparam int unsigned HBM_BUS_BITS = 2 * HBM_DQ_BITS;  // data per tCK on one channel
  localparam int unsigned HBM_BURST_BYTES = HBM_BL * HBM_DQ_BITS / 8;  // 64
  localparam int unsigned HBM_OFFSET_W = 6;  // log2(HBM_BURST_BYTES)
  localparam int unsigned HBM_ROW_BYTES = 2048;
  localparam int unsigned HBM_COLS = HBM_ROW_BYTES / HBM_BURST_BYTES;  // 32 bursts per row
  localparam int unsigned HBM_COL_W = 5;
  localparam int unsigned HBM_ROW_W = 14;  // widest row address carried (16 Ki rows per bank)
  localparam int unsigned HBM_CH_W = 4;  // widest channel index carried (16 channels)

  // ---------------------------------------------------------------------------------------------
  // Basic types
  // ---------------------------------------------------------------------------------------------
  typedef logic [31:0] hbm_addr_t;  // host byte address (64-byte aligned for a request)
  typedef logic [7:0] hbm_tag_t;  // request ID, returned with the response
  typedef logic [HBM_BURST_BYTES*8-1:0] hbm_data_t;  // one 64-byte burst
  typedef logic [HBM_BUS_BITS-1:0] hbm_bus_t;  // one tCK of channel data (two beats)
  typedef logic [15:0] hbm_cyc_t;  // a timing value or down-counter, in tCK
  typedef logic [63:0] hbm_ctr_t;  // a statistics counter
  typedef logic [HBM_CH_W-1:0] hbm_ch_t;
  typedef logic [HBM_BG_W-1:0] hbm_bg_t;
  typedef logic [HBM_BA_W-1:0] hbm_ba_t;
  typedef logic [HBM_BANK_W-1:0] hbm_bank_t;  // {bank group, bank}
  typedef logic [HBM_ROW_W-1:0] hbm_row_t;
  typedef logic [HBM_COL_W-1:0] hbm_col_t;  // 64-byte burst index within a row

  // ---------------------------------------------------------------------------------------------
  // ECC: SECDED (72,64), a Hsiao code (after lowRISC/OpenTitan prim_secded_72_64, our own
  // matrix). Every 64-bit word of HBM data carries 8 check bits: the controller encodes on write
  // and checks on read, both combinationally (no cycle added). Check bit j is the parity of the
  // data bits selected by HBM_SECDED_MASK[j]; the column of data bit i (its syndrome) is
  // HBM_SECDED_COL[i]: the 56 weight-3 and 8 weight-5 bytes, every row of the matrix 26 data bits
  // wide. A check bit's column is its one-hot byte. So a single flipped bit (data or check) gives
  // an odd syndrome equal to its column (corrected), two flipped bits an even, non-zero one
  // (detected, uncorrectable). tb/common/secded.h is the C++ golden of the same code.
  // ---------------------------------------------------------------------------------------------
  localparam int unsigned HBM_ECC_BITS = 8;  // check bits per 64-bit word
  localparam int unsigned HBM_BUS_WORDS = HBM_BUS_BITS / 64;  // words per bus cycle (4)
  localparam int unsigned HBM_BURST_WORDS = HBM_BURST_BYTES / 8;  // words per burst (8)
  typedef logic [HBM_BUS_WORDS*HBM_ECC_BITS-1:0] hbm_bus_ecc_t;  // check bits of a bus cycle
  typedef logic [HBM_BURST_WORDS*HBM_ECC_BITS-1:0] hbm_ecc_t;  // check bits of a burst
  typedef logic [HBM_BURST_WORDS-1:0] hbm_word_mask_t;  // one bit per word of a burst

  localparam logic [7:0][63:0] HBM_SECDED_MASK = {
    64'hDAED348D221A4420, 64'hD6DAAA4A91152210, 64'hB6B65926488C9108, 64'hB571C711C4438884,
    64'hAD0FC0F03C207842, 64'h6D003FF003E007C1, 64'h6B00000FFFE0003F, 64'h5B000000001FFFFF
  };
  localparam logic [63:0][7:0] HBM_SECDED_COL = {
    8'hF8, 8'hC7, 8'h3E, 8'hF1, 8'h8F, 8'h7C, 8'hE3, 8'h1F, 8'hE0, 8'hD0, 8'hB0, 8'h70, 8'hC8,
    8'hA8, 8'h68, 8'h98, 8'h58, 8'h38, 8'hC4, 8'hA4, 8'h64, 8'h94, 8'h54, 8'h34, 8'h8C, 8'h4C,
    8'h2C, 8'h1C, 8'hC2, 8'hA2, 8'h62, 8'h92, 8'h52, 8'h32, 8'h8A, 8'h4A, 8'h2A, 8'h1A, 8'h86,
    8'h46, 8'h26, 8'h16, 8'h0E, 8'hC1, 8'hA1, 8'h61, 8'h91, 8'h51, 8'h31, 8'h89, 8'h49, 8'h29,
    8'h19, 8'h85, 8'h45, 8'h25, 8'h15, 8'h0D, 8'h83, 8'h43, 8'h23, 8'h13, 8'h0B, 8'h07
  };

  // The 8 check bits of a data word.
  function automatic logic [7:0] hbm_secded_enc(logic [63:0] d);
    logic [7:0] c;
    for (int unsigned j = 0; j < 8; j++) c[j] = ^(d & HBM_SECDED_MASK[j]);
    return c;
  endfunction

  // A checked word: the data (corrected when `ce`), the syndrome, a corrected single-bit error
  // (`ce`, data or check bit) or an uncorrectable one (`ue`: two bits, or a syndrome that is no
  // column; the data is then returned as read).
  typedef struct packed {
    logic [63:0] data;
    logic [7:0] syndrome;
    logic ce;
    logic ue;
  } hbm_secded_dec_t;

  function automatic hbm_secded_dec_t hbm_secded_dec(logic [63:0] d, logic [7:0] c);
    hbm_secded_dec_t r;
    logic hit;
    r.data = d;
    r.syndrome = c ^ hbm_secded_enc(d);
    hit = 1'b0;
    for (int unsigned i = 0; i < 64; i++) begin
      if (r.syndrome == HBM_SECDED_COL[i]) begin
        r.data[i] = ~d[i];
        hit = 1'b1;
      end
    end
    r.ce = hit || ($countones(r.syndrome) == 1);
    r.ue = (r.syndrome != '0) && !r.ce;
    return r;
  endfunction

  // Check bits of one bus cycle (HBM_BUS_WORDS words).
  function automatic hbm_bus_ecc_t hbm_ecc_enc_bus(hbm_bus_t d);
    hbm_bus_ecc_t c;
    for (int unsigned w = 0; w < HBM_BUS_WORDS; w++) c[w*8+:8] = hbm_secded_enc(d[w*64+:64]);
    return c;
  endfunction

  // ---------------------------------------------------------------------------------------------
  // Timing (run-time input; every value in tCK)
  // ---------------------------------------------------------------------------------------------
  typedef struct packed {
    hbm_cyc_t cl;  // RD to first read data beat
    hbm_cyc_t cwl;  // WR to first write data beat
    hbm_cyc_t rcd;  // ACT to RD/WR, same bank
    hbm_cyc_t rp;  // PRE to ACT same bank; last PRE to REF
    hbm_cyc_t ras;  // ACT to PRE, same bank
    hbm_cyc_t rc;  // ACT to ACT, same bank
    hbm_cyc_t ccd_s;  // RD to RD / WR to WR, different bank group
    hbm_cyc_t ccd_l;  // RD to RD / WR to WR, same bank group
    hbm_cyc_t rrd_s;  // ACT to ACT, different bank group
    hbm_cyc_t rrd_l;  // ACT to ACT, same bank group
    hbm_cyc_t faw;  // window holding at most four ACTs
    hbm_cyc_t wr;  // end of write data to PRE, same bank (write recovery)
    hbm_cyc_t wtr_s;  // end of write data to RD, different bank group
    hbm_cyc_t wtr_l;  // end of write data to RD, same bank group
    hbm_cyc_t rtp;  // RD to PRE, same bank
    hbm_cyc_t rfc;  // REF to ACT or REF
    hbm_cyc_t refi;  // average refresh interval: REF number k is due by cycle k*refi
  } hbm_timing_t;

  // HBM2 at tCK = 1 ns (configs/hbm2_default.yaml holds the same values).
  localparam hbm_timing_t HBM2_DEFAULT_TIMING = '{
    cl: 16'd14, cwl: 16'd4, rcd: 16'd14, rp: 16'd14, ras: 16'd34, rc: 16'd48,
    ccd_s: 16'd2, ccd_l: 16'd4, rrd_s: 16'd4, rrd_l: 16'd6, faw: 16'd30, wr: 16'd16,
    wtr_s: 16'd6, wtr_l: 16'd8, rtp: 16'd5, rfc: 16'd260, refi: 16'd3900
  };

  // The helpers below take the timing fields they read (not the whole struct) so that lint sees
  // every argument used.

  // RD to WR (any bank): the read burst must have left the bus, plus two cycles of turnaround.
  function automatic hbm_cyc_t hbm_rd_to_wr(hbm_cyc_t cl, hbm_cyc_t cwl);
    return cl + hbm_cyc_t'(HBM_BURST_CYCLES) + 16'd2 - cwl;
  endfunction

  // WR to RD: end of the write data, then tWTR (tWTR_L within a bank group, else tWTR_S).
  function automatic hbm_cyc_t hbm_wr_to_rd(hbm_cyc_t cwl, hbm_cyc_t wtr);
    return cwl + hbm_cyc_t'(HBM_BURST_CYCLES) + wtr;
  endfunction

  // WR to PRE, same bank: end of the write data, then tWR.
  function automatic hbm_cyc_t hbm_wr_to_pre(hbm_cyc_t cwl, hbm_cyc_t wr);
    return cwl + hbm_cyc_t'(HBM_BURST_CYCLES) + wr;
  endfunction

  // How long before a refresh deadline the controller stops issuing row and column commands. It
  // bounds the time to close every bank from any state (the longest of tRAS / write recovery /
  // tRTP, then a PREA and tRP) plus the REF itself; the sum of all terms is used as a safe bound.
  function automatic hbm_cyc_t hbm_ref_lead(hbm_cyc_t ras, hbm_cyc_t cwl, hbm_cyc_t wr,
                                            hbm_cyc_t rtp, hbm_cyc_t rp);
    return ras + hbm_wr_to_pre(cwl, wr) + rtp + rp + 16'd4;
  endfunction

  // ---------------------------------------------------------------------------------------------
  // Device command bus (one command per channel per tCK)
  // ---------------------------------------------------------------------------------------------
  typedef enum logic [2:0] {
    HbmNop = 3'd0,
    HbmAct = 3'd1,  // activate (open) `row` in bank {bg, ba}
    HbmPre = 3'd2,  // precharge (close) bank {bg, ba}; a no-op on a closed bank
    HbmRd  = 3'd3,  // read burst at column `col` of the open row
    HbmWr  = 3'd4,  // write burst at column `col`; data follows CWL cycles later
    HbmRef = 3'd5,  // all-bank refresh; every bank must be closed
    HbmPrea = 3'd6  // precharge all banks (each open bank as for PRE)
  } hbm_cmd_e;

  typedef struct packed {
    hbm_cmd_e cmd;
    hbm_bg_t bg;
    hbm_ba_t ba;
    hbm_row_t row;
    hbm_col_t col;
  } hbm_cmd_t;

  localparam hbm_cmd_t HBM_CMD_NOP = '{cmd: HbmNop, default: '0};

  // Timing and protocol rules the device model's checker enforces. The value is the bit of the
  // device's violation mask; tb/hbm/hbm_harness.cc names them in the same order.
  typedef enum logic [4:0] {
    RuleNone     = 5'd0,
    RuleTRCD     = 5'd1,
    RuleTRP      = 5'd2,
    RuleTRAS     = 5'd3,
    RuleTRC      = 5'd4,
    RuleTCCDS    = 5'd5,
    RuleTCCDL    = 5'd6,
    RuleTRRDS    = 5'd7,
    RuleTRRDL    = 5'd8,
    RuleTFAW     = 5'd9,
    RuleTWR      = 5'd10,
    RuleTWTRS    = 5'd11,
    RuleTWTRL    = 5'd12,
    RuleTRTP     = 5'd13,
    RuleTRFC     = 5'd14,
    RuleTREFI    = 5'd15,
    RuleCL       = 5'd16,  // read burst collides with other data on the bus
    RuleCWL      = 5'd17,  // write data missing CWL cycles after WR, or write burst collides
    RuleBL       = 5'd18,  // write data beat outside a BL4 write burst
    RuleTRTW     = 5'd19,  // RD to WR turnaround (CL + BL/2 + 2 - CWL)
    RuleRdClosed = 5'd20,  // RD to a closed bank
    RuleWrClosed = 5'd21,  // WR to a closed bank
    RuleActOpen  = 5'd22,  // ACT to an open bank
    RuleRefOpen  = 5'd23,  // REF while a bank is open
    RuleRowRange = 5'd24,  // row beyond the device's capacity
    RuleWrEcc    = 5'd25   // write data whose check bits do not match it (SECDED)
  } hbm_rule_e;

  // ---------------------------------------------------------------------------------------------
  // Address map (run-time input). Field order from bit 6 upwards, after the byte offset [5:0]:
  // ---------------------------------------------------------------------------------------------
  typedef enum logic [1:0] {
    // default: [channel][bank group][column][bank][row]. Sequential 64-byte blocks go to every
    // channel, then every bank group, then along the open row, and only then to the next bank:
    // a stream keeps the bus busy with tCCD_S and opens one bank per bank group at a time.
    MapChBgCoBa = 2'd0,
    // [channel][bank group][bank][column][row]: every bank of every group before the next column.
    MapChBgBaCo = 2'd1,
    // [channel][column][bank group][bank][row]: a whole 2 KiB row before the next bank group.
    MapChCoBgBa = 2'd2,
    // [column][bank group][bank][row][channel]: one contiguous region per channel.
    MapCoBgBaRoCh = 2'd3
  } hbm_map_e;

  // Where one 64-byte block lives in the device.
  typedef struct packed {
    hbm_ch_t ch;
    hbm_bg_t bg;
    hbm_ba_t ba;
    hbm_row_t row;
    hbm_col_t col;
  } hbm_loc_t;

  // Bits [lsb +: w] of `a` (w may be 0).
  function automatic logic [31:0] hbm_field(logic [31:0] a, int unsigned lsb, int unsigned w);
    return (a >> lsb) & ((32'd1 << w) - 32'd1);
  endfunction

  // Decode a byte address. `ch_w` and `row_w` are the channel and row index widths of the built
  // device (parameters of the tops); bits above the capacity are ignored.
  function automatic hbm_loc_t hbm_decode(hbm_addr_t addr, hbm_map_e addr_map, int unsigned ch_w,
                                          int unsigned row_w);
    hbm_loc_t loc;
    logic [31:0] a;
    int unsigned p_ch, p_bg, p_ba, p_col, p_row;
    a = 32'(addr) >> HBM_OFFSET_W;
    unique case (addr_map)
      MapChBgBaCo: begin
        p_ch = 0;
        p_bg = ch_w;
        p_ba = p_bg + HBM_BG_W;
        p_col = p_ba + HBM_BA_W;
        p_row = p_col + HBM_COL_W;
      end
      MapChCoBgBa: begin
        p_ch = 0;
        p_col = ch_w;
        p_bg = p_col + HBM_COL_W;
        p_ba = p_bg + HBM_BG_W;
        p_row = p_ba + HBM_BA_W;
      end
      MapCoBgBaRoCh: begin
        p_col = 0;
        p_bg = HBM_COL_W;
        p_ba = p_bg + HBM_BG_W;
        p_row = p_ba + HBM_BA_W;
        p_ch = p_row + row_w;
      end
      default: begin  // MapChBgCoBa
        p_ch = 0;
        p_bg = ch_w;
        p_col = p_bg + HBM_BG_W;
        p_ba = p_col + HBM_COL_W;
        p_row = p_ba + HBM_BA_W;
      end
    endcase
    loc.ch = hbm_ch_t'(hbm_field(a, p_ch, ch_w));
    loc.bg = hbm_bg_t'(hbm_field(a, p_bg, HBM_BG_W));
    loc.ba = hbm_ba_t'(hbm_field(a, p_ba, HBM_BA_W));
    loc.col = hbm_col_t'(hbm_field(a, p_col, HBM_COL_W));
    loc.row = hbm_row_t'(hbm_field(a, p_row, row_w));
    return loc;
  endfunction

  // ---------------------------------------------------------------------------------------------
  // Controller configuration (run-time input, held constant after reset)
  // ---------------------------------------------------------------------------------------------
  typedef struct packed {
    hbm_map_e addr_map;  // address map
    hbm_cyc_t starve_cap;  // a request older than this many cycles is served before any other
    logic [7:0] wr_hi;  // write buffer entries that start a write drain
    logic [7:0] wr_lo;  // write buffer entries at which a drain stops
  } hbm_ctrl_cfg_t;

  localparam hbm_ctrl_cfg_t HBM_DEFAULT_CTRL_CFG = '{
    addr_map: MapChBgCoBa, starve_cap: 16'd512, wr_hi: 8'd12, wr_lo: 8'd4
  };

  // ---------------------------------------------------------------------------------------------
  // Host-side request / response (valid/ready streams)
  // ---------------------------------------------------------------------------------------------
  typedef struct packed {
    logic write;  // 1: write `data`, 0: read
    hbm_addr_t addr;  // byte address, 64-byte aligned
    hbm_tag_t tag;  // returned with the response
    hbm_data_t data;  // write data (ignored for reads)
  } hbm_req_t;

  typedef struct packed {
    logic write;  // 1: write acknowledge (data is zero), 0: read data
    hbm_tag_t tag;
    hbm_word_mask_t ue;  // read data: words (bit i: bytes 8i..8i+7) with an uncorrectable error
    hbm_data_t data;
  } hbm_rsp_t;

  // A request after address decode, as a channel sees it.
  typedef struct packed {
    logic write;
    hbm_bg_t bg;
    hbm_ba_t ba;
    hbm_row_t row;
    hbm_col_t col;
    hbm_tag_t tag;
    hbm_data_t data;
  } hbm_chan_req_t;

  // ---------------------------------------------------------------------------------------------
  // Statistics: counters of every channel, read by index (tb/hbm names them in this order)
  // ---------------------------------------------------------------------------------------------
  typedef enum logic [4:0] {
    StatRdReqs      = 5'd0,  // read requests accepted
    StatWrReqs      = 5'd1,  // write requests accepted
    StatRdBytes     = 5'd2,  // bytes read from the device
    StatWrBytes     = 5'd3,  // bytes written to the device
    StatRowHits     = 5'd4,  // column commands to a row already open
    StatRowMisses   = 5'd5,  // column commands that needed an ACT of a closed bank
    StatRowConflict = 5'd6,  // column commands that needed a PRE of another row, then an ACT
    StatActs        = 5'd7,  // ACT commands
    StatPres        = 5'd8,  // PRE commands
    StatRefreshes   = 5'd9,  // REF commands
    StatBusBusy     = 5'd10,  // cycles with data on the channel's data bus
    StatRdForwarded = 5'd11,  // reads answered from the write buffer
    StatWrMerged    = 5'd12,  // writes merged into a buffered write to the same block
    StatLatSum      = 5'd13,  // sum of read latencies (accept to data in the response queue)
    StatLatCount    = 5'd14,  // reads in StatLatSum
    StatLatHist0    = 5'd15,  // latency < 32
    StatLatHist1    = 5'd16,  // 32 .. 47
    StatLatHist2    = 5'd17,  // 48 .. 63
    StatLatHist3    = 5'd18,  // 64 .. 95
    StatLatHist4    = 5'd19,  // 96 .. 127
    StatLatHist5    = 5'd20,  // 128 .. 255
    StatLatHist6    = 5'd21,  // 256 .. 511
    StatLatHist7    = 5'd22,  // >= 512
    StatWrDrains    = 5'd23,  // write drains started by the high watermark
    StatEccCe       = 5'd24,  // words read with a corrected single-bit error (ECC)
    StatEccUe       = 5'd25   // words read with an uncorrectable error (ECC)
  } hbm_stat_e;
  localparam int unsigned HBM_NUM_STATS = 26;

  // Histogram bucket of a read latency (bounds in the enum above).
  function automatic int unsigned hbm_lat_bucket(hbm_cyc_t lat);
    if (lat < 16'd32) return 0;
    if (lat < 16'd48) return 1;
    if (lat < 16'd64) return 2;
    if (lat < 16'd96) return 3;
    if (lat < 16'd128) return 4;
    if (lat < 16'd256) return 5;
    if (lat < 16'd512) return 6;
    return 7;
  endfunction

  // Number of bits needed to index `n` things (at least 1), after common_cells' cc_pkg.
  function automatic int unsigned hbm_idx_width(int unsigned n);
    return (n > 1) ? $clog2(n) : 1;
  endfunction

endpackage
