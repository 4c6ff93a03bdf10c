// pasa-attn: run one attention algorithm on generated or .npy inputs and measure it against the golden.
// Only parses arguments and calls the library.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <iostream>
#include <memory>
#include <mutex>

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "pasa/attention/algorithm.hpp"
#include "pasa/attention/unified.hpp"
#include "common_options.hpp"
#include "library_names.hpp"
#include "pasa/core/error.hpp"
#include "pasa/inputs/generators.hpp"
#include "pasa/io/problem_json.hpp"
#include "pasa/exact/baseline.hpp"
#include "pasa/exact/golden.hpp"
#include "pasa/exact/golden_compare.hpp"
#include "pasa/io/json_check.hpp"
#include "pasa/exact/metrics.hpp"
#include "pasa/io/tensor_io.hpp"
#include "pasa/io/algorithm_json.hpp"
#include "pasa/io/metrics_json.hpp"
#include "pasa/io/csv.hpp"
#include "pasa/io/npy.hpp"
#include "pasa/io/output_file.hpp"
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

// The problem: a JSON file, generator options, or .npy tensors, with the user's decode tensors ([IFA] pse,
// atten_mask, kv_len; with --problem: its "pse"/"select"/"kv_len" {"npy": file} keys).
struct ProblemOptions {
  std::string problem_file, q_file, k_file, v_file, input_format;
  ProblemSpec spec;
  std::string kind = "uniform";
  TensorGen gen;
  double phase_lag = 0;
  std::string pse_file, select_file, kv_len_file;
  double select_value = ProblemSpec{}.select_value;
  double scale = 0;
  bool causal = false;
  bool allow_nonfinite = false;

  void add(CLI::App& app) {
    auto* o_problem = pasa_apps::add_problem(app, problem_file);
    auto* o_q = app.add_option("--q", q_file, "Q from .npy: (S,D), (N,S,D) or (B,N,S,D)");
    auto* o_k = app.add_option("--k", k_file, "K from .npy");
    auto* o_v = app.add_option("--v", v_file, "V from .npy");
    app.add_option("--input-format", input_format,
                   "format of the .npy inputs: required for uint8/uint16 bit patterns; float values are rounded to it")
        ->check(pasa_apps::library_name(format_by_name, pasa_apps::format_names()));
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
        app.add_option("--format", spec.format, "input storage format")->check(pasa_apps::library_name(format_by_name, pasa_apps::format_names())),
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
    auto* o_pse = app.add_option("--pse", pse_file, "position bias from .npy: (B or 1, Nq, Sq, Skv) float values");
    auto* o_select = app.add_option("--select", select_file,
                                    "select mask from .npy: bool (B, Sq, Skv) or (B, Nq, Sq, Skv), True = score replaced");
    auto* o_select_value = app.add_option("--select-value", select_value, "the score of a selected key (default -1e12)")
                               ->check(pasa_apps::finite_number());
    auto* o_kv_len = app.add_option("--kv-len", kv_len_file, "valid keys per batch from .npy: integers (B,)");
    o_select_value->needs(o_select);
    for (auto* o : {o_pse, o_select, o_select_value, o_kv_len}) o->excludes(o_problem);
    auto* o_scale = app.add_option("--scale", scale, "softmax scale (default 1/sqrt(D))")->check(pasa_apps::finite_number());
    auto* o_causal = app.add_flag("--causal", causal, "causal mask (aligned to the end, as in decode)");
    o_scale->excludes(o_problem);
    o_causal->excludes(o_problem);
  }
};

using OutputPaths = std::vector<std::pair<std::string, std::filesystem::path>>;

// What is measured and written.
struct OutputOptions {
  bool json = false;
  int threads = default_threads(), precision_bits = 128;
  std::string score_format = "fp16", out_npy, golden_npy, max_memory;
  bool ranges = false;

