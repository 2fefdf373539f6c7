// rma over rdma://: a queue pair of the endpoint's own, set up through its own rdma_cm
// connection (so its immediates never meet the stream protocol's), in a protection domain of
// its own (no other endpoint's QP can present its keys).
//
// Exposures: each gets a memory region of exactly its range.  Where the device has type-2
// memory windows (rxe on Linux 6.1 does: tests/verbs/rdma_mw_test.cc), the region is
// registered for local access and MW_BIND only and a window bound to this endpoint's QP with
// exactly the granted rights carries the key; revoke deallocates the window (its key is dead
// when ibv_dealloc_mw returns) and deregisters the region.  Without windows the region itself
// carries the rights and revoke deregisters it.  The region's range is the bound that holds
// on every device (rxe checks only the region's range for a window key), hence one region per
// exposure rather than a page-rounded registration from the cache.
//
// Local operands of reads and writes go through a RegistrationCache (local access only): a
// buffer that comes back is a lookup, and a handle pins the registration until the ops that
// use it completed.  An operand inside the previous one's registration reuses that handle
// (last_reg_) without the lookup, while the cache still holds that registration
// (Handle::current: an invalidated range is looked up again), and takes no pin of its own:
// when last_reg_ moves to another registration, the old handle is parked with the seq of
// the last op that used it and dropped once that op completed (ops complete in order), so
// an op costs no reference count.  Writes of at most kInlineMax bytes (if the QP grants it)
// go inline instead: the data is copied into the work request at post, so they need no
// registration.  Atomic results land in a registered slot per in-flight op.
//
// Signalling: the last WR of every batch and at least every signal_every-th are signalled;
// a signalled completion completes every op up to it (RC completes in order).
//
// Recovery after a remote access error: RC fails the queue pair of *both* sides (the
// requester on the NAK, the responder on the violation, IBA class C), flushing everything
// posted.  The endpoint survives it: the op that caused it fails with kPermissionDenied,
// the flushed sends are drained (not the receives: maybe_finish_recovery), and both sides
// reset the same QP in place (CmId::reset_qp: RESET -> RTS with the connection's rdma_cm
// attributes) with a PSN both derive from the count of recoveries, re-post their receives
// and then the flushed ops, in order.  Whichever side is
// back first has its packets dropped by the other until it is back too, and retransmits.
// Exposures (windows bound to this QP, regions) and the peer's descriptors stay valid: the
// QP keeps its number.  Which flushed ops may run again: the side that got the NAK knows
// the peer dropped everything after the bad op, so it replays all; the other side (its QP
// failed as responder) may have had requests executed by the peer whose answers it never
// saw, so it replays reads and writes (running one twice is what RC retransmission does
// too) but fails an atomic or a write with immediate (running it twice would add twice or
// consume two receives) with kIoError "may or may not have executed".
//
// Completions: event-driven by default (the completion channel in the loop's epoll, level-
// triggered).  A wakeup arms the CQ and polls it until a poll comes back empty, so what
// landed while the callbacks ran (they may post more) is handled without a sleep and a
// wakeup of its own -- at most kWakeRounds polls, then the loop's other fds and timers get a
// turn and a before-sleep hook polls on (the arm stands: whatever lands later raises an
// event or finds one pending).  Only then is the channel's event read: that read is
// bookkeeping (one event per wakeup; one raised since the arm stays and wakes the loop
// again), so it runs while the ops the callbacks posted are in flight instead of between the
// wakeup and the callbacks.  Same system calls as read-arm-poll; on rxe, whose loopback ops
// often complete inside ibv_post_send, a callback-driven chain of ops then runs without
// sleeping between them (measured: docs/BENCHMARKS.md).
//
// With busy_poll_us, a before-sleep hook polls the CQ instead: after each post or
// completion the CQ stays unarmed and the hook polls it, in slices of at most kSliceNs
// (so the loop's other fds and timers still run), until busy_poll_us passed without work;
// then it arms the CQ, polls once more (a completion that landed before the arm raised no
// event) and lets the loop sleep on the channel.  When the callbacks of the completions it
// found posted more (a callback-driven sequence of ops), the hook keeps polling within its
// slice instead of returning to the loop: no loop iteration (epoll_wait, clock read) per op.
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <vector>

#include "conduit/base/clock.h"
#include "conduit/base/log.h"
#include "conduit/memory/registration_cache.h"
#include "conduit/verbs/verbs.h"
#include "engine.h"
#include "wire.h"

