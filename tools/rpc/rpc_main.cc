// conduit-rpc: call any method of a conduit::rpc server with protobuf's JSON mapping, and
// read its status service (the grpcurl / brpc builtin-services experience).
//
//   conduit-rpc status URL [--json]
//   conduit-rpc list URL
//   conduit-rpc call URL pkg.Service/Method '{"payload":"aGk="}' [--proto f.proto -I dir]
//                    [-H key=value]... [--timeout-ms N]
//
// Without --proto the schemas come from the server (conduit.rpc.StatusService/GetProtos).
// Exit status: 0 ok, 1 the call failed (the error code and message are printed), 2 usage.
#include <google/protobuf/compiler/importer.h>
#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/dynamic_message.h>
#include <google/protobuf/util/json_util.h>

#include <CLI/CLI.hpp>

#include <cstdio>

#include "conduit/rpc/channel.h"
#include "conduit/rpc/status.pb.h"

using namespace conduit;
namespace pb = google::protobuf;

namespace {

int fail(const std::string& what) {
  std::fprintf(stderr, "conduit-rpc: %s\n", what.c_str());
  return 1;
}

class Errors : public pb::compiler::MultiFileErrorCollector {
 public:
  void AddError(const std::string& file, int line, int col, const std::string& msg) override {
    std::fprintf(stderr, "conduit-rpc: %s:%d:%d: %s\n", file.c_str(), line + 1, col + 1, msg.c_str());
  }
};

// Schemas from the server's status service, into `pool`.
Status fetch_protos(rpc::Channel& ch, pb::DescriptorPool* pool, std::vector<std::string>* services, int64_t timeout_ms) {
  rpc::StatusService_Stub stub(&ch);
  rpc::ProtosRequest req;
  rpc::ProtosResponse resp;
  rpc::Controller cntl;
  cntl.set_timeout_ms(timeout_ms);
  stub.GetProtos(&cntl, &req, &resp, nullptr);
  if (cntl.Failed()) return cntl.status().annotate("GetProtos");
  pb::FileDescriptorSet set;
  if (!set.ParseFromString(resp.file_descriptor_set())) return Status(Code::kInternal, "GetProtos: bad descriptor set");
  for (const auto& f : set.file())
    if (pool->BuildFile(f) == nullptr) return Status(Code::kInternal, "GetProtos: cannot build " + f.name());
  if (services != nullptr) services->assign(resp.services().begin(), resp.services().end());
  return Status::Ok();
}

int cmd_status(const std::string& url, bool json, int64_t timeout_ms) {
  auto ch = rpc::Channel::create(url);
  if (!ch.ok()) return fail(ch.status().to_string());
  rpc::StatusService_Stub stub(ch->get());
  rpc::StatusRequest req;
  rpc::StatusResponse resp;
  rpc::Controller cntl;
  cntl.set_timeout_ms(timeout_ms);
  stub.GetStatus(&cntl, &req, &resp, nullptr);
  if (cntl.Failed()) return fail(std::string(rpc::error_code_name(cntl.error_code())) + ": " + cntl.ErrorText());
  if (json) {
    std::string out;
    pb::util::JsonPrintOptions o;
    o.add_whitespace = true;
    (void)pb::util::MessageToJsonString(resp, &out, o);
    std::printf("%s", out.c_str());
    return 0;
  }
  std::printf("%s  wire v%u  up %.1f s  threads %u  workers %u  in flight %llu\n", resp.server().c_str(),
              resp.wire_version(), resp.uptime_ms() / 1e3, resp.threads(), resp.worker_threads(),
              (unsigned long long)resp.in_flight());
  for (const auto& u : resp.listen_urls()) std::printf("listening %s\n", u.c_str());
  std::printf("\n%-48s %-13s %10s %8s %8s %10s %10s %10s\n", "method", "kind", "calls", "errors", "inflight", "p50_us",
              "p99_us", "p99.9_us");
  for (const auto& m : resp.methods())
    std::printf("%-48s %-13s %10llu %8llu %8llu %10.1f %10.1f %10.1f\n", m.name().c_str(), m.kind().c_str(),
                (unsigned long long)m.calls(), (unsigned long long)m.errors(), (unsigned long long)m.in_flight(),
                m.p50_us(), m.p99_us(), m.p999_us());
  std::printf("\n%-5s %-28s %-28s %-16s %12s %12s %8s\n", "trans", "local", "peer", "extensions", "bytes_in",
              "bytes_out", "inflight");
  for (const auto& c : resp.connections())
    std::printf("%-5s %-28s %-28s %-16s %12llu %12llu %8llu\n", c.transport().c_str(), c.local().c_str(),
                c.peer().c_str(), c.extensions().empty() ? "-" : c.extensions().c_str(),
                (unsigned long long)c.bytes_read(), (unsigned long long)c.bytes_written(),
                (unsigned long long)c.in_flight());
  return 0;
}

int cmd_list(const std::string& url, int64_t timeout_ms) {
  auto ch = rpc::Channel::create(url);
  if (!ch.ok()) return fail(ch.status().to_string());
  pb::DescriptorPool pool;
  std::vector<std::string> services;
  if (Status s = fetch_protos(**ch, &pool, &services, timeout_ms); !s.ok()) return fail(s.to_string());
  for (const auto& name : services) {
    const pb::ServiceDescriptor* sd = pool.FindServiceByName(name);
    if (sd == nullptr) continue;
    for (int i = 0; i < sd->method_count(); ++i) {
      const pb::MethodDescriptor* m = sd->method(i);
      std::printf("%s/%s(%s%s) returns (%s%s)\n", name.c_str(), m->name().c_str(), m->client_streaming() ? "stream " : "",
                  m->input_type()->full_name().c_str(), m->server_streaming() ? "stream " : "",
                  m->output_type()->full_name().c_str());
    }
  }
  return 0;
}

int cmd_call(const std::string& url, const std::string& method, const std::string& body, const std::string& proto,
             const std::vector<std::string>& includes, const std::vector<std::string>& headers, int64_t timeout_ms) {
  auto ch = rpc::Channel::create(url);
  if (!ch.ok()) return fail(ch.status().to_string());
  const size_t slash = method.find('/');
  if (slash == std::string::npos) return fail("method must be pkg.Service/Method, got " + method);
  pb::compiler::DiskSourceTree tree;
  Errors errors;
  pb::compiler::Importer importer(&tree, &errors);
  pb::DescriptorPool fetched;
  const pb::DescriptorPool* pool = &fetched;
  if (!proto.empty()) {
    tree.MapPath("", ".");
    for (const auto& i : includes) tree.MapPath("", i);
    if (importer.Import(proto) == nullptr) return fail("cannot load " + proto);
    pool = importer.pool();
  } else if (Status s = fetch_protos(**ch, &fetched, nullptr, timeout_ms); !s.ok()) {
    return fail(s.to_string() + " (pass --proto to give the schema)");
  }
  const pb::ServiceDescriptor* sd = pool->FindServiceByName(method.substr(0, slash));
  if (sd == nullptr) return fail("no service " + method.substr(0, slash));
  const pb::MethodDescriptor* md = sd->FindMethodByName(method.substr(slash + 1));
  if (md == nullptr) return fail("no method " + method);
  if (md->client_streaming() || md->server_streaming()) return fail(method + " is a streaming method (not supported by call)");
  pb::DynamicMessageFactory factory(pool);
  std::unique_ptr<pb::Message> req(factory.GetPrototype(md->input_type())->New());
  std::unique_ptr<pb::Message> resp(factory.GetPrototype(md->output_type())->New());
  if (auto st = pb::util::JsonStringToMessage(body, req.get()); !st.ok())
    return fail("request JSON: " + std::string(st.message()));
  rpc::Controller cntl;
  cntl.set_timeout_ms(timeout_ms);
  for (const auto& h : headers) {
    const size_t eq = h.find('=');
    if (eq == std::string::npos || eq == 0) return fail("header must be key=value: " + h);
    cntl.request_metadata().emplace_back(h.substr(0, eq), h.substr(eq + 1));
  }
  (*ch)->CallMethod(md, &cntl, req.get(), resp.get(), nullptr);
  if (cntl.Failed()) return fail(std::string(rpc::error_code_name(cntl.error_code())) + ": " + cntl.ErrorText());
  std::string out;
  pb::util::JsonPrintOptions o;
  o.add_whitespace = true;
  o.always_print_primitive_fields = true;
  (void)pb::util::MessageToJsonString(*resp, &out, o);
  std::printf("%s", out.c_str());
  for (const auto& [k, v] : cntl.response_metadata()) std::fprintf(stderr, "%s: %s\n", k.c_str(), v.c_str());
  if (!cntl.response_attachment().empty())
    std::fprintf(stderr, "(attachment of %zu bytes)\n", cntl.response_attachment().size());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"conduit-rpc: call conduit::rpc servers and read their status"};
  app.require_subcommand(1);
  std::string url, method, body = "{}", proto;
  std::vector<std::string> includes, headers;
  int64_t timeout_ms = 5000;
  bool json = false;
  auto* status = app.add_subcommand("status", "the server's status service: methods, latencies, connections");
  status->add_option("url", url, "server URL")->required();
  status->add_flag("--json", json, "print the StatusResponse as JSON");
  auto* list = app.add_subcommand("list", "the server's services and methods");
  list->add_option("url", url, "server URL")->required();
  auto* call = app.add_subcommand("call", "one unary call, request and response in protobuf's JSON mapping");
  call->add_option("url", url, "server URL")->required();
  call->add_option("method", method, "pkg.Service/Method")->required();
  call->add_option("json", body, "request as JSON")->capture_default_str();
  call->add_option("--proto", proto, ".proto file with the service (default: fetched from the server)");
  call->add_option("-I,--import-path", includes, "import directory for --proto");
  call->add_option("-H,--header", headers, "request metadata key=value (repeatable)");
  for (auto* c : {status, list, call}) c->add_option("--timeout-ms", timeout_ms, "deadline")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (*status) return cmd_status(url, json, timeout_ms);
  if (*list) return cmd_list(url, timeout_ms);
  return cmd_call(url, method, body, proto, includes, headers, timeout_ms);
}
