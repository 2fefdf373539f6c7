// The RPC error codes: a small fixed set (gRPC's names), carried on the wire as a u32 in
// the RESPONSE/GOAWAY frame header (docs/PROTOCOL.md) with a message that reaches the
// caller.  One table (errors.cc) gives each code's number, printable name and the
// conduit::Code it maps to; parsing, printing and the docs come from it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "conduit/base/status.h"

namespace conduit::rpc {

enum class ErrorCode : uint32_t {
  kOk = 0,
  kCancelled = 1,
  kDeadlineExceeded = 2,
  kUnavailable = 3,
  kResourceExhausted = 4,
  kInvalidArgument = 5,
  kUnimplemented = 6,
  kInternal = 7,
};

// "ok", "cancelled", "deadline-exceeded", ...
std::string_view error_code_name(ErrorCode c);
// A wire value outside the table reads as kInternal (a newer peer's code is still an error).
ErrorCode error_code_from_wire(uint32_t v);
// The conduit::Status code for an rpc code and back (kTimedOut <-> deadline, kNotSupported
// <-> unimplemented; transport codes such as kClosed/kIoError read as unavailable).
Code to_status_code(ErrorCode c);
ErrorCode from_status_code(Code c);
// A Status carrying the rpc code and message ("deadline-exceeded: ..." when printed).
Status rpc_status(ErrorCode c, std::string_view message);

}  // namespace conduit::rpc
