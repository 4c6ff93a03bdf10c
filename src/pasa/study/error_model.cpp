#include "pasa/study/error_model.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "pasa/attention/algorithm.hpp"
#include "pasa/core/error.hpp"
#include "pasa/core/parallel.hpp"
#include "pasa/numeric/round.hpp"

namespace pasa {

double ErrorPrediction::rel_rmse() const { return overflow ? INFINITY : std::sqrt(total() / norm2); }
double ErrorPrediction::rel_rmse_of(double term) const { return std::sqrt(term / norm2); }

namespace {

// The rounding error of x in f (nearest-even), 0 beyond the range (the overflow is reported apart).
double err(double x, const Format& f) {
  const double r = round(x, f);
  return std::isfinite(r) ? r - x : 0.0;
}
const Format& narrower(const Format& a, const Format& b) { return a.p <= b.p ? a : b; }

struct HeadSums {
  double scores = 0, block_mean = 0, p = 0, o = 0, l = 0, out = 0, norm2 = 0;
  double max_eta = 0, max_delta = 0;  // the largest exponent perturbations (the first-order regime)
  std::size_t rows = 0;
  bool overflow = false;
};

}  // namespace

std::string error_model_gap(const AlgorithmSpec& a) {
  const AlgorithmInfo& info = algorithm_info(a.name);
  if (!info.error_model) return "algorithm " + a.name;
  if (a.splits != 1) return "split-KV";
  if (!(a.quant == QuantOptions{})) return "quantisation";
  if (info.pasa_options && (a.pasa.form != "fa2" || !a.pasa.alpha_in_M || a.pasa.m0_zero)) return "PASA reading other than the default";
  for (const StageSpec& st : a.alloc.stages)
    if (st.round.mode != RoundMode::nearest_even) return "a rounding mode other than nearest-even";
  for (Stage st : {Stage::sum, Stage::mean})
    if (a.alloc.spec(st).acc().p < 24) return "reductions accumulating below fp32";
  return "";
}

ErrorModelOptions error_model_options(const AlgorithmSpec& a, std::size_t heads) {
  ErrorModelOptions o;
  o.pasa = algorithm_info(a.name).pasa_options;
  o.beta = a.pasa.beta;
  o.s2 = a.s2;
  o.heads = heads;
  return o;
}

ErrorPrediction predict_error(const AttentionInputs& in_any, const Allocation& alloc, const ErrorModelOptions& opt, int threads) {
  AttentionInputs wide;  // (reads Q, K and V as doubles: a narrow input widened)
  const AttentionInputs& in = wide_inputs(in_any, wide, threads);
  if (opt.s2 == 0) throw InputError("error model: s2 must be at least 1");
  if (in.mask.causal || !in.mask.kv_len.empty() || !in.mask.keep.empty() || !in.mask.select.empty() || !in.pse.data.empty())
    throw InputError("error model: masks, pse and select are not modelled");
  if (in.q.shape.N != in.k.shape.N) throw InputError("error model: grouped-query inputs are not modelled");
  const std::size_t B = in.q.shape.B, N = in.q.shape.N, Sq = in.q.shape.S, Skv = in.k.shape.S, D = in.q.shape.D;
  const std::size_t heads = opt.heads == 0 ? B * N : std::min(opt.heads, N);
  const double scale = in.effective_scale(), beta = opt.pasa ? opt.beta : 0.0, inva = beta / (1 - beta);
  const Format &fs = alloc.spec(Stage::s).format, &fscale = alloc.spec(Stage::scale).format, &fk = alloc.spec(Stage::k_shift).format,
               &fmean = alloc.spec(Stage::mean).format, &fmax = alloc.spec(Stage::max).format,
               &fp = narrower(alloc.spec(Stage::exp).format, alloc.spec(Stage::p).format), &fpv = alloc.spec(Stage::pv).format,
               &fo = alloc.spec(Stage::o).format, &fsum = alloc.spec(Stage::sum).format,
               &fout = narrower(alloc.spec(Stage::div).format, alloc.spec(Stage::out).format);
  // l from the rounded P (exp stage as narrow as p): a rounding of p_k moves key k's weight in both O and l.
  const bool weight_form = alloc.spec(Stage::exp).format.p <= alloc.spec(Stage::p).format.p;
  const std::size_t nblocks = (Skv + opt.s2 - 1) / opt.s2;
  std::vector<HeadSums> sums(heads);
  parallel_for(heads, threads, [&](std::size_t hb) {
    const std::size_t b = hb / N, h = hb % N;
    const double *Q = in.q.head(b, h), *K = in.k.head(b, h), *V = in.v.head(b, h);
    HeadSums& hs = sums[hb];
    // PASA's shifted keys K' = (k − β·k̄_j)·scale (Eq. 11 with 1/α inside M) and their rounding errors dK.
    std::vector<double> kbar(nblocks * D, 0.0), dK(opt.pasa ? Skv * D : 0);
    for (std::size_t j = 0; j < nblocks; ++j) {
      const std::size_t k0 = j * opt.s2, k1 = std::min(Skv, k0 + opt.s2);
      for (std::size_t k = k0; k < k1; ++k)
        for (std::size_t d = 0; d < D; ++d) kbar[j * D + d] += K[k * D + d];
      for (std::size_t d = 0; d < D; ++d) kbar[j * D + d] /= static_cast<double>(k1 - k0);
      if (opt.pasa)
        for (std::size_t k = k0; k < k1; ++k)
          for (std::size_t d = 0; d < D; ++d) dK[k * D + d] = err((K[k * D + d] - beta * kbar[j * D + d]) * scale, fk);
    }
    std::vector<double> s(Skv), eta(Skv), w(Skv), Bj(nblocks * D), Wj(nblocks), Mj(nblocks), mean(nblocks), O(D);
    std::vector<double> dS(D), dB(D), dP(D), dOo(D), E(D);
    for (std::size_t i = 0; i < Sq; ++i) {
      const double* q = Q + i * D;
      // Scores and the error of each exponent (first order): FA: S rounded to `s`, then scaled; PASA:
      // S' = Q·K'ᵀ from the rounded K' (q·dK), rounded to `s`.
      for (std::size_t j = 0; j < nblocks; ++j) {
        const std::size_t k0 = j * opt.s2, k1 = std::min(Skv, k0 + opt.s2);
        double qkbar = 0;
        for (std::size_t d = 0; d < D; ++d) qkbar += q[d] * kbar[j * D + d];
        double msum = 0;
        for (std::size_t k = k0; k < k1; ++k) {
          double S = 0;
          for (std::size_t d = 0; d < D; ++d) S += q[d] * K[k * D + d];
          s[k] = S * scale;
          if (opt.pasa) {
            const double Sp = (S - beta * qkbar) * scale;  // S' (Eq. 12)
            msum += Sp;
            double qdk = 0;
            for (std::size_t d = 0; d < D; ++d) qdk += q[d] * dK[k * D + d];
            eta[k] = qdk + err(Sp + qdk, fs);
            if (std::fabs(Sp) > fs.max_finite()) hs.overflow = true;
          } else {
            // S rounded to `s`, then its product with 1/α rounded to `scale` (|s| ≈ 1e4 at x0 = 30: fp32's
            // spacing there is 1e-3, visible once V's mean no longer dominates ‖O‖).
            const double Sr = round(S, fs);
            eta[k] = (Sr - S) * scale + err(Sr * scale, fscale);
            if (std::fabs(S) > fs.max_finite()) hs.overflow = true;
          }
        }
        mean[j] = msum / static_cast<double>(k1 - k0);
      }
      const double M = *std::max_element(s.begin(), s.end());
      double L = 0, run = -INFINITY;
      std::fill(Bj.begin(), Bj.end(), 0.0);
      for (std::size_t j = 0; j < nblocks; ++j) {
        const std::size_t k0 = j * opt.s2, k1 = std::min(Skv, k0 + opt.s2);
        double W = 0;
        for (std::size_t k = k0; k < k1; ++k) {
          w[k] = std::exp(s[k] - M);
          W += w[k];
          run = std::max(run, s[k]);
          for (std::size_t d = 0; d < D; ++d) Bj[j * D + d] += w[k] * V[k * D + d];
        }
        Wj[j] = W;
        Mj[j] = run;  // the running maximum after block j: the frame of O_j, l_j and of block j's P
        L += W;
      }
      double on2 = 0;
      for (std::size_t d = 0; d < D; ++d) {
        double a = 0;
        for (std::size_t j = 0; j < nblocks; ++j) a += Bj[j * D + d];
        O[d] = a / L;
        on2 += O[d] * O[d];
      }
      hs.norm2 += on2;
      ++hs.rows;
      std::fill(dS.begin(), dS.end(), 0.0);
      std::fill(dB.begin(), dB.end(), 0.0);
      std::fill(dP.begin(), dP.end(), 0.0);
      std::fill(dOo.begin(), dOo.end(), 0.0);
      std::fill(E.begin(), E.end(), 0.0);
      double dL = 0, Lrun = 0, Fsum = 0;
      for (std::size_t j = 0; j < nblocks; ++j) {
        const std::size_t k0 = j * opt.s2, k1 = std::min(Skv, k0 + opt.s2);
        const double back = std::exp(Mj[j] - M);  // own frame → final frame
        for (std::size_t k = k0; k < k1; ++k) {
          // An exponent error η_k moves key k's weight: ΔO = (w_k/L)·η_k·(v_k − O).
          const double a = w[k] / L * eta[k];
          // P = e^{s_k − M_j} rounded (exp and p stages): in O only (l from the unrounded P) or in both.
          const double pk = std::exp(s[k] - Mj[j]), c = err(pk, fp) * back / L;
          for (std::size_t d = 0; d < D; ++d) {
            const double v = V[k * D + d];
            dS[d] += a * (v - O[d]);
            dP[d] += c * (weight_form ? v - O[d] : v);
          }
        }
        // Block-level exponent error δ_j. PASA (FA2 form): the recovered bias Inva·S̄'_j from the stored S̄'
        // (its error times Inva: β·u·|S̄|/α), the correction Δm'_j = Inva·(S̄'_j − F^j) and the exp shift
        // m_j − Δm'_j = M_j − Inva·S̄'_j rounded; the common part of the δ_j cancels. FA: the shift M_j.
        double delta, delta_s = 0;
        if (opt.pasa) {
          // S̄'_j is the mean of the STORED S' (and K'): their errors' block mean enters multiplied by Inva.
          double esum = 0;
          for (std::size_t k = k0; k < k1; ++k) esum += eta[k];
          const double emean = esum / static_cast<double>(k1 - k0);
          const double mq = round(mean[j] + emean, fmean);
          Fsum += mq;
          const double F = Fsum / static_cast<double>(j + 1);  // Eq. 15 on the stored means
          delta = inva * (mq - mean[j] - emean) + err(inva * (mq - F), fmean) - err(Mj[j] - inva * mq, fmax);
          delta_s = inva * emean;
        } else {
          delta = -err(Mj[j], fmax);
        }
        const double Wl = Wj[j] / L;
        hs.max_delta = std::max(hs.max_delta, std::fabs(delta + delta_s));
        for (std::size_t k = k0; k < k1; ++k) hs.max_eta = std::max(hs.max_eta, std::fabs(eta[k]));
        for (std::size_t d = 0; d < D; ++d) {
          const double dev = Bj[j * D + d] / Wj[j] - O[d];
          dB[d] += Wl * delta * dev;
          dS[d] += Wl * delta_s * dev;  // the score errors again, through the recovered bias
        }
        // o and l: the block's P·V product and the running O, l' and l, each rounded in its own frame.
        Lrun += Wj[j];
        for (std::size_t d = 0; d < D; ++d) {
          E[d] += Bj[j * D + d];
          dOo[d] += (err(Bj[j * D + d] / back, fpv) + err(E[d] / back, fo)) * back / L;
        }
        dL += (err(Wj[j] / back, fsum) + err(Lrun / back, fsum)) * back;
      }
      for (std::size_t d = 0; d < D; ++d) {
        hs.scores += dS[d] * dS[d];
        hs.block_mean += dB[d] * dB[d];
        hs.p += dP[d] * dP[d];
        hs.o += dOo[d] * dOo[d];
        const double dl = O[d] * dL / L;
        hs.l += dl * dl;
        const double e = err(O[d], fout);
        hs.out += e * e;
      }
    }
  });
  ErrorPrediction r;
  for (const HeadSums& hs : sums) {  // in head order: the same sums whatever the thread count
    r.scores += hs.scores;
    r.block_mean += hs.block_mean;
    r.p += hs.p;
    r.o += hs.o;
    r.l += hs.l;
    r.out += hs.out;
    r.norm2 += hs.norm2;
    r.rows += hs.rows;
    r.overflow = r.overflow || hs.overflow;
    r.max_score_shift = std::max(r.max_score_shift, hs.max_eta);
    r.max_block_shift = std::max(r.max_block_shift, hs.max_delta);
  }
  return r;
}

}  // namespace pasa
