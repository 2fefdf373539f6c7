// One row per transport option -- name, default, range, side, meaning, and the field it
// sets -- from which the transport parses its URL options, fills in defaults and renders
// its docs table (UCX's config tables: an option is written once).  Private to the
// transport layer.  shm:// and rdma:// use it; tcp and auto still read their few options
// with OptionReader.
//
//   struct MyOptions { uint64_t depth = 0; bool fast = false; };
//   using Row = OptionRow<MyOptions>;
//   constexpr Row kRows[] = {
//       Row::number_row("depth", "16", 1, 4096, &MyOptions::depth, "queue entries"),
//       Row::bool_row("fast", "false", &MyOptions::fast, "...").listener()};
//   Result<MyOptions> o = parse_option_table<MyOptions>(kRows, endpoint);
//
// Thread-safe (pure functions over constant tables); cost is one pass over the rows and
// the URL's options.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "conduit/base/status.h"
#include "conduit/transport/endpoint.h"
#include "conduit/transport/options.h"

namespace conduit::transport {

// How a value is written.  kBytes takes K/M/G suffixes (powers of 1024).
enum class OptionKind : uint8_t { kNumber, kBytes, kBool, kCustom };
// Which side of a connection reads the option (every side accepts every key, so that one
// URL serves both; the other side ignores it).
enum class OptionSide : uint8_t { kBoth, kListener, kClient };

// Checks and stores one value.  `what` is "<scheme> option <key>", for error messages.
template <class O>
using OptionParseFn = Status (*)(std::string_view what, std::string_view text, O& out);

template <class O>
struct OptionRow {
  std::string_view name;
  OptionKind kind = OptionKind::kNumber;
  // The default, written as a user would write it, and parsed like a user's value (so a
  // default outside the range fails every parse, which a test catches at once).  Empty:
  // nothing is parsed, the field keeps its initial value, and default_doc says what applies.
  std::string_view fallback;
  uint64_t min = 0, max = 0;       // kNumber, kBytes
  uint64_t O::*number = nullptr;   // kNumber, kBytes
  bool O::*flag = nullptr;         // kBool
  // kCustom: parses and stores the value.  Other kinds: an extra check run after the value
  // is stored (e.g. "a power of two"); null for none.
  OptionParseFn<O> custom = nullptr;
  // The docs' range column: kCustom's whole text, else appended to the generated
  // "min–max" (e.g. "power of two").
  std::string_view range_note;
  std::string_view default_doc;    // docs' default column when it is not `fallback`
  OptionSide side = OptionSide::kBoth;
  std::string_view doc;

