// The keyspace: 16 (configurable) databases, each an open-addressing hash table of
// entries with optional absolute expiry, and the value types (string, list, hash, set,
// sorted set, stream).
//
// Threading: one thread at a time (the server serialises commands).
// Memory: one allocation per key (entry header + key bytes), plus the value's own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace conduit::kv {

// 64-bit hash with a per-process random seed (keys come from clients: no fixed seed to
// collide against).
uint64_t hash_bytes(const void* data, size_t len);
inline uint64_t hash_key(std::string_view s) { return hash_bytes(s.data(), s.size()); }

struct StrHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return hash_key(s); }
};
using StrMap = std::unordered_map<std::string, std::string, StrHash, std::equal_to<>>;
using StrSet = std::unordered_set<std::string, StrHash, std::equal_to<>>;

enum class Type : uint8_t { kString, kList, kHash, kSet, kZSet, kStream };
std::string_view type_name(Type t);  // "string", "list", ...

struct ListValue {
  std::deque<std::string> items;
};
struct HashValue {
  StrMap fields;
};
struct SetValue {
  StrSet members;
};
struct ZSetValue {
  std::unordered_map<std::string, double, StrHash, std::equal_to<>> scores;
  std::set<std::pair<double, std::string>> order;  // (score, member), Redis' ordering
  bool add(std::string_view member, double score);  // true if new
  bool remove(std::string_view member);
  size_t size() const { return scores.size(); }
};
struct StreamId {
  uint64_t ms = 0, seq = 0;
  friend bool operator<(const StreamId& a, const StreamId& b) { return a.ms < b.ms || (a.ms == b.ms && a.seq < b.seq); }
  friend bool operator==(const StreamId& a, const StreamId& b) { return a.ms == b.ms && a.seq == b.seq; }
  friend bool operator<=(const StreamId& a, const StreamId& b) { return !(b < a); }
  std::string to_string() const { return std::to_string(ms) + "-" + std::to_string(seq); }
};
// Consumer groups (commands_stream_groups.cc).  A pending entry (Redis' NACK) names its
// consumer; each consumer keeps the ids it owns, so both of Redis' views (the group's PEL,
// a consumer's PEL) are ordered maps and a copy of the value is a deep copy.
struct StreamPending {
  int64_t delivery_time = 0;  // Unix ms of the last delivery
  uint64_t delivery_count = 1;
  std::string consumer;
};
struct StreamConsumer {
  int64_t seen_time = 0;  // Unix ms of its last XREADGROUP / XCLAIM / XAUTOCLAIM
  std::set<StreamId> pending;
};
struct StreamGroup {
  static constexpr int64_t kEntriesReadUnknown = -1;  // Redis' SCG_INVALID_ENTRIES_READ
  StreamId last_id;
  int64_t entries_read = kEntriesReadUnknown;
  std::map<StreamId, StreamPending> pel;
  std::map<std::string, StreamConsumer, std::less<>> consumers;  // byte order, as Redis' rax
};
struct StreamValue {
  std::vector<std::pair<StreamId, std::vector<std::string>>> entries;  // fields, values alternating
  StreamId last_id;
  uint64_t entries_added = 0;
  StreamId max_deleted_id;  // the greatest id XDEL removed (0-0: none)
  std::map<std::string, StreamGroup, std::less<>> groups;
  StreamId first_id() const { return entries.empty() ? StreamId{} : entries.front().first; }
};

// One key.  Allocated with its key bytes behind it (Entry::create); never moves.
struct Entry {
  uint64_t hash;
  int64_t expire_ms = -1;  // absolute Unix time in ms; -1 = persistent
  uint32_t volatile_index = 0;
  uint32_t key_len;
  Type type = Type::kString;
  // LRU: seconds clock of the last access; LFU: minutes clock << 8 | log counter (Redis'
  // robj->lru, 24 bits used).  What OBJECT IDLETIME/FREQ report and eviction compares.
  uint32_t access = 0;
  std::string str;  // kString
  // Exactly one is set for the aggregate types.
  std::unique_ptr<ListValue> list;
  std::unique_ptr<HashValue> hash_v;
  std::unique_ptr<SetValue> set;
  std::unique_ptr<ZSetValue> zset;
  std::unique_ptr<StreamValue> stream;

  std::string_view key() const { return {reinterpret_cast<const char*>(this + 1), key_len}; }
  static Entry* create(std::string_view key, uint64_t hash);
  static void destroy(Entry* e);
  // Drops the value (keeps key and expiry) so another type can be stored.
  void clear_value();

 private:
  Entry(uint64_t h, uint32_t klen) : hash(h), key_len(klen) {}
};

