// The reference emulator's engine (reference_attention.hpp), private to tests/reference/: one class that
// states each algorithm row by row, one rounding per statement. The generic parts (scores, masks, the
// softmax variants, FA1, FA2 and the split-KV merge) are defined here in the class; PASA's and smooth K's
// key preprocessing and PASA's rows in reference_attention.cpp.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <mpfr.h>

#include "pasa/numeric/block_scale.hpp"
#include "pasa/numeric/round.hpp"
#include "reference_arith.hpp"
#include "reference_attention.hpp"
#include "support/mpfr_round.hpp"

namespace pasa::reference::detail {

class Reference {
 public:
  Reference(const AttentionInputs& in, const AlgorithmSpec& spec)
      : in_(in), spec_(spec), a_(effective_allocation(in, spec)) {
    for (const auto& s : a_.stages) no_stochastic(s);
    if (spec.quant.fa3_active()) throw std::invalid_argument("reference: the FP8 recipe (quant) is not restated here");
    // Block schemes (numeric/block_scale.hpp, tested on their own): P's only where its groups lie within one
    // query row, as this emulator computes P a row at a time; none with stochastic element rounding.
    for (const auto* b : {&spec.quant.q_block, &spec.quant.k_block, &spec.quant.v_block, &spec.quant.p_block})
      if (*b && (*b)->round == RoundMode::stochastic) throw std::invalid_argument("reference: stochastic block rounding");
    if (spec.quant.p_block && spec.quant.p_block->a.group != Grouping::row && spec.quant.p_block->a.group != Grouping::block)
      throw std::invalid_argument("reference: P's block scheme spans rows");
    B = in.q.shape.B, Nq = in.q.shape.N, Nkv = in.k.shape.N, Sq = in.q.shape.S, Skv = in.k.shape.S;
    D = in.q.shape.D;
    group = Nq / Nkv;
    // The inputs as the matrix engine sees them: each element rounded once to its stage.
    q_.assign(in.q.data.begin(), in.q.data.end());
    k_.assign(in.k.data.begin(), in.k.data.end());
    v_.assign(in.v.data.begin(), in.v.data.end());
    for (double& x : q_) x = rnd(st(Stage::q), x);
    for (double& x : k_) x = rnd(st(Stage::k), x);
    for (double& x : v_) x = rnd(st(Stage::v), x);
    // A block scheme replaces the stage's rounding: the operand is its elements times their scales, each head
    // an S × D matrix grouped along D (Q the GEMM's A operand, K its B), V's transposed to D × S (its GEMM
    // contracts over the keys), where a per-token group is a column and a per-channel group a row.
    auto blocked = [](const auto& x, std::size_t heads, std::size_t S, std::size_t D,
                      const BlockScheme& s, bool b) {
      const std::vector<double> v = block_quantise(x.data(), heads, S, D, s, b).values;
      return std::vector<double>(v.begin(), v.end());
    };
    if (spec.quant.q_block) q_ = blocked(in.q.data, B * Nq, Sq, D, *spec.quant.q_block, false);
    if (spec.quant.k_block) k_ = blocked(in.k.data, B * Nkv, Skv, D, *spec.quant.k_block, true);
    if (spec.quant.v_block) {
      BlockScheme s = *spec.quant.v_block;
      if (s.b.group == Grouping::row) s.b.group = Grouping::column;
      else if (s.b.group == Grouping::column) s.b.group = Grouping::row;
      std::vector<double> t(v_.size());
      for (std::size_t h = 0; h < B * Nkv; ++h)
        for (std::size_t j = 0; j < Skv; ++j)
          for (std::size_t d = 0; d < D; ++d) t[(h * D + d) * Skv + j] = in.v.data[(h * Skv + j) * D + d];
      const std::vector<double> q = blocked(t, B * Nkv, D, Skv, s, true);
      for (std::size_t h = 0; h < B * Nkv; ++h)
        for (std::size_t j = 0; j < Skv; ++j)
          for (std::size_t d = 0; d < D; ++d) v_[(h * Skv + j) * D + d] = q[(h * D + d) * Skv + j];
    }
    keys_ = k_;
    scale_ = rnd(st(Stage::scale), in.effective_scale());
    // [IFA] The select value is a score: held in the score (scale) format, one rounding.
    if (!in.mask.select.empty()) select_value_ = rnd(st(Stage::scale), in.mask.select_value);
  }

