// rdma_cm connection management.
//
// EventChannel wraps rdma_event_channel; its fd is non-blocking and can sit in epoll.
// Events are delivered as CmEvent *values*: the library copies what an event carries
// (type, status, private data, connection parameters) and acks it at once, so no
// rdma_destroy_id can ever block on an unacked event held somewhere else.
//
// CmId owns an rdma_cm_id and, once create_qp() was called, its QueuePair (destroyed
// first).  A CONNECT_REQUEST event hands over ownership of the new id in CmEvent::new_id.
// Typical client:  create -> resolve_addr -> [ADDR_RESOLVED] -> resolve_route ->
// [ROUTE_RESOLVED] -> create_qp -> connect -> [ESTABLISHED].
// Typical server:  create -> bind -> listen -> [CONNECT_REQUEST: new_id] -> create_qp ->
// accept -> [ESTABLISHED].  Setup-path API throughout; one thread per id at a time.
#pragma once

#include <rdma/rdma_cma.h>
#include <sys/socket.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "conduit/base/status.h"
#include "conduit/verbs/memory.h"
#include "conduit/verbs/qp.h"

namespace conduit::verbs {

// A resolved socket address (IPv4 or IPv6).
struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;
  sockaddr* get() { return reinterpret_cast<sockaddr*>(&storage); }
  const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage); }
  std::string to_string() const;  // "192.0.2.1:7471", "[::1]:7471"
  // Resolves a numeric or named host; an empty host means the wildcard address.
  static Result<SocketAddress> resolve(std::string_view host, uint16_t port);
  static SocketAddress from(const sockaddr* sa);
};

class CmId;

class EventChannel {
 public:
  static Result<std::shared_ptr<EventChannel>> create();
  ~EventChannel();
  EventChannel(const EventChannel&) = delete;
  EventChannel& operator=(const EventChannel&) = delete;

  rdma_event_channel* native_handle() const { return ch_; }
  int fd() const { return ch_->fd; }

 private:
  explicit EventChannel(rdma_event_channel* ch) : ch_(ch) {}
  rdma_event_channel* ch_;
};

struct CmEvent {
  rdma_cm_event_type type = RDMA_CM_EVENT_ADDR_ERROR;
  int status = 0;                    // the event's status (negative errno or reject reason)
  rdma_cm_id* id = nullptr;          // the id the event is about (not owned)
  rdma_cm_id* listen_id = nullptr;   // for CONNECT_REQUEST: the listening id
  CmId* owner = nullptr;             // the CmId wrapping `id`, if any (from id->context)
  std::vector<uint8_t> private_data; // copied out of the event
  uint8_t initiator_depth = 0;
  uint8_t responder_resources = 0;
  std::unique_ptr<CmId> new_id;      // CONNECT_REQUEST only: the new connection's id

  std::string_view name() const { return rdma_event_str(type); }
  std::string to_string() const;     // "ESTABLISHED", "REJECTED (status 28)"
};

class CmId {
 public:
  static Result<std::unique_ptr<CmId>> create(std::shared_ptr<EventChannel> channel,
                                              rdma_port_space ps = RDMA_PS_TCP);
  ~CmId();
  CmId(const CmId&) = delete;
  CmId& operator=(const CmId&) = delete;

  rdma_cm_id* native_handle() const { return id_; }
  const std::shared_ptr<EventChannel>& channel() const { return channel_; }

