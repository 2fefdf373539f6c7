// conduit::rma tagged send/recv -- NCCL's model on top of an rma::Endpoint.
//
// The receiver posts buffers (irecv, up to kMaxGroup at once as one request); a descriptor
// per posted buffer (address, length, key, tag, the group's sequence number) reaches the
// sender through a FIFO in the SENDER's registered memory that the RECEIVER RDMA-writes (a
// write with immediate, so the sender's loop wakes: it never polls the FIFO).  The sender
// RDMA-writes the message straight into the posted buffer and then a 16-byte completion
// record into the receiver's completion area with an immediate naming the FIFO slot and
// element: zero copies on both sides.  Wire layout: docs/PROTOCOL.md, "rma tagged".
//
//   auto a = rma::TaggedEndpoint::create(std::move(endpoint));   // each side, connected
//   send a->hello() to the peer by any channel; a->start(peer_hello);
//   receiver: auto region = t->register_buffer(buf, len);        // once (registers over rdma)
//             auto r = t->irecv(tags, {RecvBuffer{span, *region}});
//   sender:   auto s = t->isend(tag, span);
//   both:     t->set_progress_handler(...); then t->test(*r) -> done? sizes, status
//
// Matching: sends and posted buffers of one tag pair up in the order they were issued, so
// the messages of one tag complete in order; different tags are independent.  A send whose
// tag has no posted buffer waits (queued, the loop sleeps) until the receiver posts one.
// A message larger than the buffer it matched fails that send and that receive with
// kResourceExhausted (nothing is written into the buffer); the endpoint stays usable.
//
// Threading: loop thread only (the endpoint's loop), like the endpoint; handlers run there.
// Ownership: takes the Endpoint (and its imm, ready and close handlers).  isend's data is the
// endpoint's until the send is done (test says so or the endpoint failed).  irecv's buffers
// are written by the peer until the receive is done; they must lie inside a region from
// register_buffer() that stays registered until then.
// Cost: isend = one batch (one doorbell over rdma) of ceil(size/max_op) writes + the 16-byte
// record write; irecv = one 288-byte write.  Allocations per request: its map entry, and for
// a send the batch's op list and the ops' callbacks (the endpoint's own per-op cost).
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "conduit/rma/endpoint.h"

namespace conduit::rma {

struct TaggedOptions {
  uint32_t slots = 64;          // FIFO slots: receive requests in flight at most (both sides equal)
  uint32_t max_requests = 256;  // requests (sends + receives) issued and not yet reaped by test()
};

// A posted receive buffer: `data` lies inside `region` (from register_buffer).  A buffer of
// size 0 needs no region (it takes only a zero-byte message).
struct RecvBuffer {
  std::span<uint8_t> data;
  Descriptor region;
};

struct Request {
  uint64_t id = 0;
  friend bool operator==(const Request&, const Request&) = default;
};

// What a finished request reports.  status: OK; kResourceExhausted (message larger than the posted
// buffer); kCancelled (this side closed); kClosed / kIoError / kProtocolError (the endpoint
// failed: the peer closed, the queue pair failed, the peer broke the protocol).
// sizes[i]: bytes received into buffer i (receive) or sent (send: sizes[0]).
struct Completion {
  Status status;
  uint32_t count = 0;
  std::array<uint64_t, 8> sizes{};
};

class TaggedEndpoint {
 public:
  static constexpr uint32_t kMaxGroup = 8;     // buffers in one irecv (NCCL_NET_IB_MAX_RECVS)
  static constexpr size_t kHelloSize = 80;     // docs/PROTOCOL.md, "rma tagged"
  static constexpr size_t kFifoSlotBytes = 288;  // one posted group in the sender's FIFO
  static constexpr size_t kRecordBytes = 16;     // one completion record
  static constexpr uint32_t kMaxSlots = 4096;    // the immediate has 13 bits for the slot

  // Exposes the FIFO and completion areas (write rights) on a connected endpoint.
  static Result<std::unique_ptr<TaggedEndpoint>> create(std::unique_ptr<Endpoint> ep, TaggedOptions o = {});
  ~TaggedEndpoint();  // closes the endpoint: requests not reaped are dropped
  TaggedEndpoint(const TaggedEndpoint&) = delete;
  TaggedEndpoint& operator=(const TaggedEndpoint&) = delete;

  // What the peer needs (its FIFO and completion descriptors): hand it over by any channel,
  // and give the peer's to start().  irecv needs start(); isend may queue before it.
  std::array<uint8_t, kHelloSize> hello() const;
  Status start(std::span<const uint8_t> peer_hello);  // kProtocolError for a bad hello

  // Registration of receive memory for the peer's writes (rights: write only).  A setup-path
  // cost over rdma (a memory region + window).  Keep it registered while receives use it.
  Result<Descriptor> register_buffer(void* addr, size_t len);
  Status deregister_buffer(const Descriptor& d);

