// pasa-attn: run one attention algorithm on generated or .npy inputs and measure it against the golden.
// Only parses arguments and calls the library.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "pasa/attention/algorithm.hpp"
#include "pasa/attention/unified.hpp"
#include "library_names.hpp"
#include "pasa/core/error.hpp"
#include "pasa/inputs/generators.hpp"
#include "pasa/io/problem_json.hpp"
#include "pasa/exact/baseline.hpp"
#include "pasa/exact/golden.hpp"
#include "pasa/io/json_check.hpp"
#include "pasa/exact/metrics.hpp"
#include "pasa/io/tensor_io.hpp"
#include "pasa/io/algorithm_json.hpp"
#include "pasa/io/metrics_json.hpp"
#include "pasa/io/csv.hpp"
#include "pasa/io/npy.hpp"
#include "pasa/io/user_tensors.hpp"
#include "pasa/core/memory.hpp"
#include "pasa/study/range_stats.hpp"
#include "pasa/study/sweep.hpp"

using namespace pasa;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string num(double x) { return fmt::format("{:.6g}", x); }

// validate_case's messages start with a pointer inside the algorithm JSON; `source` names where it came from.
void validate_case_from(const CaseLayout& c, const AlgorithmSpec& a, const std::string& source) {
  try {
    validate_case(c, a);
  } catch (const InputError& e) {
    throw InputError(source + e.what());
  }
}

