// conduit::rma on every carrier: tcp and shm (the emulation, host suite), auto (tcp on a
// host without a device), rdma (label rdma, in the Soft-RoCE guest).  Every op byte for
// byte, batches, local checks, remote access errors on that op only, revocation, the
// in-flight bound, malformed peers, and fetch-and-add from two processes.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <span>
#include <sstream>
#include <vector>

#include "conduit/reactor/event_loop.h"
#include "conduit/rma/endpoint.h"
#include "rma_test_util.h"
#include "conduit/transport/connection.h"

namespace conduit::rma {
namespace {

using reactor::EventLoop;

using test::Row;
using test::rdma_addr;
using test::rdma_required;

const Row kRows[] = {
    {"tcp", [] { return std::string("tcp://127.0.0.1:0"); }},
    {"shm",
     [] {
       static int n = 0;
       return "shm://rma-test-" + std::to_string(getpid()) + "-" + std::to_string(++n);
     }},
    {"auto", [] { return std::string("auto://127.0.0.1:0"); }},
    {"rdma", [] { return rdma_addr().empty() ? std::string() : "rdma://" + rdma_addr() + ":0"; }},
    // auto:// on an address with an RDMA device: must pick rdma (checked in EveryOpByteForByte).
    {"auto_rdma", [] { return rdma_addr().empty() ? std::string() : "auto://" + rdma_addr() + ":0"; }},
    // rdma with busy polling on both sides (every test of the suite, completions by polling).
    {"rdma_poll", [] { return rdma_addr().empty() ? std::string() : "rdma://" + rdma_addr() + ":0"; }},
    // rdma with windows=0 on both sides: exposures carry their region's own key and revoke
    // deregisters it (the path of devices without memory windows, run on rxe, which has them).
    {"rdma_mr", [] { return rdma_addr().empty() ? std::string() : "rdma://" + rdma_addr() + ":0"; }},
};
const char kPollQuery[] = "?busy_poll_us=2000";
const char kRegionKeysQuery[] = "?windows=0";

bool run_until(EventLoop& loop, const std::function<bool()>& pred, int ms = 20000) {
  return test::run_until(loop, pred, ms);
}

class RmaOps : public ::testing::TestWithParam<Row> {
 protected:
  void SetUp() override {
    url_ = GetParam().listen_url();
    if (url_.empty()) {
      if (rdma_required()) FAIL() << "CONDUIT_REQUIRE_RDMA=1 but CONDUIT_RDMA_ADDR is unset";
      GTEST_SKIP() << "no RDMA address (CONDUIT_RDMA_ADDR); run in the testbed: testbed/run ctest -L rdma";
    }
    auto loop = EventLoop::create();
    ASSERT_TRUE(loop.ok());
    loop_ = std::move(*loop);
    loop_->adopt_current_thread();
    if (GetParam().name == "rdma_poll") query_ = kPollQuery;
    if (GetParam().name == "rdma_mr") query_ = kRegionKeysQuery;
    connect_pair(query_);
  }
  void TearDown() override {
    client_.reset();
    server_.reset();
    listener_.reset();
  }

  // A listener on url_ + query, a client endpoint to it and the server side of it.
  void connect_pair(const std::string& query) {
    auto l = Listener::listen(*loop_, url_ + query, [this](std::unique_ptr<Endpoint> ep) { accepted_.push_back(std::move(ep)); });
    ASSERT_TRUE(l.ok()) << l.status().to_string();
    listener_ = std::move(*l);
    client_ = connect_one(query);
    ASSERT_TRUE(client_);
    ASSERT_TRUE(run_until(*loop_, [&] { return !accepted_.empty(); }));
    server_ = std::move(accepted_.front());
    accepted_.erase(accepted_.begin());
    EXPECT_EQ(server_->state(), EndpointState::kConnected);
  }
  std::unique_ptr<Endpoint> connect_one(const std::string& query) {
    std::string u = listener_->url();
    u += u.find('?') == std::string::npos ? query : (query.empty() ? "" : "&" + query.substr(1));
    bool done = false;
    Status st;
    auto ep = Endpoint::connect(*loop_, u, [&](Endpoint&, Status s) {
      done = true;
      st = s;
    });
    EXPECT_TRUE(ep.ok()) << ep.status().to_string();
    if (!ep.ok()) return nullptr;
    EXPECT_TRUE(run_until(*loop_, [&] { return done; }));
    EXPECT_TRUE(st.ok()) << st.to_string();
    return st.ok() ? std::move(*ep) : nullptr;
  }

  // Submits one op and runs the loop until its callback ran.
  OpResult run_op(Endpoint& ep, Op op) {
    bool done = false;
    OpResult out;
    op.done = [&](const OpResult& r) {
      out = r;
      done = true;
    };
    Status s = ep.submit(std::move(op));
    if (!s.ok()) return OpResult{s, 0};
    EXPECT_TRUE(run_until(*loop_, [&] { return done; }));
    return out;
  }

  Descriptor expose(std::vector<uint8_t>& mem, Rights r) {
    auto d = server_->expose(mem.data(), mem.size(), r);
    EXPECT_TRUE(d.ok()) << d.status().to_string();
    // Through the wire form, as a peer would get it.
    auto back = Descriptor::decode(d->encode());
    EXPECT_TRUE(back.ok());
    return *back;
  }
  bool is_rdma() const { return client_ && client_->transport() == "rdma"; }

