// The reference emulator (see reference_attention.hpp): the engine's class is reference_engine.hpp; here
// PASA's key preprocessing and rows ([PASA, Alg. 1, Eq. 10–15]) and smooth K's, and the entry point.
// Written for clarity, not speed: one query row at a time, one rounding per statement.
#include "reference_engine.hpp"

namespace pasa::reference {

namespace detail {

// SageAttention's smooth K: K − mean(K) over the sequence per (batch, kv head, d), in k_shift; the lse
// adds back scale·(q·mean(K)) computed in fp64 (sum in order over d).
void Reference::smooth_keys() {
  std::vector<double> means(B * Nkv * D);
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t hk = 0; hk < Nkv; ++hk)
      for (std::size_t d = 0; d < D; ++d) {
        std::vector<double> col(Skv);
        for (std::size_t j = 0; j < Skv; ++j) col[j] = k_[kv_index(b, hk, j) + d];
        const double mean = reduce_mean(col, st(Stage::mean));
        means[(b * Nkv + hk) * D + d] = mean;
        for (std::size_t j = 0; j < Skv; ++j) keys_[kv_index(b, hk, j) + d] = sub(Stage::k_shift, col[j], mean);
      }
  lse_shift_.assign(B * Nq * Sq, 0.0);
  const double scale = in_.effective_scale();
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t h = 0; h < Nq; ++h)
      for (std::size_t r = 0; r < Sq; ++r) {
        double dot = 0;
        for (std::size_t d = 0; d < D; ++d) dot += q_[q_index(b, h, r) + d] * means[(b * Nkv + h / group) * D + d];
        lse_shift_[(b * Nq + h) * Sq + r] = scale * dot;
      }
}

// [PASA, Eq. 10] M = (I − β/n·J)·α⁻¹ for a block of n keys, each entry the exact value rounded once to shift
// (α⁻¹ = the scale with alpha_in_M, else 1).
std::vector<double> Reference::shifting_matrix(std::size_t n) const {
  const double inv_alpha = spec_.pasa.alpha_in_M ? in_.effective_scale() : 1.0;
  Big num, nn, ia, e(kOddPrec);
  std::vector<double> M(n * n);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t t = 0; t < n; ++t) {
      // ((δ_it·n − β)·α⁻¹)/n: numerator exact, the quotient round-to-odd at 256 bits.
      num.set(i == t ? static_cast<double>(n) : 0.0);
      nn.set(spec_.pasa.beta);
      require_exact(mpfr_sub(num.v, num.v, nn.v, MPFR_RNDZ), "shift numerator");
      ia.set(inv_alpha);
      require_exact(mpfr_mul(num.v, num.v, ia.v, MPFR_RNDZ), "shift numerator");
      make_odd(e.v, mpfr_div_ui(e.v, num.v, static_cast<unsigned long>(n), MPFR_RNDZ));
      M[i * n + t] = rnd(st(Stage::shift), e.v);
    }
  return M;
}

// [PASA, Alg. 1, steps 1–2, Eq. 11]: K'_j = M·K_j for each block of keys, through the pre-processing GEMM
// (accumulator qk_acc, output k_shift).
void Reference::pasa_keys() {
  const std::size_t s2 = spec_.s2;
  const std::vector<double> M_full = shifting_matrix(std::min(s2, Skv));
  const std::vector<double> M_tail = Skv % s2 ? shifting_matrix(Skv % s2) : std::vector<double>{};
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t hk = 0; hk < Nkv; ++hk)
      for (std::size_t j0 = 0; j0 < Skv; j0 += s2) {
        const std::size_t n = std::min(s2, Skv - j0);
        const std::vector<double>& M = n == std::min(s2, Skv) ? M_full : M_tail;
        for (std::size_t i = 0; i < n; ++i)
          for (std::size_t d = 0; d < D; ++d)
            keys_[kv_index(b, hk, j0 + i) + d] = reference_dot(a_.gemm, st(Stage::qk_acc), st(Stage::k_shift),
                                                               &M[i * n], 1, &k_[kv_index(b, hk, j0) + d], D, n);
      }
  // Inva = β/(1 − β) (Theorem 2.1), one rounding to mean.
  Big one_minus(kExactPrec), bb, q(kOddPrec);
  bb.set(spec_.pasa.beta);
  mpfr_set_ui(one_minus.v, 1, MPFR_RNDN);
  require_exact(mpfr_sub(one_minus.v, one_minus.v, bb.v, MPFR_RNDZ), "1 - beta");
  make_odd(q.v, mpfr_div(q.v, bb.v, one_minus.v, MPFR_RNDZ));
  inva_ = rnd(st(Stage::mean), q.v);
}

