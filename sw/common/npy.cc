#include "npy.h"

#include "output.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>

#include <sys/stat.h>

#include "tpu/bf16.h"

// Element bytes are copied as-is, so the host must store them the way the file does.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "npy.cc assumes a little-endian host");

namespace tpu {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
constexpr size_t kAlign = 64;  // numpy pads the preamble + header to a multiple of this

[[noreturn]] void fail(const std::string& path, const std::string& rule) {
  throw NpyError(path + ": " + rule);
}

std::string shape_str(const std::vector<size_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  return s + ")";
}

// Product of the dimensions, or an error if it does not fit in size_t along with itemsize.
size_t checked_elements(const std::string& path, const std::vector<size_t>& shape,
                        size_t itemsize) {
  size_t n = 1;
  for (size_t d : shape) {
    if (d != 0 && n > std::numeric_limits<size_t>::max() / itemsize / d) {
      fail(path, "shape " + shape_str(shape) + " is too large");
    }
    n *= d;
  }
  return n;
}

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

std::vector<uint8_t> read_file(const std::string& path) {
  File f(std::fopen(path.c_str(), "rb"));
  if (!f) fail(path, std::string("cannot open for reading (") + std::strerror(errno) + ")");
  // The whole file is read, so memory is bounded by its size, never by what a header claims;
  // a device such as /dev/zero has no end and is refused.
  struct stat st {};
  if (::fstat(::fileno(f.get()), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode))
    fail(path, "not a regular file");
  std::vector<uint8_t> bytes;
  if (S_ISREG(st.st_mode)) bytes.reserve(static_cast<size_t>(st.st_size));
  uint8_t buf[1 << 16];
  size_t got;
  while ((got = std::fread(buf, 1, sizeof buf, f.get())) > 0)
    bytes.insert(bytes.end(), buf, buf + got);
  if (std::ferror(f.get())) fail(path, "read error");
  return bytes;
}

// The header is a Python dict literal, e.g.
//   {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
// This parses exactly the subset numpy writes: string keys, and string, bool or int-tuple values.
class HeaderParser {
 public:
  HeaderParser(const std::string& path, const std::string& text) : path_(path), text_(text) {}

  void parse(std::string* descr, bool* fortran, std::vector<size_t>* shape) {
    bool have_descr = false, have_fortran = false, have_shape = false;
    expect('{');
    while (true) {
      skip_space();
      if (peek() == '}') break;
      const std::string key = parse_string();
      expect(':');
      if (key == "descr") {
        skip_space();
        if (peek() != '\'' && peek() != '"') {
          bad("'descr' must be a string (structured dtypes are not supported)");
        }
        *descr = parse_string();
        have_descr = true;
      } else if (key == "fortran_order") {
        *fortran = parse_bool();
        have_fortran = true;
      } else if (key == "shape") {
        *shape = parse_shape();
        have_shape = true;
      } else {
        bad("unexpected key '" + key + "' (expected 'descr', 'fortran_order', 'shape')");
      }
      skip_space();
      if (peek() == ',') {
        ++pos_;
      } else if (peek() != '}') {
        bad("expected ',' or '}'");
      }
    }
    ++pos_;
    skip_space();
    if (pos_ != text_.size()) bad("unexpected text after '}'");
    if (!have_descr) fail(path_, "header has no 'descr' key");
    if (!have_fortran) fail(path_, "header has no 'fortran_order' key");
    if (!have_shape) fail(path_, "header has no 'shape' key");
  }

 private:
  [[noreturn]] void bad(const std::string& what) {
    std::string shown = text_;
    while (!shown.empty() && (shown.back() == ' ' || shown.back() == '\n')) shown.pop_back();
    fail(path_, "malformed header: " + what + " at offset " + std::to_string(pos_) + " in \"" +
                    shown + "\"");
  }
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }
  void expect(char c) {
    skip_space();
    if (peek() != c) bad(std::string("expected '") + c + "'");
    ++pos_;
  }
  std::string parse_string() {
    skip_space();
    const char q = peek();
    if (q != '\'' && q != '"') bad("expected a quoted string");
    const size_t end = text_.find(q, pos_ + 1);
    if (end == std::string::npos) bad("unterminated string");
    std::string s = text_.substr(pos_ + 1, end - pos_ - 1);
    pos_ = end + 1;
    return s;
  }
  bool parse_bool() {
    skip_space();
    if (text_.compare(pos_, 4, "True") == 0) {
      pos_ += 4;
      return true;
    }
    if (text_.compare(pos_, 5, "False") == 0) {
      pos_ += 5;
      return false;
    }
    bad("expected True or False");
  }
  std::vector<size_t> parse_shape() {
    std::vector<size_t> shape;
    expect('(');
    while (true) {
      skip_space();
      if (peek() == ')') break;
      if (peek() < '0' || peek() > '9') bad("expected a non-negative integer dimension");
      size_t d = 0;
      while (peek() >= '0' && peek() <= '9') {
        const size_t digit = static_cast<size_t>(peek() - '0');
        if (d > (std::numeric_limits<size_t>::max() - digit) / 10) bad("dimension too large");
        d = d * 10 + digit;
        ++pos_;
      }
      if (peek() == 'L') ++pos_;  // Python 2 long literal, as old numpy wrote it
      shape.push_back(d);
      skip_space();
      if (peek() == ',') {
        ++pos_;
      } else if (peek() != ')') {
        bad("expected ',' or ')' in shape");
      }
    }
    ++pos_;
    return shape;
  }

