// One table per set of transport options: a row gives an option's name, the field it sets,
// its kind and range and its documentation; the default is whatever a default-constructed
// options struct holds.  Parsing (with the range checks and unknown-key errors of
// OptionReader), the defaults and the documentation (docs/TRANSPORTS.md, `--help` texts)
// all come from the same rows, so they cannot drift apart (UCX's config tables).
//
//   struct MyOptions { uint32_t depth = 256; bool srq = false; };
//   constexpr OptionRow<MyOptions> kRows[] = {
//       {"depth", &MyOptions::depth, OptKind::kNumber, 16, 16384, "queue entries"},
//       {"srq", &MyOptions::srq, OptKind::kBool, 0, 0, "use a shared receive queue"},
//   };
//   MyOptions o;
//   CONDUIT_RETURN_IF_ERROR(parse_option_table(ep, std::span(kRows), o));
//
// Setup-path code: parsing allocates; nothing here is meant for a data path.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "conduit/base/status.h"
#include "conduit/transport/endpoint.h"

namespace conduit::transport {

enum class OptKind : uint8_t {
  kNumber,  // decimal integer in [min, max]
  kBytes,   // byte count with optional K/M/G suffix, in [min, max]
  kMillis,  // milliseconds, an integer in [min, max]
  kBool,    // 1/0, true/false, yes/no, on/off
  kString,  // free text (the transport validates it after parsing)
};

template <class O>
struct OptionRow {
  using Field = std::variant<uint64_t O::*, uint32_t O::*, uint16_t O::*, uint8_t O::*, bool O::*, std::string O::*>;
  std::string_view name;
  Field field;
  OptKind kind;
  uint64_t min = 0;
  uint64_t max = 0;
  std::string_view doc;
  // Shown instead of the default value in the docs when the default is computed (e.g.
  // "rx_buffer/4" for a field whose 0 means "derive it"); empty = print the value.
  std::string_view default_text = {};
};

// A row as text, for docs and listings: every transport exposes its table this way.
struct OptionDoc {
  std::string name;
  std::string default_value;  // "1M", "true", "3000"
  std::string range;          // "64K–16M", "bool", "text"
  std::string doc;
  // "| `name` | default | range | doc |" -- the row as docs/TRANSPORTS.md prints it.
  std::string markdown_row() const;
};

// "1M" for 1048576, "96K", "1000" -- the shortest exact K/M/G form.
std::string format_bytes(uint64_t v);

namespace detail {
Result<uint64_t> read_number(OptionReader& r, const std::string& key, OptKind kind, uint64_t fallback, uint64_t min,
                             uint64_t max);
std::string range_text(OptKind kind, uint64_t min, uint64_t max);
std::string value_text(OptKind kind, uint64_t v);
}  // namespace detail

// Fills `out` from the URL's options.  Fields the URL does not name keep the value `out`
// has on entry (pass a default-constructed struct for the table's defaults).  Fails on an
// unknown key, a malformed value or one out of range, naming the option.
template <class O, size_t N>
Status parse_option_table(const Endpoint& ep, std::span<const OptionRow<O>, N> rows, O& out) {
  OptionReader r(ep);
  for (const OptionRow<O>& row : rows) {
    const std::string key(row.name);
    Status s = std::visit(
        [&](auto field) -> Status {
          using T = std::remove_cvref_t<decltype(out.*field)>;
          if constexpr (std::is_same_v<T, bool>) {
            CONDUIT_ASSIGN_OR_RETURN(out.*field, r.get_bool(key, out.*field));
          } else if constexpr (std::is_same_v<T, std::string>) {
            CONDUIT_ASSIGN_OR_RETURN(out.*field, r.get_string(key, out.*field));
          } else {
            CONDUIT_ASSIGN_OR_RETURN(uint64_t v, detail::read_number(r, key, row.kind, out.*field, row.min, row.max));
            out.*field = static_cast<T>(v);
          }
          return {};
        },
        row.field);
    CONDUIT_RETURN_IF_ERROR(s);
  }
  return r.finish();
}

// The rows as text, with the defaults of a default-constructed O.
template <class O, size_t N>
std::vector<OptionDoc> document_option_table(std::span<const OptionRow<O>, N> rows) {
  const O defaults{};
  std::vector<OptionDoc> out;
  for (const OptionRow<O>& row : rows) {
    OptionDoc d;
    d.name = std::string(row.name);
    d.doc = std::string(row.doc);
    d.range = detail::range_text(row.kind, row.min, row.max);
    std::visit(
        [&](auto field) {
          using T = std::remove_cvref_t<decltype(defaults.*field)>;
          if constexpr (std::is_same_v<T, bool>) d.default_value = defaults.*field ? "true" : "false";
          else if constexpr (std::is_same_v<T, std::string>) d.default_value = defaults.*field;
          else d.default_value = detail::value_text(row.kind, static_cast<uint64_t>(defaults.*field));
        },
        row.field);
    if (!row.default_text.empty()) d.default_value = std::string(row.default_text);
    if (d.default_value.empty()) d.default_value = "(none)";
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace conduit::transport
