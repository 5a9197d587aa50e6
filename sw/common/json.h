// The JSON value every report, bench and timeline is built and written with: nlohmann's
// ordered_json (Debian's nlohmann-json3-dev), so objects keep their keys in insertion order.
//
// What the writers rely on (dump(2) for files, dump() for one compact line; tests/unit/json_test.cc
// holds it): integers (signed or unsigned, all 64 bits) print exactly; doubles print in a short
// form that reads back to the same double, always with a '.' or an exponent (3.0, not 3); NaN and
// Inf print as null. Strings must be valid UTF-8: dump() throws nlohmann::json::type_error on
// anything else.
#pragma once

#include <nlohmann/json.hpp>

namespace tpu {

using Json = nlohmann::ordered_json;

}  // namespace tpu
