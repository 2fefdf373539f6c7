// The server side of shm://: a listening UNIX socket whose accepted connections go through
// the hello handshake before the AcceptCallback sees them.
#pragma once

#include <sys/types.h>

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
  void on_events(uint32_t) override;

 private:
  void pause_accepting();
  void handshake_done(ShmConnection* c, Status s);

  reactor::EventLoop& loop_;
  UniqueFd fd_;
  ShmOptions options_;
  std::string path_;
  AcceptCallback on_accept_;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
  std::vector<std::unique_ptr<ShmConnection>> handshaking_;
  reactor::TimerId resume_timer_ = 0;
};

}  // namespace conduit::transport::shm
