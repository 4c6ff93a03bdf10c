// Attention tensors in the paper's layout (B, N, S, D). Every element is an exact value of the tensor's
// storage format, so every algorithm and the golden see the same numbers. They are held either as doubles
// (`data`, wide) or at the format's own width (`narrow`: the format's storage bits, or floats), which is
// what a long-context problem needs: a 32-head, 128k-token fp16 layer is 3 GiB of Q, K and V at fp16 and
// 12 GiB as doubles. Readers that take both go through read() / values(); head() and at() are for wide
// tensors only (checked in Debug and sanitizer builds).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "pasa/core/assert.hpp"
#include "pasa/core/memory.hpp"
#include "pasa/numeric/format.hpp"

namespace pasa {

struct Shape {
  // The attention dimensions as the JSON spells them: batch B, heads N (Nq for Q, Nkv for K and V),
  // sequence S (Sq, Skv), head dimension D.
  std::size_t B = 1, N = 1, S = 1, D = 1;
  std::size_t size() const { return B * N * S * D; }
  bool operator==(const Shape&) const = default;
};

// Bytes per element at a format's own width: 1 or 2 where its storage bits fit (fp8, fp16, bf16, ...),
// 4 where every value of it is a float (fp32, tf32), 0 where neither holds (fp64 and wider: kept as doubles).
std::size_t narrow_width(const Format&);

// Elements at their format's width: storage bits (width 1 or 2, decoded through a table of every pattern)
// or floats (width 4). Immutable once made, so copies share the bytes (a mapped .npy file among them).
class NarrowStorage {
 public:
  NarrowStorage() = default;
  // `count` elements of `width` bytes at `bytes`, kept alive by `owner`.
  NarrowStorage(const Format& f, std::size_t count, const void* bytes, std::shared_ptr<const void> owner);
  // Room for `count` elements, to be written once through writable() before the storage is shared.
  static NarrowStorage allocate(const Format& f, std::size_t count);
  bool empty() const { return count_ == 0; }
  std::size_t size() const { return count_; }
  std::size_t width() const { return width_; }
  const std::uint8_t* bytes() const { return bytes_; }
  std::uint8_t* writable() { return const_cast<std::uint8_t*>(bytes_); }  // (allocate's own buffer only)
  double at(std::size_t i) const;
  void read(std::size_t i0, std::size_t n, double* dst) const;
  void read(std::size_t i0, std::size_t n, float* dst) const;

 private:
  std::shared_ptr<const void> owner_;
  const std::uint8_t* bytes_ = nullptr;
  std::size_t count_ = 0, width_ = 0;
  const double* table_ = nullptr;  // width 1 or 2: the value of every bit pattern (a per-format cache's)
  // fp16 or bf16 exactly: read() converts by F16C or a shift (NaNs through the table, as before), as fast
  // as an engine reads a key block (the table, 512 KiB, stays out of the caches)
  enum class Fast : std::uint8_t { none, fp16, bf16 } fast_ = Fast::none;
};

struct Tensor {
  Shape shape;
  Format format;              // every element is exactly representable in it (or NaN/inf)
  // Wide: C order, ((b*N + n)*S + s)*D + d. An uninit_vector (core/memory.hpp), so that a tensor that its
  // writers fill in full (an attention output, a generated input) is not first zeroed by one thread: the
  // zero fill of a (1, 64, 2048, 128) output was a tenth of the ideal 16-thread time, and its page faults
  // are better taken by the threads that write each part (first touch). Empty when narrow.
  uninit_vector<double> data;
  NarrowStorage narrow;       // narrow: the same elements at the format's width (data then empty)

  Tensor() = default;
  Tensor(Shape sh, Format f) : shape(sh), format(std::move(f)), data(sh.size(), 0.0) {}
  // Every element left unset: for writers that set each one before any is read.
  static Tensor uninitialised(Shape sh, Format f) {
    Tensor t;
    t.shape = sh;
    t.format = std::move(f);
    t.data.resize(sh.size());
    return t;
  }
  bool is_narrow() const { return !narrow.empty(); }
  std::size_t size() const { return is_narrow() ? narrow.size() : data.size(); }  // elements held
  std::size_t stored_bytes() const { return is_narrow() ? narrow.size() * narrow.width() : data.size() * sizeof(double); }
  std::size_t index(std::size_t b, std::size_t n, std::size_t s) const { return ((b * shape.N + n) * shape.S + s) * shape.D; }
  // Elements [i0, i0 + n) in C order, wide or narrow.
  double value(std::size_t i) const { return is_narrow() ? narrow.at(i) : data[i]; }
  template <class T>
  void read(std::size_t i0, std::size_t n, T* dst) const {
    if (is_narrow()) narrow.read(i0, n, dst);
    else for (std::size_t i = 0; i < n; ++i) dst[i] = static_cast<T>(data[i0 + i]);
  }
  // The elements [i0, i0 + n) as doubles: in place when wide, else decoded into buf.
  const double* values(std::size_t i0, std::size_t n, std::vector<double>& buf) const {
    if (!is_narrow()) return data.data() + i0;
    if (buf.size() < n) buf.resize(n);
    narrow.read(i0, n, buf.data());
    return buf.data();
  }
  double& at(std::size_t b, std::size_t n, std::size_t s, std::size_t d) {
    PASA_ASSERT(!is_narrow());
    return data[index(b, n, s) + d];
  }
  double at(std::size_t b, std::size_t n, std::size_t s, std::size_t d) const {
    PASA_ASSERT(!is_narrow());
    return data[index(b, n, s) + d];
  }
  // Pointer to the (S, D) matrix of one (batch, head) of a wide tensor.
  const double* head(std::size_t b, std::size_t n) const {
    PASA_ASSERT(!is_narrow());
    return data.data() + (b * shape.N + n) * shape.S * shape.D;
  }
  double* head(std::size_t b, std::size_t n) {
    PASA_ASSERT(!is_narrow());
    return data.data() + (b * shape.N + n) * shape.S * shape.D;
  }
};

// t at its format's width, on `threads` threads: t itself (moved) when its format has no narrow width or
// some element does not survive the round trip bit for bit (a NaN payload the format's encoding drops).
Tensor narrowed(Tensor t, int threads = 1);
// t as doubles (a copy when narrow; t itself, moved, when wide).
Tensor widened(Tensor t, int threads = 1);

}  // namespace pasa
