// twohost_stream: byte-for-byte checked streams over any Conduit URL, for the fault tests
// (tests/twohost).  One process serves or sends; all its connections run on one event
// loop, so a server with a remote and a local client shows whether one connection's
// failure touches the other.
//
//   twohost_stream serve URL [--exit-after N] [--timeout S]
//   twohost_stream send URL [URL...] [--bytes N] [--seed S] [--rate BYTES/S] [--idle]
//                       [--stagger S] [--timeout S]
//
// Wire: the client sends a 24-byte header (magic "CDTH", flags, seed, total) and then
// `total` bytes of a xorshift64* stream seeded with `seed`; the server regenerates the
// stream and compares every byte as it arrives, then answers with a 24-byte trailer
// (magic "CDTR", bytes, FNV-1a 64 of the data), which the client checks against its own.
// --idle sends the header only (total 0) and then nothing: the connection stays open until
// it fails or --timeout passes (a dead peer that sends nothing).
//
// Output, one line per event on stdout (flushed), key=value, for the scenario scripts:
//   listening url=... pid=N
//   connected id=N role=client|server transport=rdma extensions=... peer=... connect_ms=N
//   progress id=N bytes=N                      (once a second while bytes move)
//   done id=N role=... result=ok|error bytes=N seconds=S mb_s=X stall_ms=M error="..."
// stall_ms = time from the connection's last progress (bytes read or accepted for
// writing) to the end: for a connection that failed, how long the failure took to be seen.
// max_gap_ms = the longest time without progress while it ran (a fault it survived).
// Exit status: send: 0 when every connection ended ok (or, with --idle, stayed up until
// the timeout); 1 otherwise; 2 bad usage.  serve: 0 after --exit-after connections ended
// or on SIGTERM/SIGINT; 1 if it could not listen.
#include <csignal>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "conduit/base/clock.h"
#include "conduit/reactor/event_loop.h"
#include "conduit/transport/connection.h"

using namespace conduit;
using transport::Connection;

namespace {

constexpr uint32_t kHeaderMagic = 0x48544443;   // "CDTH"
constexpr uint32_t kTrailerMagic = 0x52544443;  // "CDTR"
constexpr uint32_t kFlagIdle = 1;
constexpr size_t kWireBytes = 24;
constexpr uint64_t kMs = 1'000'000;

volatile sig_atomic_t g_stop = 0;
void on_signal(int) { g_stop = 1; }

void put64(uint8_t* p, uint64_t v) { std::memcpy(p, &v, 8); }
void put32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }
uint64_t get64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
uint32_t get32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// The data stream: xorshift64*, 8 bytes per step, handed out in any chunking.
class Generator {
 public:
  explicit Generator(uint64_t seed) : state_(seed * 0x9E3779B97F4A7C15ull + 1) {}
  void fill(uint8_t* dst, size_t n) {
    while (n > 0) {
      if (left_ == 0) {
        state_ ^= state_ >> 12;
        state_ ^= state_ << 25;
        state_ ^= state_ >> 27;
        put64(word_, state_ * 0x2545F4914F6CDD1Dull);
        left_ = 8;
      }
      const size_t k = std::min<size_t>(left_, n);
      std::memcpy(dst, word_ + (8 - left_), k);
      dst += k;
      n -= k;
      left_ -= k;
    }
  }

 private:
  uint64_t state_;
  uint8_t word_[8] = {};
  size_t left_ = 0;
};

struct Fnv {
  uint64_t h = 0xcbf29ce484222325ull;
  void add(const uint8_t* p, size_t n) {
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  }
};

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) out += (c == '"' || c == '\n') ? '\'' : c;
  return out + "\"";
}

// One checked stream, either side.  Owned by the Program; reports through print().
class Stream {
 public:
  enum class Role { kClient, kServer };
  Stream(int id, Role role, reactor::EventLoop& loop) : id_(id), role_(role), loop_(loop) {}
  ~Stream() {
    if (conn_) {
      conn_->close();
      loop_.destroy_later(std::move(conn_));
    }
  }

  bool ended() const { return ended_; }
  bool ok() const { return ok_; }
  void set_connection(std::unique_ptr<Connection> c) { conn_ = std::move(c); }
  Connection* connection() { return conn_.get(); }

