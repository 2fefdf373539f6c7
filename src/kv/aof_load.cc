// Replaying the append-only file (load_aof, declared in aof.h).
//
// What the loader accepts: everything the writer can write.  The client limits of the
// moment (proto-max-bulk-len, 1M arguments per command) are not the writer's: a value
// stored after CONFIG SET proto-max-bulk-len 8mb, or a file written by an older build
// that propagated SPOP COUNT as one huge SREM, must load under the default limits too
// (Redis loads both).  So the loader lifts them, and its only bound is the file itself:
// it never reads past the end, a declared length that the rest of the file cannot hold
// ends the record there (*999999999999 or $999999999999 allocate nothing), and memory
// follows the bytes that exist.
//
// Damage: a record that cannot be completed from what follows it is either a torn tail
// (the server died while writing it: nothing complete follows) or damage in the middle
// (a corrupt length that swallows the rest of the file).  The two are told apart by
// looking for complete commands after it: if the file reads cleanly from some later
// record start to its end, the damage is in the middle and the load is refused, naming
// the damaged range and how to cut exactly it out -- never "truncate the file", which
// would drop every acknowledged write after the damage.  Only a real torn tail is
// dropped under aof-load-truncated.  (Redis 7.0 allocates the declared length and, when
// the file ends first, treats the record as a truncated tail: with aof-load-truncated it
// would drop everything after a corrupt length.  We refuse instead.)
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "aof.h"
#include "text.h"
#include "conduit/base/log.h"

