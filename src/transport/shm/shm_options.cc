#include "shm/shm_options.h"

namespace conduit::transport::shm {

Status check_ring(std::string_view what, std::string_view text, ShmOptions& o) {
  if ((o.ring & (o.ring - 1)) == 0) return {};
  return Status(Code::kInvalidArgument, std::string(what) + "=" + std::string(text) + ": not a power of two");
}

Status parse_mode(std::string_view what, std::string_view text, ShmOptions& o) {
  unsigned m = 0;
  bool ok = !text.empty() && text.size() <= 4;
  for (char c : text) {
    if (c < '0' || c > '7') ok = false;
    m = m * 8 + static_cast<unsigned>(c - '0');
  }
  if (!ok || m > 0777)
    return Status(Code::kInvalidArgument,
                  std::string(what) + "='" + std::string(text) + "': expected octal permissions such as 0660");
  o.mode = m;
  return {};
}

Status parse_uid_list(std::string_view what, std::string_view text, ShmOptions& o) {
  o.allow_uids.clear();
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view one = text.substr(0, comma);
    // uid_t is 32 bits; (uid_t)-1 means "no uid" to the kernel.
    CONDUIT_ASSIGN_OR_RETURN(uint64_t uid, parse_number_value(what, one, 0, 0xfffffffeu));
    o.allow_uids.push_back(static_cast<uid_t>(uid));
    if (comma == std::string_view::npos) break;
    text = text.substr(comma + 1);
    if (text.empty()) return Status(Code::kInvalidArgument, std::string(what) + ": trailing comma");
  }
  return {};
}

Result<ShmOptions> parse_shm_options(const Endpoint& ep) {
  CONDUIT_ASSIGN_OR_RETURN(ShmOptions o, parse_option_table<ShmOptions>(kShmOptions, ep));
  o.ring_given = ep.options.count("ring") != 0;
  if (o.max_ring == 0) o.max_ring = o.ring;
  if (o.max_ring < o.ring)
    return Status(Code::kInvalidArgument, "shm option max_ring=" + std::to_string(o.max_ring) +
                                              " is smaller than ring=" + std::to_string(o.ring) +
                                              ", the size the listener gives by default");
  return o;
}

std::string shm_options_markdown() { return option_table_markdown<ShmOptions>(kShmOptions); }

}  // namespace conduit::transport::shm
