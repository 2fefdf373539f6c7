// The receiving side (server process): advertise `window` destinations, checksum each
// message that lands, re-advertise its slot -- with the memory strategy under test.
#include "conduit/base/clock.h"
#include "strategies.h"

namespace conduit::bench {

namespace {

class Receiver {
 public:
  Receiver(Link& l, const CaseSpec& s, memory::BlockPool& pool)
      : l_(l), s_(s), pool_(pool), mrs_(s.window, nullptr), blocks_(s.window) {
    pending_.reserve(s.window);
  }
  ~Receiver() {
    for (ibv_mr* mr : mrs_)
      if (mr != nullptr) ibv_dereg_mr(mr);  // advertised and never written (after the last message)
  }
  Receiver(const Receiver&) = delete;
  Receiver& operator=(const Receiver&) = delete;

  Status setup() {
    const size_t n = s_.size;
    switch (Strategy(s_.strategy)) {
      case Strategy::kRegister:
        for (uint32_t i = 0; i < s_.window; ++i) app_.push_back(AppBuffer::make(n));
        break;
      case Strategy::kStaging: {
        app_.push_back(AppBuffer::make(n));
        CONDUIT_ASSIGN_OR_RETURN(auto ring, verbs::RegisteredBuffer::create(l_.pd, n * s_.window,
                                                                             verbs::Access::kRemoteWrite));
        ring_ = std::make_unique<verbs::RegisteredBuffer>(std::move(ring));
        break;
      }
      case Strategy::kPool:
        CONDUIT_RETURN_IF_ERROR(warm_pool(pool_, n, s_.window + 2));
        break;
    }
    for (const AppBuffer& a : app_)
      if (!a.data()) return Status(Code::kResourceExhausted, "out of memory for the application buffers");
    return {};
  }

  // Called once setup is done and the client said go.
  Result<SideResult> run() {
    const uint64_t regs0 = pool_.stats().registrations;
    uint64_t u0, s0, u1, s1;
    cpu_times(&u0, &s0);
    const uint64_t t0 = monotonic_ns();
    for (uint32_t i = 0; i < s_.window; ++i) CONDUIT_RETURN_IF_ERROR(advertise(i));
    CONDUIT_RETURN_IF_ERROR(flush());
    bool last = false;
    verbs::Completion wcs[32];
    while (!last) {
      CONDUIT_ASSIGN_OR_RETURN(int n, l_.wait(wcs));
      for (int i = 0; i < n; ++i) CONDUIT_RETURN_IF_ERROR(handle(wcs[i], &last));
      CONDUIT_RETURN_IF_ERROR(flush());
    }
    r_.wall_ns = monotonic_ns() - t0;
    cpu_times(&u1, &s1);
    r_.user_ns = u1 - u0;
    r_.sys_ns = s1 - s0;
    if (Strategy(s_.strategy) == Strategy::kPool) r_.reg_calls = pool_.stats().registrations - regs0;
    // Untimed: every credit sent must have completed before the case ends.
    while (sends_out_ > 0) {
      CONDUIT_ASSIGN_OR_RETURN(int n, l_.wait(wcs));
      for (int i = 0; i < n; ++i) CONDUIT_RETURN_IF_ERROR(handle(wcs[i], &last));
    }
    return r_;
  }

