#include "conduit/rpc/controller.h"

#include "cancel_hook.h"
#include "conduit/base/clock.h"

namespace conduit::rpc {

const std::string* find_meta(const Metadata& m, std::string_view key) {
  for (const auto& [k, v] : m)
    if (k == key) return &v;
  return nullptr;
}

void Controller::CancelHook::fire() {
  std::function<void()> a;
  google::protobuf::Closure* n = nullptr;
  {
    std::lock_guard<std::mutex> g(mu);
    if (fired || done) return;
    fired = true;
    a = std::move(action);
    n = notify;
    notify = nullptr;
  }
  if (a) a();
  if (n != nullptr) n->Run();
}

void Controller::CancelHook::finish() {
  google::protobuf::Closure* n = nullptr;
  {
    std::lock_guard<std::mutex> g(mu);
    done = true;
    action = nullptr;
    n = notify;
    notify = nullptr;
  }
  if (n != nullptr) n->Run();
}

bool Controller::CancelHook::cancelled() const {
  std::lock_guard<std::mutex> g(mu);
  return fired;
}

void Controller::CancelHook::set_notify(google::protobuf::Closure* c) {
  bool run_now = false;
  {
    std::lock_guard<std::mutex> g(mu);
    if (fired || done) {
      run_now = true;
    } else {
      notify = c;
    }
  }
  if (run_now) c->Run();
}

void Controller::CancelHook::set_action(std::function<void()> a) {
  bool run_now = false;
  {
    std::lock_guard<std::mutex> g(mu);
    done = false;  // a new call on this controller (a retry of a ClusterChannel)
    if (fired) {
      run_now = true;
    } else {
      action = std::move(a);
    }
  }
  if (run_now && a) a();
}

Controller::~Controller() = default;

void Controller::ensure_cancel_hook() {
  if (!cancel_) cancel_ = std::make_shared<CancelHook>();
}

void Controller::Reset() {
  code_ = ErrorCode::kOk;
  error_text_.clear();
  request_meta_.clear();
  response_meta_.clear();
  request_attachment_.clear();
  response_attachment_.clear();
  timeout_us_ = -1;
  idempotent_ = false;
  has_key_ = false;
  request_key_ = 0;
  latency_us_ = 0;
  retries_ = 0;
  remote_.clear();
  transport_.clear();
  deadline_ns_ = 0;
  cancel_.reset();
  stream_ = nullptr;
}

void Controller::StartCancel() {
  if (!cancel_) cancel_ = std::make_shared<CancelHook>();  // cancelled before the call started
  cancel_->fire();
}

bool Controller::IsCanceled() const { return cancel_ && cancel_->cancelled(); }

void Controller::NotifyOnCancel(google::protobuf::Closure* callback) {
  if (!cancel_) {
    callback->Run();  // not a server call in progress: protobuf says run it now
    return;
  }
  cancel_->set_notify(callback);
}

void Controller::SetFailed(ErrorCode code, std::string text) {
  code_ = code;
  error_text_ = std::move(text);
}

int64_t Controller::remaining_us() const {
  if (deadline_ns_ == 0) return -1;
  const uint64_t now = monotonic_ns();
  return now >= deadline_ns_ ? 0 : static_cast<int64_t>((deadline_ns_ - now) / 1000);
}

}  // namespace conduit::rpc
