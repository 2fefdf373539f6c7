// The base Connection's reserve/commit, peek/consume and owned-buffer I/O: copying through
// read/write/writev, for transports that have nothing faster (tcp: the kernel copies anyway).
#include <algorithm>
#include <cstring>

#include "conduit/transport/connection.h"

namespace conduit::transport {
namespace {
constexpr size_t kReadSlice = 64 * 1024;  // what one owned read asks the kernel for
constexpr size_t kMaxIov = 64;
}  // namespace

Status Connection::flush_staged_out() {
  while (has_staged_out()) {
    CopyState& c = *copy_;
    iovec v{c.out.data() + c.out_begin, c.out_end - c.out_begin};
    staging_io_ = true;  // the transport's writev now writes these bytes, not more before them
    auto n = writev(std::span<const iovec>(&v, 1));
    staging_io_ = false;
    if (!n.ok()) return n.status();
    c.out_begin += *n;
  }
  if (copy_) copy_->out_begin = copy_->out_end = 0;
  return {};
}

size_t Connection::take_staged_in(std::span<uint8_t> buf) {
  if (!has_staged_in()) return 0;
  CopyState& c = *copy_;
  const size_t n = std::min(buf.size(), c.in_end - c.in_begin);
  std::memcpy(buf.data(), c.in.data() + c.in_begin, n);
  c.in_begin += n;
  if (c.in_begin == c.in_end) c.in_begin = c.in_end = 0;
  return n;
}

Result<std::span<uint8_t>> Connection::reserve(size_t min, size_t max) {
  if (min == 0 || min > max) return Status(Code::kInvalidArgument, "reserve: need 0 < min <= max");
  if (!copy_) copy_ = std::make_unique<CopyState>();
  CONDUIT_RETURN_IF_ERROR(flush_staged_out());  // would-block while earlier bytes wait
  if (copy_->out.size() < max) copy_->out.resize(max);
  return std::span<uint8_t>(copy_->out.data(), max);
}

Status Connection::commit(size_t n) {
  if (n == 0) return {};
  if (!copy_ || n > copy_->out.size() || has_staged_out())
    return Status(Code::kInvalidArgument, "commit: more than the last reserve() returned");
  copy_->out_begin = 0;
  copy_->out_end = n;
  Status s = flush_staged_out();
  return s.would_block() ? Status() : s;  // what the transport did not take stays staged
}

Result<std::span<const uint8_t>> Connection::peek() {
  if (!copy_) copy_ = std::make_unique<CopyState>();
  CopyState& c = *copy_;
  if (c.in_begin == c.in_end) {
    if (c.in.size() < kReadSlice) c.in.resize(kReadSlice);
    staging_io_ = true;  // read() fills the staging buffer itself
    auto n = read(std::span<uint8_t>(c.in.data(), c.in.size()));
    staging_io_ = false;
    if (!n.ok()) return n.status();
    c.in_begin = 0;
    c.in_end = *n;
  }
  return std::span<const uint8_t>(c.in.data() + c.in_begin, c.in_end - c.in_begin);
}

Status Connection::consume(size_t n) {
  if (n == 0) return {};
  if (!copy_ || n > copy_->in_end - copy_->in_begin)
    return Status(Code::kInvalidArgument, "consume: more than peek() returned");
  copy_->in_begin += n;
  if (copy_->in_begin == copy_->in_end) copy_->in_begin = copy_->in_end = 0;
  return {};
}

Result<size_t> Connection::write_owned(memory::Chain& chain) {
  CONDUIT_RETURN_IF_ERROR(flush_staged_out());
  if (chain.empty()) return size_t{0};
  iovec iov[kMaxIov];
  const size_t n = chain.to_iovec(iov);
  CONDUIT_ASSIGN_OR_RETURN(size_t taken, writev(std::span<const iovec>(iov, n)));
  chain.consume(taken);
  return taken;
}

Result<size_t> Connection::read_owned(memory::Chain& out, size_t max) {
  if (max == 0) return size_t{0};
  const size_t want = std::min(max, kReadSlice);
  if (has_staged_in()) {
    memory::Slice s = memory::Slice::heap(std::min(want, copy_->in_end - copy_->in_begin));
    const size_t n = take_staged_in(std::span<uint8_t>(s.writable_data(), s.size()));
    out.append(std::move(s));
    return n;
  }
  memory::Slice s = memory::Slice::heap(want);
  CONDUIT_ASSIGN_OR_RETURN(size_t n, read(std::span<uint8_t>(s.writable_data(), s.size())));
  s.set_size(n);
  out.append(std::move(s));
  return n;
}

}  // namespace conduit::transport
