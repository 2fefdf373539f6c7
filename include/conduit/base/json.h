// Tiny helpers for tools that print JSON by hand (conduit-perf, conduit-bench): quoting and
// numbers.  Not a JSON library.
#pragma once

#include <string>
#include <string_view>

namespace conduit {

// `v` as a JSON string literal, quotes included; control characters become \uXXXX.
std::string json_string(std::string_view v);
// `v` with `decimals` digits after the point; JSON has no inf/nan, so those print as null.
std::string json_number(double v, int decimals = 6);

}  // namespace conduit
