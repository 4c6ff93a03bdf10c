// Attention tensors in the paper's layout (B, N, S, D). Values are held as doubles that are exact values
// of the tensor's storage format, so every algorithm and the golden see the same numbers.
#pragma once

#include <cstddef>
#include <vector>

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

struct Tensor {
  Shape shape;
  Format format;              // every element is exactly representable in it (or NaN/inf)
  // C order: ((b*N + n)*S + s)*D + d. An uninit_vector (core/memory.hpp), so that a tensor that its
  // writers fill in full (an attention output, a generated input) is not first zeroed by one thread: the
  // zero fill of a (1, 64, 2048, 128) output was a tenth of the ideal 16-thread time, and its page faults
  // are better taken by the threads that write each part (first touch).
  uninit_vector<double> data;

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
  double& at(std::size_t b, std::size_t n, std::size_t s, std::size_t d) {
    return data[((b * shape.N + n) * shape.S + s) * shape.D + d];
  }
  double at(std::size_t b, std::size_t n, std::size_t s, std::size_t d) const {
    return data[((b * shape.N + n) * shape.S + s) * shape.D + d];
  }
  // Pointer to the (S, D) matrix of one (batch, head).
  const double* head(std::size_t b, std::size_t n) const { return data.data() + (b * shape.N + n) * shape.S * shape.D; }
  double* head(std::size_t b, std::size_t n) { return data.data() + (b * shape.N + n) * shape.S * shape.D; }
};

}  // namespace pasa
