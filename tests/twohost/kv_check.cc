// twohost_kv: a write load whose acknowledgements are logged, and a checker that finds
// every acknowledged write on a server (the kv fault tests in tests/twohost).
//
//   twohost_kv load URL --log FILE [--prefix P] [--count N] [--window W] [--incr-every K]
//                       [--reconnect] [--timeout S] [--value-size B]
//   twohost_kv check URL --log FILE [--log FILE...] [--value-size B]
//
// load: SET P:i <value of i> for i = 0..N-1 with up to W commands in flight, and every K-th
// operation an INCR P:counter.  Each reply is appended to the log as it arrives (written
// straight to the file, so it survives this process and its host being killed):
//   set P:i           the SET was acknowledged (+OK)
//   incr V            the INCR was acknowledged with value V
//   uncertain set P:i / uncertain incr
//                     the connection was lost before the reply: the server may or may not
//                     have executed it (the client library reports that; it never re-sends)
// With --reconnect the client reconnects by itself (kv::ReconnectOptions) and the load goes
// on; its state changes are printed ("event state=backoff cause=..."), and a final
// "load ..." line sums up.  Exit 0 when all N SETs were answered (acknowledged, or
// uncertain after a loss) and none got an error, 1 otherwise.
//
// check: reads the logs, GETs every acknowledged key and compares the value, and checks the
// counter: acknowledged INCRs <= counter <= acknowledged + uncertain (+ --unlogged, the
// commands a killed load had in flight; a silently re-sent INCR would break the bound).  Prints "check ... result=ok|fail";
// exit 0 on ok.
#include <fcntl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "conduit/base/clock.h"
#include "conduit/kv/client.h"

using namespace conduit;

namespace {

std::string value_of(const std::string& key, size_t size) {
  std::string v = "v:" + key + ":";
  while (v.size() < size) v += static_cast<char>('a' + (v.size() * 7 + key.size()) % 26);
  return v;
}

struct Options {
  std::string url;
  std::vector<std::string> logs;
  std::string prefix = "k";
  uint64_t count = 1000;
  int window = 8;
  uint64_t incr_every = 10;
  bool reconnect = false;
  double timeout_s = 120;
  size_t value_size = 64;
  uint64_t unlogged = 0;
};

class Load {
 public:
  Load(const Options& o, int log_fd) : o_(o), log_fd_(log_fd) {}

  int run() {
    auto loop = reactor::EventLoop::create().value();
    kv::AsyncClientOptions ao;
    if (o_.reconnect) {
      ao.reconnect.enabled = true;
      ao.reconnect.initial_backoff_ms = 100;
      ao.reconnect.max_backoff_ms = 2000;
    }
    ao.on_event = [this](const kv::ClientEvent& e) {
      std::printf("event state=%.*s attempt=%u backoff_ms=%" PRIu64 " failed_calls=%zu reconnects=%" PRIu64
                  " t=%.3f%s%s\n",
                  static_cast<int>(kv::client_state_name(e.state).size()), kv::client_state_name(e.state).data(),
                  e.attempt, e.backoff_ms, e.failed_calls, client_ != nullptr ? client_->reconnects() : 0,
                  elapsed(), e.cause.ok() ? "" : " cause=",
                  e.cause.ok() ? "" : ("\"" + e.cause.to_string() + "\"").c_str());
      std::fflush(stdout);
    };
    bool up = false;
    Status first;
    auto c = kv::AsyncClient::connect(*loop, o_.url, std::move(ao), [&](Status s) {
      first = s;
      up = true;
    });
    if (!c.ok()) return report(c.status());
    client_ = c->get();
    const uint64_t deadline = monotonic_ns() + static_cast<uint64_t>(o_.timeout_s * 1e9);
    while (!up && monotonic_ns() < deadline) (void)loop->run_once(50);
    if (!first.ok() || !up) return report(up ? first : Status(Code::kTimedOut, "connect"));
    while (monotonic_ns() < deadline && (acked_sets_ < o_.count || in_flight_ > 0)) {
      while (in_flight_ < o_.window && next_ < o_.count && !client_->error().is_error()) issue();
      if (client_->error().is_error() && in_flight_ == 0) break;
      if (next_ >= o_.count && in_flight_ == 0) break;
      (void)loop->run_once(50);
    }
    reconnects_seen_ = client_->reconnects();
    const Status final_error = client_->error();
    c->reset();
    client_ = nullptr;
    (void)loop->run_once(0);
    if (final_error.is_error()) return report(final_error);
    if (next_ < o_.count || in_flight_ > 0)
      return report(Status(Code::kTimedOut, "only " + std::to_string(next_) + " of " + std::to_string(o_.count) +
                                                " SETs answered within --timeout"));
    return report(Status());
  }

