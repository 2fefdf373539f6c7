#include "rdma_env.h"

#include <cstdlib>

namespace conduit::verbs::testing {

namespace {
std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}
}  // namespace

std::string device_name() { return env("CONDUIT_RDMA_DEVICE"); }
std::string device_addr() { return env("CONDUIT_RDMA_ADDR"); }
bool device_required() { return env("CONDUIT_REQUIRE_RDMA") == "1"; }

Result<std::shared_ptr<Context>> open_test_device() { return Context::open(device_name()); }

Result<std::unique_ptr<LoopbackPair>> LoopbackPair::create(std::shared_ptr<Context> ctx, QpOptions options,
                                                           std::shared_ptr<SharedReceiveQueue> srq_b) {
  auto p = std::make_unique<LoopbackPair>();
  p->ctx = ctx;
  CONDUIT_ASSIGN_OR_RETURN(p->pd, ProtectionDomain::create(ctx));
  CONDUIT_ASSIGN_OR_RETURN(p->channel, CompletionChannel::create(ctx));
  const int cqe = static_cast<int>(options.max_send_wr + options.max_recv_wr) + 16;
  CONDUIT_ASSIGN_OR_RETURN(p->cq_a, CompletionQueue::create(ctx, cqe, p->channel));
  CONDUIT_ASSIGN_OR_RETURN(p->cq_b, CompletionQueue::create(ctx, cqe, p->channel));
  CONDUIT_ASSIGN_OR_RETURN(p->a, QueuePair::create(p->pd, p->cq_a, p->cq_a, options));
  CONDUIT_ASSIGN_OR_RETURN(p->b, QueuePair::create(p->pd, p->cq_b, p->cq_b, options, srq_b));
  CONDUIT_ASSIGN_OR_RETURN(auto ba, RegisteredBuffer::create(p->pd, kBufSize, kRemoteAll));
  CONDUIT_ASSIGN_OR_RETURN(auto bb, RegisteredBuffer::create(p->pd, kBufSize, kRemoteAll));
  p->buf_a = std::make_unique<RegisteredBuffer>(std::move(ba));
  p->buf_b = std::make_unique<RegisteredBuffer>(std::move(bb));
  ConnectOptions co;
  CONDUIT_ASSIGN_OR_RETURN(co.port, ctx->first_active_port());
  CONDUIT_ASSIGN_OR_RETURN(p->ep_a, p->a->local_endpoint(co));
  CONDUIT_ASSIGN_OR_RETURN(p->ep_b, p->b->local_endpoint(co));
  CONDUIT_RETURN_IF_ERROR(p->a->connect(p->ep_a, p->ep_b, co));
  CONDUIT_RETURN_IF_ERROR(p->b->connect(p->ep_b, p->ep_a, co));
  return p;
}

Result<std::vector<Completion>> wait_completions(CompletionQueue& cq, int n, int timeout_ms) {
  std::vector<Completion> out(static_cast<size_t>(n));
  CONDUIT_RETURN_IF_ERROR(poll_until(cq, n, timeout_ms, out));
  // Nothing extra may be sitting there.
  Completion extra[4];
  CONDUIT_ASSIGN_OR_RETURN(int more, cq.poll(extra));
  if (more != 0)
    return Status(Code::kInternal, "unexpected extra completion: " + extra[0].to_string());
  return out;
}

}  // namespace conduit::verbs::testing
