#include "pasa/attention/detail/kernel_flash.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <fmt/format.h>

#include "pasa/attention/allocation.hpp"
#include "pasa/attention/detail/gemm_common.hpp"
#include "pasa/attention/detail/kernel_common.hpp"
#include "pasa/attention/detail/kernel_cudnn_decode.hpp"
#include "pasa/attention/detail/kernel_sage.hpp"
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

// One KV part of one head's rows: the online softmax over blocks [b0, b1) of bn keys, normalised (Tsm
// normalize_softmax_lse). O (Sq × D) receives the part's normalised output, lse its LSE (−inf: no key seen).
struct Part {
  std::vector<double> O;
  std::vector<float> lse;
};

// The per-call choices the engine reads besides the schedule.
struct Call {
  const KernelSchedule& k;
  const GemmSpec& g;
  const GemmSpec& pv;   // P·V: g with P's format as the A operand's
  Format p_fmt;         // P's cast: V's format, or the schedule's p_format
  RoundOptions p_round;  // round to nearest; satfinite where the schedule says
  Ftz F;
  SoftExp2Pattern soft;
  bool causal;
  float scale_f, c;
};

// Whether column cc of a block of bn takes the software exp2 (cute softmax.py apply_exp2_convert: pairs (k, k+1)
// of 32-column fragments).
bool soft_exp2_at(const SoftExp2Pattern& s, std::size_t cc, std::size_t bn) {
  if (s.freq == 0) return false;
  const std::size_t frag = cc / 32, kk = (cc % 32) & ~std::size_t{1}, frags = bn / 32;
  return kk % s.freq >= s.freq - std::min(s.res, s.freq) && frag + 1 < frags && frag >= s.start;
}

