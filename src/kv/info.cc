// INFO: one function per section, in Redis' order, with Redis 7.0's field names.  "INFO"
// and "INFO default" give the default sections, "all" every section but modules,
// "everything" all of them; names are case-insensitive and may be combined.
#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdarg>

#include "conduit/base/clock.h"
#include "server_impl.h"

namespace conduit::kv {

namespace {

std::string human_bytes(uint64_t n) {
  char buf[64];
  const double d = static_cast<double>(n);
  if (n < 1024) std::snprintf(buf, sizeof buf, "%" PRIu64 "B", n);
  else if (n < (1ull << 20)) std::snprintf(buf, sizeof buf, "%.2fK", d / 1024);
  else if (n < (1ull << 30)) std::snprintf(buf, sizeof buf, "%.2fM", d / (1 << 20));
  else std::snprintf(buf, sizeof buf, "%.2fG", d / (1ull << 30));
  return buf;
}

// One INFO line.
__attribute__((format(printf, 2, 3))) void appendf(std::string* out, const char* fmt, ...) {
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  const int n = std::vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (n > 0) out->append(line, std::min<size_t>(static_cast<size_t>(n), sizeof line - 1));
  out->append("\r\n");
}

const char* policy_name(MaxmemoryPolicy p) {
  switch (p) {
    case MaxmemoryPolicy::kNoEviction: return "noeviction";
    case MaxmemoryPolicy::kAllKeysLru: return "allkeys-lru";
    case MaxmemoryPolicy::kVolatileLru: return "volatile-lru";
    case MaxmemoryPolicy::kAllKeysLfu: return "allkeys-lfu";
    case MaxmemoryPolicy::kVolatileLfu: return "volatile-lfu";
    case MaxmemoryPolicy::kAllKeysRandom: return "allkeys-random";
    case MaxmemoryPolicy::kVolatileRandom: return "volatile-random";
    case MaxmemoryPolicy::kVolatileTtl: return "volatile-ttl";
  }
  return "noeviction";
}

}  // namespace

struct InfoSections {
  using Fn = void (*)(ServerImpl&, std::string*);
  struct Section {
    const char* name;   // lower case, as requested
    const char* title;  // "# Server"
    Fn fn;
    bool in_default;
  };

  static void server(ServerImpl& s, std::string* out) {
    utsname u{};
    ::uname(&u);
    const int64_t uptime = (s.now_ms_ - s.start_time_ms_) / 1000;
    appendf(out, "redis_version:%s", "7.0.15");
    appendf(out, "conduit_kv_version:%s", "0.1.0");
    appendf(out, "redis_git_sha1:00000000");
    appendf(out, "redis_git_dirty:0");
    appendf(out, "redis_mode:standalone");
    appendf(out, "os:%s %s %s", u.sysname, u.release, u.machine);
    appendf(out, "arch_bits:64");
    appendf(out, "monotonic_clock:POSIX clock_gettime");
    appendf(out, "multiplexing_api:epoll");
    appendf(out, "process_id:%d", static_cast<int>(::getpid()));
    appendf(out, "tcp_port:%d", s.options_.tcp ? s.options_.port : 0);
    appendf(out, "server_time_usec:%" PRId64, s.now_ms_ * 1000);
    appendf(out, "uptime_in_seconds:%" PRId64, uptime);
    appendf(out, "uptime_in_days:%" PRId64, uptime / 86400);
    appendf(out, "hz:%u", s.options_.hz);
    appendf(out, "configured_hz:%u", s.options_.hz);
    appendf(out, "lru_clock:%" PRId64, (s.coarse_ms_ / 1000) & ((1 << 24) - 1));
    appendf(out, "config_file:%s", s.options_.config_file.c_str());
    appendf(out, "io_threads_active:%d", s.workers_.size() > 1 ? 1 : 0);
    appendf(out, "io_threads:%zu", s.workers_.size());
    for (size_t i = 0; i < s.listen_urls_.size(); ++i) appendf(out, "listener%zu:url=%s", i, s.listen_urls_[i].c_str());
  }

  static void clients(ServerImpl& s, std::string* out) {
    size_t max_in = 0, max_out = 0, pubsub = 0;
    for (const ClientConn* c : s.clients()) {
      max_in = std::max(max_in, c->pub_qbuf.load(std::memory_order_relaxed));
      max_out = std::max(max_out, c->pub_obuf.load(std::memory_order_relaxed));
      if (c->state.subscriptions() > 0) ++pubsub;
    }
    size_t timeout_table = 0;
    for (const ClientConn* c : s.clients())
      if (c->state.blocked && c->state.blocked->deadline_ms > 0) ++timeout_table;
    appendf(out, "connected_clients:%zu", s.num_clients_);
    appendf(out, "cluster_connections:0");
    appendf(out, "maxclients:%u", s.options_.maxclients);
    appendf(out, "handshakes_in_progress:%" PRIu64, s.handshakes_in_progress());
    appendf(out, "client_recent_max_input_buffer:%zu", max_in);
    appendf(out, "client_recent_max_output_buffer:%zu", max_out);
    appendf(out, "blocked_clients:%zu", s.blocked_count_);
    appendf(out, "tracking_clients:%" PRIu64, s.tracking_clients());
    appendf(out, "clients_in_timeout_table:%zu", timeout_table);
    appendf(out, "pubsub_clients:%zu", pubsub);
  }

