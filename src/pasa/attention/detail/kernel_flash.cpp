#include "pasa/attention/detail/kernel_flash.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <fmt/format.h>

#include "pasa/attention/detail/gemm_common.hpp"
#include "pasa/attention/gemm.hpp"
#include "pasa/core/error.hpp"
#include "pasa/core/parallel.hpp"
#include "pasa/numeric/format.hpp"
#include "pasa/numeric/gpu_math.hpp"
#include "pasa/numeric/round.hpp"

// Each step follows docs/kernel-sources.md §1 (torch's FlashAttention-2, softmax.h and flash_fwd_kernel.h of
// FA2 v2.5.7); the step's line there is named beside it. Scores, maxima, sums and O are floats, every
// operation one IEEE float32 rounding (-ffp-contract=off: an FFMA of the kernel is std::fma here); both
// GEMMs run under the tensor-core model of mma.sync m16n8k16 (docs/tensor-cores.md), P·V into the running O.

namespace pasa::detail {

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

float exp2_of(Exp2Impl impl, float x) {
  switch (impl) {
    case Exp2Impl::cuda_exp2f: return gpu::exp2f(x);
    case Exp2Impl::ex2_ftz: return gpu::ex2_approx_ftz(x);
    case Exp2Impl::exact: return static_cast<float>(std::exp2(static_cast<double>(x)));
  }
  return 0;
}

GemmSpec mma_spec(const KernelSchedule& k, const Format& in) {
  TensorCore tc = tensor_core_preset(k.mma == "h100" ? "h100_" + in.name : k.mma);
  tc.block = static_cast<int>(k.mma_k);  // one MMA instruction's products form one aligned addition
  return GemmSpec{in, in, StageSpec{fp32()}, StageSpec{fp32()}, GemmModel{GemmKind::tensor_core, 16, tc}};
}

// One KV part of one head's rows: the online softmax over blocks [b0, b1) of bn keys, normalised (Tsm
// normalize_softmax_lse). O (Sq × D) receives the part's normalised output, lse its LSE (−inf: no key seen).
struct Part {
  std::vector<double> O;
  std::vector<float> lse;
};

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
  if (k.row_sum == RowSumLayout::block_fma) return (l[0] + l[1]) + (l[2] + l[3]);       // xor 1 then 2
  return l[0];
}