  conduit::Status bind(const SocketAddress& addr);
  conduit::Status listen(int backlog);
  conduit::Status resolve_addr(const SocketAddress& dst, int timeout_ms, const SocketAddress* src = nullptr);
  conduit::Status resolve_route(int timeout_ms);
  // Private data: at most 56 bytes on connect and 196 on accept/reject (RDMA_PS_TCP).
  // retry_count: transport retries (lost ACKs) before the QP fails with "retry exceeded",
  // 0..7; rnr_retry: receiver-not-ready retries, 0..7 where 7 means forever.
  conduit::Status connect(std::span<const uint8_t> private_data = {}, uint8_t initiator_depth = 1,
                          uint8_t responder_resources = 1, uint8_t rnr_retry = 7, uint8_t retry_count = 7);
  conduit::Status accept(std::span<const uint8_t> private_data = {}, uint8_t initiator_depth = 1,
                         uint8_t responder_resources = 1, uint8_t rnr_retry = 7, uint8_t retry_count = 7);
  // The QP's local ACK timeout, 4.096 us * 2^exponent (0..31; 0 = infinite), set before
  // connect/accept (rdma_set_option RDMA_OPTION_ID_ACK_TIMEOUT).  Without it rdma_cm picks
  // one from the path (on RoCE about 4.096 us * 2^(packet lifetime + 1)).
  conduit::Status set_ack_timeout(uint8_t exponent);
  conduit::Status reject(std::span<const uint8_t> private_data = {});
  conduit::Status disconnect();
  // Moves the id (and its future events) to another channel, e.g. per-thread channels.
  conduit::Status migrate(std::shared_ptr<EventChannel> channel);

  // The device context this id is bound to (valid after bind to a device address,
  // resolve_addr, or for ids from CONNECT_REQUEST); null before.
  std::shared_ptr<Context> context();
  uint8_t port_num() const { return id_->port_num; }

  // Creates the id's RC QP (rdma_create_qp); rdma_cm drives its state on connect/accept.
  Result<QueuePair*> create_qp(std::shared_ptr<ProtectionDomain> pd, std::shared_ptr<CompletionQueue> send_cq,
                               std::shared_ptr<CompletionQueue> recv_cq, const QpOptions& options,
                               std::shared_ptr<SharedReceiveQueue> srq = {});
  // Takes a QP made ahead of time with QueuePair::create (RESET, on a PD of this id's
  // device) as the id's own, doing what rdma_create_qp does after creating one: INIT with
  // the attributes rdma_cm holds for the id (port, P_Key index, access), then the id's
  // public `qp` and `pd` fields, so that rdma_cm drives it on connect/accept and
  // rdma_destroy_qp destroys it -- exactly as a QP from create_qp.  Lets a caller keep
  // spare QPs and take the creation (~1-3 ms under Soft-RoCE) off the connection's setup
  // path.  Not done: ECE (enhanced connection establishment, ibv_query_ece), which
  // rdma_create_qp queries from the provider; rxe has none.  On error the QP is destroyed.
  // One ibv_modify_qp; setup path.
  Result<QueuePair*> adopt_qp(std::unique_ptr<QueuePair> qp);
  QueuePair* qp() const { return qp_.get(); }
  void destroy_qp() { qp_.reset(); }
  // Brings the connected id's QP back from ERR without a new connection: RESET, then INIT,
  // RTR and RTS with the attributes rdma_cm holds for the connection (path, peer QPN,
  // timeouts, rd_atomic), both PSNs set to `psn`.  The peer must do the same with the same
  // `psn` before either side's packets get through (until then they are dropped and
  // retransmitted).  Posted WRs must all have completed (flushed) first: RESET discards
  // them.  Four ibv_modify_qp calls; loop thread of the id's owner.
  conduit::Status reset_qp(uint32_t psn);

  SocketAddress local_address() const;
  SocketAddress peer_address() const;

  // One pointer of the owner's choosing, e.g. the connection that handles this id's events.
  void set_user_data(void* p) { user_data_ = p; }
  void* user_data() const { return user_data_; }

  // Waits (poll(2) on the channel fd) for the next event on the channel.
  // Non-blocking when timeout_ms == 0 (kWouldBlock when nothing is pending).
  static Result<CmEvent> next_event(const std::shared_ptr<EventChannel>& channel, int timeout_ms);
  // next_event(), requiring `expected`; any other event becomes an error naming both.
  static Result<CmEvent> expect_event(const std::shared_ptr<EventChannel>& channel, rdma_cm_event_type expected,
                                      int timeout_ms);

 private:
  CmId(std::shared_ptr<EventChannel> channel, rdma_cm_id* id);
  std::shared_ptr<EventChannel> channel_;
  std::shared_ptr<Context> context_;
  rdma_cm_id* id_;
  std::unique_ptr<QueuePair> qp_;  // destroyed before id_ (in ~CmId)
  void* user_data_ = nullptr;
};

}  // namespace conduit::verbs
