#include "conduit/base/json.h"

#include <cmath>
#include <cstdio>

namespace conduit {

std::string json_string(std::string_view v) {
  std::string s;
  s.reserve(v.size() + 2);
  s += '"';
  for (char c : v) {
    if (c == '"' || c == '\\') {
      s += '\\';
      s += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
      s += b;
    } else {
      s += c;
    }
  }
  s += '"';
  return s;
}

std::string json_number(double v, int decimals) {
  if (!std::isfinite(v)) return "null";
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", decimals, v);
  return b;
}

}  // namespace conduit
