// The options of shm:// URLs, written once: kShmOptions below is what the URL is parsed
// with, where the defaults come from, and what docs/TRANSPORTS.md shows (rendered by
// shm_options_markdown(); ShmOptionTable.DocsShowTheTable keeps the two equal).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "conduit/transport/endpoint.h"
#include "option_table.h"

namespace conduit::transport::shm {

inline constexpr uint64_t kMinRing = 4096;
inline constexpr uint64_t kMaxRing = uint64_t{1} << 30;

struct ShmOptions {
  uint64_t ring = 0;
  bool ring_given = false;  // the URL names ring=: a client then asks for exactly that size
  uint64_t max_ring = 0;    // 0 in the URL's absence: then `ring`
  uint64_t poll_us = 0;
  uint64_t busy_poll_us = 0;
  uint64_t hold_bytes = 0;  // 0 in the URL's absence: then ring / 2 (of the connection's ring)
  uint64_t mode = 0;
  uint64_t connect_timeout_ms = 0;
  uint64_t max_handshakes = 0;
  std::vector<uid_t> allow_uids;  // peers besides our own effective uid
};

// Custom parsers and checks of the table (shm_options.cc).
Status check_ring(std::string_view what, std::string_view text, ShmOptions& o);
Status parse_mode(std::string_view what, std::string_view text, ShmOptions& o);
Status parse_uid_list(std::string_view what, std::string_view text, ShmOptions& o);

using ShmOptionRow = OptionRow<ShmOptions>;
inline constexpr ShmOptionRow kShmOptions[] = {
    ShmOptionRow::bytes_row("ring", "1M", kMinRing, kMaxRing, &ShmOptions::ring,
                            "bytes per direction. The listener's value is what its clients get by default; a "
                            "client that gives `ring=` asks for that size instead")
        .check(check_ring, "power of two"),
    ShmOptionRow::bytes_row("max_ring", "", kMinRing, kMaxRing, &ShmOptions::max_ring,
                            "the largest ring a client may ask for. A bigger request is refused with a reject "
                            "hello that names this bound (the client's connect fails with `kInvalidArgument`). "
                            "Both rings of every connection are shared memory the server holds for the "
                            "connection's life, reported as `ConnStats::pinned_bytes`")
        .listener()
        .default_is("= `ring`"),
    ShmOptionRow::number_row("poll_us", "50", 0, 1'000'000, &ShmOptions::poll_us,
                             "adaptive polling: after running out of work, spin on the rings for up to this "
                             "long before announcing sleep. The window tunes itself from the idle gaps seen: it "
                             "polls while traffic is recent and dense and turns itself off when the connection "
                             "idles (`src/transport/poll/`). Gaps of up to 8x this that a probe shows spinning to "
                             "shorten (two sides waiting on each other where wake-ups are slow) lift the bound to "
                             "as much as 8x. The connections of one loop spin together. A spin "
                             "that loses its CPU (more runnable threads than cores) stops polling for a "
                             "cool-down of 1 ms, doubling to 1 s while that recurs. 0 = pure event mode: "
                             "announce sleep and block in epoll at once"),
    ShmOptionRow::number_row("busy_poll_us", "0", 0, 1'000'000, &ShmOptions::busy_poll_us,
                             "fixed polling instead: spin this long without work before announcing sleep, "
                             "never tuned (trades a core for the wakeup: for dedicated cores). Non-zero "
                             "overrides `poll_us`"),
    ShmOptionRow::bytes_row("hold_bytes", "", 1, kMaxRing, &ShmOptions::hold_bytes,
                            "bytes of the receive ring the application may hold as `read_owned()` slices "
                            "(views of the ring; the writer gets their space back only when they are "
                            "released). At the cap, owned reads would-block until a slice is released. "
                            "Capped at `ring`")
        .default_is("= `ring` / 2"),
    ShmOptionRow::custom_row("mode", "0600", parse_mode, "octal, at most 0777",
                             "permissions of the socket file, set before `listen()`. A bare name's socket "
                             "lies in a 0700 directory of this uid anyway: use an absolute path to let "
                             "others in")
        .listener(),
    ShmOptionRow::custom_row("allow_uids", "", parse_uid_list, "comma-separated uids",
                             "the peer's uid (`SO_PEERCRED`) must be ours or one of these, on both sides: a "
                             "server refuses other clients before their hello (`kPermissionDenied`), a client "
                             "refuses a server of another uid before it sends anything, so a squatted path "
                             "cannot impersonate the server")
        .default_is("none: own uid only"),
    ShmOptionRow::number_row("connect_timeout_ms", "10000", 1, 3'600'000, &ShmOptions::connect_timeout_ms,
                             "bound on the handshake (client: connect; server: each accepted connection's hello)"),
    ShmOptionRow::number_row("max_handshakes", "64", 1, 65536, &ShmOptions::max_handshakes,
                             "accepted connections whose hello is still awaited, at most. At the bound the "
                             "listener stops accepting until one finishes (later clients wait in the kernel's "
                             "backlog, holding nothing of ours); `Listener::stats().handshakes` counts them")
        .listener(),
};

// Parses an endpoint's options with kShmOptions and cross-checks them.
Result<ShmOptions> parse_shm_options(const Endpoint& ep);
// The docs table (docs/TRANSPORTS.md, section shm://).
std::string shm_options_markdown();

}  // namespace conduit::transport::shm
