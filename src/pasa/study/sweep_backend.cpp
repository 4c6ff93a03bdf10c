// The library backend of sweeps (library_backend: the inputs, golden, metrics and algorithms, each distinct
// problem computed once) and the memory one case needs (case_memory_bytes).
#include "pasa/study/sweep.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>

#include <fmt/format.h>

#include "pasa/attention/algorithm.hpp"
#include "pasa/attention/unified.hpp"
#include "pasa/core/memory.hpp"
#include "pasa/numeric/format.hpp"
#include "pasa/inputs/generators.hpp"
#include "pasa/io/problem_json.hpp"
#include "pasa/exact/baseline.hpp"
#include "pasa/exact/golden.hpp"
#include "pasa/exact/golden_compare.hpp"
#include "pasa/exact/metrics.hpp"
#include "pasa/io/algorithm_json.hpp"
#include "pasa/io/metrics_json.hpp"

namespace pasa {

using nlohmann::json;

namespace {

// Numeric (and boolean) leaves of a metrics JSON object as column names, "<prefix><key>"; text fields (like
// ScoreStats::format) are not metrics and stay out of the table.
void numeric_keys(const json& j, const std::string& prefix, std::vector<std::pair<std::string, json::json_pointer>>& out,
                  const json::json_pointer& ptr = json::json_pointer()) {
  for (const auto& [k, v] : j.items()) {
    if (v.is_object()) numeric_keys(v, prefix + k + ".", out, ptr / k);
    else if (v.is_number() || v.is_boolean()) out.emplace_back(prefix + k, ptr / k);
  }
}

// metrics' to_json writes non-finite numbers as the strings "nan", "inf", "-inf" (JSON has none).
double leaf_value(const json& j, const json::json_pointer& ptr) {
  const json& v = j.at(ptr);
  if (v.is_boolean()) return v.get<bool>() ? 1.0 : 0.0;
  if (v.is_number()) return v.get<double>();
  if (v == "inf") return INFINITY;
  if (v == "-inf") return -INFINITY;
  if (v == "nan") return NAN;
  throw std::logic_error("metric " + ptr.to_string() + " is not a number: " + v.dump());
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

std::size_t case_memory_bytes(const ProblemSpec& p, const std::vector<AlgorithmSpec>& algs, const GoldenOptions& go,
                              bool golden_first, std::size_t reading_bytes, bool keep_golden, bool score_stats) {
  if (p.paged) return unified_memory_bytes(p, algs, go);
  // Shared libraries, the heap's own overhead and thread stacks: measured as the peak of a tiny problem
  // (pasa-attn at (1, 1, 16, 16): 7.4 MiB on the 2-core host).
  constexpr std::size_t kProcessBase = std::size_t{8} << 20;
  const Shape q{p.B, p.Nq, p.Sq, p.D}, kv{p.B, p.Nkv, p.Skv, p.D};
  const Format f = format_by_name(p.format);
  const std::size_t out = sat_mul(sizeof(double), sat_add(sat_product(q.B, q.N, q.S, q.D), sat_product(q.B, q.N, q.S)));
  const std::size_t tensor = sat_mul(sizeof(double), sat_product(q.B, q.N, q.S, q.D));  // baseline
  std::size_t algo = 0;
  // (pasa-attn and the sweeps draw their inputs at the format's width; pasa-attribute and the fdpp study wide)
  const Storage storage = golden_first ? Storage::wide : Storage::narrow;
  for (const auto& a : algs) algo = std::max(algo, attention_bytes(q, kv, f, a, go.threads, storage == Storage::narrow));
  const std::size_t golden = golden_bytes(q, kv, go);
  const std::size_t scores = score_stats ? score_stats_bytes(q, kv, go.threads) : 0;
  const std::size_t n = std::max<std::size_t>(1, algs.size());
  std::size_t peak;
  if (golden_first) {  // pasa-attribute, the fdpp study: golden, baseline, score statistics, then the algorithms
    peak = std::max({golden, sat_add(sat_add(out, tensor), scores),
                     sat_add(sat_add(sat_mul(out, n), tensor), algo)});
  } else {  // pasa-attn, sweeps: the algorithms (outputs kept), then the golden streamed into their metrics
            // (compare_with_golden: a chunk of it and of the baseline at a time) and the score statistics
    const std::size_t cmp = compare_with_golden_bytes(q, kv, go, keep_golden);
    const std::size_t kept = keep_golden ? out : 0;
    peak = std::max(sat_add(sat_mul(out, n - 1), algo), sat_add(sat_mul(out, n), std::max(cmp, sat_add(kept, scores))));
  }
  return sat_add(kProcessBase, sat_add(inputs_bytes(p, storage), std::max(peak, reading_bytes)));
}

// The real backend: the generators, golden and metrics, and the algorithms. Metric columns are the numeric
// fields of to_json(ScoreStats) (prefixed "score_") and of to_json(Metrics), so new metrics appear in the
// table without changes here.
SweepBackend library_backend() {
  using Leaves = std::vector<std::pair<std::string, json::json_pointer>>;
  auto score_leaves = std::make_shared<Leaves>(), metric_leaves = std::make_shared<Leaves>();
  numeric_keys(to_json(ScoreStats{}), "score_", *score_leaves);
  numeric_keys(to_json(Metrics{}), "", *metric_leaves);
  SweepBackend b;
  for (const auto& l : *score_leaves) b.problem_columns.push_back(l.first);
  for (const auto& l : *metric_leaves) b.algorithm_columns.push_back(l.first);
  b.check_problem = [](const json& j, const std::string& path) { problem_from_json(j, path); };
  b.check_algorithm = [](const json& j, const std::string& path) { algorithm_from_json(j, path); };
  b.check_case = [](const json& problem, const json& algorithm, const std::string& path) {
    validate_case(problem_from_json(problem, "/problem"), algorithm_from_json(algorithm, path));
  };
  b.memory_bytes = [](const PlannedProblem& p, const SweepConfig& cfg, int threads) {
    std::vector<AlgorithmSpec> algs;
    for (std::size_t a = 0; a < p.algorithms.size(); ++a)
      algs.push_back(algorithm_from_json(p.algorithms[a], "/algorithms/" + std::to_string(a)));
    GoldenOptions go;
    go.precision_bits = cfg.golden_precision_bits;
    go.threads = threads;
    return case_memory_bytes(problem_from_json(p.problem, "/problem"), algs, go, false);
  };
  // The attention's work: query-key pairs of one head times heads and D (the golden and every algorithm
  // are proportional to it); once per grid point (plan_problem of its first seed), like validation.
  b.cost = [](const PlannedProblem& p, const SweepConfig&) {
    const ProblemSpec ps = problem_from_json(p.problem, "/problem");
    double pairs = 0;
    if (ps.paged) {
      for (const auto& q : ps.paged->seqs) pairs += static_cast<double>(q.q_len) * static_cast<double>(q.ctx_len);
    } else {
      for (std::size_t i = 0; i < ps.B; ++i)
        pairs += static_cast<double>(ps.Sq) * static_cast<double>(ps.kv_len.empty() ? ps.Skv : ps.kv_len[i]) * (ps.causal ? 0.5 : 1.0);
    }
    return pairs * static_cast<double>(ps.Nq) * static_cast<double>(ps.D);
  };
  // Results of the problems computed so far, by problem key (see library_backend in sweep.hpp).
  struct Computed {
    std::vector<double> values;  // algorithm metrics (the problem's score statistics are kept apart)
    double golden_s = 0, seconds = 0;
  };
  struct ProblemResults {
    std::mutex m;  // held while the problem is computed: a second request for it waits, then reuses it
    bool scored = false;
    std::vector<double> problem_values;        // the score statistics, problem_columns
    std::map<std::string, Computed> algorithms;  // by the algorithm's JSON
  };
  struct Cache {
    std::mutex m;
    std::map<std::string, std::shared_ptr<ProblemResults>> problems;
  };
  auto cache = std::make_shared<Cache>();
  b.run = [score_leaves, metric_leaves, cache](const PlannedProblem& p, const SweepConfig& cfg, const std::vector<bool>& wanted,
                                               int threads, const SweepBackend::Emit& emit) {
    // The key: everything the results depend on. The expanded problem and algorithm JSON (objects dump
    // with sorted keys) determine the inputs and the algorithm; the config adds the golden's precision and
    // the score format. A problem spelled differently (20 vs 20.0) misses and is computed again.
    const std::string key = fmt::format("{}\n{}\n{}", p.problem.dump(), cfg.golden_precision_bits, cfg.score_format);
    std::shared_ptr<ProblemResults> entry;
    {
      std::lock_guard<std::mutex> lock(cache->m);
      auto& e = cache->problems[key];
      if (!e) e = std::make_shared<ProblemResults>();
      entry = e;
    }
    std::lock_guard<std::mutex> lock(entry->m);
    auto emit_cached = [&](std::size_t a, const Computed& c) {
      std::vector<double> values = entry->problem_values;
      values.insert(values.end(), c.values.begin(), c.values.end());
      emit(a, values, c.golden_s, c.seconds);
    };
    std::vector<std::size_t> missing;
    for (std::size_t a = 0; a < wanted.size(); ++a) {
      if (!wanted[a]) continue;
      const auto it = entry->algorithms.find(p.algorithms[a].dump());
      if (it != entry->algorithms.end()) emit_cached(a, it->second);
      else missing.push_back(a);
    }
    if (missing.empty()) return;
    // A paged problem runs unified attention over its cache (attention/unified.hpp), the rest as for dense inputs.
    const ProblemSpec ps = problem_from_json(p.problem, "/problem");
    const PagedBatch pb = ps.paged ? generate_paged(ps, threads) : PagedBatch{};
    const AttentionInputs in = ps.paged ? AttentionInputs{} : generate_inputs(ps, default_threads(), Storage::narrow);
    GoldenOptions go;
    go.precision_bits = cfg.golden_precision_bits;
    go.threads = threads;
    if (!entry->scored) {
      const Format sf = format_by_name(cfg.score_format);
      const json scores = to_json(ps.paged ? unified_score_stats(pb, sf, threads) : score_stats(in, sf, threads));
      for (const auto& l : *score_leaves) entry->problem_values.push_back(leaf_value(scores, l.second));
      entry->scored = true;
    }
    // The algorithms, then their metrics against the golden (once per (grid point, seed), shared by the
    // algorithms): dense, the golden streamed into the comparison (compare_with_golden: neither it nor the
    // baseline is ever whole); paged, per sequence as unified_golden gives it. time_s is an algorithm's own
    // time plus its share of the comparison; golden_time_s the golden's own.
    std::vector<AttentionOutput> outs;
    std::vector<double> seconds;
    for (std::size_t a : missing) {
      const AlgorithmSpec spec = algorithm_from_json(p.algorithms[a], "/algorithms/" + std::to_string(a));
      const auto t1 = std::chrono::steady_clock::now();
      outs.push_back(ps.paged ? unified_attention(pb, spec, threads) : run_attention(in, spec, threads));
      seconds.push_back(seconds_since(t1));
    }
    std::vector<const Tensor*> os;
    for (const auto& o : outs) os.push_back(&o.o);
    std::vector<Metrics> metrics;
    double golden_s = 0, compare_s = 0;
    if (ps.paged) {
      const auto t0 = std::chrono::steady_clock::now();
      const Golden golden = unified_golden(pb, go);
      golden_s = seconds_since(t0);
      const auto t2 = std::chrono::steady_clock::now();
      metrics = compare_outputs(os, golden.o, unified_baseline(pb, threads), threads);
      compare_s = seconds_since(t2);
    } else {
      GoldenMetrics gm = compare_with_golden(in, os, go);
      metrics = std::move(gm.metrics);
      golden_s = gm.golden_seconds;
      compare_s = gm.compare_seconds;
    }
    compare_s /= static_cast<double>(missing.size());
    for (std::size_t i = 0; i < missing.size(); ++i) {
      const json m = to_json(metrics[i]);
      Computed c;
      c.seconds = seconds[i] + compare_s;
      c.golden_s = golden_s;
      for (const auto& l : *metric_leaves) c.values.push_back(leaf_value(m, l.second));
      const Computed& kept = entry->algorithms.emplace(p.algorithms[missing[i]].dump(), std::move(c)).first->second;
      emit_cached(missing[i], kept);
    }
  };
  return b;
}

}  // namespace pasa
