#include "conduit/transport/options.h"

namespace conduit::transport {

std::string format_bytes(uint64_t v) {
  static constexpr struct {
    int shift;
    char suffix;
  } kUnits[] = {{30, 'G'}, {20, 'M'}, {10, 'K'}};
  if (v != 0)
    for (const auto& u : kUnits)
      if (v % (uint64_t{1} << u.shift) == 0) return std::to_string(v >> u.shift) + u.suffix;
  return std::to_string(v);
}

std::string OptionDoc::markdown_row() const {
  return "| `" + name + "` | " + default_value + " | " + range + " | " + doc + " |";
}

namespace detail {

Result<uint64_t> read_number(OptionReader& r, const std::string& key, OptKind kind, uint64_t fallback, uint64_t min,
                             uint64_t max) {
  if (kind == OptKind::kBytes) return r.get_bytes(key, fallback, min, max);
  return r.get_u64(key, fallback, min, max);
}

std::string range_text(OptKind kind, uint64_t min, uint64_t max) {
  switch (kind) {
    case OptKind::kBool:
      return "bool";
    case OptKind::kString:
      return "text";
    case OptKind::kBytes:
      return format_bytes(min) + "–" + format_bytes(max);
    case OptKind::kNumber:
    case OptKind::kMillis:
      break;
  }
  return std::to_string(min) + "–" + std::to_string(max);
}

std::string value_text(OptKind kind, uint64_t v) { return kind == OptKind::kBytes ? format_bytes(v) : std::to_string(v); }

}  // namespace detail
}  // namespace conduit::transport
