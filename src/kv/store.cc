#include "store.h"

#include <sys/random.h>

#include <algorithm>
#include <new>

namespace conduit::kv {

namespace {

uint64_t load_seed() {
  uint64_t s = 0;
  if (::getrandom(&s, sizeof s, GRND_NONBLOCK) != sizeof s) s = reinterpret_cast<uintptr_t>(&s) * 0x9E3779B97F4A7C15ull;
  return s | 1;
}
const uint64_t kSeed = load_seed();

inline uint64_t mix(uint64_t a, uint64_t b) {
  const __uint128_t r = static_cast<__uint128_t>(a) * b;
  return static_cast<uint64_t>(r) ^ static_cast<uint64_t>(r >> 64);
}
inline uint64_t read64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
constexpr uint64_t kP0 = 0xa0761d6478bd642full, kP1 = 0xe7037ed1a0b428dbull, kP2 = 0x8ebc6af09c88c6e3ull,
                   kP3 = 0x589965cc75374cc3ull;

}  // namespace

// wyhash-style: a 128-bit multiply folds 16 bytes per step.
uint64_t hash_bytes(const void* data, size_t len) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t h = kSeed ^ mix(len ^ kP0, kP1);
  while (len >= 16) {
    h = mix(read64(p) ^ kP1, read64(p + 8) ^ h);
    p += 16;
    len -= 16;
  }
  if (len >= 8) {
    h = mix(read64(p) ^ kP2, h ^ kP0);
    p += 8;
    len -= 8;
  }
  if (len > 0) {
    uint64_t t = 0;
    std::memcpy(&t, p, len);
    h = mix(t ^ kP3, h ^ kP1);
  }
  return mix(h ^ kP2, kP0 ^ (h >> 29));
}

std::string_view type_name(Type t) {
  switch (t) {
    case Type::kString: return "string";
    case Type::kList: return "list";
    case Type::kHash: return "hash";
    case Type::kSet: return "set";
    case Type::kZSet: return "zset";
    case Type::kStream: return "stream";
  }
  return "none";
}

bool ZSetValue::add(std::string_view member, double score) {
  auto it = scores.find(member);
  if (it != scores.end()) {
    if (it->second == score) return false;
    order.erase({it->second, it->first});
    it->second = score;
    order.emplace(score, it->first);
    return false;
  }
  std::string m(member);
  order.emplace(score, m);
  scores.emplace(std::move(m), score);
  return true;
}

bool ZSetValue::remove(std::string_view member) {
  auto it = scores.find(member);
  if (it == scores.end()) return false;
  order.erase({it->second, it->first});
  scores.erase(it);
  return true;
}

// --- Entry ----------------------------------------------------------------------------------

Entry* Entry::create(std::string_view key, uint64_t hash) {
  void* mem = ::operator new(sizeof(Entry) + key.size());
  Entry* e = new (mem) Entry(hash, static_cast<uint32_t>(key.size()));
  if (!key.empty()) std::memcpy(reinterpret_cast<char*>(e + 1), key.data(), key.size());
  return e;
}

void Entry::destroy(Entry* e) {
  e->~Entry();
  ::operator delete(e);
}

void Entry::clear_value() {
  str = std::string();
  list.reset();
  hash_v.reset();
  set.reset();
  zset.reset();
  stream.reset();
  type = Type::kString;
}

size_t estimate_bytes(const Entry* e) {
  size_t n = sizeof(Entry) + e->key_len + 16;
  switch (e->type) {
    case Type::kString: n += e->str.capacity() > 15 ? e->str.capacity() + 1 : 0; break;
    case Type::kList:
      for (const auto& s : e->list->items) n += sizeof(std::string) + (s.size() > 15 ? s.size() + 1 : 0);
      break;
    case Type::kHash:
      for (const auto& [f, v] : e->hash_v->fields) n += 96 + f.size() + v.size();
      break;
    case Type::kSet:
      for (const auto& m : e->set->members) n += 64 + m.size();
      break;
    case Type::kZSet:
      for (const auto& [m, s] : e->zset->scores) n += 160 + 2 * m.size();
      break;
    case Type::kStream:
      for (const auto& en : e->stream->entries)
        for (const auto& f : en.second) n += 48 + f.size();
      for (const auto& [name, g] : e->stream->groups) {
        n += 128 + name.size();
        for (const auto& [id, p] : g.pel) n += 96 + p.consumer.size();
        for (const auto& [cname, c] : g.consumers) n += 96 + cname.size() + 48 * c.pending.size();
      }
      break;
  }
  return n;
}

