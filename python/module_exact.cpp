// The module's golden and metrics (the exact layer): the golden, the uniform-weights baseline, the score
// statistics and the metrics of an output against the golden.
#include "module_support.hpp"
#include "pasa/exact/baseline.hpp"
#include "pasa/exact/golden.hpp"
#include "pasa/exact/metrics.hpp"
#include "pasa/io/metrics_json.hpp"

namespace pasa_py {
namespace {

// An array of outputs (any of the tensor dtypes; (S, D), (N, S, D) or (B, N, S, D)) as a Tensor.
pasa::Tensor tensor_from(const py::handle& o, const std::string& where) { return TensorArg(o, where).tensor(nullptr); }

py::dict golden(const py::object& q, const py::object& k, const py::object& v, const std::optional<std::string>& format,
                const std::optional<double>& scale, bool causal, const py::object& kv_len, const py::object& mask, const py::object& pse,
                const py::object& select, double select_value, bool allow_nonfinite,
                const py::object& precision_bits, bool fast, const py::object& threads) {
  InputArrays arrays(q, k, v, format, scale_value(scale), causal, kv_len, mask);
  arrays.decode(pse, select, select_value, allow_nonfinite);
  const pasa::GoldenOptions opt = golden_options(precision_bits, fast, threads);
  pasa::Shape shape;
  pasa::Golden g = interruptible([&] {
    const pasa::AttentionInputs in = arrays.inputs();
    shape = in.q.shape;
    return pasa::golden_attention(in, opt);
  });
  return golden_dict(std::move(g), shape, arrays.rank());
}

py::array_t<double> uniform_baseline(const py::object& q, const py::object& k, const py::object& v,
                                     const std::optional<std::string>& format, const std::optional<double>& scale, bool causal,
                                     const py::object& kv_len, const py::object& mask, const py::object& pse,
                                     const py::object& select, double select_value, bool allow_nonfinite,
                                     const py::object& threads) {
  InputArrays arrays(q, k, v, format, scale_value(scale), causal, kv_len, mask);
  arrays.decode(pse, select, select_value, allow_nonfinite);
  const int t = threads_arg(threads);
  pasa::Tensor b = interruptible([&] { return pasa::uniform_baseline(arrays.inputs(), t); });
  return tensor_out(std::move(b), arrays.rank());
}

py::dict score_stats(const py::object& q, const py::object& k, const py::object& v, const std::string& score_format,
                     const std::optional<std::string>& format, const std::optional<double>& scale, bool causal,
                     const py::object& kv_len, const py::object& mask, const py::object& pse,
                     const py::object& select, double select_value, bool allow_nonfinite,
                     const py::object& threads) {
  const pasa::Format sf = named("score_format", score_format, pasa::format_by_name);
  InputArrays arrays(q, k, v, format, scale_value(scale), causal, kv_len, mask);
  arrays.decode(pse, select, select_value, allow_nonfinite);
  const int t = threads_arg(threads);
  const pasa::ScoreStats st = interruptible([&] { return pasa::score_stats(arrays.inputs(), sf, t); });
  return numbers_as_floats(pasa::to_json(st));
}

// The metrics as pasa-attn --json writes them, with "rel_rmse" first: Eq. 19 is a relative RMSE (the error's
// norm over the golden's), which "rmse", the programs' key, keeps as an alias for existing scripts.
py::dict metrics_dict(const pasa::Metrics& m) {
  py::dict d;
  d["rel_rmse"] = m.rmse;
  for (const auto& [k, v] : numbers_as_floats(pasa::to_json(m))) d[k] = v;
  return d;
}

py::dict metrics(const py::object& out, const py::object& golden, const py::object& baseline) {
  const py::object g = py::isinstance<py::dict>(golden) ? py::object(golden["out"]) : golden;
  const pasa::Tensor o = tensor_from(out, "out"), gt = tensor_from(g, "golden");
  std::optional<pasa::Tensor> b;
  if (!baseline.is_none()) b = tensor_from(baseline, "baseline");
  pasa::Metrics m;
  {
    py::gil_scoped_release nogil;
    m = b ? pasa::compare_outputs(o, gt, *b) : pasa::compare_outputs(o, gt);
  }
  return metrics_dict(m);
}

}  // namespace

void bind_exact(py::module_& m) {
  using py::arg;
  m.def("golden", &golden, arg("q"), arg("k"), arg("v"), py::kw_only(), arg("format") = py::none(),
        arg("scale") = py::none(), arg("causal") = false, arg("kv_len") = py::none(), arg("mask") = py::none(),
        arg("pse") = py::none(), arg("select") = py::none(), arg("select_value") = pasa::Mask{}.select_value,
        arg("allow_nonfinite") = false, arg("precision_bits") = 128, arg("fast") = true, arg("threads") = py::none(),
        R"doc(golden(q, k, v, *, format=None, scale=None, causal=False, kv_len=None, mask=None, pse=None, select=None,
       select_value=-1e12, allow_nonfinite=False, precision_bits=128, fast=True, threads=None) -> dict

The MPFR-certified attention of the exact input values (arguments as in attention()), rounded to float64 only
at the end. Returns {"out", "lse" (arrays as attention() returns them), "guaranteed_bits" (the bound: every
element within 2^-guaranteed_bits, relative to the weighted mean of |V|; >= 54: faithful doubles),
"error_bound", "used_mpfr"}. precision_bits: MPFR working precision; fast: double-double path with an a
posteriori bound, MPFR where the bound is too weak. Inputs must be finite.)doc");

