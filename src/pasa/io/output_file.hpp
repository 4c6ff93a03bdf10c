// The one writer of every output file of the programs and the Python module: what a path names
// decides how it is written.
//  - A regular file, or a name that does not exist yet: atomically, a temporary file beside it is written,
//    fsync'ed and renamed over it, so an interrupted run never leaves a half-written file (and an existing
//    file keeps its permission bits).
//  - A symbolic link: followed to the real file, which is then written atomically beside the REAL file; the
//    link stays a link. A dangling link is followed as the shell's `>` does: its target is created (when the
//    target's folder exists).
//  - A character device, FIFO or socket (/dev/null, /dev/stdout, a named pipe): written through, opened
//    write-only (a socket: connected), no temporary file, no rename, no truncation, so `--out-npy /dev/null`
//    discards the output and leaves /dev/null a device even when run as root.
//  - A folder or a block device: refused with an InputError naming it.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pasa {

struct OutputTarget {
  std::filesystem::path path;  // where the bytes go: the real file behind any symlinks, or the device as given
  bool write_through = false;  // a device, FIFO or socket: no temporary file, no rename
  bool exists = false;         // (regular files) the real file exists already
};
// What `path` names for writing; `option` ("--csv", empty when none) only prefixes the InputError raised
// for a folder, a block device or a symlink loop.
OutputTarget output_target(const std::filesystem::path& path, const std::string& option = "");

// Writes `content` to `path` as described above.
void write_file_atomic(const std::filesystem::path& path, std::string_view content);
// Several files all or none: every regular file's content to a temporary file beside its target first, then
// the devices written through, then the renames; a failure before the renames removes the temporary files
// and leaves every regular target untouched (what already went to a device cannot be taken back).
void write_files_atomic(const std::vector<std::pair<std::filesystem::path, std::string>>& files);

// The output files of one command, checked before any work is done: each non-empty path names a device,
// FIFO or socket (accepted as they are), or a file (not a folder) in an existing, writable folder (that of
// the real file behind a symlink), and no two name the same file. `outputs` pairs the option that gave a
// path ("--csv") with the path; InputError names the option and the path. No output may be the same file as
// one of `inputs` (the option or JSON place that named it, and its path): through symlinks and hard links
// too, since an output is renamed over its real file and an input of the same shape would be lost unseen.
void check_output_paths(const std::vector<std::pair<std::string, std::filesystem::path>>& outputs,
                        const std::vector<std::pair<std::string, std::filesystem::path>>& inputs = {});
// The check against inputs alone, for writers whose outputs are fixed names in a folder (sweeps): throws
// when an existing `output` is the same file as an input.
// `shown` (default: output) is the name the message gives it.
void check_not_an_input(const std::string& option, const std::filesystem::path& output,
                        const std::vector<std::pair<std::string, std::filesystem::path>>& inputs,
                        const std::filesystem::path& shown = {});

// The regular files in `dir` and its folders down to `depth` levels (an empty or missing dir: none), for
// the check above when a whole folder is an input (a GPU capture, a config folder).
std::vector<std::filesystem::path> files_in(const std::filesystem::path& dir, int depth);

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
