// Expiry arithmetic, overflow-safe by construction.  Absolute expiry times are int64 Unix
// milliseconds; clients may ask for any value up to LLONG_MAX (Redis 7.0 accepts
// PEXPIREAT k 9223372036854775807), so every step is checked instead of relying on the
// wrap-around of signed overflow (undefined behaviour) as Redis does.
#pragma once

#include <cstdint>

namespace conduit::kv {

// value * unit_ms + base_ms (unit 1000 for seconds, 1 for ms; base now for relative
// times, 0 for absolute ones).  False if it does not fit in int64.
inline bool expiry_ms(int64_t value, int64_t unit_ms, int64_t base_ms, int64_t* out) {
  int64_t ms;
  if (__builtin_mul_overflow(value, unit_ms, &ms) || __builtin_add_overflow(ms, base_ms, &ms)) return false;
  *out = ms;
  return true;
}

// Milliseconds (>= 0) to seconds, rounded half up like Redis' (ms + 500) / 1000, which
// overflows for ms > LLONG_MAX - 500 (EXPIRETIME of a key expiring at LLONG_MAX).
inline int64_t ms_to_seconds_rounded(int64_t ms) { return ms / 1000 + (ms % 1000 >= 500 ? 1 : 0); }

}  // namespace conduit::kv
