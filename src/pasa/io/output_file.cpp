#include "pasa/io/output_file.hpp"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "pasa/core/error.hpp"

namespace pasa {

namespace fs = std::filesystem;

namespace {

std::string prefix(const std::string& option, const fs::path& path) {
  return option.empty() ? path.string() : option + " " + path.string();
}

void write_all(int fd, std::string_view text, const fs::path& path) {
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      throw InputError(path.string() + ": write failed: " + std::strerror(errno));
    }
    text.remove_prefix(static_cast<std::size_t>(n));
  }
}

// The name a dangling symlink points to (followed hop by hop, relative targets against the link's folder),
// as open(O_CREAT) through the link would create it.
fs::path dangling_target(const fs::path& link, const std::string& option) {
  fs::path p = link;
  for (int hop = 0; hop < 40; ++hop) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return p;
    std::error_code ec;
    const fs::path target = fs::read_symlink(p, ec);
    if (ec) throw InputError(fmt::format("{}: cannot read the symbolic link {}: {}", prefix(option, link), p.string(), ec.message()));
    p = target.is_absolute() ? target : p.parent_path() / target;
  }
  throw InputError(prefix(option, link) + ": too many levels of symbolic links");
}

}  // namespace

OutputTarget output_target(const fs::path& path, const std::string& option) {
  if (path.empty()) throw InputError(option.empty() ? std::string("empty output file name") : option + ": empty file name");
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ELOOP) throw InputError(prefix(option, path) + ": too many levels of symbolic links");
    if (errno != ENOENT)
      throw InputError(fmt::format("{}: cannot be written: {}", prefix(option, path), std::strerror(errno)));
    return {dangling_target(path, option), false, false};  // a new name (or a dangling link's target)
  }
  if (S_ISDIR(st.st_mode)) throw InputError(prefix(option, path) + ": is a folder; give a file name");
  if (S_ISBLK(st.st_mode))
    throw InputError(prefix(option, path) + ": is a block device; give a file name (a whole disk is never an output)");
  if (!S_ISREG(st.st_mode)) return {path, true, true};  // character device, FIFO, socket
  // A regular file, perhaps behind symlinks: the real file, written atomically beside it. A name that
  // realpath cannot turn into the same file (/dev/stdout redirected to a deleted file) is written through.
  char buf[PATH_MAX];
  struct stat real {};
  if (::realpath(path.c_str(), buf) && ::stat(buf, &real) == 0 && real.st_dev == st.st_dev && real.st_ino == st.st_ino)
    return {fs::path(buf), false, true};
  return {path, true, true};
}

namespace {

std::atomic<unsigned> temp_counter{0};

// The temporary file beside `t.path`, written and fsync'ed (with the permission bits of the file it
// replaces); removed again on failure.
fs::path write_temporary(const OutputTarget& t, const fs::path& given, std::string_view content) {
  // A short name of its own (not the target's name plus a suffix), so that a target name of the longest
  // legal length (255 bytes) still has a temporary file beside it.
  const fs::path dir = t.path.has_parent_path() ? t.path.parent_path() : fs::path(".");
  const fs::path tmp = dir / fmt::format(".pasa-{}-{}.tmp", ::getpid(), temp_counter++);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0)
    throw InputError(fmt::format("{}: cannot create a temporary file in {}: {}", given.string(), dir.string(),
                                 std::strerror(errno)));
  try {
    struct stat old {};
    if (t.exists && ::stat(t.path.c_str(), &old) == 0) (void)::fchmod(fd, old.st_mode & 07777);
    write_all(fd, content, given);
    if (::fsync(fd) != 0) throw InputError(given.string() + ": fsync failed: " + std::strerror(errno));
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  ::close(fd);
  return tmp;
}

// A device, FIFO or socket: opened (connected) write-only and written; nothing created, renamed or truncated.
void write_through(const fs::path& path, std::string_view content) {
  struct stat st {};
  int fd = -1;
  if (::stat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path.string().size() >= sizeof addr.sun_path) throw InputError(path.string() + ": socket path too long");
    std::strcpy(addr.sun_path, path.c_str());
    fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
      const int e = errno;
      ::close(fd);
      errno = e;
      fd = -1;
    }
  } else {
    fd = ::open(path.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC);
  }
  if (fd < 0) throw InputError(path.string() + ": cannot open for writing: " + std::strerror(errno));
  try {
    write_all(fd, content, path);
  } catch (...) {
    ::close(fd);
    throw;
  }
  if (::close(fd) != 0 && errno != EINTR) throw InputError(path.string() + ": write failed: " + std::strerror(errno));
}

}  // namespace