  // Rows are built with these (GCC warns about designated initializers that leave fields
  // to their defaults), then refined: .check(fn, note), .listener(), .default_is("...").
  static constexpr OptionRow number_row(std::string_view name, std::string_view fallback, uint64_t min, uint64_t max,
                                        uint64_t O::*field, std::string_view doc) {
    OptionRow r = base_row(name, OptionKind::kNumber, fallback, doc);
    r.min = min;
    r.max = max;
    r.number = field;
    return r;
  }
  static constexpr OptionRow bytes_row(std::string_view name, std::string_view fallback, uint64_t min, uint64_t max,
                                       uint64_t O::*field, std::string_view doc) {
    OptionRow r = number_row(name, fallback, min, max, field, doc);
    r.kind = OptionKind::kBytes;
    return r;
  }
  static constexpr OptionRow bool_row(std::string_view name, std::string_view fallback, bool O::*field,
                                      std::string_view doc) {
    OptionRow r = base_row(name, OptionKind::kBool, fallback, doc);
    r.flag = field;
    return r;
  }
  static constexpr OptionRow custom_row(std::string_view name, std::string_view fallback, OptionParseFn<O> parse,
                                        std::string_view range, std::string_view doc) {
    OptionRow r = base_row(name, OptionKind::kCustom, fallback, doc);
    r.custom = parse;
    r.range_note = range;
    return r;
  }
  static constexpr OptionRow base_row(std::string_view name, OptionKind kind, std::string_view fallback,
                                      std::string_view doc) {
    OptionRow r{};
    r.name = name;
    r.kind = kind;
    r.fallback = fallback;
    r.doc = doc;
    return r;
  }
  constexpr OptionRow check(OptionParseFn<O> fn, std::string_view note) const {
    OptionRow r = *this;
    r.custom = fn;
    r.range_note = note;
    return r;
  }
  constexpr OptionRow listener() const {
    OptionRow r = *this;
    r.side = OptionSide::kListener;
    return r;
  }
  constexpr OptionRow client() const {
    OptionRow r = *this;
    r.side = OptionSide::kClient;
    return r;
  }
  constexpr OptionRow default_is(std::string_view text) const {
    OptionRow r = *this;
    r.default_doc = text;
    return r;
  }
};

// Value parsers shared by the table and OptionReader.  Errors are kInvalidArgument and
// name `what` and the value.
Result<uint64_t> parse_number_value(std::string_view what, std::string_view text, uint64_t min, uint64_t max);
Result<uint64_t> parse_bytes_value(std::string_view what, std::string_view text, uint64_t min, uint64_t max);
Result<bool> parse_bool_value(std::string_view what, std::string_view text);
// 4096 -> "4K", 1048576 -> "1M", 5000 -> "5000".
std::string format_bytes(uint64_t v);

namespace option_detail {

template <class O>
Status apply(const OptionRow<O>& row, const std::string& scheme, std::string_view text, O& out) {
  const std::string what = scheme + " option " + std::string(row.name);
  switch (row.kind) {
    case OptionKind::kNumber:
    case OptionKind::kBytes: {
      CONDUIT_ASSIGN_OR_RETURN(uint64_t v, row.kind == OptionKind::kBytes
                                               ? parse_bytes_value(what, text, row.min, row.max)
                                               : parse_number_value(what, text, row.min, row.max));
      out.*row.number = v;
      break;
    }
    case OptionKind::kBool: {
      CONDUIT_ASSIGN_OR_RETURN(bool v, parse_bool_value(what, text));
      out.*row.flag = v;
      break;
    }
    case OptionKind::kCustom: break;
  }
  return row.custom != nullptr ? row.custom(what, text, out) : Status();
}

std::string default_text(OptionKind kind, std::string_view fallback, std::string_view default_doc);
std::string range_text(OptionKind kind, uint64_t min, uint64_t max, std::string_view note);
std::string markdown_row(std::string_view name, std::string_view default_text, std::string_view range,
                         OptionSide side, std::string_view doc);

}  // namespace option_detail

// Defaults from the rows, then the URL's values; an option the rows do not name is an
// error (like OptionReader::finish()).
template <class O>
Result<O> parse_option_table(std::span<const OptionRow<O>> rows, const Endpoint& ep) {
  O out{};
  for (const OptionRow<O>& row : rows)
    if (!row.fallback.empty()) CONDUIT_RETURN_IF_ERROR(option_detail::apply(row, ep.scheme, row.fallback, out));
  for (const auto& [key, value] : ep.options) {
    const OptionRow<O>* row = nullptr;
    for (const OptionRow<O>& r : rows)
      if (r.name == key) row = &r;
    if (row == nullptr) return Status(Code::kInvalidArgument, ep.scheme + ": unknown option '" + key + "'");
    CONDUIT_RETURN_IF_ERROR(option_detail::apply(*row, ep.scheme, value, out));
  }
  return out;
}

// The rows as text (Transport::options()).
template <class O>
std::vector<OptionDoc> document_option_table(std::span<const OptionRow<O>> rows) {
  std::vector<OptionDoc> out;
  for (const OptionRow<O>& r : rows) {
    OptionDoc d;
    d.name = std::string(r.name);
    d.default_value = option_detail::default_text(r.kind, r.fallback, r.default_doc);
    d.range = option_detail::range_text(r.kind, r.min, r.max, r.range_note);
    d.doc = std::string(r.doc);
    d.markdown = option_detail::markdown_row(r.name, d.default_value, d.range, r.side, r.doc);
    while (!d.markdown.empty() && d.markdown.back() == '\n') d.markdown.pop_back();
    out.push_back(std::move(d));
  }
  return out;
}

// The docs table (GitHub markdown): | option | default | range | meaning |.
template <class O>
std::string option_table_markdown(std::span<const OptionRow<O>> rows) {
  std::string s = "| option | default | range | meaning |\n|---|---|---|---|\n";
  for (const OptionRow<O>& r : rows)
    s += option_detail::markdown_row(r.name, option_detail::default_text(r.kind, r.fallback, r.default_doc),
                                     option_detail::range_text(r.kind, r.min, r.max, r.range_note), r.side, r.doc);
  return s;
}

}  // namespace conduit::transport
