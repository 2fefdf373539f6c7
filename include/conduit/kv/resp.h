// RESP2/RESP3: the request parser a server needs, the reply writer, and the reply parser a
// client needs.  Self-contained (standard library only) so the fuzzer can build it alone.
//
// Requests (client -> server) are multibulk arrays of bulk strings ("*2\r\n$3\r\nGET\r\n
// $1\r\nk\r\n") or inline lines ("GET k\r\n", split like redis-cli/sdssplitargs with "..."
// and '...' quoting).  RequestParser parses in place: the arguments it returns are views
// into the caller's input (or, for quoted inline arguments only, into the parser), valid
// until the next parse()/reset().  Limits and error texts are Redis 7's.
//
// Threading: none of these types is thread-safe; use one per connection.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace conduit::kv {

// Limits on what one client may send, as redis.conf names them.
struct ProtocolLimits {
  uint64_t max_bulk_len = 512ull << 20;      // proto-max-bulk-len: one argument's bytes
  uint64_t max_multibulk_len = 1024 * 1024;  // arguments in one command
  uint64_t max_inline_len = 64 * 1024;       // an inline command line, or a *N / $N header line
  uint64_t max_query_buffer = 1ull << 30;    // client-query-buffer-limit: unparsed bytes held
  // The client has not authenticated yet (the limits above are then the small pre-AUTH
  // ones): the parser says "unauthenticated multibulk/bulk length", as Redis does.
  bool unauthenticated = false;
};

// Incremental request parser.  Feed it the unconsumed input from its first byte; when it
// says kNeedMore, call again later with the same bytes plus whatever arrived since (the
// bytes may have moved in memory).  It remembers how far it got, so a large command that
// arrives in many pieces is scanned once, not once per piece.
class RequestParser {
 public:
  enum class Outcome : uint8_t {
    kCommand,   // args() holds one command; *consumed bytes of input belong to it
    kEmpty,     // *consumed bytes were an empty line or "*0": nothing to run, parse on
    kNeedMore,  // no complete command yet; keep the input and call again with more
    kError,     // protocol violation: reply error() and close the connection
  };

  explicit RequestParser(const ProtocolLimits& limits = {}) : limits_(limits) {}

  // Cost: linear in the bytes not looked at before; allocates only while args() grows to
  // the largest argument count seen (or for quoted inline arguments).
  Outcome parse(const char* data, size_t len, size_t* consumed);

  std::span<const std::string_view> args() const { return {args_.data(), args_.size()}; }
  // After kError: the reply text without the leading '-', e.g.
  // "ERR Protocol error: invalid bulk length".
  const std::string& error() const { return error_; }
  // After kNeedMore: the input length the current command needs at least (known once a
  // large bulk header was read; else 0).  Lets the caller size its buffer once.
  size_t bytes_hint() const { return hint_; }
  // True while a command is partly parsed.
  bool in_progress() const { return state_ != State::kIdle; }
  void reset();

  const ProtocolLimits& limits() const { return limits_; }
  void set_limits(const ProtocolLimits& l) { limits_ = l; }

 private:
  enum class State : uint8_t { kIdle, kMultibulk };
  Outcome fail(const char* msg);
  Outcome parse_inline(const char* data, size_t len, size_t* consumed);
  Outcome parse_multibulk(const char* data, size_t len, size_t* consumed);

  ProtocolLimits limits_;
  State state_ = State::kIdle;
  std::vector<std::string_view> args_;  // the last complete command (views)
  // The command being parsed: (offset from its first byte, length) per argument read so
  // far.  Offsets survive the input moving between calls, so resuming costs nothing.
  std::vector<std::pair<size_t, size_t>> spans_;
  std::vector<std::string> inline_storage_;
  size_t pos_ = 0;        // next unparsed byte, relative to the command's first byte
  uint64_t remaining_ = 0;  // arguments still to read
  int64_t bulk_len_ = -1;   // length of the argument whose header was read, or -1
  size_t hint_ = 0;
  std::string error_;
};

