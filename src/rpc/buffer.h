// Byte blocks, the receive buffer and the output queue of an rpc connection.
//
// This file and buffer.cc are the one seam between rpc and the memory it moves: Blocks are
// heap memory today, filled by Connection::read and drained by Connection::writev.  When
// the memory layer's owned-buffer I/O lands (issue 10), a Block becomes a registered slice
// and RxBuffer/OutQueue hand chains to the connection instead of copying; nothing above
// this file changes.
//
// Threading: RxBuffer and OutQueue belong to one connection (its loop thread).  Blocks are
// shared through std::shared_ptr (atomic counts), so attachments may leave the thread.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>

#include "conduit/base/status.h"
#include "conduit/rpc/attachment.h"

namespace conduit::transport {
class Connection;
}

namespace conduit::rpc::detail {

struct Block {
  explicit Block(size_t n);
  std::unique_ptr<uint8_t[]> bytes;
  size_t cap;
  uint8_t* data() { return bytes.get(); }
};
std::shared_ptr<Block> new_block(size_t n);

// Receive side: bytes [rpos, wpos) of `block` are read but not yet parsed.
class RxBuffer {
 public:
  explicit RxBuffer(size_t block_size) : block_size_(block_size) {}
  // Room to read into, at least `min_free` bytes; unparsed bytes are moved to a new block
  // when the current one cannot hold a frame of `frame_bytes` from rpos (0 = don't care).
  std::span<uint8_t> writable(size_t frame_bytes);
  void produced(size_t n) { wpos_ += n; }
  std::span<const uint8_t> readable() const {
    return {block_ ? block_->data() + rpos_ : nullptr, wpos_ - rpos_};
  }
  void consume(size_t n);
  // A slice of the unparsed bytes sharing the block (zero copy).
  Attachment::Slice slice(size_t offset, size_t n) const;
  size_t block_size() const { return block_size_; }

 private:
  size_t block_size_;
  std::shared_ptr<Block> block_;
  size_t rpos_ = 0;
  size_t wpos_ = 0;
};

// Send side: a queue of byte ranges, small frames serialised into a scratch block,
// attachments referenced where they lie.  flush() writes with writev.
class OutQueue {
 public:
  explicit OutQueue(size_t block_size) : block_size_(block_size) {}
  // Contiguous room for `n` bytes appended to the queue; the caller fills all of it.
  uint8_t* reserve(size_t n);
  void append(const Attachment& a);
  // Writes as much as the connection accepts.  OK when the queue emptied; would-block when
  // bytes remain; an error when the connection failed.
  Status flush(transport::Connection& c);
  size_t bytes() const { return bytes_; }
  bool empty() const { return bytes_ == 0; }
  void clear();

 private:
  struct Seg {
    std::shared_ptr<Block> keep;
    const uint8_t* data;
    size_t size;
  };
  size_t block_size_;
  std::deque<Seg> segs_;
  std::shared_ptr<Block> tail_;
  size_t tail_used_ = 0;
  size_t bytes_ = 0;
};

}  // namespace conduit::rpc::detail
