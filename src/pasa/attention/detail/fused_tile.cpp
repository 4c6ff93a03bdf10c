// The fused path's tile (fused_tile.hpp): the decision to take it, the per-thread buffers, the score and P·V
// GEMMs (the float kernel or the tensor-core model), the mask, the row maxima, the rescale and the shifted keys;
// the exp and the row sums are fused_softmax.cpp's.
#include "pasa/attention/detail/fused_tile.hpp"
#include "pasa/attention/detail/fused_lanes.hpp"
#include "pasa/attention/detail/packed_sgemm.hpp"

#include "pasa/attention/algorithm.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <type_traits>

// (immintrin.h and GCC 12's AVX-512 warnings: fused_lanes.hpp)

namespace pasa::detail {
using namespace fused_lanes;
namespace {

// A GEMM that the fused path runs through gemm() (the tensor-core and every-op models, any accumulator):
// deterministic roundings (no random stream is handed to it) and an output format whose values, subnormals
// included, are floats, so that the tile holds them exactly (the general path's doubles hold the same values).
[[maybe_unused]] bool general_gemm_in_floats(const GemmSpec& g) {
  const Format& f = g.out.format;
  const bool floats = f.p <= 24 && f.emax <= 127 && f.emin() - (f.p - 1) >= -149;
  return floats && g.out.round.mode != RoundMode::stochastic && g.acc.round.mode != RoundMode::stochastic;
}

#if defined(__AVX512F__)
inline __m512 row16(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 row16(const double* p) {  // (the values are floats: exact)
  return _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(_mm512_loadu_pd(p))),
                            _mm512_cvtpd_ps(_mm512_loadu_pd(p + 8)), 1);
}
// dst[j·ldd + i] = src[i·lds + j] for a whole 16 × 16 block, in registers: pairs of rows interleaved
// (unpack ps), then pairs of pairs (unpack pd): 128-bit lane l of u[4k + j] holds column 4l + j of rows
// 4k..4k+3; then the 4 × 4 transposition of those lanes (two rounds of shuffle_f32x4).
template <class From>
void transpose16(const From* src, std::size_t lds, float* dst, std::size_t ldd) {
  __m512 r[16], u[16];
  for (int i = 0; i < 16; ++i) r[i] = row16(src + i * lds);
  for (int k = 0; k < 4; ++k) {
    const __m512 t0 = _mm512_unpacklo_ps(r[4 * k], r[4 * k + 1]), t1 = _mm512_unpackhi_ps(r[4 * k], r[4 * k + 1]);
    const __m512 t2 = _mm512_unpacklo_ps(r[4 * k + 2], r[4 * k + 3]), t3 = _mm512_unpackhi_ps(r[4 * k + 2], r[4 * k + 3]);
    auto lo = [](__m512 a, __m512 b) { return _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(a), _mm512_castps_pd(b))); };
    auto hi = [](__m512 a, __m512 b) { return _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(a), _mm512_castps_pd(b))); };
    u[4 * k] = lo(t0, t2);
    u[4 * k + 1] = hi(t0, t2);
    u[4 * k + 2] = lo(t1, t3);
    u[4 * k + 3] = hi(t1, t3);
  }
  for (int j = 0; j < 4; ++j) {
    const __m512 v0 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0x88), v1 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0xDD);
    const __m512 v2 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0x88), v3 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0xDD);
    _mm512_storeu_ps(dst + j * ldd, _mm512_shuffle_f32x4(v0, v2, 0x88));
    _mm512_storeu_ps(dst + (4 + j) * ldd, _mm512_shuffle_f32x4(v1, v3, 0x88));
    _mm512_storeu_ps(dst + (8 + j) * ldd, _mm512_shuffle_f32x4(v0, v2, 0xDD));
    _mm512_storeu_ps(dst + (12 + j) * ldd, _mm512_shuffle_f32x4(v1, v3, 0xDD));
  }
}
#endif

