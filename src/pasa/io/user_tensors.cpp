#include "pasa/io/user_tensors.hpp"

#include <cmath>

#include <fmt/format.h>

#include "pasa/core/error.hpp"
#include "pasa/numeric/format.hpp"

namespace pasa {

namespace {

bool is_float(NpyDtype d) { return d == NpyDtype::f16 || d == NpyDtype::f32 || d == NpyDtype::f64; }
// Integers: bool, the int/uint dtypes, and uint8/uint16 read as plain integers (not bit patterns) here.
bool is_int(NpyDtype d) { return npy_is_integer(d) || d == NpyDtype::u8 || d == NpyDtype::u16; }

// The integer values of an integer array (exact: npy_values refuses beyond 2^53).
std::vector<double> integers(NpyDtype d, std::span<const unsigned char> bytes, std::size_t n) {
  if (d == NpyDtype::u8 || d == NpyDtype::u16) {
    const std::size_t w = npy_itemsize(d);
    std::vector<double> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = w == 1 ? bytes[i] : bytes[2 * i] | (bytes[2 * i + 1] << 8);
    return v;
  }
  return npy_values(d, bytes, n);
}

// Dtype and shape checks (the header alone); each throws InputError starting with `where`.
void check_pse(NpyDtype d, const std::vector<std::size_t>& s, const UserTensorDims& x, const std::string& where) {
  if (!is_float(d))
    throw InputError(fmt::format("{}: pse dtype {} not accepted; give float16, float32 or float64 values", where,
                                 npy_descr(d)));
  if (s.size() != 4 || (s[0] != 1 && s[0] != x.B) || s[1] != x.Nq || s[2] != x.Sq || s[3] != x.Skv)
    throw InputError(fmt::format("{}: pse shape {} is not (B or 1, Nq, Sq, Skv) = ({} or 1, {}, {}, {})", where,
                                 npy_shape_text(s), x.B, x.Nq, x.Sq, x.Skv));
}

void check_select(NpyDtype d, const std::vector<std::size_t>& s, const UserTensorDims& x, const std::string& where) {
  if (!is_int(d))
    throw InputError(fmt::format("{}: select mask dtype {} not accepted; give bool (or 0/1 integers), True = masked",
                                 where, npy_descr(d)));
  const bool three = s.size() == 3 && s[0] == x.B && s[1] == x.Sq && s[2] == x.Skv;
  const bool four = s.size() == 4 && s[0] == x.B && s[1] == x.Nq && s[2] == x.Sq && s[3] == x.Skv;
  if (!three && !four)
    throw InputError(fmt::format("{}: select mask shape {} is neither (B, Sq, Skv) = ({}, {}, {}) nor (B, Nq, Sq, "
                                 "Skv) = ({}, {}, {}, {})", where, npy_shape_text(s), x.B, x.Sq, x.Skv, x.B, x.Nq, x.Sq, x.Skv));
}

void check_kv_len(NpyDtype d, const std::vector<std::size_t>& s, const UserTensorDims& x, const std::string& where) {
  if (!is_int(d) || d == NpyDtype::b1)
    throw InputError(fmt::format("{}: kv_len dtype {} not accepted; give integers (int32, int64, uint32, uint64)",
                                 where, npy_descr(d)));
  if (s.size() != 1 || s[0] != x.B)
    throw InputError(fmt::format("{}: kv_len shape {} is not (B,) = ({},)", where, npy_shape_text(s), x.B));
}

std::size_t count(const std::vector<std::size_t>& s) {
  std::size_t n = 1;
  for (std::size_t d : s) n *= d;
  return n;
}

// The values, with InputError messages prefixed by `where`.
template <class F>
auto at(const std::string& where, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: {}", where, e.what()));
  }
}

// `where` of a file: the caller's place and the file's name.
std::string file_where(const std::string& where, const std::filesystem::path& file) {
  return where.empty() ? file.string() : fmt::format("{}: {}", where, file.string());
}

}  // namespace