  // Client: what to send.
  void configure(uint64_t seed, uint64_t total, bool idle, uint64_t rate) {
    seed_ = seed;
    total_ = idle ? 0 : total;
    idle_ = idle;
    rate_ = rate;
    gen_ = std::make_unique<Generator>(seed);
  }

  void set_connect_start(uint64_t ns) { connect_start_ns_ = ns; }

  void on_established() {
    start_ns_ = last_progress_ns_ = last_report_ns_ = monotonic_ns();
    const auto caps = conn_->caps();
    std::printf("connected id=%d role=%s transport=%.*s extensions=%.*s peer=%s connect_ms=%" PRIu64 "\n", id_,
                role_name(), static_cast<int>(caps.transport.size()), caps.transport.data(),
                static_cast<int>(caps.extensions.size()), caps.extensions.data(), conn_->peer_address().c_str(),
                connect_start_ns_ != 0 ? (start_ns_ - connect_start_ns_) / kMs : 0);
    std::fflush(stdout);
    conn_->set_read_handler([this](Connection&) { on_readable(); });
    if (role_ == Role::kClient) {
      put32(out_hdr_, kHeaderMagic);
      put32(out_hdr_ + 4, idle_ ? kFlagIdle : 0);
      put64(out_hdr_ + 8, seed_);
      put64(out_hdr_ + 16, total_);
      conn_->set_write_handler([this](Connection&) { on_writable(); });
    }
  }

  // Every loop iteration: a progress line once a second; the --rate budget refills here.
  void tick() {
    if (ended_ || start_ns_ == 0) return;
    const uint64_t now = monotonic_ns();
    const uint64_t bytes = role_ == Role::kClient ? sent_ : received_;
    if (now - last_report_ns_ >= 1000 * kMs && bytes != reported_) {
      std::printf("progress id=%d bytes=%" PRIu64 "\n", id_, bytes);
      std::fflush(stdout);
      reported_ = bytes;
      last_report_ns_ = now;
    }
    if (role_ == Role::kClient && rate_ != 0 && !writing_ && sent_ < total_) {
      writing_ = true;
      conn_->set_write_handler([this](Connection&) { on_writable(); });
    }
  }

  void fail(const Status& s) { end(false, s.to_string()); }

 private:
  const char* role_name() const { return role_ == Role::kClient ? "client" : "server"; }

  void progress() {
    const uint64_t now = monotonic_ns();
    max_gap_ns_ = std::max(max_gap_ns_, now - last_progress_ns_);
    last_progress_ns_ = now;
  }

  void on_writable() {
    if (ended_) return;
    writing_ = true;
    while (hdr_sent_ < kWireBytes) {
      auto r = conn_->write({out_hdr_ + hdr_sent_, kWireBytes - hdr_sent_});
      if (!r.ok()) return write_error(r.status());
      hdr_sent_ += *r;
      progress();
    }
    for (int batch = 0; batch < 16 && sent_ < total_; ++batch) {
      uint64_t allowed = total_ - sent_;
      if (rate_ != 0) {
        const double secs = static_cast<double>(monotonic_ns() - start_ns_) / 1e9;
        const uint64_t budget = static_cast<uint64_t>(secs * static_cast<double>(rate_)) + 64 * 1024;
        if (budget <= sent_) {
          writing_ = false;
          conn_->set_write_handler(nullptr);  // tick() re-installs it
          return;
        }
        allowed = std::min(allowed, budget - sent_);
      }
      if (pending_.empty()) {
        pending_.resize(static_cast<size_t>(std::min<uint64_t>(allowed, 64 * 1024)));
        pending_off_ = 0;
        gen_->fill(pending_.data(), pending_.size());
        hash_.add(pending_.data(), pending_.size());
      }
      auto r = conn_->write({pending_.data() + pending_off_, pending_.size() - pending_off_});
      if (!r.ok()) return write_error(r.status());
      pending_off_ += *r;
      sent_ += *r;
      progress();
      if (pending_off_ == pending_.size()) pending_.clear();
    }
    if (sent_ >= total_) {
      writing_ = false;
      conn_->set_write_handler(nullptr);
    }
  }