// dst[j·ldd + i] = src[i·lds + j] (i < m, j < n), converted, in 16 × 16 blocks (both sides stay in cache;
// whole blocks into floats in registers).
template <class From, class To>
void transpose_into(const From* src, std::size_t lds, std::size_t m, std::size_t n, To* dst, std::size_t ldd) {
  for (std::size_t i0 = 0; i0 < m; i0 += 16)
    for (std::size_t j0 = 0; j0 < n; j0 += 16) {
#if defined(__AVX512F__)
      if constexpr (std::is_same_v<To, float>)
        if (i0 + 16 <= m && j0 + 16 <= n) {
          transpose16(src + i0 * lds + j0, lds, dst + j0 * ldd + i0, ldd);
          continue;
        }
#endif
      for (std::size_t i = i0; i < std::min(m, i0 + 16); ++i)
        for (std::size_t j = j0; j < std::min(n, j0 + 16); ++j) dst[j * ldd + i] = static_cast<To>(src[i * lds + j]);
    }
}

// The K (keys_t) or V block j0 (n keys) of the item's head packed for the strips: from the thread's buffers
// where an earlier item of the same run and head packed it. A head's blocks are kept only up to kTcKeep
// elements of K (12 bytes each with V's, per thread); beyond, every tile packs its block into one slot.
constexpr std::size_t kTcKeep = std::size_t{1} << 20;
const TcPackedB& tc_block(const Run& run, const Item& it, std::size_t j0, std::size_t n, bool values,
                          FusedBuffers& ft) {
  const std::size_t head = it.b * run.Nkv + it.hk, D = run.D, s2 = run.spec.s2;
  const bool keep = run.Skv * D <= kTcKeep;
  if (ft.tc_run != run.serial || ft.tc_head != head || !keep) {
    const std::size_t blocks = keep ? (run.Skv + s2 - 1) / s2 : 1;
    ft.tc_k.resize(blocks);
    ft.tc_v.resize(blocks);
    for (std::size_t i = 0; i < blocks; ++i) ft.tc_k[i].n = ft.tc_v[i].n = 0;  // (their buffers kept)
    ft.tc_run = run.serial;
    ft.tc_head = head;
  }
  TcPackedB& pb = (values ? ft.tc_v : ft.tc_k)[keep ? j0 / s2 : 0];
  if (pb.n == 0 || (values ? pb.k : pb.n) != n) {  // (packed again for a range that ends inside the block)
    if (values)  // (slot 2: tc_pv holds slot 1 for the same block)
      tc_pack_b(run.pv, n, D, input_values(run.v, (head * run.Skv + j0) * D, n * D, 2), D, pb);
    else tc_pack_b(run.qk, D, n, run.keys_t_block(it.b, it.hk, j0, n), n, pb);  // block j0: D × n
  }
  return pb;
}

// tile_scores' GEMM into ft.wide (rows × n) on the packed Q rows and K block (ft.tc_qk), before its output
// rounding (the caller's, on floats): false where the
// strips decline the operands (bf16-style formats beyond their window), and then for the item's later blocks
// too (ft.tc_qk cleared), which go through tile_scores.
bool tc_scores(const Run& run, const Item& it, std::size_t j0, std::size_t n, FusedBuffers& ft) {
  const std::size_t rows = ft.rows, D = run.D;
  const double* q = input_values(run.q, run.q.index(it.b, it.h, it.r0), rows * D, 0);
  if (ft.tc_q.m == 0) tc_pack_a(run.qk, rows, D, q, D, ft.tc_q);
  ft.wide.resize(rows * n);
  const TcPackedB& kb = tc_block(run, it, j0, n, false, ft);
  ft.tc_qk = dgemm_tensor_core(run.qk, ft.tc_q, q, D, kb, run.keys_t_block(it.b, it.hk, j0, n), n, ft.wide.data(), n);
  return ft.tc_qk;
}

