// The description of one emulated GEMM (gemm.hpp): the operands' formats, the accumulator and output stages
// and the model. In its own header so that the kernels (attention/detail/gemm_*.hpp) name it without
// including the dispatch they sit below.
#pragma once

#include "pasa/attention/allocation.hpp"
#include "pasa/numeric/round.hpp"

namespace pasa {

struct GemmSpec {
  Format a_format, b_format;  // formats the operands' values belong to (decides which fast path is exact)
  StageSpec acc, out;
  GemmModel model;
};

}  // namespace pasa