void run_part(const KernelSchedule& k, const GemmSpec& g, const Format& in_fmt, const double* S, const double* V,
              std::size_t Sq, std::size_t Skv, std::size_t D, bool causal, float scale_f, float c, std::size_t bn,
              std::size_t b0, std::size_t b1, bool split, Part& out) {
  std::vector<float> m(Sq, -kInf), ls(Sq * 4, 0.0f), P(Sq * bn), r(Sq, 1.0f);
  std::vector<std::uint8_t> grew(Sq, 0);
  out.O.assign(Sq * D, 0.0);
  out.lse.assign(Sq, -kInf);
  std::vector<double> Pd, acc;
  const bool log2_units = k.scale_fold == ScaleFold::scale_then_log2;
  const bool global_out = k.global_output_above > 0 && D > k.global_output_above;
  const float log2e = 1.44269504f;  // RN(1·log2 e) (Tkf:1161)
  bool first = true;
  for (std::size_t step = 0; step < b1 - b0; ++step) {
    const std::size_t j = k.kv_order == KvOrder::reverse ? b1 - 1 - step : b0 + step;
    const std::size_t c0 = j * bn, c1 = std::min(Skv, c0 + bn), n = c1 - c0;
    for (std::size_t row = 0; row < Sq; ++row) {
      // Masked keys are −inf (mask.h); causal keeps col <= row + Skv − Sq (bottom-right) or col <= row.
      // (key j visible iff j + Sq <= row + Skv: no unsigned Skv − Sq, which wraps for Sq > Skv)
      const std::size_t shift = k.causal == CausalAlign::top_left ? 0 : Skv;
      const std::size_t base = k.causal == CausalAlign::top_left ? 0 : Sq;
      float* p = &P[row * bn];
      for (std::size_t cc = 0; cc < n; ++cc) {  // the scores as the softmax sees them
        const float s = static_cast<float>(S[row * Skv + c0 + cc]);
        const bool hidden = causal && c0 + cc + base > row + shift;
        p[cc] = hidden ? -kInf : log2_units ? (s * scale_f) * log2e : s;
      }
      float mx = m[row];  // thread-local max from the previous max, then the quad's (exact either way)
      for (std::size_t cc = 0; cc < n; ++cc) mx = std::max(mx, p[cc]);
      float* l = &ls[row * 4];
      double* o = &out.O[row * D];
      // The rescale factor: FA2 every block after the first, alpha = exp2f(RN(RN(m_prev − m_cur)·c)) with
      // m_cur −inf → 0 (Tsm:151-157); mem-efficient where the max grew, exp2f(m_prev − m) (Tkf:1192-1211).
      const bool rescale = k.rescale == Rescale::always ? !first : mx > m[row];
      float alpha = 1.0f;
      if (rescale) {
        const float mcur = mx == -kInf ? 0.0f : mx;
        const float arg = log2_units ? m[row] - mcur
                          : k.alpha_arg == AlphaArg::scaled_difference ? (m[row] - mcur) * c
                                                                        : (m[row] == -kInf ? -kInf : m[row] * c) - mcur * c;
        alpha = exp2_of(k.exp2, arg);
        if (!global_out)
          for (std::size_t d = 0; d < D; ++d) o[d] = static_cast<float>(static_cast<float>(o[d]) * alpha);
      }
      r[row] = alpha;
      m[row] = mx;
      const float u = mx == -kInf ? 0.0f : log2_units ? mx : mx * c;  // Tsm:76; with bias, mi −inf → 0 (Tkf)
      for (std::size_t cc = 0; cc < n; ++cc) {
        const float s = p[cc];
        const float arg = log2_units ? s - u : k.exp_arg == ExpArg::unfused ? s * c - u : std::fma(s, c, -u);
        p[cc] = s == -kInf ? 0.0f : exp2_of(k.exp2, arg);  // Tsm:82-85; Tkf:1232
      }
      add_row_sums(k, p, n, l, alpha, rescale);
    }
    // P to the input format (convert_type, round to nearest), then P·V: into the rescaled O (gemm_rs; the
    // register path), or from 0 and merged by the epilogue (the global fp32 buffer, Tep:148-157).
    Pd.resize(Sq * n);
    for (std::size_t row = 0; row < Sq; ++row)
      for (std::size_t cc = 0; cc < n; ++cc) Pd[row * n + cc] = P[row * bn + cc];
    round_span(std::span<const double>(Pd), std::span<double>(Pd), in_fmt, RoundOptions{});
    if (!global_out) {
      gemm_accumulate(g, Sq, D, n, Pd.data(), n, V + c0 * D, D, out.O.data(), D);
    } else {
      acc.assign(Sq * D, 0.0);
      gemm_accumulate(g, Sq, D, n, Pd.data(), n, V + c0 * D, D, acc.data(), D);
      const bool last_block = step + 1 == b1 - b0;
      for (std::size_t row = 0; row < Sq; ++row) {
        const float total = row_total(k, &ls[row * 4]);
        const float a = !last_block ? 1.0f : total == 0.0f ? 1.0f : 1.0f / total;
        const float beta = a * r[row];
        double* o = &out.O[row * D];
        for (std::size_t d = 0; d < D; ++d)
          o[d] = std::fma(a, static_cast<float>(acc[row * D + d]), static_cast<float>(o[d]) * beta);
      }
    }
    first = false;
  }
  for (std::size_t row = 0; row < Sq; ++row) {
    const float total = row_total(k, &ls[row * 4]);
    double* o = &out.O[row * D];
    const bool empty = total == 0.0f || std::isnan(total);
    if (global_out) {
      // (normalised by the last block's epilogue)
    } else if (k.normalise == Normalise::reciprocal) {
      const float inv = empty ? 1.0f : 1.0f / total;  // Tsm:176; Tep:180-186
      for (std::size_t d = 0; d < D; ++d) o[d] = static_cast<float>(static_cast<float>(o[d]) * inv);
    } else if (!empty) {
      for (std::size_t d = 0; d < D; ++d) o[d] = static_cast<float>(static_cast<float>(o[d]) / total);
    }
    if (empty) {
      out.lse[row] = split ? -kInf : kInf;  // Tsm:177
    } else {
      const float mnat = log2_units ? m[row] / log2e : m[row] * scale_f;  // (natural units)
      const float lg = split || total >= 1.0f ? gpu::fast_logf(total) : static_cast<float>(std::log(total));
      out.lse[row] = k.lse_fma && !log2_units ? std::fma(m[row], scale_f, lg) : mnat + lg;
    }
  }
}

}  // namespace