namespace conduit::kv {
namespace {

// The loader's parser limits: effectively none (the file bounds everything, see above).
ProtocolLimits loader_limits() {
  ProtocolLimits l;
  l.max_bulk_len = UINT64_MAX >> 2;
  l.max_multibulk_len = UINT64_MAX >> 2;
  l.max_query_buffer = UINT64_MAX >> 2;
  return l;  // max_inline_len stays: a header line ("*3", "$5") is short
}

constexpr size_t kReadChunk = 1 << 20;

// Reads [off, off + n) of fd into buf (appending); false on a read error (errno set).
bool read_at(int fd, uint64_t off, size_t n, ByteBuffer* buf, size_t* got) {
  char* dst = buf->prepare(n);
  *got = 0;
  while (*got < n) {
    const ssize_t k = ::pread(fd, dst + *got, n - *got, static_cast<off_t>(off + *got));
    if (k < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (k == 0) break;
    *got += static_cast<size_t>(k);
  }
  buf->commit(*got);
  return true;
}

// Up to 24 bytes at `p` for a message, escaped.
std::string preview(const char* p, size_t n) {
  std::string out = "\"";
  for (size_t i = 0; i < std::min<size_t>(n, 24); ++i) {
    const unsigned char c = static_cast<unsigned char>(p[i]);
    if (c == '\r') out += "\\r";
    else if (c == '\n') out += "\\n";
    else if (c == '"' || c == '\\') out += std::string("\\") + static_cast<char>(c);
    else if (c >= 0x20 && c < 0x7f) out += static_cast<char>(c);
    else {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      out += b;
    }
  }
  return out + (n > 24 ? "\"..." : "\"");
}

// Parses records of fd from `from` to `end` without running them.  Returns how many were
// complete and whether the range parsed cleanly (an incomplete last record is clean only
// when allow_torn_end).  Memory: one record at a time.
struct CleanRun {
  bool clean = false;
  uint64_t commands = 0;
};
CleanRun parse_clean_to_end(int fd, uint64_t from, uint64_t end, bool allow_torn_end) {
  CleanRun run;
  RequestParser parser(loader_limits());
  ByteBuffer buf;
  uint64_t read_pos = from;
  // Most candidates fail within a few bytes: start with small reads.
  size_t chunk = 4096;
  for (;;) {
    while (!buf.empty()) {
      if (!parser.in_progress() && buf.data()[0] != '*') return run;
      size_t consumed = 0;
      const auto outcome = parser.parse(buf.data(), buf.size(), &consumed);
      if (outcome == RequestParser::Outcome::kError) return run;
      if (outcome == RequestParser::Outcome::kNeedMore) {
        if (parser.bytes_hint() > end - (read_pos - buf.size())) {
          run.clean = allow_torn_end && run.commands > 0;
          return run;  // declares more than the file holds
        }
        break;
      }
      if (outcome == RequestParser::Outcome::kCommand) ++run.commands;
      buf.consume(consumed);
    }
    if (read_pos >= end) {
      run.clean = buf.empty() || (allow_torn_end && run.commands > 0);
      return run;
    }
    size_t got = 0;
    const size_t want = static_cast<size_t>(std::min<uint64_t>(
        std::max<uint64_t>(chunk, parser.bytes_hint() > buf.size() ? parser.bytes_hint() - buf.size() : 0),
        end - read_pos));
    if (!read_at(fd, read_pos, want, &buf, &got) || got == 0) return run;
    read_pos += got;
    chunk = std::min(chunk * 2, kReadChunk);
  }
}

// The first record start after `damage` from which the file reads cleanly to its end (a
// torn last record allowed): a command follows "\r\n" and begins with '*'.
struct Resync {
  bool found = false;
  uint64_t offset = 0;
  uint64_t commands = 0;
};
Resync find_resync(int fd, uint64_t damage, uint64_t end) {
  Resync r;
  ByteBuffer window;
  uint64_t base = damage + 1;  // file offset of window.data()
  while (base < end) {
    window.clear();
    size_t got = 0;
    if (!read_at(fd, base, static_cast<size_t>(std::min<uint64_t>(kReadChunk, end - base)), &window, &got) || got == 0)
      return r;
    const char* p = window.data();
    for (size_t i = 0; i + 1 < got; ++i) {
      const char* nl = static_cast<const char*>(std::memchr(p + i, '\n', got - 1 - i));
      if (nl == nullptr) break;
      i = static_cast<size_t>(nl - p);
      if (p[i + 1] != '*') continue;
      const uint64_t candidate = base + i + 1;
      const CleanRun run = parse_clean_to_end(fd, candidate, end, true);
      if (run.clean && run.commands > 0) {
        r.found = true;
        r.offset = candidate;
        r.commands = run.commands;
        return r;
      }
    }
    base += got > 1 ? got - 1 : got;  // the last byte may be a '\n' before a '*'
  }
  return r;
}

std::string describe_damage(const std::string& path, uint64_t offset, uint64_t good_commands, const std::string& why,
                            const std::string& bytes, const Resync& rs, uint64_t size) {
  std::string m = "the append-only file " + path + " is damaged at offset " + std::to_string(offset) + " (" + why +
                  "; the bytes there are " + bytes + "). The " + std::to_string(good_commands) +
                  " commands before it read cleanly. Refusing to load it; the file is left as it is. ";
  const std::string o = std::to_string(offset);
  if (rs.found) {
    const std::string y = std::to_string(rs.offset);
    m += "The next readable command starts at offset " + y + " and the " + std::to_string(rs.commands) +
         " commands from there read cleanly to the end (" + std::to_string(size - rs.offset) +
         " bytes): to keep them all and drop only the damaged bytes " + o + ".." + y + ", run  { head -c " + o + " " +
         path + "; tail -c +" + std::to_string(rs.offset + 1) + " " + path + "; } > " + path +
         ".repaired  then check the result and move it over " + path + ".";
    m += " (If instead the server crashed while writing at offset " + o +
         " and the rest is part of that last record, `truncate -s " + o + " " + path + "` drops just that record.)";
  } else {
    m += "No complete command follows the damage (" + std::to_string(size - offset) +
         " bytes to the end): restore the file from a backup, or, to keep only the commands before the damage, "
         "`truncate -s " + o + " " + path + "`.";
  }
  return m;
}

}  // namespace

Result<AofLoadResult> load_aof(const std::string& path, bool allow_truncated_tail, const AofExecutor& exec) {
  AofLoadResult r;
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    if (errno == ENOENT) return r;
    return Status::FromErrnoAuto(errno, "aof: open " + path);
  }
  struct stat st{};
  if (::fstat(fd.get(), &st) != 0) return Status::FromErrnoAuto(errno, "aof: stat " + path);
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  RequestParser parser(loader_limits());
  ByteBuffer buf;
  uint64_t offset = 0;    // file offset of buf.data(): the start of the record being parsed
  uint64_t read_pos = 0;  // next byte to read
  auto damaged = [&](uint64_t at, const std::string& why, const std::string& bytes) -> Status {
    const Resync rs = find_resync(fd.get(), at, size);
    return Status(Code::kProtocolError, describe_damage(path, at, r.commands, why, bytes, rs, size));
  };
  bool incomplete = false;  // the record at `offset` cannot be completed from the file
  // A transaction (MULTI ... EXEC, how EXEC propagates) open at the end of the file was cut
  // short by a crash: none of it ran, and the file is cut back to its MULTI (Redis'
  // "Revert incomplete MULTI/EXEC transaction").
  int64_t multi_offset = -1;
  while (!incomplete) {
    while (!buf.empty()) {
      if (!parser.in_progress() && buf.data()[0] != '*')
        return damaged(offset, "expected '*' to start a command", preview(buf.data(), buf.size()));
      size_t consumed = 0;
      const auto outcome = parser.parse(buf.data(), buf.size(), &consumed);
      if (outcome == RequestParser::Outcome::kNeedMore) {
        // A length the rest of the file cannot hold: stop reading (allocating) for it.
        if (parser.bytes_hint() > size - offset) incomplete = true;
        break;
      }
      if (outcome == RequestParser::Outcome::kError)
        return damaged(offset, parser.error(), preview(buf.data(), buf.size()));
      if (outcome == RequestParser::Outcome::kCommand) {
        Status s = exec(parser.args());
        if (!s.ok()) {
          const Resync rs = find_resync(fd.get(), offset, size);
          return Status(Code::kProtocolError,
                        "the append-only file " + path + " holds a command at offset " + std::to_string(offset) +
                            " that fails: " + std::string(s.message()) + ". Refusing to load it (the " +
                            std::to_string(r.commands) + " commands before it ran); the file is left as it is." +
                            (rs.found ? " The file reads cleanly again from offset " + std::to_string(rs.offset) +
                                            " (" + std::to_string(rs.commands) + " commands)."
                                      : ""));
        }
        ++r.commands;
        const std::string_view name = parser.args()[0];
        if (name.size() == 5 && (name[0] == 'M' || name[0] == 'm') && eq_nocase(name, "multi"))
          multi_offset = static_cast<int64_t>(offset);
        else if (name.size() == 4 && eq_nocase(name, "exec"))
          multi_offset = -1;
      }
      buf.consume(consumed);
      offset += consumed;
    }
    if (incomplete || read_pos >= size) break;
    const uint64_t need = parser.bytes_hint() > buf.size() ? parser.bytes_hint() - buf.size() : 0;
    const size_t want = static_cast<size_t>(std::min<uint64_t>(std::max<uint64_t>(kReadChunk, need), size - read_pos));
    size_t got = 0;
    if (!read_at(fd.get(), read_pos, want, &buf, &got)) return Status::FromErrnoAuto(errno, "aof: read " + path);
    if (got == 0) break;  // the file shrank under us: treat what we have as the end
    read_pos += got;
  }
  r.bytes = offset;
  auto revert_multi = [&]() -> Result<AofLoadResult> {
    if (multi_offset < 0) return r;
    if (!allow_truncated_tail)
      return Status(Code::kProtocolError,
                    "the append-only file " + path + " ends inside a MULTI/EXEC transaction (MULTI at offset " +
                        std::to_string(multi_offset) + ", no EXEC): a crash while it was written. aof-load-truncated "
                        "is off, so it is not loaded; start with --aof-load-truncated yes to drop that transaction");
    CONDUIT_LOG(kWarn) << "aof: " << path << " ends inside a MULTI/EXEC transaction (MULTI at offset " << multi_offset
                       << "): reverting it (none of it ran) and truncating the file there";
    if (::truncate(path.c_str(), static_cast<off_t>(multi_offset)) != 0)
      return Status::FromErrnoAuto(errno, "aof: truncate " + path + " to " + std::to_string(multi_offset));
    r.truncated_bytes += r.bytes - static_cast<uint64_t>(multi_offset);
    r.bytes = static_cast<uint64_t>(multi_offset);
    r.reverted_transaction = true;
    return r;
  };
  if (offset == size) return revert_multi();
  // An incomplete last record: a torn tail only if nothing readable follows it.
  const Resync rs = find_resync(fd.get(), offset, size);
  const std::string bytes = preview(buf.data(), buf.size());
  if (rs.found)
    return Status(Code::kProtocolError,
                  describe_damage(path, offset, r.commands, "a length larger than the rest of the file", bytes, rs, size));
  r.truncated_bytes = size - offset;
  if (!allow_truncated_tail)
    return Status(Code::kProtocolError,
                  "the append-only file " + path + " ends with an incomplete command at offset " + std::to_string(offset) +
                      " (" + std::to_string(r.truncated_bytes) + " bytes, " + bytes +
                      ": a write cut short by a crash; nothing readable follows it). aof-load-truncated is off, so it "
                      "is not loaded; start with --aof-load-truncated yes to drop that last record and keep the " +
                      std::to_string(r.commands) + " commands before it");
  CONDUIT_LOG(kWarn) << "aof: " << path << " ends with an incomplete command (" << r.truncated_bytes
                     << " bytes at offset " << offset << ", probably a crash mid-write): dropping it and truncating the file";
  if (::truncate(path.c_str(), static_cast<off_t>(offset)) != 0)
    return Status::FromErrnoAuto(errno, "aof: truncate " + path + " to " + std::to_string(offset));
  return revert_multi();
}

}  // namespace conduit::kv
