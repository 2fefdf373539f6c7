#include "engine.h"

#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>

#include "conduit/base/clock.h"
#include "conduit/base/log.h"
#include "fast_io.h"

namespace conduit::preload {

Engine* Engine::get() {
  Process& p = process();
  if (p.engine != nullptr) return p.engine;
  static bool failed_once = false;
  Result<std::unique_ptr<reactor::EventLoop>> loop = reactor::EventLoop::create();
  UniqueFd bell(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!loop.ok() || !bell) {
    if (!failed_once)
      CONDUIT_LOG(kError) << "conduit-preload: no event loop: "
                          << (loop.ok() ? std::string("eventfd failed") : loop.status().to_string());
    failed_once = true;
    return nullptr;
  }
  p.engine = new Engine(std::move(loop).value(), std::move(bell));
  p.engine->loop().adopt_current_thread();
  register_exit_handler();
  return p.engine;
}

Engine::Engine(std::unique_ptr<reactor::EventLoop> loop, UniqueFd bell) : loop_(std::move(loop)), bell_(std::move(bell)) {
  marker_ = (kMarkerTag << 32) | static_cast<uint32_t>(process().pid);
  started_unix_ms_ = static_cast<uint64_t>(::time(nullptr)) * 1000;
  last_drive_ns_ = monotonic_ns();
  start_progress_thread();
}

void Engine::want_rx(Socket& s) {
  if (s.phase != Phase::kFast || s.rx_ready || !s.conn) return;
  rx_wanted_.push_back(&s);
}

void Engine::want_tx(Socket& s) {
  if (s.phase != Phase::kFast || s.tx_ready || !s.conn) return;
  tx_wanted_.push_back(&s);
}

// Handlers are installed here, right before the loop's hooks run, rather than where a read
// found the channel empty: a shm connection announces sleep as soon as a handler is
// installed outside its hook, and the peer would then pay a doorbell per write until the
// next wait.  Installing them just before run_once() lets the hook see data at once.
void Engine::drive(bool may_skip_kernel) {
  for (Socket* s : rx_wanted_) {
    if (s->phase != Phase::kFast || s->rx_ready || !s->conn) continue;
    s->conn->set_read_handler([s](transport::Connection& c) {
      s->rx_ready = true;
      ++s->rx_gen;
      if (Engine* e = process().engine) ++e->handler_runs_;
      c.set_read_handler(nullptr);
    });
  }
  rx_wanted_.clear();
  for (Socket* s : tx_wanted_) {
    if (s->phase != Phase::kFast || s->tx_ready || !s->conn) continue;
    s->conn->set_write_handler([s](transport::Connection& c) {
      s->tx_ready = true;
      ++s->tx_gen;
      if (Engine* e = process().engine) ++e->handler_runs_;
      c.set_write_handler(nullptr);
    });
  }
  tx_wanted_.clear();
  const uint64_t runs = handler_runs_;
  const unsigned every = loop_->last_iteration_busy() ? kKernelEvery : kKernelEveryArmed;
  const bool ask = !may_skip_kernel || ++kernel_skips_ >= every;
  if (ask) kernel_skips_ = 0;
  if (Status st = ask ? loop_->run_once(0) : loop_->poll_once(); !st.ok())
    CONDUIT_LOG(kWarn) << "conduit-preload: loop: " << st.to_string();
  last_drive_ns_ = loop_->now_ns();
  // Another thread blocked in a kernel wait may be waiting for what just became ready, and
  // this thread drained the loop events that would have woken it.  The loop's own wake() is
  // no use here: the next drive() drains it too, possibly before the sleeper runs, and a
  // poll() that finds its fd unready again goes back to sleep.  So the bell: readable until
  // every thread that was waiting when it rang has come back (end_wait).  Every ring writes:
  // epoll instances hold the bell edge-triggered, so each ring is one report there.
  if (runs != handler_runs_ && waiters > 0) {
    const uint64_t one = 1;
    ssize_t n = sys().write(bell_.get(), &one, sizeof one);
    (void)n;
    unanswered_ = waiters;
    ++ring_gen_;
  }
}

void Engine::end_wait(uint64_t gen) {
  --waiters;
  if (gen == ring_gen_ || unanswered_ == 0) return;
  if (--unanswered_ == 0) {
    uint64_t v;
    ssize_t n = sys().read(bell_.get(), &v, sizeof v);
    (void)n;
  }
}

int Engine::poll_timeout_ms() {
  if (!rx_wanted_.empty() || !tx_wanted_.empty()) return 0;
  return loop_->poll_timeout_ms(loop_->now_ns());
}

void Engine::retire(std::unique_ptr<transport::Connection> c) {
  if (!c) return;
  if (c->caps().transport == "rdma") --live_rdma_;
  c->set_read_handler(nullptr);
  c->set_write_handler(nullptr);
  c->close();
  loop_->destroy_later(std::move(c));
}

void Engine::socket_closed(Socket& s) {
  std::erase(rx_wanted_, &s);
  std::erase(tx_wanted_, &s);
  if (s.deadline != 0) loop_->cancel(s.deadline);
  s.deadline = 0;
  if (loop_->watching(s.watch.fd)) (void)loop_->remove(s.watch.fd);
  if (negotiating(s.phase)) count_negotiation(-1);
  retire(std::move(s.conn));
  release_rendezvous(s);
  status_changed();
}

void Engine::detach_listener(Socket& s) {
  release_rendezvous(s);
  s.reason.clear();
  status_changed();
}

void Engine::release_rendezvous(Socket& s) {
  if (!s.rendezvous) return;
  if (--s.rendezvous->users == 0) rendezvous_.erase(s.rendezvous->port);
  s.rendezvous.reset();
}

void Engine::shutdown_at_exit() {
  for (const auto& w : process().sockets) {
    std::shared_ptr<Socket> s = w.lock();
    if (!s) continue;
    if (s->conn) retire(std::move(s->conn));
    s->rendezvous.reset();
  }
  while (!announces_.empty()) drop_announce(announces_.begin()->first);
  for (auto& [port, w] : rendezvous_) {
    (void)port;
    if (std::shared_ptr<Rendezvous> r = w.lock()) {
      if (r->shm) r->shm->close();
      if (r->rdma) r->rdma->close();
    }
  }
  rendezvous_.clear();
  // Let closes finish (an rdma close posts what is buffered first), briefly.
  const uint64_t until = monotonic_ns() + 100'000'000;
  do {
    drive();
  } while (loop_->poll_timeout_ms() == 0 && monotonic_ns() < until);
  remove_status_file();
}

// --- the progress thread ---------------------------------------------------------------------
// Conduit's transports do some of their work in the loop: rdma:// posts buffered writes and
// sends keepalives from it, and negotiations time out from its timers.  A program that stops
// calling into the preload -- busy computing, or blocked in a call the preload does not see
// -- would stall that.  This thread drives the loop when nobody else has for a while: at most
// every 5 ms while rdma channels or negotiations exist, else when the next timer is due (and
// every 50 ms while rendezvous listeners wait for announces).  It takes the lock with
// try_lock, never waiting behind the program's threads.

void Engine::start_progress_thread() {
  // Created with every signal blocked (it inherits the mask): a signal sent to the process
  // must reach the program's threads, as if this one did not exist.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  progress_ = std::thread([this] { progress_main(); });
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

void Engine::stop_progress_thread() {
  {
    std::lock_guard<std::mutex> g(progress_mu_);
    progress_stop_ = true;
  }
  progress_cv_.notify_all();
  if (progress_.joinable()) progress_.join();
}

void Engine::progress_main() {
  t_in_preload = true;  // this thread's own libc calls (and the loop's) go straight through
  int period_ms = 50;
  uint64_t due_ns = 50'000'000ull;  // as of the last look under the lock
  uint64_t my_drive_ns = 0;         // last_drive_ns_ as this thread's own drive left it
  std::unique_lock<std::mutex> g(progress_mu_);
  while (!progress_stop_) {
    progress_cv_.wait_for(g, std::chrono::milliseconds(period_ms));
    if (progress_stop_) break;
    std::unique_lock<std::mutex> lk(process().mu, std::try_to_lock);
    if (!lk.owns_lock()) {
      // A program thread is in the preload right now, so it drives the loop itself (every
      // wait does): look again when a drive would be due after this one.
      period_ms = static_cast<int>(due_ns / 1'000'000);
      continue;
    }
    if (process().engine != this) return;  // abandoned (cannot happen in this process: fork has no threads)
    uint64_t now = monotonic_ns();
    const bool busy = live_rdma_ > 0 || negotiations_ > 0;
    due_ns = busy ? 5'000'000ull : 50'000'000ull;
    // How soon the loop wants driving again, if nobody else does.  A timer due in t > 0 ms:
    // then (at least 1 ms on).  t == 0, the last iteration did work or left some: a program
    // thread that drove it drives again on its next call or wait, so this thread steps in
    // only after due_ns without one (a ping-pong drives every round trip; waking this thread
    // each millisecond cost a context switch per message on the program's core); when this
    // thread made that drive, it is the driver and looks again in 1 ms.
    const auto want_ns = [&](int t) -> uint64_t {
      if (t > 0) return std::max<uint64_t>(1'000'000, static_cast<uint64_t>(t) * 1'000'000);
      if (t < 0) return UINT64_MAX;
      return last_drive_ns_ == my_drive_ns ? 1'000'000 : due_ns;
    };
    if (now - last_drive_ns_ >= std::min(due_ns, want_ns(loop_->poll_timeout_ms()))) {
      loop_->adopt_current_thread();
      drive();
      my_drive_ns = now = last_drive_ns_;
    }
    // Sleep until the next look is due, counted from the last drive (the program's or this
    // thread's): a program that keeps calling into the preload keeps this thread asleep.
    const uint64_t idle_ns = busy ? due_ns : (rendezvous_.empty() ? 1'000'000'000ull : 50'000'000ull);
    const uint64_t wake = last_drive_ns_ + std::min(idle_ns, want_ns(poll_timeout_ms()));
    period_ms = wake > now ? static_cast<int>(std::max<uint64_t>(1, (wake - now + 999'999) / 1'000'000)) : 1;
  }
}

}  // namespace conduit::preload
