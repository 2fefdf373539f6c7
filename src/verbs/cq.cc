#include "conduit/verbs/cq.h"

#include <fcntl.h>
#include <poll.h>

#include <cerrno>
#include <cstring>

#include "conduit/base/clock.h"
#include "conduit/base/log.h"

namespace conduit::verbs {

std::string_view wc_opcode_name(ibv_wc_opcode op) {
  switch (op) {
    case IBV_WC_SEND: return "SEND";
    case IBV_WC_RDMA_WRITE: return "RDMA_WRITE";
    case IBV_WC_RDMA_READ: return "RDMA_READ";
    case IBV_WC_COMP_SWAP: return "COMP_SWAP";
    case IBV_WC_FETCH_ADD: return "FETCH_ADD";
    case IBV_WC_BIND_MW: return "BIND_MW";
    case IBV_WC_LOCAL_INV: return "LOCAL_INV";
    case IBV_WC_RECV: return "RECV";
    case IBV_WC_RECV_RDMA_WITH_IMM: return "RECV_RDMA_WITH_IMM";
    default: break;
  }
  return "OTHER";
}

conduit::Status Completion::as_status() const {
  if (ok()) return {};
  std::string msg = std::string(ibv_wc_status_str(ibv_wc::status)) + " (qp " + std::to_string(qp_num) +
                    ", wr_id " + std::to_string(wr_id) + ", vendor_err " + std::to_string(vendor_err) + ")";
  const Code code = ibv_wc::status == IBV_WC_WR_FLUSH_ERR ? Code::kCancelled : Code::kIoError;
  return conduit::Status(code, msg, DetailKind::kWcStatus, static_cast<int>(ibv_wc::status));
}

std::string Completion::to_string() const {
  std::string s;
  // The opcode field is only defined for successful completions.
  s += ok() ? wc_opcode_name(opcode) : std::string_view("?");
  s += ok() ? " ok" : std::string(" error: ") + ibv_wc_status_str(ibv_wc::status);
  s += " qp=" + std::to_string(qp_num) + " wr_id=" + std::to_string(wr_id);
  if (ok()) s += " len=" + std::to_string(byte_len);
  if (ok() && has_imm()) s += " imm=" + std::to_string(imm());
  return s;
}

Result<std::shared_ptr<CompletionChannel>> CompletionChannel::create(std::shared_ptr<Context> ctx) {
  if (!ctx) return conduit::Status(Code::kInvalidArgument, "CompletionChannel: null context");
  ibv_comp_channel* ch = ibv_create_comp_channel(ctx->native_handle());
  if (ch == nullptr) return conduit::Status::FromErrnoAuto(errno, "ibv_create_comp_channel");
  std::shared_ptr<CompletionChannel> out(new CompletionChannel(std::move(ctx), ch));
  const int flags = fcntl(ch->fd, F_GETFL);
  if (flags < 0 || fcntl(ch->fd, F_SETFL, flags | O_NONBLOCK) < 0)
    return conduit::Status::FromErrno(errno, "fcntl(O_NONBLOCK) on completion channel");
  return out;
}

CompletionChannel::~CompletionChannel() {
  if (int rc = ibv_destroy_comp_channel(ch_); rc != 0)
    CONDUIT_LOG(kError) << "ibv_destroy_comp_channel failed (a CQ still uses it?): " << std::strerror(rc);
}

Result<std::shared_ptr<CompletionQueue>> CompletionQueue::create(std::shared_ptr<Context> ctx, int entries,
                                                                 std::shared_ptr<CompletionChannel> channel,
                                                                 int comp_vector) {
  if (!ctx) return conduit::Status(Code::kInvalidArgument, "CompletionQueue: null context");
  if (entries <= 0 || entries > ctx->attr().max_cqe)
    return conduit::Status(Code::kInvalidArgument, "CompletionQueue: entries " + std::to_string(entries) +
                                                       " outside 1.." + std::to_string(ctx->attr().max_cqe));
  ibv_cq* cq = ibv_create_cq(ctx->native_handle(), entries, nullptr,
                             channel ? channel->native_handle() : nullptr, comp_vector);
  if (cq == nullptr) return conduit::Status::FromErrnoAuto(errno, "ibv_create_cq");
  return std::shared_ptr<CompletionQueue>(new CompletionQueue(std::move(ctx), std::move(channel), cq));
}

CompletionQueue::~CompletionQueue() {
  if (unacked_events_ > 0) ibv_ack_cq_events(cq_, unacked_events_);
  if (int rc = ibv_destroy_cq(cq_); rc != 0)
    CONDUIT_LOG(kError) << "ibv_destroy_cq failed (a QP still uses it?): " << std::strerror(rc);
}

conduit::Status CompletionQueue::poll_error(int rc) {
  return conduit::Status(Code::kIoError, "ibv_poll_cq failed", DetailKind::kErrno, -rc);
}

conduit::Status CompletionQueue::arm(bool solicited_only) {
  if (int rc = ibv_req_notify_cq(cq_, solicited_only ? 1 : 0); rc != 0)
    return conduit::Status::FromErrno(rc, "ibv_req_notify_cq");
  return {};
}

Result<int> CompletionQueue::consume_events(int max_reads) {
  if (!channel_) return conduit::Status(Code::kInvalidArgument, "consume_events: CQ has no channel");
  int consumed = 0;
  for (int reads = 0; reads < max_reads; ++reads) {
    ibv_cq* ev_cq = nullptr;
    void* ev_ctx = nullptr;
    if (ibv_get_cq_event(channel_->native_handle(), &ev_cq, &ev_ctx) != 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      return conduit::Status::FromErrno(errno, "ibv_get_cq_event");
    }
    if (ev_cq != cq_) {
      // A channel shared by several CQs: ack it on that CQ's behalf (ack is per-CQ count).
      ibv_ack_cq_events(ev_cq, 1);
      continue;
    }
    ++consumed;
    // Acking takes a mutex in libibverbs; batch it.
    if (++unacked_events_ >= 64) {
      ibv_ack_cq_events(cq_, unacked_events_);
      unacked_events_ = 0;
    }
  }
  return consumed;
}

Result<int> CompletionQueue::poll_blocking(std::span<Completion> out, int timeout_ms) {
  if (!channel_) return conduit::Status(Code::kInvalidArgument, "poll_blocking: CQ has no channel");
  const uint64_t deadline = monotonic_ns() + static_cast<uint64_t>(timeout_ms) * 1000000ull;
  for (;;) {
    CONDUIT_ASSIGN_OR_RETURN(int events, consume_events());
    (void)events;
    CONDUIT_RETURN_IF_ERROR(arm());
    CONDUIT_ASSIGN_OR_RETURN(int n, poll(out));
    if (n > 0) return n;
    const uint64_t now = monotonic_ns();
    if (now >= deadline) return conduit::Status(Code::kTimedOut, "no completion before the timeout");
    pollfd pfd{channel_->fd(), POLLIN, 0};
    const int left_ms = static_cast<int>((deadline - now + 999999) / 1000000);
    if (::poll(&pfd, 1, left_ms) < 0 && errno != EINTR)
      return conduit::Status::FromErrno(errno, "poll on completion channel");
  }
}

conduit::Status poll_until(CompletionQueue& cq, int want, int timeout_ms, std::span<Completion> out) {
  if (static_cast<int>(out.size()) < want)
    return conduit::Status(Code::kInvalidArgument, "poll_until: output span too small");
  const uint64_t deadline = monotonic_ns() + static_cast<uint64_t>(timeout_ms) * 1000000ull;
  int got = 0;
  while (got < want) {
    CONDUIT_ASSIGN_OR_RETURN(int n, cq.poll(out.subspan(got, want - got)));
    got += n;
    if (got < want && monotonic_ns() > deadline)
      return conduit::Status(Code::kTimedOut, "poll_until: " + std::to_string(got) + " of " +
                                                  std::to_string(want) + " completions before the timeout");
  }
  return {};
}

}  // namespace conduit::verbs
