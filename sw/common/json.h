// The JSON value every report, bench and timeline is built and written with: nlohmann's
// ordered_json (Debian's nlohmann-json3-dev), so objects keep their keys in insertion order.
//
// What the writers rely on (json_text; tests/unit/json_test.cc holds it): integers (signed or
// unsigned, all 64 bits) print exactly; doubles print in a short form that reads back to the same
// double, always with a '.' or an exponent (3.0, not 3); NaN and Inf print as null.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace tpu {

using Json = nlohmann::ordered_json;

// The text every report, bench and trace writes: indented by `indent` spaces a level (-1: one
// line). A string that is not valid UTF-8 (a Latin-1 file name in a path, say) is written with
// U+FFFD in place of its bad bytes: a report never fails to write because of the text it quotes.
inline std::string json_text(const Json& j, int indent = 2) {
  return j.dump(indent, ' ', false, Json::error_handler_t::replace);
}

}  // namespace tpu
