// The property harness's draws (property_case.hpp; the contract they are checked against: test_properties.cpp).
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>
#include <nlohmann/json.hpp>
#include "pasa/attention/algorithm.hpp"
#include "pasa/attention/quantise.hpp"
#include "pasa/attention/unified.hpp"
#include "pasa/core/error.hpp"
#include "pasa/exact/golden.hpp"
#include "pasa/exact/metrics.hpp"
#include "pasa/inputs/generators.hpp"
#include "pasa/io/algorithm_json.hpp"
#include "pasa/io/problem_json.hpp"
#include "reference/reference_attention.hpp"
#include "support/bits.hpp"
#include "property/property_case.hpp"

namespace pasa_property {


// The algorithms and what each supports, from the registry (algorithm.hpp): a new algorithm is drawn at once.
const std::vector<std::string> kAlgorithms = algorithm_names();
bool splittable(const std::string& a) { return algorithm_info(a).split_kv; }
bool quantises(const std::string& a) { return algorithm_info(a).quant; }
std::vector<std::string> names_without(bool AlgorithmInfo::*flag) {
  std::vector<std::string> n;
  for (const AlgorithmInfo& a : algorithm_registry())
    if (!(a.*flag)) n.push_back(a.name);
  return n;
}


// The low-precision run's allocation: the preset with the drawn rounding mode.
Allocation low_alloc(const Case& c) {
  Allocation a = allocation_preset(c.preset);
  if (c.mode_stage == "*") {
    for (StageSpec& st : a.stages) st.round.mode = c.mode;
  } else if (!c.mode_stage.empty()) {
    a.spec(c.mode_stage).round.mode = c.mode;
  }
  if (!c.tc_model.empty()) {
    a.gemm = GemmModel(GemmKind::tensor_core);
    a.gemm.tc = tensor_core_preset(c.tc_model);
  }
  return a;
}

// What a failure message calls the low-precision run.
std::string label(const Case& c) {
  if (!c.tc_model.empty()) {
    Case plain = c;
    plain.tc_model.clear();
    return label(plain) + " on the tensor-core model " + c.tc_model;
  }
  if (c.mode_stage.empty()) return c.preset;
  return c.preset + " with " + (c.mode_stage == "*" ? std::string("every stage") : "stage " + c.mode_stage) + " in " +
         round_mode_name(c.mode);
}

// The presets round every stage to nearest even; one case in four moves one stage (or every stage) to ties
// away. Drawn last, so that the other draws of a case do not move. Not the directed modes: a narrow exp stage
// takes e^x from double (ExpVia::exact: ~2 ulp, and 0 below 2^-1074), whose directed rounding is not the exact
// value's next to a grid point (e^x of a tiny argument, next to 1) nor for a weight below 2^-1074 (ru and ro
// round it up to the smallest subnormal); the nearest modes decide at midpoints, out of that reach.
void draw_rounding(Draw& d, Case& c) {
  if (c.preset.empty() || !d.chance(0.25)) return;
  static const std::vector<std::string> stages = stage_names();
  c.mode = RoundMode::nearest_away;
  c.mode_stage = d.chance(0.5) ? "*" : d.pick(stages);
}

// Block-scale schemes (numeric/block_scale.hpp) on Q, K, V and P, in any algorithm: one low-precision case in
// six, each operand with chance 1/2, a registered scheme (those whose element format the registry has) with a
// drawn scale rule, element rounding and saturation. Not on an operand FA3's scales already quantise, nor
// operands wider than the tensor-core model takes under the _h100 presets. Drawn after draw_rounding, so that
// the earlier draws of a case stay as they were.
void draw_block_schemes(Draw& d, Case& c) {
  if (c.preset.empty() || !c.refusal.empty() || !d.chance(1.0 / 6)) return;
  static const std::vector<BlockScheme> schemes = [] {
    std::vector<BlockScheme> v;
    for (const auto& e : kBlockSchemes) try {
        BlockScheme s = block_scheme_by_name(e.name);
        element_spec(s);
        v.push_back(s);
      } catch (const InputError&) {  // an element format the registry lacks
      }
    return v;
  }();
  std::vector<ScaleRule> rules;
  for (const auto& r : kScaleRules) rules.push_back(r.value);
  const bool h100 = c.preset.ends_with("_h100");
  QuantOptions& q = c.spec.quant;
  for (std::optional<BlockScheme>* slot : {&q.q_block, &q.k_block, &q.v_block, &q.p_block}) {
    if (!d.chance(0.5)) continue;
    BlockScheme s = d.pick(schemes);
    s.rule = d.pick(rules);
    s.round = d.pick<RoundMode>({RoundMode::nearest_even, RoundMode::nearest_away, RoundMode::toward_zero, RoundMode::stochastic});
    if (s.round == RoundMode::stochastic) s.quotient = Quotient::exact;
    s.saturate = d.chance(0.8);
    if (slot != &q.p_block && q.scales != QuantScale::none) continue;
    if (slot == &q.k_block && q.shift_first) continue;
    if (h100 && block_value_format(s).p > kTensorCoreMaxOperandBits) continue;
    *slot = s;
  }
}

// The paged KV cache's schemes (unified attention): K and V quantised token by token (a row per token and
// head, or K's blocks along D), deterministic rounding; one low-precision paged case in four.
void draw_paged_block_schemes(Draw& d, Case& c) {
  if (c.preset.empty() || !c.refusal.empty() || !d.chance(0.25)) return;
  const std::vector<std::string> names = {"fp8_per_token_head", "int8_per_token_head", "mxfp8_e4m3", "mxfp8_e5m2"};
  std::vector<ScaleRule> rules;
  for (const auto& r : kScaleRules) rules.push_back(r.value);
  const bool h100 = c.preset.ends_with("_h100");
  for (std::optional<BlockScheme>* slot : {&c.spec.quant.k_block, &c.spec.quant.v_block}) {
    if (!d.chance(0.7)) continue;
    BlockScheme s = block_scheme_by_name(d.pick(names));
    if (slot == &c.spec.quant.v_block || d.chance(0.5)) s.a.group = s.b.group = Grouping::row;
    s.rule = d.pick(rules);
    s.round = d.pick<RoundMode>({RoundMode::nearest_even, RoundMode::nearest_away, RoundMode::toward_zero});
    if (h100 && block_value_format(s).p > kTensorCoreMaxOperandBits) continue;
    *slot = s;
  }
}

// One small dense case in six runs the low-precision preset's GEMMs under a named tensor-core model of any generation
// (tensor_core_models(): the block-scaled ones with every scale 1), the integer ones aside (attention's
// operands are not integers). Drawn after draw_rounding, last, so that no other draw moves.
void draw_tensor_core(Draw& d, Case& c) {
  if (c.preset.empty() || !d.chance(1.0 / 6)) return;
  // (small dense cases only: the newer engines run term by term, ~50 ns a product)
  if (c.ps.paged || c.ps.B * c.ps.Nq * c.ps.Sq * c.ps.Skv * c.ps.D > 60000) return;
  // (only where every GEMM operand is a float: the engines take operands of at most 26 bits, the TF32 ones
  // fp32 values; the fp64 preset feeds fp64)
  const Allocation a = allocation_preset(c.preset);
  for (Stage st : {Stage::q, Stage::k, Stage::v, Stage::p, Stage::shift, Stage::k_shift, Stage::s, Stage::pv, Stage::o})
    if (a.spec(st).format.p > 24 || a.spec(st).format.emax > 127) return;
  // (only the models validate_case takes for this case: the grouped FP4 kinds need operands whose group sums
  // are exact, FP8 presets; a case refused on purpose keeps to the ungrouped ones)
  auto fits = [&c](const TensorCoreModel& m) {
    if (!c.refusal.empty()) return m.tc.group == 0;
    Case t = c;
    t.tc_model = std::string(m.name);
    AlgorithmSpec low = c.spec;
    low.alloc = low_alloc(t);
    try {
      validate_case(c.ps, low);
    } catch (const InputError&) {
      return false;
    }
    return true;
  };
  std::vector<std::string> models;
  for (const auto& m : tensor_core_models())
    if (m.tc.integer == TcInteger::off && fits(m)) models.emplace_back(m.name);
  if (!models.empty()) c.tc_model = d.pick(models);
}

// A problem size drawn mostly small, sometimes up to ~300 along a sequence.
std::size_t seq_len(Draw& d) {
  const std::size_t r = d.below(20);
  if (r < 12) return d.in(1, 20);
  if (r < 18) return d.in(1, 80);
  return d.in(1, 300);
}

TensorGen draw_gen(Draw& d) {
  TensorGen g;
  switch (d.below(3)) {
    case 0:
      g.kind = GenKind::uniform;
      g.x0 = d.pick<double>({0.0, 0.0, 1.0, -2.0, 3.0});
      g.am = d.pick<double>({1.0, 0.5, 2.0, 4.0});
      break;
    case 1:
      g.kind = GenKind::hybrid;
      g.x0 = d.pick<double>({0.0, 1.0});
      g.am = d.pick<double>({1.0, 5.0});
      g.p = d.pick<double>({0.001, 0.05});
      break;
    default:
      g.kind = GenKind::resonance;
      g.x0 = d.pick<double>({0.0, 0.5});
      g.am = d.pick<double>({1.0, 2.0});
      g.wavelength = d.pick<double>({4.0, 8.0, 3.0});
      g.phase_deg = d.pick<double>({0.0, 180.0, 90.0});
      g.seq_bias = d.pick<double>({0.0, 1.0});
      g.noise = d.pick<double>({0.0, 0.1});
  }
  return g;
}

// A paged problem and a unified algorithm (see the top of the file).
Case draw_paged_case(Draw& d) {
  Case c;
  ProblemSpec& p = c.ps;
  p.Nkv = d.in(1, 2);
  p.Nq = p.Nkv * d.in(1, 4);
  p.D = d.chance(0.2) ? d.pick<std::size_t>({16, 32}) : d.in(1, 40);
  p.seed = d.next() % 1000;
  p.format = d.pick<std::string>({"fp16", "fp16", "bf16", "fp32", "fp8_e4m3", "fp8_e5m2", "tf32"});
  p.q = draw_gen(d);
  p.k = d.chance(0.5) ? p.q : draw_gen(d);
  p.v = draw_gen(d);
  if (d.chance(0.1)) p.scale = d.pick<double>({0.1, 0.5});
  PagedLayout l;
  l.block_size = d.chance(0.3) ? d.in(1, 4) : d.in(5, 32);
  const bool prefills = d.chance(0.2);  // fresh prefills only: property 2
  const std::size_t n = d.in(1, 4);
  for (std::size_t s = 0; s < n; ++s) {
    PagedSequenceSpec q;
    q.ctx_len = d.chance(0.2) ? d.in(1, 8) : d.in(1, 120);
    q.q_len = prefills ? q.ctx_len : d.pick<std::size_t>({1, 1, q.ctx_len, d.in(1, q.ctx_len)});
    q.q_len = std::min(q.q_len, std::size_t{40});
    const std::size_t room = (q.ctx_len - q.q_len) / l.block_size;
    if (room > 0 && d.chance(0.5)) {
      q.shared_blocks = d.in(1, room);
      std::vector<std::size_t> from;  // earlier sequences holding as many full blocks
      for (std::size_t r = 0; r < s; ++r)
        if (l.seqs[r].ctx_len / l.block_size >= q.shared_blocks) from.push_back(r);
      if (!from.empty() && d.chance(0.7)) q.share_from = d.pick(from);
    }
    l.seqs.push_back(q);
  }
  p.paged = l;
  std::size_t need = 0;
  for (std::size_t s = 0; s < n; ++s) need += l.blocks_of(s) - (l.seqs[s].share_from ? l.seqs[s].shared_blocks : 0);
  if (d.chance(0.4)) p.paged->num_blocks = need + d.in(0, 3);
  if (d.chance(0.2)) {  // given tables: any blocks, aliasing allowed
    const std::size_t nb = std::max<std::size_t>(1, need / 2 + d.in(0, 3));
    p.paged->num_blocks = d.chance(0.5) ? nb : 0;
    for (auto& q : p.paged->seqs) {
      q.share_from.reset();
      q.block_table.clear();
      for (std::size_t t = 0; t < (q.ctx_len + l.block_size - 1) / l.block_size; ++t) q.block_table.push_back(d.below(nb));
    }
  }
  AlgorithmSpec& a = c.spec;
  a.name = d.pick<std::string>({"fa2", "pasa"});
  a.alloc = allocation_preset("fp64");
  a.s1 = d.chance(0.5) ? d.in(1, 8) : d.in(1, 48);
  a.s2 = d.chance(0.5) ? d.in(1, 8) : d.in(1, 48);
  a.seed = d.next() % 100;
  if (!prefills && d.chance(0.5)) a.splits = d.in(2, 6);
  if (a.name == "pasa") {
    a.pasa.beta = d.pick<double>({0.984497, 0.5, 0.0, 0.9});
    a.pasa.alpha_in_M = d.chance(0.7);
  }
  if (prefills || d.chance(0.5)) c.preset = d.pick(allocation_preset_names());
  if (d.chance(0.06)) {  // a combination the toolkit refuses
    switch (d.below(4)) {
      case 0:
        a.name = d.pick(names_without(&AlgorithmInfo::unified));
        a.splits = 1;
        c.refusal = "unified attention with an algorithm that has none";
        break;
      case 1:
        a.quant.scales = QuantScale::block;
        c.refusal = "the FP8 recipe on a paged cache";
        break;
      case 2:
        p.paged->seqs.back().q_len = p.paged->seqs.back().ctx_len + 1;
        c.refusal = "q_len > ctx_len";
        break;
      default:
        p.format = "fp64";
        c.refusal = "a cache format wider than fp32";
    }
  }
  draw_rounding(d, c);
  draw_paged_block_schemes(d, c);
  draw_tensor_core(d, c);
  return c;
}

Case draw_case(Draw& d) {
  Case c;
  ProblemSpec& p = c.ps;
  // A third of the cases are small and within the reference emulator's reach (no FP8 recipe, no fdpp), with a
  // low-precision preset: property 2 on many of them.
  const bool plain = d.chance(0.35);
  const std::size_t work_cap = plain ? 20000 : 400000;
  for (;;) {  // shapes with a bounded amount of work (B·Nq·Sq·Skv·D)
    p.B = d.in(1, 3);
    p.Nkv = d.in(1, 2);
    p.Nq = p.Nkv * d.in(1, 8);
    p.Sq = seq_len(d);
    p.Skv = seq_len(d);
    p.D = d.chance(0.2) ? d.pick<std::size_t>({16, 32, 64}) : d.in(1, 80);
    if (p.B * p.Nq * p.Sq * p.Skv * p.D <= work_cap) break;
  }
  p.seed = d.next() % 1000;
  p.format = d.pick<std::string>({"fp16", "fp16", "bf16", "fp32", "fp64", "fp8_e4m3", "fp8_e5m2", "tf32"});
  p.q = draw_gen(d);
  p.k = d.chance(0.5) ? p.q : draw_gen(d);
  p.v = draw_gen(d);
  p.causal = d.chance(0.3);
  if (d.chance(0.4)) {
    for (std::size_t b = 0; b < p.B; ++b)
      p.kv_len.push_back(d.pick<std::size_t>({0, p.Skv, p.Skv, d.in(0, p.Skv), d.in(0, p.Skv)}));
  }
  if (d.chance(0.3)) {
    p.has_pse = true;
    p.pse.kind = GenKind::uniform;
    p.pse.am = d.pick<double>({1.0, 3.0});
  }
  if (d.chance(0.35)) {
    p.select_p = d.pick<double>({0.1, 0.5, 0.9, 1.0});
    p.select_value = d.pick<double>({-1e12, -1e4, -30.0, -20.0, -2.0, 0.0, 3.0, d.range(-10, 10)});
  }
  if (d.chance(0.1)) p.scale = d.pick<double>({0.1, 0.5, 1.0});

  AlgorithmSpec& s = c.spec;
  static const std::vector<std::string> emulated = [] {  // what the reference emulator restates
    std::vector<std::string> n;
    for (const std::string& a : kAlgorithms)
      if (a != "fdpp") n.push_back(a);
    return n;
  }();
  s.name = plain ? d.pick(emulated) : d.pick(kAlgorithms);
  s.alloc = allocation_preset("fp64");
  s.s1 = d.chance(0.5) ? d.in(1, 8) : d.in(1, 64);
  s.s2 = d.chance(0.5) ? d.in(1, 8) : d.in(1, 64);
  s.seed = d.next() % 100;
  if (splittable(s.name) && d.chance(0.5)) s.splits = d.in(2, 8);
  if (algorithm_info(s.name).pasa_options) {
    s.pasa.beta = d.pick<double>({0.984497, 0.5, 0.0, 0.9, 0.999});
    s.pasa.alpha_in_M = d.chance(0.7);
    s.pasa.form = d.chance(0.7) ? "fa2" : "printed";
    // Alg. 1 as printed starts from m_0 = 0: exact unless every weight of a row underflows against it (a row
    // whose keys are all selected with a very negative value), which is what "as printed" means.
    s.pasa.m0_zero = d.chance(0.15) && !(p.select_p > 0 && p.select_value < -500);
    s.pasa.bf16_to_fp16 = d.chance(0.8);
  }
  if (algorithm_info(s.name).fdpp_options) s.fdpp.phi = d.pick<double>({0.0, 2.0, 8.0, -5.0});
  if (!plain && quantises(s.name) && d.chance(0.3)) {
    s.quant.scales = d.pick<QuantScale>({QuantScale::none, QuantScale::tensor, QuantScale::head, QuantScale::block});
    s.quant.hadamard = d.chance(std::has_single_bit(p.D) ? 0.5 : 0.05);  // D = 2^k, else refused
    s.quant.hadamard_seed = d.in(1, 9);
    s.quant.p_offset = d.chance(0.3) ? 8 : 0;
    s.quant.shift_first = algorithm_info(s.name).pasa_options && s.quant.scales != QuantScale::none && d.chance(0.5);
  }
  if (plain || d.chance(0.5)) {  // low-precision runs
    static const std::vector<std::string> presets = allocation_preset_names();
    c.preset = d.pick(presets);
  }
  if (d.chance(0.04)) {  // a combination the toolkit refuses
    switch (d.below(10)) {
      case 0:
        s.name = d.pick(names_without(&AlgorithmInfo::split_kv));
        s.splits = d.in(2, 5);
        c.refusal = "split-KV on a normalising engine";
        break;
      case 1:
        s.name = d.pick(names_without(&AlgorithmInfo::quant));
        s.splits = 1;
        s.quant.scales = QuantScale::block;
        c.refusal = "FP8 recipe on an algorithm without it";
        break;
      case 2:
        s.name = "pasa";
        s.quant = QuantOptions{};
        s.quant.shift_first = true;
        c.refusal = "shift_first without scales";
        break;
      case 3:
        s.name = "fdpp";
        s.fdpp.a = 5;
        s.fdpp.b = d.pick<double>({5.0, -1.0});
        c.refusal = "fdpp with a >= b";
        break;
      case 4:
        (d.chance(0.5) ? s.s1 : s.s2) = 0;
        c.refusal = "a block size of 0";
        break;
      case 5:
        p.kv_len.assign(p.B, p.Skv);
        p.kv_len[d.below(p.B)] = p.Skv + d.in(1, 3);
        c.refusal = "kv_len > Skv";
        break;
      case 6:
        s.name = "pasa";
        s.quant = QuantOptions{};
        s.pasa.beta = d.pick<double>({1.0, -0.5});
        c.refusal = "beta outside [0, 1)";
        break;
      case 8: {  // an element format of block-scaled quantisation as a stage's format or accumulator
        static const std::vector<std::string> stages = stage_names();
        StageSpec& st = s.alloc.spec(d.pick(stages));
        const Format f = format_by_name(d.pick<std::string>({"fp4_e2m1", "fp6_e2m3", "fp6_e3m2", "e8m0", "int8",
                                                             "int8_full", "int4", "int4_full", "hif8"}));
        if (d.chance(0.5)) st.format = f;
        else st.reduce.acc = f;
        c.refusal = "an element format as a stage format";
        break;
      }
      case 9:
        p.format = d.pick<std::string>({"fp4_e2m1", "int8", "hif8", "e8m0"});
        c.refusal = "an element format as the input format";
        break;
      default:
        s.splits = 0;
        c.refusal = "splits = 0";
    }
  }
  draw_rounding(d, c);
  draw_tensor_core(d, c);
  return c;
}

}  // namespace pasa_property
