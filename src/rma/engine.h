// What every rma endpoint shares, whatever carries it: state, the exposure table, the
// local checks, the in-flight queue and its bound, statistics and handlers.  A transport
// engine (emulated.cc over tcp/shm, verbs_engine.cc over rdma) adds how ops are posted and
// how exposures are made reachable.  Loop thread only.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "conduit/rma/endpoint.h"

namespace conduit::rma {

struct Exposure {
  uint64_t addr = 0;
  uint64_t length = 0;
  Rights rights = Rights::kNone;
  uint32_t key = 0;
  uint32_t generation = 0;
  std::shared_ptr<void> native;  // the engine's handles (rdma: MR and window); released on revoke
  Descriptor descriptor() const { return {addr, length, key, rights, generation}; }
};

constexpr bool is_atomic(OpKind k) { return k == OpKind::kFetchAdd || k == OpKind::kCompareSwap; }
constexpr Rights rights_needed(OpKind k) {
  switch (k) {
    case OpKind::kRead: return Rights::kRead;
    case OpKind::kWrite:
    case OpKind::kWriteImm: return Rights::kWrite;
    case OpKind::kFetchAdd:
    case OpKind::kCompareSwap: return Rights::kAtomic;
  }
  return kAllRights;
}

// Why a peer's request was refused (the emulation's response status, docs/PROTOCOL.md).
enum class Refusal : uint16_t { kNone = 0, kKey = 1, kRights = 2, kRange = 3, kAlign = 4 };
// kPermissionDenied "remote access error: ..." for a refusal.
Status refusal_status(Refusal r);
// Where an op lands, relative to a descriptor: checks bounds (overflow-safe), the op's
// rights and atomic alignment.  OK or kPermissionDenied/kInvalidArgument naming the op.
Status check_against(const Descriptor& d, OpKind kind, uint64_t offset, uint64_t length);
// The first of those checks an op fails (kNone: it fits), inline: submit() runs it for
// every op, and check_against() turns it into the message.
enum class Misfit : uint8_t { kNone, kRights, kEmpty, kRange, kAlign };
inline Misfit misfit(const Descriptor& d, OpKind kind, uint64_t offset, uint64_t length) {
  if (!contains(d.rights, rights_needed(kind))) return Misfit::kRights;
  if (length == 0) return Misfit::kEmpty;
  if (offset > d.length || length > d.length - offset) return Misfit::kRange;
  if (is_atomic(kind) && (d.addr + offset) % 8 != 0) return Misfit::kAlign;
  return Misfit::kNone;
}

// The ops in flight, oldest first: a ring of `capacity` slots made once (submit() bounds the
// count by the endpoint's depth), so queueing and completing an op allocate nothing and an
// index is an add and a compare.  Loop thread only.
class OpRing {
 public:
  explicit OpRing(size_t capacity) : slots_(capacity == 0 ? 1 : capacity) {}
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const Op& operator[](size_t i) const { return slots_[wrap(head_ + i)]; }  // i < size()
  Op& front() { return slots_[head_]; }
  void push_back(Op&& op) {  // size() < the capacity
    slots_[wrap(head_ + size_)] = std::move(op);
    ++size_;
  }
  // Drops the oldest op and hands back its callback: only the callback moves (a later push
  // overwrites the slot's other fields).
  OpCallback pop_front_callback() {
    OpCallback done = std::move(slots_[head_].done);
    head_ = wrap(head_ + 1);
    --size_;
    return done;
  }
  Op pop_back() {
    --size_;
    return std::move(slots_[wrap(head_ + size_)]);
  }

 private:
  size_t wrap(size_t i) const { return i >= slots_.size() ? i - slots_.size() : i; }  // i < 2 * capacity
  std::vector<Op> slots_;
  size_t head_ = 0;
  size_t size_ = 0;
};

class Engine {
 public:
  Engine(reactor::EventLoop& loop, EndpointOptions options, std::string transport);
  virtual ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  void attach(Endpoint* owner, Endpoint::ConnectCallback on_connect) {
    owner_ = owner;
    on_connect_ = std::move(on_connect);
  }

  // Endpoint's API, implemented once here.
  Result<Descriptor> expose(void* addr, size_t len, Rights rights);
  Status revoke(const Descriptor& d);
  Status submit(std::span<Op> ops);
  void close();