// [PASA, Alg. 1] steps 3–21 for one query row over the keys [jb, je) (a split-KV part, or all of them).
Reference::PartState Reference::pasa_part(std::size_t b, std::size_t h, std::size_t r, std::size_t jb, std::size_t je) const {
  const PasaOptions& o = spec_.pasa;
  if (!(o.beta >= 0 && o.beta < 1)) throw std::invalid_argument("reference: beta outside [0, 1)");
  const bool printed = o.form == "printed";
  double m = o.m0_zero ? 0.0 : -kInf, l = 0.0, F = 0.0;
  bool seen = false;
  std::vector<double> O(D, 0.0);
  std::size_t j = 0;  // blocks processed
  for (std::size_t j0 = jb; j0 < je; j0 += spec_.s2) {
    const std::size_t n = std::min(spec_.s2, je - j0);
    if (!tile_visible(b, r, j0, j0 + n)) continue;
    ++j;
    // Eq. 12: S' = Q·K'ᵀ (scaled through M, or here when α is not in M).
    std::vector<double> z = scores(b, h, r, j0, n);
    if (!o.alpha_in_M)
      for (double& x : z) x = mul(Stage::scale, x, scale_);
    // Step 13: S̄'_j = rowmean(S') over all n keys of the block (M shifted every one of them).
    double mean = reduce_mean(z, st(Stage::mean));
    // The bias and the select come after the mean (Thm. 2.1 recovers the shift of the scores the keys were
    // shifted by). The select value is a score of the unshifted frame: in the block's frame
    // S' = S − Inva·S̄'_j it is value − Inva·S̄'_j (the shift rounded to mean); a row that sees only selected
    // keys (or none) in the block takes frame 0 (S̄'_j := 0): one constant score, the same weights in any frame.
    if (all_selected(b, r, j0, n)) mean = 0;
    bias_select(b, h, r, j0, z, inva_ != 0 && select_row(in_, b, r) ? mul(Stage::mean, inva_, mean) : 0.0);
    mask(b, r, j0, z);
    // Step 14, Eq. 15: F^j = ((j − 1)·F^{j−1} + S̄'_j)/j, F^0 = F^1 = S̄'_1.
    double F_old, F_new;
    if (j == 1) {
      F_old = F_new = mean;
    } else {
      F_old = F;
      const double weighted = mul(Stage::mean, static_cast<double>(j - 1), F);
      const double total = add(Stage::mean, weighted, mean);
      F_new = div(Stage::mean, total, static_cast<double>(j));
    }
    // Step 15, Eq. 13–14: Δm'_{j−1} = Inva·(F^{j−1} − F^j), Δm'_j = Inva·(S̄'_j − F^j) (0 when β = 0).
    double dm_old = 0.0, dm_new = 0.0;
    if (inva_ != 0) {
      dm_old = mul(Stage::mean, inva_, sub(Stage::mean, F_old, F_new));
      dm_new = mul(Stage::mean, inva_, sub(Stage::mean, mean, F_new));
    }
    F = F_new;
    // Step 12: local max m'_j; step 16: m_j = max(m_{j−1} + Δm'_{j−1}, m'_j + Δm'_j).
    const double mloc = max_of(z);
    if (mloc != -kInf) seen = true;
    const double cand_old = add(Stage::max, m, dm_old);
    const double cand_new = add(Stage::max, mloc, dm_new);
    const double mnew = std::max(cand_old, cand_new);
    // Step 17: e^{Δm_{j−1}}, Δm_{j−1} = (m_{j−1} − m_j) + Δm'_{j−1}.
    double e_old = exp(Stage::exp, add(Stage::max, sub(Stage::max, m, mnew), dm_old));
    double e_new = 0.0, shift;
    if (printed) {
      // Step 12: P' = e^{S' − m'_j}; Δm_j = (m'_j − m_j) + Δm'_j.
      shift = mloc;
      e_new = exp(Stage::exp, add(Stage::max, sub(Stage::max, mloc, mnew), dm_new));
    } else {
      // FA2 form: P = e^{S' − (m_j − Δm'_j)}.
      shift = sub(Stage::max, mnew, dm_new);
    }
    if (mnew == -kInf) {  // nothing visible yet: P = 0, l and O stay 0
      shift = -kInf;
      e_old = e_new = 0.0;
    }
    m = mnew;
    std::vector<double> p(n);
    for (std::size_t c = 0; c < n; ++c) p[c] = p_tilde(z[c], shift);
    double rs = reduce_sum(p, st(Stage::sum));  // l'_j
    for (double& x : p) x = R(Stage::p, x);
    p_scheme(p);
    std::vector<double> PV = pv(b, h, p, j0);  // step 19
    if (printed) {  // steps 18/20: the new block's terms scaled by e^{Δm_j}
      rs = mul(Stage::sum, e_new, rs);
      for (double& x : PV) x = mul(Stage::o, e_new, x);
    }
    // Step 18: l_j = e^{Δm_{j−1}}·l_{j−1} + l'_j; step 20: O_j = e^{Δm_{j−1}}·O_{j−1} + P'V.
    l = add(Stage::sum, mul(Stage::sum, e_old, l), rs);
    for (std::size_t d = 0; d < D; ++d) O[d] = add(Stage::o, mul(Stage::o, e_old, O[d]), PV[d]);
  }
  PartState ps;
  ps.m = m, ps.l = l, ps.F = F, ps.O = std::move(O), ps.seen = seen, ps.blocks = j;
  return ps;
}

void Reference::pasa_row(std::size_t b, std::size_t h, std::size_t r) {
  std::vector<PartState> parts;
  for (const auto& [jb, je] : parts_of(b, r)) parts.push_back(pasa_part(b, h, r, jb, je));
  if (parts.empty()) return write_empty(b, h, r);
  PartState ps = row_state(parts, true);
  if (!ps.seen) return write_empty(b, h, r);
  // Step 22: O = O/l; the running max is relative to Inva·F, so the lse (fp64) adds it back.
  for (double& x : ps.O) x = R(Stage::out, div(Stage::div, x, ps.l));
  const double frame = ps.m + inva_ * ps.F;
  write(b, h, r, ps.O, frame + std::log(ps.l));
}

}  // namespace detail

AttentionOutput reference_attention(const AttentionInputs& in, const AlgorithmSpec& spec) {
  return detail::Reference(in, spec).run();
}

}  // namespace pasa::reference
