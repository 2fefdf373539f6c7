// Spare queue pairs (URL option spare_qps, src/transport/rdma/qp_stock.h): once the loop's
// keeper has made them, a connection's two ends take a QP and CQ made ahead instead of
// creating them, and carry data as before; connections of other sizes get a stock of their
// own; spare_qps=0 and srq=1 take none.
#include <gtest/gtest.h>

#include "conduit/transport/connection.h"
#include "rdma/rdma.h"
#include "rdma_env.h"
#include "rdma_test_util.h"

namespace conduit::transport {
namespace {

using namespace conduit::transport::testing;
using reactor::EventLoop;

class RdmaSpareQps : public RdmaDeviceTest {
 protected:
  static rdma::QpStockStats total(EventLoop& loop) {
    rdma::QpStockStats t;
    for (const auto& s : rdma::qp_stock_stats(loop)) {
      t.created += s.created;
      t.taken += s.taken;
      t.missed += s.missed;
      t.failed += s.failed;
      t.ready += s.ready;
    }
    return t;
  }
  // Connects a client with `client_opts` to `lst`, waits until both ends are up, and checks
  // 200 KB each way byte for byte.
  using Conns = std::vector<std::unique_ptr<Connection>>;
  static void connect_and_check(EventLoop& loop, Listener& lst, Conns& accepted, Conns& clients,
                                const std::string& client_opts, uint32_t seed) {
    const size_t before = accepted.size();
    Status st(Code::kInProgress, "");
    auto c = connect(loop, lst.url() + client_opts, [&](Connection&, Status s) { st = s; });
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    ASSERT_TRUE(run_until(loop, [&] { return !st.in_progress() && accepted.size() == before + 1; }, 10000));
    ASSERT_TRUE(st.ok()) << st.to_string();
    Connection& server = *accepted.back();
    const auto out = random_bytes(200000, seed), back = random_bytes(200000, seed + 1);
    EXPECT_EQ(transfer(loop, **c, server, out), out);
    EXPECT_EQ(transfer(loop, server, **c, back), back);
    clients.push_back(std::move(*c));
  }
};

TEST_F(RdmaSpareQps, BothEndsTakeQueuePairsMadeAheadAndCarryData) {
  auto l = EventLoop::create();
  ASSERT_TRUE(l.ok());
  EventLoop& loop = **l;
  Conns accepted, clients;
  auto lst = listen(loop, "rdma://" + addr_ + ":0", [&](std::unique_ptr<Connection> c) { accepted.push_back(std::move(c)); });
  ASSERT_TRUE(lst.ok()) << lst.status().to_string();
  EXPECT_TRUE(rdma::qp_stock_stats(loop).empty()) << "nothing made before the first connection";
  // The first connection finds no stock: it creates its QPs and starts the keeper.
  connect_and_check(loop, **lst, accepted, clients, "", 1);
  ASSERT_TRUE(run_until(loop, [&] { return spares_idle(loop); }, 20000)) << "the keeper is still making spares";
  rdma::QpStockStats t = total(loop);
  ASSERT_EQ(rdma::qp_stock_stats(loop).size(), 1u) << "both ends have the default sizes: one stock";
  EXPECT_EQ(t.ready, 4u) << "spare_qps defaults to 4";
  EXPECT_GE(t.missed, 1u) << "the client's end came first: no stock yet";
  EXPECT_LE(t.taken, 1u) << "the server's end may have found the keeper's first spare";
  EXPECT_EQ(t.failed, 0u);
  const uint64_t missed = t.missed, taken = t.taken;
  for (uint32_t i = 0; i < 3; ++i) {
    connect_and_check(loop, **lst, accepted, clients, "", 10 + 2 * i);
    ASSERT_TRUE(run_until(loop, [&] { return spares_idle(loop); }, 20000)) << "the keeper is still making spares";
    t = total(loop);
    EXPECT_EQ(t.taken, taken + 2u * (i + 1)) << "connection " << i << ": client and server each took a spare";
    EXPECT_EQ(t.missed, missed) << "connection " << i << " made a QP of its own";
    EXPECT_EQ(t.ready, 4u) << "topped up again";
  }
  EXPECT_EQ(t.created, 4u + t.taken);
  // The connections closing destroy the adopted QPs like their own (RdmaResources counts
  // what the device holds); the spares go with the loop's context.
  clients.clear();
  accepted.clear();
}

TEST_F(RdmaSpareQps, OtherSizesHaveTheirOwnStockAndSrqOrZeroTakeNone) {
  {
    auto l = EventLoop::create();
    ASSERT_TRUE(l.ok());
    EventLoop& loop = **l;
    Conns accepted, clients;
    auto lst = listen(loop, "rdma://" + addr_ + ":0", [&](std::unique_ptr<Connection> c) { accepted.push_back(std::move(c)); });
    ASSERT_TRUE(lst.ok());
    connect_and_check(loop, **lst, accepted, clients, "?send_depth=64&spare_qps=2", 3);
    ASSERT_TRUE(run_until(loop, [&] { return spares_idle(loop); }, 20000));
    const auto stocks = rdma::qp_stock_stats(loop);
    ASSERT_EQ(stocks.size(), 2u) << "the server's sizes and the client's";
    size_t ready = 0;
    for (const auto& s : stocks) ready += s.ready;
    EXPECT_EQ(ready, 4u + 2u) << "4 of the default sizes, 2 of the client's (its spare_qps)";
  }
  for (const char* opts : {"?spare_qps=0", "?srq=1"}) {
    auto l = EventLoop::create();
    ASSERT_TRUE(l.ok());
    EventLoop& loop = **l;
    Conns accepted, clients;
    auto lst = listen(loop, "rdma://" + addr_ + ":0" + opts, [&](std::unique_ptr<Connection> c) { accepted.push_back(std::move(c)); });
    ASSERT_TRUE(lst.ok()) << opts;
    for (uint32_t i = 0; i < 2; ++i) connect_and_check(loop, **lst, accepted, clients, opts, 20 + i);
    ASSERT_TRUE(run_until(loop, [&] { return spares_idle(loop); }, 20000));
    EXPECT_TRUE(rdma::qp_stock_stats(loop).empty()) << opts << ": no stock, no spare made";
  }
}

}  // namespace
}  // namespace conduit::transport
