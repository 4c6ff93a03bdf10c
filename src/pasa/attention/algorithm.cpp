#include "pasa/attention/algorithm.hpp"

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>

#include <fmt/format.h>

#include "pasa/attention/detail/blocked_attention.hpp"
#include "pasa/attention/quantise.hpp"
#include "pasa/core/error.hpp"
#include "pasa/attention/detail/fdpp.hpp"
#include "pasa/attention/detail/kernel_flash.hpp"
#include "pasa/attention/unified.hpp"
#include "pasa/core/memory.hpp"
#include "pasa/attention/detail/flash.hpp"
#include "pasa/attention/detail/pasa_attention.hpp"
#include "pasa/attention/detail/smooth_k.hpp"
#include "pasa/attention/detail/safe_softmax.hpp"

namespace pasa {

const std::vector<AlgorithmInfo>& algorithm_registry() {
  // One entry a block, its flags by name (AlgorithmInfo's field order).
  static const std::vector<AlgorithmInfo> r{
      {
          .name = "safe_softmax",
          .summary = "3-pass safe softmax attention [FA1, §3.1]",
          .whole_rows = true,
      },
      {
          .name = "online_softmax",
          .summary = "2-pass online softmax [FA1, §3.1]",
          .whole_rows = true,
      },
      {
          .name = "fa1",
          .summary = "FlashAttention 1 [FA1, Alg. 1]: per-step normalised output",
          .whole_rows = true,
      },
      {
          .name = "fa2",
          .summary = "FlashAttention 2 [FA2, Alg. 1]",
          .split_kv = true,
          .quant = true,
          .unified = true,
          .fused_path = true,
          .error_model = true,
      },
      {
          .name = "pasa",
          .summary = "PASA [PASA, Alg. 1]: shifted keys, pseudo-average recovery",
          .split_kv = true,
          .quant = true,
          .unified = true,
          .shifts_keys = true,
          .fused_path = true,
          .pasa_options = true,
          .error_model = true,
      },
      {
          .name = "smooth_k",
          .summary = "SageAttention's smooth K [SAGE], then FA2",
          .split_kv = true,
          .shifts_keys = true,
      },
      {
          .name = "fdpp",
          .summary = "FlashDecoding++'s asynchronised softmax with a unified max [FD++, §3]",
          .split_kv = true,
          .fdpp_options = true,
          .recomputes_rows = true,
      },
  };
  return r;
}

const AlgorithmInfo& algorithm_info(const std::string& name, const std::string& where) {
  for (const AlgorithmInfo& a : algorithm_registry())
    if (a.name == name) return a;
  throw InputError(fmt::format("{}unknown algorithm \"{}\"; known algorithms: {}", where, name,
                               fmt::join(algorithm_names(), ", ")));
}

void check_algorithm_name(const std::string& name, const std::string& where) { algorithm_info(name, where); }

const AlgorithmInfo* find_algorithm(const std::string& name) {
  for (const AlgorithmInfo& a : algorithm_registry())
    if (a.name == name) return &a;
  return nullptr;
}

std::vector<std::string> algorithm_names_with(bool AlgorithmInfo::*flag) {
  std::vector<std::string> n;
  for (const AlgorithmInfo& a : algorithm_registry())
    if (a.*flag) n.push_back(a.name);
  return n;
}

std::string algorithm_table_markdown() {
  auto yes = [](bool b) { return b ? "yes" : ""; };
  std::string t =
      "| algorithm | what it is | split-KV | FP8 recipe | unified | options | pre-processed keys | whole rows | "
      "fused path | recomputed rows | error model |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const AlgorithmInfo& a : algorithm_registry()) {
    const std::string options = a.pasa_options ? "`pasa`" : a.fdpp_options ? "`fdpp`" : "";
    t += fmt::format("| `{}` | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", a.name, a.summary, yes(a.split_kv),
                     yes(a.quant), yes(a.unified), options, yes(a.shifts_keys), yes(a.whole_rows), yes(a.fused_path),
                     yes(a.recomputes_rows), yes(a.error_model));
  }
  return t;
}

namespace {
// The names of the registered algorithms with a property, for messages.
std::string names_with(bool AlgorithmInfo::*flag) { return fmt::format("{}", fmt::join(algorithm_names_with(flag), ", ")); }
}  // namespace