void run_part(const Call& call, const double* S, const double* V, std::size_t Sq, std::size_t Skv, std::size_t D,
              std::size_t bn, std::size_t b0, std::size_t b1, bool split, Part& out) {
  const KernelSchedule& k = call.k;
  const Ftz& F = call.F;
  const float c = call.c, scale_f = call.scale_f;
  std::vector<float> m(Sq, -kInf), ls(Sq * 4, 0.0f), P(Sq * bn), r(Sq, 1.0f);
  out.O.assign(Sq * D, 0.0);
  out.lse.assign(Sq, -kInf);
  std::vector<double> Pd, acc;
  const bool log2_units = k.scale_fold == ScaleFold::scale_then_log2;
  const bool global_out = k.global_output_above > 0 && D > k.global_output_above;
  const float log2e = 1.44269504f;  // RN(1·log2 e) (Tkf:1161)
  const auto offset = static_cast<float>(k.p_offset);
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
        const float s = F(static_cast<float>(S[row * Skv + c0 + cc]));
        const bool hidden = call.causal && c0 + cc + base > row + shift;
        p[cc] = hidden ? -kInf : log2_units ? F(F(s * scale_f) * log2e) : s;
      }
      float mx = m[row];  // thread-local max from the previous max, then the quad's (exact either way)
      for (std::size_t cc = 0; cc < n; ++cc) mx = std::max(mx, p[cc]);
      float* l = &ls[row * 4];
      double* o = &out.O[row * D];
      // The rescale factor: FA2 every block after the first, alpha = exp2f(RN(RN(m_prev − m_cur)·c)) with
      // m_cur −inf → 0 (Tsm:151-157); mem-efficient where the max grew, exp2f(m_prev − m) (Tkf:1192-1211);
      // FA4 lazily: the old max kept, factor 1, while RN(RN(m_prev − m_cur)·c) >= −threshold (softmax.py :315-332).
      const bool rescale = k.rescale == Rescale::when_max_grows ? mx > m[row] : !first;
      float alpha = 1.0f;
      if (rescale) {
        const float mcur = mx == -kInf ? 0.0f : mx;
        const float arg = log2_units ? F(m[row] - mcur)
                          : k.alpha_arg == AlphaArg::scaled_difference
                              ? F(F(m[row] - mcur) * c)
                              : F((m[row] == -kInf ? -kInf : F(m[row] * c)) - F(mcur * c));
        if (k.rescale == Rescale::lazy && k.rescale_threshold > 0 && arg >= -k.rescale_threshold) {
          mx = m[row];  // (alpha stays 1: no multiply of O, l·1 exact)
        } else {
          alpha = exp2_of(k.exp2, arg);
          if (!global_out)
            for (std::size_t d = 0; d < D; ++d) o[d] = F(static_cast<float>(o[d]) * alpha);
        }
      }
      r[row] = alpha;
      m[row] = mx;
      // u = RN(RN(m·c) − p_offset), m −inf → 0 (Tsm:76; FA3 softmax.h :77-79; FA4 bias = RN(offset − RN(m·c)),
      // the same value negated); with bias, mi −inf → 0 (Tkf)
      const float u = mx == -kInf ? -offset : log2_units ? F(mx - offset) : F(F(mx * c) - offset);
      for (std::size_t cc = 0; cc < n; ++cc) {
        const float s = p[cc];
        const float arg = log2_units ? F(s - u) : k.exp_arg == ExpArg::unfused ? F(F(s * c) - u) : F(std::fma(s, c, -u));
        const bool soft = soft_exp2_at(call.soft, cc, bn);
        p[cc] = s == -kInf ? 0.0f : soft ? gpu::ex2_poly3(arg) : exp2_of(k.exp2, arg);  // Tsm:82-85; Tkf:1232
      }
      add_row_sums(k, p, n, l, alpha, rescale);
      if (call.F.on)
        for (int t = 0; t < 4; ++t) l[t] = F(l[t]);
    }
    // P to V's format (convert_type, round to nearest; satfinite for FP8), then P·V: into the rescaled O
    // (gemm_rs; the register path), or from 0 and merged: by the epilogue (the global fp32 buffer, Tep:148-157)
    // or by one fp32 add per block (two-level accumulation, PR #2250 hopper/utils.h flash::gemm).
    Pd.resize(Sq * n);
    for (std::size_t row = 0; row < Sq; ++row)
      for (std::size_t cc = 0; cc < n; ++cc) Pd[row * n + cc] = P[row * bn + cc];
    round_span(std::span<const double>(Pd), std::span<double>(Pd), call.p_fmt, call.p_round);
    if (!global_out && !k.pv_two_level) {
      gemm_accumulate(call.pv, Sq, D, n, Pd.data(), n, V + c0 * D, D, out.O.data(), D);
    } else if (!global_out) {
      acc.assign(Sq * D, 0.0);
      gemm_accumulate(call.pv, Sq, D, n, Pd.data(), n, V + c0 * D, D, acc.data(), D);
      for (std::size_t i = 0; i < Sq * D; ++i) out.O[i] = static_cast<float>(out.O[i]) + static_cast<float>(acc[i]);
    } else {
      acc.assign(Sq * D, 0.0);
      gemm_accumulate(call.pv, Sq, D, n, Pd.data(), n, V + c0 * D, D, acc.data(), D);
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
    const float total = F(row_total(k, &ls[row * 4]));
    double* o = &out.O[row * D];
    const bool empty = total == 0.0f || std::isnan(total);
    if (global_out) {
      // (normalised by the last block's epilogue)
    } else if (k.normalise == Normalise::reciprocal || k.normalise == Normalise::rcp_approx) {
      // Tsm:176; Tep:180-186; FA3 softmax.h finalize (inv 0 when empty: O is 0 there either way); FA4 :2743
      const float inv = empty ? 1.0f : k.normalise == Normalise::reciprocal ? 1.0f / total : gpu::rcp_approx_ftz(total);
      for (std::size_t d = 0; d < D; ++d) o[d] = F(static_cast<float>(o[d]) * inv);
    } else if (!empty) {
      for (std::size_t d = 0; d < D; ++d) o[d] = F(static_cast<float>(o[d]) / total);
    }
    if (empty) {
      out.lse[row] = split ? -kInf : kInf;  // Tsm:177
    } else {
      // (natural units; the P offset taken out: the LSE is not bit-modelled for offsets, FA3 and FA4)
      const float mnat = log2_units ? m[row] / log2e : m[row] * scale_f;
      const float lg = split || total >= 1.0f ? gpu::fast_logf(total) : static_cast<float>(std::log(total));
      const float lse = k.lse_fma && !log2_units ? std::fma(m[row], scale_f, lg) : mnat + lg;
      out.lse[row] = k.p_offset == 0 ? lse : lse - offset * 0.693147182f;
    }
  }
}

}  // namespace

