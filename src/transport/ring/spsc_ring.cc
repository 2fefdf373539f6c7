#include "ring/spsc_ring.h"

#include <cstring>

namespace conduit::transport::ring {

RingWriter::RingWriter(RingControl* ctl, uint8_t* data, uint64_t capacity, bool mirrored)
    : ctl_(ctl),
      data_(data),
      cursor_(RingGeometry(capacity), ctl->tail.load(std::memory_order_acquire)),
      mirrored_(mirrored) {
  // Attach where the ring stands: everything between tail and head is in flight.
  const uint64_t in_flight = ctl->head.load(std::memory_order_relaxed) - cursor_.acked();
  if (in_flight <= capacity)
    cursor_.produce(in_flight);
  else
    corrupt_ = true;
}

bool RingWriter::refresh() {
  if (corrupt_) return false;
  if (!cursor_.update_consumed(ctl_->tail.load(std::memory_order_acquire))) corrupt_ = true;
  return !corrupt_;
}

size_t RingWriter::write(std::span<const iovec> iov, size_t max) {
  if (max == 0 || corrupt_) return 0;
  if (cursor_.free_space() < max && !refresh()) return 0;
  const Extents ext = cursor_.writable(max);
  size_t left = ext.total();
  if (left == 0) return 0;
  // Gather: walk the iovecs and the (at most two) ring pieces together.
  uint8_t* dst = data_ + ext.first.offset;
  size_t room = ext.first.len;
  for (const iovec& v : iov) {
    const auto* src = static_cast<const uint8_t*>(v.iov_base);
    size_t len = std::min(v.iov_len, left);
    while (len > 0) {
      if (room == 0) {
        // Only reachable once: the first piece is full and the range wrapped.
        dst = data_ + ext.second.offset;
        room = ext.second.len;
      }
      const size_t n = std::min(len, room);
      std::memcpy(dst, src, n);
      dst += n;
      src += n;
      room -= n;
      len -= n;
      left -= n;
    }
    if (left == 0) break;
  }
  const size_t written = ext.total() - left;
  cursor_.produce(written);
  ctl_->head.store(cursor_.head(), std::memory_order_release);
  return written;
}

std::span<uint8_t> RingWriter::writable(size_t max) {
  if (max == 0 || corrupt_) return {};
  if (cursor_.free_space() < max && !refresh()) return {};
  const Extents ext = cursor_.writable(max);
  return {data_ + ext.first.offset, mirrored_ ? ext.total() : ext.first.len};
}

void RingWriter::produce(size_t n) {
  if (n == 0) return;
  cursor_.produce(n);
  ctl_->head.store(cursor_.head(), std::memory_order_release);
}

RingReader::RingReader(RingControl* ctl, uint8_t* data, uint64_t capacity, bool mirrored)
    : ctl_(ctl),
      data_(data),
      cursor_(RingGeometry(capacity), ctl->tail.load(std::memory_order_relaxed)),
      published_(cursor_.tail()),
      mirrored_(mirrored) {
  corrupt_ = !refresh();
}

bool RingReader::refresh() {
  if (corrupt_) return false;
  if (!cursor_.update_produced(ctl_->head.load(std::memory_order_acquire))) corrupt_ = true;
  return !corrupt_;
}

size_t RingReader::copy_out(std::span<uint8_t> buf) {
  if (buf.empty() || corrupt_) return 0;
  if (cursor_.available() < buf.size() && !refresh()) return 0;
  const Extents ext = cursor_.readable(buf.size());
  if (ext.total() == 0) return 0;
  std::memcpy(buf.data(), data_ + ext.first.offset, ext.first.len);
  if (ext.second.len > 0) std::memcpy(buf.data() + ext.first.len, data_ + ext.second.offset, ext.second.len);
  cursor_.consume(ext.total());
  return ext.total();
}

std::span<const uint8_t> RingReader::readable() {
  if (corrupt_ || !refresh()) return {};
  const Extents ext = cursor_.readable(cursor_.available());
  return {data_ + ext.first.offset, mirrored_ ? ext.total() : ext.first.len};
}

RingReader::Pieces RingReader::peek() {
  if (corrupt_) return {};
  (void)refresh();
  const Extents ext = cursor_.readable(cursor_.available());
  return Pieces{{data_ + ext.first.offset, ext.first.len}, {data_ + ext.second.offset, ext.second.len}};
}

void RingReader::consume(size_t n) {
  cursor_.consume(n);
  publish(cursor_.tail());
}

}  // namespace conduit::transport::ring
