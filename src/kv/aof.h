// The append-only file: every command that changed data, as RESP, in execution order.
//
// Writing: feed() appends to a memory buffer; flush() writes it (and fdatasyncs it under
// appendfsync always) before the replies of those commands are sent, so an acknowledged
// write is on disk under `always`, in the kernel under `everysec`/`no`.  Under `everysec` a
// background thread fdatasyncs once a second.
//
// Rewriting (BGREWRITEAOF): fork(); the child writes the keyspace as it was at the fork as
// a minimal command list to a temporary file (copy-on-write gives it a consistent
// snapshot without stopping the server); the parent keeps serving and, besides the normal
// appends to the old file, keeps the commands executed since the fork in a rewrite
// buffer.  When the child succeeds the parent appends that buffer to the new file,
// fsyncs it and renames it over the old one.  A failed child leaves the old file alone.
//
// Loading (aof_load.cc): load_aof() replays the file through the caller's executor.  It
// reads everything the writer can write (no client limits; the file's own size bounds
// every length).  A torn last record (a crash in the middle of a write, nothing readable
// after it) is dropped with a warning and the file is truncated to the last complete
// command; damage before the end, or a command that fails, refuses the load with the
// offset, the bytes there, and how to cut out exactly the damaged range.
//
// Integrity: records carry no checksum (as in Redis).  Damage to the framing (a length,
// a '*' or '$') is found; a changed byte inside a value or a key loads silently as
// different data.  See docs/KV.md.
//
// Threading: loop thread only (the fsync thread is internal).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <thread>

#include "conduit/base/fd.h"
#include "conduit/base/status.h"
#include "conduit/kv/resp.h"
#include "conduit/kv/server.h"

namespace conduit::kv {

struct AofLoadResult {
  uint64_t commands = 0;
  uint64_t bytes = 0;           // valid bytes (the file's new size if it was truncated)
  uint64_t truncated_bytes = 0; // torn tail dropped (and an unfinished transaction)
  bool reverted_transaction = false;  // the file ended inside MULTI ... EXEC: cut back to MULTI
};

// exec runs one command and returns OK, or the error the command replied.
using AofExecutor = std::function<Status(std::span<const std::string_view>)>;
Result<AofLoadResult> load_aof(const std::string& path, bool allow_truncated_tail, const AofExecutor& exec);

class Aof {
 public:
  static Result<std::unique_ptr<Aof>> open(const std::string& path, AppendFsync policy);
  // CONFIG SET appendonly yes (Redis' startAppendOnly): an AOF that starts with a rewrite of
  // the current dataset.  Nothing is opened yet (a file already at `path` is left of an
  // earlier run and is replaced, never appended to); the caller starts the first rewrite
  // (start_rewrite) at once.  Until it is installed, feed() keeps commands only in the
  // rewrite buffer, has_pending() is false and awaiting_first_rewrite() is true.  When it
  // fails the buffer is dropped with it: start another (a new snapshot covers them).
  static std::unique_ptr<Aof> create_empty(const std::string& path, AppendFsync policy);
  bool awaiting_first_rewrite() const { return !fd_; }
  ~Aof();
  Aof(const Aof&) = delete;
  Aof& operator=(const Aof&) = delete;

  // Queues one command executed on database `db`.  Cost: one copy of the arguments.
  void feed(int db, std::span<const std::string_view> args);
  bool has_pending() const { return !buf_.empty(); }
  // Writes what feed() queued; under kAlways also fdatasyncs.  On failure the bytes stay
  // queued (a later flush retries) and last_write_status() holds the error.
  Status flush();
  void set_policy(AppendFsync p);
  AppendFsync policy() const { return policy_; }
  const Status& last_write_status() const { return write_status_; }
  uint64_t size() const { return size_; }
  uint64_t base_size() const { return base_size_; }
  const std::string& path() const { return path_; }

  // --- rewrite ---------------------------------------------------------------------------
  // Forks a child that runs `write_snapshot(fd)` on a temporary file and _exits with 0 on
  // success.  Returns the fd to watch: it reports hangup when the child is done.
  Result<int> start_rewrite(const std::function<bool(int fd)>& write_snapshot);
  bool rewrite_in_progress() const { return child_pid_ > 0; }
  // Call when the watched fd hangs up: reaps the child and, on success, installs the new
  // file.  Returns the outcome.
  Status finish_rewrite();
  // Kills a running child (shutdown).
  void abort_rewrite();
  // Waits for a running child and installs its file (finish_rewrite, blocking): the
  // shutdown of an AOF that awaits its first rewrite.
  Status wait_rewrite();
  const Status& last_rewrite_status() const { return rewrite_status_; }
  uint64_t rewrites() const { return rewrites_; }

 private:
  Aof(std::string path, UniqueFd fd, AppendFsync policy, uint64_t size);
  void start_fsync_thread();
  void fsync_thread_main();
  void append_select(ByteBuffer* b, int db);

  std::string path_;
  UniqueFd fd_;
  AppendFsync policy_;
  uint64_t size_ = 0;
  uint64_t base_size_ = 0;  // size after the last rewrite (auto-rewrite growth base)
  ByteBuffer buf_;
  int selected_db_ = -1;
  Status write_status_;

  // Rewrite state.
  pid_t child_pid_ = -1;
  UniqueFd child_pipe_;
  std::string temp_path_;
  ByteBuffer rewrite_buf_;
  int rewrite_selected_db_ = -1;
  Status rewrite_status_;
  uint64_t rewrites_ = 0;

  // everysec: background fdatasync.  fd_mu_ guards fd_ against the swap after a rewrite.
  std::mutex fd_mu_;
  std::condition_variable cv_;
  std::atomic<bool> dirty_{false};
  bool stop_ = false;
  std::thread fsync_thread_;
};

}  // namespace conduit::kv