  void write_error(const Status& s) {
    if (s.would_block()) return;
    fail(s);
  }

  void on_readable() {
    for (int batch = 0; batch < 16 && !ended_; ++batch) {
      uint8_t buf[64 * 1024];
      auto r = conn_->read({buf, sizeof buf});
      if (!r.ok()) {
        if (!r.status().would_block()) fail(r.status());
        return;
      }
      if (*r == 0) return on_eof();
      progress();
      if (role_ == Role::kServer)
        server_input(buf, *r);
      else
        client_input(buf, *r);
    }
  }

  void on_eof() {
    if (role_ == Role::kServer && header_done_ && (idle_ || (received_ == total_ && trailer_sent_)))
      return end(true, "");
    if (role_ == Role::kClient)
      return end(false, "the server closed the connection before its trailer (" + std::to_string(sent_) + " of " +
                            std::to_string(total_) + " bytes sent)");
    end(false, "the client closed the connection early (" + std::to_string(received_) + " of " +
                   std::to_string(total_) + " bytes received)");
  }

  void server_input(const uint8_t* p, size_t n) {
    while (n > 0 && !header_done_) {
      const size_t k = std::min(n, kWireBytes - hdr_got_);
      std::memcpy(in_hdr_ + hdr_got_, p, k);
      hdr_got_ += k;
      p += k;
      n -= k;
      if (hdr_got_ < kWireBytes) return;
      if (get32(in_hdr_) != kHeaderMagic) return end(false, "bad header magic (not a twohost_stream client?)");
      idle_ = (get32(in_hdr_ + 4) & kFlagIdle) != 0;
      seed_ = get64(in_hdr_ + 8);
      total_ = get64(in_hdr_ + 16);
      gen_ = std::make_unique<Generator>(seed_);
      header_done_ = true;
    }
    if (n == 0) return maybe_send_trailer();
    if (received_ + n > total_) return end(false, "more data than announced");
    expect_.resize(n);
    gen_->fill(expect_.data(), n);
    if (std::memcmp(expect_.data(), p, n) != 0) {
      size_t i = 0;
      while (expect_[i] == p[i]) ++i;
      char what[160];
      std::snprintf(what, sizeof what, "data mismatch at byte %" PRIu64 ": expected 0x%02x, got 0x%02x",
                    received_ + i, expect_[i], p[i]);
      return end(false, what);
    }
    hash_.add(p, n);
    received_ += n;
    maybe_send_trailer();
  }

  void maybe_send_trailer() {
    if (idle_ || received_ != total_ || trailer_sent_) return;
    uint8_t t[kWireBytes];
    put32(t, kTrailerMagic);
    put32(t + 4, 0);
    put64(t + 8, received_);
    put64(t + 16, hash_.h);
    // 24 bytes into an idle connection's send buffer: accepted at once by every transport.
    auto r = conn_->write({t, sizeof t});
    if (!r.ok() || *r != sizeof t) return end(false, r.ok() ? "short trailer write" : r.status().to_string());
    trailer_sent_ = true;
  }

  void client_input(const uint8_t* p, size_t n) {
    const size_t k = std::min(n, kWireBytes - trailer_got_);
    std::memcpy(trailer_ + trailer_got_, p, k);
    trailer_got_ += k;
    if (n > k) return end(false, "bytes after the trailer");
    if (trailer_got_ < kWireBytes) return;
    if (get32(trailer_) != kTrailerMagic) return end(false, "bad trailer magic");
    if (get64(trailer_ + 8) != total_ || sent_ != total_)
      return end(false, "server counted " + std::to_string(get64(trailer_ + 8)) + " bytes, we sent " +
                            std::to_string(sent_));
    if (get64(trailer_ + 16) != hash_.h) return end(false, "checksum differs from the server's");
    end(true, "");
  }

 public:
  // Client with --idle: the timeout passed with the connection still up.
  void idle_done() { end(true, ""); }

