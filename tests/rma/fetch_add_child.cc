// The other process of RmaOps.FetchAndAddFromTwoProcessesAddsUpExactly, started with exec
// (not just fork: librdmacm's device contexts belong to the process that opened them, and
// the kernel refuses a forked child's use of them).  Usage: rma_fetch_add_child URL FD N --
// connects to URL, reads a 32-byte descriptor from FD, adds 1 N times (depth ops in flight),
// checks the old values it saw only grow, and exits 0.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "conduit/reactor/event_loop.h"
#include "conduit/rma/endpoint.h"

using namespace conduit;

static bool run_until(reactor::EventLoop& loop, bool& flag, int ms) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (!flag) {
    if (std::chrono::steady_clock::now() > end) return false;
    (void)loop.run_once(5);
  }
  return true;
}

static int die(int code, const std::string& why) {
  std::fprintf(stderr, "rma_fetch_add_child: %s\n", why.c_str());
  return code;
}

int main(int argc, char** argv) {
  if (argc != 4) return die(2, "usage: rma_fetch_add_child URL FD N");
  const int fd = std::atoi(argv[2]);
  const int adds = std::atoi(argv[3]);
  auto loop = reactor::EventLoop::create();
  if (!loop.ok()) return die(10, loop.status().to_string());
  bool up = false;
  Status st;
  auto ep = rma::Endpoint::connect(**loop, argv[1], [&](rma::Endpoint&, Status s) {
    st = s;
    up = true;
  });
  if (!ep.ok()) return die(11, ep.status().to_string());
  if (!run_until(**loop, up, 30000) || !st.ok()) return die(12, "connect: " + st.to_string());
  uint8_t wire[rma::Descriptor::kWireSize];
  if (read(fd, wire, sizeof wire) != static_cast<ssize_t>(sizeof wire)) return die(13, "no descriptor");
  auto d = rma::Descriptor::decode(wire);
  if (!d.ok()) return die(14, d.status().to_string());
  int issued = 0, done = 0;
  uint64_t last = 0;
  bool ordered = true, failed = false;
  while (done < adds) {
    while (issued < adds) {
      Status s = (*ep)->submit(rma::Op::fetch_add(*d, 0, 1, [&](const rma::OpResult& r) {
        if (!r.status.ok()) {
          std::fprintf(stderr, "rma_fetch_add_child: op: %s\n", r.status.to_string().c_str());
          failed = true;
        }
        if (done > 0 && r.old_value <= last) ordered = false;
        last = r.old_value;
        ++done;
      }));
      if (s.would_block()) break;
      if (!s.ok()) return die(15, "submit: " + s.to_string());
      ++issued;
    }
    bool all = false;
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!(all = done == issued) && std::chrono::steady_clock::now() < end && !failed) (void)(*loop)->run_once(5);
    if (failed) return 16;
    if (!all) return die(17, "ops did not complete");
  }
  return ordered ? 0 : die(18, "old values did not grow");
}
