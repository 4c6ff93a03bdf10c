// What the GPU-kernel engines (kernel_flash.cpp, kernel_sage.cpp) share: the fp32 flush of --use_fast_math, the
// exp2 units, the tensor-core model of a schedule and the row-sum layouts of KernelSchedule::row_sum.
#pragma once

#include <cmath>
#include <cstddef>
#include <string>

#include "pasa/attention/gemm_spec.hpp"
#include "pasa/attention/kernel_recipe.hpp"
#include "pasa/numeric/format.hpp"

namespace pasa::detail {

// --use_fast_math's -ftz=true: an fp32 operation's subnormal input or result is ±0 (FMUL.FTZ, FADD.FTZ, FFMA.FTZ).
struct Ftz {
  bool on;
  float operator()(float v) const { return on && v != 0.0f && std::fabs(v) < 0x1p-126f ? std::copysign(0.0f, v) : v; }
};

float exp2_of(Exp2Impl impl, float x);
// The H100 model of the input format: h100_fp16, h100_bf16, h100_e4m3, h100_e5m2 (allocation.cpp's table).
std::string h100_model(const Format& in);
// Both GEMMs' model: the schedule's `mma` ("h100": the H100 model of `in`), mma_k products per addition,
// operands of format `in`, fp32 accumulation.
GemmSpec mma_spec(const KernelSchedule& k, const Format& in);
// The block's row sum (p[0, n)) as the schedule's layout adds it onto l (four per-thread sums; layouts with
// one running sum use l[0]); r is the rescale factor, applied where `rescale`.
void add_row_sums(const KernelSchedule& k, const float* p, std::size_t n, float* l, float r, bool rescale);
// The row's total of the per-thread sums at the end (the quad's shuffle order).
float row_total(const KernelSchedule& k, const float* l);

}  // namespace pasa::detail
