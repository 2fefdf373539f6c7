#include "options.h"

#include <arpa/inet.h>

#include <charconv>
#include <cstdio>
#include <cstring>

namespace conduit::preload {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

template <class F>
void for_each_item(std::string_view text, F f) {
  while (!text.empty()) {
    const size_t comma = text.find(',');
    f(trim(text.substr(0, comma)));
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
}

Result<uint64_t> parse_number(std::string_view text, uint64_t min, uint64_t max, std::string_view what) {
  uint64_t v = 0;
  const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || p != text.data() + text.size() || v < min || v > max)
    return Status(Code::kInvalidArgument, std::string(what) + ": '" + std::string(text) + "' is not a number in " +
                                              std::to_string(min) + "–" + std::to_string(max));
  return v;
}

Status apply_mode(std::string_view t, Options& o) {
  static constexpr std::pair<std::string_view, Policy> kNames[] = {
      {"auto", Policy::kAuto}, {"shm", Policy::kShm}, {"rdma", Policy::kRdma}, {"tcp", Policy::kTcp}, {"off", Policy::kTcp}};
  for (const auto& [name, p] : kNames)
    if (t == name) {
      o.mode = p;
      return {};
    }
  return Status(Code::kInvalidArgument, "mode: '" + std::string(t) + "' is not one of auto, shm, rdma, tcp");
}
Status apply_ports(std::string_view t, Options& o) {
  CONDUIT_ASSIGN_OR_RETURN(o.ports, parse_ports(t));
  return {};
}
Status apply_addrs(std::string_view t, Options& o) {
  CONDUIT_ASSIGN_OR_RETURN(o.addrs, parse_cidrs(t));
  return {};
}
Status apply_timeout(std::string_view t, Options& o) {
  CONDUIT_ASSIGN_OR_RETURN(o.timeout_ms, parse_number(t, 1, 60'000, "timeout_ms"));
  return {};
}
Status apply_poll(std::string_view t, Options& o) {
  CONDUIT_ASSIGN_OR_RETURN(o.poll_us, parse_number(t, 0, 10'000, "poll_us"));
  return {};
}
Status apply_spin(std::string_view t, Options& o) {
  CONDUIT_ASSIGN_OR_RETURN(o.spin_us, parse_number(t, 0, 10'000, "spin_us"));
  return {};
}
Status apply_log(std::string_view t, Options& o) {
  if (!parse_log_level(t, &o.log))
    return Status(Code::kInvalidArgument, "log: '" + std::string(t) + "' is not one of trace, debug, info, warn, error, off");
  return {};
}
// Validated here only for shape; the transport checks the keys when a URL is built.
Status check_url_options(std::string_view what, std::string_view t) {
  for (char c : t)
    if (c == '?' || c == '/' || c == ' ' || c == '#')
      return Status(Code::kInvalidArgument, std::string(what) + ": '" + std::string(t) +
                                                "' must look like key=value&key=value (URL options)");
  return {};
}
Status apply_shm(std::string_view t, Options& o) {
  CONDUIT_RETURN_IF_ERROR(check_url_options("shm_options", t));
  o.shm_options = std::string(t);
  return {};
}
Status apply_rdma(std::string_view t, Options& o) {
  CONDUIT_RETURN_IF_ERROR(check_url_options("rdma_options", t));
  o.rdma_options = std::string(t);
  return {};
}
Status apply_status(std::string_view t, Options& o) {
  if (t == "1" || t == "true" || t == "yes" || t == "on") o.status = true;
  else if (t == "0" || t == "false" || t == "no" || t == "off") o.status = false;
  else return Status(Code::kInvalidArgument, "status: '" + std::string(t) + "' is not a boolean");
  return {};
}
Status apply_config(std::string_view t, Options& o) {
  o.config = std::string(t);
  return {};
}

constexpr OptionRow kOptionRows[] = {
    {"mode", "CONDUIT_PRELOAD_MODE", "shm", "shm, auto, rdma, tcp",
     "what a selected connection may become: `shm` = shm:// for a peer on this host, TCP for any other; "
     "`auto` = shm:// on this host, rdma:// for any other; `rdma` only that; `tcp` = nothing (calls go to libc, "
     "connections are still listed). The default is `shm`: `auto` would offer rdma to every other host (Status above)",
     apply_mode},
    {"ports", "CONDUIT_PRELOAD_PORTS", "", "list of ports and ranges, e.g. `6379,7000-7100`",
     "only connections to (client) or on (server) these TCP ports are selected; empty = every port", apply_ports},
    {"addrs", "CONDUIT_PRELOAD_ADDRS", "", "list of prefixes, e.g. `127.0.0.0/8,::1,10.1.0.0/16`",
     "only connections whose peer (client: the server's address, server: the listening address) is in one of "
     "these are selected; empty = every address",
     apply_addrs},
    {"timeout_ms", "CONDUIT_PRELOAD_TIMEOUT_MS", "1000", "1–60000",
     "how long a client waits for the server's decision before it stays on TCP (a peer without the preload is "
     "known at once and costs nothing)",
     apply_timeout},
    {"poll_us", "CONDUIT_PRELOAD_POLL_US", "100", "0–10000",
     "the most a blocking call (epoll_wait, poll, select, a blocking read or write) polls the accelerated "
     "connections before it sleeps in the kernel, adaptively: each thread learns how soon its waits end and polls "
     "only while that pays (short gaps: a window a few times the usual gap; long gaps: shrinking to none; a poll "
     "that lost its CPU: none for a cool-down; gaps of up to 8x this that a probe shows polling to shorten, as "
     "when both ends wait on each other and wake-ups are slow: a bound of as much as 8x). A reply that comes "
     "within the window costs no wake-up; 0 = sleep "
     "at once",
     apply_poll},
    {"spin_us", "CONDUIT_PRELOAD_SPIN_US", "0", "0–10000",
     "a fixed poll instead of `poll_us`' adaptive one: every blocking call polls this long before it sleeps, "
     "whatever it learnt (a program with a core of its own); 0 = use `poll_us`",
     apply_spin},
    {"log", "CONDUIT_PRELOAD_LOG", "warn", "trace, debug, info, warn, error, off",
     "log level; every decision (fast or TCP, with the reason) is logged at `info`", apply_log},
    {"shm_options", "CONDUIT_PRELOAD_SHM", "", "URL options, e.g. `ring=256K&busy_poll_us=50`",
     "appended to the shm:// URLs of both ends (docs/TRANSPORTS.md lists the keys)", apply_shm},
    {"rdma_options", "CONDUIT_PRELOAD_RDMA", "", "URL options, e.g. `busy_poll_us=50`",
     "appended to the rdma:// URLs of both ends", apply_rdma},
    {"status", "CONDUIT_PRELOAD_STATUS", "1", "bool",
     "publish this process' connections for `conduit-run --list` (a file in the per-user runtime directory)",
     apply_status},
    {"config", "CONDUIT_PRELOAD_CONFIG", "", "a path",
     "a file of `key = value` lines with the keys above; the environment overrides it", apply_config},
};

bool prefix_match(const uint8_t* a, const uint8_t* b, int bits) {
  const int bytes = bits / 8;
  if (std::memcmp(a, b, bytes) != 0) return false;
  const int rest = bits % 8;
  if (rest == 0) return true;
  const uint8_t mask = static_cast<uint8_t>(0xff << (8 - rest));
  return (a[bytes] & mask) == (b[bytes] & mask);
}

}  // namespace

std::string_view policy_name(Policy p) {
  switch (p) {
    case Policy::kAuto: return "auto";
    case Policy::kShm: return "shm";
    case Policy::kRdma: return "rdma";
    case Policy::kTcp: return "tcp";
  }
  return "?";
}

std::span<const OptionRow> option_rows() { return kOptionRows; }

const OptionRow* find_option(std::string_view key) {
  for (const OptionRow& r : kOptionRows)
    if (r.key == key) return &r;
  return nullptr;
}

Result<std::vector<PortRange>> parse_ports(std::string_view text) {
  std::vector<PortRange> out;
  Status bad;
  for_each_item(text, [&](std::string_view item) {
    if (!bad.ok() || item.empty()) return;
    const size_t dash = item.find('-');
    auto lo = parse_number(trim(item.substr(0, dash)), 1, 65535, "ports");
    if (!lo.ok()) return void(bad = lo.status());
    uint64_t hi = *lo;
    if (dash != std::string_view::npos) {
      auto h = parse_number(trim(item.substr(dash + 1)), *lo, 65535, "ports (range end)");
      if (!h.ok()) return void(bad = h.status());
      hi = *h;
    }
    out.push_back({static_cast<uint16_t>(*lo), static_cast<uint16_t>(hi)});
  });
  if (!bad.ok()) return bad;
  return out;
}

Result<std::vector<Cidr>> parse_cidrs(std::string_view text) {
  std::vector<Cidr> out;
  Status bad;
  for_each_item(text, [&](std::string_view item) {
    if (!bad.ok() || item.empty()) return;
    const size_t slash = item.find('/');
    const std::string host(trim(item.substr(0, slash)));
    Cidr c;
    if (inet_pton(AF_INET, host.c_str(), c.addr) == 1) {
      c.family = AF_INET;
      c.prefix = 32;
    } else if (inet_pton(AF_INET6, host.c_str(), c.addr) == 1) {
      c.family = AF_INET6;
      c.prefix = 128;
    } else {
      bad = Status(Code::kInvalidArgument, "addrs: '" + host + "' is not an IPv4 or IPv6 address");
      return;
    }
    if (slash != std::string_view::npos) {
      auto p = parse_number(trim(item.substr(slash + 1)), 0, static_cast<uint64_t>(c.prefix), "addrs (prefix length)");
      if (!p.ok()) return void(bad = p.status());
      c.prefix = static_cast<int>(*p);
    }
    out.push_back(c);
  });
  if (!bad.ok()) return bad;
  return out;
}

bool Options::port_selected(uint16_t port) const {
  if (ports.empty()) return true;
  for (const PortRange& r : ports)
    if (port >= r.lo && port <= r.hi) return true;
  return false;
}

bool Options::addr_selected(const sockaddr* sa) const {
  if (addrs.empty()) return true;
  uint8_t v4[4];
  const uint8_t* a = nullptr;
  int family = sa->sa_family;
  if (family == AF_INET) {
    std::memcpy(v4, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, 4);
    a = v4;
  } else if (family == AF_INET6) {
    const auto* s6 = reinterpret_cast<const sockaddr_in6*>(sa);
    if (IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr)) {  // ::ffff:a.b.c.d is the IPv4 address
      std::memcpy(v4, s6->sin6_addr.s6_addr + 12, 4);
      a = v4;
      family = AF_INET;
    } else {
      a = s6->sin6_addr.s6_addr;
    }
  } else {
    return false;
  }
  for (const Cidr& c : addrs)
    if (c.family == family && prefix_match(a, c.addr, c.prefix)) return true;
  return false;
}

Status apply_config_text(std::string_view text, std::string_view source, Options& o) {
  int line_no = 0;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    ++line_no;
    if (const size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    line = trim(line);
    if (line.empty()) continue;
    const size_t eq = line.find('=');
    const std::string where = std::string(source) + ":" + std::to_string(line_no);
    if (eq == std::string_view::npos)
      return Status(Code::kInvalidArgument, where + ": expected `key = value`, got '" + std::string(line) + "'");
    const std::string_view key = trim(line.substr(0, eq));
    const OptionRow* row = find_option(key);
    if (row == nullptr || row->key == "config")
      return Status(Code::kInvalidArgument, where + ": unknown key '" + std::string(key) + "'");
    if (Status s = row->apply(trim(line.substr(eq + 1)), o); !s.ok()) return s.annotate(where);
  }
  return {};
}

Result<Options> load_options(const std::function<const char*(const char*)>& getenv) {
  Options o;
  for (const OptionRow& r : kOptionRows)
    if (!r.fallback.empty()) CONDUIT_RETURN_IF_ERROR(r.apply(r.fallback, o).annotate("default"));
  if (const char* path = getenv("CONDUIT_PRELOAD_CONFIG"); path != nullptr && *path != '\0') {
    std::FILE* f = std::fopen(path, "re");
    if (f == nullptr) return Status::FromErrno(errno, std::string("CONDUIT_PRELOAD_CONFIG: cannot open ") + path);
    std::string text;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0 && text.size() < (1u << 20)) text.append(buf, n);
    std::fclose(f);
    CONDUIT_RETURN_IF_ERROR(apply_config_text(text, path, o));
    o.config = path;
  }
  for (const OptionRow& r : kOptionRows) {
    if (r.key == "config") continue;
    if (const char* v = getenv(std::string(r.env).c_str()); v != nullptr)
      CONDUIT_RETURN_IF_ERROR(r.apply(trim(v), o).annotate(r.env));
  }
  return o;
}

std::string options_markdown() {
  std::string out = "| key | environment | default | values | meaning |\n|---|---|---|---|---|\n";
  for (const OptionRow& r : kOptionRows) {
    out += "| `" + std::string(r.key) + "` | `" + std::string(r.env) + "` | " +
           (r.fallback.empty() ? std::string("—") : "`" + std::string(r.fallback) + "`") + " | " +
           std::string(r.range) + " | " + std::string(r.doc) + " |\n";
  }
  return out;
}

}  // namespace conduit::preload
