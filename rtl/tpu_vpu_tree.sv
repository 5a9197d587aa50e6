// tpu_vpu_tree: the fixed pairwise tree that reduces the lanes to one value (sum or maximum).
//
// Level 0 holds the Lanes leaves; level k+1 value i is op(level k value 2i, level k value 2i+1),
// the lower index on the left, until one value remains. Lanes must be a power of two, at least 2.
// Sums use tpu_fma32 (l * 1 + r, one rounding); maxima use tpu_vpu_pkg::f32_maximum.
//
// Combinational (0 cycles): log2(Lanes) levels, Lanes - 1 nodes.
`include "tpu_assert.svh"

module tpu_vpu_tree
  import tpu_pkg::*;
  import tpu_vpu_pkg::*;
#(
  parameter int unsigned Lanes = 8
) (
  input  logic             en_i,      // the root is used this cycle (else don't-care)
  input  logic             max_i,     // 1: maximum, 0: sum
  input  f32_t [Lanes-1:0] leaves_i,
  output f32_t             root_o
);

  localparam int unsigned Levels = $clog2(Lanes);

  if ((Lanes & (Lanes - 1)) != 0 || Lanes < 2) begin : gen_bad_lanes
    $error("tpu_vpu_tree: Lanes must be a power of two, at least 2");
  end

  for (genvar k = 0; k <= Levels; k++) begin : gen_level
    localparam int unsigned N = Lanes >> k;
    f32_t [N-1:0] v;
    if (k == 0) begin : gen_leaves
      assign v = leaves_i;
    end else begin : gen_nodes
      for (genvar i = 0; i < N; i++) begin : gen_node
        f32_t l, r, sum;
        assign l = gen_level[k-1].v[2*i];
        assign r = gen_level[k-1].v[2*i+1];
        tpu_fma32 i_add (
          .en_i(en_i && !max_i),  // the sums idle unless a sum's root is used
          .a_i(l),
          .b_i(F32_ONE),
          .c_i(r),
          .r_o(sum)
        );
        assign v[i] = max_i ? f32_maximum(l, r) : sum;
      end
    end
  end

  assign root_o = gen_level[Levels].v[0];

  // -----------------------------------------------------------------------------------------------
  // Assertions
  // -----------------------------------------------------------------------------------------------
  always_comb begin
    `TPU_ASSERT_I(RootNanCanonical_A, !f32_is_nan(root_o) || (root_o == F32_CANON_NAN),
        ("%m: RootNanCanonical_A failed"))
  end

endmodule
