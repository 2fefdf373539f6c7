// Shared machinery of the transport conformance suite: the value-parameterized fixture,
// loop driving with hard deadlines, verifiable data patterns, and small handler-driven
// readers and writers.  Everything here runs on the fixture's loop thread unless said.
//
// Rule for every test: never wait without a deadline.  run_until() fails the test when
// its deadline passes instead of hanging the run.
#pragma once

#include <sys/uio.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "conduit/reactor/event_loop.h"
#include "conduit/transport/connection.h"
#include "transport_table.h"

namespace conduit::conformance {

using namespace std::chrono_literals;
using transport::Connection;
using transport::ConnState;
using transport::Listener;

#define CONFORMANCE_ASSERT_OK(expr)                                 \
  do {                                                              \
    const ::conduit::Status conformance_s_ = (expr);                \
    ASSERT_TRUE(conformance_s_.ok()) << conformance_s_.to_string(); \
  } while (0)

// --- environment knobs --------------------------------------------------------------
// Integer from the environment (suffixes K, M, G = 2^10, 2^20, 2^30), else `fallback`.
uint64_t env_u64(const char* name, uint64_t fallback);
// The seed for this test's random choices: CONDUIT_CONFORMANCE_SEED or a fixed default,
// printed on failure so a run can be repeated.
uint64_t test_seed();
// Default deadline for one wait: CONDUIT_CONFORMANCE_TIMEOUT_S seconds (default 60).
std::chrono::milliseconds default_deadline();

// --- process resources ----------------------------------------------------------------
size_t open_fd_count();       // entries in /proc/self/fd
size_t resident_bytes();      // RSS from /proc/self/statm
bool raise_fd_limit(size_t want);  // soft RLIMIT_NOFILE up to want (hard too if privileged)

// --- deterministic data ---------------------------------------------------------------
// A pseudo-random byte stream: byte i = table[i % period].  period is not a power of two,
// so reordered, dropped or repeated spans show up as mismatches; any window of up to
// max_span() bytes is contiguous in memory (at()), so writers send straight from it.
class Pattern {
 public:
  explicit Pattern(uint64_t seed, size_t period = (1u << 20) + 4093, size_t max_span = 1u << 20);
  const uint8_t* at(uint64_t offset) const { return bytes_.data() + offset % period_; }
  size_t max_span() const { return max_span_; }
  // True when data[0..n) equals the stream at `offset` (n may exceed max_span).
  bool matches(uint64_t offset, const uint8_t* data, size_t n) const;
  // First mismatching stream offset within [offset, offset+n), for messages.
  uint64_t first_mismatch(uint64_t offset, const uint8_t* data, size_t n) const;

 private:
  size_t period_;
  size_t max_span_;
  std::vector<uint8_t> bytes_;
};

void fill_random(std::mt19937_64& rng, uint8_t* p, size_t n);
uint64_t checksum64(const uint8_t* p, size_t n);
// Log-uniform integer in [lo, hi]: small and large sizes equally represented by scale.
size_t log_uniform(std::mt19937_64& rng, size_t lo, size_t hi);

// --- driving the loop -----------------------------------------------------------------
// Runs `loop` (on the calling thread) until done() or the deadline.  Fails with `what`.
::testing::AssertionResult run_until(reactor::EventLoop& loop, const std::function<bool()>& done,
                                     std::chrono::milliseconds limit, const std::string& what);
// Runs `loop` for `d` regardless (to let events that should NOT happen, happen).
void run_for(reactor::EventLoop& loop, std::chrono::milliseconds d);

// Accepted connections, queued for the test to pick up.  Owned by a shared_ptr because the
// listener's callback may outlive the test's stack frame.
struct AcceptQueue {
  std::deque<std::unique_ptr<Connection>> conns;
  uint64_t accepted = 0;
};

// What an outbound connect reported.
struct ConnectResult {
  bool fired = false;
  int times = 0;
  Status status;
};

// --- handler-driven helpers -----------------------------------------------------------
// Queues bytes and writes them as the connection accepts them: tries immediately, installs
// the write handler while bytes are pending, uninstalls it when drained.  Must outlive
// its connection's handlers (destroy it after close(), or call detach()).
class BufferedWriter {
 public:
  explicit BufferedWriter(Connection& c) : conn_(c) {}
  ~BufferedWriter() { detach(); }
  void send(const uint8_t* p, size_t n);
  void send(std::vector<uint8_t> bytes);
  bool idle() const { return queue_.empty(); }
  const Status& error() const { return error_; }
  uint64_t written() const { return written_; }
  void detach();

 private:
  void flush();
  Connection& conn_;
  std::deque<std::vector<uint8_t>> queue_;
  size_t head_off_ = 0;
  bool handler_installed_ = false;
  uint64_t written_ = 0;
  Status error_;
};

// Reads everything into a callback, recording EOF and errors; uninstalls itself on
// EOF/error so a level-triggered end-of-stream doesn't spin the loop.
class Collector {
 public:
  using OnData = std::function<void(const uint8_t*, size_t)>;
  Collector(Connection& c, OnData on_data, size_t buf_size = 256 * 1024);
  ~Collector() { detach(); }
  void start();
  void detach();
  bool eof() const { return eof_; }
  bool failed() const { return !error_.ok(); }
  bool ended() const { return eof_ || failed(); }
  const Status& error() const { return error_; }
  uint64_t received() const { return received_; }
  uint64_t handler_calls() const { return handler_calls_; }
  // Max bytes read per handler call (0 = until would-block); tests level-triggering.
  void set_reads_per_call(size_t max_bytes) { per_call_ = max_bytes; }

