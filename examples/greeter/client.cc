// greeter_client URL NAME: one call.  Switching tcp:// -> shm:// -> rdma:// is changing URL.
#include <cstdio>

#include "conduit/rpc/channel.h"
#include "greeter.pb.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: greeter_client URL NAME\n");
    return 2;
  }
  auto channel = conduit::rpc::Channel::create(argv[1]);
  if (!channel.ok()) return std::fprintf(stderr, "%s\n", channel.status().to_string().c_str()), 1;
  example::Greeter_Stub stub(channel->get());
  example::HelloRequest req;
  req.set_name(argv[2]);
  example::HelloReply reply;
  conduit::rpc::Controller cntl;
  cntl.set_timeout_ms(5000);
  stub.SayHello(&cntl, &req, &reply, nullptr);  // synchronous
  if (cntl.Failed()) {
    std::fprintf(stderr, "call failed: %s: %s\n", std::string(conduit::rpc::error_code_name(cntl.error_code())).c_str(),
                 cntl.ErrorText().c_str());
    return 1;
  }
  std::printf("%s (over %s, %llu us)\n", reply.message().c_str(), reply.transport().c_str(),
              static_cast<unsigned long long>(cntl.latency_us()));
  return 0;
}
