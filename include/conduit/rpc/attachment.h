// rpc::Attachment: raw bytes carried beside an RPC message, as a sequence of the memory
// layer's reference-counted slices (conduit::memory::Slice; folly IOBuf's ownership in
// types, brpc's attachment).
//
// Sending: the slices go to the connection as they lie (Connection::write_owned).  Slices
// allocated from the connection's pool -- Channel::pool(), Controller::pool(); the rdma
// transport's registered arena -- are RDMA-written from where they are, without a copy;
// other memory is copied by the transport (tcp into the kernel, shm into its ring, rdma
// into its staging area).  The transport keeps what it took until it is on the wire (rdma:
// until the completion), so do not write into an attachment's memory until its call ended.
//
// Receiving (docs/PROTOCOL.md "Attachments"): bytes come from Connection::read_owned.  On
// a copying transport (tcp: read_owned copies) an attachment is heap memory of its own
// size, the application's to keep; it pins no connection memory.  On a transport that
// lends its receive memory through read_owned (shm: views of its ring; rdma: views of its
// registered receive area) an attachment of up
// to the connection's hold cap (ServerOptions / ChannelOptions `attachment_hold_bytes`) is
// a *view* (is_view()): its bytes are read in place while the handler (server) or stream
// callback runs, and the connection gets the memory back when that returns.  Every way of
// keeping one -- copying or moving the Attachment, to_chain(), release() -- makes a private
// heap copy first, so a kept attachment never holds receive memory and never stalls the
// other calls.  Do not keep a view's slices themselves (slice(i) copies): that pins the
// receive memory and, past the transport's hold limit, stops the connection (the server
// counts such attachments as `views_kept` in its status).  Larger attachments are copied
// out as they arrive and are never views.
//
// Ownership: an Attachment owns references to its slices; copying a non-view Attachment
// shares them (no byte copy), moving transfers them.  Threading: a value; distinct
// Attachments sharing slices may be used on different threads (atomic reference counts).
// Cost: append of bytes = one copy; append of a Chain, a Slice or another Attachment =
// reference moves or bumps, no copy (except for views, above).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "conduit/base/status.h"
#include "conduit/memory/buffer.h"
#include "conduit/memory/pool.h"

namespace conduit::rpc {

namespace detail {
struct AttachmentAccess;  // src/rpc: builds views, transfers them between rpc's own objects
}

class Attachment {
 public:
  Attachment() = default;
  // Copies `bytes` into one new heap slice.
  explicit Attachment(std::string_view bytes) { append(bytes); }
  // Takes the chain's slices (no copy): e.g. memory from allocate_attachment().
  explicit Attachment(memory::Chain&& chain) : chain_(std::move(chain)) {}
  explicit Attachment(memory::Slice slice) { chain_.append(std::move(slice)); }

  // Share the slices of `o`; a view is copied into private memory instead.
  Attachment(const Attachment& o);
  Attachment& operator=(const Attachment& o);
  // Transfer the slices of `o` (left empty); a view is copied instead (moving it out of its
  // Controller would keep the connection's receive memory).
  Attachment(Attachment&& o);
  Attachment& operator=(Attachment&& o);
  ~Attachment() = default;

  size_t size() const { return chain_.size(); }
  bool empty() const { return chain_.empty(); }
  size_t slice_count() const { return chain_.count(); }
  // The bytes in place, one slice at a time (zero copy; valid while this Attachment holds them).
  const memory::Slice& slice(size_t i) const { return chain_.slice(i); }
  // A view of a connection's receive memory, valid while its handler or callback runs.
  bool is_view() const { return view_; }

  // Copies `bytes` (one heap slice).
  void append(std::string_view bytes);
  void append(std::span<const uint8_t> bytes) {
    append(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  }
  // Shares `other`'s slices (a view's bytes are copied).
  void append(const Attachment& other);
  void append(memory::Slice s) { chain_.append(std::move(s)); }
  void append(memory::Chain&& c) { chain_.append(std::move(c)); }
  void clear();

  // The bytes as a chain sharing this attachment's slices (a view: a private copy).
  memory::Chain to_chain() const;
  // Moves the slices out as a chain, leaving this empty (a view: a private copy).
  memory::Chain release();

  // Copies min(size() - from, out.size()) bytes from offset `from`; returns the count.
  size_t copy_to(std::span<uint8_t> out, size_t from = 0) const;
  std::string to_string() const;
  // Replaces the slices by one private heap slice holding the same bytes (keeps a small
  // part of a big buffer without the rest; turns a view into a private attachment).
  void compact();

  friend bool operator==(const Attachment& a, const Attachment& b);

 private:
  friend struct detail::AttachmentAccess;
  memory::Chain chain_;
  bool view_ = false;
};

// Memory for an attachment of `bytes` bytes (1 .. the pool's cap) that a connection whose
// pool() is `pool` sends without a copy: blocks of at most `max_block` bytes from the pool
// (registered; Chain::to_sg works on them), or heap memory when `pool` is null.  Fill the
// slices (writable_data()), then Attachment(std::move(chain)).  When the pool is at its cap
// the call polls it (every <= 1 ms) for up to `wait_ms` for memory to come back -- slices
// the transports release at completion, attachments the application drops -- and then
// fails with kResourceExhausted naming the pool and its use; it never hangs and never
// falls back to unregistered memory.  Waiting on a loop thread delays what that loop would
// release: wait there with 0 (fail at once) and retry from a timer.  Thread-safe.
Result<memory::Chain> allocate_attachment(memory::BlockPool* pool, size_t bytes, uint64_t wait_ms = 0,
                                          size_t max_block = 64 << 10);

}  // namespace conduit::rpc
