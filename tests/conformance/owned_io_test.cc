// Conformance: in-place and owned-buffer I/O (reserve/commit, peek/consume, write_owned,
// read_owned) on every transport -- the same bytes, in the same order, as read/write, mixed
// freely with them, with every handed-over slice released and every held slice's space
// given back.
#include <algorithm>
#include <cstring>

#include "harness.h"

namespace conduit::conformance {
namespace {

// Writes a Pattern stream choosing per step among write(), reserve/commit and write_owned
// (pool slices when the connection has a pool, else heap slices with a release counter).
class MixedWriter {
 public:
  MixedWriter(Connection& c, const Pattern& p, uint64_t total, uint64_t seed, int modes)
      : conn_(c), pattern_(p), total_(total), rng_(seed), modes_(modes) {}
  ~MixedWriter() { conn_.set_write_handler(nullptr); }

  void start() {
    conn_.set_write_handler([this](Connection&) { pump(); });
    pump();
  }
  bool done() const { return written_ == total_ && pending_.empty(); }
  const Status& error() const { return error_; }
  uint64_t slices_made() const { return made_; }
  std::string describe() const {
    return "writer: accepted " + std::to_string(written_) + " of " + std::to_string(total_) + ", pending " +
           std::to_string(pending_.size()) + " bytes";
  }

 private:
  void pump() {
    while (error_.ok()) {
      if (!pending_.empty()) {  // an owned chain the transport took only part of
        auto n = conn_.write_owned(pending_);
        if (!n.ok()) return note(n.status());
        continue;
      }
      if (written_ == total_) break;
      const size_t chunk = std::min<uint64_t>(log_uniform(rng_, 1, 256 << 10), total_ - written_);
      const int mode = pick();
      if (mode == 0) {
        auto n = conn_.write(std::span(pattern_.at(written_), std::min(chunk, pattern_.max_span())));
        if (!n.ok()) return note(n.status());
        written_ += *n;
      } else if (mode == 1) {
        auto span = conn_.reserve(1, chunk);
        if (!span.ok()) return note(span.status());
        const size_t n = std::min(span->size(), chunk);
        std::memcpy(span->data(), pattern_.at(written_), n);
        if (Status s = conn_.commit(n); !s.ok()) return note(s);
        written_ += n;
      } else {
        memory::Chain c;
        for (size_t off = 0; off < chunk;) {
          const size_t piece = std::min<size_t>(chunk - off, log_uniform(rng_, 1, 64 << 10));
          memory::Slice s;
          if (memory::BlockPool* pool = conn_.pool()) {
            auto got = pool->allocate(piece);  // sent from where it lies
            if (!got.ok()) break;              // pool dry: send what we have
            s = std::move(*got);
          } else {
            s = memory::Slice::heap(piece);
          }
          std::memcpy(s.writable_data(), pattern_.at(written_ + off), piece);
          c.append(std::move(s));
          ++made_;
          off += piece;
        }
        if (c.empty()) return;
        written_ += c.size();
        pending_ = std::move(c);
      }
    }
    if (done()) conn_.set_write_handler(nullptr);
  }
  int pick() {
    for (;;) {
      const int m = static_cast<int>(rng_() % 3);
      if ((modes_ >> m) & 1) return m;
    }
  }
  void note(const Status& s) {
    if (!s.would_block()) error_ = s;
  }

  Connection& conn_;
  const Pattern& pattern_;
  uint64_t total_;
  std::mt19937_64 rng_;
  int modes_;
  uint64_t written_ = 0;  // bytes accepted or queued in pending_
  memory::Chain pending_;
  uint64_t made_ = 0;
  Status error_;
};

// Reads choosing per step among read(), peek/consume and read_owned (holding a few owned
// chains for a while before releasing them).
class MixedReader {
 public:
  MixedReader(Connection& c, const Pattern& p, uint64_t seed, int modes)
      : conn_(c), pattern_(p), rng_(seed), modes_(modes), buf_(128 << 10) {}
  ~MixedReader() { conn_.set_read_handler(nullptr); }
  void start() {
    conn_.set_read_handler([this](Connection&) { pump(); });
  }
  uint64_t received() const { return received_; }
  bool corrupt() const { return corrupt_; }
  bool eof() const { return eof_; }
  const Status& error() const { return error_; }
  void release_all() { held_.clear(); }
  std::string describe() const {
    size_t held = 0;
    for (const auto& c : held_) held += c.size();
    return "reader: received " + std::to_string(received_) + ", holding " + std::to_string(held_.size()) +
           " chains (" + std::to_string(held) + " bytes)";
  }

