// Naming services: the table of schemes, list:// and file://.
#include <sys/stat.h>

#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "conduit/base/log.h"
#include "conduit/rpc/cluster.h"

namespace conduit::rpc {
namespace {

std::vector<std::string> split_urls(std::string_view text, char sep) {
  std::vector<std::string> out;
  std::string cur;
  auto flush = [&] {
    const size_t a = cur.find_first_not_of(" \t\r");
    const size_t b = cur.find_last_not_of(" \t\r");
    if (a != std::string::npos && cur[a] != '#') out.push_back(cur.substr(a, b - a + 1));
    cur.clear();
  };
  for (char c : text) {
    if (c == sep || c == '\n') {
      flush();
    } else {
      cur += c;
    }
  }
  flush();
  return out;
}

class ListNaming : public NamingService {
 public:
  explicit ListNaming(std::vector<std::string> urls) : urls_(std::move(urls)) {}
  Status start(reactor::EventLoop&, UpdateFn on_update) override {
    on_update(urls_);
    return Status::Ok();
  }
  void stop() override {}

 private:
  std::vector<std::string> urls_;
};

class FileNaming : public NamingService {
 public:
  FileNaming(std::string path, uint64_t poll_ms) : path_(std::move(path)), poll_ms_(poll_ms) {}
  ~FileNaming() override { stop(); }
  Status start(reactor::EventLoop& loop, UpdateFn on_update) override {
    loop_ = &loop;
    on_update_ = std::move(on_update);
    struct stat st{};
    if (::stat(path_.c_str(), &st) != 0) return Status::FromErrno(errno, "file naming: " + path_);
    check();
    timer_ = loop.run_every(poll_ms_ * 1'000'000, [this] { check(); });
    return Status::Ok();
  }
  void stop() override {
    if (loop_ != nullptr && timer_ != 0) loop_->cancel(timer_);
    timer_ = 0;
  }

 private:
  void check() {
    struct stat st{};
    if (::stat(path_.c_str(), &st) != 0) return;  // keep the last list while the file is away
    if (seen_ && st.st_mtim.tv_sec == mtime_.tv_sec && st.st_mtim.tv_nsec == mtime_.tv_nsec && st.st_size == size_) return;
    std::ifstream f(path_);
    std::stringstream ss;
    ss << f.rdbuf();
    seen_ = true;
    mtime_ = st.st_mtim;
    size_ = st.st_size;
    auto urls = split_urls(ss.str(), '\n');
    if (urls == last_) return;
    last_ = urls;
    CONDUIT_LOG(kInfo) << "file naming: " << path_ << ": " << urls.size() << " servers";
    on_update_(std::move(urls));
  }
  std::string path_;
  uint64_t poll_ms_;
  reactor::EventLoop* loop_ = nullptr;
  reactor::TimerId timer_ = 0;
  UpdateFn on_update_;
  bool seen_ = false;
  timespec mtime_{};
  off_t size_ = 0;
  std::vector<std::string> last_;
};

struct Table {
  std::mutex mu;
  std::map<std::string, NamingFactory, std::less<>> factories;
  Table() {
    factories["list"] = [](std::string_view rest) -> Result<std::unique_ptr<NamingService>> {
      auto urls = split_urls(rest, ',');
      if (urls.empty()) return Status(Code::kInvalidArgument, "list naming: no URLs");
      return std::unique_ptr<NamingService>(new ListNaming(std::move(urls)));
    };
    factories["file"] = [](std::string_view rest) -> Result<std::unique_ptr<NamingService>> {
      std::string path(rest);
      uint64_t poll = 500;
      if (const size_t q = path.find("?poll_ms="); q != std::string::npos) {
        poll = std::strtoull(path.c_str() + q + 9, nullptr, 10);
        path.resize(q);
      }
      if (path.empty() || poll == 0) return Status(Code::kInvalidArgument, "file naming: file:///path[?poll_ms=N]");
      return std::unique_ptr<NamingService>(new FileNaming(std::move(path), poll));
    };
  }
};
Table& table() {
  static Table t;
  return t;
}

}  // namespace

Status register_naming(std::string_view scheme, NamingFactory factory) {
  Table& t = table();
  std::lock_guard<std::mutex> g(t.mu);
  if (!t.factories.emplace(std::string(scheme), std::move(factory)).second)
    return Status(Code::kInvalidArgument, "naming scheme " + std::string(scheme) + " exists");
  return Status::Ok();
}

Result<std::unique_ptr<NamingService>> make_naming(std::string_view spec) {
  const size_t p = spec.find("://");
  if (p == std::string_view::npos)
    return Status(Code::kInvalidArgument, "naming: expected scheme://..., e.g. list://tcp://h:1,tcp://h:2 or file:///path");
  NamingFactory f;
  {
    Table& t = table();
    std::lock_guard<std::mutex> g(t.mu);
    auto it = t.factories.find(spec.substr(0, p));
    if (it == t.factories.end()) return Status(Code::kNotFound, "naming: unknown scheme " + std::string(spec.substr(0, p)));
    f = it->second;
  }
  return f(spec.substr(p + 3));
}

std::string_view lb_policy_name(LbPolicy p) {
  switch (p) {
    case LbPolicy::kRoundRobin: return "rr";
    case LbPolicy::kRandom: return "random";
    case LbPolicy::kConsistentHash: return "hash";
  }
  return "?";
}

bool parse_lb_policy(std::string_view s, LbPolicy* out) {
  for (LbPolicy p : {LbPolicy::kRoundRobin, LbPolicy::kRandom, LbPolicy::kConsistentHash}) {
    if (lb_policy_name(p) == s) {
      *out = p;
      return true;
    }
  }
  return false;
}

}  // namespace conduit::rpc