  void end(bool ok, const std::string& error) {
    if (ended_) return;
    ended_ = true;
    ok_ = ok;
    const uint64_t now = monotonic_ns();
    const double secs = start_ns_ != 0 ? static_cast<double>(now - start_ns_) / 1e9 : 0.0;
    const uint64_t bytes = role_ == Role::kClient ? sent_ : received_;
    const uint64_t stall_ms = last_progress_ns_ != 0 ? (now - last_progress_ns_) / kMs : 0;
    const std::string ext = conn_ ? std::string(conn_->caps().extensions) : std::string();
    std::printf("done id=%d role=%s result=%s bytes=%" PRIu64 " seconds=%.3f mb_s=%.2f stall_ms=%" PRIu64
                " max_gap_ms=%" PRIu64 " hash=%016" PRIx64 " extensions=%s%s%s\n",
                id_, role_name(), ok ? "ok" : "error", bytes, secs,
                secs > 0 ? static_cast<double>(bytes) / secs / 1048576.0 : 0.0, stall_ms, max_gap_ns_ / kMs, hash_.h, ext.c_str(),
                error.empty() ? "" : " error=", error.empty() ? "" : quoted(error).c_str());
    std::fflush(stdout);
    if (conn_) {
      conn_->set_read_handler(nullptr);
      conn_->set_write_handler(nullptr);
      // A clean end: let the last bytes (the trailer) go out before the close.
      if (ok) (void)conn_->shutdown_write();
      conn_->close();
    }
  }

 private:
  int id_;
  Role role_;
  reactor::EventLoop& loop_;
  std::unique_ptr<Connection> conn_;
  std::unique_ptr<Generator> gen_;
  Fnv hash_;
  uint64_t seed_ = 0, total_ = 0, rate_ = 0;
  bool idle_ = false;
  uint64_t sent_ = 0, received_ = 0, reported_ = 0;
  uint64_t start_ns_ = 0, last_progress_ns_ = 0, last_report_ns_ = 0, connect_start_ns_ = 0, max_gap_ns_ = 0;
  uint8_t out_hdr_[kWireBytes] = {}, in_hdr_[kWireBytes] = {}, trailer_[kWireBytes] = {};
  size_t hdr_sent_ = 0, hdr_got_ = 0, trailer_got_ = 0;
  bool header_done_ = false, trailer_sent_ = false, writing_ = true;
  std::vector<uint8_t> pending_, expect_;
  size_t pending_off_ = 0;
  bool ended_ = false, ok_ = false;
};

struct Args {
  std::vector<std::string> urls;
  uint64_t bytes = 16u << 20;
  uint64_t seed = 1;
  uint64_t rate = 0;
  bool idle = false;
  double timeout_s = 120;
  double stagger_s = 0;
  int exit_after = 0;
};

template <typename Pred>
void drive(reactor::EventLoop& loop, Pred done, double seconds, const std::vector<std::unique_ptr<Stream>>& streams) {
  const uint64_t deadline = monotonic_ns() + static_cast<uint64_t>(seconds * 1e9);
  while (!done() && !g_stop && monotonic_ns() < deadline) {
    // At most 20 ms asleep: tick() refills the --rate budget.
    if (Status s = loop.run_once(20); !s.ok()) {
      std::fprintf(stderr, "twohost_stream: event loop: %s\n", s.to_string().c_str());
      return;
    }
    for (auto& st : streams) st->tick();
  }
}

