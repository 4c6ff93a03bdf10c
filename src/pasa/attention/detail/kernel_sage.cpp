#include "pasa/attention/detail/kernel_sage.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>
#include <vector>

#include <fmt/format.h>

#include "pasa/attention/allocation.hpp"
#include "pasa/attention/detail/kernel_common.hpp"
#include "pasa/attention/gemm.hpp"
#include "pasa/core/error.hpp"
#include "pasa/core/parallel.hpp"
#include "pasa/numeric/block_scale.hpp"
#include "pasa/numeric/double_double.hpp"
#include "pasa/numeric/format.hpp"
#include "pasa/numeric/gpu_math.hpp"
#include "pasa/numeric/round.hpp"

// Sources (thu-ml/SageAttention d1a57a5): core.py (the wrappers), triton/quant_per_block.py, quant_per_thread.py
// and attn_qk_int8_per_block[_causal].py (SA1), csrc/qattn/qk_int_sv_f8_cuda_sm90.cu, attn_utils.cuh and
// csrc/fused/fused.cu (SA2 on Hopper). Every float operation is one IEEE fp32 rounding (F: the flush of
// --use_fast_math where the schedule sets ftz); the integer QKᵀ is exact (int8 mma/wgmma into int32).

namespace pasa::detail {

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

bool whole_rows(const GroupLayout& g) {
  return g.group == Grouping::tensor || g.group == Grouping::row ||
         ((g.group == Grouping::tile || g.group == Grouping::thread) && g.cols == 0);
}

// One head's S × D values quantised by the scheme (operand b: its K layout): the integer elements and each
// row's scale (every accepted grouping keeps a row of D under one scale: check_sage_schedule).
struct RowQuantised {
  std::vector<double> el;
  std::vector<float> scale;    // per row (1 for block-scaled schemes)
  std::vector<double> bscale;  // block-scaled schemes (SA3's FP4): per (row, block of `cols` along D), nb a row
  std::size_t nb = 0;
};
bool block_scaled(const BlockScheme& s) { return s.a.group == Grouping::block && s.b.group == Grouping::block; }
RowQuantised quantise_rows(const double* x, std::size_t S, std::size_t D, const BlockScheme& s, bool operand_b) {
  const BlockQuantised bq = block_quantise(x, 1, S, D, s, operand_b, nullptr);
  const GroupLayout& g = operand_b ? s.b : s.a;
  RowQuantised r{bq.elements, std::vector<float>(S, 1.0f), {}, 0};
  if (block_scaled(s)) {
    r.nb = (D + g.cols - 1) / g.cols;
    r.bscale.resize(S * r.nb);
    for (std::size_t i = 0; i < S; ++i)
      for (std::size_t b = 0; b < r.nb; ++b) r.bscale[i * r.nb + b] = bq.scales[group_of(g, S, D, i, b * g.cols)];
    return r;
  }
  for (std::size_t i = 0; i < S; ++i)
    r.scale[i] = static_cast<float>(g.group == Grouping::tensor ? bq.scales[0] : bq.scales[group_of(g, S, D, i, 0)]);
  return r;
}

// What one KV head contributes: K's elements and row scales (after smooth K), V as the P·V GEMM takes it, V's
// per-channel scales, and km (smooth K's mean) for the LSE.
struct KvHead {
  RowQuantised k;
  std::vector<double> v, km;
  std::vector<float> v_scale;
  // block-scaled (SA3): Kᵀ's elements (D × S) and scales (D-block × S) as the MMA's B operand reads them, and V's
  // scales per (16-key block, channel)
  std::vector<double> kt, kt_scale, v_bscale;
  std::size_t v_blocks = 0;
  std::vector<double> k_smoothed;  // K − km in the input format (smooth Q's δS = q̄·K'ᵀ)
};

KvHead prepare_kv(const double* K, const double* V, std::size_t S, std::size_t D, const KernelSchedule& ks,
                  const Format& in, const Format& v_fmt, const BlockScheme& qk) {
  KvHead h;
  std::vector<double> k(K, K + S * D);
  if (ks.smooth_k) {
    // core.py :280 km = k.mean(dim=seq) in the input dtype (fp32 accumulation on the GPU, one rounding to the
    // format: here the double-double mean rounded once), then quant_per_*.py `k = k - km`: fp32
    // difference rounded to the input format
    h.km.assign(D, 0.0);
    for (std::size_t d = 0; d < D; ++d) {
      DD sum{0.0, 0.0};
      for (std::size_t j = 0; j < S; ++j) sum = dd_add(sum, DD{K[j * D + d], 0.0});  // (exact: 106 bits)
      const DD mean = dd_div(sum, DD{static_cast<double>(S), 0.0});
      h.km[d] = round_sum(mean.hi, mean.lo, in);
    }
    for (std::size_t j = 0; j < S; ++j)
      for (std::size_t d = 0; d < D; ++d)
        k[j * D + d] = round(static_cast<double>(static_cast<float>(K[j * D + d] - h.km[d])), in);
  }
  h.k = quantise_rows(k.data(), S, D, qk, true);
  if (ks.smooth_q) h.k_smoothed = k;
  if (block_scaled(qk)) {
    h.kt.resize(D * S);
    h.kt_scale.resize(h.k.nb * S);
    for (std::size_t j = 0; j < S; ++j) {
      for (std::size_t d = 0; d < D; ++d) h.kt[d * S + j] = h.k.el[j * D + d];
      for (std::size_t b = 0; b < h.k.nb; ++b) h.kt_scale[b * S + j] = h.k.bscale[j * h.k.nb + b];
    }
  }
  // V in the P·V operand format (SA1: bf16 V cast to fp16, core.py :298), then per channel (per_channel_fp8)
  h.v.resize(S * D);
  round_span(std::span<const double>(V, S * D), std::span<double>(h.v), v_fmt, RoundOptions{});
  h.v_scale.assign(D, 1.0f);
  if (!ks.v_quant.empty() && block_scaled(block_scheme_by_name(ks.v_quant))) {
    // SA3 scaled_fp4_quant_trans: Vᵀ (D rows of S keys) quantised per 16 keys
    const BlockScheme vs = block_scheme_by_name(ks.v_quant);
    std::vector<double> vt(D * S);
    for (std::size_t j = 0; j < S; ++j)
      for (std::size_t d = 0; d < D; ++d) vt[d * S + j] = h.v[j * D + d];
    const BlockQuantised bq = block_quantise(vt.data(), 1, D, S, vs, false, nullptr);
    h.v_blocks = (S + vs.a.cols - 1) / vs.a.cols;
    h.v_bscale.resize(h.v_blocks * D);
    for (std::size_t d = 0; d < D; ++d) {
      for (std::size_t j = 0; j < S; ++j) h.v[j * D + d] = bq.elements[d * S + j];
      for (std::size_t b = 0; b < h.v_blocks; ++b) h.v_bscale[b * D + d] = bq.scales[group_of(vs.a, D, S, d, b * vs.a.cols)];
    }
  } else if (!ks.v_quant.empty()) {
    const BlockScheme vs = block_scheme_by_name(ks.v_quant);
    const BlockQuantised bq = block_quantise(h.v.data(), 1, S, D, vs, true, nullptr);
    h.v = bq.elements;
    for (std::size_t d = 0; d < D; ++d) h.v_scale[d] = static_cast<float>(bq.scales[vs.b.group == Grouping::tensor ? 0 : d]);
  }
  return h;
}

struct SageCall {
  const KernelSchedule& k;
  Ftz F;
  float c0;          // the exponent's scale: RN(scale·log2 e), or 1 where Q carries it (q_prescale)
  double scale;      // the softmax scale (smooth K's LSE shift)
  bool causal;
  GemmSpec pv;       // the P·V GEMM (fp16 or fp32 accumulation; block-scaled with p_block)
  bool pv_f16;
  GemmSpec qk;       // block-scaled Q and K (SA3): the schedule's block-scaled MMA; else the exact integer product
  bool fp4_qk;
  Format p_fmt, out_fmt, in_fmt;
  RoundOptions p_round;
};

// SA3's two-level P (softmax_fused.h :70-90, :110-140): P = 2^(s·c − m) with the row max at 2^p_offset (2688 =
// 448·6); per p_block keys the scale ex2(fma(bmax, c, −m) + log2(1/6)) from the block's max score, the elements
// P / scale (fast math: P · rcp(scale)) cast to p_format by cvt.rn.satfinite; the MMA reads the scale as ue4m3.
void quantise_p_row(const SageCall& call, const float* p, const float* v, const float* c, std::size_t n, float m,
                    double* el, double* scale) {
  const KernelSchedule& k = call.k;
  const std::size_t pb = k.p_block;
  const Format e4m3 = format_by_name("fp8_e4m3fn");
  RoundOptions sat;
  sat.overflow = Overflow::saturate;
  constexpr float kLog2Sixth = -2.584962500721156f;  // fp4_scale_log2 (:34)
  for (std::size_t b0 = 0; b0 < n; b0 += pb) {
    float bmax = -std::numeric_limits<float>::infinity();
    for (std::size_t cc = b0; cc < std::min(n, b0 + pb); ++cc)
      if (p[cc] > 0.0f) bmax = std::max(bmax, v[cc] * 1.0f);
    const float sc = bmax == -std::numeric_limits<float>::infinity()
                         ? 0.0f
                         : exp2_of(k.exp2, call.F(call.F(std::fma(bmax, c[b0], -m)) + kLog2Sixth));
    const float inv = sc == 0.0f ? 0.0f : gpu::rcp_approx_ftz(sc);
    for (std::size_t cc = b0; cc < std::min(n, b0 + pb); ++cc)
      el[cc] = round(static_cast<double>(call.F(p[cc] * inv)), call.p_fmt, call.p_round);
    scale[b0 / pb] = round(static_cast<double>(sc), e4m3, sat);
  }
}

// One query block (rows [r0, r1) of a head) against its key blocks: the online softmax in scaled units
// (attn_utils.cuh update_mdo; attn_qk_int8_per_block.py _attn_fwd_inner), O and the row's lse written.
void run_query_block(const SageCall& call, const RowQuantised& q, const KvHead& kv, std::size_t r0, std::size_t r1,
                     std::size_t Sq, std::size_t Skv, std::size_t D, double* O, double* lse, const double* q_in,
                     const std::vector<double>& dS) {
  const KernelSchedule& k = call.k;
  const Ftz& F = call.F;
  const std::size_t rows = r1 - r0, bn = block_n_for(k.block_n, D);
  // causal (top-left, j <= i: attn_qk_int8_per_block_causal.py :45; sm90 :253) bounds the key loop by the block
  const bool bottom_right = k.causal == CausalAlign::bottom_right;
  std::size_t kend = Skv;
  if (call.causal) {
    const auto reach = static_cast<long long>(((r0 / k.block_m) + 1) * k.block_m) +
                       (bottom_right ? static_cast<long long>(Skv) - static_cast<long long>(Sq) : 0);
    kend = static_cast<std::size_t>(std::clamp<long long>(reach, 0, static_cast<long long>(Skv)));
  }
  const std::size_t nblocks = (kend + bn - 1) / bn;
  std::vector<float> m(rows, k.m_init), ls(rows * 4, 0.0f), P(rows * bn), v(bn), c(bn), r(rows, 1.0f);
  const bool fused_rescale = k.pv_rescale_fma && (call.pv_f16 || k.pv_two_level);
  for (std::size_t i = 0; i < rows; ++i) ls[i * 4] = k.l_init;
  if (k.row_sum == RowSumLayout::tile16)
    for (std::size_t i = 0; i < rows; ++i) std::fill_n(&ls[i * 4], 4, k.l_init);  // (every thread's d starts at 1)
  std::vector<double> acc(rows * D, 0.0), Pd, blk, Sblk, C0, Psc;
  const float off = k.p_offset;
  const std::size_t pb = k.p_block;
  for (std::size_t step = 0; step < nblocks; ++step) {
    const std::size_t jb = k.kv_order == KvOrder::reverse ? nblocks - 1 - step : step;
    const std::size_t c0 = jb * bn, c1 = std::min(kend, c0 + bn), n = c1 - c0;
    const bool last = step + 1 == nblocks;
    const bool dequant_first = k.dequant == Dequant::scores || (k.dequant == Dequant::fold_last_scores && last);
    if (call.fp4_qk) {
      // SA3: the accumulator starts at δS (mainloop_tma_ws.h :691-702), then tcgen05.mma.block_scale over D
      C0.assign(rows * n, 0.0);
      if (!dS.empty())
        for (std::size_t i = 0; i < rows; ++i)
          for (std::size_t cc = 0; cc < n; ++cc) C0[i * n + cc] = dS[(r0 + i) * Skv + c0 + cc];
      Sblk.assign(rows * n, 0.0);
      gemm_block_scaled(call.qk, rows, n, D, q.el.data() + r0 * D, D, kv.kt.data() + c0, Skv, Sblk.data(), n,
                        TcScales{q.bscale.data() + r0 * q.nb, q.nb, kv.kt_scale.data() + c0, Skv}, C0.data());
    }
    if (pb) {
      Pd.assign(rows * n, 0.0);
      Psc.assign(rows * ((n + pb - 1) / pb), 0.0);
    }
    for (std::size_t i = 0; i < rows; ++i) {
      const std::size_t row = r0 + i;
      float* p = &P[i * bn];
      float mx = -kInf;
      for (std::size_t cc = 0; cc < n; ++cc) {
        const std::size_t j = c0 + cc;
        const bool hidden = call.causal && (bottom_right ? j + Sq > row + Skv : j > row);
        if (hidden) {
          p[cc] = -kInf;
          continue;
        }
        double s = 0;  // the exact int32 accumulator of the int8 mma (|S| < 2^24: __int2float_rz exact)
        if (call.fp4_qk) s = Sblk[i * n + cc];
        else
          for (std::size_t d = 0; d < D; ++d) s += q.el[row * D + d] * kv.k.el[j * D + d];
        const float S = static_cast<float>(s);
        const float dq = F(q.scale[row] * kv.k.scale[j]);  // q_scale * k_scale (sm90 :263; Triton :45)
        // scores: RN(S·dq), the scale c0 (Triton: qk = dot.to(fp32) * (q_scale * k_scale)); fold: S with
        // RN(c0·dq) (sm90 :264 sm_scale = original_sm_scale * dequant_scale)
        v[cc] = dequant_first ? F(S * dq) : S;
        c[cc] = dequant_first ? call.c0 : F(call.c0 * dq);
        // the max in scaled units: fmaf(m, sm_scale, −S_FP8_OFFSET) (update_mdo :379), a monotone map of each
        // thread's max, so the max of the mapped scores
        p[cc] = F(std::fma(v[cc], c[cc], -off));
        mx = std::max(mx, p[cc]);
      }
      const float mprev = m[i], mnew = std::max(mprev, mx);
      // o_scale = exp2(m_prev − m) (update_mdo :397; Triton alpha = exp2(m_i − m_ij)): 0 from the initial max
      // (a row that has seen no key yet, mnew = −inf: alpha 1 and P 0, as FA2's Check_inf; SageAttention's own
      // causal loop, forward from key 0, never meets one — a reverse kv_order would, with NaN otherwise)
      const float alpha = mnew == -kInf ? 1.0f : exp2_of(k.exp2, F(mprev - mnew));
      r[i] = alpha;
      if (!fused_rescale)
        for (std::size_t d = 0; d < D; ++d) acc[i * D + d] = F(static_cast<float>(acc[i * D + d]) * alpha);
      m[i] = mnew;
      for (std::size_t cc = 0; cc < n; ++cc)  // exp2(fmaf(RS, sm_scale, −m)) (update_mdo :450; Triton qk − m_ij)
        p[cc] = p[cc] == -kInf || mnew == -kInf ? 0.0f : exp2_of(k.exp2, F(std::fma(v[cc], c[cc], -mnew)));
      float* l = &ls[i * 4];
      add_row_sums(k, p, n, l, alpha, true);
      if (F.on)
        for (int t = 0; t < 4; ++t) l[t] = F(l[t]);
      if (pb) quantise_p_row(call, p, v.data(), c.data(), n, mnew, &Pd[i * n], &Psc[i * ((n + pb - 1) / pb)]);
    }
    // P cast (Triton p.to(float16); sm90 RS_32_to_8, satfinite), then the block's P·V: from 0 in fp16 (tl.dot
    // out_dtype=float16) or fp32 (inst_buf RO_temp), added to O in fp32 (sm90 :481), or into the running O
    if (!pb) {
      Pd.resize(rows * n);
      for (std::size_t i = 0; i < rows; ++i)
        for (std::size_t cc = 0; cc < n; ++cc) Pd[i * n + cc] = P[i * bn + cc];
      round_span(std::span<const double>(Pd), std::span<double>(Pd), call.p_fmt, call.p_round);
    }
    if (pb) {  // SA3: P's FP4 elements and e4m3 block scales against V's, block-scaled, from 0 (o_tmp)
      blk.assign(rows * D, 0.0);
      gemm_block_scaled(call.pv, rows, D, n, Pd.data(), n, kv.v.data() + c0 * D, D, blk.data(), D,
                        TcScales{Psc.data(), (n + pb - 1) / pb, kv.v_bscale.data() + (c0 / pb) * D, D});
      for (std::size_t e = 0; e < rows * D; ++e)
        acc[e] = fused_rescale ? F(std::fma(static_cast<float>(acc[e]), r[e / D], static_cast<float>(blk[e])))
                               : F(static_cast<float>(acc[e]) + static_cast<float>(blk[e]));
    } else if (call.pv_f16 || k.pv_two_level) {
      blk.assign(rows * D, 0.0);
      gemm_accumulate(call.pv, rows, D, n, Pd.data(), n, kv.v.data() + c0 * D, D, blk.data(), D);
      for (std::size_t e = 0; e < rows * D; ++e)
        acc[e] = fused_rescale ? F(std::fma(static_cast<float>(acc[e]), r[e / D], static_cast<float>(blk[e])))
                               : F(static_cast<float>(acc[e]) + static_cast<float>(blk[e]));
    } else {
      gemm_accumulate(call.pv, rows, D, n, Pd.data(), n, kv.v.data() + c0 * D, D, acc.data(), D);
    }
  }
  for (std::size_t i = 0; i < rows; ++i) {
    const std::size_t row = r0 + i;
    const float total = F(row_total(k, &ls[i * 4]));
    const bool empty = total == 0.0f || std::isnan(total);
    // Triton acc / l_i[:, None]; sm90 normalize_d: RO *= rcp.approx(d); then RO *= v_scale (:505-512)
    const float inv = k.normalise == Normalise::rcp_approx ? gpu::rcp_approx_ftz(total) : 1.0f / total;
    std::vector<double> o(D);
    for (std::size_t d = 0; d < D; ++d) {
      float x = static_cast<float>(acc[i * D + d]);
      x = empty ? 0.0f : k.normalise == Normalise::divide ? F(x / total) : F(x * inv);
      if (!k.v_quant.empty()) x = F(x * kv.v_scale[d]);
      o[d] = x;
    }
    RoundOptions ro;
    ro.mode = k.out_round;
    round_span(std::span<const double>(o), std::span<double>(O + row * D, D), call.out_fmt, ro);
    // The LSE: m + log2(l) in log2 units (Triton :132 tl.log2(l_i) + m_i, log2f: 99.5 % of the captured LSE bits
    // against 90 % with MUFU.LG2; sm90 :563 ptx_log2(d) + m, lg2.approx.ftz: lse_lg2_approx), then
    // core.py :329 lse / 1.44269504 (a float tensor by a Python number: times its fp32 reciprocal) +
    // lse_correction * sm_scale, lse_correction = q·km in the input format (a matmul of the inputs: the exact
    // dot rounded once, the closest model of cuBLAS's fp32 accumulation)
    if (empty) {
      lse[row] = -std::numeric_limits<double>::infinity();
      continue;
    }
    // (MUFU.LG2 is measured for x >= 1: below, with no P offset, log2f stands in)
    const float lg = k.lse_lg2_approx && total >= 1.0f ? gpu::lg2_approx_ftz(total)
                                                        : static_cast<float>(std::log2(static_cast<double>(total)));
    const float l2 = lg + m[i];
    float L = l2 * static_cast<float>(1.0 / 1.44269504);
    if (!kv.km.empty()) {
      DD dot{0.0, 0.0};
      for (std::size_t d = 0; d < D; ++d) dot = dd_add(dot, two_prod(q_in[row * D + d], kv.km[d]));
      const float corr = static_cast<float>(round_sum(dot.hi, dot.lo, call.in_fmt));
      L = L + corr * static_cast<float>(call.scale);
    }
    lse[row] = L;
  }
}

// SA3's per-block mean of Q (api.py triton_group_mean, preprocess_qkv): per `g` rows (the padded group's sum / g,
// rounded to the input format), Q' = RN(q − qm), δS = qm·K'ᵀ in the input format (a matmul of the inputs: the
// exact dot rounded once), then fp32.
void smooth_q_rows(std::vector<double>& q, std::size_t Sq, std::size_t Skv, std::size_t D, std::size_t g,
                   const Format& in, const KvHead& kv, std::vector<double>& dS) {
  dS.assign(Sq * Skv, 0.0);
  std::vector<double> qm(D);
  for (std::size_t r0 = 0; r0 < Sq; r0 += g) {
    const std::size_t r1 = std::min(Sq, r0 + g);
    for (std::size_t d = 0; d < D; ++d) {
      DD sum{0.0, 0.0};
      for (std::size_t i = r0; i < r1; ++i) sum = dd_add(sum, DD{q[i * D + d], 0.0});
      const DD mean = dd_div(sum, DD{static_cast<double>(g), 0.0});
      qm[d] = round_sum(mean.hi, mean.lo, in);
    }
    for (std::size_t i = r0; i < r1; ++i)
      for (std::size_t d = 0; d < D; ++d)
        q[i * D + d] = round(static_cast<double>(static_cast<float>(q[i * D + d] - qm[d])), in);
    for (std::size_t j = 0; j < Skv; ++j) {
      DD dot{0.0, 0.0};
      for (std::size_t d = 0; d < D; ++d) dot = dd_add(dot, two_prod(qm[d], kv.k_smoothed[j * D + d]));
      const double v = static_cast<float>(round_sum(dot.hi, dot.lo, in));
      for (std::size_t i = r0; i < r1; ++i) dS[i * Skv + j] = v;
    }
  }
}

}  // namespace

