// Owned buffers: Slice (a reference-counted view of a block of memory, carrying the keys
// of the region it lies in) and Chain (a sequence of slices with unique ownership).
// Ownership is in the types, as in folly's IOBuf: factories return values that own what
// they point to, appending to a chain takes a Slice by value or a Chain by rvalue, and a
// buffer's memory goes back where it came from (a pool, the heap, a transport's receive
// area) when its last Slice is gone.
//
//   Chain msg;
//   auto s = pool->allocate(4096);               // Result<Slice>; kWouldBlock when the pool is dry
//   std::memcpy(s->writable_data(), payload, n); s->set_size(n);
//   msg.append(std::move(*s));
//   conn.write_owned(msg);                        // the transport takes what it accepted
//
// Threading: a Slice or Chain object is used by one thread at a time; copies of one Slice
// may live on different threads (the count is atomic) and the memory is released on the
// thread that drops the last reference.  Cost: copying a Slice is one atomic increment; a
// Chain stores its slices in a vector (one allocation once it holds more than a few);
// filling iovec / scatter-gather arrays allocates nothing.
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "conduit/memory/registrar.h"

namespace conduit::memory {

// Same layout as ibv_sge (address, length, lkey), so a transport can hand an array of
// these to the device without conversion (it checks the layout with static_asserts).
struct SgEntry {
  uint64_t addr;
  uint32_t length;
  uint32_t lkey;
};
static_assert(sizeof(SgEntry) == 16);

class BlockPool;

namespace detail {
// The storage behind slices.  Pool blocks keep their Storage in the region's metadata (no
// allocation per block); heap and foreign storage allocate one.
struct Storage {
  std::atomic<uint32_t> refs{0};
  uint8_t* data = nullptr;
  size_t capacity = 0;
  const RegionKeys* keys = nullptr;  // kMaxDomains entries, or null for unregistered memory
  uint32_t domains = 0;              // bit i: keys[i] is valid
  uint8_t cls = 0xff;                // a pool block's size class (0xff: not a class block)
  const void* owner = nullptr;       // the pool (or transport area) this memory belongs to
  void (*release)(Storage*) = nullptr;  // runs when refs drops to 0
  void* context = nullptr;              // release's own data
};
inline void retain(Storage* s) { s->refs.fetch_add(1, std::memory_order_relaxed); }
inline void drop(Storage* s) {
  if (s->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) s->release(s);
}
}  // namespace detail

class Slice {
 public:
  Slice() = default;
  Slice(const Slice& o) : s_(o.s_), off_(o.off_), len_(o.len_) {
    if (s_) detail::retain(s_);
  }
  Slice(Slice&& o) noexcept : s_(o.s_), off_(o.off_), len_(o.len_) { o.s_ = nullptr, o.off_ = o.len_ = 0; }
  Slice& operator=(Slice o) noexcept {
    swap(o);
    return *this;
  }
  ~Slice() {
    if (s_) detail::drop(s_);
  }
  void swap(Slice& o) noexcept {
    std::swap(s_, o.s_);
    std::swap(off_, o.off_);
    std::swap(len_, o.len_);
  }

  // Unregistered memory from the heap, `size` bytes visible, zero headroom.
  static Slice heap(size_t size);
  // A heap copy of `bytes`.
  static Slice copy_of(std::span<const uint8_t> bytes);
  // Memory someone else owns: `release` runs (on the thread that drops the last
  // reference) when no slice refers to it any more.  `keys` (kMaxDomains entries, `domains`
  // saying which are valid) must stay valid until then; null for unregistered memory.
  // `owner` identifies whose memory it is (a transport recognises its own receive area).
  static Slice foreign(uint8_t* data, size_t size, std::function<void()> release, const RegionKeys* keys = nullptr,
                       uint32_t domains = 0, const void* owner = nullptr);

  bool empty() const { return len_ == 0; }
  explicit operator bool() const { return s_ != nullptr; }
  const uint8_t* data() const { return s_ ? s_->data + off_ : nullptr; }
  // For the owner filling a buffer it just allocated.  Writing into memory other slices
  // still see (or a transport may still be sending from) is the caller's bug.
  uint8_t* writable_data() const { return s_ ? s_->data + off_ : nullptr; }
  size_t size() const { return len_; }
  std::span<const uint8_t> span() const { return {data(), len_}; }
  size_t headroom() const { return off_; }
  size_t tailroom() const { return s_ ? s_->capacity - off_ - len_ : 0; }
  size_t capacity() const { return s_ ? s_->capacity : 0; }
  bool unique() const { return s_ != nullptr && s_->refs.load(std::memory_order_acquire) == 1; }

