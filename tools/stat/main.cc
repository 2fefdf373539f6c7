// conduit-stat: lists connections the way SMC-R's smcss does -- transport, state, addresses,
// bytes, credits, wake-ups, negotiated extensions, auto:// fallback reasons, and for rdma
// the QP's state and the port's retransmission / RNR counters.
//
//   conduit-stat                     every preloaded process of this user (status files)
//   conduit-stat --pid 1234          one preloaded process
//   conduit-stat --url rdma://h:p    a conduit::rpc server (its StatusService), repeatable
//   conduit-stat ... --details       + reads/writes, pinned bytes, the rdma device counters
//   conduit-stat ... --json          one JSON object per connection
//
// Every source serves the same record (transport::ConnSnapshot; rpc's ConnectionStatus
// carries it field for field, the preload's files as ch.* fields).  The options below are
// one table: parsing and --help come from it.
// Exit status: 0 ok; 1 a source failed (its error is printed, the others still are); 2 usage.
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "render.h"
#include "sources.h"

namespace {

using conduit::Code;
using conduit::Status;

struct Flags {
  pid_t pid = 0;
  std::vector<std::string> urls;
  bool listeners = false;
  bool details = false;
  bool json = false;
  int64_t timeout_ms = 3000;
  bool help = false;
};

Status to_int(std::string_view v, int64_t lo, int64_t hi, int64_t* out) {
  int64_t x = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || end != v.data() + v.size() || x < lo || x > hi)
    return Status(Code::kInvalidArgument,
                  "'" + std::string(v) + "' is not a number in " + std::to_string(lo) + ".." + std::to_string(hi));
  *out = x;
  return {};
}

struct OptionRow {
  std::string_view name;   // --name
  char short_name;         // -x, or 0
  std::string_view arg;    // the value's name; empty: a switch
  std::string_view doc;
  Status (*apply)(Flags&, std::string_view);
};

constexpr OptionRow kOptions[] = {
    {"pid", 'p', "PID", "only this preloaded process (default: every one of this user)",
     [](Flags& f, std::string_view v) {
       int64_t x = 0;
       Status s = to_int(v, 1, 4194304, &x);
       f.pid = static_cast<pid_t>(x);
       return s;
     }},
    {"url", 'u', "URL", "a conduit::rpc server's connections, from its status service (repeatable)",
     [](Flags& f, std::string_view v) {
       f.urls.emplace_back(v);
       return Status();
     }},
    {"timeout-ms", 0, "MS", "deadline of each status call (default 3000)",
     [](Flags& f, std::string_view v) { return to_int(v, 1, 600000, &f.timeout_ms); }},
    {"listening", 'l', "", "also list listening sockets",
     [](Flags& f, std::string_view) { return f.listeners = true, Status(); }},
    {"details", 'd', "", "per connection also reads/writes, pinned bytes and the rdma port's counters",
     [](Flags& f, std::string_view) { return f.details = true, Status(); }},
    {"json", 'j', "", "JSON: one object per connection",
     [](Flags& f, std::string_view) { return f.json = true, Status(); }},
    {"help", 'h', "", "this text", [](Flags& f, std::string_view) { return f.help = true, Status(); }},
};

void usage(std::FILE* out) {
  std::fprintf(out,
               "usage: conduit-stat [--pid PID] [--url URL]... [-l] [-d] [--json]\n\n"
               "Lists Conduit connections: of preloaded processes (conduit-run; their status files) and of\n"
               "conduit::rpc servers (their status service).  With neither --pid nor --url: every preloaded\n"
               "process of this user.\n\noptions:\n");
  for (const OptionRow& r : kOptions) {
    std::string flag = r.short_name ? std::string("-") + r.short_name + ", " : "    ";
    flag += "--" + std::string(r.name);
    if (!r.arg.empty()) flag += " " + std::string(r.arg);
    std::fprintf(out, "  %-22s %.*s\n", flag.c_str(), static_cast<int>(r.doc.size()), r.doc.data());
  }
  std::fprintf(out, "\nexit status: 0 ok, 1 a source failed, 2 usage.  docs/DIAGNOSING.md reads the output.\n");
}

// "--name value", "--name=value", "-x value"; one row each.
Status parse(int argc, char** argv, Flags* f) {
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i], value;
    bool inline_value = false;
    const OptionRow* row = nullptr;
    if (a.size() > 2 && a.substr(0, 2) == "--") {
      std::string_view name = a.substr(2);
      if (const size_t eq = name.find('='); eq != std::string_view::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
        inline_value = true;
      }
      for (const OptionRow& r : kOptions)
        if (r.name == name) row = &r;
    } else if (a.size() == 2 && a[0] == '-') {
      for (const OptionRow& r : kOptions)
        if (r.short_name != 0 && r.short_name == a[1]) row = &r;
    }
    if (row == nullptr) return Status(Code::kInvalidArgument, "unknown option '" + std::string(a) + "'");
    if (row->arg.empty() && inline_value)
      return Status(Code::kInvalidArgument, "--" + std::string(row->name) + " takes no value");
    if (!row->arg.empty() && !inline_value) {
      if (i + 1 >= argc) return Status(Code::kInvalidArgument, "--" + std::string(row->name) + " needs " + std::string(row->arg));
      value = argv[++i];
    }
    if (Status s = row->apply(*f, value); !s.ok()) return s.annotate("--" + std::string(row->name));
  }
  return {};
}

}  // namespace

int main(int argc, char** argv) {
  Flags f;
  if (Status s = parse(argc, argv, &f); !s.ok()) {
    std::fprintf(stderr, "conduit-stat: %s\n", std::string(s.message()).c_str());
    usage(stderr);
    return 2;
  }
  if (f.help) {
    usage(stdout);
    return 0;
  }
  std::vector<conduit::stat::Row> rows;
  int rc = 0, answered = 0;
  auto take = [&](conduit::Result<std::vector<conduit::stat::Row>> r) {
    if (!r.ok()) {
      std::fprintf(stderr, "conduit-stat: %s\n", r.status().to_string().c_str());
      rc = 1;
      return;
    }
    ++answered;
    for (auto& row : *r) rows.push_back(std::move(row));
  };
  if (f.pid != 0 || f.urls.empty()) take(conduit::stat::preload_rows(f.pid, f.listeners));
  for (const std::string& u : f.urls) take(conduit::stat::rpc_rows(u, f.timeout_ms));
  if (answered == 0) return rc;  // no table of nothing: every source failed
  const std::string text = f.json ? conduit::stat::render_json(rows) : conduit::stat::render_table(rows, f.details);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return rc;
}