// Splits an inline command line like sdssplitargs (used by the parser and redis-cli).
// False on unbalanced quotes.  Unquoted arguments are views into `line`; quoted ones are
// unescaped into `storage` (which must not be resized by the caller meanwhile).
bool split_inline_args(std::string_view line, std::vector<std::string_view>* out,
                       std::vector<std::string>* storage);

// A growable byte buffer with a consumed prefix: append at the end, consume from the
// front.  Does not zero memory it hands out.  Not copyable.
class ByteBuffer {
 public:
  ByteBuffer() = default;
  ~ByteBuffer();
  ByteBuffer(ByteBuffer&& o) noexcept;
  ByteBuffer& operator=(ByteBuffer&& o) noexcept;
  ByteBuffer(const ByteBuffer&) = delete;
  ByteBuffer& operator=(const ByteBuffer&) = delete;

  const char* data() const { return data_ + head_; }
  char* data() { return data_ + head_; }
  size_t size() const { return tail_ - head_; }
  bool empty() const { return tail_ == head_; }
  size_t capacity() const { return cap_; }

  // Space for n more bytes at the end; returns where to write.  Call commit(k) after.
  char* prepare(size_t n) {
    if (cap_ - tail_ < n) grow(n);
    return data_ + tail_;
  }
  void commit(size_t n) { tail_ += n; }
  size_t tail_room() const { return cap_ - tail_; }
  void append(const char* p, size_t n) {
    if (n == 0) return;
    std::memcpy(prepare(n), p, n);
    tail_ += n;
  }
  void append(std::string_view s) { append(s.data(), s.size()); }
  void push_back(char c) {
    if (cap_ == tail_) grow(1);
    data_[tail_++] = c;
  }
  void consume(size_t n) {
    head_ += n;
    if (head_ == tail_) head_ = tail_ = 0;
  }
  void clear() { head_ = tail_ = 0; }
  // Frees the memory (an idle connection should hold none).
  void release();
  // Moves unconsumed bytes to the front.
  void compact();

 private:
  void grow(size_t n);
  char* data_ = nullptr;
  size_t head_ = 0, tail_ = 0, cap_ = 0;
};

enum class RespVersion : uint8_t { kResp2 = 2, kResp3 = 3 };

// Writes replies into a ByteBuffer.  RESP3-only types degrade to their RESP2 forms (map ->
// flat array, null -> $-1 / *-1, double -> bulk string, set -> array) as Redis does.
//
// Budget: set_limit(n) bounds the bytes the buffer may hold, checked before every reply
// element, so one command cannot build a reply bigger than its client may be sent (an
// MGET of 18k copies of a 1 MiB value stops at the limit instead of at 18 GB).  The first
// element that does not fit is not written and the writer fails for good: failed()
// turns true, everything after is dropped, and the caller must close the client without
// sending (its replies are incomplete).  fail() does the same for other reasons (out of
// memory while running a command).  Cost: one compare per element.
class ReplyWriter {
 public:
  explicit ReplyWriter(ByteBuffer* out, RespVersion v = RespVersion::kResp2) : out_(out), version_(v) {}
  void set_buffer(ByteBuffer* out) { out_ = out; }
  ByteBuffer* buffer() const { return out_; }
  void set_version(RespVersion v) { version_ = v; }
  RespVersion version() const { return version_; }
  bool resp3() const { return version_ == RespVersion::kResp3; }
  // At most `bytes` in the buffer (UINT64_MAX: no bound).  No effect once failed().
  void set_limit(uint64_t bytes) {
    if (!failed_) limit_ = bytes;
  }
  uint64_t limit() const { return limit_; }
  bool failed() const { return failed_; }
  bool failed_over_limit() const { return over_limit_; }  // failed() because of set_limit()
  void fail() {
    failed_ = true;
    limit_ = 0;
  }