void check_sage_schedule(const KernelRecipe& kr, const std::string& where) {
  const KernelSchedule& k = kr.schedule;
  if (k.engine != KernelEngine::sage) {
    if (!k.qk_quant.empty() || !k.v_quant.empty() || k.smooth_k || k.q_prescale || !k.pv_acc.empty() ||
        !k.v_format.empty() || k.smooth_q || k.p_block || (!k.p_format.empty() && k.engine != KernelEngine::flash))
      throw InputError(fmt::format("{}kernel {}: qk_quant, v_quant, smooth_k, q_prescale, v_format and pv_acc are "
                                   "fields of the sage engine (\"engine\": \"sage\"); p_format of the sage and flash "
                                   "engines", where, kr.name));
    if (!k.p_format.empty()) format_by_name(k.p_format);
    return;
  }
  if (k.qk_quant.empty())
    throw InputError(fmt::format("{}kernel {}: the sage engine quantises Q and K: set \"qk_quant\" (e.g. "
                                 "int8_per_block, int8_per_thread)", where, kr.name));
  const BlockScheme s = block_scheme_by_name(k.qk_quant);
  const ElementSpec e = element_spec(s);
  const bool fp4 = block_scaled(s);
  if (fp4) {  // SA3: float elements in blocks along D, through a block-scaled MMA
    if (tensor_core_preset(k.mma == "h100" ? std::string("h100_fp16") : k.mma).scale == BlockScale::none)
      throw InputError(fmt::format("{}mma: \"{}\" has no block scales; a block-scaled qk_quant (\"{}\") needs a "
                                   "block-scaled MMA (b200_mxf4nvf4, ...)", where, k.mma, k.qk_quant));
  } else {
    if (!e.integer)
      throw InputError(fmt::format("{}qk_quant: \"{}\" has {} elements; the sage engine's QKᵀ is an integer mma (int8 "
                                   "or int4 elements) or a block-scaled one (blocks along D)", where, k.qk_quant, s.element));
    if (!whole_rows(s.a) || !whole_rows(s.b))
      throw InputError(fmt::format("{}qk_quant: \"{}\" splits a row of D across scales; the sage engine dequantises "
                                   "per score (one scale per query row and per key)", where, k.qk_quant));
  }
  const bool scaled_mma = tensor_core_preset(k.mma == "h100" ? std::string("h100_fp16") : k.mma).scale != BlockScale::none;
  if (scaled_mma) {
    const TensorCore tc = tensor_core_preset(k.mma);
    if (tc.group > 0 && k.mma_k % static_cast<std::size_t>(tc.group) != 0)
      throw InputError(fmt::format("{}mma_k: {} products per instruction; {} sums groups of {} (a multiple of it)",
                                   where, k.mma_k, k.mma, tc.group));
  }
  if (scaled_mma && !k.p_block)
    throw InputError(fmt::format("{}mma: \"{}\" is block-scaled: P·V then takes P in blocks (set p_block, with a "
                                 "block-scaled v_quant)", where, k.mma));
  if ((k.smooth_q || k.p_block) && !fp4)
    throw InputError(fmt::format("{}smooth_q / p_block: SA3's steps, with a block-scaled qk_quant (nvfp4_sa3)", where));
  if (k.p_block && (k.v_quant.empty() || !block_scaled(block_scheme_by_name(k.v_quant))))
    throw InputError(fmt::format("{}p_block: P's block scales meet V's in the block-scaled P·V: v_quant must be "
                                 "block-scaled too (nvfp4_sa3)", where));
  if (!k.v_quant.empty() && block_scaled(block_scheme_by_name(k.v_quant)) && !k.p_block)
    throw InputError(fmt::format("{}v_quant: a block-scaled V (\"{}\") needs P in blocks too (p_block)", where, k.v_quant));
  if (!k.v_quant.empty() && !block_scaled(block_scheme_by_name(k.v_quant))) {
    const BlockScheme v = block_scheme_by_name(k.v_quant);
    if (v.b.group != Grouping::column && v.b.group != Grouping::tensor)
      throw InputError(fmt::format("{}v_quant: \"{}\" is not one scale per channel (or per tensor): the sage engine "
                                   "applies V's scale to O after the normalisation", where, k.v_quant));
    if (element_spec(v).integer)
      throw InputError(fmt::format("{}v_quant: \"{}\" has integer elements; P·V takes fp8 V", where, k.v_quant));
  }
  for (const std::string* f : {&k.v_format, &k.p_format})
    if (!f->empty()) format_by_name(*f);
  if (!k.pv_acc.empty() && k.pv_acc != "fp16")
    throw InputError(fmt::format("{}pv_acc: \"{}\"; known: \"\" (the mma model's fp32) or \"fp16\"", where, k.pv_acc));
  if (k.split != SplitRule::none)
    throw InputError(fmt::format("{}split: the sage engine has no split-KV (\"split\": \"none\")", where));
  if (k.block_m == 0) throw InputError(fmt::format("{}block_m: at least 1", where));
}

