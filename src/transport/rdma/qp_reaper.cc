#include "qp_reaper.h"

#include <atomic>
#include <chrono>

#include "conduit/base/clock.h"
#include "conduit/base/log.h"
#include "wr_ids.h"

namespace conduit::transport::rdma {

namespace {
std::atomic<uint32_t> g_delay_ms{0};
}  // namespace

void QpReaper::set_delay_for_tests(uint32_t ms) { g_delay_ms.store(ms, std::memory_order_relaxed); }

void QpReaper::give(std::unique_ptr<QpResources> res) {
  {
    std::lock_guard lock(mu_);
    todo_.push_back(std::move(res));
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  }
  ++given_;
  ++outstanding_;
  cv_.notify_one();
}

std::vector<std::unique_ptr<QpResources>> QpReaper::take_done() {
  std::vector<std::unique_ptr<QpResources>> out;
  {
    std::lock_guard lock(mu_);
    out.swap(done_);
  }
  outstanding_ -= out.size();
  return out;
}

uint64_t QpReaper::slowest_ns() const {
  std::lock_guard lock(mu_);
  return slowest_ns_;
}

void QpReaper::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();  // it returns once todo_ is empty
}

void QpReaper::run() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stopping_ || !todo_.empty(); });
    if (todo_.empty()) return;  // stopping, and everything given is done
    std::unique_ptr<QpResources> r = std::move(todo_.front());
    todo_.pop_front();
    lock.unlock();
    if (const uint32_t ms = g_delay_ms.load(std::memory_order_relaxed); ms != 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    const uint64_t start = monotonic_ns();
    r->destroy_qp();
    const uint64_t took = monotonic_ns() - start;
    if (took > 1000 * kMs)
      CONDUIT_LOG(kInfo) << "rdma: destroying a closed connection's QP " << r->qpn << " took " << took / kMs
                         << " ms (in the kernel; off the event loop)";
    lock.lock();
    if (took > slowest_ns_) slowest_ns_ = took;
    done_.push_back(std::move(r));
    lock.unlock();
    if (wake_) wake_();
    lock.lock();
  }
}

}  // namespace conduit::transport::rdma
