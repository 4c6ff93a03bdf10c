#include "pasa/io/tensor_io.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "pasa/core/error.hpp"
#include "pasa/inputs/attention_inputs.hpp"
#include "pasa/numeric/round.hpp"

namespace pasa {

// The (B, N, S, D) shape and the format of a tensor read from an array of this dtype and shape (load_tensor's
// rules), before its data are decoded.
TensorHeader tensor_header(NpyDtype dtype, const std::vector<std::size_t>& d, const Format* format, const std::string& where) {
  const bool bits = dtype == NpyDtype::u8 || dtype == NpyDtype::u16;
  if (bits && format == nullptr)
    throw InputError(fmt::format("{}: {} holds bit patterns; name their format (e.g. bf16, fp8_e4m3fn)",
                                 where, npy_descr(dtype)));
  if (bits && format->storage_bits() > (dtype == NpyDtype::u8 ? 8 : 16))
    throw InputError(fmt::format("{}: format {} needs {} storage bits; a {} element holds {}", where, format->name,
                                 format->storage_bits(), npy_descr(dtype), dtype == NpyDtype::u8 ? 8 : 16));
  TensorHeader h;
  if (d.size() == 2) h.shape = {1, 1, d[0], d[1]};
  else if (d.size() == 3) h.shape = {1, d[0], d[1], d[2]};
  else if (d.size() == 4) h.shape = {d[0], d[1], d[2], d[3]};
  else
    throw InputError(fmt::format("{}: shape {} is not (S, D), (N, S, D) or (B, N, S, D)", where, npy_shape_text(d)));
  if (std::find(d.begin(), d.end(), std::size_t{0}) != d.end())
    throw InputError(fmt::format("{}: shape {} is empty", where, npy_shape_text(d)));
  if (format) h.format = *format;
  else h.format = format_by_name(dtype == NpyDtype::f16 ? "fp16" : dtype == NpyDtype::f32 ? "fp32" : "fp64");
  return h;
}

TensorHeader read_tensor_header(const std::filesystem::path& path, const Format* format) {
  const NpyArray a = read_npy_header(path);
  TensorHeader h = tensor_header(a.dtype, a.shape, format, path.string());
  h.npy_shape = a.shape;
  h.dtype = a.dtype;
  h.data_bytes = npy_element_count(a) * npy_itemsize(a.dtype);  // (no overflow: read_npy_header checked it)
  return h;
}

std::array<TensorHeader, 3> read_qkv_headers(const std::filesystem::path& q, const std::filesystem::path& k,
                                             const std::filesystem::path& v, const Format* format) {
  const std::array<TensorHeader, 3> h = {read_tensor_header(q, format), read_tensor_header(k, format),
                                         read_tensor_header(v, format)};
  try {
    validate_shapes(h[0].shape, h[1].shape, h[2].shape);
  } catch (const InputError& e) {
    throw InputError(fmt::format("Q {} {}, K {} {}, V {} {}: {}", q.string(), npy_shape_text(h[0].npy_shape), k.string(),
                                 npy_shape_text(h[1].npy_shape), v.string(), npy_shape_text(h[2].npy_shape), e.what()));
  }
  return h;
}

LoadedTensor load_tensor(const std::filesystem::path& path, const Format* format) {
  return tensor_from_npy(read_npy(path), format, path);
}

namespace {

// Whether elements of dtype are the storage of f at its narrow width, byte for byte.
bool is_narrow_storage(NpyDtype dtype, const Format& f) {
  const std::size_t w = narrow_width(f);
  return (dtype == NpyDtype::f16 && f == format_by_name("fp16")) || (dtype == NpyDtype::f32 && f == format_by_name("fp32")) ||
         (dtype == NpyDtype::u8 && w == 1) || (dtype == NpyDtype::u16 && w == 2);
}

// The patterns (all 2^8 or 2^16) whose narrow reading is what npy_values gives, bit for bit (a NaN's
// payload, a pattern beyond the format's storage bits that load_tensor refuses: not).
std::vector<std::uint8_t> agreeing_patterns(NpyDtype dtype, const Format& f) {
  const std::size_t w = npy_itemsize(dtype), patterns = std::size_t{1} << (8 * w);
  std::vector<std::uint8_t> ok(patterns, 0);
  std::vector<unsigned char> all(patterns * w);
  for (std::size_t b = 0; b < patterns; ++b) std::memcpy(all.data() + b * w, &b, w);  // (little-endian host)
  const NarrowStorage st(f, patterns, all.data(), nullptr);
  const bool bits = dtype == NpyDtype::u8 || dtype == NpyDtype::u16;
  for (std::size_t b = 0; b < patterns; ++b) {
    double x = 0;
    try {
      npy_values(dtype, std::span<const unsigned char>(all.data() + b * w, w), bits ? &f : nullptr, std::span<double>(&x, 1));
    } catch (const std::exception&) {
      continue;
    }
    ok[b] = std::bit_cast<std::uint64_t>(x) == std::bit_cast<std::uint64_t>(st.at(b));
  }
  return ok;
}

// Every element of the mapped data among the agreeing patterns.
bool all_agree(const unsigned char* data, std::size_t n, std::size_t w, const std::vector<std::uint8_t>& ok) {
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t b = 0;
    std::memcpy(&b, data + i * w, w);
    if (!ok[b]) return false;
  }
  return true;
}

}  // namespace

