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
