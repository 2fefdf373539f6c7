// conduit-run: runs an unmodified program over Conduit's fast transports (smc_run's shape).
//
//   conduit-run [options] -- program [args...]   start it with libconduit-preload.so
//   conduit-run --list [--json]                  every preloaded process' connections
//   conduit-run --help                           the options (from the preload's table)
//
// Every option is a row of the preload's option table (src/preload/options.h): --key value
// sets the row's environment variable for the program, so `conduit-run --mode shm -- x` and
// `CONDUIT_PRELOAD_MODE=shm LD_PRELOAD=libconduit-preload.so x` are the same thing.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "options.h"
#include "status_model.h"

namespace {

using namespace conduit::preload;

void usage(std::FILE* out) {
  std::fprintf(out,
               "usage: conduit-run [options] -- program [args...]\n"
               "       conduit-run --list [--json]\n\n"
               "Runs an unmodified socket program with libconduit-preload.so: its TCP connections to (or from)\n"
               "peers that also run it go over shm:// (same host) or rdma://; everything else stays TCP.\n\n"
               "options (each also an environment variable, read by the preload itself):\n");
  for (const OptionRow& r : option_rows()) {
    std::fprintf(out, "  --%-12s %s (default %s; %s)\n      %.*s\n", std::string(r.key).c_str(), std::string(r.env).c_str(),
                 r.fallback.empty() ? "none" : std::string(r.fallback).c_str(), std::string(r.range).c_str(),
                 static_cast<int>(r.doc.size()), r.doc.data());
  }
  std::fprintf(out,
               "  --lib PATH     the preload library (default: next to this program, or $CONDUIT_PRELOAD_LIB)\n"
               "  --list         list the connections of every preloaded process of this user (smcss-like)\n"
               "  --json         with --list: JSON instead of a table\n");
}

std::string self_dir() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  std::string p(buf, static_cast<size_t>(n));
  return p.substr(0, p.find_last_of('/'));
}

std::string find_library(const std::string& given) {
  if (!given.empty()) return given;
  if (const char* env = std::getenv("CONDUIT_PRELOAD_LIB"); env != nullptr && *env) return env;
  const std::string dir = self_dir();
  const std::string candidates[] = {dir + "/../lib/libconduit-preload.so", dir + "/../../src/preload/libconduit-preload.so",
                                    CONDUIT_PRELOAD_INSTALLED_LIB};
  for (const std::string& c : candidates)
    if (access(c.c_str(), R_OK) == 0) return c;
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  std::string lib;
  bool list = false, json = false;
  std::vector<std::pair<const OptionRow*, std::string>> sets;
  int i = 1;
  for (; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (a == "-h" || a == "--help") {
      usage(stdout);
      return 0;
    }
    if (a == "--list") {
      list = true;
      continue;
    }
    if (a == "--json") {
      json = true;
      continue;
    }
    if (a == "--options-markdown") {  // the docs table (tests compare docs/PRELOAD.md with it)
      std::fputs(options_markdown().c_str(), stdout);
      return 0;
    }
    if (a.substr(0, 2) != "--") break;  // the program starts here (no `--`)
    std::string key(a.substr(2)), value;
    if (const size_t eq = key.find('='); eq != std::string::npos) {
      value = key.substr(eq + 1);
      key.resize(eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      std::fprintf(stderr, "conduit-run: --%s needs a value\n", key.c_str());
      return 2;
    }
    std::replace(key.begin(), key.end(), '-', '_');
    if (key == "lib") {
      lib = value;
      continue;
    }
    const OptionRow* row = find_option(key);
    if (row == nullptr) {
      std::fprintf(stderr, "conduit-run: unknown option --%s (see --help)\n", key.c_str());
      return 2;
    }
    Options probe;
    if (conduit::Status s = row->apply(value, probe); !s.ok()) {
      std::fprintf(stderr, "conduit-run: --%s: %s\n", key.c_str(), s.to_string().c_str());
      return 2;
    }
    sets.emplace_back(row, value);
  }
  if (list) {
    const auto all = read_all_status();
    std::fputs(json ? render_json(all).c_str() : render_table(all).c_str(), stdout);
    return 0;
  }
  if (i >= argc) {
    usage(stderr);
    return 2;
  }
  const std::string path = find_library(lib);
  if (path.empty() || access(path.c_str(), R_OK) != 0) {
    std::fprintf(stderr, "conduit-run: cannot find libconduit-preload.so (give --lib or CONDUIT_PRELOAD_LIB)\n");
    return 2;
  }
  for (const auto& [row, value] : sets) setenv(std::string(row->env).c_str(), value.c_str(), 1);
  // Check the whole configuration (config file included) before the program starts.
  auto loaded = load_options([](const char* n) { return std::getenv(n); });
  if (!loaded.ok()) {
    std::fprintf(stderr, "conduit-run: %s\n", loaded.status().to_string().c_str());
    return 2;
  }
  std::string preload = path;
  if (const char* old = std::getenv("LD_PRELOAD"); old != nullptr && *old) preload += std::string(":") + old;
  setenv("LD_PRELOAD", preload.c_str(), 1);
  execvp(argv[i], argv + i);
  std::fprintf(stderr, "conduit-run: %s: %s\n", argv[i], std::strerror(errno));
  return 127;
}
