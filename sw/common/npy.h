// NumPy .npy files: the exchange format for matrices handed to and returned by the driver.
// Reads format versions 1.0, 2.0 and 3.0; writes 1.0. Only the two element types the machine
// speaks are accepted: little-endian uint16 ('<u2', raw bf16 bits) and float32 ('<f4'), C order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace tpu {

// A malformed or unsupported .npy file, or a file that cannot be opened. The message starts with
// the file's path and names the rule that was broken.
class NpyError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The contents of one .npy file: dtype as spelled in the header ("<u2" or "<f4"), the shape
// (empty for a scalar) and the raw little-endian element bytes in C (row-major) order.
struct NpyArray {
  std::string dtype;
  std::vector<size_t> shape;
  std::vector<uint8_t> data;

  size_t elements() const;               // product of shape (1 for a scalar)
  std::vector<float> as_f32() const;     // requires dtype "<f4"
  std::vector<uint16_t> as_u16() const;  // requires dtype "<u2"
};

// ints: an integer array instead (int32 '<i4' or int64 '<i8', e.g. token ids), and only that.
NpyArray read_npy(const std::string& path, bool ints = false);

// Write a C-order, little-endian, format 1.0 file. data.size() must equal the product of shape.
void write_npy_f32(const std::string& path, const std::vector<float>& data,
                   const std::vector<size_t>& shape);
void write_npy_u16(const std::string& path, const std::vector<uint16_t>& data,
                   const std::vector<size_t>& shape);
void write_npy_i32(const std::string& path, const std::vector<int32_t>& data,
                   const std::vector<size_t>& shape);

// A rank-2 matrix as bf16 bits, row-major: uint16 is taken as bf16 bits; float32 is rounded with
// tpu::f32_to_bf16 (RNE, overflow to Inf, NaN to 0x7FC0). rows and cols may be null.
std::vector<uint16_t> load_bf16_matrix(const std::string& path, size_t* rows, size_t* cols);

// A rank-2 matrix as float32, row-major: float32 as stored; uint16 is taken as bf16 bits and
// widened exactly. rows and cols may be null.
std::vector<float> load_f32_matrix(const std::string& path, size_t* rows, size_t* cols);

}  // namespace tpu
