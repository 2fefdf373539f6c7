// Protection domains and memory regions.
//
// Registration is slow (it pins pages and programs the NIC's translation tables): do it at
// setup, never per operation on a data path.  Access is explicit: a region grants remote
// access only when asked, so a peer cannot write or read memory that was meant to be local.
#pragma once

#include <infiniband/verbs.h>

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
  // the fast path; debug builds assert.
  ibv_sge sge(size_t offset, uint32_t len) const;

 private:
  MemoryRegion(std::shared_ptr<ProtectionDomain> pd, ibv_mr* mr, Access access)
      : pd_(std::move(pd)), mr_(mr), access_(access) {}
  std::shared_ptr<ProtectionDomain> pd_;
  ibv_mr* mr_;
  Access access_;
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
