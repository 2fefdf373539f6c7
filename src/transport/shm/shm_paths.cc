#include "shm/shm_paths.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstdio>
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

namespace {

// Why `dir` is not a private directory of ours ("" if it is).
std::string untrusted_dir(const std::string& dir, const struct stat& st) {
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
  if (S_ISLNK(st.st_mode)) return dir + " is a symbolic link";
  if (!S_ISDIR(st.st_mode)) return dir + " is not a directory";
  if (st.st_uid != ::geteuid())
    return dir + " belongs to uid " + std::to_string(st.st_uid) + ", not to us (uid " + std::to_string(::geteuid()) + ")";
  if ((st.st_mode & 077) != 0) return dir + " has mode " + mode + ": group or others may use it (want 0700)";
  return "";
}

bool absolute(const char* p) { return p != nullptr && p[0] == '/'; }

}  // namespace

Result<std::string> private_socket_dir(bool create) {
  const char* xdg = std::getenv("XDG_RUNTIME_DIR");
  if (absolute(xdg)) {
    struct stat st{};
    if (::lstat(xdg, &st) == 0 && untrusted_dir(xdg, st).empty()) return std::string(xdg);
    CONDUIT_LOG(kDebug) << "shm: not using XDG_RUNTIME_DIR=" << xdg
                        << (::lstat(xdg, &st) == 0 ? " (" + untrusted_dir(xdg, st) + ")" : std::string(" (missing)"));
  }
  const char* tmp = std::getenv("TMPDIR");
  const std::string base = absolute(tmp) ? std::string(tmp) : std::string("/tmp");
  const std::string dir = base + "/conduit-" + std::to_string(::geteuid());
  auto refuse = [&](const std::string& why) {
    return Status(Code::kPermissionDenied, "shm: refusing the socket directory of bare names: " + why +
                                               " (remove it, or name an absolute socket path)");
  };
  struct stat ps{};
  if (::stat(base.c_str(), &ps) != 0) return Status::FromErrnoAuto(errno, "shm stat " + base);
  // Others may write in the parent: only the sticky bit keeps them from renaming our
  // directory away and putting theirs in its place.
  if ((ps.st_mode & S_IWOTH) != 0 && (ps.st_mode & S_ISVTX) == 0)
    return refuse(base + " is writable by everyone and not sticky");
  if (create && ::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return Status::FromErrnoAuto(errno, "shm mkdir " + dir);
  struct stat st{};
  if (::lstat(dir.c_str(), &st) != 0) {
    if (errno == ENOENT && !create) return dir;
    return Status::FromErrnoAuto(errno, "shm stat " + dir);
  }
  if (std::string why = untrusted_dir(dir, st); !why.empty()) return refuse(why);
  return dir;
}

Result<PeerCred> peer_credentials(int fd) {
  ucred cr{};
  socklen_t len = sizeof cr;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0) return Status::FromErrnoAuto(errno, "shm SO_PEERCRED");
  return PeerCred{cr.pid, cr.uid};
}

Status check_peer_uid(const PeerCred& peer, const std::vector<uid_t>& allowed, const std::string& who) {
  if (peer.uid == ::geteuid() || std::find(allowed.begin(), allowed.end(), peer.uid) != allowed.end()) return {};
  std::string list = std::to_string(::geteuid());
  for (uid_t u : allowed) list += "," + std::to_string(u);
  return Status(Code::kPermissionDenied, who + " is uid " + std::to_string(peer.uid) + " (pid " +
                                             std::to_string(peer.pid) + "), not an allowed uid (" + list +
                                             "; the allow_uids option adds others)");
}

std::string pid_string(pid_t pid) { return "pid:" + std::to_string(pid); }

std::string peer_pid_of(int fd) {
  ucred cr{};
  socklen_t len = sizeof cr;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0) return "pid:?";
  return pid_string(cr.pid);
}

}  // namespace shm

Result<std::string> shm_socket_path(std::string_view name, bool create_dir) {
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
    CONDUIT_ASSIGN_OR_RETURN(std::string dir, shm::private_socket_dir(create_dir));
    path = dir + "/conduit-" + std::string(name) + ".sock";
  }
  if (path.size() >= sizeof(sockaddr_un::sun_path))
    return Status(Code::kInvalidArgument, "shm socket path '" + path + "' is longer than " +
                                              std::to_string(sizeof(sockaddr_un::sun_path) - 1) + " bytes");
  return path;
}

}  // namespace conduit::transport
