// A Registrar over ibv_reg_mr for the memory layer's guest tests and bench/micro: the
// tests' and benchmark's own, small on purpose (one ibv_reg_mr per call, no caching), until
// the rdma transport's registrar lands -- then these switch to it.  Header-only so that
// bench/micro (built without the tests) can use it too.
//
// Threading: ibv_reg_mr/ibv_dereg_mr are thread-safe, and so is this.  Cost: what the
// device's registration costs (pinning + translation tables), nothing on top.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>
#include <string>

#include "conduit/base/log.h"
#include "conduit/memory/registrar.h"
#include "conduit/verbs/memory.h"

namespace conduit::memory::testing {

class VerbsRegistrar final : public Registrar {
 public:
  // `access`: ibv_access_flags for every registration (IBV_ACCESS_LOCAL_WRITE for memory
  // the NIC only reads from and writes into locally; add REMOTE_* for RDMA targets).
  explicit VerbsRegistrar(std::shared_ptr<verbs::ProtectionDomain> pd, int access = IBV_ACCESS_LOCAL_WRITE)
      : pd_(std::move(pd)), access_(access) {}

  Result<Registration> register_memory(void* addr, size_t len) override {
    ibv_mr* mr = ibv_reg_mr(pd_->native_handle(), addr, len, access_);
    if (mr == nullptr) {
      const int err = errno;
      return Status::FromErrnoAuto(err, "ibv_reg_mr of " + std::to_string(len) + " bytes on " + name());
    }
    ++live_;
    return Registration{RegionKeys{mr->lkey, mr->rkey}, mr};
  }
  void deregister(const Registration& r) override {
    if (int rc = ibv_dereg_mr(static_cast<ibv_mr*>(r.cookie)); rc != 0)
      CONDUIT_LOG(kError) << "ibv_dereg_mr on " << name() << ": " << std::strerror(rc);
    --live_;
  }
  std::string name() const override { return std::string(pd_->context()->name()) + "/pd"; }

  // Registrations made and not yet deregistered.
  long live() const { return live_.load(); }

 private:
  std::shared_ptr<verbs::ProtectionDomain> pd_;
  int access_;
  std::atomic<long> live_{0};
};

}  // namespace conduit::memory::testing