void validate_kernel_case(const AttentionInputs& in, const KernelRecipe& k, const std::string& where) {
  const std::string& f = in.q.format.name;
  if ((f != "fp16" && f != "bf16") || in.k.format.name != f || in.v.format.name != f)
    throw InputError(fmt::format("{}kernel {}: runs on fp16 or bf16 Q, K and V of one format (as the GPU kernel); "
                                 "got {}, {}, {}", where, k.name, f, in.k.format.name, in.v.format.name));
  if (!in.pse.data.empty() || !in.mask.select.empty() || !in.mask.keep.empty() || !in.mask.kv_len.empty())
    throw InputError(fmt::format("{}kernel {}: pse, select, keep and kv_len masks are not part of this kernel's "
                                 "call (torch SDPA's flash backend takes causal only)", where, k.name));
  if (in.allow_nonfinite)
    throw InputError(fmt::format("{}kernel {}: non-finite inputs are not modelled", where, k.name));
  if (in.mask.causal && k.schedule.causal == CausalAlign::top_left && in.q.shape.S != in.k.shape.S)
    throw InputError(fmt::format("{}kernel {}: SDPA's is_causal reaches this kernel aligned top-left (key j visible "
                                 "to query i iff j <= i), pasa's causal bottom-right (j <= i + Skv − Sq): with Sq = {} "
                                 "!= Skv = {} they differ, so the recipe refuses causal here", where, k.name,
                                 in.q.shape.S, in.k.shape.S));
  const std::size_t splits = kernel_splits(k.schedule, in.q.shape.B * in.q.shape.N, in.q.shape.S, in.k.shape.S,
                                           in.q.shape.D);
  if (k.schedule.exp_arg == ExpArg::fma && splits > 1)
    throw InputError(fmt::format("{}kernel {}: exp_arg fma with split-KV ({} parts) needs MUFU.LG2 below 1, "
                                 "which was not measured; set \"split\": \"none\"", where, k.name, splits));
}

