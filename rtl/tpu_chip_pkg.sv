// tpu_chip_pkg: the chip's command set (docs/isa.md), error codes and statistics indices.
//
// A command is one 128-bit word pushed on the host port. Field meaning depends on the opcode;
// docs/isa.md has the table. The contract itself is generated (tpu_contract_pkg below, and
// tpu_contract.h for C++) from configs/tpu_contract.yaml, so both sides change together.
package tpu_chip_pkg;

  // The command word, the per-opcode structs, error codes, statistics and trace bits are the
  // hardware contract, generated from configs/tpu_contract.yaml (tpu_contract_pkg); this package
  // passes them on, so `import tpu_chip_pkg::*` sees them, and adds the sequencer's own types.
  import tpu_contract_pkg::*;
  export tpu_contract_pkg::*;

  // Memories, for the scoreboard.
  localparam logic MEM_VMEM = 1'b0;
  localparam logic MEM_AMEM = 1'b1;

  // A row range [lo, hi) of one memory, as the scoreboard records it.
  typedef struct packed {
    logic        valid;
    logic        mem;
    logic [16:0] lo;
    logic [16:0] hi;
  } mem_range_t;

  function automatic logic ranges_overlap(mem_range_t a, mem_range_t b);
    return a.valid && b.valid && (a.mem == b.mem) && (a.lo < b.hi) && (b.lo < a.hi);
  endfunction

endpackage
