// Connection::snapshot() for every transport, and the snapshot's key=value spelling.
#include <charconv>

#include "conduit/transport/connection.h"

namespace conduit::transport {
namespace {

// One row per text field: its key and where it lives (a string, or a counter).
struct TextRow {
  std::string_view key;
  std::string ConnSnapshot::* text = nullptr;
  uint64_t ConnStats::* stat = nullptr;
};
constexpr TextRow kRows[] = {
    {"transport", &ConnSnapshot::transport}, {"state", &ConnSnapshot::state},
    {"local", &ConnSnapshot::local},         {"peer", &ConnSnapshot::peer},
    {"ext", &ConnSnapshot::extensions},      {"fallback", &ConnSnapshot::fallback},
    {"error", &ConnSnapshot::error},         {"bytes_in", nullptr, &ConnStats::bytes_read},
    {"bytes_out", nullptr, &ConnStats::bytes_written}, {"reads", nullptr, &ConnStats::reads},
    {"writes", nullptr, &ConnStats::writes}, {"wakeups", nullptr, &ConnStats::wakeups},
    {"pinned", nullptr, &ConnStats::pinned_bytes},     {"qp_state", &ConnSnapshot::qp_state},
    {"device", &ConnSnapshot::device},
};
constexpr std::string_view kCounterPrefix = "ctr.";

template <class T>
T number(std::string_view v) {
  T x{};
  std::from_chars(v.data(), v.data() + v.size(), x);
  return x;
}

}  // namespace

ConnSnapshot Connection::snapshot() const {
  ConnSnapshot s;
  const Caps c = caps();
  s.transport = std::string(c.transport);
  s.extensions = std::string(c.extensions);
  s.state = std::string(conn_state_name(state()));
  s.local = local_address();
  s.peer = peer_address();
  if (!error().ok()) s.error = error().to_string();
  s.stats = stats();
  return s;
}

std::vector<std::pair<std::string, std::string>> snapshot_fields(const ConnSnapshot& s) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const TextRow& r : kRows) {
    std::string v = r.text ? s.*r.text : std::to_string(s.stats.*r.stat);
    if (r.text && v.empty()) continue;  // absent, not ""
    out.emplace_back(std::string(r.key), std::move(v));
  }
  out.emplace_back("credits", std::to_string(s.credits));
  if (s.qpn != 0) out.emplace_back("qpn", std::to_string(s.qpn));
  for (const auto& [name, value] : s.device_counters)
    out.emplace_back(std::string(kCounterPrefix) + name, std::to_string(value));
  return out;
}

bool snapshot_field(ConnSnapshot& s, std::string_view key, std::string_view value) {
  for (const TextRow& r : kRows) {
    if (r.key != key) continue;
    if (r.text)
      s.*r.text = std::string(value);
    else
      s.stats.*r.stat = number<uint64_t>(value);
    return true;
  }
  if (key == "credits") return s.credits = number<int64_t>(value), true;
  if (key == "qpn") return s.qpn = number<uint32_t>(value), true;
  if (key.substr(0, kCounterPrefix.size()) == kCounterPrefix) {
    s.device_counters.emplace_back(std::string(key.substr(kCounterPrefix.size())), number<uint64_t>(value));
    return true;
  }
  return false;
}

}  // namespace conduit::transport
