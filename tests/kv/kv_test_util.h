// Test helpers: a conduit-kv server on its own thread, compact reply formatting, temp dirs.
#pragma once

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "conduit/kv/client.h"
#include "conduit/kv/server.h"
#include "conduit/reactor/event_loop.h"
#include "conduit/transport/connection.h"

namespace conduit::kv::testing {

// A server running on its own loop thread.  Stopped (and joined) by the destructor.
class ServerThread {
 public:
  explicit ServerThread(ServerOptions o) {
    thread_ = std::thread([this, o] {
      auto loop = reactor::EventLoop::create();
      if (!loop.ok()) {
        finish_start(loop.status(), {});
        return;
      }
      auto server = Server::create(**loop, o);
      if (!server.ok()) {
        finish_start(server.status(), {});
        return;
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        loop_ = loop->get();
      }
      (*server)->set_shutdown_handler([this] {
        shutdown_requested_ = true;
        loop_->stop();
      });
      server_ = server->get();
      finish_start(Status(), (*server)->listen_urls());
      (void)(*loop)->run();
      (*server)->shutdown();
      server_ = nullptr;
      server->reset();
      for (int i = 0; i < 3; ++i) (void)(*loop)->run_once(0);  // destroy_later'd objects
      std::lock_guard<std::mutex> lock(mu_);
      loop_ = nullptr;  // stop() after a SHUTDOWN must not touch the dead loop
    });
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return started_; });
  }
  ~ServerThread() { stop(); }

  const Status& status() const { return status_; }
  bool ok() const { return status_.ok(); }
  // The listener URL of a scheme ("tcp", "shm").
  std::string url(const std::string& scheme) const {
    for (const auto& u : urls_)
      if (u.rfind(scheme + "://", 0) == 0) return u;
    return "";
  }
  // Runs fn on the server's loop thread and waits for it.
  void run_on_loop(const std::function<void(Server&)>& fn) {
    std::mutex m;
    std::condition_variable cv;
    bool done = false;
    loop_->post([&] {
      fn(*server_);
      std::lock_guard<std::mutex> l(m);
      done = true;
      cv.notify_all();
    });
    std::unique_lock<std::mutex> l(m);
    cv.wait(l, [&] { return done; });
  }
  std::string info(const std::string& section) {
    std::string s;
    run_on_loop([&](Server& srv) { s = srv.info(section); });
    return s;
  }
  void stop() {
    if (!thread_.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (loop_ != nullptr) loop_->stop();
    }
    thread_.join();
  }
  bool shutdown_requested() const { return shutdown_requested_; }

 private:
  void finish_start(Status s, std::vector<std::string> urls) {
    std::lock_guard<std::mutex> lock(mu_);
    status_ = std::move(s);
    urls_ = std::move(urls);
    started_ = true;
    cv_.notify_all();
  }
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool started_ = false;
  Status status_;
  std::vector<std::string> urls_;
  reactor::EventLoop* loop_ = nullptr;
  Server* server_ = nullptr;
  std::atomic<bool> shutdown_requested_{false};
};

inline std::string unique_name(const std::string& tag) {
  static std::atomic<int> n{0};
  return tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(n.fetch_add(1));
}

// A fresh directory under /tmp, removed by the destructor.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/conduit-kv-test-XXXXXX";
    const char* d = ::mkdtemp(tmpl);
    path_ = d != nullptr ? d : "/tmp";
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A whole file's bytes ("" if it cannot be read); writing or appending bytes to one.
inline std::string read_file(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}
inline void write_file(const std::string& p, const std::string& bytes, bool append = false) {
  std::ofstream f(p, std::ios::binary | (append ? std::ios::app : std::ios::trunc));
  f << bytes;
}

// Compact, unambiguous reply text: +OK -ERR.. :3 "bulk" nil [a, b] {k: v} ,1.5
inline std::string fmt(const Reply& r) {
  switch (r.type) {
    case ReplyType::kSimple: return "+" + r.str;
    case ReplyType::kError: return "-" + r.str;
    case ReplyType::kInteger: return ":" + std::to_string(r.integer);
    case ReplyType::kBulk:
    case ReplyType::kVerbatim: return "\"" + r.str + "\"";
    case ReplyType::kNull: return "nil";
    case ReplyType::kDouble: return "," + r.str;
    case ReplyType::kBool: return r.integer ? "#t" : "#f";
    case ReplyType::kBigNumber: return "(" + r.str;
    case ReplyType::kMap: {
      std::string s = "{";
      for (size_t i = 0; i + 1 < r.elements.size(); i += 2) {
        if (i > 0) s += ", ";
        s += fmt(r.elements[i]) + ": " + fmt(r.elements[i + 1]);
      }
      return s + "}";
    }
    default: {
      std::string s = "[";
      for (size_t i = 0; i < r.elements.size(); ++i) {
        if (i > 0) s += ", ";
        s += fmt(r.elements[i]);
      }
      return s + "]";
    }
  }
}

inline std::string fmt(const Result<Reply>& r) { return r.ok() ? fmt(*r) : "!" + r.status().to_string(); }

// Lets a test open thousands of sockets.
inline void raise_fd_limit() {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

inline bool shm_available() { return transport::find_transport("shm") != nullptr; }

}  // namespace conduit::kv::testing
