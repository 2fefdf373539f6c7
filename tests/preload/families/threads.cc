// Family: threads -- server and client in one process on two threads, blocking calls on both
// (each thread's wait keeps the other's connection moving), then four client threads at once.
#include <pthread.h>

#include <atomic>
#include <thread>
#include <vector>

#include "family.h"

using namespace family;

int main() {
  int port = 0;
  int lfd = listen_any(&port);
  constexpr int kClients = 5;
  std::thread server([&] {
    std::vector<std::thread> handlers;
    for (int i = 0; i < kClients; ++i) {
      int c = accept(lfd, nullptr, nullptr);
      CHECK(c >= 0);
      handlers.emplace_back([c] {
        char buf[4096];
        for (;;) {
          ssize_t r = read(c, buf, sizeof buf);
          if (r <= 0) break;
          write_full(c, buf, static_cast<size_t>(r));
        }
        close(c);
      });
    }
    for (auto& h : handlers) h.join();
  });
  int fd = connect_to(port);
  expect_fast(fd, "first client");
  for (int i = 0; i < 1000; ++i) {
    char out[32], in[32] = {};
    const int n = std::snprintf(out, sizeof out, "message %d", i);
    write_full(fd, out, static_cast<size_t>(n));
    CHECK(read_full(fd, in, static_cast<size_t>(n)) == static_cast<size_t>(n));
    CHECK(std::memcmp(in, out, static_cast<size_t>(n)) == 0);
  }
  say("one client thread: 1000 round trips");
  close(fd);
  std::atomic<int> ok{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < kClients - 1; ++t)
    clients.emplace_back([&, t] {
      int c = connect_to(port);
      expect_fast(c, "client thread");
      for (int i = 0; i < 300; ++i) {
        char out[32], in[32] = {};
        const int n = std::snprintf(out, sizeof out, "t%d m%d", t, i);
        write_full(c, out, static_cast<size_t>(n));
        CHECK(read_full(c, in, static_cast<size_t>(n)) == static_cast<size_t>(n));
        CHECK(std::memcmp(in, out, static_cast<size_t>(n)) == 0);
      }
      close(c);
      ++ok;
    });
  for (auto& c : clients) c.join();
  say("%d client threads: 300 round trips each", ok.load());
  server.join();
  close(lfd);
  return 0;
}
