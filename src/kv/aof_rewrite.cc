// BGREWRITEAOF: the forked child writes the keyspace as a minimal command list; worker 0
// watches the child and installs the new file (aof.h has the protocol).
#include <poll.h>
#include <unistd.h>

#include <cerrno>

#include "conduit/base/log.h"
#include "numbers.h"
#include "server_impl.h"

namespace conduit::kv {

std::string ServerImpl::bgrewriteaof() {
  if (!aof_) return "ERR Append only file is disabled (appendonly no): nothing to rewrite";
  if (aof_->rewrite_in_progress()) return "ERR Background append only file rewriting already in progress";
  // mu_ is held: no other worker is inside a command while the child's snapshot is forked.
  auto fd = aof_->start_rewrite([this](int out) { return write_snapshot(out); });
  if (!fd.ok()) return "ERR " + std::string(fd.status().message());
  rewrite_fd_ = *fd;
  watch_rewrite(rewrite_fd_);
  ++aof_rewrites_scheduled_;
  return "";
}

std::string ServerImpl::start_aof() {
  if (aof_) return "";
  aof_ = Aof::create_empty(aof_path(), options_.appendfsync);
  if (std::string err = bgrewriteaof(); !err.empty()) {
    aof_.reset();
    CONDUIT_LOG(kWarn) << "aof: cannot turn the AOF on: " << err;
    return "Unable to turn on AOF: " + (err.rfind("ERR ", 0) == 0 ? err.substr(4) : err);
  }
  CONDUIT_LOG(kInfo) << "aof: turned on at run time: " << aof_path()
                     << " will be a rewrite of the current dataset, appended to from then on";
  return "";
}

void ServerImpl::stop_aof() {
  if (!aof_) return;
  if (exec_multi_fed_) {  // inside EXEC: close the transaction its first commands opened
    exec_multi_fed_ = false;
    const std::string_view exec[1] = {"EXEC"};
    aof_->feed(-1, exec);
  }
  if (Status s = aof_->flush(); !s.ok()) CONDUIT_LOG(kError) << "aof: last write before turning it off: " << s.to_string();
  rewrite_needed_ = false;
  // The rewrite child's pipe is watched on worker 0's loop, which alone may stop watching
  // it; until then the Aof (and so the pipe) stays open.  The destructor kills the child,
  // fsyncs and closes the file.
  const int fd = rewrite_fd_;
  rewrite_fd_ = -1;
  std::shared_ptr<Aof> retired(std::move(aof_));
  auto retire = [this, fd, retired]() mutable {
    if (fd >= 0 && loop_.watching(fd)) (void)loop_.remove(fd);
    retired.reset();
  };
  if (loop_.in_loop_thread()) retire();
  else post_to(*workers_[0], [this, retire]() mutable {
    std::lock_guard<std::mutex> lock(mu_);
    retire();
  });
  CONDUIT_LOG(kInfo) << "aof: turned off at run time";
}

// The child holds the pipe's write end: the read end hangs up when it exits.  Watched on
// worker 0's loop.  mu_ held.
void ServerImpl::watch_rewrite(int fd) {
  auto add = [this, fd] {
    if (rewrite_fd_ != fd || loop_.watching(fd)) return;
    if (Status s = loop_.add(fd, reactor::kReadable, &rewrite_watch_); !s.ok())
      CONDUIT_LOG(kWarn) << "aof rewrite: cannot watch the child: " << s.to_string();
  };
  if (loop_.in_loop_thread()) return add();
  post_to(*workers_[0], [this, add] {
    std::lock_guard<std::mutex> lock(mu_);
    add();
  });
}

void ServerImpl::on_rewrite_done() {
  std::lock_guard<std::mutex> lock(mu_);
  // The pipe of a child whose AOF was turned off (stop_aof) may still report until worker 0
  // stops watching it: act only when the current child's pipe has hung up.
  pollfd p{rewrite_fd_, POLLIN, 0};
  if (rewrite_fd_ < 0 || ::poll(&p, 1, 0) <= 0 || (p.revents & (POLLHUP | POLLERR | POLLIN)) == 0) return;
  if (rewrite_fd_ >= 0 && loop_.watching(rewrite_fd_)) (void)loop_.remove(rewrite_fd_);
  rewrite_fd_ = -1;
  if (aof_) (void)aof_->finish_rewrite();
}
// Runs in the forked child: plain writes, no loop.
bool ServerImpl::write_snapshot(int fd) {
  ByteBuffer buf;
  auto drain = [&](bool force) {
    if (!force && buf.size() < (1 << 20)) return true;
    size_t off = 0;
    while (off < buf.size()) {
      const ssize_t n = ::write(fd, buf.data() + off, buf.size() - off);
      if (n < 0) {
        if (errno == EINTR) continue;
        return false;
      }
      off += static_cast<size_t>(n);
    }
    buf.clear();
    return true;
  };
  std::vector<std::string_view> args;
  std::vector<std::string> owned;
  bool write_failed = false;
  auto emit_batched = [&](std::string_view cmd, std::string_view key, const auto& items, auto&& add_item) {
    constexpr size_t kBatch = 64;
    size_t in_batch = 0;
    args.clear();
    owned.clear();
    for (const auto& it : items) {
      if (in_batch == 0) {
        args.assign({cmd, key});
        owned.clear();
        owned.reserve(2 * kBatch);
      }
      add_item(it);
      if (++in_batch == kBatch) {
        append_command(&buf, args);
        // Written as it goes: the child's memory is one batch, not the biggest key.
        if (!drain(false)) write_failed = true;
        in_batch = 0;
      }
    }
    if (in_batch > 0) append_command(&buf, args);
  };
  const int64_t now = wall_ms();
  for (const auto& dbp : dbs_) {
    Database& db = *dbp;
    if (db.size() == 0) continue;
    char num[24];
    const std::string_view sel[2] = {"SELECT", std::string_view(num, ll2string(num, db.index()))};
    append_command(&buf, sel);
    bool ok = true;
    db.table().for_each([&](const Entry* e) {
      if (!ok) return;
      if (e->expire_ms >= 0 && e->expire_ms < now) return;
      const std::string_view key = e->key();
      switch (e->type) {
        case Type::kString: {
          const std::string_view a[3] = {"SET", key, e->str};
          append_command(&buf, a);
          break;
        }
        case Type::kList:
          emit_batched("RPUSH", key, e->list->items, [&](const std::string& s) { args.push_back(s); });
          break;
        case Type::kHash:
          emit_batched("HSET", key, e->hash_v->fields, [&](const auto& kv) {
            args.push_back(kv.first);
            args.push_back(kv.second);
          });
          break;
        case Type::kSet:
          emit_batched("SADD", key, e->set->members, [&](const std::string& s) { args.push_back(s); });
          break;
        case Type::kZSet:
          emit_batched("ZADD", key, e->zset->order, [&](const std::pair<double, std::string>& p) {
            char d[128];
            owned.emplace_back(d, d2string(d, sizeof d, p.first));
            args.push_back(owned.back());
            args.push_back(p.second);
          });
          break;
        case Type::kStream: {
          const StreamValue& s = *e->stream;
          for (const auto& [id, fv] : s.entries) {
            const std::string ids = id.to_string();
            args.assign({"XADD", key, ids});
            for (const std::string& f : fv) args.push_back(f);
            append_command(&buf, args);
          }
          if (s.entries.empty()) {
            // Keep an emptied stream: add a placeholder, trim it away (XSETID below restores
            // the last id, which may be 0-0 for XGROUP CREATE ... MKSTREAM).
            const std::string ids = s.last_id == StreamId{} ? std::string("0-1") : s.last_id.to_string();
            const std::string_view a[7] = {"XADD", key, "MAXLEN", "0", ids, "_", "_"};
            append_command(&buf, a);
          }
          // Redis' rewriteStreamObject: the counters, then each group, its consumers and its
          // pending entries (owner, delivery time and count kept exactly by XCLAIM).
          const std::string last = s.last_id.to_string(), added = std::to_string(s.entries_added),
                            maxdel = s.max_deleted_id.to_string();
          const std::string_view setid[7] = {"XSETID", key, last, "ENTRIESADDED", added, "MAXDELETEDID", maxdel};
          append_command(&buf, setid);
          for (const auto& [gname, g] : s.groups) {
            const std::string gl = g.last_id.to_string(), er = std::to_string(g.entries_read);
            const std::string_view create[7] = {"XGROUP", "CREATE", key, gname, gl, "ENTRIESREAD", er};
            append_command(&buf, create);
            for (const auto& [cname, c] : g.consumers) {
              const std::string_view cc[5] = {"XGROUP", "CREATECONSUMER", key, gname, cname};
              append_command(&buf, cc);
            }
            for (const auto& [id, p] : g.pel) {
              const std::string ids = id.to_string(), t = std::to_string(p.delivery_time),
                                n = std::to_string(p.delivery_count);
              const std::string_view claim[12] = {"XCLAIM", key, gname, p.consumer, "0", ids, "TIME", t,
                                                  "RETRYCOUNT", n, "JUSTID", "FORCE"};
              append_command(&buf, claim);
            }
          }
          break;
        }
      }
      if (e->expire_ms >= 0) {
        char t[24];
        const std::string_view a[3] = {"PEXPIREAT", key, std::string_view(t, ll2string(t, e->expire_ms))};
        append_command(&buf, a);
      }
      ok = drain(false) && !write_failed;
    });
    if (!ok) return false;
  }
  return drain(true);
}

}  // namespace conduit::kv
