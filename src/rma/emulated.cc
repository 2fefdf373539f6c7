// rma over tcp:// and shm://: the peer's event loop serves reads, writes and atomics against
// the memory it exposed, over a transport connection of the endpoint's own.  One small
// versioned protocol (docs/PROTOCOL.md, "rma emulation"): a hello each way, then request and
// response frames in both directions (either side may initiate).  Requests are served in
// arrival order and answered in that order, so ops complete in order as over RC.  Anything
// malformed closes this endpoint (kProtocolError) and nothing else.
#include <atomic>
#include <cstring>
#include <vector>

#include "conduit/base/log.h"
#include "conduit/transport/connection.h"
#include "engine.h"
#include "wire.h"

namespace conduit::rma {
namespace {

constexpr uint32_t kMagic = 0x43524D41;  // "CRMA"
constexpr uint8_t kVersion = 1;
constexpr size_t kHelloSize = 16;
constexpr size_t kRequestSize = 32;
constexpr size_t kResponseSize = 24;
constexpr uint8_t kResponseBit = 0x80;

uint8_t opcode_of(OpKind k) { return static_cast<uint8_t>(static_cast<uint8_t>(k) + 1); }  // 1..5

class EmuEngine final : public Engine {
 public:
  EmuEngine(reactor::EventLoop& loop, const EndpointOptions& o, std::string scheme)
      : Engine(loop, o, std::move(scheme)) {}
  ~EmuEngine() override { close(); }

  // Takes the transport connection (connecting or, on the server, connected).
  void start(std::unique_ptr<transport::Connection> conn, bool connected_now) {
    conn_ = std::move(conn);
    conn_->set_read_handler([this](transport::Connection&) { on_readable(); });
    if (connected_now) send_hello();
  }
  void on_transport_connect(Status s) {
    if (!s.ok()) return connected(std::move(s));
    send_hello();
  }

  std::string addresses() const override {
    return conn_ ? conn_->local_address() + "->" + conn_->peer_address() : std::string("-");
  }

 protected:
  Status expose_native(Exposure& e) override {
    // A key no live exposure of this endpoint has: the generation in its low 24 bits (unique
    // per endpoint), a counter byte above so keys of different endpoints rarely coincide.
    e.key = (e.generation & 0xffffff) | (salt() << 24);
    return {};
  }
  void revoke_native(Exposure&) override {}  // the table entry goes: the next request is refused

  Status post(size_t first, size_t count) override {
    for (size_t i = first; i < first + count; ++i) append_request(inflight_at(i));
    flush();
    return {};
  }

  void shutdown_native() override {
    if (conn_) conn_->close();
  }

 private:
  static uint32_t salt() {
    static std::atomic<uint32_t> next{1};
    return next.fetch_add(1, std::memory_order_relaxed) & 0xff;
  }

  void send_hello() {
    uint8_t h[kHelloSize] = {};
    wire::put32(h, kMagic);
    h[4] = kVersion;
    wire::put64(h + 8, options_.max_op);
    out_.insert(out_.end(), h, h + kHelloSize);
    flush();
  }

  void append_request(const Op& op) {
    uint8_t h[kRequestSize] = {};
    h[0] = kVersion;
    h[1] = opcode_of(op.kind);
    wire::put32(h + 4, sent_++);
    wire::put32(h + 8, op.remote.key);
    wire::put32(h + 12, op.remote.generation);
    wire::put64(h + 16, op.remote.addr + op.offset);
    wire::put32(h + 24, is_atomic(op.kind) ? 8 : static_cast<uint32_t>(op.local.size()));
    wire::put32(h + 28, op.imm);
    out_.insert(out_.end(), h, h + kRequestSize);
    if (op.kind == OpKind::kWrite || op.kind == OpKind::kWriteImm) {
      out_.insert(out_.end(), op.local.begin(), op.local.end());
    } else if (is_atomic(op.kind)) {
      uint8_t a[16];
      wire::put64(a, op.operand);
      wire::put64(a + 8, op.swap);
      out_.insert(out_.end(), a, a + 16);
    }
  }

  void flush() {
    if (!conn_ || conn_->state() != transport::ConnState::kConnected) return;
    while (out_pos_ < out_.size()) {
      Result<size_t> n = conn_->write(std::span<const uint8_t>(out_.data() + out_pos_, out_.size() - out_pos_));
      if (!n.ok()) {
        if (n.status().would_block()) break;
        return fail(n.status());
      }
      out_pos_ += *n;
    }
    if (out_pos_ == out_.size()) {
      out_.clear();
      out_pos_ = 0;
      if (writing_) {
        writing_ = false;
        conn_->set_write_handler(nullptr);
      }
    } else if (!writing_) {
      writing_ = true;
      conn_->set_write_handler([this](transport::Connection&) { flush(); });
    }
  }

