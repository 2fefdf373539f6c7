// Hostile peers: a raw verbs client (not Conduit's transport) connects to a Conduit RDMA
// listener and breaks the protocol.  The server must close that connection with a
// protocol error while a well-behaved connection on the same loop carries on.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>

#include "conduit/base/clock.h"
#include "conduit/transport/connection.h"
#include "rdma/protocol.h"
#include "rdma/rdma.h"
#include "raw_peer.h"
#include "rdma_env.h"

namespace conduit::transport {
namespace {

using namespace conduit::verbs;
using testing::RawPeer;
using rdma::CtrlMsg;
using rdma::kCtrlSize;
using reactor::EventLoop;
constexpr uint64_t kMs = 1'000'000;

class HostilePeer : public ::testing::Test {
 protected:
  void SetUp() override {
    CONDUIT_OPEN_DEVICE_OR_SKIP(ctx);
    (void)ctx;
    CONDUIT_REQUIRE_ADDR_OR_SKIP(a);
    addr_ = a;
    auto l = EventLoop::create();
    ASSERT_TRUE(l.ok());
    loop_ = std::move(*l);
    auto lst = listen(*loop_, "rdma://" + addr_ + ":0?keepalive_ms=200&keepalive_timeout_ms=1000" + listen_options(),
                      [this](std::unique_ptr<Connection> c) { accepted_.push_back(std::move(c)); });
    ASSERT_TRUE(lst.ok()) << lst.status().to_string();
    listener_ = std::move(*lst);
    port_ = static_cast<uint16_t>(std::stoi(listener_->url().substr(listener_->url().rfind(':') + 1)));
    // A well-behaved Conduit client that must keep working throughout.  It negotiates the
    // extensions, which makes it subject to the server's 1 s keepalive timeout: it sends
    // keepalives often enough.
    auto c = connect(*loop_, listener_->url() + "?keepalive_ms=200",
                     [this](Connection&, Status s) { good_status_ = s; });
    ASSERT_TRUE(c.ok());
    good_ = std::move(*c);
    ASSERT_TRUE(run_until([&] { return accepted_.size() == 1 && good_status_.ok(); }));
  }

  virtual std::string listen_options() const { return ""; }

  template <typename Pred>
  bool run_until(Pred pred, int timeout_ms = 15000) {
    const uint64_t deadline = monotonic_ns() + static_cast<uint64_t>(timeout_ms) * kMs;
    while (!pred() && monotonic_ns() < deadline)
      if (!loop_->run_once(5).ok()) return false;
    return pred();
  }

  // Runs `attack` on a thread against a fresh raw connection, and checks the outcome.
  void expect_protocol_error(const std::function<Status(RawPeer&)>& attack, const std::string& what) {
    std::atomic<int> phase{0};
    Status attack_status;
    bool peer_disconnected = false;
    std::thread t([&] {
      RawPeer peer;
      Status s = peer.connect(addr_, port_);
      if (s.ok()) {
        phase = 1;
        s = attack(peer);
      }
      attack_status = s;
      phase = 2;
      if (s.ok()) peer_disconnected = peer.disconnected(15000);
      phase = 3;
    });
    ASSERT_TRUE(run_until([&] { return phase >= 1 || phase == 2; })) << "raw peer could not connect";
    ASSERT_TRUE(run_until([&] { return phase >= 2; }));
    ASSERT_TRUE(attack_status.ok()) << attack_status.to_string();
    ASSERT_TRUE(run_until([&] { return accepted_.size() == 2 && accepted_[1]->state() == ConnState::kError; }))
        << what << ": server connection state "
        << (accepted_.size() == 2 ? std::string(conn_state_name(accepted_[1]->state())) : "not accepted");
    EXPECT_EQ(accepted_[1]->error().code(), Code::kProtocolError) << accepted_[1]->error().to_string();
    ASSERT_TRUE(run_until([&] { return phase == 3; }));
    t.join();
    EXPECT_TRUE(peer_disconnected) << what << ": the hostile peer was not disconnected";
    // The good connection still round-trips.
    std::string echo;
    accepted_[0]->set_read_handler([](Connection& c) {
      uint8_t buf[64];
      auto n = c.read(buf);
      if (n.ok() && *n > 0) (void)c.write(std::span(buf, *n));
    });
    good_->set_read_handler([&](Connection& c) {
      uint8_t buf[64];
      auto n = c.read(buf);
      if (n.ok()) echo.append(reinterpret_cast<char*>(buf), *n);
    });
    bool sent = false;
    ASSERT_TRUE(run_until([&] {
      if (!sent) sent = good_->write(std::span(reinterpret_cast<const uint8_t*>("ping"), 4)).ok();
      return echo == "ping";
    })) << what << ": the well-behaved connection stopped working";
  }