 private:
  void check(const uint8_t* d, size_t n) {
    if (!pattern_.matches(received_, d, n)) corrupt_ = true;
    received_ += n;
  }
  void pump() {
    for (int step = 0; step < 64 && error_.ok() && !eof_; ++step) {
      int m;
      do m = static_cast<int>(rng_() % 3);
      while (!((modes_ >> m) & 1));
      if (m == 0) {
        auto n = conn_.read(std::span(buf_.data(), log_uniform(rng_, 1, buf_.size())));
        if (!n.ok()) {
          if (release_on_would_block(n.status())) continue;
          return note(n.status());
        }
        if (*n == 0) eof_ = true;
        check(buf_.data(), *n);
      } else if (m == 1) {
        auto span = conn_.peek();
        if (!span.ok()) {
          if (release_on_would_block(span.status())) continue;
          return note(span.status());
        }
        if (span->empty()) {
          eof_ = true;
          break;
        }
        const size_t n = std::min(span->size(), log_uniform(rng_, 1, span->size()));
        check(span->data(), n);
        if (Status s = conn_.consume(n); !s.ok()) return note(s);
      } else {
        memory::Chain c;
        auto n = conn_.read_owned(c, log_uniform(rng_, 1, 256 << 10));
        if (!n.ok()) {
          if (release_on_would_block(n.status())) continue;
          return note(n.status());
        }
        if (*n == 0) eof_ = true;
        if (c.size() != *n) corrupt_ = true;
        for (size_t i = 0; i < c.count(); ++i) check(c.slice(i).data(), c.slice(i).size());
        held_.push_back(std::move(c));
        if (held_.size() > 3) held_.erase(held_.begin());
      }
    }
  }
  // A reader that holds slices must not wait for more data with them: the writer cannot
  // reuse ring space behind a held slice (shm, rdma), and at hold_bytes every read
  // would-blocks until a release.  So on would-block, release and try again.
  bool release_on_would_block(const Status& s) {
    if (!s.would_block() || held_.empty()) return false;
    held_.clear();
    return true;
  }
  void note(const Status& s) {
    if (!s.would_block()) error_ = s;
  }

