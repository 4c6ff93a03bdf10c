// NumPy .npy files (format versions 1.0-3.0, C order, little-endian), so tensors and rounded values can be
// exchanged bit-exactly with Python. Supported dtypes: float16, float32, float64, and uint8/uint16 holding
// storage bit patterns of a low-precision Format (see round.hpp encode/decode); for masks and lengths
// (io/user_tensors.hpp) also bool and int32/int64/uint32/uint64, whose values are integers.
#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "pasa/numeric/format.hpp"

namespace pasa {

// u8/u16: bit patterns of a format (tensors) or plain integers (masks, lengths); b1 .. u64: integer values.
enum class NpyDtype { f16, f32, f64, u8, u16, b1, i32, i64, u32, u64 };
// Whether the elements are integers (bool and the int/uint dtypes, not u8/u16 bit patterns).
bool npy_is_integer(NpyDtype);

// C order, little-endian raw data; bytes.size() == product(shape) * npy_itemsize(dtype).
struct NpyArray {
  NpyDtype dtype;
  std::vector<std::size_t> shape;
  std::vector<unsigned char> bytes;
};

std::size_t npy_itemsize(NpyDtype);
std::string npy_descr(NpyDtype);          // "<f2", "<f4", "<f8", "|u1", "<u2", "|b1", "<i4", "<i8", "<u4", "<u8"
std::string npy_supported_dtypes();        // for error messages
std::size_t npy_element_count(const NpyArray&);

// Throws InputError naming the file and the reason (wrong magic, bad header, unsupported dtype, Fortran
// order, absurd shape, truncated or over-long data).
NpyArray read_npy(const std::filesystem::path&);
// Only the header (dtype, shape; bytes empty), checked against the file's size: to size a run before the
// data are read.
NpyArray read_npy_header(const std::filesystem::path&);
// The file mapped read-only (mmap, private) with its header checked as read_npy checks it: `data` points at
// its elements, mapped while `owner` lives (its pages are read from the file as they are touched).
struct NpyMapped {
  NpyArray header;  // (bytes empty)
  const unsigned char* data = nullptr;
  std::shared_ptr<const void> owner;
};
NpyMapped map_npy(const std::filesystem::path&);
// The same from the file's bytes in memory; `file` only names it in errors.
NpyArray parse_npy(std::span<const unsigned char> bytes, const std::filesystem::path& file);
// Through the one output writer (output_file.hpp): atomic for a file, written through for /dev/null or a FIFO.
void write_npy(const std::filesystem::path&, const NpyArray&);
// The bytes write_npy writes (to write several files all or none with write_files_atomic, output_file.hpp).
std::string npy_file_bytes(const NpyArray&);

// Exact decode of every element to double; u8/u16 are bit patterns of `bits_format` (required for them);
// integer dtypes give their values (InputError beyond 2^53, where a double would round them).
std::vector<double> npy_values(const NpyArray&, const Format* bits_format = nullptr);
// The same for data held elsewhere (a numpy buffer): n elements of dtype, C order, little-endian.
std::vector<double> npy_values(NpyDtype dtype, std::span<const unsigned char> bytes, std::size_t n,
                               const Format* bits_format = nullptr);
// The same into out (out.size() elements): a tensor's own buffer, without a copy.
void npy_values(NpyDtype dtype, std::span<const unsigned char> bytes, const Format* bits_format, std::span<double> out);
// Encode doubles (which must be exact values of the dtype / bits_format) into an array. Throws InputError
// when a value is not exact in the dtype or the shape does not match the number of values.
NpyArray make_npy(std::span<const double> values, std::vector<std::size_t> shape, NpyDtype,
                  const Format* bits_format = nullptr);

// A .npy shape as numpy prints it: "(3, 4)", "(5,)", "()".
std::string npy_shape_text(const std::vector<std::size_t>& shape);

}  // namespace pasa
