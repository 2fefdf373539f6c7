#include "conduit/memory/pool.h"

#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "conduit/base/clock.h"
#include "conduit/base/log.h"

namespace conduit::memory {

using detail::Storage;

namespace {
constexpr size_t kHuge = size_t{2} << 20;
std::atomic<uint64_t> g_next_pool_id{1};

size_t round_up(size_t v, size_t to) { return (v + to - 1) / to * to; }

std::string memlock_hint() {
  rlimit rl{};
  if (getrlimit(RLIMIT_MEMLOCK, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return "";
  return " (RLIMIT_MEMLOCK is " + std::to_string(rl.rlim_cur >> 10) +
         " KiB: registered memory is locked memory; raise it with `ulimit -l unlimited`, "
         "LimitMEMLOCK=infinity for a systemd unit, or /etc/security/limits.conf)";
}
}  // namespace

struct BlockPool::Region {
  uint8_t* base = nullptr;
  size_t bytes = 0;
  bool huge = false;
  int cls = -1;  // -1: a large block with a region of its own
  size_t block_size = 0;
  RegionKeys keys[kMaxDomains]{};
  Registrar::Registration regs[kMaxDomains]{};
  uint32_t domains = 0;
  std::unique_ptr<Storage[]> blocks;
  size_t nblocks = 0;
};

struct BlockPool::ClassState {
  size_t block_size = 0;
  size_t regions = 0;
  size_t blocks = 0;
  std::vector<Storage*> free;
};

// ---------------------------------------------------------------------------------------
// Per-thread caches: a few free blocks per (pool, class), so that allocate and release on
// one thread take no lock.  At thread exit the blocks go back to their pool if it is still
// alive (a weak reference says so).

namespace {
struct ThreadCache {
  struct PerPool {
    uint64_t id = 0;
    std::weak_ptr<BlockPool> pool;
    std::vector<std::vector<Storage*>> lists;
    std::vector<size_t> limits;
  };
  std::vector<PerPool> pools;
  ~ThreadCache();
  PerPool* find(uint64_t id) {
    for (PerPool& p : pools)
      if (p.id == id) return &p;
    return nullptr;
  }
};
thread_local ThreadCache t_cache;
// Set when this thread's cache has been destroyed.  Thread-local destructors run before
// atexit handlers at exit(), so code that releases or allocates blocks from an atexit
// handler (the preload library closing its channels) must find no cache: it goes to the
// shared lists instead of growing a destroyed vector (a double free).  Trivially
// destructible, so it outlives the cache.
thread_local bool t_cache_gone = false;

void release_pool_block(Storage* s) { static_cast<BlockPool*>(s->context)->release_block(s); }

// Null once the thread's cache is gone (see t_cache_gone).
ThreadCache::PerPool* cache_of(BlockPool& p) {
  if (t_cache_gone) return nullptr;
  if (ThreadCache::PerPool* tc = t_cache.find(p.id())) return tc;
  const PoolOptions& o = p.options();
  t_cache.pools.push_back({p.id(), p.weak_from_this(), std::vector<std::vector<Storage*>>(o.classes.size()), {}});
  ThreadCache::PerPool* tc = &t_cache.pools.back();
  for (size_t c : o.classes) tc->limits.push_back(o.thread_cache_bytes == 0 ? 0 : std::max<size_t>(2, o.thread_cache_bytes / c));
  return tc;
}
}  // namespace

ThreadCache::~ThreadCache() {
  t_cache_gone = true;
  for (PerPool& p : pools) {
    auto pool = p.pool.lock();
    if (!pool) continue;  // gone: its regions are unmapped, these pointers are dead
    for (auto& list : p.lists)
      for (Storage* s : list) pool->return_shared(s);
  }
}

// ---------------------------------------------------------------------------------------

BlockPool::BlockPool(PoolOptions options) : options_(std::move(options)), id_(g_next_pool_id.fetch_add(1)) {}

Result<std::shared_ptr<BlockPool>> BlockPool::create(PoolOptions o) {
  if (o.classes.empty()) return Status(Code::kInvalidArgument, "memory pool: no size classes");
  for (size_t i = 0; i < o.classes.size(); ++i) {
    const size_t c = o.classes[i];
    if (c < 64 || (c & (c - 1)) != 0 || (i > 0 && c <= o.classes[i - 1]))
      return Status(Code::kInvalidArgument, "memory pool: size classes must be ascending powers of two >= 64");
  }
  if (o.region_bytes < 4096 || o.region_bytes % 4096 != 0)
    return Status(Code::kInvalidArgument, "memory pool: region_bytes must be a positive multiple of 4096");
  if (o.cap_bytes < o.region_bytes) return Status(Code::kInvalidArgument, "memory pool: cap_bytes below one region");
  if (o.solo_bytes % 4096 != 0)
    return Status(Code::kInvalidArgument, "memory pool: solo_bytes must be 0 or a multiple of 4096");
  // The deleter does not delete while blocks are out (orphan()): a slice may outlive every
  // shared_ptr to its pool, and the last one released then deletes it.
  std::shared_ptr<BlockPool> p(new BlockPool(std::move(o)), [](BlockPool* b) { b->orphan(); });
  for (size_t c : p->options_.classes) {
    auto cs = std::make_unique<ClassState>();
    cs->block_size = c;
    p->classes_.push_back(std::move(cs));
  }
  return p;
}

BlockPool::~BlockPool() {
  // No block is out (a block keeps its pool alive): every region can go.
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& r : regions_) unmap_region(*r);
}

int BlockPool::class_of(size_t size) const {
  for (size_t i = 0; i < options_.classes.size(); ++i)
    if (size <= options_.classes[i]) return static_cast<int>(i);
  return -1;
}

Result<unsigned> BlockPool::add_registrar(std::shared_ptr<Registrar> r) {
  if (!r) return Status(Code::kInvalidArgument, "memory pool: null registrar");
  std::lock_guard<std::mutex> lock(mu_);
  if (registrars_.size() >= kMaxDomains)
    return Status(Code::kResourceExhausted, "memory pool: at most " + std::to_string(kMaxDomains) + " registrars");
  const unsigned d = static_cast<unsigned>(registrars_.size());
  // Register what exists; undo on failure so the pool stays consistent.
  std::vector<Region*> done;
  for (auto& reg : regions_) {
    const uint64_t t0 = monotonic_ns();
    auto got = r->register_memory(reg->base, reg->bytes);
    if (!got.ok()) {
      for (Region* u : done) {
        r->deregister(u->regs[d]);
        u->domains &= ~(1u << d);
      }
      return got.status().annotate("memory pool '" + options_.name + "': registering existing regions with " +
                                   r->name() + memlock_hint());
    }
    register_ns_ += monotonic_ns() - t0;
    ++registrations_;
    reg->regs[d] = *got;
    reg->keys[d] = got->keys;
    reg->domains |= 1u << d;
    done.push_back(reg.get());
  }
  for (auto& reg : regions_)
    for (size_t i = 0; i < reg->nblocks; ++i) reg->blocks[i].domains = reg->domains;
  registrars_.push_back(std::move(r));
  return d;
}

// Registers `reg` with registrars[first..]; on failure undoes those and leaves `reg`
// registered with [0, first) only.  Adds the calls made and their time to *count, *ns.
Status BlockPool::register_with(const std::vector<std::shared_ptr<Registrar>>& registrars, size_t first,
                                Region& reg, uint64_t* count, uint64_t* ns) const {
  for (size_t d = first; d < registrars.size(); ++d) {
    const uint64_t t0 = monotonic_ns();
    auto got = registrars[d]->register_memory(reg.base, reg.bytes);
    if (!got.ok()) {
      for (size_t u = first; u < d; ++u) registrars[u]->deregister(reg.regs[u]);
      reg.domains &= (1u << first) - 1;
      return got.status().annotate("memory pool '" + options_.name + "': registering " + std::to_string(reg.bytes >> 10) +
                                   " KiB with " + registrars[d]->name() + memlock_hint());
    }
    *ns += monotonic_ns() - t0;
    ++*count;
    reg.regs[d] = *got;
    reg.keys[d] = got->keys;
    reg.domains |= 1u << d;
  }
  return {};
}

Status BlockPool::register_region(Region& reg) {
  return register_with(registrars_, 0, reg, &registrations_, &register_ns_);
}

void BlockPool::unmap_region(Region& reg) {
  for (size_t d = 0; d < registrars_.size(); ++d)
    if ((reg.domains >> d) & 1) registrars_[d]->deregister(reg.regs[d]);
  reg.domains = 0;
  if (reg.base) munmap(reg.base, reg.bytes);
  bytes_mapped_ -= reg.bytes;
  reg.base = nullptr;
}

namespace {
// Writes one byte of every page, so that registering the region finds its pages present.
// Pinning absent pages faults them in under the process's mmap lock, held for the whole
// range (a 2 MiB region: ~6 ms in the qemu guest, nearly all of it the kernel zeroing
// pages), which stalls every mmap meanwhile -- another thread's CQ or QP creation, whose
// queues are mapped.  Faulted here, each page takes the lock on its own, and registration
// itself is then ~0.3 ms.  The pages would be pinned by registration anyway: no extra RSS.
void fault_in(uint8_t* p, size_t bytes) {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  for (size_t off = 0; off < bytes; off += page) static_cast<volatile uint8_t*>(p)[off] = 0;
}
}  // namespace

// Maps `bytes` of pages for a region (no lock needed; bytes_mapped_ is the caller's).
Result<std::unique_ptr<BlockPool::Region>> BlockPool::map_pages(size_t bytes) const {
  auto reg = std::make_unique<Region>();
  reg->bytes = bytes;
  void* p = MAP_FAILED;
  if (options_.hugepages && bytes % kHuge == 0)
    p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
  reg->huge = p != MAP_FAILED;
  if (p == MAP_FAILED) {
    p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return Status::FromErrnoAuto(errno, "memory pool: mmap of " + std::to_string(bytes) + " bytes");
    if (options_.hugepages) (void)madvise(p, bytes, MADV_HUGEPAGE);  // transparent hugepages where allowed
    if (!registrars_.empty()) fault_in(static_cast<uint8_t*>(p), bytes);
  }
  reg->base = static_cast<uint8_t*>(p);
  return reg;
}

// Cuts a mapped, registered region into blocks of class `cls` (classes_.size(): one
// large block) and adopts it.  mu_ held.
BlockPool::Region* BlockPool::adopt_region(std::unique_ptr<Region> reg, size_t cls) {
  reg->cls = static_cast<int>(cls);
  reg->block_size = cls < classes_.size() ? classes_[cls]->block_size : reg->bytes;
  reg->nblocks = reg->bytes / reg->block_size;
  reg->blocks = std::make_unique<Storage[]>(reg->nblocks);
  for (size_t i = 0; i < reg->nblocks; ++i) {
    Storage& s = reg->blocks[i];
    s.data = reg->base + i * reg->block_size;
    s.capacity = reg->block_size;
    s.keys = reg->keys;
    s.domains = reg->domains;
    s.owner = this;
    s.release = release_pool_block;
    s.context = this;
    s.cls = cls < classes_.size() ? static_cast<uint8_t>(cls) : uint8_t{0xff};
  }
  Region* raw = reg.get();
  regions_.push_back(std::move(reg));
  if (cls < classes_.size()) {
    ClassState& c = *classes_[cls];
    ++c.regions;
    c.blocks += raw->nblocks;
  }
  return raw;
}

Result<BlockPool::Region*> BlockPool::map_region(size_t cls, size_t bytes) {
  if (bytes_mapped_ + bytes > options_.cap_bytes) return Status::WouldBlock();
  CONDUIT_ASSIGN_OR_RETURN(auto reg, map_pages(bytes));
  bytes_mapped_ += bytes;
  if (Status s = register_region(*reg); !s.ok()) {
    unmap_region(*reg);
    return s;
  }
  return adopt_region(std::move(reg), cls);
}

Status BlockPool::reserve(size_t size, size_t blocks) {
  const int cls = class_of(size);
  if (size == 0 || cls < 0)
    return Status(Code::kInvalidArgument, "memory pool '" + options_.name + "': reserve(" + std::to_string(size) +
                                              ") is not the size of a class");
  bool added = false;
  Status result;
  for (;;) {
    std::vector<std::shared_ptr<Registrar>> registrars;
    size_t bytes = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (unused_blocks_locked(cls) >= blocks) break;
      ClassState& c = *classes_[static_cast<size_t>(cls)];
      bytes = region_bytes_for(cls, c.block_size);
      if (bytes_mapped_ + bytes > options_.cap_bytes) {
        result = Status::WouldBlock();
        break;
      }
      bytes_mapped_ += bytes;  // held for the region built below, so the cap holds meanwhile
      registrars = registrars_;
    }
    // The slow part -- mapping and registering -- without the lock.
    uint64_t count = 0, ns = 0;
    auto reg = map_pages(bytes);
    Status s = reg.ok() ? register_with(registrars, 0, **reg, &count, &ns) : reg.status();
    std::lock_guard<std::mutex> lock(mu_);
    registrations_ += count;
    register_ns_ += ns;
    // A registrar attached meanwhile (rare): register with it too, under the lock.
    if (s.ok() && registrars_.size() > registrars.size())
      s = register_with(registrars_, registrars.size(), **reg, &registrations_, &register_ns_);
    if (!s.ok()) {
      if (reg.ok()) unmap_region(**reg);  // gives the bytes back
      else bytes_mapped_ -= bytes;
      result = s;
      break;
    }
    Region* r = adopt_region(std::move(*reg), static_cast<size_t>(cls));
    ClassState& c = *classes_[static_cast<size_t>(cls)];
    for (size_t i = r->nblocks; i-- > 0;) c.free.push_back(&r->blocks[i]);
    added = true;
  }
  if (added) notify_waiters();
  return result;
}

// Blocks of class `cls` that nobody holds: in the shared list or in some thread's cache
// (a released block's count is 0).  O(blocks of the class); for reserve(), off the fast path.
size_t BlockPool::unused_blocks_locked(int cls) const {
  size_t n = 0;
  for (const auto& r : regions_) {
    if (r->cls != cls) continue;
    for (size_t i = 0; i < r->nblocks; ++i) n += r->blocks[i].refs.load(std::memory_order_relaxed) == 0 ? 1 : 0;
  }
  return n;
}

size_t BlockPool::free_blocks(size_t size) const {
  const int cls = class_of(size);
  if (cls < 0) return 0;
  std::lock_guard<std::mutex> lock(mu_);
  return classes_[static_cast<size_t>(cls)]->free.size();
}

Result<detail::Storage*> BlockPool::take_shared(size_t cls, std::vector<Storage*>* refill, size_t refill_max) {
  std::lock_guard<std::mutex> lock(mu_);
  ClassState& c = *classes_[cls];
  if (c.free.empty()) {
    const size_t bytes = region_bytes_for(static_cast<int>(cls), c.block_size);
    (void)reclaim_for(bytes, static_cast<int>(cls));
    auto reg = map_region(cls, bytes);
    if (!reg.ok()) {
      if (reg.status().would_block()) would_block_.fetch_add(1, std::memory_order_relaxed);
      return reg.status();
    }
    for (size_t i = (*reg)->nblocks; i-- > 0;) c.free.push_back(&(*reg)->blocks[i]);
  }
  Storage* s = c.free.back();
  c.free.pop_back();
  // A batch for the thread cache, so the next allocations on this thread take no lock.
  while (refill != nullptr && refill->size() < refill_max && !c.free.empty()) {
    refill->push_back(c.free.back());
    c.free.pop_back();
  }
  return s;
}

Result<Slice> BlockPool::allocate(size_t size) {
  if (size == 0) return Status(Code::kInvalidArgument, "memory pool: allocate(0)");
  if (size > options_.cap_bytes)
    return Status(Code::kInvalidArgument, "memory pool '" + options_.name + "': " + std::to_string(size) +
                                              " bytes exceed its cap of " + std::to_string(options_.cap_bytes));
  const int cls = class_of(size);
  if (cls < 0) return allocate_large(size);
  Storage* s = nullptr;
  ThreadCache::PerPool* tc = cache_of(*this);
  if (tc == nullptr) {
    cache_misses_.fetch_add(1, std::memory_order_relaxed);
    CONDUIT_ASSIGN_OR_RETURN(s, take_shared(static_cast<size_t>(cls), nullptr, 0));
  } else if (!tc->lists[cls].empty()) {
    s = tc->lists[cls].back();
    tc->lists[cls].pop_back();
    cache_hits_.fetch_add(1, std::memory_order_relaxed);
  } else {
    cache_misses_.fetch_add(1, std::memory_order_relaxed);
    auto got = take_shared(static_cast<size_t>(cls), &tc->lists[cls], tc->limits[cls] / 2);
    if (got.status().would_block()) {
      // At the cap: this thread's cached blocks of other classes may free a whole region.
      flush_thread_cache();
      got = take_shared(static_cast<size_t>(cls), &tc->lists[cls], tc->limits[cls] / 2);
    }
    CONDUIT_ASSIGN_OR_RETURN(s, std::move(got));
  }
  s->refs.store(1, std::memory_order_relaxed);
  note_in_use(s->capacity);
  return Slice(s, 0, size);
}

// Lifetime without a cost per block: the count of blocks out is kept anyway; when it
// reaches zero after the last shared_ptr went (orphaned_), that release deletes the pool.
// orphan() and the last release each check the other's store (sequentially consistent), so
// exactly one of them sees both and deletes (deleting_ makes it exactly one).
void BlockPool::note_in_use(size_t capacity) {
  bytes_in_use_.fetch_add(capacity, std::memory_order_relaxed);
  in_use_blocks_.fetch_add(1, std::memory_order_relaxed);
}

void BlockPool::note_released(size_t capacity) {
  bytes_in_use_.fetch_sub(capacity, std::memory_order_relaxed);
  if (in_use_blocks_.fetch_sub(1, std::memory_order_seq_cst) == 1 && orphaned_.load(std::memory_order_seq_cst) &&
      !deleting_.exchange(true))
    delete this;
}

void BlockPool::orphan() {
  orphaned_.store(true, std::memory_order_seq_cst);
  if (in_use_blocks_.load(std::memory_order_seq_cst) == 0 && !deleting_.exchange(true)) delete this;
}

Result<Slice> BlockPool::allocate_large(size_t size) {
  Region* reg = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const size_t bytes = region_bytes_for(-1, size);
    (void)reclaim_for(bytes, -1);
    auto r = map_region(classes_.size(), bytes);
    if (!r.ok()) {
      if (r.status().would_block()) would_block_.fetch_add(1, std::memory_order_relaxed);
      return r.status();
    }
    reg = *r;
    reg->cls = -1;
  }
  Storage* s = &reg->blocks[0];
  s->refs.store(1, std::memory_order_relaxed);
  note_in_use(s->capacity);
  return Slice(s, 0, size);
}

