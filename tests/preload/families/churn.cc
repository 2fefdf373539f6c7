// Family: 1,000 connections opened, used and closed one after the other -- no fd, mapping or
// memory left behind at either end (issue 12, section 2).  Each end counts its open fds and
// memory mappings before and after, and bounds its resident-memory growth.
#include <dirent.h>

#include "family.h"

using namespace family;

namespace {

constexpr int kConns = 1000;

int count_entries(const char* dir) {
  DIR* d = opendir(dir);
  CHECK(d != nullptr);
  int n = 0;
  while (dirent* e = readdir(d))
    if (e->d_name[0] != '.') ++n;
  closedir(d);
  return n - 1;  // the DIR's own fd (for /proc/self/fd)
}
int count_maps() {
  FILE* f = std::fopen("/proc/self/maps", "re");
  CHECK(f != nullptr);
  int n = 0;
  for (int c; (c = std::fgetc(f)) != EOF;)
    if (c == '\n') ++n;
  std::fclose(f);
  return n;
}
long rss_kb() {
  FILE* f = std::fopen("/proc/self/status", "re");
  CHECK(f != nullptr);
  char line[256];
  long kb = -1;
  while (std::fgets(line, sizeof line, f))
    if (std::sscanf(line, "VmRSS: %ld kB", &kb) == 1) break;
  std::fclose(f);
  return kb;
}

struct Usage {
  int fds, maps;
  long rss;
};
Usage usage() { return {count_entries("/proc/self/fd"), count_maps(), rss_kb()}; }

// After the first connection (the engine, the rendezvous and the pools exist from then on),
// nothing may grow with the number of connections.
void report(const char* who, const Usage& a, const Usage& b) {
  say("%s: fds after %d connections as after the first: %s", who, kConns, a.fds == b.fds ? "yes" : "no");
  if (a.fds != b.fds) std::fprintf(stderr, "%s: fds %d -> %d\n", who, a.fds, b.fds);
  // A few mappings may come and go with the allocator; per-connection leaks would be ~1000.
  say("%s: mappings bounded: %s", who, b.maps - a.maps < 20 ? "yes" : "no");
  if (b.maps - a.maps >= 20) std::fprintf(stderr, "%s: mappings %d -> %d\n", who, a.maps, b.maps);
  say("%s: resident memory bounded: %s", who, b.rss - a.rss < 16 * 1024 ? "yes" : "no");
  if (b.rss - a.rss >= 16 * 1024) std::fprintf(stderr, "%s: rss %ld -> %ld kB\n", who, a.rss, b.rss);
}

void one(int port, int i) {
  const int fd = connect_to(port);
  if (i == 0 || i == kConns - 1) expect_fast(fd, "churn");
  const uint32_t v = static_cast<uint32_t>(i);
  write_full(fd, &v, sizeof v);
  uint32_t back = 0;
  CHECK(read_full(fd, &back, sizeof back) == sizeof back);
  CHECK(back == v);
  close(fd);
}

}  // namespace

int main() {
  int port = 0;
  // The server measures after the first connection is gone, while the client waits (so no
  // second connection is half open at that moment).
  int sync[2];
  CHECK(pipe(sync) == 0);
  const pid_t srv = fork_server(
      [&](int lfd) {
        close(sync[0]);
        Usage first{};
        for (int i = 0; i < kConns; ++i) {
          const int c = accept(lfd, nullptr, nullptr);
          CHECK(c >= 0);
          uint32_t v = 0;
          CHECK(read_full(c, &v, sizeof v) == sizeof v);
          if (i == 0 || i == kConns - 1) expect_fast(c, "churn server");  // fast once COMMIT is read
          write_full(c, &v, sizeof v);
          char b;
          CHECK(read(c, &b, 1) == 0);  // the client's close
          close(c);
          if (i == 0) {
            first = usage();
            CHECK(write(sync[1], "g", 1) == 1);
          }
        }
        report("server", first, usage());
      },
      &port);
  close(sync[1]);
  one(port, 0);
  char g;
  CHECK(read(sync[0], &g, 1) == 1);
  close(sync[0]);
  const Usage first = usage();
  for (int i = 1; i < kConns; ++i) one(port, i);
  wait_child(srv, "server");  // it reports first
  report("client", first, usage());
  return 0;
}
