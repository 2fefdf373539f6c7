// The built-in conduit.rpc.StatusService (status.proto): GetStatus, GetProtos, Health.
#pragma once

#include <google/protobuf/service.h>

#include <memory>

namespace conduit::rpc {
class ServerImpl;
std::unique_ptr<google::protobuf::Service> make_status_service(ServerImpl* server);
}  // namespace conduit::rpc
