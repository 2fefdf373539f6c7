#include "option_table.h"

#include <cctype>
#include <charconv>

namespace conduit::transport {

Result<uint64_t> parse_number_value(std::string_view what, std::string_view t, uint64_t min, uint64_t max) {
  uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec != std::errc() || ptr != t.data() + t.size() || t.empty())
    return Status(Code::kInvalidArgument, std::string(what) + "='" + std::string(t) + "': not a number");
  if (v < min || v > max)
    return Status(Code::kInvalidArgument, std::string(what) + "=" + std::string(t) + " outside " + std::to_string(min) +
                                              ".." + std::to_string(max));
  return v;
}

Result<uint64_t> parse_bytes_value(std::string_view what, std::string_view t, uint64_t min, uint64_t max) {
  uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  std::string suffix(ptr, t.data() + t.size());
  for (char& c : suffix) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  int shift = -1;
  if (suffix.empty() || suffix == "b") shift = 0;
  else if (suffix == "k" || suffix == "kib") shift = 10;
  else if (suffix == "m" || suffix == "mib") shift = 20;
  else if (suffix == "g" || suffix == "gib") shift = 30;
  if (ec != std::errc() || ptr == t.data() || shift < 0)
    return Status(Code::kInvalidArgument, std::string(what) + "='" + std::string(t) +
                                              "': not a byte count (a number, optionally with K, M or G)");
  if (v > (max >> shift) || (v << shift) < min)
    return Status(Code::kInvalidArgument, std::string(what) + "=" + std::string(t) + " outside " + std::to_string(min) +
                                              ".." + std::to_string(max) + " bytes");
  return v << shift;
}

Result<bool> parse_bool_value(std::string_view what, std::string_view t) {
  if (t == "1" || t == "true" || t == "yes" || t == "on") return true;
  if (t == "0" || t == "false" || t == "no" || t == "off") return false;
  return Status(Code::kInvalidArgument, std::string(what) + "='" + std::string(t) + "': expected a boolean");
}

std::string format_bytes(uint64_t v) {
  static constexpr const char* kSuffix[] = {"", "K", "M", "G"};
  int i = 0;
  while (i < 3 && v != 0 && v % 1024 == 0) {
    v /= 1024;
    ++i;
  }
  return std::to_string(v) + kSuffix[i];
}

namespace option_detail {

std::string default_text(OptionKind kind, std::string_view fallback, std::string_view default_doc) {
  if (!default_doc.empty()) return std::string(default_doc);
  if (kind == OptionKind::kBool || kind == OptionKind::kCustom) return "`" + std::string(fallback) + "`";
  return std::string(fallback);
}

std::string range_text(OptionKind kind, uint64_t min, uint64_t max, std::string_view note) {
  std::string r;
  switch (kind) {
    case OptionKind::kNumber: r = std::to_string(min) + "–" + std::to_string(max); break;
    case OptionKind::kBytes: r = format_bytes(min) + "–" + format_bytes(max); break;
    case OptionKind::kBool: r = "bool"; break;
    case OptionKind::kCustom: return std::string(note);
  }
  if (!note.empty()) r += ", " + std::string(note);
  return r;
}

std::string markdown_row(std::string_view name, std::string_view default_text, std::string_view range,
                         OptionSide side, std::string_view doc) {
  std::string who = side == OptionSide::kListener ? "listener: " : side == OptionSide::kClient ? "client: " : "";
  return "| `" + std::string(name) + "` | " + std::string(default_text) + " | " + std::string(range) + " | " + who +
         std::string(doc) + " |\n";
}

}  // namespace option_detail
}  // namespace conduit::transport