  // Queues a send of `data` with `tag`.  kWouldBlock when max_requests are outstanding (reap
  // with test()); kInvalidArgument above the largest message ((depth - 1) * max_op).
  Result<Request> isend(uint32_t tag, std::span<const uint8_t> data);
  // Posts 1..kMaxGroup buffers as one request (done when every buffer got its message).
  // kWouldBlock when `slots` receives are in flight or max_requests are outstanding;
  // kUnavailable before start(); kInvalidArgument for a buffer outside its region.
  Result<Request> irecv(std::span<const uint32_t> tags, std::span<const RecvBuffer> bufs);
  // nullopt: not done yet.  A Completion: done, and the request is released (reaped).
  // kNotFound for an unknown or already reaped request.
  Result<std::optional<Completion>> test(Request r);
  // NCCL's iflush.  Host memory: nothing to do -- a receive reported done by test() has its
  // bytes in place (over rdma the completion of the record's write with immediate follows
  // the data writes on the same RC queue pair; in the emulation the loop copied them), so
  // this is an acquire fence and returns OK.  kClosed when the endpoint is down.
  Status flush();

  // Runs (loop thread) whenever requests finished, or room freed after a kWouldBlock.
  void set_progress_handler(std::function<void(TaggedEndpoint&)> h) { progress_ = std::move(h); }

  Endpoint& endpoint() const { return *ep_; }
  size_t outstanding() const { return reqs_.size(); }
  size_t waiting_sends() const;  // sends queued with no posted buffer matched yet
  uint64_t protocol_wakeups() const { return wakeups_; }  // immediates handled: FIFO posts + records

 private:
  struct Elem {  // a posted buffer, as the sender learnt it from the FIFO
    uint64_t addr = 0, length = 0;
    uint32_t key = 0, generation = 0, tag = 0;
    uint32_t slot = 0, index = 0, seq = 0;
  };
  struct Req {
    bool send = false;
    bool done = false;
    uint32_t tag = 0;
    std::span<const uint8_t> data;  // send
    Completion result;
    // receive
    uint32_t slot = 0, seq = 0;
    uint32_t remaining = 0;
    std::array<uint64_t, kMaxGroup> lengths{};  // kDoneMark once its record arrived
    std::array<uint32_t, kMaxGroup> tags{};
  };
  struct Match {  // a send paired with a posted buffer, waiting to be posted on the endpoint
    uint64_t send_id;
    Elem elem;
  };

  TaggedEndpoint(std::unique_ptr<Endpoint> ep, TaggedOptions o);
  Status setup();
  void on_imm(uint32_t imm, uint32_t length);
  void on_fifo_post(uint32_t slot);
  void on_record(uint32_t slot, uint32_t index);
  void pair(uint32_t tag);
  void pump();  // posts matches and FIFO writes that the endpoint refused for room
  Status post_match(const Match& m);
  Status post_fifo(uint32_t slot);
  void finish(uint64_t id, Status s);
  void fail_all(Status why);
  void protocol_error(const std::string& what);
  void notify();
  uint8_t* fifo_slot(uint32_t slot) { return fifo_.get() + size_t{slot} * kFifoSlotBytes; }

  TaggedOptions options_;
  std::unique_ptr<uint8_t[]> fifo_;       // peer's posts land here (sender role)
  std::unique_ptr<uint8_t[]> cmpl_;       // peer's completion records land here (receiver role)
  std::unique_ptr<uint8_t[]> out_fifo_;   // our posts, staged per slot (receiver role)
  std::unique_ptr<uint8_t[]> out_rec_;    // our completion records, staged (a ring of 2 x depth)
  Descriptor fifo_desc_, cmpl_desc_, peer_fifo_, peer_cmpl_;
  bool started_ = false;
  bool dead_ = false;
  Status dead_why_;
  uint64_t next_id_ = 1;
  std::map<uint64_t, Req> reqs_;
  // receiver role
  uint32_t post_seq_ = 0;                        // groups posted
  std::vector<uint64_t> slot_req_;               // request id by slot (0 = free)
  std::deque<uint32_t> fifo_backlog_;            // slots whose FIFO write waits for room
  // sender role
  uint32_t fifo_seq_ = 0;                        // posts seen
  std::map<uint32_t, std::deque<Elem>> posted_;  // by tag, in posting order
  std::map<uint32_t, std::deque<uint64_t>> sends_;  // by tag, in isend order
  std::deque<Match> match_backlog_;
  uint32_t rec_next_ = 0;                        // next out_rec_ entry
  uint64_t wakeups_ = 0;
  bool in_notify_ = false, notify_again_ = false;
  std::function<void(TaggedEndpoint&)> progress_;
  std::unique_ptr<Endpoint> ep_;  // last: destroyed first (its callbacks still see the rest)
};

}  // namespace conduit::rma
