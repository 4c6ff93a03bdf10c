#include "pasa/inputs/tensor.hpp"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>
#include <limits>
#include <mutex>
#include <span>
#include <type_traits>
#include <utility>

#if defined(__F16C__)
#include <immintrin.h>
#endif

#include "pasa/core/compiler.hpp"
#include "pasa/core/parallel.hpp"
#include "pasa/numeric/round.hpp"

namespace pasa {
namespace {

bool every_value_a_float(const Format& f) {
  // The largest precision, the top binade and the smallest step all within float's (p 24, emax 127,
  // 2^-149): then every value of f, and its infinities and NaNs, convert to float and back unchanged.
  return f.p <= 24 && f.emax <= 127 && f.min_subnormal() >= 0x1p-149;
}

// The value of every storage pattern of f (2^bits of them), made once per format and kept for the process:
// at most one table per format a run uses, 512 KiB for a 16-bit format. A pattern that is no value of f
// (decode refuses it) reads as NaN; narrowed() never stores one.
const double* decode_table(const Format& f, std::size_t width) {
  static std::mutex m;
  static std::vector<std::pair<Format, std::unique_ptr<std::vector<double>>>> tables;
  std::lock_guard<std::mutex> lock(m);
  for (const auto& [fmt, t] : tables)
    if (fmt == f) return t->data();
  const std::size_t patterns = std::size_t{1} << (8 * width), used = std::uint64_t{1} << f.storage_bits();
  auto t = std::make_unique<std::vector<double>>(patterns, std::numeric_limits<double>::quiet_NaN());
  for (std::size_t b = 0; b < std::min(patterns, used); ++b) {
    try {
      (*t)[b] = decode(b, f);
    } catch (const std::exception&) {  // (not a pattern of f)
    }
  }
  tables.emplace_back(f, std::move(t));
  return tables.back().second->data();
}

template <class T>
void read_into(const std::uint8_t* bytes, std::size_t width, const double* table, std::size_t i0, std::size_t n, T* dst) {
  const std::uint8_t* p = bytes + i0 * width;
  if (width == 1) {
    for (std::size_t i = 0; i < n; ++i) dst[i] = static_cast<T>(table[p[i]]);
  } else if (width == 2) {
    for (std::size_t i = 0; i < n; ++i) {
      std::uint16_t u;
      std::memcpy(&u, p + 2 * i, 2);  // (a mapped file's bytes need not be aligned)
      dst[i] = static_cast<T>(table[u]);
    }
  } else {
    for (std::size_t i = 0; i < n; ++i) {
      float x;
      std::memcpy(&x, p + 4 * i, 4);
      dst[i] = static_cast<T>(x);
    }
  }
}

// fp16 (F16C) or bf16 (the bits shifted into a float's top half) to T: every finite value and infinity
// converts exactly, as the table gives it. A NaN is then read from the table (float(table[u])), since the
// conversions need not keep a signalling NaN's payload as the table's double does.
template <class T>
void read_fast(const std::uint8_t* bytes, bool fp16, const double* table, std::size_t i0, std::size_t n, T* dst) {
  const std::uint8_t* p = bytes + 2 * i0;
  std::size_t i = 0;
  if (fp16) {
#if defined(__F16C__)
    for (; i + 8 <= n; i += 8) {
      const __m256 x = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * i)));
      if constexpr (std::is_same_v<T, float>) {
        _mm256_storeu_ps(dst + i, x);
      } else {
        _mm256_storeu_pd(dst + i, _mm256_cvtps_pd(_mm256_castps256_ps128(x)));
        _mm256_storeu_pd(dst + i + 4, _mm256_cvtps_pd(_mm256_extractf128_ps(x, 1)));
      }
    }
#endif
  } else {
    PASA_IVDEP
    for (; i < n; ++i) {
      std::uint16_t u;
      std::memcpy(&u, p + 2 * i, 2);
      dst[i] = static_cast<T>(std::bit_cast<float>(std::uint32_t{u} << 16));
    }
  }
  const std::size_t converted = i;
  for (; i < n; ++i) {  // (fp16's tail past the vectors: the table, NaNs included)
    std::uint16_t u;
    std::memcpy(&u, p + 2 * i, 2);
    dst[i] = static_cast<T>(table[u]);
  }
  bool nan = false;  // (x != x: NaN; a branch-free pass, then the table only where one was met)
  for (i = 0; i < converted; ++i) nan |= dst[i] != dst[i];
  if (!nan) return;
  for (i = 0; i < converted; ++i)
    if (dst[i] != dst[i]) {
      std::uint16_t u;
      std::memcpy(&u, p + 2 * i, 2);
      dst[i] = static_cast<T>(table[u]);
    }
}

