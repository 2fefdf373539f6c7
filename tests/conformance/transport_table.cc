#include "transport_table.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>

#include "conduit/base/fd.h"
#include "conduit/transport/connection.h"

namespace conduit::conformance {
namespace {

std::string unique_name() {
  static std::atomic<unsigned> n{0};
  return "conformance-" + std::to_string(::getpid()) + "-" + std::to_string(n.fetch_add(1));
}

std::string tcp4_url(std::string*) { return "tcp://127.0.0.1:0"; }

std::string tcp6_url(std::string* why) {
  // Containers often run without IPv6; probe ::1 rather than assume it.
  UniqueFd fd(::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_loopback;
  if (!fd || ::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    *why = "IPv6 loopback (::1) is not available here";
    return "";
  }
  return "tcp://[::1]:0";
}

std::string shm_url(std::string*) { return "shm://" + unique_name(); }
std::string shm_busy_url(std::string*) { return "shm://" + unique_name() + "?busy_poll_us=50"; }
// The smallest ring: every test wraps it many times and meets back-pressure constantly.
std::string shm_ring4k_url(std::string*) { return "shm://" + unique_name() + "?ring=4096"; }

// RDMA needs an address on an RDMA-capable netdev; the Soft-RoCE testbed provides one
// (inside its guest, on a veth that reaches nothing outside) through CONDUIT_RDMA_ADDR.
std::string rdma_address(std::string* why) {
  const char* addr = std::getenv("CONDUIT_RDMA_ADDR");
  if (addr == nullptr || *addr == '\0') {
    *why = "CONDUIT_RDMA_ADDR is unset (run the rdma-labelled tests in the testbed: testbed/run ctest -L rdma)";
    return "";
  }
  const std::string a = addr;
  return (a.find(':') != std::string::npos ? "[" + a + "]" : a) + ":0";
}
std::string rdma_url(std::string* why) {
  const std::string a = rdma_address(why);
  // The listener bounds each inbound handshake by connect_timeout_ms too.
  return a.empty() ? "" : "rdma://" + a + "?connect_timeout_ms=180000";
}
// The listener's connections take their receives from one shared receive queue.
std::string rdma_srq_url(std::string* why) {
  const std::string a = rdma_address(why);
  return a.empty() ? "" : "rdma://" + a + "?srq=1&connect_timeout_ms=180000";
}

// auto:// on loopback: with no RDMA device here it must fall back to TCP transparently.
std::string auto_loopback_url(std::string*) { return "auto://127.0.0.1:0"; }
std::string auto_rdma_url(std::string* why) {
  const std::string a = rdma_address(why);
  // The listener's rdma side bounds each inbound handshake as rdma_url does.
  return a.empty() ? "" : "auto://" + a + "?rdma.connect_timeout_ms=180000";
}

}  // namespace

const std::vector<TransportCase>& transport_table() {
  static const std::vector<TransportCase> table = {
      // name        scheme  listen URL     connect options     label   ip addresses  admission
      {"tcp", "tcp", tcp4_url, "", "", true, false},
      {"tcp6", "tcp", tcp6_url, "", "", true, false},
      {"shm", "shm", shm_url, "", "", false, true},
      {"shm_busy", "shm", shm_busy_url, "busy_poll_us=50", "", false, true},
      {"shm_ring4k", "shm", shm_ring4k_url, "", "", false, true},
      {"auto", "auto", auto_loopback_url, "", "", true, false},
      // Soft-RoCE under TCG spends ~30 ms of guest kernel time registering each endpoint's
      // 2 MiB (RX buffer + staging), so 300 simultaneous connects on one loop take ~20 s
      // (over 30 s in the ASan build): longer than the 10 s default connect timeout, which
      // bounds one connection.
      {"rdma", "rdma", rdma_url, "connect_timeout_ms=180000", "rdma", true, true},
      {"rdma_srq", "rdma", rdma_srq_url, "connect_timeout_ms=180000", "rdma", true, true},
      // The client's fallback bound (rdma_timeout_ms, 2 s by default) is the case "auto"
      // tests; here it must not fire when a loaded guest is slow to register (a fallback
      // would leave the listener's first accepted connection the abandoned rdma one).
      {"auto_rdma", "auto", auto_rdma_url, "rdma_timeout_ms=180000&rdma.connect_timeout_ms=180000", "rdma", true, true},
  };
  return table;
}

void PrintTo(const TransportCase& c, std::ostream* os) {
  *os << c.name << " (" << c.scheme << (c.label.empty() ? "" : ", label " + c.label) << ")";
}

std::vector<TransportCase> registered_cases(std::string_view label) {
  std::vector<TransportCase> out;
  for (const TransportCase& c : transport_table())
    if (c.label == label && transport::find_transport(c.scheme) != nullptr) out.push_back(c);
  return out;
}

std::vector<std::string> known_schemes() { return {"tcp", "shm", "rdma", "auto"}; }

}  // namespace conduit::conformance