namespace conduit::rma {
namespace {

using namespace conduit::verbs;

constexpr uint32_t kMagic = 0x43524D41;  // "CRMA": connect private data, version 1
constexpr uint64_t kRecvTag = 1ull << 63;
constexpr uint64_t kControlTag = 1ull << 62;
constexpr uint64_t kSliceNs = 50'000;  // a polling hook returns to the loop at least this often
constexpr int kWakeRounds = 16;        // event-driven: CQ polls (of up to 32) per wakeup or hook turn
constexpr uint32_t kInlineMax = 64;    // writes up to this size go inline (as perftest's do)
constexpr uint64_t kDrainTimeoutNs = 5'000'000'000;  // a recovery's flushes must all arrive by then
// The PSN of both directions after the n-th recovery; both sides count recoveries alike.
constexpr uint32_t psn_after_recovery(uint32_t n) { return (0x2b5a00u + n * 0x3c0013u) & 0xffffffu; }

// ibv_reg_mr for local operands, as a memory::Registrar (the cache calls it under its lock).
class LocalRegistrar final : public memory::Registrar {
 public:
  explicit LocalRegistrar(std::shared_ptr<ProtectionDomain> pd) : pd_(std::move(pd)) {}
  Result<Registration> register_memory(void* addr, size_t len) override {
    CONDUIT_ASSIGN_OR_RETURN(auto mr, MemoryRegion::register_memory(pd_, addr, len, Access::kLocalWrite));
    Registration r;
    r.keys = {mr->lkey(), mr->rkey()};
    r.cookie = mr.release();
    return r;
  }
  void deregister(const Registration& r) override { delete static_cast<MemoryRegion*>(r.cookie); }
  std::string name() const override { return "rma/local"; }

 private:
  std::shared_ptr<ProtectionDomain> pd_;
};

struct FdCall final : reactor::FdHandler {
  std::function<void()> fn;
  void on_events(uint32_t) override { fn(); }
};

struct NativeExposure {
  std::unique_ptr<MemoryWindow> mw;  // released first: the key dies with it
  std::unique_ptr<MemoryRegion> mr;
  ~NativeExposure() {
    mw.reset();
    mr.reset();
  }
};

class VerbsEngine final : public Engine {
 public:
  VerbsEngine(reactor::EventLoop& loop, const EndpointOptions& o) : Engine(loop, o, "rdma") {}
  ~VerbsEngine() override { close(); }

  // Client: resolve, route, connect.
  Status start_connect(const std::string& host, uint16_t port) {
    CONDUIT_ASSIGN_OR_RETURN(SocketAddress dst, SocketAddress::resolve(host, port));
    CONDUIT_ASSIGN_OR_RETURN(channel_, EventChannel::create());
    CONDUIT_ASSIGN_OR_RETURN(id_, CmId::create(channel_));
    CONDUIT_RETURN_IF_ERROR(watch_cm());
    CONDUIT_RETURN_IF_ERROR(id_->resolve_addr(dst, static_cast<int>(options_.connect_timeout_ms)));
    timer_ = loop_.run_after(uint64_t{options_.connect_timeout_ms} * 1000000, [this] {
      timer_ = 0;
      if (state_ == EndpointState::kConnecting)
        connected(Status(Code::kTimedOut, "rma rdma connect: no answer within connect_timeout_ms"));
    });
    return {};
  }

  // Server: the CONNECT_REQUEST's new id becomes ours (on a channel of our own).
  Status start_accept(CmEvent& ev) {
    id_ = std::move(ev.new_id);
    CONDUIT_ASSIGN_OR_RETURN(channel_, EventChannel::create());
    CONDUIT_RETURN_IF_ERROR(id_->migrate(channel_));
    CONDUIT_RETURN_IF_ERROR(watch_cm());
    if (ev.private_data.size() < 8 || wire::get32(ev.private_data.data()) != kMagic || ev.private_data[4] != 1) {
      (void)id_->reject();
      return Status(Code::kProtocolError, "rma rdma accept: the peer is not an rma endpoint (private data)");
    }
    CONDUIT_RETURN_IF_ERROR(setup_qp());
    CONDUIT_RETURN_IF_ERROR(id_->set_ack_timeout(options_.timeout));
    const uint8_t rd = rd_atomic();
    return id_->accept({}, std::min(rd, ev.responder_resources), std::min(rd, ev.initiator_depth));
  }

  std::string addresses() const override {
    return id_ ? id_->local_address().to_string() + "->" + id_->peer_address().to_string() : std::string("-");
  }

