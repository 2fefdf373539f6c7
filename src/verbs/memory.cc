#include "conduit/verbs/memory.h"

#include <cassert>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "conduit/base/log.h"

namespace conduit::verbs {

Result<std::shared_ptr<ProtectionDomain>> ProtectionDomain::create(std::shared_ptr<Context> ctx) {
  if (!ctx) return Status(Code::kInvalidArgument, "ProtectionDomain::create: null context");
  ibv_pd* pd = ibv_alloc_pd(ctx->native_handle());
  if (pd == nullptr) return Status::FromErrno(errno, "ibv_alloc_pd");
  return std::shared_ptr<ProtectionDomain>(new ProtectionDomain(std::move(ctx), pd));
}

ProtectionDomain::~ProtectionDomain() {
  if (int rc = ibv_dealloc_pd(pd_); rc != 0)
    CONDUIT_LOG(kError) << "ibv_dealloc_pd failed (a child object still alive?): " << std::strerror(rc);
}

Result<std::unique_ptr<MemoryRegion>> MemoryRegion::register_memory(
    std::shared_ptr<ProtectionDomain> pd, void* addr, size_t length, Access access) {
  if (!pd) return Status(Code::kInvalidArgument, "register_memory: null protection domain");
  if (addr == nullptr || length == 0)
    return Status(Code::kInvalidArgument, "register_memory: empty range");
  // The verbs spec requires LOCAL_WRITE with REMOTE_WRITE or REMOTE_ATOMIC.
  if (has(access, Access::kRemoteWrite) || has(access, Access::kRemoteAtomic))
    access = access | Access::kLocalWrite;
  ibv_mr* mr = ibv_reg_mr(pd->native_handle(), addr, length, static_cast<int>(access));
  if (mr == nullptr)
    return Status::FromErrnoAuto(errno, "ibv_reg_mr(" + std::to_string(length) +
                                            " bytes; is `ulimit -l` large enough?)");
  return std::unique_ptr<MemoryRegion>(new MemoryRegion(std::move(pd), mr, access));
}

MemoryRegion::~MemoryRegion() {
  if (int rc = ibv_dereg_mr(mr_); rc != 0)
    CONDUIT_LOG(kError) << "ibv_dereg_mr failed: " << std::strerror(rc);
}

Result<std::unique_ptr<MemoryWindow>> MemoryWindow::create(std::shared_ptr<ProtectionDomain> pd) {
  if (!pd) return Status(Code::kInvalidArgument, "MemoryWindow::create: null protection domain");
  ibv_mw* mw = ibv_alloc_mw(pd->native_handle(), IBV_MW_TYPE_2);
  if (mw == nullptr) return Status::FromErrnoAuto(errno, "ibv_alloc_mw(type 2)");
  return std::unique_ptr<MemoryWindow>(new MemoryWindow(std::move(pd), mw));
}

MemoryWindow::~MemoryWindow() {
  if (int rc = ibv_dealloc_mw(mw_); rc != 0) CONDUIT_LOG(kError) << "ibv_dealloc_mw failed: " << std::strerror(rc);
}

void RegisteredBuffer::FreeDeleter::operator()(uint8_t* p) const { std::free(p); }

Result<RegisteredBuffer> RegisteredBuffer::create(std::shared_ptr<ProtectionDomain> pd,
                                                  size_t length, Access access) {
  if (length == 0) return Status(Code::kInvalidArgument, "RegisteredBuffer: zero length");
  const size_t page = 4096;
  const size_t rounded = (length + page - 1) / page * page;
  void* mem = std::aligned_alloc(page, rounded);
  if (mem == nullptr) return Status(Code::kResourceExhausted, "RegisteredBuffer: out of memory");
  std::memset(mem, 0, rounded);
  RegisteredBuffer buf;
  buf.mem_.reset(static_cast<uint8_t*>(mem));
  buf.size_ = length;
  CONDUIT_ASSIGN_OR_RETURN(buf.mr_, MemoryRegion::register_memory(std::move(pd), mem, length, access));
  return buf;
}

}  // namespace conduit::verbs