// tile_pv's GEMM into ft.pv on P (rows × n, held transposed in t) and the packed V block (ft.tc_pv): false
// where the strips decline the operands (nothing written; ft.tc_pv cleared as in tc_scores).
bool tc_pv(const Run& run, const Item& it, std::size_t j0, std::size_t n, FusedBuffers& ft) {
  const std::size_t rows = ft.rows, D = run.D;
  thread_local std::vector<float> Pf;
  thread_local std::vector<double> PV;
  Pf.resize(rows * n);
  PV.resize(rows * D);
  transpose_into(ft.t.data(), ft.ld, n, rows, Pf.data(), n);
  tc_pack_a(run.pv, rows, n, Pf.data(), n, ft.tc_p);
  const double* v = input_values(run.v, ((it.b * run.Nkv + it.hk) * run.Skv + j0) * D, n * D, 1);  // block j0: n × D
  ft.tc_pv = dgemm_tensor_core(run.pv, ft.tc_p, Pf.data(), n, tc_block(run, it, j0, n, true, ft), v, D, PV.data(), D);
  if (!ft.tc_pv) return false;
  gemm_round_output(run.pv, rows, D, PV.data(), D);
  ft.pv.resize(rows * D);
  for (std::size_t i = 0; i < rows * D; ++i) ft.pv[i] = static_cast<float>(PV[i]);  // (exact: see fused_tiles)
  return true;
}

}  // namespace

bool fused_tiles(const Run& run) {
#if defined(__AVX512F__)
  const StageSpec& exp = run.stage(Stage::exp);
  return algorithm_info(run.spec.name).fused_path && !run.tiles && !run.quantised && !run.block_scaled && !run.biased &&
         run.spec.quant.p_offset == 0 && (gemm_output_in_floats(run.qk) || general_gemm_in_floats(run.qk)) &&
         (gemm_output_in_floats(run.pv) || general_gemm_in_floats(run.pv)) &&
         exp.via == ExpVia::exact && exp.format.p <= 24 &&
         kind_of(exp) != Kind::none && kind_of(run.stage(Stage::scale)) != Kind::none &&
         run.stage(Stage::p).round.mode != RoundMode::stochastic;
#else
  (void)run;
  return false;  // the GEMM kernels of the fused path are the AVX-512 ones
#endif
}

FusedBuffers& fused_buffers() {
  thread_local FusedBuffers ft;
  return ft;
}

void fused_begin_item(const Run& run, const Item& it, FusedBuffers& ft) {
  const std::size_t rows = it.rows(), D = run.D, panels = (rows + 31) / 32;
  ft.rows = rows;
  ft.w = (rows + 15) / 16 * 16;
  // A row stride of 128·2^i floats puts the n rows of a column strip into few L1 sets (the P·V GEMM reads
  // Pᵀ column strips): one vector more breaks that.
  const std::size_t ld = ft.w % 128 == 0 ? ft.w + 16 : ft.w;
  if (ld != ft.ld) ft.t.clear();  // (the columns past w: finite values, from 0, never read back)
  ft.ld = ld;
  ft.shift.assign(ft.ld, 0.0);
  ft.shiftf.assign(ft.ld, 0.0f);
  // tile_scores' GEMM on Q and keys_t in doubles as one GEMM for the item's rows (heads adjacent in Q), and
  // tile_pv's on V in doubles
  ft.tc_qk = !run.float_qk && run.qk.model.kind == GemmKind::tensor_core && !run.qk_floats &&
             (it.heads == 1 || it.r1 - it.r0 == run.Sq) && tc_strips(run.qk);
  ft.tc_pv = !run.float_pv && run.pv.model.kind == GemmKind::tensor_core && !run.pv_floats && tc_strips(run.pv);
  ft.tc_q.m = 0;
  if (!run.float_qk) return;  // (the general GEMM reads Q from the run)
  ft.qpanels.resize(panels * 32 * D);
  float* dst = ft.qpanels.data();
  for (std::size_t p = 0; p < panels; ++p, dst += 32 * D)
    for (std::size_t j = 0; j < 32; ++j) {
      const std::size_t k = 32 * p + j;
      if (k >= rows) {
        for (std::size_t t = 0; t < D; ++t) dst[32 * t + j] = 0.0f;
        continue;
      }
      const std::size_t at = ((it.b * run.Nq + it.head_of(k)) * run.Sq + it.row_of(k)) * D;
      thread_local std::vector<float> q;  // (exact: Q's values are of the q format, which the kernel's operands hold)
      q.resize(D);
      run.q.read(at, D, q.data());
      for (std::size_t t = 0; t < D; ++t) dst[32 * t + j] = q[t];
    }
}

