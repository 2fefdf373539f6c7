// libFuzzer target for the RESP code that reads untrusted bytes: the request parser (fed in
// chunks whose sizes come from the input, like a server reading a socket), inline argument
// splitting, the reply scanner and the reply parser.  Checks the parser's invariants.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "conduit/kv/resp.h"

using conduit::kv::ProtocolLimits;
using conduit::kv::Reply;
using conduit::kv::ReplyScanner;
using conduit::kv::RequestParser;

#include <cstdio>

namespace {
void check_at(bool ok, int line) {
  if (ok) return;
  std::fprintf(stderr, "resp_fuzz: invariant at line %d failed\n", line);
  std::abort();
}
}  // namespace
#define check(cond) check_at((cond), __LINE__)

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // First byte picks the chunk size and small limits (so limit paths are reachable).
  const size_t chunk = (data[0] & 0x1f) + 1;
  ProtocolLimits limits;
  if (data[0] & 0x80) {
    limits.max_bulk_len = 64;
    limits.max_multibulk_len = 8;
    limits.max_inline_len = 32;
  }
  const char* in = reinterpret_cast<const char*>(data + 1);
  const size_t len = size - 1;

  RequestParser p(limits);
  std::string buf;
  size_t pos = 0;
  bool stop = false;
  while (!stop && (pos < len || !buf.empty())) {
    const size_t n = std::min(chunk, len - pos);
    buf.append(in + pos, n);
    pos += n;
    for (;;) {
      size_t consumed = 0;
      const auto o = p.parse(buf.data(), buf.size(), &consumed);
      if (o == RequestParser::Outcome::kNeedMore) break;
      if (o == RequestParser::Outcome::kError) {
        check(!p.error().empty() && p.error().find('\n') == std::string::npos);
        stop = true;
        break;
      }
      check(consumed > 0 && consumed <= buf.size());
      if (o == RequestParser::Outcome::kCommand) {
        // Inline commands are bounded by the line length, multibulk ones by the count limit.
        check(!p.args().empty() && (buf[0] != '*' || p.args().size() <= limits.max_multibulk_len));
        for (std::string_view a : p.args()) {
          check(a.size() <= buf.size());
          // Multibulk arguments lie inside the consumed bytes.
          if (buf[0] == '*') check(a.data() >= buf.data() && a.data() + a.size() <= buf.data() + consumed);
          volatile char sink = 0;
          for (char c : a) sink = static_cast<char>(sink ^ c);
        }
      }
      buf.erase(0, consumed);
    }
    if (n == 0) break;
  }

  ReplyScanner sc;
  std::string rb(in, len);
  size_t off = 0;
  while (off < rb.size()) {
    const int64_t n = sc.scan(rb.data() + off, rb.size() - off);
    if (n <= 0) break;
    Reply r;
    check(static_cast<size_t>(n) <= rb.size() - off);
    (void)conduit::kv::parse_reply(rb.data() + off, static_cast<size_t>(n), &r);
    (void)r.to_string();
    off += static_cast<size_t>(n);
  }
  std::vector<std::string_view> args;
  std::vector<std::string> storage;
  (void)conduit::kv::split_inline_args(std::string_view(in, len), &args, &storage);
  return 0;
}
