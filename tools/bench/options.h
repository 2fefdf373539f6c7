// conduit-bench command line.  Parsing (CLI11) and every rule about which values go
// together live in options.cc; the rest of the tool reads a finished Options.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace conduit::bench {

enum class Command { kStream, kMemcpy, kTransports };
enum class Role { kServer, kClient, kLoopback };
enum class StreamTest { kPingPong, kStream };

struct Options {
  Command command = Command::kStream;

  // stream
  Role role = Role::kLoopback;
  std::string url;
  StreamTest test = StreamTest::kPingPong;
  std::vector<uint32_t> sizes;  // bytes, in the order given
  double duration_s = 2.0;      // per size, measured part
  uint64_t iters = 0;           // per size; 0 = bounded by duration only
  double warmup_s = 0.2;        // per size, before measuring (not reported)
  double timeout_s = 10.0;      // connect, and longest silence from the peer
  double client_wait_s = 60.0;  // server: wait this long for a client (= --timeout when given)
  uint32_t sessions = 1;        // server: exit after serving this many clients
  uint32_t busy_poll_us = 0;    // EventLoop busy polling (LoopOptions) on this side(s)
  int cpu = -1;                 // pin the client (or the server process) to this CPU
  int server_cpu = -1;          // loopback: pin the server thread
  uint64_t max_samples = 5'000'000;  // ping-pong samples kept per size (memory bound)
  // stream test: the writer fills every message and the reader checksums it (touch.h);
  // inplace does both in the connection's own buffers (reserve/commit, peek/consume).
  bool touch = false;
  bool inplace = false;  // implies touch
  uint64_t inplace_chunk = 64 << 10;  // --inplace: most bytes per reserve()/commit()
  // stream test: each message is a slice of the connection's pool() handed over with
  // write_owned() (rdma: RDMA-written from where it lies, or READ by the peer: rendezvous).
  bool owned = false;
  // stream test: the server reads each message where it lies (peek/consume) instead of
  // copying it out with read() -- what --inplace does on the reading side, without its fill
  // and checksum.  With --owned: no copy of the payload on either side.
  bool peek = false;

  // memcpy (touch: fill the source, copy, checksum the destination, as a touching stream does)
  uint64_t copy_size = 64 << 10;

  bool json = false;
  bool progress = false;  // resolved: tty or --progress, and never with --no-progress
};

// Returns an exit status when the program must stop now (0 after --help, 2 after a usage
// error, the message already printed), or nullopt to run.
std::optional<int> parse_options(int argc, char** argv, Options* out);

const char* test_name(StreamTest t);
const char* role_name(Role r);

}  // namespace conduit::bench
