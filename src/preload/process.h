// The preload's per-process state: what every fd of ours is (a TCP socket in some phase, an
// epoll instance), the lock that guards it, and fd tags the interposers read without the
// lock.  See README.md for the model.
//
// Threading: everything here is guarded by Process::mu, taken with EngineLock (which also
// marks the thread as inside the preload, so Conduit's own libc calls pass straight
// through).  Only fd_tag() is read without it.
#pragma once

#include <sys/epoll.h>
#include <sys/socket.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "conduit/reactor/event_loop.h"
#include "conduit/transport/connection.h"
#include "libc.h"
#include "options.h"
#include "wire.h"

namespace conduit::preload {

// One printable state per socket of ours.  A client goes kSocket -> kFastConnecting ->
// kAnnouncing -> kTcpConnecting -> kAwaitDecision -> kFast; a server's accepted socket is
// born kAwaitCommit (its client announced) or kTcp.  Any negotiating phase may end in kTcp.
enum class Phase : uint8_t {
  kSocket,          // a TCP socket the program made; not connected or listening yet
  kListening,       // listen() done; its port's rendezvous is attached if the rules allow
  kFastConnecting,  // client: opening the fast channel to the server's rendezvous
  kAnnouncing,      // client: ANNOUNCE sent on it, waiting for the ACK
  kTcpConnecting,   // client: the TCP connect(2) is in progress (announce registered)
  kAwaitDecision,   // client: TCP is up, waiting for the server's DECISION
  kAwaitCommit,     // server: announced connection accepted, DECISION(accept) sent
  kFast,            // accelerated: the program's bytes go over the fast channel
  kTcp,             // plain TCP, decided: every call goes to libc
  kForked,          // inherited across fork() while fast or negotiating: the parent owns it
};
std::string_view phase_name(Phase p);
inline bool negotiating(Phase p) { return p >= Phase::kFastConnecting && p <= Phase::kAwaitCommit; }
// Phases whose readiness the preload computes itself (the kernel socket says nothing useful).
inline bool user_ready_phase(Phase p) { return negotiating(p) || p == Phase::kFast || p == Phase::kForked; }

enum class Mode : uint8_t { kNone, kShm, kRdma };
std::string_view mode_name(Mode m);
enum class Role : uint8_t { kNone, kClient, kServer, kListener };
std::string_view role_name(Role r);

// Per fd number, read without the lock by every interposer.
inline constexpr uint8_t kTagTracked = 1;  // ours: close/dup/fcntl/epoll_ctl keep books
inline constexpr uint8_t kTagEngine = 2;   // poll/select/epoll_wait must go through the engine
inline constexpr uint8_t kTagData = 4;     // read/write/send/recv... are served by the preload
uint8_t fd_tag(int fd);
// Fds at or above this are never ours (the tag table's size); sockets there stay plain TCP.
inline constexpr int kMaxTrackedFd = 1 << 20;

struct Epoll;
struct Socket;
struct Rendezvous;

// An fd of ours inside an epoll instance of the program's.
struct Membership {
  Epoll* epoll = nullptr;
  int fd = -1;
  std::shared_ptr<Socket> sock;    // a socket ...
  std::shared_ptr<Epoll> child;    // ... or a nested epoll instance
  uint32_t events = 0;
  epoll_data_t data{};
  bool in_kernel = false;  // registered in the kernel instance (kernel readiness)
  bool disabled = false;   // EPOLLONESHOT reported; waits for EPOLL_CTL_MOD
  uint64_t seen_rx = 0, seen_tx = 0;  // EPOLLET: readiness generations already reported
};

struct Epoll {
  int fd = -1;             // one of its names, used for the kernel calls
  std::vector<int> names;  // every fd number naming the instance (dup)
  bool marker = false;     // the engine's backend fd is in the kernel instance
  bool inherited = false;  // created before fork(): shared with the parent, no marker of ours
  size_t cursor = 0;       // where the next collect starts (fairness under a small maxevents)
  uint64_t turn = 0;       // waits so far: every other one looks at the kernel's fds first
  std::vector<std::unique_ptr<Membership>> members;
  std::vector<Membership*> parents;  // memberships of this instance in other instances
};

// Watches a client's TCP socket for the end of the connect(2) the engine issued.
struct TcpWatch final : reactor::FdHandler {
  Socket* s = nullptr;
  int fd = -1;
  void on_events(uint32_t events) override;
};

struct Socket {
  uint64_t id = 0;
  int family = AF_INET;
  Phase phase = Phase::kSocket;
  Role role = Role::kNone;
  Mode mode = Mode::kNone;
  std::string reason;        // kTcp: why not fast; kListening: what the rendezvous offers
  bool nonblock = false;     // the program's view of O_NONBLOCK
  bool inherited = false;    // from a parent process
  std::vector<int> fds;      // the fd numbers that name it (dup); empty = closed
  FourTuple tuple;
  sockaddr_storage local{}, peer{};  // cached when it goes fast (the kernel socket is gone)
  socklen_t local_len = 0, peer_len = 0;
  int so_error = 0;                  // what getsockopt(SO_ERROR) reports next
  bool tcp_connect_pending = false;  // kTcp after a fallback that issued connect(2) itself
  bool cleared_nonblock = false;     // we set O_NONBLOCK for our own connect(2): undo it
  uint64_t created_ns = 0, decided_ns = 0;

