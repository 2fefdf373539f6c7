// The hello exchange of shm:// (wire format: shm_wire.h): sending a hello with its
// descriptors, and what reject reasons mean.
#pragma once

#include <cstddef>
#include <string>

#include "conduit/base/status.h"
#include "shm/shm_wire.h"

namespace conduit::transport::shm {

// Sends one hello (with `nfds` descriptors, at most 3) on a fresh non-blocking socket.
Status send_hello(int fd, const Hello& h, const int* fds, size_t nfds);
// A reject hello carrying `why`.
Hello reject_hello(RejectReason why);
std::string reject_text(uint32_t reason);
// The status code a client reports for a reject reason.
Code reject_code(uint32_t reason);

}  // namespace conduit::transport::shm
