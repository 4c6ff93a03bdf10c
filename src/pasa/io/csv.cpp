#include "pasa/io/csv.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "pasa/core/error.hpp"

namespace pasa {

std::string csv_field(std::string_view s) {
  if (s.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(s);
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

std::string csv_line(const CsvRow& row) {
  std::string out;
  for (std::size_t i = 0; i < row.size(); ++i) {
    if (i) out += ',';
    out += csv_field(row[i]);
  }
  out += '\n';
  return out;
}

CsvRow parse_csv_line(std::string_view line) {
  CsvRow row;
  std::string field;
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"') {
        if (i + 1 < line.size() && line[i + 1] == '"') {
          field += '"';
          ++i;
        } else {
          quoted = false;
        }
      } else {
        field += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      row.push_back(std::move(field));
      field.clear();
    } else {
      field += c;
    }
  }
  if (quoted) throw InputError("CSV line has an unterminated quoted field: " + std::string(line.substr(0, 80)));
  row.push_back(std::move(field));
  return row;
}

std::string csv_number(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", x);
  return buf;
}

double parse_csv_number(std::string_view s) {
  const std::string text(s);
  char* end = nullptr;
  errno = 0;
  const double x = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size())
    throw InputError("CSV field '" + text + "' is not a number");
  return x;
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path.string() + ": cannot open for reading");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

CsvFileLines read_complete_lines(const std::filesystem::path& path) {
  const std::string text = read_file(path);
  CsvFileLines out;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t nl = text.find('\n', start);
    if (nl == std::string::npos) {
      out.torn = true;  // interrupted mid-row: the writer always ends a row with '\n'
      break;
    }
    out.lines.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  return out;
}

namespace {

void write_all(int fd, std::string_view text, const std::filesystem::path& path) {
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      throw InputError(path.string() + ": write failed: " + std::strerror(errno));
    }
    text.remove_prefix(static_cast<std::size_t>(n));
  }
}

}  // namespace

namespace {

// The temporary file of `path`, written and fsync'ed; removed again on failure.
std::filesystem::path write_temporary(const std::filesystem::path& path, std::string_view content) {
  const std::filesystem::path tmp = path.string() + fmt::format(".tmp{}", ::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw InputError(path.string() + ": cannot create " + tmp.string() + ": " + std::strerror(errno));
  try {
    write_all(fd, content, path);
    if (::fsync(fd) != 0) throw InputError(path.string() + ": fsync failed: " + std::strerror(errno));
  } catch (...) {
    ::close(fd);
    std::error_code ec;
    std::filesystem::remove(tmp, ec);
    throw;
  }
  ::close(fd);
  return tmp;
}

}  // namespace

void write_file_atomic(const std::filesystem::path& path, std::string_view content) {
  write_files_atomic({{path, std::string(content)}});
}

void write_files_atomic(const std::vector<std::pair<std::filesystem::path, std::string>>& files) {
  std::vector<std::filesystem::path> tmps;
  auto remove_tmps = [&] {
    std::error_code ec;
    for (const auto& t : tmps) std::filesystem::remove(t, ec);
  };
  try {
    for (const auto& [path, content] : files) tmps.push_back(write_temporary(path, content));
  } catch (...) {
    remove_tmps();
    throw;
  }
  for (std::size_t i = 0; i < files.size(); ++i) {
    std::error_code ec;
    std::filesystem::rename(tmps[i], files[i].first, ec);
    if (ec) {
      tmps.erase(tmps.begin(), tmps.begin() + static_cast<std::ptrdiff_t>(i));
      remove_tmps();
      throw InputError(files[i].first.string() + ": cannot replace: " + ec.message());
    }
  }
}

void check_output_paths(const std::vector<std::pair<std::string, std::filesystem::path>>& outputs) {
  std::vector<std::pair<std::string, std::filesystem::path>> seen;
  for (const auto& [option, path] : outputs) {
    if (path.empty()) continue;
    std::error_code ec;
    const std::filesystem::path full = std::filesystem::weakly_canonical(std::filesystem::absolute(path, ec), ec);
    const std::filesystem::path dir = full.parent_path();
    if (std::filesystem::is_directory(full, ec))
      throw InputError(fmt::format("{} {}: is a folder; give a file name", option, path.string()));
    if (!std::filesystem::is_directory(dir, ec))
      throw InputError(fmt::format("{} {}: the folder {} does not exist", option, path.string(), dir.string()));
    // Creating a file there is the only reliable test (root passes access(W_OK) on /proc, too).
    const std::filesystem::path probe = dir / fmt::format(".pasa-probe.{}", ::getpid());
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

AppendFile::AppendFile(const std::filesystem::path& path) : path_(path) {
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
