#include "cq_hub.h"

#include <cerrno>
#include <utility>
#include <vector>

#include "conduit/base/log.h"

namespace conduit::transport::rdma {

Result<std::shared_ptr<CqHub>> CqHub::create(reactor::EventLoop& loop, std::shared_ptr<verbs::Context> dev) {
  CONDUIT_ASSIGN_OR_RETURN(auto ch, verbs::CompletionChannel::create(std::move(dev)));
  std::shared_ptr<CqHub> hub(new CqHub(loop, std::move(ch)));
  CONDUIT_RETURN_IF_ERROR(loop.add(hub->channel_->fd(), reactor::kReadable, hub.get()));
  return hub;
}

CqHub::~CqHub() { unwatch(); }

void CqHub::unwatch() {
  if (loop_ != nullptr) (void)loop_->remove(channel_->fd());
  loop_ = nullptr;
}

void CqHub::on_events(uint32_t) {
  // A sink may drop the loop context's last reference (its handler closes everything): the
  // hub stays until this dispatch ends.
  const std::shared_ptr<CqHub> keep = shared_from_this();
  // Read everything pending first (acknowledging each event at once), then dispatch: a
  // sink may detach or destroy CQs, its own or (closing) another's, while it runs.
  std::vector<std::pair<ibv_cq*, int>> fired;
  for (;;) {
    ibv_cq* cq = nullptr;
    void* ctx = nullptr;
    if (ibv_get_cq_event(channel_->native_handle(), &cq, &ctx) != 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK)
        CONDUIT_LOG(kWarn) << "rdma: ibv_get_cq_event on the loop's completion channel: errno " << errno;
      break;
    }
    ibv_ack_cq_events(cq, 1);
    // A CQ raises one event per arming and is re-armed only by its sink, below: so it is
    // (almost always) here once; a repeat just adds to its count.
    if (!fired.empty() && fired.back().first == cq) ++fired.back().second;
    else fired.emplace_back(cq, 1);
  }
  for (const auto& [cq, n] : fired) {
    auto it = sinks_.find(cq);
    if (it != sinks_.end()) it->second->on_cq_event(n);  // a sink detached meanwhile is not found
  }
}

}  // namespace conduit::transport::rdma
