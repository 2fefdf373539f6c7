// The one seam between rpc and the memory it moves: how frames come off a connection
// (FrameReader) and go onto it (OutQueue), on the memory layer's in-place and owned-buffer
// I/O (transport::Connection: peek/consume, read, read_owned, write_owned; memory::Slice
// and Chain).  Nothing above this file knows which bytes are copied.
//
// Receive (FrameReader), per frame:
//   header, metadata, body   parsed in place from peek() when the whole frame (without an
//                            attachment) lies in the span peek() shows -- the small-call
//                            path, no copy; otherwise gathered by read() into one reusable
//                            buffer (the one copy a parse needs).
//   attachment               read_owned() slices.  A slice of heap memory means the
//                            transport copied anyway: the rest is read() straight into one
//                            buffer of the attachment's size (no chain of small pieces).
//                            Pool slices (the connection's pool()) are kept as they are.
//                            Anything else is a view of the transport's receive memory: kept
//                            in place while the frame is dispatched (Attachment::is_view)
//                            if the attachment fits the hold cap; one larger than the cap is
//                            read() straight into a buffer of its own from the start (the
//                            transport's copy-out is the only copy), and views are copied
//                            into private memory if the transport would-blocks while they
//                            are held (its own hold limit).  After dispatch the
//                            views are dropped: the transport gets its space back.
// Send (OutQueue): headers, metadata and bodies are serialised into a scratch block (one
// iovec for many frames), attachments are referenced where they lie, and flush() hands
// the whole queue to write_owned() (pool slices go out without a copy on rdma).
//
// Threading: both belong to one connection (its loop thread).  The slices they hand out
// may leave the thread (atomic reference counts).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "conduit/base/status.h"
#include "conduit/memory/buffer.h"
#include "conduit/rpc/attachment.h"
#include "wire.h"

namespace conduit::rpc::detail {

// What FrameReader reads from: transport::Connection's reads (ConnectionSource in link.cc);
// an interface so that the fuzzer and the unit tests drive the reader over bytes and
// memory of their choosing.  Semantics as in include/conduit/transport/connection.h.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  virtual Result<std::span<const uint8_t>> peek() = 0;
  virtual Status consume(size_t n) = 0;
  virtual Result<size_t> read(std::span<uint8_t> buf) = 0;
  virtual Result<size_t> read_owned(memory::Chain& out, size_t max) = 0;
  // Slices owned by this are the application's to keep (the connection's pool).
  virtual const void* pool() const { return nullptr; }
};

struct Frame {
  wire::FrameHeader h;
  std::span<const uint8_t> meta;  // valid until FrameReader::finish()
  std::span<const uint8_t> body;
  Attachment attachment;  // possibly a view (see above): take it with AttachmentAccess
};

struct ReaderStats {
  uint64_t frames = 0;
  uint64_t in_place = 0;          // frames parsed where peek() showed them
  uint64_t attachments = 0;
  uint64_t views = 0;             // attachments delivered as views of receive memory
  uint64_t copied_out = 0;        // attachments copied out of receive memory (hold cap, would-block)
  uint64_t views_kept = 0;        // views still referenced after their dispatch (misuse)
  uint64_t attachment_bytes = 0;  // bytes of the attachments above
  uint64_t copied_bytes = 0;      // of which rpc copied itself (views copied out); the
                                  // transport's own copy into read_owned memory is not counted
};

// What OutQueue did with the attachments handed to it (Link::reader_stats' send twin).
struct SendStats {
  uint64_t attachments = 0;
  uint64_t attachment_bytes = 0;
  uint64_t copied_bytes = 0;      // copied into the scratch block (slices <= 512 B, views)
  uint64_t pool_bytes = 0;        // referenced slices of the connection's pool(): the
                                  // transport sends these where they lie (rdma: RDMA WRITE)
};

class FrameReader {
 public:
  FrameReader(wire::Limits limits, size_t hold_bytes) : limits_(limits), hold_bytes_(hold_bytes) {}

  enum class Kind : uint8_t {
    kFrame,       // frame() is complete: dispatch it, then finish()
    kOversized,   // frame().h is a well-formed header whose payload exceeds the limit; its
                  // bytes are being discarded (the reader goes on by itself)
    kWouldBlock,  // nothing more now
    kEof,         // the peer closed (mid-frame or not)
    kIoError,     // the source failed (`error`)
    kProtocol,    // a malformed header (`error`)
  };
  struct Event {
    Kind kind;
    Status error;
  };
  Event next(ByteSource& src);
  Frame& frame() { return frame_; }
  // After a kFrame's dispatch: releases the frame's in-place bytes and its views.
  void finish(ByteSource& src);
  // Drops everything readable now (a link that sent GOAWAY): kWouldBlock, kEof or kIoError.
  Event skip(ByteSource& src);

