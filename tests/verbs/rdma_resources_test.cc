// Every verbs object Conduit creates is released again: the kernel's own resource counts
// (`rdma resource show`, from iproute2) return to where they were.
#include <cstdio>
#include <map>
#include <regex>
#include <string>

#include "rdma_env.h"

namespace conduit::verbs::testing {
namespace {

// Per-kind counts for one device, parsed from `rdma resource show`; empty if unavailable.
std::map<std::string, int> resource_counts(const std::string& dev) {
  std::map<std::string, int> out;
  FILE* f = popen("rdma resource show 2>/dev/null", "r");
  if (f == nullptr) return out;
  char line[512];
  while (std::fgets(line, sizeof line, f) != nullptr) {
    std::string s(line);
    if (s.find(" " + dev + ":") == std::string::npos) continue;
    static const std::regex kv("(pd|cq|qp|cm_id|mr|ctx|srq) ([0-9]+)");
    for (std::sregex_iterator it(s.begin(), s.end(), kv), end; it != end; ++it)
      out[(*it)[1]] = std::stoi((*it)[2]);
  }
  pclose(f);
  return out;
}

TEST(RdmaResources, EverythingIsReleased) {
  CONDUIT_OPEN_DEVICE_OR_SKIP(ctx);
  const std::string dev(ctx->name());
  const auto before = resource_counts(dev);
  if (before.empty()) GTEST_SKIP() << "`rdma resource show` (iproute2) is not available";
  {
    ASSERT_OK_AND_ASSIGN(auto pair, LoopbackPair::create(ctx));
    ASSERT_OK_AND_ASSIGN(auto srq, SharedReceiveQueue::create(pair->pd, 16));
    ASSERT_OK_AND_ASSIGN(auto ch, EventChannel::create());
    ASSERT_OK_AND_ASSIGN(auto id, CmId::create(ch));
    const auto during = resource_counts(dev);
    EXPECT_GE(during.at("qp"), before.at("qp") + 2);
    EXPECT_GE(during.at("mr"), before.at("mr") + 2);
    EXPECT_GE(during.at("cq"), before.at("cq") + 2);
    EXPECT_GE(during.at("srq"), before.at("srq") + 1);
  }
  EXPECT_EQ(resource_counts(dev), before);
}

}  // namespace
}  // namespace conduit::verbs::testing