  std::string url_;
  std::string query_;
  std::unique_ptr<EventLoop> loop_;
  std::unique_ptr<Listener> listener_;
  std::vector<std::unique_ptr<Endpoint>> accepted_;
  std::unique_ptr<Endpoint> client_, server_;
  std::vector<std::array<uint8_t, Descriptor::kWireSize>> pending_desc_;
};

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 7 + (i >> 8));
  return v;
}

TEST_P(RmaOps, EveryOpByteForByte) {
  std::vector<uint8_t> mem(64 << 10, 0);
  std::vector<uint32_t> imms;
  std::vector<uint32_t> imm_lens;
  server_->set_imm_handler([&](uint32_t imm, uint32_t len) {
    imms.push_back(imm);
    imm_lens.push_back(len);
  });
  const Descriptor d = expose(mem, kAllRights);
  EXPECT_EQ(d.length, mem.size());
  if (GetParam().name == "auto_rdma") {
    EXPECT_EQ(client_->transport(), "rdma");
  } else if (GetParam().name == "auto") {
    EXPECT_EQ(client_->transport(), "tcp");  // loopback has no RDMA device
  }

  const auto data = pattern(5000, 3);
  ASSERT_TRUE(run_op(*client_, Op::write(data, d, 100, nullptr)).status.ok());
  EXPECT_EQ(0, std::memcmp(mem.data() + 100, data.data(), data.size()));
  EXPECT_EQ(mem[99], 0);
  EXPECT_EQ(mem[5100], 0);

  std::vector<uint8_t> back(5000, 0xee);
  ASSERT_TRUE(run_op(*client_, Op::read(back, d, 100, nullptr)).status.ok());
  EXPECT_EQ(back, data);

  const auto imm_data = pattern(300, 9);
  ASSERT_TRUE(run_op(*client_, Op::write_imm(imm_data, d, 8192, 0xabcdef01, nullptr)).status.ok());
  ASSERT_TRUE(run_until(*loop_, [&] { return !imms.empty(); }));
  EXPECT_EQ(imms[0], 0xabcdef01u);
  EXPECT_EQ(imm_lens[0], 300u);
  EXPECT_EQ(0, std::memcmp(mem.data() + 8192, imm_data.data(), imm_data.size()));

  // Small writes (rdma: inline up to 64 bytes, copied at post) and one just above; the
  // source changes right after submit, which an inline write must not see.
  for (size_t n : {size_t{1}, size_t{64}, size_t{65}}) {
    const auto small = pattern(n, static_cast<uint8_t>(n));
    std::vector<uint8_t> src = small;
    bool done = false;
    ASSERT_TRUE(client_->submit(Op::write(src, d, 12000, [&](const OpResult& r) {
      EXPECT_TRUE(r.status.ok()) << r.status.to_string();
      done = true;
    })).ok()) << n;
    if (is_rdma() && n <= 64) std::fill(src.begin(), src.end(), 0xff);
    ASSERT_TRUE(run_until(*loop_, [&] { return done; })) << n;
    EXPECT_EQ(0, std::memcmp(mem.data() + 12000, small.data(), n)) << n;
  }

  uint64_t word = 40;
  std::memcpy(mem.data() + 16384, &word, 8);
  OpResult fa = run_op(*client_, Op::fetch_add(d, 16384, 2, nullptr));
  ASSERT_TRUE(fa.status.ok()) << fa.status.to_string();
  EXPECT_EQ(fa.old_value, 40u);
  std::memcpy(&word, mem.data() + 16384, 8);
  EXPECT_EQ(word, 42u);

  OpResult miss = run_op(*client_, Op::compare_swap(d, 16384, 7, 99, nullptr));
  ASSERT_TRUE(miss.status.ok());
  EXPECT_EQ(miss.old_value, 42u);
  std::memcpy(&word, mem.data() + 16384, 8);
  EXPECT_EQ(word, 42u);  // compare failed: unchanged
  OpResult hit = run_op(*client_, Op::compare_swap(d, 16384, 42, 99, nullptr));
  ASSERT_TRUE(hit.status.ok());
  EXPECT_EQ(hit.old_value, 42u);
  std::memcpy(&word, mem.data() + 16384, 8);
  EXPECT_EQ(word, 99u);

  // The other way round: the client exposes, the server operates.
  std::vector<uint8_t> cmem = pattern(4096, 77);
  auto cd = client_->expose(cmem.data(), cmem.size(), Rights::kRead);
  ASSERT_TRUE(cd.ok());
  std::vector<uint8_t> got(4096);
  ASSERT_TRUE(run_op(*server_, Op::read(got, *cd, 0, nullptr)).status.ok());
  EXPECT_EQ(got, cmem);
}

