// Drives libnccl-net-conduit.so the way NCCL's proxy thread does, without NCCL: dlopen() the
// plugin (this program does not link it), dlsym() one table (ncclNetPlugin_v10 or _v9), then
// in two processes joined by socketpairs, over two connections (one each way, each process's two
// roles on two threads): init, devices, getProperties; the receiver listens
// and hands the 128-byte handle to the sender; connect / accept retried until they return a
// comm; regMr; rounds of NCCL_NET_MAX_REQUESTS grouped irecvs (n = 1..maxRecvs, distinct
// tags) against as many isends in flight, a 33rd request refused with request == NULL, test()
// polled out of order, sizes and every byte checked, iflush; a message larger than its posted
// buffer failing both sides while the comm stays usable; bad input of each kind refused with
// an error; deregMr and close.  Exit 0 = pass, 77 = skipped (no RDMA address), 1 = fail.
//
//   nccl_net_harness --plugin build/src/nccl_net/libnccl-net-conduit.so --version 10 --transport tcp
#include <dlfcn.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "conduit/nccl_net/net_abi.h"

namespace {

#define CHECK(cond)                                                                          \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      std::fprintf(stderr, "[%s] %s:%d: CHECK failed: %s\n", g_role, __FILE__, __LINE__, #cond); \
      std::fflush(stderr);                                                                   \
      _exit(1);                                                                              \
    }                                                                                        \
  } while (0)
#define CHECK_RC(call, want) CHECK((call) == (want))

thread_local const char* g_role = "main";  // each role runs on its own thread
const ncclNet_v10_t* g10 = nullptr;
const ncclNet_v9_t* g9 = nullptr;

// One call surface over both tables (the v10 extras passed as NCCL passes them when unused).
const char* n_name() { return g10 ? g10->name : g9->name; }
ncclResult_t n_init(ncclDebugLogger_t l) { return g10 ? g10->init(l, nullptr) : g9->init(l); }
ncclResult_t n_devices(int* n) { return g10 ? g10->devices(n) : g9->devices(n); }
ncclResult_t n_props(int d, ncclNetProperties_t* p) { return g10 ? g10->getProperties(d, p) : g9->getProperties(d, p); }
ncclResult_t n_listen(int d, void* h, void** l) { return g10 ? g10->listen(d, h, l) : g9->listen(d, h, l); }
ncclResult_t n_connect(int d, void* h, void** s) {
  ncclNetDeviceHandle_t* dev = nullptr;
  ncclNetCommConfig_t cfg{-1};
  return g10 ? g10->connect(d, &cfg, h, s, &dev) : g9->connect(d, h, s, &dev);
}
ncclResult_t n_accept(void* l, void** r) {
  ncclNetDeviceHandle_t* dev = nullptr;
  return g10 ? g10->accept(l, r, &dev) : g9->accept(l, r, &dev);
}
ncclResult_t n_reg(void* c, void* d, size_t s, int t, void** m) { return g10 ? g10->regMr(c, d, s, t, m) : g9->regMr(c, d, s, t, m); }
ncclResult_t n_reg_dmabuf(void* c, void* d, size_t s, void** m) {
  return g10 ? g10->regMrDmaBuf(c, d, s, NCCL_PTR_DMABUF, 0, -1, m) : g9->regMrDmaBuf(c, d, s, NCCL_PTR_DMABUF, 0, -1, m);
}
ncclResult_t n_dereg(void* c, void* m) { return g10 ? g10->deregMr(c, m) : g9->deregMr(c, m); }
ncclResult_t n_isend(void* c, void* d, size_t s, int tag, void* m, void** r) {
  return g10 ? g10->isend(c, d, s, tag, m, nullptr, r) : g9->isend(c, d, s, tag, m, r);
}
ncclResult_t n_irecv(void* c, int n, void** d, size_t* s, int* t, void** m, void** r) {
  void* ph[8] = {};
  return g10 ? g10->irecv(c, n, d, s, t, m, ph, r) : g9->irecv(c, n, d, s, t, m, r);
}
ncclResult_t n_iflush(void* c, int n, void** d, int* s, void** m, void** r) {
  return g10 ? g10->iflush(c, n, d, s, m, r) : g9->iflush(c, n, d, s, m, r);
}
ncclResult_t n_test(void* r, int* done, int* sizes) { return g10 ? g10->test(r, done, sizes) : g9->test(r, done, sizes); }
ncclResult_t n_close_send(void* c) { return g10 ? g10->closeSend(c) : g9->closeSend(c); }
ncclResult_t n_close_recv(void* c) { return g10 ? g10->closeRecv(c) : g9->closeRecv(c); }
ncclResult_t n_close_listen(void* l) { return g10 ? g10->closeListen(l) : g9->closeListen(l); }
ncclResult_t n_device_mr(void* c, void* m, void** d) { return g10 ? g10->getDeviceMr(c, m, d) : g9->getDeviceMr(c, m, d); }
ncclResult_t n_consumed(void* c, int n, void* r) { return g10 ? g10->irecvConsumed(c, n, r) : g9->irecvConsumed(c, n, r); }
ncclResult_t n_vdevice(int* d, ncclNetVDeviceProps_t* p) { return g10 ? g10->makeVDevice(d, p) : g9->makeVDevice(d, p); }

