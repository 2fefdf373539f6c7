#include "buffer.h"

#include <algorithm>
#include <cassert>
#include <cstring>

#include "attachment_access.h"

namespace conduit::rpc::detail {
namespace {

// Attachment slices this small are copied into the scratch block: a copy is cheaper than
// an iovec (or a work request) of its own.
constexpr size_t kSmallSlice = 512;
// A gather buffer larger than this is freed after its frame: one big body must not pin its
// size for the connection's life.
constexpr size_t kKeepFront = 1 << 20;
// skip() drops at most this much per call before letting the loop run others.
constexpr size_t kSkipBudget = 1 << 20;

FrameReader::Event io_event(const Status& s) {
  if (s.would_block()) return {FrameReader::Kind::kWouldBlock, {}};
  return {FrameReader::Kind::kIoError, s};
}
FrameReader::Event eof_event() { return {FrameReader::Kind::kEof, {}}; }

// The start of the memory a slice views: one value per storage.
const uint8_t* storage_of(const memory::Slice& s) { return s.data() - s.headroom(); }

}  // namespace

// --- FrameReader: every call on the source goes through these, which keep span_left_ ----

Result<std::span<const uint8_t>> FrameReader::peek(ByteSource& src) {
  auto p = src.peek();
  span_left_ = p.ok() ? p->size() : 0;
  return p;
}

Status FrameReader::consume(ByteSource& src, size_t n) {
  Status s = src.consume(n);
  if (s.ok()) {
    span_left_ -= std::min(n, span_left_);
    progress_ += n;
  }
  return s;
}

Result<size_t> FrameReader::read(ByteSource& src, std::span<uint8_t> buf) {
  auto r = src.read(buf);
  if (r.ok()) {
    span_left_ -= std::min(*r, span_left_);
    progress_ += *r;
  }
  return r;
}

Result<size_t> FrameReader::read_owned(ByteSource& src, memory::Chain& out, size_t max) {
  auto r = src.read_owned(out, max);
  if (r.ok()) {
    span_left_ -= std::min(*r, span_left_);
    progress_ += *r;
  }
  return r;
}

// ---------------------------------------------------------------------------------------

FrameReader::Event FrameReader::next(ByteSource& src) {
  assert(!in_frame_ && "FrameReader::finish() after each frame");
  pool_ = src.pool();
  for (;;) {
    if (discard_ != 0) {
      auto p = peek(src);
      if (!p.ok()) return io_event(p.status());
      if (p->empty()) return eof_event();
      const size_t d = static_cast<size_t>(std::min<uint64_t>(discard_, p->size()));
      if (Status s = consume(src, d); !s.ok()) return io_event(s);
      discard_ -= d;
      continue;
    }
    switch (stage_) {
      case Stage::kHeader: {
        auto p = peek(src);
        if (!p.ok()) return io_event(p.status());
        if (p->empty()) return eof_event();
        wire::FrameHeader h;
        if (hdr_have_ == 0 && p->size() >= wire::kHeaderSize) {
          auto d = wire::decode_header(*p, limits_);
          if (!d.ok()) return {Kind::kProtocol, d.status()};
          h = *d;
          const size_t front = size_t{h.meta_len} + h.body_len;
          if (h.attach_len == 0 && h.body_len <= limits_.max_payload && p->size() - wire::kHeaderSize >= front) {
            // The whole frame lies in the span: parse it where it is, consume after dispatch.
            frame_.h = h;
            frame_.meta = p->subspan(wire::kHeaderSize, h.meta_len);
            frame_.body = p->subspan(wire::kHeaderSize + h.meta_len, h.body_len);
            in_place_ = wire::kHeaderSize + front;
            ++stats_.in_place;
            return complete();
          }
          if (Status s = consume(src, wire::kHeaderSize); !s.ok()) return io_event(s);
        } else {
          // A header split across spans (a ring's end, a copying transport's staging).
          const size_t n = std::min(wire::kHeaderSize - hdr_have_, p->size());
          std::memcpy(hdr_ + hdr_have_, p->data(), n);
          if (Status s = consume(src, n); !s.ok()) return io_event(s);
          hdr_have_ += n;
          if (hdr_have_ < wire::kHeaderSize) continue;
          hdr_have_ = 0;
          auto d = wire::decode_header({hdr_, wire::kHeaderSize}, limits_);
          if (!d.ok()) return {Kind::kProtocol, d.status()};
          h = *d;
        }
        frame_.h = h;
        if (uint64_t{h.body_len} + h.attach_len > limits_.max_payload) {
          discard_ = h.payload();
          return {Kind::kOversized, {}};
        }
        front_len_ = size_t{h.meta_len} + h.body_len;
        if (front_cap_ < front_len_) {
          front_ = std::make_unique_for_overwrite<uint8_t[]>(front_len_);
          front_cap_ = front_len_;
        }
        front_have_ = 0;
        stage_ = Stage::kFront;
        continue;
      }
      case Stage::kFront: {
        while (front_have_ < front_len_) {
          auto r = read(src, {front_.get() + front_have_, front_len_ - front_have_});
          if (!r.ok()) return io_event(r.status());
          if (*r == 0) return eof_event();
          front_have_ += *r;
        }
        frame_.meta = {front_.get(), frame_.h.meta_len};
        frame_.body = {front_.get() + frame_.h.meta_len, frame_.h.body_len};
        if (frame_.h.attach_len == 0) return complete();
        stage_ = Stage::kAttach;
        continue;
      }
      case Stage::kAttach:
        return attach(src);
    }
  }
}

bool FrameReader::is_view(const memory::Slice& s) const { return s.owner() != nullptr && s.owner() != pool_; }

FrameReader::Event FrameReader::attach(ByteSource& src) {
  const size_t total = frame_.h.attach_len;
  for (;;) {
    const size_t have = att_.size() + att_buf_fill_;
    if (have == total) return complete();
    const size_t want = total - have;
    if (att_buf_) {
      auto r = read(src, {att_buf_.writable_data() + att_buf_fill_, want});
      if (!r.ok()) return io_event(r.status());
      if (*r == 0) return eof_event();
      att_buf_fill_ += *r;
      continue;
    }
    if (have == 0 && total > hold_bytes_) {
      // Too big to hold as views of a lending transport's receive memory (shm's ring):
      // read it straight into one buffer of its own (the transport's copy-out is then the
      // only copy) instead of taking views first and copying them out later.
      att_buf_ = memory::Slice::heap(total);
      continue;
    }
    const size_t before = att_.count();
    auto r = read_owned(src, att_, want);
    if (!r.ok()) {
      // Views held while the transport would-blocks: its own hold limit may be what stops
      // it, and only releasing them lets it go on.
      if (r.status().would_block() && att_views_ != 0) to_buffer();
      return io_event(r.status());
    }
    if (*r == 0) return eof_event();
    bool heap = false;
    for (size_t i = before; i < att_.count(); ++i) {
      const memory::Slice& s = att_.slice(i);
      if (s.owner() == nullptr) {
        heap = true;
      } else if (is_view(s)) {
        ++att_views_;
      }
    }
    // A copying transport: read the rest straight into one buffer.  Views of an
    // attachment above the hold cap: copy out now rather than hold the transport's memory.
    if (att_.size() < total && (heap || (att_views_ != 0 && total > hold_bytes_))) to_buffer();
  }
}

// Keeps the leading slices that are not views, copies the rest into a private buffer of
// the attachment's remaining size (the views go back to the transport), and reads what is
// still missing into that buffer.
void FrameReader::to_buffer() {
  const size_t total = frame_.h.attach_len;
  size_t keep_bytes = 0;
  for (size_t i = 0; i < att_.count() && !is_view(att_.slice(i)); ++i) keep_bytes += att_.slice(i).size();
  memory::Chain head = att_.split(keep_bytes);
  att_buf_ = memory::Slice::heap(total - keep_bytes);
  att_buf_fill_ = att_.copy_to(att_buf_.writable_data(), att_.size());
  stats_.copied_bytes += att_buf_fill_;
  if (att_views_ != 0) ++stats_.copied_out;
  att_ = std::move(head);
  att_views_ = 0;
}

FrameReader::Event FrameReader::complete() {
  if (att_views_ != 0 && frame_.h.attach_len > hold_bytes_) to_buffer();
  if (att_buf_) att_.append(std::move(att_buf_));
  att_buf_fill_ = 0;
  if (frame_.h.attach_len != 0) {
    ++stats_.attachments;
    stats_.attachment_bytes += frame_.h.attach_len;
    if (att_views_ != 0) {
      ++stats_.views;
      for (size_t i = 0; i < att_.count(); ++i) {
        const memory::Slice& s = att_.slice(i);
        if (!is_view(s)) continue;
        const uint8_t* st = storage_of(s);
        if (std::none_of(loans_.begin(), loans_.end(), [st](const memory::Slice& l) { return storage_of(l) == st; }))
          loans_.push_back(s);
      }
      AttachmentAccess::set_view(frame_.attachment, std::move(att_));
    } else {
      AttachmentAccess::set_private(frame_.attachment, std::move(att_));
    }
  }
  att_.clear();
  att_views_ = 0;
  ++stats_.frames;
  in_frame_ = true;
  return {Kind::kFrame, {}};
}

void FrameReader::finish(ByteSource& src) {
  if (!in_frame_) return;
  frame_.attachment.clear();
  frame_.meta = {};
  frame_.body = {};
  if (in_place_ != 0) {
    (void)consume(src, in_place_);  // a failed connection reports itself on the next call
    in_place_ = 0;
  }
  // Whoever kept the frame's attachment made it private (Attachment's copy rule), so the
  // views are ours alone now; one still shared was kept by its slices (misuse).
  for (const memory::Slice& l : loans_)
    if (!l.unique()) ++stats_.views_kept;
  loans_.clear();
  reset();
}

void FrameReader::reset() {
  stage_ = Stage::kHeader;
  in_frame_ = false;
  in_place_ = 0;
  hdr_have_ = 0;
  front_have_ = 0;
  front_len_ = 0;
  if (front_cap_ > kKeepFront) {
    front_.reset();
    front_cap_ = 0;
  }
  att_.clear();
  att_views_ = 0;
  att_buf_ = memory::Slice();
  att_buf_fill_ = 0;
  frame_.attachment.clear();
  frame_.meta = {};
  frame_.body = {};
  loans_.clear();
}

FrameReader::Event FrameReader::skip(ByteSource& src) {
  reset();
  discard_ = 0;
  size_t dropped = 0;
  for (;;) {
    auto p = peek(src);
    if (!p.ok()) return io_event(p.status());
    if (p->empty()) return eof_event();
    const size_t n = p->size();
    if (Status s = consume(src, n); !s.ok()) return io_event(s);
    dropped += n;
    if (dropped >= kSkipBudget) return {Kind::kWouldBlock, {}};  // at rest: readiness calls again
  }
}

// --- OutQueue ----------------------------------------------------------------------------

uint8_t* OutQueue::reserve(size_t n) {
  // Nothing queued and nobody else holds the block (copying transports release what they
  // took at once): start it over.
  if (chain_.empty() && tail_used_ == tail_sealed_ && tail_ && tail_.unique()) tail_sealed_ = tail_used_ = 0;
  if (!tail_ || tail_.size() - tail_used_ < n) {
    seal();
    tail_ = memory::Slice::heap(std::max(block_size_, n));
    tail_sealed_ = tail_used_ = 0;
  }
  uint8_t* p = tail_.writable_data() + tail_used_;
  tail_used_ += n;
  bytes_ += n;
  return p;
}

void OutQueue::seal() {
  if (tail_used_ == tail_sealed_) return;
  chain_.append(tail_.sub(tail_sealed_, tail_used_ - tail_sealed_));
  tail_sealed_ = tail_used_;
}

void OutQueue::append(const Attachment& a) {
  if (a.empty()) return;
  ++stats_.attachments;
  stats_.attachment_bytes += a.size();
  if (a.is_view()) {  // the view ends with its dispatch; the queue may outlive it
    a.copy_to({reserve(a.size()), a.size()});
    stats_.copied_bytes += a.size();
    return;
  }
  for (size_t i = 0; i < a.slice_count(); ++i) {
    const memory::Slice& s = a.slice(i);
    if (s.size() <= kSmallSlice) {
      std::memcpy(reserve(s.size()), s.data(), s.size());
      stats_.copied_bytes += s.size();
      continue;
    }
    seal();
    chain_.append(s);
    bytes_ += s.size();
    if (pool_ != nullptr && s.owner() == pool_) stats_.pool_bytes += s.size();
  }
}

void OutQueue::clear() {
  chain_.clear();
  tail_ = memory::Slice();
  tail_sealed_ = tail_used_ = 0;
  bytes_ = 0;
}

}  // namespace conduit::rpc::detail
