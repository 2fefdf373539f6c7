// What the sorted-set command files (commands_zsets.cc: add, ranges, set algebra, scan;
// commands_zsets_pop.cc: random members and popping) share.  Loop thread / mu_ held, as
// every command.
#pragma once

#include <string>
#include <string_view>
#include <utility>

#include "numbers.h"
#include "server_impl.h"

namespace conduit::kv {

using ZItem = std::pair<double, std::string>;  // (score, member), ZSetValue::order's element

// The sorted set at key for reading, or nullptr if there is none; *failed (and a WRONGTYPE
// reply already sent) when key holds another type.
Entry* zset_for_read(CommandContext& ctx, std::string_view key, bool* failed);

}  // namespace conduit::kv
