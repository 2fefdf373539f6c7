// The shared region of an shm:// connection (layout: shm_wire.h): creating it (server),
// checking and mapping what a server sent (client), and the mapping's owner.
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
inline uint8_t* ring_data(const Mapping& m, uint64_t ring_bytes, int index) {
  return m.data() + kRegionHeaderBytes + static_cast<uint64_t>(index) * ring_bytes;
}

// Server side: a fresh sealed memfd holding the region, mapped and initialised.
Result<Mapping> create_region(uint64_t ring_bytes, UniqueFd* memfd_out);
// Client side: checks the region memfd the server sent (a regular file of the announced
// size, sealed against resizing; then its header) and maps it.
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