  static void memory(ServerImpl& s, std::string* out) {
    s.used_memory_at_ms_ = -1;
    const uint64_t used = s.used_memory();
    s.used_memory_peak_ = std::max(s.used_memory_peak_, used);
    rusage ru{};
    ::getrusage(RUSAGE_SELF, &ru);
    appendf(out, "used_memory:%" PRIu64, used);
    appendf(out, "used_memory_human:%s", human_bytes(used).c_str());
    appendf(out, "used_memory_peak:%" PRIu64, s.used_memory_peak_);
    appendf(out, "used_memory_peak_human:%s", human_bytes(s.used_memory_peak_).c_str());
    appendf(out, "mem_transport_pinned:%" PRIu64, s.transport_memory_locked());
    // rdma://'s registered arenas (conduit/transport/registered_memory.h), as of the last
    // accept or cron tick of each worker: registered once per loop and device, they stay
    // while the server runs; the clients' slices of them are in mem_transport_pinned.
    const RegisteredTotals r = s.registered_locked();
    appendf(out, "mem_rdma_arenas:%" PRIu64, r.arenas);
    appendf(out, "mem_rdma_arena_regions:%" PRIu64, r.regions);
    appendf(out, "mem_rdma_arena_mapped:%" PRIu64, r.bytes_mapped);
    appendf(out, "mem_rdma_arena_registered:%" PRIu64, r.bytes_registered);
    appendf(out, "mem_rdma_arena_registered_human:%s", human_bytes(r.bytes_registered).c_str());
    appendf(out, "mem_rdma_arena_pool_in_use:%" PRIu64, r.pool_in_use);
    appendf(out, "mem_rdma_arena_rx_in_use:%" PRIu64, r.rx_in_use);
    appendf(out, "mem_rdma_arena_registrations:%" PRIu64, r.registrations);
    appendf(out, "mem_rdma_arena_register_usec:%" PRIu64, r.register_ns / 1000);
    appendf(out, "mem_rdma_arena_would_block:%" PRIu64, r.would_block);
    appendf(out, "used_memory_peak_rss:%ld", ru.ru_maxrss * 1024);
    appendf(out, "used_memory_lua:0");
    appendf(out, "used_memory_scripts:0");
    appendf(out, "number_of_cached_scripts:0");
    appendf(out, "number_of_functions:0");
    appendf(out, "number_of_libraries:0");
    appendf(out, "maxmemory:%" PRIu64, s.options_.maxmemory);
    appendf(out, "maxmemory_human:%s", human_bytes(s.options_.maxmemory).c_str());
    appendf(out, "maxmemory_policy:%s", policy_name(s.options_.maxmemory_policy));
    appendf(out, "mem_not_counted_for_evict:0");  // maxmemory applies to all of used_memory
    appendf(out, "mem_aof_buffer:%d", 0);
    appendf(out, "mem_allocator:libc");
    appendf(out, "lazyfree_pending_objects:0");
  }

  static void persistence(ServerImpl& s, std::string* out) {
    const Aof* aof = s.aof_.get();
    appendf(out, "loading:%d", s.loading_ ? 1 : 0);
    appendf(out, "async_loading:0");
    appendf(out, "rdb_changes_since_last_save:%" PRIu64, s.rdb_changes_since_save_);
    appendf(out, "rdb_bgsave_in_progress:0");
    appendf(out, "rdb_last_save_time:%" PRId64, s.last_save_time_);
    appendf(out, "rdb_last_bgsave_status:ok");
    appendf(out, "rdb_saves:0");
    appendf(out, "aof_enabled:%d", aof ? 1 : 0);
    appendf(out, "aof_rewrite_in_progress:%d", aof && aof->rewrite_in_progress() ? 1 : 0);
    appendf(out, "aof_rewrite_scheduled:0");
    appendf(out, "aof_rewrites:%" PRIu64, aof ? aof->rewrites() : 0);
    appendf(out, "aof_last_bgrewrite_status:%s", !aof || aof->last_rewrite_status().ok() ? "ok" : "err");
    appendf(out, "aof_last_write_status:%s", !aof || aof->last_write_status().ok() ? "ok" : "err");
    if (aof) {
      appendf(out, "aof_current_size:%" PRIu64, aof->size());
      appendf(out, "aof_base_size:%" PRIu64, aof->base_size());
      appendf(out, "aof_fsync_policy:%s", std::string(appendfsync_name(aof->policy())).c_str());
    }
  }

