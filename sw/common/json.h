// A small JSON value for writing machine-readable reports: objects keep their keys in insertion
// order, numbers keep their exact integer or double value. Writing only; there is no parser.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace tpu {

class Json {
 public:
  enum class Kind { kNull, kBool, kInt, kUint, kDouble, kString, kArray, kObject };

  Json() = default;  // null
  Json(std::nullptr_t) {}
  Json(bool b) : kind_(Kind::kBool), b_(b) {}
  // Any integer type other than bool: signed ones are held as int64, unsigned ones as uint64.
  template <typename T,
            typename std::enable_if<std::is_integral<T>::value && !std::is_same<T, bool>::value,
                                    int>::type = 0>
  Json(T v) {
    if constexpr (std::is_signed<T>::value) {
      kind_ = Kind::kInt;
      i_ = static_cast<int64_t>(v);
    } else {
      kind_ = Kind::kUint;
      u_ = static_cast<uint64_t>(v);
    }
  }
  Json(double d) : kind_(Kind::kDouble), d_(d) {}
  Json(float f) : kind_(Kind::kDouble), d_(f) {}  // exact widening: 0.1f prints as 0.100000001...
  Json(const char* s) : kind_(Kind::kString), s_(s) {}
  Json(std::string s) : kind_(Kind::kString), s_(std::move(s)) {}

  static Json array() { return Json(Kind::kArray); }
  static Json object() { return Json(Kind::kObject); }

  Kind kind() const { return kind_; }
  // Number of elements (array) or members (object); 0 for anything else.
  size_t size() const;

  // Object member access: inserts a null member (turning a null value into an object) when the
  // key is new. Throws std::logic_error on a value that is neither null nor an object.
  // As with std::vector, a reference returned here is invalidated by the next insertion into the
  // same object.
  Json& operator[](const std::string& key);
  // Sets key to v (replacing in place if present) and returns *this, for chaining.
  Json& set(const std::string& key, Json v);
  // Appends to an array (turning a null value into an array); returns *this, for chaining.
  Json& push_back(Json v);

  // indent <= 0: compact, on one line. indent > 0: one member or element per line, nested levels
  // indented by that many spaces. Doubles print in the shortest form that reads back to the same
  // double (always with a '.' or exponent); NaN and Inf print as null. Strings are expected to be
  // UTF-8; '"', '\\' and control characters are escaped.
  std::string dump(int indent = 2) const;

 private:
  explicit Json(Kind k) : kind_(k) {}
  void write(std::string& out, int indent, int depth) const;

  Kind kind_ = Kind::kNull;
  bool b_ = false;
  int64_t i_ = 0;
  uint64_t u_ = 0;
  double d_ = 0.0;
  std::string s_;
  std::vector<Json> items_;
  std::vector<std::pair<std::string, Json>> members_;
};

// The JSON text of s, quotes included.
std::string json_quote(const std::string& s);

// The shortest decimal text that reads back to d (JSON number syntax), or "null" if d is not
// finite.
std::string json_number(double d);

}  // namespace tpu
