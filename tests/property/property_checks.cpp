// The property harness's checks shared by its parts (property_case.hpp): the fp64 bound, property 1b (block
// schemes in fp64) and property 3b's fp64 part (inputs at their formats' widths). The contract as a whole:
// test_properties.cpp.
#include <cmath>
#include <exception>
#include <optional>
#include <sstream>
#include <string>
#include <utility>

#include "pasa/attention/algorithm.hpp"
#include "pasa/attention/quantise.hpp"
#include "pasa/exact/baseline.hpp"
#include "pasa/exact/golden.hpp"
#include "support/bits.hpp"
#include "property/property_case.hpp"

namespace pasa_property {

double fp64_bound(const AlgorithmSpec& spec, double M) {
  if (!algorithm_info(spec.name).pasa_options) return 1e-13;
  const double inva = spec.pasa.beta / (1 - spec.pasa.beta);
  return 1e-13 + 4 * 0x1p-53 * inva * std::max(M, 1.0);
}

std::string sci(double x) {
  std::ostringstream o;
  o.precision(3);
  o << std::scientific << x;
  return o.str();
}


double relative_rmse(std::span<const double> o, std::span<const double> g, double vmax) {
  long double num = 0, den = 0;
  for (std::size_t i = 0; i < o.size(); ++i) {
    const long double dlt = static_cast<long double>(o[i]) - g[i];
    num += dlt * dlt;
    den += static_cast<long double>(g[i]) * g[i];
  }
  den = std::max(den, 1e-6L * vmax * vmax * static_cast<long double>(o.size()));
  return den == 0 ? (num == 0 ? 0.0 : INFINITY) : std::sqrt(static_cast<double>(num / den));
}

std::string check_blocks_fp64(const Case& c, const AttentionInputs& in, const AlgorithmSpec& spec64) {
  const QuantOptions& q = c.spec.quant;
  if (!(q.q_block || q.k_block || q.v_block) || q.p_block || q.hadamard || c.spec.splits > 1) return "";
  AttentionInputs qin = in;
  RandomBits rng(c.spec.seed);
  const std::pair<Tensor*, const std::optional<BlockScheme>*> ops[] = {{&qin.q, &q.q_block}, {&qin.k, &q.k_block}, {&qin.v, &q.v_block}};
  for (std::size_t i = 0; i < 3; ++i) {
    Tensor& t = *ops[i].first;
    if (!*ops[i].second) continue;
    block_quantise_heads(t.data.data(), t.shape.B * t.shape.N, t.shape.S, t.shape.D, **ops[i].second, i != 0, i == 2, &rng);
    t.format = format_by_name("fp64");
  }
  qin.allow_nonfinite = true;
  for (const Tensor* t : {&qin.q, &qin.k, &qin.v})
    for (double x : t->data)
      if (!std::isfinite(x)) return "";  // (an unsaturated element beyond its format: NaN or inf, not the golden's case)
  GoldenOptions go;
  go.threads = 1;
  const Golden g = golden_attention(qin, go);
  AlgorithmSpec blocked = spec64;
  blocked.quant = q;
  AttentionOutput o;
  try {
    o = run_attention(in, blocked, 2);
  } catch (const std::exception& e) {
    return std::string("fp64 run with block schemes threw: ") + e.what();
  }
  double vmax = 0;
  for (double x : qin.v.data) vmax = std::max(vmax, std::abs(x));
  const double rel = relative_rmse(o.o.data, g.o.data, vmax);
  const double tol = fp64_bound(c.spec, score_magnitude(qin.q.data, qin.k.data, qin.q.shape.D, qin.effective_scale()));
  if (!(rel <= tol)) return "fp64 with block schemes vs the golden of the quantised inputs: relative RMSE " + sci(rel);
  return "";
}
std::string check_narrow_fp64(const AttentionInputs& in, const AttentionInputs& narrow, const AlgorithmSpec& spec64,
                              const AttentionOutput& o, const Golden& g, const GoldenOptions& go) {
  if (std::string d = test::first_difference(o, run_attention(narrow, spec64, 2)); !d.empty())
    return "narrow inputs: the fp64 run differs: " + d;
  const Golden gn = golden_attention(narrow, go);
  for (std::size_t i = 0; i < g.o.data.size(); ++i)
    if (!test::same_bits(g.o.data[i], gn.o.data[i])) return "narrow inputs: golden element " + std::to_string(i) + " differs";
  for (std::size_t i = 0; i < g.lse.size(); ++i)
    if (!test::same_bits(g.lse[i], gn.lse[i])) return "narrow inputs: golden lse " + std::to_string(i) + " differs";
  const Tensor bw = uniform_baseline(in, 1), bn = uniform_baseline(narrow, 2);
  for (std::size_t i = 0; i < bw.data.size(); ++i)
    if (!test::same_bits(bw.data[i], bn.data[i])) return "narrow inputs: baseline element " + std::to_string(i) + " differs";
  return "";
}

}  // namespace pasa_property