  Connection& conn_;
  const Pattern& pattern_;
  std::mt19937_64 rng_;
  int modes_;
  std::vector<uint8_t> buf_;
  std::vector<memory::Chain> held_;
  uint64_t received_ = 0;
  bool corrupt_ = false;
  bool eof_ = false;
  Status error_;
};

void stream_mixed(Conformance* t, reactor::EventLoop& loop, Connection& a, Connection& b, int wmodes, int rmodes,
                  uint64_t total, const std::string& what) {
  Pattern pattern(test_seed() + static_cast<uint64_t>(wmodes * 7 + rmodes));
  MixedWriter w(a, pattern, total, test_seed(), wmodes);
  MixedReader r(b, pattern, test_seed() + 1, rmodes);
  r.start();
  w.start();
  ASSERT_TRUE(run_until(
      loop, [&] { return r.received() >= total || r.corrupt() || !r.error().ok() || !w.error().ok() || r.eof(); },
      default_deadline(), what))
      << w.describe() << "; " << r.describe();
  (void)t;
  ASSERT_TRUE(w.error().ok()) << what << ": " << w.error().to_string();
  ASSERT_TRUE(r.error().ok()) << what << ": " << r.error().to_string();
  ASSERT_FALSE(r.corrupt()) << what << ": bytes out of order or corrupt";
  ASSERT_EQ(r.received(), total) << what;
  ASSERT_TRUE(run_until(loop, [&] { return w.done(); }, default_deadline(), what + ": writer drained"));
  r.release_all();
}

constexpr int kWrite = 1, kReserve = 2, kOwned = 4;
constexpr int kRead = 1, kPeek = 2, kReadOwned = 4;

TEST_P(Conformance, ReserveCommitToPeekConsume) {
  Pair p;
  ASSERT_TRUE(connect_pair(&p));
  stream_mixed(this, loop(), *p.client, *p.server, kReserve, kPeek, 8 << 20, "reserve/commit -> peek/consume");
  stream_mixed(this, loop(), *p.server, *p.client, kReserve, kPeek, 8 << 20, "the other way");
}

TEST_P(Conformance, OwnedWritesToOwnedReads) {
  Pair p;
  ASSERT_TRUE(connect_pair(&p));
  stream_mixed(this, loop(), *p.client, *p.server, kOwned, kReadOwned, 8 << 20, "write_owned -> read_owned");
  stream_mixed(this, loop(), *p.server, *p.client, kOwned, kReadOwned, 8 << 20, "the other way");
}

TEST_P(Conformance, EveryWriteStyleMixesWithEveryReadStyle) {
  Pair p;
  ASSERT_TRUE(connect_pair(&p));
  stream_mixed(this, loop(), *p.client, *p.server, kWrite | kReserve | kOwned, kRead | kPeek | kReadOwned, 16 << 20,
               "all styles mixed");
}

// Level-style over peek(): a read handler that consumes one peeked byte per call and
// returns runs again for the rest, with no further writes to wake the socket (tcp stages
// peeked bytes in user space, where no fd event announces them).
TEST_P(Conformance, AHandlerThatLeavesPeekedBytesRunsAgain) {
  Pair p;
  ASSERT_TRUE(connect_pair(&p));
  std::vector<uint8_t> data(3000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7 + 1);
  size_t sent = 0;
  ASSERT_TRUE(run_until(
      [&] {
        auto n = p.client->write(std::span(data.data() + sent, data.size() - sent));
        if (n.ok()) sent += *n;
        return sent == data.size() || n.status().is_error();
      },
      "write 3000 bytes"));
  ASSERT_EQ(sent, data.size());
  std::vector<uint8_t> got;
  Status err;
  p.server->set_read_handler([&](Connection& c) {
    auto span = c.peek();
    if (!span.ok()) {
      if (!span.status().would_block()) err = span.status();
      return;
    }
    if (span->empty()) return;
    got.push_back((*span)[0]);
    if (Status s = c.consume(1); !s.ok()) err = s;
  });
  ASSERT_TRUE(run_until([&] { return got.size() == data.size() || !err.ok(); }, "one byte per handler call"))
      << "got " << got.size() << " of " << data.size();
  p.server->set_read_handler(nullptr);
  EXPECT_TRUE(err.ok()) << err.to_string();
  EXPECT_TRUE(got == data);
}

TEST_P(Conformance, HandedOverSlicesAreReleased) {
  Pair p;
  ASSERT_TRUE(connect_pair(&p));
  int released = 0;
  {
    std::vector<uint8_t> data(300000);
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 31);
    memory::Chain c;
    for (size_t off = 0; off < data.size(); off += 100000)
      c.append(memory::Slice::foreign(data.data() + off, 100000, [&released] { ++released; }));
    std::vector<uint8_t> got;
    Collector in(*p.server, [&](const uint8_t* d, size_t n) { got.insert(got.end(), d, d + n); });
    in.start();
    ASSERT_TRUE(run_until(
        [&] {
          if (!c.empty()) {
            auto n = p.client->write_owned(c);
            if (n.status().is_error()) return true;
          }
          return got.size() >= data.size();
        },
        "owned write of foreign memory"));
    EXPECT_TRUE(got == data);
    ASSERT_TRUE(run_until([&] { return released == 3; }, "every handed-over slice released"));
  }
  // An owned read of nothing yet would-blocks; EOF reads 0.
  memory::Chain out;
  auto n = p.server->read_owned(out, 100);
  EXPECT_TRUE(n.status().would_block()) << n.status().to_string();
  EXPECT_TRUE(p.server->peek().status().would_block());
  EXPECT_FALSE(p.client->reserve(0, 10).ok()) << "min must be positive";
  EXPECT_FALSE(p.server->consume(1).ok()) << "consume without peek";
}

}  // namespace
}  // namespace conduit::conformance
