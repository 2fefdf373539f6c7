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
    start_locked();
  }
  cv_.notify_one();
}

void SpareKeeper::keep(const std::shared_ptr<Stock>& stock) {
  if (!stock) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;
    const bool known = std::any_of(stocks_.begin(), stocks_.end(), [&](const std::weak_ptr<Stock>& w) {
      return !w.owner_before(stock) && !stock.owner_before(w);
    });
    if (!known) {
      if (stocks_.size() >= kMaxWants) return;
      stocks_.push_back(stock);
    }
    start_locked();
  }
  cv_.notify_one();
}

void SpareKeeper::start_locked() {
  poked_ = true;
  if (thread_.joinable()) return;
  started_by_ = getpid();
  thread_ = std::thread([this] { run(); });
}

void SpareKeeper::poke() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (wants_.empty() && stocks_.empty()) return;
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
    std::vector<std::weak_ptr<Stock>> stocks = stocks_;
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
    for (const std::weak_ptr<Stock>& w : stocks) {
      if (std::shared_ptr<Stock> stock = w.lock()) stock->top_up();
      else gone = true;
    }
    lock.lock();
    if (gone) {
      std::erase_if(wants_, [](const Want& w) { return w.pool.expired(); });
      std::erase_if(stocks_, [](const std::weak_ptr<Stock>& w) { return w.expired(); });
    }
    busy_ = false;
    ++rounds_;
  }
}

}  // namespace conduit::memory
