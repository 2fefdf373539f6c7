// Redis' glob matcher (util.c's stringmatchlen): * ? [...] [^...] [a-z] and \ escapes, for
// KEYS, SCAN MATCH, PSUBSCRIBE, PUBSUB CHANNELS, CONFIG GET and COMMAND LIST FILTERBY
// PATTERN.  Recursion is bounded (a pattern like "*a*a*a..." cannot blow the stack); cost is
// at worst about len(pattern) * len(s) per star.  Pure function, any thread.
#pragma once

#include <string_view>

namespace conduit::kv {

bool glob_match(std::string_view pattern, std::string_view s, bool nocase = false);

}  // namespace conduit::kv
