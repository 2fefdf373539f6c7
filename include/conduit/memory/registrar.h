// Registration, injected: the memory layer knows nothing of verbs.  A Registrar makes a
// range of memory accessible to one device context (for RDMA: one protection domain) and
// hands back the keys a transport puts into its work requests.  The rdma transport
// implements it over ibv_reg_mr; a pool or a registration cache calls it once per region,
// never per operation.
//
// Threading: a Registrar is called under its pool's (or cache's) lock, from whichever
// thread allocates; implementations must be thread-safe in that sense (ibv_reg_mr is).
// Cost: registration pins pages and programs the device's translation tables -- tens of
// microseconds to milliseconds per MiB; that is why everything above it amortises it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "conduit/base/status.h"

namespace conduit::memory {

// How many registration domains (devices / protection domains) one pool serves at once.
inline constexpr unsigned kMaxDomains = 4;

// The keys of one registered range in one domain (an ibv_mr's lkey and rkey).  A pool
// region's keys cover all of its blocks.
struct RegionKeys {
  uint32_t lkey = 0;
  uint32_t rkey = 0;
};

class Registrar {
 public:
  struct Registration {
    RegionKeys keys;
    void* cookie = nullptr;  // the implementation's handle (an ibv_mr*), given back to deregister
  };

  virtual ~Registrar() = default;
  // Registers [addr, addr + len).  Errors name the cause and, where it applies, the fix
  // (e.g. RLIMIT_MEMLOCK).
  virtual Result<Registration> register_memory(void* addr, size_t len) = 0;
  virtual void deregister(const Registration& r) = 0;
  // "rxe0/pd" -- for statistics and messages.
  virtual std::string name() const = 0;
};

}  // namespace conduit::memory
