#include "session.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "conduit/base/clock.h"
#include "conduit/memory/buffer.h"
#include "conduit/memory/pool.h"
#include "protocol.h"
#include "touch.h"

namespace conduit::bench {

using transport::Connection;
using transport::ConnState;

namespace {
// --inplace: the client asks for at least this much (or the rest of the message) per
// reserve(), so that a nearly full ring is not filled in slivers.  The most it takes per
// reserve()/commit() is --inplace-chunk, so that the server can start on a large message
// before it is complete.
constexpr size_t kInPlaceMin = 4096;
}  // namespace

std::atomic<uint64_t>& server_wakeups() {
  static std::atomic<uint64_t> n{0};
  return n;
}

// =======================================================================================
// Server side: one ServerSession per accepted connection.

class ServerSession {
 public:
  using OnEnd = std::function<void(ServerSession*, Status)>;
  ServerSession(std::unique_ptr<Connection> c, uint64_t* activity, OnEnd on_end)
      : conn_(std::move(c)), activity_(activity), on_end_(std::move(on_end)) {}
  ~ServerSession() {
    if (conn_) conn_->close();
  }

  void start() { resume_reading(); }
  void abort(Status s) { end(std::move(s)); }
  std::string describe() const { return conn_->describe(); }

 private:
  enum class State { kHeader, kPing, kStream };

  void resume_reading() {
    conn_->set_read_handler([this](Connection&) { on_readable(); });
  }

  void on_readable() {
    const uint64_t w = conn_->stats().wakeups;
    server_wakeups().fetch_add(w - wakeups_seen_, std::memory_order_relaxed);
    wakeups_seen_ = w;
    // A bounded batch per call; the handler is level-style and comes back.
    for (int batch = 0; batch < 64 && !ended_; ++batch) {
      if (!out_.empty()) {  // back-pressure: no new input until our output drained
        conn_->set_read_handler(nullptr);
        return;
      }
      if (state_ == State::kStream && (stream_flags_ & kStreamInPlace) != 0) {
        if (!read_in_place()) return;
        continue;
      }
      uint8_t* dst = nullptr;
      size_t want = 0;
      switch (state_) {
        case State::kHeader: dst = hdr_ + hdr_got_; want = kHeaderBytes - hdr_got_; break;
        case State::kPing: dst = msg_.data() + msg_got_; want = size_ - msg_got_; break;
        case State::kStream: dst = scratch_.data(); want = scratch_.size(); break;
      }
      Result<size_t> r = conn_->read(std::span<uint8_t>(dst, want));
      if (!r.ok()) {
        if (!r.status().would_block()) end(r.status());
        return;
      }
      if (*r == 0) {
        const bool clean = state_ == State::kHeader && hdr_got_ == 0;
        end(clean ? Status() : Status(Code::kProtocolError, "client closed in the middle of a phase"));
        return;
      }
      ++*activity_;
      const size_t n = *r;
      switch (state_) {
        case State::kHeader:
          hdr_got_ += n;
          if (hdr_got_ == kHeaderBytes) {
            hdr_got_ = 0;
            on_header();
          }
          break;
        case State::kPing:
          msg_got_ += n;
          if (msg_got_ == size_) {
            msg_got_ = 0;
            const bool last = msg_[0] == kLastFlag;
            send(msg_.data(), size_);
            if (last) state_ = State::kHeader;
            // The client sends nothing before this echo arrives: another read() now would
            // only cost a syscall (sockperf's server does not make it either).
            return;
          }
          break;
        case State::kStream: {
          const size_t used = consume_stream(dst, n);
          if (!ended_ && state_ == State::kHeader && used != n)
            return end(Status(Code::kProtocolError, "client sent past the last message before the ack"));
          if (!ended_ && state_ == State::kHeader) send_ack();
          break;
        }
      }
    }
  }