  AttentionOutput run() {
    out_.o = Tensor(in_.q.shape, st(Stage::out).format);
    out_.lse.assign(B * Nq * Sq, -kInf);
    if (spec_.name == "pasa") pasa_keys();
    if (spec_.name == "smooth_k") smooth_keys();
    for (std::size_t b = 0; b < B; ++b)
      for (std::size_t h = 0; h < Nq; ++h)
        for (std::size_t r = 0; r < Sq; ++r) {
          if (spec_.name == "safe_softmax") safe_softmax_row(b, h, r);
          else if (spec_.name == "online_softmax") online_softmax_row(b, h, r);
          else if (spec_.name == "fa1") fa1_row(b, h, r);
          else if (spec_.name == "fa2" || spec_.name == "smooth_k") fa2_row(b, h, r);
          else if (spec_.name == "pasa") pasa_row(b, h, r);
          else throw std::invalid_argument("reference: unknown algorithm " + spec_.name);
        }
    return out_;
  }

 private:
  const StageSpec& st(Stage s) const { return a_.spec(s); }
  double R(Stage s, double x) const { return rnd(st(s), x); }
  double add(Stage s, double x, double y) const { return ref_add(st(s), x, y); }
  double sub(Stage s, double x, double y) const { return ref_sub(st(s), x, y); }
  double mul(Stage s, double x, double y) const { return ref_mul(st(s), x, y); }
  double div(Stage s, double x, double y) const { return ref_div(st(s), x, y); }
  double exp(Stage s, double x) const { return ref_exp(st(s), x); }

  std::size_t kv_index(std::size_t b, std::size_t hk, std::size_t j) const { return ((b * Nkv + hk) * Skv + j) * D; }
  std::size_t q_index(std::size_t b, std::size_t h, std::size_t r) const { return ((b * Nq + h) * Sq + r) * D; }

  // Whether a key block [j0, j1) has any key visible to any row of the query block (s1 rows) holding row r:
  // engines work on (query block × key block) tiles and skip the tiles a mask hides completely.
  bool tile_visible(std::size_t b, std::size_t r, std::size_t j0, std::size_t j1) const {
    const std::size_t r0 = r / spec_.s1 * spec_.s1, r1 = std::min(Sq, r0 + spec_.s1);
    for (std::size_t i = r0; i < r1; ++i)
      for (std::size_t j = j0; j < j1; ++j)
        if (visible(in_, b, i, j)) return true;
    return false;
  }

  // S = Q·Kᵀ through the QKᵀ GEMM for keys [j0, j0 + n) (unscaled, unmasked).
  std::vector<double> scores(std::size_t b, std::size_t h, std::size_t r, std::size_t j0, std::size_t n) const {
    std::vector<double> s(n);
    for (std::size_t c = 0; c < n; ++c)
      s[c] = reference_dot(a_.gemm, st(Stage::qk_acc), st(Stage::s), &q_[q_index(b, h, r)], 1,
                           &keys_[kv_index(b, h / group, j0 + c)], 1, D);
    return s;
  }
  // Z = round_scale(S·scale), then the bias and the select, hidden keys −inf.
  std::vector<double> logits(std::size_t b, std::size_t h, std::size_t r, std::size_t j0, std::size_t n) const {
    std::vector<double> z = scores(b, h, r, j0, n);
    for (std::size_t c = 0; c < n; ++c) z[c] = mul(Stage::scale, z[c], scale_);
    // smooth_k's scores are s − scale·q·mean(K) (docs/contract.md): the select value is written in that frame.
    bias_select(b, h, r, j0, z, spec_.name == "smooth_k" && select_row(in_, b, r) ? lse_shift_[(b * Nq + h) * Sq + r] : 0.0);
    mask(b, r, j0, z);
    return z;
  }
  // [IFA] z = round_scale(z + pse_j); then a selected key's score is the select value (rounded to scale) of the
  // unshifted frame, after scale and pse (docs/contract.md), written in a frame z = s − f as round_scale(value − f).
  void bias_select(std::size_t b, std::size_t h, std::size_t r, std::size_t j0, std::vector<double>& z, double f) const {
    if (const double* pse = pse_row(in_, b, h, r))
      for (std::size_t c = 0; c < z.size(); ++c) z[c] = add(Stage::scale, z[c], pse[j0 + c]);
    if (const std::uint8_t* sel = select_row(in_, b, r)) {
      const double zs = f == 0 ? select_value_ : sub(Stage::scale, select_value_, f);
      for (std::size_t c = 0; c < z.size(); ++c)
        if (sel[j0 + c]) z[c] = zs;
    }
  }
  // Whether (with a select mask) row r's visible keys in [j0, j0 + n) are all selected, or none is visible.
  bool all_selected(std::size_t b, std::size_t r, std::size_t j0, std::size_t n) const {
    const std::uint8_t* sel = select_row(in_, b, r);
    if (!sel) return false;
    for (std::size_t c = 0; c < n; ++c)
      if (visible(in_, b, r, j0 + c) && !sel[j0 + c]) return false;
    return true;
  }
  void mask(std::size_t b, std::size_t r, std::size_t j0, std::vector<double>& z) const {
    for (std::size_t c = 0; c < z.size(); ++c)
      if (!visible(in_, b, r, j0 + c)) z[c] = -kInf;
  }
  // P̃ = round_exp(exp(round_exp(z − m))); m = −∞ (nothing visible yet) counts as 0.
  double p_tilde(double z, double m) const { return exp(Stage::exp, sub(Stage::exp, z, m == -kInf ? 0.0 : m)); }
  // P·V for D columns: Σ_c p[c]·V[j0 + c][d] through the P·V GEMM.
  std::vector<double> pv(std::size_t b, std::size_t h, const std::vector<double>& p, std::size_t j0) const {
    std::vector<double> o(D);
    for (std::size_t d = 0; d < D; ++d)
      o[d] = reference_dot(a_.gemm, st(Stage::pv_acc), st(Stage::pv), p.data(), 1, &v_[kv_index(b, h / group, j0) + d],
                           D, p.size());
    return o;
  }
  void write(std::size_t b, std::size_t h, std::size_t r, const std::vector<double>& o, double lse) {
    std::copy(o.begin(), o.end(), out_.o.data.begin() + static_cast<std::ptrdiff_t>(q_index(b, h, r)));
    out_.lse[(b * Nq + h) * Sq + r] = lse;
  }
  void write_empty(std::size_t b, std::size_t h, std::size_t r) { write(b, h, r, std::vector<double>(D, 0.0), -kInf); }

