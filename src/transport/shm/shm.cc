// shm:// -- the transport's front door: listen() binds the socket file and starts a
// ShmListener, connect() sends the hello and returns a connecting ShmConnection.  The
// pieces: shm_options (the option table), shm_paths (socket paths, credentials),
// shm_region (the shared memory), shm_handshake (the hello exchange), shm_connection (the
// data path), shm_listener (accepting).  README.md has the design.
#include "shm/shm.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <utility>

#include "conduit/base/fd.h"
#include "shm/shm_connection.h"
#include "shm/shm_handshake.h"
#include "shm/shm_listener.h"
#include "shm/shm_options.h"
#include "shm/shm_paths.h"

namespace conduit::transport {
namespace {

using shm::Hello;
using shm::HelloType;
using shm::ShmConnection;
using shm::ShmListener;
using shm::ShmOptions;

constexpr int kBacklog = SOMAXCONN;

class ShmTransport final : public Transport {
 public:
  std::string_view scheme() const override { return "shm"; }
  std::vector<OptionDoc> options() const override { return document_option_table<shm::ShmOptions>(shm::kShmOptions); }

  Result<std::unique_ptr<Listener>> listen(reactor::EventLoop& loop, const Endpoint& ep,
                                           AcceptCallback on_accept) override {
    if (!on_accept) return Status(Code::kInvalidArgument, "shm listen: null accept callback");
    CONDUIT_ASSIGN_OR_RETURN(ShmOptions o, shm::parse_shm_options(ep));
    CONDUIT_ASSIGN_OR_RETURN(std::string path, shm_socket_path(ep.address, /*create_dir=*/true));
    sockaddr_un addr;
    (void)shm::make_addr(path, &addr);
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd) return Status::FromErrnoAuto(errno, "shm socket");
    if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
      if (errno != EADDRINUSE) return Status::FromErrnoAuto(errno, "shm bind " + path);
      CONDUIT_RETURN_IF_ERROR(shm::remove_stale_socket(path, addr));
      if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0)
        return Status::FromErrnoAuto(errno, "shm bind " + path);
    }
    // Permissions before listen(): nobody can connect before the mode is right.
    if (::chmod(path.c_str(), static_cast<mode_t>(o.mode)) != 0 || ::listen(fd.get(), kBacklog) != 0) {
      Status s = Status::FromErrnoAuto(errno, "shm listen " + path);
      ::unlink(path.c_str());
      return s;
    }
    auto l = std::make_unique<ShmListener>(loop, std::move(fd), o, path, std::move(on_accept));
    CONDUIT_RETURN_IF_ERROR(l->start());
    return std::unique_ptr<Listener>(std::move(l));
  }

  Result<std::unique_ptr<Connection>> connect(reactor::EventLoop& loop, const Endpoint& ep,
                                              ConnectCallback on_connect) override {
    CONDUIT_ASSIGN_OR_RETURN(ShmOptions o, shm::parse_shm_options(ep));
    CONDUIT_ASSIGN_OR_RETURN(std::string path, shm_socket_path(ep.address));
    sockaddr_un addr;
    (void)shm::make_addr(path, &addr);
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd) return Status::FromErrnoAuto(errno, "shm socket");
    // A UNIX-domain connect completes (or fails) at once; only a full backlog says EAGAIN.
    // An unreachable peer is not an error of connect() itself: like every transport, we
    // return a connecting connection and report the failure through the callback.
    Status unreachable;
    if (shm::connect_unix(fd.get(), addr) != 0) {
      const int err = errno;
      if (err == ENOENT)
        unreachable = Status(Code::kNotFound,
                             "shm connect: no listener for shm://" + ep.address + " (" + path + " does not exist)",
                             DetailKind::kErrno, err);
      else if (err == ECONNREFUSED)
        unreachable = Status(Code::kUnavailable,
                             "shm connect: nobody is listening on " + path + " (stale socket file?)",
                             DetailKind::kErrno, err);
      else if (err == EAGAIN)
        unreachable = Status(Code::kUnavailable, "shm connect: listener " + path + " has a full backlog",
                             DetailKind::kErrno, err);
      else
        unreachable = Status::FromErrnoAuto(err, "shm connect " + path);
    } else if (Result<shm::PeerCred> cred = shm::peer_credentials(fd.get()); !cred.ok()) {
      unreachable = cred.status();
    } else if (Status who = shm::check_peer_uid(*cred, o.allow_uids, "shm connect: the server on " + path);
               !who.ok()) {
      // Whoever bound the path first answers it: a server of a uid we do not trust gets
      // nothing from us, not even our hello.
      unreachable = std::move(who);
    } else {
      Hello h;
      h.type = static_cast<uint16_t>(HelloType::kClientHello);
      h.ring_bytes = o.ring_given ? o.ring : 0;
      Status sent = shm::send_hello(fd.get(), h, nullptr, 0);
      // A server that refuses us before reading our hello (uid, admission) has answered
      // and closed already: its reject waits in our receive queue, so read it rather than
      // report the broken pipe.
      const bool answered =
          sent.detail_kind() == DetailKind::kErrno && (sent.detail() == EPIPE || sent.detail() == ECONNRESET);
      if (!answered) unreachable = std::move(sent);
    }
    auto c = std::make_unique<ShmConnection>(loop, std::move(fd), ConnState::kConnecting, o, path);
    if (!unreachable.ok())
      c->begin_failed_connect(std::move(on_connect), std::move(unreachable));
    else
      CONDUIT_RETURN_IF_ERROR(c->begin_connect(std::move(on_connect)));
    return std::unique_ptr<Connection>(std::move(c));
  }
};

}  // namespace

Transport* shm_transport() {
  static ShmTransport t;
  return &t;
}

}  // namespace conduit::transport
