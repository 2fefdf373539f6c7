// Range checks for the tools' numeric flags, shared by conduit-bench, conduit-kv-bench,
// conduit-kv, conduit-perf and conduit-fanin (one helper, not five copies).
//
// CLI11's own Range check lets NaN through (every comparison with NaN is false), and
// CLI11's conversion reads integers with base-0 strtoull/strtoll, so "-1" becomes 2^64-1
// for a uint64_t flag and "010" is 8.  These checks accept plain decimal numbers only:
// integers are digits (a '-' only where the minimum is negative), floating point values
// must be finite (no nan, no inf), and the value must lie in [min, max]; the text is then
// rewritten to its canonical form so CLI11 converts exactly the value that was checked.
// A refused value makes CLI11 print "--flag: <why>" and the tool exit non-zero.
//
//   app.add_option("-D,--duration", seconds, "...")->check(tools::in_range(0.01, 3600.0));
//   app.add_option("-s,--size", bytes, "...")->check(tools::size_in_range(1, 1ull << 30));
#pragma once

#include <CLI/CLI.hpp>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>

namespace conduit::tools {

namespace detail {
template <typename T>
std::string text(T v) {
  std::ostringstream o;
  o << v;
  return o.str();
}
}  // namespace detail

// "64", "1K", "16KiB", "1M", "2MB", "1G": K/M/G (also KB/KiB, case-insensitive) are
// powers of 1024.  False on anything else or on overflow.
inline bool parse_size(std::string_view text, uint64_t* out);

template <typename T>
CLI::Validator in_range(T min, T max) {
  static_assert(std::is_arithmetic_v<T>);
  const std::string range = detail::text(min) + " .. " + detail::text(max);
  auto check = [min, max, range](std::string& input) -> std::string {
    T v{};
    const char* first = input.data();
    const char* last = input.data() + input.size();
    std::from_chars_result r{};
    if constexpr (std::is_floating_point_v<T>) {
      r = std::from_chars(first, last, v, std::chars_format::general);
      if (r.ec != std::errc() || r.ptr != last) return "'" + input + "' is not a number (" + range + ")";
      if (!std::isfinite(v)) return "'" + input + "' is not a finite number (" + range + ")";
    } else {
      r = std::from_chars(first, last, v, 10);
      if (r.ec == std::errc::result_out_of_range) return input + " is out of range " + range;
      if (r.ec != std::errc() || r.ptr != last) return "'" + input + "' is not a decimal integer (" + range + ")";
    }
    if (v < min || v > max) return input + " is out of range " + range;
    if constexpr (!std::is_floating_point_v<T>) input = std::to_string(v);
    return std::string();
  };
  return CLI::Validator(check, std::string(std::is_floating_point_v<T> ? "NUMBER" : "INT") + " in " + range);
}

// A size (parse_size) in [min, max] bytes; the text becomes the number of bytes.
inline CLI::Validator size_in_range(uint64_t min, uint64_t max) {
  const std::string range = std::to_string(min) + " .. " + std::to_string(max) + " bytes";
  auto check = [min, max, range](std::string& input) -> std::string {
    uint64_t v = 0;
    if (!parse_size(input, &v)) return "'" + input + "' is not a size (examples: 64, 1K, 16KiB, 1M; " + range + ")";
    if (v < min || v > max) return input + " is out of range " + range;
    input = std::to_string(v);
    return std::string();
  };
  return CLI::Validator(check, "SIZE in " + range);
}

inline bool parse_size(std::string_view text, uint64_t* out) {
  uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v, 10);
  if (ec != std::errc() || ptr == text.data()) return false;
  std::string unit(ptr, text.data() + text.size());
  for (char& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  unsigned shift = 0;
  if (unit.empty() || unit == "b") shift = 0;
  else if (unit == "k" || unit == "kb" || unit == "kib") shift = 10;
  else if (unit == "m" || unit == "mb" || unit == "mib") shift = 20;
  else if (unit == "g" || unit == "gb" || unit == "gib") shift = 30;
  else return false;
  if (shift > 0 && v > (UINT64_MAX >> shift)) return false;
  *out = v << shift;
  return true;
}

}  // namespace conduit::tools
