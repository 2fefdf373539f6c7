// Protection domains and memory regions.
//
// Registration is slow (it pins pages and programs the NIC's translation tables): do it at
// setup, never per operation on a data path.  Access is explicit: a region grants remote
// access only when asked, so a peer cannot write or read memory that was meant to be local.
#pragma once

#include <infiniband/verbs.h>

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "conduit/base/status.h"
#include "conduit/verbs/device.h"

namespace conduit::verbs {

// Access rights of a memory region; combine with |.
enum class Access : int {
  kLocalRead = 0,  // always granted by the NIC
  kLocalWrite = IBV_ACCESS_LOCAL_WRITE,
  kRemoteWrite = IBV_ACCESS_REMOTE_WRITE,  // implies kLocalWrite (added automatically)
  kRemoteRead = IBV_ACCESS_REMOTE_READ,
  kRemoteAtomic = IBV_ACCESS_REMOTE_ATOMIC,  // implies kLocalWrite (added automatically)
  kMwBind = IBV_ACCESS_MW_BIND,              // memory windows may be bound over the region
};
constexpr Access operator|(Access a, Access b) {
  return static_cast<Access>(static_cast<int>(a) | static_cast<int>(b));
}
constexpr bool has(Access set, Access bit) {
  return (static_cast<int>(set) & static_cast<int>(bit)) != 0;
}
inline constexpr Access kLocalOnly = Access::kLocalWrite;
inline constexpr Access kRemoteAll =
    Access::kLocalWrite | Access::kRemoteWrite | Access::kRemoteRead | Access::kRemoteAtomic;

class ProtectionDomain {
 public:
  static Result<std::shared_ptr<ProtectionDomain>> create(std::shared_ptr<Context> ctx);
  ~ProtectionDomain();
  ProtectionDomain(const ProtectionDomain&) = delete;
  ProtectionDomain& operator=(const ProtectionDomain&) = delete;

  ibv_pd* native_handle() const { return pd_; }
  const std::shared_ptr<Context>& context() const { return ctx_; }

 private:
  ProtectionDomain(std::shared_ptr<Context> ctx, ibv_pd* pd) : ctx_(std::move(ctx)), pd_(pd) {}
  std::shared_ptr<Context> ctx_;
  ibv_pd* pd_;
};

// A registered region of memory the caller owns.  The caller keeps [addr, addr+length)
// alive and mapped for the region's lifetime; the region keeps its PD alive.
class MemoryRegion {
 public:
  static Result<std::unique_ptr<MemoryRegion>> register_memory(
      std::shared_ptr<ProtectionDomain> pd, void* addr, size_t length, Access access);
  ~MemoryRegion();
  MemoryRegion(const MemoryRegion&) = delete;
  MemoryRegion& operator=(const MemoryRegion&) = delete;

  ibv_mr* native_handle() const { return mr_; }
  uint8_t* data() const { return static_cast<uint8_t*>(mr_->addr); }
  size_t size() const { return mr_->length; }
  uint64_t addr() const { return reinterpret_cast<uintptr_t>(mr_->addr); }
  uint32_t lkey() const { return mr_->lkey; }
  uint32_t rkey() const { return mr_->rkey; }
  Access access() const { return access_; }

  // A scatter/gather entry for [offset, offset+len) of this region.  No bounds check on
  // the fast path; debug builds assert.  Inline: every post builds one.
  ibv_sge sge(size_t offset, uint32_t len) const {
    assert(offset + len <= size());
    return ibv_sge{addr() + offset, len, lkey()};
  }

 private:
  MemoryRegion(std::shared_ptr<ProtectionDomain> pd, ibv_mr* mr, Access access)
      : pd_(std::move(pd)), mr_(mr), access_(access) {}
  std::shared_ptr<ProtectionDomain> pd_;
  ibv_mr* mr_;
  Access access_;
};

// A type-2 memory window: remote access to a range of a region, granted to exactly one QP
// (the one the bind is posted on) and revocable by a local invalidate posted on that QP.
// The region itself may be registered without any remote access (kLocalWrite | kMwBind):
// then the window's rkey is the only key that opens it, and only from its QP.  This is how
// memory shared by many connections (one registered arena) is scoped to each peer.
//
// Binds and invalidates are send-queue work requests (SendWr::bind_mw / local_invalidate);
// a window is bound to at most one range at a time.  Each bind must use a new rkey
// (next_rkey(): the same index, the low key byte advanced, as ibv_inc_rkey does), so a
// peer holding an older rkey is refused.  Not thread-safe; keeps its PD alive.
class MemoryWindow {
 public:
  static Result<std::unique_ptr<MemoryWindow>> create(std::shared_ptr<ProtectionDomain> pd);
  ~MemoryWindow();
  MemoryWindow(const MemoryWindow&) = delete;
  MemoryWindow& operator=(const MemoryWindow&) = delete;

  ibv_mw* native_handle() const { return mw_; }
  // The rkey of the last bind (or the allocation's, before any bind).
  uint32_t rkey() const { return rkey_; }
  // The rkey the next bind should carry; record it with bound() once that bind was posted.
  uint32_t next_rkey() const { return ibv_inc_rkey(rkey_); }
  // Also updates ibv_mw::rkey: providers identify the window of a bind WR by it (rxe
  // refuses a bind that names a stale key with "memory management operation error").
  void bound(uint32_t rkey) {
    rkey_ = rkey;
    mw_->rkey = rkey;
  }

 private:
  MemoryWindow(std::shared_ptr<ProtectionDomain> pd, ibv_mw* mw) : pd_(std::move(pd)), mw_(mw), rkey_(mw->rkey) {}
  std::shared_ptr<ProtectionDomain> pd_;
  ibv_mw* mw_;
  uint32_t rkey_;
};

// Page-aligned memory plus its registration, for tools and tests that just need "a
// registered buffer".  Owns both; the memory is zero-filled.
class RegisteredBuffer {
 public:
  static Result<RegisteredBuffer> create(std::shared_ptr<ProtectionDomain> pd, size_t length,
                                         Access access);
  RegisteredBuffer(RegisteredBuffer&&) noexcept = default;
  RegisteredBuffer& operator=(RegisteredBuffer&&) noexcept = default;

  uint8_t* data() const { return mem_.get(); }
  size_t size() const { return size_; }
  std::span<uint8_t> span() const { return {mem_.get(), size_}; }
  const MemoryRegion& mr() const { return *mr_; }
  ibv_sge sge(size_t offset, uint32_t len) const { return mr_->sge(offset, len); }

 private:
  struct FreeDeleter {
    void operator()(uint8_t* p) const;
  };
  RegisteredBuffer() = default;
  // Declaration order matters: the MR must be destroyed before the memory it pins.
  std::unique_ptr<uint8_t, FreeDeleter> mem_;
  size_t size_ = 0;
  std::unique_ptr<MemoryRegion> mr_;
};

}  // namespace conduit::verbs
