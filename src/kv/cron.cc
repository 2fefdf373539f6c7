// The cron: worker 0's periodic work (active expiry, the AOF's flush and automatic
// rewrite, the ops/sec samples) and each worker's client checks (idle timeout, output
// limits, giving idle buffers back).
#include <algorithm>

#include "client_limits.h"
#include "conduit/base/clock.h"
#include "conduit/base/log.h"
#include "server_impl.h"

namespace conduit::kv {


// Worker 0: expiry, the AOF, stats.  Each worker checks its own clients (clients_cron).
void ServerImpl::cron() {
  std::lock_guard<std::mutex> lock(mu_);
  refresh_time();
  ++cron_loops_;
  update_ops_sample();
  active_expire_cycle_locked();
  if (tracking_active()) tracking_after_batch_locked();
  aof_cron_locked();
  if (cron_loops_ % 10 == 0)
    for (auto& d : dbs_) d->table().maybe_shrink();
}

void ServerImpl::update_ops_sample() {
  const uint64_t now = monotonic_ns();
  if (ops_last_ns_ != 0 && now > ops_last_ns_) {
    const uint64_t ops = stats_.commands_processed - ops_last_cmds_;
    ops_sample_[ops_sample_idx_] = ops * 1'000'000'000ull / (now - ops_last_ns_);
    ops_sample_idx_ = (ops_sample_idx_ + 1) % kOpsSamples;
  }
  ops_last_ns_ = now;
  ops_last_cmds_ = stats_.commands_processed;
}

void ServerImpl::active_expire_cycle_locked() {
  if (loading_) return;
  // Redis' slow cycle: up to 25% of a tick, 20 keys per sample, another round while more
  // than a quarter of a sample was expired.
  const uint64_t budget_ns = 1'000'000'000ull / std::max<uint32_t>(options_.hz, 1) / 4;
  const uint64_t start = monotonic_ns();
  const int n = num_dbs();
  bool expired_any = false;
  for (int k = 0; k < n; ++k) {
    Database& db = *dbs_[static_cast<size_t>(expire_db_cursor_)];
    expire_db_cursor_ = (expire_db_cursor_ + 1) % n;
    for (int iteration = 0;; ++iteration) {
      if (db.expires() == 0) break;
      int sampled = 0, expired = 0;
      for (int i = 0; i < 20 && db.expires() > 0; ++i) {
        Entry* e = db.random_volatile(random64());
        ++sampled;
        if (e->expire_ms < now_ms()) {
          expire_entry(db, e);
          ++expired;
        } else {
          const int64_t ttl = e->expire_ms - now_ms_;
          db.avg_ttl = db.avg_ttl == 0 ? ttl : (db.avg_ttl / 50) * 49 + ttl / 50;
        }
      }
      expired_any = expired_any || expired > 0;
      if ((iteration & 15) == 15 && monotonic_ns() - start > budget_ns) goto done;
      if (expired * 4 <= sampled) break;
    }
  }
done:
  if (expired_any && aof_ && aof_->has_pending()) schedule_commit(*workers_[0]);
}

void ServerImpl::clients_cron(Worker& w) {
  std::lock_guard<std::mutex> lock(mu_);
  refresh_time();
  refresh_registered_locked(w);
  // Look at a slice of the clients per tick: all of them within about a second.
  size_t budget = std::max<size_t>(w.num_clients / std::max<uint32_t>(options_.hz, 1) + 1, 50);
  if (w.cron_cursor == nullptr) w.cron_cursor = w.clients_head;
  while (budget-- > 0 && w.cron_cursor != nullptr) {
    ClientConn* c = w.cron_cursor;
    w.cron_cursor = c->next;
    if (c->closed || c->pending_commit) continue;
    const uint64_t pinned = c->conn->stats().pinned_bytes;
    client_pinned_bytes_ += pinned - c->pinned_counted;  // modular: a shrink subtracts
    c->pinned_counted = pinned;
    const int64_t idle_ms = now_ms_ - c->state.last_interaction_ms;
    if (options_.timeout > 0 && idle_ms > static_cast<int64_t>(options_.timeout) * 1000 && c->out.empty()) {
      close_client_locked(c, "idle timeout");
      continue;
    }
    if (!c->out.empty()) {
      if (options_.output_soft_limit > 0 && counted_output(c->out.size()) > options_.output_soft_limit) {
        if (c->soft_limit_since_ms == 0) c->soft_limit_since_ms = now_ms_;
        if (now_ms_ - c->soft_limit_since_ms > static_cast<int64_t>(options_.output_soft_seconds) * 1000) {
          CONDUIT_LOG(kWarn) << "conduit-kv: closing client " << c->peer << ": output above the soft limit for "
                             << options_.output_soft_seconds << " s";
          close_client_locked(c, "output soft limit");
          continue;
        }
      } else {
        c->soft_limit_since_ms = 0;
      }
      // A client that reads nothing at all for that long is gone or hostile.
      if (options_.output_soft_seconds > 0 &&
          now_ms_ - c->last_write_progress_ms > static_cast<int64_t>(options_.output_soft_seconds) * 1000) {
        CONDUIT_LOG(kWarn) << "conduit-kv: closing client " << c->peer << ": no output progress for "
                           << options_.output_soft_seconds << " s";
        close_client_locked(c, "output stalled");
        continue;
      }
    } else if (idle_ms > 2000) {
      // Idle: give the memory back.
      if (c->out.capacity() > 0) c->out.release();
      if (c->query.empty() && c->query.capacity() > 0) c->query.release();
      publish(c);
    }
  }
}

void ServerImpl::aof_cron_locked() {
  if (!aof_) return;
  if (aof_->has_pending()) schedule_commit(*workers_[0]);
  if (aof_->rewrite_in_progress()) return;
  if (aof_->awaiting_first_rewrite()) {
    // Switched on at run time and the rewrite that starts it failed: try again every 5 s
    // (Redis schedules another one too); until one succeeds nothing is on disk.
    const int64_t now = wall_ms();
    if (now < first_rewrite_retry_ms_) return;
    first_rewrite_retry_ms_ = now + 5000;
    CONDUIT_LOG(kWarn) << "aof: the rewrite that starts the AOF failed; starting another";
    if (const std::string err = bgrewriteaof(); !err.empty()) CONDUIT_LOG(kError) << "conduit-kv: " << err;
    return;
  }
  if (rewrite_needed_) {
    rewrite_needed_ = false;
    CONDUIT_LOG(kInfo) << "aof: rewriting the file from memory after a command ran out of memory";
    if (const std::string err = bgrewriteaof(); !err.empty()) CONDUIT_LOG(kError) << "conduit-kv: " << err;
    return;
  }
  const uint64_t pct = options_.auto_aof_rewrite_percentage;
  const uint64_t base = std::max<uint64_t>(aof_->base_size(), 1);
  if (pct > 0 && aof_->size() > options_.auto_aof_rewrite_min_size && (aof_->size() - base) * 100 / base >= pct) {
    CONDUIT_LOG(kInfo) << "aof: " << aof_->size() << " bytes, " << (aof_->size() - base) * 100 / base
                       << "% growth: starting an automatic rewrite";
    (void)bgrewriteaof();
  }
}

}  // namespace conduit::kv
