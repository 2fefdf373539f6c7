// conduit-kv-bench: redis-benchmark's flags and output over any Conduit transport.
//
//   conduit-kv-bench -t set,get -n 100000 -c 50 -P 16 -q                 # tcp://127.0.0.1:6379
//   conduit-kv-bench --transport shm --shm-name conduit-kv -c 1 -t get    # shm://conduit-kv
//
// Each client keeps one pipeline of -P requests in flight; a request's latency is the time
// from sending its pipeline to reading its reply (as redis-benchmark measures).  Replies are
// counted with a resumable RESP scanner, not parsed, so the tool stays cheap per request.
// Time comes from CLOCK_MONOTONIC (the TSC is not trustworthy across vCPUs in a VM).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "conduit/base/clock.h"
#include "conduit/kv/client.h"
#include "conduit/kv/resp.h"
#include "conduit/reactor/event_loop.h"
#include "conduit/transport/connection.h"
#include "numeric_flags.h"

namespace {

using namespace conduit;

struct Config {
  std::string host = "127.0.0.1";
  int port = 6379;
  std::string transport = "tcp";
  std::string shm_name = "conduit-kv";
  std::string url;
  std::string password, user;
  int clients = 50;
  uint64_t requests = 100000;
  size_t datasize = 3;
  int dbnum = 0;
  bool resp3 = false;
  int threads = 1;
  int keepalive = 1;
  uint64_t keyspace = 0;  // -r: 0 = literal "__rand_int__"
  int pipeline = 1;
  bool quiet = false;
  bool csv = false;
  std::string tests;
  int precision = 3;
  uint32_t busy_poll_us = 0;
  std::vector<std::string> command;  // a custom command after the options
};

struct Test {
  std::string title;     // "SET", "LRANGE_100 (first 100 elements)"
  std::string selector;  // "set", "lrange_100" (-t matches this, or `group`)
  std::string group;     // "lrange", "ping"
  std::string bytes;     // one request, with __rand_int__ placeholders
};

std::string multibulk(const std::vector<std::string>& args) {
  kv::ByteBuffer b;
  std::vector<std::string_view> v(args.begin(), args.end());
  kv::append_command(&b, v);
  return std::string(b.data(), b.size());
}

std::vector<Test> default_tests(const Config& c) {
  const std::string data(c.datasize, 'x');
  const std::string score = c.keyspace > 0 ? "__rand_int__" : "0";
  std::vector<Test> t;
  t.push_back({"PING_INLINE", "ping_inline", "ping", "PING\r\n"});
  t.push_back({"PING_MBULK", "ping_mbulk", "ping", multibulk({"PING"})});
  t.push_back({"SET", "set", "", multibulk({"SET", "key:__rand_int__", data})});
  t.push_back({"GET", "get", "", multibulk({"GET", "key:__rand_int__"})});
  t.push_back({"INCR", "incr", "", multibulk({"INCR", "counter:__rand_int__"})});
  t.push_back({"LPUSH", "lpush", "", multibulk({"LPUSH", "mylist", data})});
  t.push_back({"RPUSH", "rpush", "", multibulk({"RPUSH", "mylist", data})});
  t.push_back({"LPOP", "lpop", "", multibulk({"LPOP", "mylist"})});
  t.push_back({"RPOP", "rpop", "", multibulk({"RPOP", "mylist"})});
  t.push_back({"SADD", "sadd", "", multibulk({"SADD", "myset", "element:__rand_int__"})});
  t.push_back({"HSET", "hset", "", multibulk({"HSET", "myhash", "element:__rand_int__", data})});
  t.push_back({"SPOP", "spop", "", multibulk({"SPOP", "myset"})});
  t.push_back({"ZADD", "zadd", "", multibulk({"ZADD", "myzset", score, "element:__rand_int__"})});
  t.push_back({"ZPOPMIN", "zpopmin", "", multibulk({"ZPOPMIN", "myzset"})});
  t.push_back({"LPUSH (needed to benchmark LRANGE)", "lrange", "lrange", multibulk({"LPUSH", "mylist", data})});
  t.push_back({"LRANGE_100 (first 100 elements)", "lrange_100", "lrange", multibulk({"LRANGE", "mylist", "0", "99"})});
  t.push_back({"LRANGE_300 (first 300 elements)", "lrange_300", "lrange", multibulk({"LRANGE", "mylist", "0", "299"})});
  t.push_back({"LRANGE_500 (first 500 elements)", "lrange_500", "lrange", multibulk({"LRANGE", "mylist", "0", "499"})});
  t.push_back({"LRANGE_600 (first 600 elements)", "lrange_600", "lrange", multibulk({"LRANGE", "mylist", "0", "599"})});
  std::vector<std::string> mset = {"MSET"};
  for (int i = 0; i < 10; ++i) {
    mset.push_back("key:__rand_int__");
    mset.push_back(data);
  }
  t.push_back({"MSET (10 keys)", "mset", "", multibulk(mset)});
  t.push_back({"XADD", "xadd", "", multibulk({"XADD", "mystream", "*", "myfield", data})});
  return t;
}

bool selected(const Config& c, const Test& t) {
  if (c.tests.empty()) return true;
  std::string list = "," + c.tests + ",";
  std::transform(list.begin(), list.end(), list.begin(), [](unsigned char ch) { return std::tolower(ch); });
  auto has = [&](const std::string& name) { return !name.empty() && list.find("," + name + ",") != std::string::npos; };
  // The LPUSH that fills the list runs when any LRANGE test does.
  if (t.selector == "lrange") return list.find(",lrange") != std::string::npos;
  return has(t.selector) || has(t.group);
}

// --- one run of one test -------------------------------------------------------------------------

struct Shared {
  std::atomic<int64_t> remaining{0};
  std::atomic<int> connected{0};
  std::atomic<int> failed{0};
  std::atomic<bool> go{false};
  std::atomic<bool> abort{false};
  std::string error;
  std::mutex mu;
};

class BenchClient {
 public:
  BenchClient(const Config& c, const std::string& request, Shared& shared, std::vector<uint32_t>& lat, uint64_t seed)
      : cfg_(c), shared_(shared), lat_(lat), rng_(seed) {
    for (int i = 0; i < c.pipeline; ++i) batch_ += request;
    request_len_ = request.size();
    for (size_t pos = batch_.find("__rand_int__"); pos != std::string::npos; pos = batch_.find("__rand_int__", pos + 1))
      placeholders_.push_back(pos);
  }