std::size_t attention_bytes(const Shape& q, const Shape& kv, const Format& input_format, const AlgorithmSpec& spec,
                            int threads, bool narrow_inputs) {
  const std::size_t qn = sat_product(q.B, q.N, q.S, q.D);
  const std::size_t kn = sat_product(kv.B, kv.N, kv.S, kv.D);
  const std::size_t rows_total = sat_product(q.B, q.N, q.S);
  // The output tensor and the lse.
  std::size_t n = sat_add(qn, rows_total);
  // Rounded copies of Q, K, V where a stage's format differs from the inputs' (blocked_attention.cpp
  // to_stage), the transposed keys and the float copies of the GEMM operands (counted as doubles and
  // always present: an upper bound that stays within a few % of the peak).
  auto copies = [&](Stage st) {
    const StageSpec& s = spec.alloc.spec(st);
    return !(s.format == input_format && s.round.mode != RoundMode::stochastic) && s.format != format_by_name("fp64");
  };
  // Narrow inputs (inputs/tensor.hpp) reach pasa and smooth_k as wide copies of Q and K, which they shift.
  const AlgorithmInfo& info = algorithm_info(spec.name);
  const bool widened = narrow_inputs && narrow_width(input_format) != 0 && info.shifts_keys;
  if (copies(Stage::q) || widened) n = sat_add(n, qn);
  if (copies(Stage::k) || widened) n = sat_add(n, kn);
  if (copies(Stage::v)) n = sat_add(n, kn);
  // The pre-processed keys of pasa and smooth_k as the Q·Kᵀ GEMM reads them (Run::held_keys: keys_t as
  // doubles, or as floats where that GEMM runs on floats: keys_t_f32, keys_f32). Every other engine reads
  // K and V from a window of whole KV heads (Run::stage_window: kv_window_heads of them, the keys as those
  // buffers, V as floats) or a block at a time (per thread, below), and Q a block at a time.
  const CaseLayout layout{q, kv, input_format, input_format, input_format};
  bool qk_floats = false;
  for (const CaseGemm& g : case_gemms(layout, spec))
    if (g.id == GemmId::qk)
      qk_floats = gemm_uses_floats(GemmSpec{g.a, g.b, spec.alloc.spec(g.acc), spec.alloc.spec(Stage::s), spec.alloc.gemm_of(GemmId::qk)});
  if (info.shifts_keys) n = sat_add(n, qk_floats ? kn / 2 : kn);
  const std::size_t s1 = std::min(spec.s1, q.S), s2 = std::min(spec.s2, kv.S);
  const std::size_t head = sat_product(kv.S, kv.D);  // (elements of one KV head)
  const std::size_t head_doubles = head / 2 + (info.shifts_keys ? 0 : qk_floats ? head / 2 : head);
  const std::size_t kv_heads = sat_product(kv.B, kv.N), blocks = (q.S + s1 - 1) / std::max<std::size_t>(s1, 1);
  const std::size_t items_per_head = sat_mul(q.N / std::max<std::size_t>(kv.N, 1), blocks);
  const std::size_t window = detail::kv_window_heads(kv_heads, items_per_head, sat_mul(head_doubles, sizeof(double)), threads);
  n = sat_add(n, sat_mul(window, head_doubles));
  // Per thread: the tiles of one work item (s1 rows × s2 keys, a few of them), rows × D accumulators, a
  // tile's K and V blocks (Run::keys_t_block ... value_panels: D × s2, about 4 of them) and its Q rows,
  // whole score rows (and V over all keys as floats) for the algorithms that keep them (safe_softmax,
  // online_softmax, fa1), and the shifted (S × D) keys of pasa and smooth_k.
  std::size_t per_thread = sat_add(sat_product(4, s1, s2), sat_product(5, s1, q.D));
  per_thread = sat_add(per_thread, sat_product(4, s2, kv.D));
  if (info.whole_rows) per_thread = sat_add(per_thread, sat_product(2, s1, kv.S));
  if (info.whole_rows && window == 0) per_thread = sat_add(per_thread, sat_product(kv.S, kv.D) / 2);
  if (info.shifts_keys) per_thread = sat_add(per_thread, sat_product(kv.S, kv.D));
  if (info.pasa_options) per_thread = sat_add(per_thread, sat_product(2, s2, s2));  // PASA's shifting matrices
  // The tensor-core model's packed operands on the fused path (detail/fused_tile.cpp): a head's K and V
  // blocks, 6 bytes an element each (kept up to 2^20 elements of K), an item's Q rows and a tile's P (8 bytes).
  const Allocation& al = spec.alloc;
  if (al.gemm_of(GemmId::qk).kind == GemmKind::tensor_core || al.gemm_of(GemmId::pv).kind == GemmKind::tensor_core) {
    const std::size_t kept = std::min(sat_product(kv.S, kv.D), std::size_t{1} << 20);
    per_thread = sat_add(per_thread, sat_add(kept / 2 * 3, sat_add(sat_product(s1, q.D), sat_product(2, s1, s2))));
  }
  const std::size_t work_items = sat_mul(sat_product(q.B, q.N), (q.S + s1 - 1) / std::max<std::size_t>(s1, 1));
  n = sat_add(n, sat_mul(per_thread, std::min<std::size_t>(static_cast<std::size_t>(std::max(threads, 1)), work_items)));
  return sat_mul(n, sizeof(double));
}

