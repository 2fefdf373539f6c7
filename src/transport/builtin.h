// The table of transports compiled into the library (private to the transport layer).
#pragma once

#include <vector>

#include "conduit/transport/connection.h"

namespace conduit::transport {
std::vector<Transport*> builtin_transports();
}