  Status start(reactor::EventLoop& loop, const std::string& url) {
    auto conn = transport::connect(loop, url, [this](transport::Connection&, Status s) { on_connected(std::move(s)); });
    if (!conn.ok()) return conn.status();
    conn_ = std::move(conn).value();
    return {};
  }

  bool ready() const { return ready_; }
  bool done() const { return done_; }
  bool failed() const { return failed_; }

  void begin() { send_batch(); }

 private:
  void fail(const std::string& why) {
    if (failed_) return;
    failed_ = done_ = true;
    {
      std::lock_guard<std::mutex> lock(shared_.mu);
      if (shared_.error.empty()) shared_.error = why;
    }
    shared_.failed.fetch_add(1);
    shared_.abort = true;
    if (conn_) conn_->close();
  }

  void on_connected(Status s) {
    if (!s.ok()) return fail("connect: " + s.to_string());
    conn_->set_read_handler([this](transport::Connection&) { on_readable(); });
    // Setup commands (AUTH, HELLO, SELECT) whose replies are not timed.
    std::vector<std::vector<std::string>> setup;
    if (cfg_.resp3) {
      std::vector<std::string> h = {"HELLO", "3"};
      if (!cfg_.password.empty()) h.insert(h.end(), {"AUTH", cfg_.user.empty() ? "default" : cfg_.user, cfg_.password});
      setup.push_back(h);
    } else if (!cfg_.password.empty()) {
      if (cfg_.user.empty()) setup.push_back({"AUTH", cfg_.password});
      else setup.push_back({"AUTH", cfg_.user, cfg_.password});
    }
    if (cfg_.dbnum != 0) setup.push_back({"SELECT", std::to_string(cfg_.dbnum)});
    if (setup.empty()) return mark_ready();
    std::string bytes;
    for (const auto& a : setup) bytes += multibulk(a);
    setup_pending_ = setup.size();
    write_all(bytes);
  }

  void mark_ready() {
    ready_ = true;
    shared_.connected.fetch_add(1);
  }

  void write_all(std::string_view bytes) {
    pending_out_.append(bytes.data(), bytes.size());
    flush();
  }

