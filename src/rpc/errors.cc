#include "conduit/rpc/errors.h"

namespace conduit::rpc {
namespace {

struct Row {
  ErrorCode code;
  std::string_view name;
  Code status;
};
// The one table of codes (docs/PROTOCOL.md "Error codes" lists the same rows).
constexpr Row kRows[] = {
    {ErrorCode::kOk, "ok", Code::kOk},
    {ErrorCode::kCancelled, "cancelled", Code::kCancelled},
    {ErrorCode::kDeadlineExceeded, "deadline-exceeded", Code::kTimedOut},
    {ErrorCode::kUnavailable, "unavailable", Code::kUnavailable},
    {ErrorCode::kResourceExhausted, "resource-exhausted", Code::kResourceExhausted},
    {ErrorCode::kInvalidArgument, "invalid-argument", Code::kInvalidArgument},
    {ErrorCode::kUnimplemented, "unimplemented", Code::kNotSupported},
    {ErrorCode::kInternal, "internal", Code::kInternal},
};

}  // namespace

std::string_view error_code_name(ErrorCode c) {
  for (const Row& r : kRows)
    if (r.code == c) return r.name;
  return "internal";
}

ErrorCode error_code_from_wire(uint32_t v) {
  for (const Row& r : kRows)
    if (static_cast<uint32_t>(r.code) == v) return r.code;
  return ErrorCode::kInternal;
}

Code to_status_code(ErrorCode c) {
  for (const Row& r : kRows)
    if (r.code == c) return r.status;
  return Code::kInternal;
}

ErrorCode from_status_code(Code c) {
  for (const Row& r : kRows)
    if (r.status == c) return r.code;
  switch (c) {
    case Code::kClosed:
    case Code::kIoError:
    case Code::kProtocolError:
    case Code::kNotFound:
      return ErrorCode::kUnavailable;
    case Code::kPermissionDenied:
      return ErrorCode::kInvalidArgument;
    default:
      return ErrorCode::kInternal;
  }
}

Status rpc_status(ErrorCode c, std::string_view message) {
  if (c == ErrorCode::kOk) return Status::Ok();
  return Status(to_status_code(c), message);
}

}  // namespace conduit::rpc