void write_file_atomic(const fs::path& path, std::string_view content) {
  write_files_atomic({{path, std::string(content)}});
}

void write_files_atomic(const std::vector<std::pair<fs::path, std::string>>& files) {
  std::vector<OutputTarget> targets;
  for (const auto& [path, content] : files) targets.push_back(output_target(path));
  std::vector<fs::path> tmps(files.size());
  auto remove_tmps = [&] {
    for (const auto& t : tmps)
      if (!t.empty()) ::unlink(t.c_str());
  };
  try {
    for (std::size_t i = 0; i < files.size(); ++i)
      if (!targets[i].write_through) tmps[i] = write_temporary(targets[i], files[i].first, files[i].second);
    for (std::size_t i = 0; i < files.size(); ++i)
      if (targets[i].write_through) write_through(targets[i].path, files[i].second);
  } catch (...) {
    remove_tmps();
    throw;
  }
  for (std::size_t i = 0; i < files.size(); ++i) {
    if (tmps[i].empty()) continue;
    if (::rename(tmps[i].c_str(), targets[i].path.c_str()) != 0) {
      const int e = errno;
      remove_tmps();  // the files not renamed yet; those renamed are written
      throw InputError(files[i].first.string() + ": cannot replace " + targets[i].path.string() + ": " + std::strerror(e));
    }
    tmps[i].clear();
  }
}

void check_not_an_input(const std::string& option, const fs::path& output,
                        const std::vector<std::pair<std::string, fs::path>>& inputs, const fs::path& shown) {
  std::error_code ec;
  if (output.empty() || !fs::exists(output, ec)) return;  // a new file cannot be an input
  for (const auto& [place, in] : inputs) {
    if (in.empty()) continue;
    std::error_code e2;
    if (fs::equivalent(output, in, e2))  // the same device and inode: symlinks followed, hard links caught
      throw InputError(fmt::format("{} {}: is the same file as the input {} {}; an output never replaces an "
                                   "input: give it another name",
                                   option, (shown.empty() ? output : shown).string(), place, in.string()));
  }
}

void check_output_paths(const std::vector<std::pair<std::string, fs::path>>& outputs,
                        const std::vector<std::pair<std::string, fs::path>>& inputs) {
  std::vector<std::pair<std::string, fs::path>> seen;
  for (const auto& [option, path] : outputs) {
    if (path.empty()) continue;
    const OutputTarget t = output_target(path, option);
    if (t.write_through) continue;  // /dev/null, a FIFO: nothing is created beside it (two may name it)
    if (t.exists) check_not_an_input(option, t.path, inputs, path);
    std::error_code ec;
    const fs::path full = fs::weakly_canonical(fs::absolute(t.path, ec), ec);
    const fs::path dir = full.parent_path();
    if (!fs::is_directory(dir, ec))
      throw InputError(fmt::format("{} {}: the folder {} does not exist", option, path.string(), dir.string()));
    // Creating a file there is the only reliable test (root passes access(W_OK) on /proc, too).
    const fs::path probe = dir / fmt::format(".pasa-probe.{}", ::getpid());
    const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0)
      throw InputError(fmt::format("{} {}: cannot write into the folder {}: {}", option, path.string(), dir.string(),
                                   std::strerror(errno)));
    ::close(fd);
    ::unlink(probe.c_str());
    for (const auto& [other, p] : seen)
      if (p == full)
        throw InputError(fmt::format("{} and {} name the same file {}; give each output its own file", other, option,
                                     path.string()));
    seen.emplace_back(option, full);
  }
}

std::vector<fs::path> files_in(const fs::path& dir, int depth) {
  std::vector<fs::path> out;
  std::error_code ec;
  if (dir.empty() || !fs::is_directory(dir, ec)) return out;
  for (fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec), end;
       !ec && it != end; it.increment(ec)) {
    if (it.depth() >= depth) it.disable_recursion_pending();
    std::error_code e2;
    if (it->is_regular_file(e2)) out.push_back(it->path());
  }
  return out;
}

AppendFile::AppendFile(const fs::path& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) throw InputError(path.string() + ": cannot open for appending: " + std::strerror(errno));
}

AppendFile::~AppendFile() {
  if (fd_ >= 0) ::close(fd_);
}

void AppendFile::append(std::string_view text) {
  write_all(fd_, text, path_);
  if (::fsync(fd_) != 0) throw InputError(path_.string() + ": fsync failed: " + std::strerror(errno));
}

}  // namespace pasa