  // P's block scheme on one row of a tile (after the p stage): groups within the row, along its keys.
  void p_scheme(std::vector<double>& p) const {
    if (spec_.quant.p_block) p = block_quantise(p.data(), 1, 1, p.size(), *spec_.quant.p_block).values;
  }

  // Last pass of the 3-pass and online softmax (Eq. 9): a = e^{z − m}/d rounded to div, then p, and O = P·V
  // as one GEMM over the whole row, rounded to out.
  void normalised_output(std::size_t b, std::size_t h, std::size_t r, const std::vector<double>& z, double m, double d) {
    std::vector<double> p(Skv);
    for (std::size_t c = 0; c < Skv; ++c) p[c] = R(Stage::p, div(Stage::div, p_tilde(z[c], m), d));
    p_scheme(p);
    std::vector<double> o = pv(b, h, p, 0);
    for (double& x : o) x = R(Stage::out, x);
    write(b, h, r, o, m + std::log(d));
  }

  // The row's logits over every key (−∞ where hidden or in a skipped tile).
  std::vector<double> whole_row(std::size_t b, std::size_t h, std::size_t r) const {
    std::vector<double> z(Skv, -kInf);
    for (std::size_t j0 = 0; j0 < Skv; j0 += spec_.s2) {
      const std::size_t n = std::min(spec_.s2, Skv - j0);
      if (!tile_visible(b, r, j0, j0 + n)) continue;
      const std::vector<double> t = logits(b, h, r, j0, n);
      std::copy(t.begin(), t.end(), z.begin() + static_cast<std::ptrdiff_t>(j0));
    }
    return z;
  }

  // 3-pass safe softmax: m = max z (Eq. 7), d = Σ e^{z − m} (Eq. 8), then Eq. 9.
  void safe_softmax_row(std::size_t b, std::size_t h, std::size_t r) {
    const std::vector<double> z = whole_row(b, h, r);
    const double m = R(Stage::max, max_of(z));
    if (m == -kInf) return write_empty(b, h, r);
    std::vector<double> e(Skv);
    for (std::size_t c = 0; c < Skv; ++c) e[c] = p_tilde(z[c], m);
    const double d = reduce_sum(e, st(Stage::sum));
    normalised_output(b, h, r, z, m, d);
  }