TEST_P(RmaOps, ABatchCompletesInOrderWithOneDoorbell) {
  std::vector<uint8_t> mem(1 << 20, 0);
  const Descriptor d = expose(mem, Rights::kRead | Rights::kWrite | Rights::kAtomic);
  constexpr int kOps = 40;
  std::vector<std::vector<uint8_t>> srcs;
  std::vector<std::vector<uint8_t>> dsts(kOps / 2, std::vector<uint8_t>(1000));
  for (int i = 0; i < kOps / 2; ++i) srcs.push_back(pattern(1000, static_cast<uint8_t>(i)));
  std::vector<Op> ops;
  std::vector<int> order;
  for (int i = 0; i < kOps / 2; ++i)
    ops.push_back(Op::write(srcs[i], d, static_cast<uint64_t>(i) * 4096, [&order, i](const OpResult& r) {
      EXPECT_TRUE(r.status.ok()) << r.status.to_string();
      order.push_back(i);
    }));
  for (int i = 0; i < kOps / 2; ++i)  // reads after the writes: RC keeps them in order
    ops.push_back(Op::read(dsts[i], d, static_cast<uint64_t>(i) * 4096, [&order, i](const OpResult& r) {
      EXPECT_TRUE(r.status.ok()) << r.status.to_string();
      order.push_back(kOps / 2 + i);
    }));
  const uint64_t batches = client_->stats().batches;
  ASSERT_TRUE(client_->submit(ops).ok());
  EXPECT_EQ(client_->stats().batches, batches + 1);
  EXPECT_EQ(client_->in_flight(), static_cast<size_t>(kOps));
  ASSERT_TRUE(run_until(*loop_, [&] { return order.size() == static_cast<size_t>(kOps); }));
  for (int i = 0; i < kOps; ++i) EXPECT_EQ(order[i], i);
  for (int i = 0; i < kOps / 2; ++i) {
    EXPECT_EQ(0, std::memcmp(mem.data() + i * 4096, srcs[i].data(), 1000)) << i;
    EXPECT_EQ(dsts[i], srcs[i]) << i;
  }
}

TEST_P(RmaOps, LocalChecksRefuseBeforePostingAndTheEndpointGoesOn) {
  std::vector<uint8_t> mem(4096, 0);
  const Descriptor ro = expose(mem, Rights::kRead);
  std::vector<uint8_t> buf(64, 1);
  Status s = client_->submit(Op::write(buf, ro, 0, [](const OpResult&) { ADD_FAILURE() << "callback of a refused op"; }));
  EXPECT_EQ(s.code(), Code::kPermissionDenied) << s.to_string();
  s = client_->submit(Op::fetch_add(ro, 0, 1, nullptr));
  EXPECT_EQ(s.code(), Code::kPermissionDenied) << s.to_string();
  s = client_->submit(Op::read(buf, ro, 4096 - 63, nullptr));
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.to_string();
  s = client_->submit(Op::read(buf, ro, ~uint64_t{0} - 10, nullptr));  // offset + len wraps
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.to_string();
  const Descriptor rw = expose(mem, kAllRights);
  s = client_->submit(Op::fetch_add(rw, 4, 1, nullptr));  // misaligned
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.to_string();
  // A batch with one bad op posts nothing.
  std::vector<Op> batch;
  batch.push_back(Op::write(buf, rw, 0, [](const OpResult&) { ADD_FAILURE() << "posted"; }));
  batch.push_back(Op::write(buf, ro, 0, nullptr));
  s = client_->submit(batch);
  EXPECT_EQ(s.code(), Code::kPermissionDenied) << s.to_string();
  EXPECT_EQ(client_->in_flight(), 0u);
  EXPECT_EQ(mem[0], 0);
  EXPECT_EQ(server_->expose(mem.data(), mem.size(), Rights::kNone).status().code(), Code::kInvalidArgument);
  // Still usable.
  EXPECT_TRUE(run_op(*client_, Op::read(buf, ro, 0, nullptr)).status.ok());
}

// A descriptor that claims more than was granted, or one that was revoked: the peer refuses
// that op (a remote access error) and nothing else changes: the endpoint goes on (over rdma
// the RC queue pair of both sides failed and was recovered in place, docs/RMA.md).
TEST_P(RmaOps, ForgedRightsAreARemoteAccessErrorOnThatOp) {
  std::vector<uint8_t> mem(4096, 0);
  Descriptor forged = expose(mem, Rights::kRead);
  forged.rights = kAllRights;
  std::vector<uint8_t> buf(64, 5);
  OpResult r = run_op(*client_, Op::write(buf, forged, 0, nullptr));
  EXPECT_EQ(r.status.code(), Code::kPermissionDenied) << r.status.to_string();
  EXPECT_EQ(mem[0], 0);
  if (is_rdma()) {  // the recovery finishes after the op's callback ran
    ASSERT_TRUE(run_until(*loop_, [&] { return client_->stats().recoveries == 1 && server_->stats().recoveries == 1; }));
  } else {
    EXPECT_EQ(server_->stats().refused, 1u);
  }
  EXPECT_EQ(client_->state(), EndpointState::kConnected);
  EXPECT_EQ(server_->state(), EndpointState::kConnected);
  forged.rights = Rights::kRead;
  EXPECT_TRUE(run_op(*client_, Op::read(buf, forged, 0, nullptr)).status.ok());
  EXPECT_EQ(buf[0], 0);
}

