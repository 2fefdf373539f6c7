#include "buffer.h"

#include <algorithm>
#include <cstring>

#include "conduit/transport/connection.h"

namespace conduit::rpc {
namespace detail {

Block::Block(size_t n) : bytes(std::make_unique_for_overwrite<uint8_t[]>(n)), cap(n) {}

std::shared_ptr<Block> new_block(size_t n) { return std::make_shared<Block>(n); }

std::span<uint8_t> RxBuffer::writable(size_t frame_bytes) {
  const size_t unparsed = wpos_ - rpos_;
  const size_t need = std::max(frame_bytes, unparsed + 1);
  // Reuse the block in place when nobody else holds a slice of it and it is empty.
  if (block_ && unparsed == 0 && block_.use_count() == 1 && block_->cap >= need) {
    rpos_ = wpos_ = 0;
  }
  const bool fits = block_ && block_->cap - rpos_ >= need && wpos_ < block_->cap;
  if (!fits) {
    // A frame larger than a block gets a block of its own size (one read target, no
    // reassembly); otherwise a standard block.
    auto fresh = new_block(std::max(block_size_, need));
    if (unparsed != 0) std::memcpy(fresh->data(), block_->data() + rpos_, unparsed);
    block_ = std::move(fresh);
    rpos_ = 0;
    wpos_ = unparsed;
  }
  return {block_->data() + wpos_, block_->cap - wpos_};
}

void RxBuffer::consume(size_t n) {
  rpos_ += n;
  if (rpos_ == wpos_ && block_.use_count() == 1) rpos_ = wpos_ = 0;
}

Attachment::Slice RxBuffer::slice(size_t offset, size_t n) const {
  return {block_, block_->data() + rpos_ + offset, n};
}

uint8_t* OutQueue::reserve(size_t n) {
  if (segs_.empty() && tail_ && tail_.use_count() == 1) tail_used_ = 0;
  if (!tail_ || tail_->cap - tail_used_ < n) {
    tail_ = new_block(std::max(block_size_, n));
    tail_used_ = 0;
  }
  uint8_t* p = tail_->data() + tail_used_;
  tail_used_ += n;
  bytes_ += n;
  // Grow the last range when it ends where this one starts (one iovec for many frames).
  if (!segs_.empty() && segs_.back().keep == tail_ && segs_.back().data + segs_.back().size == p) {
    segs_.back().size += n;
  } else {
    segs_.push_back({tail_, p, n});
  }
  return p;
}

void OutQueue::append(const Attachment& a) {
  for (const Attachment::Slice& s : a.slices()) {
    if (s.size == 0) continue;
    if (s.size <= 512) {  // small pieces: a copy is cheaper than an iovec
      std::memcpy(reserve(s.size), s.data, s.size);
      continue;
    }
    segs_.push_back({s.block, s.data, s.size});
    bytes_ += s.size;
  }
}

Status OutQueue::flush(transport::Connection& c) {
  constexpr size_t kMaxIov = 64;
  iovec iov[kMaxIov];
  while (!segs_.empty()) {
    size_t n = 0;
    for (auto it = segs_.begin(); it != segs_.end() && n < kMaxIov; ++it, ++n) {
      iov[n].iov_base = const_cast<uint8_t*>(it->data);
      iov[n].iov_len = it->size;
    }
    auto w = n == 1 ? c.write({segs_.front().data, segs_.front().size}) : c.writev({iov, n});
    if (!w.ok()) return w.status();
    size_t done = *w;
    bytes_ -= done;
    while (done > 0) {
      Seg& s = segs_.front();
      if (done >= s.size) {
        done -= s.size;
        segs_.pop_front();
      } else {
        s.data += done;
        s.size -= done;
        done = 0;
      }
    }
  }
  return Status::Ok();
}

void OutQueue::clear() {
  segs_.clear();
  bytes_ = 0;
}

}  // namespace detail

// --- Attachment -------------------------------------------------------------------------

void Attachment::append(std::string_view bytes) {
  if (bytes.empty()) return;
  auto b = detail::new_block(bytes.size());
  std::memcpy(b->data(), bytes.data(), bytes.size());
  slices_.push_back({b, b->data(), bytes.size()});
  size_ += bytes.size();
}

void Attachment::append(const Attachment& other) {
  for (const Slice& s : other.slices_) append_slice(s);
}

void Attachment::append_slice(Slice s) {
  if (s.size == 0) return;
  size_ += s.size;
  slices_.push_back(std::move(s));
}

void Attachment::clear() {
  slices_.clear();
  size_ = 0;
}

size_t Attachment::copy_to(std::span<uint8_t> out, size_t from) const {
  size_t copied = 0;
  for (const Slice& s : slices_) {
    if (copied == out.size()) break;
    if (from >= s.size) {
      from -= s.size;
      continue;
    }
    const size_t n = std::min(s.size - from, out.size() - copied);
    std::memcpy(out.data() + copied, s.data + from, n);
    copied += n;
    from = 0;
  }
  return copied;
}

std::string Attachment::to_string() const {
  std::string out(size_, '\0');
  copy_to({reinterpret_cast<uint8_t*>(out.data()), out.size()});
  return out;
}

void Attachment::compact() {
  if (slices_.size() == 1 && slices_[0].block && slices_[0].block->cap == size_) return;
  if (size_ == 0) {
    slices_.clear();
    return;
  }
  auto b = detail::new_block(size_);
  copy_to({b->data(), size_});
  slices_.clear();
  slices_.push_back({b, b->data(), size_});
}

bool operator==(const Attachment& a, const Attachment& b) {
  if (a.size_ != b.size_) return false;
  return a.to_string() == b.to_string();
}

}  // namespace conduit::rpc