  void add(CLI::App& app, bool& allow_nonfinite) {
    app.add_flag("--json", json, "print the results as JSON instead of a table");
    app.add_flag("--allow-nonfinite", allow_nonfinite,
                 "accept NaN/inf input elements (the golden is then what IEEE arithmetic on the exact values gives)");
    pasa_apps::add_threads(app, threads);
    app.add_option("--precision-bits", precision_bits, "MPFR precision of the golden")->check(CLI::Range(106, 100000));
    pasa_apps::add_max_memory(app, max_memory);
    app.add_option("--score-format", score_format, "format for the score overflow counts")
        ->check(pasa_apps::library_name(format_by_name, pasa_apps::format_names()));
    app.add_flag("--ranges", ranges,
                 "also K, K', S, S' ranges per head and the overflow counts of S and PASA's S' in --score-format "
                 "(β and s2 of the algorithm, or PASA's defaults)");
    app.add_option("--out-npy", out_npy, "write the algorithm's output as float64 .npy");
    app.add_option("--golden-npy", golden_npy, "write the golden output as float64 .npy");
  }
};

// The inputs, how to describe them in the JSON output, and the run's memory estimate (checked against the
// limit before a single element is read or generated).
struct Inputs {
  AttentionInputs in;
  PagedBatch pb;  // a paged problem ("kind": "paged"): the batch over its KV cache (attention/unified.hpp)
  bool paged = false;
  nlohmann::json problem_json;
  std::size_t memory_estimate = 0;
};

std::string shape_text(const ProblemSpec& p) {
  if (p.paged) {  // the cache, which num_blocks and the block tables size, not the batch's longest row
    const PagedLayout l = resolved(*p.paged, p.seed);
    std::size_t blocks = l.num_blocks;
    for (const PagedSequenceSpec& s : l.seqs)
      for (std::size_t b : s.block_table) blocks = std::max(blocks, b + 1);
    return fmt::format("paged KV cache of {} blocks x {} tokens x {} KV heads x D {} ({} sequences, {} query rows; "
                       "/num_blocks and /sequences/*/block_table size it)",
                       blocks, l.block_size, p.Nkv, p.D, l.seqs.size(), l.tokens());
  }
  return fmt::format("Q ({}, {}, {}, {}), K/V ({}, {}, {}, {})", p.B, p.Nq, p.Sq, p.D, p.B, p.Nkv, p.Skv, p.D);
}

// Q, K, V from .npy: everything from the headers before any data are read (the three shapes against each
// other, the algorithm against them, the size: the tensors at their format's width, plus, where a file is
// not mapped, the reading buffer of the largest file and its tensor as doubles, held while they are decoded).
Inputs npy_inputs(const ProblemOptions& po, const AlgorithmSpec& algo, const std::string& algo_source,
                  const GoldenOptions& gopt, std::size_t memory_limit, bool keep_golden) {
  std::unique_ptr<Format> f;
  if (!po.input_format.empty()) f = std::make_unique<Format>(format_by_name(po.input_format));
  const std::array<TensorHeader, 3> h = read_qkv_headers(po.q_file, po.k_file, po.v_file, f.get());
  const CaseLayout layout{h[0].shape, h[1].shape, h[0].format, h[1].format, h[2].format};
  pasa_apps::validate_case_from(layout, algo, algo_source);
  ProblemSpec shape;
  shape.B = layout.q.B, shape.Nq = layout.q.N, shape.Sq = layout.q.S, shape.D = layout.q.D;
  shape.Nkv = layout.kv.N, shape.Skv = layout.kv.S;
  shape.format = h[0].format.name;
  std::size_t largest_file = 0;  // (what reading a file holds beyond its tensor: none where it is mapped)
  for (const TensorHeader& t : h) largest_file = std::max(largest_file, narrow_reading_bytes(t));
  Inputs r;
  r.memory_estimate = case_memory_bytes(shape, {algo}, gopt, false, largest_file, keep_golden);
  check_memory(r.memory_estimate, memory_limit, "this problem",
               fmt::format("Q ({}, {}, {}, {}) and K/V ({}, {}, {}, {}) from .npy, {} threads", shape.B, shape.Nq,
                           shape.Sq, shape.D, shape.B, shape.Nkv, shape.Skv, shape.D, gopt.threads));
  // At the format's width, mapped in place where the files hold that storage (float16 as fp16).
  LoadedTensor lq = load_tensor_narrow(po.q_file, f.get()), lk = load_tensor_narrow(po.k_file, f.get()),
               lv = load_tensor_narrow(po.v_file, f.get());
  AttentionInputs& in = r.in;
  in.q = std::move(lq.tensor);  // (moved: a copy held every input twice)
  in.k = std::move(lk.tensor);
  in.v = std::move(lv.tensor);
  in.scale = po.scale;
  in.mask.causal = po.causal;
  in.allow_nonfinite = po.allow_nonfinite;
  const UserTensorDims dims{in.q.shape.B, in.q.shape.N, in.q.shape.S, in.k.shape.S};
  if (!po.pse_file.empty()) in.pse = load_pse_npy(po.pse_file, dims, "--pse");
  if (!po.select_file.empty()) in.mask.select = load_select_npy(po.select_file, dims, "--select");
  if (!po.kv_len_file.empty()) in.mask.kv_len = load_kv_len_npy(po.kv_len_file, dims, "--kv-len");
  in.mask.select_value = po.select_value;
  validate(in);
  r.problem_json = {{"q", po.q_file},          {"k", po.k_file},
                    {"v", po.v_file},          {"format", in.q.format.name},
                    {"rounded", lq.rounded + lk.rounded + lv.rounded}, {"scale", po.scale},
                    {"causal", po.causal}};
  if (!po.pse_file.empty()) r.problem_json["pse"] = po.pse_file;
  if (!po.select_file.empty()) r.problem_json["select"] = {{"npy", po.select_file}, {"value", po.select_value}};
  if (!po.kv_len_file.empty()) r.problem_json["kv_len"] = po.kv_len_file;
  return r;
}

