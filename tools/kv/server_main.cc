// conduit-kv: a Redis-protocol key-value server over TCP, shared memory and RDMA.
// Options take redis-server's names and defaults (see --help).
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "conduit/base/log.h"
#include "numeric_flags.h"
#include "conduit/kv/server.h"
#include "conduit/reactor/event_loop.h"

namespace {

conduit::reactor::EventLoop* g_loop = nullptr;

void on_signal(int) {
  // EventLoop::stop() is an atomic store plus an eventfd write: async-signal-safe.
  if (g_loop != nullptr) g_loop->stop();
}

void raise_fd_limit(uint64_t want) {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= want) return;
  rlimit next = rl;
  next.rlim_cur = std::min<rlim_t>(want, rl.rlim_max);
  if (setrlimit(RLIMIT_NOFILE, &next) != 0 || next.rlim_cur < want)
    std::fprintf(stderr, "conduit-kv: warning: open files limit is %llu, maxclients needs %llu\n",
                 static_cast<unsigned long long>(next.rlim_cur), static_cast<unsigned long long>(want));
}

}  // namespace

int main(int argc, char** argv) {
  using namespace conduit;
  kv::ServerOptions o;
  CLI::App app{"conduit-kv: a Redis-protocol key-value server over TCP, shared memory (shm://) and RDMA.\n"
               "Options use redis-server's names, defaults and values (CONFIG SET accepts the same); both\n"
               "--name value and --name=value work."};
  app.set_version_flag("--version", "conduit-kv 0.1.0 (redis_version 7.0.0 compatible)");
  // Every redis.conf-style option comes from the server's option table, which also
  // validates CONFIG SET: the command line accepts exactly what CONFIG SET accepts.
  const kv::ServerOptions defaults;
  std::vector<std::pair<std::string_view, CLI::Option*>> table_options;
  std::vector<std::string> values(kv::server_option_list().size());
  size_t k = 0;
  for (const kv::ServerOptionInfo& info : kv::server_option_list()) {
    auto* opt = app.add_option("--" + std::string(info.name), values[k++], std::string(info.doc));
    opt->default_str(kv::get_server_option(defaults, info.name).value_or(""));
    table_options.emplace_back(info.name, opt);
  }
  std::vector<std::string> listen;
  std::string daemonize = "no", loglevel = "notice";
  uint32_t busy_poll_us = 0;
  app.add_flag("!--no-tcp", o.tcp, "no TCP listener (shm/rdma only)");
  app.add_option("--listen", listen, "additional listener URL (repeatable), e.g. tcp://[::1]:6380");
  app.add_option("--busy-poll-us", busy_poll_us, "reactor busy polling before sleeping, microseconds (0 .. 1000000)")
      ->capture_default_str()
      ->check(tools::in_range<uint32_t>(0, 1000000));
  app.add_option("--daemonize", daemonize, "accepted for compatibility; only no");
  app.add_option("--loglevel", loglevel, "debug | verbose | notice | warning")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  auto die = [](const std::string& msg) {
    std::fprintf(stderr, "conduit-kv: %s\n", msg.c_str());
    return 1;
  };
  for (size_t i = 0; i < table_options.size(); ++i) {
    if (table_options[i].second->count() == 0) continue;
    const std::string err = kv::set_server_option(&o, table_options[i].first, values[i]);
    if (!err.empty()) return die("--" + std::string(table_options[i].first) + " " + values[i] + ": " + err);
  }
  if (daemonize != "no") return die("--daemonize yes is not supported; run it under a supervisor");
  o.io_busy_poll_us = busy_poll_us;
  o.extra_listen = listen;
  if (loglevel == "debug") set_log_level(LogLevel::kDebug);
  else if (loglevel == "verbose" || loglevel == "notice") set_log_level(LogLevel::kInfo);
  else if (loglevel == "warning") set_log_level(LogLevel::kWarn);
  else return die("--loglevel must be debug, verbose, notice or warning");

  raise_fd_limit(static_cast<uint64_t>(o.maxclients) + 64);
  signal(SIGPIPE, SIG_IGN);

  reactor::LoopOptions lo;
  lo.busy_poll_us = busy_poll_us;
  auto loop = reactor::EventLoop::create(lo);
  if (!loop.ok()) return die(loop.status().to_string());
  auto server = kv::Server::create(**loop, o);
  if (!server.ok()) return die(server.status().to_string());
  g_loop = loop->get();
  struct sigaction sa{};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  std::string urls;
  for (const std::string& u : (*server)->listen_urls()) urls += " " + u;
  std::fprintf(stderr, "conduit-kv %d: ready to accept connections on%s\n", static_cast<int>(getpid()), urls.c_str());
  Status run = (*loop)->run();
  (*server)->shutdown();
  g_loop = nullptr;
  if (!run.ok()) return die(run.to_string());
  std::fprintf(stderr, "conduit-kv %d: shut down\n", static_cast<int>(getpid()));
  return 0;
}