  // Registration: the keys of this memory in `domain` (a pool's registrar index); valid
  // only if registered(domain).  O(1): no lookup.
  bool registered(unsigned domain) const { return s_ && s_->keys && domain < kMaxDomains && (s_->domains >> domain) & 1; }
  RegionKeys keys(unsigned domain) const { return registered(domain) ? s_->keys[domain] : RegionKeys{}; }
  const void* owner() const { return s_ ? s_->owner : nullptr; }
  uint64_t address() const { return reinterpret_cast<uintptr_t>(data()); }

  // Views: drop bytes from the front/back, or grow into the headroom/tailroom (for a header
  // written in front of a payload).  Growing past the storage is a bug (asserted).
  void advance(size_t n) {
    assert(n <= len_);
    off_ += n;
    len_ -= n;
  }
  void trim(size_t n) {
    assert(n <= len_);
    len_ -= n;
  }
  void prepend(size_t n) {
    assert(n <= off_);
    off_ -= n;
    len_ += n;
  }
  void set_size(size_t n) {
    assert(s_ && off_ + n <= s_->capacity);
    len_ = n;
  }
  // A new view of [offset, offset + len) of this one, sharing the memory.
  Slice sub(size_t offset, size_t len) const {
    assert(offset + len <= len_);
    Slice out(*this);
    out.off_ += offset;
    out.len_ = len;
    return out;
  }

 private:
  friend class BlockPool;
  explicit Slice(detail::Storage* s, size_t off, size_t len) : s_(s), off_(off), len_(len) {}  // takes a reference
  detail::Storage* s_ = nullptr;
  size_t off_ = 0;
  size_t len_ = 0;
};

class Chain {
 public:
  Chain() = default;
  explicit Chain(Slice s) { append(std::move(s)); }
  // A moved-from chain is empty.
  Chain(Chain&& o) noexcept : slices_(std::move(o.slices_)), head_(o.head_), bytes_(o.bytes_) { o.reset_moved(); }
  Chain& operator=(Chain&& o) noexcept {
    if (this != &o) {
      slices_ = std::move(o.slices_);
      head_ = o.head_;
      bytes_ = o.bytes_;
      o.reset_moved();
    }
    return *this;
  }
  Chain(const Chain&) = delete;
  Chain& operator=(const Chain&) = delete;

  // A heap copy of `bytes` as a one-slice chain (tests, convenience).
  static Chain copy_of(std::span<const uint8_t> bytes) { return Chain(Slice::copy_of(bytes)); }

  void append(Slice s);  // empty slices are dropped
  void append(Chain&& other);
  void prepend(Slice s);

  size_t size() const { return bytes_; }  // bytes
  size_t count() const { return slices_.size() - head_; }
  bool empty() const { return bytes_ == 0; }
  const Slice& slice(size_t i) const { return slices_[head_ + i]; }
  Slice& slice(size_t i) { return slices_[head_ + i]; }
  const Slice& front() const { return slices_[head_]; }

  // Drops `n` bytes (<= size()) from the front, releasing the slices emptied.
  void consume(size_t n);
  // Moves the first `n` bytes (<= size()) into a new chain; a slice on the boundary is
  // shared between the two (sub-views of one reference-counted buffer).
  Chain split(size_t n);
  void clear();

  // Fill caller arrays for gather I/O without allocating: at most out.size() entries and
  // `max_bytes` bytes, starting `skip` bytes in.  Return the entries filled (bytes via
  // *bytes if non-null).  to_sg uses each slice's keys in `domain`; an unregistered slice
  // ends the fill there (callers copy what is not registered).
  size_t to_iovec(std::span<iovec> out, size_t skip = 0, size_t max_bytes = SIZE_MAX, size_t* bytes = nullptr) const;
  size_t to_sg(std::span<SgEntry> out, unsigned domain, size_t skip = 0, size_t max_bytes = SIZE_MAX,
               size_t* bytes = nullptr) const;
  // Copies up to `max` bytes from the front (without consuming); returns the count.
  size_t copy_to(uint8_t* out, size_t max, size_t skip = 0) const;
  std::string to_string() const;  // all bytes (tests)

 private:
  void reset_moved() {
    slices_.clear();
    head_ = 0;
    bytes_ = 0;
  }
  void compact();
  std::vector<Slice> slices_;
  size_t head_ = 0;  // slices_[0, head_) are consumed (moved-from), reused on compact()
  size_t bytes_ = 0;
};

}  // namespace conduit::memory
