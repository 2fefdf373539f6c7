#include "options.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <vector>

namespace conduit::preload {
namespace {

Result<Options> load(const std::map<std::string, std::string>& env) {
  return load_options([&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

TEST(PreloadOptions, DefaultsParseFromTheirOwnRows) {
  Result<Options> o = load({});
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  EXPECT_EQ(o->mode, Policy::kShm);
  EXPECT_TRUE(o->ports.empty());
  EXPECT_EQ(o->timeout_ms, 1000u);
  EXPECT_TRUE(o->status);
  for (const OptionRow& r : option_rows()) {
    EXPECT_EQ(r.env.substr(0, 16), "CONDUIT_PRELOAD_") << r.key;
    EXPECT_EQ(find_option(r.key), &r);
  }
}

TEST(PreloadOptions, EnvironmentSetsEveryKeyAndRejectsBadValues) {
  Result<Options> o = load({{"CONDUIT_PRELOAD_MODE", "rdma"},
                            {"CONDUIT_PRELOAD_PORTS", "6379, 7000-7010"},
                            {"CONDUIT_PRELOAD_ADDRS", "127.0.0.0/8,::1"},
                            {"CONDUIT_PRELOAD_TIMEOUT_MS", "250"},
                            {"CONDUIT_PRELOAD_LOG", "info"},
                            {"CONDUIT_PRELOAD_SHM", "ring=256K&busy_poll_us=20"},
                            {"CONDUIT_PRELOAD_STATUS", "0"}});
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  EXPECT_EQ(o->mode, Policy::kRdma);
  EXPECT_TRUE(o->port_selected(6379));
  EXPECT_TRUE(o->port_selected(7005));
  EXPECT_FALSE(o->port_selected(7011));
  EXPECT_FALSE(o->port_selected(80));
  EXPECT_EQ(o->timeout_ms, 250u);
  EXPECT_EQ(o->log, LogLevel::kInfo);
  EXPECT_EQ(o->shm_options, "ring=256K&busy_poll_us=20");
  EXPECT_FALSE(o->status);
  sockaddr_in v4{};
  v4.sin_family = AF_INET;
  v4.sin_addr.s_addr = htonl(0x7f000002);
  EXPECT_TRUE(o->addr_selected(reinterpret_cast<sockaddr*>(&v4)));
  v4.sin_addr.s_addr = htonl(0x0a000001);
  EXPECT_FALSE(o->addr_selected(reinterpret_cast<sockaddr*>(&v4)));
  sockaddr_in6 mapped{};
  mapped.sin6_family = AF_INET6;
  inet_pton(AF_INET6, "::ffff:127.1.2.3", &mapped.sin6_addr);
  EXPECT_TRUE(o->addr_selected(reinterpret_cast<sockaddr*>(&mapped))) << "a v4-mapped address is its IPv4 address";

  for (auto [k, v] : std::vector<std::pair<std::string, std::string>>{{"CONDUIT_PRELOAD_MODE", "fast"},
                                                        {"CONDUIT_PRELOAD_PORTS", "0"},
                                                        {"CONDUIT_PRELOAD_PORTS", "9-3"},
                                                        {"CONDUIT_PRELOAD_ADDRS", "300.1.1.1"},
                                                        {"CONDUIT_PRELOAD_TIMEOUT_MS", "0"},
                                                        {"CONDUIT_PRELOAD_LOG", "loud"},
                                                        {"CONDUIT_PRELOAD_SHM", "shm://x"},
                                                        {"CONDUIT_PRELOAD_STATUS", "maybe"}}) {
    Result<Options> bad = load({{k, v}});
    EXPECT_FALSE(bad.ok()) << k << "=" << v;
    if (!bad.ok()) {
      EXPECT_NE(bad.status().to_string().find(k), std::string::npos) << "the error names the variable";
    }
  }
  EXPECT_FALSE(parse_cidrs("10.0.0.0/33").ok());
  EXPECT_FALSE(parse_ports("70000").ok());
}

TEST(PreloadOptions, ConfigFileUnderTheEnvironment) {
  char path[] = "/tmp/preload-options-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  const std::string text = "# a comment\nmode = shm\nports = 6379  # trailing comment\ntimeout_ms=300\n\n";
  ASSERT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  close(fd);
  Result<Options> o = load({{"CONDUIT_PRELOAD_CONFIG", path}, {"CONDUIT_PRELOAD_TIMEOUT_MS", "400"}});
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  EXPECT_EQ(o->mode, Policy::kShm);
  EXPECT_TRUE(o->port_selected(6379));
  EXPECT_FALSE(o->port_selected(6380));
  EXPECT_EQ(o->timeout_ms, 400u) << "the environment overrides the file";
  EXPECT_EQ(o->config, path);
  Options x;
  Status s = apply_config_text("mode = shm\nbogus = 1\n", "f.conf", x);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.to_string().find("f.conf:2"), std::string::npos) << s.to_string();
  EXPECT_FALSE(apply_config_text("no equals sign\n", "f.conf", x).ok());
  unlink(path);
  EXPECT_FALSE(load({{"CONDUIT_PRELOAD_CONFIG", "/nonexistent/preload.conf"}}).ok());
}

// docs/PRELOAD.md shows the table exactly as the rows render it, and conduit-run prints it.
TEST(PreloadOptions, DocsShowTheTable) {
  std::ifstream f(std::string(CONDUIT_SOURCE_DIR) + "/docs/PRELOAD.md");
  ASSERT_TRUE(f) << "docs/PRELOAD.md";
  std::stringstream ss;
  ss << f.rdbuf();
  EXPECT_NE(ss.str().find(options_markdown()), std::string::npos)
      << "docs/PRELOAD.md must contain this table:\n" << options_markdown();
  std::FILE* p = popen(CONDUIT_RUN " --options-markdown", "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  EXPECT_EQ(pclose(p), 0);
  EXPECT_EQ(out, options_markdown());
}

}  // namespace
}  // namespace conduit::preload
