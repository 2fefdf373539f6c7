// Work-request builders and selective signalling.
//
// SendWr is an ibv_send_wr with named constructors for each opcode, so the fields an
// opcode needs cannot be forgotten and fields it ignores are never set:
//
//   ibv_sge sge = buf.sge(0, 64);
//   auto wr = SendWr::write(&sge, 1, remote_addr, rkey).id(7).signaled();
//   qp.post_send(wr);
//
// The builders only fill a struct: no allocation, no syscalls; they are meant for the
// data path.  Scatter/gather arrays are referenced, not copied: they must stay valid
// until post_send returns (the NIC copies them at post time).  Immediate data is given
// in host order and converted to network order here.
#pragma once

#include <infiniband/verbs.h>

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <vector>
#include <string_view>

namespace conduit::verbs {

std::string_view wr_opcode_name(ibv_wr_opcode op);

class SendWr {
 public:
  static SendWr send(ibv_sge* sg, int n) { return SendWr(IBV_WR_SEND, sg, n); }
  static SendWr send_imm(ibv_sge* sg, int n, uint32_t imm) {
    SendWr w(IBV_WR_SEND_WITH_IMM, sg, n);
    w.wr_.imm_data = htobe32(imm);
    return w;
  }
  static SendWr write(ibv_sge* sg, int n, uint64_t remote_addr, uint32_t rkey) {
    SendWr w(IBV_WR_RDMA_WRITE, sg, n);
    w.wr_.wr.rdma = {remote_addr, rkey};
    return w;
  }
  static SendWr write_imm(ibv_sge* sg, int n, uint64_t remote_addr, uint32_t rkey, uint32_t imm) {
    SendWr w(IBV_WR_RDMA_WRITE_WITH_IMM, sg, n);
    w.wr_.wr.rdma = {remote_addr, rkey};
    w.wr_.imm_data = htobe32(imm);
    return w;
  }
  static SendWr read(ibv_sge* sg, int n, uint64_t remote_addr, uint32_t rkey) {
    SendWr w(IBV_WR_RDMA_READ, sg, n);
    w.wr_.wr.rdma = {remote_addr, rkey};
    return w;
  }
  // Atomics operate on an 8-byte, 8-byte-aligned remote word; the old value lands in the
  // (8-byte) local sge.
  static SendWr compare_swap(ibv_sge* sg, uint64_t remote_addr, uint32_t rkey, uint64_t compare,
                             uint64_t swap) {
    SendWr w(IBV_WR_ATOMIC_CMP_AND_SWP, sg, 1);
    w.wr_.wr.atomic = {remote_addr, compare, swap, rkey};
    return w;
  }
  static SendWr fetch_add(ibv_sge* sg, uint64_t remote_addr, uint32_t rkey, uint64_t add) {
    SendWr w(IBV_WR_ATOMIC_FETCH_AND_ADD, sg, 1);
    w.wr_.wr.atomic = {remote_addr, add, 0, rkey};
    return w;
  }

  // Binds type-2 window `mw` over [addr, addr + len) of the region `mr` with remote
  // `access` (IBV_ACCESS_REMOTE_*), under the new `rkey` (MemoryWindow::next_rkey()).
  static SendWr bind_mw(ibv_mw* mw, uint32_t rkey, ibv_mr* mr, uint64_t addr, uint64_t len, int access) {
    SendWr w(IBV_WR_BIND_MW, nullptr, 0);
    w.wr_.bind_mw.mw = mw;
    w.wr_.bind_mw.rkey = rkey;
    w.wr_.bind_mw.bind_info.mr = mr;
    w.wr_.bind_mw.bind_info.addr = addr;
    w.wr_.bind_mw.bind_info.length = len;
    w.wr_.bind_mw.bind_info.mw_access_flags = static_cast<unsigned>(access);
    return w;
  }
  // Invalidates `rkey` (a window bound through this QP): remote accesses with it fail.
  static SendWr local_invalidate(uint32_t rkey) {
    SendWr w(IBV_WR_LOCAL_INV, nullptr, 0);
    w.wr_.invalidate_rkey = rkey;
    return w;
  }

  SendWr& id(uint64_t wr_id) { wr_.wr_id = wr_id; return *this; }
  SendWr& signaled(bool on = true) { return flag(IBV_SEND_SIGNALED, on); }
  // Data is copied into the WQE at post time: the buffer is free as soon as post returns
  // and needs no lkey.  Only for SEND/WRITE and up to the QP's max_inline_data.
  SendWr& inlined(bool on = true) { return flag(IBV_SEND_INLINE, on); }
  SendWr& solicited(bool on = true) { return flag(IBV_SEND_SOLICITED, on); }
  SendWr& fenced(bool on = true) { return flag(IBV_SEND_FENCE, on); }

  ibv_wr_opcode opcode() const { return wr_.opcode; }
  bool is_signaled() const { return (wr_.send_flags & IBV_SEND_SIGNALED) != 0; }
  uint32_t total_length() const {
    uint32_t n = 0;
    for (int i = 0; i < wr_.num_sge; ++i) n += wr_.sg_list[i].length;
    return n;
  }
  ibv_send_wr* native() { return &wr_; }
  const ibv_send_wr* native() const { return &wr_; }