Result<Chain> BlockPool::allocate_chain(size_t size, size_t max_block) {
  if (max_block == 0) return Status(Code::kInvalidArgument, "memory pool: allocate_chain with max_block 0");
  Chain out;
  while (out.size() < size) {
    CONDUIT_ASSIGN_OR_RETURN(Slice s, allocate(std::min(size - out.size(), max_block)));
    out.append(std::move(s));
  }
  return out;
}

void BlockPool::release_block(Storage* s) {
  const size_t capacity = s->capacity;
  if (s->cls == 0xff) {  // a large block: its region goes with it
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = std::find_if(regions_.begin(), regions_.end(), [s](const auto& r) { return &r->blocks[0] == s; });
      if (it != regions_.end()) {
        unmap_region(**it);
        regions_.erase(it);
      }
    }
    notify_waiters();
  } else if (!cache_block(s, s->cls)) {
    if (pressure_.load(std::memory_order_acquire)) notify_waiters();
  }
  note_released(capacity);  // last: it may delete the pool
}

// Into this thread's cache; a full cache sends half of itself (and s) to the shared list
// under one lock.  With waiters (pressure_), blocks go to the shared list at once, where
// the waiter can get them.  Returns true if s stayed in the cache.
bool BlockPool::cache_block(Storage* s, size_t cls) {
  if (pressure_.load(std::memory_order_acquire)) {
    return_shared(s);
    return false;
  }
  ThreadCache::PerPool* tc = cache_of(*this);
  if (tc == nullptr) {
    return_shared(s);
    return false;
  }
  std::vector<Storage*>& list = tc->lists[cls];
  if (list.size() < tc->limits[cls]) {
    list.push_back(s);
    return true;
  }
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Storage*>& shared = classes_[cls]->free;
  shared.push_back(s);
  const size_t keep = list.size() / 2;
  shared.insert(shared.end(), list.begin() + static_cast<std::ptrdiff_t>(keep), list.end());
  list.resize(keep);
  return false;
}