 private:
  double elapsed() const { return static_cast<double>(monotonic_ns() - start_ns_) / 1e9; }

  void log(const std::string& line) {
    const std::string l = line + "\n";
    if (::write(log_fd_, l.data(), l.size()) != static_cast<ssize_t>(l.size())) {
      std::perror("twohost_kv: log");
      std::exit(1);
    }
  }

  void issue() {
    const uint64_t op = ops_++;
    ++in_flight_;
    if (o_.incr_every != 0 && op % o_.incr_every == o_.incr_every - 1) {
      client_->command({"INCR", o_.prefix + ":counter"}, [this](Result<kv::Reply> r) {
        --in_flight_;
        if (r.ok() && r->type == kv::ReplyType::kInteger) {
          ++acked_incrs_;
          return log("incr " + std::to_string(r->integer));
        }
        if (!r.ok() && r.status().code() == Code::kUnavailable) {
          ++uncertain_;
          return log("uncertain incr");
        }
        ++errors_;
        log("error incr " + (r.ok() ? r->str : r.status().to_string()));
      });
      return;
    }
    const std::string key = o_.prefix + ":" + std::to_string(next_++);
    const std::string value = value_of(key, o_.value_size);
    client_->command({"SET", key, value}, [this, key](Result<kv::Reply> r) {
      --in_flight_;
      if (r.ok() && !r->is_error()) {
        ++acked_sets_;
        return log("set " + key);
      }
      if (!r.ok() && r.status().code() == Code::kUnavailable) {
        ++uncertain_;
        return log("uncertain set " + key);
      }
      ++errors_;
      log("error set " + key + " " + (r.ok() ? r->str : r.status().to_string()));
    });
  }

  int report(const Status& s) {
    const double secs = elapsed();
    std::printf("load acked_sets=%" PRIu64 " acked_incrs=%" PRIu64 " uncertain=%" PRIu64 " errors=%" PRIu64
                " reconnects=%" PRIu64 " seconds=%.3f ops_s=%.0f%s%s\n",
                acked_sets_, acked_incrs_, uncertain_, errors_, reconnects_seen_, secs,
                secs > 0 ? static_cast<double>(acked_sets_ + acked_incrs_) / secs : 0.0, s.ok() ? "" : " error=",
                s.ok() ? "" : ("\"" + s.to_string() + "\"").c_str());
    std::fflush(stdout);
    return s.ok() && errors_ == 0 ? 0 : 1;
  }

 public:
  void set_start() { start_ns_ = monotonic_ns(); }

