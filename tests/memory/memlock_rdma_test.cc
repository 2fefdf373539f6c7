// RLIMIT_MEMLOCK: registered memory is locked memory.  A pool whose region does not fit under
// the limit must fail with an error that names the limit and the fix -- not hang, not fall
// back to unregistered memory.  Needs a device (label `rdma`): the limit is enforced by the
// kernel's ib_umem_get when ibv_reg_mr pins pages.
//
// The guest runs everything as root, and CAP_IPC_LOCK exempts a process from the limit, so the
// child drops that capability from its effective set before lowering the limit; it then opens
// its own device context (never the parent's) and tries to register.
#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "conduit/memory/pool.h"
#include "verbs/child_process.h"
#include "verbs/rdma_env.h"
#include "verbs_registrar.h"

namespace conduit::memory {
namespace {

using conduit::testing::ChildProcess;

bool drop_ipc_lock() {
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (syscall(SYS_capget, &hdr, data) != 0) return false;
  data[CAP_IPC_LOCK / 32].effective &= ~(1u << (CAP_IPC_LOCK % 32));
  return syscall(SYS_capset, &hdr, data) == 0;
}

void put_line(int fd, const std::string& s) {
  const std::string line = s + "\n";
  (void)!write(fd, line.data(), line.size());
}

TEST(Memlock, ARegistrationAboveTheLimitFailsNamingTheLimitAndTheFix) {
  CONDUIT_OPEN_DEVICE_OR_SKIP(probe);  // there is a device; the child opens its own context
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  ChildProcess child([&](int) {
    close(fds[0]);
    if (!drop_ipc_lock()) return 10;
    const rlimit low{64 << 10, 64 << 10};
    if (setrlimit(RLIMIT_MEMLOCK, &low) != 0) return 11;
    auto ctx = verbs::Context::open(verbs::testing::device_name());
    if (!ctx.ok()) return 12;
    auto pd = verbs::ProtectionDomain::create(*ctx);
    if (!pd.ok()) return 13;
    PoolOptions o;
    o.hugepages = false;
    o.name = "memlock";
    auto pool = BlockPool::create(o);
    if (!pool.ok() || !(*pool)->add_registrar(std::make_shared<testing::VerbsRegistrar>(*pd)).ok()) return 14;
    // The first allocation maps a 2 MiB region and registers it: 512 pages over a 16-page limit.
    auto s = (*pool)->allocate(4096);
    put_line(fds[1], s.ok() ? "OK" : s.status().to_string());
    put_line(fds[1], s.ok() ? "" : std::string(code_name(s.status().code())));
    put_line(fds[1], std::to_string((*pool)->stats().regions));
    // The verbs layer's own registration says it too.
    std::vector<uint8_t> mem(1 << 20);
    auto mr = verbs::MemoryRegion::register_memory(*pd, mem.data(), mem.size(), verbs::kLocalOnly);
    put_line(fds[1], mr.ok() ? "OK" : mr.status().to_string());
    return 0;
  });
  close(fds[1]);
  ASSERT_TRUE(child.started());
  ASSERT_EQ(child.wait(), 0) << "the child could not set up the test (10: capset, 11: setrlimit, 12-14: device/pool)";
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  std::vector<std::string> lines;
  for (size_t at = 0, nl; (nl = out.find('\n', at)) != std::string::npos; at = nl + 1)
    lines.push_back(out.substr(at, nl - at));
  ASSERT_EQ(lines.size(), 4u) << out;
  std::printf("pool:  %s\nverbs: %s\n", lines[0].c_str(), lines[3].c_str());

  const std::string& pool_err = lines[0];
  EXPECT_NE(pool_err, "OK") << "a 2 MiB registration succeeded under a 64 KiB RLIMIT_MEMLOCK";
  EXPECT_EQ(lines[1], code_name(Code::kResourceExhausted)) << pool_err;
  EXPECT_NE(pool_err.find("RLIMIT_MEMLOCK is 64 KiB"), std::string::npos) << "names the limit: " << pool_err;
  EXPECT_NE(pool_err.find("ulimit -l unlimited"), std::string::npos) << "names the fix: " << pool_err;
  EXPECT_NE(pool_err.find("LimitMEMLOCK"), std::string::npos) << "names the systemd fix: " << pool_err;
  EXPECT_NE(pool_err.find("ibv_reg_mr"), std::string::npos) << "keeps the failing call: " << pool_err;
  EXPECT_EQ(lines[2], "0") << "the region that could not be registered is unmapped";
  EXPECT_NE(lines[3], "OK");
  EXPECT_NE(lines[3].find("ulimit -l"), std::string::npos) << lines[3];
}

}  // namespace
}  // namespace conduit::memory
