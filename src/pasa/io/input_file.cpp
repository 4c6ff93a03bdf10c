#include "pasa/io/input_file.hpp"

#include <system_error>

#include "pasa/core/error.hpp"

namespace pasa {

std::ifstream open_input_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw InputError(path.string() + ": is a folder, not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path.string() + ": cannot open for reading");
  return in;
}

}  // namespace pasa
