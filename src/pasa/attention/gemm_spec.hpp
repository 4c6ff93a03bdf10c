// The description of one emulated GEMM (gemm.hpp): the operands' formats, the accumulator and output stages
// and the model. In its own header so that the kernels (attention/detail/gemm_*.hpp) name it without
// including the dispatch they sit below.
#pragma once

#include <cstddef>

#include "pasa/attention/allocation.hpp"
#include "pasa/numeric/round.hpp"

namespace pasa {

// The block scales of a block-scaled GEMM (TensorCore::scale, scale_block = S): A's per (row, k-block), B's
// per (k-block, column); k-block b covers k = b·S .. b·S + S − 1. Values of the scale format (e8m0: powers of
// two in [2^-127, 2^127], NaN; ue4m3: E4M3 values, their sign ignored). The engine reads
// a[r·lda + t/S] and b[(t/S)·ldb + j].
struct TcScales {
  const double* a = nullptr;
  std::size_t lda = 0;  // (at least ceil(k / S))
  const double* b = nullptr;
  std::size_t ldb = 0;  // (at least n)
};

struct GemmSpec {
  Format a_format, b_format;  // formats the operands' values belong to (decides which fast path is exact)
  StageSpec acc, out;
  GemmModel model;
};

}  // namespace pasa
