// The JSON value every report, bench and timeline is built and written with: nlohmann's
// ordered_json (Debian's nlohmann-json3-dev), so objects keep their keys in insertion order.
//
// What the writers rely on (json_text; tests/unit/json_test.cc holds it): integers (signed or
// unsigned, all 64 bits) print exactly; doubles print in a short form that reads back to the same
// double, always with a '.' or an exponent (3.0, not 3); a non-finite double prints as the string
// "inf", "-inf" or "nan", as the text summaries say it (JSON has no such numbers; nlohmann's own
// dump() would print null).
#pragma once

#include <cmath>
#include <string>

#include <nlohmann/json.hpp>

namespace tpu {

using Json = nlohmann::ordered_json;

namespace json_detail {

inline bool has_nonfinite(const Json& j) {
  if (j.is_number_float()) return !std::isfinite(j.get<double>());
  if (j.is_structured())
    for (const Json& v : j)
      if (has_nonfinite(v)) return true;
  return false;
}

// j with every non-finite double replaced by its name ("inf", "-inf", "nan").
inline void name_nonfinite(Json& j) {
  if (j.is_number_float()) {
    const double x = j.get<double>();
    if (std::isnan(x))
      j = "nan";
    else if (std::isinf(x))
      j = x > 0 ? "inf" : "-inf";
    return;
  }
  if (j.is_structured())
    for (Json& v : j) name_nonfinite(v);
}

}  // namespace json_detail

// The text every report, bench and trace writes: indented by `indent` spaces a level (-1: one
// line), non-finite doubles as strings (above). A string that is not valid UTF-8 (a Latin-1 file
// name in a path, say) is written with U+FFFD in place of its bad bytes: a report never fails to
// write because of the text it quotes.
inline std::string json_text(const Json& j, int indent = 2) {
  constexpr auto kReplace = Json::error_handler_t::replace;
  if (!json_detail::has_nonfinite(j)) return j.dump(indent, ' ', false, kReplace);
  Json named = j;  // copied only when a value needs its name
  json_detail::name_nonfinite(named);
  return named.dump(indent, ' ', false, kReplace);
}

}  // namespace tpu
