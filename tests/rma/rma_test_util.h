// What the rma endpoint tests share: the transport rows they run on (rdma only with a
// device: CONDUIT_RDMA_ADDR, set by the testbed), a loop driver with a bound, and the
// thread CPU clock the no-spinning checks read.  Header-only; test code only.
#pragma once

#include <time.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <ostream>
#include <string>

#include <gtest/gtest.h>

#include "conduit/reactor/event_loop.h"

namespace conduit::rma::test {

// One transport a test suite runs on.  listen_url() == "": this machine cannot run it.
struct Row {
  std::string name;
  std::string (*listen_url)();
};

// gtest prints a Row by its name and names the instantiated tests after it.
inline void PrintTo(const Row& r, std::ostream* os) { *os << r.name; }
inline std::string row_name(const ::testing::TestParamInfo<Row>& info) { return info.param.name; }

inline std::string rdma_addr() {
  const char* a = std::getenv("CONDUIT_RDMA_ADDR");
  return a ? a : "";
}
// CONDUIT_REQUIRE_RDMA=1 (the testbed's guest runs): a missing device fails instead of skipping.
inline bool rdma_required() {
  const char* r = std::getenv("CONDUIT_REQUIRE_RDMA");
  return r && std::string(r) == "1";
}

// Runs the loop until pred() or `ms` (generous: the machine is shared and loaded).
inline bool run_until(reactor::EventLoop& loop, const std::function<bool()>& pred, int ms) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (!pred()) {
    if (std::chrono::steady_clock::now() > end) return false;
    (void)loop.run_once(5);
  }
  return true;
}

inline uint64_t thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace conduit::rma::test
