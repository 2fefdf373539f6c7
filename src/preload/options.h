// The preload's options: which connections may go fast and how.  One table (kOptionRows)
// drives everything: the environment variables, a config file, conduit-run's flags, its
// --help and the table in docs/PRELOAD.md (checked by a test).
//
// Sources, weakest first: the row's default, the config file named by CONDUIT_PRELOAD_CONFIG
// (`key = value` lines, `#` comments), then each row's environment variable.  conduit-run
// turns its flags into those environment variables, so a program started by it and one
// started with LD_PRELOAD by hand read the same thing.
//
// Thread-safety: parse functions are pure; an Options value is read-only once built.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "conduit/base/log.h"
#include "conduit/base/status.h"

namespace conduit::preload {

// What a connection that the rules select may become.
enum class Policy : uint8_t {
  kAuto,  // shm:// for a peer on this host, rdma:// for any other
  kShm,   // shm:// only (same-host peers); others stay TCP
  kRdma,  // rdma:// only, even for a peer on this host (rxe loops back)
  kTcp,   // nothing is accelerated: every call goes to libc (the preload only watches)
};
std::string_view policy_name(Policy p);

struct PortRange {
  uint16_t lo = 0, hi = 0;
};
// An address prefix: 127.0.0.0/8, ::1/128, 10.0.0.5 (a host).
struct Cidr {
  int family = AF_INET;  // AF_INET or AF_INET6
  uint8_t addr[16] = {};
  int prefix = 0;
};

struct Options {
  Policy mode = Policy::kShm;  // rdma (auto) is opt-in: it would offer rdma to every other host (PRELOAD.md, Status)
  std::vector<PortRange> ports;  // empty: every port
  std::vector<Cidr> addrs;       // empty: every address
  uint64_t timeout_ms = 1000;
  uint64_t poll_us = 100; // a blocking wait polls accelerated connections adaptively up to this long
  uint64_t spin_us = 0;   // ...or this long every time (fixed; 0 = adaptive, poll_us)
  LogLevel log = LogLevel::kWarn;
  std::string shm_options;   // appended to shm:// URLs ("ring=256K&busy_poll_us=50")
  std::string rdma_options;  // appended to rdma:// URLs
  bool status = true;        // publish the status file conduit-run --list reads
  std::string config;        // the config file that was read ("" = none)

  // Does a connection to/from this port and peer address qualify?  An empty list admits all.
  bool port_selected(uint16_t port) const;
  bool addr_selected(const sockaddr* sa) const;
};

struct OptionRow {
  std::string_view key;       // config-file key and conduit-run flag (--key)
  std::string_view env;       // environment variable
  std::string_view fallback;  // default, written as a user would write it
  std::string_view range;     // accepted values, for docs and --help
  std::string_view doc;
  Status (*apply)(std::string_view text, Options& out);
};
std::span<const OptionRow> option_rows();
const OptionRow* find_option(std::string_view key);

// Defaults, then the config file (CONDUIT_PRELOAD_CONFIG), then the environment.  `getenv`
// is injectable for tests.  A bad value is an error naming the source and the key.
Result<Options> load_options(const std::function<const char*(const char*)>& getenv);
// Applies `key = value` lines (config-file syntax) to `o`; `source` names the file in errors.
Status apply_config_text(std::string_view text, std::string_view source, Options& o);

// The docs table: "| key | env | default | values | meaning |" rows, as docs/PRELOAD.md shows them.
std::string options_markdown();

// Parsers shared with conduit-run and the tests.
Result<std::vector<PortRange>> parse_ports(std::string_view text);
Result<std::vector<Cidr>> parse_cidrs(std::string_view text);

}  // namespace conduit::preload
