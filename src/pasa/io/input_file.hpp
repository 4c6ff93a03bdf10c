// The one opener of every input file of the programs and the Python module (JSON configs, .npy tensors,
// CSV tables read back on --resume, capture folders' tensors). The name is stat'ed before it is opened, so
// that what is not a regular file is an InputError at once: a folder (which std::ifstream opens on Linux and
// then fails to read), a FIFO (whose open() blocks until a writer comes: forever), a character device
// (/dev/zero, /dev/urandom: endless) or a socket. A name that cannot be opened is an InputError naming the
// file and the reason (strerror: ENOENT, ELOOP, EACCES).
#pragma once

#include <cstddef>
#include <filesystem>
#include <fstream>
#include <limits>

namespace pasa {

// `max_bytes`: a larger file is refused before it is read (JSON readers: kMaxJsonFileBytes).
std::ifstream open_input_file(const std::filesystem::path& path,
                              std::size_t max_bytes = std::numeric_limits<std::size_t>::max());

// The largest JSON file read (configs, problems, algorithms, capture indexes are kilobytes; a sweep config
// listing every grid value stays far below).
inline constexpr std::size_t kMaxJsonFileBytes = std::size_t{64} << 20;

}  // namespace pasa
