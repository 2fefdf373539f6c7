#include "harness.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "conduit/base/clock.h"
#include "rdma/rdma.h"
#include "conduit/base/log.h"
#include "conduit/transport/endpoint.h"

namespace conduit::conformance {

// ---------------------------------------------------------------------------------------
uint64_t env_u64(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  uint64_t n = std::strtoull(v, &end, 10);
  if (end == v) return fallback;
  switch (*end) {
    case 'k': case 'K': n <<= 10; break;
    case 'm': case 'M': n <<= 20; break;
    case 'g': case 'G': n <<= 30; break;
    default: break;
  }
  return n;
}

uint64_t test_seed() {
  static const uint64_t seed = env_u64("CONDUIT_CONFORMANCE_SEED", 0x5eed'c0d0'17ull);
  return seed;
}

std::chrono::milliseconds default_deadline() {
  return std::chrono::seconds(env_u64("CONDUIT_CONFORMANCE_TIMEOUT_S", 60));
}

size_t open_fd_count() {
  size_t n = 0;
  DIR* d = ::opendir("/proc/self/fd");
  if (d == nullptr) return 0;
  while (dirent* e = ::readdir(d))
    if (e->d_name[0] != '.') ++n;
  ::closedir(d);
  return n - 1;  // the directory stream's own fd
}

size_t resident_bytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long size = 0, resident = 0;
  const int got = std::fscanf(f, "%lu %lu", &size, &resident);
  std::fclose(f);
  return got == 2 ? resident * static_cast<size_t>(::sysconf(_SC_PAGESIZE)) : 0;
}

bool raise_fd_limit(size_t want) {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return false;
  if (rl.rlim_cur >= want) return true;
  if (rl.rlim_max < want) {
    // A privileged process (the testbed guest runs tests as root, with a 4096 hard limit)
    // may raise the hard limit too; elsewhere this fails and the soft limit is capped.
    rlimit up{want, want};
    if (::setrlimit(RLIMIT_NOFILE, &up) == 0) return true;
  }
  rl.rlim_cur = std::min<rlim_t>(want, rl.rlim_max);
  if (::setrlimit(RLIMIT_NOFILE, &rl) != 0) return false;
  return rl.rlim_cur >= want;
}

// ---------------------------------------------------------------------------------------
Pattern::Pattern(uint64_t seed, size_t period, size_t max_span)
    : period_(period), max_span_(max_span), bytes_(period + max_span) {
  std::mt19937_64 rng(seed);
  fill_random(rng, bytes_.data(), period_);
  for (size_t i = 0; i < max_span_; ++i) bytes_[period_ + i] = bytes_[i % period_];
}

bool Pattern::matches(uint64_t offset, const uint8_t* data, size_t n) const {
  while (n > 0) {
    const size_t k = std::min(n, max_span_);
    if (std::memcmp(at(offset), data, k) != 0) return false;
    offset += k;
    data += k;
    n -= k;
  }
  return true;
}

uint64_t Pattern::first_mismatch(uint64_t offset, const uint8_t* data, size_t n) const {
  for (size_t i = 0; i < n; ++i)
    if (*at(offset + i) != data[i]) return offset + i;
  return offset + n;
}

void fill_random(std::mt19937_64& rng, uint8_t* p, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const uint64_t v = rng();
    std::memcpy(p + i, &v, 8);
  }
  if (i < n) {
    const uint64_t v = rng();
    std::memcpy(p + i, &v, n - i);
  }
}

uint64_t checksum64(const uint8_t* p, size_t n) {
  // FNV-1a over 64-bit words: order-sensitive and fast enough for 16 MiB messages.
  uint64_t h = 0xcbf29ce484222325ull ^ n;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * 0x100000001b3ull;
  }
  for (; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h ^ (h >> 29);
}

size_t log_uniform(std::mt19937_64& rng, size_t lo, size_t hi) {
  std::uniform_real_distribution<double> d(std::log(static_cast<double>(lo)), std::log(static_cast<double>(hi) + 1));
  const size_t v = static_cast<size_t>(std::exp(d(rng)));
  return std::clamp(v, lo, hi);
}

