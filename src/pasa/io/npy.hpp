// NumPy .npy files (format versions 1.0-3.0, C order, little-endian), so tensors and rounded values can be
// exchanged bit-exactly with Python. Supported dtypes: float16, float32, float64, and uint8/uint16 holding
// storage bit patterns of a low-precision Format (see round.hpp encode/decode).
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "pasa/numeric/format.hpp"

namespace pasa {

enum class NpyDtype { f16, f32, f64, u8, u16 };

// C order, little-endian raw data; bytes.size() == product(shape) * npy_itemsize(dtype).
struct NpyArray {
  NpyDtype dtype;
  std::vector<std::size_t> shape;
  std::vector<unsigned char> bytes;
};

std::size_t npy_itemsize(NpyDtype);
std::string npy_descr(NpyDtype);          // "<f2", "<f4", "<f8", "|u1", "<u2"
std::string npy_supported_dtypes();        // for error messages
std::size_t npy_element_count(const NpyArray&);

// Throws InputError naming the file and the reason (wrong magic, bad header, unsupported dtype, Fortran
// order, absurd shape, truncated or over-long data).
NpyArray read_npy(const std::filesystem::path&);
// Only the header (dtype, shape; bytes empty), checked against the file's size: to size a run before the
// data are read.
NpyArray read_npy_header(const std::filesystem::path&);
// The same from the file's bytes in memory; `file` only names it in errors.
NpyArray parse_npy(std::span<const unsigned char> bytes, const std::filesystem::path& file);
// Through the one output writer (output_file.hpp): atomic for a file, written through for /dev/null or a FIFO.
void write_npy(const std::filesystem::path&, const NpyArray&);
// The bytes write_npy writes (to write several files all or none with write_files_atomic, output_file.hpp).
std::string npy_file_bytes(const NpyArray&);

// Exact decode of every element to double; u8/u16 are bit patterns of `bits_format` (required for them).
std::vector<double> npy_values(const NpyArray&, const Format* bits_format = nullptr);
// The same for data held elsewhere (a numpy buffer): n elements of dtype, C order, little-endian.
std::vector<double> npy_values(NpyDtype dtype, std::span<const unsigned char> bytes, std::size_t n,
                               const Format* bits_format = nullptr);
// Encode doubles (which must be exact values of the dtype / bits_format) into an array. Throws InputError
// when a value is not exact in the dtype or the shape does not match the number of values.
NpyArray make_npy(std::span<const double> values, std::vector<std::size_t> shape, NpyDtype,
                  const Format* bits_format = nullptr);

}  // namespace pasa