// --- KeyTable -------------------------------------------------------------------------------

KeyTable::~KeyTable() { clear(); }

void KeyTable::clear() {
  for (Slot& s : slots_)
    if (s.e != nullptr) Entry::destroy(s.e);
  slots_.clear();
  slots_.shrink_to_fit();
  mask_ = 0;
  size_ = 0;
}

void KeyTable::rehash(size_t cap) {
  std::vector<Slot> old;
  old.swap(slots_);
  slots_.assign(cap, Slot{0, nullptr});
  mask_ = cap - 1;
  for (const Slot& s : old) {
    if (s.e == nullptr) continue;
    size_t i = s.hash & mask_;
    while (slots_[i].e != nullptr) i = (i + 1) & mask_;
    slots_[i] = s;
  }
}

void KeyTable::insert(Entry* e) {
  // Load factor at most 5/8: linear probing stays short.
  if (slots_.empty())
    rehash(16);
  else if ((size_ + 1) * 8 > slots_.size() * 5)
    rehash(slots_.size() * 2);
  size_t i = e->hash & mask_;
  while (slots_[i].e != nullptr) i = (i + 1) & mask_;
  slots_[i] = Slot{e->hash, e};
  ++size_;
}

void KeyTable::unlink(Entry* e) {
  size_t i = e->hash & mask_;
  while (slots_[i].e != e) i = (i + 1) & mask_;
  // Backward-shift: pull later members of the cluster into the hole when their home
  // bucket allows it.
  size_t j = i;
  for (;;) {
    j = (j + 1) & mask_;
    if (slots_[j].e == nullptr) break;
    const size_t k = slots_[j].hash & mask_;
    // Move slot j to i unless its home k lies cyclically in (i, j].
    const bool k_in_range = (i <= j) ? (i < k && k <= j) : (i < k || k <= j);
    if (!k_in_range) {
      slots_[i] = slots_[j];
      i = j;
    }
  }
  slots_[i] = Slot{0, nullptr};
  --size_;
}

void KeyTable::maybe_shrink() {
  if (slots_.size() <= 16) return;
  if (size_ * 10 >= slots_.size()) return;
  size_t cap = 16;
  while (cap * 5 < size_ * 16) cap *= 2;  // load <= 5/16 after shrinking
  if (size_ == 0) {
    slots_.clear();
    slots_.shrink_to_fit();
    mask_ = 0;
    return;
  }
  if (cap < slots_.size()) rehash(cap);
}

Entry* KeyTable::random_entry(uint64_t rnd) const {
  if (size_ == 0) return nullptr;
  // Uniform over the keys: draw slots until one is occupied (rejection sampling; the load
  // stays >= 1/10 after the cron's shrink, so about ten draws at worst).  Probing on from
  // the first empty draw would favour a key that follows a long gap over one that follows
  // another key -- 1/16 against 13/16 with four keys in sixteen slots -- which eviction's
  // sampling and RANDOMKEY must not.  Later draws come from a splitmix64 sequence seeded by
  // rnd; after 64 empty draws (a table just emptied, not yet shrunk) the probe finishes.
  uint64_t x = rnd;
  for (int draw = 0; draw < 64; ++draw) {
    const Slot& s = slots_[x & mask_];
    if (s.e != nullptr) return s.e;
    x += 0x9e3779b97f4a7c15ull;
    uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    x = z ^ (z >> 31);
  }
  for (size_t i = x & mask_;; i = (i + 1) & mask_)
    if (slots_[i].e != nullptr) return slots_[i].e;
}

// --- Database -------------------------------------------------------------------------------

Entry* Database::add(std::string_view key, uint64_t h) {
  Entry* e = Entry::create(key, h);
  table_.insert(e);
  return e;
}

void Database::remove(Entry* e) {
  persist(e);
  table_.unlink(e);
  Entry::destroy(e);
}

void Database::set_expire(Entry* e, int64_t when_ms) {
  if (e->expire_ms < 0) {
    e->volatile_index = static_cast<uint32_t>(volatile_.size());
    volatile_.push_back(e);
  }
  e->expire_ms = when_ms;
}

void Database::persist(Entry* e) {
  if (e->expire_ms < 0) return;
  const uint32_t i = e->volatile_index;
  Entry* last = volatile_.back();
  volatile_[i] = last;
  last->volatile_index = i;
  volatile_.pop_back();
  e->expire_ms = -1;
}

void Database::clear() {
  volatile_.clear();
  volatile_.shrink_to_fit();
  table_.clear();
  avg_ttl = 0;
}

}  // namespace conduit::kv
