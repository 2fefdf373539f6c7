// A raw verbs client for hostile-peer tests: it speaks the Valkey RDMA protocol by hand
// (not through Conduit's transport), so a test can make it break the protocol.
#pragma once

#include <cstring>
#include <memory>
#include <string>

#include "conduit/base/clock.h"
#include "conduit/verbs/verbs.h"
#include "rdma/protocol.h"

namespace conduit::transport::testing {

using namespace conduit::verbs;
using rdma::CtrlMsg;
using rdma::kCtrlSize;

// A minimal Valkey-protocol client written directly against the verbs layer.
struct RawPeer {
  std::shared_ptr<EventChannel> ch;
  std::unique_ptr<CmId> id;
  std::shared_ptr<ProtectionDomain> pd;
  std::shared_ptr<CompletionQueue> cq;
  std::unique_ptr<RegisteredBuffer> ctrl;  // 16 recv slots, then 16 send slots
  std::unique_ptr<RegisteredBuffer> data;
  CtrlMsg server_xfer;
  int sends = 0;

  // The server's accept (the CM reply) as rdma_cm reports it to us, from our side:
  // initiator depth = the server's responder resources (READs we may issue), responder
  // resources = the server's initiator depth (READs we must serve).
  uint8_t reply_initiator_depth = 0;
  uint8_t reply_responder_resources = 0;

  // Asks for `initiator_depth` outstanding READs of our own and serves
  // `responder_resources` of the server's (Valkey asks 1 and 1).
  Status connect(const std::string& host, uint16_t port, uint8_t initiator_depth = 1,
                 uint8_t responder_resources = 1) {
    CONDUIT_ASSIGN_OR_RETURN(ch, EventChannel::create());
    CONDUIT_ASSIGN_OR_RETURN(id, CmId::create(ch));
    CONDUIT_ASSIGN_OR_RETURN(SocketAddress dst, SocketAddress::resolve(host, port));
    CONDUIT_RETURN_IF_ERROR(id->resolve_addr(dst, 2000));
    CONDUIT_ASSIGN_OR_RETURN(CmEvent e1, CmId::expect_event(ch, RDMA_CM_EVENT_ADDR_RESOLVED, 5000));
    CONDUIT_RETURN_IF_ERROR(id->resolve_route(2000));
    CONDUIT_ASSIGN_OR_RETURN(CmEvent e2, CmId::expect_event(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, 5000));
    CONDUIT_ASSIGN_OR_RETURN(pd, ProtectionDomain::create(id->context()));
    CONDUIT_ASSIGN_OR_RETURN(cq, CompletionQueue::create(id->context(), 128));
    QpOptions o;
    o.max_send_wr = 32;
    o.max_recv_wr = 32;
    CONDUIT_ASSIGN_OR_RETURN(QueuePair * qp, id->create_qp(pd, cq, cq, o));
    CONDUIT_ASSIGN_OR_RETURN(auto c, RegisteredBuffer::create(pd, 32 * kCtrlSize, kLocalOnly));
    ctrl = std::make_unique<RegisteredBuffer>(std::move(c));
    CONDUIT_ASSIGN_OR_RETURN(auto d, RegisteredBuffer::create(pd, 1 << 20, kRemoteAll));
    data = std::make_unique<RegisteredBuffer>(std::move(d));
    for (uint32_t i = 0; i < 16; ++i) CONDUIT_RETURN_IF_ERROR(post_recv(i));
    (void)qp;
    CONDUIT_RETURN_IF_ERROR(id->connect({}, initiator_depth, responder_resources, 7));
    CONDUIT_ASSIGN_OR_RETURN(CmEvent e3, CmId::expect_event(ch, RDMA_CM_EVENT_ESTABLISHED, 5000));
    reply_initiator_depth = e3.initiator_depth;
    reply_responder_resources = e3.responder_resources;
    // The server advertises its RX buffer first thing.
    CONDUIT_ASSIGN_OR_RETURN(server_xfer, recv_ctrl(5000));
    if (server_xfer.opcode != static_cast<uint16_t>(rdma::Opcode::kRegisterXferMemory))
      return Status(Code::kProtocolError, "expected RegisterXferMemory, got " + server_xfer.to_string());
    return {};
  }
  Status post_recv(uint32_t slot) {
    ibv_sge sge = ctrl->sge(slot * kCtrlSize, kCtrlSize);
    RecvWr wr = RecvWr::make(&sge, 1, slot);
    return id->qp()->post_recv(wr);
  }
  Result<CtrlMsg> recv_ctrl(int timeout_ms) {
    const uint64_t deadline = monotonic_ns() + static_cast<uint64_t>(timeout_ms) * 1'000'000;
    Completion wc[1];
    while (monotonic_ns() < deadline) {
      CONDUIT_ASSIGN_OR_RETURN(int n, cq->poll(wc));
      if (n == 0) continue;
      if (!wc[0].ok()) return wc[0].as_status();
      if (wc[0].opcode != IBV_WC_RECV) continue;  // our own send completions
      auto m = CtrlMsg::decode(ctrl->data() + wc[0].wr_id * kCtrlSize, wc[0].byte_len);
      CONDUIT_RETURN_IF_ERROR(post_recv(static_cast<uint32_t>(wc[0].wr_id)));
      return m;
    }
    return Status(Code::kTimedOut, "no control message");
  }
  Status send_bytes(const uint8_t* bytes, uint32_t len) {
    const size_t off = (16 + (sends++ % 16)) * kCtrlSize;
    std::memcpy(ctrl->data() + off, bytes, len);
    ibv_sge sge = ctrl->sge(off, len);
    SendWr wr = SendWr::send(&sge, 1).signaled();
    return id->qp()->post_send(wr);
  }
  Status send_ctrl(const CtrlMsg& m) {
    uint8_t b[kCtrlSize];
    m.encode(b);
    return send_bytes(b, kCtrlSize);
  }
  Status write_imm(uint32_t len, uint32_t imm) {
    ibv_sge sge = data->sge(0, len);
    SendWr wr = SendWr::write_imm(&sge, 1, server_xfer.addr, server_xfer.rkey, imm).signaled();
    return id->qp()->post_send(wr);
  }
  // Asks for the server's features and switches `bits` on, as a Conduit client would.
  Status negotiate(uint64_t bits) {
    CONDUIT_RETURN_IF_ERROR(send_ctrl(CtrlMsg::feature(rdma::Opcode::kGetServerFeature, bits)));
    for (;;) {
      CONDUIT_ASSIGN_OR_RETURN(CtrlMsg m, recv_ctrl(5000));
      if (m.opcode != static_cast<uint16_t>(rdma::Opcode::kGetServerFeature)) continue;  // keepalives
      if ((m.features & bits) != bits) return Status(Code::kProtocolError, "server does not offer the features asked");
      return send_ctrl(CtrlMsg::feature(rdma::Opcode::kSetClientFeature, bits));
    }
  }
  Status negotiate_ring() { return negotiate(rdma::kFeatureRing); }
  // True once the server has disconnected us.
  bool disconnected(int timeout_ms) {
    auto ev = CmId::next_event(ch, timeout_ms);
    return ev.ok() && ev->type == RDMA_CM_EVENT_DISCONNECTED;
  }
};

}  // namespace conduit::transport::testing
