#include "status_service.h"

#include "conduit/rpc/status.pb.h"
#include "server_impl.h"

namespace conduit::rpc {
namespace {

class StatusServiceImpl : public StatusService {
 public:
  explicit StatusServiceImpl(ServerImpl* s) : server_(s) {}

  void GetStatus(google::protobuf::RpcController*, const StatusRequest*, StatusResponse* response,
                 google::protobuf::Closure* done) override {
    server_->status_async([response, done](std::shared_ptr<StatusResponse> r) {
      response->Swap(r.get());
      done->Run();
    });
  }

  void GetProtos(google::protobuf::RpcController*, const ProtosRequest*, ProtosResponse* response,
                 google::protobuf::Closure* done) override {
    for (const auto& n : server_->service_names()) response->add_services(n);
    response->set_file_descriptor_set(server_->file_descriptor_set());
    done->Run();
  }

  void Health(google::protobuf::RpcController*, const HealthRequest*, HealthResponse* response,
              google::protobuf::Closure* done) override {
    response->set_status(server_->going_away() ? "shutting-down" : "serving");
    done->Run();
  }

 private:
  ServerImpl* server_;
};

}  // namespace

std::unique_ptr<google::protobuf::Service> make_status_service(ServerImpl* server) {
  return std::make_unique<StatusServiceImpl>(server);
}

}  // namespace conduit::rpc
