// Endpoint URLs: "scheme://address?key=value&key=value".
//
//   tcp://127.0.0.1:6379      tcp://[::1]:7000       tcp://localhost:0 (any free port)
//   shm://my-service          shm:///run/app.sock (an absolute socket path)
//   rdma://192.0.2.1:7471     auto://192.0.2.1:7471
//
// Query parameters are transport options (ring=1M, busy_poll_us=50, ...; byte counts take K/M/G); every
// transport documents its keys and rejects unknown ones, so a typo is an error rather
// than a silently ignored setting.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "conduit/base/status.h"

namespace conduit::transport {

struct Endpoint {
  std::string scheme;   // "tcp"
  std::string address;  // "127.0.0.1:6379", "my-service"
  std::map<std::string, std::string> options;

  static Result<Endpoint> parse(std::string_view url);
  std::string to_string() const;  // canonical form, options sorted

  // For host:port addresses.  IPv6 literals are bracketed: [::1]:80.
  Result<std::pair<std::string, uint16_t>> host_port() const;
};

// Typed access to Endpoint::options with validation.  Every get_* marks the key as known;
// finish() then fails on any key nobody asked for.
class OptionReader {
 public:
  explicit OptionReader(const Endpoint& ep) : ep_(ep) {}
  Result<uint64_t> get_u64(const std::string& key, uint64_t fallback, uint64_t min, uint64_t max);
  // A byte count: a number with an optional binary suffix K, M or G (4K = 4096; also KiB,
  // MiB, GiB, case-insensitive).
  Result<uint64_t> get_bytes(const std::string& key, uint64_t fallback, uint64_t min, uint64_t max);
  Result<bool> get_bool(const std::string& key, bool fallback);
  Result<std::string> get_string(const std::string& key, const std::string& fallback);
  Status finish() const;

 private:
  const Endpoint& ep_;
  std::map<std::string, bool> used_;
};

}  // namespace conduit::transport
