// The conduit-kv binary as redis-server is started: a redis.conf-style file as the first
// argument with the command line overriding it, Redis' log lines (readiness, shutdown),
// and a bad file refused with Redis' fatal-error text.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <thread>

#include "kv_process.h"
#include "kv_test_util.h"

namespace conduit::kv {
namespace {

using testing::fmt;
using testing::read_file;
using testing::ServerProcess;
using testing::TempDir;
using testing::write_file;

TEST(ServerBinary, ConfigFileFirstCommandLineOverridesIt) {
  TempDir dir;
  const std::string conf = dir.path() + "/redis.conf";
  const std::string log = dir.path() + "/kv.log";
  write_file(conf,
             "# a redis.conf\n"
             "port 6399\n"
             "maxmemory 10mb\n"
             "maxmemory-policy allkeys-lru\n"
             "hash-max-listpack-entries 64\n"
             "save 900 1\n"
             "logfile \"" + log + "\"\n"
             "appendonly no\n");
  ServerProcess server({conf, "--port", "0", "--maxmemory", "20mb", "--dir", dir.path()});
  ASSERT_FALSE(server.url().empty()) << server.log();
  EXPECT_EQ(server.url().find(":6399"), std::string::npos) << server.url();  // --port 0 won
  auto c = Client::connect(server.url());
  ASSERT_TRUE(c.ok());
  auto& k = **c;
  EXPECT_EQ(fmt(k.command({"CONFIG", "GET", "maxmemory"})), "[\"maxmemory\", \"20971520\"]");
  EXPECT_EQ(fmt(k.command({"CONFIG", "GET", "maxmemory-policy"})), "[\"maxmemory-policy\", \"allkeys-lru\"]");
  EXPECT_EQ(fmt(k.command({"CONFIG", "GET", "hash-max-listpack-entries"})), "[\"hash-max-listpack-entries\", \"64\"]");
  EXPECT_EQ(fmt(k.command({"CONFIG", "GET", "save"})), "[\"save\", \"\"]");
  const std::string info = k.command({"INFO", "server"})->str;
  EXPECT_NE(info.find("config_file:" + conf), std::string::npos) << info;
  std::string text = read_file(log);
  EXPECT_NE(text.find("# Warning: 'save 900 1' ignored: RDB snapshots are not supported"), std::string::npos) << text;
  EXPECT_NE(text.find("# Configuration loaded"), std::string::npos) << text;
  EXPECT_NE(text.find("* Server initialized"), std::string::npos) << text;
  EXPECT_NE(text.find("* Ready to accept connections"), std::string::npos) << text;
  // The readiness line on stderr names every listener (harnesses read it).
  EXPECT_NE(server.log().find("ready to accept connections on " + server.url()), std::string::npos) << server.log();
  server.kill(SIGTERM);
  text = read_file(log);
  EXPECT_NE(text.find("# User requested shutdown..."), std::string::npos) << text;
  EXPECT_NE(text.find("# conduit-kv is now ready to exit, bye bye..."), std::string::npos) << text;
}

TEST(ServerBinary, BadConfigFileIsFatalWithTheLine) {
  TempDir dir;
  const std::string conf = dir.path() + "/bad.conf";
  write_file(conf, "port 0\nmaxmemory-policy sometimes\n");
  ServerProcess server({conf});
  EXPECT_TRUE(server.url().empty());
  for (int i = 0; i < 100 && server.log().find("FATAL") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_NE(server.log().find("*** FATAL CONFIG FILE ERROR (conduit-kv, Redis 7.0 compatible) ***"), std::string::npos)
      << server.log();
  EXPECT_NE(server.log().find("'maxmemory-policy sometimes'"), std::string::npos) << server.log();
  ServerProcess missing({dir.path() + "/nope.conf"});
  EXPECT_TRUE(missing.url().empty());
  for (int i = 0; i < 100 && missing.log().find("can't open") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_NE(missing.log().find("Fatal error, can't open config file"), std::string::npos) << missing.log();
}

}  // namespace
}  // namespace conduit::kv
