// The one opener of every input file of the programs and the Python module (JSON configs, .npy tensors,
// CSV tables read back on --resume, capture folders' tensors): a name that cannot be opened, or that names a
// folder (which std::ifstream opens on Linux and then fails to read), is an InputError naming the file,
// before any byte is read.
#pragma once

#include <filesystem>
#include <fstream>

namespace pasa {

std::ifstream open_input_file(const std::filesystem::path& path);

}  // namespace pasa
