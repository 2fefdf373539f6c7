// greeter_server URL [URL...]: serves example.Greeter on every URL given, e.g.
//   greeter_server tcp://127.0.0.1:7000 shm://greeter rdma://10.0.0.1:7001
// The service code knows nothing of the transport.
#include <csignal>
#include <cstdio>
#include <thread>

#include "conduit/rpc/server.h"
#include "greeter.pb.h"

class GreeterImpl : public example::Greeter {
 public:
  void SayHello(google::protobuf::RpcController* base, const example::HelloRequest* req, example::HelloReply* resp,
                google::protobuf::Closure* done) override {
    auto* cntl = static_cast<conduit::rpc::Controller*>(base);
    resp->set_message("Hello, " + req->name() + "!");
    resp->set_transport(cntl->transport());
    done->Run();
  }
};

static volatile std::sig_atomic_t g_stop = 0;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: greeter_server URL [URL...]\n");
    return 2;
  }
  auto server = conduit::rpc::Server::create().value();
  GreeterImpl greeter;
  if (auto s = server->add_service(&greeter); !s.ok()) return std::fprintf(stderr, "%s\n", s.to_string().c_str()), 1;
  for (int i = 1; i < argc; ++i) {
    auto bound = server->listen(argv[i]);
    if (!bound.ok()) return std::fprintf(stderr, "%s\n", bound.status().to_string().c_str()), 1;
    std::printf("listening %s\n", bound->c_str());
  }
  std::fflush(stdout);
  std::signal(SIGTERM, [](int) { g_stop = 1; });
  std::signal(SIGINT, [](int) { g_stop = 1; });
  while (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  return server->shutdown(2000).ok() ? 0 : 1;
}