size_t BlockPool::region_bytes_for(int cls, size_t bytes) const {
  if (cls < 0) return round_up(bytes, kHuge);
  if (options_.solo_bytes != 0 && bytes >= options_.solo_bytes) return round_up(bytes, 4096);  // one block
  return round_up(std::max(options_.region_bytes, bytes), options_.region_bytes);
}

bool BlockPool::region_free(const Region& r) const {
  if (r.cls < 0 || static_cast<size_t>(r.cls) >= classes_.size()) return false;
  const Storage* lo = r.blocks.get();
  const Storage* hi = lo + r.nblocks;
  size_t n = 0;
  for (const Storage* s : classes_[static_cast<size_t>(r.cls)]->free) n += s >= lo && s < hi;
  return n == r.nblocks;
}

bool BlockPool::reclaim_for(size_t bytes, int keep_cls) {
  // Linear in the free lists: only at the cap, where the alternative is to refuse.
  for (size_t i = 0; i < regions_.size() && bytes_mapped_ + bytes > options_.cap_bytes;) {
    Region& r = *regions_[i];
    if (r.cls == keep_cls || !region_free(r)) {
      ++i;
      continue;
    }
    ClassState& c = *classes_[static_cast<size_t>(r.cls)];
    const Storage* lo = r.blocks.get();
    const Storage* hi = lo + r.nblocks;
    std::erase_if(c.free, [&](const Storage* s) { return s >= lo && s < hi; });
    --c.regions;
    c.blocks -= r.nblocks;
    unmap_region(r);
    regions_.erase(regions_.begin() + static_cast<std::ptrdiff_t>(i));
    ++reclaimed_;
  }
  return bytes_mapped_ + bytes <= options_.cap_bytes;
}

