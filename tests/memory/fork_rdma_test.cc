// What fork() does to registered pool memory, proven on a device (label `rdma`; runs in the
// Soft-RoCE guest, Linux 6.1).  docs/MEMORY.md ("fork") states the rules these tests check.
//
// The facts: since Linux 5.9 (hugetlb 5.11; rdma-core reports it as IBV_FORK_UNNEEDED from
// 5.13) fork() copies, for the child, every page an RDMA registration pins, instead of
// sharing it copy-on-write.  The parent keeps the pinned page -- the one the NIC reads and
// writes -- so neither the parent nor the NIC can lose sight of each other whatever either
// process writes afterwards; the child gets a private snapshot.  On older kernels the first
// write after fork() by the parent moved the parent to a fresh page while the NIC kept the
// old one: the parent's sends went out stale and received data landed in the child.
//
// What is not copied is the verbs state: the child inherits the parent's uverbs file
// descriptor, and verbs calls it makes act on the parent's objects (ChildVerbsCalls...).
#include <infiniband/verbs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <random>
#include <vector>

#include "conduit/memory/pool.h"
#include "verbs/child_process.h"
#include "verbs/rdma_env.h"
#include "verbs_registrar.h"

namespace conduit::memory {
namespace {

using conduit::testing::ChildProcess;
using verbs::Completion;
using verbs::SendWr;
using verbs::testing::LoopbackPair;

constexpr size_t kLen = 64 << 10;

void fill(uint8_t* p, size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(rng());
}
bool matches(const uint8_t* p, size_t n, uint32_t seed) {
  std::vector<uint8_t> want(n);
  fill(want.data(), n, seed);
  return std::memcmp(p, want.data(), n) == 0;
}
bool all(const uint8_t* p, size_t n, uint8_t v) {
  for (size_t i = 0; i < n; ++i)
    if (p[i] != v) return false;
  return true;
}

// Blocking one-byte messages over a pipe, for the parent/child handshakes.
bool say(int fd, char c) { return write(fd, &c, 1) == 1; }
bool hear(int fd, char want) {
  char c = 0;
  return read(fd, &c, 1) == 1 && c == want;
}

class ForkTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    CONDUIT_OPEN_DEVICE_OR_SKIP(ctx);
    ASSERT_OK_AND_ASSIGN(pair_, LoopbackPair::create(ctx));
    PoolOptions o;
    o.hugepages = GetParam();  // true: MAP_HUGETLB when reserved, else THP-advised pages
    o.cap_bytes = 64 << 20;
    o.name = "fork";
    ASSERT_OK_AND_ASSIGN(pool_, BlockPool::create(o));
    registrar_ = std::make_shared<testing::VerbsRegistrar>(
        pair_->pd, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
    ASSERT_OK_AND_ASSIGN(unsigned d, pool_->add_registrar(registrar_));
    ASSERT_EQ(d, 0u);
    ASSERT_OK_AND_ASSIGN(src_, pool_->allocate(kLen));
    ASSERT_OK_AND_ASSIGN(dst_, pool_->allocate(kLen));
    ASSERT_TRUE(src_.registered(0) && dst_.registered(0));
    const PoolStats st = pool_->stats();
    std::printf("pool: %zu region(s), %zu on MAP_HUGETLB pages; ibv_is_fork_initialized() = %d\n", st.regions,
                st.hugepage_regions, static_cast<int>(ibv_is_fork_initialized()));
    std::fflush(stdout);  // else a child's exit flushes its copy of the buffer too
  }
  void TearDown() override {
    src_ = Slice();
    dst_ = Slice();
  }