AttentionOutput kernel_attention(const AttentionInputs& in, const KernelRecipe& k, int threads) {
  validate_kernel_case(in, k, "");
  const KernelSchedule& ks = k.schedule;
  const std::size_t B = in.q.shape.B, Nq = in.q.shape.N, Nkv = in.k.shape.N, Sq = in.q.shape.S, Skv = in.k.shape.S,
                    D = in.q.shape.D;
  const Format fmt = in.q.format;
  const GemmSpec g = mma_spec(ks, fmt);
  // SDPA's scale as a float; c = RN(scale · log2 e) with log2 e a double (flash_api.cpp:130).
  const float scale_f = static_cast<float>(in.effective_scale());
  const float c = static_cast<float>(static_cast<double>(scale_f) * 1.4426950408889634074);
  const bool causal = in.mask.causal && Sq > 1;  // (flash_api.cpp:403: causal is dropped for one query; and
                                                 // top-left with Sq = Skv = 1 is the same one key)
  // Decode with GQA: the group's queries become rows of one KV head (flash_api.cpp:408-415), so the split
  // heuristic counts B · Nkv heads of G rows.
  const bool swapped = Sq == 1 && Nq > Nkv;
  const std::size_t splits = swapped ? kernel_splits(ks, B * Nkv, Nq / Nkv, Skv, D) : kernel_splits(ks, B * Nq, Sq, Skv, D);
  const std::size_t bn = block_n_for(splits > 1 ? ks.split_block_n : ks.block_n, D);
  const std::size_t nblocks = (Skv + bn - 1) / bn, per_part = (nblocks + splits - 1) / splits;
  AttentionOutput out;
  out.o = Tensor::uninitialised(in.q.shape, fmt);
  out.lse.assign(B * Nq * Sq, -std::numeric_limits<double>::infinity());
  parallel_for(B * Nq, threads, [&](std::size_t w) {
    const std::size_t b = w / Nq, h = w % Nq, hk = h / (Nq / Nkv);
    const double* q = in.q.head(b, h);
    const double* kh = in.k.head(b, hk);
    const double* V = in.v.head(b, hk);
    std::vector<double> kt(D * Skv), S(Sq * Skv);
    for (std::size_t j = 0; j < Skv; ++j)
      for (std::size_t d = 0; d < D; ++d) kt[d * Skv + j] = kh[j * D + d];
    gemm(g, Sq, Skv, D, q, D, kt.data(), Skv, S.data(), Skv);  // acc_s cleared per block: S over D from 0
    std::vector<Part> parts(splits);
    for (std::size_t s = 0; s < splits; ++s) {
      const std::size_t b0 = std::min(nblocks, s * per_part), b1 = std::min(nblocks, (s + 1) * per_part);
      run_part(ks, g, fmt, S.data(), V, Sq, Skv, D, causal, scale_f, c, bn, b0, b1, splits > 1, parts[s]);
    }
    std::vector<double> res(Sq * D);
    std::vector<float> lse(Sq);
    if (splits == 1) {
      res = parts[0].O;
      lse = parts[0].lse;
    } else {
      // The combine (flash_fwd_kernel.h:1133-1206): lse_max, Σ expf(LSE_s − lse_max), LSE = logf(Σ) + lse_max,
      // weights expf(LSE_s − LSE), O = Σ w_s·O_s from 0 in split order.
      for (std::size_t r = 0; r < Sq; ++r) {
        float lmax = -kInf;
        for (const Part& p : parts) lmax = std::max(lmax, p.lse[r]);
        if (lmax == -kInf) lmax = 0.0f;
        float sum = 0.0f;
        if (ks.combine_sum == CombineSum::butterfly) {
          // Allreduce over the lanes that hold the parts (part s in lane s, the others 0: exact), offsets
          // halving from the next power of two: lane 0's sum is ((e0 + e2) + (e1 + e3)) for four parts.
          std::size_t lanes = 1;
          while (lanes < parts.size()) lanes *= 2;
          std::vector<float> v(lanes, 0.0f);
          for (std::size_t s = 0; s < parts.size(); ++s) v[s] = gpu::expf(parts[s].lse[r] - lmax);
          for (std::size_t off = lanes / 2; off >= 1; off /= 2)
            for (std::size_t i = 0; i < off; ++i) v[i] = v[i] + v[i + off];
          sum = v[0];
        } else {
          for (const Part& p : parts) sum += gpu::expf(p.lse[r] - lmax);
        }
        const float L = sum == 0.0f || std::isnan(sum) ? kInf : gpu::logf(sum) + lmax;
        lse[r] = L;
        for (std::size_t d = 0; d < D; ++d) {
          float acc = 0.0f;
          for (const Part& p : parts) {
            const float wgt = gpu::expf(p.lse[r] - L);
            const float od = static_cast<float>(p.O[r * D + d]);
            acc = ks.combine_fma ? std::fma(wgt, od, acc) : acc + wgt * od;
          }
          res[r * D + d] = acc;
        }
      }
    }
    double* o = out.o.head(b, h);
    round_span(std::span<const double>(res), std::span<double>(o, Sq * D), fmt, RoundOptions{});  // convert_type
    for (std::size_t r = 0; r < Sq; ++r) {
      const float L = lse[r];
      out.lse[(b * Nq + h) * Sq + r] = std::isinf(L) ? -std::numeric_limits<double>::infinity() : L;
    }
  });
  return out;
}

}  // namespace pasa::detail