TEST_P(RmaOps, ARevokedDescriptorIsRefusedAndReuseGetsANewOne) {
  std::vector<uint8_t> mem(8192, 0);
  const Descriptor d = expose(mem, Rights::kRead | Rights::kWrite);
  // rxe has windows: the key is one unless windows=0 (then the region's own key).
  if (is_rdma()) {
    EXPECT_EQ(server_->stats().window_keys, GetParam().name == "rdma_mr" ? 0u : 1u);
  }
  std::vector<uint8_t> buf(128, 9);
  ASSERT_TRUE(run_op(*client_, Op::write(buf, d, 0, nullptr)).status.ok());
  ASSERT_TRUE(server_->revoke(d).ok());
  EXPECT_EQ(server_->revoke(d).code(), Code::kNotFound);
  EXPECT_EQ(server_->stats().exposed, 0u);
  const Descriptor again = expose(mem, Rights::kRead | Rights::kWrite);  // the same bytes, reused
  EXPECT_NE(again.generation, d.generation);
  EXPECT_NE(again.key, d.key);
  std::vector<uint8_t> other(128, 4);
  OpResult stale = run_op(*client_, Op::write(other, d, 0, nullptr));
  EXPECT_EQ(stale.status.code(), Code::kPermissionDenied) << stale.status.to_string();
  EXPECT_EQ(mem[0], 9);
  EXPECT_TRUE(run_op(*client_, Op::write(other, again, 0, nullptr)).status.ok());
  EXPECT_EQ(mem[0], 4);
}

// One bad op in the middle of a batch, with the peer's own ops in flight the other way: the
// bad op alone fails; every other op of both sides completes byte for byte, in order (over
// rdma both queue pairs fail and are recovered in place: the ops behind the bad one are
// replayed, and the exposures and descriptors of both sides keep working).  Three times, so
// both sides' recoveries stay in step.
TEST_P(RmaOps, ARemoteAccessErrorInABatchFailsThatOpAloneAndBothSidesGoOn) {
  std::vector<uint8_t> smem(1 << 16, 0), cmem(1 << 16, 0);
  const Descriptor sd = expose(smem, Rights::kRead | Rights::kWrite | Rights::kAtomic);
  auto cd = client_->expose(cmem.data(), cmem.size(), Rights::kRead | Rights::kWrite);
  ASSERT_TRUE(cd.ok()) << cd.status().to_string();
  std::vector<uint8_t> gone(4096, 0);
  const Descriptor revoked = expose(gone, Rights::kWrite);
  ASSERT_TRUE(server_->revoke(revoked).ok());
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const auto seed = static_cast<uint8_t>(round * 50);
    std::vector<std::vector<uint8_t>> srcs, back(4, std::vector<uint8_t>(2048)), ssrcs;
    for (int i = 0; i < 4; ++i) srcs.push_back(pattern(2048, static_cast<uint8_t>(seed + i)));
    for (int i = 0; i < 8; ++i) ssrcs.push_back(pattern(1000, static_cast<uint8_t>(seed + 100 + i)));
    std::vector<int> order;
    std::vector<Status> st(10);
    uint64_t old = ~0ull;
    std::vector<uint8_t> bad(64, 0xee);
    std::vector<Op> ops;
    auto rec = [&](int i) {
      return [&, i](const OpResult& r) {
        order.push_back(i);
        st[static_cast<size_t>(i)] = r.status;
        if (i == 9) old = r.old_value;
      };
    };
    for (int i = 0; i < 4; ++i) ops.push_back(Op::write(srcs[i], sd, static_cast<uint64_t>(i) * 4096, rec(i)));
    ops.push_back(Op::write(bad, revoked, 0, rec(4)));  // the bad one
    for (int i = 0; i < 4; ++i) ops.push_back(Op::read(back[i], sd, static_cast<uint64_t>(i) * 4096, rec(5 + i)));
    ops.push_back(Op::fetch_add(sd, 60000, 3, rec(9)));
    // The server's writes to the client, in flight while the client's batch fails.
    int sdone = 0;
    std::vector<Op> sops;
    for (int i = 0; i < 8; ++i)
      sops.push_back(Op::write(ssrcs[i], *cd, static_cast<uint64_t>(i) * 4096, [&](const OpResult& r) {
        EXPECT_TRUE(r.status.ok()) << r.status.to_string();
        ++sdone;
      }));
    ASSERT_TRUE(server_->submit(sops).ok());
    ASSERT_TRUE(client_->submit(ops).ok());
    ASSERT_TRUE(run_until(*loop_, [&] { return order.size() == 10 && sdone == 8; }));
    for (int i = 0; i < 10; ++i) {
      EXPECT_EQ(order[static_cast<size_t>(i)], i);
      if (i == 4)
        EXPECT_EQ(st[4].code(), Code::kPermissionDenied) << st[4].to_string();
      else
        EXPECT_TRUE(st[static_cast<size_t>(i)].ok()) << i << ": " << st[static_cast<size_t>(i)].to_string();
    }
    EXPECT_EQ(gone[0], 0);
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(0, std::memcmp(smem.data() + i * 4096, srcs[i].data(), 2048)) << i;
      EXPECT_EQ(back[i], srcs[i]) << i;
    }
    EXPECT_EQ(old, uint64_t{3} * static_cast<uint64_t>(round));
    for (int i = 0; i < 8; ++i) EXPECT_EQ(0, std::memcmp(cmem.data() + i * 4096, ssrcs[i].data(), 1000)) << i;
    EXPECT_EQ(client_->state(), EndpointState::kConnected);
    EXPECT_EQ(server_->state(), EndpointState::kConnected);
    if (is_rdma()) {
      const auto n = static_cast<uint64_t>(round + 1);
      ASSERT_TRUE(run_until(*loop_, [&] { return client_->stats().recoveries == n && server_->stats().recoveries == n; }));
    }
  }
  uint64_t word = 0;
  std::memcpy(&word, smem.data() + 60000, 8);
  EXPECT_EQ(word, 9u);
}

