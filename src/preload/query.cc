// A small C API a program (or a test) can look up with dlsym to ask the preload about an fd.
#include <cstdio>
#include <cstring>

#include "process.h"

#define CONDUIT_EXPORT extern "C" __attribute__((visibility("default")))

using namespace conduit::preload;

// Writes "<phase> <mode> <reason>" for an fd of ours (phase: fast, tcp, listening, ...; mode:
// shm, rdma or tcp) and returns 0; returns -1 if the fd is not a socket of ours.
CONDUIT_EXPORT int conduit_preload_describe(int fd, char* buf, size_t len) {
  if (buf == nullptr || len == 0 || !(fd_tag(fd) & kTagTracked)) return -1;
  EngineLock lk;
  std::shared_ptr<Socket> s = find_socket(fd);
  if (!s) return -1;
  const std::string mode = s->phase == Phase::kTcp ? "tcp" : std::string(mode_name(s->mode));
  std::snprintf(buf, len, "%s %s %s", std::string(phase_name(s->phase)).c_str(), mode.c_str(), s->reason.c_str());
  return 0;
}
