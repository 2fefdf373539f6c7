#include "options.h"

#include <unistd.h>

#include <CLI/CLI.hpp>

#include <iostream>

#include "numeric_flags.h"
#include "protocol.h"

namespace conduit::bench {
namespace {

constexpr const char* kStreamFooter = R"(
Roles (exactly one):
  --loopback URL   server and client in this process, on two threads (simplest for scripts)
  --server URL     listen on URL and serve --sessions clients, then exit
  --client URL     connect to a running server and run the tests
Only the client's flags decide what runs; the server serves whatever it is asked.

Tests:
  pingpong  one message of each size goes to the server and back, one at a time.  Latency
            is printed twice: RTT (the full round trip, as measured) and one-way = RTT/2,
            which is what sockperf's ping-pong reports (without --full-rtt).  Percentiles are
            nearest-rank over all measured round trips, as sockperf computes them.
  stream    the client sends messages of each size as fast as the connection takes them;
            the server consumes them and acknowledges the end.  Throughput is payload bytes
            over the time from the first write to that acknowledgement.  MB/s is 2^20
            bytes per second; msg/s counts messages of the given size.

Every size runs for --warmup (not reported) and then until --duration or --iters, whichever
comes first, so every run stops by itself.  --timeout bounds connecting and any silence
from the peer.  Progress goes to stderr when it is a terminal (or with --progress).

Exit status: 0 success, 1 run-time failure (connect, peer lost, protocol), 2 bad command line.)";

using tools::parse_size;  // "64", "1K", "16KiB", "1M": K/M/G are powers of 1024

std::string check_size_list(const std::string& text) {
  size_t start = 0;
  int n = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    uint64_t v = 0;
    if (!parse_size(item, &v)) return "'" + item + "' is not a size (examples: 64, 1K, 16KiB, 1M)";
    if (v < 1 || v > kMaxMessage) return "size " + item + " is outside 1 .. 64M";
    ++n;
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return n > 0 ? "" : "empty size list";
}

std::vector<uint32_t> split_sizes(const std::string& text) {
  std::vector<uint32_t> out;
  size_t start = 0;
  for (;;) {
    const size_t comma = text.find(',', start);
    uint64_t v = 0;
    (void)parse_size(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start), &v);
    out.push_back(static_cast<uint32_t>(v));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace

const char* test_name(StreamTest t) { return t == StreamTest::kPingPong ? "pingpong" : "stream"; }

const char* role_name(Role r) {
  switch (r) {
    case Role::kServer: return "server";
    case Role::kClient: return "client";
    case Role::kLoopback: return "loopback";
  }
  return "?";
}

std::optional<int> parse_options(int argc, char** argv, Options* out) {
  CLI::App app{"conduit-bench: latency and throughput of Conduit stream connections over any transport URL"};
  app.name("conduit-bench");
  app.require_subcommand(1, 1);
  app.get_formatter()->column_width(34);
  app.footer("Run `conduit-bench <command> --help` for a command's flags.  See tools/bench/README.md.");

  Options o;
  // ---- stream
  CLI::App* stream = app.add_subcommand("stream", "ping-pong latency or streaming bandwidth over a URL");
  stream->footer(kStreamFooter);
  std::string server_url, client_url, loopback_url, test = "pingpong", sizes_text;
  bool progress = false, no_progress = false;
  auto* srv = stream->add_option("--server", server_url, "Serve clients on this URL (tcp://127.0.0.1:7000)");
  auto* cli = stream->add_option("--client", client_url, "Connect to a conduit-bench server at this URL");
  auto* lb = stream->add_option("--loopback", loopback_url,
                                "Run server and client in this process on two threads, listening on this URL "
                                "(port 0 is fine)");
  srv->excludes(cli)->excludes(lb);
  cli->excludes(lb);
  stream->add_option("-t,--test", test, "pingpong or stream")
      ->check(CLI::IsMember({"pingpong", "stream"}))
      ->capture_default_str();
  stream->add_option("-s,--sizes", sizes_text,
                     "Message sizes, comma-separated, 1 .. 64M, K/M = 1024/1048576 "
                     "(default: 64 for pingpong, 64K for stream)")
      ->check([](const std::string& v) { return check_size_list(v); });
  auto* dur = stream->add_option("-D,--duration", o.duration_s, "Seconds to measure each size (0.01 .. 3600)")
                  ->check(tools::in_range(0.01, 3600.0))
                  ->capture_default_str();
  auto* iters = stream->add_option("-n,--iters", o.iters,
                                   "Stop each size after this many round trips / messages (1 .. 10^10); with -n "
                                   "and no -D the duration bound is 600 s")
                    ->check(tools::in_range(uint64_t{1}, uint64_t{10'000'000'000ull}));
  stream->add_option("-w,--warmup", o.warmup_s, "Seconds of unreported warm-up per size (0 .. 60)")
      ->check(tools::in_range(0.0, 60.0))
      ->capture_default_str();
  auto* timeout = stream->add_option("--timeout", o.timeout_s,
                                     "Seconds to wait for a connection or for a silent peer (0.1 .. 3600); a "
                                     "server waits 60 s for its first client unless this is given")
                       ->check(tools::in_range(0.1, 3600.0))
                       ->capture_default_str();
  stream->add_option("--sessions", o.sessions, "Server: clients to serve before exiting (1 .. 1000000)")
      ->check(tools::in_range(1u, 1000000u))
      ->capture_default_str();
  stream->add_option("--busy-poll-us", o.busy_poll_us,
                     "Event-loop busy polling before sleeping, microseconds (0 .. 1000000); transport "
                     "options such as shm's busy_poll_us= go in the URL")
      ->check(tools::in_range(0u, 1000000u))
      ->capture_default_str();
  stream->add_option("--cpu", o.cpu, "Pin the client (in --server mode: the server) to this CPU")
      ->check(tools::in_range(0, 4095));
  stream->add_option("--server-cpu", o.server_cpu, "--loopback: pin the server thread to this CPU")
      ->check(tools::in_range(0, 4095));
  stream->add_option("--max-samples", o.max_samples, "Round trips kept per size for percentiles (1000 .. 10^8)")
      ->check(tools::in_range(uint64_t{1000}, uint64_t{100'000'000}))
      ->capture_default_str();
  auto* touch = stream->add_flag("--touch", o.touch,
                                 "stream: the client fills every message before writing it and the server "
                                 "checksums every message it reads (and checks the sum)");
  auto* inplace = stream->add_flag("--inplace", o.inplace,
                                   "stream: the same work done in the connection's own buffers: the client "
                                   "fills each message in space from reserve()/commit(), the server checksums "
                                   "it where peek() shows it (shm: in the ring itself; implies --touch)");
  auto* owned = stream->add_flag("--owned", o.owned,
                                 "stream: each message is a block of the connection's pool() handed over with "
                                 "write_owned() (rdma: no staging copy; READ by the peer above rendezvous_min); "
                                 "with --touch the client fills each block. Needs a transport with a pool() (rdma)");
  auto* peek = stream->add_flag("--peek", o.peek,
                                "stream: the server reads each message where it lies in the connection's "
                                "receive buffer (peek()/consume()) instead of copying it out with read() "
                                "(--inplace does this too); with --owned, no payload copy on either side");
  std::string chunk_text = "64K";
  auto* chunk = stream->add_option("--inplace-chunk", chunk_text,
                                   "--inplace: the most the client fills per reserve()/commit(), 4K .. 64M (a "
                                   "large message is committed in pieces so the server can start on it)")
                    ->capture_default_str()
                    ->check(tools::size_in_range(4096, kMaxMessage));
  stream->add_flag("--json", o.json, "Print one JSON object on stdout instead of tables");
  auto* pr = stream->add_flag("--progress", progress, "Show progress on stderr even when it is not a terminal");
  stream->add_flag("--no-progress", no_progress, "Never show progress")->excludes(pr);

  // ---- memcpy
  CLI::App* mc = app.add_subcommand("memcpy", "single-core memcpy bandwidth baseline for a block size");
  mc->footer("\nCopies one --size block from a source to a destination buffer on one thread until "
             "--duration.\nMB/s is 2^20 bytes per second, as in `stream`.");
  std::string copy_text = "64K";
  mc->add_option("-s,--size", copy_text, "Block size, 1 .. 1G (K/M/G = powers of 1024)")
      ->capture_default_str()
      ->check(tools::size_in_range(1, 1ull << 30));
  mc->add_option("-D,--duration", o.duration_s, "Seconds to measure (0.01 .. 600)")
      ->check(tools::in_range(0.01, 600.0))
      ->capture_default_str();
  mc->add_option("--cpu", o.cpu, "Pin to this CPU")->check(tools::in_range(0, 4095));
  mc->add_flag("--touch", o.touch,
               "Also fill the source block before each copy and checksum the destination after it: the "
               "work of `stream --touch/--inplace`, done on one core");
  mc->add_flag("--json", o.json, "Print one JSON object on stdout");

  // ---- transports
  app.add_subcommand("transports", "list the transport schemes this build has registered");

  try {
    app.parse(argc, argv);
    if (stream->parsed()) {
      o.command = Command::kStream;
      if (!server_url.empty()) {
        o.role = Role::kServer;
        o.url = server_url;
      } else if (!client_url.empty()) {
        o.role = Role::kClient;
        o.url = client_url;
      } else if (!loopback_url.empty()) {
        o.role = Role::kLoopback;
        o.url = loopback_url;
      } else {
        throw CLI::RequiredError("one of --server, --client or --loopback");
      }
      o.test = test == "stream" ? StreamTest::kStream : StreamTest::kPingPong;
      o.sizes = sizes_text.empty() ? std::vector<uint32_t>{o.test == StreamTest::kStream ? 65536u : 64u}
                                   : split_sizes(sizes_text);
      if (iters->count() > 0 && dur->count() == 0) o.duration_s = 600;
      if (timeout->count() > 0) o.client_wait_s = o.timeout_s;
      if (o.role == Role::kServer && (iters->count() > 0 || dur->count() > 0 || !sizes_text.empty()))
        throw CLI::ValidationError("--server", "the client decides sizes, duration and iterations");
      if ((touch->count() > 0 || inplace->count() > 0) && o.role == Role::kServer)
        throw CLI::ValidationError("--server", "the client decides --touch and --inplace");
      if ((touch->count() > 0 || inplace->count() > 0) && o.test != StreamTest::kStream)
        throw CLI::ValidationError("--touch/--inplace", "apply to -t stream only");
      if (owned->count() > 0 && (o.role == Role::kServer || o.test != StreamTest::kStream || o.inplace))
        throw CLI::ValidationError("--owned", "a -t stream client option, not with --inplace");
      if (peek->count() > 0 && (o.role == Role::kServer || o.test != StreamTest::kStream))
        throw CLI::ValidationError("--peek", "a -t stream client option (the client tells the server)");
      if (chunk->count() > 0 && !o.inplace) throw CLI::ValidationError("--inplace-chunk", "needs --inplace");
      (void)parse_size(chunk_text, &o.inplace_chunk);
      if (o.inplace) o.touch = true;
      o.progress = !no_progress && (progress || ::isatty(STDERR_FILENO) == 1) && o.role != Role::kServer;
    } else if (mc->parsed()) {
      o.command = Command::kMemcpy;
      (void)parse_size(copy_text, &o.copy_size);
      if (o.duration_s == 2.0 && mc->get_option("--duration")->count() == 0) o.duration_s = 1.0;
    } else {
      o.command = Command::kTransports;
    }
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }
  *out = std::move(o);
  return std::nullopt;
}

}  // namespace conduit::bench