  // One peek()/consume() step of an in-place stream phase; false when the handler should
  // return (nothing more now, or the session ended).
  bool read_in_place() {
    Result<std::span<const uint8_t>> r = conn_->peek();
    if (!r.ok()) {
      if (!r.status().would_block()) end(r.status());
      return false;
    }
    if (r->empty()) {
      end(Status(Code::kProtocolError, "client closed in the middle of a phase"));
      return false;
    }
    ++*activity_;
    const size_t used = consume_stream(r->data(), r->size());
    if (ended_) return false;
    if (Status st = conn_->consume(used); !st.ok()) {
      end(st);
      return false;
    }
    if (state_ == State::kHeader) {
      if (used != r->size()) {
        end(Status(Code::kProtocolError, "client sent past the last message before the ack"));
        return false;
      }
      send_ack();
    }
    return true;
  }

  void on_header() {
    const std::optional<Header> h = decode(hdr_);
    if (!h) return end(Status(Code::kProtocolError, "bad header (not a conduit-bench client?)"));
    switch (h->op) {
      case Op::kHello: {
        if (h->size < 1 || h->size > kMaxMessage) return end(Status(Code::kProtocolError, "bad hello size"));
        max_ = h->size;
        msg_.assign(max_, 0);
        scratch_.assign(std::clamp<size_t>(max_, 256u << 10, 4u << 20), 0);
        uint8_t reply[kHeaderBytes];
        encode(Header{Op::kHello, max_, 0}, reply);
        send(reply, sizeof reply);
        return;
      }
      case Op::kPingPong:
      case Op::kStream:
        if (max_ == 0 || h->size < 1 || h->size > max_)
          return end(Status(Code::kProtocolError, "phase before hello or larger than announced"));
        size_ = h->size;
        msg_got_ = 0;
        msg_off_ = 0;
        phase_bytes_ = 0;
        stream_flags_ = h->op == Op::kStream ? h->flags : 0;
        msg_index_ = 0;
        cksum_.reset();
        state_ = h->op == Op::kPingPong ? State::kPing : State::kStream;
        return;
      case Op::kBye:
        return end(Status());
      default:
        return end(Status(Code::kProtocolError, "unexpected op from client"));
    }
  }

  // Takes the bytes of the current stream phase from p (checksumming them with --touch);
  // returns how many it used: all of them, or up to the end of the phase's last message
  // (then state_ is kHeader and the caller acknowledges).  May end() the session.
  size_t consume_stream(const uint8_t* p, size_t n) {
    const bool touch = (stream_flags_ & kStreamTouch) != 0;
    size_t i = 0;
    while (i < n) {
      if (msg_off_ == 0) cur_flag_ = p[i];
      const size_t k = std::min<size_t>(size_ - msg_off_, n - i);
      if (touch) cksum_.add(p + i, k);
      i += k;
      msg_off_ += k;
      phase_bytes_ += k;
      if (msg_off_ < size_) continue;
      msg_off_ = 0;
      if (touch) {
        if (cksum_.value() != expected_checksum(size_, fill_value(msg_index_), cur_flag_)) {
          end(Status(Code::kProtocolError, "message " + std::to_string(msg_index_) + " of the stream phase has a wrong checksum"));
          return i;
        }
        cksum_.reset();
      }
      ++msg_index_;
      if (cur_flag_ != kLastFlag) continue;
      state_ = State::kHeader;
      return i;
    }
    return i;
  }

  void send_ack() {
    uint8_t ack[kHeaderBytes];
    encode(Header{Op::kStreamAck, size_, phase_bytes_}, ack);
    send(ack, sizeof ack);
  }

  void send(const uint8_t* p, size_t n) {
    if (out_.empty()) {
      Result<size_t> r = conn_->write(std::span<const uint8_t>(p, n));
      if (!r.ok() && !r.status().would_block()) return end(r.status());
      const size_t done = r.ok() ? *r : 0;
      if (done == n) return;
      p += done;
      n -= done;
    }
    out_.insert(out_.end(), p, p + n);
    conn_->set_write_handler([this](Connection&) { flush(); });
  }