  std::string addr_;
  uint16_t port_ = 0;
  std::unique_ptr<EventLoop> loop_;
  std::unique_ptr<Listener> listener_;
  std::vector<std::unique_ptr<Connection>> accepted_;
  std::unique_ptr<Connection> good_;
  Status good_status_ = Status(Code::kInProgress, "");
};

TEST_F(HostilePeer, UnknownOpcode) {
  expect_protocol_error([](RawPeer& p) {
    CtrlMsg m;
    m.opcode = 0x7777;
    uint8_t b[kCtrlSize] = {};
    b[0] = 0x77;
    b[1] = 0x77;
    (void)m;
    return p.send_bytes(b, kCtrlSize);
  }, "unknown opcode");
}

// Rendezvous messages are refused from a peer that did not negotiate the extension (the
// server offers it, but this peer never selected bit 2).
TEST_F(HostilePeer, ReadOfferWithoutRendezvous) {
  expect_protocol_error([](RawPeer& p) {
    uint8_t b[kCtrlSize];
    CtrlMsg::read_offer(0, p.data->mr().addr(), 65536, p.data->mr().rkey(), 0).encode(b);
    return p.send_bytes(b, kCtrlSize);
  }, "ReadOffer without the rendezvous bit");
}

TEST_F(HostilePeer, ReadDoneWithoutRendezvous) {
  expect_protocol_error([](RawPeer& p) {
    uint8_t b[kCtrlSize];
    CtrlMsg::read_done(0, 65536).encode(b);
    return p.send_bytes(b, kCtrlSize);
  }, "ReadDone without the rendezvous bit");
}

// Malformed offers after the rendezvous bit was negotiated: each closes that connection with
// a protocol error (the raw peer asked for 1 READ resource each way, so the limit is 1).
TEST_F(HostilePeer, ReadOfferAtTheWrongStreamPosition) {
  expect_protocol_error([](RawPeer& p) {
    CONDUIT_RETURN_IF_ERROR(p.negotiate(rdma::kFeatureRendezvous));
    return p.send_ctrl(CtrlMsg::read_offer(0, p.data->mr().addr(), 65536, p.data->mr().rkey(), 12345));
  }, "ReadOffer at position 12345 before any byte");
}

TEST_F(HostilePeer, ReadOfferWithATagBeyondTheLimit) {
  expect_protocol_error([](RawPeer& p) {
    CONDUIT_RETURN_IF_ERROR(p.negotiate(rdma::kFeatureRendezvous));
    return p.send_ctrl(CtrlMsg::read_offer(5, p.data->mr().addr(), 65536, p.data->mr().rkey(), 0));
  }, "ReadOffer tag 5 with 1 offer negotiated");
}

TEST_F(HostilePeer, ReadOfferLargerThan16MiB) {
  expect_protocol_error([](RawPeer& p) {
    CONDUIT_RETURN_IF_ERROR(p.negotiate(rdma::kFeatureRendezvous));
    return p.send_ctrl(CtrlMsg::read_offer(0, p.data->mr().addr(), rdma::kMaxRendezvous + 1, p.data->mr().rkey(), 0));
  }, "ReadOffer of 16 MiB + 1");
}

TEST_F(HostilePeer, ReadOfferOutsideWhatThePeerRegistered) {
  // The READ fails with a remote access error at the offering peer: the reader reports it.
  expect_protocol_error([](RawPeer& p) {
    CONDUIT_RETURN_IF_ERROR(p.negotiate(rdma::kFeatureRendezvous));
    const uint64_t past_end = p.data->mr().addr() + p.data->mr().size() - 100;
    return p.send_ctrl(CtrlMsg::read_offer(0, past_end, 65536, p.data->mr().rkey(), 0));
  }, "ReadOffer beyond the peer's region");
  EXPECT_NE(accepted_[1]->error().to_string().find("RDMA READ"), std::string::npos) << accepted_[1]->error().to_string();
}

TEST_F(HostilePeer, ReadDoneForNoOffer) {
  expect_protocol_error([](RawPeer& p) {
    CONDUIT_RETURN_IF_ERROR(p.negotiate(rdma::kFeatureRendezvous));
    return p.send_ctrl(CtrlMsg::read_done(0, 65536));
  }, "ReadDone with no offer outstanding");
  EXPECT_NE(accepted_[1]->error().to_string().find("no offer outstanding"), std::string::npos);
}

// Setup reserves RDMA READ resources (for the rendezvous extension, negotiated later): the
// server accepts with as many as the requester asked, up to the device's limits and 16,
// never more than the requester asked in either direction (rdma_accept(3): it serves at
// most the requester's initiator depth and issues at most the requester's responder
// resources), and a Valkey-like requester asking 1 and 1 gets exactly that. Asymmetric asks
// tell the two directions apart.
TEST_F(HostilePeer, SetupReservesReadResources) {
  auto dev = verbs::testing::open_test_device();
  ASSERT_TRUE(dev.ok()) << dev.status().to_string();
  const int dev_init = (*dev)->attr().max_qp_init_rd_atom, dev_resp = (*dev)->attr().max_qp_rd_atom;
  struct Ask {
    int initiator, responder;
  } asks[] = {{1, 1}, {4, 4}, {64, 64}, {1, 8}, {8, 1}, {2, 5}};
  for (const Ask& ask : asks) {
    SCOPED_TRACE("asked initiator " + std::to_string(ask.initiator) + " responder " + std::to_string(ask.responder));
    std::atomic<bool> done{false};
    Status st;
    RawPeer peer;
    std::thread t([&] {
      st = peer.connect(addr_, port_, static_cast<uint8_t>(ask.initiator), static_cast<uint8_t>(ask.responder));
      done = true;
    });
    ASSERT_TRUE(run_until([&] { return done.load(); }));
    t.join();
    ASSERT_TRUE(st.ok()) << st.to_string();  // connect() waits for the server's RegisterXferMemory
    // Seen from the requester: its READs are bounded by the server's responder resources
    // (<= what it asked to issue), the server's READs by its initiator depth (<= what the
    // requester said it serves).
    EXPECT_EQ(peer.reply_initiator_depth, std::min({ask.initiator, dev_resp, rdma::kMaxReadDepth}));
    EXPECT_EQ(peer.reply_responder_resources, std::min({ask.responder, dev_init, rdma::kMaxReadDepth}));
  }
}

TEST_F(HostilePeer, ShortControlMessage) {
  expect_protocol_error([](RawPeer& p) {
    uint8_t b[kCtrlSize] = {};
    b[1] = 2;  // a keepalive, but only 16 bytes of it
    return p.send_bytes(b, 16);
  }, "short control message");
}

TEST_F(HostilePeer, RegisterXferMemoryOutOfRange) {
  expect_protocol_error([](RawPeer& p) {
    return p.send_ctrl(CtrlMsg::register_xfer(p.data->mr().addr(), 100, p.data->mr().rkey()));
  }, "RegisterXferMemory length 100");
}

TEST_F(HostilePeer, ImmLargerThanTheGrantedSpace) {
  expect_protocol_error([](RawPeer& p) { return p.write_imm(64, p.server_xfer.length + 1); },
                        "imm beyond the buffer");
}

TEST_F(HostilePeer, UnsupportedFeatureSelection) {
  expect_protocol_error([](RawPeer& p) {
    return p.send_ctrl(CtrlMsg::feature(rdma::Opcode::kSetClientFeature, 1ull << 63));
  }, "unsupported feature bits");
}

TEST_F(HostilePeer, KeepaliveSilence) {
  // The peer shows it speaks keepalive, then goes silent past the 1 s timeout.
  expect_protocol_error([](RawPeer& p) { return p.send_ctrl(CtrlMsg::keepalive()); }, "keepalive silence");
}

// Conduit's ring extension (protocol.h): a Credit from a peer that never negotiated it, a
// Credit for more than was ever written, and a ring writer that writes past its credits.
TEST_F(HostilePeer, CreditWithoutRingMode) {
  expect_protocol_error([](RawPeer& p) { return p.send_ctrl(CtrlMsg::credit(4096)); }, "Credit without ring");
}

TEST_F(HostilePeer, CreditForBytesNeverWritten) {
  expect_protocol_error([](RawPeer& p) {
    CONDUIT_RETURN_IF_ERROR(p.negotiate_ring());
    return p.send_ctrl(CtrlMsg::credit(4096));  // the server has written nothing
  }, "Credit beyond what is in flight");
}

TEST_F(HostilePeer, RingWriteBeyondTheCredits) {
  expect_protocol_error([](RawPeer& p) {
    CONDUIT_RETURN_IF_ERROR(p.negotiate_ring());
    // Fill the whole buffer (nobody reads it on the server), then one byte more: the
    // ring wraps only into space that was credited back.
    CONDUIT_RETURN_IF_ERROR(p.write_imm(64, p.server_xfer.length));
    return p.write_imm(64, 1);
  }, "ring write beyond the credits");
}

// Conduit's half-close extension (protocol.h): a HalfClose from a peer that did not
// negotiate it, one at a position other than the bytes written, and data after it.
TEST_F(HostilePeer, HalfCloseWithoutNegotiation) {
  expect_protocol_error([](RawPeer& p) { return p.send_ctrl(CtrlMsg::half_close(0)); }, "HalfClose without bit 3");
}

TEST_F(HostilePeer, HalfCloseAtTheWrongPosition) {
  expect_protocol_error([](RawPeer& p) {
    CONDUIT_RETURN_IF_ERROR(p.negotiate(rdma::kFeatureHalfClose));
    CONDUIT_RETURN_IF_ERROR(p.write_imm(64, 64));
    return p.send_ctrl(CtrlMsg::half_close(63));  // 64 bytes arrived before it
  }, "HalfClose at the wrong position");
}

TEST_F(HostilePeer, DataAfterHalfClose) {
  expect_protocol_error([](RawPeer& p) {
    CONDUIT_RETURN_IF_ERROR(p.negotiate(rdma::kFeatureHalfClose));
    CONDUIT_RETURN_IF_ERROR(p.write_imm(64, 64));
    CONDUIT_RETURN_IF_ERROR(p.send_ctrl(CtrlMsg::half_close(64)));
    return p.write_imm(64, 64);
  }, "data after HalfClose");
}

// The same attacks on a listener whose connections share an SRQ: the hostile connection is
// closed, the good one carries on, and the hostile connection's slots all come back.
class HostilePeerSrq : public HostilePeer {
 protected:
  std::string listen_options() const override { return "&srq=1&srq_depth=64"; }
  void expect_slots_back() {
    accepted_.resize(1);  // destroys the failed connection
    EXPECT_TRUE(run_until([&] {
      auto st = rdma::srq_stats(*loop_);
      return st.size() == 1 && st[0].posted == st[0].depth && st[0].attached == 1;
    })) << "SRQ slots were lost";
  }
};

TEST_F(HostilePeerSrq, UnknownOpcode) {
  expect_protocol_error([](RawPeer& p) {
    uint8_t b[kCtrlSize] = {};
    b[0] = 0x77;
    b[1] = 0x77;
    return p.send_bytes(b, kCtrlSize);
  }, "unknown opcode");
  expect_slots_back();
}

TEST_F(HostilePeerSrq, ShortControlMessage) {
  expect_protocol_error([](RawPeer& p) {
    uint8_t b[kCtrlSize] = {};
    b[1] = 2;
    return p.send_bytes(b, 16);
  }, "short control message");
  expect_slots_back();
}

TEST_F(HostilePeerSrq, ImmLargerThanTheGrantedSpace) {
  expect_protocol_error([](RawPeer& p) { return p.write_imm(64, p.server_xfer.length + 1); },
                        "imm beyond the buffer");
  expect_slots_back();
}

// A flood of zero-length WRITE_WITH_IMMs (each takes a receive) far beyond the SRQ's depth:
// without a shared receive CQ sized to the SRQ, a per-connection CQ would overflow here.
TEST_F(HostilePeerSrq, FloodOfImmediatesIsAbsorbed) {
  constexpr int kWrites = 640;  // 10 x the SRQ's depth
  std::atomic<bool> done{false}, checked{false};
  Status st;
  std::thread t([&] {
    RawPeer peer;
    st = peer.connect(addr_, port_);
    int outstanding = 0;
    for (int i = 0; st.ok() && i < kWrites; ++i) {
      st = peer.write_imm(0, 0);
      ++outstanding;
      // Keep our send queue (32) from overrunning; re-post receives our keepalives take.
      const uint64_t deadline = monotonic_ns() + 20000 * kMs;
      while (st.ok() && (outstanding >= 16 || (i == kWrites - 1 && outstanding > 0))) {
        if (monotonic_ns() > deadline) st = Status(Code::kTimedOut, "flood stalled");
        Completion wc[16];
        auto n = peer.cq->poll(wc);
        if (!n.ok()) st = n.status();
        for (int k = 0; st.ok() && k < *n; ++k) {
          if (!wc[k].ok()) st = wc[k].as_status();
          else if (wc[k].opcode == IBV_WC_RECV) st = peer.post_recv(static_cast<uint32_t>(wc[k].wr_id));
          else --outstanding;
        }
      }
    }
    done = true;
    while (!checked) std::this_thread::sleep_for(std::chrono::milliseconds(5));  // keep the QP up meanwhile
  });
  ASSERT_TRUE(run_until([&] { return done.load(); }, 120000));
  EXPECT_TRUE(st.ok()) << st.to_string();
  ASSERT_EQ(accepted_.size(), 2u);
  EXPECT_TRUE(run_until([&] { return rdma::srq_stats(*loop_)[0].completions >= size_t{kWrites}; }));
  EXPECT_EQ(accepted_[1]->state(), ConnState::kConnected) << accepted_[1]->error().to_string();
  checked = true;
  t.join();
  expect_slots_back();
}

}  // namespace
}  // namespace conduit::transport
