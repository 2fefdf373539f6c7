#include "epoll.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <string>

#include "engine.h"
#include "fast_io.h"
#include "wait.h"

namespace conduit::preload {
namespace {

constexpr uint32_t kInBits = EPOLLIN | EPOLLRDNORM | EPOLLPRI;
constexpr uint32_t kOutBits = EPOLLOUT | EPOLLWRNORM;
constexpr uint32_t kFlagBits = EPOLLET | EPOLLONESHOT | EPOLLEXCLUSIVE | EPOLLWAKEUP;

Membership* find_membership(Epoll& e, int fd) {
  for (auto& m : e.members)
    if (m->fd == fd) return m.get();
  return nullptr;
}

void remove_membership(Membership* m) {
  if (m->sock) std::erase(m->sock->memberships, m);
  if (m->child) std::erase(m->child->parents, m);
  auto& v = m->epoll->members;
  v.erase(std::remove_if(v.begin(), v.end(), [m](const std::unique_ptr<Membership>& p) { return p.get() == m; }),
          v.end());
}

void reset_edges(Membership& m) {
  m.disabled = false;
  if (m.sock) {
    m.seen_rx = m.sock->rx_gen - 1;
    m.seen_tx = m.sock->tx_gen - 1;
  }
}

// What a member reports now, before EPOLLET/EPOLLONESHOT bookkeeping.  Non-consuming.
uint32_t member_events(Membership& m, int depth = 0) {
  if (m.disabled) return 0;
  if (m.child) return (depth < 5 && epoll_user_ready(*m.child)) ? (m.events & EPOLLIN) : 0;
  Socket& s = *m.sock;
  if (m.in_kernel || s.closed()) return 0;
  const uint32_t want = (m.events & ~kFlagBits) | EPOLLERR | EPOLLHUP;
  uint32_t got = readiness(s, (m.events & EPOLLRDHUP) != 0) & want;
  if (got == 0 || !(m.events & EPOLLET)) return got;
  const bool in_edge = (got & kInBits) && m.seen_rx != s.rx_gen;
  const bool out_edge = (got & kOutBits) && m.seen_tx != s.tx_gen;
  if (!in_edge && !out_edge) return 0;
  return (in_edge ? got & (kInBits | EPOLLRDHUP) : 0) | (out_edge ? got & kOutBits : 0) | (got & (EPOLLERR | EPOLLHUP));
}

// The engine's backend fd in e (and in every instance e sits in).
void ensure_marker(Epoll& e) {
  if (e.marker || e.inherited) return;
  Engine* eng = Engine::get();
  if (eng == nullptr) return;
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = eng->marker();
  if (sys().epoll_ctl(e.fd, EPOLL_CTL_ADD, eng->backend_fd(), &ev) != 0 && errno != EEXIST) return;
  ev.events = EPOLLIN | EPOLLET;  // one report per ring (drive() writes at each), no spinning
  ev.data.u64 = eng->bell_marker();
  if (sys().epoll_ctl(e.fd, EPOLL_CTL_ADD, eng->bell_fd(), &ev) != 0 && errno != EEXIST) return;
  e.marker = true;
  set_tag(e.fd, kTagTracked | kTagEngine);
  for (Membership* p : e.parents) ensure_marker(*p->epoll);
}

bool socket_needs_engine(const Socket& s) {
  return user_ready_phase(s.phase) || (s.phase == Phase::kListening && s.rendezvous);
}

// An epoll instance we did not see created (a raw syscall, or inherited from a parent that
// was not preloaded): adopt it if it really is one.
std::shared_ptr<Epoll> adopt_epoll(int fd) {
  char path[64], target[64];
  std::snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  const ssize_t n = readlink(path, target, sizeof target - 1);
  if (n <= 0) return nullptr;
  target[n] = '\0';
  if (std::strcmp(target, "anon_inode:[eventpoll]") != 0) return nullptr;
  return new_epoll(fd);
}

class EpollSet final : public WaitSet {
 public:
  // While ours are ready at every call, the kernel's fds are looked at in two calls of
  // every kTurns: first in one (so that with a small maxevents the program's own fds do not
  // starve: the kernel round-robins its ready list the same way), after ours in another (so
  // they are reported together).  The other calls make no system call: the program sees a
  // kernel fd that became ready meanwhile at most kTurns - 1 calls later, and a wait that
  // finds nothing of ours ready looks at the kernel as before.
  static constexpr unsigned kTurns = 4;
  EpollSet(Epoll& e, epoll_event* out, int max)
      : e_(e), out_(out), max_(max), turn_(++e.turn % kTurns), kernel_first_(turn_ == 0) {}
  bool kernel_due_when_ready() const override { return turn_ == kTurns / 2; }
  int collect() override {
    int added = 0;
    if (kernel_first_) {
      kernel_first_ = false;
      bool b = false;
      const int k = kernel_wait(-1, -1, 0, nullptr, &b);
      if (k > 0) added += k;
    }
    const size_t n = e_.members.size();
    if (n == 0) return 0;
    const size_t start = e_.cursor % n;
    for (size_t k = 0; k < n && filled_ < max_; ++k) {
      Membership& m = *e_.members[(start + k) % n];
      const uint32_t got = member_events(m);
      if (got == 0) continue;
      if (m.child && already_filled(m.data.u64)) continue;  // the kernel reported it already
      out_[filled_].events = got;
      out_[filled_].data = m.data;
      ++filled_;
      ++added;
      if (m.sock && (m.events & EPOLLET)) {
        if (got & kInBits) m.seen_rx = m.sock->rx_gen;
        if (got & kOutBits) m.seen_tx = m.sock->tx_gen;
      }
      if (m.events & EPOLLONESHOT) m.disabled = true;
    }
    e_.cursor = start + 1;
    return added;
  }
  int kernel_wait(int, int, int timeout_ms, const sigset_t* mask, bool* backend_ready) override {
    const int room = max_ - filled_;
    if (room <= 0) return 0;
    epoll_event* dst = out_ + filled_;
    const int n = sys().epoll_pwait(e_.fd, dst, room, timeout_ms, mask);
    if (n < 0) return -1;
    Engine* eng = process().engine;
    const uint64_t ours = eng ? eng->marker() : 0, bell = eng ? eng->bell_marker() : 0;
    int kept = 0;
    bool foreign = false;
    for (int i = 0; i < n; ++i) {
      const uint64_t d = dst[i].data.u64;
      if (Engine::is_marker(d)) {
        if (d == ours || d == bell) *backend_ready = true;
        else foreign = true;  // a parent process' loop (fork): not ours to drain
        continue;
      }
      if (child_reported(d)) continue;  // a nested instance we reported for its members of ours
      dst[kept++] = dst[i];
    }
    if (kept == 0 && foreign && !*backend_ready) {
      const timespec pause{0, 1'000'000};
      nanosleep(&pause, nullptr);
    }
    filled_ += kept;
    return kept;
  }
  bool backend_usable() const override { return !e_.inherited || !has_user_members(); }
  bool holds_bell() const override { return e_.marker; }

