// conduit-memory-strategies: options, the fork into client (sender) and server (receiver),
// the case loop and the report.  See strategies.h for what is measured.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>
#include <sstream>

#include "conduit/base/clock.h"
#include "conduit/base/json.h"
#include "memory/verbs_registrar.h"  // tests/memory: the registrar over ibv_reg_mr
#include "numeric_flags.h"
#include "strategies.h"

namespace conduit::bench {
namespace {

struct Options {
  std::vector<Strategy> strategies{std::begin(kStrategies), std::end(kStrategies)};
  std::vector<uint32_t> sizes{64, 4096, 65536, 1 << 20};
  uint32_t reps = 1;
  uint64_t count = 100000;
  double seconds = 2.0;
  uint32_t window = 8;
  PollMode poll = PollMode::kEvent;
  std::string device;
  bool json = false;
  uint32_t timeout_s = 900;
};

int parse(int argc, char** argv, Options& o) {
  CLI::App app{
      "conduit-memory-strategies: the seeds' three RDMA memory strategies (register per message; "
      "registered staging + copy; one registered pool shared by application and NIC, zero copy), "
      "client and server (a fork) on one device, RDMA WRITE_WITH_IMM, every message filled by the "
      "sender and checksummed by the receiver"};
  std::vector<std::string> strategies, sizes;
  std::string poll = "event";
  app.add_option("--strategies", strategies, "Comma-separated: register, staging, pool (default all)")->delimiter(',');
  app.add_option("--sizes", sizes, "Comma-separated message sizes, multiples of 8, 8 B .. 4 MiB (default 64,4K,64K,1M)")
      ->delimiter(',');
  app.add_option("--reps", o.reps, "Repetitions; each runs every size with every strategy, the order of the "
                                   "strategies rotated per repetition (default 1)")
      ->check(tools::in_range<uint32_t>(1, 1000));
  app.add_option("-n,--count", o.count, "At most this many messages per case (default 100000)")
      ->check(tools::in_range<uint64_t>(1, 100000000));
  app.add_option("-D,--seconds", o.seconds, "At most this long per case, in seconds (default 2)")
      ->check(tools::in_range(0.001, 3600.0));
  app.add_option("-w,--window", o.window, "Messages in flight: destinations the receiver advertises (default 8)")
      ->check(tools::in_range<uint32_t>(1, kMaxWindow));
  app.add_option("--poll", poll, "Wait for completions: event (sleep on the channel) or spin (default event)")
      ->check(CLI::IsMember({"event", "spin"}));
  app.add_option("-d,--ib-dev", o.device, "RDMA device (default: the first with an active port)");
  app.add_flag("--json", o.json, "One JSON object per case, one per line");
  app.add_option("--timeout", o.timeout_s, "Kill the run after this many seconds (default 900)")
      ->check(tools::in_range<uint32_t>(1, 86400));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (!strategies.empty()) {
    o.strategies.clear();
    for (const std::string& s : strategies) {
      auto st = parse_strategy(s);
      if (!st.ok()) {
        std::cerr << "--strategies: " << st.status().message() << "\n";
        return 2;
      }
      o.strategies.push_back(*st);
    }
  }
  if (!sizes.empty()) {
    o.sizes.clear();
    for (const std::string& s : sizes) {
      uint64_t v = 0;
      if (!tools::parse_size(s, &v) || v < 8 || v > (4u << 20) || v % 8 != 0) {
        std::cerr << "--sizes: '" << s << "' is not a multiple of 8 between 8 B and 4 MiB\n";
        return 2;
      }
      o.sizes.push_back(uint32_t(v));
    }
  }
  o.poll = poll == "spin" ? PollMode::kSpin : PollMode::kEvent;
  return -1;
}

Result<std::shared_ptr<memory::BlockPool>> make_pool(Link& link, const char* name, int access) {
  memory::PoolOptions po;
  po.name = name;
  CONDUIT_ASSIGN_OR_RETURN(auto pool, memory::BlockPool::create(po));
  CONDUIT_ASSIGN_OR_RETURN(unsigned d, pool->add_registrar(std::make_shared<memory::testing::VerbsRegistrar>(link.pd, access)));
  if (d != 0) return Status(Code::kInternal, "pool: unexpected registrar index");
  return pool;
}

// The server: one case after another as the client names them, until the end record.
Status serve(const Options& o, UniqueFd ctl) {
  CONDUIT_ASSIGN_OR_RETURN(auto link, Link::create(o.device, std::move(ctl), o.poll));
  CONDUIT_ASSIGN_OR_RETURN(auto pool, make_pool(*link, "strategies-server", IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE));
  for (;;) {
    CaseSpec spec;
    CONDUIT_RETURN_IF_ERROR(recv_all(link->ctl.get(), &spec, sizeof spec, int(o.timeout_s) * 1000));
    if (spec.magic != CaseSpec::kMagic) return Status(Code::kProtocolError, "server: bad case record");
    if (spec.end) return {};
    if (spec.window == 0 || spec.window > kMaxWindow || spec.size % 8 != 0 || spec.strategy > 2)
      return Status(Code::kProtocolError, "server: bad case record");
    CONDUIT_ASSIGN_OR_RETURN(SideResult r, run_receiver(*link, spec, *pool));
    CONDUIT_RETURN_IF_ERROR(send_all(link->ctl.get(), &r, sizeof r));
  }
}

std::string side_json(const SideResult& r) {
  std::ostringstream j;
  j << "{\"messages\":" << r.messages << ",\"bytes\":" << r.bytes << ",\"wall_ns\":" << r.wall_ns
    << ",\"user_ns\":" << r.user_ns << ",\"sys_ns\":" << r.sys_ns << ",\"reg_calls\":" << r.reg_calls
    << ",\"copies\":" << r.copies
    << ",\"strategy_ns\":" << json_number(Tsc::to_ns(r.strategy_cycles), 0) << ",\"work_ns\":" << json_number(Tsc::to_ns(r.work_cycles), 0) << ",\"credits\":" << r.credits << ",\"checksum\":" << json_string(std::to_string(r.checksum))
    << ",\"cpu_us_per_msg\":" << json_number(r.messages ? double(r.user_ns + r.sys_ns) / 1e3 / double(r.messages) : 0, 3)
    << "}";
  return j.str();
}

// The client: sends each case, runs the sender side, collects the server's side, prints.
Status drive(const Options& o, UniqueFd ctl, bool* mismatch) {
  CONDUIT_ASSIGN_OR_RETURN(auto link, Link::create(o.device, std::move(ctl), o.poll));
  CONDUIT_ASSIGN_OR_RETURN(auto pool, make_pool(*link, "strategies-client", IBV_ACCESS_LOCAL_WRITE));
  if (!o.json)
    std::printf("# device %s, window %u, poll %s, at most %llu messages or %.3g s per case\n"
                "%-4s %-9s %8s %8s %10s %9s %13s %13s %17s %10s %s\n",
                std::string(link->ctx->name()).c_str(), o.window, o.poll == PollMode::kSpin ? "spin" : "event",
                static_cast<unsigned long long>(o.count), o.seconds, "rep", "strategy", "bytes", "msgs", "msgs/s",
                "MB/s", "cli_us/msg", "srv_us/msg", "mem_us/msg c/s", "reg c/s", "checksums");
  (void)Tsc::cycles_per_us();  // calibrate now, not inside a case
  uint32_t case_id = 0;
  for (uint32_t rep = 0; rep < o.reps; ++rep) {
    for (uint32_t size : o.sizes) {
      for (size_t k = 0; k < o.strategies.size(); ++k) {
        const Strategy st = o.strategies[(k + rep) % o.strategies.size()];
        CaseSpec spec;
        spec.strategy = uint8_t(st);
        spec.window = uint16_t(o.window);
        spec.size = size;
        spec.case_id = ++case_id;
        spec.max_messages = o.count;
        spec.max_ns = uint64_t(o.seconds * 1e9);
        CONDUIT_RETURN_IF_ERROR(send_all(link->ctl.get(), &spec, sizeof spec));
        uint8_t token = 0;
        CONDUIT_RETURN_IF_ERROR(recv_all(link->ctl.get(), &token, 1, 60000));  // server ready
        CONDUIT_RETURN_IF_ERROR(send_all(link->ctl.get(), &token, 1));          // go
        CONDUIT_ASSIGN_OR_RETURN(SideResult c, run_sender(*link, spec, *pool));
        SideResult s;
        CONDUIT_RETURN_IF_ERROR(recv_all(link->ctl.get(), &s, sizeof s, int(o.timeout_s) * 1000));
        CONDUIT_RETURN_IF_ERROR(drain_credits(*link, c.credits, s.credits));
        const bool ok = c.checksum == s.checksum && c.messages == s.messages && c.bytes == s.bytes && s.bad_length == 0;
        if (!ok) *mismatch = true;
        const double secs = double(c.wall_ns) / 1e9;
        const double rate = secs > 0 ? double(c.messages) / secs : 0;
        const double cu = double(c.user_ns + c.sys_ns) / 1e3 / double(c.messages);
        const double su = s.messages ? double(s.user_ns + s.sys_ns) / 1e3 / double(s.messages) : 0;
        if (o.json) {
          std::printf("{\"rep\":%u,\"strategy\":%s,\"size\":%u,\"window\":%u,\"poll\":%s,\"messages\":%llu,"
                      "\"seconds\":%s,\"msgs_per_s\":%s,\"mb_per_s\":%s,\"checksum_ok\":%s,\"client\":%s,\"server\":%s}\n",
                      rep + 1, json_string(strategy_name(st)).c_str(), size, o.window,
                      json_string(o.poll == PollMode::kSpin ? "spin" : "event").c_str(),
                      static_cast<unsigned long long>(c.messages), json_number(secs, 6).c_str(), json_number(rate, 1).c_str(),
                      json_number(rate * size / 1e6, 2).c_str(), ok ? "true" : "false", side_json(c).c_str(),
                      side_json(s).c_str());
        } else {
          const double cm = Tsc::to_us(c.strategy_cycles) / double(c.messages);
          const double sm = s.messages ? Tsc::to_us(s.strategy_cycles) / double(s.messages) : 0;
          std::printf("%-4u %-9s %8u %8llu %10.0f %9.2f %13.2f %13.2f %8.2f/%-8.2f %4llu/%-5llu %s\n", rep + 1,
                      std::string(strategy_name(st)).c_str(), size, static_cast<unsigned long long>(c.messages), rate,
                      rate * size / 1e6, cu, su, cm, sm, static_cast<unsigned long long>(c.reg_calls),
                      static_cast<unsigned long long>(s.reg_calls),
                      ok ? "match" : "MISMATCH");
        }
        std::fflush(stdout);
        if (!ok)
          std::fprintf(stderr, "conduit-memory-strategies: %s %u B: client sent %llu messages (sum %llx), server got %llu "
                               "(sum %llx), %llu of wrong length\n",
                       std::string(strategy_name(st)).c_str(), size, static_cast<unsigned long long>(c.messages),
                       static_cast<unsigned long long>(c.checksum), static_cast<unsigned long long>(s.messages),
                       static_cast<unsigned long long>(s.checksum), static_cast<unsigned long long>(s.bad_length));
      }
    }
  }
  CaseSpec end;
  end.end = 1;
  return send_all(link->ctl.get(), &end, sizeof end);
}

}  // namespace
}  // namespace conduit::bench

