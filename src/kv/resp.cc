#include "conduit/kv/resp.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <new>

#include "numbers.h"

namespace conduit::kv {

// --- RequestParser ---------------------------------------------------------------------

namespace {
// Bulk arguments at least this large make the parser report the size it needs, so the
// caller can size its buffer once (Redis' PROTO_MBULK_BIG_ARG).
constexpr int64_t kBigArg = 32 * 1024;

const char* find_cr(const char* p, size_t n) { return static_cast<const char*>(std::memchr(p, '\r', n)); }
}  // namespace

void RequestParser::reset() {
  state_ = State::kIdle;
  args_.clear();
  spans_.clear();
  inline_storage_.clear();
  pos_ = 0;
  remaining_ = 0;
  bulk_len_ = -1;
  hint_ = 0;
}

RequestParser::Outcome RequestParser::fail(const char* msg) {
  error_ = msg;
  state_ = State::kIdle;
  args_.clear();
  spans_.clear();
  pos_ = 0;
  bulk_len_ = -1;
  return Outcome::kError;
}

RequestParser::Outcome RequestParser::parse(const char* data, size_t len, size_t* consumed) {
  hint_ = 0;
  if (state_ == State::kIdle) {
    if (len == 0) return Outcome::kNeedMore;
    if (data[0] != '*') return parse_inline(data, len, consumed);
    const size_t scan = std::min<size_t>(len, limits_.max_inline_len + 2);
    const char* cr = find_cr(data, scan);
    if (cr == nullptr) {
      if (len > limits_.max_inline_len) return fail("ERR Protocol error: too big mbulk count string");
      return Outcome::kNeedMore;
    }
    const size_t line = static_cast<size_t>(cr - data);
    if (line + 2 > len) return Outcome::kNeedMore;  // "\r" seen, "\n" not yet
    int64_t count;
    if (!string2ll(data + 1, line - 1, &count)) return fail("ERR Protocol error: invalid multibulk length");
    if (count > static_cast<int64_t>(std::min<uint64_t>(limits_.max_multibulk_len, INT64_MAX)))
      return fail(limits_.unauthenticated ? "ERR Protocol error: unauthenticated multibulk length"
                                          : "ERR Protocol error: invalid multibulk length");
    if (count <= 0) {
      *consumed = line + 2;
      return Outcome::kEmpty;
    }
    args_.clear();
    spans_.clear();
    inline_storage_.clear();
    // A declared count allocates nothing up front beyond a small reserve: memory follows
    // the arguments that actually arrive.
    if (spans_.capacity() < static_cast<size_t>(count)) spans_.reserve(std::min<size_t>(static_cast<size_t>(count), 1024));
    remaining_ = static_cast<uint64_t>(count);
    pos_ = line + 2;
    bulk_len_ = -1;
    state_ = State::kMultibulk;
  }
  // Resuming needs no work: arguments are kept as offsets from the command's first byte,
  // so input that moved in memory is fine and each byte is looked at once.
  return parse_multibulk(data, len, consumed);
}

RequestParser::Outcome RequestParser::parse_multibulk(const char* data, size_t len, size_t* consumed) {
  auto need_more = [] { return Outcome::kNeedMore; };
  while (remaining_ > 0) {
    if (bulk_len_ < 0) {
      if (pos_ >= len) return need_more();
      if (data[pos_] != '$') {
        char msg[64];
        char c = data[pos_];
        if (c == '\r' || c == '\n') c = ' ';
        std::snprintf(msg, sizeof msg, "ERR Protocol error: expected '$', got '%c'", c);
        return fail(msg);
      }
      const size_t avail = len - pos_;
      const char* cr = find_cr(data + pos_, std::min<size_t>(avail, limits_.max_inline_len + 2));
      if (cr == nullptr) {
        if (avail > limits_.max_inline_len) return fail("ERR Protocol error: too big bulk count string");
        return need_more();
      }
      const size_t line = static_cast<size_t>(cr - (data + pos_));
      if (line + 2 > avail) return need_more();
      int64_t n;
      if (!string2ll(data + pos_ + 1, line - 1, &n) || n < 0) return fail("ERR Protocol error: invalid bulk length");
      if (static_cast<uint64_t>(n) > limits_.max_bulk_len)
        return fail(limits_.unauthenticated ? "ERR Protocol error: unauthenticated bulk length"
                                            : "ERR Protocol error: invalid bulk length");
      pos_ += line + 2;
      bulk_len_ = n;
    }
    const size_t need = static_cast<size_t>(bulk_len_) + 2;
    if (len - pos_ < need) {
      if (bulk_len_ >= kBigArg) hint_ = pos_ + need;
      return need_more();
    }
    spans_.emplace_back(pos_, static_cast<size_t>(bulk_len_));
    pos_ += need;  // like Redis, the two bytes after the payload are not inspected
    bulk_len_ = -1;
    --remaining_;
  }
  // Complete: the views are built once, from the offsets (O(arguments) per command).
  args_.resize(spans_.size());
  for (size_t i = 0; i < spans_.size(); ++i) args_[i] = std::string_view(data + spans_[i].first, spans_[i].second);
  spans_.clear();
  *consumed = pos_;
  state_ = State::kIdle;
  pos_ = 0;
  return Outcome::kCommand;
}

RequestParser::Outcome RequestParser::parse_inline(const char* data, size_t len, size_t* consumed) {
  const size_t scan = std::min<size_t>(len, limits_.max_inline_len + 1);
  const char* nl = static_cast<const char*>(std::memchr(data, '\n', scan));
  if (nl == nullptr) {
    if (len > limits_.max_inline_len) return fail("ERR Protocol error: too big inline request");
    return Outcome::kNeedMore;
  }
  size_t line = static_cast<size_t>(nl - data);
  *consumed = line + 1;
  if (line > 0 && data[line - 1] == '\r') --line;
  args_.clear();
  inline_storage_.clear();
  if (!split_inline_args(std::string_view(data, line), &args_, &inline_storage_))
    return fail("ERR Protocol error: unbalanced quotes in request");
  if (args_.empty()) return Outcome::kEmpty;
  return Outcome::kCommand;
}

namespace {
bool is_hex(char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }
int hex_val(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  return (std::tolower(static_cast<unsigned char>(c)) - 'a') + 10;
}
}  // namespace

bool split_inline_args(std::string_view line, std::vector<std::string_view>* out, std::vector<std::string>* storage) {
  // sdssplitargs reads a C string: a NUL ends the line.
  if (const void* z = std::memchr(line.data(), '\0', line.size()))
    line = line.substr(0, static_cast<size_t>(static_cast<const char*>(z) - line.data()));
  const char* p = line.data();
  const char* end = p + line.size();
  auto at = [&](const char* q) -> char { return q < end ? *q : '\0'; };
  // Quoted tokens are unescaped into storage; reserve so views into it stay valid.
  size_t quotes = 0;
  for (char c : line)
    if (c == '"' || c == '\'') ++quotes;
  storage->reserve(storage->size() + quotes / 2 + 1);
  for (;;) {
    while (p < end && std::isspace(static_cast<unsigned char>(*p))) ++p;
    if (p >= end) return true;
    const char* start = p;
    bool inq = false, insq = false, quoted = false, done = false;
    std::string cur;
    while (!done) {
      const char c = at(p);
      if (inq) {
        if (c == '\\' && at(p + 1) == 'x' && is_hex(at(p + 2)) && is_hex(at(p + 3))) {
          cur.push_back(static_cast<char>(hex_val(at(p + 2)) * 16 + hex_val(at(p + 3))));
          p += 3;
        } else if (c == '\\' && at(p + 1) != '\0') {
          ++p;
          char e = *p;
          switch (e) {
            case 'n': e = '\n'; break;
            case 'r': e = '\r'; break;
            case 't': e = '\t'; break;
            case 'b': e = '\b'; break;
            case 'a': e = '\a'; break;
            default: break;
          }
          cur.push_back(e);
        } else if (c == '"') {
          if (at(p + 1) != '\0' && !std::isspace(static_cast<unsigned char>(at(p + 1)))) return false;
          done = true;
        } else if (c == '\0') {
          return false;
        } else {
          cur.push_back(c);
        }
      } else if (insq) {
        if (c == '\\' && at(p + 1) == '\'') {
          ++p;
          cur.push_back('\'');
        } else if (c == '\'') {
          if (at(p + 1) != '\0' && !std::isspace(static_cast<unsigned char>(at(p + 1)))) return false;
          done = true;
        } else if (c == '\0') {
          return false;
        } else {
          cur.push_back(c);
        }
      } else {
        switch (c) {
          case ' ': case '\n': case '\r': case '\t': case '\0':
            done = true;
            break;
          case '"':
            inq = quoted = true;
            break;
          case '\'':
            insq = quoted = true;
            break;
          default:
            cur.push_back(c);
            break;
        }
      }
      if (p < end) ++p;
    }
    if (quoted) {
      storage->push_back(std::move(cur));
      out->emplace_back(storage->back());
    } else {
      // An unquoted token is a plain slice of the line.
      out->emplace_back(start, cur.size());
    }
  }
}

// --- ByteBuffer ---------------------------------------------------------------------------

ByteBuffer::~ByteBuffer() { std::free(data_); }

ByteBuffer::ByteBuffer(ByteBuffer&& o) noexcept : data_(o.data_), head_(o.head_), tail_(o.tail_), cap_(o.cap_) {
  o.data_ = nullptr;
  o.head_ = o.tail_ = o.cap_ = 0;
}

ByteBuffer& ByteBuffer::operator=(ByteBuffer&& o) noexcept {
  if (this != &o) {
    std::free(data_);
    data_ = o.data_;
    head_ = o.head_;
    tail_ = o.tail_;
    cap_ = o.cap_;
    o.data_ = nullptr;
    o.head_ = o.tail_ = o.cap_ = 0;
  }
  return *this;
}

void ByteBuffer::release() {
  std::free(data_);
  data_ = nullptr;
  head_ = tail_ = cap_ = 0;
}

void ByteBuffer::compact() {
  if (head_ == 0) return;
  const size_t n = tail_ - head_;
  if (n > 0) std::memmove(data_, data_ + head_, n);
  head_ = 0;
  tail_ = n;
}

void ByteBuffer::grow(size_t n) {
  compact();
  if (cap_ - tail_ >= n) return;
  size_t want = std::max<size_t>(cap_ * 2, 256);
  if (want < tail_ + n) want = tail_ + n;
  char* p = static_cast<char*>(std::realloc(data_, want));
  if (p == nullptr) throw std::bad_alloc();
  data_ = p;
  cap_ = want;
}

// --- ReplyWriter --------------------------------------------------------------------------

void ReplyWriter::header(char type, int64_t n) {
  if (!fits(24)) return;
  char* p = out_->prepare(24);
  p[0] = type;
  size_t k = 1 + ll2string(p + 1, n);
  p[k++] = '\r';
  p[k++] = '\n';
  out_->commit(k);
}

void ReplyWriter::simple(std::string_view s) {
  if (!fits(s.size() + 3)) return;
  char* p = out_->prepare(s.size() + 3);
  p[0] = '+';
  std::memcpy(p + 1, s.data(), s.size());
  // A status line cannot hold CR/LF.
  for (size_t i = 1; i <= s.size(); ++i)
    if (p[i] == '\r' || p[i] == '\n') p[i] = ' ';
  p[s.size() + 1] = '\r';
  p[s.size() + 2] = '\n';
  out_->commit(s.size() + 3);
}

void ReplyWriter::error(std::string_view s) {
  ++errors_;
  size_t code = 0;
  while (code < s.size() && code < sizeof err_code_ && s[code] != ' ') ++code;
  std::memcpy(err_code_, s.data(), code);
  err_code_len_ = static_cast<uint8_t>(code);
  if (!fits(s.size() + 3)) return;
  char* p = out_->prepare(s.size() + 3);
  p[0] = '-';
  std::memcpy(p + 1, s.data(), s.size());
  for (size_t i = 1; i <= s.size(); ++i)
    if (p[i] == '\r' || p[i] == '\n') p[i] = ' ';
  p[s.size() + 1] = '\r';
  p[s.size() + 2] = '\n';
  out_->commit(s.size() + 3);
}

void ReplyWriter::integer(int64_t v) { header(':', v); }

void ReplyWriter::bulk(std::string_view s) {
  if (!fits(s.size() + 26)) return;
  char* p = out_->prepare(s.size() + 26);
  p[0] = '$';
  size_t k = 1 + ull2string(p + 1, s.size());
  p[k++] = '\r';
  p[k++] = '\n';
  if (!s.empty()) std::memcpy(p + k, s.data(), s.size());
  k += s.size();
  p[k++] = '\r';
  p[k++] = '\n';
  out_->commit(k);
}

void ReplyWriter::null() {
  if (!fits(5)) return;
  if (resp3())
    out_->append("_\r\n", 3);
  else
    out_->append("$-1\r\n", 5);
}

void ReplyWriter::null_array() {
  if (!fits(5)) return;
  if (resp3())
    out_->append("_\r\n", 3);
  else
    out_->append("*-1\r\n", 5);
}

void ReplyWriter::array(size_t n) { header('*', static_cast<int64_t>(n)); }
void ReplyWriter::map(size_t n) {
  if (resp3())
    header('%', static_cast<int64_t>(n));
  else
    header('*', static_cast<int64_t>(2 * n));
}
void ReplyWriter::set(size_t n) { header(resp3() ? '~' : '*', static_cast<int64_t>(n)); }

void ReplyWriter::dbl(double d) {
  char buf[64];
  int n;
  if (std::isinf(d))
    n = std::snprintf(buf, sizeof buf, "%s", d > 0 ? "inf" : "-inf");
  else
    n = std::snprintf(buf, sizeof buf, "%.17g", d);
  if (resp3()) {
    if (!fits(static_cast<size_t>(n) + 3)) return;
    char* p = out_->prepare(static_cast<size_t>(n) + 3);
    p[0] = ',';
    std::memcpy(p + 1, buf, static_cast<size_t>(n));
    p[n + 1] = '\r';
    p[n + 2] = '\n';
    out_->commit(static_cast<size_t>(n) + 3);
  } else {
    bulk(std::string_view(buf, static_cast<size_t>(n)));
  }
}

void ReplyWriter::push(size_t n) { header(resp3() ? '>' : '*', static_cast<int64_t>(n)); }

void ReplyWriter::boolean(bool b) {
  if (resp3())
    raw(b ? "#t\r\n" : "#f\r\n");
  else
    integer(b ? 1 : 0);
}

void ReplyWriter::verbatim(std::string_view s, std::string_view fmt) {
  if (!resp3()) return bulk(s);
  header('=', static_cast<int64_t>(s.size() + fmt.size() + 1));
  if (!fits(fmt.size() + s.size() + 3)) return;
  out_->append(fmt);
  out_->push_back(':');
  out_->append(s);
  out_->append("\r\n", 2);
}

void append_command(ByteBuffer* out, std::span<const std::string_view> args) {
  ReplyWriter w(out);
  w.array(args.size());
  for (std::string_view a : args) w.bulk(a);
}

// --- replies --------------------------------------------------------------------------------

std::string_view reply_type_name(ReplyType t) {
  switch (t) {
    case ReplyType::kSimple: return "simple";
    case ReplyType::kError: return "error";
    case ReplyType::kInteger: return "integer";
    case ReplyType::kBulk: return "bulk";
    case ReplyType::kNull: return "null";
    case ReplyType::kArray: return "array";
    case ReplyType::kMap: return "map";
    case ReplyType::kSet: return "set";
    case ReplyType::kDouble: return "double";
    case ReplyType::kBool: return "bool";
    case ReplyType::kVerbatim: return "verbatim";
    case ReplyType::kBigNumber: return "bignumber";
    case ReplyType::kPush: return "push";
    case ReplyType::kAttribute: return "attribute";
  }
  return "?";
}

namespace {
void to_string_into(const Reply& r, std::string* out, int indent) {
  switch (r.type) {
    case ReplyType::kSimple: *out += r.str; break;
    case ReplyType::kError: *out += "(error) " + r.str; break;
    case ReplyType::kInteger: *out += "(integer) " + std::to_string(r.integer); break;
    case ReplyType::kBulk:
    case ReplyType::kVerbatim: *out += "\"" + r.str + "\""; break;
    case ReplyType::kNull: *out += "(nil)"; break;
    case ReplyType::kDouble: *out += "(double) " + r.str; break;
    case ReplyType::kBool: *out += r.integer ? "(true)" : "(false)"; break;
    case ReplyType::kBigNumber: *out += "(big number) " + r.str; break;
    case ReplyType::kArray:
    case ReplyType::kMap:
    case ReplyType::kSet:
    case ReplyType::kPush:
    case ReplyType::kAttribute:
      if (r.elements.empty()) {
        *out += "(empty array)";
        break;
      }
      for (size_t i = 0; i < r.elements.size(); ++i) {
        if (i > 0) *out += "\n" + std::string(static_cast<size_t>(indent), ' ');
        *out += std::to_string(i + 1) + ") ";
        to_string_into(r.elements[i], out, indent + 3);
      }
      break;
  }
}
}  // namespace

std::string Reply::to_string() const {
  std::string s;
  to_string_into(*this, &s, 0);
  return s;
}

int64_t ReplyScanner::scan(const char* data, size_t len) {
  while (pending_ > 0) {
    if (pos_ >= len) return 0;
    const char* cr = find_cr(data + pos_, len - pos_);
    if (cr == nullptr) return 0;
    const size_t line_end = static_cast<size_t>(cr - data);
    if (line_end + 2 > len) return 0;
    const char type = data[pos_];
    int64_t n = 0;
    auto number = [&] { return string2ll(data + pos_ + 1, line_end - pos_ - 1, &n); };
    switch (type) {
      case '+': case '-': case ':': case '_': case ',': case '#': case '(':
        pos_ = line_end + 2;
        --pending_;
        break;
      case '$': case '=': case '!': {
        if (!number() || n < -1) return -1;
        if (n == -1) {
          pos_ = line_end + 2;
          --pending_;
          break;
        }
        const size_t end = line_end + 2 + static_cast<size_t>(n) + 2;
        if (end > len) return 0;
        pos_ = end;
        --pending_;
        break;
      }
      case '*': case '~': case '>': case '%': case '|': {
        if (!number() || n < -1 || n > (int64_t{1} << 40)) return -1;
        pos_ = line_end + 2;
        if (n == -1) {
          --pending_;
          break;
        }
        uint64_t add = static_cast<uint64_t>(n);
        if (type == '%' || type == '|') add *= 2;
        // An attribute precedes the reply it annotates: it does not complete anything.
        pending_ = pending_ + add - (type == '|' ? 0 : 1);
        break;
      }
      default:
        return -1;
    }
  }
  const int64_t total = static_cast<int64_t>(pos_);
  reset();
  return total;
}

namespace {
struct TreeParser {
  const char* data;
  size_t len;
  size_t pos = 0;