std::vector<std::string> algorithm_names() {
  std::vector<std::string> n;
  for (const AlgorithmInfo& a : algorithm_registry()) n.push_back(a.name);
  return n;
}

namespace {

bool plain_fp64_stage(const StageSpec& s) {
  return s.format == format_by_name("fp64") && s.round.mode == RoundMode::nearest_even &&
         s.round.overflow == Overflow::ieee && !s.round.flush_input && !s.round.flush_output;
}

// The format an input tensor reaches the engine in (blocked_attention.cpp quantised_input / to_stage): the
// stage's format, except that a plain fp64 stage leaves the input as it is.
Format fed_format(const Format& input, const StageSpec& stage, bool transformed) {
  return transformed || !plain_fp64_stage(stage) ? stage.format : input;
}

const char* gemm_text(GemmId g) {
  switch (g) {
    case GemmId::qk: return "the Q·Kᵀ GEMM";
    case GemmId::pv: return "the P·V GEMM";
    case GemmId::shift: return "PASA's pre-processing GEMM M·K (Eq. 11)";
  }
  return "?";
}

}  // namespace

CaseLayout case_layout(const AttentionInputs& in) {
  return {in.q.shape, in.k.shape, in.q.format, in.k.format, in.v.format};
}

CaseLayout case_layout(const ProblemSpec& p) {
  const Format f = format_by_name(p.format);
  return {{p.B, p.Nq, p.Sq, p.D}, {p.B, p.Nkv, p.Skv, p.D}, f, f, f};
}

std::vector<CaseGemm> case_gemms(const CaseLayout& c, const AlgorithmSpec& spec) {
  // §2.2: PASA with bf16 inputs runs its bf16 stages in fp16 (blocked_attention.cpp effective_allocation).
  Allocation a = spec.alloc;
  const Format bf16 = format_by_name("bf16");
  if (algorithm_info(spec.name).pasa_options && spec.pasa.bf16_to_fp16 && (c.q_format == bf16 || c.k_format == bf16 || c.v_format == bf16))
    for (auto& s : a.stages)
      if (s.format == bf16) s.format = format_by_name("fp16");
  const QuantOptions& qo = spec.quant;
  const bool scaled = qo.scales != QuantScale::none, qk_transformed = scaled || qo.hadamard;
  // (a block-scaled operand reaches its GEMM as elements × scales: quantise.hpp block_value_format)
  const Format q = qo.q_block ? block_value_format(*qo.q_block) : fed_format(c.q_format, a.spec(Stage::q), qk_transformed);
  const Format k = qo.k_block ? block_value_format(*qo.k_block) : fed_format(c.k_format, a.spec(Stage::k), qk_transformed);
  const Format v = qo.v_block ? block_value_format(*qo.v_block) : fed_format(c.v_format, a.spec(Stage::v), scaled);
  // pasa and smooth_k multiply Q by their shifted keys, held in the k_shift stage.
  const AlgorithmInfo& info = algorithm_info(spec.name);
  const bool shifted = info.shifts_keys;
  std::vector<CaseGemm> g = {{GemmId::qk, q, shifted ? a.spec(Stage::k_shift).format : k, Stage::qk_acc},
                             {GemmId::pv, qo.p_block ? block_value_format(*qo.p_block) : a.spec(Stage::p).format, v,
                              Stage::pv_acc}};
  // (shift_first runs its pre-processing as an ordered FMA chain of its own: pasa_attention.cpp.)
  if (info.pasa_options && !qo.shift_first) g.push_back({GemmId::shift, a.spec(Stage::shift).format, k, Stage::qk_acc});
  return g;
}

