// When the append-only file is fsynced (redis.conf's appendfsync).  The writer that obeys it
// is src/kv/aof.h; the names are Redis'.  Any thread; no allocation.
#pragma once

#include <cstdint>
#include <string_view>

namespace conduit::kv {

enum class AppendFsync : uint8_t {
  kAlways,    // fdatasync before the replies of the commands it covers are sent
  kEverysec,  // a background thread fdatasyncs once a second
  kNo,        // the kernel decides
};
std::string_view appendfsync_name(AppendFsync f);  // "always", "everysec", "no"
bool parse_appendfsync(std::string_view s, AppendFsync* out);  // case-insensitive

}  // namespace conduit::kv
