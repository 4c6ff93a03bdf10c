// Attention tensors in the paper's layout (B, N, S, D). Values are held as doubles that are exact values
// of the tensor's storage format, so every algorithm and the golden see the same numbers.
#pragma once

#include <cstddef>
#include <vector>

#include "pasa/numeric/format.hpp"

namespace pasa {

struct Shape {
  std::size_t b = 1, n = 1, s = 1, d = 1;  // batch, heads, sequence, head dimension
  std::size_t size() const { return b * n * s * d; }
  bool operator==(const Shape&) const = default;
};

struct Tensor {
  Shape shape;
  Format format;              // every element is exactly representable in it (or NaN/inf)
  std::vector<double> data;   // C order: ((b*N + n)*S + s)*D + d

  Tensor() = default;
  Tensor(Shape sh, Format f) : shape(sh), format(std::move(f)), data(sh.size(), 0.0) {}
  double& at(std::size_t b, std::size_t n, std::size_t s, std::size_t d) {
    return data[((b * shape.n + n) * shape.s + s) * shape.d + d];
  }
  double at(std::size_t b, std::size_t n, std::size_t s, std::size_t d) const {
    return data[((b * shape.n + n) * shape.s + s) * shape.d + d];
  }
  // Pointer to the (S, D) matrix of one (batch, head).
  const double* head(std::size_t b, std::size_t n) const { return data.data() + (b * shape.n + n) * shape.s * shape.d; }
  double* head(std::size_t b, std::size_t n) { return data.data() + (b * shape.n + n) * shape.s * shape.d; }
};

}  // namespace pasa
