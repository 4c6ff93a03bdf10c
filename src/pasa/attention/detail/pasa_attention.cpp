#include "pasa/attention/detail/pasa_attention.hpp"

#include "pasa/attention/quantise.hpp"

#include "pasa/attention/detail/fused_tile.hpp"
#include "pasa/attention/detail/split_kv.hpp"
#include "pasa/attention/detail/tile_ops.hpp"

#include <algorithm>
#include <cmath>

#include <mpfr.h>

#include "pasa/core/error.hpp"
#include "pasa/numeric/double_double.hpp"
#include "pasa/numeric/mpfr_thread.hpp"

namespace pasa::detail {
namespace {

// ((a − b)·s)/(c − d) for doubles, exactly formed by MPFR and carried as hi + lo for one rounding by
// round_sum: the quotient rounded to odd at 256 bits, hi = RN(q), lo = q − hi rounded to odd at 53 bits.
// Round-to-odd keeps the value on the same side of every breakpoint of a grid of at most 53 bits [Boldo &
// Melquiond 2008], so the rounding of hi + lo to a stage is the rounding of the exact quotient.
DD exact_ratio(double a, double b, double s, double c, double d) {
  free_mpfr_caches_at_thread_exit();
  mpfr_t num, den, t, q;
  mpfr_inits2(4400, num, den, t, nullptr);  // any sum or product of two doubles is exact at 4400 bits
  mpfr_init2(q, 256);
  mpfr_set_d(num, a, MPFR_RNDN);
  mpfr_sub_d(num, num, b, MPFR_RNDN);
  mpfr_mul_d(num, num, s, MPFR_RNDN);
  mpfr_set_d(den, c, MPFR_RNDN);
  mpfr_sub_d(den, den, d, MPFR_RNDN);
  auto to_odd = [](mpfr_t x, int ternary) {
    if (ternary != 0 && mpfr_regular_p(x) && mpfr_min_prec(x) < mpfr_get_prec(x)) {
      if (mpfr_sgn(x) > 0) mpfr_nextabove(x);
      else mpfr_nextbelow(x);
    }
  };
  to_odd(q, mpfr_div(q, num, den, MPFR_RNDZ));
  const double hi = mpfr_get_d(q, MPFR_RNDN);
  mpfr_sub_d(t, q, hi, MPFR_RNDN);  // exact
  mpfr_t lo53;
  mpfr_init2(lo53, 53);
  to_odd(lo53, mpfr_set(lo53, t, MPFR_RNDZ));
  const double lo = mpfr_get_d(lo53, MPFR_RNDN);
  mpfr_clears(num, den, t, q, lo53, nullptr);
  return {hi, lo};
}

// Eq. 10 for a block of n keys: M = (I − β/n·J)·α⁻¹, each entry ((δ·n − β)·α⁻¹)/n rounded once to shift.
std::vector<double> shifting_matrix(const Run& run, std::size_t n, RandomBits* rng) {
  const PasaOptions& o = run.spec.pasa;
  const double inv_alpha = o.alpha_in_M ? run.in.effective_scale() : 1.0;
  const double dn = static_cast<double>(n);
  const DD off = exact_ratio(0.0, o.beta, inv_alpha, dn, 0.0), diag = exact_ratio(dn, o.beta, inv_alpha, dn, 0.0);
  std::vector<double> M(n * n);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t t = 0; t < n; ++t) M[i * n + t] = run.round_exact(Stage::shift, i == t ? diag : off, rng);
  return M;
}

// QuantOptions::shift_first [FA3, §3.3 with PASA Eq. 11]: K' = M·K on the keys before quantisation (an FMA
// chain in the qk_acc stage, output in it too — fp32 for the FP8 presets: the pre-processing runs as its own
// fp16/fp32 kernel, not on the FP8 engine),
// then K' quantised like K (its own fp32 scales per tensor, head or s2-row block) into the k_shift stage.
void shift_then_quantise(Run& run, const std::vector<double>& M_full, const std::vector<double>& M_tail, int threads) {
  const QuantOptions& qo = run.spec.quant;
  if (qo.scales == QuantScale::none) throw InputError("pasa: quant shift_first needs scales (tensor, head or block)");
  const std::size_t D = run.D, S = run.Skv, s2 = run.spec.s2;
  const Tensor& K = run.keys_before_quantisation();
  const GemmSpec pre{run.stage(Stage::shift).format, format_by_name("fp64"), run.stage(Stage::qk_acc),
                     run.stage(Stage::qk_acc), GemmModel(GemmKind::ordered)};
  std::vector<double> shifted(run.B * run.Nkv * S * D);
  parallel_for(run.B * run.Nkv, threads, [&](std::size_t bh) {
    RandomBits rng(run.spec.seed ^ (0xA24BAED4963EE407ull * (bh + 1)));
    for (std::size_t j0 = 0; j0 < S; j0 += s2) {
      const std::size_t n = std::min(s2, S - j0);
      const std::vector<double>& M = n == std::min(s2, S) ? M_full : M_tail;
      gemm(pre, n, D, n, M.data(), n, K.data.data() + bh * S * D + j0 * D, D, shifted.data() + bh * S * D + j0 * D, D,
           &rng);
    }
  });
  RandomBits qrng(run.spec.seed ^ 0x5851F42D4C957F2Dull);
  std::vector<double> scales =
      quantise_groups(shifted.data(), run.B * run.Nkv, S, D, s2, qo, run.stage(Stage::k_shift), &qrng);
  parallel_for(run.B * run.Nkv, threads,
               [&](std::size_t bh) { run.set_keys_t(bh / run.Nkv, bh % run.Nkv, shifted.data() + bh * S * D); });
  run.set_k_scales(std::move(scales));
}

}  // namespace