 protected:
  Status expose_native(Exposure& e) override {
    auto n = std::make_shared<NativeExposure>();
    int access = 0;
    if (contains(e.rights, Rights::kRead)) access |= IBV_ACCESS_REMOTE_READ;
    if (contains(e.rights, Rights::kWrite)) access |= IBV_ACCESS_REMOTE_WRITE;
    if (contains(e.rights, Rights::kAtomic)) access |= IBV_ACCESS_REMOTE_ATOMIC;
    void* addr = reinterpret_cast<void*>(static_cast<uintptr_t>(e.addr));
    // A bind posted now would be flushed: let the recovery (local work only) finish first.
    if (recovering_) CONDUIT_RETURN_IF_ERROR(wait_until([this] { return !recovering_; }, "the queue pair's recovery"));
    if (has_mw_) {
      CONDUIT_ASSIGN_OR_RETURN(n->mr, MemoryRegion::register_memory(pd_, addr, e.length,
                                                                    Access::kLocalWrite | Access::kMwBind));
      CONDUIT_ASSIGN_OR_RETURN(n->mw, MemoryWindow::create(pd_));
      const uint32_t rkey = n->mw->next_rkey();
      SendWr wr = SendWr::bind_mw(n->mw->native_handle(), rkey, n->mr->native_handle(), e.addr, e.length, access)
                      .id(kControlTag)
                      .signaled();
      CONDUIT_RETURN_IF_ERROR(qp()->post_send(wr));
      control_out_ = true;
      // Wait for the bind: once expose returns, the key works.  Other completions that
      // arrive meanwhile are handled as usual.
      control_done_ = false;
      CONDUIT_RETURN_IF_ERROR(wait_until([this] { return control_done_; }, "the window bind"));
      CONDUIT_RETURN_IF_ERROR(control_status_);
      n->mw->bound(rkey);
      e.key = rkey;
      ++stats_.window_keys;
    } else {
      CONDUIT_ASSIGN_OR_RETURN(n->mr, MemoryRegion::register_memory(pd_, addr, e.length,
                                                                    Access::kLocalWrite | static_cast<Access>(access)));
      e.key = n->mr->rkey();
    }
    e.native = std::move(n);
    return {};
  }
  void revoke_native(Exposure& e) override { e.native.reset(); }  // dealloc window, deregister

  // Ops queued behind a recovery (or behind ops it holds back) are posted by resume().
  Status post(size_t first, size_t count) override {
    if (recovering_ || posted_ - done_ != first) return {};
    return post_now(first, count);
  }

  void shutdown_native() override {
    if (timer_ != 0) loop_.cancel(timer_), timer_ = 0;
    if (drain_timer_ != 0) loop_.cancel(drain_timer_), drain_timer_ = 0;
    if (hook_ != 0) loop_.remove_before_sleep(hook_), hook_ = 0;
    if (cq_channel_ && loop_.watching(cq_channel_->fd())) (void)loop_.remove(cq_channel_->fd());
    if (channel_ && loop_.watching(channel_->fd())) (void)loop_.remove(channel_->fd());
    if (id_ && established_) (void)id_->disconnect();
    parked_.clear();
    last_reg_ = {};
    if (id_) id_->destroy_qp();
  }

 private:
  Status post_now(size_t first, size_t count) {
    SendChain chain;
    for (size_t i = 0; i < count; ++i) {
      const Op& op = inflight_at(first + i);
      const uint64_t seq = posted_ + i;
      ibv_sge& sge = sges_[i];
      const bool write = op.kind == OpKind::kWrite || op.kind == OpKind::kWriteImm;
      const bool inlined = write && !op.local.empty() && op.local.size() <= std::min(kInlineMax, qp()->max_inline());
      if (is_atomic(op.kind)) {
        sge = slots_->sge(seq % options_.depth * 8, 8);  // the op's word for the old value
      } else if (inlined) {  // copied into the work request at post: no registration
        sge.addr = reinterpret_cast<uintptr_t>(op.local.data());
        sge.length = static_cast<uint32_t>(op.local.size());
        sge.lkey = 0;
      } else {
        // The registration of the previous operand, if it still covers this one and is still
        // the cache's (not invalidated): no cache lookup, no pin (the file comment).
        if (!(last_reg_.current() && last_reg_.covers(op.local.data(), op.local.size()))) {
          Result<memory::RegistrationCache::Handle> h = cache_->acquire(op.local.data(), op.local.size());
          if (!h.ok()) return h.status();  // nothing posted (a seq parked past posted_ drops when that seq completes)
          // The ops that used the old handle keep it until the last of them completed.
          if (last_reg_.valid() && last_reg_seq_ >= done_) parked_.push_back({last_reg_seq_, std::move(last_reg_)});
          last_reg_ = std::move(*h);
        }
        sge.addr = reinterpret_cast<uintptr_t>(op.local.data());
        sge.length = static_cast<uint32_t>(op.local.size());
        sge.lkey = last_reg_.keys().lkey;
        last_reg_seq_ = seq;
      }
      const uint64_t raddr = op.remote.addr + op.offset;
      const uint32_t rkey = op.remote.key;
      switch (op.kind) {
        case OpKind::kRead: wrs_[i] = SendWr::read(&sge, 1, raddr, rkey); break;
        case OpKind::kWrite: wrs_[i] = SendWr::write(&sge, 1, raddr, rkey); break;
        case OpKind::kWriteImm: wrs_[i] = SendWr::write_imm(&sge, 1, raddr, rkey, op.imm); break;
        case OpKind::kFetchAdd: wrs_[i] = SendWr::fetch_add(&sge, raddr, rkey, op.operand); break;
        case OpKind::kCompareSwap: wrs_[i] = SendWr::compare_swap(&sge, raddr, rkey, op.operand, op.swap); break;
      }
      const bool last = i + 1 == count;
      const bool sig = last || run_ + 1 >= options_.signal_every;
      run_ = sig ? 0 : run_ + 1;
      wrs_[i].id(seq).signaled(sig).inlined(inlined);
      chain.append(wrs_[i]);
    }
    Status s = qp()->post_send(chain);  // one doorbell for the batch
    if (!s.ok()) return s;
    posted_ += count;
    posted_unseen_ = true;  // busy_poll_us: the window restarts when the hook next runs
    return {};
  }