void BlockPool::flush_thread_cache() {
  ThreadCache::PerPool* tc = cache_of(*this);
  if (tc == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t c = 0; c < classes_.size(); ++c) {
    std::vector<Storage*>& list = tc->lists[c];
    classes_[c]->free.insert(classes_[c]->free.end(), list.begin(), list.end());
    list.clear();
  }
}

void BlockPool::return_shared(Storage* s) {
  std::lock_guard<std::mutex> lock(mu_);
  classes_[s->cls]->free.push_back(s);
}

void BlockPool::wait(MemoryWaiter* w, size_t size) {
  bool now = false;
  if (size != 0) flush_thread_cache();  // this thread's cached blocks may complete a free region
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (std::find(waiters_.begin(), waiters_.end(), w) == waiters_.end()) waiters_.push_back(w);
    pressure_.store(true, std::memory_order_release);
    // Memory may have come back between the failed allocation and this call.  Only what
    // can serve `size` counts: free blocks of another class do not (telling the waiter
    // then would have it retry, fail and wait again, round and round).
    if (size == 0) {
      now = bytes_mapped_ + options_.region_bytes <= options_.cap_bytes;
      for (auto& c : classes_) now = now || !c->free.empty();
    } else {
      const int cls = class_of(size);
      now = bytes_mapped_ + region_bytes_for(cls, cls >= 0 ? classes_[static_cast<size_t>(cls)]->block_size : size) <=
            options_.cap_bytes;
      if (cls >= 0) now = now || !classes_[static_cast<size_t>(cls)]->free.empty();
      for (size_t i = 0; i < regions_.size() && !now; ++i) now = region_free(*regions_[i]);  // reclaimable
    }
  }
  if (now) notify_waiters();
}

