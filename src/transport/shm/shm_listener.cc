#include "shm/shm_listener.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "conduit/base/log.h"
#include "shm/shm_handshake.h"
#include "shm/shm_paths.h"

namespace conduit::transport::shm {

ShmListener::ShmListener(reactor::EventLoop& loop, UniqueFd fd, const ShmOptions& options, std::string path,
                         AcceptCallback cb)
    : loop_(loop), fd_(std::move(fd)), options_(options), path_(std::move(path)), on_accept_(std::move(cb)) {}

Status ShmListener::start() {
  struct stat st{};
  if (::lstat(path_.c_str(), &st) == 0) {
    dev_ = st.st_dev;
    ino_ = st.st_ino;
  }
  CONDUIT_RETURN_IF_ERROR(loop_.add(fd_.get(), reactor::kReadable, this));
  watching_ = true;
  return {};
}

void ShmListener::close() {
  if (resume_timer_ != 0) loop_.cancel(resume_timer_);
  resume_timer_ = 0;
  if (!fd_) return;
  if (loop_.watching(fd_.get())) (void)loop_.remove(fd_.get());
  watching_ = false;
  fd_.reset();
  // Unlink only our own file: once we stopped listening, another server may already have
  // replaced it as stale.
  struct stat st{};
  if (::lstat(path_.c_str(), &st) == 0 && st.st_dev == dev_ && st.st_ino == ino_) ::unlink(path_.c_str());
  handshaking_.clear();
  handshakes_.store(0, std::memory_order_relaxed);
}

ListenerStats ShmListener::stats() const {
  ListenerStats s;
  s.handshakes = handshakes_.load(std::memory_order_relaxed);
  // The region is created and handed over in one step (serve_hello), so a handshake in
  // progress holds a socket and 32 bytes of hello, never ring memory.
  s.handshake_bytes = 0;
  s.refused = refused_.load(std::memory_order_relaxed);
  s.failed = failed_.load(std::memory_order_relaxed);
  return s;
}

void ShmListener::update_watch() {
  handshakes_.store(handshaking_.size(), std::memory_order_relaxed);
  const bool want = fd_ && resume_timer_ == 0 && handshaking_.size() < options_.max_handshakes;
  if (want == watching_) return;
  if (loop_.modify(fd_.get(), want ? reactor::kReadable : 0).ok()) watching_ = want;
}

void ShmListener::pause_accepting() {
  if (resume_timer_ != 0 || !fd_) return;
  resume_timer_ = loop_.run_after(100'000'000ull, [this] {
    resume_timer_ = 0;
    update_watch();
  });
  update_watch();
}

void ShmListener::refuse(UniqueFd sock, RejectReason why) {
  refused_.fetch_add(1, std::memory_order_relaxed);
  // A fresh socket has room for 32 bytes.  The client's hello may still be unread: the
  // kernel then resets the connection, but only after the client has read our answer.
  (void)send_hello(sock.get(), reject_hello(why), nullptr, 0);
}

void ShmListener::on_events(uint32_t) {
  // A bounded batch per wakeup so one busy listener can't starve the loop.
  for (int i = 0; i < 64 && fd_ && handshaking_.size() < options_.max_handshakes; ++i) {
    UniqueFd c(::accept4(fd_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!c) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      CONDUIT_LOG(kWarn) << "shm accept on " << path_ << ": " << std::strerror(errno);
      // Out of fds or memory: the pending connection stays queued and the listener stays
      // readable, so back off instead of spinning on it.
      pause_accepting();
      return;
    }
    // Before anything is spent on it (the handshake's timer, its loop registration): is
    // this a uid we serve, and does the application admit it?
    Result<PeerCred> cred = peer_credentials(c.get());
    Status allowed = cred.ok() ? check_peer_uid(*cred, options_.allow_uids, "client") : cred.status();
    if (!allowed.ok()) {
      // Worth a warning (someone else is knocking), but not a log line per attempt.
      if (++uid_refusals_ <= 10)
        CONDUIT_LOG(kWarn) << "shm accept on " << path_ << ": refused: " << allowed.to_string()
                           << (uid_refusals_ == 10 ? " (further refusals are logged at debug level)" : "");
      else
        CONDUIT_LOG(kDebug) << "shm accept on " << path_ << ": refused: " << allowed.to_string();
      refuse(std::move(c), RejectReason::kPermission);
      continue;
    }
    if (admit_ && !admit_()) {
      CONDUIT_LOG(kDebug) << "shm accept on " << path_ << ": refused " << peer_pid_of(c.get()) << " (admission)";
      refuse(std::move(c), RejectReason::kResources);
      continue;
    }
    handshaking_.push_back(std::make_unique<ShmConnection>(loop_, std::move(c), ConnState::kAccepting, options_, path_));
    ShmConnection* conn = handshaking_.back().get();
    if (Status s = conn->begin_accept([this](ShmConnection* done, Status st) { handshake_done(done, std::move(st)); });
        !s.ok()) {
      CONDUIT_LOG(kWarn) << "shm accept: " << s.to_string();
      failed_.fetch_add(1, std::memory_order_relaxed);
      handshaking_.pop_back();
    }
  }
  // At max_handshakes: stop accepting until one finishes (handshake_done).
  update_watch();
}

void ShmListener::handshake_done(ShmConnection* c, Status s) {
  auto it = std::find_if(handshaking_.begin(), handshaking_.end(), [c](const auto& p) { return p.get() == c; });
  if (it == handshaking_.end()) return;
  std::unique_ptr<ShmConnection> conn = std::move(*it);
  handshaking_.erase(it);
  update_watch();
  if (!s.ok()) {
    failed_.fetch_add(1, std::memory_order_relaxed);
    // We are inside the connection's own handler.
    loop_.destroy_later(std::move(conn));
    return;
  }
  AcceptCallback cb = on_accept_;  // the callee may close or destroy the listener
  cb(std::move(conn));
}

}  // namespace conduit::transport::shm