  void on_readable() {
    for (;;) {
      if (state_ == EndpointState::kClosed || state_ == EndpointState::kError) return;
      const size_t old = in_.size();
      in_.resize(old + kReadChunk);
      Result<size_t> n = conn_->read(std::span<uint8_t>(in_.data() + old, kReadChunk));
      in_.resize(old + (n.ok() ? *n : 0));
      if (!n.ok()) {
        if (n.status().would_block()) break;
        return fail(n.status());
      }
      if (*n == 0) return fail(Status(Code::kClosed, "rma peer closed the connection"));
    }
    parse();
  }

  void protocol_error(const std::string& what) { fail(Status(Code::kProtocolError, "rma emulation: " + what)); }

  void parse() {
    while (state_ == EndpointState::kConnecting || state_ == EndpointState::kConnected) {
      const uint8_t* p = in_.data() + in_pos_;
      const size_t avail = in_.size() - in_pos_;
      if (!hello_seen_) {
        if (avail < kHelloSize) break;
        if (wire::get32(p) != kMagic) return protocol_error("bad hello (not an rma peer?)");
        if (p[4] != kVersion) return protocol_error("peer speaks version " + std::to_string(p[4]) + ", this side 1");
        const uint64_t peer_max = wire::get64(p + 8);
        if (peer_max == 0) return protocol_error("peer max_op is 0");
        peer_max_op_ = peer_max;
        options_.max_op = std::min(options_.max_op, peer_max);
        hello_seen_ = true;
        in_pos_ += kHelloSize;
        connected(Status());
        continue;
      }
      if (avail < 2) break;
      if (p[0] != kVersion) return protocol_error("frame version " + std::to_string(p[0]));
      const bool response = (p[1] & kResponseBit) != 0;
      const size_t used = response ? take_response(p, avail) : take_request(p, avail);
      if (used == 0) break;  // incomplete (or failed: the loop condition stops it)
      in_pos_ += used;
    }
    if (in_pos_ == in_.size()) {
      in_.clear();
      in_pos_ = 0;
    } else if (in_pos_ > (1u << 20) && in_pos_ * 2 > in_.size()) {
      in_.erase(in_.begin(), in_.begin() + static_cast<ptrdiff_t>(in_pos_));
      in_pos_ = 0;
    }
  }

  // A peer's request: serve it against our exposures.  Returns the bytes it took (0 = wait).
  size_t take_request(const uint8_t* p, size_t avail) {
    if (avail < kRequestSize) return 0;
    const uint8_t code = p[1];
    if (code < 1 || code > 5) return protocol_error("unknown opcode " + std::to_string(code)), 0;
    if (wire::get16(p + 2) != 0) return protocol_error("reserved request bytes are not zero"), 0;
    const auto kind = static_cast<OpKind>(code - 1);
    const uint32_t id = wire::get32(p + 4);
    const uint32_t key = wire::get32(p + 8), gen = wire::get32(p + 12);
    const uint64_t addr = wire::get64(p + 16);
    const uint32_t len = wire::get32(p + 24), imm = wire::get32(p + 28);
    if (id != served_seq_) return protocol_error("request id " + std::to_string(id) + " out of sequence"), 0;
    if (len == 0) return protocol_error("zero-length request"), 0;
    if (is_atomic(kind) ? len != 8 : len > max_request()) return protocol_error("request length " + std::to_string(len)), 0;
    const size_t body = kind == OpKind::kWrite || kind == OpKind::kWriteImm ? len : is_atomic(kind) ? 16 : 0;
    if (avail < kRequestSize + body) return 0;
    ++served_seq_;
    Refusal why = Refusal::kNone;
    const Exposure* e = lookup(key, gen, addr, len, rights_needed(kind), &why);
    if (e != nullptr && is_atomic(kind) && addr % 8 != 0) why = Refusal::kAlign, e = nullptr;
    count_served(e != nullptr);
    uint8_t r[kResponseSize] = {};
    r[0] = kVersion;
    r[1] = static_cast<uint8_t>(kResponseBit | code);
    wire::put16(r + 2, static_cast<uint16_t>(why));
    wire::put32(r + 4, id);
    auto* mem = reinterpret_cast<uint8_t*>(static_cast<uintptr_t>(addr));
    const uint8_t* data = p + kRequestSize;
    if (e != nullptr) {
      switch (kind) {
        case OpKind::kRead:
          wire::put32(r + 16, len);
          break;
        case OpKind::kWrite:
        case OpKind::kWriteImm:
          std::memcpy(mem, data, len);
          break;
        case OpKind::kFetchAdd:
          wire::put64(r + 8, std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(mem)).fetch_add(wire::get64(data)));
          break;
        case OpKind::kCompareSwap: {
          uint64_t expected = wire::get64(data);
          std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(mem)).compare_exchange_strong(expected, wire::get64(data + 8));
          wire::put64(r + 8, expected);  // the old value either way
          break;
        }
      }
    }
    out_.insert(out_.end(), r, r + kResponseSize);
    if (e != nullptr && kind == OpKind::kRead) out_.insert(out_.end(), mem, mem + len);
    flush();
    if (e != nullptr && kind == OpKind::kWriteImm && imm_handler) imm_handler(imm, len);
    return kRequestSize + body;
  }

