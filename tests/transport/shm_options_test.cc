// The shm:// option table: defaults, parsing through the table, and the docs rendered from
// it (docs/TRANSPORTS.md must show exactly what the table says).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "option_table.h"
#include "shm/shm_options.h"

namespace conduit::transport::shm {
namespace {

Endpoint parse(const std::string& url) {
  auto ep = Endpoint::parse(url);
  EXPECT_TRUE(ep.ok()) << ep.status().to_string();
  return ep.ok() ? *ep : Endpoint{};
}

TEST(ShmOptionTable, DefaultsComeFromTheRows) {
  auto o = parse_shm_options(parse("shm://x"));
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  EXPECT_EQ(o->ring, 1u << 20);
  EXPECT_FALSE(o->ring_given);
  EXPECT_EQ(o->busy_poll_us, 0u);
  EXPECT_EQ(o->mode, 0600u);
  EXPECT_EQ(o->connect_timeout_ms, 10000u);
}

TEST(ShmOptionTable, ValuesAndErrorsNameTheOption) {
  auto o = parse_shm_options(parse("shm://x?ring=64K&mode=0660&busy_poll_us=5&connect_timeout_ms=7"));
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  EXPECT_EQ(o->ring, 65536u);
  EXPECT_TRUE(o->ring_given);
  EXPECT_EQ(o->mode, 0660u);
  EXPECT_EQ(o->busy_poll_us, 5u);
  EXPECT_EQ(o->connect_timeout_ms, 7u);
  for (const char* q : {"ring=5000", "ring=2K", "mode=0999", "busy_poll_us=x", "nope=1"}) {
    auto bad = parse_shm_options(parse(std::string("shm://x?") + q));
    ASSERT_FALSE(bad.ok()) << q;
    EXPECT_EQ(bad.status().code(), Code::kInvalidArgument) << q;
    const std::string key = std::string(q).substr(0, std::string(q).find('='));
    EXPECT_NE(bad.status().to_string().find(key), std::string::npos) << bad.status().to_string();
  }
}

TEST(ShmOptionTable, AllowUidsAndMaxRing) {
  auto o = parse_shm_options(parse("shm://x?allow_uids=1000,1001,0&ring=64K"));
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  EXPECT_EQ(o->allow_uids, (std::vector<uid_t>{1000, 1001, 0}));
  EXPECT_EQ(o->max_ring, 65536u) << "max_ring defaults to the listener's ring";
  EXPECT_TRUE(parse_shm_options(parse("shm://x"))->allow_uids.empty());
  EXPECT_TRUE(parse_shm_options(parse("shm://x?allow_uids="))->allow_uids.empty());
  for (const char* q : {"allow_uids=x", "allow_uids=1,", "allow_uids=4294967295", "allow_uids=1,,2",
                        "max_ring=16K&ring=64K", "max_ring=2G", "max_handshakes=0"}) {
    auto bad = parse_shm_options(parse(std::string("shm://x?") + q));
    ASSERT_FALSE(bad.ok()) << q;
    EXPECT_EQ(bad.status().code(), Code::kInvalidArgument) << q;
  }
}

TEST(ShmOptionTable, MarkdownRendersEveryRow) {
  const std::string md = shm_options_markdown();
  for (const auto& row : kShmOptions) EXPECT_NE(md.find("| `" + std::string(row.name) + "` |"), std::string::npos);
  EXPECT_NE(md.find("| `ring` | 1M | 4K–1G, power of two |"), std::string::npos) << md;
  EXPECT_NE(md.find("| `mode` | `0600` | octal, at most 0777 | listener: "), std::string::npos) << md;
  EXPECT_EQ(format_bytes(4096), "4K");
  EXPECT_EQ(format_bytes(5000), "5000");
  EXPECT_EQ(format_bytes(uint64_t{3} << 30), "3G");
}

// docs/TRANSPORTS.md's shm:// section holds the rendered table verbatim.  When this fails,
// paste the table printed below into the docs.
TEST(ShmOptionTable, DocsShowTheTable) {
  std::ifstream f(std::string(CONDUIT_SOURCE_DIR) + "/docs/TRANSPORTS.md");
  ASSERT_TRUE(f.good()) << "cannot read docs/TRANSPORTS.md";
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string docs = ss.str();
  const size_t begin = docs.find("## `shm://");
  ASSERT_NE(begin, std::string::npos) << "no shm:// section";
  const size_t end = docs.find("\n## ", begin + 1);
  const std::string section = docs.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
  EXPECT_NE(section.find(shm_options_markdown()), std::string::npos)
      << "docs/TRANSPORTS.md does not show the option table; it should read:\n"
      << shm_options_markdown();
}

}  // namespace
}  // namespace conduit::transport::shm
