// The registered arena of one event loop and device: where every rdma connection's memory
// comes from, so that a connection set up in steady state registers nothing (the seeds'
// third strategy; registration costs tens of milliseconds per MiB under Soft-RoCE).
//
//   pool      control slots, send staging, and the application's zero-copy buffers
//             (Connection::pool()): 2 MiB regions registered for local access (+ MW_BIND).
//   rx_pool   receive areas the peer RDMA-writes into: one region -- one memory region --
//             per block, so each area's registration covers exactly that area.
//
// Scoping (URL option `scope`): a peer must reach its own receive area and nothing else,
// although every area lies in one protection domain, where any QP may present any rkey.
//   mw       (default where the device has type-2 windows) rx regions are registered
//            without remote access; each connection binds a type-2 memory window over its
//            area to its own QP and advertises the window's rkey.  Another QP presenting
//            that key is refused; the key dies with the QP (and a reused area gets a new
//            window key).  The area's own region bounds the key on devices that do not
//            check window bounds (rxe on Linux 6.1 checks only the region's; see
//            tests/verbs/rdma_mw_test.cc), which is why each area is a region of its own.
//   private  each connection registers its own receive area (no arena for it): the old
//            strategy, for devices without windows; costs a registration per connection.
//   shared   rx regions are registered with remote write and their rkey is advertised:
//            fastest setup, but a peer that guesses another area's key (same PD) can write
//            there.  A documented trust boundary: only for peers you trust.
// Spares (URL option `spare_areas`): the arena keeps a few receive areas and staging blocks
// of the sizes its connections use registered ahead of demand (memory::SpareKeeper, a
// background thread), so a connection's setup finds them ready; registering them on the
// setup path was most of what rdma:// added to a bare rdma_cm connect under Soft-RoCE.
//
// Loop thread only (the pools themselves are thread-safe: an application may allocate
// from Connection::pool() on any thread and hand the chain to the loop).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <string>
#include <string_view>

#include "conduit/memory/pool.h"
#include "conduit/memory/registrar.h"
#include "conduit/memory/spare_keeper.h"
#include "conduit/verbs/verbs.h"

namespace conduit::transport::rdma {

enum class Scope : uint8_t { kMw, kPrivate, kShared };
std::string_view scope_name(Scope s);

// ibv_reg_mr as a memory::Registrar (one PD, fixed access flags).
class VerbsRegistrar final : public memory::Registrar {
 public:
  VerbsRegistrar(std::shared_ptr<verbs::ProtectionDomain> pd, verbs::Access access, std::string name)
      : pd_(std::move(pd)), access_(access), name_(std::move(name)) {}
  Result<Registration> register_memory(void* addr, size_t len) override;
  void deregister(const Registration& r) override;
  std::string name() const override { return name_; }
  // The verbs region with this lkey (for binding a window over it); null if none.
  verbs::MemoryRegion* find(uint32_t lkey) const;

 private:
  std::shared_ptr<verbs::ProtectionDomain> pd_;
  verbs::Access access_;
  std::string name_;
  mutable std::mutex mu_;
  std::unordered_map<uint32_t, verbs::MemoryRegion*> by_lkey_;
};

struct Arena {
  // `cap_bytes`: the pool's cap (RdmaOptions::arena_mb).
  static Result<std::unique_ptr<Arena>> create(std::shared_ptr<verbs::ProtectionDomain> pd, size_t cap_bytes);
  ~Arena();

  std::shared_ptr<verbs::ProtectionDomain> pd;
  bool has_mw = false;  // the device offers type-2B memory windows
  // local access (domain 0).  With windows, blocks of kSoloBytes and more are each a region
  // of their own (PoolOptions::solo_bytes), so the rendezvous may offer them under scope=mw.
  std::shared_ptr<memory::BlockPool> pool;
  static constexpr size_t kSoloBytes = 256 << 10;  // the default rendezvous_min
  std::shared_ptr<memory::BlockPool> rx_mw;     // receive areas for scope=mw (local + MW_BIND)
  std::shared_ptr<memory::BlockPool> rx_shared; // receive areas for scope=shared (remote write); on first use
  std::shared_ptr<VerbsRegistrar> rx_mw_registrar;
  // pool's regions (with MW_BIND where the device has windows: the rendezvous binds a
  // REMOTE_READ window over an offered slice; the region itself grants no remote access).
  std::shared_ptr<VerbsRegistrar> pool_registrar;
  static constexpr unsigned kDomain = 0;

  // A receive area of at least `bytes` for a connection with this scope (not kPrivate);
  // then keeps `spares` more of that size registered (topped up in the background).
  Result<memory::Slice> allocate_rx(Scope s, size_t bytes, size_t spares);
  // After a staging block of `bytes` came from `pool`: keep `spares` more of them registered.
  void spare_staging(size_t bytes, size_t spares);

  // Last member: destroyed first, so its thread is joined while the pools still exist.
  memory::SpareKeeper spares;
};

// A scatter/gather entry for [off, off+len) of a registered slice.
inline ibv_sge sge_of(const memory::Slice& s, size_t off, uint32_t len) {
  return ibv_sge{s.address() + off, len, s.keys(Arena::kDomain).lkey};
}

}  // namespace conduit::transport::rdma