int run_send(const Args& a) {
  auto loop = reactor::EventLoop::create().value();
  std::vector<std::unique_ptr<Stream>> streams;
  const uint64_t t0 = monotonic_ns();
  size_t started = 0;
  bool ok = true;
  // Connects stream i at t0 + i * stagger (all at once without --stagger).
  auto start_due = [&] {
    while (started < a.urls.size() &&
           monotonic_ns() >= t0 + static_cast<uint64_t>(static_cast<double>(started) * a.stagger_s * 1e9)) {
      const int id = static_cast<int>(++started);
      auto st = std::make_unique<Stream>(id, Stream::Role::kClient, *loop);
      st->configure(a.seed + static_cast<uint64_t>(id), a.bytes, a.idle, a.rate);
      st->set_connect_start(monotonic_ns());
      Stream* raw = st.get();
      auto c = transport::connect(*loop, a.urls[started - 1], [raw](Connection&, Status s) {
        if (s.ok())
          raw->on_established();
        else
          raw->fail(s);
      });
      if (!c.ok()) {
        std::printf("done id=%d role=client result=error bytes=0 seconds=0 mb_s=0 stall_ms=0 error=%s\n", id,
                    quoted(c.status().to_string()).c_str());
        std::fflush(stdout);
        ok = false;
        continue;
      }
      st->set_connection(std::move(c).value());
      streams.push_back(std::move(st));
    }
  };
  auto all_ended = [&] {
    start_due();
    if (started < a.urls.size()) return false;
    for (auto& s : streams)
      if (!s->ended()) return false;
    return true;
  };
  drive(*loop, all_ended, a.timeout_s, streams);
  for (auto& s : streams) {
    if (s->ended()) continue;
    if (a.idle)
      s->idle_done();
    else
      s->fail(Status(Code::kTimedOut, "not finished within --timeout"));
  }
  for (auto& s : streams) ok = ok && s->ok();
  ok = ok && started == a.urls.size();
  streams.clear();
  (void)loop->run_once(0);
  return ok ? 0 : 1;
}

int run_serve(const Args& a) {
  auto loop = reactor::EventLoop::create().value();
  std::vector<std::unique_ptr<Stream>> streams;
  int ended = 0;
  auto listener = transport::listen(*loop, a.urls[0], [&](std::unique_ptr<Connection> c) {
    auto st = std::make_unique<Stream>(static_cast<int>(streams.size()) + 1, Stream::Role::kServer, *loop);
    st->set_connection(std::move(c));
    st->on_established();
    streams.push_back(std::move(st));
  });
  if (!listener.ok()) {
    std::fprintf(stderr, "twohost_stream: listen %s: %s\n", a.urls[0].c_str(), listener.status().to_string().c_str());
    return 1;
  }
  std::printf("listening url=%s pid=%d\n", (*listener)->url().c_str(), static_cast<int>(getpid()));
  std::fflush(stdout);
  auto enough = [&] {
    ended = 0;
    for (auto& s : streams) ended += s->ended() ? 1 : 0;
    return a.exit_after > 0 && ended >= a.exit_after;
  };
  drive(*loop, enough, a.timeout_s, streams);
  int ok = 0;
  ended = 0;
  for (auto& s : streams) {
    ok += s->ended() && s->ok() ? 1 : 0;
    ended += s->ended() ? 1 : 0;
  }
  std::printf("server connections=%zu ok=%d errors=%d open=%zu\n", streams.size(), ok, ended - ok,
              streams.size() - static_cast<size_t>(ended));
  std::fflush(stdout);
  streams.clear();
  (*listener)->close();
  (void)loop->run_once(0);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"twohost_stream: byte-for-byte checked streams over a Conduit URL (fault tests)"};
  app.require_subcommand(1, 1);
  Args a;
  auto* serve = app.add_subcommand("serve", "listen on URL; check every stream that arrives");
  serve->add_option("url", a.urls, "URL to listen on")->required()->expected(1);
  serve->add_option("--exit-after", a.exit_after, "exit after this many connections ended (0 = until SIGTERM)");
  serve->add_option("--timeout", a.timeout_s, "exit after this many seconds at most")->capture_default_str();
  auto* send = app.add_subcommand("send", "one checked stream to each URL, all at once");
  send->add_option("urls", a.urls, "URLs to connect to")->required();
  send->add_option("--bytes", a.bytes, "bytes per stream")->capture_default_str();
  send->add_option("--seed", a.seed, "data seed (stream i uses seed + i)")->capture_default_str();
  send->add_option("--rate", a.rate, "bytes per second per stream (0 = as fast as possible)");
  send->add_flag("--idle", a.idle, "send the header only, then nothing; succeed if still up at --timeout");
  send->add_option("--timeout", a.timeout_s, "seconds for the whole run")->capture_default_str();
  send->add_option("--stagger", a.stagger_s, "connect the i-th URL i * this many seconds after the first");
  CLI11_PARSE(app, argc, argv);
  std::signal(SIGTERM, on_signal);
  std::signal(SIGINT, on_signal);
  std::signal(SIGPIPE, SIG_IGN);
  return serve->parsed() ? run_serve(a) : run_send(a);
}
