// The bookkeeping of the READ rendezvous (docs/PROTOCOL.md "Rendezvous (bit 2)"), kept
// apart from verbs so every rule is tested on the host:
//   OfferSlots      writer side: which tags have an offer outstanding (sent, no ReadDone
//                   yet), what each holds until the reader is done with it.
//   OfferSequencer  reader side: validates each ReadOffer against the stream (position,
//                   limit, tags), orders READs (at most `limit` posted) and says when the
//                   head offer's bytes may be delivered between the in-band bytes.
// Neither touches memory or posts anything: the connection does, in the order they say.
// Thread: the owning connection's loop thread. Cost: O(limit) per call (limit <= 16).
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "conduit/base/status.h"
#include "rdma/protocol.h"

namespace conduit::transport::rdma {

// Writer side. `Held` is what an offer keeps alive until its ReadDone (a pool slice and
// its memory window); it is handed back exactly once: by done() or by drain().
template <typename Held>
class OfferSlots {
 public:
  // `limit`: outstanding offers allowed, the writer's negotiated responder resources
  // (clamped to 0..kMaxReadDepth; 0 = never offer).
  explicit OfferSlots(uint32_t limit)
      : slots_(std::min<uint32_t>(limit, static_cast<uint32_t>(kMaxReadDepth))) {}

  uint32_t limit() const { return static_cast<uint32_t>(slots_.size()); }
  uint32_t outstanding() const { return outstanding_; }
  uint64_t outstanding_bytes() const { return bytes_; }

  // A free tag for an offer of `length` bytes holding `held`, or nullopt at the limit
  // (the caller then sends the bytes in-band: never would-block for this reason).
  std::optional<uint32_t> take(uint32_t length, Held held) {
    for (uint32_t t = 0; t < slots_.size(); ++t) {
      if (slots_[t]) continue;
      slots_[t].emplace(length, std::move(held));
      ++outstanding_;
      bytes_ += length;
      return t;
    }
    return std::nullopt;
  }

  // The peer's ReadDone(tag, length): hands back what the offer held. A tag with no offer
  // outstanding, or a length other than the offer's, is a protocol error (nothing changes).
  Result<Held> done(uint32_t tag, uint64_t length) {
    if (tag >= slots_.size() || !slots_[tag])
      return Status(Code::kProtocolError, "rdma: ReadDone for tag " + std::to_string(tag) + " with no offer outstanding");
    if (length != slots_[tag]->first)
      return Status(Code::kProtocolError, "rdma: ReadDone for tag " + std::to_string(tag) + " says " +
                                              std::to_string(length) + " bytes, the offer had " +
                                              std::to_string(slots_[tag]->first));
    Held h = std::move(slots_[tag]->second);
    bytes_ -= slots_[tag]->first;
    slots_[tag].reset();
    --outstanding_;
    return h;
  }

  // (tag, length) of each offer outstanding, in tag order: what a Closer still waits for.
  std::vector<std::pair<uint32_t, uint32_t>> offers() const {
    std::vector<std::pair<uint32_t, uint32_t>> out;
    for (uint32_t t = 0; t < slots_.size(); ++t)
      if (slots_[t]) out.emplace_back(t, slots_[t]->first);
    return out;
  }

  // The connection ended: everything still outstanding, in tag order. Release it only once
  // the QP is in error and flushed (until then the peer may still read it).
  std::vector<Held> drain() {
    std::vector<Held> out;
    for (auto& s : slots_)
      if (s) {
        out.push_back(std::move(s->second));
        s.reset();
      }
    outstanding_ = 0;
    bytes_ = 0;
    return out;
  }

 private:
  std::vector<std::optional<std::pair<uint32_t, Held>>> slots_;
  uint32_t outstanding_ = 0;
  uint64_t bytes_ = 0;
};

// Reader side: the stream as in-band bytes with offers at recorded positions between them.
class OfferSequencer {
 public:
  enum class State : uint8_t { kQueued, kReading, kRead };
  struct Offer {
    uint32_t tag = 0;
    uint64_t addr = 0;
    uint32_t length = 0;
    uint32_t rkey = 0;
    uint64_t position = 0;     // stream bytes before it (mod 2^64)
    uint64_t inband_mark = 0;  // in-band bytes received before it
    State state = State::kQueued;
  };

  // `limit`: READs this side may have outstanding, its negotiated initiator depth (clamped
  // to kMaxReadDepth); also the most offers that may be unfinished (no ReadDone sent) at once.
  explicit OfferSequencer(uint32_t limit) : limit_(std::min<uint32_t>(limit, static_cast<uint32_t>(kMaxReadDepth))) {}

  uint32_t limit() const { return limit_; }
  // Stream bytes accounted so far (in-band and offered), what the next offer's position must be.
  uint64_t position() const { return position_; }
  uint64_t inband_received() const { return inband_; }
  size_t queued() const { return fifo_.size(); }
  bool empty() const { return fifo_.empty(); }
  // Offers whose READ has not completed (what counts against `limit`).
  uint32_t unfinished() const { return unfinished_; }
  // Bytes of offers that have not been delivered yet (read or not).
  uint64_t pending_bytes() const { return pending_bytes_; }

  // `n` in-band bytes arrived (a WRITE_WITH_IMM's imm).
  void on_inband(uint64_t n) {
    inband_ += n;
    position_ += n;
  }

  // A decoded ReadOffer (decode() already checked reserved bytes and 1..16 MiB). Refuses,
  // as a protocol error that leaves the sequencer unchanged: a position other than
  // position(), a tag >= limit or one already unfinished, more than `limit` unfinished,
  // and `max_length` exceeded (the reader's own bound, e.g. its pool's largest block).
  Status on_offer(const CtrlMsg& m, uint32_t max_length);

  // The first offer whose READ may be posted now (queued, fewer than `limit` reading), or
  // nullptr. The caller posts the READ, then calls read_posted().
  const Offer* next_to_read() const;
  // A tag with no queued offer is a logic error reported as kInternal.
  Status read_posted(uint32_t tag);
  // The READ for `tag` completed: its bytes are in the reader's memory and ReadDone may
  // be sent. A tag with no READ posted is a logic error reported as kInternal.
  Status read_completed(uint32_t tag);

  // In-band bytes that may be consumed in total before the head offer (UINT64_MAX when no
  // offer waits): in-band bytes behind an unfinished offer stay where they are.
  uint64_t inband_limit() const { return fifo_.empty() ? UINT64_MAX : fifo_.front().inband_mark; }
  // The head offer when its bytes come next in the stream and have been read, else nullptr.
  const Offer* deliverable(uint64_t inband_consumed) const {
    if (fifo_.empty() || fifo_.front().state != State::kRead || inband_consumed != fifo_.front().inband_mark)
      return nullptr;
    return &fifo_.front();
  }
  // The head offer's bytes were all consumed.
  void pop_head();

  // The connection ended: the offers never delivered, head first (to return their blocks
  // and say how many bytes were lost); the sequencer is empty afterwards.
  std::vector<Offer> drain();

 private:
  Offer* find(uint32_t tag, State s);

  uint32_t limit_;
  uint64_t position_ = 0;
  uint64_t inband_ = 0;
  uint32_t unfinished_ = 0;
  uint32_t reading_ = 0;
  uint64_t pending_bytes_ = 0;
  std::deque<Offer> fifo_;
};

}  // namespace conduit::transport::rdma
