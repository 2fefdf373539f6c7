#include "aof.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "conduit/base/log.h"
#include "text.h"

namespace conduit::kv {

std::string_view appendfsync_name(AppendFsync f) {
  switch (f) {
    case AppendFsync::kAlways: return "always";
    case AppendFsync::kEverysec: return "everysec";
    case AppendFsync::kNo: return "no";
  }
  return "?";
}

bool parse_appendfsync(std::string_view s, AppendFsync* out) {
  if (eq_nocase(s, "always")) *out = AppendFsync::kAlways;
  else if (eq_nocase(s, "everysec")) *out = AppendFsync::kEverysec;
  else if (eq_nocase(s, "no")) *out = AppendFsync::kNo;
  else return false;
  return true;
}

namespace {

std::string dir_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

Status fsync_dir(const std::string& path) {
  UniqueFd d(::open(dir_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!d) return Status::FromErrnoAuto(errno, "aof: open directory of " + path);
  if (::fsync(d.get()) != 0) return Status::FromErrnoAuto(errno, "aof: fsync directory of " + path);
  return {};
}

// Writes all of [p, p+n); false with errno set on failure.
bool write_all(int fd, const char* p, size_t n, size_t* written) {
  *written = 0;
  while (*written < n) {
    const ssize_t k = ::write(fd, p + *written, n - *written);
    if (k < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    *written += static_cast<size_t>(k);
  }
  return true;
}

}  // namespace

namespace {

// A rewrite's temporary file is named after the pid of the server that started it.  A
// server killed during a rewrite (SIGKILL, power loss) leaves it behind; at start the
// files of servers that no longer run are removed.  One of a live process (another
// server sharing the directory, mid-rewrite) is left alone.
void remove_stale_rewrite_files(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  constexpr std::string_view kPrefix = "temp-rewriteaof-bg-", kSuffix = ".aof";
  while (const dirent* ent = ::readdir(d)) {
    const std::string_view name = ent->d_name;
    if (name.size() <= kPrefix.size() + kSuffix.size() || name.substr(0, kPrefix.size()) != kPrefix ||
        name.substr(name.size() - kSuffix.size()) != kSuffix)
      continue;
    const std::string_view digits = name.substr(kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size());
    long pid = 0;
    bool numeric = digits.size() <= 9;
    for (char c : digits) {
      numeric = numeric && c >= '0' && c <= '9';
      pid = pid * 10 + (c - '0');
    }
    if (!numeric || pid <= 0) continue;
    if (pid == ::getpid() || ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM) continue;  // alive
    const std::string file = dir + "/" + std::string(name);
    if (::unlink(file.c_str()) == 0)
      CONDUIT_LOG(kInfo) << "aof: removed " << file << ", left by an AOF rewrite of process " << pid
                         << ", which no longer runs";
    else
      CONDUIT_LOG(kWarn) << "aof: cannot remove the stale rewrite file " << file << ": " << std::strerror(errno);
  }
  ::closedir(d);
}

}  // namespace

// --- Aof --------------------------------------------------------------------------------------

Result<std::unique_ptr<Aof>> Aof::open(const std::string& path, AppendFsync policy) {
  remove_stale_rewrite_files(dir_of(path));
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644));
  if (!fd) return Status::FromErrnoAuto(errno, "aof: open " + path + " for appending");
  struct stat st{};
  if (::fstat(fd.get(), &st) != 0) return Status::FromErrnoAuto(errno, "aof: stat " + path);
  return std::unique_ptr<Aof>(new Aof(path, std::move(fd), policy, static_cast<uint64_t>(st.st_size)));
}

std::unique_ptr<Aof> Aof::create_empty(const std::string& path, AppendFsync policy) {
  remove_stale_rewrite_files(dir_of(path));
  return std::unique_ptr<Aof>(new Aof(path, UniqueFd(), policy, 0));
}

Aof::Aof(std::string path, UniqueFd fd, AppendFsync policy, uint64_t size)
    : path_(std::move(path)), fd_(std::move(fd)), policy_(policy), size_(size), base_size_(size) {
  if (fd_) start_fsync_thread();
}

void Aof::start_fsync_thread() {
  fsync_thread_ = std::thread([this] { fsync_thread_main(); });
}

Aof::~Aof() {
  abort_rewrite();
  (void)flush();
  {
    std::lock_guard<std::mutex> lock(fd_mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (fsync_thread_.joinable()) fsync_thread_.join();
  if (fd_ && policy_ != AppendFsync::kNo && ::fdatasync(fd_.get()) != 0)
    CONDUIT_LOG(kWarn) << "aof: fdatasync " << path_ << " at close: " << std::strerror(errno);
}

void Aof::fsync_thread_main() {
  std::unique_lock<std::mutex> lock(fd_mu_);
  while (!stop_) {
    cv_.wait_for(lock, std::chrono::seconds(1));
    if (stop_) break;
    if (!dirty_.exchange(false)) continue;
    // Holding fd_mu_ keeps fd_ from being swapped (rewrite) under the fdatasync.
    if (::fdatasync(fd_.get()) != 0)
      CONDUIT_LOG(kWarn) << "aof: background fdatasync of " << path_ << ": " << std::strerror(errno);
  }
}

void Aof::set_policy(AppendFsync p) {
  policy_ = p;
  if (p == AppendFsync::kAlways) (void)flush();
}

void Aof::append_select(ByteBuffer* b, int db) {
  char num[24];
  const int n = std::snprintf(num, sizeof num, "%d", db);
  const std::string_view args[2] = {"SELECT", std::string_view(num, static_cast<size_t>(n))};
  append_command(b, args);
}

void Aof::feed(int db, std::span<const std::string_view> args) {
  if (!fd_) {
    // Awaiting the first rewrite: its file plus the rewrite buffer will be the whole AOF.
    if (child_pid_ <= 0) return;  // the next rewrite's snapshot will hold this command
    if (db >= 0 && db != rewrite_selected_db_) {
      append_select(&rewrite_buf_, db);
      rewrite_selected_db_ = db;
    }
    append_command(&rewrite_buf_, args);
    return;
  }
  if (db >= 0 && db != selected_db_) {
    append_select(&buf_, db);
    selected_db_ = db;
  }
  append_command(&buf_, args);
  if (child_pid_ > 0) {
    if (db >= 0 && db != rewrite_selected_db_) {
      append_select(&rewrite_buf_, db);
      rewrite_selected_db_ = db;
    }
    append_command(&rewrite_buf_, args);
  }
}

Status Aof::flush() {
  if (buf_.empty()) return {};
  size_t written = 0;
  if (!write_all(fd_.get(), buf_.data(), buf_.size(), &written)) {
    const int err = errno;
    // Take back a partial write so the file never holds half a record followed by more.
    if (written > 0 && ::ftruncate(fd_.get(), static_cast<off_t>(size_)) != 0)
      CONDUIT_LOG(kWarn) << "aof: could not remove a partial write from " << path_ << ": " << std::strerror(errno);
    write_status_ = Status::FromErrnoAuto(err, "aof: write " + path_);
    CONDUIT_LOG(kWarn) << write_status_.to_string();
    return write_status_;
  }
  size_ += written;
  buf_.clear();
  if (buf_.capacity() > (4u << 20)) buf_.release();
  if (policy_ == AppendFsync::kAlways) {
    if (::fdatasync(fd_.get()) != 0) {
      write_status_ = Status::FromErrnoAuto(errno, "aof: fdatasync " + path_);
      CONDUIT_LOG(kWarn) << write_status_.to_string();
      return write_status_;
    }
  } else if (policy_ == AppendFsync::kEverysec) {
    dirty_.store(true, std::memory_order_relaxed);
  }
  write_status_ = Status();
  return {};
}

Result<int> Aof::start_rewrite(const std::function<bool(int fd)>& write_snapshot) {
  if (child_pid_ > 0) return Status(Code::kUnavailable, "Background append only file rewriting already in progress");
  temp_path_ = dir_of(path_) + "/temp-rewriteaof-bg-" + std::to_string(::getpid()) + ".aof";
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return Status::FromErrnoAuto(errno, "aof rewrite: pipe");
  UniqueFd rd(p[0]), wr(p[1]);
  const std::string temp = temp_path_;
  const pid_t pid = ::fork();
  if (pid < 0) return Status::FromErrnoAuto(errno, "aof rewrite: fork");
  if (pid == 0) {
    // Child: only the snapshot, then _exit (no destructors, no atexit, no stdio flush).
    rd.reset();
    const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    // Nothing may unwind out of here: an exception (out of memory) caught by the server's
    // handlers would leave the child running a copy of the server.
    bool ok = false;
    try {
      ok = fd >= 0 && write_snapshot(fd) && ::fsync(fd) == 0;
    } catch (...) {
      ok = false;
    }
    if (fd >= 0 && ::close(fd) != 0) ok = false;
    ::_exit(ok ? 0 : 1);
  }
  child_pid_ = pid;
  child_pipe_ = std::move(rd);
  rewrite_buf_.clear();
  rewrite_selected_db_ = -1;
  CONDUIT_LOG(kInfo) << "aof: background rewrite started by pid " << pid;
  return child_pipe_.get();
}

Status Aof::finish_rewrite() {
  if (child_pid_ <= 0) return {};
  int status = 0;
  pid_t r;
  do {
    r = ::waitpid(child_pid_, &status, 0);
  } while (r < 0 && errno == EINTR);
  child_pid_ = -1;
  child_pipe_.reset();
  auto fail = [&](Status s) {
    ::unlink(temp_path_.c_str());
    rewrite_buf_.release();
    rewrite_status_ = s;
    CONDUIT_LOG(kWarn) << s.to_string();
    return s;
  };
  if (r < 0) return fail(Status::FromErrnoAuto(errno, "aof rewrite: waitpid"));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return fail(Status(Code::kIoError, "aof rewrite: the child failed (status " + std::to_string(status) + ")"));
  // Everything queued so far also goes to the old file: it stays complete until the rename.
  CONDUIT_RETURN_IF_ERROR(flush());
  UniqueFd nfd(::open(temp_path_.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC));
  if (!nfd) return fail(Status::FromErrnoAuto(errno, "aof rewrite: open " + temp_path_));
  size_t written = 0;
  if (!write_all(nfd.get(), rewrite_buf_.data(), rewrite_buf_.size(), &written))
    return fail(Status::FromErrnoAuto(errno, "aof rewrite: append the rewrite buffer"));
  if (::fdatasync(nfd.get()) != 0) return fail(Status::FromErrnoAuto(errno, "aof rewrite: fdatasync"));
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0)
    return fail(Status::FromErrnoAuto(errno, "aof rewrite: rename " + temp_path_ + " to " + path_));
  if (Status s = fsync_dir(path_); !s.ok()) CONDUIT_LOG(kWarn) << s.to_string();
  struct stat st{};
  const uint64_t new_size = ::fstat(nfd.get(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
  const bool first = !fd_;
  {
    std::lock_guard<std::mutex> lock(fd_mu_);
    fd_ = std::move(nfd);
  }
  if (first) start_fsync_thread();
  size_ = base_size_ = new_size;
  selected_db_ = rewrite_buf_.empty() ? -1 : rewrite_selected_db_;
  rewrite_buf_.release();
  rewrite_status_ = Status();
  ++rewrites_;
  CONDUIT_LOG(kInfo) << "aof: background rewrite finished: " << path_ << " is " << new_size << " bytes";
  return {};
}

Status Aof::wait_rewrite() {
  if (child_pid_ <= 0) return {};
  return finish_rewrite();
}

void Aof::abort_rewrite() {
  if (child_pid_ <= 0) return;
  ::kill(child_pid_, SIGKILL);
  int status;
  while (::waitpid(child_pid_, &status, 0) < 0 && errno == EINTR) {
  }
  child_pid_ = -1;
  child_pipe_.reset();
  ::unlink(temp_path_.c_str());
  rewrite_buf_.release();
}

}  // namespace conduit::kv
