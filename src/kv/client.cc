#include "conduit/kv/client.h"

#include "conduit/base/clock.h"

namespace conduit::kv {

// --- AsyncClient -------------------------------------------------------------------------------

Result<std::unique_ptr<AsyncClient>> AsyncClient::connect(reactor::EventLoop& loop, std::string_view url,
                                                          ConnectCallback on_connect) {
  std::unique_ptr<AsyncClient> c(new AsyncClient(loop));
  c->on_connect_ = std::move(on_connect);
  AsyncClient* self = c.get();
  std::weak_ptr<bool> alive = c->alive_;
  auto conn = transport::connect(loop, url, [self, alive](transport::Connection&, Status s) {
    if (alive.expired()) return;
    self->on_connected(std::move(s));
  });
  if (!conn.ok()) return conn.status();
  c->conn_ = std::move(conn).value();
  return c;
}

AsyncClient::~AsyncClient() {
  alive_.reset();
  if (conn_) {
    conn_->close();
    loop_.destroy_later(std::move(conn_));
  }
}

bool AsyncClient::connected() const { return established_ && conn_ && conn_->state() == transport::ConnState::kConnected; }

void AsyncClient::on_connected(Status s) {
  if (!s.ok()) {
    fail(s);
  } else {
    established_ = true;
    conn_->set_read_handler([this](transport::Connection&) { on_readable(); });
    flush();
  }
  if (on_connect_) {
    ConnectCallback cb = std::move(on_connect_);
    on_connect_ = nullptr;
    cb(s);
  }
}

void AsyncClient::command(std::span<const std::string_view> args, ReplyCallback cb) {
  if (!error_.ok()) {
    if (cb) cb(error_);
    return;
  }
  append_command(&out_, args);
  callbacks_.push_back(std::move(cb));
  if (!corked_) flush();
}

void AsyncClient::send_raw(std::string_view bytes, std::vector<ReplyCallback> replies) {
  if (!error_.ok()) {
    for (auto& cb : replies)
      if (cb) cb(error_);
    return;
  }
  out_.append(bytes);
  for (auto& cb : replies) callbacks_.push_back(std::move(cb));
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
      continue;
    }
    if (r.status().would_block()) {
      if (!writing_) {
        writing_ = true;
        conn_->set_write_handler([this](transport::Connection&) { flush(); });
      }
      return;
    }
    return fail(r.status());
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
    return fail(r.status());
  }
  if (*r == 0) return fail(Status(Code::kClosed, "kv client: the server closed the connection"));
  in_.commit(*r);
  while (!in_.empty()) {
    const int64_t n = scanner_.scan(in_.data(), in_.size());
    if (n == 0) break;
    if (n < 0) return fail(Status(Code::kProtocolError, "kv client: malformed reply from the server"));
    Reply reply;
    if (!parse_reply(in_.data(), static_cast<size_t>(n), &reply))
      return fail(Status(Code::kProtocolError, "kv client: malformed reply from the server"));
    in_.consume(static_cast<size_t>(n));
    if (callbacks_.empty()) continue;  // unsolicited (e.g. a push): dropped
    ReplyCallback cb = std::move(callbacks_.front());
    callbacks_.pop_front();
    if (cb) cb(std::move(reply));
    if (alive.expired()) return;  // the callback destroyed us
  }
  if (in_.empty() && in_.capacity() > (1u << 20)) in_.release();
}

void AsyncClient::fail(Status s) {
  if (error_.ok()) error_ = s.ok() ? Status(Code::kClosed, "kv client: closed") : s;
  if (conn_) {
    conn_->set_read_handler(nullptr);
    conn_->set_write_handler(nullptr);
    conn_->close();
  }
  std::weak_ptr<bool> alive = alive_;
  auto cbs = std::move(callbacks_);
  callbacks_.clear();
  for (auto& cb : cbs) {
    if (cb) cb(error_);
    if (alive.expired()) return;
  }
}

