// conduit-perf: perftest-style RDMA micro-benchmarks (see README.md and --help).
#include <cstdio>

#include "options.h"
#include "runner.h"

int main(int argc, char** argv) {
  conduit::perf::Options opts;
  if (std::optional<int> rc = conduit::perf::parse_options(argc, argv, &opts)) return *rc;
  if (conduit::Status st = conduit::perf::run(opts); !st.ok()) {
    std::fflush(stdout);
    std::fprintf(stderr, "conduit-perf: %s\n", st.to_string().c_str());
    return 1;
  }
  return 0;
}