// rdma: the side whose queue pair failed as the responder cannot know which of its own ops
// in flight the peer ran.  Here the server's writes with immediate outrun the client's 8
// receives, so the 9th waits on receiver-not-ready (the client's loop, which posts receives
// again, does not run) when the client's bad op fails both queue pairs: it and the
// fetch-and-add behind it fail with kIoError ("may or may not have executed") instead of
// running twice; each immediate reaches the client at most once; both endpoints go on.
TEST_P(RmaOps, OpsThePeerMayHaveRunFailAsUncertainAfterItsRemoteAccessError) {
  if (!is_rdma()) GTEST_SKIP() << "rdma recovery (the emulation has no queue pair to fail)";
  std::unique_ptr<Endpoint> a = connect_one(query_.empty() ? "?depth=8" : query_ + "&depth=8");
  ASSERT_TRUE(a);
  ASSERT_TRUE(run_until(*loop_, [&] { return !accepted_.empty(); }));
  std::unique_ptr<Endpoint> b = std::move(accepted_.back());
  accepted_.pop_back();
  alignas(8) static uint8_t amem[1 << 14];
  std::memset(amem, 0, sizeof amem);
  auto ad = a->expose(amem, sizeof amem, Rights::kWrite | Rights::kAtomic);
  ASSERT_TRUE(ad.ok()) << ad.status().to_string();
  std::vector<uint8_t> gone(64, 0);
  auto bd = b->expose(gone.data(), gone.size(), Rights::kWrite);
  ASSERT_TRUE(bd.ok());
  const Descriptor revoked = *bd;
  ASSERT_TRUE(b->revoke(revoked).ok());
  std::map<uint32_t, int> seen;
  a->set_imm_handler([&](uint32_t imm, uint32_t) { ++seen[imm]; });
  constexpr int kImms = 12;
  std::vector<uint8_t> src = pattern(256, 3);
  std::vector<Status> st(kImms + 1);
  int bdone = 0;
  std::vector<Op> bops;
  for (int i = 0; i < kImms; ++i)
    bops.push_back(Op::write_imm(src, *ad, static_cast<uint64_t>(i) * 256, 1000u + static_cast<uint32_t>(i),
                                 [&, i](const OpResult& r) {
                                   st[static_cast<size_t>(i)] = r.status;
                                   ++bdone;
                                 }));
  bops.push_back(Op::fetch_add(*ad, 8192, 1, [&](const OpResult& r) {
    st[kImms] = r.status;
    ++bdone;
  }));
  ASSERT_TRUE(b->submit(bops).ok());
  std::vector<uint8_t> bad(32, 0xee);
  Status bad_status;
  bool bad_done = false;
  ASSERT_TRUE(a->submit(Op::write(bad, revoked, 0, [&](const OpResult& r) {
                 bad_status = r.status;
                 bad_done = true;
               })).ok());
  ASSERT_TRUE(run_until(*loop_, [&] {
    return bad_done && bdone == kImms + 1 && a->stats().recoveries == 1 && b->stats().recoveries == 1;
  }));
  EXPECT_EQ(bad_status.code(), Code::kPermissionDenied) << bad_status.to_string();
  int ok = 0, uncertain = 0;
  for (int i = 0; i < kImms; ++i) {
    const Status& s = st[static_cast<size_t>(i)];
    const int n = seen.count(1000u + i) ? seen[1000u + i] : 0;
    EXPECT_LE(n, 1) << "immediate " << i << " delivered twice";
    if (s.ok()) {
      ++ok;
      EXPECT_EQ(n, 1) << "op " << i << " completed but its immediate never arrived";
    } else {
      ++uncertain;
      EXPECT_EQ(s.code(), Code::kIoError) << i << ": " << s.to_string();
    }
  }
  EXPECT_GE(uncertain, 1);  // at least the one waiting on receiver-not-ready
  EXPECT_LE(ok, 8);
  EXPECT_EQ(st[kImms].code(), Code::kIoError) << st[kImms].to_string();
  uint64_t word = 0;
  std::memcpy(&word, amem + 8192, 8);
  EXPECT_LE(word, 1u);
  // Both go on: a fresh atomic and write with immediate each run once.
  const uint64_t before = word;
  OpResult r = run_op(*b, Op::fetch_add(*ad, 8192, 5, nullptr));
  EXPECT_TRUE(r.status.ok()) << r.status.to_string();
  EXPECT_EQ(r.old_value, before);
  EXPECT_TRUE(run_op(*b, Op::write_imm(src, *ad, 0, 77, nullptr)).status.ok());
  EXPECT_TRUE(run_until(*loop_, [&] { return seen[77] == 1; }));
  EXPECT_EQ(a->state(), EndpointState::kConnected);
  EXPECT_EQ(b->state(), EndpointState::kConnected);
}