void check_kernel_layout(const KernelRecipe& k, const Format& q, const Format& kf, const Format& v, std::size_t D,
                         const std::string& where) {
  check_sage_schedule(k, where);
  const std::vector<std::string>& ok = k.schedule.inputs;
  if (std::find(ok.begin(), ok.end(), q.name) == ok.end() || kf.name != q.name || v.name != q.name)
    throw InputError(fmt::format("{}kernel {}: runs on Q, K and V of one format among {} (as the GPU kernel); "
                                 "got {}, {}, {}", where, k.name, fmt::join(ok, ", "), q.name, kf.name, v.name));
  if (k.schedule.max_d > 0 && D > k.schedule.max_d)
    throw InputError(fmt::format("{}kernel {}: head dimension {} is above the {} this kernel serves (a larger one "
                                 "runs another kernel, not modelled)", where, k.name, D, k.schedule.max_d));
  // P reaches 2^(p_offset + threshold) at most (a lazily kept max); FA4 asserts that this stays below the P
  // format's largest value (flash_fwd_sm100.py :2191-2195) — with satfinite P clamps there instead (#2716).
  const KernelSchedule& ks = k.schedule;
  const double p_top = ks.p_offset + (ks.rescale == Rescale::lazy ? ks.rescale_threshold : 0.0f);
  const Format p = ks.p_format.empty() ? v : format_by_name(ks.p_format);
  // (P in blocks, SA3's p_block: each block is divided by its own scale first, so its elements stay in range)
  if (!ks.p_saturate && ks.p_block == 0 && p_top >= std::log2(p.max_finite()))
    throw InputError(fmt::format("{}kernel {}: P can reach 2^{} (p_offset {} + rescale_threshold), above {}'s largest "
                                 "value {}: it would overflow; lower them or set \"p_saturate\"", where, k.name, p_top,
                                 ks.p_offset, p.name, p.max_finite()));
}

AlgorithmSpec blocked_kernel_spec(const KernelRecipe& k, const Format& in, std::size_t G) {
  const KernelSchedule& ks = k.schedule;
  AlgorithmSpec s;
  s.name = "fa2";
  s.alloc = allocation_preset(in.name == "bf16" ? "fa_fp32_bf16" : "fa_fp32");
  s.alloc.name = k.name;
  s.alloc.spec(Stage::p).round.mode = ks.p_round;
  s.alloc.spec(Stage::out).round.mode = ks.out_round;
  s.s1 = std::numeric_limits<std::size_t>::max() / 2;  // all queries one block (clamped to Sq by run_attention)
  s.s2 = block_n_for(ks.block_n_by_group.empty() ? ks.block_n : ks.block_n_by_group, ks.block_n_by_group.empty() ? 0 : G);
  return s;
}