 private:
  // A nested instance is readable both through the kernel (its own kernel members, the
  // backend fd in it) and through its members of ours: report it once.
  bool already_filled(uint64_t data) const {
    for (int i = 0; i < filled_; ++i)
      if (out_[i].data.u64 == data) return true;
    return false;
  }
  bool child_reported(uint64_t data) const {
    for (int i = 0; i < filled_; ++i)
      if (out_[i].data.u64 == data)
        for (const auto& m : e_.members)
          if (m->child && m->data.u64 == data) return true;
    return false;
  }
  bool has_user_members() const {
    for (const auto& m : e_.members)
      if (!m->in_kernel || m->child) return true;
    return false;
  }
  Epoll& e_;
  epoll_event* out_;
  int max_;
  int filled_ = 0;
  unsigned turn_;
  bool kernel_first_;
};

}  // namespace

bool epoll_user_ready(Epoll& e) {
  for (auto& m : e.members)
    if (member_events(*m, 1) != 0) return true;
  return false;
}

void phase_changed(Socket& s, Phase old) {
  retag(s);
  const bool was_user = user_ready_phase(old), now_user = user_ready_phase(s.phase);
  const std::vector<Membership*> ms = s.memberships;
  for (Membership* m : ms) {
    if (!was_user && now_user && m->in_kernel) {
      sys().epoll_ctl(m->epoll->fd, EPOLL_CTL_DEL, m->fd, nullptr);
      m->in_kernel = false;
      reset_edges(*m);
    }
    if (was_user && !now_user) {
      // Plain TCP from now on: the kernel instance takes it over, and the preload forgets it.
      epoll_event ev{};
      ev.events = m->disabled ? (m->events & ~(kInBits | kOutBits | EPOLLRDHUP)) : m->events;
      ev.data = m->data;
      if (sys().epoll_ctl(m->epoll->fd, EPOLL_CTL_ADD, m->fd, &ev) != 0 && errno != EEXIST)
        CONDUIT_LOG(kWarn) << "conduit-preload: moving fd " << m->fd << " into epoll " << m->epoll->fd << ": "
                           << std::strerror(errno);
      m->in_kernel = true;
    }
    if (socket_needs_engine(s)) ensure_marker(*m->epoll);
  }
  if (s.phase == Phase::kTcp)
    for (Membership* m : ms) remove_membership(m);
}

void drop_memberships_of_fd(Socket& s, int fd) {
  const std::vector<Membership*> ms = s.memberships;
  for (Membership* m : ms)
    if (m->fd == fd) remove_membership(m);
}

void close_epoll(Epoll& e) {
  while (!e.members.empty()) remove_membership(e.members.back().get());
  const std::vector<Membership*> ps = e.parents;
  for (Membership* p : ps) remove_membership(p);
}

int preload_epoll_ctl(int epfd, int op, int fd, epoll_event* ev) {
  int err = 0;
  int rc = 0;
  {
    EngineLock lk;
    std::shared_ptr<Epoll> e = find_epoll(epfd);
    FdObject* obj = find_fd(fd);
    std::shared_ptr<Socket> s = obj ? obj->sock : nullptr;
    std::shared_ptr<Epoll> child = obj ? obj->epoll : nullptr;
    const bool ours = (s && s->phase != Phase::kTcp) || child;
    if (!ours) {
      lk.unlock();
      return sys().epoll_ctl(epfd, op, fd, ev);
    }
    if (!e) e = adopt_epoll(epfd);
    if (!e) {
      lk.unlock();
      return sys().epoll_ctl(epfd, op, fd, ev);  // not an epoll instance: the kernel says so
    }
    if (epfd == fd) return errno = EINVAL, -1;
    if (op != EPOLL_CTL_DEL && ev == nullptr) return errno = EFAULT, -1;
    Membership* m = find_membership(*e, fd);
    const bool user = s && user_ready_phase(s->phase);
    switch (op) {
      case EPOLL_CTL_ADD: {
        if (m != nullptr) return errno = EEXIST, -1;
        if (!user && sys().epoll_ctl(epfd, op, fd, ev) != 0) return -1;
        auto nm = std::make_unique<Membership>();
        nm->epoll = e.get();
        nm->fd = fd;
        nm->sock = s;
        nm->child = child;
        nm->events = ev->events;
        nm->data = ev->data;
        nm->in_kernel = !user;
        reset_edges(*nm);
        Membership* raw = nm.get();
        e->members.push_back(std::move(nm));
        if (s) s->memberships.push_back(raw);
        if (child) child->parents.push_back(raw);
        if ((s && socket_needs_engine(*s)) || (child && child->marker)) ensure_marker(*e);
        break;
      }
      case EPOLL_CTL_MOD:
        if (m == nullptr) return errno = ENOENT, -1;
        if (m->in_kernel && sys().epoll_ctl(epfd, op, fd, ev) != 0) return -1;
        m->events = ev->events;
        m->data = ev->data;
        reset_edges(*m);
        break;
      case EPOLL_CTL_DEL:
        if (m == nullptr) return errno = ENOENT, -1;
        if (m->in_kernel) rc = sys().epoll_ctl(epfd, op, fd, ev);
        err = errno;
        remove_membership(m);
        break;
      default: return errno = EINVAL, -1;
    }
  }
  if (rc != 0) errno = err;
  return rc;
}

int preload_epoll_wait(int epfd, epoll_event* events, int max, int timeout_ms, const sigset_t* mask) {
  if (max <= 0) return errno = EINVAL, -1;
  EngineLock lk;
  std::shared_ptr<Epoll> e = find_epoll(epfd);
  if (!e) {
    lk.unlock();
    return sys().epoll_pwait(epfd, events, max, timeout_ms, mask);
  }
  EpollSet set(*e, events, max);
  return wait_for(lk, set, timeout_ms, mask);
}

}  // namespace conduit::preload
