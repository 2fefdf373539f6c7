// The transports the conformance suite runs against: one row per variant, the only
// per-transport code in the suite.  Adding a transport (rdma, auto) is adding a row.
//
// A row is instantiated when the library registers its scheme (find_transport), so the
// shm rows light up by themselves once src/transport/shm registers "shm".  Whether the
// row can run here (an RDMA address, IPv6 loopback) is decided per test in SetUp: it
// skips, or fails when CONDUIT_REQUIRE_RDMA=1 says the environment must provide it.
#pragma once

#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace conduit::conformance {

struct TransportCase {
  std::string name;    // test-name suffix: "tcp", "tcp6", "shm_busy" (gtest: [A-Za-z0-9_])
  std::string scheme;  // registry key
  // A fresh listen URL on this machine's loopback (tcp://127.0.0.1:0,
  // shm://conformance-<pid>-<n>), with the row's options; "" when this environment
  // cannot provide one (then *why says why).
  std::string (*listen_url)(std::string* why);
  // Options the connecting side adds to the listener's url() ("busy_poll_us=50").
  std::string connect_options;
  // ctest label group: "" = the host suite; "rdma" = needs an RDMA device (testbed).
  std::string label;
  // local/peer addresses are IP endpoints, so one side's local is the other's peer.
  bool ip_addresses = false;
  // The listener runs a handshake before it hands a connection over, and so asks its
  // admission callback and counts handshakes in progress (Listener::stats()).  false: the
  // connection goes straight to the AcceptCallback (tcp), and admission is never asked.
  bool admission = false;
};

// gtest prints parameters with this (instead of a byte dump).
void PrintTo(const TransportCase& c, std::ostream* os);

// Every row, registered or not.
const std::vector<TransportCase>& transport_table();
// The rows whose scheme is registered and whose label is `label`, for INSTANTIATE.
std::vector<TransportCase> registered_cases(std::string_view label);
// Schemes the suite knows of (so a registered transport without a row is caught).
std::vector<std::string> known_schemes();

}  // namespace conduit::conformance
