// Power-loss durability under appendfsync always, argued from the system calls: the real
// conduit-kv binary runs under strace (-f: every thread), and for each acknowledged SET the
// trace must show, in this order, the write() of its record to the AOF, an fdatasync()
// (or fsync()) of that file, and only then the send of its "+OK".  A process kill (the
// crash test) leaves the page cache alone; this shows the data was on the device before
// the client heard "OK".  The same check run against appendfsync everysec must find
// replies sent before their fsync, so the check itself can fail.
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <regex>

#include "kv_process.h"
#include "kv_test_util.h"

namespace conduit::kv {
namespace {

using testing::fmt;
using testing::ServerProcess;
using testing::TempDir;

struct Call {
  std::string name;  // write, sendto, sendmsg, writev, fdatasync, fsync
  int fd = -1;
  std::string line;
};

// The trace as completed calls in order.  With -f a call interrupted by another thread
// shows as "<unfinished ...>" and completes at its "<... name resumed>" line: it is placed
// there, so "fsync before send" means the fsync returned before the send began.
std::vector<Call> read_trace(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  std::vector<Call> calls;
  std::map<std::string, Call> pending;  // pid -> unfinished call
  const std::regex start(R"(^(\d+)\s+(write|writev|sendto|sendmsg|fdatasync|fsync)\((\d+))");
  const std::regex resumed(R"(^(\d+)\s+<\.\.\. (\w+) resumed>)");
  std::smatch m;
  while (std::getline(f, line)) {
    if (std::regex_search(line, m, start)) {
      Call c{m[2], std::stoi(m[3]), line};
      if (line.find("<unfinished ...>") != std::string::npos)
        pending[m[1]] = c;
      else
        calls.push_back(c);
    } else if (std::regex_search(line, m, resumed)) {
      auto it = pending.find(m[1]);
      if (it != pending.end()) {
        calls.push_back(it->second);
        pending.erase(it);
      }
    }
  }
  return calls;
}

// For SET number i (value "durable-<i>-x"): index of the AOF write holding it, of the first
// fsync of that fd after it, and of the i-th "+OK" sent.  Returns how many SETs had their
// reply sent before their fsync (or had no fsync at all).
int violations(const std::vector<Call>& calls, int sets, std::string* why) {
  std::vector<size_t> oks;
  for (size_t i = 0; i < calls.size(); ++i)
    if ((calls[i].name == "sendto" || calls[i].name == "sendmsg" || calls[i].name == "writev") &&
        calls[i].line.find("\"+OK\\r\\n\"") != std::string::npos)
      oks.push_back(i);
  if (oks.size() < static_cast<size_t>(sets)) {
    *why = "only " + std::to_string(oks.size()) + " replies in the trace";
    return sets;
  }
  int bad = 0;
  for (int s = 0; s < sets; ++s) {
    const std::string marker = "durable-" + std::to_string(s) + "-x";
    size_t w = calls.size();
    for (size_t i = 0; i < calls.size(); ++i)
      if (calls[i].name == "write" && calls[i].line.find(marker) != std::string::npos) {
        w = i;
        break;
      }
    if (w == calls.size()) {
      *why += "no AOF write of " + marker + "; ";
      ++bad;
      continue;
    }
    size_t sync = calls.size();
    for (size_t i = w + 1; i < calls.size(); ++i)
      if ((calls[i].name == "fdatasync" || calls[i].name == "fsync") && calls[i].fd == calls[w].fd) {
        sync = i;
        break;
      }
    if (sync > oks[static_cast<size_t>(s)]) {
      *why += "SET " + std::to_string(s) + " answered at call " + std::to_string(oks[static_cast<size_t>(s)]) +
              ", fsync at " + (sync == calls.size() ? std::string("never") : std::to_string(sync)) + "; ";
      ++bad;
    }
    if (w > oks[static_cast<size_t>(s)]) *why += "SET " + std::to_string(s) + " answered before its write; ";
  }
  return bad;
}

// Runs `sets` SETs one at a time against conduit-kv under strace; returns the trace.
std::vector<Call> traced_sets(const std::string& fsync_policy, int sets) {
  TempDir dir;
  const std::string trace = dir.path() + "/trace";
  std::vector<Call> calls;
  {
    ServerProcess s({"--port", "0", "--appendonly", "yes", "--appendfsync", fsync_policy, "--dir", dir.path(),
                     "--loglevel", "warning"},
                    0, {"strace", "-f", "-qq", "-s", "256", "-e", "trace=write,writev,sendto,sendmsg,fdatasync,fsync",
                        "-o", trace, "--"});
    EXPECT_FALSE(s.url().empty()) << "conduit-kv under strace did not start (is strace installed, is ptrace allowed?): "
                                  << s.log();
    if (s.url().empty()) return calls;
    auto c = Client::connect(s.url());
    EXPECT_TRUE(c.ok());
    if (!c.ok()) return calls;
    for (int i = 0; i < sets; ++i)
      EXPECT_EQ(fmt((*c)->command({"SET", "k" + std::to_string(i), "durable-" + std::to_string(i) + "-x"})), "+OK");
    // Stop the server itself (not strace), then wait for strace to finish the trace.
    const std::string info = (*c)->command({"INFO", "server"})->str;
    const pid_t server_pid = std::stoi(info.substr(info.find("process_id:") + 11));
    c->reset();
    ::kill(server_pid, SIGTERM);
    s.kill(0);
  }
  return read_trace(trace);
}

TEST(FsyncOrder, AlwaysSyncsBeforeEveryReply) {
  constexpr int kSets = 20;
  const auto calls = traced_sets("always", kSets);
  ASSERT_FALSE(calls.empty());
  std::string why;
  EXPECT_EQ(violations(calls, kSets, &why), 0) << why;
}

TEST(FsyncOrder, TheCheckCatchesEverysec) {
  constexpr int kSets = 20;
  const auto calls = traced_sets("everysec", kSets);
  ASSERT_FALSE(calls.empty());
  std::string why;
  EXPECT_GT(violations(calls, kSets, &why), 0) << "everysec answered every SET after an fsync?";
}

}  // namespace
}  // namespace conduit::kv
