#include "conduit/kv/client.h"

#include <algorithm>
#include <cctype>

#include "conduit/base/clock.h"

namespace conduit::kv {

std::string_view client_state_name(ClientState s) {
  switch (s) {
    case ClientState::kConnecting: return "connecting";
    case ClientState::kReady: return "ready";
    case ClientState::kBackoff: return "backoff";
    case ClientState::kClosed: return "closed";
  }
  return "?";
}

namespace {
// Commands that only read: running one twice has the effect of running it once.
constexpr std::string_view kReadOnly[] = {
    "BITCOUNT", "DBSIZE",  "ECHO",     "EXISTS",  "GET",    "GETRANGE", "HEXISTS", "HGET",    "HGETALL",
    "HKEYS",    "HLEN",    "HMGET",    "HSTRLEN", "HVALS",  "INFO",     "KEYS",    "LINDEX",  "LLEN",
    "LPOS",     "LRANGE",  "MGET",     "PING",    "PTTL",   "SCAN",     "SCARD",   "SISMEMBER", "SMEMBERS",
    "SMISMEMBER", "STRLEN", "SUBSTR",  "TIME",    "TTL",    "TYPE",     "XLEN",    "XRANGE",  "XREVRANGE",
    "ZCARD",    "ZCOUNT",  "ZRANGE",   "ZRANK",   "ZREVRANGE", "ZREVRANK", "ZSCORE",
};
}  // namespace

bool is_idempotent(std::string_view command) {
  std::string up(command);
  std::transform(up.begin(), up.end(), up.begin(), [](unsigned char c) { return std::toupper(c); });
  return std::find(std::begin(kReadOnly), std::end(kReadOnly), up) != std::end(kReadOnly);
}

// --- AsyncClient -------------------------------------------------------------------------------

Result<std::unique_ptr<AsyncClient>> AsyncClient::connect(reactor::EventLoop& loop, std::string_view url,
                                                          ConnectCallback on_connect) {
  return connect(loop, url, AsyncClientOptions{}, std::move(on_connect));
}

Result<std::unique_ptr<AsyncClient>> AsyncClient::connect(reactor::EventLoop& loop, std::string_view url,
                                                          AsyncClientOptions options, ConnectCallback on_connect) {
  std::unique_ptr<AsyncClient> c(new AsyncClient(loop, std::move(options)));
  c->url_ = std::string(url);
  c->on_connect_ = std::move(on_connect);
  CONDUIT_RETURN_IF_ERROR(c->start_connect());
  return c;
}

AsyncClient::~AsyncClient() {
  alive_.reset();
  if (retry_timer_ != 0) loop_.cancel(retry_timer_);
  if (conn_) {
    conn_->close();
    loop_.destroy_later(std::move(conn_));
  }
}

bool AsyncClient::connected() const {
  return state_ == ClientState::kReady && established_ && conn_ && conn_->state() == transport::ConnState::kConnected;
}

void AsyncClient::set_state(ClientState s, const Status& cause, size_t failed, size_t resent) {
  state_ = s;
  if (options_.on_event) options_.on_event(ClientEvent{s, cause, attempt_, backoff_ms_, failed, resent});
}

Status AsyncClient::start_connect() {
  established_ = false;
  writing_ = false;
  in_.clear();
  scanner_.reset();
  std::weak_ptr<bool> alive = alive_;
  auto conn = transport::connect(loop_, url_, [this, alive](transport::Connection&, Status s) {
    if (alive.expired()) return;
    on_connected(std::move(s));
  });
  if (!conn.ok()) return conn.status();
  conn_ = std::move(conn).value();
  if (ever_ready_) set_state(ClientState::kConnecting, Status());
  return {};
}

void AsyncClient::on_connected(Status s) {
  if (!s.ok()) {
    if (ever_ready_ && options_.reconnect.enabled && state_ != ClientState::kClosed) {
      // Called from inside the connection: let it unwind before it goes.
      loop_.destroy_later(std::move(conn_));
      ++attempt_;
      return schedule_reconnect(s, 0, 0);
    }
    return fail(s);
  }
  established_ = true;
  conn_->set_read_handler([this](transport::Connection&) { on_readable(); });
  // The setup commands go first, ahead of everything queued (which starts at offset 0).
  if (!options_.setup.empty()) {
    ByteBuffer b;
    std::deque<Pending> setup;
    for (size_t i = 0; i < options_.setup.size(); ++i) {
      std::vector<std::string_view> v(options_.setup[i].begin(), options_.setup[i].end());
      const size_t before = b.size();
      append_command(&b, v);
      Pending p;
      p.cb = [this, i](Result<Reply> r) { on_setup_reply(i, std::move(r)); };
      p.start = before;
      p.end = b.size();
      p.setup = true;
      setup.push_back(std::move(p));
    }
    const uint64_t shift = b.size();
    b.append(out_.data(), out_.size());
    out_ = std::move(b);
    for (auto& p : pending_) p.start += shift, p.end += shift;
    appended_ += shift;
    for (auto it = setup.rbegin(); it != setup.rend(); ++it) pending_.push_front(std::move(*it));
    setup_left_ = options_.setup.size();
  }
  if (setup_left_ == 0) {
    attempt_ = 0;
    if (ever_ready_) ++reconnects_;
    ever_ready_ = true;
    set_state(ClientState::kReady, Status());
    if (on_connect_) {
      ConnectCallback cb = std::move(on_connect_);
      on_connect_ = nullptr;
      std::weak_ptr<bool> alive = alive_;
      cb(Status());
      if (alive.expired()) return;
    }
  }
  flush();
}

void AsyncClient::on_setup_reply(size_t index, Result<Reply> r) {
  if (!r.ok()) return;  // the connection failed; lose_connection/fail handle it
  if (r->is_error()) {
    std::string what = options_.setup[index].empty() ? "setup" : options_.setup[index][0];
    std::transform(what.begin(), what.end(), what.begin(), [](unsigned char c) { return std::toupper(c); });
    return fail(Status(Code::kPermissionDenied, what + ": " + r->str));
  }
  if (--setup_left_ > 0) return;
  attempt_ = 0;
  if (ever_ready_) ++reconnects_;
  ever_ready_ = true;
  set_state(ClientState::kReady, Status());
  if (on_connect_) {
    ConnectCallback cb = std::move(on_connect_);
    on_connect_ = nullptr;
    cb(Status());
  }
}

void AsyncClient::queue(std::string_view bytes, ReplyCallback cb, bool idempotent) {
  Pending p;
  p.cb = std::move(cb);
  p.start = appended_;
  appended_ += bytes.size();
  p.end = appended_;
  if (options_.reconnect.enabled) p.bytes.assign(bytes.data(), bytes.size());
  p.idempotent = idempotent;
  pending_.push_back(std::move(p));
}

void AsyncClient::command(std::span<const std::string_view> args, ReplyCallback cb) {
  if (!error_.ok()) {
    if (cb) cb(error_);
    return;
  }
  const size_t before = out_.size();
  append_command(&out_, args);
  queue(std::string_view(out_.data() + before, out_.size() - before), std::move(cb),
        !args.empty() && is_idempotent(args[0]));
  if (!corked_) flush();
}

void AsyncClient::send_raw(std::string_view bytes, std::vector<ReplyCallback> replies) {
  if (!error_.ok()) {
    for (auto& cb : replies)
      if (cb) cb(error_);
    return;
  }
  out_.append(bytes);
  // One chunk, several replies: the first record carries the bytes, the others follow it
  // (a raw chunk is never treated as idempotent).
  for (size_t i = 0; i < replies.size(); ++i) {
    if (i == 0) {
      queue(bytes, std::move(replies[0]), false);
    } else {
      Pending p = {};
      p.cb = std::move(replies[i]);
      p.start = pending_.back().start;
      p.end = pending_.back().end;
      p.continuation = true;
      pending_.push_back(std::move(p));
    }
  }
  if (!corked_) flush();
}

void AsyncClient::uncork() {
  corked_ = false;
  flush();
}

void AsyncClient::flush() {
  if (!established_ || !conn_ || !error_.ok()) return;
  while (!out_.empty()) {
    auto r = conn_->write({reinterpret_cast<const uint8_t*>(out_.data()), out_.size()});
    if (r.ok()) {
      out_.consume(*r);
      sent_ += *r;
      continue;
    }
    if (r.status().would_block()) {
      if (!writing_) {
        writing_ = true;
        conn_->set_write_handler([this](transport::Connection&) { flush(); });
      }
      return;
    }
    return lose_connection(r.status());
  }
  if (writing_) {
    writing_ = false;
    conn_->set_write_handler(nullptr);
  }
  if (out_.capacity() > (1u << 20)) out_.release();
}

void AsyncClient::on_readable() {
  std::weak_ptr<bool> alive = alive_;
  char* dst = in_.prepare(64 * 1024);
  auto r = conn_->read({reinterpret_cast<uint8_t*>(dst), 64 * 1024});
  if (!r.ok()) {
    if (r.status().would_block()) return;
    return lose_connection(r.status());
  }
  if (*r == 0) return lose_connection(Status(Code::kClosed, "kv client: the server closed the connection"));
  in_.commit(*r);
  while (!in_.empty() && conn_ && established_) {
    const int64_t n = scanner_.scan(in_.data(), in_.size());
    if (n == 0) break;
    if (n < 0) return fail(Status(Code::kProtocolError, "kv client: malformed reply from the server"));
    Reply reply;
    if (!parse_reply(in_.data(), static_cast<size_t>(n), &reply))
      return fail(Status(Code::kProtocolError, "kv client: malformed reply from the server"));
    in_.consume(static_cast<size_t>(n));
    if (pending_.empty()) continue;  // unsolicited (e.g. a push): dropped
    ReplyCallback cb = std::move(pending_.front().cb);
    pending_.pop_front();
    if (cb) cb(std::move(reply));
    if (alive.expired()) return;  // the callback destroyed us
  }
  if (in_.empty() && in_.capacity() > (1u << 20)) in_.release();
}

void AsyncClient::lose_connection(Status cause) {
  if (!options_.reconnect.enabled || !ever_ready_ || state_ == ClientState::kClosed) return fail(cause);
  if (conn_) {
    conn_->set_read_handler(nullptr);
    conn_->set_write_handler(nullptr);
    conn_->close();
    loop_.destroy_later(std::move(conn_));
  }
  established_ = false;
  writing_ = false;
  setup_left_ = 0;
  // Keep what never left and, if allowed, what can safely run twice; the rest has an
  // unknown outcome and fails.
  std::deque<Pending> keep;
  std::vector<ReplyCallback> lost;
  size_t resent = 0;
  bool head_kept = false;
  for (auto& p : pending_) {
    if (p.setup) continue;  // re-sent with every connection anyway
    if (!p.continuation) {
      const bool unsent = p.start >= sent_;
      const bool again = !unsent && options_.reconnect.retry_idempotent && p.idempotent;
      head_kept = unsent || again;
      resent += again ? 1 : 0;
    }
    if (head_kept)
      keep.push_back(std::move(p));
    else
      lost.push_back(std::move(p.cb));
  }
  out_.clear();
  appended_ = sent_ = 0;
  for (auto& p : keep) {
    if (p.continuation) continue;
    p.start = appended_;
    out_.append(p.bytes);
    appended_ += p.bytes.size();
    p.end = appended_;
  }
  // Continuations share their head's offsets.
  for (size_t i = 1; i < keep.size(); ++i)
    if (keep[i].continuation) keep[i].start = keep[i - 1].start, keep[i].end = keep[i - 1].end;
  pending_ = std::move(keep);
  std::weak_ptr<bool> alive = alive_;
  attempt_ = 0;
  schedule_reconnect(cause, lost.size(), resent);
  if (alive.expired()) return;
  const Status unknown(Code::kUnavailable,
                       "kv client: connection lost before the reply; the server may have executed the command (" +
                           cause.to_string() + ")");
  for (auto& cb : lost) {
    if (cb) cb(unknown);
    if (alive.expired()) return;
  }
}

void AsyncClient::schedule_reconnect(Status cause, size_t failed, size_t resent) {
  const ReconnectOptions& o = options_.reconnect;
  if (o.max_attempts != 0 && attempt_ >= o.max_attempts)
    return fail(Status(Code::kUnavailable, "kv client: gave up after " + std::to_string(attempt_) +
                                               " attempts to reconnect: " + cause.to_string()));
  uint64_t b = std::max<uint64_t>(o.initial_backoff_ms, 1);
  for (uint32_t i = 0; i < attempt_ && b < o.max_backoff_ms; ++i) b *= 2;
  backoff_ms_ = std::min(b, std::max(o.max_backoff_ms, o.initial_backoff_ms));
  set_state(ClientState::kBackoff, cause, failed, resent);
  retry_timer_ = loop_.run_after(backoff_ms_ * 1'000'000ull, [this] {
    retry_timer_ = 0;
    if (Status s = start_connect(); !s.ok()) {
      ++attempt_;
      schedule_reconnect(s, 0, 0);
    }
  });
}

void AsyncClient::fail(Status s) {
  if (error_.ok()) error_ = s.ok() ? Status(Code::kClosed, "kv client: closed") : s;
  established_ = false;
  if (retry_timer_ != 0) {
    loop_.cancel(retry_timer_);
    retry_timer_ = 0;
  }
  if (conn_) {
    conn_->set_read_handler(nullptr);
    conn_->set_write_handler(nullptr);
    conn_->close();
  }
  std::weak_ptr<bool> alive = alive_;
  if (state_ != ClientState::kClosed) {
    set_state(ClientState::kClosed, error_);
    if (alive.expired()) return;
  }
  auto pending = std::move(pending_);
  pending_.clear();
  for (auto& p : pending) {
    if (p.cb) p.cb(error_);
    if (alive.expired()) return;
  }
  if (on_connect_) {
    ConnectCallback cb = std::move(on_connect_);
    on_connect_ = nullptr;
    cb(error_);
  }
}

void AsyncClient::close() { fail(Status(Code::kClosed, "kv client: closed by the application")); }

// --- Client --------------------------------------------------------------------------------------

Result<std::unique_ptr<Client>> Client::connect(std::string_view url, const ClientOptions& options) {
  std::unique_ptr<Client> c(new Client());
  c->options_ = options;
  CONDUIT_ASSIGN_OR_RETURN(c->loop_, reactor::EventLoop::create());
  AsyncClientOptions ao;
  if (options.resp == RespVersion::kResp3) {
    std::vector<std::string> hello = {"HELLO", "3"};
    if (!options.password.empty())
      hello.insert(hello.end(), {"AUTH", options.user.empty() ? "default" : options.user, options.password});
    ao.setup.push_back(std::move(hello));
  } else if (!options.password.empty()) {
    if (options.user.empty())
      ao.setup.push_back({"AUTH", options.password});
    else
      ao.setup.push_back({"AUTH", options.user, options.password});
  }
  if (options.db != 0) ao.setup.push_back({"SELECT", std::to_string(options.db)});
  ao.reconnect = options.reconnect;
  ao.on_event = options.on_event;
  auto done = std::make_shared<std::pair<bool, Status>>(false, Status());
  CONDUIT_ASSIGN_OR_RETURN(c->client_, AsyncClient::connect(*c->loop_, url, std::move(ao), [done](Status s) {
                             done->second = s;
                             done->first = true;
                           }));
  CONDUIT_RETURN_IF_ERROR(c->wait([&] { return done->first; }));
  if (!done->second.ok()) return done->second;
  return c;
}

Client::~Client() {
  client_.reset();
  // Let destroy_later'd connections go on this loop before it is destroyed.
  if (loop_) (void)loop_->run_once(0);
}

Status Client::wait(const std::function<bool()>& done) {
  const uint64_t deadline = monotonic_ns() + options_.timeout_ms * 1'000'000ull;
  // A before-sleep hook checks too: replies may be handled inside a transport's hook,
  // after which the loop would block.
  const auto hook = loop_->add_before_sleep([&] { return done(); });
  Status s;
  while (!done()) {
    const uint64_t now = monotonic_ns();
    if (now >= deadline) {
      s = Status(Code::kTimedOut, "kv client: no reply within " + std::to_string(options_.timeout_ms) + " ms");
      break;
    }
    const int ms = static_cast<int>(std::min<uint64_t>((deadline - now) / 1'000'000 + 1, 100));
    if (Status r = loop_->run_once(ms); !r.ok()) {
      s = r;
      break;
    }
  }
  loop_->remove_before_sleep(hook);
  return s;
}

// The callbacks below own their results through a shared_ptr: after a timeout the call is
// abandoned, and a reply that arrives later (or the failure of the connection) must not
// touch the caller's stack.
Result<Reply> Client::command(std::span<const std::string_view> args) {
  struct Call {
    bool done = false;
    Result<Reply> out = Status(Code::kInternal, "no reply");
  };
  auto call = std::make_shared<Call>();
  client_->command(args, [call](Result<Reply> r) {
    call->out = std::move(r);
    call->done = true;
  });
  CONDUIT_RETURN_IF_ERROR(wait([&] { return call->done; }));
  return std::move(call->out);
}

Result<Reply> Client::command(const std::vector<std::string>& args) {
  std::vector<std::string_view> v(args.begin(), args.end());
  return command(std::span<const std::string_view>(v));
}

namespace {
struct Batch {
  explicit Batch(size_t n) : replies(n) {}
  std::vector<Reply> replies;
  size_t got = 0;
  Status err;
  AsyncClient::ReplyCallback slot(size_t i, const std::shared_ptr<Batch>& self) {
    return [self, i](Result<Reply> r) {
      if (r.ok())
        self->replies[i] = std::move(r).value();
      else if (self->err.ok())
        self->err = r.status();
      ++self->got;
    };
  }
};
}  // namespace

Result<std::vector<Reply>> Client::pipeline(const std::vector<std::vector<std::string>>& commands) {
  auto batch = std::make_shared<Batch>(commands.size());
  client_->cork();
  for (size_t i = 0; i < commands.size(); ++i) {
    std::vector<std::string_view> v(commands[i].begin(), commands[i].end());
    client_->command(std::span<const std::string_view>(v), batch->slot(i, batch));
  }
  client_->uncork();
  CONDUIT_RETURN_IF_ERROR(wait([&] { return batch->got == commands.size(); }));
  if (!batch->err.ok()) return batch->err;
  return std::move(batch->replies);
}

Result<std::vector<Reply>> Client::raw(std::string_view bytes, size_t replies) {
  auto batch = std::make_shared<Batch>(replies);
  std::vector<AsyncClient::ReplyCallback> cbs;
  for (size_t i = 0; i < replies; ++i) cbs.push_back(batch->slot(i, batch));
  client_->send_raw(bytes, std::move(cbs));
  CONDUIT_RETURN_IF_ERROR(wait([&] { return batch->got == replies; }));
  if (!batch->err.ok()) return batch->err;
  return std::move(batch->replies);
}

}  // namespace conduit::kv