  // The answer to our oldest op in flight.
  size_t take_response(const uint8_t* p, size_t avail) {
    if (avail < kResponseSize) return 0;
    if (in_flight() == 0) return protocol_error("a response with no request outstanding"), 0;
    const Op& op = front();
    const uint32_t id = wire::get32(p + 4);
    const uint16_t status = wire::get16(p + 2);
    const uint32_t len = wire::get32(p + 16);
    if (p[1] != (kResponseBit | opcode_of(op.kind)) || id != completed_seq_)
      return protocol_error("response does not match the oldest request"), 0;
    if (status > static_cast<uint16_t>(Refusal::kAlign)) return protocol_error("unknown response status"), 0;
    const bool ok = status == 0;
    const uint32_t want = ok && op.kind == OpKind::kRead ? static_cast<uint32_t>(op.local.size()) : 0;
    if (len != want || wire::get32(p + 20) != 0) return protocol_error("response length " + std::to_string(len)), 0;
    if (avail < kResponseSize + len) return 0;
    ++completed_seq_;
    if (len > 0) std::memcpy(op.local.data(), p + kResponseSize, len);
    complete_front(refusal_status(static_cast<Refusal>(status)), wire::get64(p + 8));
    return kResponseSize + len;
  }

  // The largest request body this side accepts: what it told the peer in its hello.
  uint64_t max_request() const { return own_max_op_; }

  static constexpr size_t kReadChunk = 64 << 10;
  std::unique_ptr<transport::Connection> conn_;
  uint64_t own_max_op_ = options_.max_op;
  uint64_t peer_max_op_ = 0;
  bool hello_seen_ = false;
  bool writing_ = false;
  std::vector<uint8_t> in_, out_;
  size_t in_pos_ = 0, out_pos_ = 0;
  uint32_t sent_ = 0, completed_seq_ = 0, served_seq_ = 0;
};

class EmuListener final : public Listener {
 public:
  EmuListener(reactor::EventLoop& loop, EndpointOptions o, std::string scheme, AcceptCallback cb)
      : loop_(loop), options_(o), scheme_(std::move(scheme)), pending_(loop, std::move(cb)) {}
  ~EmuListener() override { close(); }

  Status start(const std::string& url) {
    CONDUIT_ASSIGN_OR_RETURN(listener_, transport::listen(loop_, url, [this](std::unique_ptr<transport::Connection> c) {
                               accept(std::move(c));
                             }));
    return {};
  }
  std::string url() const override { return listener_ ? listener_->url() : std::string(); }
  void close() override {
    if (listener_) listener_->close();
    pending_.clear();
  }

 private:
  void accept(std::unique_ptr<transport::Connection> c) {
    pending_.add(std::make_unique<EmuEngine>(loop_, options_, scheme_))->start(std::move(c), /*connected_now=*/true);
  }

  reactor::EventLoop& loop_;
  EndpointOptions options_;
  std::string scheme_;
  std::unique_ptr<transport::Listener> listener_;
  PendingAccepts pending_;  // accepted, hello not yet seen
};

}  // namespace

Result<std::unique_ptr<Engine>> connect_emulated(reactor::EventLoop& loop, const std::string& url,
                                                 const EndpointOptions& o) {
  const std::string scheme = url.substr(0, url.find(':'));
  auto engine = std::make_unique<EmuEngine>(loop, o, scheme);
  EmuEngine* raw = engine.get();
  CONDUIT_ASSIGN_OR_RETURN(auto conn, transport::connect(loop, url, [raw](transport::Connection&, Status s) {
                             raw->on_transport_connect(std::move(s));
                           }));
  raw->start(std::move(conn), /*connected_now=*/false);
  return std::unique_ptr<Engine>(std::move(engine));
}

Result<std::unique_ptr<Listener>> listen_emulated(reactor::EventLoop& loop, const std::string& url,
                                                  const EndpointOptions& o, Listener::AcceptCallback cb) {
  auto l = std::make_unique<EmuListener>(loop, o, url.substr(0, url.find(':')), std::move(cb));
  CONDUIT_RETURN_IF_ERROR(l->start(url));
  return std::unique_ptr<Listener>(std::move(l));
}

}  // namespace conduit::rma
