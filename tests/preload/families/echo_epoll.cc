// Family: an epoll echo server and client pair, the shape of most event-driven programs.
// The server (a child) accepts non-blocking (accept4), registers each connection
// edge-triggered with EPOLLIN|EPOLLOUT|EPOLLRDHUP, reads to EAGAIN and writes back what it
// can, keeping the rest until the next EPOLLOUT edge.  The client drives several connections
// at once through a level-triggered epoll instance, switching EPOLLOUT on and off with
// EPOLL_CTL_MOD as its send window opens and closes, and reads in small pieces so level
// triggering must report the same data again.  Every byte comes back in order.
#include <sys/epoll.h>

#include <algorithm>
#include <vector>

#include "family.h"

using namespace family;

namespace {

constexpr int kConns = 4;
constexpr size_t kBytesPerConn = 3 << 20;   // 3 MiB each way per connection
constexpr size_t kWindow = 256 << 10;       // the client sends at most this far ahead

uint8_t pattern(int conn, size_t off) { return static_cast<uint8_t>((off * 131 + off / 4093 + conn * 17) & 0xff); }

void server(int lfd) {
  set_nonblock(lfd, true);
  const int ep = epoll_create1(EPOLL_CLOEXEC);
  CHECK(ep >= 0);
  epoll_event ev{};
  ev.events = EPOLLIN;  // the listener level-triggered
  ev.data.fd = lfd;
  CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev) == 0);
  struct Conn {
    std::vector<uint8_t> out;
    bool eof = false;
  };
  std::vector<Conn> conns(1024);
  int accepted = 0, closed = 0;
  std::vector<uint8_t> buf(100000);
  while (closed < kConns) {
    epoll_event got[8];
    const int n = epoll_wait(ep, got, 8, 10000);
    CHECK(n > 0);  // never idle for 10 s while a client is being served
    for (int i = 0; i < n; ++i) {
      const int fd = got[i].data.fd;
      if (fd == lfd) {
        for (;;) {
          const int c = accept4(lfd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
          if (c < 0 && errno == EAGAIN) break;
          CHECK(c >= 0 && c < 1024);
          conns[c] = Conn{};
          epoll_event cev{};
          cev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
          cev.data.fd = c;
          CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, c, &cev) == 0);
          ++accepted;
        }
        continue;
      }
      Conn& c = conns[fd];
      // Edge-triggered: read until EAGAIN (or EOF), then write until EAGAIN or done.
      while (!c.eof) {
        const ssize_t r = read(fd, buf.data(), buf.size());
        if (r < 0 && errno == EAGAIN) break;
        CHECK(r >= 0);
        if (r == 0) c.eof = true;
        c.out.insert(c.out.end(), buf.begin(), buf.begin() + r);
      }
      while (!c.out.empty()) {
        const ssize_t w = write(fd, c.out.data(), c.out.size());
        if (w < 0 && errno == EAGAIN) break;
        CHECK(w > 0);
        c.out.erase(c.out.begin(), c.out.begin() + w);
      }
      if (c.eof && c.out.empty()) {
        expect_fast(fd, "accepted");  // (fast once the client's COMMIT is read: by now)
        CHECK(epoll_ctl(ep, EPOLL_CTL_DEL, fd, nullptr) == 0);
        close(fd);
        ++closed;
      }
    }
  }
  say("server: accepted %d, closed %d", accepted, closed);
  close(ep);
}

}  // namespace

int main() {
  int port = 0;
  const pid_t srv = fork_server(server, &port);
  const int ep = epoll_create1(0);
  CHECK(ep >= 0);
  struct Client {
    int fd = -1;
    size_t sent = 0, received = 0;
    bool want_out = true, shut = false;
  };
  Client cl[kConns];
  for (int i = 0; i < kConns; ++i) {
    cl[i].fd = connect_to(port);
    expect_fast(cl[i].fd, "client");
    set_nonblock(cl[i].fd, true);
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLOUT;
    ev.data.u32 = static_cast<uint32_t>(i);
    CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, cl[i].fd, &ev) == 0);
  }
  int done = 0;
  size_t mods = 0;
  std::vector<uint8_t> chunk(70000);
  while (done < kConns) {
    epoll_event got[kConns];
    const int n = epoll_wait(ep, got, kConns, 10000);
    CHECK(n > 0);
    for (int k = 0; k < n; ++k) {
      const int i = static_cast<int>(got[k].data.u32);
      Client& c = cl[i];
      if (got[k].events & EPOLLIN) {
        // One small read per report: level triggering reports the rest next time.
        uint8_t b[1500];
        const ssize_t r = read(c.fd, b, sizeof b);
        if (r < 0) CHECK(errno == EAGAIN);
        if (r == 0) {
          CHECK(c.received == kBytesPerConn);
          CHECK(epoll_ctl(ep, EPOLL_CTL_DEL, c.fd, nullptr) == 0);
          close(c.fd);
          ++done;
          continue;
        }
        for (ssize_t j = 0; j < r; ++j) CHECK(b[j] == pattern(i, c.received + static_cast<size_t>(j)));
        if (r > 0) c.received += static_cast<size_t>(r);
      }
      if ((got[k].events & EPOLLOUT) && c.sent < kBytesPerConn && c.sent - c.received < kWindow) {
        const size_t room = std::min({chunk.size(), kBytesPerConn - c.sent, kWindow - (c.sent - c.received)});
        for (size_t j = 0; j < room; ++j) chunk[j] = pattern(i, c.sent + j);
        const ssize_t w = write(c.fd, chunk.data(), room);
        if (w < 0) CHECK(errno == EAGAIN);
        else c.sent += static_cast<size_t>(w);
      }
      if (c.sent == kBytesPerConn && !c.shut) {
        CHECK(shutdown(c.fd, SHUT_WR) == 0);
        c.shut = true;
      }
      // EPOLLOUT only while there is something to send and room in the window.
      const bool want = c.sent < kBytesPerConn && c.sent - c.received < kWindow;
      if (want != c.want_out) {
        epoll_event ev{};
        ev.events = EPOLLIN | (want ? EPOLLOUT : 0u);
        ev.data.u32 = static_cast<uint32_t>(i);
        CHECK(epoll_ctl(ep, EPOLL_CTL_MOD, c.fd, &ev) == 0);
        c.want_out = want;
        ++mods;
      }
    }
  }
  close(ep);
  wait_child(srv, "server");  // it reports first
  for (int i = 0; i < kConns; ++i)
    say("client %d: sent %zu, echoed back %zu in order", i, cl[i].sent, cl[i].received);
  say("client: window toggled by EPOLL_CTL_MOD %s", mods > 0 ? "yes" : "no");
  return 0;
}
