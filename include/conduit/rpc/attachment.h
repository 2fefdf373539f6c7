// rpc::Attachment: raw bytes carried beside an RPC message, as a chain of ref-counted
// slices (folly IOBuf's ownership in types, brpc's attachment).
//
// Ownership: an Attachment owns references to its slices; copying an Attachment shares the
// slices (no byte copy), moving transfers them.  A received attachment is a slice of the
// connection's receive block: keeping it keeps that block's memory alive but never stalls
// other calls on the connection (the connection reads into fresh blocks).  The rule for
// handlers (docs/PROTOCOL.md "Attachments"): an attachment kept past the call holds its
// receive memory until released; call `compact()` (one copy into a private block) to keep
// a small part of a big block.
//
// The slice type is the seam to the memory layer (conduit::memory chains, issue 10): today
// a Block is heap memory filled by Connection::read; only src/rpc/buffer.{h,cc} know that.
//
// Threading: an Attachment is a value; distinct Attachments sharing slices may be used
// from different threads (atomic reference counts).  Cost: append of a view = one copy;
// append of another Attachment = reference bumps, no copy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace conduit::rpc {

namespace detail {
struct Block;  // src/rpc/buffer.h
}

class Attachment {
 public:
  struct Slice {
    std::shared_ptr<detail::Block> block;
    const uint8_t* data = nullptr;
    size_t size = 0;
  };

  Attachment() = default;
  // Copies `bytes` into one new block.
  explicit Attachment(std::string_view bytes) { append(bytes); }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const std::vector<Slice>& slices() const { return slices_; }

  // Copies `bytes` (into the tail block's spare room when there is some).
  void append(std::string_view bytes);
  void append(std::span<const uint8_t> bytes) {
    append(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  }
  // Shares `other`'s slices (no byte copy).
  void append(const Attachment& other);
  // Shares a slice of an existing block (used by the receive path).
  void append_slice(Slice s);
  void clear();

  // Copies min(size(), out.size()) bytes from offset `from`; returns the count.
  size_t copy_to(std::span<uint8_t> out, size_t from = 0) const;
  std::string to_string() const;
  // Replaces the slices by one private block holding the same bytes (releases big receive
  // blocks of which only a part is kept).
  void compact();

  friend bool operator==(const Attachment& a, const Attachment& b);

 private:
  std::vector<Slice> slices_;
  size_t size_ = 0;
};

}  // namespace conduit::rpc