  // RDMA WRITE of `len` bytes from local memory (addr, lkey) to (raddr, rkey) over QP a;
  // waits for its completion.
  Status write(uint64_t addr, uint32_t lkey, uint64_t raddr, uint32_t rkey, size_t len = kLen) {
    ibv_sge sge{addr, static_cast<uint32_t>(len), lkey};
    SendWr wr = SendWr::write(&sge, 1, raddr, rkey).id(1).signaled();
    CONDUIT_RETURN_IF_ERROR(pair_->a->post_send(wr));
    CONDUIT_ASSIGN_OR_RETURN(auto wcs, verbs::testing::wait_completions(*pair_->cq_a, 1));
    return wcs[0].as_status();
  }
  Status write(const Slice& from, const Slice& to) {
    return write(from.address(), from.keys(0).lkey, to.address(), to.keys(0).rkey);
  }
  // Pool slice -> LoopbackPair's separately registered buffer b (the NIC's view of `from`).
  Status write_to_b(const Slice& from) {
    return write(from.address(), from.keys(0).lkey, pair_->buf_b->mr().addr(), pair_->buf_b->mr().rkey());
  }
  // LoopbackPair's buffer a -> a pool slice (the NIC writing into pool memory).
  Status write_from_a(const Slice& to) {
    return write(pair_->buf_a->mr().addr(), pair_->buf_a->mr().lkey(), to.address(), to.keys(0).rkey);
  }