  void flush() {
    while (!pending_out_.empty()) {
      auto r = conn_->write({reinterpret_cast<const uint8_t*>(pending_out_.data()), pending_out_.size()});
      if (r.ok()) {
        pending_out_.erase(0, *r);
        continue;
      }
      if (r.status().would_block()) {
        if (!writing_) {
          writing_ = true;
          conn_->set_write_handler([this](transport::Connection&) { flush(); });
        }
        return;
      }
      return fail("write: " + r.status().to_string());
    }
    if (writing_) {
      writing_ = false;
      conn_->set_write_handler(nullptr);
    }
  }

  void randomize(size_t requests) {
    const size_t end = requests * request_len_;
    for (size_t pos : placeholders_) {
      if (pos >= end) break;
      uint64_t v = cfg_.keyspace > 0 ? rng_() % cfg_.keyspace : 0;
      for (int i = 11; i >= 0; --i) {
        batch_[pos + static_cast<size_t>(i)] = static_cast<char>('0' + v % 10);
        v /= 10;
      }
    }
  }

  void send_batch() {
    if (shared_.abort.load(std::memory_order_relaxed)) {
      done_ = true;
      return;
    }
    // Reserve up to -P requests from the shared budget.
    int64_t left = shared_.remaining.load(std::memory_order_relaxed);
    int64_t take;
    do {
      if (left <= 0) {
        done_ = true;
        return;
      }
      take = std::min<int64_t>(left, cfg_.pipeline);
    } while (!shared_.remaining.compare_exchange_weak(left, left - take, std::memory_order_relaxed));
    outstanding_ = static_cast<uint32_t>(take);
    if (cfg_.keyspace > 0) randomize(static_cast<size_t>(take));
    batch_start_ = monotonic_ns();
    write_all(std::string_view(batch_).substr(0, static_cast<size_t>(take) * request_len_));
  }

  void on_readable() {
    char* dst = in_.prepare(64 * 1024);
    auto r = conn_->read({reinterpret_cast<uint8_t*>(dst), 64 * 1024});
    if (!r.ok()) {
      if (r.status().would_block()) return;
      return fail("read: " + r.status().to_string());
    }
    if (*r == 0) return fail("the server closed the connection");
    in_.commit(*r);
    while (!in_.empty()) {
      const int64_t n = scanner_.scan(in_.data(), in_.size());
      if (n == 0) break;
      if (n < 0) return fail("malformed reply");
      if (in_.data()[0] == '-' && (setup_pending_ > 0 || !error_seen_)) {
        error_seen_ = true;
        const std::string e(in_.data() + 1, static_cast<size_t>(n) - 3);
        if (setup_pending_ > 0) return fail("setup command failed: " + e);
        std::fprintf(stderr, "conduit-kv-bench: error reply: %s\n", e.c_str());
      }
      in_.consume(static_cast<size_t>(n));
      if (setup_pending_ > 0) {
        if (--setup_pending_ == 0) mark_ready();
        continue;
      }
      if (outstanding_ == 0) continue;
      const uint64_t ns = monotonic_ns() - batch_start_;
      lat_.push_back(static_cast<uint32_t>(std::min<uint64_t>(ns, UINT32_MAX)));
      if (--outstanding_ == 0) send_batch();
    }
  }

