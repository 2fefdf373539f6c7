// A registrar for host tests of the memory layer's own logic: it hands out distinct keys
// and records every call, so a test can count registrations and check they are undone.
// (The real one, over ibv_reg_mr, is tested on a device in the guest.)
#pragma once

#include <map>
#include <mutex>
#include <string>

#include "conduit/memory/registrar.h"

namespace conduit::memory::testing {

class RecordingRegistrar final : public Registrar {
 public:
  explicit RecordingRegistrar(std::string name = "rec") : name_(std::move(name)) {}
  Result<Registration> register_memory(void* addr, size_t len) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (fail_next_ > 0) {
      --fail_next_;
      return Status(Code::kResourceExhausted, "test registrar refuses");
    }
    const uint32_t key = next_key_++;
    live_[key] = {reinterpret_cast<uintptr_t>(addr), len};
    ++registrations_;
    return Registration{RegionKeys{key, key | 0x80000000u}, reinterpret_cast<void*>(static_cast<uintptr_t>(key))};
  }
  void deregister(const Registration& r) override {
    std::lock_guard<std::mutex> lock(mu_);
    live_.erase(static_cast<uint32_t>(reinterpret_cast<uintptr_t>(r.cookie)));
    ++deregistrations_;
  }
  std::string name() const override { return name_; }

  void fail_next(int n) {
    std::lock_guard<std::mutex> lock(mu_);
    fail_next_ = n;
  }
  size_t live() const {
    std::lock_guard<std::mutex> lock(mu_);
    return live_.size();
  }
  size_t live_bytes() const {
    std::lock_guard<std::mutex> lock(mu_);
    size_t n = 0;
    for (auto& [k, v] : live_) n += v.second;
    return n;
  }
  uint64_t registrations() const {
    std::lock_guard<std::mutex> lock(mu_);
    return registrations_;
  }
  // The length of the live registration with this lkey (0: none).
  size_t length_of(uint32_t lkey) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(lkey);
    return it == live_.end() ? 0 : it->second.second;
  }
  // Whether [addr, addr+len) lies inside the live registration with this lkey.
  bool covers(uint32_t lkey, const void* addr, size_t len) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(lkey);
    const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
    return it != live_.end() && it->second.first <= a && a + len <= it->second.first + it->second.second;
  }

 private:
  std::string name_;
  mutable std::mutex mu_;
  std::map<uint32_t, std::pair<uintptr_t, size_t>> live_;
  uint32_t next_key_ = 1;
  int fail_next_ = 0;
  uint64_t registrations_ = 0, deregistrations_ = 0;
};

}  // namespace conduit::memory::testing
