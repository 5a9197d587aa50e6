// MxuDut: one verilated MXU (any variant) behind a variant-independent interface, so the runner,
// the tests, the benchmark and the CLI drive every array size through the same code.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "tpu/bf16.h"

namespace tpu {

// Raised when the RTL reports an error (a failed SVA assertion, $error, $fatal).
class RtlError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class MxuDut {
 public:
  virtual ~MxuDut() = default;

  virtual const std::string& variant() const = 0;
  virtual unsigned rows() const = 0;
  virtual unsigned cols() const = 0;
  virtual unsigned w_banks() const = 0;  // weight tiles the array holds (loaded ahead)
  virtual unsigned w_rows() const = 0;   // weight rows per beat of the weight port

  // Inputs for the current cycle. Pointers are read immediately (rows() or cols() elements;
  // weights: w_rows() rows of cols(), row-major).
  virtual void set_weights(bool valid, const bf16_t* rows) = 0;
  virtual void set_activations(bool valid, const bf16_t* a, const uint32_t* acc_bits, bool acc,
                               bool last) = 0;
  virtual void set_out_ready(bool ready) = 0;

  // Settles combinational logic after inputs change; outputs below then reflect this cycle.
  virtual void eval() = 0;
  virtual bool w_ready() const = 0;
  virtual bool a_ready() const = 0;
  virtual bool out_valid() const = 0;
  virtual bool out_last() const = 0;
  virtual void out_data(uint32_t* bits) const = 0;  // cols() f32 bit patterns
  virtual bool idle() const = 0;

  // One clock cycle (rising then falling edge). Throws RtlError if an assertion failed.
  virtual void tick() = 0;
  // Holds reset for `cycles` cycles with every valid low, then releases it.
  virtual void reset(unsigned cycles = 2) = 0;
  virtual uint64_t cycle() const = 0;

  // Starts an FST dump of every signal, cycle n from now at n x the period of a `clock_ghz`
  // clock (tb/common/wave_clock.h); the file is closed when the DUT is destroyed.
  virtual void open_waves(const std::string& path, double clock_ghz) = 0;
};

// Names of the variants compiled into this build, e.g. {"4x4", "8x8", "16x16"}.
std::vector<std::string> built_mxu_variants();

// Makes a DUT of the named variant. Throws std::invalid_argument naming the variant and how to
// build it when it is unknown or was not built.
std::unique_ptr<MxuDut> make_mxu(const std::string& variant);

}  // namespace tpu
