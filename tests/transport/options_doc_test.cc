// docs/TRANSPORTS.md prints every row of every transport's option table exactly, so the
// docs cannot drift from the code (the tables: src/transport/option_table.h).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "conduit/transport/connection.h"

namespace conduit::transport {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(TransportOptionDocs, EveryRowOfEveryTableIsInTheDocs) {
  const std::string doc = read_file(CONDUIT_SOURCE_DIR "/docs/TRANSPORTS.md");
  ASSERT_FALSE(doc.empty()) << "cannot read docs/TRANSPORTS.md";
  size_t rows = 0;
  for (const char* scheme : {"tcp", "shm", "rdma", "auto"}) {
    Transport* t = find_transport(scheme);
    ASSERT_NE(t, nullptr) << scheme;
    std::string missing;
    for (const OptionDoc& row : t->options()) {
      ++rows;
      if (doc.find(row.markdown_row()) == std::string::npos) missing += row.markdown_row() + "\n";
    }
    EXPECT_TRUE(missing.empty()) << scheme << ": docs/TRANSPORTS.md lacks (or has a stale copy of) these rows:\n"
                                 << missing;
  }
  EXPECT_GE(rows, 20u) << "shm and rdma publish their tables";
}

}  // namespace
}  // namespace conduit::transport