  QueuePair* qp() const { return id_->qp(); }
  uint8_t rd_atomic() const {
    const int dev = ctx_ ? ctx_->attr().max_qp_rd_atom : 1;
    return static_cast<uint8_t>(std::clamp(dev, 1, 16));
  }

  Status watch_cm() {
    cm_fd_.fn = [this] { on_cm(); };
    return loop_.add(channel_->fd(), reactor::kReadable, &cm_fd_);
  }

  Status setup_qp() {
    ctx_ = id_->context();
    if (!ctx_) return Status(Code::kUnavailable, "rma rdma: the cm id has no device");
    has_mw_ = options_.windows && (ctx_->attr().device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B) != 0;
    CONDUIT_ASSIGN_OR_RETURN(pd_, ProtectionDomain::create(ctx_));
    CONDUIT_ASSIGN_OR_RETURN(cq_channel_, CompletionChannel::create(ctx_));
    const uint32_t depth = options_.depth;
    CONDUIT_ASSIGN_OR_RETURN(cq_, CompletionQueue::create(ctx_, static_cast<int>(2 * depth + 8), cq_channel_));
    QpOptions qo;
    qo.max_send_wr = depth + 4;  // + the bind of an expose in progress
    qo.max_recv_wr = depth;      // receives consumed by the peer's writes with immediate
    qo.max_send_sge = 1;
    qo.max_inline_data = kInlineMax;
    Result<QueuePair*> q = id_->create_qp(pd_, cq_, cq_, qo);
    if (!q.ok()) {  // a device without inline sends
      qo.max_inline_data = 0;
      q = id_->create_qp(pd_, cq_, cq_, qo);
    }
    if (!q.ok()) return q.status();
    CONDUIT_ASSIGN_OR_RETURN(auto slots, RegisteredBuffer::create(pd_, size_t{depth} * 8, Access::kLocalWrite));
    slots_ = std::make_unique<RegisteredBuffer>(std::move(slots));
    memory::CacheOptions co;
    co.byte_cap = options_.local_cache;
    cache_ = std::make_unique<memory::RegistrationCache>(std::make_shared<LocalRegistrar>(pd_), co);
    wrs_.assign(depth, SendWr::send(nullptr, 0));
    sges_.assign(depth, ibv_sge{});
    for (uint32_t i = 0; i < depth; ++i) CONDUIT_RETURN_IF_ERROR(post_recv());
    CONDUIT_RETURN_IF_ERROR(cq_->arm());
    armed_ = true;
    if (options_.busy_poll_us != 0) hook_ = loop_.add_before_sleep([this] { return poll_hook(); });
    else hook_ = loop_.add_before_sleep([this] { return repoll_hook(); });
    cq_fd_.fn = [this] { on_cq(); };
    return loop_.add(cq_channel_->fd(), reactor::kReadable, &cq_fd_);
  }

  Status post_recv() {
    // WRITE_WITH_IMM needs a receive, not a buffer.  Tagged with the QP's incarnation: a
    // receive of the QP before a reset may still report its flush after it.
    RecvWr r = RecvWr::make(nullptr, 0, kRecvTag | recoveries_);
    return qp()->post_recv(r);
  }

  void on_cm() {
    for (;;) {
      if (!id_) return;
      Result<CmEvent> ev = CmId::next_event(channel_, 0);
      if (!ev.ok()) {
        if (!ev.status().would_block()) fail(ev.status());
        return;
      }
      handle_cm(*ev);
      if (state_ == EndpointState::kClosed || state_ == EndpointState::kError) return;
    }
  }