 private:
  const Options& o_;
  int log_fd_;
  kv::AsyncClient* client_ = nullptr;
  uint64_t start_ns_ = monotonic_ns();
  uint64_t next_ = 0, ops_ = 0;
  int in_flight_ = 0;
  uint64_t acked_sets_ = 0, acked_incrs_ = 0, uncertain_ = 0, errors_ = 0, reconnects_seen_ = 0;
};

int run_check(const Options& o) {
  std::vector<std::string> keys;
  uint64_t acked_incrs = 0, uncertain_incrs = 0;
  int64_t max_incr = 0;
  for (const auto& path : o.logs) {
    std::ifstream in(path);
    if (!in) {
      std::fprintf(stderr, "twohost_kv: cannot read %s\n", path.c_str());
      return 1;
    }
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("set ", 0) == 0) keys.push_back(line.substr(4));
      if (line.rfind("incr ", 0) == 0) {
        ++acked_incrs;
        max_incr = std::max<int64_t>(max_incr, std::stoll(line.substr(5)));
      }
      if (line == "uncertain incr") ++uncertain_incrs;
    }
  }
  kv::ClientOptions co;
  co.timeout_ms = 30000;
  auto c = kv::Client::connect(o.url, co);
  if (!c.ok()) {
    std::printf("check result=fail error=\"%s\"\n", c.status().to_string().c_str());
    return 1;
  }
  uint64_t missing = 0, wrong = 0;
  std::string first_bad;
  for (size_t i = 0; i < keys.size(); i += 200) {
    std::vector<std::vector<std::string>> batch;
    for (size_t j = i; j < std::min(keys.size(), i + 200); ++j) batch.push_back({"GET", keys[j]});
    auto r = (*c)->pipeline(batch);
    if (!r.ok()) {
      std::printf("check result=fail error=\"%s\"\n", r.status().to_string().c_str());
      return 1;
    }
    for (size_t j = 0; j < r->size(); ++j) {
      const std::string& key = keys[i + j];
      const kv::Reply& rep = (*r)[j];
      if (rep.type == kv::ReplyType::kNull) {
        ++missing;
        if (first_bad.empty()) first_bad = key + " missing";
      } else if (rep.str != value_of(key, o.value_size)) {
        ++wrong;
        if (first_bad.empty()) first_bad = key + " has a wrong value";
      }
    }
  }
  // The counter: every acknowledged INCR ran once; each uncertain one ran at most once.
  int64_t counter = 0;
  bool counter_ok = true;
  std::string prefix = keys.empty() ? std::string() : keys[0].substr(0, keys[0].rfind(':'));
  if (acked_incrs + uncertain_incrs > 0 && !prefix.empty()) {
    auto r = (*c)->command({"GET", prefix + ":counter"});
    if (r.ok() && r->type != kv::ReplyType::kNull) counter = std::stoll(r->str);
    counter_ok = counter >= max_incr && static_cast<uint64_t>(counter) >= acked_incrs &&
                 static_cast<uint64_t>(counter) <= acked_incrs + uncertain_incrs + o.unlogged;
  }
  const bool ok = missing == 0 && wrong == 0 && counter_ok;
  std::printf("check keys=%zu missing=%" PRIu64 " wrong=%" PRIu64 " counter=%" PRId64 " acked_incrs=%" PRIu64
              " uncertain_incrs=%" PRIu64 " result=%s%s%s\n",
              keys.size(), missing, wrong, counter, acked_incrs, uncertain_incrs, ok ? "ok" : "fail",
              first_bad.empty() ? "" : " first=", first_bad.c_str());
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"twohost_kv: acknowledged-write load and checker (kv fault tests)"};
  app.require_subcommand(1, 1);
  Options o;
  auto* load = app.add_subcommand("load", "SETs (and INCRs) with every acknowledgement logged");
  load->add_option("url", o.url, "server URL")->required();
  load->add_option("--log", o.logs, "acknowledgement log (appended)")->required()->expected(1);
  load->add_option("--prefix", o.prefix, "key prefix")->capture_default_str();
  load->add_option("--count", o.count, "SETs to acknowledge")->capture_default_str();
  load->add_option("--window", o.window, "commands in flight")->check(CLI::Range(1, 1024))->capture_default_str();
  load->add_option("--incr-every", o.incr_every, "every K-th operation is an INCR (0 = none)")->capture_default_str();
  load->add_flag("--reconnect", o.reconnect, "reconnect by itself after a loss (kv::ReconnectOptions)");
  load->add_option("--timeout", o.timeout_s, "seconds for the whole load")->capture_default_str();
  load->add_option("--value-size", o.value_size, "bytes per value")->capture_default_str();
  auto* check = app.add_subcommand("check", "find every acknowledged write on the server");
  check->add_option("url", o.url, "server URL")->required();
  check->add_option("--log", o.logs, "acknowledgement logs")->required();
  check->add_option("--value-size", o.value_size, "bytes per value (as loaded)")->capture_default_str();
  check->add_option("--unlogged", o.unlogged,
                    "INCRs that may have run without a log line (a load killed with its host: up to --window)");
  CLI11_PARSE(app, argc, argv);
  if (load->parsed()) {
    const int fd = ::open(o.logs[0].c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
      std::perror(o.logs[0].c_str());
      return 1;
    }
    Load l(o, fd);
    l.set_start();
    const int rc = l.run();
    ::close(fd);
    return rc;
  }
  return run_check(o);
}