  const Config& cfg_;
  Shared& shared_;
  std::vector<uint32_t>& lat_;
  std::mt19937_64 rng_;
  std::unique_ptr<transport::Connection> conn_;
  std::string batch_;
  size_t request_len_ = 0;
  std::vector<size_t> placeholders_;
  std::string pending_out_;
  kv::ByteBuffer in_;
  kv::ReplyScanner scanner_;
  uint64_t batch_start_ = 0;
  uint32_t outstanding_ = 0;
  size_t setup_pending_ = 0;
  bool ready_ = false, done_ = false, failed_ = false, writing_ = false, error_seen_ = false;
};

struct RunResult {
  bool ok = false;
  std::string error;
  double seconds = 0;
  std::vector<uint32_t> latencies;  // ns, sorted
};

RunResult run_test(const Config& cfg, const std::string& url, const std::string& request) {
  Shared shared;
  shared.remaining = static_cast<int64_t>(cfg.requests);
  const int threads = std::max(1, std::min(cfg.threads, cfg.clients));
  std::vector<std::vector<uint32_t>> lats(static_cast<size_t>(threads));
  std::vector<uint64_t> finish(static_cast<size_t>(threads), 0);
  std::atomic<uint64_t> start_ns{0};
  std::atomic<int> threads_done{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      reactor::LoopOptions lo;
      lo.busy_poll_us = cfg.busy_poll_us;
      auto loop = reactor::EventLoop::create(lo);
      if (!loop.ok()) {
        std::lock_guard<std::mutex> lock(shared.mu);
        shared.error = loop.status().to_string();
        shared.abort = true;
        shared.failed.fetch_add(1);
        threads_done.fetch_add(1);
        return;
      }
      auto& lat = lats[static_cast<size_t>(t)];
      lat.reserve(cfg.requests / static_cast<uint64_t>(threads) + 1024);
      std::vector<std::unique_ptr<BenchClient>> clients;
      for (int i = t; i < cfg.clients; i += threads) {
        auto c = std::make_unique<BenchClient>(cfg, request, shared, lat, 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(i + 1));
        if (Status s = c->start(**loop, url); !s.ok()) {
          std::lock_guard<std::mutex> lock(shared.mu);
          if (shared.error.empty()) shared.error = s.to_string();
          shared.abort = true;
          shared.failed.fetch_add(1);
          break;
        }
        clients.push_back(std::move(c));
      }
      const uint64_t deadline = monotonic_ns() + 30'000'000'000ull;
      auto all = [&](auto pred) { return std::all_of(clients.begin(), clients.end(), [&](auto& c) { return pred(*c); }); };
      // Phase 1: connect (and set up) every client, then wait for the start signal.
      while (!shared.abort && !shared.go) {
        (void)(*loop)->run_once(1);
        if (monotonic_ns() > deadline) {
          std::lock_guard<std::mutex> lock(shared.mu);
          if (shared.error.empty()) shared.error = "timed out connecting";
          shared.abort = true;
        }
      }
      if (!shared.abort) {
        for (auto& c : clients) c->begin();
        const auto hook = (*loop)->add_before_sleep([&] { return all([](const BenchClient& c) { return c.done(); }); });
        while (!all([](const BenchClient& c) { return c.done(); })) (void)(*loop)->run_once(100);
        (*loop)->remove_before_sleep(hook);
      }
      finish[static_cast<size_t>(t)] = monotonic_ns();
      clients.clear();
      (void)(*loop)->run_once(0);
      threads_done.fetch_add(1);
    });
  }
  // Start once every client is connected.
  const int expected = cfg.clients;
  const uint64_t deadline = monotonic_ns() + 30'000'000'000ull;
  while (!shared.abort && shared.connected.load() < expected && monotonic_ns() < deadline)
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  if (shared.connected.load() < expected && !shared.abort) {
    std::lock_guard<std::mutex> lock(shared.mu);
    shared.error = "timed out connecting " + std::to_string(expected) + " clients";
    shared.abort = true;
  }
  start_ns = monotonic_ns();
  shared.go = true;
  for (auto& th : pool) th.join();
  RunResult r;
  if (shared.failed.load() > 0 || !shared.error.empty()) {
    r.error = shared.error.empty() ? "a client failed" : shared.error;
    return r;
  }
  const uint64_t end = *std::max_element(finish.begin(), finish.end());
  r.seconds = static_cast<double>(end - start_ns.load()) / 1e9;
  for (auto& l : lats) r.latencies.insert(r.latencies.end(), l.begin(), l.end());
  std::sort(r.latencies.begin(), r.latencies.end());
  r.ok = true;
  return r;
}

double pct(const std::vector<uint32_t>& v, double p) {
  if (v.empty()) return 0;
  size_t i = static_cast<size_t>(p / 100.0 * static_cast<double>(v.size()));
  if (i >= v.size()) i = v.size() - 1;
  return v[i] / 1e6;
}

