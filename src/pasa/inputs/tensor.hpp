// Attention tensors in the paper's layout (B, N, S, D). Values are held as doubles that are exact values
// of the tensor's storage format, so every algorithm and the golden see the same numbers.
#pragma once

#include <cstddef>
#include <vector>

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
  std::vector<double> data;   // C order: ((b*N + n)*S + s)*D + d

  Tensor() = default;
  Tensor(Shape sh, Format f) : shape(sh), format(std::move(f)), data(sh.size(), 0.0) {}
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