  // Running-max step: m_new = round_max(max(m, rowmax z)); alpha = e^{m − m_new} (0 when m = −∞).
  double running_max(double& m, const std::vector<double>& z, bool& seen) const {
    const double mloc = max_of(z);
    if (mloc != -kInf) seen = true;
    const double mnew = R(Stage::max, std::max(m, mloc));
    const double alpha = m == -kInf ? 0.0 : exp(Stage::exp, sub(Stage::max, m, mnew));
    m = mnew;
    return alpha;
  }

  // 2-pass online softmax: d'_i = d'_{i−1}·e^{m_{i−1} − m_i} + Σ_c e^{z_c − m_i} by blocks, then Eq. 9.
  void online_softmax_row(std::size_t b, std::size_t h, std::size_t r) {
    double m = -kInf, d = 0.0;
    bool seen = false;
    std::vector<double> zrow(Skv, -kInf);
    for (std::size_t j0 = 0; j0 < Skv; j0 += spec_.s2) {
      const std::size_t n = std::min(spec_.s2, Skv - j0);
      if (!tile_visible(b, r, j0, j0 + n)) continue;
      const std::vector<double> z = logits(b, h, r, j0, n);
      std::copy(z.begin(), z.end(), zrow.begin() + static_cast<std::ptrdiff_t>(j0));
      const double alpha = running_max(m, z, seen);
      std::vector<double> e(n);
      for (std::size_t c = 0; c < n; ++c) e[c] = p_tilde(z[c], m);
      const double rs = reduce_sum(e, st(Stage::sum));
      d = add(Stage::sum, mul(Stage::sum, alpha, d), rs);
    }
    if (!seen) return write_empty(b, h, r);
    normalised_output(b, h, r, zrow, m, d);
  }

  // [FA1, Alg. 1]: m̃, P̃ = e^{S − m̃}, l̃; m_new = max(m, m̃); l_new = e^{m − m_new}·l + e^{m̃ − m_new}·l̃;
  // O ← diag(l_new)⁻¹(diag(l)·e^{m − m_new}·O + e^{m̃ − m_new}·P̃V).
  void fa1_row(std::size_t b, std::size_t h, std::size_t r) {
    double m = -kInf, l = 0.0;
    bool seen = false;
    std::vector<double> O(D, 0.0);
    for (std::size_t j0 = 0; j0 < Skv; j0 += spec_.s2) {
      const std::size_t n = std::min(spec_.s2, Skv - j0);
      if (!tile_visible(b, r, j0, j0 + n)) continue;
      const std::vector<double> z = logits(b, h, r, j0, n);
      const double mt = R(Stage::max, max_of(z));
      if (mt == -kInf) continue;  // nothing visible in this row of the tile: O, l, m unchanged
      seen = true;
      std::vector<double> p(n);
      for (std::size_t c = 0; c < n; ++c) p[c] = p_tilde(z[c], mt);
      const double lt = reduce_sum(p, st(Stage::sum));
      for (double& x : p) x = R(Stage::p, x);
      p_scheme(p);
      const std::vector<double> PV = pv(b, h, p, j0);
      const double mnew = std::max(m, mt);
      const double eo = m == -kInf ? 0.0 : exp(Stage::exp, sub(Stage::max, m, mnew));
      const double en = exp(Stage::exp, sub(Stage::max, mt, mnew));
      const double lnew = add(Stage::sum, mul(Stage::sum, eo, l), mul(Stage::sum, en, lt));
      const double c_old = mul(Stage::o, l, eo);
      for (std::size_t d = 0; d < D; ++d) {
        const double kept = mul(Stage::o, c_old, O[d]);
        const double added = mul(Stage::o, en, PV[d]);
        O[d] = div(Stage::div, add(Stage::o, kept, added), lnew);
      }
      m = mnew;
      l = lnew;
    }
    if (!seen) return write_empty(b, h, r);
    for (double& x : O) x = R(Stage::out, x);
    write(b, h, r, O, m + std::log(l));
  }

  // One part's state (split-KV; the whole row when unsplit): running max m (PASA: relative to Inva·F),
  // sum l, unnormalised O, whether the row saw a key, and PASA's pseudo-average F over its `blocks` blocks.
  struct PartState {
    double m = -kInf, l = 0.0, F = 0.0;
    std::vector<double> O;
    bool seen = false;
    std::size_t blocks = 0;
  };

