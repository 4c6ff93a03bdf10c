// The module's studies: GEMM under a model (as pasa-gemm), the beta solver (pasa-beta), error attribution
// (pasa-attribute), PASA's range statistics (pasa-attn --ranges) and sweeps (pasa-sweep).
#include <cstdio>

#include "module_support.hpp"
#include "pasa/analysis/attribution.hpp"
#include "pasa/analysis/beta_solver.hpp"
#include "pasa/inputs/generators.hpp"
#include "pasa/io/algorithm_json.hpp"
#include "pasa/io/analysis_report.hpp"
#include "pasa/io/problem_json.hpp"
#include "pasa/io/output_file.hpp"
#include "pasa/study/hardware_compare.hpp"
#include "pasa/study/range_stats.hpp"
#include "pasa/study/sweep.hpp"
#include "pasa/study/sweep_config.hpp"

namespace pasa_py {
namespace {

// C = A·B under a GEMM model, as pasa-gemm computes it (study/hardware_compare.hpp batched_gemm).
py::array_t<double> gemm_values(const py::object& a, const py::object& b, const std::optional<std::string>& a_format,
                                const std::optional<std::string>& b_format, const std::string& acc,
                                const std::string& out, const py::object& model) {
  const TensorArg ta(a, "a"), tb(b, "b");
  for (const TensorArg* t : {&ta, &tb})
    if (t->shape.size() != 2 && t->shape.size() != 3)
      throw InputError(fmt::format("{}: {} dimensions; expected (rows, columns) or (batch, rows, columns)", t->where,
                                   t->shape.size()));
  if (ta.shape.size() != tb.shape.size()) throw InputError("a, b: one is batched, the other not");
  std::unique_ptr<pasa::Format> fa, fb;
  if (a_format) fa = std::make_unique<pasa::Format>(named("a_format", *a_format, pasa::format_by_name));
  if (b_format) fb = std::make_unique<pasa::Format>(named("b_format", *b_format, pasa::format_by_name));
  else if (fa) fb = std::make_unique<pasa::Format>(*fa);
  const pasa::StageSpec sacc{named("acc", acc, pasa::format_by_name)}, sout{named("out", out, pasa::format_by_name)};
  const std::string model_text = py::isinstance<py::str>(model) ? model.cast<std::string>()
                                                                 : json_argument(model, "model").dump();
  std::vector<double> c;
  // Shapes, formats, model and size from the arrays' headers before any element is converted.
  const pasa::TensorHeader ha = ta.header(fa.get()), hb = tb.header(fb.get());
  const pasa::Shape sa = ha.shape, sb = hb.shape;
  if (sa.N != sb.N || sa.D != sb.S)
    throw InputError(fmt::format("a, b: shapes {} x {} x {} and {} x {} x {} are not (batch, M, K) and (batch, K, N)",
                                 sa.N, sa.S, sa.D, sb.N, sb.S, sb.D));
  const pasa::GemmSpec spec{ha.format, hb.format, sacc, sout, pasa::gemm_model_by_name(model_text, ha.format, "model")};
  pasa::check_batched_gemm(spec, sa.N, sa.S, sb.D, sa.D, 0, 0, "model " + model_text);
  {
    py::gil_scoped_release nogil;
    const pasa::Tensor A = ta.tensor(fa.get()), B = tb.tensor(fb.get());
    c = pasa::batched_gemm(spec, sa.N, sa.S, sb.D, sa.D, A.data, B.data);
  }
  std::vector<py::ssize_t> shape = {static_cast<py::ssize_t>(sa.S), static_cast<py::ssize_t>(sb.D)};
  if (ta.shape.size() == 3) shape.insert(shape.begin(), static_cast<py::ssize_t>(sa.N));
  return to_numpy(std::move(c), shape);
}

py::object solve_beta(const py::object& beta0, const py::object& n_arg, const std::string& format,
                      const py::object& sqrt_d_arg, double tol, const py::object& max_iter_arg) {
  const long long n = static_cast<long long>(int_arg("n", n_arg, 0, INT64_MAX));  // 0: the block-size message below
  const std::size_t sqrt_d = static_cast<std::size_t>(int_arg("sqrt_d", sqrt_d_arg));
  const int max_iter = static_cast<int>(int_arg("max_iter", max_iter_arg, 1, INT32_MAX));
  const pasa::Format tp = named("format", format, pasa::format_by_name);
  if (n < 1) throw InputError(fmt::format("n {}: the block size must be at least 1", n));
  pasa::BetaOptions opt;
  opt.sqrt_d = sqrt_d;
  opt.tol = tol;
  opt.max_iter = max_iter;
  const bool one = !py::isinstance<py::sequence>(beta0) && !py::isinstance<py::array>(beta0);  // a number
  const std::vector<double> betas = one ? std::vector<double>{beta0.cast<double>()} : beta0.cast<std::vector<double>>();
  py::list rows;
  for (double b : betas) rows.append(to_python(pasa::to_json(pasa::solve_beta(b, static_cast<std::size_t>(n), tp, opt))));
  return one ? py::object(rows[0]) : py::object(rows);
}

py::dict attribute(const py::object& problem, const py::object& q, const py::object& k, const py::object& v,
                   const std::optional<std::string>& format, const std::optional<double>& scale, bool causal,
                   const py::object& kv_len, const py::object& mask, const py::object& pse,
                   const py::object& select, double select_value, bool allow_nonfinite,
                   const std::optional<std::string>& algorithm, const py::object& alloc, const std::optional<double>& beta,
                   const py::object& s1, const py::object& s2, const py::object& seed, const py::object& spec,
                   bool invariance,
                   const py::object& threads) {
  const pasa::AlgorithmSpec algo =
      algorithm_spec("pasa.attribute", spec, algorithm, alloc, beta, opt_size_arg("s1", s1), opt_size_arg("s2", s2),
                     opt_int_arg("seed", seed), "pasa", "pasa_fp16");
  const bool arrays_given = !q.is_none() || !k.is_none() || !v.is_none();
  if (problem.is_none() == !arrays_given)
    throw InputError("problem: give either a problem (dict or JSON text) or the arrays q, k, v");
  std::optional<pasa::ProblemSpec> pspec;
  std::optional<InputArrays> arrays;
  if (!problem.is_none()) pspec = pasa::problem_from_json(json_argument(problem, "problem"), "problem:");
  else arrays.emplace(q, k, v, format, scale_value(scale), causal, kv_len, mask).decode(pse, select, select_value, allow_nonfinite);
  const int t = threads_arg(threads);
  std::optional<pasa::InvarianceView> view;
  const std::vector<pasa::StageShare> rows = interruptible([&] {
    const pasa::AttentionInputs in = pspec ? pasa::generate_inputs(*pspec, t) : arrays->inputs();
    pasa::GoldenOptions gopt;
    gopt.threads = t;
    const pasa::Golden g = pasa::golden_attention(in, gopt);
    // The invariance view first, as pasa-attribute does: it rejects a non-PASA algorithm before the long runs.
    if (invariance) view = pasa::invariance_view(in, algo, g, t);
    return pasa::attribute_error(in, algo, g, t);
  });
  json j = {{"algorithm", pasa::to_json(algo)}, {"stages", json::array()}};
  if (pspec) j["problem"] = pasa::to_json(*pspec);
  for (const pasa::StageShare& r : rows) j["stages"].push_back(pasa::to_json(r));
  if (view) j["invariance"] = pasa::to_json(*view);
  return to_python(j);
}

py::dict sweep(const py::object& config, const py::object& out_dir, const py::object& threads, const py::object& jobs,
               bool resume, bool overwrite, const std::optional<std::string>& shard, bool progress,
               const py::object& ranges) {
  pasa::SweepConfig cfg;
  // A str is JSON text when it starts with '{' (a file name hardly does), else a path.
  const bool json_text = py::isinstance<py::str>(config) && [&] {
    const std::string s = config.cast<std::string>();
    const auto first = s.find_first_not_of(" \t\r\n");
    return first != std::string::npos && s[first] == '{';
  }();
  if (py::isinstance<py::dict>(config) || json_text)
    cfg = pasa::parse_sweep_config(json_argument(config, "config"), "config");
  else if (py::isinstance<py::str>(config) || py::isinstance(config, py::module_::import("os").attr("PathLike")))
    cfg = pasa::load_sweep_config(py::str(py::module_::import("os").attr("fspath")(config)).cast<std::string>());
  else
    throw py::type_error(fmt::format("config: expected a dict, its JSON text or the path of a JSON file, got {}",
                                 py::str(py::type::handle_of(config).attr("__name__")).cast<std::string>()));
  pasa::SweepOptions opt;
  if (!out_dir.is_none()) opt.out_dir = py::str(py::module_::import("os").attr("fspath")(out_dir)).cast<std::string>();
  opt.threads = threads_arg(threads);
  opt.jobs = static_cast<int>(int_arg("jobs", jobs, 1, 4096));
  opt.resume = resume;
  opt.overwrite = overwrite;
  opt.resume_option = "resume=True";
  opt.overwrite_option = "overwrite=True";
  if (shard) pasa::parse_shard(*shard, opt.shard_index, opt.shard_count);
  // ranges=N is pasa-sweep --ranges N (apps/pasa-sweep.cpp): the same checks, in the same order, and the same
  // ranges.csv, computed before the attention (quick) so that inputs it refuses stop the run before it starts.
  const std::size_t range_heads = ranges.is_none() ? 0 : int_arg("ranges", ranges, 1, UINT32_MAX);
  if (range_heads > 0 && shard) throw InputError("ranges: not with shard (ranges.csv covers the whole sweep)");
  if (range_heads > 0) {
    const std::filesystem::path dir = opt.out_dir.empty() ? std::filesystem::path(cfg.out_dir) : opt.out_dir;
    pasa::check_not_an_input("ranges: the table", dir / "ranges.csv", pasa::sweep_input_files(cfg));
  }
  // Ctrl-C: stop between cases. The progress line goes to the process's stderr (C stdio, no GIL needed: the
  // callback runs on the library's workers); python/pasa/_sweep.py asks for it when sys.stderr is a terminal.
  opt.progress = [progress](const pasa::SweepProgress& p) {
    if (progress) {
      std::fputs(pasa::sweep_progress_line(p, "pasa.sweep").c_str(), stderr);
      std::fflush(stderr);
    }
    pasa::check_cancel();
  };
  std::string digest;
  std::filesystem::path ranges_csv;
  const pasa::SweepReport r = interruptible([&] {
    const pasa::RangeTable table =
        range_heads > 0 ? pasa::sweep_ranges(cfg, range_heads, opt.threads) : pasa::RangeTable{};
    pasa::SweepReport rep = pasa::run_sweep(cfg, pasa::library_backend(), opt);
    if (range_heads > 0) {
      ranges_csv = rep.csv.parent_path() / "ranges.csv";
      pasa::write_file_atomic(ranges_csv, table.text());
    }
    digest = pasa::sweep_digest(cfg, rep.csv);
    return rep;
  });
  py::dict d;
  d["csv"] = r.csv.string();
  d["summary"] = r.summary.empty() ? py::object(py::none()) : py::object(py::str(r.summary.string()));
  d["cases_run"] = r.cases_run;
  d["cases_reused"] = r.cases_reused;
  d["digest"] = digest;
  d["already_complete"] = r.already_complete;
  // (a folder completed before results_flat.csv existed has none: None)
  d["flat_csv"] = r.flat_csv.empty() || !std::filesystem::exists(r.flat_csv) ? py::object(py::none())
                                                                              : py::object(py::str(r.flat_csv.string()));
  d["ranges"] = ranges_csv.empty() ? py::object(py::none()) : py::object(py::str(ranges_csv.string()));
  return d;
}

py::list range_stats(const py::object& q, const py::object& k, const py::object& v, double beta, std::size_t s2,
                     const std::string& score_format, std::size_t heads, const std::optional<std::string>& format,
                     const std::optional<double>& scale, bool causal, const py::object& kv_len, const py::object& mask, const py::object& pse,
                     const py::object& select, double select_value, bool allow_nonfinite, const py::object& threads) {
  const pasa::Format sf = named("score_format", score_format, pasa::format_by_name);
  InputArrays arrays(q, k, v, format, scale_value(scale), causal, kv_len, mask);
  arrays.decode(pse, select, select_value, allow_nonfinite);
  const int t = threads_arg(threads);
  const auto r = interruptible([&] { return pasa::range_stats(arrays.inputs(), beta, s2, sf, heads, t); });
  py::list out;
  for (const pasa::HeadRanges& h : r) out.append(numbers_as_floats(pasa::to_json(h)));
  return out;
}

}  // namespace

void bind_study(py::module_& m) {
  using py::arg;
  m.def("gemm", &gemm_values, arg("a"), arg("b"), py::kw_only(), arg("a_format") = py::none(),
        arg("b_format") = py::none(), arg("acc") = "fp32", arg("out") = "fp32", arg("model") = "ordered",
        R"doc(gemm(a, b, *, a_format=None, b_format=None, acc="fp32", out="fp32", model="ordered") -> float64 array

C = A·B under a GEMM model (docs/tensor-cores.md), as pasa-gemm computes it: each C[i, j] accumulated over k
in order as the model says, then rounded once to `out` (nearest even).
a: (M, K) or (batch, M, K); b: (K, N) or (batch, K, N). float16/32/64 arrays hold values (rounded to a_format /
   b_format when given); uint8/uint16 arrays hold bit patterns of a_format / b_format (b_format: a_format's).
acc: the accumulator format (ordered, chunked, every_op). out: the output format.
model: "ordered", "chunked", "every_op", "h100" (the H100 tensor-core model of a's format, as the _h100
   presets: fp8 inputs get the FP8 model), a tensor-core model name ("h100_fp16", "h100_e4m3", "exact", ...),
   or the allocation's "gemm" object (dict or JSON text).
Returns C (float64, (M, N) or (batch, M, N)), values of `out`.)doc");

  m.def("table3_initial_betas", &pasa::table3_initial_betas,
        "table3_initial_betas() -> list of float\n\nThe initial betas of the paper's Table 3.");

  m.def("solve_beta", &solve_beta, arg("beta0"), py::kw_only(), arg("n") = 128, arg("format") = "fp16",
        arg("sqrt_d") = 0, arg("tol") = 1e-8, arg("max_iter") = 1000,
        R"doc(solve_beta(beta0, *, n=128, format="fp16", sqrt_d=0, tol=1e-8, max_iter=1000) -> dict or list of dict

PASA's optimal shift coefficient (Appendix A-C, Eq. 22) from beta0 (a number, or a list: one row each), as
pasa-beta computes it: {"beta0", "inva0", "inva_r0", "rel_err0", "beta", "inva", "inva_r", "rel_err",
"iterations"}. n: the block size s2; format: the format M's entries are rounded to; sqrt_d > 0 rounds the
entries of M/sqrt(D) (Eq. 10). solve_beta(table3_initial_betas()) is the paper's Table 3.)doc");

  m.def("attribute", &attribute, arg("problem") = py::none(), py::kw_only(), arg("q") = py::none(),
        arg("k") = py::none(), arg("v") = py::none(), arg("format") = py::none(), arg("scale") = py::none(),
        arg("causal") = false, arg("kv_len") = py::none(), arg("mask") = py::none(), arg("pse") = py::none(),
        arg("select") = py::none(), arg("select_value") = pasa::Mask{}.select_value, arg("allow_nonfinite") = false,
        arg("algorithm") = py::none(),
        arg("alloc") = py::none(), arg("beta") = py::none(), arg("s1") = py::none(), arg("s2") = py::none(),
        arg("seed") = py::none(), arg("spec") = py::none(), arg("invariance") = false, arg("threads") = py::none(),
        R"doc(attribute(problem=None, *, q=None, k=None, v=None, format=None, scale=None, causal=False, kv_len=None,
          mask=None, pse=None, select=None, select_value=-1e12, allow_nonfinite=False, algorithm="pasa", alloc="pasa_fp16", beta=0.984497, s1=128, s2=128, seed=0, spec=None,
          invariance=False, threads=None) -> dict

Which rounding stage of the allocation makes the error (docs/attribution.md), as pasa-attribute --json:
each stage lifted alone to fp64, and alone kept in its format. The inputs: a problem (dict or JSON text, as
generate() takes) or the arrays q, k, v with the mask options of attention(). The algorithm: as attention().
invariance=True adds PASA's invariance view (given beta, exact M, optimised beta).
Returns {"problem" (with a problem), "algorithm", "stages": [{"stage", "format", "rmse_base", "rmse_fp64",
"rmse_lifted", "reduction", "share", "rmse_only", "share_only", "nan_pct_base", "nan_pct_lifted",
"nan_pct_only"}, ...], "invariance" (with invariance=True)}.)doc");

  // pasa.sweep is python/pasa/_sweep.py's, around this one: it returns the table's rows.
  m.def("sweep", &sweep, arg("config"), arg("out_dir") = py::none(), py::kw_only(), arg("threads") = py::none(),
        arg("jobs") = 1, arg("resume") = false, arg("overwrite") = false, arg("shard") = py::none(),
        arg("progress") = false, arg("ranges") = py::none(),
        R"doc(sweep(config, out_dir=None, *, threads=None, jobs=1, resume=False, overwrite=False, shard=None, progress=False,
      ranges=None) -> dict

Run a sweep (grid x seeds x algorithms) as pasa-sweep does: config is a dict (the JSON schema of
docs/sweeps.md) or the path of a config file; out_dir overrides the config's outputs.dir; threads in all
(None: every core), jobs problems side by side (pasa-sweep --jobs); resume / overwrite as --resume /
--overwrite (a folder already holding the complete results is reported as it is); shard "I/N" runs every
N-th problem; progress=True prints a progress line on stderr; ranges=N also writes ranges.csv (K, K', S, S'
ranges and overflow counts of the first N heads of each problem, as pasa-sweep --ranges N; not with shard).
Writes results.csv and summary.json there and returns {"csv", "summary" (None for a shard), "cases_run",
"cases_reused", "digest" (the table's mean RMSE and NaN % per grid point), "already_complete", "ranges" (the
path of ranges.csv, or None), "flat_csv" (results_flat.csv: no quoted cell, no JSON in a cell; None for a
shard)}.)doc");

  m.def("range_stats", &range_stats, arg("q"), arg("k"), arg("v"), py::kw_only(),
        arg("beta") = pasa::PasaOptions{}.beta, arg("s2") = 128, arg("score_format") = "fp16", arg("heads") = 0,
        arg("format") = py::none(), arg("scale") = py::none(), arg("causal") = false, arg("kv_len") = py::none(),
        arg("mask") = py::none(), arg("pse") = py::none(), arg("select") = py::none(),
        arg("select_value") = pasa::Mask{}.select_value, arg("allow_nonfinite") = false, arg("threads") = py::none(),
        R"doc(range_stats(q, k, v, *, beta=0.984497, s2=128, score_format="fp16", heads=0, format=None, scale=None,
            causal=False, kv_len=None, mask=None, pse=None, select=None, select_value=-1e12, allow_nonfinite=False,
            threads=None) -> list

PASA's range reduction per head (the paper's Fig. 5, Figs. 11-14), as pasa-attn --ranges prints it: one dict
per (batch, query head) (the first `heads` heads of batch 0; 0: all) with the ranges of K and of the shifted
keys K' = M·K (Eq. 11, per block of s2 keys, 1/sqrt(D) or scale inside), of the exact scores S = QKᵀ (unscaled)
and of the shifted scores S' = QK'ᵀ, and how many S and S' round to inf in score_format (k_min, k_max,
kp_min, kp_max, s_min, s_max, sp_min, sp_max, scores, s_overflow, sp_overflow). v is not read (the
signature is score_stats', so that range_stats(**generate(problem)) works); masks, pse and select are refused.)doc");
}

}  // namespace pasa_py