// The problem from --problem (relative .npy names inside it resolved against its folder) or from the
// generator options and the user's decode tensors.
ProblemSpec problem_spec(const CLI::App& app, const ProblemOptions& po) {
  if (!po.problem_file.empty())
    return problem_from_json(pasa_apps::read_json_arg(po.problem_file, "--problem"), pasa_apps::json_source(po.problem_file) + ":",
                             std::filesystem::path(po.problem_file).parent_path());
  ProblemSpec spec = po.spec;
  if (app.count("--kv-heads") == 0) spec.Nkv = spec.Nq;
  if (app.count("--kv-seq") == 0) spec.Skv = spec.Sq;
  TensorGen gen = po.gen;
  gen.kind = gen_kind_by_name(po.kind);
  validate(gen, "command line: generator");  // "command line: generator/p: must lie in [0, 1] (got 2)"
  spec.q = spec.k = spec.v = gen;
  spec.k.phase_deg = gen.phase_deg + po.phase_lag;
  spec.scale = po.scale;
  spec.causal = po.causal;
  validate(spec);  // (the shape, before the tensors are checked against it)
  const UserTensorDims dims{spec.B, spec.Nq, spec.Sq, spec.Skv};
  if (!po.pse_file.empty()) {
    spec.pse_user = std::make_shared<const Tensor>(load_pse_npy(po.pse_file, dims, "--pse"));
    spec.pse_file = po.pse_file;
  }
  if (!po.select_file.empty()) {
    spec.select_user =
        std::make_shared<const std::vector<std::uint8_t>>(load_select_npy(po.select_file, dims, "--select"));
    spec.select_file = po.select_file;
    spec.select_value = po.select_value;
  }
  if (!po.kv_len_file.empty()) {
    spec.kv_len = load_kv_len_npy(po.kv_len_file, dims, "--kv-len");
    spec.kv_len_file = po.kv_len_file;
  }
  return spec;
}