thread_local int g_warnings = 0;  // refusals warn on the calling thread
void logger(ncclDebugLogLevel level, unsigned long, const char* file, int line, const char* fmt, ...) {
  if (level == NCCL_LOG_WARN) ++g_warnings;
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, ap);
  va_end(ap);
  std::fprintf(stderr, "[%s] %s %s:%d %s\n", g_role, level == NCCL_LOG_WARN ? "WARN" : "INFO", file, line, buf);
}

// Expects `call` to fail with `want` and the plugin to have said why (a WARN line).
#define CHECK_REFUSED(call, want)           \
  do {                                      \
    const int before = g_warnings;          \
    CHECK_RC(call, want);                   \
    CHECK(g_warnings > before);             \
  } while (0)

constexpr int kRequests = NCCL_NET_MAX_REQUESTS;
constexpr size_t kSlot = 64 * 1024;  // bytes per posted buffer
constexpr int kOversizeTag = 999999, kAfterTag = 1000000;
constexpr int kSameTag = 500000, kSameTagCount = 24;  // < kRequests: all posted at once
size_t same_tag_size(int k) { return static_cast<size_t>(k) * 1000 + 1; }

int tag_of(int round, int req, int elem) { return round * 1000 + req * 8 + elem; }
size_t size_of(int tag) {
  static const size_t sizes[] = {0, 1, 7, 4096, kSlot, 12345, kSlot - 1, 100};
  return sizes[static_cast<unsigned>(tag) % 8];
}
uint8_t pattern(int tag, size_t k) { return static_cast<uint8_t>((tag * 131 + k * 7 + (k >> 8)) & 0xff); }

void write_all(int fd, const void* p, size_t n) {
  auto* b = static_cast<const uint8_t*>(p);
  while (n > 0) {
    ssize_t k = ::write(fd, b, n);
    CHECK(k > 0);
    b += k;
    n -= static_cast<size_t>(k);
  }
}
void read_all(int fd, void* p, size_t n) {
  auto* b = static_cast<uint8_t*>(p);
  while (n > 0) {
    ssize_t k = ::read(fd, b, n);
    CHECK(k > 0);
    b += k;
    n -= static_cast<size_t>(k);
  }
}

struct Props {
  int max_recvs = 0;
  size_t max_bytes = 0;
};

