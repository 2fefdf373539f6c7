// rdma:// URL options: one table (options.cc) drives parsing, defaults and the docs
// (docs/TRANSPORTS.md is checked against it by tests/transport/options_doc_test.cc).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "conduit/base/status.h"
#include "conduit/transport/endpoint.h"
#include "conduit/transport/options.h"

namespace conduit::transport::rdma {

struct RdmaOptions {
  uint64_t rx_buffer = 1u << 20;
  uint64_t rx_initial = 64u << 10;   // the first area advertised; grows to rx_buffer on traffic (normalized <= it)
  uint64_t send_depth = 256;
  uint64_t recv_depth = 256;
  uint64_t inline_bytes = 64;
  uint64_t flush_bytes = 64 * 1024;
  uint64_t zero_copy_min = 4096;  // write_owned: smaller pool slices are copied
  uint64_t rendezvous_min = 256 * 1024;  // write_owned: pool slices this large are READ by the peer (0 = off)
  uint64_t credit_bytes = 0;  // ring mode: return space in steps of this (0 = rx_buffer / 4)
  uint64_t hold_bytes = 0;    // read_owned: views held before owned reads would-block (0 = rx_buffer / 2)
  uint64_t keepalive_ms = 3000;
  uint64_t keepalive_timeout_ms = 10000;
  uint64_t connect_timeout_ms = 10000;
  uint64_t linger_ms = 5000;
  uint64_t backlog = 1024;
  uint64_t max_handshakes = 1024;  // listener: handshakes in progress before requests are refused
  uint64_t poll_us = 100;      // adaptive polling window bound (conduit/base/adaptive_spin.h); 0 = event mode
  uint64_t busy_poll_us = 0;   // fixed polling window instead (overrides poll_us)
  std::string features = "all";
  bool cm_features = true;  // negotiate `features` in the CM handshake's private data (protocol.h, Hello)
  std::string device;
  bool srq = false;  // receives from the loop's shared receive queue (SrqPool)
  uint64_t srq_depth = 4096;
  uint64_t arena_mb = 1024;  // cap of the loop's registered pool per device (the first user sets it)
  uint64_t spare_areas = 2;  // receive areas and staging blocks kept registered ahead of demand (arena.h)
  uint64_t spare_qps = 4;    // QPs with their CQs kept created ahead of demand per shape (qp_stock.h)
  uint64_t retry_cnt = 7;
  uint64_t rnr_retry = 7;
  uint64_t timeout = 17;
  std::string scope = "auto";  // how a peer is kept to its own receive area (arena.h)

  // Derived by parse_options from `features`: the extension bits offered.
  uint64_t feature_mask = 0;
};

std::vector<OptionDoc> option_docs();
Result<RdmaOptions> parse_options(const Endpoint& ep);

}  // namespace conduit::transport::rdma
