#include "status_model.h"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "conduit/base/json.h"

namespace conduit::preload {
namespace {

std::string clean(std::string_view v) {
  std::string out(v);
  for (char& c : out)
    if (c == '\t' || c == '\n' || c == '\r') c = ' ';
  return out;
}

uint64_t to_u64(std::string_view v) {
  uint64_t x = 0;
  std::from_chars(v.data(), v.data() + v.size(), x);
  return x;
}

template <class F>
void for_fields(std::string_view line, F f) {
  while (!line.empty()) {
    const size_t tab = line.find('\t');
    const std::string_view field = line.substr(0, tab);
    const size_t eq = field.find('=');
    if (eq != std::string_view::npos) f(field.substr(0, eq), field.substr(eq + 1));
    if (tab == std::string_view::npos) break;
    line.remove_prefix(tab + 1);
  }
}

bool private_dir(const std::string& path, bool create, std::string* why) {
  struct stat st{};
  if (lstat(path.c_str(), &st) != 0) {
    if (errno != ENOENT || !create) return *why = path + ": " + std::strerror(errno), false;
    if (mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) return *why = "mkdir " + path + ": " + std::strerror(errno), false;
    if (lstat(path.c_str(), &st) != 0) return *why = path + ": " + std::strerror(errno), false;
  }
  if (!S_ISDIR(st.st_mode)) return *why = path + " is not a directory", false;
  if (st.st_uid != geteuid()) return *why = path + " belongs to another user", false;
  if ((st.st_mode & 077) != 0) return *why = path + " is open to other users (mode must be 0700)", false;
  return true;
}

std::string exe_of(pid_t pid) {
  char path[64], buf[4096];
  std::snprintf(path, sizeof path, "/proc/%d/exe", static_cast<int>(pid));
  const ssize_t n = readlink(path, buf, sizeof buf - 1);
  if (n <= 0) return "";
  return std::string(buf, static_cast<size_t>(n));
}

}  // namespace

std::string format_status(const ProcessStatus& p) {
  std::string out = "conduit-preload-status\tv=1\n";
  out += "process\tpid=" + std::to_string(p.pid) + "\texe=" + clean(p.exe) + "\tname=" + clean(p.name) +
         "\tmode=" + clean(p.mode) +
         "\tstarted_ms=" + std::to_string(p.started_ms) + "\tfast=" + std::to_string(p.fast) +
         "\ttcp=" + std::to_string(p.tcp) + "\tfallback=" + std::to_string(p.fallback) +
         "\tio_uring=" + (p.io_uring ? "1" : "0") + "\n";
  for (const SocketStatus& s : p.sockets) {
    out += "socket\tfd=" + std::to_string(s.fd) + "\trole=" + clean(s.role) + "\tphase=" + clean(s.phase) +
           "\tmode=" + clean(s.mode) + "\tlocal=" + clean(s.local) + "\tpeer=" + clean(s.peer) +
           "\tbytes_in=" + std::to_string(s.bytes_in) + "\tbytes_out=" + std::to_string(s.bytes_out) +
           "\tage_ms=" + std::to_string(s.age_ms) + "\treason=" + clean(s.reason);
    if (s.has_channel)
      for (const auto& [k, v] : transport::snapshot_fields(s.channel)) out += "\tch." + k + "=" + clean(v);
    out += "\n";
  }
  return out;
}

Result<ProcessStatus> parse_status(std::string_view text) {
  ProcessStatus p;
  bool header = false, have_process = false;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    const std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    if (line.empty()) continue;
    const std::string_view kind = line.substr(0, line.find('\t'));
    if (kind == "conduit-preload-status") {
      for_fields(line, [&](std::string_view k, std::string_view v) {
        if (k == "v" && v == "1") header = true;
      });
    } else if (kind == "process") {
      have_process = true;
      for_fields(line, [&](std::string_view k, std::string_view v) {
        if (k == "pid") p.pid = static_cast<pid_t>(to_u64(v));
        else if (k == "exe") p.exe = std::string(v);
        else if (k == "name") p.name = std::string(v);
        else if (k == "mode") p.mode = std::string(v);
        else if (k == "started_ms") p.started_ms = to_u64(v);
        else if (k == "fast") p.fast = to_u64(v);
        else if (k == "tcp") p.tcp = to_u64(v);
        else if (k == "fallback") p.fallback = to_u64(v);
        else if (k == "io_uring") p.io_uring = v == "1";
      });
    } else if (kind == "socket") {
      SocketStatus s;
      for_fields(line, [&](std::string_view k, std::string_view v) {
        if (k == "fd") s.fd = static_cast<int>(to_u64(v));
        else if (k == "role") s.role = std::string(v);
        else if (k == "phase") s.phase = std::string(v);
        else if (k == "mode") s.mode = std::string(v);
        else if (k == "local") s.local = std::string(v);
        else if (k == "peer") s.peer = std::string(v);
        else if (k == "bytes_in") s.bytes_in = to_u64(v);
        else if (k == "bytes_out") s.bytes_out = to_u64(v);
        else if (k == "age_ms") s.age_ms = to_u64(v);
        else if (k == "reason") s.reason = std::string(v);
        else if (k.substr(0, 3) == "ch." && transport::snapshot_field(s.channel, k.substr(3), v)) s.has_channel = true;
      });
      p.sockets.push_back(std::move(s));
    }
  }
  if (!header || !have_process || p.pid <= 0)
    return Status(Code::kProtocolError, "not a conduit-preload status file (version 1)");
  return p;
}

