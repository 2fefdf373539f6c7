// What plugin.cc (data path, registration, properties) and setup.cc (listen/connect/accept)
// share: the process-wide progress loop, the comm / memory handle / request objects and the
// registry that validates every pointer NCCL hands back (plugin.h says why it is global).
#pragma once

#include <array>
#include <atomic>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "conduit/nccl_net/net_abi.h"
#include "conduit/reactor/event_loop.h"
#include "conduit/rma/tagged.h"

namespace conduit::nccl_net {

constexpr int kMaxRequests = NCCL_NET_MAX_REQUESTS;                      // per comm
constexpr int kMaxRecvs = static_cast<int>(rma::TaggedEndpoint::kMaxGroup);  // per grouped irecv
static_assert(kMaxRequests < 64, "below TaggedOptions::slots: the tagged layer never refuses for room");

// A request slot's life: kFree -> kPending (isend/irecv, caller's thread) -> kDone / kFailed
// (loop thread, release) -> kFree (test, caller's thread, after reading the outcome).
enum class ReqState : int { kFree = 0, kPending, kDone, kFailed };

struct Comm;
struct Req {
  std::atomic<ReqState> state{ReqState::kFree};
  bool send = false;
  int n = 0;
  std::array<int, kMaxRecvs> sizes{};  // written by the loop before kDone
  Status error;                        // written by the loop before kFailed
  rma::Request tagged;                 // loop thread only
};

struct Comm {
  bool send_side = false;
  std::string describe;                         // "send rma/tcp 127.0.0.1:1->127.0.0.1:2"
  std::unique_ptr<rma::TaggedEndpoint> tagged;  // loop thread only
  std::array<Req, kMaxRequests> reqs;
  std::vector<Req*> pending;                    // loop thread only: issued, not finished
};

struct Mr {
  Comm* comm = nullptr;
  uint8_t* addr = nullptr;
  size_t len = 0;
  bool registered = false;  // receive side: exposed to the peer for writes (region below)
  rma::Descriptor region;
};

struct Global {
  std::unique_ptr<reactor::EventLoop> loop;
  std::thread thread;
  std::string url;  // where listen() listens: CONDUIT_NCCL_NET_URL or auto://ADDR:0
  ncclDebugLogger_t logger = nullptr;

  std::mutex mu;                            // guards the registry below
  std::set<const void*> comms, listens, mrs;
  std::map<uintptr_t, Comm*> req_arrays;    // by &reqs[0]: validates request pointers
  ~Global();
};
Global* global();  // nullptr before init()

void warn(const std::string& what);
void info(const std::string& what);

// Runs f on the loop thread and returns its result (directly when already there).
template <class F>
auto on_loop(F&& f) -> decltype(f()) {
  Global* g = global();
  if (g->loop->in_loop_thread()) return f();
  std::packaged_task<decltype(f())()> task(std::forward<F>(f));
  auto fut = task.get_future();
  g->loop->post([&task] { task(); });
  return fut.get();
}

// Loop thread: a connected TaggedEndpoint becomes a comm (progress handler installed,
// registered as live).  Returns the comm, owned by the registry until close_send/recv.
Comm* make_comm(std::unique_ptr<rma::TaggedEndpoint> t, bool send_side);

bool is_comm(const void* p);
bool is_listen(const void* p);

}  // namespace conduit::nccl_net