  const std::string& path_;
  const std::string& text_;
  size_t pos_ = 0;
};

size_t itemsize_of(const std::string& path, const std::string& dtype, bool ints) {
  if (ints && dtype == "<i4") return 4;
  if (ints && dtype == "<i8") return 8;
  if (!ints && dtype == "<u2") return 2;
  if (!ints && dtype == "<f4") return 4;
  if (!dtype.empty() && dtype[0] == '>') {
    fail(path, "dtype '" + dtype + "' is big-endian, which is not supported (convert with " +
                   "arr.astype('<" + dtype.substr(1) + "'))");
  }
  if (ints)
    fail(path, "dtype '" + dtype + "' is not supported (expected int32 '<i4' or int64 '<i8')");
  fail(path, "dtype '" + dtype +
                 "' is not supported (expected uint16 '<u2' holding bf16 bits or float32 '<f4')");
}

uint32_t read_le(const std::vector<uint8_t>& b, size_t at, size_t n) {
  uint32_t v = 0;
  for (size_t i = 0; i < n; ++i) v |= static_cast<uint32_t>(b[at + i]) << (8 * i);
  return v;
}

void write_npy(const std::string& path, const char* dtype, const void* data, size_t count,
               size_t itemsize, const std::vector<size_t>& shape) {
  const size_t need = checked_elements(path, shape, itemsize);
  if (count != need) {
    fail(path, "data has " + std::to_string(count) + " elements but shape " + shape_str(shape) +
                   " needs " + std::to_string(need));
  }
  if (files_muted()) return;  // not rank 0 of a pod across processes
  std::string header = std::string("{'descr': '") + dtype +
                       "', 'fortran_order': False, 'shape': " + shape_str(shape) + ", }";
  // Pad with spaces so magic(6) + version(2) + length(2) + header + '\n' is 64-byte aligned.
  const size_t unpadded = kMagicLen + 2 + 2 + header.size() + 1;
  header.append((kAlign - unpadded % kAlign) % kAlign, ' ');
  header += '\n';
  if (header.size() > 0xFFFF) fail(path, "header too long for format 1.0");

  std::string pre(kMagic, kMagicLen);
  pre += '\x01';
  pre += '\x00';
  pre += static_cast<char>(header.size() & 0xFF);
  pre += static_cast<char>(header.size() >> 8);

  File f(std::fopen(path.c_str(), "wb"));
  if (!f) fail(path, std::string("cannot open for writing (") + std::strerror(errno) + ")");
  const size_t bytes = count * itemsize;
  bool ok = std::fwrite(pre.data(), 1, pre.size(), f.get()) == pre.size() &&
            std::fwrite(header.data(), 1, header.size(), f.get()) == header.size() &&
            (bytes == 0 || std::fwrite(data, 1, bytes, f.get()) == bytes);
  ok = (std::fclose(f.release()) == 0) && ok;
  if (!ok) fail(path, std::string("write failed (") + std::strerror(errno) + ")");
}

NpyArray read_matrix(const std::string& path, size_t* rows, size_t* cols) {
  NpyArray a = read_npy(path);
  if (a.shape.size() != 2) {
    fail(path, "must be rank 2 (rows x cols), got rank " + std::to_string(a.shape.size()) +
                   " with shape " + shape_str(a.shape));
  }
  if (rows) *rows = a.shape[0];
  if (cols) *cols = a.shape[1];
  return a;
}

}  // namespace

size_t NpyArray::elements() const {
  size_t n = 1;
  for (size_t d : shape) n *= d;
  return n;
}

