#include "process.h"

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "conduit/base/clock.h"
#include "conduit/base/log.h"
#include "engine.h"
#include "epoll.h"

namespace conduit::preload {
namespace {

// fd tags: 256 chunks of 4096, allocated on first use of a chunk and never freed (the
// interposers read them without the lock).
constexpr int kChunkBits = 12;
constexpr int kChunks = kMaxTrackedFd >> kChunkBits;
std::atomic<std::atomic<uint8_t>*> g_tags[kChunks];

void at_fork_prepare();
void at_fork_parent();
void at_fork_child();

Process* make_process() {
  auto* p = new Process();  // never destroyed: interposers may run during exit
  p->pid = getpid();
  pthread_atfork(at_fork_prepare, at_fork_parent, at_fork_child);
  return p;
}

Process& the_process() {
  static Process* p = make_process();
  return *p;
}

void at_fork_prepare() { the_process().mu.lock(); }
void at_fork_parent() { the_process().mu.unlock(); }

// The child has one thread and a copy of everything, including the mapped rings and the
// QPs' memory: it must never touch the parent's fast channels or its loop (the loop's epoll
// instance is shared with the parent; removing an fd from it would remove it for the parent).
// So the engine is abandoned (leaked, never destroyed), every fast or negotiating socket
// becomes kForked (I/O fails with ENOTCONN), listeners lose their rendezvous, and epoll
// instances are marked inherited.  See README.md, "fork and exec".
void at_fork_child() {
  Process& p = the_process();
  new (&p.mu) std::mutex();  // the parent's lock, held by the forking thread, is copied locked
  p.pid = getpid();
  p.engine = nullptr;  // leaked on purpose
  static std::vector<std::shared_ptr<Rendezvous>>* leaked = new std::vector<std::shared_ptr<Rendezvous>>();
  for (auto& w : p.sockets) {
    std::shared_ptr<Socket> s = w.lock();
    if (!s) continue;
    s->inherited = true;
    (void)s->conn.release();  // the parent's channel: never close it from here
    s->deadline = 0;
    s->msg_out.clear();
    if (s->rendezvous) leaked->push_back(std::move(s->rendezvous));
    if (negotiating(s->phase) || s->phase == Phase::kFast) {
      s->phase = Phase::kForked;
      s->reason = "inherited across fork(); the parent process owns the fast channel";
    } else if (s->phase == Phase::kListening) {
      s->reason = "inherited across fork(); the parent process holds the rendezvous";
    }
    for (int fd : s->fds) set_tag(fd, socket_tag(*s));
  }
  for (auto& [fd, obj] : p.fds)
    if (obj.epoll) obj.epoll->inherited = true;
}

std::atomic<uint8_t>* chunk_for(int fd, bool create) {
  if (fd < 0 || fd >= kMaxTrackedFd) return nullptr;
  std::atomic<uint8_t>* c = g_tags[fd >> kChunkBits].load(std::memory_order_acquire);
  if (c == nullptr && create) {
    c = new std::atomic<uint8_t>[1 << kChunkBits]();
    g_tags[fd >> kChunkBits].store(c, std::memory_order_release);
  }
  return c;
}

}  // namespace

std::string_view phase_name(Phase p) {
  switch (p) {
    case Phase::kSocket: return "socket";
    case Phase::kListening: return "listening";
    case Phase::kFastConnecting: return "fast-connecting";
    case Phase::kAnnouncing: return "announcing";
    case Phase::kTcpConnecting: return "tcp-connecting";
    case Phase::kAwaitDecision: return "await-decision";
    case Phase::kAwaitCommit: return "await-commit";
    case Phase::kFast: return "fast";
    case Phase::kTcp: return "tcp";
    case Phase::kForked: return "forked";
  }
  return "?";
}

std::string_view mode_name(Mode m) {
  switch (m) {
    case Mode::kNone: return "tcp";
    case Mode::kShm: return "shm";
    case Mode::kRdma: return "rdma";
  }
  return "?";
}

std::string_view role_name(Role r) {
  switch (r) {
    case Role::kNone: return "-";
    case Role::kClient: return "client";
    case Role::kServer: return "server";
    case Role::kListener: return "listener";
  }
  return "?";
}

Process& process() { return the_process(); }

uint8_t fd_tag(int fd) {
  std::atomic<uint8_t>* c = chunk_for(fd, false);
  return c == nullptr ? 0 : c[fd & ((1 << kChunkBits) - 1)].load(std::memory_order_acquire);
}

void set_tag(int fd, uint8_t tag) {
  std::atomic<uint8_t>* c = chunk_for(fd, tag != 0);
  if (c != nullptr) c[fd & ((1 << kChunkBits) - 1)].store(tag, std::memory_order_release);
}

uint8_t socket_tag(const Socket& s) {
  uint8_t t = kTagTracked;
  if (user_ready_phase(s.phase)) t |= kTagEngine | kTagData;
  else if (s.phase == Phase::kListening && s.rendezvous) t |= kTagEngine;
  return t;
}

void retag(const Socket& s) {
  for (int fd : s.fds) set_tag(fd, socket_tag(s));
}

EngineLock::EngineLock() { lock(); }
EngineLock::~EngineLock() {
  if (owns_) unlock();
}
void EngineLock::lock() {
  was_in_preload_ = t_in_preload;
  t_in_preload = true;
  process().mu.lock();
  owns_ = true;
  if (Engine* e = process().engine) e->loop().adopt_current_thread();
}
void EngineLock::unlock() {
  process().mu.unlock();
  owns_ = false;
  t_in_preload = was_in_preload_;
}

const Options& options() {
  Process& p = process();
  if (!p.options_loaded) {
    p.options_loaded = true;
    Result<Options> o = load_options([](const char* name) { return std::getenv(name); });
    if (o.ok()) {
      p.options = std::move(o).value();
    } else {
      // A typo must not silently change what a program does: say so loudly and accelerate nothing.
      p.options_error = o.status();
      p.options = Options();
      p.options.mode = Policy::kTcp;
      CONDUIT_LOG(kError) << "conduit-preload: " << o.status().to_string() << " -- accelerating nothing";
    }
    set_log_level(p.options.log);
  }
  return p.options;
}

FdObject* find_fd(int fd) {
  auto& m = process().fds;
  auto it = m.find(fd);
  return it == m.end() ? nullptr : &it->second;
}

std::shared_ptr<Socket> find_socket(int fd) {
  FdObject* o = find_fd(fd);
  return o ? o->sock : nullptr;
}

std::shared_ptr<Epoll> find_epoll(int fd) {
  FdObject* o = find_fd(fd);
  return o ? o->epoll : nullptr;
}

std::shared_ptr<Socket> new_socket(int fd, int family) {
  Process& p = process();
  auto s = std::make_shared<Socket>();
  s->id = p.next_id++;
  s->family = family;
  s->created_ns = monotonic_ns();
  s->watch.s = s.get();
  // Drop expired entries now and then, so the list stays the size of what is open.
  if (p.sockets.size() > 64 && p.sockets.size() % 64 == 0)
    std::erase_if(p.sockets, [](const std::weak_ptr<Socket>& w) { return w.expired(); });
  p.sockets.push_back(s);
  name_socket(fd, s);
  return s;
}

void name_socket(int fd, const std::shared_ptr<Socket>& s) {
  process().fds[fd] = FdObject{s, nullptr};
  s->fds.push_back(fd);
  set_tag(fd, socket_tag(*s));
}

std::shared_ptr<Epoll> new_epoll(int fd) {
  auto e = std::make_shared<Epoll>();
  e->fd = fd;
  e->names.push_back(fd);
  process().fds[fd] = FdObject{nullptr, e};
  set_tag(fd, kTagTracked);
  return e;
}

void forget_fd(int fd) {
  Process& p = process();
  auto it = p.fds.find(fd);
  if (it == p.fds.end()) return;
  FdObject obj = std::move(it->second);
  p.fds.erase(it);
  set_tag(fd, 0);
  if (obj.epoll) {
    Epoll& e = *obj.epoll;
    std::erase(e.names, fd);
    if (e.names.empty()) close_epoll(e);
    else if (e.fd == fd) e.fd = e.names.front();
    return;
  }
  Socket& s = *obj.sock;
  std::erase(s.fds, fd);
  drop_memberships_of_fd(s, fd);
  if (s.closed()) {
    if (Engine* e = p.engine) e->socket_closed(s);
    s.conn.reset();  // only reached without an engine (a fork child: already released)
  }
}

void note_decision(Socket& s) {
  Process& p = process();
  s.decided_ns = monotonic_ns();
  if (s.phase == Phase::kFast) ++p.total_fast;
  else if (s.phase == Phase::kTcp) ++p.total_tcp;
  const uint64_t ms = (s.decided_ns - s.created_ns) / 1'000'000;
  const int fd = s.fds.empty() ? -1 : s.fds.front();
  if (s.phase == Phase::kFast)
    CONDUIT_LOG(kInfo) << "conduit-preload[" << p.pid << "]: fd " << fd << " " << role_name(s.role) << " "
                       << s.tuple.client_text() << " -> " << s.tuple.server_text() << ": " << mode_name(s.mode)
                       << " (" << ms << " ms)";
  else
    CONDUIT_LOG(kInfo) << "conduit-preload[" << p.pid << "]: fd " << fd << " " << role_name(s.role) << ": tcp ("
                       << s.reason << ")";
  if (p.engine) p.engine->status_changed();
}

}  // namespace conduit::preload
