// tpu_assert.svh: the project's one assertion style (after lowRISC's prim_assert.sv). Every
// assertion has a CamelCase name ending in _A and a message; simulation counts each failure
// (tests require none, and prove with forced faults that they fire). Live under --assert.
//   `TPU_ASSERT(Name_A, prop, (fmt, args...))       concurrent, on clk_i, off while rst_ni is low
//   `TPU_ASSERT_I(Name_A, expr, (fmt, args...))     immediate, inside procedural code and functions
//   `TPU_ASSERT_INIT(Name_A, expr, (fmt, args...))  once at time 0: parameters and other constants
// The message is a parenthesized $error argument list.
`ifndef TPU_ASSERT_SVH
`define TPU_ASSERT_SVH

`define TPU_ASSERT(__name, __prop, __msg) \
  __name: assert property (@(posedge clk_i) disable iff (!rst_ni) (__prop)) else $error __msg;

`define TPU_ASSERT_I(__name, __expr, __msg) \
  __name: assert (__expr) else $error __msg;

`define TPU_ASSERT_INIT(__name, __expr, __msg) \
  initial begin : __name \
    assert (__expr) else $fatal(1, "%m: %s", $sformatf __msg); \
  end

`endif  // TPU_ASSERT_SVH