 private:
  Status handle(const verbs::Completion& wc, bool* last) {
    if (!wc.ok()) return Status(Code::kIoError, "receiver: " + wc.to_string());
    switch (wc.wr_id & kTagMask) {
      case kTagCredit:
        --sends_out_;
        return {};
      case kTagRecv:
        break;
      default:
        return Status(Code::kInternal, "receiver: unexpected completion " + wc.to_string());
    }
    CONDUIT_RETURN_IF_ERROR(l_.post_recv(uint32_t(wc.wr_id)));
    if (*last) return Status(Code::kProtocolError, "receiver: a message after the last one");
    if (wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM || !wc.has_imm())
      return Status(Code::kProtocolError, "receiver: expected a WRITE_WITH_IMM, got " + wc.to_string());
    const uint32_t imm = wc.imm();
    const uint32_t slot = imm & ~kImmLast;
    *last = (imm & kImmLast) != 0;
    if (slot >= s_.window) return Status(Code::kProtocolError, "receiver: slot " + std::to_string(slot) + " out of range");
    const size_t n = s_.size;
    if (wc.byte_len != n) ++r_.bad_length;
    uint64_t cs = 0;
    const uint64_t c0 = read_tsc();
    uint64_t c1 = 0, c2 = 0;
    switch (Strategy(s_.strategy)) {
      case Strategy::kRegister:
        if (int rc = ibv_dereg_mr(mrs_[slot]); rc != 0) return Status::FromErrno(rc, "ibv_dereg_mr");
        mrs_[slot] = nullptr;
        c1 = read_tsc();
        cs = checksum(app_[slot].data(), n);
        c2 = read_tsc();
        r_.strategy_cycles += c1 - c0;
        r_.work_cycles += c2 - c1;
        if (!*last) CONDUIT_RETURN_IF_ERROR(advertise(slot));
        break;
      case Strategy::kStaging:
        std::memcpy(app_[0].data(), ring_->data() + size_t{slot} * n, n);
        r_.copies += n;
        r_.strategy_cycles += read_tsc() - c0;
        if (!*last) CONDUIT_RETURN_IF_ERROR(advertise(slot));  // the slot is free once copied out
        c1 = read_tsc();
        cs = checksum(app_[0].data(), n);
        r_.work_cycles += read_tsc() - c1;
        break;
      case Strategy::kPool:
        cs = checksum(blocks_[slot].data(), n);
        c1 = read_tsc();
        blocks_[slot] = memory::Slice();  // back to the pool
        c2 = read_tsc();
        r_.work_cycles += c1 - c0;
        r_.strategy_cycles += c2 - c1;
        if (!*last) CONDUIT_RETURN_IF_ERROR(advertise(slot));
        break;
    }
    r_.checksum += cs;
    r_.bytes += n;
    ++r_.messages;
    return {};
  }

  Status advertise(uint32_t slot) {
    const size_t n = s_.size;
    Credit c;
    c.case_id = s_.case_id;
    c.slot = slot;
    const uint64_t c0 = read_tsc();
    switch (Strategy(s_.strategy)) {
      case Strategy::kRegister: {
        ibv_mr* mr = ibv_reg_mr(l_.pd->native_handle(), app_[slot].data(), n,
                                IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
        if (mr == nullptr) return Status::FromErrnoAuto(errno, "ibv_reg_mr of a " + std::to_string(n) + "-byte buffer");
        ++r_.reg_calls;
        mrs_[slot] = mr;
        c.addr = reinterpret_cast<uintptr_t>(app_[slot].data());
        c.rkey = mr->rkey;
        break;
      }
      case Strategy::kStaging:
        c.addr = ring_->mr().addr() + size_t{slot} * n;
        c.rkey = ring_->mr().rkey();
        break;
      case Strategy::kPool: {
        auto b = pool_.allocate(n);
        if (!b.ok()) return b.status();
        c.addr = b->address();
        c.rkey = b->keys(0).rkey;
        blocks_[slot] = std::move(*b);
        break;
      }
    }
    r_.strategy_cycles += read_tsc() - c0;  // staging: nothing to do, a few cycles
    pending_.push_back(c);
    return {};
  }

  // Posts the credits advertise() prepared, as far as the send queue allows: at most
  // `window` are unconsumed, but their completions may lag behind.
  Status flush() {
    while (pending_head_ < pending_.size() && sends_out_ < Link::kMaxSend) {
      Credit& c = pending_[pending_head_++];
      ibv_sge sge{reinterpret_cast<uintptr_t>(&c), sizeof c, 0};
      auto wr = verbs::SendWr::send(&sge, 1).id(kTagCredit).signaled().inlined();
      CONDUIT_RETURN_IF_ERROR(l_.qp->post_send(wr));
      ++sends_out_;
      ++r_.credits;
    }
    if (pending_head_ == pending_.size()) {
      pending_.clear();
      pending_head_ = 0;
    }
    return {};
  }

  Link& l_;
  const CaseSpec& s_;
  memory::BlockPool& pool_;
  std::vector<AppBuffer> app_;
  std::unique_ptr<verbs::RegisteredBuffer> ring_;
  std::vector<ibv_mr*> mrs_;
  std::vector<memory::Slice> blocks_;
  std::vector<Credit> pending_;  // prepared, not yet posted
  size_t pending_head_ = 0;
  SideResult r_;
  uint32_t sends_out_ = 0;
};

}  // namespace

Result<SideResult> run_receiver(Link& link, const CaseSpec& spec, memory::BlockPool& pool) {
  Receiver r(link, spec, pool);
  CONDUIT_RETURN_IF_ERROR(r.setup());
  // Tell the client we are ready; it answers go when its own setup is done.
  uint8_t token = 1;
  CONDUIT_RETURN_IF_ERROR(send_all(link.ctl.get(), &token, 1));
  CONDUIT_RETURN_IF_ERROR(recv_all(link.ctl.get(), &token, 1, 60000));
  return r.run();
}

}  // namespace conduit::bench