// Open addressing, linear probing, backward-shift deletion (no tombstones), power-of-two
// capacity.  Slots cache the hash so probes rarely touch an entry.  The cursor of scan()
// walks home buckets in reverse-binary order (Redis' dictScan), so a full scan returns
// every key present throughout it at least once even if the table is resized meanwhile.
inline uint64_t reverse_bits(uint64_t v) {
  v = ((v >> 1) & 0x5555555555555555ull) | ((v & 0x5555555555555555ull) << 1);
  v = ((v >> 2) & 0x3333333333333333ull) | ((v & 0x3333333333333333ull) << 2);
  v = ((v >> 4) & 0x0F0F0F0F0F0F0F0Full) | ((v & 0x0F0F0F0F0F0F0F0Full) << 4);
  return __builtin_bswap64(v);
}

class KeyTable {
 public:
  KeyTable() = default;
  ~KeyTable();
  KeyTable(const KeyTable&) = delete;
  KeyTable& operator=(const KeyTable&) = delete;

  Entry* find(std::string_view key, uint64_t h) const {
    if (size_ == 0) return nullptr;
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.e == nullptr) return nullptr;
      if (s.hash == h && s.e->key_len == key.size() && std::memcmp(s.e->key().data(), key.data(), key.size()) == 0)
        return s.e;
    }
  }
  // The key must be absent.
  void insert(Entry* e);
  // Unlinks e (which must be present) without destroying it.
  void unlink(Entry* e);
  size_t size() const { return size_; }
  size_t capacity() const { return slots_.size(); }
  // Destroys every entry.
  void clear();
  void swap(KeyTable& o) {
    slots_.swap(o.slots_);
    std::swap(mask_, o.mask_);
    std::swap(size_, o.size_);
  }
  // Shrinks when mostly empty (called from the cron, not per delete, to avoid thrash).
  void maybe_shrink();
  Entry* random_entry(uint64_t rnd) const;
  // Visits the keys of one cursor step; returns the next cursor (0 = done).
  template <typename Fn>
  uint64_t scan(uint64_t cursor, Fn&& fn) const;
  // Visits every entry; fn must not modify the table.
  template <typename Fn>
  void for_each(Fn&& fn) const {
    for (const Slot& s : slots_)
      if (s.e != nullptr) fn(s.e);
  }

 private:
  struct Slot {
    uint64_t hash;
    Entry* e;
  };
  void rehash(size_t cap);
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

template <typename Fn>
uint64_t KeyTable::scan(uint64_t cursor, Fn&& fn) const {
  if (size_ == 0) return 0;
  const uint64_t m = mask_;
  const uint64_t b = cursor & m;
  for (size_t i = b;; i = (i + 1) & m) {
    const Slot& s = slots_[i];
    if (s.e == nullptr) break;
    if ((s.hash & m) == b) fn(s.e);
  }
  // Reverse-binary increment of the masked bits (dictScan).
  uint64_t v = cursor | ~m;
  v = reverse_bits(v);
  ++v;
  v = reverse_bits(v);
  return v;
}

class Database {
 public:
  explicit Database(int index) : index_(index) {}
  int index() const { return index_; }

  // Lookup without expiry handling.
  Entry* find(std::string_view key) const { return table_.find(key, hash_key(key)); }
  size_t size() const { return table_.size(); }
  size_t expires() const { return volatile_.size(); }

  // Creates an entry (key must be absent) of type kString with an empty value.
  Entry* add(std::string_view key, uint64_t h);
  Entry* add(std::string_view key) { return add(key, hash_key(key)); }
  void remove(Entry* e);
  bool remove(std::string_view key) {
    Entry* e = find(key);
    if (e == nullptr) return false;
    remove(e);
    return true;
  }
  void set_expire(Entry* e, int64_t when_ms);
  void persist(Entry* e);
  void clear();
  // SWAPDB: exchanges every key (and expiry) with o; indexes stay.
  void swap_contents(Database& o) {
    table_.swap(o.table_);
    volatile_.swap(o.volatile_);
    std::swap(avg_ttl, o.avg_ttl);
  }
  Entry* random_volatile(uint64_t rnd) const {
    return volatile_.empty() ? nullptr : volatile_[rnd % volatile_.size()];
  }
  Entry* random_entry(uint64_t rnd) const { return table_.random_entry(rnd); }
  KeyTable& table() { return table_; }
  const KeyTable& table() const { return table_; }

  // Running sum of TTLs seen by active expiry, for INFO keyspace avg_ttl.
  int64_t avg_ttl = 0;

 private:
  int index_;
  KeyTable table_;
  std::vector<Entry*> volatile_;  // keys with an expiry, for active-expiry sampling
};

// A rough byte count of a value (for MEMORY USAGE-like estimates and AOF rewrite sizing).
size_t estimate_bytes(const Entry* e);

}  // namespace conduit::kv
