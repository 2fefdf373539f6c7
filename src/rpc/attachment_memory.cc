// allocate_attachment (include/conduit/rpc/attachment.h): attachment memory from a
// connection's registered pool.  Apart from attachment.cc so that the fuzz target, which
// builds the frame reader alone, needs no pool.
#include <algorithm>
#include <chrono>
#include <thread>

#include "conduit/rpc/attachment.h"

namespace conduit::rpc {

Result<memory::Chain> allocate_attachment(memory::BlockPool* pool, size_t bytes, uint64_t wait_ms, size_t max_block) {
  if (max_block == 0) return Status(Code::kInvalidArgument, "rpc: allocate_attachment with max_block 0");
  if (bytes == 0) return memory::Chain();
  if (pool == nullptr) {
    memory::Chain out;
    for (size_t off = 0; off < bytes; off += max_block) out.append(memory::Slice::heap(std::min(max_block, bytes - off)));
    return out;
  }
  if (bytes > pool->options().cap_bytes)
    return Status(Code::kInvalidArgument, "rpc: an attachment of " + std::to_string(bytes) + " bytes exceeds pool '" +
                                              pool->options().name + "' (cap " + std::to_string(pool->options().cap_bytes) +
                                              " bytes)");
  // Polling rather than BlockPool::wait(): a MemoryWaiter may still be called after
  // cancel_wait() returns (the pool calls waiters outside its lock), so a waiter on this
  // stack could be reached after we left.  A poll costs an allocate attempt per step.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  auto pause = std::chrono::microseconds(20);
  for (;;) {
    auto got = pool->allocate_chain(bytes, max_block);
    if (got.ok() || !got.status().would_block()) return got;
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      const memory::PoolStats st = pool->stats();
      return Status(Code::kResourceExhausted,
                    "rpc: pool '" + pool->options().name + "' has no room for an attachment of " + std::to_string(bytes) +
                        " bytes after " + std::to_string(wait_ms) + " ms (" + std::to_string(st.bytes_in_use) + " of " +
                        std::to_string(pool->options().cap_bytes) + " bytes in use)");
    }
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(pause, deadline - now));
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
  }
}

}  // namespace conduit::rpc