// ---------------------------------------------------------------------------------------
::testing::AssertionResult run_until(reactor::EventLoop& loop, const std::function<bool()>& done,
                                     std::chrono::milliseconds limit, const std::string& what) {
  const uint64_t start = monotonic_ns();
  const uint64_t deadline = start + static_cast<uint64_t>(limit.count()) * 1'000'000ull;
  while (!done()) {
    const uint64_t now = monotonic_ns();
    if (now >= deadline)
      return ::testing::AssertionFailure() << "timed out after " << limit.count() << " ms waiting for: " << what;
    const int ms = static_cast<int>(std::min<uint64_t>(10, (deadline - now + 999'999) / 1'000'000));
    if (Status s = loop.run_once(ms); !s.ok())
      return ::testing::AssertionFailure() << "run_once: " << s.to_string() << " (waiting for: " << what << ")";
  }
  return ::testing::AssertionSuccess();
}

void run_for(reactor::EventLoop& loop, std::chrono::milliseconds d) {
  const uint64_t deadline = monotonic_ns() + static_cast<uint64_t>(d.count()) * 1'000'000ull;
  for (uint64_t now = monotonic_ns(); now < deadline; now = monotonic_ns()) {
    const int ms = static_cast<int>(std::min<uint64_t>(10, (deadline - now + 999'999) / 1'000'000));
    (void)loop.run_once(ms);
  }
}

// ---------------------------------------------------------------------------------------
void BufferedWriter::send(const uint8_t* p, size_t n) { send(std::vector<uint8_t>(p, p + n)); }

void BufferedWriter::send(std::vector<uint8_t> bytes) {
  if (bytes.empty()) return;
  queue_.push_back(std::move(bytes));
  flush();
}

void BufferedWriter::flush() {
  while (!queue_.empty() && error_.ok()) {
    const std::vector<uint8_t>& head = queue_.front();
    Result<size_t> r = conn_.write(std::span<const uint8_t>(head.data() + head_off_, head.size() - head_off_));
    if (!r.ok()) {
      if (r.status().would_block()) break;
      error_ = r.status();
      break;
    }
    written_ += *r;
    head_off_ += *r;
    if (head_off_ == head.size()) {
      queue_.pop_front();
      head_off_ = 0;
    }
  }
  const bool want = !queue_.empty() && error_.ok();
  if (want != handler_installed_) {
    handler_installed_ = want;
    conn_.set_write_handler(want ? Connection::Handler([this](Connection&) { flush(); }) : nullptr);
  }
}

void BufferedWriter::detach() {
  if (handler_installed_) conn_.set_write_handler(nullptr);
  handler_installed_ = false;
}

// ---------------------------------------------------------------------------------------
Collector::Collector(Connection& c, OnData on_data, size_t buf_size)
    : conn_(c), on_data_(std::move(on_data)), buf_(buf_size) {}

void Collector::start() {
  installed_ = true;
  conn_.set_read_handler([this](Connection&) { on_readable(); });
}

void Collector::detach() {
  if (installed_) conn_.set_read_handler(nullptr);
  installed_ = false;
}

void Collector::on_readable() {
  ++handler_calls_;
  size_t budget = per_call_ == 0 ? SIZE_MAX : per_call_;
  while (budget > 0) {
    const size_t want = std::min(budget, buf_.size());
    Result<size_t> r = conn_.read(std::span<uint8_t>(buf_.data(), want));
    if (!r.ok()) {
      if (r.status().would_block()) return;
      error_ = r.status();
      detach();
      return;
    }
    if (*r == 0) {
      eof_ = true;
      detach();
      return;
    }
    received_ += *r;
    if (per_call_ != 0) budget -= *r;
    if (on_data_) on_data_(buf_.data(), *r);  // may close the connection
    if (conn_.state() != ConnState::kConnected) return;
  }
}

// ---------------------------------------------------------------------------------------
PatternWriter::PatternWriter(Connection& c, const Pattern& p, uint64_t total, uint64_t seed, size_t max_chunk)
    : conn_(c), pattern_(p), total_(total), rng_(seed), max_chunk_(std::min(max_chunk, p.max_span())) {}

void PatternWriter::start() {
  installed_ = true;
  conn_.set_write_handler([this](Connection&) {
    ++handler_calls_;
    pump();
  });
  pump();
}

void PatternWriter::detach() {
  if (installed_) conn_.set_write_handler(nullptr);
  installed_ = false;
}

void PatternWriter::pump() {
  // A bounded batch per call so a reader on the same loop gets its turn.
  for (int batch = 0; batch < 64 && written_ < total_ && !finished_; ++batch) {
    Result<size_t> r = Status(Code::kInternal, "unset");
    if (max_iov_ == 0) {
      const size_t n = std::min<uint64_t>(log_uniform(rng_, 1, max_chunk_), total_ - written_);
      r = conn_.write(std::span<const uint8_t>(pattern_.at(written_), n));
    } else {
      // Consecutive stream pieces laid out in memory in reverse order (slot count-1-i),
      // so a transport that ignored iovec boundaries or order would corrupt the stream.
      const size_t count = std::uniform_int_distribution<size_t>(1, max_iov_)(rng_);
      if (scratch_.size() < count * kPiece) scratch_.resize(count * kPiece);
      iov_.clear();
      uint64_t off = written_;
      for (size_t i = 0; i < count && off < total_ && off - written_ < kMaxWritevBytes; ++i) {
        // Zero-length entries are legal and must be skipped over.
        const size_t n = std::min<uint64_t>(std::uniform_int_distribution<size_t>(0, kPiece)(rng_), total_ - off);
        uint8_t* slot = scratch_.data() + (count - 1 - i) * kPiece;
        std::memcpy(slot, pattern_.at(off), n);
        iov_.push_back(iovec{slot, n});
        off += n;
      }
      if (off == written_) continue;
      r = conn_.writev(std::span<const iovec>(iov_.data(), iov_.size()));
    }
    if (!r.ok()) {
      if (r.status().would_block()) {
        ++would_blocks_;
        return;
      }
      error_ = r.status();
      detach();
      return;
    }
    written_ += *r;
    if (after_write && !after_write(written_)) {
      finished_ = true;
      return;
    }
  }
  if (written_ == total_ && !finished_) {
    finished_ = true;
    detach();
    if (on_done) on_done();
  }
}

// ---------------------------------------------------------------------------------------
PatternReader::PatternReader(Connection& c, const Pattern& p, uint64_t seed, size_t max_read)
    : conn_(c), pattern_(p), rng_(seed), max_read_(max_read), buf_(max_read) {}

void PatternReader::start() {
  installed_ = true;
  conn_.set_read_handler([this](Connection&) { on_readable(); });
}

void PatternReader::detach() {
  if (installed_) conn_.set_read_handler(nullptr);
  installed_ = false;
}

size_t PatternReader::read_some(size_t max) {
  const uint64_t before = received_;
  read_once(std::min(max, max_read_));
  return static_cast<size_t>(received_ - before);
}

bool PatternReader::read_once(size_t want) {
  if (ended()) return false;
  Result<size_t> r = conn_.read(std::span<uint8_t>(buf_.data(), want));
  if (!r.ok()) {
    if (!r.status().would_block()) {
      error_ = r.status();
      detach();
    }
    return false;
  }
  if (*r == 0) {
    eof_ = true;
    detach();
    return false;
  }
  if (!corrupt_ && !pattern_.matches(received_, buf_.data(), *r)) {
    corrupt_ = true;
    corrupt_at_ = pattern_.first_mismatch(received_, buf_.data(), *r);
  }
  received_ += *r;
  return true;
}

void PatternReader::on_readable() {
  for (int batch = 0; batch < 64; ++batch)
    if (!read_once(log_uniform(rng_, 1, max_read_))) return;
}

// ---------------------------------------------------------------------------------------
void Conformance::SetUp() {
  // Thousands of connections per test: keep per-connection INFO lines (auto's choice of
  // transport) out of the output unless asked for.
  if (std::getenv("CONDUIT_LOG_LEVEL") == nullptr) set_log_level(LogLevel::kWarn);
  ASSERT_NE(transport::find_transport(tc().scheme), nullptr) << "instantiated for an unregistered scheme";
  std::string why;
  listen_url_ = tc().listen_url(&why);
  if (listen_url_.empty()) {
    const char* req = std::getenv("CONDUIT_REQUIRE_RDMA");
    if (tc().label == "rdma" && req != nullptr && std::string(req) == "1")
      FAIL() << "CONDUIT_REQUIRE_RDMA=1 but " << why;
    GTEST_SKIP() << tc().name << ": " << why;
  }
  auto loop = reactor::EventLoop::create();
  ASSERT_TRUE(loop.ok()) << loop.status().to_string();
  loop_ = std::move(loop).value();
  RecordProperty("seed", std::to_string(test_seed()));
}

void Conformance::TearDown() {
  // Let destroy_later()ed objects die on the loop before the loop itself.
  if (loop_) run_for(5ms);
}

std::string Conformance::listen_url() const {
  std::string why;
  return tc().listen_url(&why);
}

std::string Conformance::connect_url(const Listener& listener) const {
  const std::string url = listener.url();
  if (tc().connect_options.empty()) return url;
  auto ep = transport::Endpoint::parse(url);
  if (!ep.ok()) return url;
  auto extra = transport::Endpoint::parse(tc().scheme + "://x?" + tc().connect_options);
  if (!extra.ok()) return url;
  for (const auto& [k, v] : extra->options) ep->options.emplace(k, v);  // the listener's own win
  return ep->to_string();
}

::testing::AssertionResult Conformance::start_listener(std::unique_ptr<Listener>* out,
                                                       std::shared_ptr<AcceptQueue> queue, reactor::EventLoop* on) {
  const std::string url = listen_url();
  auto l = transport::listen(on ? *on : *loop_, url, [queue](std::unique_ptr<Connection> c) {
    ++queue->accepted;
    queue->conns.push_back(std::move(c));
  });
  if (!l.ok()) return ::testing::AssertionFailure() << "listen " << url << ": " << l.status().to_string();
  *out = std::move(l).value();
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult Conformance::start_connect(const std::string& url, std::unique_ptr<Connection>* out,
                                                      std::shared_ptr<ConnectResult> result, reactor::EventLoop* on) {
  auto c = transport::connect(on ? *on : *loop_, url, [result](Connection&, Status s) {
    result->fired = true;
    ++result->times;
    result->status = std::move(s);
  });
  if (!c.ok()) return ::testing::AssertionFailure() << "connect " << url << ": " << c.status().to_string();
  *out = std::move(c).value();
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult Conformance::connect_pair(Pair* p) {
  auto queue = std::make_shared<AcceptQueue>();
  auto res = std::make_shared<ConnectResult>();
  if (auto r = start_listener(&p->listener, queue); !r) return r;
  if (auto r = start_connect(connect_url(*p->listener), &p->client, res); !r) return r;
  if (auto r = run_until([&] { return res->fired && !queue->conns.empty(); }, "connect + accept"); !r) return r;
  if (!res->status.ok()) return ::testing::AssertionFailure() << "connect failed: " << res->status.to_string();
  // auto:// that fell back leaves an abandoned rdma connection accepted first: the server end
  // is the one on the transport the client ended up on.
  const std::string want(p->client->caps().transport);
  auto matches = [&] {
    while (!queue->conns.empty() && queue->conns.front()->caps().transport != want) queue->conns.pop_front();
    return !queue->conns.empty();
  };
  if (auto r = run_until(matches, "accept on the client's transport"); !r)
    return r << " (client on " << want << ")";
  p->server = std::move(queue->conns.front());
  queue->conns.pop_front();
  if (p->client->state() != ConnState::kConnected || p->server->state() != ConnState::kConnected)
    return ::testing::AssertionFailure() << "not connected: client " << p->client->describe() << ", server "
                                         << p->server->describe();
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult Conformance::warm_up() {
  {
    Pair p;
    if (auto r = connect_pair(&p); !r) return r;
    p.client->close();
    p.server->close();
  }
  return settle();
}

::testing::AssertionResult Conformance::settle() {
  run_for(20ms);
  return run_until([&] {
    const auto st = transport::rdma::reaper_stats(*loop_);
    return st.closers == 0 && st.outstanding == 0;
  }, "the teardown of closed connections (graceful closes, QP destroys) to finish", std::chrono::milliseconds(20000));
}

}  // namespace conduit::conformance
