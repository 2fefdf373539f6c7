// Tagged send/recv over an rma::Endpoint (include/conduit/rma/tagged.h): the receiver's
// FIFO writes, the sender's matching by tag, data + completion-record writes, backpressure.
// Wire layout and its checks: tagged_wire.h (docs/PROTOCOL.md, "rma tagged").
#include "conduit/rma/tagged.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "conduit/base/log.h"
#include "tagged_wire.h"
#include "wire.h"

namespace conduit::rma {

using namespace tagged_wire;

TaggedEndpoint::TaggedEndpoint(std::unique_ptr<Endpoint> ep, TaggedOptions o) : options_(o), ep_(std::move(ep)) {}

Result<std::unique_ptr<TaggedEndpoint>> TaggedEndpoint::create(std::unique_ptr<Endpoint> ep, TaggedOptions o) {
  if (!ep) return Status(Code::kInvalidArgument, "rma tagged: no endpoint");
  if (ep->state() != EndpointState::kConnected)
    return Status(Code::kUnavailable, "rma tagged: the endpoint is " + std::string(endpoint_state_name(ep->state())));
  if (o.slots < 1 || o.slots > kMaxSlots)
    return Status(Code::kInvalidArgument, "rma tagged: slots must be 1.." + std::to_string(kMaxSlots));
  if (o.max_requests < 1) return Status(Code::kInvalidArgument, "rma tagged: max_requests must be >= 1");
  std::unique_ptr<TaggedEndpoint> t(new TaggedEndpoint(std::move(ep), o));
  CONDUIT_RETURN_IF_ERROR(t->setup());
  return t;
}

Status TaggedEndpoint::setup() {
  const size_t fifo_bytes = size_t{options_.slots} * kFifoSlotBytes;
  const size_t cmpl_bytes = size_t{options_.slots} * kMaxGroup * kRecordBytes;
  fifo_ = std::make_unique<uint8_t[]>(fifo_bytes);
  cmpl_ = std::make_unique<uint8_t[]>(cmpl_bytes);
  out_fifo_ = std::make_unique<uint8_t[]>(fifo_bytes);
  out_rec_ = std::make_unique<uint8_t[]>(size_t{2} * ep_->options().depth * kRecordBytes);
  std::memset(fifo_.get(), 0, fifo_bytes);
  std::memset(cmpl_.get(), 0, cmpl_bytes);
  std::memset(out_fifo_.get(), 0, fifo_bytes);
  std::memset(out_rec_.get(), 0, size_t{2} * ep_->options().depth * kRecordBytes);
  slot_req_.assign(options_.slots, 0);
  CONDUIT_ASSIGN_OR_RETURN(fifo_desc_, ep_->expose(fifo_.get(), fifo_bytes, Rights::kWrite));
  CONDUIT_ASSIGN_OR_RETURN(cmpl_desc_, ep_->expose(cmpl_.get(), cmpl_bytes, Rights::kWrite));
  ep_->set_imm_handler([this](uint32_t imm, uint32_t len) { on_imm(imm, len); });
  ep_->set_ready_handler([this](Endpoint&) { pump(); });
  ep_->set_close_handler([this](Endpoint& e) {
    fail_all(e.error().ok() ? Status(Code::kClosed, "rma tagged: the endpoint closed") : e.error());
  });
  return {};
}

TaggedEndpoint::~TaggedEndpoint() {
  progress_ = nullptr;
  if (!dead_) {
    dead_ = true;
    dead_why_ = Status(Code::kCancelled, "rma tagged: closed");
  }
  ep_->close();  // op callbacks run now, while every member is alive
}

std::array<uint8_t, TaggedEndpoint::kHelloSize> TaggedEndpoint::hello() const {
  return encode_hello(options_.slots, fifo_desc_, cmpl_desc_);
}

Status TaggedEndpoint::start(std::span<const uint8_t> peer_hello) {
  if (started_) return Status(Code::kInvalidArgument, "rma tagged: already started");
  CONDUIT_ASSIGN_OR_RETURN(Hello h, decode_hello(peer_hello));
  if (h.slots != options_.slots)
    return Status(Code::kInvalidArgument, "rma tagged: slots differ: " + std::to_string(options_.slots) +
                                              " here, " + std::to_string(h.slots) + " at the peer");
  if (h.fifo.length != size_t{h.slots} * kFifoSlotBytes || h.cmpl.length != size_t{h.slots} * kMaxGroup * kRecordBytes)
    return Status(Code::kProtocolError, "rma tagged hello: area lengths do not match the slot count");
  peer_fifo_ = h.fifo;
  peer_cmpl_ = h.cmpl;
  started_ = true;
  std::vector<uint32_t> tags;  // pair() may change posted_
  for (const auto& [tag, q] : posted_) tags.push_back(tag);
  for (uint32_t tag : tags) pair(tag);
  return {};
}

Result<Descriptor> TaggedEndpoint::register_buffer(void* addr, size_t len) {
  return ep_->expose(addr, len, Rights::kWrite);
}
Status TaggedEndpoint::deregister_buffer(const Descriptor& d) { return ep_->revoke(d); }

size_t TaggedEndpoint::waiting_sends() const {
  size_t n = 0;
  for (const auto& [tag, q] : sends_) n += q.size();
  return n;
}

// --- sender role ---------------------------------------------------------------------------

Result<Request> TaggedEndpoint::isend(uint32_t tag, std::span<const uint8_t> data) {
  if (dead_) return Status(dead_why_.code(), "rma tagged isend: " + std::string(dead_why_.message()));
  const uint64_t max_op = ep_->options().max_op;
  const uint64_t chunks = (data.size() + max_op - 1) / max_op;
  if (chunks + 1 > ep_->options().depth)
    return Status(Code::kInvalidArgument, "rma tagged isend: " + std::to_string(data.size()) +
                                              " bytes is above the largest message (depth - 1) * max_op");
  if (reqs_.size() >= options_.max_requests) return Status::WouldBlock();
  const uint64_t id = next_id_++;
  Req& r = reqs_[id];
  r.send = true;
  r.tag = tag;
  r.data = data;
  r.result.count = 1;
  sends_[tag].push_back(id);
  pair(tag);
  return Request{id};
}

// Pairs the oldest waiting send of `tag` with the oldest posted buffer of `tag`, repeatedly.
// The maps are looked up again each round: a failure finishes a request, and the progress
// handler that runs then may issue sends (and so change these maps).
void TaggedEndpoint::pair(uint32_t tag) {
  while (started_ && !dead_) {
    auto s = sends_.find(tag);
    auto p = posted_.find(tag);
    if (s == sends_.end() || p == posted_.end()) break;
    Match m{s->second.front(), p->second.front()};
    s->second.pop_front();
    p->second.pop_front();
    if (s->second.empty()) sends_.erase(s);
    if (p->second.empty()) posted_.erase(p);
    if (!match_backlog_.empty()) {
      match_backlog_.push_back(m);
      continue;
    }
    Status st = post_match(m);
    if (st.would_block()) {
      match_backlog_.push_back(m);
    } else if (!st.ok()) {
      finish(m.send_id, st);
    }
  }
}

// The data writes (at most max_op each) and the completion record with its immediate, as one
// batch.  A message larger than the buffer writes no data and a record saying so.
Status TaggedEndpoint::post_match(const Match& m) {
  auto it = reqs_.find(m.send_id);
  if (it == reqs_.end()) return {};
  const Req& r = it->second;
  const uint64_t size = r.data.size();
  const bool too_large = size > m.elem.length;
  const uint64_t max_op = ep_->options().max_op;
  const size_t chunks = too_large ? 0 : static_cast<size_t>((size + max_op - 1) / max_op);
  // The record's staging entry: a ring of 2 x depth, advanced only when a batch went out.  An
  // entry comes back after 2 x depth batches of at least one op each; with at most depth ops
  // in flight and completion in order, the op that last read it has completed by then.
  // (A refused submit -- kWouldBlock, which arms the endpoint's ready handler -- rewrites
  // the same, unused entry next time.)
  const uint32_t ring = 2 * ep_->options().depth;
  uint8_t* rec = out_rec_.get() + size_t{rec_next_} * kRecordBytes;
  encode_record(rec, too_large ? kRecordTooLarge : kRecordOk, m.elem.seq, size);
  const Descriptor buf{m.elem.addr, m.elem.length, m.elem.key, Rights::kWrite, m.elem.generation};
  std::vector<Op> ops;
  ops.reserve(chunks + 1);
  const uint64_t id = m.send_id;
  for (size_t c = 0; c < chunks; ++c) {
    const uint64_t off = c * max_op;
    const uint64_t n = std::min<uint64_t>(max_op, size - off);
    ops.push_back(Op::write(r.data.subspan(off, n), buf, off, [this, id](const OpResult& res) {
      if (!res.status.ok()) finish(id, res.status);
    }));
  }
  const uint64_t rec_off = (uint64_t{m.elem.slot} * kMaxGroup + m.elem.index) * kRecordBytes;
  const uint64_t elem_len = m.elem.length;
  const uint32_t tag = r.tag;
  ops.push_back(Op::write_imm(std::span<const uint8_t>(rec, kRecordBytes), peer_cmpl_, rec_off,
                              record_imm(m.elem.slot, m.elem.index),
                              [this, id, too_large, size, elem_len, tag](const OpResult& res) {
                                if (!res.status.ok()) return finish(id, res.status);
                                if (too_large)
                                  return finish(id, too_large_status(tag, size, elem_len));
                                finish(id, Status());
                              }));
  Status s = ep_->submit(std::span<Op>(ops));
  if (s.ok()) rec_next_ = (rec_next_ + 1) % ring;
  return s;
}

void TaggedEndpoint::on_fifo_post(uint32_t slot) {
  if (slot != fifo_seq_ % options_.slots)
    return protocol_error("FIFO post in slot " + std::to_string(slot) + ", expected " +
                          std::to_string(fifo_seq_ % options_.slots));
  Result<FifoSlot> fs = decode_fifo_slot(std::span<const uint8_t>(fifo_slot(slot), kFifoSlotBytes));
  if (!fs.ok()) return protocol_error(std::string(fs.status().message()));
  if (fs->seq != fifo_seq_)
    return protocol_error("FIFO post sequence " + std::to_string(fs->seq) + ", expected " + std::to_string(fifo_seq_));
  ++fifo_seq_;
  for (uint32_t i = 0; i < fs->count; ++i) {
    const FifoElem& e = fs->elems[i];
    posted_[e.tag].push_back(Elem{e.addr, e.length, e.key, e.generation, e.tag, slot, i, fs->seq});
  }
  for (uint32_t i = 0; i < fs->count && !dead_; ++i) pair(fs->elems[i].tag);
}

// --- receiver role -------------------------------------------------------------------------

Result<Request> TaggedEndpoint::irecv(std::span<const uint32_t> tags, std::span<const RecvBuffer> bufs) {
  if (dead_) return Status(dead_why_.code(), "rma tagged irecv: " + std::string(dead_why_.message()));
  if (!started_) return Status(Code::kUnavailable, "rma tagged irecv: start() has not been given the peer's hello");
  if (tags.size() != bufs.size() || bufs.empty() || bufs.size() > kMaxGroup)
    return Status(Code::kInvalidArgument, "rma tagged irecv: 1.." + std::to_string(kMaxGroup) +
                                              " buffers, one tag each");
  for (size_t i = 0; i < bufs.size(); ++i) {
    const RecvBuffer& b = bufs[i];
    if (b.data.empty()) continue;
    const auto a = reinterpret_cast<uintptr_t>(b.data.data());
    if (!contains(b.region.rights, Rights::kWrite) || a < b.region.addr || b.data.size() > b.region.length ||
        a - b.region.addr > b.region.length - b.data.size())
      return Status(Code::kInvalidArgument, "rma tagged irecv: buffer " + std::to_string(i) +
                                                " is not inside a registered region (register_buffer)");
  }
  const uint32_t slot = post_seq_ % options_.slots;
  if (slot_req_[slot] != 0 || reqs_.size() >= options_.max_requests) return Status::WouldBlock();
  const uint64_t id = next_id_++;
  Req& r = reqs_[id];
  r.slot = slot;
  r.seq = post_seq_;
  r.remaining = static_cast<uint32_t>(bufs.size());
  r.result.count = r.remaining;
  FifoSlot fs;
  fs.seq = post_seq_;
  fs.count = r.remaining;
  for (size_t i = 0; i < bufs.size(); ++i) {
    r.lengths[i] = bufs[i].data.size();
    r.tags[i] = tags[i];
    const bool empty = bufs[i].data.empty();
    fs.elems[i] = FifoElem{empty ? 0 : reinterpret_cast<uintptr_t>(bufs[i].data.data()), bufs[i].data.size(),
                           empty ? 0 : bufs[i].region.key, empty ? 0 : bufs[i].region.generation, tags[i]};
  }
  encode_fifo_slot(fs, std::span<uint8_t>(out_fifo_.get() + size_t{slot} * kFifoSlotBytes, kFifoSlotBytes));
  slot_req_[slot] = id;
  ++post_seq_;
  if (!fifo_backlog_.empty()) {
    fifo_backlog_.push_back(slot);
    return Request{id};
  }
  Status s = post_fifo(slot);
  if (s.would_block()) {
    fifo_backlog_.push_back(slot);
  } else if (!s.ok()) {
    // The endpoint refused outright (it is failing): the request fails like the rest.
    finish(id, s);
  }
  return Request{id};
}

Status TaggedEndpoint::post_fifo(uint32_t slot) {
  const uint8_t* p = out_fifo_.get() + size_t{slot} * kFifoSlotBytes;
  return ep_->submit(Op::write_imm(std::span<const uint8_t>(p, kFifoSlotBytes), peer_fifo_,
                                   uint64_t{slot} * kFifoSlotBytes, fifo_imm(slot), [this, slot](const OpResult& res) {
                                     if (!res.status.ok() && slot_req_[slot] != 0) finish(slot_req_[slot], res.status);
                                   }));
}

void TaggedEndpoint::on_record(uint32_t slot, uint32_t index) {
  if (slot >= options_.slots || slot_req_[slot] == 0)
    return protocol_error("completion record for slot " + std::to_string(slot) + ", which has no receive");
  const uint64_t id = slot_req_[slot];
  Req& r = reqs_.at(id);
  if (index >= r.result.count || r.lengths[index] == kDoneMark)
    return protocol_error("completion record for element " + std::to_string(index) + " of slot " +
                          std::to_string(slot) + ", not awaited");
  const uint8_t* p = cmpl_.get() + (size_t{slot} * kMaxGroup + index) * kRecordBytes;
  Result<Record> rec = decode_record(std::span<const uint8_t>(p, kRecordBytes));
  if (!rec.ok()) return protocol_error(std::string(rec.status().message()));
  if (rec->seq != r.seq)
    return protocol_error("completion record of sequence " + std::to_string(rec->seq) + " in slot " +
                          std::to_string(slot) + ", which holds " + std::to_string(r.seq));
  const uint64_t len = r.lengths[index];
  if (rec->status == kRecordOk && rec->size > len)
    return protocol_error("completion record says " + std::to_string(rec->size) + " bytes into a " +
                          std::to_string(len) + "-byte buffer");
  r.result.sizes[index] = rec->status == kRecordOk ? rec->size : 0;
  if (rec->status == kRecordTooLarge && r.result.status.ok()) r.result.status = too_large_status(r.tags[index], rec->size, len);
  r.lengths[index] = kDoneMark;
  if (--r.remaining == 0) finish(id, r.result.status);
}

// --- both ----------------------------------------------------------------------------------

void TaggedEndpoint::on_imm(uint32_t imm, uint32_t length) {
  ++wakeups_;
  if (dead_) return;
  const ImmKind k = imm_kind(imm);
  if (k == ImmKind::kFifoPost) {
    if (length != kFifoSlotBytes) return protocol_error("FIFO post of " + std::to_string(length) + " bytes");
    return on_fifo_post(fifo_imm_slot(imm));
  }
  if (k == ImmKind::kRecord) {
    if (length != kRecordBytes) return protocol_error("completion record of " + std::to_string(length) + " bytes");
    return on_record(record_imm_slot(imm), record_imm_index(imm));
  }
  protocol_error("immediate 0x" + std::to_string(imm) + " has reserved bits set");
}

void TaggedEndpoint::pump() {
  while (!fifo_backlog_.empty() && !dead_) {
    Status s = post_fifo(fifo_backlog_.front());
    if (s.would_block()) break;
    const uint32_t slot = fifo_backlog_.front();
    fifo_backlog_.pop_front();
    if (!s.ok() && slot_req_[slot] != 0) finish(slot_req_[slot], s);
  }
  while (!match_backlog_.empty() && !dead_) {
    Status s = post_match(match_backlog_.front());
    if (s.would_block()) break;
    const uint64_t id = match_backlog_.front().send_id;
    match_backlog_.pop_front();
    if (!s.ok()) finish(id, s);
  }
}

void TaggedEndpoint::finish(uint64_t id, Status s) {
  auto it = reqs_.find(id);
  if (it == reqs_.end() || it->second.done) return;
  Req& r = it->second;
  if (!s.ok() && dead_ && s.code() != Code::kResourceExhausted) s = dead_why_;
  r.done = true;
  r.result.status = std::move(s);
  if (r.send) {
    r.result.sizes[0] = r.result.status.ok() ? r.data.size() : 0;
  } else {
    if (slot_req_[r.slot] == id) slot_req_[r.slot] = 0;
    if (!r.result.status.ok()) r.result.sizes.fill(0);
  }
  notify();
}

void TaggedEndpoint::fail_all(Status why) {
  if (!dead_) {
    dead_ = true;
    dead_why_ = why;
  }
  match_backlog_.clear();
  fifo_backlog_.clear();
  sends_.clear();
  posted_.clear();
  // finish() runs the progress handler, which may reap (erase) requests: ids first.
  std::vector<uint64_t> ids;
  for (const auto& [id, r] : reqs_)
    if (!r.done) ids.push_back(id);
  for (uint64_t id : ids) finish(id, dead_why_);
}

void TaggedEndpoint::protocol_error(const std::string& what) {
  Status why(Code::kProtocolError, "rma tagged: " + what);
  CONDUIT_LOG(kWarn) << "rma tagged " << ep_->describe() << ": " << why.to_string();
  dead_ = true;
  dead_why_ = why;
  ep_->close();  // ops in flight fail (finish() substitutes the protocol error)
  fail_all(why);
}

Status TaggedEndpoint::flush() {
  if (dead_) return Status(dead_why_.code(), "rma tagged flush: " + std::string(dead_why_.message()));
  std::atomic_thread_fence(std::memory_order_acquire);
  return {};
}

Result<std::optional<Completion>> TaggedEndpoint::test(Request req) {
  auto it = reqs_.find(req.id);
  if (it == reqs_.end()) return Status(Code::kNotFound, "rma tagged test: unknown or already reaped request");
  if (!it->second.done) return std::optional<Completion>();
  Completion c = std::move(it->second.result);
  reqs_.erase(it);
  return std::optional<Completion>(std::move(c));
}

// The handler may issue and reap requests; a request finishing meanwhile calls it again.
void TaggedEndpoint::notify() {
  if (!progress_) return;
  if (in_notify_) {
    notify_again_ = true;
    return;
  }
  in_notify_ = true;
  do {
    notify_again_ = false;
    auto h = progress_;
    h(*this);
  } while (notify_again_ && progress_);
  in_notify_ = false;
}

}  // namespace conduit::rma
