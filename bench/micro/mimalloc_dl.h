// mimalloc as an explicit allocator, not a global override.  Debian's libmimalloc.so exports
// malloc/free itself, so linking it would silently turn every malloc in the process (the
// "malloc" rows included) into mimalloc.  It is dlopen'ed RTLD_LOCAL instead: its symbols do
// not enter the global scope, and the benchmark calls mi_malloc/mi_free through pointers.
// main.cc checks that the process's malloc is still glibc's.
#pragma once

#include <cstddef>
#include <string>

namespace conduit::bench {

struct Mimalloc {
  void* (*malloc)(size_t) = nullptr;
  void (*free)(void*) = nullptr;
  int version = 0;
  std::string error;  // non-empty when the library could not be loaded
};

// Loaded once (thread-safe); CONDUIT_MIMALLOC_LIBRARY is the path CMake found.
const Mimalloc& mimalloc();

// Which shared object the process's malloc comes from ("libc.so.6" expected).
std::string malloc_provider();

}  // namespace conduit::bench
