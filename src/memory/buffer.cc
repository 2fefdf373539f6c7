#include "conduit/memory/buffer.h"

#include <algorithm>
#include <cstring>
#include <new>

namespace conduit::memory {
namespace {

// Heap storage: header and bytes in one allocation.
struct HeapStorage {
  detail::Storage s;
  alignas(64) uint8_t bytes[1];
};

void release_heap(detail::Storage* s) {
  HeapStorage* h = reinterpret_cast<HeapStorage*>(s);
  h->s.~Storage();
  ::operator delete(static_cast<void*>(h), std::align_val_t{64});
}

struct ForeignStorage {
  detail::Storage s;
  std::function<void()> fn;
};

void release_foreign(detail::Storage* s) {
  auto* f = static_cast<ForeignStorage*>(s->context);
  std::function<void()> fn = std::move(f->fn);
  delete f;
  if (fn) fn();
}

}  // namespace

Slice Slice::heap(size_t size) {
  void* mem = ::operator new(offsetof(HeapStorage, bytes) + std::max<size_t>(size, 1), std::align_val_t{64});
  auto* h = static_cast<HeapStorage*>(mem);
  new (&h->s) detail::Storage();
  h->s.data = reinterpret_cast<uint8_t*>(h) + offsetof(HeapStorage, bytes);
  h->s.capacity = size;
  h->s.release = release_heap;
  h->s.refs.store(1, std::memory_order_relaxed);
  return Slice(&h->s, 0, size);
}

Slice Slice::copy_of(std::span<const uint8_t> bytes) {
  Slice s = heap(bytes.size());
  if (!bytes.empty()) std::memcpy(s.writable_data(), bytes.data(), bytes.size());
  return s;
}

Slice Slice::foreign(uint8_t* data, size_t size, std::function<void()> release, const RegionKeys* keys,
                     uint32_t domains, const void* owner) {
  auto* f = new ForeignStorage();
  f->s.data = data;
  f->s.capacity = size;
  f->s.keys = keys;
  f->s.domains = keys ? domains : 0;
  f->s.owner = owner;
  f->s.release = release_foreign;
  f->s.context = f;
  f->s.refs.store(1, std::memory_order_relaxed);
  f->fn = std::move(release);
  return Slice(&f->s, 0, size);
}

// ---------------------------------------------------------------------------------------

void Chain::append(Slice s) {
  if (s.empty()) return;
  bytes_ += s.size();
  slices_.push_back(std::move(s));
}

void Chain::append(Chain&& other) {
  if (other.empty()) return;
  if (empty()) {
    *this = std::move(other);
    return;
  }
  for (size_t i = other.head_; i < other.slices_.size(); ++i) {
    bytes_ += other.slices_[i].size();
    slices_.push_back(std::move(other.slices_[i]));
  }
  other.clear();
}

void Chain::prepend(Slice s) {
  if (s.empty()) return;
  bytes_ += s.size();
  if (head_ > 0) {
    slices_[--head_] = std::move(s);
    return;
  }
  slices_.insert(slices_.begin(), std::move(s));
}

void Chain::consume(size_t n) {
  assert(n <= bytes_);
  n = std::min(n, bytes_);
  bytes_ -= n;
  while (n > 0) {
    Slice& f = slices_[head_];
    if (f.size() > n) {
      f.advance(n);
      return;
    }
    n -= f.size();
    f = Slice();
    ++head_;
  }
  compact();
}

void Chain::compact() {
  if (head_ == slices_.size()) {
    slices_.clear();
    head_ = 0;
  } else if (head_ > 8 && head_ * 2 > slices_.size()) {
    slices_.erase(slices_.begin(), slices_.begin() + static_cast<std::ptrdiff_t>(head_));
    head_ = 0;
  }
}

Chain Chain::split(size_t n) {
  assert(n <= bytes_);
  n = std::min(n, bytes_);
  Chain out;
  if (n == bytes_) {
    out = std::move(*this);
    clear();
    return out;
  }
  while (n > 0) {
    Slice& f = slices_[head_];
    if (f.size() > n) {
      out.append(f.sub(0, n));
      f.advance(n);
      bytes_ -= n;
      break;
    }
    n -= f.size();
    bytes_ -= f.size();
    out.append(std::move(f));
    f = Slice();
    ++head_;
  }
  compact();
  return out;
}

void Chain::clear() {
  slices_.clear();
  head_ = 0;
  bytes_ = 0;
}

size_t Chain::to_iovec(std::span<iovec> out, size_t skip, size_t max_bytes, size_t* bytes) const {
  size_t n = 0, total = 0;
  for (size_t i = head_; i < slices_.size() && n < out.size() && total < max_bytes; ++i) {
    const Slice& s = slices_[i];
    if (skip >= s.size()) {
      skip -= s.size();
      continue;
    }
    const size_t len = std::min(s.size() - skip, max_bytes - total);
    out[n++] = iovec{const_cast<uint8_t*>(s.data()) + skip, len};
    total += len;
    skip = 0;
  }
  if (bytes) *bytes = total;
  return n;
}

size_t Chain::to_sg(std::span<SgEntry> out, unsigned domain, size_t skip, size_t max_bytes, size_t* bytes) const {
  size_t n = 0, total = 0;
  for (size_t i = head_; i < slices_.size() && n < out.size() && total < max_bytes; ++i) {
    const Slice& s = slices_[i];
    if (skip >= s.size()) {
      skip -= s.size();
      continue;
    }
    if (!s.registered(domain)) break;
    const size_t len = std::min({s.size() - skip, max_bytes - total, size_t{UINT32_MAX}});
    out[n++] = SgEntry{s.address() + skip, static_cast<uint32_t>(len), s.keys(domain).lkey};
    total += len;
    skip = 0;
  }
  if (bytes) *bytes = total;
  return n;
}

size_t Chain::copy_to(uint8_t* out, size_t max, size_t skip) const {
  size_t total = 0;
  for (size_t i = head_; i < slices_.size() && total < max; ++i) {
    const Slice& s = slices_[i];
    if (skip >= s.size()) {
      skip -= s.size();
      continue;
    }
    const size_t len = std::min(s.size() - skip, max - total);
    std::memcpy(out + total, s.data() + skip, len);
    total += len;
    skip = 0;
  }
  return total;
}

std::string Chain::to_string() const {
  std::string out(bytes_, '\0');
  copy_to(reinterpret_cast<uint8_t*>(out.data()), out.size());
  return out;
}

}  // namespace conduit::memory
