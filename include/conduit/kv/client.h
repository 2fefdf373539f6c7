// conduit::kv clients over any transport URL (tcp://, shm://, rdma://, auto://).
//
//   auto c = kv::Client::connect("tcp://127.0.0.1:6379").value();   // blocking
//   c->command({"SET", "k", "v"});                                   // Result<Reply>
//   kv::Reply r = c->command({"GET", "k"}).value();                  // r.str == "v"
//
//   kv::AsyncClient::connect(loop, "shm://conduit-kv", on_connected) // on an EventLoop
//   client->command({"GET", "k"}, [](Result<Reply> r) { ... });      // in order
//
// Threading: an AsyncClient belongs to its loop's thread; callbacks run there.  A Client
// owns a private loop and may be used from one thread at a time.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "conduit/base/status.h"
#include "conduit/kv/resp.h"
#include "conduit/reactor/event_loop.h"
#include "conduit/transport/connection.h"

namespace conduit::kv {

class AsyncClient {
 public:
  // Called with the reply, or with a non-OK Status if the connection failed before it
  // arrived (an error *reply* is an OK Result holding a kError Reply).
  using ReplyCallback = std::function<void(Result<Reply>)>;
  using ConnectCallback = std::function<void(Status)>;

  // Starts connecting; on_connect fires from the loop.  Commands issued before that are
  // queued and sent once connected.
  static Result<std::unique_ptr<AsyncClient>> connect(reactor::EventLoop& loop, std::string_view url,
                                                      ConnectCallback on_connect = nullptr);
  ~AsyncClient();
  AsyncClient(const AsyncClient&) = delete;
  AsyncClient& operator=(const AsyncClient&) = delete;

  // Queues a command (copied into the output buffer) and writes it out.  Cost: one copy
  // of the arguments; one write per call unless corked.
  void command(std::span<const std::string_view> args, ReplyCallback cb);
  void command(std::initializer_list<std::string_view> args, ReplyCallback cb) {
    command(std::span<const std::string_view>(args.begin(), args.size()), std::move(cb));
  }
  // Raw bytes (inline commands, tests); `replies` callbacks expected for them.
  void send_raw(std::string_view bytes, std::vector<ReplyCallback> replies);
  // While corked, command() only buffers; uncork() writes everything at once.
  void cork() { corked_ = true; }
  void uncork();

  bool connected() const;
  size_t pending() const { return callbacks_.size(); }
  // Fails every pending callback with kClosed.  Not from inside a callback of this client.
  void close();
  const Status& error() const { return error_; }
  transport::Connection* connection() { return conn_.get(); }

 private:
  explicit AsyncClient(reactor::EventLoop& loop) : loop_(loop) {}
  void on_connected(Status s);
  void on_readable();
  void flush();
  void fail(Status s);

  reactor::EventLoop& loop_;
  std::unique_ptr<transport::Connection> conn_;
  ConnectCallback on_connect_;
  std::deque<ReplyCallback> callbacks_;
  ByteBuffer out_;
  ByteBuffer in_;
  ReplyScanner scanner_;
  Status error_;
  bool corked_ = false;
  bool writing_ = false;  // write handler installed
  bool established_ = false;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

struct ClientOptions {
  std::string password;                      // AUTH after connecting ("" = none)
  std::string user;                          // AUTH user (with password), "" = default
  RespVersion resp = RespVersion::kResp2;    // kResp3 sends HELLO 3
  int db = 0;                                // SELECT after connecting when != 0
  uint64_t timeout_ms = 10000;               // bound on connect and on each call
};

// Blocking client: a private EventLoop driven until each reply arrives.
class Client {
 public:
  static Result<std::unique_ptr<Client>> connect(std::string_view url, const ClientOptions& options = {});
  ~Client();

  Result<Reply> command(std::span<const std::string_view> args);
  Result<Reply> command(std::initializer_list<std::string_view> args) {
    return command(std::span<const std::string_view>(args.begin(), args.size()));
  }
  Result<Reply> command(const std::vector<std::string>& args);
  // All commands in one write; replies in order.
  Result<std::vector<Reply>> pipeline(const std::vector<std::vector<std::string>>& commands);
  // Sends raw bytes and waits for `replies` replies.
  Result<std::vector<Reply>> raw(std::string_view bytes, size_t replies);
  AsyncClient& async() { return *client_; }
  reactor::EventLoop& loop() { return *loop_; }

 private:
  Client() = default;
  Status wait(const std::function<bool()>& done);
  ClientOptions options_;
  std::unique_ptr<reactor::EventLoop> loop_;
  std::unique_ptr<AsyncClient> client_;
};

}  // namespace conduit::kv
