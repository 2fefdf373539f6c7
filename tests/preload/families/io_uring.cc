// Family: io_uring next to the preload.  Its submissions go to the kernel directly, so the
// preload cannot serve them: an accelerated fd answers them from its placeholder (an
// unconnected socket: ENOTCONN, never a misrouted byte), and once the program has set up a
// ring, new connections stay on TCP.  Over plain TCP the same read works.  Raw system calls
// (no liburing headers needed).
#include <linux/io_uring.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include "family.h"

using namespace family;

// One IORING_OP_RECV on fd; returns the CQE's res (negative errno on failure).
static int ring_recv(int fd, void* buf, unsigned len) {
  io_uring_params p{};
  const int ring = static_cast<int>(syscall(SYS_io_uring_setup, 4, &p));
  if (ring < 0) return -ENOSYS;
  const size_t sq_sz = p.sq_off.array + p.sq_entries * sizeof(unsigned);
  const size_t cq_sz = p.cq_off.cqes + p.cq_entries * sizeof(io_uring_cqe);
  auto* sq = static_cast<uint8_t*>(mmap(nullptr, sq_sz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring, IORING_OFF_SQ_RING));
  auto* cq = static_cast<uint8_t*>(mmap(nullptr, cq_sz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring, IORING_OFF_CQ_RING));
  auto* sqes = static_cast<io_uring_sqe*>(
      mmap(nullptr, p.sq_entries * sizeof(io_uring_sqe), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ring, IORING_OFF_SQES));
  CHECK(sq != MAP_FAILED && cq != MAP_FAILED && sqes != MAP_FAILED);
  auto* tail = reinterpret_cast<unsigned*>(sq + p.sq_off.tail);
  auto* mask = reinterpret_cast<unsigned*>(sq + p.sq_off.ring_mask);
  auto* array = reinterpret_cast<unsigned*>(sq + p.sq_off.array);
  const unsigned idx = *tail & *mask;
  io_uring_sqe& e = sqes[idx];
  std::memset(&e, 0, sizeof e);
  e.opcode = IORING_OP_RECV;
  e.fd = fd;
  e.addr = reinterpret_cast<uint64_t>(buf);
  e.len = len;
  array[idx] = idx;
  __atomic_store_n(tail, *tail + 1, __ATOMIC_RELEASE);
  const long r = syscall(SYS_io_uring_enter, ring, 1, 1, IORING_ENTER_GETEVENTS, nullptr, 0);
  CHECK(r >= 0);
  auto* head = reinterpret_cast<unsigned*>(cq + p.cq_off.head);
  auto* cqes = reinterpret_cast<io_uring_cqe*>(cq + p.cq_off.cqes);
  const int res = cqes[*head & *reinterpret_cast<unsigned*>(cq + p.cq_off.ring_mask)].res;
  close(ring);
  return res;
}

int main() {
  int port = 0;
  pid_t srv = fork_server(
      [](int lfd) {
        for (int i = 0; i < 2; ++i) {
          int c = accept(lfd, nullptr, nullptr);
          CHECK(c >= 0);
          write_full(c, "u", 1);
          char b;
          (void)!read(c, &b, 1);  // until the client closes
          close(c);
        }
      },
      &port);
  int fd = connect_to(port);
  expect_fast(fd, "before io_uring");
  const bool fast = is_fast(fd);
  pollfd p{fd, POLLIN, 0};
  CHECK(poll(&p, 1, 5000) == 1);
  char b = 0;
  const int res = ring_recv(fd, &b, 1);
  if (res == -ENOSYS) {
    say("io_uring: not available here (skipped)");
  } else if (fast) {
    CHECK(res == -ENOTCONN);
    CHECK(read(fd, &b, 1) == 1 && b == 'u');  // the byte is still there for read()
  } else {
    CHECK(res == 1 && b == 'u');
  }
  say("io_uring recv on the connection: as documented");
  close(fd);
  int fd2 = connect_to(port);
  if (res != -ENOSYS) expect_tcp(fd2, "after io_uring setup");
  if (preloaded() && res != -ENOSYS) CHECK(describe(fd2).find("io_uring") != std::string::npos);
  CHECK(read(fd2, &b, 1) == 1);
  say("connection made after io_uring setup: works (plain TCP under the preload)");
  close(fd2);
  wait_child(srv);
  return 0;
}
