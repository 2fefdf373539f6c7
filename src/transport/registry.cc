#include <mutex>
#include <vector>

#include "conduit/transport/connection.h"
#include "builtin.h"

namespace conduit::transport {

std::string_view conn_state_name(ConnState s) {
  switch (s) {
    case ConnState::kConnecting: return "connecting";
    case ConnState::kAccepting: return "accepting";
    case ConnState::kConnected: return "connected";
    case ConnState::kClosed: return "closed";
    case ConnState::kError: return "error";
  }
  return "unknown";
}

std::string Connection::describe() const {
  return std::string(caps().transport) + " " + local_address() + "->" + peer_address() + " " +
         std::string(conn_state_name(state()));
}

namespace {
struct Registry {
  std::mutex mu;
  std::vector<Transport*> transports;
  Registry() { transports = builtin_transports(); }
};
Registry& registry() {
  static Registry r;
  return r;
}
}  // namespace

Transport* find_transport(std::string_view scheme) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  for (Transport* t : r.transports)
    if (t->scheme() == scheme) return t;
  return nullptr;
}

Status register_transport(Transport* t) {
  if (t == nullptr) return Status(Code::kInvalidArgument, "register_transport: null");
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  for (Transport* existing : r.transports)
    if (existing->scheme() == t->scheme())
      return Status(Code::kInvalidArgument, "transport '" + std::string(t->scheme()) + "' already registered");
  r.transports.push_back(t);
  return {};
}

namespace {
Result<std::pair<Transport*, Endpoint>> resolve(std::string_view url) {
  CONDUIT_ASSIGN_OR_RETURN(Endpoint ep, Endpoint::parse(url));
  Transport* t = find_transport(ep.scheme);
  if (t == nullptr) return Status(Code::kNotFound, "no transport for scheme '" + ep.scheme + "' in " + std::string(url));
  return std::make_pair(t, std::move(ep));
}
}  // namespace

Result<std::unique_ptr<Listener>> listen(reactor::EventLoop& loop, std::string_view url, AcceptCallback on_accept) {
  CONDUIT_ASSIGN_OR_RETURN(auto te, resolve(url));
  return te.first->listen(loop, te.second, std::move(on_accept));
}

Result<std::unique_ptr<Connection>> connect(reactor::EventLoop& loop, std::string_view url,
                                            ConnectCallback on_connect) {
  CONDUIT_ASSIGN_OR_RETURN(auto te, resolve(url));
  return te.first->connect(loop, te.second, std::move(on_connect));
}

}  // namespace conduit::transport
