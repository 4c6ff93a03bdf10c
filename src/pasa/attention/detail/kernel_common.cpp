#include "pasa/attention/detail/kernel_common.hpp"

#include <algorithm>

#include "pasa/attention/allocation.hpp"
#include "pasa/attention/detail/gemm_common.hpp"
#include "pasa/numeric/gpu_math.hpp"

namespace pasa::detail {

float exp2_of(Exp2Impl impl, float x) {
  switch (impl) {
    case Exp2Impl::cuda_exp2f: return gpu::exp2f(x);
    case Exp2Impl::ex2_ftz: return gpu::ex2_approx_ftz(x);
    case Exp2Impl::exact: return static_cast<float>(std::exp2(static_cast<double>(x)));
  }
  return 0;
}

std::string h100_model(const Format& in) {
  if (in.name == "fp8_e4m3fn") return "h100_e4m3";
  if (in.name == "fp8_e5m2") return "h100_e5m2";
  return "h100_" + in.name;
}

GemmSpec mma_spec(const KernelSchedule& k, const Format& in) {
  TensorCore tc = tensor_core_preset(k.mma == "h100" ? h100_model(in) : k.mma);
  tc.block = static_cast<int>(k.mma_k);  // one MMA instruction's products form one aligned addition
  return GemmSpec{in, in, StageSpec{fp32()}, StageSpec{fp32()}, GemmModel{GemmKind::tensor_core, 16, tc}};
}

// The block's row sum as the schedule's layout adds it, onto l (quad_fragment: the four per-thread sums).
void add_row_sums(const KernelSchedule& k, const float* p, std::size_t n, float* l, float r, bool rescale) {
  switch (k.row_sum) {
    case RowSumLayout::quad_fragment:  // Tsm:141, :162: thread t holds columns 8j + 2t + {0, 1}, in order
    case RowSumLayout::sequential: {
      const bool quad = k.row_sum == RowSumLayout::quad_fragment;
      bool pending[4] = {rescale, rescale, rescale, rescale};  // RN(l·alpha) not yet applied
      for (std::size_t cc = 0; cc < n; ++cc) {
        const int t = quad ? static_cast<int>((cc % 8) / 2) : 0;
        if (pending[t] && k.sum_rescale_fma) l[t] = std::fma(l[t], r, p[cc]);  // nvcc's contraction
        else l[t] = (pending[t] ? l[t] * r : l[t]) + p[cc];
        pending[t] = false;
      }
      for (int t = 0; t < 4; ++t)
        if (pending[t]) l[t] = l[t] * r;
      return;
    }
    case RowSumLayout::block_fma: {
      float b[4] = {0, 0, 0, 0};
      for (std::size_t cc = 0; cc < n; ++cc) b[(cc % 8) / 2] += p[cc];
      for (int t = 0; t < 4; ++t) l[t] = rescale ? std::fma(r, l[t], b[t]) : l[t] + b[t];
      return;
    }
    case RowSumLayout::row_interleaved8: {  // cute utils.py fadd_reduce (arch >= 100), softmax.py update_row_sum
      float a[8];
      for (std::size_t i = 0; i < 8; ++i) a[i] = i < n ? p[i] : 0.0f;
      // init_val = RN(row_sum·scale), then the packed add (init, 0) + (p0, p1); exact for the first block (l = 0)
      a[0] = (rescale ? l[0] * r : l[0]) + a[0];
      for (std::size_t cc = 8; cc < n; ++cc) a[cc % 8] += p[cc];
      l[0] = ((a[0] + a[2]) + (a[4] + a[6])) + ((a[1] + a[3]) + (a[5] + a[7]));
      return;
    }
    case RowSumLayout::block_quad: {  // Triton ReduceOp: per thread in register order, then shfl.bfly 2, 1
      float t4[4] = {0, 0, 0, 0};
      for (std::size_t cc = 0; cc < n; ++cc) t4[(cc % 8) / 2] += p[cc];
      const float blk = (t4[0] + t4[2]) + (t4[1] + t4[3]);
      l[0] = !rescale ? l[0] + blk : k.sum_rescale_fma ? std::fma(l[0], r, blk) : l[0] * r + blk;
      return;
    }
    case RowSumLayout::tile16: {  // attn_utils.cuh update_mdo d *= o_scale; sm90.cu :317 d += (a + b + c + e)
      for (std::size_t t = 0; t < 4; ++t) {
        bool pending = rescale;  // (sum_rescale_fma: nvcc contracts d·o_scale with the first tile's add)
        for (std::size_t c = 2 * t; c < n; c += 16) {
          auto at = [&](std::size_t i) { return i < n ? p[i] : 0.0f; };  // (masked columns: P = 0)
          const float part = ((at(c) + at(c + 1)) + at(c + 8)) + at(c + 9);
          l[t] = pending && k.sum_rescale_fma ? std::fma(l[t], r, part) : (pending ? l[t] * r : l[t]) + part;
          pending = false;
        }
        if (pending) l[t] = l[t] * r;
      }
      return;
    }
    case RowSumLayout::warp_columns: {  // Tkf:1236-1266, Tli:50-89
      float acc = l[0];
      bool pending = rescale;
      for (std::size_t w0 = 0; w0 < n; w0 += 32) {
        float th[4] = {0, 0, 0, 0};
        for (int t = 0; t < 4; ++t)
          for (std::size_t j = 0; j < 4; ++j)
            for (std::size_t e = 0; e < 2; ++e)
              if (const std::size_t cc = w0 + 8 * j + 2 * t + e; cc < n) th[t] += p[cc];
        const float part = (th[0] + th[1]) + (th[2] + th[3]);  // quad: xor 1, then xor 2
        acc = pending && k.sum_rescale_fma ? std::fma(acc, r, part) : (pending ? acc * r : acc) + part;
        pending = false;
      }
      l[0] = pending ? acc * r : acc;
      return;
    }
  }
}

float row_total(const KernelSchedule& k, const float* l) {
  if (k.row_sum == RowSumLayout::quad_fragment) return (l[0] + l[2]) + (l[1] + l[3]);  // offsets 2 then 1
  if (k.row_sum == RowSumLayout::block_fma || k.row_sum == RowSumLayout::tile16)
    return (l[0] + l[1]) + (l[2] + l[3]);  // xor 1 then 2 (normalize_d :736-737 for tile16)
  return l[0];
}


}  // namespace pasa::detail