void pasa_prepare(Run& run, int threads) {
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
                     run.alloc.gemm_of(GemmId::shift)};
  run.set_keys_t_format(run.stage(Stage::k_shift).format);
  if (run.spec.quant.shift_first) {
    shift_then_quantise(run, M_full, M_tail, threads);
    return;
  }
  parallel_for(run.B * run.Nkv, threads, [&](std::size_t bh) {
    const std::size_t b = bh / run.Nkv, h = bh % run.Nkv;
    if (run.float_qk && fused_shift_keys(run, pre, b, h, M_full, M_tail)) return;
    RandomBits rng(run.spec.seed ^ (0xA24BAED4963EE407ull * (bh + 1)));
    std::vector<double> shifted(S * D);
    for (std::size_t j0 = 0; j0 < S; j0 += s2) {
      const std::size_t n = std::min(s2, S - j0);
      const std::vector<double>& M = n == std::min(s2, S) ? M_full : M_tail;
      gemm(pre, n, D, n, M.data(), n, run.k.head(b, h) + j0 * D, D, shifted.data() + j0 * D, D, &rng);
    }
    run.set_keys_t(b, h, shifted.data());
  });

}

namespace {

// Algorithm 1 (steps 11–20) over the key blocks of [jb, je) (jb a multiple of s2), continuing the part's state
// (m, l, O, F, seen; part.blocks = the blocks j so far); the tile operations from `tiles` (tile_ops.hpp: the
// general or the fused path, the same bits). inva: Inva = β/(1 − β) rounded to mean (Thm. 2.1).
template <TileOps Tiles>
void pasa_blocks(const Run& run, const Item& it, Tiles& tiles, double inva, std::size_t jb, std::size_t je,
                 Partial& part, RandomBits* rng) {
  const PasaOptions& opt = run.spec.pasa;
  const std::size_t rows = tiles.rows(), D = run.D, s2 = run.spec.s2;
  const bool printed = opt.form == "printed";
  std::vector<double>&m = part.m, &l = part.l, &O = part.O, &F = part.F;
  std::size_t& j = part.blocks;
  std::vector<double> Fnew(rows), Fold(rows), mean(rows), rs(rows), a_old(rows), a_new(rows), mloc(rows),
      shift(rows), dmp_old(rows), dmp_new(rows), cand_old(rows), cand_new(rows), mnew(rows), sel_frame(rows);
  // Every step below works on the block's rows at once: one rounding of each exact result
  // (two_sum, two_prod, exact_quotient), row by row.
  auto once = [&](Stage stage, std::vector<double>& x, auto exact) { run.round_each(stage, x.data(), rows, rng, exact); };
  for (std::size_t j0 = jb; j0 < je; j0 += s2) {
    const std::size_t n = std::min(s2, je - j0);
    if (!tiles.open(j0, n)) continue;
    ++j;
    tiles.scores(!opt.alpha_in_M);  // S' = Q_i·K'_jᵀ (Eq. 12), scaled here unless α is in M
    // Step 13: S̄'_j = rowmean(S') over all n keys of the block (M shifted every one of them).
    tiles.row_mean(mean.data());
    // The bias and the select come after the mean: the recovery Inva·S̄' = β·S̄ (Thm. 2.1) holds for the
    // scores the keys were shifted by, and pse is a per-key change of the shifted scores. The select
    // value is a score of the unshifted frame: in the block's frame (S' = S − Inva·S̄'_j) it is
    // value − Inva·S̄'_j (the shift rounded to mean, as the max corrections below use it).
    if (run.biased) {
      if (!run.in.mask.select.empty()) {
        // A row whose visible keys in this block are all selected sees one constant score, and a row that
        // sees no key here nothing: any frame gives it the same weights, and frame 0 (S̄'_j taken as 0: no
        // shift) keeps the value exact. value − Inva·S̄'_j would err by half an ulp of the value (6e-5
        // for −1e12 in fp64), differently in every block, and a row whose keys are all selected would then
        // not average V (nor would it if a block it does not see moved its frame).
        const std::uint8_t* vis = tiles.visibility();
        for (std::size_t k = 0; k < rows; ++k) {
          const std::uint8_t* sel = select_row(run.in, it.b, it.row_of(k));
          bool any = false, all = true;
          for (std::size_t c = 0; c < n; ++c)
            if (vis[k * n + c]) {
              any = true;
              all = all && sel[j0 + c] != 0;
            }
          if (all || !any) mean[k] = 0;
        }
        if (inva == 0) std::fill(sel_frame.begin(), sel_frame.end(), 0.0);
        else once(Stage::mean, sel_frame, [&](std::size_t r) { return two_prod(inva, mean[r]); });
      }
      tiles.bias_select(sel_frame.data());
    }
    if (run.masked) tiles.mask();
    // Step 14, Eq. 15: F^j = ((j − 1)·F^{j−1} + S̄'_j)/j, F^0 = F^1 = S̄'_1.
    if (j == 1) {
      Fnew = mean;
      Fold = mean;
    } else {
      Fold = F;
      const double jm1 = static_cast<double>(j - 1), dj = static_cast<double>(j);
      once(Stage::mean, Fnew, [&](std::size_t r) { return two_prod(jm1, F[r]); });
      once(Stage::mean, Fnew, [&](std::size_t r) { return two_sum(Fnew[r], mean[r]); });
      once(Stage::mean, Fnew, [&](std::size_t r) { return exact_quotient(Fnew[r], dj); });
    }
    // Step 15: corrections of the maximum to the frame Inva·F^j. With β = 0 they are exactly 0 (not
    // computed, so that an infinite S̄' cannot turn 0·inf into NaN: β = 0 is FA2).
    std::fill(dmp_old.begin(), dmp_old.end(), 0.0);
    std::fill(dmp_new.begin(), dmp_new.end(), 0.0);
    if (inva != 0) {
      once(Stage::mean, dmp_old, [&](std::size_t r) { return two_sum(Fold[r], -Fnew[r]); });
      once(Stage::mean, dmp_old, [&](std::size_t r) { return two_prod(inva, dmp_old[r]); });
      once(Stage::mean, dmp_new, [&](std::size_t r) { return two_sum(mean[r], -Fnew[r]); });
      once(Stage::mean, dmp_new, [&](std::size_t r) { return two_prod(inva, dmp_new[r]); });
    }
    F = Fnew;
    // Step 12: m'_j; step 16: m_j = max(m_{j−1} + Δm'_{j−1}, m'_j + Δm'_j).
    tiles.row_max(mloc.data());
    for (std::size_t r = 0; r < rows; ++r)
      if (mloc[r] != kNegInf) part.seen[r] = 1;
    once(Stage::max, cand_old, [&](std::size_t r) { return two_sum(m[r], dmp_old[r]); });
    once(Stage::max, cand_new, [&](std::size_t r) { return two_sum(mloc[r], dmp_new[r]); });
    for (std::size_t r = 0; r < rows; ++r) mnew[r] = std::max(cand_old[r], cand_new[r]);
    // Step 17: Δm_{j−1} = m_{j−1} − m_j + Δm'_{j−1} (and Δm_j = m'_j − m_j + Δm'_j in the printed form).
    once(Stage::max, a_old, [&](std::size_t r) { return two_sum(m[r], -mnew[r]); });
    once(Stage::max, a_old, [&](std::size_t r) { return two_sum(a_old[r], dmp_old[r]); });
    exp_to_stage(run, a_old.data(), rows, rng);
    if (printed) {
      // Step 12: P' = exp(S' − m'_j); steps 18/20 rescale it by e^{Δm_j}.
      shift = mloc;
      once(Stage::max, a_new, [&](std::size_t r) { return two_sum(mloc[r], -mnew[r]); });
      once(Stage::max, a_new, [&](std::size_t r) { return two_sum(a_new[r], dmp_new[r]); });
      exp_to_stage(run, a_new.data(), rows, rng);
    } else {
      // FA2 form: P = exp(S' + Δm'_j − m_j) = exp(S' − (m_j − Δm'_j)), already relative to m_j.
      once(Stage::max, shift, [&](std::size_t r) { return two_sum(mnew[r], -dmp_new[r]); });
    }
    for (std::size_t r = 0; r < rows; ++r)
      if (mnew[r] == kNegInf) {  // nothing visible yet in this row (S' is all −inf, so P = 0): l, O stay 0
        shift[r] = kNegInf;
        a_old[r] = a_new[r] = 0.0;
      }
    m = mnew;
    tiles.probabilities(shift.data(), rs.data());  // P' and l'_j (step 12)
    tiles.pv();                                    // step 19
    if (!printed) {
      rescale_add(run, Stage::sum, l.data(), a_old.data(), rs.data(), rows, 1, rng);
      tiles.accumulate(O.data(), a_old.data());
      continue;
    }
    // Step 18: l_j = e^{Δm_{j−1}}·l_{j−1} + e^{Δm_j}·l'_j; step 20: O_j = e^{Δm_j}·(P'V) + e^{Δm_{j−1}}·O_{j−1}.
    double* PV = tiles.pv_values();
    once(Stage::sum, rs, [&](std::size_t r) { return two_prod(a_new[r], rs[r]); });
    for (std::size_t r = 0; r < rows; ++r) {
      double* pv = &PV[r * D];
      run.round_each(Stage::o, pv, D, rng, [&](std::size_t d) { return two_prod(a_new[r], pv[d]); });
    }
    rescale_add(run, Stage::sum, l.data(), a_old.data(), rs.data(), rows, 1, rng);
    rescale_add(run, Stage::o, O.data(), a_old.data(), PV, rows, D, rng);
  }
}

}  // namespace