void fused_scores(const Run& run, const Item& it, std::size_t j0, std::size_t n, bool scale, FusedBuffers& ft) {
  const std::size_t ld = ft.ld, D = run.D, count = n * ld;
  ft.t.resize(count);  // (new elements 0)
  float* t = ft.t.data();
  // Sᵀ = K_j·Qᵀ: entry (c, r) gets the products q_r,d·k_c,d in order d = 0..D−1 from +0 as S = Q·K_jᵀ does
  // (a product is the same either way round); K_j row-major (key_rows_f32).
  if (run.float_qk) {
    const float* keys = run.key_rows_f32(it.b, it.hk, j0, n);
    sgemm_fma_packed(false, n, ft.w, D, keys, D, ft.qpanels.data(), 32 * D, t, ld, gemm_output_fp16(run.qk));  // (zero columns past rows)
    gemm_round_output(run.qk, t, count);
  } else {  // the general path's GEMM (tile_scores: same kernel, same operands), its S transposed into t
    const std::size_t rows = ft.rows;
    const bool adjacent = it.heads == 1 || it.r1 - it.r0 == run.Sq;  // (else tile_scores runs one GEMM per head)
    if (ft.tc_qk && tc_scores(run, it, j0, n, ft)) {
      transpose_into(ft.wide.data(), n, rows, n, t, ld);  // (exact: see fused_tiles)
      // the output rounding here, on the floats (the model's values are floats), as the ordered model's:
      // fp16 by the F16C conversion (sgemm_fma_packed's), else gemm_round_output
      for (std::size_t c = 0; c < n; ++c) {
        float* row = t + c * ld;
#if defined(__AVX512F__)  // (tc_strips: AVX-512 builds only)
        if (gemm_output_fp16(run.qk)) {
          for (std::size_t r = 0; r < rows; r += 16) {
            const __mmask16 m = rows - r >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << (rows - r)) - 1);
            _mm512_mask_storeu_ps(row + r, m, fp16_16(_mm512_maskz_loadu_ps(m, row + r)));
          }
          continue;
        }
#endif
        gemm_round_output(run.qk, row, rows);
      }
    } else if (adjacent && gemm_floats_out(run.qk) && run.qk_floats) {
      // tile_scores' float-operand call with the output kept in floats (the same kernel and output rounding)
      thread_local std::vector<float> Sf;
      Sf.resize(rows * n);
      const std::size_t qoff = ((it.b * run.Nq + it.h) * run.Sq + it.r0) * D;
      gemm(run.qk, rows, n, D, run.query_rows_f32(qoff, rows * D), D, run.keys_t_block_f32(it.b, it.hk, j0, n), n,
           Sf.data(), n);
      transpose_into(Sf.data(), n, rows, n, t, ld);
    } else {
      ft.wide.resize(rows * n);
      tile_scores(run, it, j0, n, ft.wide.data(), nullptr);
      transpose_into(ft.wide.data(), n, rows, n, t, ld);  // (exact: see fused_tiles)
    }
    for (std::size_t c = 0; c < n; ++c)  // the padding lanes: zero scores, as the packed kernel gives them
      std::fill(t + c * ld + rows, t + c * ld + ft.w, 0.0f);
  }
  if (!scale) return;
  const StageSpec& sp = run.stage(Stage::scale);
  if (kind_of(sp) == Kind::fp32) {  // tile_scale: one rounding of S·scale, a float product
    const float f = static_cast<float>(run.scale);
    for (std::size_t i = 0; i < count; ++i) t[i] = t[i] * f;
  } else {  // the product of two floats is exact in double
    const double f = run.scale;
    for (std::size_t i = 0; i < count; ++i) t[i] = ro_float(static_cast<double>(t[i]) * f);
    round_floats(sp, t, count);
  }
}

void fused_mask(FusedBuffers& ft, std::size_t n) {
  const std::size_t rows = ft.rows;
  float* t = ft.t.data();
  for (std::size_t r = 0; r < rows; ++r) {
    const std::uint8_t* v = ft.vis.data() + r * n;
    for (std::size_t c = 0; c < n; ++c)
      if (!v[c]) t[c * ft.ld + r] = -std::numeric_limits<float>::infinity();
  }
}

