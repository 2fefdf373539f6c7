#include "shm/shm_region.h"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>
#include <string>
#include <string_view>

#include "conduit/base/log.h"

namespace conduit::transport::shm {

void Mapping::reset() {
  if (p_ != nullptr && ::munmap(p_, n_) != 0) CONDUIT_LOG(kWarn) << "shm munmap: " << std::strerror(errno);
  p_ = nullptr;
  n_ = 0;
}

namespace {

// The mirrored layout of shm_region.h: reserve the address range, then map the file into
// it piece by piece (MAP_FIXED replaces the reservation; on failure the Mapping unmaps
// whatever was mapped).
Result<Mapping> map_mirrored(int memfd, uint64_t ring_bytes) {
  const uint64_t total = mirrored_bytes_for(ring_bytes);
  void* base = ::mmap(nullptr, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) return Status::FromErrnoAuto(errno, "shm reserve address space");
  Mapping m(base, total);
  struct Piece {
    uint64_t at, file_offset, len;
  };
  const Piece pieces[] = {
      {0, 0, kRegionHeaderBytes + ring_bytes},                                        // header + ring 0
      {kRegionHeaderBytes + ring_bytes, kRegionHeaderBytes, ring_bytes},              // ring 0 again
      {kRegionHeaderBytes + 2 * ring_bytes, kRegionHeaderBytes + ring_bytes, ring_bytes},  // ring 1
      {kRegionHeaderBytes + 3 * ring_bytes, kRegionHeaderBytes + ring_bytes, ring_bytes},  // ring 1 again
  };
  for (const Piece& p : pieces) {
    void* want = m.data() + p.at;
    void* got = ::mmap(want, p.len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, memfd,
                       static_cast<off_t>(p.file_offset));
    if (got == MAP_FAILED) return Status::FromErrnoAuto(errno, "shm mmap");
  }
  return m;
}

}  // namespace

Result<Mapping> create_region(uint64_t ring_bytes, UniqueFd* memfd_out) {
  const uint64_t size = region_bytes_for(ring_bytes);
  UniqueFd mfd(::memfd_create("conduit-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!mfd) return Status::FromErrnoAuto(errno, "shm memfd_create");
  if (::ftruncate(mfd.get(), static_cast<off_t>(size)) != 0) return Status::FromErrnoAuto(errno, "shm ftruncate");
  // The client checks these seals: without them we could shrink the file under its mapping
  // and kill it with SIGBUS.
  if (::fcntl(mfd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
    return Status::FromErrnoAuto(errno, "shm seal memfd");
  CONDUIT_ASSIGN_OR_RETURN(Mapping m, map_mirrored(mfd.get(), ring_bytes));
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
  if (!S_ISREG(st.st_mode)) return Status(Code::kProtocolError, "shm: the region descriptor is not a memfd");
  if (static_cast<uint64_t>(st.st_size) != region_bytes)
    return Status(Code::kProtocolError, "shm: region is " + std::to_string(st.st_size) + " bytes, server announced " +
                                            std::to_string(region_bytes));
  const int seals = ::fcntl(memfd, F_GET_SEALS);
  if (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW))
    return Status(Code::kProtocolError, "shm: region memfd is not sealed against resizing");
  if (region_bytes != region_bytes_for(ring_bytes))
    return Status(Code::kProtocolError, "shm: region size does not match its ring size");
  CONDUIT_ASSIGN_OR_RETURN(Mapping m, map_mirrored(memfd, ring_bytes));
  const auto* hdr = reinterpret_cast<const RegionHeader*>(m.data());
  if (hdr->magic != kRegionMagic || hdr->version != kProtocolVersion || hdr->ring_bytes != ring_bytes ||
      hdr->region_bytes != region_bytes)
    return Status(Code::kProtocolError, "shm: region header does not match the server's hello");
  return m;
}

Status check_eventfd(int fd, const char* what) {
  auto refuse = [what](const std::string& why) {
    return Status(Code::kProtocolError, std::string("shm: the ") + what + " descriptor " + why);
  };
  struct stat st{};
  if (::fstat(fd, &st) != 0) return Status::FromErrnoAuto(errno, std::string("shm fstat ") + what);
  // A fresh eventfd of our own tells what the kernel reports for one (all anonymous inodes
  // share one inode of the anon_inode filesystem).
  UniqueFd ref(::eventfd(0, EFD_CLOEXEC));
  struct stat rs{};
  if (!ref || ::fstat(ref.get(), &rs) != 0) return Status::FromErrnoAuto(errno, "shm eventfd");
  if ((st.st_mode & S_IFMT) != (rs.st_mode & S_IFMT) || st.st_dev != rs.st_dev || st.st_ino != rs.st_ino)
    return refuse(S_ISFIFO(st.st_mode)   ? "is a pipe, not an eventfd"
                  : S_ISSOCK(st.st_mode) ? "is a socket, not an eventfd"
                  : S_ISREG(st.st_mode)  ? "is a file, not an eventfd"
                                         : "is not an eventfd");
  char link[64];
  const std::string proc = "/proc/self/fd/" + std::to_string(fd);
  const ssize_t n = ::readlink(proc.c_str(), link, sizeof link - 1);
  if (n > 0 && std::string_view(link, static_cast<size_t>(n)) != "anon_inode:[eventfd]")
    return refuse("is " + std::string(link, static_cast<size_t>(n)) + ", not an eventfd");
  const int fl = ::fcntl(fd, F_GETFL);
  if (fl < 0) return Status::FromErrnoAuto(errno, std::string("shm fcntl ") + what);
  if ((fl & O_NONBLOCK) == 0) return refuse("is blocking (our doorbell writes could hang)");
  if ((fl & O_ACCMODE) != O_RDWR) return refuse("is not open for reading and writing");
  return {};
}

}  // namespace conduit::transport::shm