std::vector<float> NpyArray::as_f32() const {
  if (dtype != "<f4") throw NpyError("as_f32: dtype is '" + dtype + "', not '<f4'");
  std::vector<float> v(data.size() / 4);
  if (!v.empty()) std::memcpy(v.data(), data.data(), v.size() * 4);
  return v;
}

std::vector<uint16_t> NpyArray::as_u16() const {
  if (dtype != "<u2") throw NpyError("as_u16: dtype is '" + dtype + "', not '<u2'");
  std::vector<uint16_t> v(data.size() / 2);
  if (!v.empty()) std::memcpy(v.data(), data.data(), v.size() * 2);
  return v;
}

NpyArray read_npy(const std::string& path, bool ints) {
  const std::vector<uint8_t> b = read_file(path);
  if (b.size() < kMagicLen + 2 || std::memcmp(b.data(), kMagic, kMagicLen) != 0) {
    fail(path, "not an .npy file (bad magic)");
  }
  const int major = b[6], minor = b[7];
  size_t len_bytes;
  if (major == 1 && minor == 0) {
    len_bytes = 2;
  } else if ((major == 2 || major == 3) && minor == 0) {
    len_bytes = 4;
  } else {
    fail(path, ".npy format version " + std::to_string(major) + "." + std::to_string(minor) +
                   " is not supported (expected 1.0, 2.0 or 3.0)");
  }
  const size_t preamble = kMagicLen + 2 + len_bytes;
  if (b.size() < preamble) fail(path, "truncated: file ends inside the header length field");
  const size_t header_len = read_le(b, kMagicLen + 2, len_bytes);
  if (b.size() - preamble < header_len) {
    fail(path, "truncated: header length says " + std::to_string(header_len) +
                   " bytes, file holds " + std::to_string(b.size() - preamble));
  }
  // Version 3.0 headers are UTF-8 rather than latin-1; the keys and values we accept are ASCII,
  // so the same parser serves all three versions.
  const std::string header(reinterpret_cast<const char*>(b.data()) + preamble, header_len);

  NpyArray a;
  bool fortran = false;
  HeaderParser(path, header).parse(&a.dtype, &fortran, &a.shape);
  const size_t itemsize = itemsize_of(path, a.dtype, ints);
  if (fortran) fail(path, "fortran_order arrays are not supported (save a C-order array)");

  const size_t n = checked_elements(path, a.shape, itemsize);
  const size_t have = b.size() - preamble - header_len;
  if (have < n * itemsize) {
    fail(path, "truncated: header says " + std::to_string(n) + " elements, file holds " +
                   std::to_string(have / itemsize) + " (" + std::to_string(have) + " of " +
                   std::to_string(n * itemsize) + " data bytes)");
  }
  if (have > n * itemsize) {
    fail(path, "header says " + std::to_string(n) + " elements (" + std::to_string(n * itemsize) +
                   " bytes), but " + std::to_string(have) + " data bytes follow the header");
  }
  a.data.assign(b.begin() + static_cast<std::ptrdiff_t>(preamble + header_len), b.end());
  return a;
}

void write_npy_f32(const std::string& path, const std::vector<float>& data,
                   const std::vector<size_t>& shape) {
  write_npy(path, "<f4", data.data(), data.size(), 4, shape);
}

void write_npy_u16(const std::string& path, const std::vector<uint16_t>& data,
                   const std::vector<size_t>& shape) {
  write_npy(path, "<u2", data.data(), data.size(), 2, shape);
}

void write_npy_i32(const std::string& path, const std::vector<int32_t>& data,
                   const std::vector<size_t>& shape) {
  write_npy(path, "<i4", data.data(), data.size(), 4, shape);
}

std::vector<uint16_t> load_bf16_matrix(const std::string& path, size_t* rows, size_t* cols) {
  const NpyArray a = read_matrix(path, rows, cols);
  if (a.dtype == "<u2") return a.as_u16();
  const std::vector<float> f = a.as_f32();
  std::vector<uint16_t> out(f.size());
  for (size_t i = 0; i < f.size(); ++i) out[i] = f32_to_bf16(f[i]);
  return out;
}

std::vector<float> load_f32_matrix(const std::string& path, size_t* rows, size_t* cols) {
  const NpyArray a = read_matrix(path, rows, cols);
  if (a.dtype == "<f4") return a.as_f32();
  const std::vector<uint16_t> u = a.as_u16();
  std::vector<float> out(u.size());
  for (size_t i = 0; i < u.size(); ++i) out[i] = bf16_to_f32(u[i]);
  return out;
}

}  // namespace tpu
