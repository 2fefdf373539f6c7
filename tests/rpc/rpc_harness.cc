#include "rpc_harness.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <thread>

#include "conduit/rpc/echo.pb.h"
#include "conduit/transport/endpoint.h"

namespace conduit::rpctest {

std::vector<TransportCase> rpc_cases(std::string_view label) {
  std::vector<TransportCase> out;
  for (const TransportCase& c : conformance::registered_cases(label))
    if (c.name == "tcp" || c.name == "shm" || c.name == "shm_ring4k" || c.name == "rdma") out.push_back(c);
  return out;
}

std::string listen_url_or_skip(const TransportCase& c) {
  std::string why;
  std::string url = c.listen_url(&why);
  if (url.empty()) {
    const char* req = std::getenv("CONDUIT_REQUIRE_RDMA");
    if (req != nullptr && std::string(req) == "1" && c.label == "rdma") ADD_FAILURE() << why;
  }
  return url;
}

std::string client_url(const TransportCase& c, const std::string& bound) {
  if (c.connect_options.empty()) return bound;
  return bound + (bound.find('?') == std::string::npos ? "?" : "&") + c.connect_options;
}

::testing::AssertionResult run_until(reactor::EventLoop& loop, const std::function<bool()>& done,
                                     const std::string& what, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline)
      return ::testing::AssertionFailure() << "timed out after " << limit.count() << " ms waiting for " << what;
    Status s = loop.run_once(10);
    if (!s.ok()) return ::testing::AssertionFailure() << "run_once: " << s.to_string();
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult wait_until(const std::function<bool()>& done, const std::string& what,
                                      std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline)
      return ::testing::AssertionFailure() << "timed out after " << limit.count() << " ms waiting for " << what;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return ::testing::AssertionSuccess();
}

const google::protobuf::MethodDescriptor* echo_method(const char* name) {
  return rpc::echo::EchoService::descriptor()->FindMethodByName(name);
}

std::unique_ptr<EchoServer> EchoServer::start(const std::string& url, rpc::ServerOptions o, std::string name) {
  auto es = std::make_unique<EchoServer>(std::move(name));
  auto s = rpc::Server::create(o);
  if (!s.ok()) {
    ADD_FAILURE() << s.status().to_string();
    return nullptr;
  }
  es->server = std::move(*s);
  if (Status st = es->server->add_service(&es->service); !st.ok()) {
    ADD_FAILURE() << st.to_string();
    return nullptr;
  }
  auto bound = es->server->listen(url);
  if (!bound.ok()) {
    ADD_FAILURE() << bound.status().to_string();
    return nullptr;
  }
  es->url = *bound;
  return es;
}

// --- child server ----------------------------------------------------------------------

bool is_child_invocation(int argc, char** argv) { return argc >= 4 && std::strcmp(argv[1], "--rpc-serve") == 0; }

int child_main(int argc, char** argv) {
  (void)argc;
  auto es = EchoServer::start(argv[2], {}, argv[3]);
  if (!es) return 3;
  std::printf("url %s\n", es->url.c_str());
  std::fflush(stdout);
  for (;;) pause();
}

std::unique_ptr<ChildServer> ChildServer::start(const std::string& listen_url, const std::string& name) {
  int fds[2];
  if (pipe(fds) != 0) return nullptr;
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return nullptr;
  exe[n] = '\0';
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    close(fds[1]);
    execl(exe, exe, "--rpc-serve", listen_url.c_str(), name.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[1]);
  auto cs = std::unique_ptr<ChildServer>(new ChildServer());
  cs->pid_ = pid;
  std::string line;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  char c;
  while (std::chrono::steady_clock::now() < deadline) {
    const ssize_t r = read(fds[0], &c, 1);
    if (r <= 0) break;
    if (c == '\n') break;
    line += c;
  }
  close(fds[0]);
  if (line.rfind("url ", 0) != 0) {
    ADD_FAILURE() << "child server did not start: '" << line << "'";
    return nullptr;
  }
  cs->url_ = line.substr(4);
  return cs;
}

void ChildServer::kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int st;
  waitpid(pid_, &st, 0);
  pid_ = -1;
}

ChildServer::~ChildServer() { kill(); }

}  // namespace conduit::rpctest
