// Number <-> text conversions with Redis' exact rules (string2ll, ll2string, d2string).
// Header-only: used by the parser (which the fuzzer builds alone) and by the commands.
#pragma once

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

namespace conduit::kv {

// Strict: optional '-', no '+', no spaces, no leading zeros (except "0"), no overflow.
inline bool string2ll(const char* s, size_t len, int64_t* out) {
  if (len == 0 || len > 20) return false;
  if (len == 1 && s[0] == '0') {
    *out = 0;
    return true;
  }
  const char* p = s;
  const char* end = s + len;
  bool neg = false;
  if (*p == '-') {
    neg = true;
    ++p;
    if (p == end) return false;
  }
  if (*p < '1' || *p > '9') return false;
  uint64_t v = static_cast<uint64_t>(*p++ - '0');
  while (p < end) {
    const unsigned d = static_cast<unsigned char>(*p) - '0';
    if (d > 9) return false;
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
    ++p;
  }
  if (neg) {
    if (v > static_cast<uint64_t>(INT64_MAX) + 1) return false;
    *out = static_cast<int64_t>(0 - v);
  } else {
    if (v > static_cast<uint64_t>(INT64_MAX)) return false;
    *out = static_cast<int64_t>(v);
  }
  return true;
}
inline bool string2ll(std::string_view s, int64_t* out) { return string2ll(s.data(), s.size(), out); }

// Writes v's decimal digits to buf (at least 20 bytes); returns the length.
inline size_t ull2string(char* buf, uint64_t v) {
  char tmp[20];
  size_t n = 0;
  do {
    tmp[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  for (size_t i = 0; i < n; ++i) buf[i] = tmp[n - 1 - i];
  return n;
}

// buf: at least 21 bytes.
inline size_t ll2string(char* buf, int64_t v) {
  if (v < 0) {
    buf[0] = '-';
    return 1 + ull2string(buf + 1, 0 - static_cast<uint64_t>(v));
  }
  return ull2string(buf, static_cast<uint64_t>(v));
}

// Redis' getDoubleFromObject: strtod over the whole text; no spaces, no NaN.
inline bool string2d(std::string_view s, double* out) {
  if (s.empty() || s.size() > 5000) return false;
  if (std::isspace(static_cast<unsigned char>(s[0]))) return false;
  char buf[5001];
  std::memcpy(buf, s.data(), s.size());
  buf[s.size()] = '\0';
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(buf, &end);
  if (end != buf + s.size() || (errno == ERANGE && (v == HUGE_VAL || v == -HUGE_VAL || std::fpclassify(v) == FP_ZERO)) ||
      std::isnan(v))
    return false;
  *out = v;
  return true;
}

// Redis' SCAN cursor (parseScanCursorOrReply): strtoull in base 10 over the whole text,
// no leading space, ERANGE refused.  So "-1" is 18446744073709551615, as in Redis, and ""
// is 0.
inline bool string2cursor(std::string_view s, uint64_t* out) {
  if (s.size() > 64) return false;
  if (!s.empty() && std::isspace(static_cast<unsigned char>(s[0]))) return false;
  char buf[65];
  std::memcpy(buf, s.data(), s.size());
  buf[s.size()] = '\0';
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(buf, &end, 10);
  if (*end != '\0' || errno == ERANGE) return false;
  *out = v;
  return true;
}

// Redis' string2ld (INCRBYFLOAT): strtold over the whole text; no spaces, no NaN, no
// overflow to infinity.
inline bool string2ld(std::string_view s, long double* out) {
  constexpr size_t kMax = 5 * 1024;  // MAX_LONG_DOUBLE_CHARS
  if (s.empty() || s.size() >= kMax) return false;
  char buf[kMax];
  std::memcpy(buf, s.data(), s.size());
  buf[s.size()] = '\0';
  errno = 0;
  char* end = nullptr;
  const long double v = std::strtold(buf, &end);
  // end must reach the end of s: a NUL inside the text (SETRANGE) is not its end.
  if (std::isspace(static_cast<unsigned char>(buf[0])) || end != buf + s.size() ||
      (errno == ERANGE && (v == HUGE_VALL || v == -HUGE_VALL || std::fpclassify(v) == FP_ZERO)) || std::isnan(v))
    return false;
  *out = v;
  return true;
}

// Redis' ld2string in LD_STR_HUMAN mode (INCRBYFLOAT's result): "%.17Lf" without
// trailing zeros (and without a trailing '.'), "-0" as "0".  v must be finite.
inline std::string ld2string_human(long double v) {
  char buf[5 * 1024];
  int n = std::snprintf(buf, sizeof buf, "%.17Lf", v);
  if (n <= 0 || static_cast<size_t>(n) >= sizeof buf) return "0";
  size_t l = static_cast<size_t>(n);
  if (std::memchr(buf, '.', l) != nullptr) {
    while (buf[l - 1] == '0') --l;
    if (buf[l - 1] == '.') --l;
  }
  if (l == 2 && buf[0] == '-' && buf[1] == '0') return "0";
  return std::string(buf, l);
}

// Redis 7.0's d2string for replies and stored scores: "inf"/"-inf", integers without a
// fraction when exact, else "%.17g".  buf: at least 128 bytes.
inline size_t d2string(char* buf, size_t size, double v) {
  if (std::isinf(v)) {
    const char* t = v > 0 ? "inf" : "-inf";
    const size_t n = std::strlen(t);
    std::memcpy(buf, t, n);
    return n;
  }
  if (std::isnan(v)) {
    std::memcpy(buf, "nan", 3);
    return 3;
  }
  if (v == 0) {
    if (std::signbit(v)) {
      std::memcpy(buf, "-0", 2);
      return 2;
    }
    buf[0] = '0';
    return 1;
  }
  // 2^52: integers below this print exactly as integers.
  if (v > -4503599627370496.0 && v < 4503599627370496.0 && static_cast<double>(static_cast<int64_t>(v)) == v)
    return ll2string(buf, static_cast<int64_t>(v));
  const int n = std::snprintf(buf, size, "%.17g", v);
  return n > 0 ? static_cast<size_t>(n) : 0;
}

}  // namespace conduit::kv
