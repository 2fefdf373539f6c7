// The data path of the NCCL net plugin: init, properties, registration, isend / irecv / test
// / iflush, close, and the entries that do not apply to host memory (plugin.h for threads).
#include "plugin.h"

#include <climits>
#include <cstdarg>
#include <cstdlib>
#include <cstring>

#include "conduit/base/log.h"
#include "core.h"

namespace conduit::nccl_net {
namespace {

std::once_flag g_once;
std::unique_ptr<Global> g_global;
ncclResult_t g_init_result = ncclSuccess;

// The largest message one isend may carry: the tagged layer's (depth - 1) * max_op at the
// endpoint's default options, and what test() can report in an int.
constexpr size_t kMaxMessage = std::min<size_t>(
    size_t{rma::EndpointOptions{}.depth - 1} * rma::EndpointOptions{}.max_op, size_t{INT_MAX});

ncclResult_t invalid(const std::string& what) {
  warn(what);
  return ncclInvalidArgument;
}

ncclResult_t result_of(const Status& s) {
  switch (s.code()) {
    case Code::kClosed:
    case Code::kIoError:
    case Code::kProtocolError:
      return ncclRemoteError;
    default:
      return ncclInternalError;
  }
}

// Loop thread: moves finished requests of `c` to kDone / kFailed.
void reap(Comm* c) {
  for (size_t i = 0; i < c->pending.size();) {
    Req* r = c->pending[i];
    auto t = c->tagged->test(r->tagged);
    if (t.ok() && !t->has_value()) {
      ++i;
      continue;
    }
    if (!t.ok()) {
      r->error = t.status();
    } else if (!(*t)->status.ok()) {
      r->error = (*t)->status;
    } else {
      for (int k = 0; k < r->n; ++k) r->sizes[k] = static_cast<int>((*t)->sizes[k]);
    }
    r->state.store(r->error.ok() ? ReqState::kDone : ReqState::kFailed, std::memory_order_release);
    c->pending[i] = c->pending.back();
    c->pending.pop_back();
  }
}

// Loop thread: a request that the tagged layer refused at once.
void fail_now(Req* r, Status s) {
  r->error = std::move(s);
  r->state.store(ReqState::kFailed, std::memory_order_release);
}

// Caller's thread: a free slot of `c`, now kPending, or nullptr (NCCL retries later).
Req* take_slot(Comm* c, bool send, int n) {
  for (Req& r : c->reqs) {
    ReqState expect = ReqState::kFree;
    if (r.state.compare_exchange_strong(expect, ReqState::kPending, std::memory_order_acq_rel)) {
      r.send = send;
      r.n = n;
      r.sizes.fill(0);
      r.error = Status::Ok();
      return &r;
    }
  }
  return nullptr;
}

// Validates comm + mhandle + the buffer lying inside it.  size 0 needs no memory handle.
ncclResult_t check_buffer(const char* who, Comm* c, const void* data, size_t size, void* mhandle, Mr** out) {
  Global* g = global();
  std::lock_guard<std::mutex> lock(g->mu);
  *out = nullptr;
  if (size == 0 && mhandle == nullptr) return ncclSuccess;
  if (mhandle == nullptr || g->mrs.count(mhandle) == 0)
    return invalid(std::string(who) + ": memory handle is not one regMr returned (or was deregistered)");
  Mr* m = static_cast<Mr*>(mhandle);
  if (m->comm != c) return invalid(std::string(who) + ": memory handle was registered on another comm");
  auto p = static_cast<const uint8_t*>(data);
  if (size > 0 && (p == nullptr || p < m->addr || size > m->len || p - m->addr > static_cast<ptrdiff_t>(m->len - size)))
    return invalid(std::string(who) + ": buffer of " + std::to_string(size) + " bytes lies outside its memory handle");
  *out = m;
  return ncclSuccess;
}

}  // namespace

Global* global() { return g_global.get(); }

Global::~Global() {
  if (!loop) return;
  loop->stop();
  if (thread.joinable()) thread.join();
  std::lock_guard<std::mutex> lock(mu);
  if (comms.empty() && listens.empty()) return;  // loop destroyed normally
  // Comms NCCL never closed still hold endpoints on the loop: leave them (process exit).
  static reactor::EventLoop* leaked = nullptr;
  leaked = loop.release();
  (void)leaked;
}

void warn(const std::string& what) {
  Global* g = global();
  if (g != nullptr && g->logger != nullptr) {
    g->logger(NCCL_LOG_WARN, NCCL_NET, __FILE__, __LINE__, "NET/Conduit: %s", what.c_str());
  } else {
    CONDUIT_LOG(kWarn) << "nccl-net-conduit: " << what;
  }
}

void info(const std::string& what) {
  Global* g = global();
  if (g != nullptr && g->logger != nullptr) {
    g->logger(NCCL_LOG_INFO, NCCL_INIT | NCCL_NET, __FILE__, __LINE__, "NET/Conduit: %s", what.c_str());
  } else {
    CONDUIT_LOG(kInfo) << "nccl-net-conduit: " << what;
  }
}

bool is_comm(const void* p) {
  Global* g = global();
  std::lock_guard<std::mutex> lock(g->mu);
  return p != nullptr && g->comms.count(p) != 0;
}

bool is_listen(const void* p) {
  Global* g = global();
  std::lock_guard<std::mutex> lock(g->mu);
  return p != nullptr && g->listens.count(p) != 0;
}

Comm* make_comm(std::unique_ptr<rma::TaggedEndpoint> t, bool send_side) {
  auto* c = new Comm;
  c->send_side = send_side;
  c->describe = std::string(send_side ? "send " : "recv ") + t->endpoint().describe();
  c->tagged = std::move(t);
  c->tagged->set_progress_handler([c](rma::TaggedEndpoint&) { reap(c); });
  Global* g = global();
  std::lock_guard<std::mutex> lock(g->mu);
  g->comms.insert(c);
  g->req_arrays[reinterpret_cast<uintptr_t>(&c->reqs[0])] = c;
  return c;
}

ncclResult_t init(ncclDebugLogger_t logger) {
  std::call_once(g_once, [logger] {
    auto g = std::make_unique<Global>();
    g->logger = logger;
    const char* url = std::getenv("CONDUIT_NCCL_NET_URL");
    const char* addr = std::getenv("CONDUIT_NCCL_NET_ADDR");
    g->url = url && *url ? url : std::string("auto://") + (addr && *addr ? addr : "127.0.0.1") + ":0";
    auto loop = reactor::EventLoop::create();
    if (!loop.ok()) {
      g_global = std::move(g);
      warn("init: cannot create the progress loop: " + loop.status().to_string());
      g_init_result = ncclSystemError;
      g_global.reset();
      return;
    }
    g->loop = std::move(*loop);
    reactor::EventLoop* l = g->loop.get();
    // The loop belongs to its creator until a thread adopts it: wait for the progress thread
    // to, or an entry point called right after init would run loop work on NCCL's thread.
    std::promise<void> adopted;
    std::future<void> is_adopted = adopted.get_future();
    g->thread = std::thread([l, &adopted] {
      l->adopt_current_thread();
      adopted.set_value();
      if (Status s = l->run(); !s.ok()) CONDUIT_LOG(kError) << "nccl-net-conduit: progress loop: " << s.to_string();
    });
    is_adopted.wait();
    g_global = std::move(g);
    info("listening on " + g_global->url + " (CONDUIT_NCCL_NET_URL), host memory only");
  });
  return g_init_result;
}

ncclResult_t devices(int* ndev) {
  if (ndev == nullptr) return invalid("devices: ndev is NULL");
  *ndev = 1;
  return ncclSuccess;
}

ncclResult_t get_properties(int dev, ncclNetProperties_t* props) {
  if (props == nullptr) return invalid("getProperties: props is NULL");
  if (dev != 0) return invalid("getProperties: device " + std::to_string(dev) + " does not exist (1 device)");
  std::memset(props, 0, sizeof(*props));
  static char name[] = "conduit";
  props->name = name;
  props->pciPath = nullptr;  // no PCI device of our own: NCCL places the NIC by name only
  props->guid = 0xc0d1u;
  props->ptrSupport = NCCL_PTR_HOST;
  props->regIsGlobal = 0;  // a registration belongs to one comm (its window is bound to that QP)
  props->forceFlush = 0;
  props->speed = 10000;    // nominal: not measured (NCCL only weighs NICs against each other)
  props->port = 1;
  props->latency = 0;      // NCCL's default guess
  props->maxComms = 1024 * 1024;
  props->maxRecvs = kMaxRecvs;
  props->netDeviceType = NCCL_NET_DEVICE_HOST;
  props->netDeviceVersion = NCCL_NET_DEVICE_INVALID_VERSION;
  props->vProps.ndevs = 1;
  props->vProps.devs[0] = 0;
  props->maxP2pBytes = kMaxMessage;
  props->maxCollBytes = kMaxMessage;
  return ncclSuccess;
}

ncclResult_t reg_mr(void* comm, void* data, size_t size, int type, void** mhandle) {
  if (mhandle == nullptr) return invalid("regMr: mhandle is NULL");
  if (!is_comm(comm)) return invalid("regMr: not a comm of this plugin");
  if (type != NCCL_PTR_HOST) {
    warn("regMr: pointer type " + std::to_string(type) + " not supported: host memory only (NCCL_PTR_HOST)");
    return ncclInternalError;
  }
  if (data == nullptr && size > 0) return invalid("regMr: data is NULL");
  auto* c = static_cast<Comm*>(comm);
  auto m = std::make_unique<Mr>();
  m->comm = c;
  m->addr = static_cast<uint8_t*>(data);
  m->len = size;
  // The send side's memory is registered for local access by the rma layer's registration
  // cache at the first send (and stays cached); the receive side's is exposed to the peer.
  if (!c->send_side && size > 0) {
    Result<rma::Descriptor> d = on_loop([&] { return c->tagged->register_buffer(data, size); });
    if (!d.ok()) {
      warn("regMr: " + d.status().to_string());
      return ncclInternalError;
    }
    m->region = *d;
    m->registered = true;
  }
  Global* g = global();
  std::lock_guard<std::mutex> lock(g->mu);
  g->mrs.insert(m.get());
  *mhandle = m.release();
  return ncclSuccess;
}

ncclResult_t reg_mr_dmabuf(void*, void*, size_t, int, uint64_t, int, void**) {
  warn("regMrDmaBuf: not supported (host memory only: ptrSupport has no NCCL_PTR_DMABUF)");
  return ncclInternalError;
}

ncclResult_t dereg_mr(void* comm, void* mhandle) {
  if (!is_comm(comm)) return invalid("deregMr: not a comm of this plugin");
  Global* g = global();
  {
    std::lock_guard<std::mutex> lock(g->mu);
    if (g->mrs.count(mhandle) == 0) return invalid("deregMr: not a memory handle of this plugin");
    if (static_cast<Mr*>(mhandle)->comm != comm) return invalid("deregMr: memory handle belongs to another comm");
    g->mrs.erase(mhandle);
  }
  std::unique_ptr<Mr> m(static_cast<Mr*>(mhandle));
  if (m->registered) {
    Status s = on_loop([&] {
      // A closed endpoint revoked its exposures already (the peer closing first is normal).
      if (m->comm->tagged->endpoint().state() != rma::EndpointState::kConnected) return Status::Ok();
      return m->comm->tagged->deregister_buffer(m->region);
    });
    if (!s.ok()) warn("deregMr: " + s.to_string());
  }
  return ncclSuccess;
}

ncclResult_t isend(void* send_comm, void* data, size_t size, int tag, void* mhandle, void** request) {
  if (request == nullptr) return invalid("isend: request is NULL");
  *request = nullptr;
  if (!is_comm(send_comm) || !static_cast<Comm*>(send_comm)->send_side) return invalid("isend: not a send comm of this plugin");
  auto* c = static_cast<Comm*>(send_comm);
  if (size > kMaxMessage) return invalid("isend: " + std::to_string(size) + " bytes > maxP2pBytes " + std::to_string(kMaxMessage));
  Mr* m = nullptr;
  if (ncclResult_t r = check_buffer("isend", c, data, size, mhandle, &m); r != ncclSuccess) return r;
  Req* r = take_slot(c, true, 1);
  if (r == nullptr) return ncclSuccess;  // NCCL_NET_MAX_REQUESTS in flight: NCCL retries
  std::span<const uint8_t> bytes(static_cast<const uint8_t*>(data), size);
  const auto t = static_cast<uint32_t>(tag);
  global()->loop->post([c, r, bytes, t] {
    auto q = c->tagged->isend(t, bytes);
    if (!q.ok()) return fail_now(r, q.status());
    r->tagged = *q;
    c->pending.push_back(r);
    reap(c);
  });
  *request = r;
  return ncclSuccess;
}

ncclResult_t irecv(void* recv_comm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** request) {
  if (request == nullptr) return invalid("irecv: request is NULL");
  *request = nullptr;
  if (!is_comm(recv_comm) || static_cast<Comm*>(recv_comm)->send_side) return invalid("irecv: not a receive comm of this plugin");
  if (n < 1 || n > kMaxRecvs) return invalid("irecv: n = " + std::to_string(n) + ", want 1.." + std::to_string(kMaxRecvs) + " (maxRecvs)");
  if (data == nullptr || sizes == nullptr || tags == nullptr || mhandles == nullptr) return invalid("irecv: NULL array");
  auto* c = static_cast<Comm*>(recv_comm);
  std::array<uint32_t, kMaxRecvs> t{};
  std::array<rma::RecvBuffer, kMaxRecvs> bufs{};
  for (int i = 0; i < n; ++i) {
    if (sizes[i] > kMaxMessage) return invalid("irecv: buffer " + std::to_string(i) + " larger than maxP2pBytes");
    Mr* m = nullptr;
    if (ncclResult_t r = check_buffer("irecv", c, data[i], sizes[i], mhandles[i], &m); r != ncclSuccess) return r;
    t[i] = static_cast<uint32_t>(tags[i]);
    bufs[i].data = std::span<uint8_t>(static_cast<uint8_t*>(data[i]), sizes[i]);
    if (m != nullptr) bufs[i].region = m->region;
  }
  Req* r = take_slot(c, false, n);
  if (r == nullptr) return ncclSuccess;
  global()->loop->post([c, r, n, t, bufs] {
    auto q = c->tagged->irecv(std::span<const uint32_t>(t.data(), n), std::span<const rma::RecvBuffer>(bufs.data(), n));
    if (!q.ok()) return fail_now(r, q.status());
    r->tagged = *q;
    c->pending.push_back(r);
    reap(c);
  });
  *request = r;
  return ncclSuccess;
}

// Host memory: a receive that test() reported done has its bytes in place (the loop stored
// kDone with release order after the data's completion; test() loaded it with acquire), so
// there is nothing to flush.  *request = NULL, which NCCL reads as "flush complete".
ncclResult_t iflush(void* recv_comm, int n, void** data, int* sizes, void** mhandles, void** request) {
  if (request == nullptr) return invalid("iflush: request is NULL");
  *request = nullptr;
  if (!is_comm(recv_comm) || static_cast<Comm*>(recv_comm)->send_side) return invalid("iflush: not a receive comm of this plugin");
  if (n < 0 || n > kMaxRecvs) return invalid("iflush: n = " + std::to_string(n) + ", want 0.." + std::to_string(kMaxRecvs));
  if (n > 0 && (data == nullptr || sizes == nullptr || mhandles == nullptr)) return invalid("iflush: NULL array");
  for (int i = 0; i < n; ++i) {
    if (sizes[i] < 0) return invalid("iflush: negative size");
    Mr* m = nullptr;
    if (ncclResult_t r = check_buffer("iflush", static_cast<Comm*>(recv_comm), data[i], static_cast<size_t>(sizes[i]), mhandles[i], &m);
        r != ncclSuccess)
      return r;
  }
  std::atomic_thread_fence(std::memory_order_acquire);
  return ncclSuccess;
}

ncclResult_t test(void* request, int* done, int* sizes) {
  if (done == nullptr) return invalid("test: done is NULL");
  *done = 0;
  Global* g = global();
  Req* r = nullptr;
  {
    std::lock_guard<std::mutex> lock(g->mu);
    const auto p = reinterpret_cast<uintptr_t>(request);
    auto it = g->req_arrays.upper_bound(p);
    if (request != nullptr && it != g->req_arrays.begin()) {
      --it;
      const uintptr_t off = p - it->first;
      if (off < sizeof(Req) * kMaxRequests && off % sizeof(Req) == 0) r = static_cast<Req*>(request);
    }
  }
  if (r == nullptr) return invalid("test: not a request of this plugin (or its comm was closed)");
  switch (r->state.load(std::memory_order_acquire)) {
    case ReqState::kFree:
      return invalid("test: request already completed (tested done before)");
    case ReqState::kPending:
      return ncclSuccess;
    case ReqState::kDone:
      if (sizes != nullptr) std::memcpy(sizes, r->sizes.data(), sizeof(int) * static_cast<size_t>(r->n));
      *done = 1;
      r->state.store(ReqState::kFree, std::memory_order_release);
      return ncclSuccess;
    case ReqState::kFailed: {
      Status why = r->error;
      r->state.store(ReqState::kFree, std::memory_order_release);
      warn(std::string(r->send ? "isend" : "irecv") + " failed: " + why.to_string());
      *done = 1;
      return result_of(why);
    }
  }
  return ncclInternalError;
}

namespace {
ncclResult_t close_comm(void* comm, bool send_side, const char* who) {
  if (!is_comm(comm) || static_cast<Comm*>(comm)->send_side != send_side) return invalid(std::string(who) + ": not a comm of this kind");
  auto* c = static_cast<Comm*>(comm);
  Global* g = global();
  {
    std::lock_guard<std::mutex> lock(g->mu);
    g->comms.erase(c);
    g->req_arrays.erase(reinterpret_cast<uintptr_t>(&c->reqs[0]));
    for (auto it = g->mrs.begin(); it != g->mrs.end();) {  // handles NCCL did not deregister
      auto* m = static_cast<Mr*>(const_cast<void*>(*it));
      if (m->comm != c) {
        ++it;
        continue;
      }
      it = g->mrs.erase(it);
      delete m;  // its region goes with the endpoint
    }
  }
  on_loop([c] {
    c->tagged.reset();  // closes the endpoint: requests not reaped are dropped
    delete c;
  });
  return ncclSuccess;
}
}  // namespace

ncclResult_t close_send(void* send_comm) { return close_comm(send_comm, true, "closeSend"); }
ncclResult_t close_recv(void* recv_comm) { return close_comm(recv_comm, false, "closeRecv"); }

ncclResult_t get_device_mr(void*, void*, void**) {
  warn("getDeviceMr: not supported (no device offload: netDeviceType is NCCL_NET_DEVICE_HOST)");
  return ncclInternalError;
}

ncclResult_t irecv_consumed(void*, int, void*) {
  warn("irecvConsumed: not supported (no device offload: netDeviceType is NCCL_NET_DEVICE_HOST)");
  return ncclInternalError;
}

ncclResult_t make_vdevice(int*, ncclNetVDeviceProps_t*) {
  warn("makeVDevice: not supported (one device, no virtual NICs)");
  return ncclInternalError;
}

}  // namespace conduit::nccl_net
