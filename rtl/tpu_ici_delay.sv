// tpu_ici_delay: a link as a pure delay line: `valid_o`/`data_o` are `valid_i`/`data_i` of
// `lat_i` cycles earlier (1 <= lat_i <= MaxLat, set at run time and held constant after reset).
//
// Used for both directions of an ICI link (flits one way, credits the other), so a link is a
// chain of flops with no handshake: latency lat_i, throughput one item per cycle. A pod model
// does the same with a latency channel between chips.
`include "tpu_assert.svh"

module tpu_ici_delay #(
  parameter type data_t = logic,
  parameter int unsigned MaxLat = 4,
  localparam int unsigned LatW = $clog2(MaxLat + 1),
  localparam int unsigned TapW = $clog2(MaxLat)
) (
  input  logic            clk_i,
  input  logic            rst_ni,
  input  logic [LatW-1:0] lat_i,
  input  logic            valid_i,
  input  data_t           data_i,
  output logic            valid_o,
  output data_t           data_o,
  output logic            busy_o   // an item is on its way (any stage)
);

  logic [MaxLat-1:0] valid_q;
  data_t             data_q[MaxLat];  // MaxLat >= 2

  always_ff @(posedge clk_i or negedge rst_ni) begin
    if (!rst_ni) begin
      valid_q <= '0;
    end else begin
      valid_q <= {valid_q[MaxLat-2:0], valid_i};
    end
  end

  // Data needs no reset: it is only used beside a valid bit.
  always_ff @(posedge clk_i) begin
    data_q[0] <= data_i;
    for (int unsigned i = 1; i < MaxLat; i++) data_q[i] <= data_q[i-1];
  end

  logic [TapW-1:0] tap;
  assign tap = TapW'(lat_i - 1'b1);
  assign valid_o = valid_q[tap];
  assign data_o = data_q[tap];
  always_comb begin
    busy_o = 1'b0;
    for (int unsigned i = 0; i < MaxLat; i++) if (32'(i) < 32'(lat_i)) busy_o |= valid_q[i];
  end

  // ---- Assertions ----
  `TPU_ASSERT(LatRange_A,
                                lat_i >= 1 && 32'(lat_i) <= MaxLat,
      ("tpu_ici_delay: link latency %0d outside 1..%0d", lat_i, MaxLat))

endmodule