  static void stats(ServerImpl& s, std::string* out) {
    uint64_t ops = 0;
    for (uint64_t v : s.ops_sample_) ops += v;
    uint64_t channels = s.channels_.size();
    appendf(out, "total_connections_received:%" PRIu64, s.stats_.connections_received);
    appendf(out, "total_commands_processed:%" PRIu64, s.stats_.commands_processed);
    appendf(out, "instantaneous_ops_per_sec:%" PRIu64, ops / ServerImpl::kOpsSamples);
    appendf(out, "total_net_input_bytes:%" PRIu64, s.stats_.net_input_bytes);
    appendf(out, "total_net_output_bytes:%" PRIu64, s.net_output_bytes());
    appendf(out, "rejected_connections:%" PRIu64, s.stats_.rejected_connections);
    appendf(out, "expired_keys:%" PRIu64, s.stats_.expired_keys);
    appendf(out, "evicted_keys:%" PRIu64, s.evicted_keys_);
    appendf(out, "evicted_clients:0");
    appendf(out, "keyspace_hits:%" PRIu64, s.stats_.keyspace_hits);
    appendf(out, "keyspace_misses:%" PRIu64, s.stats_.keyspace_misses);
    appendf(out, "pubsub_channels:%" PRIu64, channels);
    appendf(out, "pubsub_patterns:%zu", s.patterns_.size());
    appendf(out, "total_forks:%" PRIu64, s.aof_ ? s.aof_->rewrites() : 0);
    appendf(out, "total_error_replies:%" PRIu64, s.total_error_replies_);
    appendf(out, "total_blocking_keys:%" PRIu64, s.total_blocking_keys_);
    appendf(out, "tracking_total_keys:%" PRIu64, s.tracking_keys());
    appendf(out, "tracking_total_items:%" PRIu64, s.tracking_items());
    appendf(out, "tracking_total_prefixes:%" PRIu64, s.tracking_prefixes());
  }

  static void replication(ServerImpl&, std::string* out) {
    appendf(out, "role:master");
    appendf(out, "connected_slaves:0");
    appendf(out, "master_failover_state:no-failover");
    appendf(out, "master_replid:0000000000000000000000000000000000000000");
    appendf(out, "master_replid2:0000000000000000000000000000000000000000");
    appendf(out, "master_repl_offset:0");
    appendf(out, "second_repl_offset:-1");
    appendf(out, "repl_backlog_active:0");
    appendf(out, "repl_backlog_size:1048576");
    appendf(out, "repl_backlog_first_byte_offset:0");
    appendf(out, "repl_backlog_histlen:0");
  }

  static void cpu(ServerImpl&, std::string* out) {
    rusage self{}, children{};
    ::getrusage(RUSAGE_SELF, &self);
    ::getrusage(RUSAGE_CHILDREN, &children);
    auto tv = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; };
    appendf(out, "used_cpu_sys:%.6f", tv(self.ru_stime));
    appendf(out, "used_cpu_user:%.6f", tv(self.ru_utime));
    appendf(out, "used_cpu_sys_children:%.6f", tv(children.ru_stime));
    appendf(out, "used_cpu_user_children:%.6f", tv(children.ru_utime));
  }

  static void modules(ServerImpl&, std::string*) {}

  static void errorstats(ServerImpl& s, std::string* out) {
    for (const auto& [code, n] : s.error_stats_) appendf(out, "errorstat_%s:count=%" PRIu64, code.c_str(), n);
  }

  static void cluster(ServerImpl&, std::string* out) { appendf(out, "cluster_enabled:0"); }

  static void keyspace(ServerImpl& s, std::string* out) {
    for (const auto& d : s.dbs_)
      if (d->size() > 0)
        appendf(out, "db%d:keys=%zu,expires=%zu,avg_ttl=%" PRId64, d->index(), d->size(), d->expires(), d->avg_ttl);
  }

  static void commandstats(ServerImpl& s, std::string* out) {
    for (const auto& e : s.command_store_) {
      const CommandStats& st = e->stats;
      if (st.calls == 0 && st.rejected == 0 && st.failed == 0) continue;
      appendf(out, "cmdstat_%s:calls=%" PRIu64 ",usec=%" PRIu64 ",usec_per_call=%.2f,rejected_calls=%" PRIu64
                   ",failed_calls=%" PRIu64,
              e->fullname.c_str(), st.calls, st.usec,
              st.calls > 0 ? static_cast<double>(st.usec) / static_cast<double>(st.calls) : 0.0, st.rejected, st.failed);
    }
  }