// A descriptor opens memory only to the endpoint it was exposed on: another endpoint of the
// same listener (another peer) presenting it gets a remote access error (emulation: another
// exposure table; rdma: another protection domain, and a window bound to another QP).
TEST_P(RmaOps, ADescriptorWorksOnlyOnItsOwnEndpoint) {
  std::vector<uint8_t> mem(4096, 0);
  const Descriptor d = expose(mem, Rights::kRead | Rights::kWrite);
  std::unique_ptr<Endpoint> other = connect_one(query_);
  ASSERT_TRUE(other);
  ASSERT_TRUE(run_until(*loop_, [&] { return !accepted_.empty(); }));
  std::vector<uint8_t> buf(64, 7);
  OpResult r = run_op(*other, Op::write(buf, d, 0, nullptr));
  EXPECT_EQ(r.status.code(), Code::kPermissionDenied) << r.status.to_string();
  EXPECT_EQ(mem[0], 0);
  // Its own peer still can.
  EXPECT_TRUE(run_op(*client_, Op::write(buf, d, 0, nullptr)).status.ok());
  EXPECT_EQ(mem[0], 7);
}

TEST_P(RmaOps, TheInFlightBoundWouldBlocksAndTheReadyHandlerRuns) {
  TearDown();
  query_ += query_.empty() ? "?depth=4" : "&depth=4";
  connect_pair(query_);
  ASSERT_EQ(client_->options().depth, 4u);
  std::vector<uint8_t> mem(4096, 0);
  const Descriptor d = expose(mem, Rights::kAtomic);
  int done = 0, ready = 0;
  client_->set_ready_handler([&](Endpoint&) { ++ready; });
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(client_->submit(Op::fetch_add(d, 0, 1, [&](const OpResult&) { ++done; })).ok());
  EXPECT_TRUE(client_->submit(Op::fetch_add(d, 0, 1, nullptr)).would_block());
  EXPECT_EQ(client_->stats().would_block, 1u);
  std::vector<Op> five;
  for (int i = 0; i < 5; ++i) five.push_back(Op::fetch_add(d, 0, 1, nullptr));
  EXPECT_EQ(client_->submit(five).code(), Code::kInvalidArgument);  // can never fit
  ASSERT_TRUE(run_until(*loop_, [&] { return done == 4; }));
  EXPECT_GE(ready, 1);
  uint64_t word;
  std::memcpy(&word, mem.data(), 8);
  EXPECT_EQ(word, 4u);
}

// Callback-driven chains of ops whose completions are (nearly) always already there when a
// poll looks (eight in flight; rxe's loopback completes many inside ibv_post_send) must not
// keep the loop to themselves: its timers and other fds get a turn between rounds of polls.
TEST_P(RmaOps, AChainOfCallbacksLetsTheLoopsTimersRun) {
  std::vector<uint8_t> mem = pattern(4096, 5), buf(64);
  const Descriptor d = expose(mem, Rights::kRead);
  bool stop = false, failed = false;
  int done = 0, done_at_timer = -1;
  std::function<void(const OpResult&)> next = [&](const OpResult& r) {
    ++done;
    if (!r.status.ok()) failed = true;
    if (!stop && !failed && !client_->submit(Op::read(buf, d, 0, next)).ok()) failed = true;
  };
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(client_->submit(Op::read(buf, d, 0, next)).ok());  // 8 chains
  const auto armed = std::chrono::steady_clock::now();
  std::chrono::steady_clock::duration late{};
  loop_->run_after(20'000'000, [&] {
    stop = true, done_at_timer = done;
    late = std::chrono::steady_clock::now() - armed - std::chrono::milliseconds(20);
  });
  EXPECT_TRUE(run_until(*loop_, [&] { return (stop && client_->in_flight() == 0) || failed; }, 20000));
  client_->close();  // whatever is left fails now, while `next` still exists
  EXPECT_FALSE(failed);
  EXPECT_GE(done_at_timer, 1);
  // Unbounded polling kept the timer waiting for seconds in the guest (a run with no round limit).
  EXPECT_LT(late, std::chrono::milliseconds(1000)) << "the chains kept the loop to themselves";
  EXPECT_TRUE(std::equal(buf.begin(), buf.end(), mem.begin()));
}

// The in-flight ops sit in a ring of `depth` slots: callbacks that refill a full window from
// inside the completion (the slot just freed is the next one taken) keep every op's result
// and the completion order through many wraps.
TEST_P(RmaOps, CallbacksThatRefillAFullWindowCompleteInOrderThroughTheRing) {
  TearDown();
  query_ += query_.empty() ? "?depth=4" : "&depth=4";
  connect_pair(query_);
  std::vector<uint8_t> mem(4096, 0);
  const Descriptor d = expose(mem, Rights::kAtomic);
  constexpr int kOps = 203;  // not a multiple of the depth
  std::vector<uint64_t> olds;
  int submitted = 0;
  bool refused = false;
  std::function<void()> submit_one = [&] {
    if (submitted == kOps) return;
    ++submitted;
    Status s = client_->submit(Op::fetch_add(d, 0, 1, [&](const OpResult& r) {
      EXPECT_TRUE(r.status.ok()) << r.status.to_string();
      olds.push_back(r.old_value);
      submit_one();
    }));
    if (!s.ok()) refused = true;
  };
  for (int i = 0; i < 4; ++i) submit_one();
  EXPECT_TRUE(client_->submit(Op::fetch_add(d, 0, 1, nullptr)).would_block());
  ASSERT_TRUE(run_until(*loop_, [&] { return olds.size() == kOps || refused; }));
  ASSERT_FALSE(refused);
  for (int i = 0; i < kOps; ++i) ASSERT_EQ(olds[static_cast<size_t>(i)], static_cast<uint64_t>(i)) << "op " << i;
  uint64_t word;
  std::memcpy(&word, mem.data(), 8);
  EXPECT_EQ(word, static_cast<uint64_t>(kOps));
  EXPECT_EQ(client_->in_flight(), 0u);
}

