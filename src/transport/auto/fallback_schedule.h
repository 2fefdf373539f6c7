// When auto:// tries RDMA again after falling back to TCP (the rdma_retry_ms option).
//
// Per destination ("host:port"): after an RDMA attempt failed, new connections go straight
// to TCP until the retry time; the next connection after it tries RDMA again.  Each
// consecutive failure doubles the wait (first_ms, 2x, 4x, ... up to max_ms); an RDMA
// success forgets the destination.  Live connections are never migrated: this only
// decides how each new connection starts.
//
// Threading: one table per process, used by connections on any loop; a mutex guards it.
// Cost: one map lookup under the mutex per auto:// connect with rdma_retry_ms > 0.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace conduit::transport {

class FallbackSchedule {
 public:
  struct Decision {
    bool try_rdma = true;
    uint64_t retry_in_ms = 0;  // when not: how long until RDMA is tried again
    uint32_t failures = 0;     // consecutive RDMA failures to this destination
    std::string last_reason;   // why the last attempt fell back
  };

  Decision decide(const std::string& dest, uint64_t now_ns) {
    std::lock_guard<std::mutex> lock(mu_);
    Decision d;
    auto it = entries_.find(dest);
    if (it == entries_.end()) return d;
    d.failures = it->second.failures;
    d.last_reason = it->second.reason;
    if (now_ns >= it->second.next_try_ns) return d;  // due: try again
    d.try_rdma = false;
    d.retry_in_ms = (it->second.next_try_ns - now_ns + 999'999) / 1'000'000;
    return d;
  }

  // Returns the wait chosen before the next RDMA attempt, in ms.
  uint64_t on_rdma_failed(const std::string& dest, uint64_t now_ns, uint64_t first_ms, uint64_t max_ms,
                          std::string reason) {
    std::lock_guard<std::mutex> lock(mu_);
    Entry& e = entries_[dest];
    e.wait_ms = e.failures == 0 ? first_ms : std::min(std::max(max_ms, first_ms), e.wait_ms * 2);
    ++e.failures;
    e.next_try_ns = now_ns + e.wait_ms * 1'000'000;
    e.reason = std::move(reason);
    return e.wait_ms;
  }

  void on_rdma_ok(const std::string& dest) {
    std::lock_guard<std::mutex> lock(mu_);
    entries_.erase(dest);
  }

 private:
  struct Entry {
    uint64_t next_try_ns = 0;
    uint64_t wait_ms = 0;
    uint32_t failures = 0;
    std::string reason;
  };
  std::mutex mu_;
  std::map<std::string, Entry> entries_;
};

}  // namespace conduit::transport
