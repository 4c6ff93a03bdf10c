#include "pasa/attention/algorithm.hpp"

#include <cmath>

#include <fmt/format.h>

#include "pasa/attention/detail/blocked_attention.hpp"
#include "pasa/core/error.hpp"
#include "pasa/attention/detail/fdpp.hpp"
#include "pasa/attention/detail/flash.hpp"
#include "pasa/attention/detail/pasa_attention.hpp"
#include "pasa/attention/detail/smooth_k.hpp"
#include "pasa/attention/detail/safe_softmax.hpp"

namespace pasa {
void check_algorithm_name(const std::string& name, const std::string& where) {
  for (const auto& n : algorithm_names())
    if (n == name) return;
  throw InputError(fmt::format("{}unknown algorithm \"{}\"; known algorithms: {}", where, name,
                               fmt::join(algorithm_names(), ", ")));
}

std::vector<std::string> algorithm_names() {
  return {"safe_softmax", "online_softmax", "fa1", "fa2", "pasa", "smooth_k", "fdpp"};
}

AttentionOutput run_attention(const AttentionInputs& in, const AlgorithmSpec& spec, int threads) {
  check_algorithm_name(spec.name, "");
  if (spec.s1 == 0 || spec.s2 == 0) throw InputError("block sizes s1 and s2 must be at least 1");
  if (spec.splits == 0) throw InputError("splits must be at least 1 (1: no split-KV)");
  if (spec.name == "fdpp" && !(std::isfinite(spec.fdpp.phi) && spec.fdpp.a < spec.fdpp.b))
    throw InputError(fmt::format("fdpp: phi must be finite and a < b, got phi = {}, a = {}, b = {}", spec.fdpp.phi,
                                 spec.fdpp.a, spec.fdpp.b));
  if (spec.splits > 1 && spec.name != "fa2" && spec.name != "pasa" && spec.name != "smooth_k" && spec.name != "fdpp")
    throw InputError(fmt::format("splits = {}: split-KV needs fa2, smooth_k, pasa or fdpp (an unnormalised output to merge), "
                                 "got \"{}\"", spec.splits, spec.name));
  validate(in);
  detail::Run run(in, spec);
  AttentionOutput out;
  out.o = Tensor(in.q.shape, run.stage(Stage::out).format);
  out.lse.assign(run.B * run.Nq * run.Sq, detail::kNegInf);
  if (spec.name == "safe_softmax") detail::safe_softmax_attention(run, out, threads);
  else if (spec.name == "online_softmax") detail::online_softmax_attention(run, out, threads);
  else if (spec.name == "fa1") detail::fa1_attention(run, out, threads);
  else if (spec.name == "fa2") detail::fa2_attention(run, out, threads);
  else if (spec.name == "pasa") detail::pasa_attention(run, out, threads);
  else if (spec.name == "fdpp") detail::fdpp_attention(run, out, threads);
  else detail::smooth_k_attention(run, out, threads);
  return out;
}

}  // namespace pasa