// init, devices, getProperties, and the entries that do not apply, each as NCCL would see it.
Props common_setup(const std::string& plugin, int version) {
  void* lib = dlopen(plugin.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) std::fprintf(stderr, "dlopen %s: %s\n", plugin.c_str(), dlerror());
  CHECK(lib != nullptr);
  auto* v10 = static_cast<const ncclNet_v10_t*>(dlsym(lib, "ncclNetPlugin_v10"));
  auto* v9 = static_cast<const ncclNet_v9_t*>(dlsym(lib, "ncclNetPlugin_v9"));
  CHECK(v10 != nullptr && v9 != nullptr);  // both exported
  if (version == 10) g10 = v10; else g9 = v9;
  CHECK(std::string(n_name()) == "conduit");
  int n = -1;
  CHECK_RC(n_devices(&n), ncclInternalError);  // before init: refused
  CHECK_RC(n_init(logger), ncclSuccess);
  CHECK_RC(n_init(logger), ncclSuccess);  // NCCL may init more than once
  CHECK_RC(n_devices(&n), ncclSuccess);
  CHECK(n == 1);
  CHECK_REFUSED(n_devices(nullptr), ncclInvalidArgument);
  ncclNetProperties_t p;
  std::memset(&p, 0xab, sizeof(p));
  CHECK_RC(n_props(0, &p), ncclSuccess);
  CHECK(p.name != nullptr && std::string(p.name) == "conduit");
  CHECK(p.ptrSupport == NCCL_PTR_HOST);
  CHECK(p.regIsGlobal == 0);
  CHECK(p.maxRecvs >= 1 && p.maxRecvs <= 8);
  CHECK(p.maxComms >= 1);
  CHECK(p.speed > 0);
  CHECK(p.netDeviceType == NCCL_NET_DEVICE_HOST);
  CHECK(p.vProps.ndevs == 1 && p.vProps.devs[0] == 0);
  CHECK(p.maxP2pBytes >= (1u << 20));
  CHECK_REFUSED(n_props(1, &p), ncclInvalidArgument);
  CHECK_REFUSED(n_props(0, nullptr), ncclInvalidArgument);
  int d = 0;
  ncclNetVDeviceProps_t vp{};
  CHECK_REFUSED(n_vdevice(&d, &vp), ncclInternalError);
  int done = 0;
  CHECK_REFUSED(n_test(nullptr, &done, nullptr), ncclInvalidArgument);
  uint64_t garbage[16] = {};
  CHECK_REFUSED(n_test(garbage, &done, nullptr), ncclInvalidArgument);
  CHECK_REFUSED(n_close_send(garbage), ncclInvalidArgument);
  void* l = nullptr;
  CHECK_REFUSED(n_listen(0, nullptr, &l), ncclInvalidArgument);
  uint8_t junk[NCCL_NET_HANDLE_MAXSIZE];
  for (size_t i = 0; i < sizeof(junk); ++i) junk[i] = static_cast<uint8_t>(i * 37 + 11);
  void* s = nullptr;
  CHECK_REFUSED(n_connect(0, junk, &s), ncclInvalidArgument);
  CHECK(s == nullptr);
  return Props{p.maxRecvs, p.maxP2pBytes};
}

using Clock = std::chrono::steady_clock;
bool expired(Clock::time_point start, int seconds) { return Clock::now() - start > std::chrono::seconds(seconds); }

struct Stats {
  long messages = 0, bytes = 0, polls = 0, setup_retries = 0, refused_full = 0;
};

