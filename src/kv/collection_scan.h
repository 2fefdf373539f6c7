// HSCAN / SSCAN / ZSCAN over a std::unordered_{map,set}: the cursor names a bucket and the
// bucket count it was made for ((buckets << 32) | next bucket).  A scan visits buckets in
// order; if the container was rehashed since the cursor was handed out (its bucket count
// changed), the scan starts again from bucket 0, so every element present for the whole
// scan is returned at least once (duplicates are allowed, as in Redis).  COUNT is a hint:
// about COUNT elements per call (whole buckets).  Loop thread / mu_ held.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "glob.h"
#include "numbers.h"
#include "server_impl.h"

namespace conduit::kv {

struct ScanArgs {
  uint64_t cursor = 0;
  int64_t count = 10;
  std::string_view pattern;
  bool use_pattern = false;
  bool novalues = false;
};

// Parses "cursor [MATCH p] [COUNT n]" from argv[first]; false after replying the error.
inline bool parse_scan_args(CommandContext& ctx, size_t first, ScanArgs* a) {
  if (!string2cursor(ctx.arg(first), &a->cursor)) {
    ctx.error("ERR invalid cursor");
    return false;
  }
  for (size_t j = first + 1; j < ctx.argc(); j += 2) {
    const std::string_view o = ctx.arg(j);
    if (j + 1 >= ctx.argc()) {
      ctx.error(kSyntaxError);
      return false;
    }
    if (eq_nocase(o, "count")) {
      if (!get_ll(ctx, ctx.arg(j + 1), &a->count)) return false;
      if (a->count < 1) {
        ctx.error(kSyntaxError);
        return false;
      }
    } else if (eq_nocase(o, "match")) {
      a->pattern = ctx.arg(j + 1);
      a->use_pattern = a->pattern != "*";
    } else {
      ctx.error(kSyntaxError);
      return false;
    }
  }
  return true;
}

// Calls emit(element) for the elements of the buckets this step covers; returns the next
// cursor (0 = done).
template <typename Container, typename Emit>
uint64_t scan_buckets(const Container& c, uint64_t cursor, int64_t count, Emit&& emit) {
  const uint64_t buckets = c.bucket_count();
  uint64_t b = cursor & 0xffffffffull;
  if ((cursor >> 32) != buckets) b = 0;  // rehashed (or a fresh cursor): from the start
  int64_t seen = 0;
  while (b < buckets && seen < count) {
    for (auto it = c.begin(b); it != c.end(b); ++it) {
      emit(*it);
      ++seen;
    }
    ++b;
  }
  if (b >= buckets) return 0;
  return (buckets << 32) | b;
}

inline void reply_scan_cursor(CommandContext& ctx, uint64_t cursor) {
  ctx.reply.array(2);
  char buf[24];
  ctx.reply.bulk(std::string_view(buf, ull2string(buf, cursor)));
}

}  // namespace conduit::kv
