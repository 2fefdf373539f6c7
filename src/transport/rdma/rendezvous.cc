#include "rdma/rendezvous.h"

namespace conduit::transport::rdma {

Status OfferSequencer::on_offer(const CtrlMsg& m, uint32_t max_length) {
  const std::string what = "rdma: ReadOffer tag " + std::to_string(m.tag) + " of " + std::to_string(m.length) + " bytes";
  if (m.position != position_)
    return Status(Code::kProtocolError, what + " at stream position " + std::to_string(m.position) +
                                            ", but " + std::to_string(position_) + " bytes came before it");
  if (m.tag >= limit_)
    return Status(Code::kProtocolError, what + ": tag beyond the negotiated " + std::to_string(limit_) + " offers");
  if (unfinished_ >= limit_)
    return Status(Code::kProtocolError, what + ": more than the negotiated " + std::to_string(limit_) +
                                            " offers outstanding");
  for (const Offer& o : fifo_)
    if (o.tag == m.tag && o.state != State::kRead)
      return Status(Code::kProtocolError, what + ": tag already outstanding");
  if (m.length == 0 || m.length > max_length)
    return Status(Code::kProtocolError, what + ": larger than this side's " + std::to_string(max_length) + " bytes");
  Offer o;
  o.tag = m.tag;
  o.addr = m.addr;
  o.length = m.length;
  o.rkey = m.rkey;
  o.position = m.position;
  o.inband_mark = inband_;
  fifo_.push_back(o);
  position_ += m.length;
  pending_bytes_ += m.length;
  ++unfinished_;
  return {};
}

const OfferSequencer::Offer* OfferSequencer::next_to_read() const {
  if (reading_ >= limit_) return nullptr;
  for (const Offer& o : fifo_)
    if (o.state == State::kQueued) return &o;
  return nullptr;
}

OfferSequencer::Offer* OfferSequencer::find(uint32_t tag, State s) {
  for (Offer& o : fifo_)
    if (o.tag == tag && o.state == s) return &o;
  return nullptr;
}

Status OfferSequencer::read_posted(uint32_t tag) {
  Offer* o = find(tag, State::kQueued);
  if (!o || reading_ >= limit_)
    return Status(Code::kInternal, "rdma: READ posted for tag " + std::to_string(tag) + " that was not next");
  o->state = State::kReading;
  ++reading_;
  return {};
}

Status OfferSequencer::read_completed(uint32_t tag) {
  Offer* o = find(tag, State::kReading);
  if (!o) return Status(Code::kInternal, "rdma: READ completion for tag " + std::to_string(tag) + " with none posted");
  o->state = State::kRead;
  --reading_;
  --unfinished_;
  return {};
}

void OfferSequencer::pop_head() {
  if (fifo_.empty() || fifo_.front().state != State::kRead) return;
  pending_bytes_ -= fifo_.front().length;
  fifo_.pop_front();
}

std::vector<OfferSequencer::Offer> OfferSequencer::drain() {
  std::vector<Offer> out(fifo_.begin(), fifo_.end());
  fifo_.clear();
  unfinished_ = reading_ = 0;
  pending_bytes_ = 0;
  return out;
}

}  // namespace conduit::transport::rdma