  // Latency percentiles per command are not computed (latency-tracking keeps only the
  // power-of-two histograms LATENCY HISTOGRAM reports): the section exists and is empty.
  static void latencystats(ServerImpl&, std::string*) {}

  static void transports(ServerImpl& s, std::string* out) {
    // Closed connections' totals plus the live ones' counters (Connection::stats()).
    std::map<std::string, std::pair<TransportTotals, uint64_t>> t;
    for (const auto& [k, v] : s.transport_totals_) t[k].first = v;
    for (const ClientConn* c : s.clients()) {
      auto& [tot, active] = t[c->scheme];
      // Another worker's connection: its counters as of its last batch.
      const transport::ConnStats& cs = c->worker->loop->in_loop_thread() ? c->conn->stats() : c->stats_snap;
      tot.stats.bytes_read += cs.bytes_read;
      tot.stats.bytes_written += cs.bytes_written;
      tot.stats.reads += cs.reads;
      tot.stats.writes += cs.writes;
      tot.stats.read_would_block += cs.read_would_block;
      tot.stats.write_would_block += cs.write_would_block;
      tot.stats.wakeups += cs.wakeups;
      ++active;
    }
    for (const auto& [scheme, v] : t) {
      const auto& st = v.first.stats;
      appendf(out,
              "transport_%s:connections_received=%" PRIu64 ",connected=%" PRIu64 ",bytes_read=%" PRIu64
              ",bytes_written=%" PRIu64 ",reads=%" PRIu64 ",writes=%" PRIu64 ",read_would_block=%" PRIu64
              ",write_would_block=%" PRIu64 ",wakeups=%" PRIu64,
              scheme.c_str(), v.first.connections, v.second, st.bytes_read, st.bytes_written, st.reads, st.writes,
              st.read_would_block, st.write_would_block, st.wakeups);
    }
  }

  static void threads(ServerImpl& s, std::string* out) {
    for (const auto& w : s.workers_) {
      constexpr auto r = std::memory_order_relaxed;
      appendf(out, "io_thread_%zu:clients=%zu,connections_received=%" PRIu64 ",reads=%" PRIu64 ",writes=%" PRIu64,
              w->index, w->num_clients, w->connections.load(r), w->reads.load(r), w->writes.load(r));
    }
  }

  static constexpr Section kSections[] = {
      {"server", "Server", server, true},
      {"clients", "Clients", clients, true},
      {"memory", "Memory", memory, true},
      {"persistence", "Persistence", persistence, true},
      {"stats", "Stats", stats, true},
      {"replication", "Replication", replication, true},
      {"cpu", "CPU", cpu, true},
      {"modules", "Modules", modules, true},
      {"commandstats", "Commandstats", commandstats, false},
      {"errorstats", "Errorstats", errorstats, true},
      {"latencystats", "Latencystats", latencystats, false},
      {"cluster", "Cluster", cluster, true},
      {"keyspace", "Keyspace", keyspace, true},
      {"transports", "Transports", transports, true},
      {"threads", "Threads", threads, true},
  };
};

std::string ServerImpl::info(std::string_view sections_text) {
  refresh_time();
  std::vector<std::string> want;
  for (const std::string& w : split_words(sections_text, " ")) want.push_back(to_lower(w));
  auto asked = [&](std::string_view n) { return std::find(want.begin(), want.end(), n) != want.end(); };
  const bool everything = asked("everything");
  const bool all = everything || asked("all");
  const bool defaults = want.empty() || asked("default");
  std::string out;
  for (const InfoSections::Section& sec : InfoSections::kSections) {
    const bool on = (all && (everything || std::string_view(sec.name) != "modules")) || (defaults && sec.in_default) ||
                    asked(sec.name);
    if (!on) continue;
    if (!out.empty()) out += "\r\n";
    out += "# ";
    out += sec.title;
    out += "\r\n";
    sec.fn(*this, &out);
  }
  return out;
}

void ServerImpl::reset_stats() {
  const uint64_t clients = stats_.connected_clients;
  stats_ = ServerStats();
  stats_.connected_clients = clients;
  for (auto& [k, t] : transport_totals_) t = TransportTotals();
  net_output_base_ = 0;
  net_output_base_ = net_output_bytes();
  std::fill(std::begin(ops_sample_), std::end(ops_sample_), 0);
  for (auto& e : command_store_) e->stats = CommandStats();
  error_stats_.clear();
  total_error_replies_ = 0;
  evicted_keys_ = 0;
}

}  // namespace conduit::kv