AttentionOutput sage_attention(const AttentionInputs& in, const KernelRecipe& kr, int threads) {
  const KernelSchedule& ks = kr.schedule;
  check_sage_schedule(kr, "");
  const std::size_t B = in.q.shape.B, Nq = in.q.shape.N, Nkv = in.k.shape.N, Sq = in.q.shape.S, Skv = in.k.shape.S,
                    D = in.q.shape.D;
  const Format fmt = in.q.format;
  const Format v_fmt = ks.v_format.empty() ? fmt : format_by_name(ks.v_format);
  const BlockScheme qk = block_scheme_by_name(ks.qk_quant);
  const Format v_el = ks.v_quant.empty() ? v_fmt : format_by_name(block_scheme_by_name(ks.v_quant).element);
  const Format p_fmt = ks.p_format.empty() ? v_el : format_by_name(ks.p_format);
  const float scale_f = static_cast<float>(in.effective_scale());
  // sm90 :153 sm_scale *= math::log2e (fp32), or the double product (FoldProduct); 1 where Q is prescaled
  const float c0 = ks.q_prescale ? 1.0f
                   : ks.fold_product == FoldProduct::float_product
                       ? scale_f * 1.44269504f
                       : static_cast<float>(static_cast<double>(scale_f) * 1.4426950408889634074);
  // quant_per_block.py :39 x *= sm_scale, sm_scale = fp32(scale * 1.44269504) (core.py passes the double product)
  const float pre = static_cast<float>(in.effective_scale() * 1.44269504);
  GemmSpec pv = mma_spec(ks, p_fmt);
  pv.a_format = p_fmt;
  pv.b_format = v_el;
  const bool pv_f16 = ks.pv_acc == "fp16";
  if (pv_f16) pv.acc = pv.out = StageSpec{format_by_name("fp16")};
  RoundOptions p_round;
  p_round.mode = ks.p_round;
  if (ks.p_saturate) p_round.overflow = Overflow::saturate;
  const bool fp4_qk = block_scaled(qk);
  const GemmSpec qk_gemm = fp4_qk ? mma_spec(ks, format_by_name(qk.element)) : pv;  // (unused on the integer path)
  if (ks.p_block) pv = mma_spec(ks, p_fmt);  // (block-scaled P·V: P's and V's elements)
  pv.a_format = p_fmt;
  pv.b_format = v_el;
  const SageCall call{.k = ks, .F = Ftz{ks.ftz}, .c0 = c0, .scale = in.effective_scale(), .causal = in.mask.causal && Sq > 1, .pv = pv,
                      .pv_f16 = pv_f16, .qk = qk_gemm, .fp4_qk = fp4_qk, .p_fmt = p_fmt,
                      .out_fmt = ks.output.empty() ? fmt : format_by_name(ks.output), .in_fmt = fmt, .p_round = p_round};
  std::vector<KvHead> kv(B * Nkv);
  parallel_for(B * Nkv, threads, [&](std::size_t w) {
    kv[w] = prepare_kv(in.k.head(w / Nkv, w % Nkv), in.v.head(w / Nkv, w % Nkv), Skv, D, ks, fmt, v_fmt, qk);
  });
  AttentionOutput out;
  out.o = Tensor::uninitialised(in.q.shape, call.out_fmt);
  out.lse.assign(B * Nq * Sq, -std::numeric_limits<double>::infinity());
  parallel_for(B * Nq, threads, [&](std::size_t w) {
    const std::size_t b = w / Nq, h = w % Nq;
    const double* qh = in.q.head(b, h);
    std::vector<double> qx(qh, qh + Sq * D);
    if (ks.q_prescale)
      for (double& x : qx) x = static_cast<float>(static_cast<float>(x) * pre);
    const KvHead& kvh = kv[b * Nkv + h / (Nq / Nkv)];
    std::vector<double> dS;
    if (ks.smooth_q) smooth_q_rows(qx, Sq, Skv, D, ks.smooth_q, fmt, kvh, dS);
    const RowQuantised q = quantise_rows(qx.data(), Sq, D, qk, false);
    for (std::size_t r0 = 0; r0 < Sq; r0 += ks.block_m)
      run_query_block(call, q, kvh, r0, std::min(Sq, r0 + ks.block_m), Sq, Skv, D, out.o.head(b, h),
                      &out.lse[(b * Nq + h) * Sq], qh, dS);
  });
  return out;
}

}  // namespace pasa::detail
