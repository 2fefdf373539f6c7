// rpc::Controller: per-call options and results (protobuf's RpcController, as brpc uses it).
//
// Client side: set a timeout, metadata, an attachment, idempotency and a request key
// (consistent hashing) before the call; after it, read failed()/error_code()/error_text(),
// the response metadata and attachment, latency and which server answered.  StartCancel()
// may be called from any thread while the call runs: the call fails with `cancelled` and
// the server is told (CANCEL frame).
// Server side: the handler reads the request metadata and attachment, may set response
// metadata/attachment, SetFailed(code, text), learns of cancellation or an expired
// deadline through IsCanceled()/NotifyOnCancel(), and reaches its stream (streaming
// methods) through stream().
//
// Ownership: the caller owns a client Controller and keeps it alive until the call's done
// runs; the server owns a handler's Controller until done->Run() returns.
// Threading: one call at a time; Reset() between calls.  StartCancel (client) and
// IsCanceled (server) are thread-safe.
#pragma once

#include <google/protobuf/service.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "conduit/base/status.h"
#include "conduit/rpc/attachment.h"
#include "conduit/rpc/errors.h"

namespace conduit::reactor {
class EventLoop;
}

namespace conduit::rpc {

using Metadata = std::vector<std::pair<std::string, std::string>>;
// The value of the first entry named `key`, or nullptr.
const std::string* find_meta(const Metadata& m, std::string_view key);

class ServerStream;
namespace detail {
struct ServerCall;
struct ClientCall;
}  // namespace detail

class Controller : public google::protobuf::RpcController {
 public:
  Controller() = default;
  ~Controller() override;

  // --- google::protobuf::RpcController --------------------------------------------------
  void Reset() override;
  bool Failed() const override { return code_ != ErrorCode::kOk; }
  std::string ErrorText() const override { return error_text_; }
  void StartCancel() override;
  void SetFailed(const std::string& reason) override { SetFailed(ErrorCode::kInternal, reason); }
  bool IsCanceled() const override;
  void NotifyOnCancel(google::protobuf::Closure* callback) override;

  // --- both sides ----------------------------------------------------------------------
  void SetFailed(ErrorCode code, std::string text);
  ErrorCode error_code() const { return code_; }
  const std::string& error_text() const { return error_text_; }
  Status status() const { return rpc_status(code_, error_text_); }

  Metadata& request_metadata() { return request_meta_; }
  Metadata& response_metadata() { return response_meta_; }
  Attachment& request_attachment() { return request_attachment_; }
  Attachment& response_attachment() { return response_attachment_; }

  // --- client side ---------------------------------------------------------------------
  // Deadline of this call, relative to its start (-1 = the channel's default, 0 = none).
  void set_timeout_ms(int64_t ms) { timeout_us_ = ms < 0 ? -1 : ms * 1000; }
  void set_timeout_us(int64_t us) { timeout_us_ = us; }
  int64_t timeout_us() const { return timeout_us_; }
  // Marks the call safe to retry on another server (ClusterChannel).
  void set_idempotent(bool v) { idempotent_ = v; }
  bool idempotent() const { return idempotent_; }
  // Key for consistent-hash load balancing.
  void set_request_key(uint64_t k) { request_key_ = k; has_key_ = true; }
  bool has_request_key() const { return has_key_; }
  uint64_t request_key() const { return request_key_; }
  uint64_t latency_us() const { return latency_us_; }
  int retries() const { return retries_; }
  // The URL of the server that answered (or was tried last).
  const std::string& remote() const { return remote_; }

  // --- server side ---------------------------------------------------------------------
  // The stream of a streaming method (nullptr for unary methods).
  ServerStream* stream() const { return stream_; }
  // Transport of the connection the call arrived on ("tcp", "shm", "rdma") and its peer.
  const std::string& transport() const { return transport_; }
  const std::string& peer() const { return remote_; }
  // Microseconds left before the caller's deadline (-1 = no deadline).
  int64_t remaining_us() const;
  // The loop serving the connection (for asynchronous handlers: timers, post()).  From a
  // worker thread only post() is allowed on it (EventLoop's threading rules).
  reactor::EventLoop* loop() const { return loop_; }

 private:
  friend struct detail::ServerCall;
  friend struct detail::ClientCall;
  friend class Channel;
  friend class ClusterChannel;
  friend class ClusterImpl;
  friend class ServerImpl;
  friend class ServerConn;
  friend class ClientConn;
  friend class ClientStream;
  friend class ChannelImpl;

  ErrorCode code_ = ErrorCode::kOk;
  std::string error_text_;
  Metadata request_meta_;
  Metadata response_meta_;
  Attachment request_attachment_;
  Attachment response_attachment_;
  int64_t timeout_us_ = -1;
  bool idempotent_ = false;
  bool has_key_ = false;
  uint64_t request_key_ = 0;
  uint64_t latency_us_ = 0;
  int retries_ = 0;
  bool reached_server_ = false;  // client: the request went out on an established connection
  std::string remote_;
  std::string transport_;
  reactor::EventLoop* loop_ = nullptr;
  uint64_t deadline_ns_ = 0;  // server side: absolute monotonic deadline, 0 = none

  // Client: the running call, to cancel it.  Server: the call, for cancel notification.
  // Created on the caller's thread (ensure_cancel_hook) and never replaced while a call
  // runs, so StartCancel from any thread only touches the hook's own mutex.
  struct CancelHook;
  void ensure_cancel_hook();
  std::shared_ptr<CancelHook> cancel_;
  ServerStream* stream_ = nullptr;
};

}  // namespace conduit::rpc