  void handle_cm(CmEvent& ev) {
    const int to = static_cast<int>(options_.connect_timeout_ms);
    Status s;
    switch (ev.type) {
      case RDMA_CM_EVENT_ADDR_RESOLVED:
        s = id_->resolve_route(to);
        break;
      case RDMA_CM_EVENT_ROUTE_RESOLVED: {
        s = setup_qp();
        if (!s.ok()) break;
        s = id_->set_ack_timeout(options_.timeout);
        if (!s.ok()) break;
        uint8_t pd[8] = {};
        wire::put32(pd, kMagic);
        pd[4] = 1;
        const uint8_t rd = rd_atomic();
        s = id_->connect(pd, rd, rd);
        break;
      }
      case RDMA_CM_EVENT_ESTABLISHED:
        established_ = true;
        if (timer_ != 0) loop_.cancel(timer_), timer_ = 0;
        connected(Status());
        return;
      case RDMA_CM_EVENT_DISCONNECTED:
        return fail(Status(Code::kClosed, "rma rdma: the peer disconnected"));
      default:
        s = Status(Code::kUnavailable, "rma rdma: " + ev.to_string());
        break;
    }
    if (s.ok()) return;
    if (state_ == EndpointState::kConnecting) return connected(std::move(s));
    fail(std::move(s));
  }

  void on_cq() {
    ++stats_.cq_wakeups;
    if (options_.busy_poll_us == 0) {  // arm, poll until empty, then read the event (file comment)
      if (Status s = cq_->arm(); !s.ok()) return fail(s);
      repoll_ = poll_rounds();
      if (state_ != EndpointState::kConnected) return;  // failed or closed by a callback
      if (Result<int> ev = cq_->consume_events(1); !ev.ok()) fail(ev.status());
      return;
    }
    // Polling: woken after the window closed.  Stay unarmed; the hook polls from now on.
    Result<int> ev = cq_->consume_events();
    if (!ev.ok()) return fail(ev.status());
    armed_ = false;
    last_work_ = loop_.now_ns();
    (void)poll_once();
  }

  // Polls the CQ once (up to 32 completions) and handles them: how many, or -1 when the
  // poll failed (the endpoint failed).  A handler may close the endpoint.
  int poll_once() {
    Completion wcs[32];
    Result<int> n = cq_->poll(wcs);
    if (!n.ok()) {
      fail(n.status());
      return -1;
    }
    for (int i = 0; i < *n; ++i) handle(wcs[i]);
    return *n;
  }

  // Event-driven: polls until a poll comes back empty, at most kWakeRounds times.  True when
  // the rounds ran out (completions may be left that raise no event: repoll_hook goes on).
  bool poll_rounds() {
    for (int round = 0; round < kWakeRounds; ++round)
      if (poll_once() <= 0 || state_ != EndpointState::kConnected) return false;
    return true;
  }

  // The before-sleep hook in event-driven mode: goes on where a wakeup's rounds ran out.
  // True: the loop must not block yet.
  bool repoll_hook() {
    if (!repoll_ || state_ != EndpointState::kConnected || !cq_) return repoll_ = false;
    repoll_ = poll_rounds();
    return repoll_;
  }

  // The before-sleep hook of busy_poll_us (see the file comment).  True: the loop must not
  // block (a completion was handled, or the window is still open).  Work is stamped with the
  // loop's clock and the clock is read only every 16th empty poll: a read costs more than a
  // poll where the clock source has no vDSO path (~5 us in the TCG guest).
  bool poll_hook() {
    if (state_ != EndpointState::kConnected || !cq_) return false;
    const uint64_t window = options_.busy_poll_us * 1000;
    const uint64_t entered = loop_.now_ns();
    if (posted_unseen_) last_work_ = entered, posted_unseen_ = false;
    for (uint32_t polls = 1;; ++polls) {
      const int n = poll_once();
      if (n < 0) return true;  // the endpoint failed
      if (n > 0) {
        stats_.polled += static_cast<uint64_t>(n);
        // Did the handlers post more (a callback-driven sequence of ops)?  Then keep polling
        // within the slice rather than pay a loop iteration per op; else back to the loop.
        if (state_ != EndpointState::kConnected || !posted_unseen_) {
          last_work_ = loop_.now_ns();
          return true;
        }
      }
      if (polls != 1 && polls % 16 != 0) continue;
      const uint64_t now = polls == 1 ? entered : monotonic_ns();
      if (posted_unseen_) last_work_ = now, posted_unseen_ = false;
      if (now - last_work_ >= window) break;
      if (now - entered >= kSliceNs) return true;  // the loop's fds and timers get a turn
    }
    if (armed_) return false;
    if (Status s = cq_->arm(); !s.ok()) {
      fail(s);
      return true;
    }
    armed_ = true;
    const int n = poll_once();  // what landed before the arm raised no event
    if (n > 0) stats_.polled += static_cast<uint64_t>(n), last_work_ = loop_.now_ns();
    return n != 0;
  }

