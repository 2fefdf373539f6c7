// The engine's side of the status file (status_model.h has the format).
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "conduit/base/clock.h"
#include "conduit/base/log.h"
#include "engine.h"
#include "status_model.h"

namespace conduit::preload {
namespace {

std::string sockname_text(int fd, bool peer) {
  sockaddr_storage ss{};
  socklen_t l = sizeof ss;
  const int rc = peer ? sys().getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &l)
                      : sys().getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &l);
  uint8_t f = 0, a[16];
  uint16_t port = 0;
  if (rc != 0 || !normalise_address(reinterpret_cast<sockaddr*>(&ss), &f, a, &port)) return "-";
  return address_text(f, a, port);
}

std::string self_exe() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

}  // namespace

void Engine::status_changed() {
  if (!options().status || status_timer_ != 0) return;
  status_timer_ = loop_->run_after(50'000'000, [this] {
    status_timer_ = 0;
    write_status_now();
  });
}

void Engine::write_status_now() {
  if (!options().status) return;
  Process& p = process();
  if (status_path_.empty()) {
    Result<std::string> dir = status_dir(true);
    if (!dir.ok()) {
      static bool logged = false;
      if (!logged) CONDUIT_LOG(kWarn) << "conduit-preload: no status file: " << dir.status().to_string();
      logged = true;
      return;
    }
    status_path_ = *dir + "/" + std::to_string(p.pid) + ".status";
  }
  ProcessStatus ps;
  ps.pid = p.pid;
  ps.exe = self_exe();
  ps.name = program_invocation_short_name;
  ps.mode = std::string(policy_name(options().mode));
  ps.started_ms = started_unix_ms_;
  ps.fast = p.total_fast;
  ps.tcp = p.total_tcp;
  ps.fallback = p.total_fallback;
  ps.io_uring = p.io_uring_seen;
  const uint64_t now = monotonic_ns();
  bool fast_channels = false;
  for (const auto& w : p.sockets) {
    std::shared_ptr<Socket> s = w.lock();
    if (!s || s->closed() || s->phase == Phase::kSocket) continue;
    SocketStatus st;
    st.fd = *std::min_element(s->fds.begin(), s->fds.end());
    st.role = std::string(role_name(s->role));
    st.phase = std::string(phase_name(s->phase));
    st.bytes_in = s->bytes_in;
    st.bytes_out = s->bytes_out;
    st.age_ms = (now - s->created_ns) / 1'000'000;
    st.reason = s->reason;
    if (s->phase == Phase::kFast && s->conn) {
      st.has_channel = true;
      st.channel = s->conn->snapshot();
      fast_channels = true;
    }
    if (s->phase == Phase::kListening) {
      st.mode = s->rendezvous ? s->rendezvous->offers : "tcp";
      st.local = sockname_text(st.fd, false);
      st.peer = "*";
    } else {
      st.mode = s->phase == Phase::kTcp ? "tcp" : std::string(mode_name(s->mode));
      if (s->tuple.server_port != 0) {
        const bool client = s->role == Role::kClient;
        st.local = client ? s->tuple.client_text() : s->tuple.server_text();
        st.peer = client ? s->tuple.server_text() : s->tuple.client_text();
      } else {
        st.local = sockname_text(st.fd, false);
        st.peer = sockname_text(st.fd, true);
      }
    }
    ps.sockets.push_back(std::move(st));
  }
  // Counters and QP states change without a status_changed(): refresh while channels exist.
  if (fast_channels && refresh_timer_ == 0)
    refresh_timer_ = loop_->run_after(1'000'000'000, [this] {
      refresh_timer_ = 0;
      write_status_now();
    });
  const std::string text = format_status(ps);
  const std::string tmp = status_path_ + ".tmp";
  const Libc& c = sys();
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return;
  size_t off = 0;
  while (off < text.size()) {
    const ssize_t n = c.write(fd, text.data() + off, text.size() - off);
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
  c.close(fd);
  if (off == text.size()) std::rename(tmp.c_str(), status_path_.c_str());
  else ::unlink(tmp.c_str());
}

void Engine::remove_status_file() {
  if (!status_path_.empty()) ::unlink(status_path_.c_str());
}

}  // namespace conduit::preload
