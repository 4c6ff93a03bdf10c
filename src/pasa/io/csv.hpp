// Small CSV layer for result tables (RFC 4180 quoting) plus the file primitives the sweep needs: rows
// appended and flushed to disk one by one, and whole files replaced atomically (temp file + rename), so an
// interrupted run never leaves a half-written table behind.
#pragma once

#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace pasa {

using CsvRow = std::vector<std::string>;

// A field quoted only when it must be (comma, quote, CR or LF inside); quotes doubled.
std::string csv_field(std::string_view s);
// Fields joined by commas, terminated by '\n'.
std::string csv_line(const CsvRow& row);
// Inverse of csv_line for one line without its '\n'. Throws InputError on an unterminated quote.
CsvRow parse_csv_line(std::string_view line);

// A number as CSV text: %.17g (round-trips every double exactly), "nan", "inf", "-inf".
std::string csv_number(double x);
double parse_csv_number(std::string_view s);  // inverse; throws InputError naming the text

// The complete lines of a text file: a last line without its '\n' is torn (the writer was interrupted
// mid-row) and is reported in `torn` instead of `lines`.
struct CsvFileLines {
  std::vector<std::string> lines;
  bool torn = false;
};
CsvFileLines read_complete_lines(const std::filesystem::path&);

// Writes `content` to a temporary file next to `path`, flushes it to disk and renames it over `path`.
void write_file_atomic(const std::filesystem::path& path, std::string_view content);
std::string read_file(const std::filesystem::path&);

// The output files of one command, checked before any work is done: each non-empty path names a file (not
// a folder) in an existing, writable folder, and no two name the same file. `outputs` pairs the option
// that gave a path ("--csv") with the path; InputError names the option and the path.
void check_output_paths(const std::vector<std::pair<std::string, std::filesystem::path>>& outputs);
// Writes several files all or none: every content to a temporary file next to its target first, then the
// renames; a failure before the renames removes the temporary files and leaves the targets untouched.
void write_files_atomic(const std::vector<std::pair<std::filesystem::path, std::string>>& files);

// Append-only file: each append() is one write(2) followed by fsync, so a crash loses at most the row
// being written (which then shows up as a torn last line).
class AppendFile {
 public:
  explicit AppendFile(const std::filesystem::path&);
  ~AppendFile();
  AppendFile(const AppendFile&) = delete;
  AppendFile& operator=(const AppendFile&) = delete;
  void append(std::string_view text);

 private:
  std::filesystem::path path_;
  int fd_ = -1;
};

}  // namespace pasa
