// conduit-kv: a Redis-protocol key-value server over TCP, shared memory and RDMA.
// Options take redis-server's names and defaults (see --help).
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "conduit/base/log.h"
#include "conduit/kv/server.h"
#include "conduit/reactor/event_loop.h"

namespace {

conduit::reactor::EventLoop* g_loop = nullptr;

void on_signal(int) {
  // EventLoop::stop() is an atomic store plus an eventfd write: async-signal-safe.
  if (g_loop != nullptr) g_loop->stop();
}

bool parse_bool(const std::string& s, bool* out) {
  if (s == "yes" || s == "true" || s == "1") *out = true;
  else if (s == "no" || s == "false" || s == "0") *out = false;
  else return false;
  return true;
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
               "Options use redis-server's names and defaults; both --name value and --name=value work."};
  app.set_version_flag("--version", "conduit-kv 0.1.0 (redis_version 7.0.0 compatible)");
  std::string protected_mode = "yes", appendonly = "no", appendfsync = "everysec", maxmemory = "0",
              aof_load_truncated = "yes", save, daemonize = "no", loglevel = "notice", maxmemory_policy = "noeviction",
              proto_max_bulk_len = "512mb", query_limit = "1gb", output_limit, output_pause = "1mb";
  std::vector<std::string> listen;
  uint32_t busy_poll_us = 0;
  app.add_option("--port", o.port, "TCP port (0 = any free port)")->capture_default_str();
  app.add_option("--bind", o.bind, "addresses of the tcp and rdma listeners (space-separated)")->capture_default_str();
  app.add_flag("!--no-tcp", o.tcp, "no TCP listener (shm/rdma only)");
  app.add_option("--shm-name", o.shm_name, "also listen on shm://NAME (same-host shared memory)");
  app.add_option("--shm-busy-poll-us", o.shm_busy_poll_us, "shm connections poll the rings this long before sleeping")
      ->capture_default_str();
  app.add_option("--rdma-port", o.rdma_port, "also listen on rdma://BIND:PORT (-1 = off)")->capture_default_str();
  app.add_option("--listen", listen, "additional listener URL (repeatable), e.g. tcp://[::1]:6380");
  app.add_option("--requirepass", o.requirepass, "password clients must AUTH with");
  app.add_option("--protected-mode", protected_mode, "yes: without a password only loopback clients")->capture_default_str();
  app.add_option("--maxclients", o.maxclients, "maximum simultaneous clients")->capture_default_str();
  app.add_option("--maxmemory", maxmemory, "memory limit (bytes, or 100mb, 1gb ...; 0 = none)")->capture_default_str();
  app.add_option("--maxmemory-policy", maxmemory_policy, "only noeviction: writes get -OOM above maxmemory")
      ->capture_default_str();
  app.add_option("--appendonly", appendonly, "yes: log every write to the append-only file")->capture_default_str();
  app.add_option("--appendfsync", appendfsync, "always | everysec | no")->capture_default_str();
  app.add_option("--dir", o.dir, "directory of the append-only file")->capture_default_str();
  app.add_option("--appendfilename", o.appendfilename, "append-only file name")->capture_default_str();
  app.add_option("--aof-load-truncated", aof_load_truncated, "yes: drop a torn last record when loading")
      ->capture_default_str();
  app.add_option("--auto-aof-rewrite-percentage", o.auto_aof_rewrite_percentage, "rewrite when the file grew by this %")
      ->capture_default_str();
  app.add_option("--databases", o.databases, "number of databases")->capture_default_str();
  app.add_option("--timeout", o.timeout, "close clients idle this many seconds (0 = never)")->capture_default_str();
  app.add_option("--hz", o.hz, "background tasks per second (expiry, client checks)")->capture_default_str();
  app.add_option("--io-threads", o.io_threads,
                 "reactor threads serving connections (1..128); tcp connections are spread over them "
                 "(SO_REUSEPORT), shm and rdma stay on the first; commands still run one at a time")
      ->capture_default_str();
  app.add_option("--proto-max-bulk-len", proto_max_bulk_len, "largest argument")->capture_default_str();
  app.add_option("--client-query-buffer-limit", query_limit, "largest unparsed input per client")->capture_default_str();
  app.add_option("--client-output-buffer-limit", output_limit, "\"normal <hard> <soft> <soft-seconds>\"");
  app.add_option("--client-output-pause-bytes", output_pause, "stop running a client's commands while this much output is unsent")
      ->capture_default_str();
  app.add_option("--busy-poll-us", busy_poll_us, "reactor busy polling before sleeping (0 = off)")->capture_default_str();
  app.add_option("--save", save, "accepted for compatibility; only \"\" (no RDB snapshots)");
  app.add_option("--daemonize", daemonize, "accepted for compatibility; only no");
  app.add_option("--logfile", o.logfile, "accepted for compatibility; logs go to stderr");
  app.add_option("--loglevel", loglevel, "debug | verbose | notice | warning")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  auto die = [](const std::string& msg) {
    std::fprintf(stderr, "conduit-kv: %s\n", msg.c_str());
    return 1;
  };
  bool b;
  if (!parse_bool(protected_mode, &o.protected_mode)) return die("--protected-mode must be yes or no");
  if (!parse_bool(appendonly, &o.appendonly)) return die("--appendonly must be yes or no");
  if (!parse_bool(aof_load_truncated, &o.aof_load_truncated)) return die("--aof-load-truncated must be yes or no");
  if (!kv::parse_appendfsync(appendfsync, &o.appendfsync)) return die("--appendfsync must be always, everysec or no");
  if (!kv::parse_memory_value(maxmemory, &o.maxmemory)) return die("--maxmemory: not a memory value: " + maxmemory);
  if (maxmemory_policy != "noeviction") return die("--maxmemory-policy: only noeviction is supported");
  if (!kv::parse_memory_value(proto_max_bulk_len, &o.limits.max_bulk_len)) return die("--proto-max-bulk-len: bad value");
  if (!kv::parse_memory_value(query_limit, &o.limits.max_query_buffer)) return die("--client-query-buffer-limit: bad value");
  if (!kv::parse_memory_value(output_pause, &o.output_pause_bytes)) return die("--client-output-pause-bytes: bad value");
  if (!output_limit.empty()) {
    char cls[16];
    char hard[32], soft[32];
    unsigned secs;
    if (std::sscanf(output_limit.c_str(), "%15s %31s %31s %u", cls, hard, soft, &secs) != 4 ||
        std::string(cls) != "normal" || !kv::parse_memory_value(hard, &o.output_hard_limit) ||
        !kv::parse_memory_value(soft, &o.output_soft_limit))
      return die("--client-output-buffer-limit: expected \"normal <hard> <soft> <soft-seconds>\"");
    o.output_soft_seconds = secs;
  }
  if (!save.empty()) return die("--save: RDB snapshots are not supported; use --appendonly yes");
  if (parse_bool(daemonize, &b) && b) return die("--daemonize yes is not supported; run it under a supervisor");
  if (o.io_threads < 1 || o.io_threads > 128) return die("--io-threads must be between 1 and 128");
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
