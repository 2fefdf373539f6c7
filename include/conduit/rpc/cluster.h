// rpc::ClusterChannel: one RpcChannel over a list of servers, with load balancing, health
// checks and retries; and the naming interface that supplies the list.
//
//   rpc::ClusterOptions o;  o.lb = rpc::LbPolicy::kConsistentHash;
//   auto ch = rpc::ClusterChannel::create("file:///etc/echo.servers", o).value();
//   EchoService_Stub stub(ch.get());             // as with a Channel
//
// Naming: a spec "scheme://rest" resolved through one table of naming services (list://
// and file:// built in; register_naming() adds one, e.g. DNS SRV, etcd or Consul, without
// touching the channel).  list://URL,URL,... is a static list; file:///path[?poll_ms=500] re-reads
// the file (one URL per line, '#' comments) when its mtime or size changes.
// Health: a server whose connection fails is taken out; every health_check_ms the channel
// probes the ones out (connect + PING) and brings back those that answer.
// Retries: a call that failed with unavailable is re-sent to another healthy server, up to
// max_retries times, when it is idempotent (Controller::set_idempotent) or never reached a
// server (its connection was never established).
// Threading: as Channel (loop-bound, or a thread of its own; calls thread-safe).
#pragma once

#include <google/protobuf/service.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "conduit/base/status.h"
#include "conduit/reactor/event_loop.h"
#include "conduit/rpc/channel.h"

namespace conduit::rpc {

class NamingService {
 public:
  using UpdateFn = std::function<void(std::vector<std::string> urls)>;
  virtual ~NamingService() = default;
  // Starts watching (loop thread); on_update runs on the loop with the whole list, once at
  // start and whenever it changes.
  virtual Status start(reactor::EventLoop& loop, UpdateFn on_update) = 0;
  // Stops watching (loop thread); no on_update after it returns.
  virtual void stop() = 0;
};

using NamingFactory = std::function<Result<std::unique_ptr<NamingService>>(std::string_view rest)>;
// Adds a naming scheme; fails if it exists.  Thread-safe.
Status register_naming(std::string_view scheme, NamingFactory factory);
// "list://tcp://a:1,shm://b" or "file:///path/servers.txt".
Result<std::unique_ptr<NamingService>> make_naming(std::string_view spec);

enum class LbPolicy : uint8_t { kRoundRobin, kRandom, kConsistentHash };
std::string_view lb_policy_name(LbPolicy p);
bool parse_lb_policy(std::string_view s, LbPolicy* out);  // "rr", "random", "hash"

struct ClusterOptions {
  LbPolicy lb = LbPolicy::kRoundRobin;
  ChannelOptions channel;             // for each server's Channel
  uint32_t max_retries = 2;           // re-sends of one call to other servers
  uint64_t health_check_ms = 500;     // probe period for servers taken out
};

class ClusterImpl;

class ClusterChannel : public google::protobuf::RpcChannel {
 public:
  static Result<std::unique_ptr<ClusterChannel>> create(reactor::EventLoop& loop, std::string_view naming_spec,
                                                        const ClusterOptions& options = {});
  static Result<std::unique_ptr<ClusterChannel>> create(std::string_view naming_spec, const ClusterOptions& options = {});
  // With a naming service of one's own (the channel owns it).
  static Result<std::unique_ptr<ClusterChannel>> create(reactor::EventLoop& loop, std::unique_ptr<NamingService> naming,
                                                        const ClusterOptions& options = {});
  ~ClusterChannel() override;

  void CallMethod(const google::protobuf::MethodDescriptor* method, google::protobuf::RpcController* controller,
                  const google::protobuf::Message* request, google::protobuf::Message* response,
                  google::protobuf::Closure* done) override;
  void call(const google::protobuf::MethodDescriptor* method, Controller* cntl, const google::protobuf::Message* request,
            google::protobuf::Message* response, std::function<void()> done);
  std::future<Status> call_future(const google::protobuf::MethodDescriptor* method, Controller* cntl,
                                  const google::protobuf::Message* request, google::protobuf::Message* response);

  struct ServerState {
    std::string url;
    bool healthy;
    uint64_t calls;  // calls sent to it
  };
  // A snapshot (thread-safe).
  std::vector<ServerState> servers() const;

 private:
  explicit ClusterChannel(std::unique_ptr<ClusterImpl> impl);
  std::unique_ptr<ClusterImpl> impl_;
};

}  // namespace conduit::rpc