void validate_case(const CaseLayout& c, const AlgorithmSpec& spec) {
  const AlgorithmInfo& info = algorithm_info(spec.name, "/name: ");
  if (spec.kernel && spec.quant.blocks())
    throw InputError("/quant: block-scale schemes apply to the algorithms, not to kernel recipes (/kernel)");
  for (const auto& [what, f] : {std::pair<const char*, const Format*>{"q", &c.q_format}, {"k", &c.k_format},
                                {"v", &c.v_format}})
    if (!attention_format(*f))
      throw InputError(fmt::format("/format: input {} in format {}: attention's inputs take fp64, fp32, tf32, bf16, fp16, "
                                   "fp8_e4m3fn, fp8_e5m2 or a custom \"p=<bits>,emax=<e>\" (the element formats of "
                                   "block-scaled quantisation are not input formats)", what, f->name));
  check_stage_formats(spec.alloc, "/alloc: ");
  if (spec.kernel) {  // the recipe's own checks (detail/kernel_flash.hpp); the rest of the spec is unused
    if (spec.name != "fa2")
      throw InputError(fmt::format("/kernel: kernel {} runs FlashAttention-2 (\"name\": \"fa2\"), not \"{}\"",
                                   spec.kernel->name, spec.name));
    detail::check_kernel_layout(*spec.kernel, c.q_format, c.k_format, c.v_format, c.q.D, "/kernel: ");
    if (spec.kernel->schedule.engine == KernelEngine::blocked_fa2)  // fa2's own checks on the spec it runs
      validate_case(c, detail::blocked_kernel_spec(*spec.kernel, c.q_format, c.q.N / std::max<std::size_t>(1, c.kv.N)));
    return;
  }
  if (spec.s1 == 0) throw InputError("/s1: block sizes s1 and s2 must be at least 1");
  if (spec.s2 == 0) throw InputError("/s2: block sizes s1 and s2 must be at least 1");
  if (spec.splits == 0) throw InputError("/splits: splits must be at least 1 (1: no split-KV)");
  if (info.fdpp_options && !(std::isfinite(spec.fdpp.phi) && spec.fdpp.a < spec.fdpp.b))
    throw InputError(fmt::format("/fdpp: phi must be finite and a < b, got phi = {}, a = {}, b = {}", spec.fdpp.phi,
                                 spec.fdpp.a, spec.fdpp.b));
  if (spec.splits > 1 && !info.split_kv)
    throw InputError(fmt::format("/splits: splits = {}: split-KV needs {} (an unnormalised output to merge), got \"{}\"",
                                 spec.splits, names_with(&AlgorithmInfo::split_kv), spec.name));
  if (info.pasa_options) {
    if (!(spec.pasa.beta >= 0 && spec.pasa.beta < 1))
      throw InputError(fmt::format("/pasa/beta: pasa: beta must be in [0, 1), got {}", spec.pasa.beta));
    if (spec.pasa.form != "fa2" && spec.pasa.form != "printed")
      throw InputError("/pasa/form: pasa: form must be \"fa2\" or \"printed\", got \"" + spec.pasa.form + "\"");
  }
  {
    const QuantOptions& q = spec.quant;
    const std::pair<const std::optional<BlockScheme>*, const char*> blocks[] = {
        {&q.q_block, "q"}, {&q.k_block, "k"}, {&q.v_block, "v"}, {&q.p_block, "p"}};
    for (const auto& [b, name] : blocks)
      if (*b) validate_block_scheme(**b, fmt::format("/quant/{}/", name));
    if (q.scales != QuantScale::none && (q.q_block || q.k_block || q.v_block))
      throw InputError("/quant/scales: FA3's scales (tensor, head, block) and a block-scale scheme on Q, K or V are two "
                       "quantisations of one operand: give one");
    if (q.shift_first && q.k_block)
      throw InputError("/quant/shift_first: shift_first quantises K' = M·K with FA3's scales; with /quant/k give no shift_first");
  }
  if (spec.quant.fa3_active()) {
    const QuantOptions& q = spec.quant;
    if (!info.quant)
      throw InputError(fmt::format("/quant: the FP8 recipe runs with {} (tile by tile), got \"{}\"",
                                   names_with(&AlgorithmInfo::quant), spec.name));
    if (q.shift_first && (!info.pasa_options || q.scales == QuantScale::none))
      throw InputError("/quant/shift_first: shift_first (PASA's pre-processing before quantisation) needs pasa and scales");
    if (!quant_fmax_ok(q.fmax))
      throw InputError(fmt::format("/quant/fmax: fmax must lie in fp32's normal range [{}, {}], got {}", FLT_MIN, FLT_MAX,
                                   q.fmax));
    if (q.p_offset < -64 || q.p_offset > 64)
      throw InputError(fmt::format("/quant/p_offset: p_offset must be in [-64, 64], got {}", q.p_offset));
    // [FA3, §3.3] the transform is the Walsh–Hadamard matrix of order D (quantise.cpp hadamard_rows).
    if (q.hadamard && !std::has_single_bit(c.q.D))
      throw InputError(fmt::format("/quant/hadamard: the Hadamard transform needs a head dimension D that is a power of "
                                   "two, got D = {}", c.q.D));
  }
  for (const CaseGemm& g : case_gemms(c, spec)) {
    const GemmModel& m = spec.alloc.gemm_of(g.id);
    if (m.kind != GemmKind::tensor_core) continue;
    if (g.a.p > kTensorCoreMaxOperandBits || g.b.p > kTensorCoreMaxOperandBits)
      throw InputError(fmt::format("/alloc: allocation \"{}\": {} runs under the tensor_core model, which takes operands of "
                                   "at most {} bits (its products are exact in double), but gets {} ({} bits) x {} ({} bits); "
                                   "use narrower stages or inputs, or the ordered model",
                                   spec.alloc.name, gemm_text(g.id), kTensorCoreMaxOperandBits, g.a.name, g.a.p, g.b.name, g.b.p));
    // The integer engines take integer operands, which attention's stages are not (an INT8 recipe would
    // quantise them first); operand_bits cuts fp32 values, so it needs operands that floats hold.
    if (m.tc.integer != TcInteger::off)
      throw InputError(fmt::format("/alloc: allocation \"{}\": {} runs under an integer tensor_core model (\"integer\": "
                                   "\"{}\"), which takes integer operands; attention's {} x {} are not: use a "
                                   "floating-point model",
                                   spec.alloc.name, gemm_text(g.id), tc_integer_name(m.tc.integer), g.a.name, g.b.name));
    if (m.tc.group > 0 && !tc_group_exact(g.a, g.b, m.tc.group))
      throw InputError(fmt::format("/alloc: allocation \"{}\": {} runs under a tensor_core model that sums groups of {} "
                                   "products exactly (block-scaled FP4 kinds), which {} x {} operands do not allow: "
                                   "use fp4, fp6 or E4M3 stages for its operands",
                                   spec.alloc.name, gemm_text(g.id), m.tc.group, g.a.name, g.b.name));
    auto floats_hold = [](const Format& f) { return f.p <= 24 && f.emax <= 127 && f.emin() - (f.p - 1) >= -149; };
    if (m.tc.operand_bits > 0 && (!floats_hold(g.a) || !floats_hold(g.b)))
      throw InputError(fmt::format("/alloc: allocation \"{}\": {} runs under a tensor_core model that cuts fp32 operands to "
                                   "{} bits (operand_bits), but gets {} x {}",
                                   spec.alloc.name, gemm_text(g.id), m.tc.operand_bits, g.a.name, g.b.name));
    const RoundMode acc_mode = spec.alloc.spec(g.acc).round.mode;
    if (acc_mode == RoundMode::stochastic || m.tc.block_round == RoundMode::stochastic || m.tc.block_round == RoundMode::odd)
      throw InputError(
          fmt::format("/alloc: allocation \"{}\": {} runs under the tensor_core model, which rounds "
                      "rne, rna, rz, ru or rd only (the {} stage's rounding and the model's block_round; "
                      "no stochastic or odd); got {} and {}",
                      spec.alloc.name, gemm_text(g.id), stage_name(g.acc), round_mode_name(acc_mode),
                      round_mode_name(m.tc.block_round)));
  }
}