  // The key ranges of the split-KV parts of row r ([UA], docs/decode.md): the s2-blocks up to the last key any
  // row of r's query block sees, cut into `splits` parts of ceil(blocks / splits) blocks; one part unsplit.
  std::vector<std::pair<std::size_t, std::size_t>> parts_of(std::size_t b, std::size_t r) const {
    if (spec_.splits <= 1) return {{0, Skv}};
    const std::size_t r0 = r / spec_.s1 * spec_.s1, r1 = std::min(Sq, r0 + spec_.s1), s2 = spec_.s2;
    std::size_t end = 0;
    for (std::size_t i = r0; i < r1; ++i) end = std::max(end, visible_end(in_, b, i));
    const std::size_t blocks = (end + s2 - 1) / s2;
    const std::size_t per = std::max<std::size_t>(1, (blocks + spec_.splits - 1) / spec_.splits);
    std::vector<std::pair<std::size_t, std::size_t>> p;
    for (std::size_t b0 = 0; b0 < blocks; b0 += per) p.emplace_back(b0 * s2, std::min(Skv, std::min(blocks, b0 + per) * s2));
    return p;
  }

  // The merge of split-KV parts in the merge stage, as its MergeSpec's model says (split_kv.hpp states both).
  // Returns the merged state: unnormalised (m, l, O, and PASA's F) or normalised (O, l = 1, m = lse, F = 0).
  PartState merge(const std::vector<PartState>& parts, bool pasa) const {
    const StageSpec& ms = st(Stage::merge);
    PartState out;
    out.O.assign(D, 0.0);
    if (ms.merge.model == MergeModel::normalised_lse) {
      const StageSpec ps{ms.partial(), ms.round}, ls{ms.lse(), ms.round};
      std::vector<double> lse(parts.size(), -kInf);
      std::vector<std::vector<double>> Ot(parts.size(), std::vector<double>(D, 0.0));
      double L = -kInf;
      for (std::size_t t = 0; t < parts.size(); ++t) {
        const PartState& p = parts[t];
        if (!p.seen || p.l == 0) continue;  // lse_t = −∞: no term
        const double frame = pasa ? p.m + inva_ * p.F : p.m;
        lse[t] = rnd(ls, frame + std::log(p.l));
        for (std::size_t d = 0; d < D; ++d) Ot[t][d] = rnd(ps, div(Stage::div, p.O[d], p.l));
        L = std::max(L, lse[t]);
        out.seen = true;
      }
      if (!out.seen) return out;
      double s = 0;
      bool first = true;
      for (std::size_t t = 0; t < parts.size(); ++t) {
        if (lse[t] == -kInf) continue;
        const double e = exp(Stage::merge, sub(Stage::merge, lse[t], L));
        s = first ? e : add(Stage::merge, s, e);
        first = false;
      }
      const double total = add(Stage::merge, L, R(Stage::merge, std::log(s)));
      first = true;
      for (std::size_t t = 0; t < parts.size(); ++t) {
        if (lse[t] == -kInf) continue;
        const double w = exp(Stage::merge, sub(Stage::merge, lse[t], total));
        for (std::size_t d = 0; d < D; ++d) {
          const double term = mul(Stage::merge, w, Ot[t][d]);
          out.O[d] = first ? term : add(Stage::merge, out.O[d], term);
        }
        first = false;
      }
      out.m = total;
      out.l = 1.0;
      return out;
    }
    // unnormalised: PASA re-frames each part to the global pseudo-average F = (Σ J_t·F_t)/J first.
    std::vector<double> mt(parts.size());
    for (std::size_t t = 0; t < parts.size(); ++t) mt[t] = parts[t].m;
    if (pasa) {
      bool first = true;
      for (const PartState& p : parts) {
        if (p.blocks == 0) continue;
        out.blocks += p.blocks;
        const double w = mul(Stage::merge, static_cast<double>(p.blocks), p.F);
        out.F = first ? w : add(Stage::merge, out.F, w);
        first = false;
      }
      if (out.blocks == 0) return out;
      out.F = div(Stage::merge, out.F, static_cast<double>(out.blocks));
      for (std::size_t t = 0; t < parts.size(); ++t)
        if (parts[t].blocks != 0 && inva_ != 0)
          mt[t] = add(Stage::merge, mt[t], mul(Stage::merge, inva_, sub(Stage::merge, parts[t].F, out.F)));
    }
    double M = -kInf;
    for (std::size_t t = 0; t < parts.size(); ++t)
      if (parts[t].seen) M = std::max(M, mt[t]);
    for (std::size_t t = 0; t < parts.size(); ++t) {
      const PartState& p = parts[t];
      if (!p.seen || M == -kInf) continue;
      const double a = exp(Stage::merge, sub(Stage::merge, mt[t], M));
      const double al = mul(Stage::merge, a, p.l);
      out.l = out.seen ? add(Stage::merge, out.l, al) : al;
      for (std::size_t d = 0; d < D; ++d) {
        const double ao = mul(Stage::merge, a, p.O[d]);
        out.O[d] = out.seen ? add(Stage::merge, out.O[d], ao) : ao;
      }
      out.seen = true;
    }
    out.m = M;
    return out;
  }