  void flush() {
    while (out_off_ < out_.size()) {
      Result<size_t> r = conn_->write(std::span<const uint8_t>(out_.data() + out_off_, out_.size() - out_off_));
      if (!r.ok()) {
        if (!r.status().would_block()) end(r.status());
        return;
      }
      out_off_ += *r;
      ++*activity_;
    }
    out_.clear();
    out_off_ = 0;
    conn_->set_write_handler(nullptr);
    resume_reading();
  }

  void end(Status s) {
    if (ended_) return;
    ended_ = true;
    conn_->set_read_handler(nullptr);
    conn_->set_write_handler(nullptr);
    conn_->close();
    on_end_(this, std::move(s));  // may hand us to destroy_later: touch nothing after
  }

  std::unique_ptr<Connection> conn_;
  uint64_t* activity_;
  OnEnd on_end_;
  bool ended_ = false;
  uint64_t wakeups_seen_ = 0;
  State state_ = State::kHeader;
  uint8_t hdr_[kHeaderBytes] = {};
  size_t hdr_got_ = 0;
  uint32_t max_ = 0;
  uint32_t size_ = 0;
  std::vector<uint8_t> msg_, scratch_, out_;
  size_t out_off_ = 0;
  size_t msg_got_ = 0;
  size_t msg_off_ = 0;
  uint8_t cur_flag_ = 0;
  uint64_t phase_bytes_ = 0;
  uint16_t stream_flags_ = 0;
  uint64_t msg_index_ = 0;
  Checksum cksum_;
};

Result<std::unique_ptr<Server>> Server::listen(reactor::EventLoop& loop, const std::string& url, uint32_t sessions,
                                               bool log_clients) {
  std::unique_ptr<Server> s(new Server(loop, sessions));
  s->log_clients_ = log_clients;
  Server* raw = s.get();
  auto l = transport::listen(loop, url, [raw](std::unique_ptr<Connection> c) { raw->on_accept(std::move(c)); });
  if (!l.ok()) return l.status().annotate("listen " + url);
  s->listener_ = std::move(l).value();
  return s;
}

Server::Server(reactor::EventLoop& loop, uint32_t sessions) : loop_(loop), sessions_(sessions) {}

Server::~Server() {
  for (auto& s : active_) s.reset();
  if (listener_) listener_->close();
}

void Server::on_accept(std::unique_ptr<Connection> c) {
  if (log_clients_) std::fprintf(stderr, "conduit-bench: client %s\n", c->describe().c_str());
  auto s = std::make_unique<ServerSession>(std::move(c), &activity_, [this](ServerSession* done, Status st) {
    ++ended_;
    if (!st.ok()) {
      std::fprintf(stderr, "conduit-bench: session ended: %s\n", st.to_string().c_str());
      if (first_error_.ok()) first_error_ = st;
    }
    for (auto it = active_.begin(); it != active_.end(); ++it)
      if (it->get() == done) {
        loop_.destroy_later(std::move(*it));
        active_.erase(it);
        break;
      }
  });
  ServerSession* raw = s.get();
  active_.push_back(std::move(s));
  raw->start();
}

void Server::request_stop() {
  stop_.store(true);
  loop_.wake();
}

Status Server::serve(double wait_for_client_s, double silence_s) {
  uint64_t seen = activity_;
  uint64_t quiet_since = monotonic_ns();
  while (ended_ < sessions_) {
    if (stop_.load()) return Status(Code::kCancelled, "server stopped");
    if (Status st = loop_.run_once(100); !st.ok()) return st;
    const uint64_t now = monotonic_ns();
    if (activity_ != seen || active_.size() != last_active_) {
      seen = activity_;
      last_active_ = active_.size();
      quiet_since = now;
      continue;
    }
    const double quiet = static_cast<double>(now - quiet_since) / 1e9;
    if (active_.empty() && quiet > wait_for_client_s)
      return Status(Code::kTimedOut, "no client within " + std::to_string(static_cast<int>(wait_for_client_s)) + " s");
    if (!active_.empty() && quiet > silence_s) {
      std::vector<ServerSession*> silent;
      for (auto& s : active_) silent.push_back(s.get());
      for (ServerSession* s : silent) s->abort(Status(Code::kTimedOut, "client silent"));
    }
  }
  loop_.run_once(0).ok();  // let destroy_later run
  return first_error_;
}

// =======================================================================================
// Progress

void Progress::update(const char* phase, uint32_t size, double elapsed_s, double total_s, uint64_t count,
                      uint64_t count_target, const char* unit) {
  if (!enabled_) return;
  const uint64_t now = monotonic_ns();
  if (now - last_ns_ < 500'000'000ull) return;
  last_ns_ = now;
  if (count_target > 0)
    std::fprintf(stderr, "\r\033[K%s %u B: %.1f s, %llu/%llu %s", phase, size, elapsed_s,
                 static_cast<unsigned long long>(count), static_cast<unsigned long long>(count_target), unit);
  else
    std::fprintf(stderr, "\r\033[K%s %u B: %.1f/%.1f s, %llu %s", phase, size, elapsed_s, total_s,
                 static_cast<unsigned long long>(count), unit);
  shown_ = true;
}

void Progress::clear() {
  if (!shown_) return;
  std::fprintf(stderr, "\r\033[K");
  shown_ = false;
}

// =======================================================================================
// Client

Client::Client(reactor::EventLoop& loop, const Options& opts) : loop_(loop), opts_(opts), progress_(opts.progress) {}

Client::~Client() {
  progress_.clear();
  if (conn_) conn_->close();
}

Status Client::drive(const std::function<bool()>& done, const char* what) {
  uint64_t seen = activity_;
  uint64_t quiet_since = monotonic_ns();
  const auto limit = static_cast<uint64_t>(opts_.timeout_s * 1e9);
  while (!done()) {
    if (!failure_.ok()) return failure_;
    if (Status st = loop_.run_once(100); !st.ok()) return st;
    if (activity_ != seen) {
      seen = activity_;
      quiet_since = monotonic_ns();
      if (on_progress_) on_progress_();
    } else if (monotonic_ns() - quiet_since > limit) {
      return Status(Code::kTimedOut, std::string("peer silent for ") + std::to_string(opts_.timeout_s) +
                                         " s while waiting for " + what);
    }
  }
  return failure_;
}

void Client::send_control(const uint8_t* p, size_t n) {
  if (pending_off_ == pending_.size()) {
    pending_.clear();
    pending_off_ = 0;
    Result<size_t> r = conn_->write(std::span<const uint8_t>(p, n));
    if (!r.ok() && !r.status().would_block()) {
      failure_ = r.status();
      return;
    }
    const size_t done = r.ok() ? *r : 0;
    p += done;
    n -= done;
    if (n == 0) return;
  }
  pending_.insert(pending_.end(), p, p + n);
  conn_->set_write_handler([this](Connection&) {
    if (flush_pending()) conn_->set_write_handler(nullptr);
  });
}

bool Client::flush_pending() {
  while (pending_off_ < pending_.size()) {
    Result<size_t> r = conn_->write(std::span<const uint8_t>(pending_.data() + pending_off_, pending_.size() - pending_off_));
    if (!r.ok()) {
      if (!r.status().would_block()) failure_ = r.status();
      return false;
    }
    pending_off_ += *r;
    ++activity_;
  }
  pending_.clear();
  pending_off_ = 0;
  return true;
}

Result<Header> Client::read_header(const char* what) {
  uint8_t buf[kHeaderBytes];
  size_t got = 0;
  conn_->set_read_handler([&](Connection&) {
    while (got < kHeaderBytes) {
      Result<size_t> r = conn_->read(std::span<uint8_t>(buf + got, kHeaderBytes - got));
      if (!r.ok()) {
        if (!r.status().would_block()) failure_ = r.status();
        return;
      }
      if (*r == 0) {
        failure_ = Status(Code::kClosed, std::string("server closed the connection while we waited for ") + what);
        return;
      }
      got += *r;
      ++activity_;
    }
  });
  Status st = drive([&] { return got == kHeaderBytes; }, what);
  conn_->set_read_handler(nullptr);
  if (!st.ok()) return st;
  std::optional<Header> h = decode(buf);
  if (!h) return Status(Code::kProtocolError, "bad header from server (not a conduit-bench server?)");
  return *h;
}

Status Client::connect(const std::string& url) {
  bool fired = false;
  Status result;
  auto c = transport::connect(loop_, url, [&](Connection&, Status s) {
    fired = true;
    result = std::move(s);
  });
  if (!c.ok()) return c.status().annotate("connect " + url);
  conn_ = std::move(c).value();
  const uint64_t deadline = monotonic_ns() + static_cast<uint64_t>(opts_.timeout_s * 1e9);
  while (!fired) {
    if (monotonic_ns() > deadline) return Status(Code::kTimedOut, "connect " + url + ": no answer");
    CONDUIT_RETURN_IF_ERROR(loop_.run_once(100));
  }
  if (!result.ok()) return result.annotate("connect " + url);
  const uint32_t max_size = *std::max_element(opts_.sizes.begin(), opts_.sizes.end());
  msg_.assign(max_size, 0);
  resp_.assign(max_size, 0);
  uint8_t hello[kHeaderBytes];
  encode(Header{Op::kHello, max_size, 0}, hello);
  send_control(hello, sizeof hello);
  CONDUIT_ASSIGN_OR_RETURN(Header h, read_header("the server's hello"));
  if (h.op != Op::kHello || h.size != max_size) return Status(Code::kProtocolError, "unexpected hello reply");
  return {};
}

Status Client::run_pingpong_phase(uint32_t size, double seconds, uint64_t iters, std::vector<double>* samples,
                                  double* elapsed_s) {
  const uint64_t t_begin = read_tsc();
  const uint64_t end_tsc = t_begin + static_cast<uint64_t>(seconds * 1e6 * Tsc::cycles_per_us());
  const uint64_t cap = std::min<uint64_t>(iters == 0 ? UINT64_MAX : iters, opts_.max_samples);
  uint64_t sent = 0, received = 0, t_send = 0;
  size_t got = 0;
  bool last_sent = false, done = false;
  uint8_t hdr[kHeaderBytes];
  encode(Header{Op::kPingPong, size, 0}, hdr);

  auto send_ping = [&] {
    const uint64_t now = read_tsc();
    last_sent = sent + 1 >= cap || now >= end_tsc;
    msg_[0] = last_sent ? kLastFlag : kMoreFlag;
    t_send = read_tsc();
    Result<size_t> r = Status(Code::kInternal, "unset");
    size_t want = size;
    if (sent == 0) {  // the phase header rides with the first message
      const iovec iov[2] = {{hdr, kHeaderBytes}, {msg_.data(), size}};
      want += kHeaderBytes;
      r = conn_->writev(std::span<const iovec>(iov, 2));
    } else {
      r = conn_->write(std::span<const uint8_t>(msg_.data(), size));
    }
    ++sent;
    if (!r.ok() && !r.status().would_block()) {
      failure_ = r.status();
      return;
    }
    const size_t wrote = r.ok() ? *r : 0;
    if (wrote < want) {  // rare (large messages): queue the rest behind the write handler
      std::vector<uint8_t> all;
      if (want > size) all.insert(all.end(), hdr, hdr + kHeaderBytes);
      all.insert(all.end(), msg_.data(), msg_.data() + size);
      send_control(all.data() + wrote, all.size() - wrote);
    }
  };

  conn_->set_read_handler([&](Connection&) {
    for (;;) {
      Result<size_t> r = conn_->read(std::span<uint8_t>(resp_.data() + got, size - got));
      if (!r.ok()) {
        if (!r.status().would_block()) failure_ = r.status();
        return;
      }
      if (*r == 0) {
        failure_ = Status(Code::kClosed, "server closed the connection during ping-pong");
        return;
      }
      got += *r;
      if (got < size) continue;
      const uint64_t t = read_tsc();
      got = 0;
      ++received;
      ++activity_;
      if (samples != nullptr) samples->push_back(Tsc::to_ns(t - t_send));
      if (last_sent) {
        done = true;
        return;
      }
      send_ping();
      return;  // the reply can't be here yet; don't spend a read() finding that out
    }
  });
  on_progress_ = [&] {
    progress_.update(samples ? "pingpong" : "pingpong warm-up", size, Tsc::to_us(read_tsc() - t_begin) / 1e6,
                     seconds, received, iters, "round trips");
  };
  send_ping();
  Status st = drive([&] { return done; }, "ping-pong replies");
  on_progress_ = nullptr;
  conn_->set_read_handler(nullptr);
  *elapsed_s = Tsc::to_us(read_tsc() - t_begin) / 1e6;
  return st;
}

Result<PingPongResult> Client::pingpong(uint32_t size) {
  double elapsed = 0;
  if (opts_.warmup_s > 0) CONDUIT_RETURN_IF_ERROR(run_pingpong_phase(size, opts_.warmup_s, 0, nullptr, &elapsed));
  std::vector<double> samples;
  samples.reserve(std::min<uint64_t>(opts_.iters > 0 ? opts_.iters : 1'000'000, opts_.max_samples));
  CONDUIT_RETURN_IF_ERROR(run_pingpong_phase(size, opts_.duration_s, opts_.iters, &samples, &elapsed));
  progress_.clear();
  return pingpong_result(size, samples, elapsed);
}

Status Client::run_stream_phase(uint32_t size, double seconds, uint64_t iters, uint64_t* messages, uint64_t* bytes,
                                double* elapsed_s) {
  uint8_t hdr[kHeaderBytes];
  const uint16_t flags =
      static_cast<uint16_t>((opts_.touch ? kStreamTouch : 0) | (opts_.inplace || opts_.peek ? kStreamInPlace : 0));
  encode(Header{Op::kStream, size, 0, flags}, hdr);
  const uint64_t t_begin = read_tsc();
  const uint64_t end_tsc = t_begin + static_cast<uint64_t>(seconds * 1e6 * Tsc::cycles_per_us());
  uint64_t sent_msgs = 0, sent_bytes = 0;
  size_t off = 0;
  bool cur_last = false, finished = false;
  uint8_t value = 0;
  memory::Chain owned;  // --owned: the message being handed over

  auto pump = [&] {
    if (!flush_pending()) return;  // the phase header first
    for (int batch = 0; batch < 4096 && !finished; ++batch) {
      if (off == 0) {
        cur_last = (iters != 0 && sent_msgs + 1 >= iters) || read_tsc() >= end_tsc;
        msg_[0] = cur_last ? kLastFlag : kMoreFlag;
        value = fill_value(sent_msgs);
        if (opts_.touch && !opts_.inplace) fill_message(msg_.data(), 0, size, value, msg_[0]);
      }
      size_t wrote = 0;
      if (opts_.inplace) {  // build the message in the connection's own buffer
        const size_t left = size - off;
        Result<std::span<uint8_t>> span = conn_->reserve(std::min(left, kInPlaceMin), std::min<size_t>(left, opts_.inplace_chunk));
        if (!span.ok()) {
          if (!span.status().would_block()) failure_ = span.status();
          return;
        }
        wrote = std::min(span->size(), left);
        fill_message(span->data(), off, wrote, value, msg_[0]);
        if (Status st = conn_->commit(wrote); !st.ok()) {
          failure_ = st;
          return;
        }
      } else if (opts_.owned) {  // a pool block per message, handed over (no copy of ours)
        if (owned.empty()) {
          memory::BlockPool* pool = conn_->pool();
          if (pool == nullptr) {
            failure_ = Status(Code::kNotSupported, "--owned: this transport has no pool()");
            return;
          }
          Result<memory::Slice> blk = pool->allocate(size);
          if (!blk.ok()) {
            if (!blk.status().would_block()) failure_ = blk.status();
            return;  // the pool is at its cap: blocks come back as writes complete
          }
          if (opts_.touch) fill_message(blk->writable_data(), 0, size, value, msg_[0]);
          else blk->writable_data()[0] = msg_[0];
          owned.append(std::move(*blk));
        }
        Result<size_t> r = conn_->write_owned(owned);
        if (!r.ok()) {
          if (!r.status().would_block()) failure_ = r.status();
          return;
        }
        wrote = *r;
      } else {
        Result<size_t> r = conn_->write(std::span<const uint8_t>(msg_.data() + off, size - off));
        if (!r.ok()) {
          if (!r.status().would_block()) failure_ = r.status();
          return;
        }
        wrote = *r;
      }
      off += wrote;
      sent_bytes += wrote;
      ++activity_;
      if (off < size) continue;
      off = 0;
      ++sent_msgs;
      if (cur_last) {
        finished = true;
        conn_->set_write_handler(nullptr);
      }
    }
  };
  on_progress_ = [&] {
    progress_.update(messages ? "stream" : "stream warm-up", size, Tsc::to_us(read_tsc() - t_begin) / 1e6, seconds,
                     sent_msgs, iters, "messages");
  };
  send_control(hdr, sizeof hdr);
  conn_->set_write_handler([&](Connection&) { pump(); });
  pump();
  Status st = drive([&] { return finished; }, "the stream to drain");
  if (st.ok()) {
    Result<Header> ack = read_header("the server's stream acknowledgement");
    if (!ack.ok()) {
      st = ack.status();
    } else if (ack->op != Op::kStreamAck || ack->value != sent_bytes) {
      st = Status(Code::kProtocolError, "server acknowledged " + std::to_string(ack->value) + " bytes, we sent " +
                                            std::to_string(sent_bytes));
    }
  }
  on_progress_ = nullptr;
  conn_->set_write_handler(nullptr);
  *elapsed_s = Tsc::to_us(read_tsc() - t_begin) / 1e6;
  if (messages) *messages = sent_msgs;
  if (bytes) *bytes = sent_bytes;
  return st;
}

Result<StreamResult> Client::stream(uint32_t size) {
  double elapsed = 0;
  if (opts_.warmup_s > 0)
    CONDUIT_RETURN_IF_ERROR(run_stream_phase(size, opts_.warmup_s, 0, nullptr, nullptr, &elapsed));
  uint64_t messages = 0, bytes = 0;
  const uint64_t wakeups = server_wakeups().load(std::memory_order_relaxed);
  const uint64_t rv0 = conn_->stats().rendezvous_bytes_sent;
  CONDUIT_RETURN_IF_ERROR(run_stream_phase(size, opts_.duration_s, opts_.iters, &messages, &bytes, &elapsed));
  progress_.clear();
  StreamResult r = stream_result(size, messages, bytes, elapsed);
  r.server_wakeups = server_wakeups().load(std::memory_order_relaxed) - wakeups;
  r.rendezvous_bytes = conn_->stats().rendezvous_bytes_sent - rv0;
  return r;
}

void Client::finish() {
  if (!conn_ || conn_->state() != ConnState::kConnected) return;
  uint8_t bye[kHeaderBytes];
  encode(Header{Op::kBye, 0, 0}, bye);
  send_control(bye, sizeof bye);
  const uint64_t deadline = monotonic_ns() + 1'000'000'000ull;
  while (pending_off_ < pending_.size() && failure_.ok() && monotonic_ns() < deadline) (void)loop_.run_once(10);
  conn_->close();
}

}  // namespace conduit::bench
