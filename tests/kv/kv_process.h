// Test helper: conduit-kv as a child process (the real binary, CONDUIT_KV_BINARY).
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "conduit/base/clock.h"

#ifndef CONDUIT_KV_BINARY
#error "CONDUIT_KV_BINARY must name the conduit-kv executable"
#endif

namespace conduit::kv::testing {

// A conduit-kv child process; the URL is read from its "ready" line on stderr.
class ServerProcess {
 public:
  // file_size_limit > 0: the child runs under RLIMIT_FSIZE with SIGXFSZ ignored, so writes
  // past the limit fail with EFBIG -- a full disk, as far as the server can tell.
  // prefix: run the binary under another program, e.g. {"strace", "-f", "-o", "f", "--"}
  // (looked up in PATH); pid() is then that program's.
  explicit ServerProcess(const std::vector<std::string>& args, uint64_t file_size_limit = 0,
                         const std::vector<std::string>& prefix = {}) {
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(p[1], 2);
      if (file_size_limit > 0) {
        ::signal(SIGXFSZ, SIG_IGN);
        const rlimit lim{file_size_limit, RLIM_INFINITY};  // soft only: raisable later
        ::setrlimit(RLIMIT_FSIZE, &lim);
      }
      std::vector<char*> argv;
      for (const auto& a : prefix) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(const_cast<char*>(CONDUIT_KV_BINARY));
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      if (prefix.empty())
        ::execv(CONDUIT_KV_BINARY, argv.data());
      else
        ::execvp(argv[0], argv.data());
      ::_exit(127);
    }
    ::close(p[1]);
    log_fd_ = p[0];
    // Wait (bounded) for "ready to accept connections on tcp://...".
    const uint64_t deadline = monotonic_ns() + 20'000'000'000ull;
    char buf[4096];
    while (monotonic_ns() < deadline && url_.empty()) {
      const ssize_t n = ::read(log_fd_, buf, sizeof buf);
      if (n <= 0) break;
      log_.append(buf, static_cast<size_t>(n));
      const size_t at = log_.find("connections on tcp://");
      if (at != std::string::npos) {
        const size_t start = at + std::strlen("connections on ");
        const size_t end = log_.find_first_of(" \n", start);
        if (end != std::string::npos) url_ = log_.substr(start, end - start);
      }
    }
    // Keep draining its stderr so it never blocks on a full pipe (kept for log()).
    drain_ = std::thread([this] {
      char b[4096];
      ssize_t n;
      while ((n = ::read(log_fd_, b, sizeof b)) > 0) {
        std::lock_guard<std::mutex> lock(log_mu_);
        log_.append(b, static_cast<size_t>(n));
      }
    });
  }
  ~ServerProcess() {
    kill(SIGKILL);
    if (drain_.joinable()) drain_.join();
    if (log_fd_ >= 0) ::close(log_fd_);
  }
  const std::string& url() const { return url_; }
  pid_t pid() const { return pid_; }
  // What it printed on stderr so far.
  std::string log() const {
    std::lock_guard<std::mutex> lock(log_mu_);
    return log_;
  }
  void kill(int sig) {
    if (pid_ <= 0) return;
    ::kill(pid_, sig);
    int st;
    ::waitpid(pid_, &st, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
  int log_fd_ = -1;
  std::string url_;
  mutable std::mutex log_mu_;
  std::string log_;
  std::thread drain_;
};

}  // namespace conduit::kv::testing
