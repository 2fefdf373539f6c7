// conduit.rpc.echo.EchoService (echo.proto), served by conduit-rpc-bench, the rpc tests
// and the example: unary echo (optionally delayed, failed, with the attachment echoed),
// and the three stream kinds, each honouring flow control.  Handlers run on the loop and
// never block (delays are loop timers).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "conduit/rpc/echo.pb.h"

namespace conduit::rpc {

class EchoServiceImpl : public echo::EchoService {
 public:
  explicit EchoServiceImpl(std::string name = "") : name_(std::move(name)) {}

  void Echo(google::protobuf::RpcController* cntl, const echo::EchoRequest* req, echo::EchoResponse* resp,
            google::protobuf::Closure* done) override;
  void Expand(google::protobuf::RpcController* cntl, const echo::EchoRequest* req, echo::EchoResponse* resp,
              google::protobuf::Closure* done) override;
  void Collect(google::protobuf::RpcController* cntl, const echo::EchoRequest* req, echo::EchoResponse* resp,
               google::protobuf::Closure* done) override;
  void Chat(google::protobuf::RpcController* cntl, const echo::EchoRequest* req, echo::EchoResponse* resp,
            google::protobuf::Closure* done) override;

  uint64_t calls() const { return calls_.load(); }
  // Calls whose handler learnt of a cancellation (client cancel, deadline, disconnect).
  uint64_t cancelled_seen() const { return cancelled_.load(); }

 private:
  std::string name_;
  std::atomic<uint64_t> calls_{0};
  std::atomic<uint64_t> cancelled_{0};
};

}  // namespace conduit::rpc