Tensor pse_from_array(NpyDtype d, const std::vector<std::size_t>& s, std::span<const unsigned char> bytes,
                      const UserTensorDims& x, const std::string& where) {
  check_pse(d, s, x, where);
  Tensor t;
  t.shape = {s[0], s[1], s[2], s[3]};
  t.format = format_by_name("fp64");
  t.data.resize(count(s));
  at(where, [&] { npy_values(d, bytes, nullptr, std::span<double>(t.data)); return 0; });
  for (std::size_t i = 0; i < t.data.size(); ++i)  // validate() would too, without the file's name
    if (!std::isfinite(t.data[i]))
      throw InputError(fmt::format("{}: pse element {} is {} (the bias must be finite)", where, i, t.data[i]));
  return t;
}

std::vector<std::uint8_t> select_from_array(NpyDtype d, const std::vector<std::size_t>& s,
                                            std::span<const unsigned char> bytes, const UserTensorDims& x,
                                            const std::string& where) {
  check_select(d, s, x, where);
  const std::vector<double> v = at(where, [&] { return integers(d, bytes, count(s)); });
  for (std::size_t i = 0; i < v.size(); ++i)
    if (v[i] != 0 && v[i] != 1)
      throw InputError(fmt::format("{}: select mask element {} is {}; expected 0/1 (True = masked)", where, i, v[i]));
  const std::size_t plane = x.Sq * x.Skv;
  std::vector<std::uint8_t> out(x.B * plane);
  if (s.size() == 3) {
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = v[i] != 0;
    return out;
  }
  for (std::size_t b = 0; b < x.B; ++b)
    for (std::size_t e = 0; e < plane; ++e) {
      const double first = v[b * x.Nq * plane + e];
      for (std::size_t h = 1; h < x.Nq; ++h)
        if (v[(b * x.Nq + h) * plane + e] != first)
          throw InputError(fmt::format("{}: select mask differs between heads 0 and {} at (b={}, i={}, j={}); pasa's "
                                       "select mask is shared by the heads ([IFA] atten_mask (B, Sq, Skv))",
                                       where, h, b, e / x.Skv, e % x.Skv));
      out[b * plane + e] = first != 0;
    }
  return out;
}

std::vector<std::size_t> kv_len_from_array(NpyDtype d, const std::vector<std::size_t>& s,
                                           std::span<const unsigned char> bytes, const UserTensorDims& x,
                                           const std::string& where) {
  check_kv_len(d, s, x, where);
  const std::vector<double> v = at(where, [&] { return integers(d, bytes, count(s)); });
  std::vector<std::size_t> out(v.size());
  for (std::size_t b = 0; b < v.size(); ++b) {
    if (v[b] < 0 || v[b] > static_cast<double>(x.Skv))
      throw InputError(fmt::format("{}: kv_len[{}] = {} lies outside [0, Skv = {}]", where, b, v[b], x.Skv));
    out[b] = static_cast<std::size_t>(v[b]);
  }
  return out;
}

Tensor load_pse_npy(const std::filesystem::path& f, const UserTensorDims& x, const std::string& where) {
  const std::string w = file_where(where, f);
  const NpyArray h = at(where, [&] { return read_npy_header(f); });
  check_pse(h.dtype, h.shape, x, w);
  const NpyArray a = at(where, [&] { return read_npy(f); });
  return pse_from_array(a.dtype, a.shape, a.bytes, x, w);
}

std::vector<std::uint8_t> load_select_npy(const std::filesystem::path& f, const UserTensorDims& x,
                                          const std::string& where) {
  const std::string w = file_where(where, f);
  const NpyArray h = at(where, [&] { return read_npy_header(f); });
  check_select(h.dtype, h.shape, x, w);
  const NpyArray a = at(where, [&] { return read_npy(f); });
  return select_from_array(a.dtype, a.shape, a.bytes, x, w);
}

std::vector<std::size_t> load_kv_len_npy(const std::filesystem::path& f, const UserTensorDims& x,
                                         const std::string& where) {
  const std::string w = file_where(where, f);
  const NpyArray h = at(where, [&] { return read_npy_header(f); });
  check_kv_len(h.dtype, h.shape, x, w);
  const NpyArray a = at(where, [&] { return read_npy(f); });
  return kv_len_from_array(a.dtype, a.shape, a.bytes, x, w);
}

}  // namespace pasa
