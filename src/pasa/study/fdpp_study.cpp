#include "pasa/study/fdpp_study.hpp"

#include <algorithm>
#include <cmath>

#include "pasa/attention/algorithm.hpp"
#include "pasa/exact/golden.hpp"
#include "pasa/exact/metrics.hpp"
#include "pasa/inputs/generators.hpp"
#include "pasa/io/csv.hpp"
#include "pasa/core/error.hpp"
#include "pasa/core/memory.hpp"
#include "pasa/study/sweep.hpp"

namespace pasa {
namespace {

struct Dist {
  const char* name;
  TensorGen q, k, v;
};

std::vector<Dist> distributions() {
  TensorGen uni{GenKind::uniform, 0.5, 1};  // PASA Eq. 17
  TensorGen hyb{GenKind::hybrid, 0, 10};    // PASA Eq. 18: N(0, 1) + rare N(0, 100) outliers
  hyb.p = 0.001;
  TensorGen rq{GenKind::resonance, 0, 1}, rk = rq;  // PASA §3.3.2: Q and K in phase along D
  rq.noise = rk.noise = 0.5;
  rk.seq_bias = 2;
  TensorGen v{GenKind::uniform, 0, 1};
  return {{"uniform", uni, uni, v}, {"hybrid", hyb, hyb, v}, {"resonance", rq, rk, v}};
}

ProblemSpec problem(const Dist& d, std::size_t skv, std::size_t sq, std::uint64_t seed) {
  ProblemSpec p;
  p.B = 16;
  p.Nq = p.Nkv = 8;
  p.Sq = sq;
  p.Skv = skv;
  p.D = 128;
  p.seed = seed;
  p.q = d.q;
  p.k = d.k;
  p.v = d.v;
  return p;
}

// The scaled scores q·k/√D (in double: a calibration, not a bound) and their 0.005 % and 99.995 % quantiles.
std::pair<double, double> range_9999(const AttentionInputs& in) {
  std::vector<double> x;
  const Shape& q = in.q.shape;
  const double scale = in.effective_scale();
  for (std::size_t b = 0; b < q.B; ++b)
    for (std::size_t h = 0; h < q.N; ++h)
      for (std::size_t i = 0; i < q.S; ++i)
        for (std::size_t j = 0; j < in.k.shape.S; ++j) {
          double s = 0;
          for (std::size_t d = 0; d < q.D; ++d) s += in.q.at(b, h, i, d) * in.k.at(b, h / in.group(), j, d);
          x.push_back(s * scale);
        }
  std::sort(x.begin(), x.end());
  const std::size_t tail = x.size() / 20000;  // 0.005 % on each side
  return {x[tail], x[x.size() - 1 - tail]};
}

}  // namespace

std::size_t fdpp_study_bytes(const std::vector<std::size_t>& lengths, int threads) {
  std::size_t need = 0;
  const Dist d = distributions().front();  // the shapes do not depend on the distribution
  for (std::size_t skv : lengths) {
    if (skv == 0) throw InputError("--lengths: a KV length must be at least 1");
    // The calibration (Sq 16): its inputs and every scaled score as a double; then the run (Sq 1): the
    // golden first, then fa2 and fdpp (case_memory_bytes, as a sweep sizes a case).
    const ProblemSpec cal = problem(d, skv, 16, 1), run = problem(d, skv, 1, 2);
    const std::size_t calibration =
        sat_add(inputs_bytes(cal), sat_product(sizeof(double), cal.B, cal.Nq, cal.Sq, cal.Skv));
    AlgorithmSpec fa2;
    fa2.name = "fa2";
    fa2.alloc = allocation_preset("fa_fp16_fp32");
    fa2.s1 = 1;
    AlgorithmSpec fdpp = fa2;
    fdpp.name = "fdpp";
    need = std::max({need, calibration, case_memory_bytes(run, {fa2, fdpp}, GoldenOptions{128, threads}, true)});
  }
  return need;
}

std::vector<FdppRow> fdpp_study(const std::vector<std::size_t>& lengths, int threads) {
  std::vector<FdppRow> rows;
  for (const Dist& d : distributions())
    for (std::size_t skv : lengths) {
      const auto [lo, hi] = range_9999(generate_inputs(problem(d, skv, 16, 1), threads));
      const AttentionInputs in = generate_inputs(problem(d, skv, 1, 2), threads);
      const Golden g = golden_attention(in, GoldenOptions{128, threads});
      for (const char* alloc : {"fa_fp16_fp32", "fa_fp16"}) {
        AlgorithmSpec fa2;
        fa2.name = "fa2";
        fa2.alloc = allocation_preset(alloc);
        fa2.s1 = 1;
        fa2.s2 = 128;
        const Metrics mf = compare_outputs(run_attention(in, fa2, threads).o, g.o);
        const std::pair<const char*, double> phis[] = {{"lo", lo}, {"mid", (lo + hi) / 2}, {"hi", hi}};
        for (const auto& [choice, phi] : phis) {
          AlgorithmSpec s = fa2;
          s.name = "fdpp";
          s.fdpp = FdppOptions{phi, lo - phi, hi - phi};
          const AttentionOutput out = run_attention(in, s, threads);
          const Metrics m = compare_outputs(out.o, g.o);
          FdppRow r;
          r.distribution = d.name;
          r.skv = skv;
          r.alloc = alloc;
          r.phi_choice = choice;
          r.phi = phi;
          r.x_lo = lo;
          r.x_hi = hi;
          r.recomputed_pct = 100.0 * static_cast<double>(out.recomputed_rows) / static_cast<double>(m.rows);
          r.rmse = m.rmse;
          r.nan_pct = m.nan_pct;
          r.rmse_fa2 = mf.rmse;
          r.nan_pct_fa2 = mf.nan_pct;
          rows.push_back(r);
        }
      }
    }
  return rows;
}

std::vector<std::string> fdpp_csv_header() {
  return {"distribution", "skv", "alloc", "phi_choice", "phi", "x_lo", "x_hi", "recomputed_pct", "rmse", "nan_pct",
          "rmse_fa2", "nan_pct_fa2"};
}

std::vector<std::string> fdpp_csv_row(const FdppRow& r) {
  return {r.distribution, std::to_string(r.skv), r.alloc, r.phi_choice, csv_number(r.phi), csv_number(r.x_lo),
          csv_number(r.x_hi), csv_number(r.recomputed_pct), csv_number(r.rmse), csv_number(r.nan_pct),
          csv_number(r.rmse_fa2), csv_number(r.nan_pct_fa2)};
}

}  // namespace pasa