 private:
  void on_readable();
  Connection& conn_;
  OnData on_data_;
  std::vector<uint8_t> buf_;
  bool installed_ = false;
  bool eof_ = false;
  Status error_;
  uint64_t received_ = 0;
  uint64_t handler_calls_ = 0;
  size_t per_call_ = 0;
};

// Streams `total` bytes of a Pattern in chunks of random size, from the write handler.
class PatternWriter {
 public:
  PatternWriter(Connection& c, const Pattern& p, uint64_t total, uint64_t seed, size_t max_chunk);
  ~PatternWriter() { detach(); }
  void start();
  void detach();
  bool done() const { return written_ == total_; }
  bool failed() const { return !error_.ok(); }
  const Status& error() const { return error_; }
  uint64_t written() const { return written_; }
  uint64_t would_blocks() const { return would_blocks_; }
  uint64_t handler_calls() const { return handler_calls_; }
  // Called once after the last byte was accepted (e.g. shutdown_write or close).
  std::function<void()> on_done;
  // Called after each accepted write; may close the connection (then return false to stop).
  std::function<bool(uint64_t written)> after_write;
  // Use writev with this many iovecs per call (0 = write()).
  void use_writev(size_t max_iov) { max_iov_ = max_iov; }
  // Continue a stream whose first `offset` bytes were written by the test itself.
  void skip_to(uint64_t offset) { written_ = offset; }

 private:
  void pump();
  Connection& conn_;
  const Pattern& pattern_;
  uint64_t total_;
  std::mt19937_64 rng_;
  size_t max_chunk_;
  size_t max_iov_ = 0;
  static constexpr size_t kPiece = 4096;
  static constexpr size_t kMaxWritevBytes = 512 << 10;  // per call: bounds the scratch copying
  std::vector<uint8_t> scratch_;
  std::vector<iovec> iov_;
  bool installed_ = false;
  bool finished_ = false;
  uint64_t written_ = 0;
  uint64_t would_blocks_ = 0;
  uint64_t handler_calls_ = 0;
  Status error_;
};

// Reads a Pattern stream with random read sizes and verifies every byte.
class PatternReader {
 public:
  PatternReader(Connection& c, const Pattern& p, uint64_t seed, size_t max_read);
  ~PatternReader() { detach(); }
  void start();
  void detach();
  // Reads once outside any handler (slow-reader tests); returns bytes read, 0 if none.
  size_t read_some(size_t max);
  bool eof() const { return eof_; }
  bool failed() const { return !error_.ok(); }
  bool ended() const { return eof_ || failed(); }
  const Status& error() const { return error_; }
  uint64_t received() const { return received_; }
  bool corrupt() const { return corrupt_; }
  uint64_t corrupt_at() const { return corrupt_at_; }

 private:
  void on_readable();
  bool read_once(size_t want);
  Connection& conn_;
  const Pattern& pattern_;
  std::mt19937_64 rng_;
  size_t max_read_;
  std::vector<uint8_t> buf_;
  bool installed_ = false;
  bool eof_ = false;
  bool corrupt_ = false;
  uint64_t corrupt_at_ = 0;
  uint64_t received_ = 0;
  Status error_;
};

// --- peer processes (process_test.cc) ----------------------------------------------------
// main() hands over to child_main when is_child_invocation(): a test's peer process is a
// fresh exec of this binary, not a bare fork (see process_test.cc for why).
bool is_child_invocation(int argc, char** argv);
int child_main(int argc, char** argv);

// --- the fixture ----------------------------------------------------------------------
class Conformance : public ::testing::TestWithParam<TransportCase> {
 protected:
  void SetUp() override;
  void TearDown() override;

  const TransportCase& tc() const { return GetParam(); }
  reactor::EventLoop& loop() { return *loop_; }

  // A fresh listen URL (the test is skipped in SetUp when there is none).
  std::string listen_url() const;
  // The URL a client uses for `listener`: its url() plus the row's connect options.
  std::string connect_url(const Listener& listener) const;

  // Starts a listener on `loop` (default: the fixture's) feeding `queue`.
  ::testing::AssertionResult start_listener(std::unique_ptr<Listener>* out, std::shared_ptr<AcceptQueue> queue,
                                            reactor::EventLoop* on = nullptr);
  // Starts a connect on `loop` recording into `result`.
  ::testing::AssertionResult start_connect(const std::string& url, std::unique_ptr<Connection>* out,
                                           std::shared_ptr<ConnectResult> result, reactor::EventLoop* on = nullptr);

  // A connected client/server pair on the fixture's loop.
  struct Pair {
    std::unique_ptr<Listener> listener;
    std::unique_ptr<Connection> client;
    std::unique_ptr<Connection> server;
  };
  ::testing::AssertionResult connect_pair(Pair* p);
  // One connection made and closed, so that state a transport's libraries keep for the
  // whole process (librdmacm opens each device once and keeps it) exists before a test
  // counts descriptors: the count then measures what connections leave behind.
  ::testing::AssertionResult warm_up();
  // Runs the loop until the teardown of closed connections that goes on after close() is
  // done (rdma: lingering closes, QPs destroyed off the loop), so that descriptor counts
  // taken after it compare like with like.  Bounded (20 s).
  ::testing::AssertionResult settle();

  ::testing::AssertionResult run_until(const std::function<bool()>& done, const std::string& what,
                                       std::chrono::milliseconds limit = default_deadline()) {
    return conformance::run_until(*loop_, done, limit, what);
  }
  void run_for(std::chrono::milliseconds d) { conformance::run_for(*loop_, d); }

  std::string listen_url_;  // computed in SetUp (the row may have none here)
  std::unique_ptr<reactor::EventLoop> loop_;
};

}  // namespace conduit::conformance
