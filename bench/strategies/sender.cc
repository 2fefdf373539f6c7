// The sending side (client process): produce each message and RDMA-WRITE_WITH_IMM it into a
// credited destination, with the memory strategy under test.
#include <sys/mman.h>

#include <deque>

#include "conduit/base/clock.h"
#include "strategies.h"

namespace conduit::bench {

namespace {

// A message posted and not yet completed.
struct Inflight {
  ibv_mr* mr = nullptr;   // register: the per-message registration
  memory::Slice block;    // pool: the block the NIC sends from
};

class Sender {
 public:
  Sender(Link& l, const CaseSpec& s, memory::BlockPool& pool) : l_(l), s_(s), pool_(pool), inflight_(s.window) {}
  ~Sender() {
    for (Inflight& f : inflight_)
      if (f.mr != nullptr) ibv_dereg_mr(f.mr);  // only after an error left a message in flight
  }
  Sender(const Sender&) = delete;
  Sender& operator=(const Sender&) = delete;

  Status setup() {
    const size_t n = s_.size;
    switch (Strategy(s_.strategy)) {
      case Strategy::kRegister:
        for (uint32_t i = 0; i < s_.window; ++i) app_.push_back(AppBuffer::make(n));
        break;
      case Strategy::kStaging: {
        app_.push_back(AppBuffer::make(n));
        CONDUIT_ASSIGN_OR_RETURN(auto st, verbs::RegisteredBuffer::create(l_.pd, n * s_.window, verbs::Access::kLocalWrite));
        staging_ = std::make_unique<verbs::RegisteredBuffer>(std::move(st));
        break;
      }
      case Strategy::kPool:
        CONDUIT_RETURN_IF_ERROR(warm_pool(pool_, n, s_.window + 2));
        break;
    }
    for (const AppBuffer& a : app_)
      if (!a.data()) return Status(Code::kResourceExhausted, "out of memory for the application buffers");
    for (uint32_t i = s_.window; i > 0; --i) free_.push_back(i - 1);
    return {};
  }

  Result<SideResult> run() {
    CONDUIT_RETURN_IF_ERROR(setup());
    const uint64_t regs0 = pool_.stats().registrations;
    SideResult r;
    uint64_t u0, s0, u1, s1;
    cpu_times(&u0, &s0);
    const uint64_t t0 = monotonic_ns();
    const uint64_t deadline = t0 + s_.max_ns;
    // clock_gettime is a system call in the TCG guest (HPET): look at the clock every few
    // small messages, at every large one.
    const uint64_t clock_every = s_.size >= 65536 ? 1 : 16;
    bool last = false;
    uint64_t seq = 0;
    while (!last) {
      // A credit can arrive before the completion of the write it answers has been polled
      // (the peer's SEND and our completer are not ordered): wait for a free entry too.
      while (credits_.empty() || free_.empty()) CONDUIT_RETURN_IF_ERROR(pump(r));
      const Credit c = credits_.front();
      credits_.pop_front();
      last = seq + 1 >= s_.max_messages || (seq % clock_every == 0 && monotonic_ns() >= deadline);
      const uint32_t idx = free_.back();
      free_.pop_back();
      ibv_sge sge{};
      uint64_t cs = 0;
      const size_t n = s_.size;
      switch (Strategy(s_.strategy)) {
        case Strategy::kRegister: {
          uint8_t* p = app_[idx].data();
          const uint64_t c0 = read_tsc();
          cs = fill_message(p, n, seq);
          const uint64_t c1 = read_tsc();
          ibv_mr* mr = ibv_reg_mr(l_.pd->native_handle(), p, n, IBV_ACCESS_LOCAL_WRITE);
          r.work_cycles += c1 - c0;
          r.strategy_cycles += read_tsc() - c1;
          if (mr == nullptr) return Status::FromErrnoAuto(errno, "ibv_reg_mr of a " + std::to_string(n) + "-byte message");
          ++r.reg_calls;
          inflight_[idx].mr = mr;
          sge = {reinterpret_cast<uintptr_t>(p), uint32_t(n), mr->lkey};
          break;
        }
        case Strategy::kStaging: {
          const uint64_t c0 = read_tsc();
          cs = fill_message(app_[0].data(), n, seq);
          const uint64_t c1 = read_tsc();
          std::memcpy(staging_->data() + size_t{idx} * n, app_[0].data(), n);
          r.work_cycles += c1 - c0;
          r.strategy_cycles += read_tsc() - c1;
          r.copies += n;
          sge = staging_->sge(size_t{idx} * n, uint32_t(n));
          break;
        }
        case Strategy::kPool: {
          const uint64_t c0 = read_tsc();
          auto b = pool_.allocate(n);
          const uint64_t c1 = read_tsc();
          if (!b.ok()) return b.status();  // kWouldBlock cannot happen below the cap: report it
          cs = fill_message(b->writable_data(), n, seq);
          r.strategy_cycles += c1 - c0;
          r.work_cycles += read_tsc() - c1;
          b->set_size(n);
          sge = {b->address(), uint32_t(n), b->keys(0).lkey};
          inflight_[idx].block = std::move(*b);
          break;
        }
      }
      auto wr = verbs::SendWr::write_imm(&sge, 1, c.addr, c.rkey, c.slot | (last ? kImmLast : 0))
                    .id(kTagWrite | idx)
                    .signaled();
      CONDUIT_RETURN_IF_ERROR(l_.qp->post_send(wr));
      ++outstanding_;
      r.checksum += cs;
      r.bytes += n;
      ++seq;
    }
    while (outstanding_ > 0) CONDUIT_RETURN_IF_ERROR(pump(r));
    r.wall_ns = monotonic_ns() - t0;
    cpu_times(&u1, &s1);
    r.user_ns = u1 - u0;
    r.sys_ns = s1 - s0;
    r.messages = seq;
    if (Strategy(s_.strategy) == Strategy::kPool) r.reg_calls = pool_.stats().registrations - regs0;
    return r;
  }