Result<std::string> status_dir(bool create) {
  std::string why;
  if (const char* xdg = std::getenv("XDG_RUNTIME_DIR"); xdg != nullptr && xdg[0] == '/') {
    std::string base(xdg), ignored;
    if (private_dir(base, false, &ignored)) {
      const std::string d = base + "/conduit-preload";
      if (private_dir(d, create, &why)) return d;
      return Status(Code::kPermissionDenied, "status directory: " + why);
    }
  }
  const char* tmp = std::getenv("TMPDIR");
  std::string base = (tmp != nullptr && tmp[0] == '/') ? tmp : "/tmp";
  const std::string d = base + "/conduit-preload-" + std::to_string(geteuid());
  if (private_dir(d, create, &why)) return d;
  return Status(Code::kPermissionDenied, "status directory: " + why);
}

std::vector<ProcessStatus> read_all_status() {
  std::vector<ProcessStatus> out;
  Result<std::string> dir = status_dir(false);
  if (!dir.ok()) return out;
  DIR* d = opendir(dir->c_str());
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() < 8 || name.substr(name.size() - 7) != ".status") continue;
    const std::string path = *dir + "/" + name;
    std::FILE* f = std::fopen(path.c_str(), "re");
    if (f == nullptr) continue;
    std::string text;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
    std::fclose(f);
    Result<ProcessStatus> p = parse_status(text);
    if (!p.ok()) continue;
    const bool gone = kill(p->pid, 0) != 0 && errno == ESRCH;
    if (gone || exe_of(p->pid) != p->exe) {
      unlink(path.c_str());  // the process is gone, or its pid now runs another program
      continue;
    }
    out.push_back(std::move(p).value());
  }
  closedir(d);
  std::sort(out.begin(), out.end(), [](const ProcessStatus& a, const ProcessStatus& b) { return a.pid < b.pid; });
  return out;
}

std::string render_table(const std::vector<ProcessStatus>& all) {
  std::string out;
  char line[1024];
  std::snprintf(line, sizeof line, "%-8s %-16s %5s %-8s %-15s %-5s %-24s %-24s %12s %12s  %s\n", "PID", "PROGRAM", "FD",
                "ROLE", "STATE", "MODE", "LOCAL", "PEER", "BYTES_IN", "BYTES_OUT", "REASON");
  out += line;
  for (const ProcessStatus& p : all) {
    std::string prog = !p.name.empty() ? p.name : p.exe.substr(p.exe.find_last_of('/') + 1);
    if (prog.size() > 16) prog.resize(16);
    for (const SocketStatus& s : p.sockets) {
      std::snprintf(line, sizeof line, "%-8d %-16s %5d %-8s %-15s %-5s %-24s %-24s %12llu %12llu  %s\n",
                    static_cast<int>(p.pid), prog.c_str(), s.fd, s.role.c_str(), s.phase.c_str(), s.mode.c_str(),
                    s.local.c_str(), s.peer.c_str(), static_cast<unsigned long long>(s.bytes_in),
                    static_cast<unsigned long long>(s.bytes_out), s.reason.c_str());
      out += line;
    }
    std::snprintf(line, sizeof line, "%-8d %-16s   total: %llu fast, %llu tcp (%llu fallbacks)%s\n",
                  static_cast<int>(p.pid), prog.c_str(), static_cast<unsigned long long>(p.fast),
                  static_cast<unsigned long long>(p.tcp), static_cast<unsigned long long>(p.fallback),
                  p.io_uring ? ", io_uring in use" : "");
    out += line;
  }
  return out;
}

std::string render_json(const std::vector<ProcessStatus>& all) {
  std::string out = "[";
  for (size_t i = 0; i < all.size(); ++i) {
    const ProcessStatus& p = all[i];
    out += (i ? ",\n" : "\n");
    out += "{\"pid\":" + std::to_string(p.pid) + ",\"exe\":" + json_string(p.exe) + ",\"name\":" + json_string(p.name) + ",\"mode\":" + json_string(p.mode) +
           ",\"started_ms\":" + std::to_string(p.started_ms) + ",\"fast\":" + std::to_string(p.fast) +
           ",\"tcp\":" + std::to_string(p.tcp) + ",\"fallback\":" + std::to_string(p.fallback) +
           ",\"io_uring\":" + (p.io_uring ? "true" : "false") + ",\"sockets\":[";
    for (size_t j = 0; j < p.sockets.size(); ++j) {
      const SocketStatus& s = p.sockets[j];
      out += (j ? "," : "");
      out += "{\"fd\":" + std::to_string(s.fd) + ",\"role\":" + json_string(s.role) + ",\"phase\":" + json_string(s.phase) +
             ",\"mode\":" + json_string(s.mode) + ",\"local\":" + json_string(s.local) + ",\"peer\":" + json_string(s.peer) +
             ",\"bytes_in\":" + std::to_string(s.bytes_in) + ",\"bytes_out\":" + std::to_string(s.bytes_out) +
             ",\"age_ms\":" + std::to_string(s.age_ms) + ",\"reason\":" + json_string(s.reason) + "}";
    }
    out += "]}";
  }
  out += all.empty() ? "]\n" : "\n]\n";
  return out;
}

}  // namespace conduit::preload