  void handle(const Completion& c) {
    if (state_ != EndpointState::kConnected) return;
    if ((c.wr_id & kRecvTag) != 0) {
      if ((c.wr_id & 0xffffffffu) != recoveries_) return;  // posted before the last reset
      if (!c.ok()) return qp_failed(c, /*replay_all=*/false);
      if (c.opcode == IBV_WC_RECV_RDMA_WITH_IMM && imm_handler) imm_handler(c.imm(), c.byte_len);
      if (state_ != EndpointState::kConnected) return;  // the handler closed the endpoint
      if (recovering_) return maybe_finish_recovery();  // receives are posted again after the reset
      if (Status s = post_recv(); !s.ok()) fail(s);
      return;
    }
    if (c.wr_id == kControlTag) {
      control_out_ = false;
      control_done_ = true;
      control_status_ = c.as_status();
      if (recovering_) maybe_finish_recovery();
      return;
    }
    // A completion for op `seq` completes every earlier op too (RC completes in order; only
    // every signal_every-th WR is signalled).
    const uint64_t seq = c.wr_id;
    retired_ = seq + 1;
    auto complete_through = [this](uint64_t last) {
      while (done_ <= last && in_flight() > 0 && state_ == EndpointState::kConnected) complete_op(Status());
    };
    if (recovering_) {  // the WRs behind the failure, flushed: they stay queued for the replay
      if (c.ok()) complete_through(seq);  // posted before the failure, reported after it
      else if (c.ibv_wc::status != IBV_WC_WR_FLUSH_ERR) return fail_qp(c);
      return maybe_finish_recovery();
    }
    if (c.ok()) {
      complete_through(seq);
      if (state_ == EndpointState::kConnected && unposted() > 0) resume();
      return;
    }
    if (c.ibv_wc::status == IBV_WC_REM_ACCESS_ERR) {
      // The ops before it ran (the peer answered them before the NAK); it alone failed.
      begin_recovery(c, /*replay_all=*/true);  // first: what the callbacks submit waits for it
      if (seq > 0) complete_through(seq - 1);
      if (state_ == EndpointState::kConnected && in_flight() > 0)
        complete_op(Status(Code::kPermissionDenied, "remote access error: " + c.to_string()));
      return maybe_finish_recovery();
    }
    // A flush first: the peer failed the QP.  Unsignalled WRs are flushed without a completion
    // of their own on rxe, so which of [done_, posted_) ran is not known: all are replayed
    // or, if they must not run twice, failed (qp_failed).
    if (c.ibv_wc::status == IBV_WC_WR_FLUSH_ERR) return qp_failed(c, /*replay_all=*/false);
    if (seq > 0) complete_through(seq - 1);
    if (state_ == EndpointState::kConnected && in_flight() > 0) complete_op(c.as_status());
    fail_qp(c);
  }

  // The queue pair is in error.  A remote access error (ours: replay_all, or the peer's,
  // seen as a flush) is recovered from (file comment); anything else fails the endpoint.
  void qp_failed(const Completion& c, bool replay_all) {
    if (state_ != EndpointState::kConnected || recovering_) return maybe_finish_recovery();
    if (!replay_all && c.ibv_wc::status != IBV_WC_WR_FLUSH_ERR) return fail_qp(c);
    begin_recovery(c, replay_all);
    maybe_finish_recovery();
  }

  void begin_recovery(const Completion& c, bool replay_all) {
    recovering_ = true;
    // The flushed ops the peer may have run (see the file comment): atomics and writes with
    // immediate this side posted, when the failure was the peer's to see first.
    uncertain_.clear();
    if (!replay_all) {
      for (uint64_t o = done_; o < posted_; ++o) {
        const OpKind k = inflight_at(o - done_).kind;
        if (is_atomic(k) || k == OpKind::kWriteImm) uncertain_.push_back(o);
      }
    }
    CONDUIT_LOG(kInfo) << "rma rdma " << addresses() << ": queue pair failed (" << c.to_string()
                       << "); recovering it in place";
    drain_timer_ = loop_.run_after(kDrainTimeoutNs, [this] {
      drain_timer_ = 0;
      if (recovering_)
        fail(Status(Code::kTimedOut, "rma rdma: the flushed work requests did not all complete within 5 s of a "
                                     "queue pair failure (sends " + std::to_string(posted_ - retired_) +
                                         ", bind " + std::to_string(control_out_) + " outstanding)"));
    });
  }