void report(const Config& cfg, const std::string& title, const RunResult& r, const std::string& save_cfg,
            const std::string& aof_cfg) {
  const double rps = r.seconds > 0 ? static_cast<double>(r.latencies.size()) / r.seconds : 0;
  const auto& v = r.latencies;
  double sum = 0;
  for (uint32_t x : v) sum += x;
  const double avg = v.empty() ? 0 : sum / static_cast<double>(v.size()) / 1e6;
  const double mn = v.empty() ? 0 : v.front() / 1e6, mx = v.empty() ? 0 : v.back() / 1e6;
  const int p = cfg.precision;
  if (cfg.csv) {
    std::printf("\"%s\",\"%.2f\",\"%.*f\",\"%.*f\",\"%.*f\",\"%.*f\",\"%.*f\",\"%.*f\"\n", title.c_str(), rps, p, avg, p,
                mn, p, pct(v, 50), p, pct(v, 95), p, pct(v, 99), p, mx);
    return;
  }
  if (cfg.quiet) {
    std::printf("%s: %.2f requests per second, p50=%.*f msec\n", title.c_str(), rps, p, pct(v, 50));
    return;
  }
  std::printf("====== %s ======\n", title.c_str());
  std::printf("  %zu requests completed in %.2f seconds\n", v.size(), r.seconds);
  std::printf("  %d parallel clients\n", cfg.clients);
  std::printf("  %zu bytes payload\n", cfg.datasize);
  std::printf("  keep alive: %d\n", cfg.keepalive);
  std::printf("  host configuration \"save\": %s\n", save_cfg.c_str());
  std::printf("  host configuration \"appendonly\": %s\n", aof_cfg.c_str());
  std::printf("  multi-thread: %s\n", cfg.threads > 1 ? "yes" : "no");
  if (cfg.threads > 1) std::printf("  threads: %d\n", cfg.threads);
  std::printf("  transport: %s\n\n", cfg.url.empty() ? cfg.transport.c_str() : cfg.url.c_str());
  std::printf("Latency by percentile distribution:\n");
  const double marks[] = {0, 50, 75, 87.5, 93.75, 96.875, 98.438, 99.219, 99.609, 99.805, 99.902, 99.951, 99.976, 100};
  for (double m : marks) {
    const double ms = m >= 100 ? mx : pct(v, m);
    const size_t count = static_cast<size_t>(std::upper_bound(v.begin(), v.end(), static_cast<uint32_t>(ms * 1e6)) - v.begin());
    std::printf("%.3f%% <= %.*f milliseconds (cumulative count %zu)\n", m, p, ms, count);
  }
  std::printf("\nSummary:\n");
  std::printf("  throughput summary: %.2f requests per second\n", rps);
  std::printf("  latency summary (msec):\n");
  std::printf("          avg       min       p50       p95       p99       max\n");
  std::printf("    %9.*f %9.*f %9.*f %9.*f %9.*f %9.*f\n\n", p, avg, p, mn, p, pct(v, 50), p, pct(v, 95), p,
              pct(v, 99), p, mx);
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  CLI::App app{"conduit-kv-bench: redis-benchmark's flags and output over TCP, shared memory or RDMA.\n"
               "Usage: conduit-kv-bench [options] [command args...]"};
  app.get_formatter()->column_width(34);
  app.set_help_flag("--help", "print this help");
  app.add_option("-h", cfg.host, "server hostname")->capture_default_str();
  app.add_option("-p", cfg.port, "server port")->capture_default_str()->check(tools::in_range(1, 65535));
  app.add_option("--transport", cfg.transport, "tcp | shm | rdma")->capture_default_str()->check(CLI::IsMember({"tcp", "shm", "rdma"}));
  app.add_option("--shm-name", cfg.shm_name, "shm listener name (--transport shm)")->capture_default_str();
  app.add_option("--url", cfg.url, "connect to this transport URL instead (tcp://, shm://, rdma://, auto://)");
  app.add_option("-a", cfg.password, "password for AUTH");
  app.add_option("--user", cfg.user, "user for AUTH (with -a)");
  app.add_option("-c", cfg.clients, "number of parallel connections")->capture_default_str()->check(tools::in_range(1, 100000));
  app.add_option("-n", cfg.requests, "total number of requests (1 .. 10^12)")
      ->capture_default_str()
      ->check(tools::in_range<uint64_t>(1, 1'000'000'000'000ull));
  // The server's default proto-max-bulk-len bounds a value.
  app.add_option("-d", cfg.datasize, "data size of SET/GET value in bytes (1 .. 536870912)")
      ->capture_default_str()
      ->check(tools::in_range<size_t>(1, 512u << 20));
  app.add_option("--dbnum", cfg.dbnum, "SELECT this db")->capture_default_str()->check(tools::in_range(0, INT32_MAX));
  app.add_flag("-3", cfg.resp3, "start sessions in RESP3 protocol mode");
  app.add_option("--threads", cfg.threads, "enable multi-thread mode")->capture_default_str()->check(tools::in_range(1, 256));
  app.add_option("-k", cfg.keepalive, "1=keep alive (only 1 is supported)")->capture_default_str()->check(tools::in_range(0, 1));
  app.add_option("-r", cfg.keyspace, "random keys in [0, keyspacelen) for __rand_int__ (0 = literal)")
      ->check(tools::in_range<uint64_t>(0, INT64_MAX));
  app.add_option("-P", cfg.pipeline, "pipeline <numreq> requests")->capture_default_str()->check(tools::in_range(1, 100000));
  app.add_flag("-q", cfg.quiet, "quiet: just show query/sec values");
  app.add_flag("--csv", cfg.csv, "output in CSV format");
  app.add_option("-t", cfg.tests, "comma-separated list of tests to run (set,get,lrange,...)");
  app.add_option("--precision", cfg.precision, "decimal places in latency output (0 .. 9)")
      ->capture_default_str()
      ->check(tools::in_range(0, 9));
  app.add_option("--busy-poll-us", cfg.busy_poll_us, "client loop busy polling (shm: also the ring), 0 .. 1000000")
      ->capture_default_str()
      ->check(tools::in_range<uint32_t>(0, 1000000));
  app.add_option("command", cfg.command, "a custom command to benchmark instead of the tests");
  app.allow_extras(false);
  CLI11_PARSE(app, argc, argv);
  if (cfg.keepalive != 1) {
    std::fprintf(stderr, "conduit-kv-bench: only -k 1 (keep alive) is supported\n");
    return 1;
  }
  std::string url = cfg.url;
  if (url.empty()) {
    const std::string host = cfg.host.find(':') != std::string::npos ? "[" + cfg.host + "]" : cfg.host;
    if (cfg.transport == "tcp") url = "tcp://" + host + ":" + std::to_string(cfg.port);
    else if (cfg.transport == "rdma") url = "rdma://" + host + ":" + std::to_string(cfg.port);
    else url = "shm://" + cfg.shm_name + (cfg.busy_poll_us > 0 ? "?busy_poll_us=" + std::to_string(cfg.busy_poll_us) : "");
  }

  // What redis-benchmark prints about the server (and a connectivity check).
  std::string save_cfg, aof_cfg;
  {
    kv::ClientOptions co;
    co.password = cfg.password;
    co.user = cfg.user;
    co.timeout_ms = 10000;
    auto c = kv::Client::connect(url, co);
    if (!c.ok()) {
      std::fprintf(stderr, "conduit-kv-bench: cannot connect to %s: %s\n", url.c_str(), c.status().to_string().c_str());
      return 1;
    }
    auto r = (*c)->command({"CONFIG", "GET", "save"});
    if (r.ok() && r->elements.size() == 2) save_cfg = r->elements[1].str;
    r = (*c)->command({"CONFIG", "GET", "appendonly"});
    if (r.ok() && r->elements.size() == 2) aof_cfg = r->elements[1].str;
    if (!r.ok() || r->is_error()) std::fprintf(stderr, "WARNING: Could not fetch server CONFIG\n");
  }

  std::vector<Test> tests;
  if (!cfg.command.empty()) {
    std::string title;
    for (const auto& a : cfg.command) title += (title.empty() ? "" : " ") + a;
    tests.push_back({title, "", "", multibulk(cfg.command)});
  } else {
    for (const Test& t : default_tests(cfg))
      if (selected(cfg, t)) tests.push_back(t);
  }
  if (cfg.csv)
    std::printf("\"test\",\"rps\",\"avg_latency_ms\",\"min_latency_ms\",\"p50_latency_ms\",\"p95_latency_ms\","
                "\"p99_latency_ms\",\"max_latency_ms\"\n");
  int rc = 0;
  for (const Test& t : tests) {
    RunResult r = run_test(cfg, url, t.bytes);
    if (!r.ok) {
      std::fprintf(stderr, "conduit-kv-bench: %s: %s\n", t.title.c_str(), r.error.c_str());
      rc = 1;
      break;
    }
    report(cfg, t.title, r, save_cfg, aof_cfg);
    std::fflush(stdout);
  }
  return rc;
}
