// conduit-ring: ring AllReduce and AllGather over tagged send/recv (rma::TaggedEndpoint),
// N processes on one host (issue 14, section 4) -- NCCL's ring algorithm on Conduit's
// NCCL-style messaging, checked element by element, timed as nccl-tests times it.
//
//   conduit-ring --ranks 4 --url rdma://192.0.2.1:0 --op allreduce --bytes 4M --iters 20
//
// (shm://NAME: rank r listens on NAME-r.)
// The launcher forks --ranks processes.  Rank r listens on --url (port 0: a port of its own,
// handed to rank r-1 over a pipe), connects to rank r+1 and accepts rank r-1: a ring of
// endpoints, each used in one direction (rank r sends to r+1 over the endpoint it connected,
// receives from r-1 over the one it accepted).  The tagged hellos cross over pipes too.
//
// AllReduce (float32 sum) of --bytes per rank: a reduce-scatter (N-1 steps: send chunk
// r-s to the right, receive chunk r-s-1 from the left into scratch, add it in) then an
// all-gather (N-1 steps: pass the reduced chunks on, received straight into place).
// AllGather: --bytes is the output size, each rank contributes bytes/N (N-1 steps).
// Every iteration starts from the same input (the copy is not timed); the last result is
// checked element by element against the exact sum.  Rank 0 prints nccl-tests' columns:
// size, count, type, time (us), algbw and busbw (GB/s; busbw = algbw * 2(N-1)/N for
// AllReduce, (N-1)/N for AllGather).  Exit status 0 only when every rank checked out.
#include <sys/wait.h>
#include <signal.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "conduit/base/log.h"
#include "conduit/reactor/event_loop.h"
#include "conduit/rma/endpoint.h"
#include "conduit/rma/tagged.h"

using namespace conduit;
using Clock = std::chrono::steady_clock;

