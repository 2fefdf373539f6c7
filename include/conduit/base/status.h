// Status and Result<T>: how every Conduit function reports failure.
//
// A small fixed set of codes (modelled on abseil's), plus an optional detail that keeps
// the value the failing system call or verbs completion gave (errno, ibv_wc_status), and
// a human message.  "Would block" and "in progress" are deliberately *not* errors:
// non-blocking calls return them as ordinary outcomes that callers branch on.
//
// Cost: an OK Status is two words and allocates nothing.  Error statuses allocate their
// message once; copying shares it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace conduit {

enum class Code : uint8_t {
  kOk = 0,
  kWouldBlock,          // not an error: try again when the reactor says so
  kInProgress,          // not an error: an asynchronous operation was started
  kInvalidArgument,     // the caller passed something that can never work
  kNotFound,            // named device, address or key does not exist
  kUnavailable,         // a resource (device, peer, port) is not usable now
  kResourceExhausted,   // queue full, out of memory, limit reached
  kTimedOut,
  kClosed,              // the peer or the local side closed the channel
  kProtocolError,       // the peer broke the wire protocol
  kIoError,             // a system or verbs call failed; see detail()
  kPermissionDenied,
  kNotSupported,
  kCancelled,
  kInternal,            // a Conduit bug: an invariant did not hold
};

// Printable name, e.g. "would-block", "io-error".
std::string_view code_name(Code code);

// Where a Status' detail number comes from.
enum class DetailKind : uint8_t { kNone = 0, kErrno, kWcStatus, kCmEvent };

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string_view message);
  Status(Code code, std::string_view message, DetailKind kind, int detail);

  static Status Ok() { return {}; }
  static Status WouldBlock() { return Status(Code::kWouldBlock); }
  static Status InProgress() { return Status(Code::kInProgress); }
  // A failed system call: keeps errno, message "what: strerror(errno)".
  static Status FromErrno(int err, std::string_view what);
  // Same, with a code chosen from errno (EAGAIN -> would-block, ENOMEM -> exhausted, ...).
  static Status FromErrnoAuto(int err, std::string_view what);

  bool ok() const { return code_ == Code::kOk; }
  // True for every code except ok, would-block and in-progress.
  bool is_error() const { return code_ > Code::kInProgress; }
  bool would_block() const { return code_ == Code::kWouldBlock; }
  bool in_progress() const { return code_ == Code::kInProgress; }

  Code code() const { return code_; }
  DetailKind detail_kind() const { return kind_; }
  int detail() const { return detail_; }
  std::string_view message() const;

  // "io-error: ibv_post_send: Cannot allocate memory (errno 12)".
  std::string to_string() const;

  // Returns a copy whose message is "context: <message>".
  Status annotate(std::string_view context) const;

  friend bool operator==(const Status& a, const Status& b) {
    return a.code_ == b.code_ && a.kind_ == b.kind_ && a.detail_ == b.detail_;
  }

 private:
  explicit Status(Code code) : code_(code) {}

  Code code_ = Code::kOk;
  DetailKind kind_ = DetailKind::kNone;
  int detail_ = 0;
  std::shared_ptr<const std::string> message_;
};

// Either a T or a non-OK Status.  Accessing value() of a failed Result is a bug
// (checked by an assertion in debug builds).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(const T& v) : value_(v) {}                       // NOLINT: implicit by design
  Result(T&& v) : value_(std::move(v)) {}                 // NOLINT
  Result(Status s) : status_(std::move(s)) { fix_ok(); }  // NOLINT
  template <typename U>
    requires(std::is_constructible_v<T, U&&> && !std::is_same_v<std::decay_t<U>, T> &&
             !std::is_same_v<std::decay_t<U>, Status>)
  Result(U&& v) : value_(std::forward<U>(v)) {}  // NOLINT

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }

  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }
  T&& operator*() && { return std::move(*value_); }

  T value_or(T fallback) const& { return ok() ? *value_ : std::move(fallback); }

 private:
  // A Result built from an OK Status carries no value: turn it into an internal error
  // rather than pretending success.
  void fix_ok() {
    if (status_.ok()) status_ = Status(Code::kInternal, "Result built from an OK Status");
  }

  Status status_;
  std::optional<T> value_;
};

}  // namespace conduit

// Propagate a non-OK Status (including would-block) to the caller.
#define CONDUIT_RETURN_IF_ERROR(expr)                     \
  do {                                                    \
    ::conduit::Status conduit_status_ = (expr);           \
    if (!conduit_status_.ok()) return conduit_status_;    \
  } while (0)

#define CONDUIT_CONCAT_INNER_(a, b) a##b
#define CONDUIT_CONCAT_(a, b) CONDUIT_CONCAT_INNER_(a, b)
// CONDUIT_ASSIGN_OR_RETURN(auto x, make_x()); returns the Status when make_x() fails.
#define CONDUIT_ASSIGN_OR_RETURN(lhs, expr) \
  CONDUIT_ASSIGN_OR_RETURN_IMPL_(CONDUIT_CONCAT_(conduit_result_, __LINE__), lhs, expr)
#define CONDUIT_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                   \
  if (!tmp.ok()) return tmp.status();                  \
  lhs = std::move(tmp).value()