  // Once every posted send (ops, a window bind) has come back flushed: reset the QP, post
  // the receives again, then the ops.  Receives are not waited for: rxe (Linux 6.1) flushes
  // them only when a packet reaches the failed QP, which may never happen; the reset drops
  // them, and a late flush of one is recognised by its tag (post_recv).
  void maybe_finish_recovery() {
    if (!recovering_ || state_ != EndpointState::kConnected) return;
    if (retired_ != posted_ || control_out_) return;
    if (drain_timer_ != 0) loop_.cancel(drain_timer_), drain_timer_ = 0;
    posted_ = retired_ = done_;
    run_ = 0;
    ++recoveries_;
    if (Status s = id_->reset_qp(psn_after_recovery(recoveries_)); !s.ok())
      return fail(Status(s.code(), "rma rdma: recovering the queue pair: " + std::string(s.message())));
    for (uint32_t i = 0; i < options_.depth; ++i)
      if (Status s = post_recv(); !s.ok()) return fail(s);
    recovering_ = false;
    ++stats_.recoveries;
    resume();
  }

  // Ops queued but not posted (behind a recovery): [posted_, done_ + in_flight()).
  size_t unposted() const { return done_ + in_flight() - posted_; }

  // Posts the queued ops in order, in runs between uncertain ones; an uncertain op fails
  // once everything before it completed (ops complete in order).
  void resume() {
    while (state_ == EndpointState::kConnected && !recovering_ && unposted() > 0) {
      if (!uncertain_.empty() && uncertain_.front() == posted_) {
        if (posted_ != done_) return;  // resumed when the ops before it complete
        uncertain_.pop_front();
        ++posted_;
        complete_op(Status(Code::kIoError, "rma rdma: in flight when the peer's remote access error failed the "
                                           "queue pair; it may or may not have executed"));
        continue;
      }
      size_t count = unposted();
      if (!uncertain_.empty()) count = std::min<size_t>(count, uncertain_.front() - posted_);
      if (Status s = post_now(posted_ - done_, count); !s.ok()) return fail(s);
    }
  }

  void complete_op(Status s) {
    while (!parked_.empty() && parked_.front().last_seq <= done_) parked_.pop_front();
    uint64_t old = 0;
    const OpKind k = front().kind;
    if (s.ok() && is_atomic(k))
      std::memcpy(&old, slots_->data() + done_ % options_.depth * 8, 8);
    ++done_;
    complete_front(std::move(s), old);
  }

  void fail_qp(const Completion& c) {
    if (state_ != EndpointState::kConnected) return;
    fail(Status(Code::kIoError, "rma rdma: the queue pair failed after " + c.to_string()));
  }

  // Polls the CQ (handling what it finds) until `done`; at most 5 s.
  template <typename Pred>
  Status wait_until(Pred done, const char* what) {
    const uint64_t deadline = now_ms() + 5000;
    Completion wcs[16];
    while (!done()) {
      Result<int> n = cq_->poll(wcs);
      if (!n.ok()) return n.status();
      for (int i = 0; i < *n; ++i) handle(wcs[i]);
      if (state_ != EndpointState::kConnected) return Status(Code::kClosed, "rma expose: the endpoint failed");
      if (*n == 0 && now_ms() > deadline)
        return Status(Code::kTimedOut, std::string("rma expose: ") + what + " did not complete within 5 s");
    }
    return {};
  }
  static uint64_t now_ms() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000 + static_cast<uint64_t>(ts.tv_nsec) / 1000000;
  }

