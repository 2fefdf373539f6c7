// What one client may send, and have queued for it, before and after AUTH: the policy
// behind the parser limits, the query-buffer cap and the output budget the server gives
// each client's ReplyWriter.  Pure functions of the configuration; no state.
//
// Before AUTH (only when requirepass is set), Redis' rules: at most 10 arguments of at
// most 16 KiB each ("Protocol error: unauthenticated multibulk length / bulk length",
// CVE-2021-32675), a 1 MiB query buffer (Redis 7.2), and 1 KiB of counted output
// (CVE-2025-21605: a client that never reads cannot queue unbounded NOAUTH errors).
// These rules are the server's, above the transport: tcp, shm and rdma clients get the
// same ones.
//
// Output accounting: the first 16 KiB of a client's pending replies are not counted
// against client-output-buffer-limit, as in Redis (whose 16 KiB static reply buffer is
// outside the count): a tiny limit ("normal 100 0 0") still lets ordinary replies out.
#pragma once

#include <cstdint>

#include "conduit/kv/resp.h"

namespace conduit::kv {

inline constexpr uint64_t kUnauthMaxArguments = 10;
inline constexpr uint64_t kUnauthMaxBulk = 16 * 1024;
inline constexpr uint64_t kUnauthMaxQueryBuffer = 1 << 20;
inline constexpr uint64_t kUnauthMaxOutput = 1024;
inline constexpr uint64_t kUncountedOutput = 16 * 1024;

// The parser limits for a client: the configured ones, or the pre-AUTH ones.
ProtocolLimits request_limits(const ProtocolLimits& configured, bool unauthenticated);

// The largest query buffer (unparsed bytes) a client may hold.
uint64_t query_buffer_limit(const ProtocolLimits& configured, bool unauthenticated);

// Pending output counted against the limits.
inline uint64_t counted_output(uint64_t pending) { return pending > kUncountedOutput ? pending - kUncountedOutput : 0; }

// The bytes a client's output buffer may hold before the client is closed (the
// ReplyWriter budget): hard limit (0 = none) plus the uncounted 16 KiB.
uint64_t output_budget(uint64_t hard_limit, bool unauthenticated);

// True when pending output breaks the hard limit (what the budget enforces while a reply
// is built, checked again after a batch).
inline bool over_hard_limit(uint64_t pending, uint64_t hard_limit, bool unauthenticated) {
  return pending > output_budget(hard_limit, unauthenticated);
}

}  // namespace conduit::kv
