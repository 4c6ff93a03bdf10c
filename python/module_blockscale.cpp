// The module's block scaling (block_schemes, block_quantise): numpy arrays block-quantised by the library's
// schemes (numeric/block_scale.hpp), any axis as the block axis.
#include <numeric>

#include "module_support.hpp"
#include "pasa/io/block_scheme_json.hpp"
#include "pasa/numeric/block_scale.hpp"

namespace pasa_py {
namespace {

py::dict block_quantise_array(const py::object& x, const py::object& scheme, std::int64_t axis, const py::object& scale_rule,
                              const py::object& round, const py::object& saturate, const std::string& operand,
                              const py::object& seed) {
  // The scheme: a name or a dict / JSON of {"scheme": name, overrides} (io/block_scheme_json.hpp), then the
  // keyword overrides.
  json j = py::isinstance<py::str>(scheme) ? json(scheme.cast<std::string>()) : json_argument(scheme, "scheme");
  if (!scale_rule.is_none() || !round.is_none() || !saturate.is_none()) {
    if (j.is_string()) j = json{{"scheme", j}};
    if (!scale_rule.is_none()) j["scale_rule"] = scale_rule.cast<std::string>();
    if (!round.is_none()) j["round"] = round.cast<std::string>();
    if (!saturate.is_none()) j["saturate"] = saturate.cast<bool>();
  }
  const pasa::BlockScheme s = pasa::block_scheme_from_json(j, "scheme");
  if (operand != "a" && operand != "b")
    throw InputError("operand: \"a\" (the A operand's groups: Q, P) or \"b\" (K, V), got \"" + operand + "\"");
  py::array a = numpy().attr("ascontiguousarray")(as_array(x), py::arg("dtype") = "float64");
  const auto nd = static_cast<std::int64_t>(a.ndim());
  if (nd == 0) throw InputError("x: a scalar has no axis to block; give an array");
  const std::int64_t ax = axis < 0 ? axis + nd : axis;
  if (ax < 0 || ax >= nd) throw InputError(fmt::format("axis: {} is out of range for an array of {} dimensions", axis, nd));
  // The block axis last, the axis before it as the rows (tiles, per-thread groups), the rest as matrices.
  py::array moved = numpy().attr("ascontiguousarray")(numpy().attr("moveaxis")(a, ax, -1));
  std::vector<py::ssize_t> shape(moved.shape(), moved.shape() + nd);
  const std::size_t C = static_cast<std::size_t>(shape.back());
  const std::size_t R = nd >= 2 ? static_cast<std::size_t>(shape[nd - 2]) : 1;
  std::size_t M = 1;
  for (std::int64_t i = 0; i + 2 < nd; ++i) M *= static_cast<std::size_t>(shape[i]);
  const auto* data = static_cast<const double*>(moved.data());
  pasa::RandomBits rng(opt_int_arg("seed", seed).value_or(0));
  pasa::BlockQuantised q;
  {
    py::gil_scoped_release release;
    q = pasa::block_quantise(data, M, R, C, s, operand == "b", &rng);
  }
  auto back = [&](std::vector<double>&& v) {
    return numpy().attr("moveaxis")(to_numpy(std::move(v), shape), -1, ax);
  };
  py::dict out;
  out["values"] = back(std::move(q.values));
  out["elements"] = back(std::move(q.elements));
  std::vector<py::ssize_t> sshape;
  const pasa::GroupLayout& g = operand == "b" ? s.b : s.a;
  if (g.group == pasa::Grouping::tensor) sshape = {1};
  else if (g.group == pasa::Grouping::block) {  // (..., rows, blocks): the microxcaling / torchao layout
    sshape.assign(shape.begin(), shape.end() - 1);
    sshape.push_back(static_cast<py::ssize_t>((C + g.cols - 1) / g.cols));
  } else {
    sshape.assign(shape.begin(), shape.end() - std::min<std::int64_t>(nd, 2));
    sshape.push_back(static_cast<py::ssize_t>(q.groups_per_matrix));
  }
  out["scales"] = to_numpy(std::move(q.scales), sshape);
  out["tensor_scale"] = q.tensor_scale;
  out["scheme"] = to_python(pasa::to_json(s));
  return out;
}

}  // namespace

void bind_block_scale(py::module_& m) {
  using py::arg;
  m.def("block_schemes", [] {
    py::list l;
    for (const auto& e : pasa::kBlockSchemes) l.append(std::string(e.name));
    return l;
  }, R"doc(block_schemes() -> list[str]

The names of the block-scale schemes (docs/block-scaling.md): mxfp8_e4m3, mxfp8_e5m2, mxfp6_e2m3, mxfp6_e3m2,
mxfp4, mxint8, nvfp4, int8_per_block, int8_per_warp, int8_per_thread, int4_per_thread.)doc");
  m.def("block_quantise", &block_quantise_array, arg("x"), arg("scheme"), arg("axis") = -1, py::kw_only(),
        arg("scale_rule") = py::none(), arg("round") = py::none(), arg("saturate") = py::none(), arg("operand") = "a",
        arg("seed") = py::none(),
        R"doc(block_quantise(x, scheme, axis=-1, *, scale_rule=None, round=None, saturate=None, operand="a", seed=None) -> dict

Block-quantise x as `scheme` says: each group's scale from its largest magnitude by the scale rule, each
value divided by its scale and rounded to the element format.

x: an array of any shape (read as float64); `axis` is the block axis (OCP MX's blocks of 32 run along it),
   the axis before it holds the rows that tiles and SageAttention's per-warp / per-thread groups span, the
   others are independent matrices.
scheme: a name (block_schemes()) or a dict {"scheme": name, ...overrides}: element, frac_bits,
   scale_format ("e8m0", "fp8_e4m3fn", "fp32", ...), scale_rule, tensor_scale, round, saturate, quotient
   ("exact", "fp32_div", "fp32_recip"), group / rows / cols / threads, a / b (one operand's layout).
scale_rule: "floor" (OCP), "ceil", "even", "rceil" (cuBLAS), "round_up" (cuDNN), "nearest", "recip", "sage".
round: the element rounding ("rne", "rna" = microxcaling's "nearest", "rz", "ru", "rd", "sr").
saturate: clamp to the element's largest value (True in every scheme) or the format's overflow (False).
operand: "a" lays groups out as the A operand of the GEMM (Q, P), "b" as the B operand (K, V).
seed: the stream of stochastic element rounding.

Returns {"values": elements x scales (x tensor scale), exact, x's shape; "elements": x's shape;
"scales": one per group (blocks: shape (..., rows, blocks)); "tensor_scale": NVFP4's second level (1 without);
"scheme": the scheme's every field}.)doc");
}

}  // namespace pasa_py