// Generated inputs (a problem JSON or the generator options): checked, sized, then generated.
Inputs generated_inputs(const CLI::App& app, const ProblemOptions& po, const AlgorithmSpec& algo,
                        const std::string& algo_source, const GoldenOptions& gopt, std::size_t memory_limit,
                        const OutputPaths& outputs, bool keep_golden) {
  ProblemSpec spec = problem_spec(app, po);
  check_output_paths(outputs, problem_input_files(spec, po.problem_file));  // a problem's .npy and capture files
  if (po.allow_nonfinite) spec.allow_nonfinite = true;
  validate(spec);
  if (spec.paged) {
    try {
      validate_unified(spec, algo);
    } catch (const InputError& e) {
      throw InputError(algo_source + e.what());
    }
  } else {
    pasa_apps::validate_case_from(case_layout(spec), algo, algo_source);
  }
  Inputs r;
  r.paged = spec.paged.has_value();
  r.memory_estimate = case_memory_bytes(spec, {algo}, gopt, false, 0, keep_golden);
  check_memory(r.memory_estimate, memory_limit, "this problem",
               fmt::format("{}, {} threads", shape_text(spec), gopt.threads));  // before a single element is generated
  if (r.paged) r.pb = generate_paged(spec, gopt.threads);
  else r.in = generate_inputs(spec, gopt.threads, Storage::narrow);  // (at the format's width: inputs/tensor.hpp)
  r.problem_json = to_json(spec);
  return r;
}

// On a terminal (stderr), what a long run is doing: a status line per stage, and the golden's row blocks done
// with the time left (GoldenOptions::progress, called from the workers: the line is redrawn at most 5 times a
// second by whichever worker gets the lock), erased when the stage ends. Off a terminal (a pipe, a file, a
// job's log) nothing is printed: the output is the same with and without it.
class TerminalStatus {
 public:
  TerminalStatus() : on_(::isatty(STDERR_FILENO) == 1) {}
  ~TerminalStatus() { clear(); }  // (an exception too: the error message then starts its own line)
  TerminalStatus(const TerminalStatus&) = delete;
  TerminalStatus& operator=(const TerminalStatus&) = delete;
  bool on() const { return on_; }
  void stage(const char* what) const {
    if (!on_) return;
    std::fprintf(stderr, "\r\033[K[pasa-attn] %s ...", what);
    std::fflush(stderr);
  }
  void clear() const {
    if (!on_) return;
    std::fputs("\r\033[K", stderr);
    std::fflush(stderr);
  }
  std::function<void(std::size_t, std::size_t)> golden_progress() const {
    if (!on_) return {};
    struct State {
      std::mutex m;
      std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now(), last = t0;
    };
    auto st = std::make_shared<State>();
    return [st](std::size_t done, std::size_t total) {
      const std::unique_lock lock(st->m, std::try_to_lock);
      const auto now = std::chrono::steady_clock::now();
      if (!lock.owns_lock() || now - st->last < std::chrono::milliseconds(200)) return;
      st->last = now;
      const double elapsed = seconds_since(st->t0);
      std::fprintf(stderr, "\r\033[K[pasa-attn] golden: %zu/%zu row blocks (%.0f %%), %.1f s, about %.0f s left", done,
                   total, 100.0 * static_cast<double>(done) / static_cast<double>(total), elapsed,
                   elapsed * static_cast<double>(total - done) / static_cast<double>(done));
      std::fflush(stderr);
    };
  }

 private:
  bool on_;
};

// The run, the golden and what is measured of them.
struct Results {
  AttentionOutput out;
  Golden golden;
  Metrics metrics;
  ScoreStats scores;
  std::vector<HeadRanges> ranges;
  double t_algo = 0, t_golden = 0;
};

Results run_and_measure(const Inputs& inputs, const AlgorithmSpec& algo, const GoldenOptions& gopt,
                        const Format& score_format, bool ranges, bool keep_golden) {
  const AttentionInputs& in = inputs.in;
  const PagedBatch& pb = inputs.pb;
  const bool paged = inputs.paged;
  Results r;
  if (ranges && paged) throw InputError("--ranges: range statistics are for dense problems, not a paged one");
  if (ranges)  // before the run: inputs they refuse (masks, paged) stop it early
    r.ranges = range_stats(in, algorithm_info(algo.name).pasa_options ? algo.pasa.beta : PasaOptions{}.beta, algo.s2,
                           score_format, 0, gopt.threads);
  const TerminalStatus status;
  status.stage(("running " + algo.name).c_str());
  auto t0 = std::chrono::steady_clock::now();
  r.out = paged ? unified_attention(pb, algo, gopt.threads) : run_attention(in, algo, gopt.threads);
  r.t_algo = seconds_since(t0);
  status.stage("golden");
  t0 = std::chrono::steady_clock::now();
  if (paged) {
    r.golden = unified_golden(pb, gopt);  // (per sequence: no one count of row blocks to report)
    r.t_golden = seconds_since(t0);
    status.stage("metrics");
    r.metrics = compare_outputs(r.out.o, r.golden.o, unified_baseline(pb, gopt.threads));
  } else {  // the golden streamed into the metrics (whole only for --golden-npy)
    GoldenOptions g = gopt;
    g.progress = status.golden_progress();
    GoldenMetrics gm = compare_with_golden(in, {&r.out.o}, g, keep_golden);
    r.golden = std::move(gm.golden);
    r.metrics = gm.metrics[0];
    r.t_golden = gm.golden_seconds;
    status.stage("metrics");  // (the output's are done with the golden; the score statistics remain)
  }
  r.scores = paged ? unified_score_stats(pb, score_format, gopt.threads) : score_stats(in, score_format, gopt.threads);
  return r;
}

