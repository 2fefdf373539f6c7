// Test support for tests that need an RDMA device (ctest label `rdma`).
//
// Without a device these tests skip with a message saying why; with CONDUIT_REQUIRE_RDMA=1
// (set by the Soft-RoCE testbed) a missing device is a failure, so the suite can never pass
// vacuously where it is supposed to exercise real verbs.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "conduit/verbs/verbs.h"

namespace conduit::verbs::testing {

std::string device_name();   // CONDUIT_RDMA_DEVICE, or "" for the first active device
std::string device_addr();   // CONDUIT_RDMA_ADDR: an IP address on the device's netdev, or ""
bool device_required();      // CONDUIT_REQUIRE_RDMA=1

// Opens the test device; on failure returns null after GTEST_SKIP/FAIL bookkeeping is
// done by the caller through CONDUIT_OPEN_DEVICE_OR_SKIP.
Result<std::shared_ptr<Context>> open_test_device();

#define CONDUIT_OPEN_DEVICE_OR_SKIP(var)                                                       \
  auto var##_result = ::conduit::verbs::testing::open_test_device();                          \
  if (!var##_result.ok()) {                                                                   \
    if (::conduit::verbs::testing::device_required())                                         \
      FAIL() << "CONDUIT_REQUIRE_RDMA=1 but no device: " << var##_result.status().to_string(); \
    GTEST_SKIP() << "no RDMA device (" << var##_result.status().to_string()                   \
                 << "); run the `rdma` tests in the testbed: testbed/run ctest -L rdma";      \
  }                                                                                           \
  std::shared_ptr<::conduit::verbs::Context> var = *var##_result

#define CONDUIT_REQUIRE_ADDR_OR_SKIP(var)                                                 \
  const std::string var = ::conduit::verbs::testing::device_addr();                      \
  if (var.empty()) {                                                                     \
    if (::conduit::verbs::testing::device_required()) FAIL() << "CONDUIT_RDMA_ADDR unset"; \
    GTEST_SKIP() << "CONDUIT_RDMA_ADDR (an IP address on the RDMA netdev) is not set";    \
  }

#define ASSERT_OK(expr)                                      \
  do {                                                       \
    const ::conduit::Status conduit_s_ = (expr);             \
    ASSERT_TRUE(conduit_s_.ok()) << conduit_s_.to_string();  \
  } while (0)

#define ASSERT_OK_AND_ASSIGN(lhs, expr)                                  \
  auto CONDUIT_CONCAT_(r_, __LINE__) = (expr);                           \
  ASSERT_TRUE(CONDUIT_CONCAT_(r_, __LINE__).ok())                        \
      << CONDUIT_CONCAT_(r_, __LINE__).status().to_string();             \
  lhs = std::move(CONDUIT_CONCAT_(r_, __LINE__)).value()

// Two RC QPs on one device connected to each other by hand (INIT/RTR/RTS), each with its
// own CQ (on a completion channel) and a 1 MiB buffer open to remote access.
struct LoopbackPair {
  static constexpr size_t kBufSize = 1 << 20;
  std::shared_ptr<Context> ctx;
  std::shared_ptr<ProtectionDomain> pd;
  std::shared_ptr<CompletionChannel> channel;
  std::shared_ptr<CompletionQueue> cq_a, cq_b;
  std::unique_ptr<QueuePair> a, b;
  std::unique_ptr<RegisteredBuffer> buf_a, buf_b;
  QpEndpoint ep_a, ep_b;

  // Everything set up and both QPs in RTS.
  static Result<std::unique_ptr<LoopbackPair>> create(std::shared_ptr<Context> ctx, QpOptions options = {},
                                                      std::shared_ptr<SharedReceiveQueue> srq_b = {});
};

// Waits up to 5 s for exactly `n` completions on `cq`.
Result<std::vector<Completion>> wait_completions(CompletionQueue& cq, int n, int timeout_ms = 5000);

}  // namespace conduit::verbs::testing
