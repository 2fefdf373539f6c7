#include "conduit/base/log.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>

namespace conduit {
namespace {

uint8_t initial_level() {
  LogLevel level = LogLevel::kInfo;
  if (const char* env = std::getenv("CONDUIT_LOG_LEVEL")) parse_log_level(env, &level);
  return static_cast<uint8_t>(level);
}

const char* basename_of(const char* path) {
  const char* slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}

}  // namespace

namespace detail {
std::atomic<uint8_t> g_log_level{initial_level()};

LogMessage::LogMessage(LogLevel level, const char* file, int line) {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  tm parts{};
  localtime_r(&ts.tv_sec, &parts);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%H:%M:%S", &parts);
  char frac[24];
  std::snprintf(frac, sizeof frac, ".%06ld", ts.tv_nsec / 1000);
  stream_ << stamp << frac << ' ' << log_level_name(level) << ' ' << basename_of(file) << ':'
          << line << "] ";
}

LogMessage::~LogMessage() {
  stream_ << '\n';
  const std::string text = stream_.str();
  // One write per line; a short write to stderr is not worth retrying in a logger.
  ssize_t ignored = ::write(STDERR_FILENO, text.data(), text.size());
  (void)ignored;
}
}  // namespace detail

std::string_view log_level_name(LogLevel level) {
  switch (level) {
    case LogLevel::kTrace: return "TRACE";
    case LogLevel::kDebug: return "DEBUG";
    case LogLevel::kInfo: return "INFO";
    case LogLevel::kWarn: return "WARN";
    case LogLevel::kError: return "ERROR";
    case LogLevel::kOff: return "OFF";
  }
  return "?";
}

bool parse_log_level(std::string_view text, LogLevel* out) {
  static constexpr std::string_view kNames[] = {"trace", "debug", "info", "warn", "error", "off"};
  for (size_t i = 0; i < std::size(kNames); ++i) {
    if (text == kNames[i] || (text.size() == 1 && text[0] == static_cast<char>('0' + i))) {
      *out = static_cast<LogLevel>(i);
      return true;
    }
  }
  if (text == "warning") {
    *out = LogLevel::kWarn;
    return true;
  }
  return false;
}

void set_log_level(LogLevel level) {
  detail::g_log_level.store(static_cast<uint8_t>(level), std::memory_order_relaxed);
}

LogLevel log_level() {
  return static_cast<LogLevel>(detail::g_log_level.load(std::memory_order_relaxed));
}

}  // namespace conduit
