// Setup shared by both sides: the verbs resources, the QP bootstrap over the control socket,
// completion waits, control-socket I/O and CPU time.
#include <poll.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "conduit/base/clock.h"
#include "strategies.h"

namespace conduit::bench {

std::string_view strategy_name(Strategy s) {
  switch (s) {
    case Strategy::kRegister: return "register";
    case Strategy::kStaging: return "staging";
    case Strategy::kPool: return "pool";
  }
  return "?";
}

Result<Strategy> parse_strategy(std::string_view name) {
  for (Strategy s : kStrategies)
    if (strategy_name(s) == name) return s;
  return Status(Code::kInvalidArgument,
                "unknown strategy '" + std::string(name) + "' (register, staging, pool)");
}

AppBuffer AppBuffer::make(size_t n) {
  const size_t rounded = (n + 4095) / 4096 * 4096;
  AppBuffer b;
  b.mem.reset(static_cast<uint8_t*>(std::aligned_alloc(4096, rounded)));
  if (b.mem) std::memset(b.mem.get(), 0, rounded);  // fault the pages in before timing
  return b;
}

Status warm_pool(memory::BlockPool& pool, size_t n, uint32_t count) {
  std::vector<memory::Slice> warm;
  for (uint32_t i = 0; i < count; ++i) {
    CONDUIT_ASSIGN_OR_RETURN(auto b, pool.allocate(n));
    std::memset(b.writable_data(), 0, n);
    warm.push_back(std::move(b));
  }
  return {};
}

Result<std::unique_ptr<Link>> Link::create(const std::string& device, UniqueFd ctl, PollMode poll) {
  auto l = std::make_unique<Link>();
  l->ctl = std::move(ctl);
  l->poll = poll;
  CONDUIT_ASSIGN_OR_RETURN(l->ctx, verbs::Context::open(device));
  CONDUIT_ASSIGN_OR_RETURN(l->pd, verbs::ProtectionDomain::create(l->ctx));
  CONDUIT_ASSIGN_OR_RETURN(l->channel, verbs::CompletionChannel::create(l->ctx));
  CONDUIT_ASSIGN_OR_RETURN(l->cq, verbs::CompletionQueue::create(l->ctx, kRecvSlots + kMaxSend + 16, l->channel));
  verbs::QpOptions qo;
  qo.max_send_wr = kMaxSend;
  qo.max_recv_wr = kRecvSlots;
  qo.max_send_sge = 1;
  qo.max_inline_data = sizeof(Credit);
  CONDUIT_ASSIGN_OR_RETURN(l->qp, verbs::QueuePair::create(l->pd, l->cq, l->cq, qo));
  CONDUIT_ASSIGN_OR_RETURN(auto ring, verbs::RegisteredBuffer::create(l->pd, size_t{kRecvSlots} * kRecvSlotBytes,
                                                                       verbs::Access::kLocalWrite));
  l->recv_ring = std::make_unique<verbs::RegisteredBuffer>(std::move(ring));

  verbs::ConnectOptions co;
  CONDUIT_ASSIGN_OR_RETURN(co.port, l->ctx->first_active_port());
  CONDUIT_ASSIGN_OR_RETURN(auto port, l->ctx->port(co.port));
  co.mtu = port.active_mtu;
  verbs::BootstrapInfo local;
  CONDUIT_ASSIGN_OR_RETURN(local.endpoint, l->qp->local_endpoint(co));
  CONDUIT_ASSIGN_OR_RETURN(auto remote, verbs::exchange_bootstrap(l->ctl.get(), local, 30000));
  CONDUIT_RETURN_IF_ERROR(l->qp->connect(local.endpoint, remote.endpoint, co));
  for (uint32_t i = 0; i < kRecvSlots; ++i) CONDUIT_RETURN_IF_ERROR(l->post_recv(i));
  // Both QPs must be at RTS before either side posts: one more round trip on the socket.
  uint8_t token = 1;
  CONDUIT_RETURN_IF_ERROR(send_all(l->ctl.get(), &token, 1));
  CONDUIT_RETURN_IF_ERROR(recv_all(l->ctl.get(), &token, 1, 30000));
  return l;
}

Status Link::post_recv(uint32_t slot) {
  ibv_sge sge = recv_ring->sge(size_t{slot} * kRecvSlotBytes, kRecvSlotBytes);
  auto wr = verbs::RecvWr::make(&sge, 1, kTagRecv | slot);
  return qp->post_recv(wr);
}

Result<int> Link::wait(std::span<verbs::Completion> out) {
  CONDUIT_ASSIGN_OR_RETURN(int n, cq->poll(out));
  if (n > 0) return n;
  if (poll == PollMode::kEvent) {
    auto r = cq->poll_blocking(out, wait_ms);
    if (!r.ok() && r.status().code() == Code::kTimedOut)
      return Status(Code::kTimedOut, "no completion for " + std::to_string(wait_ms / 1000) + " s (peer stalled?)");
    return r;
  }
  const uint64_t deadline = monotonic_ns() + uint64_t(wait_ms) * 1000000;
  for (uint32_t spins = 1;; ++spins) {
    CONDUIT_ASSIGN_OR_RETURN(n, cq->poll(out));
    if (n > 0) return n;
    if ((spins & 4095) == 0 && monotonic_ns() > deadline)
      return Status(Code::kTimedOut, "no completion for " + std::to_string(wait_ms / 1000) + " s (peer stalled?)");
  }
}

Status send_all(int fd, const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  while (n > 0) {
    const ssize_t w = ::write(fd, b, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno(errno, "control socket write");
    }
    b += w;
    n -= static_cast<size_t>(w);
  }
  return {};
}

Status recv_all(int fd, void* p, size_t n, int timeout_ms) {
  auto* b = static_cast<uint8_t*>(p);
  while (n > 0) {
    pollfd pfd{fd, POLLIN, 0};
    const int pr = ::poll(&pfd, 1, timeout_ms);
    if (pr < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno(errno, "control socket poll");
    }
    if (pr == 0) return Status(Code::kTimedOut, "control socket: peer silent for " + std::to_string(timeout_ms / 1000) + " s");
    const ssize_t r = ::read(fd, b, n);
    if (r < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno(errno, "control socket read");
    }
    if (r == 0) return Status(Code::kClosed, "control socket: the peer closed it");
    b += r;
    n -= static_cast<size_t>(r);
  }
  return {};
}

void cpu_times(uint64_t* user_ns, uint64_t* sys_ns) {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  *user_ns = uint64_t(ru.ru_utime.tv_sec) * 1000000000ull + uint64_t(ru.ru_utime.tv_usec) * 1000ull;
  *sys_ns = uint64_t(ru.ru_stime.tv_sec) * 1000000000ull + uint64_t(ru.ru_stime.tv_usec) * 1000ull;
}

}  // namespace conduit::bench