  // Negotiation.
  std::unique_ptr<transport::Connection> conn;  // the fast channel
  uint8_t msg_in[kWireSize] = {};
  size_t msg_in_len = 0;
  std::string msg_out;  // negotiation bytes the channel has not taken yet
  reactor::TimerId deadline = 0;
  TcpWatch watch;
  int placeholder = -1;  // the unconnected socket the fd numbers will point at once fast
  sockaddr_storage dest{};  // client: where the program connects to
  socklen_t dest_len = 0;

  // Data path (kFast).
  std::vector<uint8_t> staging;  // bytes read from the channel, not yet delivered (MSG_PEEK, FIONREAD)
  size_t staging_off = 0;
  bool rx_ready = false;  // known readable: no read handler installed
  bool tx_ready = false;  // known writable: no write handler installed
  bool eof = false;       // the peer shut down its writing side (read returned 0)
  bool failed = false;    // the channel failed (peer died): ECONNRESET once, then EOF/EPIPE
  bool reset_reported = false;
  bool shut_rd = false, shut_wr = false;
  uint64_t rx_gen = 1, tx_gen = 1;  // bumped each time readiness is found anew (EPOLLET)
  int64_t rcvtimeo_ms = -1, sndtimeo_ms = -1;  // SO_RCVTIMEO / SO_SNDTIMEO (-1: none)
  uint64_t bytes_in = 0, bytes_out = 0;
  std::vector<Membership*> memberships;

  // Listener.
  uint16_t port = 0;
  sockaddr_storage bound{};
  std::shared_ptr<Rendezvous> rendezvous;

  size_t staged() const { return staging.size() - staging_off; }
  bool closed() const { return fds.empty(); }
};

// An fd number's object.
struct FdObject {
  std::shared_ptr<Socket> sock;
  std::shared_ptr<Epoll> epoll;
};

class Engine;

struct Process {
  std::mutex mu;
  bool options_loaded = false;
  Options options;
  Status options_error;
  std::unordered_map<int, FdObject> fds;
  std::vector<std::weak_ptr<Socket>> sockets;  // every socket of ours, for listings
  Engine* engine = nullptr;  // created on first need; abandoned (leaked) in a fork child
  uint64_t next_id = 1;
  pid_t pid = 0;
  bool io_uring_seen = false;  // the program set up an io_uring: new connections stay TCP
  // Totals since start, for listings.
  uint64_t total_fast = 0, total_tcp = 0, total_fallback = 0;
};
Process& process();

// Locks the process state and marks the thread as inside the preload.  unlock()/lock()
// around blocking waits.  If the engine exists, the loop is adopted by this thread.
class EngineLock {
 public:
  EngineLock();
  ~EngineLock();
  EngineLock(const EngineLock&) = delete;
  EngineLock& operator=(const EngineLock&) = delete;
  void unlock();
  void lock();
  bool owns() const { return owns_; }

 private:
  bool owns_ = false;
  bool was_in_preload_ = false;
};

// --- helpers under the lock ----------------------------------------------------------------
const Options& options();  // loads them on first use (a bad value: logged, mode tcp)
FdObject* find_fd(int fd);
std::shared_ptr<Socket> find_socket(int fd);
std::shared_ptr<Epoll> find_epoll(int fd);
// Recomputes fd tags of every fd naming `s` (after a phase change).
void retag(const Socket& s);
void set_tag(int fd, uint8_t tag);
uint8_t socket_tag(const Socket& s);
std::shared_ptr<Socket> new_socket(int fd, int family);
// Adds fd as another name of s (dup).  Replaces whatever fd named before (the caller closed it).
void name_socket(int fd, const std::shared_ptr<Socket>& s);
std::shared_ptr<Epoll> new_epoll(int fd);
// Forgets fd (after the kernel fd is gone or renamed): drops its memberships and, for the
// last name of a socket, closes the fast channel.
void forget_fd(int fd);

// Logs and counts a decision; marks the status file for rewrite.
void note_decision(Socket& s);

}  // namespace conduit::preload