  // The row's state over its parts: the one part as it is (unsplit), else merged.
  PartState row_state(const std::vector<PartState>& parts, bool pasa) const {
    return spec_.splits <= 1 ? parts.front() : merge(parts, pasa);
  }

  // [FA2, Alg. 1] over the keys [jb, je): m_j = max(m_{j−1}, rowmax S_j), P̃ = e^{S_j − m_j},
  // l_j = e^{m_{j−1} − m_j}·l_{j−1} + rowsum P̃, O_j = e^{m_{j−1} − m_j}·O_{j−1} + P̃V.
  PartState fa2_part(std::size_t b, std::size_t h, std::size_t r, std::size_t jb, std::size_t je) const {
    PartState ps;
    ps.O.assign(D, 0.0);
    for (std::size_t j0 = jb; j0 < je; j0 += spec_.s2) {
      const std::size_t n = std::min(spec_.s2, je - j0);
      if (!tile_visible(b, r, j0, j0 + n)) continue;
      const std::vector<double> z = logits(b, h, r, j0, n);
      const double alpha = running_max(ps.m, z, ps.seen);
      std::vector<double> p(n);
      for (std::size_t c = 0; c < n; ++c) p[c] = p_tilde(z[c], ps.m);
      const double rs = reduce_sum(p, st(Stage::sum));
      for (double& x : p) x = R(Stage::p, x);
      p_scheme(p);
      const std::vector<double> PV = pv(b, h, p, j0);
      ps.l = add(Stage::sum, mul(Stage::sum, alpha, ps.l), rs);
      for (std::size_t d = 0; d < D; ++d) ps.O[d] = add(Stage::o, mul(Stage::o, alpha, ps.O[d]), PV[d]);
    }
    return ps;
  }

  // FA2 over the row's parts (split-KV merged), then O = O/l, lse = m + log l (+ smooth_k's scale·q·mean(K)).
  void fa2_row(std::size_t b, std::size_t h, std::size_t r) {
    std::vector<PartState> parts;
    for (const auto& [jb, je] : parts_of(b, r)) parts.push_back(fa2_part(b, h, r, jb, je));
    if (parts.empty()) return write_empty(b, h, r);
    PartState ps = row_state(parts, false);
    if (!ps.seen) return write_empty(b, h, r);
    for (double& x : ps.O) x = R(Stage::out, div(Stage::div, x, ps.l));
    double lse = ps.m + std::log(ps.l);
    if (spec_.name == "smooth_k") lse += lse_shift_[(b * Nq + h) * Sq + r];
    write(b, h, r, ps.O, lse);
  }

  // PASA's and smooth K's parts (reference_attention.cpp):
  // SageAttention's smooth K: K − mean(K) over the sequence per (batch, kv head, d), in k_shift; the lse
  // adds back scale·(q·mean(K)) computed in fp64 (sum in order over d).
  void smooth_keys();
  // [PASA, Eq. 10] M = (I − β/n·J)·α⁻¹ for a block of n keys, each entry the exact value rounded once to shift
  // (α⁻¹ = the scale with alpha_in_M, else 1).
  std::vector<double> shifting_matrix(std::size_t n) const;
  // [PASA, Alg. 1, steps 1–2, Eq. 11]: K'_j = M·K_j for each block of keys, through the pre-processing GEMM
  // (accumulator qk_acc, output k_shift).
  void pasa_keys();
  // [PASA, Alg. 1] steps 3–21 for one query row over the keys [jb, je) (a split-KV part, or all of them).
  PartState pasa_part(std::size_t b, std::size_t h, std::size_t r, std::size_t jb, std::size_t je) const;
  void pasa_row(std::size_t b, std::size_t h, std::size_t r);

  const AttentionInputs& in_;
  const AlgorithmSpec& spec_;
  Allocation a_;
  std::size_t B = 0, Nq = 0, Nkv = 0, Sq = 0, Skv = 0, D = 0, group = 1;
  std::vector<double> q_, k_, v_, keys_, lse_shift_;
  double scale_ = 0, inva_ = 0, select_value_ = 0;
  AttentionOutput out_;
};

}  // namespace pasa::reference::detail
