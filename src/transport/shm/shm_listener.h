// The server side of shm://: a listening UNIX socket whose accepted connections go through
// the hello handshake before the AcceptCallback sees them.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "conduit/base/fd.h"
#include "conduit/reactor/event_loop.h"
#include "conduit/transport/connection.h"
#include "shm/shm_connection.h"
#include "shm/shm_options.h"

namespace conduit::transport::shm {

class ShmListener final : public Listener, public reactor::FdHandler {
 public:
  // `fd` is bound and listening on `path`.
  ShmListener(reactor::EventLoop& loop, UniqueFd fd, const ShmOptions& options, std::string path, AcceptCallback cb);
  ~ShmListener() override { close(); }

  Status start();
  std::string url() const override { return "shm://" + path_; }
  void close() override;
  ListenerStats stats() const override;
  void set_admission(AdmitCallback admit) override { admit_ = std::move(admit); }
  void on_events(uint32_t) override;

 private:
  void pause_accepting();
  // Watches the listening socket exactly when we may accept: open, not backing off after
  // an accept error, and fewer than max_handshakes handshakes in progress.
  void update_watch();
  // Answers a connection we will not serve with a reject hello and closes it.
  void refuse(UniqueFd sock, RejectReason why);
  void handshake_done(ShmConnection* c, Status s);

  reactor::EventLoop& loop_;
  UniqueFd fd_;
  ShmOptions options_;
  std::string path_;
  AcceptCallback on_accept_;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
  AdmitCallback admit_;
  std::vector<std::unique_ptr<ShmConnection>> handshaking_;
  reactor::TimerId resume_timer_ = 0;
  bool watching_ = false;
  uint64_t uid_refusals_ = 0;  // the listening socket is in the loop's interest set
  // For stats() from any thread; written on the loop thread only.
  std::atomic<uint64_t> handshakes_{0}, refused_{0}, failed_{0};
};

}  // namespace conduit::transport::shm