// Five local buffers far enough apart to be five registrations, taken in turn by reads, one
// in flight on each, and local_cache=0: every new registration evicts the ones no handle pins.
// An op's registration must survive until the op completed although the next op already
// moved the endpoint to another one (rdma: a deregistered local buffer fails its read).
TEST_P(RmaOps, LocalBuffersTakingTurnsStayRegisteredWhileTheirOpsAreInFlight) {
  TearDown();
  query_ += query_.empty() ? "?local_cache=0" : "&local_cache=0";
  connect_pair(query_);
  constexpr size_t kBuf = 16 << 10, kStride = 64 << 10, kBufs = 5;
  std::vector<uint8_t> remote = pattern(kBufs * kBuf, 3);
  const Descriptor d = expose(remote, Rights::kRead);
  std::vector<uint8_t> local(kBufs * kStride, 0);
  constexpr int kOps = 300;
  int submitted = 0, completed = 0, failed = 0;
  std::function<void()> submit_one = [&] {
    const size_t b = static_cast<size_t>(submitted) % kBufs;
    ++submitted;
    std::span<uint8_t> dst(local.data() + b * kStride, kBuf);
    std::fill(dst.begin(), dst.end(), uint8_t{0});
    Status s = client_->submit(Op::read(dst, d, b * kBuf, [&, b, dst](const OpResult& r) {
      ++completed;
      if (!r.status.ok()) {
        ++failed;
        ADD_FAILURE() << "op " << completed << ": " << r.status.to_string();
      } else if (!std::equal(dst.begin(), dst.end(), remote.begin() + static_cast<std::ptrdiff_t>(b * kBuf))) {
        ++failed;
        ADD_FAILURE() << "op " << completed << ": buffer " << b << " does not hold what was read";
      }
      if (submitted < kOps && failed == 0) submit_one();
    }));
    if (!s.ok()) ++failed, ADD_FAILURE() << s.to_string();
  };
  // One read in flight per buffer: zeroing it before each read shows that each one landed.
  for (size_t i = 0; i < kBufs; ++i) submit_one();
  ASSERT_TRUE(run_until(*loop_, [&] { return completed == submitted || failed != 0; }, 30000));
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(completed, kOps);
  EXPECT_EQ(client_->stats().recoveries, 0u);
  EXPECT_EQ(client_->state(), EndpointState::kConnected);
}

TEST_P(RmaOps, ClosingFailsOpsInFlightWithCancelled) {
  std::vector<uint8_t> mem(4096, 0);
  const Descriptor d = expose(mem, Rights::kRead);
  std::vector<uint8_t> buf(4096);
  std::vector<Status> got;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(client_->submit(Op::read(buf, d, 0, [&](const OpResult& r) { got.push_back(r.status); })).ok());
  client_->close();
  ASSERT_EQ(got.size(), 3u);
  for (const Status& s : got) EXPECT_EQ(s.code(), Code::kCancelled) << s.to_string();
  EXPECT_EQ(client_->submit(Op::read(buf, d, 0, nullptr)).code(), Code::kClosed);
}

TEST_P(RmaOps, AFutureCarriesTheResult) {
  std::vector<uint8_t> mem(4096, 0);
  const Descriptor d = expose(mem, Rights::kAtomic);
  auto [cb, fut] = make_future();
  ASSERT_TRUE(client_->submit(Op::fetch_add(d, 8, 5, cb)).ok());
  ASSERT_TRUE(run_until(*loop_, [&] { return fut.wait_for(std::chrono::seconds(0)) == std::future_status::ready; }));
  OpResult r = fut.get();
  EXPECT_TRUE(r.status.ok());
  EXPECT_EQ(r.old_value, 0u);
}