void fused_row_max(const FusedBuffers& ft, std::size_t n, double* mloc) {
  const std::size_t rows = ft.rows;
  const float* t = ft.t.data();
  thread_local std::vector<float> best;
  best.assign(rows, -std::numeric_limits<float>::infinity());
  float* m = best.data();
  for (std::size_t c = 0; c < n; ++c)  // row_max's comparison, column by column: NaN never wins
    for (std::size_t r = 0; r < rows; ++r) {
      const float x = t[c * ft.ld + r];
      m[r] = x > m[r] ? x : m[r];
    }
  for (std::size_t r = 0; r < rows; ++r) mloc[r] = m[r];
}

void fused_pv(const Run& run, const Item& it, std::size_t j0, std::size_t n, FusedBuffers& ft) {
  const std::size_t rows = ft.rows, D = run.D;
  const StageSpec& p = run.stage(Stage::p);
  float* t = ft.t.data();
  if (!ft.p_done && kind_of(p) != Kind::fp32) round_floats(p, t, n * ft.ld);  // (fp32: nothing to do)
  if (!run.float_pv && gemm_floats_out(run.pv) && run.pv_floats) {
    // tile_pv's call with P and the output kept in floats (P holds floats: the same kernel, the same bits)
    thread_local std::vector<float> Pf;
    Pf.resize(rows * n);
    transpose_into(t, ft.ld, n, rows, Pf.data(), n);
    ft.pv.resize(rows * D);
    gemm(run.pv, rows, D, n, Pf.data(), n, run.value_rows_f32(it.b, it.hk, j0, n), D, ft.pv.data(), D);
    return;
  }
  if (ft.tc_pv && tc_pv(run, it, j0, n, ft)) return;
  if (!run.float_pv) {  // the general path's GEMM (tile_pv: same kernel, P row-major as it reads it)
    thread_local std::vector<double> Pd, PV;
    Pd.resize(rows * n);
    PV.resize(rows * D);
    transpose_into(t, ft.ld, n, rows, Pd.data(), n);
    tile_pv(run, it, Pd.data(), n, j0, n, PV.data(), nullptr);
    ft.pv.resize(rows * D);
    for (std::size_t i = 0; i < rows * D; ++i) ft.pv[i] = static_cast<float>(PV[i]);  // (exact: see fused_tiles)
    return;
  }
  std::size_t ldb = 0;
  const float* panels = run.value_panels(it.b, it.hk, j0, n, &ldb);
  ft.pv.resize(rows * D);
  sgemm_fma_packed(true, rows, D, n, t, ft.ld, panels, ldb, ft.pv.data(), D, gemm_output_fp16(run.pv));  // P given as Pᵀ
  gemm_round_output(run.pv, ft.pv.data(), rows * D);
}