void validate_case(const ProblemSpec& p, const AlgorithmSpec& spec) {
  if (p.paged) return validate_unified(p, spec);  // unified attention over the paged cache
  validate(p);
  validate_case(case_layout(p), spec);
}

AttentionOutput run_attention(const AttentionInputs& in, const AlgorithmSpec& spec, int threads) {
  validate(in, threads);
  validate_case(case_layout(in), spec);
  if (spec.kernel && spec.kernel->schedule.engine == KernelEngine::blocked_fa2)
    return run_attention(in, detail::blocked_kernel_spec(*spec.kernel, in.q.format, in.q.shape.N / in.k.shape.N),
                         threads);
  if (spec.kernel) {  // (the GPU kernels' engines read Q, K and V as doubles)
    AttentionInputs wide;
    return detail::kernel_attention(wide_inputs(in, wide, threads), *spec.kernel, threads);
  }
  // A block longer than the sequence is the whole sequence (the engines already cut every block at S):
  // clamping changes no result, only the size of the per-block buffers (s2 = 4e6 on 256 keys allocated
  // s1 × s2 doubles per work item).
  AlgorithmSpec clamped = spec;
  clamped.s1 = std::min(spec.s1, in.q.shape.S);
  clamped.s2 = std::min(spec.s2, in.k.shape.S);
  detail::Run run(in, clamped, nullptr, threads);
  AttentionOutput out;
  out.o = Tensor::uninitialised(in.q.shape, run.stage(Stage::out).format);  // (every row written by its item)
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
