// The option tables: parsing through them, and docs/TRANSPORTS.md printing every row of
// every transport's table exactly (so the docs cannot drift from the code).
#include "conduit/transport/options.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "conduit/transport/connection.h"

namespace conduit::transport {
namespace {

struct Sample {
  uint32_t depth = 256;
  uint64_t bytes = 1 << 20;
  uint8_t small = 7;
  bool flag = false;
  std::string name = "x";
};
constexpr OptionRow<Sample> kRows[] = {
    {"depth", &Sample::depth, OptKind::kNumber, 16, 16384, "queue entries"},
    {"bytes", &Sample::bytes, OptKind::kBytes, 4096, uint64_t{1} << 30, "buffer"},
    {"small", &Sample::small, OptKind::kNumber, 0, 7, "a u8"},
    {"flag", &Sample::flag, OptKind::kBool, 0, 0, "a switch"},
    {"name", &Sample::name, OptKind::kString, 0, 0, "a name", "none"},
};

Result<Sample> parse(const std::string& url) {
  auto ep = Endpoint::parse(url);
  if (!ep.ok()) return ep.status();
  Sample s;
  CONDUIT_RETURN_IF_ERROR(parse_option_table(*ep, std::span(kRows), s));
  return s;
}

TEST(OptionTable, DefaultsAndValues) {
  auto d = parse("x://a");
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  EXPECT_EQ(d->depth, 256u);
  EXPECT_EQ(d->bytes, 1u << 20);
  auto v = parse("x://a?depth=32&bytes=8K&small=3&flag=on&name=zz");
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  EXPECT_EQ(v->depth, 32u);
  EXPECT_EQ(v->bytes, 8192u);
  EXPECT_EQ(v->small, 3);
  EXPECT_TRUE(v->flag);
  EXPECT_EQ(v->name, "zz");
}

TEST(OptionTable, RefusesWhatIsOutOfRangeMalformedOrUnknown) {
  EXPECT_EQ(parse("x://a?depth=8").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(parse("x://a?small=8").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(parse("x://a?bytes=1K").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(parse("x://a?bytes=2T").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(parse("x://a?flag=maybe").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(parse("x://a?depth=nan").status().code(), Code::kInvalidArgument);
  auto unknown = parse("x://a?dpeth=32");
  EXPECT_EQ(unknown.status().code(), Code::kInvalidArgument);
  EXPECT_NE(unknown.status().to_string().find("dpeth"), std::string::npos) << unknown.status().to_string();
}

TEST(OptionTable, DocumentsEveryRow) {
  auto docs = document_option_table(std::span(kRows));
  ASSERT_EQ(docs.size(), std::size(kRows));
  EXPECT_EQ(docs[0].markdown_row(), "| `depth` | 256 | 16–16384 | queue entries |");
  EXPECT_EQ(docs[1].markdown_row(), "| `bytes` | 1M | 4K–1G | buffer |");
  EXPECT_EQ(docs[3].default_value, "false");
  EXPECT_EQ(docs[4].default_value, "none");  // the row's default_text wins
  EXPECT_EQ(format_bytes(0), "0");
  EXPECT_EQ(format_bytes(1536), "1536");
  EXPECT_EQ(format_bytes(3 << 20), "3M");
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Every transport with an option table: each row appears verbatim in docs/TRANSPORTS.md.
TEST(OptionTable, TransportsDocMatchesEveryTransportsTable) {
  const std::string doc = read_file(CONDUIT_SOURCE_DIR "/docs/TRANSPORTS.md");
  ASSERT_FALSE(doc.empty()) << "cannot read docs/TRANSPORTS.md";
  for (const char* scheme : {"tcp", "shm", "rdma", "auto"}) {
    Transport* t = find_transport(scheme);
    ASSERT_NE(t, nullptr) << scheme;
    std::string missing;
    for (const OptionDoc& row : t->options())
      if (doc.find(row.markdown_row()) == std::string::npos) missing += row.markdown_row() + "\n";
    EXPECT_TRUE(missing.empty()) << scheme << ": docs/TRANSPORTS.md lacks (or has a stale copy of) these rows:\n"
                                 << missing;
  }
}

}  // namespace
}  // namespace conduit::transport
