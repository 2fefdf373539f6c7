#include "mimalloc_dl.h"

#include <dlfcn.h>

#include <cstdlib>

namespace conduit::bench {

const Mimalloc& mimalloc() {
  static const Mimalloc m = [] {
    Mimalloc out;
    void* h = dlopen(CONDUIT_MIMALLOC_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
      const char* e = dlerror();
      out.error = std::string("dlopen ") + CONDUIT_MIMALLOC_LIBRARY + ": " + (e ? e : "?");
      return out;
    }
    out.malloc = reinterpret_cast<void* (*)(size_t)>(dlsym(h, "mi_malloc"));
    out.free = reinterpret_cast<void (*)(void*)>(dlsym(h, "mi_free"));
    auto version = reinterpret_cast<int (*)()>(dlsym(h, "mi_version"));
    if (!out.malloc || !out.free || !version) {
      out.error = std::string(CONDUIT_MIMALLOC_LIBRARY) + " lacks mi_malloc/mi_free/mi_version";
      out.malloc = nullptr;
      return out;
    }
    out.version = version();
    return out;  // never dlclose'd: blocks may outlive any scope
  }();
  return m;
}

std::string malloc_provider() {
  Dl_info info{};
  void* (*fn)(size_t) = &std::malloc;
  if (dladdr(reinterpret_cast<void*>(fn), &info) == 0 || info.dli_fname == nullptr) return "?";
  std::string path = info.dli_fname;
  return path.substr(path.find_last_of('/') + 1);
}

}  // namespace conduit::bench
