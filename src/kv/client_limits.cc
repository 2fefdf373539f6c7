#include "client_limits.h"

#include <algorithm>

namespace conduit::kv {

ProtocolLimits request_limits(const ProtocolLimits& configured, bool unauthenticated) {
  if (!unauthenticated) return configured;
  ProtocolLimits l = configured;
  l.max_multibulk_len = std::min(configured.max_multibulk_len, kUnauthMaxArguments);
  l.max_bulk_len = std::min(configured.max_bulk_len, kUnauthMaxBulk);
  l.max_query_buffer = query_buffer_limit(configured, true);
  l.unauthenticated = true;
  return l;
}

uint64_t query_buffer_limit(const ProtocolLimits& configured, bool unauthenticated) {
  return unauthenticated ? std::min(configured.max_query_buffer, kUnauthMaxQueryBuffer) : configured.max_query_buffer;
}

uint64_t output_budget(uint64_t hard_limit, bool unauthenticated) {
  // Redis' unauthenticated output cap applies whatever the configured limit (also 0).
  if (unauthenticated) hard_limit = hard_limit == 0 ? kUnauthMaxOutput : std::min(hard_limit, kUnauthMaxOutput);
  if (hard_limit == 0) return UINT64_MAX;
  return hard_limit + kUncountedOutput;
}

}  // namespace conduit::kv