 private:
  SendWr(ibv_wr_opcode op, ibv_sge* sg, int n) {
    wr_.opcode = op;
    wr_.sg_list = sg;
    wr_.num_sge = n;
  }
  SendWr& flag(unsigned bit, bool on) {
    wr_.send_flags = on ? (wr_.send_flags | bit) : (wr_.send_flags & ~bit);
    return *this;
  }
  ibv_send_wr wr_{};
};
static_assert(sizeof(SendWr) == sizeof(ibv_send_wr));

struct RecvWr {
  static RecvWr make(ibv_sge* sg, int n, uint64_t wr_id) {
    RecvWr r;
    r.wr_.wr_id = wr_id;
    r.wr_.sg_list = sg;
    r.wr_.num_sge = n;
    return r;
  }
  ibv_recv_wr* native() { return &wr_; }
  ibv_recv_wr wr_{};
};

// Links WRs into one chain so a single post (one doorbell) submits them all.  Holds
// pointers only; the WRs must outlive the post.  O(1) per append.
template <typename Wr>
class WrChain {
 public:
  void append(Wr& wr) {
    wr.native()->next = nullptr;
    if (tail_ == nullptr) head_ = wr.native();
    else tail_->next = wr.native();
    tail_ = wr.native();
    ++size_;
  }
  void clear() { head_ = tail_ = nullptr; size_ = 0; }
  auto* head() const { return head_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

 private:
  decltype(std::declval<Wr&>().native()) head_ = nullptr;
  decltype(std::declval<Wr&>().native()) tail_ = nullptr;
  size_t size_ = 0;
};
using SendChain = WrChain<SendWr>;
using RecvChain = WrChain<RecvWr>;

// Selective signalling without send-queue overflow.
//
// A send queue slot is freed only when the NIC reports a completion at or after it, and
// only signaled WRs report one.  SignalTracker keeps the invariant
//     outstanding() <= depth   and   every window of `interval` consecutive WRs holds a
//                                    signaled one
// which together prove that a full queue always has a completion coming that frees it:
// callers check can_post(n) before posting n WRs, call on_post() per WR to learn whether
// to set IBV_SEND_SIGNALED, and call on_signaled_completion() for each signaled send
// completion (RC completes them in order).  interval must be in [1, depth].
// Not thread-safe: one tracker per QP, used from the thread that posts.
class SignalTracker {
 public:
  SignalTracker(uint32_t depth, uint32_t interval)
      : depth_(depth), interval_(interval), ring_(depth) {
    assert(depth >= 1 && interval >= 1 && interval <= depth);
  }

  uint32_t depth() const { return depth_; }
  uint32_t interval() const { return interval_; }
  uint32_t outstanding() const { return static_cast<uint32_t>(posted_ - freed_); }
  // Sequence numbers: the next WR posted gets posted(); every WR with a number below
  // completed() is done (its buffers may be reused).
  uint64_t posted() const { return posted_; }
  uint64_t completed() const { return freed_; }
  uint32_t available() const { return depth_ - outstanding(); }
  bool can_post(uint32_t n) const { return n <= available(); }
  // Signaled WRs whose completion has not been seen yet (bounds the CQ entries needed).
  size_t signals_in_flight() const { return static_cast<size_t>(ring_tail_ - ring_head_); }
  // The most recently posted WR is signaled and not yet completed: its completion will
  // account for every WR posted so far (false when nothing is outstanding).
  bool last_signaled() const {
    return ring_head_ != ring_tail_ && ring_[(ring_tail_ - 1) % depth_] == posted_ - 1;
  }

  // Check, post, then account: must_signal() says whether the next WR has to carry
  // IBV_SEND_SIGNALED (the caller wants a completion, or the unsignaled run would reach the
  // interval) without registering anything; on_posted() registers a WR once ibv_post_send
  // accepted it.  A post that fails thus leaves the tracker exactly as it was.
  bool must_signal(bool want_signal = false) const { return want_signal || unsignaled_run_ + 1 >= interval_; }
  void on_posted(bool signaled) {
    assert(available() > 0);
    assert(signaled || !must_signal());
    const uint64_t seq = posted_++;
    if (!signaled) {
      ++unsignaled_run_;
      return;
    }
    unsignaled_run_ = 0;
    // At most `depth` signaled WRs can be outstanding, so the ring never overflows.
    ring_[ring_tail_++ % depth_] = seq;
  }
  // must_signal() and on_posted() in one, for callers whose post cannot fail halfway (or
  // that reset the tracker when it does): registers one WR about to be posted and returns
  // whether it must be signaled.
  bool on_post(bool want_signal = false) {
    const bool signaled = must_signal(want_signal);
    on_posted(signaled);
    return signaled;
  }

  // A signaled send completion arrived: it and every earlier WR are done.
  void on_signaled_completion() {
    assert(ring_head_ != ring_tail_);
    if (ring_head_ == ring_tail_) return;
    freed_ = ring_[ring_head_++ % depth_] + 1;
  }

  // After the QP went to error (every WR flushed) or was reset.
  void reset() {
    freed_ = posted_;
    unsignaled_run_ = 0;
    ring_head_ = ring_tail_ = 0;
  }

 private:
  uint32_t depth_;
  uint32_t interval_;
  uint64_t posted_ = 0;
  uint64_t freed_ = 0;
  uint32_t unsignaled_run_ = 0;
  // Sequence numbers of signaled WRs not yet completed, oldest first; sized once.
  std::vector<uint64_t> ring_;
  uint64_t ring_head_ = 0;
  uint64_t ring_tail_ = 0;
};

}  // namespace conduit::verbs
