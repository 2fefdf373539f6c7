#include "libc.h"

#include <dlfcn.h>

#include <cerrno>
#include <mutex>

namespace conduit::preload {

thread_local bool t_in_preload __attribute__((tls_model("initial-exec"))) = false;

namespace detail {
Libc g_libc;
std::atomic<bool> g_libc_ready{false};

namespace {
// Stands in for a function this libc lacks (close_range before glibc 2.34, say).
long missing(...) {
  errno = ENOSYS;
  return -1;
}

template <class F>
void bind_symbol(F& slot, const char* name) {
  void* p = dlsym(RTLD_NEXT, name);
  slot = p != nullptr ? reinterpret_cast<F>(p) : reinterpret_cast<F>(reinterpret_cast<void (*)()>(&missing));
}
}  // namespace

void resolve_libc() {
  static std::once_flag once;
  std::call_once(once, [] {
#define CONDUIT_PRELOAD_LIBC_BIND(name, ret, args) bind_symbol(g_libc.name, #name);
    CONDUIT_PRELOAD_LIBC_FUNCTIONS(CONDUIT_PRELOAD_LIBC_BIND)
#undef CONDUIT_PRELOAD_LIBC_BIND
    g_libc_ready.store(true, std::memory_order_release);
  });
}

// Resolve at load time, before the program's own code runs.
__attribute__((constructor(101))) void resolve_at_load() { resolve_libc(); }
}  // namespace detail

}  // namespace conduit::preload