  // Error replies written since the last take_errors(), and the code of the last one (its
  // first word, "ERR", "WRONGTYPE": INFO errorstats).  Counting costs one increment.
  struct ErrorCount {
    uint32_t count = 0;
    std::string_view code;  // valid until the next error()
  };
  ErrorCount take_errors() {
    ErrorCount e{errors_, std::string_view(err_code_, err_code_len_)};
    errors_ = 0;
    return e;
  }

  void simple(std::string_view s);      // +s
  void ok() {
    if (fits(5)) out_->append("+OK\r\n", 5);
  }
  void error(std::string_view s);       // -s (s starts with its code, e.g. "ERR ...")
  void integer(int64_t v);              // :v
  void bulk(std::string_view s);        // $len s
  void null();                          // RESP2 $-1, RESP3 _
  void null_array();                    // RESP2 *-1, RESP3 _
  void array(size_t n);                 // *n
  void map(size_t n);                   // RESP3 %n; RESP2 *2n
  void set(size_t n);                   // RESP3 ~n; RESP2 *n
  void push(size_t n);                  // RESP3 >n (pub/sub messages); RESP2 *n
  void boolean(bool b);                 // RESP3 #t/#f; RESP2 :1/:0
  void dbl(double d);                   // RESP3 ,d; RESP2 bulk "%.17g"
  void verbatim(std::string_view s, std::string_view fmt = "txt");  // RESP3 =; RESP2 bulk
  void raw(std::string_view s) {
    if (fits(s.size())) out_->append(s);
  }

 private:
  bool fits(size_t n) {
    if (out_->size() + n <= limit_) [[likely]]
      return true;
    over_limit_ = over_limit_ || !failed_;
    fail();
    return false;
  }
  void header(char type, int64_t n);
  ByteBuffer* out_;
  RespVersion version_;
  uint32_t errors_ = 0;
  uint8_t err_code_len_ = 0;
  char err_code_[31] = {};
  uint64_t limit_ = UINT64_MAX;
  bool failed_ = false;
  bool over_limit_ = false;
};

// Writes a command as a RESP array of bulk strings (client requests, AOF records).
void append_command(ByteBuffer* out, std::span<const std::string_view> args);

// --- replies (server -> client) -----------------------------------------------------------

enum class ReplyType : uint8_t {
  kSimple, kError, kInteger, kBulk, kNull, kArray, kMap, kSet, kDouble, kBool, kVerbatim,
  kBigNumber, kPush, kAttribute,
};
std::string_view reply_type_name(ReplyType t);

// A parsed reply.  Maps keep key, value, key, value... in elements.
struct Reply {
  ReplyType type = ReplyType::kNull;
  int64_t integer = 0;      // kInteger, kBool (0/1)
  double dbl = 0;           // kDouble
  std::string str;          // kSimple, kError, kBulk, kVerbatim (without "txt:"), kBigNumber, kDouble text
  std::vector<Reply> elements;

  bool is_error() const { return type == ReplyType::kError; }
  bool is_null() const { return type == ReplyType::kNull; }
  // "OK", "(integer) 3", "(nil)", "1) ..." — for tests and tools.
  std::string to_string() const;
};

// Finds where the next complete reply ends, resumably: feed the unconsumed input from
// its first byte; returns the complete reply's length, 0 when more input is needed
// (having remembered how far it got), or -1 on malformed input.  No allocation.
class ReplyScanner {
 public:
  int64_t scan(const char* data, size_t len);
  void reset() { pos_ = 0, pending_ = 1; }

 private:
  size_t pos_ = 0;
  uint64_t pending_ = 1;  // elements still to read before the reply is complete
};

// Parses one complete reply (as delimited by ReplyScanner) into a tree.  False on
// malformed input.
bool parse_reply(const char* data, size_t len, Reply* out);

}  // namespace conduit::kv
