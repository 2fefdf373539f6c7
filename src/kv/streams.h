// Stream helpers shared by commands_streams.cc (XADD & co.) and commands_stream_groups.cc
// (XREAD, XREADGROUP and the consumer-group commands).  Redis 7.0's id parsing, entry
// replies and the counters behind XINFO's entries-read / lag.
#pragma once

#include <cstdint>
#include <string_view>

#include "server_impl.h"

namespace conduit::kv {

inline constexpr std::string_view kInvalidStreamId = "ERR Invalid stream ID specified as stream command argument";
using StreamEntry = std::pair<StreamId, std::vector<std::string>>;

// Decimal u64 (no sign, no spaces, no overflow).
bool parse_stream_u64(std::string_view s, uint64_t* out);
// "ms-seq" or "ms" (seq = missing_seq); *seq_auto for "ms-*" when seq_auto is given.
bool parse_stream_id(std::string_view s, StreamId* id, uint64_t missing_seq, bool* seq_auto = nullptr);
// As above with Redis' range prefix: "(id" is exclusive (*exclusive set), "-" / "+" ends.
// False (after replying the error) for a bad id or an exclusive end that cannot move.
bool parse_range_id(CommandContext& ctx, std::string_view s, StreamId* id, bool is_start);
// [id, 2-array of fields] (Redis' streamReplyWithRange entry).
void reply_stream_entry(ReplyWriter& reply, const StreamEntry& en);
// The entry with this id, or null.
const StreamEntry* stream_find(const StreamValue& s, const StreamId& id);
// Index of the first entry with id >= from.
size_t stream_lower_bound(const StreamValue& s, const StreamId& from);
// Redis' streamIncrID: false when id is the greatest possible.
bool stream_incr_id(StreamId* id);
// Redis 7.0's streamRangeHasTombstones (start..end inclusive, null = unbounded).
bool stream_range_has_tombstones(const StreamValue& s, const StreamId* start, const StreamId* end);
// Redis 7.0's streamEstimateDistanceFromFirstEverEntry: the entries-read counter of id,
// or StreamGroup::kEntriesReadUnknown.
int64_t stream_estimate_distance(const StreamValue& s, const StreamId& id);
// A group's lag (XINFO GROUPS / STREAM FULL), false when it cannot be computed (nil).
bool stream_group_lag(const StreamValue& s, const StreamGroup& g, int64_t* lag);
// The group of that name, or null.
inline StreamGroup* find_group(StreamValue& s, std::string_view name) {
  auto it = s.groups.find(name);
  return it == s.groups.end() ? nullptr : &it->second;
}
// XINFO's subcommands (commands_stream_info.cc), for the XINFO container's table row.
std::span<const CommandDef> xinfo_subcommands();

}  // namespace conduit::kv
