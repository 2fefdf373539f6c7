// The shared region of an shm:// connection (layout: shm_wire.h): creating it (server),
// checking and mapping what a server sent (client), and the mapping's owner.
//
// Both sides map the region *mirrored*: each ring's data twice, back to back, so that any
// range of up to a ring's size starting anywhere in it is contiguous in virtual memory
// (ring/spsc_ring.h).  That is what lets reserve(), peek() and read_owned() hand out one
// span however the range falls across the wrap.  In virtual memory (file offsets in
// brackets):
//
//   +0                 header page          [0]
//   +4K                ring 0               [4K]
//   +4K + ring         ring 0 again         [4K]
//   +4K + 2 ring       ring 1               [4K + ring]
//   +4K + 3 ring       ring 1 again         [4K + ring]
//
// Three kernel mappings (VMAs) per connection end: the second and third pieces are
// contiguous in the file too and merge.  Address space: 4K + 4 ring; memory: the region's
// 4K + 2 ring pages, shared.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

#include "conduit/base/fd.h"
#include "conduit/base/status.h"
#include "ring/spsc_ring.h"
#include "shm/shm_wire.h"

namespace conduit::transport::shm {

// One mmap()ed range; unmapped on destruction.
class Mapping {
 public:
  Mapping() = default;
  Mapping(void* p, size_t n) : p_(static_cast<uint8_t*>(p)), n_(n) {}
  ~Mapping() { reset(); }
  Mapping(Mapping&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  Mapping& operator=(Mapping&& o) noexcept {
    if (this != &o) {
      reset();
      p_ = std::exchange(o.p_, nullptr);
      n_ = std::exchange(o.n_, 0);
    }
    return *this;
  }
  uint8_t* data() const { return p_; }
  size_t size() const { return n_; }
  explicit operator bool() const { return p_ != nullptr; }
  void reset();

 private:
  uint8_t* p_ = nullptr;
  size_t n_ = 0;
};

inline ring::RingControl* ring_control(const Mapping& m, int index) {
  return reinterpret_cast<ring::RingControl*>(m.data() + kRingControlOffset + index * sizeof(ring::RingControl));
}
// The first of the two views of ring `index`'s data.
inline uint8_t* ring_data(const Mapping& m, uint64_t ring_bytes, int index) {
  return m.data() + kRegionHeaderBytes + static_cast<uint64_t>(index) * 2 * ring_bytes;
}
inline constexpr uint64_t mirrored_bytes_for(uint64_t ring_bytes) { return kRegionHeaderBytes + 4 * ring_bytes; }

// Server side: a fresh sealed memfd holding the region, mapped (mirrored) and initialised.
Result<Mapping> create_region(uint64_t ring_bytes, UniqueFd* memfd_out);
// Client side: checks the region memfd the server sent (a regular file of the announced
// size, sealed against resizing; then its header) and maps it (mirrored).
Result<Mapping> map_region(int memfd, uint64_t ring_bytes, uint64_t region_bytes);
// Client side: checks that a descriptor the server sent as a doorbell is a non-blocking
// eventfd open for reading and writing.  Anything else -- a pipe, a socket, a FIFO, a
// regular file, a blocking descriptor -- could make our doorbell write block or do
// something else entirely, so it is refused (kProtocolError naming `what`).  fstat() tells
// an anonymous-inode descriptor from files, pipes and sockets; /proc/self/fd (when mounted)
// tells an eventfd from other anonymous inodes.  (A peer shares the open file description,
// so it could still clear O_NONBLOCK later: only allowed uids get this far, see shm_paths.h.)
Status check_eventfd(int fd, const char* what);

}  // namespace conduit::transport::shm
