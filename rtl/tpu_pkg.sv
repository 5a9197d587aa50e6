// tpu_pkg: shared types, width helpers and the named chip variants.
//
// A chip variant fixes every compile-time parameter of the RTL (array size, lanes, memory sizes).
// Verilated tops take a numeric `VariantId` (Verilator's -G cannot set an enum) and decode it
// here, so the presets below are the single place where a variant's shape is written down. The
// C++ side mirrors the names in sw/ (variant registry) and CMake builds each named variant.
package tpu_pkg;

  // bfloat16 (1-8-7) and binary32, as raw bits.
  typedef logic [15:0] bf16_t;
  typedef logic [31:0] f32_t;

  localparam f32_t F32_CANON_NAN = 32'h7FC0_0000;
  localparam bf16_t BF16_CANON_NAN = 16'h7FC0;

  // Number of bits needed to index `n` things (at least 1), after common_cells' cc_pkg.
  function automatic int unsigned idx_width(int unsigned n);
    return (n > 1) ? $clog2(n) : 1;
  endfunction

  // Named chip variants. The enum values are the VariantId the tops are built with.
  typedef enum int unsigned {
    VariantMxu4   = 0,  // 4x4 array: fastest to simulate, the default for unit tests
    VariantMxu8   = 1,  // 8x8 array
    VariantMxu16  = 2,  // 16x16 array: the default configuration
    VariantMxu128 = 3   // 128x128 array: the real MXU size (built behind a CMake option)
  } variant_e;

  // Everything a variant fixes at compile time.
  typedef struct packed {
    int unsigned mxu_rows;           // MXU rows: the K extent of one weight tile
    int unsigned mxu_cols;           // MXU columns: the N extent of one weight tile
    int unsigned mxu_wbanks;         // weight banks per MXU cell: tiles loaded ahead (>= 2)
    int unsigned mxu_wrows;          // weight rows loaded per cycle (divides mxu_rows)
    int unsigned vmem_rows;          // vector memory rows (each mxu_cols lanes x 32 bit)
    int unsigned amem_rows;          // accumulator memory rows (each mxu_cols lanes x f32)
    int unsigned hbm_channels;       // HBM channels (power of two)
    int unsigned hbm_rows_per_bank;  // HBM rows per bank (power of two): capacity
  } chip_cfg_t;

  function automatic chip_cfg_t variant_cfg(variant_e v);
    chip_cfg_t cfg;
    unique case (v)
      VariantMxu4: begin
        cfg.mxu_rows = 4;
        cfg.mxu_cols = 4;
        cfg.mxu_wbanks = 4;
        cfg.mxu_wrows = 2;
        cfg.vmem_rows = 4096;
        cfg.amem_rows = 2048;
        cfg.hbm_channels = 2;
        cfg.hbm_rows_per_bank = 256;
      end
      VariantMxu8: begin
        cfg.mxu_rows = 8;
        cfg.mxu_cols = 8;
        cfg.mxu_wbanks = 4;
        cfg.mxu_wrows = 2;
        cfg.vmem_rows = 2048;
        cfg.amem_rows = 1024;
        cfg.hbm_channels = 2;
        cfg.hbm_rows_per_bank = 256;
      end
      VariantMxu16: begin
        cfg.mxu_rows = 16;
        cfg.mxu_cols = 16;
        cfg.mxu_wbanks = 4;
        cfg.mxu_wrows = 2;
        cfg.vmem_rows = 8192;
        cfg.amem_rows = 4096;
        cfg.hbm_channels = 2;
        cfg.hbm_rows_per_bank = 256;
      end
      VariantMxu128: begin
        cfg.mxu_rows = 128;
        cfg.mxu_cols = 128;
        cfg.mxu_wbanks = 4;
        cfg.mxu_wrows = 2;
        cfg.vmem_rows = 4096;
        cfg.amem_rows = 2048;
        cfg.hbm_channels = 2;
        cfg.hbm_rows_per_bank = 256;
      end
      default: begin
        cfg.mxu_rows = 8;
        cfg.mxu_cols = 8;
        cfg.mxu_wbanks = 4;
        cfg.mxu_wrows = 2;
        cfg.vmem_rows = 2048;
        cfg.amem_rows = 1024;
        cfg.hbm_channels = 2;
        cfg.hbm_rows_per_bank = 256;
      end
    endcase
    return cfg;
  endfunction

endpackage
