// The endpoint logic every engine shares: checks before posting, the in-flight bound,
// completion in order, exposures and their generations, failure.
#include "engine.h"

#include "conduit/base/log.h"

namespace conduit::rma {

std::string_view op_kind_name(OpKind k) {
  switch (k) {
    case OpKind::kRead: return "read";
    case OpKind::kWrite: return "write";
    case OpKind::kWriteImm: return "write_imm";
    case OpKind::kFetchAdd: return "fetch_add";
    case OpKind::kCompareSwap: return "compare_swap";
  }
  return "?";
}

std::string_view endpoint_state_name(EndpointState s) {
  switch (s) {
    case EndpointState::kConnecting: return "connecting";
    case EndpointState::kConnected: return "connected";
    case EndpointState::kClosed: return "closed";
    case EndpointState::kError: return "error";
  }
  return "?";
}

Status check_against(const Descriptor& d, OpKind kind, uint64_t offset, uint64_t length) {
  const Misfit m = misfit(d, kind, offset, length);
  if (m == Misfit::kNone) return {};
  const std::string what(op_kind_name(kind));
  switch (m) {
    case Misfit::kRights:
      return Status(Code::kPermissionDenied, what + ": the descriptor grants " + rights_name(d.rights) + ", not " +
                                                 rights_name(rights_needed(kind)));
    case Misfit::kEmpty: return Status(Code::kInvalidArgument, what + ": zero length");
    case Misfit::kRange:
      return Status(Code::kInvalidArgument, what + ": [" + std::to_string(offset) + ", +" + std::to_string(length) +
                                                ") is outside the " + std::to_string(d.length) + "-byte region");
    case Misfit::kAlign: return Status(Code::kInvalidArgument, what + ": the remote word is not 8-byte aligned");
    case Misfit::kNone: break;
  }
  return {};
}

Engine::Engine(reactor::EventLoop& loop, EndpointOptions options, std::string transport)
    : loop_(loop), options_(options), transport_(std::move(transport)), inflight_(options.depth) {}

Engine::~Engine() = default;  // the concrete engine's destructor calls close()

Result<Descriptor> Engine::expose(void* addr, size_t len, Rights rights) {
  if (state_ != EndpointState::kConnected)
    return Status(Code::kClosed, std::string("rma expose: endpoint is ") + std::string(endpoint_state_name(state_)));
  if (rights == Rights::kNone)
    return Status(Code::kInvalidArgument, "rma expose: no rights given (nothing is exposed by default: say which)");
  if ((static_cast<uint8_t>(rights) & ~static_cast<uint8_t>(kAllRights)) != 0)
    return Status(Code::kInvalidArgument, "rma expose: unknown rights bits");
  if (addr == nullptr || len == 0) return Status(Code::kInvalidArgument, "rma expose: empty range");
  const auto a = reinterpret_cast<uintptr_t>(addr);
  if (a + len < a) return Status(Code::kInvalidArgument, "rma expose: range wraps around");
  Exposure e;
  e.addr = a;
  e.length = len;
  e.rights = rights;
  e.generation = next_generation_++;
  CONDUIT_RETURN_IF_ERROR(expose_native(e));
  if (exposures_.count(e.key) != 0) {
    revoke_native(e);
    return Status(Code::kInternal, "rma expose: the engine returned a key already in use");
  }
  const Descriptor d = e.descriptor();
  exposures_.emplace(e.key, std::move(e));
  stats_.exposed = exposures_.size();
  return d;
}

Status Engine::revoke(const Descriptor& d) {
  auto it = exposures_.find(d.key);
  if (it == exposures_.end() || it->second.generation != d.generation)
    return Status(Code::kNotFound, "rma revoke: " + d.to_string() + " is not exposed by this endpoint");
  revoke_native(it->second);
  exposures_.erase(it);
  stats_.exposed = exposures_.size();
  return {};
}

Status refusal_status(Refusal r) {
  switch (r) {
    case Refusal::kNone: return {};
    case Refusal::kKey: return Status(Code::kPermissionDenied, "remote access error: unknown or revoked key");
    case Refusal::kRights: return Status(Code::kPermissionDenied, "remote access error: right not granted");
    case Refusal::kRange: return Status(Code::kPermissionDenied, "remote access error: outside the exposed range");
    case Refusal::kAlign: return Status(Code::kPermissionDenied, "remote access error: misaligned atomic");
  }
  return Status(Code::kPermissionDenied, "remote access error");
}

const Exposure* Engine::lookup(uint32_t key, uint32_t generation, uint64_t addr, uint64_t length, Rights need,
                               Refusal* why) {
  auto it = exposures_.find(key);
  if (it == exposures_.end() || it->second.generation != generation) {
    *why = Refusal::kKey;
    return nullptr;
  }
  const Exposure& e = it->second;
  if (!contains(e.rights, need)) {
    *why = Refusal::kRights;
    return nullptr;
  }
  if (addr < e.addr || length > e.length || addr - e.addr > e.length - length) {
    *why = Refusal::kRange;
    return nullptr;
  }
  *why = Refusal::kNone;
  return &e;
}

Status Engine::submit(std::span<Op> ops) {
  if (state_ != EndpointState::kConnected)
    return Status(state_ == EndpointState::kConnecting ? Code::kUnavailable : Code::kClosed,
                  std::string("rma submit: endpoint is ") + std::string(endpoint_state_name(state_)));
  if (ops.empty()) return {};
  for (size_t i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    const uint64_t len = is_atomic(op.kind) ? 8 : op.local.size();
    if (misfit(op.remote, op.kind, op.offset, len) == Misfit::kNone && (is_atomic(op.kind) || len <= options_.max_op))
        [[likely]]
      continue;
    // It does not fit: say why.
    Status s = check_against(op.remote, op.kind, op.offset, len);
    if (s.ok())
      s = Status(Code::kInvalidArgument, std::string(op_kind_name(op.kind)) + ": " + std::to_string(len) +
                                             " bytes is above max_op=" + std::to_string(options_.max_op));
    if (ops.size() == 1) return s;
    return Status(s.code(), "op " + std::to_string(i) + " of the batch: " + std::string(s.message()));
  }
  if (inflight_.size() + ops.size() > options_.depth) {
    if (ops.size() > options_.depth)
      return Status(Code::kInvalidArgument, "rma submit: a batch of " + std::to_string(ops.size()) +
                                                " is above depth=" + std::to_string(options_.depth));
    ++stats_.would_block;
    want_ready_ = true;
    return Status::WouldBlock();
  }
  const size_t first = inflight_.size();
  for (Op& op : ops) inflight_.push_back(std::move(op));
  Status s = post(first, ops.size());
  if (!s.ok()) {
    // Nothing went out: give the ops back to the caller as they were.
    for (size_t i = ops.size(); i-- > 0;) ops[i] = inflight_.pop_back();
    return s;
  }
  stats_.ops_submitted += ops.size();
  ++stats_.batches;
  return {};
}

void Engine::complete_front(Status s, uint64_t old_value) {
  if (inflight_.empty()) return;
  OpCallback done = inflight_.pop_front_callback();
  s.ok() ? ++stats_.ops_completed : ++stats_.ops_failed;
  if (done) done(OpResult{std::move(s), old_value});
  if (want_ready_ && state_ == EndpointState::kConnected && inflight_.size() < options_.depth) {
    want_ready_ = false;
    if (ready_handler) ready_handler(*owner_);
  }
}

void Engine::connected(Status s) {
  if (state_ != EndpointState::kConnecting) return;
  if (s.ok()) {
    state_ = EndpointState::kConnected;
  } else {
    state_ = EndpointState::kError;
    error_ = s;
    shutdown_native();
  }
  if (auto cb = std::move(on_connect_)) cb(*owner_, std::move(s));
}

void Engine::finish(Status why, EndpointState final_state) {
  if (state_ == EndpointState::kClosed || state_ == EndpointState::kError) return;
  const bool was_connecting = state_ == EndpointState::kConnecting;
  state_ = final_state;
  error_ = why;
  for (auto& [key, e] : exposures_) revoke_native(e);
  exposures_.clear();
  stats_.exposed = 0;
  shutdown_native();
  const Status op_status =
      final_state == EndpointState::kClosed ? Status(Code::kCancelled, "rma endpoint closed") : why;
  while (!inflight_.empty()) complete_front(op_status);
  if (was_connecting) {
    if (auto cb = std::move(on_connect_)) cb(*owner_, why.ok() ? Status(Code::kCancelled, "rma endpoint closed") : why);
  } else if (final_state == EndpointState::kError) {
    // Failure or the peer going away; a local close() does not call back.
    if (auto h = std::move(close_handler)) h(*owner_);
  }
  close_handler = nullptr;
}

void Engine::fail(Status why) {
  // The peer going away is an ordinary end; anything else is worth a warning.
  if (why.code() == Code::kClosed)
    CONDUIT_LOG(kInfo) << "rma " << transport_ << " " << addresses() << ": " << why.to_string();
  else
    CONDUIT_LOG(kWarn) << "rma " << transport_ << " " << addresses() << ": " << why.to_string();
  finish(std::move(why), EndpointState::kError);
}

void Engine::close() { finish(Status(), EndpointState::kClosed); }

void PendingAccepts::adopt(std::unique_ptr<Engine> engine) {
  Engine* raw = engine.get();
  auto* ep = new Endpoint(std::move(engine));
  pending_.emplace(raw, ep);
  raw->attach(ep, [this, raw](Endpoint& e, Status s) {
    if (pending_.erase(raw) == 0) return;
    std::unique_ptr<Endpoint> owned(&e);
    if (!s.ok()) {
      CONDUIT_LOG(kWarn) << "rma accept: " << s.to_string();
      loop_.destroy_later(std::move(owned));
      return;
    }
    on_accept_(std::move(owned));
  });
}

void PendingAccepts::drop(Engine* engine) {
  auto it = pending_.find(engine);
  if (it == pending_.end()) return;
  std::unique_ptr<Endpoint> owned(it->second);
  pending_.erase(it);
  loop_.destroy_later(std::move(owned));
}

void PendingAccepts::clear() {
  auto pending = std::move(pending_);
  pending_.clear();
  for (auto& [engine, ep] : pending) delete ep;
}

}  // namespace conduit::rma
