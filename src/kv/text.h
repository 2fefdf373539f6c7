// Small text helpers shared by the server's parsers (bind lists, INFO section names,
// client-output-buffer-limit values, config files).  Pure functions, any thread.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace conduit::kv {

// Splits on any of `separators`, dropping empty pieces: "a  b,c" -> {"a", "b", "c"}.
inline std::vector<std::string> split_words(std::string_view s, std::string_view separators = " ") {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    const size_t j = s.find_first_of(separators, i);
    const size_t end = j == std::string_view::npos ? s.size() : j;
    if (end > i) out.emplace_back(s.substr(i, end - i));
    i = end + 1;
  }
  return out;
}

// ASCII case-insensitive equality (Redis' strcasecmp on command names and options).
inline bool eq_nocase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x + 32);
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y + 32);
    if (x != y) return false;
  }
  return true;
}

inline std::string to_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
  return out;
}

}  // namespace conduit::kv