int run_receiver(int sock, const Props& props, int rounds, Stats& st) {
  g_role = "recv";
  const int M = props.max_recvs;
  uint8_t handle[NCCL_NET_HANDLE_MAXSIZE] = {};
  void* lcomm = nullptr;
  CHECK_RC(n_listen(0, handle, &lcomm), ncclSuccess);
  CHECK(lcomm != nullptr);
  write_all(sock, handle, sizeof(handle));
  void* rcomm = nullptr;
  const auto t0 = Clock::now();
  while (rcomm == nullptr) {
    CHECK_RC(n_accept(lcomm, &rcomm), ncclSuccess);
    if (rcomm == nullptr) ++st.setup_retries;
    CHECK(!expired(t0, 60));
  }
  void* again = nullptr;
  CHECK_REFUSED(n_accept(lcomm, &again), ncclInvalidArgument);  // one connection per listen comm
  CHECK_RC(n_close_listen(lcomm), ncclSuccess);

  const size_t total = size_t{kRequests} * M * kSlot;
  std::vector<uint8_t> buf(total + kSlot);
  void* mh = nullptr;
  void* bad = nullptr;
  CHECK_REFUSED(n_reg(rcomm, buf.data(), total, NCCL_PTR_CUDA, &bad), ncclInternalError);
  CHECK_REFUSED(n_reg_dmabuf(rcomm, buf.data(), total, &bad), ncclInternalError);
  CHECK_RC(n_reg(rcomm, buf.data(), total, NCCL_PTR_HOST, &mh), ncclSuccess);
  void* dptr = nullptr;
  CHECK_REFUSED(n_device_mr(rcomm, mh, &dptr), ncclInternalError);
  CHECK_REFUSED(n_consumed(rcomm, 1, nullptr), ncclInternalError);

  // Bad receives: too many buffers, a buffer past its handle, a garbage handle.
  {
    std::vector<void*> d(M + 1, buf.data());
    std::vector<size_t> sz(M + 1, 16);
    std::vector<int> tg(M + 1, 5);
    std::vector<void*> mhs(M + 1, mh);
    void* r = nullptr;
    CHECK_REFUSED(n_irecv(rcomm, M + 1, d.data(), sz.data(), tg.data(), mhs.data(), &r), ncclInvalidArgument);
    CHECK_REFUSED(n_irecv(rcomm, 0, d.data(), sz.data(), tg.data(), mhs.data(), &r), ncclInvalidArgument);
    void* past = buf.data() + total - 8;
    CHECK_REFUSED(n_irecv(rcomm, 1, &past, sz.data(), tg.data(), mhs.data(), &r), ncclInvalidArgument);
    uint64_t junk[8] = {};
    void* jm = junk;
    CHECK_REFUSED(n_irecv(rcomm, 1, d.data(), sz.data(), tg.data(), &jm, &r), ncclInvalidArgument);
    CHECK(r == nullptr);
  }

  for (int round = 0; round < rounds; ++round) {
    std::fill(buf.begin(), buf.begin() + static_cast<long>(total), 0xee);
    struct Posted {
      void* req = nullptr;
      int n = 0;
      void* data[8];
      size_t sizes[8];
      int tags[8];
      void* mh[8];
    };
    std::vector<Posted> posted(kRequests);
    for (int i = 0; i < kRequests; ++i) {
      Posted& p = posted[i];
      p.n = i % M + 1;
      for (int j = 0; j < p.n; ++j) {
        p.data[j] = buf.data() + (size_t{static_cast<unsigned>(i)} * M + j) * kSlot;
        p.sizes[j] = kSlot;
        p.tags[j] = tag_of(round, i, j);
        p.mh[j] = mh;
      }
      CHECK_RC(n_irecv(rcomm, p.n, p.data, p.sizes, p.tags, p.mh, &p.req), ncclSuccess);
      CHECK(p.req != nullptr);
    }
    {  // the 33rd: refused for now, no error (NCCL retries it)
      void* r = nullptr;
      void* d = buf.data() + total;
      size_t sz = 0;
      int tg = 424242;
      void* m = mh;
      CHECK_RC(n_irecv(rcomm, 1, &d, &sz, &tg, &m, &r), ncclSuccess);
      CHECK(r == nullptr);
      ++st.refused_full;
    }
    // Out of order: the newest first, stepping by 5, round after round.
    int left = kRequests;
    const auto t1 = Clock::now();
    while (left > 0) {
      for (int k = 0; k < kRequests; ++k) {
        Posted& p = posted[(kRequests - 1 - k * 5 % kRequests + kRequests) % kRequests];
        if (p.req == nullptr) continue;
        int done = 0, sizes[8] = {};
        CHECK_RC(n_test(p.req, &done, sizes), ncclSuccess);
        ++st.polls;
        if (!done) continue;
        for (int j = 0; j < p.n; ++j) {
          const size_t want = size_of(p.tags[j]);
          if (static_cast<size_t>(sizes[j]) != want)
            std::fprintf(stderr, "[recv] tag %d: size %d, want %zu\n", p.tags[j], sizes[j], want);
          CHECK(static_cast<size_t>(sizes[j]) == want);
          auto* b = static_cast<uint8_t*>(p.data[j]);
          for (size_t x = 0; x < want; ++x) CHECK(b[x] == pattern(p.tags[j], x));
          if (want < kSlot) CHECK(b[want] == 0xee);  // nothing past the message
          ++st.messages;
          st.bytes += static_cast<long>(want);
        }
        int isz[8];
        for (int j = 0; j < p.n; ++j) isz[j] = sizes[j];
        void* fr = reinterpret_cast<void*>(1);
        CHECK_RC(n_iflush(rcomm, p.n, p.data, isz, p.mh, &fr), ncclSuccess);
        CHECK(fr == nullptr);  // host memory: nothing to flush, complete at once
        if (&p == &posted[0]) CHECK_REFUSED(n_test(p.req, &done, sizes), ncclInvalidArgument);  // reaped
        p.req = nullptr;
        --left;
      }
      CHECK(!expired(t1, 120));
    }
  }

  // One tag, many messages (NCCL's pattern on a channel): they fill the posted buffers in order.
  {
    std::vector<void*> reqs(kSameTagCount);
    for (int k = 0; k < kSameTagCount; ++k) {
      void* d = buf.data() + size_t{static_cast<unsigned>(k)} * kSlot;
      size_t sz = kSlot;
      int tg = kSameTag;
      CHECK_RC(n_irecv(rcomm, 1, &d, &sz, &tg, &mh, &reqs[k]), ncclSuccess);
      CHECK(reqs[k] != nullptr);
    }
    const auto t3 = Clock::now();
    for (int left = kSameTagCount; left > 0;) {
      for (int k = kSameTagCount; k-- > 0;) {
        if (reqs[k] == nullptr) continue;
        int done = 0, sizes[1] = {-1};
        CHECK_RC(n_test(reqs[k], &done, sizes), ncclSuccess);
        if (!done) continue;
        CHECK(static_cast<size_t>(sizes[0]) == same_tag_size(k));
        const uint8_t* b = buf.data() + size_t{static_cast<unsigned>(k)} * kSlot;
        for (size_t x = 0; x < same_tag_size(k); ++x) CHECK(b[x] == pattern(kSameTag + k, x));
        reqs[k] = nullptr;
        --left;
        ++st.messages;
      }
      CHECK(!expired(t3, 60));
    }
  }

  // A message larger than its buffer fails this receive (and that send); the comm lives on.
  for (int tag : {kOversizeTag, kAfterTag}) {
    void* r = nullptr;
    void* d = buf.data();
    size_t sz = 100;
    int tg = tag;
    CHECK_RC(n_irecv(rcomm, 1, &d, &sz, &tg, &mh, &r), ncclSuccess);
    CHECK(r != nullptr);
    int done = 0, sizes[1] = {-1};
    ncclResult_t rc = ncclSuccess;
    const auto t2 = Clock::now();
    while (!done) {
      const int before = g_warnings;
      rc = n_test(r, &done, sizes);
      if (tag == kOversizeTag) {
        CHECK(rc == ncclSuccess || rc == ncclInternalError);
        if (rc != ncclSuccess) CHECK(g_warnings > before && done);
      } else {
        CHECK_RC(rc, ncclSuccess);
      }
      CHECK(!expired(t2, 60));
    }
    if (tag == kOversizeTag) {
      CHECK(rc == ncclInternalError);
    } else {
      CHECK(sizes[0] == 100);
      for (size_t x = 0; x < 100; ++x) CHECK(buf[x] == pattern(tag, x));
    }
  }

  char byte = 0;
  read_all(sock, &byte, 1);  // the sender is done
  CHECK(byte == 'd');
  uint64_t junk[4] = {};
  CHECK_REFUSED(n_dereg(rcomm, junk), ncclInvalidArgument);
  CHECK_RC(n_dereg(rcomm, mh), ncclSuccess);
  CHECK_REFUSED(n_dereg(rcomm, mh), ncclInvalidArgument);  // twice
  CHECK_RC(n_close_recv(rcomm), ncclSuccess);
  CHECK_REFUSED(n_close_recv(rcomm), ncclInvalidArgument);  // twice
  return 0;
}