double pasa_item(const Run& run, const Item& it, Partial& state, RandomBits* rng) {
  const double beta = run.spec.pasa.beta;
  const double inva = run.round_exact(Stage::mean, exact_ratio(beta, 0.0, 1.0, 1.0, beta), rng);  // Thm. 2.1
  with_tile_ops(run, it, rng, [&](auto& tiles) {
    if (run.spec.splits <= 1) {
      pasa_blocks(run, it, tiles, inva, 0, run.Skv, state, rng);
      return;
    }
    // split form: each part carries its pseudo-average F_t and block count J_t (split_kv.hpp)
    std::vector<Partial> parts;
    for (const auto& [jb, je] : split_ranges(run, it)) {
      parts.emplace_back(it.rows(), run.D, pasa_m0(run));
      pasa_blocks(run, it, tiles, inva, jb, je, parts.back(), rng);
    }
    merge_partials(run, parts, true, inva, state, rng);
  });
  return inva;
}

double pasa_m0(const Run& run) { return run.spec.pasa.m0_zero ? 0.0 : kNegInf; }

void pasa_finish(const Run& run, const Item& it, const Partial& state, double inva, AttentionOutput& out,
                 RandomBits* rng) {
  // Step 22: O = O/l. The running max is relative to Inva·F, so the lse adds it back.
  std::vector<double> frame(it.rows());
  for (std::size_t r = 0; r < it.rows(); ++r) frame[r] = state.m[r] + inva * state.F[r];
  finish_rows(run, it, state.O, state.l, frame, state.seen, true, nullptr, out, rng);
}

void pasa_attention(Run& run, AttentionOutput& out, int threads) {
  pasa_prepare(run, threads);
  for_items(run, threads, [&](const Item& it, RandomBits* rng) {
    Partial state(it.rows(), run.D, pasa_m0(run));
    const double inva = pasa_item(run, it, state, rng);
    pasa_finish(run, it, state, inva, out, rng);
  });
}

}  // namespace pasa::detail