template <class Out>
bool encode_chunk(const double* x, std::size_t n, Out* out, const Format& f, const double* table) {
  if (encode_span(std::span<const double>(x, n), std::span<Out>(out, n), f) != n) return false;
  for (std::size_t i = 0; i < n; ++i)  // bit for bit back (a NaN's payload, -0)
    if (std::bit_cast<std::uint64_t>(table[out[i]]) != std::bit_cast<std::uint64_t>(x[i])) return false;
  return true;
}

}  // namespace

std::size_t narrow_width(const Format& f) {
  const int bits = f.storage_bits();
  if (bits <= 8) return 1;
  if (bits <= 16) return 2;
  if (every_value_a_float(f)) return 4;
  return 0;
}

NarrowStorage::NarrowStorage(const Format& f, std::size_t count, const void* bytes, std::shared_ptr<const void> owner)
    : owner_(std::move(owner)), bytes_(static_cast<const std::uint8_t*>(bytes)), count_(count), width_(narrow_width(f)) {
  if (width_ == 0) throw std::invalid_argument("NarrowStorage: format " + f.name + " has no narrow width");
  if (width_ < 4) table_ = decode_table(f, width_);
  if (f == format_by_name("fp16")) fast_ = Fast::fp16;
  else if (f == format_by_name("bf16")) fast_ = Fast::bf16;
}

NarrowStorage NarrowStorage::allocate(const Format& f, std::size_t count) {
  auto buf = std::make_shared<uninit_vector<std::uint8_t>>(count * std::max<std::size_t>(1, narrow_width(f)));
  const void* bytes = buf->data();
  return NarrowStorage(f, count, bytes, std::move(buf));
}

double NarrowStorage::at(std::size_t i) const {
  double x;
  read(i, 1, &x);
  return x;
}
void NarrowStorage::read(std::size_t i0, std::size_t n, double* dst) const {
  if (fast_ != Fast::none) read_fast(bytes_, fast_ == Fast::fp16, table_, i0, n, dst);
  else read_into(bytes_, width_, table_, i0, n, dst);
}
void NarrowStorage::read(std::size_t i0, std::size_t n, float* dst) const {
  if (fast_ != Fast::none) read_fast(bytes_, fast_ == Fast::fp16, table_, i0, n, dst);
  else read_into(bytes_, width_, table_, i0, n, dst);
}

Tensor narrowed(Tensor t, int threads) {
  const std::size_t w = narrow_width(t.format), n = t.data.size();
  if (t.is_narrow() || w == 0 || n == 0) return t;
  NarrowStorage st = NarrowStorage::allocate(t.format, n);
  std::uint8_t* out = st.writable();
  const double* table = w < 4 ? decode_table(t.format, w) : nullptr;
  constexpr std::size_t kChunk = std::size_t{1} << 16;
  std::atomic<bool> ok{true};
  parallel_for((n + kChunk - 1) / kChunk, threads, [&](std::size_t c) {
    const std::size_t i0 = c * kChunk, m = std::min(kChunk, n - i0);
    const double* x = t.data.data() + i0;
    bool good = true;
    if (w == 1) {
      good = encode_chunk(x, m, out + i0, t.format, table);
    } else if (w == 2) {
      std::vector<std::uint16_t> bits(m);
      good = encode_chunk(x, m, bits.data(), t.format, table);
      std::memcpy(out + 2 * i0, bits.data(), 2 * m);
    } else {
      for (std::size_t i = 0; i < m && good; ++i) {
        const float f = static_cast<float>(x[i]);
        good = std::bit_cast<std::uint64_t>(static_cast<double>(f)) == std::bit_cast<std::uint64_t>(x[i]);
        std::memcpy(out + 4 * (i0 + i), &f, 4);
      }
    }
    if (!good) ok.store(false, std::memory_order_relaxed);
  });
  if (!ok) return t;
  t.narrow = std::move(st);
  uninit_vector<double>().swap(t.data);
  return t;
}

Tensor widened(Tensor t, int threads) {
  if (!t.is_narrow()) return t;
  const std::size_t n = t.narrow.size();
  t.data.resize(n);
  constexpr std::size_t kChunk = std::size_t{1} << 16;
  parallel_for((n + kChunk - 1) / kChunk, threads, [&](std::size_t c) {
    const std::size_t i0 = c * kChunk;
    t.narrow.read(i0, std::min(kChunk, n - i0), t.data.data() + i0);
  });
  t.narrow = NarrowStorage();
  return t;
}

}  // namespace pasa