void AsyncClient::close() { fail(Status(Code::kClosed, "kv client: closed by the application")); }

// --- Client --------------------------------------------------------------------------------------

Result<std::unique_ptr<Client>> Client::connect(std::string_view url, const ClientOptions& options) {
  std::unique_ptr<Client> c(new Client());
  c->options_ = options;
  CONDUIT_ASSIGN_OR_RETURN(c->loop_, reactor::EventLoop::create());
  bool done = false;
  Status result;
  CONDUIT_ASSIGN_OR_RETURN(c->client_, AsyncClient::connect(*c->loop_, url, [&](Status s) {
                             result = s;
                             done = true;
                           }));
  CONDUIT_RETURN_IF_ERROR(c->wait([&] { return done; }));
  if (!result.ok()) return result;
  auto expect_ok = [](Result<Reply> r, const char* what) -> Status {
    if (!r.ok()) return r.status();
    if (r->is_error()) return Status(Code::kPermissionDenied, std::string(what) + ": " + r->str);
    return {};
  };
  if (options.resp == RespVersion::kResp3) {
    std::vector<std::string> hello = {"HELLO", "3"};
    if (!options.password.empty()) {
      hello.insert(hello.end(), {"AUTH", options.user.empty() ? "default" : options.user, options.password});
    }
    CONDUIT_RETURN_IF_ERROR(expect_ok(c->command(hello), "HELLO"));
  } else if (!options.password.empty()) {
    if (options.user.empty())
      CONDUIT_RETURN_IF_ERROR(expect_ok(c->command({"AUTH", options.password}), "AUTH"));
    else
      CONDUIT_RETURN_IF_ERROR(expect_ok(c->command({"AUTH", options.user, options.password}), "AUTH"));
  }
  if (options.db != 0)
    CONDUIT_RETURN_IF_ERROR(expect_ok(c->command({"SELECT", std::to_string(options.db)}), "SELECT"));
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

Result<Reply> Client::command(std::span<const std::string_view> args) {
  bool done = false;
  Result<Reply> out = Status(Code::kInternal, "no reply");
  client_->command(args, [&](Result<Reply> r) {
    out = std::move(r);
    done = true;
  });
  CONDUIT_RETURN_IF_ERROR(wait([&] { return done; }));
  return out;
}

Result<Reply> Client::command(const std::vector<std::string>& args) {
  std::vector<std::string_view> v(args.begin(), args.end());
  return command(std::span<const std::string_view>(v));
}

Result<std::vector<Reply>> Client::pipeline(const std::vector<std::vector<std::string>>& commands) {
  std::vector<Reply> replies(commands.size());
  size_t got = 0;
  Status err;
  client_->cork();
  for (size_t i = 0; i < commands.size(); ++i) {
    std::vector<std::string_view> v(commands[i].begin(), commands[i].end());
    client_->command(std::span<const std::string_view>(v), [&, i](Result<Reply> r) {
      if (r.ok())
        replies[i] = std::move(r).value();
      else if (err.ok())
        err = r.status();
      ++got;
    });
  }
  client_->uncork();
  CONDUIT_RETURN_IF_ERROR(wait([&] { return got == commands.size(); }));
  if (!err.ok()) return err;
  return replies;
}

Result<std::vector<Reply>> Client::raw(std::string_view bytes, size_t replies) {
  std::vector<Reply> out(replies);
  size_t got = 0;
  Status err;
  std::vector<AsyncClient::ReplyCallback> cbs;
  for (size_t i = 0; i < replies; ++i)
    cbs.push_back([&, i](Result<Reply> r) {
      if (r.ok())
        out[i] = std::move(r).value();
      else if (err.ok())
        err = r.status();
      ++got;
    });
  client_->send_raw(bytes, std::move(cbs));
  CONDUIT_RETURN_IF_ERROR(wait([&] { return got == replies; }));
  if (!err.ok()) return err;
  return out;
}

}  // namespace conduit::kv