void BlockPool::cancel_wait(MemoryWaiter* w) {
  std::lock_guard<std::mutex> lock(mu_);
  waiters_.erase(std::remove(waiters_.begin(), waiters_.end(), w), waiters_.end());
  if (waiters_.empty()) pressure_.store(false, std::memory_order_release);
}

void BlockPool::notify_waiters() {
  std::vector<MemoryWaiter*> ws;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ws.swap(waiters_);
    pressure_.store(false, std::memory_order_release);
  }
  for (MemoryWaiter* w : ws) w->on_memory_available();
}

PoolStats BlockPool::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  PoolStats st;
  st.regions = regions_.size();
  for (const auto& r : regions_) {
    st.hugepage_regions += r->huge ? 1 : 0;
    st.bytes_registered += r->bytes * static_cast<size_t>(__builtin_popcount(r->domains));
  }
  st.bytes_mapped = bytes_mapped_;
  st.bytes_in_use = bytes_in_use_.load(std::memory_order_relaxed);
  st.registrations = registrations_;
  st.register_ns = register_ns_;
  st.cache_hits = cache_hits_.load(std::memory_order_relaxed);
  st.cache_misses = cache_misses_.load(std::memory_order_relaxed);
  st.would_block = would_block_.load(std::memory_order_relaxed);
  st.regions_reclaimed = reclaimed_;
  size_t in_use_total = in_use_blocks_.load(std::memory_order_relaxed);
  (void)in_use_total;
  for (const auto& c : classes_) {
    ClassStats cs;
    cs.block_size = c->block_size;
    cs.regions = c->regions;
    cs.free = c->free.size();
    cs.in_use = 0;
    st.classes.push_back(cs);
  }
  for (const auto& r : regions_) {
    if (r->cls < 0) continue;
    ClassStats& cs = st.classes[static_cast<size_t>(r->cls)];
    for (size_t i = 0; i < r->nblocks; ++i) cs.in_use += r->blocks[i].refs.load(std::memory_order_relaxed) != 0 ? 1 : 0;
  }
  for (const auto& r : registrars_) st.registrars.push_back(r->name());
  return st;
}

}  // namespace conduit::memory