std::size_t narrow_reading_bytes(const TensorHeader& h) {
  if (is_narrow_storage(h.dtype, h.format)) return 0;
  return h.data_bytes + h.shape.size() * sizeof(double);
}

LoadedTensor load_tensor_narrow(const std::filesystem::path& path, const Format* format) {
  NpyMapped m = map_npy(path);
  const TensorHeader h = tensor_header(m.header.dtype, m.header.shape, format, path.string());
  const std::size_t n = h.shape.size(), w = npy_itemsize(m.header.dtype);
  if (is_narrow_storage(m.header.dtype, h.format)) {
    // float32 widens to double exactly and alike in both readings; 1- and 2-byte patterns are checked.
    if (w == 4 || all_agree(m.data, n, w, agreeing_patterns(m.header.dtype, h.format))) {
      LoadedTensor out;
      out.tensor.shape = h.shape;
      out.tensor.format = h.format;
      out.tensor.narrow = NarrowStorage(h.format, n, m.data, m.owner);
      return out;
    }
  }
  m = NpyMapped();  // (unmapped before the converting read)
  LoadedTensor out = load_tensor(path, format);
  out.tensor = narrowed(std::move(out.tensor));
  return out;
}

LoadedTensor tensor_from_npy(const NpyArray& a, const Format* format, const std::filesystem::path& path) {
  return tensor_from_array(a.dtype, a.shape, a.bytes, format, path.string());
}

LoadedTensor tensor_from_array(NpyDtype dtype, const std::vector<std::size_t>& d, std::span<const unsigned char> bytes,
                               const Format* format, const std::string& where) {
  if (npy_is_integer(dtype))
    throw InputError(fmt::format("{}: dtype {} holds integers, not tensor values; give float16/32/64 values or "
                                 "uint8/uint16 bit patterns", where, npy_descr(dtype)));
  const bool bits = dtype == NpyDtype::u8 || dtype == NpyDtype::u16;
  const TensorHeader h = tensor_header(dtype, d, format, where);
  const Shape s = h.shape;
  LoadedTensor out;
  out.tensor.shape = s;  // (not Tensor(s, f): its zeroed data would be replaced at once)
  out.tensor.format = h.format;
  try {
    out.tensor.data.resize(s.size());
    npy_values(dtype, bytes, bits ? format : nullptr, std::span<double>(out.tensor.data));
  } catch (const std::exception& e) {
    throw InputError(fmt::format("{}: {}", where, e.what()));
  }
  if (format && !bits) {
    // round_span (the same bits as round() per element, through the vectorised kernel), a chunk at a time so
    // that the changed elements can be counted without a second copy of the tensor.
    constexpr std::size_t kChunk = 4096;
    double rounded[kChunk];
    for (std::size_t b = 0; b < out.tensor.data.size(); b += kChunk) {
      const std::span<double> x = std::span<double>(out.tensor.data).subspan(b, std::min(kChunk, out.tensor.data.size() - b));
      round_span(x, std::span<double>(rounded, x.size()), *format);
      for (std::size_t i = 0; i < x.size(); ++i) {
        out.rounded += !(rounded[i] == x[i] || (std::isnan(rounded[i]) && std::isnan(x[i])));
        x[i] = rounded[i];
      }
    }
  }
  return out;
}

void save_values(const std::filesystem::path& path, std::span<const double> values, std::vector<std::size_t> shape) {
  write_npy(path, make_npy(values, std::move(shape), NpyDtype::f64));
}

void save_tensor(const std::filesystem::path& path, const Tensor& t) {
  save_values(path, t.data, {t.shape.B, t.shape.N, t.shape.S, t.shape.D});
}

}  // namespace pasa
