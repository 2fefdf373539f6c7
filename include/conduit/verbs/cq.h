// Completion channels, completion queues and completions.
//
// Event-driven use from an epoll loop (the only race-free order):
//
//   cq.arm();                          // once, before the first wait
//   ... epoll says channel.fd() is readable ...
//   cq.consume_events();               // get + ack the channel events (non-blocking)
//   cq.arm();                          // re-arm BEFORE draining
//   while ((n = cq.poll(wcs)) > 0) ...  // drain: anything that lands after arm() raises a
//                                      // new event, so no completion is ever missed
//
// CompletionQueue::drain() performs exactly that sequence.  The poll/arm functions are
// data-path calls: no allocation, no locks beyond the provider's own.  A CQ is used by one
// thread at a time.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "conduit/base/status.h"
#include "conduit/verbs/device.h"

namespace conduit::verbs {

std::string_view wc_opcode_name(ibv_wc_opcode op);

// One work completion.  Layout-compatible with ibv_wc so arrays can be polled in place.
struct Completion : ibv_wc {
  bool ok() const { return ibv_wc::status == IBV_WC_SUCCESS; }
  // OK, or kIoError carrying ibv_wc_status as detail and ibv_wc_status_str in the message;
  // flush errors map to kCancelled.
  conduit::Status as_status() const;
  bool has_imm() const { return (wc_flags & IBV_WC_WITH_IMM) != 0; }
  // Immediate data in host byte order (it travels in network order).
  uint32_t imm() const { return be32toh(imm_data); }
  // "SEND ok qp=17 wr_id=3 len=64" or "RDMA_WRITE error: remote access error ..."
  std::string to_string() const;
};
static_assert(sizeof(Completion) == sizeof(ibv_wc));

class CompletionChannel {
 public:
  // The channel's fd is made non-blocking so it can sit in epoll.
  static Result<std::shared_ptr<CompletionChannel>> create(std::shared_ptr<Context> ctx);
  ~CompletionChannel();
  CompletionChannel(const CompletionChannel&) = delete;
  CompletionChannel& operator=(const CompletionChannel&) = delete;

  ibv_comp_channel* native_handle() const { return ch_; }
  int fd() const { return ch_->fd; }

 private:
  CompletionChannel(std::shared_ptr<Context> ctx, ibv_comp_channel* ch) : ctx_(std::move(ctx)), ch_(ch) {}
  std::shared_ptr<Context> ctx_;
  ibv_comp_channel* ch_;
};

class CompletionQueue {
 public:
  // `entries` is a minimum (providers round up).  `channel` may be null for a polled CQ.
  static Result<std::shared_ptr<CompletionQueue>> create(std::shared_ptr<Context> ctx, int entries,
                                                         std::shared_ptr<CompletionChannel> channel = {},
                                                         int comp_vector = 0);
  ~CompletionQueue();
  CompletionQueue(const CompletionQueue&) = delete;
  CompletionQueue& operator=(const CompletionQueue&) = delete;

  ibv_cq* native_handle() const { return cq_; }
  int capacity() const { return cq_->cqe; }
  const std::shared_ptr<CompletionChannel>& channel() const { return channel_; }

  // Up to out.size() completions; 0 when empty; an error only if the CQ itself failed.
  // Inline; the error Status is built out of line so the spin loops that call this stay small.
  Result<int> poll(std::span<Completion> out) {
    int n = ibv_poll_cq(cq_, static_cast<int>(out.size()), out.data());
    if (n < 0) [[unlikely]]
      return poll_error(n);
    return n;
  }

  // Request an event for the next completion (any, or only solicited ones).
  conduit::Status arm(bool solicited_only = false);

  // Reads the pending events from the channel without blocking, at most `max_reads` of them,
  // and acks them (acks are batched; destroy waits for none).  Returns how many were this
  // CQ's (0 is fine: the fd may be shared or spuriously readable).  Reading them all costs one
  // read more per call (the one that says EAGAIN); a caller whose channel is watched
  // level-triggered may read one, as whatever is left keeps the fd readable.
  Result<int> consume_events(int max_reads = INT32_MAX);

  // consume_events(1), arm(), then poll until empty, calling fn(const Completion&) for each.
  // Returns the number of completions handled.  For a channel watched level-triggered (an
  // armed CQ raises one event, and arm() follows each read, so one read is all there is for
  // a CQ with a channel of its own; a shared channel's other events keep the fd readable):
  // an edge-triggered caller uses consume_events() and the rest of the sequence itself.
  template <typename Fn>
  Result<int> drain(Fn&& fn, bool solicited_only = false) {
    CONDUIT_ASSIGN_OR_RETURN(int events, consume_events(1));
    (void)events;
    CONDUIT_RETURN_IF_ERROR(arm(solicited_only));
    Completion wcs[32];
    int total = 0;
    for (;;) {
      CONDUIT_ASSIGN_OR_RETURN(int n, poll(wcs));
      for (int i = 0; i < n; ++i) fn(static_cast<const Completion&>(wcs[i]));
      total += n;
      if (n < static_cast<int>(std::size(wcs))) return total;
    }
  }

  // Sleeps on the channel fd until at least one completion can be polled, then returns
  // what poll() would (>= 1).  Arms before checking, so a completion that lands at any
  // moment is seen.  Requires a channel.  kTimedOut when nothing arrived in time.  For
  // tools and tests that prefer sleeping to spinning.
  Result<int> poll_blocking(std::span<Completion> out, int timeout_ms);

 private:
  [[gnu::cold, gnu::noinline]] static conduit::Status poll_error(int rc);
  CompletionQueue(std::shared_ptr<Context> ctx, std::shared_ptr<CompletionChannel> ch, ibv_cq* cq)
      : ctx_(std::move(ctx)), channel_(std::move(ch)), cq_(cq) {}
  std::shared_ptr<Context> ctx_;
  std::shared_ptr<CompletionChannel> channel_;
  ibv_cq* cq_;
  unsigned unacked_events_ = 0;
};

// Polls `cq` until `want` completions arrived or `timeout_ms` passed (busy-polling; for
// tests and tools).  Appends to `out`.  kTimedOut if fewer arrived.
conduit::Status poll_until(CompletionQueue& cq, int want, int timeout_ms, std::span<Completion> out);

}  // namespace conduit::verbs