int run_sender(int sock, const Props& props, int rounds, Stats& st) {
  g_role = "send";
  const int M = props.max_recvs;
  uint8_t handle[NCCL_NET_HANDLE_MAXSIZE];
  read_all(sock, handle, sizeof(handle));
  void* scomm = nullptr;
  const auto t0 = Clock::now();
  while (scomm == nullptr) {
    CHECK_RC(n_connect(0, handle, &scomm), ncclSuccess);
    if (scomm == nullptr) ++st.setup_retries;
    CHECK(!expired(t0, 60));
  }
  void* again = nullptr;
  CHECK_REFUSED(n_connect(0, handle, &again), ncclInvalidArgument);  // that connect finished

  const size_t total = size_t{kRequests} * M * kSlot;
  std::vector<uint8_t> buf(total + 4096);
  void* mh = nullptr;
  CHECK_RC(n_reg(scomm, buf.data(), buf.size(), NCCL_PTR_HOST, &mh), ncclSuccess);
  void* r = nullptr;
  CHECK_REFUSED(n_isend(scomm, buf.data() + buf.size() - 10, 100, 1, mh, &r), ncclInvalidArgument);
  CHECK_REFUSED(n_isend(scomm, buf.data(), props.max_bytes + 1, 1, mh, &r), ncclInvalidArgument);
  uint64_t junk[4] = {};
  CHECK_REFUSED(n_isend(scomm, buf.data(), 100, 1, junk, &r), ncclInvalidArgument);
  CHECK(r == nullptr);

  for (int round = 0; round < rounds; ++round) {
    struct Msg {
      int tag;
      uint8_t* data;
      size_t size;
    };
    std::vector<Msg> msgs;
    for (int i = 0; i < kRequests; ++i)
      for (int j = 0; j < i % M + 1; ++j) {
        const int tag = tag_of(round, i, j);
        uint8_t* d = buf.data() + (size_t{static_cast<unsigned>(i)} * M + j) * kSlot;
        for (size_t x = 0; x < size_of(tag); ++x) d[x] = pattern(tag, x);
        msgs.push_back({tag, d, size_of(tag)});
      }
    std::reverse(msgs.begin(), msgs.end());  // tags are independent: any order matches
    std::vector<void*> inflight;
    size_t next = 0;
    const auto t1 = Clock::now();
    while (next < msgs.size() || !inflight.empty()) {
      while (next < msgs.size()) {
        void* q = nullptr;
        CHECK_RC(n_isend(scomm, msgs[next].data, msgs[next].size, msgs[next].tag, mh, &q), ncclSuccess);
        if (q == nullptr) {
          CHECK(inflight.size() == kRequests);  // refused only when full
          ++st.refused_full;
          break;
        }
        CHECK(inflight.size() < kRequests);
        inflight.push_back(q);
        ++next;
      }
      for (size_t k = inflight.size(); k-- > 0;) {  // newest first
        int done = 0, size = -1;
        CHECK_RC(n_test(inflight[k], &done, &size), ncclSuccess);
        ++st.polls;
        if (!done) continue;
        inflight.erase(inflight.begin() + static_cast<long>(k));
      }
      CHECK(!expired(t1, 120));
    }
  }

  // One tag, many messages: the k-th send lands in the k-th posted buffer.
  {
    std::vector<void*> reqs(kSameTagCount);
    for (int k = 0; k < kSameTagCount; ++k) {
      uint8_t* d = buf.data() + size_t{static_cast<unsigned>(k)} * kSlot;
      for (size_t x = 0; x < same_tag_size(k); ++x) d[x] = pattern(kSameTag + k, x);
      const auto t3 = Clock::now();
      while (reqs[k] == nullptr) {  // 32 in flight at most: reap the oldest until one fits
        CHECK_RC(n_isend(scomm, d, same_tag_size(k), kSameTag, mh, &reqs[k]), ncclSuccess);
        for (int o = 0; reqs[k] == nullptr && o < k; ++o) {
          if (reqs[o] == nullptr) continue;
          int done = 0, sz = -1;
          CHECK_RC(n_test(reqs[o], &done, &sz), ncclSuccess);
          if (done) reqs[o] = nullptr;
        }
        CHECK(!expired(t3, 60));
      }
    }
    const auto t4 = Clock::now();
    for (int left = 1; left > 0;) {
      left = 0;
      for (int k = 0; k < kSameTagCount; ++k) {
        if (reqs[k] == nullptr) continue;
        int done = 0, sz = -1;
        CHECK_RC(n_test(reqs[k], &done, &sz), ncclSuccess);
        if (done) {
          CHECK(static_cast<size_t>(sz) == same_tag_size(k));
          reqs[k] = nullptr;
        } else {
          ++left;
        }
      }
      CHECK(!expired(t4, 60));
    }
  }

  // A message larger than the posted buffer: this send fails, then the comm still works.
  for (int tag : {kOversizeTag, kAfterTag}) {
    const size_t size = tag == kOversizeTag ? 200 : 100;
    for (size_t x = 0; x < size; ++x) buf[x] = pattern(tag, x);
    void* q = nullptr;
    CHECK_RC(n_isend(scomm, buf.data(), size, tag, mh, &q), ncclSuccess);
    CHECK(q != nullptr);
    int done = 0, sz = -1;
    ncclResult_t rc = ncclSuccess;
    const auto t2 = Clock::now();
    while (!done) {
      rc = n_test(q, &done, &sz);
      if (tag == kAfterTag) CHECK_RC(rc, ncclSuccess);
      CHECK(!expired(t2, 60));
    }
    if (tag == kOversizeTag) CHECK(rc == ncclInternalError);
    else CHECK(sz == 100);
  }
  write_all(sock, "d", 1);
  CHECK_RC(n_dereg(scomm, mh), ncclSuccess);
  CHECK_RC(n_close_send(scomm), ncclSuccess);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string plugin, transport = "tcp";
  int version = 10, rounds = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--plugin") plugin = v;
    else if (k == "--version") version = std::atoi(v.c_str());
    else if (k == "--transport") transport = v;
    else if (k == "--rounds") rounds = std::atoi(v.c_str());
    else {
      std::fprintf(stderr, "unknown flag %s\n", k.c_str());
      return 2;
    }
  }
  if (plugin.empty() || (version != 9 && version != 10) || rounds < 1 || (transport != "tcp" && transport != "rdma" && transport != "default")) {
    std::fprintf(stderr, "usage: %s --plugin PATH [--version 10|9] [--transport tcp|rdma|default] [--rounds N]\n", argv[0]);
    return 2;
  }
  std::string url = "tcp://127.0.0.1:0";
  if (transport == "rdma") {
    const char* addr = std::getenv("CONDUIT_RDMA_ADDR");
    const char* req = std::getenv("CONDUIT_REQUIRE_RDMA");
    if (addr == nullptr || *addr == '\0') {
      std::fprintf(stderr, "no RDMA address (CONDUIT_RDMA_ADDR): run in the testbed\n");
      return req && std::string(req) == "1" ? 1 : 77;
    }
    url = std::string("rdma://") + addr + ":0";
  }
  if (transport == "default") {  // the plugin's default: auto://127.0.0.1:0 (tcp without a device)
    unsetenv("CONDUIT_NCCL_NET_URL");
    unsetenv("CONDUIT_NCCL_NET_ADDR");
    url = "the default URL";
  } else {
    setenv("CONDUIT_NCCL_NET_URL", url.c_str(), 1);
  }
  alarm(240);  // a hang fails the run instead of holding ctest

  // Two connections, one each way: each process is the receiver of one and the sender of the
  // other, on two threads calling the plugin at once (two comms on its one progress loop).
  int sv[2], sv2[2];
  CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0 && socketpair(AF_UNIX, SOCK_STREAM, 0, sv2) == 0);
  const pid_t child = fork();
  CHECK(child >= 0);
  const auto t0 = std::chrono::steady_clock::now();
  Stats st, st2;
  if (child == 0) {
    close(sv[0]);
    close(sv2[0]);
    g_role = "child";
    Props p = common_setup(plugin, version);
    std::thread other([&] { run_receiver(sv2[1], p, rounds, st2); });
    run_sender(sv[1], p, rounds, st);
    other.join();
    std::fprintf(stderr, "[send] connect retries %ld, isend refused when full %ld, test polls %ld\n", st.setup_retries,
                 st.refused_full, st.polls);
    std::fflush(stderr);
    std::exit(0);  // static destructors run: the plugin's progress thread stops (LeakSanitizer checks)
  }
  close(sv[1]);
  close(sv2[1]);
  g_role = "parent";
  Props p = common_setup(plugin, version);
  std::thread other([&] { run_sender(sv2[0], p, rounds, st2); });
  run_receiver(sv[0], p, rounds, st);
  other.join();
  int status = 0;
  CHECK(waitpid(child, &status, 0) == child);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "nccl_net_harness: the sender failed (status %d)\n", status);
    return 1;
  }
  std::printf("nccl_net_harness v%d over %s: PASS -- %ld messages, %ld bytes byte for byte (this side's receiver), "
              "%d requests per comm, two connections (one each way), accept retries %ld, test polls %ld, %.2f s\n",
              version, url.c_str(), st.messages, st.bytes, kRequests, st.setup_retries, st.polls, s);
  return 0;
}
