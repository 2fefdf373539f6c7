// SHA-256 (FIPS 180-4), self-contained: ACL passwords are stored as their SHA-256, as
// Redis stores them (acl.c ACLHashPassword).  Not a general crypto library: one-shot
// hashing of short inputs; no keyed or streaming use is supported.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace conduit::kv {

// The 32-byte digest of `data`.  Costs one pass over the data; any thread.
std::array<uint8_t, 32> sha256(std::string_view data);
// The digest as 64 lower-case hex characters (Redis' password hash form).
std::string sha256_hex(std::string_view data);

}  // namespace conduit::kv