void validate_unified_from(const ProblemSpec& p, const AlgorithmSpec& a, const std::string& source) {
  try {
    validate_unified(p, a);
  } catch (const InputError& e) {
    throw InputError(source + e.what());
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Run one attention algorithm and compare it with the MPFR golden (PASA Eq. 19 metrics)"};
  // Algorithm
  std::string algorithm = "fa2", alloc = "fa_fp16_fp32", algo_json;
  std::size_t s1 = 128, s2 = 128;
  double beta = PasaOptions{}.beta;
  auto* o_algo = app.add_option("--algorithm", algorithm, "algorithm: " + fmt::format("{}", fmt::join(algorithm_names(), ", ")));
  auto* o_alloc = app.add_option("--alloc", alloc, "precision allocation preset: " +
                                                        fmt::format("{}", fmt::join(allocation_preset_names(), ", ")))
                      ->check(pasa_apps::library_name(allocation_preset));
  auto* o_s1 = app.add_option("--s1", s1, "query block size (clamped to Sq)")->check(pasa_apps::unsigned_integer(1));
  auto* o_s2 = app.add_option("--s2", s2, "key/value block size (clamped to Skv)")->check(pasa_apps::unsigned_integer(1));
  auto* o_beta = app.add_option("--beta", beta, "PASA shifting coefficient β (algorithm pasa only)")
                     ->check(pasa_apps::finite_number());
  auto* o_algo_json = app.add_option("--algo-json", algo_json, "algorithm JSON file (instead of the options above)");
  for (auto* o : {o_algo, o_alloc, o_s1, o_s2, o_beta}) o->excludes(o_algo_json);
  // Problem: a JSON file, generator options, or .npy tensors
  std::string problem_file, q_file, k_file, v_file, input_format;
  ProblemSpec spec;
  std::string kind = "uniform";
  TensorGen gen;
  double phase_lag = 0;
  auto* o_problem = app.add_option("--problem", problem_file, "problem JSON file (shape, format, generators; \"kind\": \"paged\": a paged KV cache)");
  auto* o_q = app.add_option("--q", q_file, "Q from .npy: (S,D), (N,S,D) or (B,N,S,D)");
  auto* o_k = app.add_option("--k", k_file, "K from .npy");
  auto* o_v = app.add_option("--v", v_file, "V from .npy");
  app.add_option("--input-format", input_format,
                 "format of the .npy inputs: required for uint8/uint16 bit patterns; float values are rounded to it")
      ->check(pasa_apps::library_name(format_by_name));
  o_q->needs(o_k)->needs(o_v)->excludes(o_problem);
  o_k->needs(o_q);
  o_v->needs(o_q);
  std::vector<CLI::Option*> gen_opts = {
      app.add_option("--batch", spec.B, "B")->check(pasa_apps::unsigned_integer(1)),
      app.add_option("--heads", spec.Nq, "query heads Nq")->check(pasa_apps::unsigned_integer(1)),
      app.add_option("--kv-heads", spec.Nkv, "key/value heads Nkv (default Nq)")->check(pasa_apps::unsigned_integer(1)),
      app.add_option("--seq", spec.Sq, "query length Sq")->check(pasa_apps::unsigned_integer(1)),
      app.add_option("--kv-seq", spec.Skv, "key/value length Skv (default Sq)")->check(pasa_apps::unsigned_integer(1)),
      app.add_option("--dim", spec.D, "head dimension D")->check(pasa_apps::unsigned_integer(1)),
      app.add_option("--format", spec.format, "input storage format")->check(pasa_apps::library_name(format_by_name)),
      app.add_option("--seed", spec.seed, "problem seed (0 .. 2^64-1)")->check(pasa_apps::unsigned_integer()),
      app.add_option("--gen", kind, "generator: uniform (Eq. 17), hybrid (Eq. 18), resonance (§3.3.2)"),
      app.add_option("--x0", gen.x0, "generator centre / offset")->check(pasa_apps::finite_number()),
      app.add_option("--am", gen.am, "uniform half-width, hybrid outlier std, resonance amplitude")
          ->check(pasa_apps::finite_number()),
      app.add_option("--p", gen.p, "hybrid outlier probability")->check(pasa_apps::finite_number()),
      app.add_option("--wavelength", gen.wavelength, "resonance wavelength along D")->check(pasa_apps::finite_number()),
      app.add_option("--phase-lag", phase_lag, "resonance: phase of K relative to Q in degrees (0 or 180)")
          ->check(pasa_apps::finite_number()),
      app.add_option("--seq-bias", gen.seq_bias, "resonance: bias growing along the sequence")
          ->check(pasa_apps::finite_number()),
      app.add_option("--noise", gen.noise, "resonance: Gaussian noise std")->check(pasa_apps::finite_number())};
  for (auto* o : gen_opts) o->excludes(o_problem)->excludes(o_q);
  // The user's decode tensors ([IFA] pse, atten_mask, kv_len), with .npy or generated Q/K/V (with --problem:
  // its "pse"/"select"/"kv_len" {"npy": file} keys)
  std::string pse_file, select_file, kv_len_file;
  double select_value = ProblemSpec{}.select_value;
  auto* o_pse = app.add_option("--pse", pse_file, "position bias from .npy: (B or 1, Nq, Sq, Skv) float values");
  auto* o_select = app.add_option("--select", select_file,
                                  "select mask from .npy: bool (B, Sq, Skv) or (B, Nq, Sq, Skv), True = score replaced");
  auto* o_select_value = app.add_option("--select-value", select_value, "the score of a selected key (default -1e12)")
                             ->check(pasa_apps::finite_number());
  auto* o_kv_len = app.add_option("--kv-len", kv_len_file, "valid keys per batch from .npy: integers (B,)");
  o_select_value->needs(o_select);
  for (auto* o : {o_pse, o_select, o_select_value, o_kv_len}) o->excludes(o_problem);
  double scale = 0;
  bool causal = false;
  auto* o_scale = app.add_option("--scale", scale, "softmax scale (default 1/sqrt(D))")->check(pasa_apps::finite_number());
  auto* o_causal = app.add_flag("--causal", causal, "causal mask (aligned to the end, as in decode)");
  o_scale->excludes(o_problem);
  o_causal->excludes(o_problem);
  // Outputs
  bool json = false, allow_nonfinite = false;
  int threads = default_threads(), precision_bits = 128;
  std::string score_format = "fp16", out_npy, golden_npy, max_memory;
  app.add_flag("--json", json, "print the results as JSON instead of a table");
  app.add_flag("--allow-nonfinite", allow_nonfinite,
               "accept NaN/inf input elements (the golden is then what IEEE arithmetic on the exact values gives)");
  app.add_option("--threads", threads, "threads")->check(pasa_apps::thread_count());
  app.add_option("--precision-bits", precision_bits, "MPFR precision of the golden")->check(CLI::Range(106, 100000));
  app.add_option("--max-memory", max_memory, "memory the run may use, e.g. 64G (default: MemAvailable)");
  app.add_option("--score-format", score_format, "format for the score overflow counts")
      ->check(pasa_apps::library_name(format_by_name));
  bool ranges = false;
  app.add_flag("--ranges", ranges,
               "also K, K', S, S' ranges per head and the overflow counts of S and PASA's S' in --score-format "
               "(β and s2 of the algorithm, or PASA's defaults)");
  app.add_option("--out-npy", out_npy, "write the algorithm's output as float64 .npy");
  app.add_option("--golden-npy", golden_npy, "write the golden output as float64 .npy");
  app.set_version_flag("--version", "pasa-attn " PASA_VERSION);  // the CMake project version, as pasa.__version__
  bool list_algorithms = false;
  app.add_flag("--list-algorithms", list_algorithms, "print the algorithm registry as a markdown table and exit");
  PASA_CLI_PARSE(app, argc, argv);
  if (list_algorithms) {
    std::fputs(algorithm_table_markdown().c_str(), stdout);
    return 0;
  }

  try {
    // Everything is checked before anything is computed or written: the algorithm, the outputs, the size.
    AlgorithmSpec algo;
    if (!algo_json.empty()) {
      algo = algorithm_from_json(read_json_file(algo_json), algo_json + ":");
    } else {
      nlohmann::json j = {{"name", algorithm}, {"alloc", alloc}, {"s1", s1}, {"s2", s2}};
      const pasa::AlgorithmInfo* info = pasa::find_algorithm(algorithm);
      if ((info && info->pasa_options) || app.count("--beta") > 0) j["pasa"] = {{"beta", beta}};
      algo = algorithm_from_json(j, "command line");
    }
    const std::string algo_source = algo_json.empty() ? "command line: " : algo_json + ":";
    check_output_paths({{"--out-npy", out_npy}, {"--golden-npy", golden_npy}});
    const std::size_t memory_limit = max_memory.empty() ? 0 : parse_byte_size(max_memory, "--max-memory");
    GoldenOptions gopt;
    gopt.threads = threads;
    gopt.precision_bits = precision_bits;
    std::size_t memory_estimate = 0;
    auto check_size = [&](const ProblemSpec& p) {
      memory_estimate = case_memory_bytes(p, {algo}, gopt, false);
      check_memory(memory_estimate, memory_limit, "this problem",
                   fmt::format("Q ({}, {}, {}, {}), K/V ({}, {}, {}, {}), {} threads", p.B, p.Nq, p.Sq, p.D, p.B, p.Nkv,
                               p.Skv, p.D, threads));
    };
    // Inputs (a paged problem: the batch over its KV cache, attention/unified.hpp)
    AttentionInputs in;
    PagedBatch pb;
    nlohmann::json problem_json;
    if (!q_file.empty()) {
      // Everything from the headers before any data are read: the three shapes against each other, the
      // algorithm against them, the size (the tensors as doubles, plus the reading buffer of the largest file:
      // its bytes are held while they are decoded).
      std::unique_ptr<Format> f;
      if (!input_format.empty()) f = std::make_unique<Format>(format_by_name(input_format));
      const std::array<TensorHeader, 3> h = read_qkv_headers(q_file, k_file, v_file, f.get());
      const CaseLayout layout{h[0].shape, h[1].shape, h[0].format, h[1].format, h[2].format};
      validate_case_from(layout, algo, algo_source);
      ProblemSpec shape;
      shape.B = layout.q.B, shape.Nq = layout.q.N, shape.Sq = layout.q.S, shape.D = layout.q.D;
      shape.Nkv = layout.kv.N, shape.Skv = layout.kv.S;
      shape.format = h[0].format.name;
      std::size_t largest_file = 0;
      for (const TensorHeader& t : h) largest_file = std::max(largest_file, t.data_bytes);
      memory_estimate = case_memory_bytes(shape, {algo}, gopt, false, largest_file);
      check_memory(memory_estimate, memory_limit, "this problem",
                   fmt::format("Q ({}, {}, {}, {}) and K/V ({}, {}, {}, {}) from .npy, {} threads", shape.B, shape.Nq,
                               shape.Sq, shape.D, shape.B, shape.Nkv, shape.Skv, shape.D, threads));
      LoadedTensor lq = load_tensor(q_file, f.get()), lk = load_tensor(k_file, f.get()), lv = load_tensor(v_file, f.get());
      in.q = std::move(lq.tensor);  // (moved: a copy held every input twice)
      in.k = std::move(lk.tensor);
      in.v = std::move(lv.tensor);
      in.scale = scale;
      in.mask.causal = causal;
      in.allow_nonfinite = allow_nonfinite;
      const UserTensorDims dims{in.q.shape.B, in.q.shape.N, in.q.shape.S, in.k.shape.S};
      if (!pse_file.empty()) in.pse = load_pse_npy(pse_file, dims, "--pse");
      if (!select_file.empty()) in.mask.select = load_select_npy(select_file, dims, "--select");
      if (!kv_len_file.empty()) in.mask.kv_len = load_kv_len_npy(kv_len_file, dims, "--kv-len");
      in.mask.select_value = select_value;
      validate(in);
      problem_json = {{"q", q_file}, {"k", k_file}, {"v", v_file}, {"format", in.q.format.name},
                      {"rounded", lq.rounded + lk.rounded + lv.rounded}, {"scale", scale}, {"causal", causal}};
      if (!pse_file.empty()) problem_json["pse"] = pse_file;
      if (!select_file.empty()) problem_json["select"] = {{"npy", select_file}, {"value", select_value}};
      if (!kv_len_file.empty()) problem_json["kv_len"] = kv_len_file;
    } else {
      if (!problem_file.empty()) {
        // Relative .npy names inside it are resolved against its folder.
        spec = problem_from_json(read_json_file(problem_file), problem_file + ":",
                                 std::filesystem::path(problem_file).parent_path());
      } else {
        if (app.count("--kv-heads") == 0) spec.Nkv = spec.Nq;
        if (app.count("--kv-seq") == 0) spec.Skv = spec.Sq;
        gen.kind = gen_kind_by_name(kind);
        validate(gen, "command line: generator");  // "command line: generator/p: must lie in [0, 1] (got 2)"
        spec.q = spec.k = spec.v = gen;
        spec.k.phase_deg = gen.phase_deg + phase_lag;
        spec.scale = scale;
        spec.causal = causal;
        validate(spec);  // (the shape, before the tensors are checked against it)
        const UserTensorDims dims{spec.B, spec.Nq, spec.Sq, spec.Skv};
        if (!pse_file.empty()) {
          spec.pse_user = std::make_shared<const Tensor>(load_pse_npy(pse_file, dims, "--pse"));
          spec.pse_file = pse_file;
        }
        if (!select_file.empty()) {
          spec.select_user = std::make_shared<const std::vector<std::uint8_t>>(load_select_npy(select_file, dims, "--select"));
          spec.select_file = select_file;
          spec.select_value = select_value;
        }
        if (!kv_len_file.empty()) {
          spec.kv_len = load_kv_len_npy(kv_len_file, dims, "--kv-len");
          spec.kv_len_file = kv_len_file;
        }
      }
      if (allow_nonfinite) spec.allow_nonfinite = true;
      validate(spec);
      if (spec.paged) validate_unified_from(spec, algo, algo_source);
      else validate_case_from(case_layout(spec), algo, algo_source);
      check_size(spec);  // before a single element is generated
      if (spec.paged) pb = generate_paged(spec, threads);
      else in = generate_inputs(spec, threads);
      problem_json = to_json(spec);
    }
    const Format sfmt = format_by_name(score_format);
    std::vector<HeadRanges> head_ranges;  // before the run: inputs they refuse (masks) stop it early
    if (ranges) head_ranges = range_stats(in, algo.name == "pasa" ? algo.pasa.beta : PasaOptions{}.beta, algo.s2, sfmt, 0, threads);
    // Run
    auto t0 = std::chrono::steady_clock::now();
    const AttentionOutput out = spec.paged ? unified_attention(pb, algo, threads) : run_attention(in, algo, threads);
    const double t_algo = seconds_since(t0);
    t0 = std::chrono::steady_clock::now();
    const Golden golden = spec.paged ? unified_golden(pb, gopt) : golden_attention(in, gopt);
    const double t_golden = seconds_since(t0);
    const Metrics m =
        compare_outputs(out.o, golden.o, spec.paged ? unified_baseline(pb, threads) : uniform_baseline(in, threads));
    const ScoreStats st = spec.paged ? unified_score_stats(pb, sfmt, threads) : score_stats(in, sfmt, threads);
    // Both files or neither.
    std::vector<std::pair<std::filesystem::path, std::string>> files;
    auto npy_of = [](const Tensor& t) {
      return npy_file_bytes(make_npy(t.data, {t.shape.B, t.shape.N, t.shape.S, t.shape.D}, NpyDtype::f64));
    };
    if (!out_npy.empty()) files.emplace_back(out_npy, npy_of(out.o));
    if (!golden_npy.empty()) files.emplace_back(golden_npy, npy_of(golden.o));
    write_files_atomic(files);

    if (json) {
      nlohmann::json j = {{"problem", problem_json},
                          {"algorithm", to_json(algo)},
                          {"metrics", to_json(m)},
                          {"scores", to_json(st)},
                          {"golden", {{"guaranteed_bits", golden.guaranteed_bits}, {"used_mpfr", golden.used_mpfr},
                                      {"precision_bits", precision_bits}, {"seconds", t_golden}}},
                          {"algorithm_seconds", t_algo},
                          {"memory_estimate_bytes", memory_estimate}};
      if (ranges) {
        j["ranges"] = nlohmann::json::array();
        for (const HeadRanges& r : head_ranges) j["ranges"].push_back(to_json(r));
      }
      std::cout << j.dump(2) << "\n";
      return 0;
    }
    const Shape& s = spec.paged ? pb.q.shape : in.q.shape;
    if (spec.paged)
      fmt::print("problem      paged: {} sequences, Q ({}, {}, {}, {}), cache of {} blocks of {} tokens (Nkv {}), {}\n",
                 pb.seqs.size(), s.B, s.N, s.S, s.D, pb.cache.num_blocks, pb.cache.block_size, pb.cache.Nkv,
                 pb.cache.format.name);
    else
      fmt::print("problem      Q ({}, {}, {}, {}), K/V ({}, {}, {}, {}), {}{}\n", s.B, s.N, s.S, s.D, in.k.shape.B,
                 in.k.shape.N, in.k.shape.S, in.k.shape.D, in.q.format.name, in.mask.causal ? ", causal" : "");
    fmt::print("algorithm    {} / {} (s1 {}, s2 {}{}), {:.3f} s\n", algo.name, algo.alloc.name, algo.s1, algo.s2,
               algo.splits > 1 ? fmt::format(", {} KV splits", algo.splits) : "", t_algo);
    if (pasa::algorithm_info(algo.name).recomputes_rows)  // [FD++]: rows whose scores left (φ + a, φ + b), recomputed synchronised
      fmt::print("fdpp         phi {}, recomputed rows {} of {}\n", algo.fdpp.phi, out.recomputed_rows, s.B * s.N * s.S);
    fmt::print("golden       {} guaranteed bits{}, {:.3f} s\n", golden.guaranteed_bits,
               golden.used_mpfr ? " (MPFR)" : "", t_golden);
    fmt::print("{:<28}{}\n", "metric", "value");
    const std::pair<std::string, std::string> rows[] = {
        {"rmse (Eq. 19)", num(m.rmse)},
        {"rmse over finite elements", num(m.rmse_finite)},
        {"NaN %", num(m.nan_pct)},
        {"inf %", num(m.inf_pct)},
        {"rows with NaN/inf %", num(m.rows_with_nonfinite_pct)},
        {"max abs error", num(m.max_abs_err)},
        {"max rel error", num(m.max_rel_err)},
        {"cosine similarity", fmt::format("{:.17g}", m.cosine)},
        {"rmse of uniform weights", num(m.rmse_uniform_baseline)},
        {"rmse centred (mean of V)", num(m.rmse_centred)},
        {"skill (1 - rmse/uniform)", num(m.skill)},
        {"score min (scaled)", num(st.min)},
        {"score max (scaled)", num(st.max)},
        {"score min/max unscaled", num(st.min_unscaled) + " / " + num(st.max_unscaled)},
        {fmt::format("|QKᵀ| > {} max", st.format), std::to_string(st.over_max)},
        {"QKᵀ rounding to inf/NaN", std::to_string(st.overflow)},
        {"scaled rounding to inf/NaN", std::to_string(st.overflow_scaled)}};
    for (const auto& [k, v] : rows) fmt::print("{:<28}{}\n", k, v);
    if (ranges) {
      fmt::print("ranges per head (K' = M·K with 1/α, S = QKᵀ unscaled, S' = QK'ᵀ; overflow: rounds to inf in {})\n",
                 sfmt.name);
      fmt::print("{:>5} {:>5} {:>23} {:>23} {:>25} {:>23} {:>10} {:>10}\n", "batch", "head", "K", "K'", "S", "S'",
                 "S overfl.", "S' overfl.");
      auto range = [](double a, double b) { return fmt::format("[{:.4g}, {:.4g}]", a, b); };
      for (const HeadRanges& r : head_ranges)
        fmt::print("{:>5} {:>5} {:>23} {:>23} {:>25} {:>23} {:>10} {:>10}\n", r.batch, r.head, range(r.k_min, r.k_max),
                   range(r.kp_min, r.kp_max), range(r.s_min, r.s_max), range(r.sp_min, r.sp_max), r.s_overflow,
                   r.sp_overflow);
    }
    return 0;
  } catch (...) {
    return report_error("pasa-attn");
  }
}
