// The module's dense attention: the registries (algorithms, presets, allocation, kernels), the GPU math and
// kernel bridge, and attention (the golden and the metrics: module_exact.cpp).
#include "module_support.hpp"
#include "pasa/attention/allocation.hpp"
#include "pasa/io/allocation_json.hpp"
#include "pasa/io/algorithm_json.hpp"
#include "pasa/io/kernel_json.hpp"
#include "pasa/numeric/gpu_math.hpp"
#include "pasa/study/kernel_bridge.hpp"

namespace pasa_py {
namespace {

py::tuple attention(const py::object& q, const py::object& k, const py::object& v, const std::optional<std::string>& algorithm,
                    const py::object& alloc, const std::optional<double>& beta, const py::object& s1,
                    const py::object& s2, const py::object& seed, const py::object& spec,
                    const std::optional<std::string>& format, const std::optional<double>& scale, bool causal,
                    const py::object& kv_len, const py::object& mask, const py::object& pse,
                    const py::object& select, double select_value,
                    bool allow_nonfinite, const py::object& threads, const py::object& kernel) {
  // kernel=: a recipe's name or {"recipe": name, <schedule fields>} (pasa-attn --kernel), alone: the recipe
  // fixes what algorithm, alloc, beta, s1, s2, seed and spec would set.
  if (!kernel.is_none() && (!spec.is_none() || algorithm || !alloc.is_none() || beta || !s1.is_none() ||
                            !s2.is_none() || !seed.is_none()))
    throw InputError("kernel: a kernel recipe fixes the algorithm, allocation, blocks and seed; give kernel alone "
                     "(override its schedule fields with kernel={\"recipe\": ..., ...})");
  const pasa::AlgorithmSpec algo =
      kernel.is_none()
          ? algorithm_spec("pasa.attention", spec, algorithm, alloc, beta, opt_size_arg("s1", s1),
                           opt_size_arg("s2", s2), opt_int_arg("seed", seed), "fa2", "fa_fp16_fp32")
          : pasa::algorithm_from_json(json{{"kernel", py::isinstance<py::str>(kernel) ? json(kernel.cast<std::string>())
                                                                                       : json_argument(kernel, "kernel")}},
                                      "pasa.attention:");
  InputArrays arrays(q, k, v, format, scale_value(scale), causal, kv_len, mask);
  arrays.decode(pse, select, select_value, allow_nonfinite);
  const int t = threads_arg(threads);
  pasa::Shape shape;
  pasa::AttentionOutput out = interruptible([&] {
    const pasa::AttentionInputs in = arrays.inputs();
    shape = in.q.shape;
    return pasa::run_attention(in, algo, t);
  });
  return py::make_tuple(tensor_out(std::move(out.o), arrays.rank()), lse_out(std::move(out.lse), shape, arrays.rank()));
}

// The GPU math models (numeric/gpu_math.hpp) over a float32 array, for the tests that check them against the
// measured digests and for users asking what the hardware gives.
py::array_t<float> gpu_math(const py::object& x, const std::string& function) {
  using F = float (*)(float);
  static const std::vector<std::pair<std::string, F>> fns = {
      {"ex2", pasa::gpu::ex2_approx_ftz}, {"lg2", pasa::gpu::lg2_approx_ftz}, {"rcp", pasa::gpu::rcp_approx_ftz},
      {"exp2f", pasa::gpu::exp2f},        {"expf", pasa::gpu::expf},          {"logf", pasa::gpu::logf},
      {"fast_logf", pasa::gpu::fast_logf}, {"ex2_poly3", pasa::gpu::ex2_poly3}};
  F f = nullptr;
  std::string known;
  for (const auto& [name, fn] : fns) {
    if (name == function) f = fn;
    known += (known.empty() ? "" : ", ") + name;
  }
  if (!f) throw InputError(fmt::format("function: unknown GPU function \"{}\"; known: {}", function, known));
  const py::array_t<float, py::array::c_style | py::array::forcecast> a(x);
  py::array_t<float> out(a.request().shape);
  const float* in = a.data();
  float* o = out.mutable_data();
  const auto n = static_cast<std::size_t>(a.size());
  try {
    py::gil_scoped_release nogil;
    for (std::size_t i = 0; i < n; ++i) o[i] = f(in[i]);
  } catch (const std::domain_error& e) {
    throw InputError(std::string("function ") + function + ": " + e.what());
  }
  return out;
}

// The bridge (study/kernel_bridge.hpp): which recipe produced gpu_out from q, k, v, and where the closest parts.
py::dict compare_kernel(const py::object& q, const py::object& k, const py::object& v, const py::object& gpu_out,
                        const std::optional<std::string>& format, const std::optional<double>& scale, bool causal,
                        const py::object& threads) {
  InputArrays arrays(q, k, v, format, scale_value(scale), causal, py::none(), py::none());
  arrays.decode(py::none(), py::none(), pasa::Mask{}.select_value, false);
  const TensorArg go(gpu_out, "gpu_out");
  // gpu_out in the inputs' format (format=, else an ml_dtypes dtype's, else its own dtype's).
  const std::optional<std::string> fname = format ? format : go.implied_format ? go.implied_format : arrays.implied_format();
  std::unique_ptr<pasa::Format> f;
  if (fname) f = std::make_unique<pasa::Format>(named("format", *fname, pasa::format_by_name));
  const int t = threads_arg(threads);
  const pasa::KernelBridgeReport r = interruptible([&] {
    const pasa::AttentionInputs in = arrays.inputs();
    return pasa::compare_kernel(in, go.tensor(f.get()), t);
  });
  auto rows = [](const std::vector<pasa::KernelMatch>& ms) {
    py::list l;
    for (const pasa::KernelMatch& m : ms) {
      py::dict d;
      d["recipe"] = m.recipe;
      d["variant"] = m.variant;
      d["identical_pct"] = m.identical_pct();
      d["max_ulp"] = m.max_ulp;
      l.append(d);
    }
    return l;
  };
  py::dict d;
  d["recipes"] = rows(r.recipes);
  d["variants"] = rows(r.variants);
  d["refused"] = r.refused;
  d["verdict"] = r.verdict;
  return d;
}

}  // namespace

void bind_attention(py::module_& m) {
  using py::arg;
  m.def("algorithms", &pasa::algorithm_names, "algorithms() -> list of str\n\nThe registered attention algorithms.");
  m.def("presets", &pasa::allocation_preset_names,
        "presets() -> list of str\n\nThe precision allocation presets (docs/allocations.md).");
  m.def("allocation", [](const py::object& alloc) {
    return to_python(pasa::to_json(pasa::allocation_from_json(alloc_argument(alloc), "alloc")));
  }, arg("alloc"), R"doc(allocation(alloc) -> dict

The full form of an allocation (every stage with its format, rounding and reduction, the GEMM model): a preset
name, the JSON text of an allocation object, or a dict {"preset": ..., "stages": {...}} (docs/allocations.md).
The result can be edited and passed back as alloc= to attention().)doc");

  m.def(
      "kernels",
      [] {
        py::list out;
        for (const pasa::KernelRecipe& k : pasa::kernel_recipes()) {
          py::dict d;
          d["name"] = k.name;
          d["summary"] = k.summary;
          d["source"] = k.source;
          d["status"] = k.status;
          d["schedule"] = to_python(pasa::to_json(k));
          out.append(d);
        }
        return out;
      },
      R"doc(kernels() -> list

The kernel recipes (pasa-attn --list-kernels): dicts {"name", "summary", "source", "status" (how far the GPU
confirms it), "schedule"}, the schedule
in the form attention(kernel={...}) takes.)doc");
  m.def("gpu_math", &gpu_math, arg("x"), arg("function") = "ex2",
        R"doc(gpu_math(x, function="ex2") -> float32 array

An H100/H200's float32 math on x (cast to float32), bit for bit as measured (results/hardware/kernels/README.md):
"ex2" (MUFU.EX2, ex2.approx.ftz.f32), "lg2" (MUFU.LG2, for x >= 1), "rcp" (MUFU.RCP, rcp.approx.ftz.f32),
CUDA's "exp2f", "expf", "logf" and "fast_logf" (__logf) as nvcc compiles them without fast math, and
"ex2_poly3", FlashAttention-4's software exp2 (degree-3 polynomial). The kernel recipes use these.)doc");
  m.def("compare_kernel", &compare_kernel, arg("q"), arg("k"), arg("v"), arg("gpu_out"), py::kw_only(),
        arg("format") = py::none(), arg("scale") = py::none(), arg("causal") = false, arg("threads") = py::none(),
        R"doc(compare_kernel(q, k, v, gpu_out, *, format=None, scale=None, causal=False, threads=None) -> dict

Which kernel recipe produced gpu_out (a GPU kernel's attention output on q, k, v), and where the closest one
parts from the kernel, as pasa-hwcompare kernel reports it: {"recipes": [{"recipe", "variant", "identical_pct",
"max_ulp"}, ...] best first, "variants": the closest recipe with one schedule field changed, best first,
"refused": recipes that do not run on these inputs, "verdict": one sentence}. Arrays as attention() takes them.)doc");
  m.def("attention", &attention, arg("q"), arg("k"), arg("v"), py::kw_only(), arg("algorithm") = py::none(),
        arg("alloc") = py::none(), arg("beta") = py::none(), arg("s1") = py::none(), arg("s2") = py::none(),
        arg("seed") = py::none(), arg("spec") = py::none(), arg("format") = py::none(), arg("scale") = py::none(),
        arg("causal") = false, arg("kv_len") = py::none(), arg("mask") = py::none(), arg("pse") = py::none(),
        arg("select") = py::none(), arg("select_value") = pasa::Mask{}.select_value, arg("allow_nonfinite") = false,
        arg("threads") = py::none(), arg("kernel") = py::none(),
        R"doc(attention(q, k, v, *, algorithm="fa2", alloc="fa_fp16_fp32", beta=0.984497, s1=128, s2=128, seed=0,
          spec=None, format=None, scale=None, causal=False, kv_len=None, mask=None, pse=None, select=None,
          select_value=-1e12, allow_nonfinite=False, threads=None, kernel=None) -> (out, lse)

Run one blocked attention algorithm under a precision allocation, as pasa-attn does on .npy inputs.

q: (Sq, D), (Nq, Sq, D) or (B, Nq, Sq, D); k, v: the same rank with Nkv heads (Nq a multiple: GQA) and Skv
   keys. float16/float32/float64 arrays hold values (their dtype is their format unless format= is given,
   then they are rounded to it, nearest even); uint8/uint16 arrays hold bit patterns of format= (bf16, fp8).
algorithm: one of algorithms(): safe_softmax, online_softmax, fa1, fa2, pasa, smooth_k (SageAttention's smoothed K),
   fdpp (FlashDecoding++'s asynchronised softmax, spec={"name": "fdpp", "fdpp": {"phi", "a", "b"}}).
alloc: a preset name (presets()), the JSON text of an allocation, or a dict (see allocation()).
beta, s1, s2, seed: PASA's shift coefficient, the query and key/value block sizes, the stochastic
   rounding stream.
spec: instead of the five arguments above, a whole algorithm description (dict or JSON text, the form of
   pasa-attn --algo-json: {"name", "alloc", "s1", "s2", "seed", "pasa": {...}}).
scale: the softmax scale, > 0 (None: 1/sqrt(D)). causal: causal mask aligned to the end. kv_len: valid keys per
   batch (a list or an integer array (B,)). mask: a boolean (B, Sq, Skv) array (or (Sq, Skv) with one batch),
   True = visible.
pse: a position bias [IFA] (B or 1, Nq, Sq, Skv), float values added exactly to the scaled scores.
select: [IFA]'s atten_mask, boolean (B, Sq, Skv) or (B, Nq, Sq, Skv) with the same mask for every head,
   True = the score is replaced by select_value (docs/decode.md). generate() returns all of these, so
   attention(**pasa.generate(problem)) is pasa-attn --problem's problem.
allow_nonfinite: accept NaN/inf input elements (else ValueError naming the first), to follow them through.
threads: worker threads (default: all cores); the result does not depend on it.
kernel: a kernel recipe (kernels(); docs/allocations.md "Kernel recipes"): the GPU kernel's own numerics and
   schedule, e.g. kernel="torch_flash_sm90" with fp16/bf16 q, k, v; a dict {"recipe": name, "kv_order":
   "forward", ...} overrides its fields. Given alone (not with algorithm, alloc, beta, s1, s2, seed, spec).

Returns out (float64, q's shape with D; values of the allocation's "out" format) and lse (float64, q's shape
without D; natural log, -inf for rows that see no key).)doc");

}

}  // namespace pasa_py
