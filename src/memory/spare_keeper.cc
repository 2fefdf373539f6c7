#include "conduit/memory/spare_keeper.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>

#include "conduit/base/log.h"

namespace conduit::memory {

SpareKeeper::~SpareKeeper() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (!thread_.joinable()) return;
  // A fork()ed child has the thread object but not the thread: joining would wait for ever.
  if (getpid() == started_by_) thread_.join();
  else thread_.detach();
}

void SpareKeeper::keep(const std::shared_ptr<BlockPool>& pool, size_t size, size_t blocks) {
  if (!pool || blocks == 0 || size == 0) return;
  blocks = std::min(blocks, kMaxBlocks);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;
    Want* found = nullptr;
    for (Want& w : wants_)
      if (w.size == size && !w.pool.owner_before(pool) && !pool.owner_before(w.pool)) found = &w;
    if (found != nullptr) {
      found->blocks = std::max(found->blocks, blocks);
    } else {
      if (wants_.size() >= kMaxWants) return;
      wants_.push_back(Want{pool, size, blocks});
    }
    poked_ = true;
    if (!thread_.joinable()) {
      started_by_ = getpid();
      thread_ = std::thread([this] { run(); });
    }
  }
  cv_.notify_one();
}

void SpareKeeper::poke() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (wants_.empty()) return;
    poked_ = true;
  }
  cv_.notify_one();
}

uint64_t SpareKeeper::rounds() const {
  std::lock_guard<std::mutex> lock(mu_);
  return rounds_;
}

bool SpareKeeper::idle() const {
  std::lock_guard<std::mutex> lock(mu_);
  return !poked_ && !busy_;
}

void SpareKeeper::run() {
  // Background work: the lowest priority of the normal class, so that keeping spares
  // yields the CPU to the threads that serve connections (Linux: nice is per thread).
  (void)setpriority(PRIO_PROCESS, static_cast<id_t>(gettid()), 19);
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || poked_; });
    if (stop_) return;
    poked_ = false;
    busy_ = true;
    std::vector<Want> wants = wants_;
    lock.unlock();
    bool gone = false;
    for (const Want& w : wants) {
      std::shared_ptr<BlockPool> pool = w.pool.lock();
      if (!pool) {
        gone = true;
        continue;
      }
      // At the cap the pool is full of blocks in use: nothing to keep spare, and the next
      // allocation there would-blocks as it would without a keeper.
      if (Status s = pool->reserve(w.size, w.blocks); !s.ok() && !s.would_block())
        CONDUIT_LOG(kWarn) << "memory: keeping spare " << w.size << "-byte blocks in pool '" << pool->options().name
                           << "': " << s.to_string();
    }
    lock.lock();
    if (gone) std::erase_if(wants_, [](const Want& w) { return w.pool.expired(); });
    busy_ = false;
    ++rounds_;
  }
}

}  // namespace conduit::memory
