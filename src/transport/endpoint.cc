#include "conduit/transport/endpoint.h"

#include <charconv>

#include "option_table.h"

namespace conduit::transport {

Result<Endpoint> Endpoint::parse(std::string_view url) {
  const size_t sep = url.find("://");
  if (sep == std::string_view::npos || sep == 0)
    return Status(Code::kInvalidArgument, "endpoint '" + std::string(url) + "': expected scheme://address");
  Endpoint ep;
  ep.scheme = std::string(url.substr(0, sep));
  for (char c : ep.scheme)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '-'))
      return Status(Code::kInvalidArgument, "endpoint '" + std::string(url) + "': bad scheme");
  std::string_view rest = url.substr(sep + 3);
  const size_t q = rest.find('?');
  ep.address = std::string(rest.substr(0, q));
  if (ep.address.empty()) return Status(Code::kInvalidArgument, "endpoint '" + std::string(url) + "': empty address");
  if (q != std::string_view::npos) {
    std::string_view query = rest.substr(q + 1);
    while (!query.empty()) {
      const size_t amp = query.find('&');
      std::string_view kv = query.substr(0, amp);
      query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
      if (kv.empty()) continue;
      const size_t eq = kv.find('=');
      std::string key(kv.substr(0, eq));
      std::string value = eq == std::string_view::npos ? "1" : std::string(kv.substr(eq + 1));
      if (key.empty()) return Status(Code::kInvalidArgument, "endpoint '" + std::string(url) + "': empty option name");
      if (ep.options.count(key) != 0)
        return Status(Code::kInvalidArgument, "endpoint '" + std::string(url) + "': option '" + key + "' given twice");
      ep.options.emplace(std::move(key), std::move(value));
    }
  }
  return ep;
}

std::string Endpoint::to_string() const {
  std::string s = scheme + "://" + address;
  char sepc = '?';
  for (const auto& [k, v] : options) {
    s += sepc;
    s += k + "=" + v;
    sepc = '&';
  }
  return s;
}

Result<std::pair<std::string, uint16_t>> Endpoint::host_port() const {
  std::string_view a = address;
  std::string host;
  std::string_view port_text;
  if (!a.empty() && a.front() == '[') {
    const size_t close = a.find(']');
    if (close == std::string_view::npos || close + 1 >= a.size() || a[close + 1] != ':')
      return Status(Code::kInvalidArgument, "address '" + address + "': expected [ipv6]:port");
    host = std::string(a.substr(1, close - 1));
    port_text = a.substr(close + 2);
  } else {
    const size_t colon = a.rfind(':');
    if (colon == std::string_view::npos || a.find(':') != colon)
      return Status(Code::kInvalidArgument, "address '" + address + "': expected host:port");
    host = std::string(a.substr(0, colon));
    port_text = a.substr(colon + 1);
  }
  unsigned port = 0;
  auto [ptr, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || ptr != port_text.data() + port_text.size() || port > 65535 || port_text.empty())
    return Status(Code::kInvalidArgument, "address '" + address + "': bad port '" + std::string(port_text) + "'");
  if (host.empty()) return Status(Code::kInvalidArgument, "address '" + address + "': empty host");
  return std::make_pair(host, static_cast<uint16_t>(port));
}

// The value parsers are option_table.cc's, so that table-driven and OptionReader-driven
// transports accept the same syntax and say the same things about bad values.
Result<uint64_t> OptionReader::get_u64(const std::string& key, uint64_t fallback, uint64_t min, uint64_t max) {
  used_[key] = true;
  auto it = ep_.options.find(key);
  if (it == ep_.options.end()) return fallback;
  return parse_number_value(ep_.scheme + " option " + key, it->second, min, max);
}

Result<uint64_t> OptionReader::get_bytes(const std::string& key, uint64_t fallback, uint64_t min, uint64_t max) {
  used_[key] = true;
  auto it = ep_.options.find(key);
  if (it == ep_.options.end()) return fallback;
  return parse_bytes_value(ep_.scheme + " option " + key, it->second, min, max);
}

Result<bool> OptionReader::get_bool(const std::string& key, bool fallback) {
  used_[key] = true;
  auto it = ep_.options.find(key);
  if (it == ep_.options.end()) return fallback;
  return parse_bool_value(ep_.scheme + " option " + key, it->second);
}

Result<std::string> OptionReader::get_string(const std::string& key, const std::string& fallback) {
  used_[key] = true;
  auto it = ep_.options.find(key);
  return it == ep_.options.end() ? fallback : it->second;
}

Status OptionReader::finish() const {
  for (const auto& [k, v] : ep_.options)
    if (used_.count(k) == 0) return Status(Code::kInvalidArgument, ep_.scheme + ": unknown option '" + k + "'");
  return {};
}

}  // namespace conduit::transport