// --out-npy and --golden-npy: both files or neither.
void write_npy_outputs(const OutputOptions& oo, const Results& r) {
  std::vector<std::pair<std::filesystem::path, std::string>> files;
  auto npy_of = [](const Tensor& t) {
    return npy_file_bytes(make_npy(t.data, {t.shape.B, t.shape.N, t.shape.S, t.shape.D}, NpyDtype::f64));
  };
  if (!oo.out_npy.empty()) files.emplace_back(oo.out_npy, npy_of(r.out.o));
  if (!oo.golden_npy.empty()) files.emplace_back(oo.golden_npy, npy_of(r.golden.o));
  write_files_atomic(files);
}

void print_json(const Inputs& inputs, const AlgorithmSpec& algo, const Results& r, int precision_bits) {
  nlohmann::json j = {{"problem", inputs.problem_json},
                      {"algorithm", to_json(algo)},
                      {"metrics", to_json(r.metrics)},
                      {"scores", to_json(r.scores)},
                      {"golden", {{"guaranteed_bits", r.golden.guaranteed_bits}, {"used_mpfr", r.golden.used_mpfr},
                                  {"precision_bits", precision_bits}, {"seconds", r.t_golden}}},
                      {"algorithm_seconds", r.t_algo},
                      {"memory_estimate_bytes", inputs.memory_estimate}};
  if (!r.ranges.empty()) {
    j["ranges"] = nlohmann::json::array();
    for (const HeadRanges& h : r.ranges) j["ranges"].push_back(to_json(h));
  }
  std::cout << j.dump(2) << "\n";
}

