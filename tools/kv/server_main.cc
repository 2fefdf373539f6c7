// conduit-kv: a Redis-protocol key-value server over TCP, shared memory and RDMA.
// Options take redis-server's names and defaults (see --help).
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <ctime>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/time.h>

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

// Redis' log line format ("<pid>:M 01 Dec 2026 12:00:00.000 * text"), on stdout or the
// logfile, so tools and test harnesses that wait for a redis-server's lines find them.
class RedisLog {
 public:
  explicit RedisLog(const std::string& path) {
    if (!path.empty()) file_ = std::fopen(path.c_str(), "a");
  }
  ~RedisLog() {
    if (file_ != nullptr) std::fclose(file_);
  }
  void line(char level, const std::string& text) {
    timeval tv;
    gettimeofday(&tv, nullptr);
    char when[64];
    tm t{};
    localtime_r(&tv.tv_sec, &t);
    std::strftime(when, sizeof when, "%d %b %Y %H:%M:%S", &t);
    FILE* f = file_ != nullptr ? file_ : stdout;
    std::fprintf(f, "%d:M %s.%03d %c %s\n", static_cast<int>(getpid()), when, static_cast<int>(tv.tv_usec / 1000), level,
                 text.c_str());
    std::fflush(f);
  }

 private:
  FILE* file_ = nullptr;
};

