// conduit-memory-bench: Google Benchmark's main, plus the facts a reader of the JSON needs
// to compare runs (allocator versions, hugepage reservation, the kernel).
#include <benchmark/benchmark.h>
#include <sys/utsname.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "mimalloc_dl.h"

namespace {
std::string first_line(const char* path) {
  std::ifstream in(path);
  std::string s;
  std::getline(in, s);
  return s.empty() ? "?" : s;
}
}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  utsname u{};
  if (uname(&u) == 0) benchmark::AddCustomContext("kernel", u.release);
  const auto& mi = conduit::bench::mimalloc();
  benchmark::AddCustomContext("mimalloc", mi.error.empty() ? "version " + std::to_string(mi.version) : mi.error);
  // The "malloc" rows must be glibc's: a process-wide override (LD_PRELOAD) would make them
  // something else.
  const std::string provider = conduit::bench::malloc_provider();
  benchmark::AddCustomContext("malloc_provider", provider);
  if (provider.rfind("libc.so", 0) != 0)
    std::fprintf(stderr, "conduit-memory-bench: warning: malloc comes from %s, not glibc\n", provider.c_str());
  benchmark::AddCustomContext("nr_hugepages", first_line("/proc/sys/vm/nr_hugepages"));
  benchmark::AddCustomContext("transparent_hugepage", first_line("/sys/kernel/mm/transparent_hugepage/enabled"));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