 private:
  Status pump(SideResult& r) {
    verbs::Completion wcs[32];
    CONDUIT_ASSIGN_OR_RETURN(int n, l_.wait(wcs));
    for (int i = 0; i < n; ++i) {
      const verbs::Completion& wc = wcs[i];
      if (!wc.ok()) return Status(Code::kIoError, "sender: " + wc.to_string());
      const uint32_t idx = uint32_t(wc.wr_id);
      switch (wc.wr_id & kTagMask) {
        case kTagRecv: {
          Credit c;
          std::memcpy(&c, l_.recv_ring->data() + size_t{idx} * Link::kRecvSlotBytes, sizeof c);
          CONDUIT_RETURN_IF_ERROR(l_.post_recv(idx));
          if (c.case_id != s_.case_id || c.slot >= s_.window)
            return Status(Code::kProtocolError, "sender: a credit for case " + std::to_string(c.case_id) + " slot " +
                                                    std::to_string(c.slot) + " in case " + std::to_string(s_.case_id));
          ++r.credits;
          credits_.push_back(c);
          break;
        }
        case kTagWrite: {
          Inflight& f = inflight_[idx];
          const uint64_t c0 = read_tsc();
          if (f.mr != nullptr) {
            if (int rc = ibv_dereg_mr(f.mr); rc != 0) return Status::FromErrno(rc, "ibv_dereg_mr");
            f.mr = nullptr;
          }
          f.block = memory::Slice();  // back to the pool
          r.strategy_cycles += read_tsc() - c0;
          free_.push_back(idx);
          --outstanding_;
          break;
        }
        default:
          return Status(Code::kInternal, "sender: unexpected completion " + wc.to_string());
      }
    }
    return {};
  }

  Link& l_;
  const CaseSpec& s_;
  memory::BlockPool& pool_;
  std::vector<AppBuffer> app_;
  std::unique_ptr<verbs::RegisteredBuffer> staging_;
  std::vector<Inflight> inflight_;
  std::vector<uint32_t> free_;
  std::deque<Credit> credits_;
  uint32_t outstanding_ = 0;
};

}  // namespace

Result<SideResult> run_sender(Link& link, const CaseSpec& spec, memory::BlockPool& pool) {
  Sender s(link, spec, pool);
  return s.run();
}

Status drain_credits(Link& link, uint64_t received, uint64_t sent) {
  verbs::Completion wcs[32];
  while (received < sent) {
    CONDUIT_ASSIGN_OR_RETURN(int n, link.wait(wcs));
    for (int i = 0; i < n; ++i) {
      if (!wcs[i].ok()) return Status(Code::kIoError, "sender drain: " + wcs[i].to_string());
      if ((wcs[i].wr_id & kTagMask) != kTagRecv)
        return Status(Code::kInternal, "sender drain: unexpected completion " + wcs[i].to_string());
      CONDUIT_RETURN_IF_ERROR(link.post_recv(uint32_t(wcs[i].wr_id)));
      ++received;
    }
  }
  return {};
}

}  // namespace conduit::bench