  m.def("uniform_baseline", &uniform_baseline, arg("q"), arg("k"), arg("v"), py::kw_only(), arg("format") = py::none(),
        arg("scale") = py::none(), arg("causal") = false, arg("kv_len") = py::none(), arg("mask") = py::none(),
        arg("pse") = py::none(), arg("select") = py::none(), arg("select_value") = pasa::Mask{}.select_value,
        arg("allow_nonfinite") = false, arg("threads") = py::none(),
        R"doc(uniform_baseline(q, k, v, *, format=None, scale=None, causal=False, kv_len=None, mask=None, pse=None,
                 select=None, select_value=-1e12, allow_nonfinite=False, threads=None)

The output that ignores the scores: every row the mean of V over the keys it sees (float64, q's shape).
Passed to metrics() as baseline= it gives the skill score.)doc");

  m.def("score_stats", &score_stats, arg("q"), arg("k"), arg("v"), py::kw_only(), arg("score_format") = "fp16",
        arg("format") = py::none(), arg("scale") = py::none(), arg("causal") = false, arg("kv_len") = py::none(),
        arg("mask") = py::none(), arg("pse") = py::none(), arg("select") = py::none(),
        arg("select_value") = pasa::Mask{}.select_value, arg("allow_nonfinite") = false, arg("threads") = py::none(),
        R"doc(score_stats(q, k, v, *, score_format="fp16", format=None, scale=None, causal=False, kv_len=None, mask=None,
            pse=None, select=None, select_value=-1e12, allow_nonfinite=False, threads=None) -> dict

Range of the exact scores QKᵀ and scale·QKᵀ over the visible entries, and how many exceed score_format's
largest finite value or round to inf/NaN in it (FA-FP16/FP32's overflow), as pasa-attn prints them.)doc");

  m.def("metrics", &metrics, arg("out"), arg("golden"), arg("baseline") = py::none(),
        R"doc(metrics(out, golden, baseline=None) -> dict

Accuracy of an attention output against the golden (golden: the array, or the dict golden() returns):
rel_rmse (PASA Eq. 19: ||out - golden||_2 / ||golden||_2; "rmse" is the same number under the key
pasa-attn --json uses, kept as an alias), rmse_finite, NaN/inf counts and percentages, rows with NaN/inf, max_abs_err, max_rel_err,
cosine, and with baseline= (uniform_baseline()) rmse_uniform_baseline, rmse_centred and skill (else NaN).
The keys and values of pasa-attn --json's "metrics" (and rel_rmse); NaN and infinities as floats.)doc");
}

}  // namespace pasa_py
