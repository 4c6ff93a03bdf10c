#include "pasa/study/range_stats.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "pasa/attention/algorithm.hpp"
#include "pasa/attention/algorithm_spec.hpp"
#include "pasa/core/error.hpp"
#include "pasa/core/parallel.hpp"
#include "pasa/inputs/generators.hpp"
#include "pasa/io/algorithm_json.hpp"
#include "pasa/io/problem_json.hpp"
#include "pasa/numeric/round.hpp"

namespace pasa {

std::vector<HeadRanges> range_stats(const AttentionInputs& in_any, double beta, std::size_t s2, const Format& score_format,
                                    std::size_t heads, int threads) {
  AttentionInputs wide;  // (reads Q, K and V as doubles: a narrow input widened)
  const AttentionInputs& in = wide_inputs(in_any, wide, threads);
  if (s2 == 0) throw InputError("range statistics: s2 must be at least 1");
  if (!in.mask.kv_len.empty() || !in.mask.keep.empty() || !in.mask.select.empty() || !in.pse.data.empty())
    throw InputError("range statistics: kv_len, masks other than causal, pse and select are not supported");
  const std::size_t B = in.q.shape.B, N = in.q.shape.N, Nkv = in.k.shape.N, Sq = in.q.shape.S, Skv = in.k.shape.S,
                    D = in.q.shape.D;
  const std::size_t group = N / Nkv;  // query heads per KV head (validate(): N is a multiple of Nkv)
  const std::size_t n = heads == 0 ? B * N : std::min(heads, N);
  const double scale = in.effective_scale();
  std::vector<HeadRanges> out(n);
  parallel_for(n, threads, [&](std::size_t hb) {
    const std::size_t b = hb / N, h = hb % N;
    const double *Q = in.q.head(b, h), *K = in.k.head(b, h / group);
    HeadRanges& r = out[hb];
    r.batch = b, r.head = h;
    // K' = (k − β·k̄_j)·scale per key block (Eq. 11 with M of Eq. 10).
    std::vector<double> Kp(Skv * D);
    for (std::size_t k0 = 0; k0 < Skv; k0 += s2) {
      const std::size_t k1 = std::min(Skv, k0 + s2);
      for (std::size_t d = 0; d < D; ++d) {
        double m = 0;
        for (std::size_t k = k0; k < k1; ++k) m += K[k * D + d];
        m /= static_cast<double>(k1 - k0);
        for (std::size_t k = k0; k < k1; ++k) Kp[k * D + d] = (K[k * D + d] - beta * m) * scale;
      }
    }
    const auto [kmin, kmax] = std::minmax_element(K, K + Skv * D);
    const auto [pmin, pmax] = std::minmax_element(Kp.begin(), Kp.end());
    r.k_min = *kmin, r.k_max = *kmax, r.kp_min = *pmin, r.kp_max = *pmax;
    r.s_min = r.sp_min = INFINITY;
    r.s_max = r.sp_max = -INFINITY;
    for (std::size_t i = 0; i < Sq; ++i)
      // causal: the visible keys only (aligned to the end, as the attention masks them)
      for (std::size_t k = 0; k < visible_end(in, b, i); ++k) {
        ++r.scores;
        double s = 0, sp = 0;
        for (std::size_t d = 0; d < D; ++d) {
          s += Q[i * D + d] * K[k * D + d];
          sp += Q[i * D + d] * Kp[k * D + d];
        }
        r.s_min = std::min(r.s_min, s), r.s_max = std::max(r.s_max, s);
        r.sp_min = std::min(r.sp_min, sp), r.sp_max = std::max(r.sp_max, sp);
        r.s_overflow += std::isinf(round(s, score_format)) ? 1 : 0;  // stored as ±inf (|x| >= 65520 in fp16)
        r.sp_overflow += std::isinf(round(sp, score_format)) ? 1 : 0;
      }
  });
  return out;
}

CsvRow range_columns() {
  return {"batch", "head", "k_min", "k_max", "kp_min", "kp_max", "s_min", "s_max", "sp_min", "sp_max",
          "scores", "s_overflow", "sp_overflow"};
}

CsvRow range_cells(const HeadRanges& r) {
  return {std::to_string(r.batch), std::to_string(r.head), csv_number(r.k_min), csv_number(r.k_max),
          csv_number(r.kp_min), csv_number(r.kp_max), csv_number(r.s_min), csv_number(r.s_max),
          csv_number(r.sp_min), csv_number(r.sp_max), std::to_string(r.scores), std::to_string(r.s_overflow),
          std::to_string(r.sp_overflow)};
}

nlohmann::json to_json(const HeadRanges& r) {
  return {{"batch", r.batch},     {"head", r.head},     {"k_min", r.k_min},   {"k_max", r.k_max},
          {"kp_min", r.kp_min},   {"kp_max", r.kp_max}, {"s_min", r.s_min},   {"s_max", r.s_max},
          {"sp_min", r.sp_min},   {"sp_max", r.sp_max}, {"scores", r.scores}, {"s_overflow", r.s_overflow},
          {"sp_overflow", r.sp_overflow}};
}

void sweep_shift(const SweepConfig& cfg, double& beta, std::size_t& s2) {
  beta = PasaOptions{}.beta, s2 = 128;
  const PlannedProblem pp = plan_problem(cfg, 0);
  for (std::size_t a = 0; a < pp.algorithms.size(); ++a) {
    const AlgorithmSpec spec = algorithm_from_json(pp.algorithms[a], "/algorithms/" + std::to_string(a));
    if (algorithm_info(spec.name).pasa_options) {
      beta = spec.pasa.beta, s2 = spec.s2;
      return;
    }
  }
}

std::string RangeTable::text() const {
  std::string out = csv_line(header);
  for (const auto& r : rows) out += csv_line(r);
  return out;
}

RangeTable sweep_ranges(const SweepConfig& cfg, std::size_t heads, int threads) {
  RangeTable out;
  out.header = {"problem_id", "grid_point", "seed"};
  for (const auto& a : cfg.grid) out.header.push_back(a.name);
  for (const auto& c : range_columns()) out.header.push_back(c);
  double beta = 0;
  std::size_t s2 = 0;
  sweep_shift(cfg, beta, s2);
  const Format sf = format_by_name(cfg.score_format);
  for (std::size_t i = 0; i < cfg.problem_count(); ++i) {
    const PlannedProblem pp = plan_problem(cfg, i);
    const std::string where = cfg.source + ":/problem";
    const ProblemSpec spec = problem_from_json(pp.problem, where);
    if (spec.paged)
      throw InputError(fmt::format("ranges ({}): range statistics are for dense problems, and {} is a paged one "
                                   "(\"kind\": \"paged\"); run the sweep without ranges",
                                   describe(cfg, pp), where));
    const AttentionInputs in = generate_inputs(spec, threads);
    for (const HeadRanges& r : range_stats(in, beta, s2, sf, heads, threads)) {
      CsvRow row = {std::to_string(pp.index), std::to_string(pp.grid_index), std::to_string(pp.seed)};
      for (const auto& v : pp.grid_values) row.push_back(v.is_string() ? v.get<std::string>() : v.dump());
      for (auto& c : range_cells(r)) row.push_back(std::move(c));
      out.rows.push_back(std::move(row));
    }
  }
  return out;
}

}  // namespace pasa