  EndpointState state() const { return state_; }
  const Status& error() const { return error_; }
  const std::string& transport() const { return transport_; }
  const EndpointOptions& options() const { return options_; }
  const EndpointStats& stats() const { return stats_; }
  reactor::EventLoop& loop() const { return loop_; }
  size_t in_flight() const { return inflight_.size(); }
  virtual std::string addresses() const = 0;  // "local->peer"

  std::function<void(Endpoint&)> ready_handler;
  std::function<void(Endpoint&)> close_handler;
  ImmHandler imm_handler;

 protected:
  // Make an exposure reachable (fill key and native); undo it.  Called connected only.
  virtual Status expose_native(Exposure& e) = 0;
  virtual void revoke_native(Exposure& e) = 0;
  // Post checked ops (already queued at the back of inflight_, oldest first): all or none.
  virtual Status post(size_t first, size_t count) = 0;
  // Release the transport (no callbacks); called once on close or failure.
  virtual void shutdown_native() = 0;

  // For engines: the connection is up (or failed before it was).
  void connected(Status s);
  // The oldest op in flight finished.
  void complete_front(Status s, uint64_t old_value = 0);
  // The endpoint failed: state kError, ops in flight fail with `why`, close handler runs.
  void fail(Status why);
  // Server side: the exposure a peer request may use, or the remote access error why not.
  const Exposure* lookup(uint32_t key, uint32_t generation, uint64_t addr, uint64_t length, Rights need,
                         Refusal* why);
  void count_served(bool ok) { ok ? ++stats_.served : ++stats_.refused; }
  const Op& inflight_at(size_t i) const { return inflight_[i]; }
  Op& front() { return inflight_.front(); }

  reactor::EventLoop& loop_;
  EndpointOptions options_;
  std::string transport_;
  EndpointState state_ = EndpointState::kConnecting;
  Status error_;
  EndpointStats stats_;

 private:
  void finish(Status why, EndpointState final_state);
  Endpoint* owner_ = nullptr;
  Endpoint::ConnectCallback on_connect_;
  OpRing inflight_;  // capacity: options_.depth
  std::map<uint32_t, Exposure> exposures_;  // by key
  uint32_t next_generation_ = 1;
  bool want_ready_ = false;
};

// A listener's inbound endpoints whose handshake has not finished: owned here until the
// engine reports connected (then handed to the AcceptCallback) or failed (then destroyed
// once its stack unwinds).  Loop thread.
class PendingAccepts {
 public:
  PendingAccepts(reactor::EventLoop& loop, Listener::AcceptCallback cb) : loop_(loop), on_accept_(std::move(cb)) {}
  ~PendingAccepts() { clear(); }
  // Wraps `engine` in an endpoint held here; returns the engine to start.
  template <typename E>
  E* add(std::unique_ptr<E> engine) {
    E* raw = engine.get();
    adopt(std::move(engine));
    return raw;
  }
  // Drops `engine`'s endpoint (its start failed).
  void drop(Engine* engine);
  void clear();  // destroys every pending endpoint (their handshakes never finished)

 private:
  void adopt(std::unique_ptr<Engine> engine);
  reactor::EventLoop& loop_;
  Listener::AcceptCallback on_accept_;
  std::map<Engine*, Endpoint*> pending_;
};

// Engines by scheme (emulated.cc, verbs_engine.cc); `transport_url` has the rma options removed.
Result<std::unique_ptr<Engine>> connect_emulated(reactor::EventLoop& loop, const std::string& transport_url,
                                                 const EndpointOptions& o);
Result<std::unique_ptr<Listener>> listen_emulated(reactor::EventLoop& loop, const std::string& transport_url,
                                                  const EndpointOptions& o, Listener::AcceptCallback cb);
Result<std::unique_ptr<Engine>> connect_verbs(reactor::EventLoop& loop, const std::string& host, uint16_t port,
                                              const EndpointOptions& o);
Result<std::unique_ptr<Listener>> listen_verbs(reactor::EventLoop& loop, const std::string& host, uint16_t port,
                                               const EndpointOptions& o, Listener::AcceptCallback cb);
bool verbs_device_present();

}  // namespace conduit::rma
