// Controller::CancelHook: how a Controller reaches the call it belongs to, from any thread.
#pragma once

#include <functional>
#include <mutex>

#include "conduit/rpc/controller.h"

namespace conduit::rpc {

struct Controller::CancelHook {
  // Runs `action` (client: cancel the call on its loop) or the NotifyOnCancel closure
  // (server) exactly once; later calls do nothing.
  void fire();
  // Server: the call ended; runs a pending NotifyOnCancel closure (protobuf's contract:
  // the callback runs exactly once, after completion if never cancelled).
  void finish();
  bool cancelled() const;
  void set_notify(google::protobuf::Closure* c);
  void set_action(std::function<void()> a);

  mutable std::mutex mu;
  bool fired = false;
  bool done = false;
  std::function<void()> action;
  google::protobuf::Closure* notify = nullptr;
};

}  // namespace conduit::rpc
