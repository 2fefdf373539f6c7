// What conduit-kv's limits see of the transports (issue 9, items 5 and 6): the shared
// memory an shm client's rings pin counts in used_memory (INFO) and against maxmemory;
// handshakes in progress count against maxclients, like connected clients.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include "kv_test_util.h"

namespace conduit::kv {
namespace {

using testing::fmt;
using testing::ServerThread;

uint64_t info_u64(const std::string& info, const std::string& key) {
  const size_t at = info.find("\n" + key + ":");
  if (at == std::string::npos) return ~uint64_t{0};
  return std::stoull(info.substr(at + key.size() + 2));
}

std::string shm_path(const std::string& url) { return url.substr(std::strlen("shm://"), url.find('?') - 6); }

// A raw UNIX connection to the shm listener that never sends its hello.
int silent_shm_client(const std::string& path) {
  const int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
  if (::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(s);
    return -1;
  }
  return s;
}

// Polls fn() (true = done) for up to `ms`.
bool eventually(const std::function<bool()>& fn, int ms = 10000) {
  for (int i = 0; i < ms / 10; ++i) {
    if (fn()) return true;
    ::usleep(10'000);
  }
  return fn();
}

TEST(TransportLimits, ShmRingsCountInUsedMemoryAndAgainstMaxmemory) {
  if (!testing::shm_available()) GTEST_SKIP() << "shm transport not available";
  ServerOptions o;
  o.port = 0;
  o.listen.push_back("shm://" + testing::unique_name("kv-rings") + "?max_ring=64M");
  ServerThread s(o);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  const std::string url = s.url("shm");
  ASSERT_FALSE(url.empty());
  const uint64_t base = info_u64(s.info("memory"), "used_memory");
  EXPECT_EQ(info_u64(s.info("memory"), "mem_transport_pinned"), 0u);

  // 2 x 32 MiB of rings: far more than the server allocates on its own for one client.
  auto big = Client::connect(url + "?ring=32M");
  ASSERT_TRUE(big.ok()) << big.status().to_string();
  EXPECT_EQ(fmt((*big)->command({"PING"})), "+PONG");
  const std::string mem = s.info("memory");
  const uint64_t region = 4096 + (uint64_t{64} << 20);
  EXPECT_EQ(info_u64(mem, "mem_transport_pinned"), region) << mem;
  EXPECT_GE(info_u64(mem, "used_memory"), base + region) << mem;

  // maxmemory applies to it: a limit the heap alone is far below refuses writes now.
  auto tcp = Client::connect(s.url("tcp"));
  ASSERT_TRUE(tcp.ok());
  const std::string limit = std::to_string(base + (uint64_t{16} << 20));
  EXPECT_EQ(fmt((*tcp)->command({"CONFIG", "SET", "maxmemory", limit})), "+OK");
  auto r = (*tcp)->command({"SET", "k", "v"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(fmt(*r).rfind("-OOM", 0), 0u) << fmt(*r);

  // The client leaves: its rings are uncounted, and writes are accepted again.
  big->reset();
  ASSERT_TRUE(eventually([&] { return info_u64(s.info("memory"), "mem_transport_pinned") == 0; }));
  EXPECT_EQ(fmt((*tcp)->command({"SET", "k", "v"})), "+OK");
}

TEST(TransportLimits, ShmHandshakesInProgressCountAgainstMaxclients) {
  if (!testing::shm_available()) GTEST_SKIP() << "shm transport not available";
  ServerOptions o;
  o.port = 0;
  o.maxclients = 4;
  o.listen.push_back("shm://" + testing::unique_name("kv-hs") + "?connect_timeout_ms=60000");
  ServerThread s(o);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  const std::string path = shm_path(s.url("shm"));
  auto first = Client::connect(s.url("tcp"));
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(fmt((*first)->command({"PING"})), "+PONG");

  // Three handshakes that never finish: with the one client, the server holds four.
  std::vector<int> silent;
  for (int i = 0; i < 3; ++i) {
    const int fd = silent_shm_client(path);
    ASSERT_GE(fd, 0);
    silent.push_back(fd);
  }
  ASSERT_TRUE(eventually([&] { return info_u64(s.info("clients"), "handshakes_in_progress") == 3; }))
      << s.info("clients");

  // A fifth connection over tcp is refused like any client past maxclients ...
  auto c = Client::connect(s.url("tcp"));
  ASSERT_TRUE(c.ok());
  auto r = (*c)->raw("", 1);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(fmt((*r)[0]), "-ERR max number of clients reached");
  // ... and over shm before its handshake starts: a reject hello at once.
  const int extra = silent_shm_client(path);
  ASSERT_GE(extra, 0);
  pollfd p{extra, POLLIN, 0};
  ASSERT_EQ(::poll(&p, 1, 10000), 1) << "the refused shm client got no answer";
  ::close(extra);
  auto shm_client = Client::connect(s.url("shm"));
  ASSERT_FALSE(shm_client.ok());
  EXPECT_EQ(shm_client.status().code(), Code::kResourceExhausted) << shm_client.status().to_string();

  // Once the handshakes are gone, clients are admitted again.
  for (int fd : silent) ::close(fd);
  ASSERT_TRUE(eventually([&] { return info_u64(s.info("clients"), "handshakes_in_progress") == 0; }));
  auto later = Client::connect(s.url("shm"));
  ASSERT_TRUE(later.ok()) << later.status().to_string();
  EXPECT_EQ(fmt((*later)->command({"PING"})), "+PONG");
}

}  // namespace
}  // namespace conduit::kv
