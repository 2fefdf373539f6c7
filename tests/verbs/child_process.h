// Runs a function in a forked child process, for tests whose two sides must be separate
// processes.  The child reports failure through its exit code and a message on stderr;
// gtest assertions are not used there.  A pipe lets the child send a value (e.g. the port
// it bound) to the parent.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>

namespace conduit::testing {

class ChildProcess {
 public:
  // fn(write_fd) runs in the child; its return value becomes the exit code.
  explicit ChildProcess(const std::function<int(int)>& fn) {
    int fds[2];
    if (pipe(fds) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      close(fds[0]);
      const int rc = fn(fds[1]);
      std::fflush(nullptr);
      _exit(rc);
    }
    close(fds[1]);
    read_fd_ = fds[0];
  }
  ~ChildProcess() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      int st;
      waitpid(pid_, &st, 0);
    }
    if (read_fd_ >= 0) close(read_fd_);
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  bool started() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }

  // Reads a uint32 the child wrote with send_value(); false on EOF or timeout.
  bool receive_value(uint32_t* out, int timeout_ms = 10000) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    size_t got = 0;
    auto* p = reinterpret_cast<char*>(out);
    while (got < sizeof *out) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      const ssize_t n = read(read_fd_, p + got, sizeof *out - got);
      if (n == 0) return false;
      if (n > 0) got += static_cast<size_t>(n);
    }
    return true;
  }
  static void send_value(int write_fd, uint32_t v) { (void)!write(write_fd, &v, sizeof v); }

  // Waits for the child to exit; returns its exit code, or -1 on timeout (child killed) or
  // abnormal termination.
  int wait(int timeout_ms = 30000) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
      int st = 0;
      const pid_t r = waitpid(pid_, &st, WNOHANG);
      if (r == pid_) {
        reaped_ = true;
        return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
      }
      if (std::chrono::steady_clock::now() > deadline) {
        kill(pid_, SIGKILL);
        waitpid(pid_, &st, 0);
        reaped_ = true;
        return -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

 private:
  pid_t pid_ = -1;
  int read_fd_ = -1;
  bool reaped_ = false;
};

}  // namespace conduit::testing