namespace {

struct Args {
  int ranks = 2;
  std::string url = "tcp://127.0.0.1:0";
  std::string op = "allreduce";
  uint64_t bytes = 1 << 20;
  int iters = 10, warmup = 2;
  int timeout_s = 120;
};

// Pipes made before the fork, indexed by rank: url[r] carries rank r's listener URL to rank
// r-1; fwd[r] carries rank r's hello for link r (r -> r+1) to rank r+1, back[r] the answer.
struct Pipes {
  std::vector<std::array<int, 2>> url, fwd, back;
};

float input(int rank, size_t i) { return static_cast<float>((rank + 1) * static_cast<int>(i % 13 + 1)); }

bool write_all(int fd, const void* p, size_t n) { return ::write(fd, p, n) == static_cast<ssize_t>(n); }
bool read_all(int fd, void* p, size_t n) {
  auto* c = static_cast<uint8_t*>(p);
  while (n > 0) {
    const ssize_t k = ::read(fd, c, n);
    if (k <= 0) return false;
    c += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

class Rank {
 public:
  Rank(const Args& a, int rank, const Pipes& p) : a_(a), r_(rank), n_(a.ranks), p_(p) {}

  int run() {
    auto loop = reactor::EventLoop::create();
    if (!loop.ok()) return fail("event loop: " + loop.status().to_string());
    loop_ = std::move(*loop);
    if (int rc = connect_ring(); rc != 0) return rc;
    const bool reduce = a_.op == "allreduce";
    const size_t count = a_.bytes / sizeof(float);
    const size_t chunk = count / static_cast<size_t>(n_);  // elements per chunk
    // allreduce: data = count elements in place, scratch = one chunk; allgather: data = the
    // output (count), our contribution at chunk r.
    std::vector<float> data(count), init(count), scratch(std::max<size_t>(chunk, 1));
    for (size_t i = 0; i < count; ++i) init[i] = reduce ? input(r_, i) : 0.0f;
    if (!reduce)
      for (size_t j = 0; j < chunk; ++j) init[static_cast<size_t>(r_) * chunk + j] = input(r_, j);
    auto reg_data = left_->register_buffer(data.data(), data.size() * sizeof(float));
    auto reg_scr = left_->register_buffer(scratch.data(), scratch.size() * sizeof(float));
    if (!reg_data.ok() || !reg_scr.ok())
      return fail("register: " + (reg_data.ok() ? reg_scr.status() : reg_data.status()).to_string());
    double total_s = 0;
    for (int it = 0; it < a_.warmup + a_.iters; ++it) {
      data = init;
      const auto t0 = Clock::now();
      const bool ok = reduce ? allreduce(data, scratch, chunk, *reg_data, *reg_scr) : allgather(data, chunk, *reg_data);
      if (!ok) return 1;
      if (it >= a_.warmup) total_s += std::chrono::duration<double>(Clock::now() - t0).count();
    }
    if (int rc = check(data, chunk, reduce); rc != 0) return rc;
    if (!farewell()) return 1;
    if (r_ == 0) {
      const double us = total_s / a_.iters * 1e6;
      const double bytes = static_cast<double>(chunk * static_cast<size_t>(n_) * sizeof(float));
      const double algbw = bytes / (us * 1e-6) / 1e9;
      const double factor = reduce ? 2.0 * (n_ - 1) / n_ : static_cast<double>(n_ - 1) / n_;
      std::printf("%12.0f %12zu %8s %10.1f %8.3f %8.3f  (%d ranks, %s, %s)\n", bytes, chunk * static_cast<size_t>(n_),
                  "float", us, algbw, algbw * factor, n_, a_.op.c_str(), a_.url.c_str());
    }
    return 0;
  }

 private:
  int fail(const std::string& what) {
    std::fprintf(stderr, "conduit-ring: rank %d: %s\n", r_, what.c_str());
    return 1;
  }

  int connect_ring() {
    const int right = (r_ + 1) % n_, leftr = (r_ + n_ - 1) % n_;
    std::unique_ptr<rma::Endpoint> accepted;
    // shm:// names a socket: one per rank.
    std::string url = a_.url;
    if (url.rfind("shm://", 0) == 0) {
      const size_t q = url.find('?');
      url.insert(q == std::string::npos ? url.size() : q, "-" + std::to_string(r_));
    }
    auto l = rma::Listener::listen(*loop_, url, [&](std::unique_ptr<rma::Endpoint> ep) {
      if (!accepted) accepted = std::move(ep);  // the left neighbour; nobody else connects
    });
    if (!l.ok()) return fail("listen " + url + ": " + l.status().to_string());
    std::string mine = (*l)->url();
    mine.push_back('\n');
    if (!write_all(p_.url[r_][1], mine.data(), mine.size())) return fail("url pipe");
    std::string theirs;
    for (char c; read_all(p_.url[right][0], &c, 1) && c != '\n';) theirs.push_back(c);
    bool up = false;
    Status st;
    auto ep = rma::Endpoint::connect(*loop_, theirs, [&](rma::Endpoint&, Status s) {
      up = true;
      st = s;
    });
    if (!ep.ok()) return fail("connect " + theirs + ": " + ep.status().to_string());
    const auto deadline = Clock::now() + std::chrono::seconds(a_.timeout_s);
    while ((!up || !accepted) && Clock::now() < deadline) (void)loop_->run_once(50);
    if (!up || !st.ok()) return fail("connect " + theirs + ": " + (up ? st.to_string() : "timed out"));
    if (!accepted) return fail("no connection from rank " + std::to_string(leftr));
    listener_ = std::move(*l);
    auto rt = rma::TaggedEndpoint::create(std::move(*ep));
    auto lt = rma::TaggedEndpoint::create(std::move(accepted));
    if (!rt.ok() || !lt.ok()) return fail("tagged: " + (rt.ok() ? lt.status() : rt.status()).to_string());
    right_ = std::move(*rt);
    left_ = std::move(*lt);
    // Hellos: ours for link r forward and for link r-1 back, then the neighbours' (every
    // write fits a pipe's buffer, so writing first cannot deadlock).
    const auto hr = right_->hello(), hl = left_->hello();
    if (!write_all(p_.fwd[r_][1], hr.data(), hr.size()) || !write_all(p_.back[leftr][1], hl.data(), hl.size()))
      return fail("hello pipe");
    std::array<uint8_t, rma::TaggedEndpoint::kHelloSize> from_left{}, from_right{};
    if (!read_all(p_.fwd[leftr][0], from_left.data(), from_left.size()) ||
        !read_all(p_.back[r_][0], from_right.data(), from_right.size()))
      return fail("hello pipe");
    if (Status s = left_->start(from_left); !s.ok()) return fail("start (left): " + s.to_string());
    if (Status s = right_->start(from_right); !s.ok()) return fail("start (right): " + s.to_string());
    return 0;
  }

  // One ring step: send `out` to the right and receive `in` from the left, both with `tag`.
  bool step(uint32_t tag, std::span<const float> out, std::span<float> in, const rma::Descriptor& in_reg) {
    return exchange(*right_, tag, std::as_bytes(out), *left_, std::as_writable_bytes(in), in_reg);
  }
  // The same the other way round with empty messages: "I have everything you sent me".  A
  // rank leaves only when its right neighbour said so.  Its own word to the left may find
  // that neighbour gone: it leaves only after receiving that word, so a send that ends with
  // kClosed has arrived.
  bool farewell() { return exchange(*left_, kFarewellTag, {}, *right_, {}, rma::Descriptor{}, true); }

  bool exchange(rma::TaggedEndpoint& to, uint32_t tag, std::span<const std::byte> out, rma::TaggedEndpoint& from,
                std::span<std::byte> in, const rma::Descriptor& in_reg, bool peer_may_leave = false) {
    const auto* ob = reinterpret_cast<const uint8_t*>(out.data());
    auto* ib = reinterpret_cast<uint8_t*>(in.data());
    const rma::RecvBuffer buf{std::span<uint8_t>(ib, in.size_bytes()), in_reg};
    auto rr = from.irecv(std::span<const uint32_t>(&tag, 1), std::span<const rma::RecvBuffer>(&buf, 1));
    if (!rr.ok()) return fail("irecv: " + rr.status().to_string()), false;
    auto sr = to.isend(tag, std::span<const uint8_t>(ob, out.size_bytes()));
    if (!sr.ok()) return fail("isend: " + sr.status().to_string()), false;
    bool sent = false, got = false;
    const auto deadline = Clock::now() + std::chrono::seconds(a_.timeout_s);
    while (!(sent && got)) {
      if (!sent) {
        auto c = to.test(*sr);
        if (!c.ok()) return fail("test (send): " + c.status().to_string()), false;
        if (c->has_value()) {
          const Status& s = (*c)->status;
          if (!s.ok() && !(peer_may_leave && s.code() == Code::kClosed)) return fail("send: " + s.to_string()), false;
          sent = true;
        }
      }
      if (!got) {
        auto c = from.test(*rr);
        if (!c.ok()) return fail("test (recv): " + c.status().to_string()), false;
        if (c->has_value()) {
          if (!(*c)->status.ok()) return fail("recv: " + (*c)->status.to_string()), false;
          if ((*c)->sizes[0] != in.size_bytes()) return fail("recv: short message"), false;
          got = true;
        }
      }
      if (sent && got) break;
      if (Clock::now() > deadline) return fail("a ring step timed out"), false;
      (void)loop_->run_once(10);
    }
    return true;
  }

  std::span<float> chunk_of(std::vector<float>& d, int c, size_t chunk) {
    const int k = ((c % n_) + n_) % n_;
    return std::span<float>(d.data() + static_cast<size_t>(k) * chunk, chunk);
  }

  bool allreduce(std::vector<float>& d, std::vector<float>& scratch, size_t chunk, const rma::Descriptor& reg,
                 const rma::Descriptor& reg_scr) {
    std::span<float> s(scratch.data(), chunk);
    for (int st = 0; st < n_ - 1; ++st) {  // reduce-scatter
      if (!step(static_cast<uint32_t>(st), chunk_of(d, r_ - st, chunk), s, reg_scr)) return false;
      std::span<float> mine = chunk_of(d, r_ - st - 1, chunk);
      for (size_t i = 0; i < chunk; ++i) mine[i] += s[i];
    }
    for (int st = 0; st < n_ - 1; ++st)  // all-gather of the reduced chunks
      if (!step(static_cast<uint32_t>(n_ + st), chunk_of(d, r_ + 1 - st, chunk), chunk_of(d, r_ - st, chunk), reg))
        return false;
    return true;
  }

  bool allgather(std::vector<float>& d, size_t chunk, const rma::Descriptor& reg) {
    for (int st = 0; st < n_ - 1; ++st)
      if (!step(static_cast<uint32_t>(st), chunk_of(d, r_ - st, chunk), chunk_of(d, r_ - st - 1, chunk), reg))
        return false;
    return true;
  }

  int check(const std::vector<float>& d, size_t chunk, bool reduce) {
    const size_t used = chunk * static_cast<size_t>(n_);
    for (size_t i = 0; i < used; ++i) {
      float want;
      if (reduce) {
        want = static_cast<float>(n_ * (n_ + 1) / 2 * static_cast<int>(i % 13 + 1));
      } else {
        want = input(static_cast<int>(i / chunk), i % chunk);
      }
      if (d[i] != want)
        return fail("element " + std::to_string(i) + " is " + std::to_string(d[i]) + ", expected " +
                    std::to_string(want));
    }
    return 0;
  }

  static constexpr uint32_t kFarewellTag = 0xfa4e;

  const Args& a_;
  int r_, n_;
  const Pipes& p_;
  std::unique_ptr<reactor::EventLoop> loop_;
  std::unique_ptr<rma::Listener> listener_;
  std::unique_ptr<rma::TaggedEndpoint> right_, left_;
};

}  // namespace

int main(int argc, char** argv) {
  Args a;
  CLI::App app{"conduit-ring: ring AllReduce / AllGather over conduit::rma tagged send/recv, N local processes"};
  app.add_option("--ranks", a.ranks, "processes in the ring")->check(CLI::Range(2, 16));
  app.add_option("--url", a.url, "where each rank listens (port 0: its own): rdma://, tcp://, shm://, auto://");
  app.add_option("--op", a.op, "allreduce (float sum) or allgather")->check(CLI::IsMember({"allreduce", "allgather"}));
  app.add_option("--bytes", a.bytes, "allreduce: buffer per rank; allgather: output size (a multiple of 4*ranks)")
      ->transform(CLI::AsSizeValue(false))
      ->check(CLI::Range(uint64_t{4}, uint64_t{1} << 30));
  app.add_option("--iters", a.iters, "timed iterations")->check(CLI::Range(1, 100000));
  app.add_option("--warmup", a.warmup, "untimed iterations first")->check(CLI::Range(0, 1000));
  app.add_option("--timeout", a.timeout_s, "seconds any one wait may take before the run fails")->check(CLI::Range(1, 3600));
  CLI11_PARSE(app, argc, argv);
  set_log_level(LogLevel::kWarn);  // a neighbour's close at the end is expected, not news
  if (a.bytes % (sizeof(float) * static_cast<uint64_t>(a.ranks)) != 0)
    return std::fprintf(stderr, "conduit-ring: --bytes must be a multiple of 4 * --ranks (%d)\n", 4 * a.ranks), 2;

  Pipes p;
  for (auto* v : {&p.url, &p.fwd, &p.back}) {
    v->resize(static_cast<size_t>(a.ranks));
    for (auto& fds : *v)
      if (pipe(fds.data()) != 0) return std::perror("conduit-ring: pipe"), 3;
  }
  std::printf("# %12s %12s %8s %10s %8s %8s\n", "size(B)", "count", "type", "time(us)", "algbw", "busbw");
  std::fflush(stdout);
  std::vector<pid_t> kids;
  for (int r = 0; r < a.ranks; ++r) {
    const pid_t pid = fork();
    if (pid < 0) return std::perror("conduit-ring: fork"), 3;
    if (pid == 0) {
      Rank rank(a, r, p);
      const int rc = rank.run();
      std::fflush(stdout);
      _exit(rc);
    }
    kids.push_back(pid);
  }
  // A rank that fails leaves its neighbours waiting: stop them all.
  int bad = 0;
  for (size_t left = kids.size(); left > 0; --left) {
    int st = 0;
    const pid_t k = waitpid(-1, &st, 0);
    if (k < 0) break;
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) continue;
    ++bad;
    for (pid_t o : kids)
      if (o != k) kill(o, SIGTERM);
  }
  if (bad != 0) return std::fprintf(stderr, "conduit-ring: %d of %d ranks failed\n", bad, a.ranks), 1;
  std::printf("# %s over %d ranks: every element checked\n", a.op.c_str(), a.ranks);
  return 0;
}
