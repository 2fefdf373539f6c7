#include "conduit/base/status.h"

#include <cerrno>
#include <cstring>
#include <string>

namespace conduit {

std::string_view code_name(Code code) {
  switch (code) {
    case Code::kOk: return "ok";
    case Code::kWouldBlock: return "would-block";
    case Code::kInProgress: return "in-progress";
    case Code::kInvalidArgument: return "invalid-argument";
    case Code::kNotFound: return "not-found";
    case Code::kUnavailable: return "unavailable";
    case Code::kResourceExhausted: return "resource-exhausted";
    case Code::kTimedOut: return "timed-out";
    case Code::kClosed: return "closed";
    case Code::kProtocolError: return "protocol-error";
    case Code::kIoError: return "io-error";
    case Code::kPermissionDenied: return "permission-denied";
    case Code::kNotSupported: return "not-supported";
    case Code::kCancelled: return "cancelled";
    case Code::kInternal: return "internal";
  }
  return "unknown";
}

Status::Status(Code code, std::string_view message)
    : code_(code),
      message_(message.empty() ? nullptr : std::make_shared<const std::string>(message)) {}

Status::Status(Code code, std::string_view message, DetailKind kind, int detail)
    : code_(code),
      kind_(kind),
      detail_(detail),
      message_(message.empty() ? nullptr : std::make_shared<const std::string>(message)) {}

Status Status::FromErrno(int err, std::string_view what) {
  std::string msg(what);
  msg += ": ";
  msg += std::strerror(err);
  return Status(Code::kIoError, msg, DetailKind::kErrno, err);
}

Status Status::FromErrnoAuto(int err, std::string_view what) {
  Code code = Code::kIoError;
  switch (err) {
    case EAGAIN: return WouldBlock();
    case EINPROGRESS: return InProgress();
    case ENOMEM:
    case ENOBUFS:
    case EMFILE:
    case ENFILE: code = Code::kResourceExhausted; break;
    case EINVAL: code = Code::kInvalidArgument; break;
    case ENOENT:
    case ENODEV:
    case ENXIO: code = Code::kNotFound; break;
    case EACCES:
    case EPERM: code = Code::kPermissionDenied; break;
    case ETIMEDOUT: code = Code::kTimedOut; break;
    case EPIPE:
    case ECONNRESET:
    case ENOTCONN: code = Code::kClosed; break;
    case ECONNREFUSED:
    case EHOSTUNREACH:
    case ENETUNREACH:
    case EADDRNOTAVAIL: code = Code::kUnavailable; break;
    case EOPNOTSUPP: code = Code::kNotSupported; break;
    default: break;
  }
  std::string msg(what);
  msg += ": ";
  msg += std::strerror(err);
  return Status(code, msg, DetailKind::kErrno, err);
}

std::string_view Status::message() const {
  return message_ ? std::string_view(*message_) : std::string_view();
}

std::string Status::to_string() const {
  std::string out(code_name(code_));
  if (message_) {
    out += ": ";
    out += *message_;
  }
  switch (kind_) {
    case DetailKind::kErrno: out += " (errno " + std::to_string(detail_) + ")"; break;
    case DetailKind::kWcStatus: out += " (wc status " + std::to_string(detail_) + ")"; break;
    case DetailKind::kCmEvent: out += " (cm event status " + std::to_string(detail_) + ")"; break;
    case DetailKind::kNone: break;
  }
  return out;
}

Status Status::annotate(std::string_view context) const {
  if (ok()) return *this;
  std::string msg(context);
  if (message_) {
    msg += ": ";
    msg += *message_;
  }
  return Status(code_, msg, kind_, detail_);
}

}  // namespace conduit