void fused_rescale_add(const Run& run, double* O, const double* alpha, FusedBuffers& ft, RandomBits* rng) {
  const std::size_t rows = ft.rows, D = run.D;
  const StageSpec& sp = run.stage(Stage::o);
  const float* pv = ft.pv.data();
  const Kind k = kind_of(sp);
  if (k == Kind::fp32) {  // float product, float sum: each the exact result rounded once to fp32
    for (std::size_t r = 0; r < rows; ++r) {
      const float a = static_cast<float>(alpha[r]);
      double* o = O + r * D;
      const float* y = pv + r * D;
      for (std::size_t d = 0; d < D; ++d) {
        const float x = a * static_cast<float>(o[d]);
        o[d] = x + y[d];
      }
    }
    return;
  }
#if defined(__AVX512F__)
  if (is_fp16(sp) && D % 8 == 0 && run.stage(Stage::exp).format == sp.format && run.stage(Stage::pv).format == sp.format) {
    // fp16 throughout: alpha·O (two fp16 values) is exact in float, and the float sum of two fp16 values
    // rounded again to fp16 is the exact sum rounded once (24 >= 2·11 + 2 [Figueroa 1995]; a sum below
    // 2^-14 is a multiple of 2^-24 of at most 11 bits, exact in float): each step a float operation and F16C.
    for (std::size_t r = 0; r < rows; ++r) {
      const __m256 a = _mm256_set1_ps(static_cast<float>(alpha[r]));
      double* o = O + r * D;
      const float* y = pv + r * D;
      for (std::size_t d = 0; d < D; d += 8) {
        const __m256 x = fp16_8(_mm256_mul_ps(a, _mm512_cvtpd_ps(_mm512_loadu_pd(o + d))));
        _mm512_storeu_pd(o + d, _mm512_cvtps_pd(fp16_8(_mm256_add_ps(x, _mm256_loadu_ps(y + d)))));
      }
    }
    return;
  }
#endif
  if (k == Kind::narrow && kind_of(run.stage(Stage::exp)) != Kind::none) {
    // alpha (an exp-stage value or 0) and O are floats: their product is exact in double.
    ft.tmp.resize(rows * D);
    float* x = ft.tmp.data();
    const std::size_t count = rows * D;
    for (std::size_t r = 0; r < rows; ++r) {
      const double a = alpha[r];
      std::size_t d = 0;
#if defined(__AVX512F__)
      for (; d + 8 <= D; d += 8)
        _mm256_storeu_ps(x + r * D + d, ro_float8(_mm512_mul_pd(_mm512_set1_pd(a), _mm512_loadu_pd(O + r * D + d))));
#endif
      for (; d < D; ++d) x[r * D + d] = ro_float(a * O[r * D + d]);
    }
    round_floats(sp, x, count);
    std::size_t i = 0;
#if defined(__AVX512F__)
    for (; i + 8 <= count; i += 8)
      _mm256_storeu_ps(x + i, ro_float_sum8(_mm512_cvtps_pd(_mm256_loadu_ps(x + i)), _mm512_cvtps_pd(_mm256_loadu_ps(pv + i))));
#endif
    for (; i < count; ++i) {
      const DD s = two_sum(static_cast<double>(x[i]), static_cast<double>(pv[i]));
      x[i] = ro_float(sticky_fold(s.hi, s.lo));
    }
    round_floats(sp, x, count);
    for (i = 0; i < count; ++i) O[i] = x[i];
    return;
  }
  ft.wide.assign(ft.pv.begin(), ft.pv.begin() + static_cast<std::ptrdiff_t>(rows * D));
  rescale_add(run, Stage::o, O, alpha, ft.wide.data(), rows, D, rng);
}

bool fused_shift_keys(Run& run, const GemmSpec& pre, std::size_t b, std::size_t hk, const std::vector<double>& M_full,
                      const std::vector<double>& M_tail) {
  if (!gemm_output_in_floats(pre)) return false;
  const std::size_t D = run.D, S = run.Skv, s2 = run.spec.s2, P = (D + 31) / 32;
  thread_local std::vector<float> Mf, panels;
  const double* K = run.k.head(b, hk);
  const std::vector<double>* converted = nullptr;
  for (std::size_t j0 = 0; j0 < S; j0 += s2) {
    const std::size_t n = std::min(s2, S - j0);
    const std::vector<double>& M = n == std::min(s2, S) ? M_full : M_tail;
    if (converted != &M) Mf.assign(M.begin(), M.end());  // (values of the shift format: floats)
    converted = &M;
    panels.resize(P * 32 * n);
    for (std::size_t p = 0; p < P; ++p) {
      const std::size_t w = std::min<std::size_t>(32, D - 32 * p);
      for (std::size_t t = 0; t < n; ++t) {
        float* dst = panels.data() + (p * n + t) * 32;
        const double* src = K + (j0 + t) * D + 32 * p;
        for (std::size_t j = 0; j < w; ++j) dst[j] = static_cast<float>(src[j]);
        for (std::size_t j = w; j < 32; ++j) dst[j] = 0.0f;
      }
    }
    float* dst = run.keys_f32.data() + ((b * run.Nkv + hk) * S + j0) * D;
    sgemm_fma_packed(false, n, D, n, Mf.data(), n, panels.data(), 32 * n, dst, D, gemm_output_fp16(pre));
    gemm_round_output(pre, dst, n * D);
  }
  return true;
}

}  // namespace pasa::detail
