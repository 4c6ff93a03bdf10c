// Attention tensors <-> NumPy .npy files (via npy.hpp). Loading accepts float16/32/64 values, or
// uint8/uint16 storage bit patterns of a named format (bf16, fp8 ...); shapes (S, D), (N, S, D) or
// (B, N, S, D), C order. Saving writes float64 (B, N, S, D), atomically.
#pragma once

#include <array>
#include <cstddef>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "pasa/io/npy.hpp"
#include "pasa/numeric/format.hpp"
#include "pasa/inputs/tensor.hpp"

namespace pasa {

struct LoadedTensor {
  Tensor tensor;
  std::size_t rounded = 0;  // elements that changed when rounded to the requested format
};

// What load_tensor would return, known from the .npy header alone (read_npy_header: dtype and shape,
// checked against the file's size): the (B, N, S, D) shape, the format, the data's size in the file.
struct TensorHeader {
  Shape shape;
  Format format;
  std::vector<std::size_t> npy_shape;  // as the file gives it
  std::size_t data_bytes = 0;
  NpyDtype dtype = NpyDtype::f64;      // the file's
};
TensorHeader read_tensor_header(const std::filesystem::path&, const Format* format = nullptr);
// The same for an array of this dtype and shape (the Python module's), `where` naming it in messages.
TensorHeader tensor_header(NpyDtype dtype, const std::vector<std::size_t>& shape, const Format* format,
                           const std::string& where);
// The headers of Q, K and V files, each checked as load_tensor checks it and the three shapes against each
// other (validate_shapes: B, D, K = V, N_q % N_kv), before a byte of data is read: a mismatch is refused at
// once however large the files are. Errors name the files and their shapes.
std::array<TensorHeader, 3> read_qkv_headers(const std::filesystem::path& q, const std::filesystem::path& k,
                                             const std::filesystem::path& v, const Format* format = nullptr);

// `format` null: the dtype's own format (float16 → fp16, float32 → fp32, float64 → fp64); required for
// uint8/uint16 (the format whose bit patterns they hold, of matching width). With a format given for a float
// dtype, values are rounded to it (nearest even; beyond its range → inf, which validate() then rejects).
// Errors (InputError) name the file: unreadable or malformed .npy, unsupported shape, bits without format.
LoadedTensor load_tensor(const std::filesystem::path&, const Format* format = nullptr);
// The same, held at the format's width (inputs/tensor.hpp): where the file's elements are that storage
// (float16 as fp16, float32 as fp32, uint8/uint16 bit patterns of the format) and every one of them reads as
// load_tensor reads it, the file is mapped in place, not converted; otherwise loaded as above, then narrowed.
LoadedTensor load_tensor_narrow(const std::filesystem::path&, const Format* format = nullptr);
// The bytes load_tensor_narrow holds while it reads the file, beyond the tensor itself: none where it maps
// it, else the file's data and the tensor as doubles.
std::size_t narrow_reading_bytes(const TensorHeader&);
// The same for an array in memory (the Python module's numpy arrays, read in place): `bytes` holds the
// elements of `dtype` in C order, little-endian; `where` names it in the messages as the path does above
// ("q: shape (3,) is not (S, D), (N, S, D) or (B, N, S, D)").
LoadedTensor tensor_from_array(NpyDtype dtype, const std::vector<std::size_t>& shape,
                               std::span<const unsigned char> bytes, const Format* format, const std::string& where);
// The same from an array already read (`path` only names it in errors).
LoadedTensor tensor_from_npy(const NpyArray&, const Format* format, const std::filesystem::path& path);

// Writes the tensor as float64 (B, N, S, D).
void save_tensor(const std::filesystem::path&, const Tensor&);
// Writes values as float64 with the given shape (e.g. the lse, (B, N, S)).
void save_values(const std::filesystem::path&, std::span<const double> values, std::vector<std::size_t> shape);

}  // namespace pasa
