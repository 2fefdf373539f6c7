#include "shm/shm_paths.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "conduit/base/fd.h"
#include "conduit/base/log.h"
#include "shm/shm.h"

namespace conduit::transport {
namespace shm {

bool make_addr(const std::string& path, sockaddr_un* addr) {
  std::memset(addr, 0, sizeof *addr);
  addr->sun_family = AF_UNIX;
  if (path.size() >= sizeof addr->sun_path) return false;
  std::memcpy(addr->sun_path, path.data(), path.size());
  return true;
}

int connect_unix(int fd, const sockaddr_un& addr) {
  int rc;
  do {
    rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
  } while (rc != 0 && errno == EINTR);
  return rc;
}

Status remove_stale_socket(const std::string& path, const sockaddr_un& addr) {
  struct stat st{};
  if (::lstat(path.c_str(), &st) != 0) return errno == ENOENT ? Status() : Status::FromErrnoAuto(errno, "shm stat " + path);
  if (!S_ISSOCK(st.st_mode))
    return Status(Code::kUnavailable, "shm listen: " + path + " exists and is not a socket; not replacing it");
  UniqueFd probe(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!probe) return Status::FromErrnoAuto(errno, "shm socket");
  if (connect_unix(probe.get(), addr) == 0 || errno == EAGAIN)
    return Status(Code::kUnavailable, "shm listen: address in use: a server is listening on " + path);
  if (errno != ECONNREFUSED) return Status::FromErrnoAuto(errno, "shm listen: probing " + path);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return Status::FromErrnoAuto(errno, "shm unlink stale " + path);
  CONDUIT_LOG(kInfo) << "shm listen: replaced stale socket " << path;
  return {};
}

std::string pid_string(pid_t pid) { return "pid:" + std::to_string(pid); }

std::string peer_pid_of(int fd) {
  ucred cr{};
  socklen_t len = sizeof cr;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0) return "pid:?";
  return pid_string(cr.pid);
}

}  // namespace shm

Result<std::string> shm_socket_path(std::string_view name) {
  std::string path;
  if (!name.empty() && name.front() == '/') {
    path = std::string(name);
  } else {
    const bool ok = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '-' ||
             c == '_';
    });
    if (!ok)
      return Status(Code::kInvalidArgument, "shm name '" + std::string(name) +
                                                "': use letters, digits, '.', '-', '_' or an absolute socket path");
    const char* dir = std::getenv("XDG_RUNTIME_DIR");
    path = std::string(dir != nullptr && *dir != '\0' ? dir : "/tmp") + "/conduit-" + std::string(name) + ".sock";
  }
  if (path.size() >= sizeof(sockaddr_un::sun_path))
    return Status(Code::kInvalidArgument, "shm socket path '" + path + "' is longer than " +
                                              std::to_string(sizeof(sockaddr_un::sun_path) - 1) + " bytes");
  return path;
}

}  // namespace conduit::transport
