#include "echo_service.h"

#include <deque>
#include <functional>
#include <memory>

#include "conduit/reactor/event_loop.h"
#include "conduit/rpc/controller.h"
#include "conduit/rpc/stream.h"

namespace conduit::rpc {
namespace {

class FnClosure : public google::protobuf::Closure {
 public:
  explicit FnClosure(std::function<void()> fn) : fn_(std::move(fn)) {}
  void Run() override {
    auto fn = std::move(fn_);
    delete this;
    fn();
  }

 private:
  std::function<void()> fn_;
};

}  // namespace

void EchoServiceImpl::Echo(google::protobuf::RpcController* base, const echo::EchoRequest* req,
                           echo::EchoResponse* resp, google::protobuf::Closure* done) {
  auto* cntl = static_cast<Controller*>(base);
  calls_.fetch_add(1, std::memory_order_relaxed);
  if (req->fail_code() != 0) {
    cntl->SetFailed(error_code_from_wire(req->fail_code()), req->fail_text());
    done->Run();
    return;
  }
  if (req->response_size() != 0) {
    resp->mutable_payload()->assign(req->response_size(), 'r');
  } else {
    resp->set_payload(req->payload());
  }
  if (req->echo_attachment()) cntl->response_attachment() = cntl->request_attachment();
  if (!name_.empty()) resp->set_server(name_);
  if (const std::string* v = find_meta(cntl->request_metadata(), "trace-id"); v != nullptr)
    cntl->response_metadata().emplace_back("trace-id", *v);
  if (req->sleep_us() == 0 || cntl->loop() == nullptr) {
    done->Run();
    return;
  }
  cntl->NotifyOnCancel(new FnClosure([this, cntl] {
    if (cntl->IsCanceled()) cancelled_.fetch_add(1, std::memory_order_relaxed);
  }));
  // Timers are the loop's: from a worker thread, ask the loop to arm it.
  reactor::EventLoop* loop = cntl->loop();
  const uint64_t ns = uint64_t{req->sleep_us()} * 1000;
  if (loop->in_loop_thread()) {
    loop->run_after(ns, [done] { done->Run(); });
  } else {
    loop->post([loop, ns, done] { loop->run_after(ns, [done] { done->Run(); }); });
  }
}

void EchoServiceImpl::Expand(google::protobuf::RpcController* base, const echo::EchoRequest* req,
                             echo::EchoResponse*, google::protobuf::Closure* done) {
  auto* cntl = static_cast<Controller*>(base);
  calls_.fetch_add(1, std::memory_order_relaxed);
  ServerStream* s = cntl->stream();
  struct State {
    uint64_t next = 0;
    uint64_t count;
    echo::EchoResponse msg;
  };
  auto st = std::make_shared<State>();
  st->count = req->count();
  st->msg.mutable_payload()->assign(req->response_size(), 'e');
  auto pump = [s, st, done, cntl] {
    while (st->next < st->count) {
      st->msg.set_seq(st->next);
      Status w = s->write(st->msg);
      if (w.would_block()) return;  // on_writable resumes
      if (!w.ok()) {
        cntl->SetFailed(ErrorCode::kCancelled, std::string(w.message()));
        break;
      }
      ++st->next;
    }
    if (st->next > st->count) return;  // finished already
    st->next = st->count + 1;
    done->Run();
  };
  s->set_on_writable(pump);
  // A cancelled call (client cancel, deadline, disconnect) still ends through done.
  cntl->NotifyOnCancel(new FnClosure([st, done, cntl] {
    if (!cntl->IsCanceled() || st->next > st->count) return;
    st->next = st->count + 1;
    done->Run();
  }));
  pump();
}

void EchoServiceImpl::Collect(google::protobuf::RpcController* base, const echo::EchoRequest*,
                              echo::EchoResponse* resp, google::protobuf::Closure* done) {
  auto* cntl = static_cast<Controller*>(base);
  calls_.fetch_add(1, std::memory_order_relaxed);
  ServerStream* s = cntl->stream();
  s->set_on_message([resp](const google::protobuf::Message& m, const Attachment& att) {
    const auto& r = static_cast<const echo::EchoRequest&>(m);
    resp->set_total_bytes(resp->total_bytes() + r.payload().size() + att.size());
    resp->set_seq(resp->seq() + 1);
  });
  auto finished = std::make_shared<bool>(false);
  s->set_on_half_close([done, finished] {
    *finished = true;
    done->Run();
  });
  cntl->NotifyOnCancel(new FnClosure([done, finished, cntl] {
    if (!cntl->IsCanceled() || *finished) return;
    *finished = true;
    done->Run();
  }));
}

void EchoServiceImpl::Chat(google::protobuf::RpcController* base, const echo::EchoRequest*, echo::EchoResponse*,
                           google::protobuf::Closure* done) {
  auto* cntl = static_cast<Controller*>(base);
  calls_.fetch_add(1, std::memory_order_relaxed);
  ServerStream* s = cntl->stream();
  struct State {
    std::deque<echo::EchoResponse> out;
    uint64_t seq = 0;
    bool half_closed = false;
    bool finished = false;
  };
  auto st = std::make_shared<State>();
  // Echo each message back; when the client's window is spent, pause reading (its
  // messages wait in our window) until ours comes back.
  auto pump = [s, st, done] {
    while (!st->out.empty()) {
      Status w = s->write(st->out.front());
      if (w.would_block()) {
        s->pause();
        return;
      }
      st->out.pop_front();
      if (!w.ok()) break;
    }
    s->resume();
    if (st->half_closed && st->out.empty() && !st->finished) {
      st->finished = true;
      done->Run();
    }
  };
  s->set_on_writable(pump);
  s->set_on_message([st, pump](const google::protobuf::Message& m, const Attachment&) {
    const auto& r = static_cast<const echo::EchoRequest&>(m);
    echo::EchoResponse resp;
    resp.set_payload(r.payload());
    resp.set_seq(st->seq++);
    st->out.push_back(std::move(resp));
    pump();
  });
  s->set_on_half_close([st, pump] {
    st->half_closed = true;
    pump();
  });
  cntl->NotifyOnCancel(new FnClosure([st, done, cntl] {
    if (!cntl->IsCanceled() || st->finished) return;
    st->finished = true;
    done->Run();
  }));
}

}  // namespace conduit::rpc