// Two processes add to one counter under contention; every increment lands exactly once.
TEST_P(RmaOps, FetchAndAddFromTwoProcessesAddsUpExactly) {
  alignas(8) static uint64_t counter_storage[8];
  std::memset(counter_storage, 0, sizeof counter_storage);
  constexpr int kChildren = 2, kAdds = 1000;
  const std::string url = listener_->url();
  std::vector<pid_t> kids;
  std::vector<int> go_fds;
  for (int c = 0; c < kChildren; ++c) {
    int desc_pipe[2];
    ASSERT_EQ(pipe(desc_pipe), 0);
    const size_t before = accepted_.size();
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(desc_pipe[1]);
      const std::string fd = std::to_string(desc_pipe[0]), n = std::to_string(kAdds);
      execl(RMA_CHILD_PATH, RMA_CHILD_PATH, url.c_str(), fd.c_str(), n.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    ::close(desc_pipe[0]);
    kids.push_back(pid);
    ASSERT_TRUE(run_until(*loop_, [&] { return accepted_.size() > before; }));
    auto d = accepted_.back()->expose(counter_storage, sizeof counter_storage, Rights::kAtomic);
    ASSERT_TRUE(d.ok()) << d.status().to_string();
    go_fds.push_back(desc_pipe[1]);
    // Descriptors go out together below, so both children start adding at once.
    pending_desc_.push_back(d->encode());
  }
  for (int c = 0; c < kChildren; ++c) {
    ASSERT_EQ(write(go_fds[c], pending_desc_[c].data(), Descriptor::kWireSize), static_cast<ssize_t>(Descriptor::kWireSize));
    ::close(go_fds[c]);
  }
  int exited = 0;
  std::vector<int> statuses;
  ASSERT_TRUE(run_until(*loop_, [&] {
    for (pid_t& p : kids) {
      int st = 0;
      if (p > 0 && waitpid(p, &st, WNOHANG) == p) {
        statuses.push_back(st);
        p = -1;
        ++exited;
      }
    }
    return exited == kChildren;
  }, 120000));
  for (int st : statuses) EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "child status " << st;
  EXPECT_EQ(std::atomic_ref<uint64_t>(counter_storage[0]).load(), uint64_t{kChildren} * kAdds);
}

// busy_poll_us: back-to-back ops complete by polling (no completion-channel wakeup each),
// where the event-driven endpoint wakes once per op; once the window passes without work
// the endpoint sleeps (the loop stops spending CPU).
TEST_P(RmaOps, BusyPollingFindsCompletionsWithoutWakeupsAndSleepsAfterItsWindow) {
  if (GetParam().name != "rdma") GTEST_SKIP() << "busy_poll_us is rdma's; the test makes its own endpoints (rdma row)";
  constexpr int kOps = 100;
  std::vector<uint8_t> mem = pattern(4096, 3), buf(64);
  auto reads = [&](Endpoint& ep, const Descriptor& d) {
    int done = 0, failed = 0;
    std::function<void(const OpResult&)> next = [&](const OpResult& r) {
      if (!r.status.ok()) ++failed;
      if (++done < kOps && !ep.submit(Op::read(buf, d, 64, next)).ok()) ++failed;
    };
    ASSERT_TRUE(ep.submit(Op::read(buf, d, 64, next)).ok());
    ASSERT_TRUE(run_until(*loop_, [&] { return done == kOps || failed != 0; }));
    EXPECT_EQ(failed, 0);
    EXPECT_TRUE(std::equal(buf.begin(), buf.end(), mem.begin() + 64));
  };
  auto pair = [&](const std::string& query) {
    const size_t before = accepted_.size();
    std::unique_ptr<Endpoint> c = connect_one(query);
    EXPECT_TRUE(c != nullptr);
    EXPECT_TRUE(run_until(*loop_, [&] { return accepted_.size() > before; }));
    return c;
  };

  std::unique_ptr<Endpoint> events = pair("?busy_poll_us=0");
  ASSERT_TRUE(events);
  auto d = accepted_.back()->expose(mem.data(), mem.size(), Rights::kRead);
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  reads(*events, *d);
  // Woken by the channel, a wakeup polls until a poll comes back empty: an op that a callback
  // posted and that completed meanwhile (rxe's loopback often completes inside
  // ibv_post_send) is handled in the same wakeup.  So from one wakeup per op down to a few.
  EXPECT_GE(events->stats().cq_wakeups, 1u);
  EXPECT_LE(events->stats().cq_wakeups, uint64_t{kOps});
  EXPECT_EQ(events->stats().polled, 0u);  // no busy polling

  std::unique_ptr<Endpoint> polling = pair("?busy_poll_us=20000");
  ASSERT_TRUE(polling);
  ASSERT_EQ(polling->options().busy_poll_us, 20000u);
  d = accepted_.back()->expose(mem.data(), mem.size(), Rights::kRead);
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  reads(*polling, *d);
  EXPECT_LE(polling->stats().cq_wakeups, 3u);
  EXPECT_GE(polling->stats().polled, uint64_t{kOps} - 3);

  // Idle: inside the 20 ms window the loop does not block (the hook keeps polling)...
  auto t0 = std::chrono::steady_clock::now();
  (void)loop_->run_once(200);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(150)) << "slept inside the window";
  // ... and after it the endpoint sleeps: 300 ms of loop time cost far less CPU.
  const uint64_t cpu0 = test::thread_cpu_ns();
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  while (std::chrono::steady_clock::now() < end) (void)loop_->run_once(50);
  const uint64_t cpu_ms = (test::thread_cpu_ns() - cpu0) / 1000000;
  EXPECT_LT(cpu_ms, 150u) << "the polling endpoint kept spinning after its window";
  // And it wakes up again for the next op.
  reads(*polling, *d);
}

INSTANTIATE_TEST_SUITE_P(host, RmaOps, ::testing::Values(kRows[0], kRows[1], kRows[2]), test::row_name);
INSTANTIATE_TEST_SUITE_P(rdma, RmaOps, ::testing::Values(kRows[3], kRows[4], kRows[5], kRows[6]), test::row_name);

}  // namespace
}  // namespace conduit::rma
