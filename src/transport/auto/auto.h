// auto://host:port — RDMA when a device is present and the peer listens for RDMA, TCP
// otherwise (the SMC-R model).
//
// Client: if this host has an active RDMA device, tries rdma://host:port for at most
// rdma_timeout_ms; on any failure (no route to an RDMA device, rejected: nobody listens,
// timeout) it connects tcp://host:port instead.  The choice is visible: caps().transport is
// "rdma" or "tcp", describe() starts with "auto/", and an INFO log line names it.
// Server: listens on tcp://host:port and, when possible, rdma://host:port (same number;
// rdma_cm's port space is separate from the kernel's TCP ports).
//
// Options: rdma_timeout_ms=2000 (client fallback bound); rdma_retry_ms=0 / rdma_retry_max_ms=
// 60000 (after a fallback, new connections to that host:port go straight to TCP for this
// long, doubling per consecutive failure, then try RDMA again; 0 = try RDMA every time; see
// fallback_schedule.h); any option prefixed "tcp." or "rdma." is passed to that transport
// (auto://h:p?rdma.rx_buffer=65536&tcp.nodelay=0).
#pragma once

#include "conduit/transport/connection.h"

namespace conduit::transport {
Transport* auto_transport();
}