  bool line(std::string_view* out) {
    if (pos >= len) return false;
    const char* cr = find_cr(data + pos, len - pos);
    if (cr == nullptr) return false;
    const size_t e = static_cast<size_t>(cr - data);
    if (e + 2 > len) return false;
    *out = std::string_view(data + pos + 1, e - pos - 1);
    pos = e + 2;
    return true;
  }

  bool parse(Reply* r, int depth) {
    if (depth > 512 || pos >= len) return false;
    const char type = data[pos];
    std::string_view l;
    if (!line(&l)) return false;
    int64_t n = 0;
    r->elements.clear();
    r->str.clear();
    switch (type) {
      case '+': r->type = ReplyType::kSimple; r->str.assign(l); return true;
      case '-': r->type = ReplyType::kError; r->str.assign(l); return true;
      case ':':
        r->type = ReplyType::kInteger;
        return string2ll(l, &r->integer);
      case '_': r->type = ReplyType::kNull; return true;
      case ',':
        r->type = ReplyType::kDouble;
        r->str.assign(l);
        if (l == "inf") r->dbl = HUGE_VAL;
        else if (l == "-inf") r->dbl = -HUGE_VAL;
        else if (l == "nan") r->dbl = NAN;
        else if (!string2d(l, &r->dbl)) return false;
        return true;
      case '#':
        r->type = ReplyType::kBool;
        if (l != "t" && l != "f") return false;
        r->integer = l == "t";
        return true;
      case '(': r->type = ReplyType::kBigNumber; r->str.assign(l); return true;
      case '$': case '=': case '!': {
        if (!string2ll(l, &n) || n < -1) return false;
        if (n == -1) {
          r->type = ReplyType::kNull;
          return true;
        }
        if (pos + static_cast<size_t>(n) + 2 > len) return false;
        std::string_view body(data + pos, static_cast<size_t>(n));
        pos += static_cast<size_t>(n) + 2;
        r->type = type == '$' ? ReplyType::kBulk : type == '=' ? ReplyType::kVerbatim : ReplyType::kError;
        if (type == '=' && body.size() >= 4 && body[3] == ':') body.remove_prefix(4);
        r->str.assign(body);
        return true;
      }
      case '*': case '~': case '>': case '%': case '|': {
        if (!string2ll(l, &n) || n < -1) return false;
        if (n == -1) {
          r->type = ReplyType::kNull;
          return true;
        }
        const uint64_t count = static_cast<uint64_t>(n) * ((type == '%' || type == '|') ? 2 : 1);
        // Every element takes at least 3 bytes: refuse counts the input cannot hold.
        if (count > (len - pos) / 3 + 1) return false;
        r->type = type == '*' ? ReplyType::kArray
                  : type == '~' ? ReplyType::kSet
                  : type == '>' ? ReplyType::kPush
                  : type == '%' ? ReplyType::kMap
                                : ReplyType::kAttribute;
        r->elements.resize(count);
        for (uint64_t i = 0; i < count; ++i)
          if (!parse(&r->elements[i], depth + 1)) return false;
        if (type == '|') {
          // Attributes are metadata for the reply that follows: return that reply.
          Reply next;
          if (!parse(&next, depth + 1)) return false;
          *r = std::move(next);
        }
        return true;
      }
      default:
        return false;
    }
  }
};
}  // namespace

bool parse_reply(const char* data, size_t len, Reply* out) {
  TreeParser p{data, len};
  return p.parse(out, 0) && p.pos == len;
}

}  // namespace conduit::kv
