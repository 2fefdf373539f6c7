// Runs one conduit-perf invocation end to end (see runner.cc).
#pragma once

#include "conduit/base/status.h"
#include "options.h"

namespace conduit::perf {

// Connects (or accepts), runs every message size, prints the results.  Errors are returned
// with the test and size they happened in; nothing here exits the process.
Status run(const Options& opts);

}  // namespace conduit::perf