  std::unique_ptr<LoopbackPair> pair_;
  std::shared_ptr<BlockPool> pool_;
  std::shared_ptr<testing::VerbsRegistrar> registrar_;
  Slice src_, dst_;
};

TEST_P(ForkTest, TheKernelCopiesPinnedPagesSoForkSupportIsUnneeded) {
  // rdma-core asks the kernel (RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK); 6.1 says yes.  Should this
  // ever fail, the kernel shares pinned pages copy-on-write again, and the rules in
  // docs/MEMORY.md no longer hold: call ibv_fork_init() before registering anything.
  EXPECT_EQ(ibv_is_fork_initialized(), IBV_FORK_UNNEEDED);
}

TEST_P(ForkTest, AChildThatExecsLeavesTheParentsQueuePairAndMemoryWorking) {
  uint8_t* s = src_.writable_data();
  uint8_t* d = dst_.writable_data();
  fill(s, kLen, 1);
  ASSERT_OK(write(src_, dst_));
  ASSERT_TRUE(matches(d, kLen, 1));

  const pid_t pid = fork();
  ASSERT_GE(pid, 0) << std::strerror(errno);
  if (pid == 0) {
    execl("/bin/true", "true", static_cast<char*>(nullptr));
    _exit(127);
  }
  // While the child runs (or execs): the parent writes its pool memory -- on a kernel that
  // shared the pinned pages copy-on-write this write would move the parent off the page the
  // NIC uses -- and the QP carries it.
  fill(s, kLen, 2);
  ASSERT_OK(write(src_, dst_));
  EXPECT_TRUE(matches(d, kLen, 2)) << "the NIC read the parent's new bytes and wrote where the parent reads";
  int st = 0;
  ASSERT_EQ(waitpid(pid, &st, 0), pid);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "child status " << st;

  fill(s, kLen, 3);
  ASSERT_OK(write(src_, dst_));
  EXPECT_TRUE(matches(d, kLen, 3)) << "after the child is gone";
  EXPECT_EQ(pair_->a->state(), verbs::QpState::kRts);
  // A region registered after the fork (a new size class) works too.
  ASSERT_OK_AND_ASSIGN(Slice big, pool_->allocate(1 << 20));
  fill(s, kLen, 4);
  ASSERT_OK(write(src_.address(), src_.keys(0).lkey, big.address(), big.keys(0).rkey));
  EXPECT_TRUE(matches(big.data(), kLen, 4));
}

TEST_P(ForkTest, AChildThatDoesNotExecGetsAPrivateCopyTheNicNeverSees) {
  uint8_t* s = src_.writable_data();
  uint8_t* d = dst_.writable_data();
  fill(s, kLen, 1);
  fill(d, kLen, 2);
  int to_child[2], to_parent[2];
  ASSERT_EQ(pipe(to_child), 0);
  ASSERT_EQ(pipe(to_parent), 0);
  // The child touches nothing but its copy of the pool memory and the pipes, and leaves with
  // _exit (ChildProcess): no destructor, no verbs call (see ChildVerbsCalls... below).
  ChildProcess child([&](int) {
    if (!matches(s, kLen, 1) || !matches(d, kLen, 2)) {
      std::fprintf(stderr, "child: its copy does not hold the parent's bytes at fork\n");
      return 1;
    }
    std::memset(s, 0xc1, kLen);
    std::memset(d, 0xc1, kLen);
    if (!all(s, kLen, 0xc1) || !all(d, kLen, 0xc1)) return 2;
    if (!say(to_parent[1], 'w') || !hear(to_child[0], 'c')) return 3;
    // The parent has RDMA-written into its dst since: none of it reached this copy.
    if (!all(s, kLen, 0xc1) || !all(d, kLen, 0xc1)) {
      std::fprintf(stderr, "child: its copy changed under it (the NIC wrote into the child)\n");
      return 4;
    }
    return 0;
  });
  ASSERT_TRUE(child.started());
  ASSERT_TRUE(hear(to_parent[0], 'w')) << "the child died before writing (exit " << child.wait() << ")";

  EXPECT_TRUE(matches(s, kLen, 1)) << "the child's writes reached the parent's src";
  EXPECT_TRUE(matches(d, kLen, 2)) << "the child's writes reached the parent's dst";
  // The NIC's view of src is the parent's page, not the child's.
  ASSERT_OK(write_to_b(src_));
  EXPECT_TRUE(matches(pair_->buf_b->data(), kLen, 1)) << "the NIC read the child's copy";
  // The parent writes after the fork; the NIC sees it.
  fill(s, kLen, 3);
  ASSERT_OK(write_to_b(src_));
  EXPECT_TRUE(matches(pair_->buf_b->data(), kLen, 3));
  // The NIC writes into the parent's page.
  fill(pair_->buf_a->data(), kLen, 4);
  ASSERT_OK(write_from_a(dst_));
  EXPECT_TRUE(matches(d, kLen, 4)) << "the NIC's write did not reach the parent";

  ASSERT_TRUE(say(to_child[1], 'c'));
  EXPECT_EQ(child.wait(), 0);
  for (int fd : {to_child[0], to_child[1], to_parent[0], to_parent[1]}) close(fd);
  ASSERT_OK(write(src_, dst_));
  EXPECT_TRUE(matches(d, kLen, 3)) << "after the child is gone";
}

// What a child must not touch: the verbs objects.  It inherits the uverbs file descriptor,
// and the kernel serves its commands on the parent's objects -- here an ibv_dereg_mr in the
// child destroys the parent's registration.  That is why a child that does not exec must
// leave with _exit(), never run the destructors of a pool, cache, MR or QP it inherited.
TEST_P(ForkTest, ChildVerbsCallsActOnTheParentsObjects) {
  std::vector<uint8_t> mem(kLen, 0);
  ibv_mr* mr = ibv_reg_mr(pair_->pd->native_handle(), mem.data(), mem.size(),
                          IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  ASSERT_NE(mr, nullptr) << std::strerror(errno);
  fill(src_.writable_data(), kLen, 5);
  ASSERT_OK(write(src_.address(), src_.keys(0).lkey, reinterpret_cast<uintptr_t>(mr->addr), mr->rkey));
  ASSERT_TRUE(matches(mem.data(), kLen, 5)) << "the MR works before the fork";

  ChildProcess child([&](int) { return ibv_dereg_mr(mr) == 0 ? 0 : 10; });
  ASSERT_TRUE(child.started());
  const int rc = child.wait();
  std::printf("child's ibv_dereg_mr of the parent's MR: %s\n", rc == 0 ? "succeeded" : "failed");
  ASSERT_EQ(rc, 0) << "the child's ibv_dereg_mr failed: the kernel refused a command from the child";

  // The parent's MR is gone: an RDMA write to its rkey fails with a remote access error.
  const Status s = write(src_.address(), src_.keys(0).lkey, reinterpret_cast<uintptr_t>(mr->addr), mr->rkey);
  EXPECT_FALSE(s.ok()) << "the parent's MR survived the child's dereg";
  std::printf("parent's RDMA write to the MR afterwards: %s\n", s.to_string().c_str());
  // The kernel object is gone, so the parent's own deregistration fails; the provider then
  // keeps its struct (freed only on success), which is ours to free.
  if (ibv_dereg_mr(mr) != 0) std::free(mr);
}

INSTANTIATE_TEST_SUITE_P(Pages, ForkTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& p) { return p.param ? "HugepagesIfAvailable" : "PlainPages"; });

}  // namespace
}  // namespace conduit::memory
