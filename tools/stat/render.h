// conduit-stat's output: an smcss-like table (one line per connection, fallback reasons and
// errors under it, --details adds counters) and --json (one object per connection, keyed
// as transport::snapshot_fields spells them).  Pure functions.
#pragma once

#include <string>
#include <vector>

#include "sources.h"

namespace conduit::stat {

std::string render_table(const std::vector<Row>& rows, bool details);
std::string render_json(const std::vector<Row>& rows);

}  // namespace conduit::stat