  // No byte peek() showed is left unconsumed: a reader may stop here and rely on the
  // connection's readiness to call it again.  (Stopping elsewhere could leave bytes a
  // copying transport staged in peek(), which no readiness event announces.)
  bool at_rest() const { return span_left_ == 0; }
  // Bytes consumed since the last call (the caller's per-event budget).
  uint64_t take_progress() {
    const uint64_t p = progress_;
    progress_ = 0;
    return p;
  }
  const ReaderStats& stats() const { return stats_; }

 private:
  enum class Stage : uint8_t { kHeader, kFront, kAttach };
  Result<std::span<const uint8_t>> peek(ByteSource& src);
  Status consume(ByteSource& src, size_t n);
  Result<size_t> read(ByteSource& src, std::span<uint8_t> buf);
  Result<size_t> read_owned(ByteSource& src, memory::Chain& out, size_t max);
  Event attach(ByteSource& src);
  bool is_view(const memory::Slice& s) const;
  void to_buffer();
  Event complete();
  void reset();

  wire::Limits limits_;
  size_t hold_bytes_;
  Stage stage_ = Stage::kHeader;
  bool in_frame_ = false;     // kFrame returned, finish() not yet called
  size_t span_left_ = 0;      // bytes of the last peek() span not consumed yet
  uint64_t progress_ = 0;
  uint64_t discard_ = 0;      // bytes of an oversized frame still to drop
  uint8_t hdr_[wire::kHeaderSize];
  size_t hdr_have_ = 0;
  size_t in_place_ = 0;       // bytes of the current frame to consume after dispatch
  std::unique_ptr<uint8_t[]> front_;  // metadata + body when not in place
  size_t front_cap_ = 0;
  size_t front_len_ = 0;
  size_t front_have_ = 0;
  const void* pool_ = nullptr;  // the source's pool(): its slices are not views
  memory::Chain att_;           // attachment bytes so far (read_owned slices)
  size_t att_views_ = 0;        // of which views
  memory::Slice att_buf_;       // private buffer once the rest is read() (copy mode)
  size_t att_buf_fill_ = 0;
  std::vector<memory::Slice> loans_;  // one reference per view storage of the dispatched frame
  Frame frame_;
  ReaderStats stats_;
};

// Send side: a queue of byte ranges, small frames serialised into a scratch block,
// attachments referenced where they lie.  flush() hands them to write_owned().
class OutQueue {
 public:
  explicit OutQueue(size_t block_size) : block_size_(block_size) {}
  // Contiguous room for `n` bytes appended to the queue; the caller fills all of it.
  uint8_t* reserve(size_t n);
  // Appends the attachment's slices by reference (small ones and views are copied).
  void append(const Attachment& a);
  // Hands as much as the connection accepts to it (Connection::write_owned).  OK when the
  // queue emptied; would-block when bytes remain; an error when the connection failed.
  // (A template only so that this file needs no transport symbols: the fuzzer builds it.)
  template <typename Conn>
  Status flush(Conn& c) {
    seal();
    while (!chain_.empty()) {
      auto w = c.write_owned(chain_);
      if (!w.ok()) return w.status();
      if (*w == 0) return Status::WouldBlock();
      bytes_ -= *w;
    }
    return Status::Ok();
  }
  size_t bytes() const { return bytes_; }
  bool empty() const { return bytes_ == 0; }
  void clear();
  // The connection's pool() (for SendStats::pool_bytes only).
  void set_pool(const void* pool) { pool_ = pool; }
  const SendStats& stats() const { return stats_; }

 private:
  void seal();  // moves the scratch bytes handed out since the last seal into the chain
  size_t block_size_;
  memory::Chain chain_;
  memory::Slice tail_;      // the scratch block
  size_t tail_sealed_ = 0;  // [0, tail_sealed_) is in chain_
  size_t tail_used_ = 0;    // [tail_sealed_, tail_used_) handed out, not yet in chain_
  size_t bytes_ = 0;
  const void* pool_ = nullptr;
  SendStats stats_;
};

}  // namespace conduit::rpc::detail