int main(int argc, char** argv) {
  using namespace conduit;
  kv::ServerOptions o;
  // Like redis-server: a redis.conf-style file may come first; the command line overrides it.
  std::vector<std::string> config_warnings;
  if (argc > 1 && argv[1][0] != '-') {
    const std::string path = argv[1];
    std::ifstream in(path);
    if (!in) {
      std::fprintf(stderr, "Fatal error, can't open config file '%s': %s\n", path.c_str(), std::strerror(errno));
      return 1;
    }
    std::stringstream text;
    text << in.rdbuf();
    const std::string err = kv::load_config_text(&o, text.str(), &config_warnings);
    if (!err.empty()) {
      std::fprintf(stderr, "\n%s\n", err.c_str());
      return 1;
    }
    char abs[4096];
    o.config_file = path[0] == '/' || getcwd(abs, sizeof abs) == nullptr ? path : std::string(abs) + "/" + path;
    // CLI11 sees the rest.
    for (int i = 1; i + 1 < argc; ++i) argv[i] = argv[i + 1];
    --argc;
  }
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
  std::vector<std::string> users;
  app.add_option("--user", users, "an ACL user, as redis.conf's user lines: \"NAME RULE ...\" (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  uint32_t busy_poll_us = 0;
  std::string shm_name;
  int rdma_port = -1;
  uint32_t shm_busy_poll_us = 0;
  app.add_flag("!--no-tcp", o.tcp, "no TCP listener (shm/rdma only)");
  app.add_option("--listen", listen,
                 "additional listener URL (repeatable), any transport: tcp://[::1]:6380, shm://NAME, rdma://HOST:PORT");
  // Aliases for --listen that the benchmarks and the demo use.
  app.add_option("--shm-name", shm_name, "same as --listen shm://NAME");
  app.add_option("--shm-busy-poll-us", shm_busy_poll_us, "with --shm-name: shm connections spin this long before sleeping")
      ->check(tools::in_range<uint32_t>(0, 1000000));
  app.add_option("--rdma-port", rdma_port, "same as --listen rdma://BIND:PORT for each bind address (0 = any port)")
      ->check(tools::in_range<int>(0, 65535));
  app.add_option("--busy-poll-us", busy_poll_us, "reactor busy polling before sleeping, microseconds (0 .. 1000000)")
      ->capture_default_str()
      ->check(tools::in_range<uint32_t>(0, 1000000));
  // Redis options accepted without effect (src/kv/config.cc says why for each), also on
  // the command line, so a redis-server command line works unchanged.
  const auto compat = kv::redis_compat_options();
  std::vector<std::string> compat_values(compat.size());
  std::vector<CLI::Option*> compat_opts;
  for (size_t i = 0; i < compat.size(); ++i) {
    auto* opt = app.add_option("--" + std::string(compat[i].name), compat_values[i],
                               "Redis compatibility: " + std::string(compat[i].why));
    opt->group("Redis options without effect");
    compat_opts.push_back(opt);
  }
  bool config_markdown = false;
  app.add_flag("--help-config-markdown", config_markdown,
               "print docs/KV.md's settings section (every setting, CONFIG SET at run time, Redis settings without "
               "effect) and exit");
  CLI11_PARSE(app, argc, argv);
  if (config_markdown) {
    std::fputs(kv::config_reference_markdown().c_str(), stdout);
    return 0;
  }

  auto die = [](const std::string& msg) {
    std::fprintf(stderr, "conduit-kv: %s\n", msg.c_str());
    return 1;
  };
  for (size_t i = 0; i < table_options.size(); ++i) {
    if (table_options[i].second->count() == 0) continue;
    const std::string err = kv::set_server_option(&o, table_options[i].first, values[i]);
    if (!err.empty()) return die("--" + std::string(table_options[i].first) + " " + values[i] + ": " + err);
  }
  for (size_t i = 0; i < compat.size(); ++i) {
    if (compat_opts[i]->count() == 0) continue;
    const std::string err = kv::set_server_option(&o, compat[i].name, compat_values[i]);
    if (!err.empty()) return die("--" + std::string(compat[i].name) + " " + compat_values[i] + ": " + err);
  }
  o.io_busy_poll_us = busy_poll_us;
  for (const std::string& u : listen) o.listen.push_back(u);
  for (const std::string& u : users) o.users.push_back(u);
  if (!shm_name.empty())
    o.listen.push_back("shm://" + shm_name + (shm_busy_poll_us > 0 ? "?busy_poll_us=" + std::to_string(shm_busy_poll_us) : ""));
  if (rdma_port >= 0) {
    std::istringstream binds(o.bind);
    std::string b;
    bool any = false;
    while (binds >> b) {
      o.listen.push_back("rdma://" + (b.find(':') != std::string::npos ? "[" + b + "]" : b) + ":" + std::to_string(rdma_port));
      any = true;
    }
    if (!any) o.listen.push_back("rdma://127.0.0.1:" + std::to_string(rdma_port));
  }
  if (o.loglevel == "debug") set_log_level(LogLevel::kDebug);
  else if (o.loglevel == "verbose" || o.loglevel == "notice") set_log_level(LogLevel::kInfo);
  else set_log_level(LogLevel::kWarn);
  RedisLog rlog(o.logfile);
  for (const std::string& w : config_warnings) rlog.line('#', "Warning: " + w);
  rlog.line('#', "oO0OoO0OoO0Oo conduit-kv is starting oO0OoO0OoO0Oo");
  rlog.line('#', "conduit-kv version=0.1.0 (Redis 7.0 protocol), bits=64, pid=" + std::to_string(getpid()) +
                     ", just started");
  if (!o.config_file.empty()) rlog.line('#', "Configuration loaded");
  if (o.always_show_logo)
    rlog.line('*', "conduit-kv 0.1.0 (redis_version 7.0.15 compatible)  Port: " + std::to_string(o.port) +
                       "  PID: " + std::to_string(getpid()));

  raise_fd_limit(static_cast<uint64_t>(o.maxclients) + 64);
  signal(SIGPIPE, SIG_IGN);

  reactor::LoopOptions lo;
  lo.busy_poll_us = busy_poll_us;
  auto loop = reactor::EventLoop::create(lo);
  if (!loop.ok()) return die(loop.status().to_string());
  auto server = kv::Server::create(**loop, o);
  if (!server.ok()) {
    const std::string why = server.status().to_string();
    // Redis' wording, which harnesses look for to retry on another port.
    // (Not just "in use": "Error in user declaration" contains it.)
    if (why.find("ddress already in use") != std::string::npos || why.find("address in use") != std::string::npos)
      rlog.line('#', "Warning: Could not create server TCP listening socket *:" + std::to_string(o.port) +
                         ": bind: Address already in use\n" + std::to_string(getpid()) + ":M Failed listening on port " +
                         std::to_string(o.port) + " (tcp), aborting.");
    return die(why);
  }
  rlog.line('*', "Server initialized");
  g_loop = loop->get();
  struct sigaction sa{};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  std::string urls;
  for (const std::string& u : (*server)->listen_urls()) urls += " " + u;
  std::fprintf(stderr, "conduit-kv %d: ready to accept connections on%s\n", static_cast<int>(getpid()), urls.c_str());
  rlog.line('*', "Ready to accept connections");
  Status run = (*loop)->run();
  rlog.line('#', "User requested shutdown...");
  (*server)->shutdown();
  rlog.line('#', "conduit-kv is now ready to exit, bye bye...");
  g_loop = nullptr;
  if (!run.ok()) return die(run.to_string());
  std::fprintf(stderr, "conduit-kv %d: shut down\n", static_cast<int>(getpid()));
  return 0;
}
