// Closed connections' QPs are destroyed off the loop thread (qp_reaper.h): with every QP
// destroy made slow (fault injection), the loop keeps serving its other connections, the
// closed one's memory comes back only after its QP is gone, a loop torn down mid-destroy
// waits for it, and srq=1 slots survive a churn of slow destroys.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "conduit/base/clock.h"
#include "conduit/transport/connection.h"
#include "rdma/rdma.h"
#include "rdma_test_util.h"

namespace conduit::transport {
namespace {

using reactor::EventLoop;
using testing::kMs;
using testing::run_until;

class RdmaQpReaper : public testing::RdmaDeviceTest {
 protected:
  void SetUp() override {
    RdmaDeviceTest::SetUp();
    if (IsSkipped()) return;
    auto l = EventLoop::create();
    ASSERT_TRUE(l.ok());
    loop_ = std::move(*l);
  }
  void TearDown() override {
    rdma::set_qp_destroy_delay_for_tests(0);
    clients_.clear();
    accepted_.clear();
    listener_.reset();
    loop_.reset();
  }

  void listen_with(const std::string& opts) {
    auto l = listen(*loop_, "rdma://" + addr_ + ":0" + opts,
                    [this](std::unique_ptr<Connection> c) { accepted_.push_back(std::move(c)); });
    ASSERT_TRUE(l.ok()) << l.status().to_string();
    listener_ = std::move(*l);
  }
  // Connects one more client and waits for it and its server side.
  void connect_one(const std::string& opts = "") {
    const size_t before = accepted_.size();
    Status st(Code::kInProgress, "");
    auto c = connect(*loop_, listener_->url() + opts, [&](Connection&, Status s) { st = s; });
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    clients_.push_back(std::move(*c));
    ASSERT_TRUE(run_until(*loop_, [&] { return !st.in_progress() && accepted_.size() == before + 1; }, 30000));
    ASSERT_TRUE(st.ok()) << st.to_string();
  }
  // One request/response on clients_[i] <-> accepted_[i]; the time it took, or 0 if none within 20 s.
  uint64_t round_trip(size_t i) {
    const std::string msg = "ping " + std::to_string(i);
    std::string at_server, at_client;
    accepted_[i]->set_read_handler([&](Connection& c) {
      char buf[256];
      for (auto n = c.read(std::span(reinterpret_cast<uint8_t*>(buf), sizeof buf)); n.ok() && *n > 0;
           n = c.read(std::span(reinterpret_cast<uint8_t*>(buf), sizeof buf))) {
        at_server.append(buf, *n);
        (void)c.write(std::span(reinterpret_cast<const uint8_t*>(buf), *n));
      }
    });
    clients_[i]->set_read_handler([&](Connection& c) {
      char buf[256];
      for (auto n = c.read(std::span(reinterpret_cast<uint8_t*>(buf), sizeof buf)); n.ok() && *n > 0;
           n = c.read(std::span(reinterpret_cast<uint8_t*>(buf), sizeof buf)))
        at_client.append(buf, *n);
    });
    const uint64_t start = monotonic_ns();
    auto w = clients_[i]->write(std::span(reinterpret_cast<const uint8_t*>(msg.data()), msg.size()));
    EXPECT_TRUE(w.ok() && *w == msg.size());
    const bool ok = run_until(*loop_, [&] { return at_client == msg; }, 20000);
    const uint64_t took = monotonic_ns() - start;
    accepted_[i]->set_read_handler(nullptr);
    clients_[i]->set_read_handler(nullptr);
    return ok ? std::max<uint64_t>(took, 1) : 0;
  }
  uint64_t arena_in_use() {
    uint64_t n = 0;
    for (const auto& a : rdma::arena_stats(*loop_)) n += a.pool.bytes_in_use + a.rx.bytes_in_use + a.rx_shared.bytes_in_use;
    return n;
  }