void print_table(const Inputs& inputs, const AlgorithmSpec& algo, const Results& r, const Format& score_format) {
  const AttentionInputs& in = inputs.in;
  const PagedBatch& pb = inputs.pb;
  const Shape& s = inputs.paged ? pb.q.shape : in.q.shape;
  const Metrics& m = r.metrics;
  const ScoreStats& st = r.scores;
  if (inputs.paged)
    fmt::print("problem      paged: {} sequences, Q ({}, {}, {}, {}), cache of {} blocks of {} tokens (Nkv {}), {}\n",
               pb.seqs.size(), s.B, s.N, s.S, s.D, pb.cache.num_blocks, pb.cache.block_size, pb.cache.Nkv,
               pb.cache.format.name);
  else
    fmt::print("problem      Q ({}, {}, {}, {}), K/V ({}, {}, {}, {}), {}{}\n", s.B, s.N, s.S, s.D, in.k.shape.B,
               in.k.shape.N, in.k.shape.S, in.k.shape.D, in.q.format.name, in.mask.causal ? ", causal" : "");
  fmt::print("algorithm    {} / {} (s1 {}, s2 {}{}), {:.3f} s\n", algo.name, algo.alloc.name, algo.s1, algo.s2,
             algo.splits > 1 ? fmt::format(", {} KV splits", algo.splits) : "", r.t_algo);
  if (algorithm_info(algo.name).recomputes_rows)  // [FD++]: rows whose scores left (φ + a, φ + b), recomputed synchronised
    fmt::print("fdpp         phi {}, recomputed rows {} of {}\n", algo.fdpp.phi, r.out.recomputed_rows, s.B * s.N * s.S);
  fmt::print("golden       {} guaranteed bits{}, {:.3f} s\n", r.golden.guaranteed_bits,
             r.golden.used_mpfr ? " (MPFR)" : "", r.t_golden);
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
  if (r.ranges.empty()) return;
  fmt::print("ranges per head (K' = M·K with 1/α, S = QKᵀ unscaled, S' = QK'ᵀ; overflow: rounds to inf in {})\n",
             score_format.name);
  fmt::print("{:>5} {:>5} {:>23} {:>23} {:>25} {:>23} {:>10} {:>10}\n", "batch", "head", "K", "K'", "S", "S'",
             "S overfl.", "S' overfl.");
  auto range = [](double a, double b) { return fmt::format("[{:.4g}, {:.4g}]", a, b); };
  for (const HeadRanges& h : r.ranges)
    fmt::print("{:>5} {:>5} {:>23} {:>23} {:>25} {:>23} {:>10} {:>10}\n", h.batch, h.head, range(h.k_min, h.k_max),
               range(h.kp_min, h.kp_max), range(h.s_min, h.s_max), range(h.sp_min, h.sp_max), h.s_overflow,
               h.sp_overflow);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Run one attention algorithm and compare it with the MPFR golden (PASA Eq. 19 metrics)"};
  pasa_apps::AlgorithmOptions ao;
  ao.add(app, "fa2", "fa_fp16_fp32");
  ProblemOptions po;
  po.add(app);
  OutputOptions oo;
  oo.add(app, po.allow_nonfinite);
  pasa_apps::add_version(app, "pasa-attn");
  bool list_algorithms = false, list_kernels = false;
  app.add_flag("--list-algorithms", list_algorithms, "print the algorithm registry as a markdown table and exit");
  app.add_flag("--list-kernels", list_kernels, "print the kernel recipes as a markdown table and exit");
  PASA_CLI_PARSE(app, argc, argv);
  if (list_algorithms) {
    std::fputs(algorithm_table_markdown().c_str(), stdout);
    return 0;
  }
  if (list_kernels) {
    std::fputs(kernel_table_markdown().c_str(), stdout);
    return 0;
  }

  try {
    // Everything is checked before anything is computed or written: the algorithm, the outputs, the size.
    const AlgorithmSpec algo = ao.spec(app);
    const OutputPaths outputs = {{"--out-npy", oo.out_npy}, {"--golden-npy", oo.golden_npy}};
    check_output_paths(outputs, {{"--problem", po.problem_file}, {"--q", po.q_file}, {"--k", po.k_file},
                                 {"--v", po.v_file}, {"--pse", po.pse_file}, {"--select", po.select_file},
                                 {"--kv-len", po.kv_len_file}, {"--algo-json", ao.json_file}});
    if (app.count("--scale") > 0 && !(po.scale > 0))
      throw InputError(fmt::format("--scale {}: must be > 0; omit it for 1/sqrt(D)", po.scale));
    if (!po.input_format.empty() && po.q_file.empty())
      throw InputError("--input-format " + po.input_format +
                       ": applies to the .npy inputs of --q/--k/--v only; without them use --format (generated "
                       "inputs) or the problem's \"format\"");
    const std::size_t memory_limit = pasa_apps::max_memory_bytes(oo.max_memory);
    GoldenOptions gopt;
    gopt.threads = oo.threads;
    gopt.precision_bits = oo.precision_bits;
    const bool keep_golden = !oo.golden_npy.empty();  // (else the golden streams into the metrics)
    const Inputs inputs = po.q_file.empty()
                              ? generated_inputs(app, po, algo, ao.source(), gopt, memory_limit, outputs, keep_golden)
                              : npy_inputs(po, algo, ao.source(), gopt, memory_limit, keep_golden);
    const Format score_format = format_by_name(oo.score_format);
    const Results r = run_and_measure(inputs, algo, gopt, score_format, oo.ranges, keep_golden);
    write_npy_outputs(oo, r);
    if (oo.json) print_json(inputs, algo, r, oo.precision_bits);
    else print_table(inputs, algo, r, score_format);
    return 0;
  } catch (...) {
    return report_error("pasa-attn");
  }
}
