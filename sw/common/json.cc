#include "json.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace tpu {

size_t Json::size() const {
  if (kind_ == Kind::kArray) return items_.size();
  if (kind_ == Kind::kObject) return members_.size();
  return 0;
}

Json& Json::operator[](const std::string& key) {
  if (kind_ == Kind::kNull) kind_ = Kind::kObject;
  if (kind_ != Kind::kObject) throw std::logic_error("Json: member '" + key + "' of a non-object");
  for (auto& m : members_) {
    if (m.first == key) return m.second;
  }
  members_.emplace_back(key, Json());
  return members_.back().second;
}

Json& Json::set(const std::string& key, Json v) {
  (*this)[key] = std::move(v);
  return *this;
}

Json& Json::push_back(Json v) {
  if (kind_ == Kind::kNull) kind_ = Kind::kArray;
  if (kind_ != Kind::kArray) throw std::logic_error("Json: push_back on a non-array");
  items_.push_back(std::move(v));
  return *this;
}

std::string json_quote(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
          out += buf;
        } else {
          out += c;  // printable ASCII, or a byte of a UTF-8 sequence: passed through
        }
    }
  }
  return out + "\"";
}

std::string json_number(double d) {
  if (!std::isfinite(d)) return "null";
  char buf[64];
  // std::to_chars without a format or precision gives the shortest round-trip representation.
  const auto r = std::to_chars(buf, buf + sizeof buf, d);
  std::string s(buf, r.ptr);
  // Keep doubles recognisable as such (3.0 -> "3.0", as Python's json writes it).
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

std::string Json::dump(int indent) const {
  std::string out;
  write(out, indent, 0);
  return out;
}

void Json::write(std::string& out, int indent, int depth) const {
  const bool pretty = indent > 0;
  auto newline = [&](int level) {
    if (!pretty) return;
    out += '\n';
    out.append(static_cast<size_t>(indent) * static_cast<size_t>(level), ' ');
  };
  switch (kind_) {
    case Kind::kNull:
      out += "null";
      break;
    case Kind::kBool:
      out += b_ ? "true" : "false";
      break;
    case Kind::kInt:
      out += std::to_string(i_);
      break;
    case Kind::kUint:
      out += std::to_string(u_);
      break;
    case Kind::kDouble:
      out += json_number(d_);
      break;
    case Kind::kString:
      out += json_quote(s_);
      break;
    case Kind::kArray:
      if (items_.empty()) {
        out += "[]";
        break;
      }
      out += '[';
      for (size_t i = 0; i < items_.size(); ++i) {
        if (i) out += ',';
        newline(depth + 1);
        items_[i].write(out, indent, depth + 1);
      }
      newline(depth);
      out += ']';
      break;
    case Kind::kObject:
      if (members_.empty()) {
        out += "{}";
        break;
      }
      out += '{';
      for (size_t i = 0; i < members_.size(); ++i) {
        if (i) out += ',';
        newline(depth + 1);
        out += json_quote(members_[i].first);
        out += pretty ? ": " : ":";
        members_[i].second.write(out, indent, depth + 1);
      }
      newline(depth);
      out += '}';
      break;
  }
}

}  // namespace tpu