int main(int argc, char** argv) {
  using namespace conduit;
  using namespace conduit::bench;
  Options o;
  if (int rc = parse(argc, argv, o); rc >= 0) return rc;
  signal(SIGPIPE, SIG_IGN);
  auto listener = verbs::tcp_listen("127.0.0.1", 0);
  if (!listener.ok()) {
    std::cerr << "conduit-memory-strategies: " << listener.status().to_string() << "\n";
    return 1;
  }
  auto port = verbs::bound_port(listener->get());
  if (!port.ok()) {
    std::cerr << "conduit-memory-strategies: " << port.status().to_string() << "\n";
    return 1;
  }
  std::fflush(nullptr);
  // Fork before any verbs call: the child gets no registered memory and no verbs objects.
  const pid_t child = fork();
  if (child < 0) {
    std::perror("conduit-memory-strategies: fork");
    return 1;
  }
  alarm(o.timeout_s);  // the whole run is bounded in time, on both sides
  if (child == 0) {
    int rc = 0;
    {
      auto ctl = verbs::tcp_accept(listener->get(), 30000);
      Status s = ctl.ok() ? serve(o, std::move(*ctl)) : ctl.status();
      if (!s.ok()) {
        std::cerr << "conduit-memory-strategies (server): " << s.to_string() << "\n";
        rc = 1;
      }
    }
    std::fflush(nullptr);
    _exit(rc);
  }
  listener->reset();
  bool mismatch = false;
  Status s;
  {
    auto ctl = verbs::tcp_connect("127.0.0.1", *port, 30000);
    s = ctl.ok() ? drive(o, std::move(*ctl), &mismatch) : ctl.status();
  }
  if (!s.ok()) std::cerr << "conduit-memory-strategies (client): " << s.to_string() << "\n";
  int st = 0;
  if (!s.ok()) kill(child, SIGTERM);
  waitpid(child, &st, 0);
  const bool server_ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
  if (!server_ok && s.ok()) std::cerr << "conduit-memory-strategies: the server process failed\n";
  if (mismatch) std::cerr << "conduit-memory-strategies: checksums or counts differ (see above)\n";
  return s.ok() && server_ok && !mismatch ? 0 : 1;
}