void validate_kernel_case(const AttentionInputs& in, const KernelRecipe& k, const std::string& where) {
  check_kernel_layout(k, in.q.format, in.k.format, in.v.format, in.q.shape.D, where);
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
  if (k.schedule.engine == KernelEngine::sage) return sage_attention(in, k, threads);
  const KernelSchedule& ks = k.schedule;
  const std::size_t B = in.q.shape.B, Nq = in.q.shape.N, Nkv = in.k.shape.N, Sq = in.q.shape.S, Skv = in.k.shape.S,
                    D = in.q.shape.D;
  const Format fmt = in.q.format;
  const GemmSpec g = mma_spec(ks, fmt);
  // SDPA's scale as a float; c = RN(scale · log2 e) with log2 e a double (flash_api.cpp:130), or as an fp32
  // product RN(scale · RN(log2 e)) (FoldProduct::float_product: cuDNN's, one ulp lower at D 160).
  const float scale_f = static_cast<float>(in.effective_scale());
  const float c = ks.fold_product == FoldProduct::float_product
                      ? scale_f * 1.44269504f
                      : static_cast<float>(static_cast<double>(scale_f) * 1.4426950408889634074);
  const bool causal = in.mask.causal && Sq > 1;  // (flash_api.cpp:403: causal is dropped for one query; and
                                                 // top-left with Sq = Skv = 1 is the same one key)
  // Decode with GQA: the group's queries become rows of one KV head (flash_api.cpp:408-415), so the split
  // heuristic counts B · Nkv heads of G rows.
  const bool swapped = Sq == 1 && Nq > Nkv;
  const std::size_t splits = swapped ? kernel_splits(ks, B * Nkv, Nq / Nkv, Skv, D) : kernel_splits(ks, B * Nq, Sq, Skv, D);
  const std::size_t decode_splits = cudnn_decode_splits(ks, B * Nkv, Skv);
  const auto& table = splits > 1 ? ks.split_block_n : causal && !ks.causal_block_n.empty() ? ks.causal_block_n : ks.block_n;
  const std::size_t bn = block_n_for(table, D);
  const std::size_t nblocks = (Skv + bn - 1) / bn, per_part = (nblocks + splits - 1) / splits;
  const bool fp8 = fmt.p <= 4;
  RoundOptions p_round;
  p_round.mode = ks.p_round;
  if (ks.p_saturate) p_round.overflow = Overflow::saturate;
  // P's cast: V's format (convert_type), or p_format (an ablation: e.g. E5M2 P against #2716's saturating E4M3)
  const Format p_fmt = ks.p_format.empty() ? fmt : format_by_name(ks.p_format);
  GemmSpec pv = g;
  pv.a_format = p_fmt;
  const Call call{.k = ks, .g = g, .pv = pv, .p_fmt = p_fmt, .p_round = p_round, .F = Ftz{ks.ftz},
                  .soft = soft_exp2_pattern(ks, D, causal, Sq, Nq / Nkv, fp8), .causal = causal, .scale_f = scale_f,
                  .c = c};
  const Format out_fmt = ks.output.empty() ? fmt : format_by_name(ks.output);
  AttentionOutput out;
  out.o = Tensor::uninitialised(in.q.shape, out_fmt);
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
    if (Sq == 1 && ks.decode == DecodeEngine::cudnn_sm80) {
      // cuDNN's decode kernels: scores RN(RN(S·scale)·RN(log2 e)), then its own blocks and reduction
      std::vector<float> s2(Skv);
      for (std::size_t j = 0; j < Skv; ++j) s2[j] = (static_cast<float>(S[j]) * scale_f) * 1.44269504f;
      std::vector<double> row(D);
      const float L = cudnn_decode_row(g, fmt, s2.data(), V, Skv, D, row.data(), decode_splits, ks.decode_partition);
      RoundOptions ro;
      ro.mode = ks.out_round;
      round_span(std::span<const double>(row), std::span<double>(out.o.head(b, h), D), out_fmt, ro);
      out.lse[(b * Nq + h)] = L;
      return;
    }
    std::vector<Part> parts(splits);
    for (std::size_t s = 0; s < splits; ++s) {
      const std::size_t b0 = std::min(nblocks, s * per_part), b1 = std::min(nblocks, (s + 1) * per_part);
      run_part(call, S.data(), V, Sq, Skv, D, bn, b0, b1, splits > 1, parts[s]);
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
    RoundOptions out_round;
    out_round.mode = ks.out_round;
    round_span(std::span<const double>(res), std::span<double>(o, Sq * D), out_fmt, out_round);  // convert_type
    for (std::size_t r = 0; r < Sq; ++r) {
      const float L = lse[r];
      out.lse[(b * Nq + h) * Sq + r] = std::isinf(L) ? -std::numeric_limits<double>::infinity() : L;
    }
  });
  return out;
}

}  // namespace pasa::detail
