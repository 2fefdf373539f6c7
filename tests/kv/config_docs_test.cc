// docs/KV.md's settings section is generated from the option tables (src/kv/config.cc):
// this fails when the file and the tables differ, so a new setting, a changed default or a
// setting CONFIG SET now changes at run time cannot leave the docs behind.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "conduit/kv/server.h"

#ifndef CONDUIT_SOURCE_DIR
#error "CONDUIT_SOURCE_DIR must name the source tree"
#endif

namespace conduit::kv {
namespace {

constexpr std::string_view kBegin = "<!-- BEGIN generated settings: conduit-kv --help-config-markdown -->\n";
constexpr std::string_view kEnd = "<!-- END generated settings -->";

TEST(ConfigDocs, KvMdSettingsSectionMatchesTheTable) {
  const std::string path = std::string(CONDUIT_SOURCE_DIR) + "/docs/KV.md";
  std::ifstream in(path);
  ASSERT_TRUE(in) << "cannot read " << path;
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string doc = ss.str();
  const size_t b = doc.find(kBegin);
  const size_t e = doc.find(kEnd);
  ASSERT_NE(b, std::string::npos) << path << " has no line '" << kBegin.substr(0, kBegin.size() - 1) << "'";
  ASSERT_NE(e, std::string::npos) << path << " has no line '" << kEnd << "'";
  ASSERT_LT(b, e);
  const std::string section = doc.substr(b + kBegin.size(), e - b - kBegin.size());
  const std::string want = config_reference_markdown();
  EXPECT_EQ(section, want) << "docs/KV.md's settings section differs from src/kv/config.cc's tables; regenerate "
                              "it: replace the lines between the markers with the output of "
                              "`conduit-kv --help-config-markdown`";
}

// Every setting of both tables is in the section by name (the generator's own contract).
TEST(ConfigDocs, EverySettingIsListed) {
  const std::string md = config_reference_markdown();
  for (const ServerOptionInfo& o : server_option_list())
    EXPECT_NE(md.find("| `" + std::string(o.name) + "` |"), std::string::npos) << o.name;
  for (const RedisCompatOption& o : redis_compat_options())
    EXPECT_NE(md.find("| `" + std::string(o.name) + "` |"), std::string::npos) << o.name;
  for (const char* knob : {"list-max-ziplist-size", "hash-max-listpack-entries", "zset-max-ziplist-entries",
                           "set-max-intset-entries", "stream-node-max-bytes"})
    EXPECT_NE(md.find(std::string("| `") + knob + "` | `"), std::string::npos) << knob;
}

}  // namespace
}  // namespace conduit::kv
