// A program outside the Conduit tree, built against the installed package.
#include <conduit/base/status.h>
#include <conduit/verbs/verbs.h>

#include <cstdio>

int main() {
  auto devices = conduit::verbs::list_devices();
  if (!devices.ok()) {
    std::printf("error: %s\n", devices.status().to_string().c_str());
    return 1;
  }
  conduit::Status s(conduit::Code::kWouldBlock, "");
  std::printf("consumer ok: %zu device(s), would_block_is_error=%d\n", devices->size(), s.is_error());
  return 0;
}
