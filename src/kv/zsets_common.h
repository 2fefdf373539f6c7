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

// numkeys at argv[at]: keys follow it.
template <size_t At>
void numkeys_keys(std::span<const std::string_view> argv, std::vector<size_t>* out) {
  int64_t n;
  if (argv.size() <= At || !string2ll(argv[At], &n) || n <= 0) return;
  for (size_t i = 0; i < static_cast<size_t>(n) && At + 1 + i < argv.size(); ++i) out->push_back(At + 1 + i);
}

}  // namespace conduit::kv
