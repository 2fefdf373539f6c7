#include "arena.h"

#include "conduit/base/log.h"
#include "options.h"

namespace conduit::transport::rdma {

using namespace conduit::verbs;

std::string_view scope_name(Scope s) {
  switch (s) {
    case Scope::kMw: return "mw";
    case Scope::kPrivate: return "private";
    case Scope::kShared: return "shared";
  }
  return "?";
}

Result<memory::Registrar::Registration> VerbsRegistrar::register_memory(void* addr, size_t len) {
  CONDUIT_ASSIGN_OR_RETURN(auto mr, MemoryRegion::register_memory(pd_, addr, len, access_));
  Registration r;
  r.keys = memory::RegionKeys{mr->lkey(), mr->rkey()};
  std::lock_guard<std::mutex> lock(mu_);
  by_lkey_[mr->lkey()] = mr.get();
  r.cookie = mr.release();
  return r;
}

void VerbsRegistrar::deregister(const Registration& r) {
  auto* mr = static_cast<MemoryRegion*>(r.cookie);
  {
    std::lock_guard<std::mutex> lock(mu_);
    by_lkey_.erase(mr->lkey());
  }
  delete mr;
}

MemoryRegion* VerbsRegistrar::find(uint32_t lkey) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_lkey_.find(lkey);
  return it == by_lkey_.end() ? nullptr : it->second;
}

namespace {
Result<std::shared_ptr<memory::BlockPool>> make_pool(const std::shared_ptr<ProtectionDomain>& pd,
                                                     memory::PoolOptions o, Access access,
                                                     std::shared_ptr<VerbsRegistrar>* out = nullptr) {
  CONDUIT_ASSIGN_OR_RETURN(auto pool, memory::BlockPool::create(std::move(o)));
  auto reg = std::make_shared<VerbsRegistrar>(pd, access, std::string(pd->context()->name()) + "/" + pool->options().name);
  CONDUIT_ASSIGN_OR_RETURN(unsigned d, pool->add_registrar(reg));
  if (d != Arena::kDomain) return Status(Code::kInternal, "rdma arena: unexpected registrar index");
  if (out) *out = reg;
  return pool;
}

// Receive areas: one region (one memory region) per block, 64 KiB .. 16 MiB.
memory::PoolOptions rx_options(const char* name) {
  memory::PoolOptions o;
  o.classes = {64 << 10, 128 << 10, 256 << 10, 512 << 10, 1 << 20, 2 << 20, 4 << 20, 8 << 20, 16 << 20};
  o.region_bytes = 64 << 10;  // the smallest class: every region then holds exactly one block
  o.cap_bytes = size_t{4} << 30;
  o.hugepages = false;
  o.thread_cache_bytes = 0;  // areas go back to the shared list (any loop thread may reuse them)
  o.name = name;
  return o;
}
}  // namespace

Result<std::unique_ptr<Arena>> Arena::create(std::shared_ptr<ProtectionDomain> pd, size_t cap_bytes) {
  auto a = std::make_unique<Arena>();
  a->pd = pd;
  a->has_mw = (pd->context()->attr().device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B) != 0;
  memory::PoolOptions o;
  o.name = "arena";
  o.cap_bytes = cap_bytes;
  // rxe bounds a window key only by its region (tests/verbs/rdma_mw_test.cc), so a block is
  // offered for the READ rendezvous under scope=mw only when it is its region: from the
  // default rendezvous_min (256 KiB) up, every block gets a region of its own.
  static_assert(kSoloBytes == RdmaOptions{}.rendezvous_min, "solo blocks start at the default rendezvous_min");
  if (a->has_mw) o.solo_bytes = kSoloBytes;
  CONDUIT_ASSIGN_OR_RETURN(a->pool, make_pool(pd, o, a->has_mw ? Access::kLocalWrite | Access::kMwBind : Access::kLocalWrite,
                                              &a->pool_registrar));
  if (a->has_mw) {
    CONDUIT_ASSIGN_OR_RETURN(a->rx_mw, make_pool(pd, rx_options("rx-mw"), Access::kLocalWrite | Access::kMwBind,
                                                 &a->rx_mw_registrar));
  }
  return a;
}

Arena::~Arena() = default;

Result<memory::Slice> Arena::allocate_rx(Scope s, size_t bytes, size_t keep) {
  memory::BlockPool* p = nullptr;
  if (s == Scope::kMw) {
    if (!rx_mw) return Status(Code::kNotSupported, "rdma scope=mw: device " + std::string(pd->context()->name()) +
                                                       " has no type-2 memory windows (use scope=private)");
    p = rx_mw.get();
  } else if (s == Scope::kShared) {
    if (!rx_shared) {
      CONDUIT_ASSIGN_OR_RETURN(rx_shared, make_pool(pd, rx_options("rx-shared"), Access::kLocalWrite | Access::kRemoteWrite));
    }
    p = rx_shared.get();
  } else {
    return Status(Code::kInternal, "rdma arena: scope=private areas are not in the arena");
  }
  auto got = p->allocate(bytes);
  if (got.status().would_block())
    return Status(Code::kResourceExhausted, "rdma: the arena's receive areas are exhausted (" +
                                                std::to_string(p->options().cap_bytes >> 20) + " MiB)");
  if (got.ok() && bytes <= p->largest_class()) spares.keep(p->shared_from_this(), bytes, keep);
  return got;
}

void Arena::spare_staging(size_t bytes, size_t keep) {
  if (bytes <= pool->largest_class()) spares.keep(pool, bytes, keep);
}

}  // namespace conduit::transport::rdma
