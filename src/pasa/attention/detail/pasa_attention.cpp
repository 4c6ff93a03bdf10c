#include "pasa/attention/detail/pasa_attention.hpp"

#include <algorithm>
#include <cmath>

#include "pasa/core/error.hpp"

namespace pasa::detail {
namespace {

// Eq. 10 for a block of n keys, rounded to the shift format.
std::vector<double> shifting_matrix(const Run& run, std::size_t n, RandomBits* rng) {
  const PasaOptions& o = run.spec.pasa;
  const double inv_alpha = o.alpha_in_M ? run.in.effective_scale() : 1.0;
  const double off = -o.beta / static_cast<double>(n) * inv_alpha;
  const double diag = (1.0 - o.beta / static_cast<double>(n)) * inv_alpha;
  std::vector<double> M(n * n, off);
  for (std::size_t i = 0; i < n; ++i) M[i * n + i] = diag;
  run.round_to(Stage::shift, M.data(), M.size(), rng);
  return M;
}

}  // namespace

void pasa_attention(Run& run, AttentionOutput& out, int threads) {
  const PasaOptions& opt = run.spec.pasa;
  if (!(opt.beta >= 0 && opt.beta < 1)) throw InputError("pasa: beta must be in [0, 1)");
  if (opt.form != "fa2" && opt.form != "printed")
    throw InputError("pasa: form must be \"fa2\" or \"printed\", got \"" + opt.form + "\"");
  const std::size_t D = run.D, S = run.Skv, s2 = run.spec.s2;
  // Steps 1–2: shifting matrices (full and tail block) and the batched pre-processing GEMM K' = M·K.
  RandomBits mrng(run.spec.seed ^ 0x94D049BB133111EBull);
  const std::vector<double> M_full = shifting_matrix(run, std::min(s2, S), &mrng);
  const std::vector<double> M_tail = S % s2 ? shifting_matrix(run, S % s2, &mrng) : std::vector<double>{};
  const GemmSpec pre{run.stage(Stage::shift).format, run.k.format, run.stage(Stage::qk_acc), run.stage(Stage::k_shift),
                     run.alloc.gemm};
  run.set_keys_t_format(run.stage(Stage::k_shift).format);
  parallel_for(run.B * run.Nkv, threads, [&](std::size_t bh) {
    const std::size_t b = bh / run.Nkv, h = bh % run.Nkv;
    RandomBits rng(run.spec.seed ^ (0xA24BAED4963EE407ull * (bh + 1)));
    std::vector<double> shifted(S * D);
    for (std::size_t j0 = 0; j0 < S; j0 += s2) {
      const std::size_t n = std::min(s2, S - j0);
      const std::vector<double>& M = n == std::min(s2, S) ? M_full : M_tail;
      gemm(pre, n, D, n, M.data(), n, run.k.head(b, h) + j0 * D, D, shifted.data() + j0 * D, D, &rng);
    }
    run.set_keys_t(b, h, shifted.data());
  });

  const double beta = opt.beta;
  const bool printed = opt.form == "printed";
  for_items(run, threads, [&](const Item& it, RandomBits* rng) {
    const std::size_t rows = it.rows();
    const double inva = run.round_to(Stage::mean, beta / (1.0 - beta), rng);
    std::vector<double> m(rows, opt.m0_zero ? 0.0 : kNegInf), l(rows, 0.0), O(rows * D, 0.0), Z, P(rows * s2);
    std::vector<double> F(rows, 0.0), Fnew(rows), Fold(rows), mean(rows), rs(rows), PV(rows * D), a_old(rows),
        a_new(rows), mloc(rows), shift(rows), dmp_old(rows), dmp_new(rows), cand_old(rows), cand_new(rows), mnew(rows);
    std::vector<std::uint8_t> vis, seen(rows, 0);
    std::size_t jj = 0;  // processed blocks
    for (std::size_t j0 = 0; j0 < S; j0 += s2) {
      const std::size_t n = std::min(s2, S - j0);
      if (!tile_visibility(run, it, j0, j0 + n, vis)) continue;
      ++jj;
      Z.resize(rows * n);
      tile_scores(run, it, j0, n, Z.data(), rng);                  // S' = Q_i·K'_jᵀ (Eq. 12)
      if (!opt.alpha_in_M) tile_scale(run, Z.data(), Z.size(), rng);
      // Step 13: S̄'_j = rowmean(S') over all n keys of the block (M shifted every one of them).
      reduce_rows(run, Stage::mean, ReduceOp::mean, Z.data(), rows, n, n, mean.data(), rng);
      if (run.masked) tile_mask(Z.data(), vis, Z.size());
      // Every step below works on the block's rows at once (one rounding call per step).
      auto rnd = [&](Stage st, std::vector<double>& x) { run.round_to(st, x.data(), rows, rng); };
      // Step 14, Eq. 15: F^j = ((j − 1)·F^{j−1} + S̄'_j)/j, F^0 = F^1 = S̄'_1.
      if (jj == 1) {
        Fnew = mean;
        Fold = mean;
      } else {
        Fold = F;
        for (std::size_t r = 0; r < rows; ++r) Fnew[r] = static_cast<double>(jj - 1) * F[r];
        rnd(Stage::mean, Fnew);
        for (std::size_t r = 0; r < rows; ++r) Fnew[r] = Fnew[r] + mean[r];
        rnd(Stage::mean, Fnew);
        for (std::size_t r = 0; r < rows; ++r) Fnew[r] = Fnew[r] / static_cast<double>(jj);
        rnd(Stage::mean, Fnew);
      }
      // Step 15: corrections of the maximum to the frame Inva·F^j. With β = 0 they are exactly 0 (not
      // computed, so that an infinite S̄' cannot turn 0·inf into NaN: β = 0 is FA2).
      std::fill(dmp_old.begin(), dmp_old.end(), 0.0);
      std::fill(dmp_new.begin(), dmp_new.end(), 0.0);
      if (inva != 0) {
        for (std::size_t r = 0; r < rows; ++r) dmp_old[r] = Fold[r] - Fnew[r];
        rnd(Stage::mean, dmp_old);
        for (std::size_t r = 0; r < rows; ++r) dmp_old[r] = inva * dmp_old[r];
        rnd(Stage::mean, dmp_old);
        for (std::size_t r = 0; r < rows; ++r) dmp_new[r] = mean[r] - Fnew[r];
        rnd(Stage::mean, dmp_new);
        for (std::size_t r = 0; r < rows; ++r) dmp_new[r] = inva * dmp_new[r];
        rnd(Stage::mean, dmp_new);
      }
      F = Fnew;
      // Step 12: m'_j; step 16: m_j = max(m_{j−1} + Δm'_{j−1}, m'_j + Δm'_j).
      for (std::size_t r = 0; r < rows; ++r) {
        mloc[r] = row_max(&Z[r * n], n);
        if (mloc[r] != kNegInf) seen[r] = 1;
        cand_old[r] = m[r] + dmp_old[r];
        cand_new[r] = mloc[r] + dmp_new[r];
      }
      rnd(Stage::max, cand_old);
      rnd(Stage::max, cand_new);
      for (std::size_t r = 0; r < rows; ++r) mnew[r] = std::max(cand_old[r], cand_new[r]);
      // Step 17: Δm_{j−1} = m_{j−1} − m_j + Δm'_{j−1} (and Δm_j = m'_j − m_j + Δm'_j in the printed form).
      for (std::size_t r = 0; r < rows; ++r) a_old[r] = m[r] - mnew[r];
      rnd(Stage::max, a_old);
      for (std::size_t r = 0; r < rows; ++r) a_old[r] = a_old[r] + dmp_old[r];
      rnd(Stage::max, a_old);
      exp_to_stage(run, a_old.data(), rows, rng);
      if (printed) {
        // Step 12: P' = exp(S' − m'_j); steps 18/20 rescale it by e^{Δm_j}.
        shift = mloc;
        for (std::size_t r = 0; r < rows; ++r) a_new[r] = mloc[r] - mnew[r];
        rnd(Stage::max, a_new);
        for (std::size_t r = 0; r < rows; ++r) a_new[r] = a_new[r] + dmp_new[r];
        rnd(Stage::max, a_new);
        exp_to_stage(run, a_new.data(), rows, rng);
      } else {
        // FA2 form: P = exp(S' + Δm'_j − m_j) = exp(S' − (m_j − Δm'_j)), already relative to m_j.
        for (std::size_t r = 0; r < rows; ++r) shift[r] = mnew[r] - dmp_new[r];
        rnd(Stage::max, shift);
      }
      for (std::size_t r = 0; r < rows; ++r)
        if (mnew[r] == kNegInf) {  // nothing visible yet in this row (Z is all −inf, so P = 0): l, O stay 0
          shift[r] = kNegInf;
          a_old[r] = a_new[r] = 0.0;
        }
      m = mnew;
      tile_exp(run, Z.data(), rows, n, n, shift.data(), P.data(), rng);
      reduce_rows(run, Stage::sum, ReduceOp::sum, P.data(), rows, n, n, rs.data(), rng);  // l'_j (step 12)
      run.round_to(Stage::p, P.data(), rows * n, rng);
      tile_pv(run, it, P.data(), n, j0, n, PV.data(), rng);  // step 19
      if (printed) {
        // Step 18: l_j = e^{Δm_{j−1}}·l_{j−1} + e^{Δm_j}·l'_j; step 20: O_j = e^{Δm_j}·(P'V) + e^{Δm_{j−1}}·O_{j−1}.
        for (std::size_t r = 0; r < rows; ++r) rs[r] = a_new[r] * rs[r];
        rnd(Stage::sum, rs);
        for (std::size_t r = 0; r < rows; ++r)
          for (std::size_t d = 0; d < D; ++d) PV[r * D + d] = a_new[r] * PV[r * D + d];
        run.round_to(Stage::o, PV.data(), PV.size(), rng);
      }
      rescale_add(run, Stage::sum, l.data(), a_old.data(), rs.data(), rows, 1, rng);
      rescale_add(run, Stage::o, O.data(), a_old.data(), PV.data(), rows, D, rng);
    }
    // Step 22: O = O/l. The running max is relative to Inva·F, so the lse adds it back.
    std::vector<double> frame(rows);
    for (std::size_t r = 0; r < rows; ++r) frame[r] = m[r] + inva * F[r];
    finish_rows(run, it, O, l, frame, seen, true, nullptr, out, rng);
  });
}

}  // namespace pasa::detail