  std::unique_ptr<EventLoop> loop_;
  std::unique_ptr<Listener> listener_;
  std::vector<std::unique_ptr<Connection>> clients_, accepted_;
};

// The kill_client_host failure (docs/FAILURES.md): a QP destroy that the kernel makes wait
// must not stall the loop.  Here every destroy waits 1.5 s before it starts.
TEST_F(RdmaQpReaper, SlowQpDestroyDoesNotStallTheLoop) {
  listen_with("");
  connect_one();
  connect_one();
  ASSERT_GT(round_trip(1), 0u);
  const uint64_t in_use_open = arena_in_use();
  rdma::set_qp_destroy_delay_for_tests(1500);
  clients_[0]->close();
  accepted_[0]->close();
  ASSERT_TRUE(run_until(*loop_, [&] { return rdma::reaper_stats(*loop_).outstanding == 2; }, 5000))
      << "given " << rdma::reaper_stats(*loop_).given << ", outstanding " << rdma::reaper_stats(*loop_).outstanding;
  const uint64_t took = round_trip(1);
  ASSERT_GT(took, 0u) << "the other connection got no answer while a QP was being destroyed";
  EXPECT_LT(took, 1000 * kMs) << "the loop waited for the QP destroy";
  EXPECT_EQ(rdma::reaper_stats(*loop_).outstanding, 2u) << "answered only after the destroy: the test proves nothing";
  EXPECT_EQ(arena_in_use(), in_use_open) << "the closed connections' memory went back before their QPs were gone";
  ASSERT_TRUE(run_until(*loop_, [&] { return rdma::reaper_stats(*loop_).outstanding == 0; }, 20000));
  EXPECT_LT(arena_in_use(), in_use_open) << "the closed connections' memory never came back";
  EXPECT_GT(round_trip(1), 0u);
}

// The loop goes while QPs are still being destroyed: its teardown waits for them and
// releases everything (ASan's leak check sees the rest).
TEST_F(RdmaQpReaper, LoopTeardownWaitsForQpsBeingDestroyed) {
  listen_with("");
  connect_one();
  ASSERT_GT(round_trip(0), 0u);
  rdma::set_qp_destroy_delay_for_tests(300);
  clients_[0]->close();
  accepted_[0]->close();
  ASSERT_TRUE(run_until(*loop_, [&] { return rdma::reaper_stats(*loop_).outstanding == 2; }, 5000));
  clients_.clear();
  accepted_.clear();
  listener_.reset();
  const uint64_t start = monotonic_ns();
  loop_.reset();
  EXPECT_GE(monotonic_ns() - start, 250 * kMs) << "the teardown did not wait for the QPs being destroyed";
}

// srq=1: connections close (some with data still on the wire: the Closer path) and new ones
// open while earlier QPs are still being destroyed; every connection carries its data and
// no receive slot of the shared queue is lost.
TEST_F(RdmaQpReaper, SrqSlotsSurviveSlowDestroys) {
  listen_with("?srq=1&srq_depth=32");
  rdma::set_qp_destroy_delay_for_tests(100);
  for (size_t i = 0; i < 8; ++i) {
    connect_one();
    ASSERT_GT(round_trip(i), 0u) << "connection " << i;
    if (i % 2 == 0) {
      const std::vector<uint8_t> tail(4096, static_cast<uint8_t>(i));
      (void)accepted_[i]->write(tail);  // the server side lingers until this is acknowledged
    }
    accepted_[i]->close();
    clients_[i]->close();
  }
  rdma::set_qp_destroy_delay_for_tests(0);
  clients_.clear();
  accepted_.clear();
  ASSERT_TRUE(run_until(*loop_, [&] {
    auto s = rdma::srq_stats(*loop_);
    return rdma::reaper_stats(*loop_).outstanding == 0 && s.size() == 1 && s[0].posted == s[0].depth &&
           s[0].attached == 0;
  }, 30000)) << "SRQ posted " << rdma::srq_stats(*loop_)[0].posted << " of 32, attached "
             << rdma::srq_stats(*loop_)[0].attached << ", reaper outstanding " << rdma::reaper_stats(*loop_).outstanding;
  EXPECT_GE(rdma::reaper_stats(*loop_).given, 16u);
}

}  // namespace
}  // namespace conduit::transport
