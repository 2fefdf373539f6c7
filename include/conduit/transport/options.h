// A transport's URL options as text, for docs and listings: every transport exposes its
// option table this way (Transport::options()), so tools can print it and a test checks
// that docs/TRANSPORTS.md shows every row exactly (the tables themselves are private to
// the transport layer: src/transport/option_table.h).
#pragma once

#include <string>

namespace conduit::transport {

struct OptionDoc {
  std::string name;
  std::string default_value;  // "1M", "`true`", "= `ring`"
  std::string range;          // "64K–16M", "bool", "octal, at most 0777"
  std::string doc;            // prefixed "listener: " / "client: " when one side reads it
  std::string markdown;       // "| `name` | default | range | doc |", as docs/TRANSPORTS.md prints it
  const std::string& markdown_row() const { return markdown; }
};

}  // namespace conduit::transport
