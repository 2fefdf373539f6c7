// Logging with a compile-time floor.
//
//   CONDUIT_LOG(kWarn) << "peer " << addr << " sent opcode " << op;
//
// Statements below CONDUIT_MIN_LOG_LEVEL (a CMake cache option) compile to nothing, so
// trace/debug lines may stay in hot paths of release builds.  Above that floor the
// run-time level (set_log_level(), or env CONDUIT_LOG_LEVEL=trace|debug|info|warn|error|off)
// decides; a disabled statement costs one relaxed atomic load and evaluates none of its
// operands.  Each message is written to stderr with a single write(2), so lines from
// different threads do not interleave.  Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <sstream>
#include <string_view>

#ifndef CONDUIT_MIN_LOG_LEVEL
#define CONDUIT_MIN_LOG_LEVEL 1
#endif

namespace conduit {

enum class LogLevel : uint8_t { kTrace = 0, kDebug, kInfo, kWarn, kError, kOff };

std::string_view log_level_name(LogLevel level);
// Parses "trace".."off" (or "0".."5"); returns false on anything else.
bool parse_log_level(std::string_view text, LogLevel* out);

void set_log_level(LogLevel level);
LogLevel log_level();
inline bool log_enabled(LogLevel level);

namespace detail {
extern std::atomic<uint8_t> g_log_level;

class LogMessage {
 public:
  LogMessage(LogLevel level, const char* file, int line);
  ~LogMessage();
  LogMessage(const LogMessage&) = delete;
  LogMessage& operator=(const LogMessage&) = delete;
  std::ostream& stream() { return stream_; }

 private:
  std::ostringstream stream_;
};

// Swallows the stream expression's value so the macro is one statement.
struct LogVoidify {
  void operator&(std::ostream&) {}
};
}  // namespace detail

inline bool log_enabled(LogLevel level) {
  return static_cast<uint8_t>(level) >= detail::g_log_level.load(std::memory_order_relaxed);
}

}  // namespace conduit

#define CONDUIT_LOG(severity)                                                              \
  (static_cast<int>(::conduit::LogLevel::severity) < CONDUIT_MIN_LOG_LEVEL ||              \
   !::conduit::log_enabled(::conduit::LogLevel::severity))                                 \
      ? (void)0                                                                            \
      : ::conduit::detail::LogVoidify() &                                                  \
            ::conduit::detail::LogMessage(::conduit::LogLevel::severity, __FILE__, __LINE__) \
                .stream()
