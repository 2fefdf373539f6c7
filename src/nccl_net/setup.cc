// Connection setup of the NCCL net plugin: listen / connect / accept / closeListen.
//
// listen() starts an rma::Listener on the plugin's URL and a TCP bootstrap socket on the same
// IPv4 address, and writes both into the handle (handle.h).  connect() and accept() never
// block: each call advances a small state machine (ConnectState / AcceptState) as far as it
// can without waiting and returns *comm == NULL until it is done, as NCCL's proxy expects.
// The bootstrap socket carries what the rma layer cannot: the listener's nonce and the two
// TaggedEndpoint hellos (its FIFO and completion descriptors exist only after connect).
//   connector -> listener: magic u32 | nonce u64 | hello (80 bytes)          (92 bytes)
//   listener -> connector: magic u32 | status u32 (0 = accepted) | hello (80) (88 bytes)
// One connection per listen comm (NCCL listens once per connection and closes the listen
// comm after its one accept); a second connector's rma endpoint is closed.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <random>

#include "conduit/base/fd.h"
#include "core.h"
#include "handle.h"
#include "plugin.h"

namespace conduit::nccl_net {
namespace {

constexpr size_t kHello = rma::TaggedEndpoint::kHelloSize;
constexpr size_t kToListener = 4 + 8 + kHello;
constexpr size_t kToConnector = 4 + 4 + kHello;

enum class ConnectState : uint8_t { kConnecting, kSending, kReceiving, kReady, kFailed };
const char* connect_state_name(ConnectState s) {
  switch (s) {
    case ConnectState::kConnecting: return "connecting";
    case ConnectState::kSending: return "sending hello";
    case ConnectState::kReceiving: return "awaiting peer hello";
    case ConnectState::kReady: return "ready";
    case ConnectState::kFailed: return "failed";
  }
  return "?";
}

enum class AcceptState : uint8_t { kWaiting, kReceiving, kAwaitEndpoint, kSending, kAccepted, kFailed };
const char* accept_state_name(AcceptState s) {
  switch (s) {
    case AcceptState::kWaiting: return "waiting for a connector";
    case AcceptState::kReceiving: return "awaiting connector hello";
    case AcceptState::kAwaitEndpoint: return "awaiting the rma endpoint";
    case AcceptState::kSending: return "sending hello";
    case AcceptState::kAccepted: return "accepted";
    case AcceptState::kFailed: return "failed";
  }
  return "?";
}

// Moves bytes between a non-blocking socket and buf[*off .. n).  OK when all moved,
// kWouldBlock when the socket has no more for now, an error when it failed or closed.
Status pump(int fd, uint8_t* buf, size_t n, size_t* off, bool out) {
  while (*off < n) {
    ssize_t k = out ? ::send(fd, buf + *off, n - *off, MSG_NOSIGNAL | MSG_DONTWAIT)
                    : ::recv(fd, buf + *off, n - *off, MSG_DONTWAIT);
    if (k > 0) {
      *off += static_cast<size_t>(k);
      continue;
    }
    if (k == 0) return Status(Code::kClosed, "bootstrap socket: peer closed");
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return Status::WouldBlock();
    return Status::FromErrno(errno, out ? "bootstrap send" : "bootstrap recv");
  }
  return Status::Ok();
}

struct Connecting {
  ConnectState state = ConnectState::kConnecting;
  Handle handle;
  UniqueFd fd;
  std::unique_ptr<rma::Endpoint> ep;  // loop thread
  std::atomic<int> ep_state{0};       // 0 connecting, 1 connected, 2 failed (loop stores)
  Status ep_error;                    // written before ep_state = 2
  std::unique_ptr<rma::TaggedEndpoint> tagged;
  std::array<uint8_t, kToListener> out{};
  std::array<uint8_t, kToConnector> in{};
  size_t off = 0;
};

struct ListenComm {
  uint64_t nonce = 0;
  UniqueFd bootstrap, peer;
  AcceptState state = AcceptState::kWaiting;
  std::unique_ptr<rma::Listener> listener;         // loop thread
  std::mutex mu;
  std::deque<std::unique_ptr<rma::Endpoint>> eps;  // accepted, not yet taken (guarded by mu)
  bool taken = false;                              // guarded by mu: later endpoints are closed
  std::unique_ptr<rma::TaggedEndpoint> tagged;
  std::array<uint8_t, kToListener> in{};
  std::array<uint8_t, kToConnector> out{};
  size_t off = 0;
};

std::mutex g_connect_mu;
std::map<uint64_t, std::unique_ptr<Connecting>> g_connecting;  // by the handle's stage id
uint64_t g_next_stage = 1;

// "rdma://10.0.0.1:4000" -> 10.0.0.1 (host byte order); only IPv4 literals.
Result<uint32_t> url_ipv4(const std::string& url) {
  size_t a = url.find("://");
  size_t b = url.rfind(':');
  if (a == std::string::npos || b == std::string::npos || b <= a + 3)
    return Status(Code::kInvalidArgument, "listen URL '" + url + "' has no host:port");
  std::string host = url.substr(a + 3, b - a - 3);
  in_addr ip{};
  if (inet_pton(AF_INET, host.c_str(), &ip) != 1)
    return Status(Code::kInvalidArgument, "listen URL '" + url + "': host must be an IPv4 address");
  return ntohl(ip.s_addr);
}

void destroy_connecting(std::unique_ptr<Connecting> c) {
  on_loop([&c] { c.reset(); });  // its endpoint belongs to the loop
}

ncclResult_t fail_connect(uint64_t stage, Connecting* c, const Status& why) {
  warn(std::string("connect (") + connect_state_name(c->state) + ") to " + c->handle.url + ": " + why.to_string());
  std::unique_ptr<Connecting> own;
  {
    std::lock_guard<std::mutex> lock(g_connect_mu);
    own = std::move(g_connecting[stage]);
    g_connecting.erase(stage);
  }
  destroy_connecting(std::move(own));
  return why.code() == Code::kInvalidArgument ? ncclInvalidArgument : ncclSystemError;
}

}  // namespace

ncclResult_t listen(int dev, void* handle, void** listen_comm) {
  if (handle == nullptr || listen_comm == nullptr) {
    warn("listen: handle or listenComm is NULL");
    return ncclInvalidArgument;
  }
  *listen_comm = nullptr;
  if (dev != 0) {
    warn("listen: device " + std::to_string(dev) + " does not exist (1 device)");
    return ncclInvalidArgument;
  }
  Global* g = global();
  auto lc = std::make_unique<ListenComm>();
  ListenComm* raw = lc.get();
  Result<std::unique_ptr<rma::Listener>> l = on_loop([&] {
    return rma::Listener::listen(*g->loop, g->url, [raw](std::unique_ptr<rma::Endpoint> ep) {
      std::lock_guard<std::mutex> lock(raw->mu);
      if (raw->taken) {
        warn("listen: a second connection to a listen comm that accepted one: closed");
        global()->loop->destroy_later(std::move(ep));
        return;
      }
      raw->eps.push_back(std::move(ep));
    });
  });
  if (!l.ok()) {
    warn("listen on " + g->url + ": " + l.status().to_string());
    return ncclSystemError;
  }
  lc->listener = std::move(*l);
  auto fail = [&](const Status& s) {
    warn("listen: " + s.to_string());
    on_loop([&] { lc.reset(); });
    return ncclSystemError;
  };
  Handle h;
  h.url = lc->listener->url();
  if (h.url.size() >= Handle::kUrlBytes) return fail(Status(Code::kInvalidArgument, "URL '" + h.url + "' longer than 95 bytes"));
  Result<uint32_t> ip = url_ipv4(h.url);
  if (!ip.ok()) return fail(ip.status());
  h.ipv4 = *ip;
  lc->bootstrap.reset(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!lc->bootstrap) return fail(Status::FromErrno(errno, "bootstrap socket"));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(h.ipv4);
  socklen_t len = sizeof(sa);
  if (::bind(lc->bootstrap.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 ||
      ::listen(lc->bootstrap.get(), 16) != 0 ||
      ::getsockname(lc->bootstrap.get(), reinterpret_cast<sockaddr*>(&sa), &len) != 0)
    return fail(Status::FromErrno(errno, "bootstrap bind/listen"));
  h.port = ntohs(sa.sin_port);
  std::random_device rd;
  lc->nonce = (uint64_t{rd()} << 32) ^ rd();
  h.nonce = lc->nonce;
  h.encode(static_cast<uint8_t*>(handle));
  {
    std::lock_guard<std::mutex> lock(g->mu);
    g->listens.insert(raw);
  }
  *listen_comm = lc.release();
  return ncclSuccess;
}

ncclResult_t connect(int dev, void* handle, void** send_comm, ncclNetDeviceHandle_t** dev_comm) {
  if (handle == nullptr || send_comm == nullptr) {
    warn("connect: handle or sendComm is NULL");
    return ncclInvalidArgument;
  }
  *send_comm = nullptr;
  if (dev_comm != nullptr && *dev_comm != nullptr) {
    warn("connect: device offload requested; not supported (netDeviceType is NCCL_NET_DEVICE_HOST)");
    return ncclInternalError;
  }
  if (dev != 0) {
    warn("connect: device " + std::to_string(dev) + " does not exist (1 device)");
    return ncclInvalidArgument;
  }
  Result<Handle> h = Handle::decode(static_cast<const uint8_t*>(handle));
  if (!h.ok()) {
    warn("connect: " + h.status().to_string());
    return ncclInvalidArgument;
  }
  Connecting* c = nullptr;
  uint64_t stage = h->stage;
  if (stage == 0) {
    auto fresh = std::make_unique<Connecting>();
    c = fresh.get();
    c->handle = *h;
    {
      std::lock_guard<std::mutex> lock(g_connect_mu);
      stage = g_next_stage++;
      g_connecting[stage] = std::move(fresh);
    }
    Handle::set_stage(static_cast<uint8_t*>(handle), stage);
    Status s = on_loop([c]() -> Status {
      auto ep = rma::Endpoint::connect(*global()->loop, c->handle.url, [c](rma::Endpoint&, Status st) {
        c->ep_error = st;
        c->ep_state.store(st.ok() ? 1 : 2, std::memory_order_release);
      });
      if (!ep.ok()) return ep.status();
      c->ep = std::move(*ep);
      return Status::Ok();
    });
    if (!s.ok()) return fail_connect(stage, c, s);
    c->fd.reset(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!c->fd) return fail_connect(stage, c, Status::FromErrno(errno, "bootstrap socket"));
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(c->handle.ipv4);
    sa.sin_port = htons(c->handle.port);
    if (::connect(c->fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 && errno != EINPROGRESS)
      return fail_connect(stage, c, Status::FromErrno(errno, "bootstrap connect"));
  } else {
    std::lock_guard<std::mutex> lock(g_connect_mu);
    auto it = g_connecting.find(stage);
    if (it == g_connecting.end()) {
      warn("connect: handle names connect " + std::to_string(stage) + ", which is not in progress (a stale or garbage handle)");
      return ncclInvalidArgument;
    }
    c = it->second.get();
  }

  if (c->state == ConnectState::kConnecting) {
    pollfd p{c->fd.get(), POLLOUT, 0};
    if (::poll(&p, 1, 0) < 0) return fail_connect(stage, c, Status::FromErrno(errno, "poll"));
    if (p.revents == 0) return ncclSuccess;
    int err = 0;
    socklen_t len = sizeof(err);
    if (::getsockopt(c->fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0)
      return fail_connect(stage, c, Status::FromErrno(err ? err : errno, "bootstrap connect"));
    const int eps = c->ep_state.load(std::memory_order_acquire);
    if (eps == 2) return fail_connect(stage, c, c->ep_error);
    if (eps == 0) return ncclSuccess;
    Result<std::array<uint8_t, kHello>> hello = on_loop([c]() -> Result<std::array<uint8_t, kHello>> {
      auto t = rma::TaggedEndpoint::create(std::move(c->ep));
      if (!t.ok()) return t.status();
      c->tagged = std::move(*t);
      return c->tagged->hello();
    });
    if (!hello.ok()) return fail_connect(stage, c, hello.status());
    big_endian::put32(c->out.data(), static_cast<uint32_t>(Handle::kMagic));
    big_endian::put64(c->out.data() + 4, c->handle.nonce);
    std::memcpy(c->out.data() + 12, hello->data(), kHello);
    c->off = 0;
    c->state = ConnectState::kSending;
  }
  if (c->state == ConnectState::kSending) {
    Status s = pump(c->fd.get(), c->out.data(), c->out.size(), &c->off, true);
    if (s.code() == Code::kWouldBlock) return ncclSuccess;
    if (!s.ok()) return fail_connect(stage, c, s);
    c->off = 0;
    c->state = ConnectState::kReceiving;
  }
  if (c->state == ConnectState::kReceiving) {
    Status s = pump(c->fd.get(), c->in.data(), c->in.size(), &c->off, false);
    if (s.code() == Code::kWouldBlock) return ncclSuccess;
    if (!s.ok()) return fail_connect(stage, c, s);
    if (big_endian::get32(c->in.data()) != Handle::kMagic || big_endian::get32(c->in.data() + 4) != 0)
      return fail_connect(stage, c, Status(Code::kProtocolError, "listener refused the connection (bad magic or status)"));
    Comm* comm = on_loop([c]() -> Comm* {
      Status st = c->tagged->start(std::span<const uint8_t>(c->in.data() + 8, kHello));
      if (!st.ok()) {
        c->ep_error = st;
        return nullptr;
      }
      return make_comm(std::move(c->tagged), true);
    });
    if (comm == nullptr) return fail_connect(stage, c, c->ep_error);
    c->state = ConnectState::kReady;
    std::unique_ptr<Connecting> own;
    {
      std::lock_guard<std::mutex> lock(g_connect_mu);
      own = std::move(g_connecting[stage]);
      g_connecting.erase(stage);
    }
    destroy_connecting(std::move(own));
    info("connected: " + comm->describe);
    *send_comm = comm;
  }
  return ncclSuccess;
}

ncclResult_t accept(void* listen_comm, void** recv_comm, ncclNetDeviceHandle_t** dev_comm) {
  if (recv_comm == nullptr) {
    warn("accept: recvComm is NULL");
    return ncclInvalidArgument;
  }
  *recv_comm = nullptr;
  if (!is_listen(listen_comm)) {
    warn("accept: not a listen comm of this plugin");
    return ncclInvalidArgument;
  }
  if (dev_comm != nullptr && *dev_comm != nullptr) {
    warn("accept: device offload requested; not supported (netDeviceType is NCCL_NET_DEVICE_HOST)");
    return ncclInternalError;
  }
  auto* lc = static_cast<ListenComm*>(listen_comm);
  auto drop_peer = [lc](const Status& why) {  // a bad connector: the listener stays usable
    warn(std::string("accept (") + accept_state_name(lc->state) + "): " + why.to_string() + "; dropped that connector");
    lc->peer.reset();
    lc->state = AcceptState::kWaiting;
  };
  if (lc->state == AcceptState::kAccepted) {
    warn("accept: this listen comm already accepted its one connection");
    return ncclInvalidArgument;
  }
  if (lc->state == AcceptState::kFailed) {
    warn("accept: this listen comm's connection failed earlier (see above); listen again");
    return ncclSystemError;
  }
  if (lc->state == AcceptState::kWaiting) {
    int fd = ::accept4(lc->bootstrap.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED) return ncclSuccess;
      warn("accept: bootstrap accept: " + Status::FromErrno(errno, "accept4").to_string());
      return ncclSystemError;
    }
    lc->peer.reset(fd);
    lc->off = 0;
    lc->state = AcceptState::kReceiving;
  }
  if (lc->state == AcceptState::kReceiving) {
    Status s = pump(lc->peer.get(), lc->in.data(), lc->in.size(), &lc->off, false);
    if (s.code() == Code::kWouldBlock) return ncclSuccess;
    if (!s.ok()) {
      drop_peer(s);
      return ncclSuccess;
    }
    if (big_endian::get32(lc->in.data()) != Handle::kMagic || big_endian::get64(lc->in.data() + 4) != lc->nonce) {
      drop_peer(Status(Code::kProtocolError, "bad magic or nonce (not the connector of this handle)"));
      return ncclSuccess;
    }
    lc->state = AcceptState::kAwaitEndpoint;
  }
  if (lc->state == AcceptState::kAwaitEndpoint) {
    std::unique_ptr<rma::Endpoint> ep;
    {
      std::lock_guard<std::mutex> lock(lc->mu);
      if (lc->eps.empty()) return ncclSuccess;
      ep = std::move(lc->eps.front());
      lc->eps.pop_front();
      lc->taken = true;
    }
    Result<std::array<uint8_t, kHello>> hello = on_loop([&]() -> Result<std::array<uint8_t, kHello>> {
      auto t = rma::TaggedEndpoint::create(std::move(ep));
      if (!t.ok()) return t.status();
      if (Status st = (*t)->start(std::span<const uint8_t>(lc->in.data() + 12, kHello)); !st.ok()) return st;
      lc->tagged = std::move(*t);
      return lc->tagged->hello();
    });
    if (!hello.ok()) {
      warn("accept: " + hello.status().to_string());
      lc->state = AcceptState::kFailed;
      return ncclSystemError;
    }
    big_endian::put32(lc->out.data(), static_cast<uint32_t>(Handle::kMagic));
    big_endian::put32(lc->out.data() + 4, static_cast<uint32_t>(0));
    std::memcpy(lc->out.data() + 8, hello->data(), kHello);
    lc->off = 0;
    lc->state = AcceptState::kSending;
  }
  if (lc->state == AcceptState::kSending) {
    Status s = pump(lc->peer.get(), lc->out.data(), lc->out.size(), &lc->off, true);
    if (s.code() == Code::kWouldBlock) return ncclSuccess;
    if (!s.ok()) {
      warn("accept: sending hello: " + s.to_string());
      on_loop([lc] { lc->tagged.reset(); });
      lc->state = AcceptState::kFailed;
      return ncclSystemError;
    }
    Comm* comm = on_loop([lc] { return make_comm(std::move(lc->tagged), false); });
    lc->state = AcceptState::kAccepted;
    info("accepted: " + comm->describe);
    *recv_comm = comm;
  }
  return ncclSuccess;
}

ncclResult_t close_listen(void* listen_comm) {
  if (!is_listen(listen_comm)) {
    warn("closeListen: not a listen comm of this plugin");
    return ncclInvalidArgument;
  }
  Global* g = global();
  {
    std::lock_guard<std::mutex> lock(g->mu);
    g->listens.erase(listen_comm);
  }
  std::unique_ptr<ListenComm> lc(static_cast<ListenComm*>(listen_comm));
  on_loop([&lc] { lc.reset(); });  // listener, endpoints not taken: loop objects
  return ncclSuccess;
}

}  // namespace conduit::nccl_net
