#include "pasa/io/input_file.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "pasa/core/error.hpp"

namespace pasa {

namespace {

const char* kind_of(mode_t m) {
  if (S_ISFIFO(m)) return "a FIFO (named pipe)";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

}  // namespace

std::ifstream open_input_file(const std::filesystem::path& path, std::size_t max_bytes) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)  // (follows symlinks: a link to a regular file is read)
    throw InputError(fmt::format("{}: cannot open for reading: {}", path.string(), std::strerror(errno)));
  if (S_ISDIR(st.st_mode)) throw InputError(path.string() + ": is a folder, not a file");
  if (!S_ISREG(st.st_mode))
    throw InputError(fmt::format("{}: is {}; inputs are read from regular files only", path.string(), kind_of(st.st_mode)));
  if (static_cast<std::size_t>(st.st_size) > max_bytes)
    throw InputError(fmt::format("{}: {} bytes, more than the {} MiB a JSON input may have", path.string(),
                                 st.st_size, max_bytes >> 20));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(fmt::format("{}: cannot open for reading: {}", path.string(), std::strerror(errno)));
  return in;
}

}  // namespace pasa
