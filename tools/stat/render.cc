#include "render.h"

#include <cstdio>

#include "conduit/base/json.h"

namespace conduit::stat {
namespace {

std::string or_dash(const std::string& s) { return s.empty() ? "-" : s; }

std::string qp_text(const transport::ConnSnapshot& s) {
  if (s.qp_state.empty()) return "-";
  return s.qp_state + "/" + std::to_string(s.qpn);
}

std::string credits_text(int64_t c) { return c < 0 ? "-" : std::to_string(c); }

// An integer as snapshot_fields prints one ("-1", "42"), not "-" or "1.2.3.4:5".
bool integer(const std::string& v) {
  const size_t first = !v.empty() && v[0] == '-' ? 1 : 0;
  return v.size() > first && v.find_first_not_of("0123456789", first) == std::string::npos;
}

}  // namespace

std::string render_table(const std::vector<Row>& rows, bool details) {
  std::string out;
  char line[2048];
  std::snprintf(line, sizeof line, "%-24s %4s %-8s %-9s %-10s %-22s %-22s %12s %12s %9s %8s %-15s %s\n", "SOURCE", "FD",
                "ROLE", "TRANSPORT", "STATE", "LOCAL", "PEER", "BYTES_IN", "BYTES_OUT", "CREDITS", "WAKEUPS",
                "EXTENSIONS", "QP");
  out += line;
  for (const Row& r : rows) {
    const transport::ConnSnapshot& s = r.conn;
    std::string src = r.source;
    if (src.size() > 24) src.resize(24);
    const std::string fd = r.fd >= 0 ? std::to_string(r.fd) : "-";
    std::snprintf(line, sizeof line, "%-24s %4s %-8s %-9s %-10s %-22s %-22s %12llu %12llu %9s %8llu %-15s %s\n",
                  src.c_str(), fd.c_str(), or_dash(r.role).c_str(), or_dash(s.transport).c_str(),
                  or_dash(s.state).c_str(), or_dash(s.local).c_str(), or_dash(s.peer).c_str(),
                  static_cast<unsigned long long>(s.stats.bytes_read),
                  static_cast<unsigned long long>(s.stats.bytes_written), credits_text(s.credits).c_str(),
                  static_cast<unsigned long long>(s.stats.wakeups), or_dash(s.extensions).c_str(), qp_text(s).c_str());
    out += line;
    // Why it is not fast, and why it failed: shown always, they are the diagnosis.
    if (!s.fallback.empty()) out += "    fallback: " + s.fallback + "\n";
    if (!s.error.empty()) out += "    error: " + s.error + "\n";
    if (!r.note.empty()) out += "    rendezvous: " + r.note + "\n";
    if (!details) continue;
    out += "    reads " + std::to_string(s.stats.reads) + "  writes " + std::to_string(s.stats.writes) +
           "  pinned " + std::to_string(s.stats.pinned_bytes) + " B\n";
    if (!s.device.empty()) {
      out += "    device " + s.device + " counters (the whole port, every QP on it):";
      if (s.device_counters.empty()) out += " none exposed";
      int n = 0;
      for (const auto& [name, value] : s.device_counters) {
        out += (n++ % 4 == 0) ? "\n      " : "  ";
        out += name + " " + std::to_string(value);
      }
      out += "\n";
    }
  }
  if (rows.empty()) out += "(no connections)\n";
  return out;
}

std::string render_json(const std::vector<Row>& rows) {
  std::string out = "[";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    out += i ? ",\n" : "\n";
    out += "{\"source\":" + json_string(r.source);
    if (r.pid != 0) out += ",\"pid\":" + std::to_string(r.pid);
    if (r.fd >= 0) out += ",\"fd\":" + std::to_string(r.fd);
    out += ",\"role\":" + json_string(r.role);
    if (!r.note.empty()) out += ",\"offers\":" + json_string(r.note);
    // The snapshot's own key spelling (transport::snapshot_fields); numbers stay numbers.
    for (const auto& [k, v] : transport::snapshot_fields(r.conn)) {
      out += "," + json_string(k) + ":" + (integer(v) ? v : json_string(v));
    }
    out += "}";
  }
  out += rows.empty() ? "]\n" : "\n]\n";
  return out;
}

}  // namespace conduit::stat