  // Declared in creation order; the QP (inside id_) goes in shutdown_native / ~CmId.
  std::shared_ptr<EventChannel> channel_;
  std::shared_ptr<Context> ctx_;
  std::shared_ptr<ProtectionDomain> pd_;
  std::shared_ptr<CompletionChannel> cq_channel_;
  std::shared_ptr<CompletionQueue> cq_;
  std::unique_ptr<RegisteredBuffer> slots_;
  std::unique_ptr<memory::RegistrationCache> cache_;
  memory::RegistrationCache::Handle last_reg_;  // the last local operand's (post_now); pins one region
  uint64_t last_reg_seq_ = 0;                   // the seq of the last op that used last_reg_
  struct Parked {
    uint64_t last_seq;  // dropped once this op completed
    memory::RegistrationCache::Handle reg;
  };
  std::deque<Parked> parked_;  // registrations that ops in flight still use, by last_seq
  std::unique_ptr<CmId> id_;
  FdCall cm_fd_, cq_fd_;
  reactor::TimerId timer_ = 0;
  reactor::EventLoop::HookId hook_ = 0;  // poll_hook (busy_poll_us) or repoll_hook (events)
  bool repoll_ = false;                   // events: a wakeup's rounds ran out (repoll_hook)
  bool armed_ = false;                   // the CQ will raise an event for its next completion
  uint64_t last_work_ = 0;               // busy_poll_us: last post or completion (loop clock, ns)
  bool posted_unseen_ = false;           // posted since the hook last ran
  bool has_mw_ = false;
  bool established_ = false;
  std::vector<SendWr> wrs_;
  std::vector<ibv_sge> sges_;
  uint64_t posted_ = 0, done_ = 0;  // ops by seq: [done_, posted_) posted, the rest queued
  uint64_t retired_ = 0;             // WRs up to the last send completion seen
  uint32_t run_ = 0;                 // unsignalled WRs since the last signalled one
  bool recovering_ = false;          // the QP failed: draining its flushed WRs
  uint32_t recoveries_ = 0;          // the PSN after a reset derives from it
  std::deque<uint64_t> uncertain_;   // seqs of flushed ops that must not run twice
  reactor::TimerId drain_timer_ = 0;
  bool control_out_ = false;         // a window bind is posted
  bool control_done_ = false;
  Status control_status_;
};

class VerbsListener final : public Listener {
 public:
  VerbsListener(reactor::EventLoop& loop, EndpointOptions o, AcceptCallback cb)
      : loop_(loop), options_(o), pending_(loop, std::move(cb)) {}
  ~VerbsListener() override { close(); }

  Status start(const std::string& host, uint16_t port) {
    CONDUIT_ASSIGN_OR_RETURN(SocketAddress addr, SocketAddress::resolve(host, port));
    CONDUIT_ASSIGN_OR_RETURN(channel_, EventChannel::create());
    CONDUIT_ASSIGN_OR_RETURN(id_, CmId::create(channel_));
    CONDUIT_RETURN_IF_ERROR(id_->bind(addr));
    CONDUIT_RETURN_IF_ERROR(id_->listen(64));
    fd_.fn = [this] { on_cm(); };
    return loop_.add(channel_->fd(), reactor::kReadable, &fd_);
  }
  std::string url() const override { return id_ ? "rdma://" + id_->local_address().to_string() : "rdma://closed"; }
  void close() override {
    if (channel_ && loop_.watching(channel_->fd())) (void)loop_.remove(channel_->fd());
    id_.reset();
    pending_.clear();
  }

 private:
  void on_cm() {
    for (;;) {
      if (!id_) return;
      Result<CmEvent> ev = CmId::next_event(channel_, 0);
      if (!ev.ok()) {
        if (!ev.status().would_block()) CONDUIT_LOG(kWarn) << "rma rdma listener: " << ev.status().to_string();
        return;
      }
      if (ev->type != RDMA_CM_EVENT_CONNECT_REQUEST || !ev->new_id) continue;
      VerbsEngine* engine = pending_.add(std::make_unique<VerbsEngine>(loop_, options_));
      if (Status s = engine->start_accept(*ev); !s.ok()) {
        CONDUIT_LOG(kWarn) << "rma rdma accept: " << s.to_string();
        pending_.drop(engine);
      }
    }
  }

  reactor::EventLoop& loop_;
  EndpointOptions options_;
  std::shared_ptr<EventChannel> channel_;
  std::unique_ptr<CmId> id_;
  FdCall fd_;
  PendingAccepts pending_;  // accepted, not yet established
};

}  // namespace

bool verbs_device_present() {
  static const bool present = [] {
    auto devs = list_devices();
    if (!devs.ok() || devs->empty()) return false;
    return Context::open().ok();
  }();
  return present;
}

Result<std::unique_ptr<Engine>> connect_verbs(reactor::EventLoop& loop, const std::string& host, uint16_t port,
                                              const EndpointOptions& o) {
  auto engine = std::make_unique<VerbsEngine>(loop, o);
  CONDUIT_RETURN_IF_ERROR(engine->start_connect(host, port));
  return std::unique_ptr<Engine>(std::move(engine));
}

Result<std::unique_ptr<Listener>> listen_verbs(reactor::EventLoop& loop, const std::string& host, uint16_t port,
                                               const EndpointOptions& o, Listener::AcceptCallback cb) {
  auto l = std::make_unique<VerbsListener>(loop, o, std::move(cb));
  CONDUIT_RETURN_IF_ERROR(l->start(host, port));
  return std::unique_ptr<Listener>(std::move(l));
}

}  // namespace conduit::rma
