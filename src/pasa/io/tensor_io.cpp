#include "pasa/io/tensor_io.hpp"

#include <cmath>

#include <fmt/format.h>

#include "pasa/core/error.hpp"
#include "pasa/io/npy.hpp"
#include "pasa/numeric/round.hpp"

namespace pasa {

namespace {

std::string shape_str(const std::vector<std::size_t>& s) {
  std::string r = "(";
  for (std::size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + (s.size() == 1 ? ",)" : ")");
}

}  // namespace

LoadedTensor load_tensor(const std::filesystem::path& path, const Format* format) {
  return tensor_from_npy(read_npy(path), format, path);
}

LoadedTensor tensor_from_npy(const NpyArray& a, const Format* format, const std::filesystem::path& path) {
  const bool bits = a.dtype == NpyDtype::u8 || a.dtype == NpyDtype::u16;
  if (bits && format == nullptr)
    throw InputError(fmt::format("{}: {} holds bit patterns; name their format (e.g. bf16, fp8_e4m3fn)",
                                 path.string(), npy_descr(a.dtype)));
  Shape s;
  const auto& d = a.shape;
  if (d.size() == 2) s = {1, 1, d[0], d[1]};
  else if (d.size() == 3) s = {1, d[0], d[1], d[2]};
  else if (d.size() == 4) s = {d[0], d[1], d[2], d[3]};
  else
    throw InputError(fmt::format("{}: shape {} is not (S, D), (N, S, D) or (B, N, S, D)", path.string(), shape_str(d)));
  if (s.size() == 0) throw InputError(fmt::format("{}: shape {} is empty", path.string(), shape_str(d)));
  Format own;
  if (bits) own = *format;
  else own = format_by_name(a.dtype == NpyDtype::f16 ? "fp16" : a.dtype == NpyDtype::f32 ? "fp32" : "fp64");
  LoadedTensor out;
  out.tensor = Tensor(s, format ? *format : own);
  try {
    out.tensor.data = npy_values(a, bits ? format : nullptr);
  } catch (const std::exception& e) {
    throw InputError(fmt::format("{}: {}", path.string(), e.what()));
  }
  if (format && !bits) {
    for (double& x : out.tensor.data) {
      const double r = round(x, *format);
      out.rounded += !(r == x || (std::isnan(r) && std::isnan(x)));
      x = r;
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
