// Runs LLVMFuzzerTestOneInput over files and directories (used when clang/libFuzzer is
// unavailable: g++ builds the target and this replays the seed corpus).
#include <dirent.h>
#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

static int run_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string s = ss.str();
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  return 1;
}

int main(int argc, char** argv) {
  int n = 0;
  for (int i = 1; i < argc; ++i) {
    if (argv[i][0] == '-') continue;  // libFuzzer flags
    struct stat st{};
    if (stat(argv[i], &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      DIR* d = opendir(argv[i]);
      while (dirent* e = d ? readdir(d) : nullptr)
        if (e->d_name[0] != '.') n += run_file(std::string(argv[i]) + "/" + e->d_name);
      if (d) closedir(d);
    } else {
      n += run_file(argv[i]);
    }
  }
  std::printf("standalone fuzz driver: ran %d inputs\n", n);
  return n > 0 ? 0 : 1;
}
