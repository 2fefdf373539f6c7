// Instantiation of the conformance suite, one instantiation per ctest label group:
//   host/Conformance.<Test>/<row>   every registered transport runnable on this machine
//   rdma/Conformance.<Test>/<row>   rows that need an RDMA device (label `rdma`, testbed)
// CMakeLists.txt gives each group its ctest labels through a gtest filter on the prefix.
//
// Plus the suite's own guard (a registered transport without a row fails) and reactor
// regressions that the transports' tests depend on.
#include <cctype>
#include <cstdio>
#include <set>

#include "conduit/reactor/event_loop.h"
#include "harness.h"
#include "verbs/child_process.h"

namespace conduit::conformance {
namespace {

std::string row_name(const ::testing::TestParamInfo<TransportCase>& info) { return info.param.name; }

INSTANTIATE_TEST_SUITE_P(host, Conformance, ::testing::ValuesIn(registered_cases("")), row_name);
INSTANTIATE_TEST_SUITE_P(rdma, Conformance, ::testing::ValuesIn(registered_cases("rdma")), row_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(Conformance);

TEST(ConformanceTable, EveryRegisteredTransportHasARow) {
  for (const std::string& scheme : known_schemes()) {
    if (transport::find_transport(scheme) == nullptr) {
      std::printf("[ info     ] transport '%s' is not registered: its rows are not instantiated\n", scheme.c_str());
      continue;
    }
    bool found = false;
    for (const TransportCase& c : transport_table()) found = found || c.scheme == scheme;
    EXPECT_TRUE(found) << "transport '" << scheme
                       << "' is registered but has no row in tests/conformance/transport_table.cc";
  }
  ASSERT_NE(transport::find_transport("tcp"), nullptr);
}

TEST(ConformanceTable, RowNamesAreUniqueAndValid) {
  std::set<std::string> names;
  for (const TransportCase& c : transport_table()) {
    EXPECT_TRUE(names.insert(c.name).second) << "duplicate row " << c.name;
    for (char ch : c.name) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(ch)) || ch == '_') << c.name;
  }
}

// LoopGroup::start() immediately followed by its destruction must not hang: stop() can land
// before a loop thread has entered run().  Run in a child so a hang is a bounded failure.
TEST(ReactorRegression, LoopGroupStopRightAfterStartDoesNotHang) {
  conduit::testing::ChildProcess child([](int) {
    for (int i = 0; i < 500; ++i) {
      auto g = reactor::LoopGroup::start(2);
      if (!g.ok()) return 2;
    }  // ~LoopGroup: stop() + join
    return 0;
  });
  ASSERT_TRUE(child.started());
  const int rc = child.wait(10000);
  EXPECT_EQ(rc, 0) << (rc == -1 ? "LoopGroup start/stop hung (killed after 10 s): EventLoop::run() clears a "
                                  "stop() that arrived before it started"
                                : "child failed");
}

// run_once(-1) that ran posted work must not then sleep: here the first task posts a
// second, whose wakeup the first iteration drains; the second iteration runs it and, with
// the bug, blocks in epoll_wait forever although the caller's condition is now true.  (The
// same race makes EventLoop.PostFromOtherThreadsWakesAndKeepsOrder hang now and then.)
TEST(ReactorRegression, RunOnceDoesNotSleepAfterRunningPostedWork) {
  conduit::testing::ChildProcess child([](int) {
    auto l = reactor::EventLoop::create();
    if (!l.ok()) return 2;
    reactor::EventLoop& loop = **l;
    bool second_ran = false;
    loop.post([&] { loop.post([&] { second_ran = true; }); });
    for (int i = 0; i < 10 && !second_ran; ++i) (void)loop.run_once(-1);
    return second_ran ? 0 : 3;
  });
  ASSERT_TRUE(child.started());
  const int rc = child.wait(5000);
  EXPECT_EQ(rc, 0) << (rc == -1 ? "run_once(-1) slept after running a posted task (killed after 5 s)"
                                : "child failed");
}

}  // namespace
}  // namespace conduit::conformance
