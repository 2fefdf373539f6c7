#include "shm/shm_region.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>
#include <string>

#include "conduit/base/log.h"

namespace conduit::transport::shm {

void Mapping::reset() {
  if (p_ != nullptr && ::munmap(p_, n_) != 0) CONDUIT_LOG(kWarn) << "shm munmap: " << std::strerror(errno);
  p_ = nullptr;
  n_ = 0;
}

Result<Mapping> create_region(uint64_t ring_bytes, UniqueFd* memfd_out) {
  const uint64_t size = region_bytes_for(ring_bytes);
  UniqueFd mfd(::memfd_create("conduit-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!mfd) return Status::FromErrnoAuto(errno, "shm memfd_create");
  if (::ftruncate(mfd.get(), static_cast<off_t>(size)) != 0) return Status::FromErrnoAuto(errno, "shm ftruncate");
  // The client checks these seals: without them we could shrink the file under its mapping
  // and kill it with SIGBUS.
  if (::fcntl(mfd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
    return Status::FromErrnoAuto(errno, "shm seal memfd");
  void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, mfd.get(), 0);
  if (p == MAP_FAILED) return Status::FromErrnoAuto(errno, "shm mmap");
  Mapping m(p, size);
  auto* hdr = new (m.data()) RegionHeader{};
  hdr->magic = kRegionMagic;
  hdr->version = kProtocolVersion;
  hdr->ring_bytes = ring_bytes;
  hdr->region_bytes = size;
  new (ring_control(m, 0)) ring::RingControl{};
  new (ring_control(m, 1)) ring::RingControl{};
  *memfd_out = std::move(mfd);
  return m;
}

Result<Mapping> map_region(int memfd, uint64_t ring_bytes, uint64_t region_bytes) {
  struct stat st{};
  if (::fstat(memfd, &st) != 0) return Status::FromErrnoAuto(errno, "shm fstat region");
  if (static_cast<uint64_t>(st.st_size) != region_bytes)
    return Status(Code::kProtocolError, "shm: region is " + std::to_string(st.st_size) + " bytes, server announced " +
                                            std::to_string(region_bytes));
  const int seals = ::fcntl(memfd, F_GET_SEALS);
  if (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW))
    return Status(Code::kProtocolError, "shm: region memfd is not sealed against resizing");
  void* p = ::mmap(nullptr, region_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
  if (p == MAP_FAILED) return Status::FromErrnoAuto(errno, "shm mmap");
  Mapping m(p, region_bytes);
  const auto* hdr = reinterpret_cast<const RegionHeader*>(m.data());
  if (hdr->magic != kRegionMagic || hdr->version != kProtocolVersion || hdr->ring_bytes != ring_bytes ||
      hdr->region_bytes != region_bytes)
    return Status(Code::kProtocolError, "shm: region header does not match the server's hello");
  return m;
}

}  // namespace conduit::transport::shm
