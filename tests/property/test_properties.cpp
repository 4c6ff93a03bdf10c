// The toolkit's contract checked on random combinations of problem options and algorithms (docs/contract.md):
//   1. every blocked algorithm in fp64 (any s1, s2, splits, PASA / fdpp / FP8-recipe options) equals the MPFR
//      golden: relative RMSE of O <= 1e-13, and lse within 1e-12·(1 + |lse|);
//   2. under a low-precision allocation (a random preset) it gives the independent reference emulator's bits
//      (tests/reference/) wherever the emulator covers the combination (split-KV, pse and select included; not
//      the FP8 recipe, fdpp, the tensor-core GEMM, stochastic rounding or formats without subnormals; small
//      shapes: MPFR per operation);
//   3. its bits do not depend on the thread count (1 vs 2) nor on the fused/general path (fa2 and pasa: an
//      all-zero pse selects the general path without changing a value);
//   4. a combination the toolkit does not support is refused with an InputError naming it, before any work
//      (drawn on purpose: split-KV on a normalising engine, the FP8 recipe on the others, shift_first without
//      scales, fdpp with a >= b, s1 = 0, kv_len > Skv, β = 1, ...).
// Paged problems ("kind": "paged", attention/unified.hpp), one case in ten: mixed decode / chunked prefill /
// fresh prefill sequences, shared prefixes (share_from), spare cache blocks, generated or given block tables
// (given ones may alias any blocks), any block size; fa2 or pasa with random s1, s2 and splits. Property 1 is
// unified_attention in fp64 against unified_golden; 2 (no emulator covers the merge) is that a batch of fresh
// prefills without splits (one part per sequence) gives run_attention's bits on each sequence's gathered dense
// inputs, which property 2 ties to the emulator; 3 the thread count; 4 refusals (an algorithm without unified
// attention, the FP8 recipe, a broken layout) by validate_case on the problem, before anything is generated.
// The draws: B, Nq and Nkv (GQA ratios 1–8), Sq != Skv (1 to ~300), D (1 to 80, mostly not multiples of 16),
// every input format and generator, kv_len (none, 0, partial, full), causal, pse, select with any value (very
// negative, mild, 0, positive, every key of a row), every algorithm with random s1, s2 and splits.
//
// A seeded generator of our own (SplitMix64), not RapidCheck: the draws are reproducible from one printed
// number on every platform (no library's distribution code in between), the shrinking is ours to steer (halve
// the sizes, drop one option at a time, keep what still fails) and ends in the project's own input format (a
// ready problem JSON + algorithm JSON pair for pasa-attn), and no dependency is added.
//
// Default run: PASA_PROPERTY_CASES cases (default 2000) from PASA_PROPERTY_SEED (default 24). The [long] test
// runs PASA_PROPERTY_LONG_CASES (default 100000) from another seed. PASA_PROPERTY_VERBOSE=1 prints each case;
// PASA_PROPERTY_SHARD=I/N runs every N-th case from the I-th (N processes: the cases of one run).
#include <catch2/catch.hpp>

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
#include "pasa/attention/unified.hpp"
#include "pasa/core/error.hpp"
#include "pasa/exact/golden.hpp"
#include "pasa/exact/metrics.hpp"
#include "pasa/inputs/generators.hpp"
#include "pasa/io/algorithm_json.hpp"
#include "pasa/io/problem_json.hpp"
#include "reference/reference_attention.hpp"
#include "support/bits.hpp"

using namespace pasa;

namespace {

// The fp64 contract's bound on the relative RMSE against the golden: 1e-13, and for PASA
// 1e-13 + 4·u·Inva·max(M, 1), u = 2^-53, Inva = β/(1 − β), M = scale·max_i Σ_d |q_id|·max_j |k_jd| (no
// score exceeds M in magnitude). PASA recovers the block shift as Inva·S̄' (Thm. 2.1): S̄', the mean of the
// shifted scores, is about (1 − β)·S̄, but its rounding error is that of the unshifted scores (the shifted
// keys k − β·k̄ are rounded relative to |k|), about u·M, and comes back multiplied by Inva: an error of the
// block's frame, hence of every output in it, of order u·Inva·M. The constant 4 is measured: over 10,451 PASA
// cases of two 40,000-case runs (seeds 24 and 7771203), rel / (u·Inva·max(M, 1)) after the 1e-13 reached 1.8
// (β = 0.999, M = 46: 9.2e-12). A bound without M (2e-13·Inva/63.5) fails at β = 0.999 with scores near 50
// (docs/contract.md).
double fp64_bound(const AlgorithmSpec& spec, double M) {
  if (!algorithm_info(spec.name).pasa_options) return 1e-13;
  const double inva = spec.pasa.beta / (1 - spec.pasa.beta);
  return 1e-13 + 4 * 0x1p-53 * inva * std::max(M, 1.0);
}

// M of fp64_bound: scale · the largest Σ_d |q_d|·kmax_d over the query rows (q: rows × D), kmax_d the largest
// |k| of column d over every key (k: keys × D, of any head).
template <class QV, class KV>
double score_magnitude(const QV& q, const KV& k, std::size_t D, double scale) {
  std::vector<double> kmax(D, 0.0);
  for (std::size_t j = 0; j + D <= k.size(); j += D)
    for (std::size_t d = 0; d < D; ++d) kmax[d] = std::max(kmax[d], std::abs(static_cast<double>(k[j + d])));
  double m = 0;
  for (std::size_t i = 0; i + D <= q.size(); i += D) {
    double r = 0;
    for (std::size_t d = 0; d < D; ++d) r += std::abs(q[i + d]) * kmax[d];
    m = std::max(m, r);
  }
  return m * scale;
}

// SplitMix64 [Steele, Lea & Flood 2014]: one 64-bit state, a fixed output function.
struct Draw {
  std::uint64_t s;
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  std::size_t below(std::size_t n) { return static_cast<std::size_t>(next() % n); }
  std::size_t in(std::size_t a, std::size_t b) { return a + below(b - a + 1); }  // [a, b]
  double unit() { return static_cast<double>(next() >> 11) * 0x1p-53; }
  double range(double a, double b) { return a + (b - a) * unit(); }
  bool chance(double p) { return unit() < p; }
  template <class T>
  T pick(const std::vector<T>& v) { return v[below(v.size())]; }
};

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

struct Case {
  ProblemSpec ps;
  AlgorithmSpec spec;      // its alloc is fp64 for property 1
  std::string preset;      // "" or the low-precision preset of properties 2–3
  std::string refusal;     // non-empty: the spec was broken on purpose (what was broken); property 4 only
};

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
    switch (d.below(8)) {
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
      default:
        s.splits = 0;
        c.refusal = "splits = 0";
    }
  }
  return c;
}

// The inputs of a case's problem, built as the library builds them (the problem JSON's meaning), except a
// refused kv_len, which the problem JSON itself would refuse: set after generation, for run_attention to see.
AttentionInputs inputs_of(const ProblemSpec& p) {
  ProblemSpec q = p;
  bool bad_len = false;
  for (std::size_t x : p.kv_len) bad_len |= x > p.Skv;
  if (bad_len) q.kv_len.clear();
  AttentionInputs in = generate_inputs(q, 1);
  if (bad_len) in.mask.kv_len = p.kv_len;
  return in;
}

std::string sci(double x) {
  std::ostringstream o;
  o.precision(3);
  o << std::scientific << x;
  return o.str();
}

struct Stats {
  std::size_t cases = 0, fp64 = 0, low = 0, reference = 0, reference_biased = 0, fused = 0, refused = 0;
  std::size_t paged = 0, paged_dense = 0;  // paged cases; of them, prefill batches equal to their dense runs
};

// The contract on a paged case; "" when it holds, else what failed.
std::string check_paged(const Case& c, Stats* st) {
  if (!c.refusal.empty()) {  // property 4: refused by the check the front ends make before generating
    try {
      validate_case(c.ps, c.spec);
    } catch (const InputError& e) {
      if (st) ++st->refused;
      return std::string(e.what()).empty() ? "refused without a message (" + c.refusal + ")" : "";
    }
    return "accepted a refused combination: " + c.refusal;
  }
  validate_case(c.ps, c.spec);
  const PagedBatch pb = generate_paged(c.ps, 1);
  GoldenOptions go;
  go.threads = 1;
  const Golden g = unified_golden(pb, go);
  const AttentionOutput o = unified_attention(pb, c.spec, 2);
  AttentionInputs scaled;  // (the batch's scale as the engines take it: AttentionInputs::effective_scale)
  scaled.q.shape = pb.q.shape;
  scaled.scale = pb.scale;
  const double tol = fp64_bound(c.spec, score_magnitude(pb.q.data, pb.cache.k, pb.q.shape.D, scaled.effective_scale()));
  // Relative to the golden's norm with the dense cases' floor (1e-3 of V's scale: an output that cancels to ~0).
  long double num = 0, den = 0, vmax = 0;
  for (std::size_t i = 0; i < o.o.data.size(); ++i) {
    const long double dlt = static_cast<long double>(o.o.data[i]) - g.o.data[i];
    num += dlt * dlt;
    den += static_cast<long double>(g.o.data[i]) * g.o.data[i];
  }
  for (float x : pb.cache.v) vmax = std::max(vmax, static_cast<long double>(std::abs(x)));
  den = std::max(den, 1e-6L * vmax * vmax * static_cast<long double>(o.o.data.size()));
  const double rel = den == 0 ? (num == 0 ? 0.0 : INFINITY) : std::sqrt(static_cast<double>(num / den));
  if (!(rel <= tol)) return "paged fp64 vs golden: relative RMSE " + sci(rel) + " (bound " + sci(tol) + ")";
  for (std::size_t i = 0; i < o.lse.size(); ++i)
    if (!(std::abs(o.lse[i] - g.lse[i]) <= 10 * tol * (1 + std::abs(g.lse[i]))))
      return "paged fp64 lse[" + std::to_string(i) + "] " + sci(o.lse[i]) + ", golden " + sci(g.lse[i]);
  if (st) ++st->fp64;
  if (c.preset.empty()) return "";
  AlgorithmSpec low = c.spec;
  low.alloc = allocation_preset(c.preset);
  const AttentionOutput a1 = unified_attention(pb, low, 1), a2 = unified_attention(pb, low, 2);
  if (std::string d = test::first_difference(a1, a2); !d.empty()) return c.preset + ": paged, 1 vs 2 threads differ: " + d;
  if (st) ++st->low;
  bool one_part = low.splits == 1;
  for (const PagedSequence& s : pb.seqs) one_part = one_part && s.q_len == s.ctx_len;
  if (!one_part) return "";
  std::size_t off = 0;
  for (std::size_t s = 0; s < pb.seqs.size(); ++s) {  // each sequence's rows: run_attention's on its dense inputs
    const AttentionOutput r = run_attention(sequence_inputs(pb, s), low, 1);
    const std::size_t ql = pb.seqs[s].q_len, D = pb.q.shape.D, T = pb.q.shape.S;
    for (std::size_t h = 0; h < pb.q.shape.N; ++h)
      for (std::size_t i = 0; i < ql * D; ++i)
        if (!test::same_bits(a1.o.data[(h * T + off) * D + i], r.o.data[h * ql * D + i]))
          return c.preset + ": paged prefill, sequence " + std::to_string(s) + " differs from its dense run at head " +
                 std::to_string(h) + ", element " + std::to_string(i);
    off += ql;
  }
  if (st) ++st->paged_dense;
  return "";
}

// The contract on one case; "" when it holds, else what failed.
std::string check(const Case& c, Stats* st) {
  if (c.ps.paged) {
    if (st) ++st->paged;
    return check_paged(c, st);
  }
  const AttentionInputs in = inputs_of(c.ps);
  std::string refusal = c.refusal;
  if (refusal.empty() && c.spec.quant.hadamard && !std::has_single_bit(c.ps.D))
    refusal = "the Hadamard transform with D not a power of two";
  if (!refusal.empty()) {  // property 4
    try {
      run_attention(in, c.spec, 1);
    } catch (const InputError& e) {
      if (st) ++st->refused;
      return std::string(e.what()).empty() ? "refused without a message (" + refusal + ")" : "";
    }
    return "accepted a refused combination: " + refusal;
  }
  // Property 1: fp64 = golden.
  GoldenOptions go;
  go.threads = 1;
  const Golden g = golden_attention(in, go);
  AttentionOutput o;
  try {
    o = run_attention(in, c.spec, 2);
  } catch (const std::exception& e) {
    return std::string("fp64 run threw: ") + e.what();
  }
  long double num = 0, den = 0;
  for (std::size_t i = 0; i < o.o.data.size(); ++i) {
    const long double dlt = static_cast<long double>(o.o.data[i]) - g.o.data[i];
    num += dlt * dlt;
    den += static_cast<long double>(g.o.data[i]) * g.o.data[i];
  }
  // Relative to the golden's norm, but no less than 1e-3 of V's scale: an output that cancels to ~0 (V of
  // both signs under even weights) is judged on V's scale, as the golden's own bound is relative to Σ p|v|.
  long double vmax = 0;
  for (double x : in.v.data) vmax = std::max(vmax, static_cast<long double>(std::abs(x)));
  den = std::max(den, 1e-6L * vmax * vmax * static_cast<long double>(o.o.data.size()));
  const double rel = den == 0 ? (num == 0 ? 0.0 : INFINITY) : std::sqrt(static_cast<double>(num / den));
  const double tol = fp64_bound(c.spec, score_magnitude(in.q.data, in.k.data, in.q.shape.D, in.effective_scale()));
  if (!(rel <= tol)) return "fp64 vs golden: relative RMSE " + sci(rel) + " (bound " + sci(tol) + ")";
  for (std::size_t i = 0; i < o.lse.size(); ++i) {
    const double a = o.lse[i], b = g.lse[i];
    if (std::isinf(b) || std::isinf(a)) {
      if (a != b) return "fp64 lse[" + std::to_string(i) + "] " + sci(a) + ", golden " + sci(b) + ", difference " + sci(a - b);
    } else if (!(std::abs(a - b) <= 10 * tol * (1 + std::abs(b)))) {
      return "fp64 lse[" + std::to_string(i) + "] " + sci(a) + ", golden " + sci(b) + ", difference " + sci(a - b);
    }
  }
  if (st) ++st->fp64;
  if (c.preset.empty()) return "";
  // Properties 2 and 3 under a low-precision preset.
  AlgorithmSpec low = c.spec;
  low.alloc = allocation_preset(c.preset);
  AttentionOutput a1, a2;
  try {
    a1 = run_attention(in, low, 1);
    a2 = run_attention(in, low, 2);
  } catch (const std::exception& e) {
    return "low-precision run (" + c.preset + ") threw: " + e.what();
  }
  if (std::string d = test::first_difference(a1, a2); !d.empty()) return c.preset + ": 1 vs 2 threads differ: " + d;
  if (st) ++st->low;
  const bool biased = !in.pse.data.empty() || !in.mask.select.empty();
  if (algorithm_info(low.name).fused_path && !biased && !low.quant.active()) {
    AttentionInputs general = in;  // +0 bias: the general path, the same values
    general.pse = Tensor({in.q.shape.B, in.q.shape.N, in.q.shape.S, in.k.shape.S}, format_by_name("fp16"));
    if (std::string d = test::first_difference(a1, run_attention(general, low, 1)); !d.empty())
      return c.preset + ": fused vs general path differ: " + d;
    if (st) ++st->fused;
  }
  const std::size_t work = in.q.shape.B * in.q.shape.N * in.q.shape.S * in.k.shape.S * in.q.shape.D;
  if (low.name != "fdpp" && !low.quant.active() && low.alloc.gemm.kind != GemmKind::tensor_core && work <= 30000) {
    AttentionOutput r;
    try {
      r = reference::reference_attention(in, low);
    } catch (const std::invalid_argument&) {
      return "";  // not covered by the emulator (stochastic rounding, formats without subnormals)
    }
    if (std::string d = test::first_difference(a1, r); !d.empty()) return c.preset + ": engine vs reference emulator: " + d;
    if (st) ++st->reference, st->reference_biased += biased;
  }
  return "";
}

// Smaller variants of a case: sizes halved, options dropped one at a time.
std::vector<Case> shrinks(const Case& c) {
  std::vector<Case> out;
  auto add = [&](const std::function<bool(Case&)>& f) {
    Case x = c;
    if (f(x)) out.push_back(std::move(x));
  };
  auto clamp_len = [](ProblemSpec& p) {
    for (auto& l : p.kv_len) l = std::min(l, p.Skv);
  };
  add([](Case& x) { return x.ps.B > 1 && (x.ps.B /= 2, x.ps.kv_len.resize(std::min(x.ps.kv_len.size(), x.ps.B)), true); });
  add([](Case& x) { return x.ps.Nq > x.ps.Nkv && (x.ps.Nq = x.ps.Nkv * std::max<std::size_t>(1, x.ps.Nq / x.ps.Nkv / 2), true); });
  add([](Case& x) { return x.ps.Nkv > 1 && (x.ps.Nq /= x.ps.Nkv, x.ps.Nkv = 1, true); });
  add([](Case& x) { return x.ps.Sq > 1 && (x.ps.Sq = (x.ps.Sq + 1) / 2, true); });
  add([](Case& x) { return x.ps.Sq > 1 && (--x.ps.Sq, true); });
  add([&](Case& x) { return x.ps.Skv > 1 && (x.ps.Skv = (x.ps.Skv + 1) / 2, clamp_len(x.ps), true); });
  add([&](Case& x) { return x.ps.Skv > 1 && (--x.ps.Skv, clamp_len(x.ps), true); });
  add([](Case& x) { return x.ps.D > 1 && (x.ps.D = (x.ps.D + 1) / 2, true); });
  add([](Case& x) { return x.ps.has_pse && !(x.ps.has_pse = false); });
  add([](Case& x) { return x.ps.select_p > 0 && (x.ps.select_p = 0, true); });
  add([](Case& x) { return x.ps.select_p > 0 && x.ps.select_p < 1 && (x.ps.select_p = 1, true); });
  add([](Case& x) { return !x.ps.kv_len.empty() && x.refusal.empty() && (x.ps.kv_len.clear(), true); });
  add([](Case& x) { return x.ps.causal && !(x.ps.causal = false); });
  add([](Case& x) { return x.ps.scale != 0 && (x.ps.scale = 0, true); });
  add([](Case& x) { return x.ps.q.kind != GenKind::uniform && (x.ps.q = TensorGen{}, true); });
  add([](Case& x) { return x.ps.k.kind != GenKind::uniform && (x.ps.k = TensorGen{}, true); });
  add([](Case& x) { return x.ps.v.kind != GenKind::uniform && (x.ps.v = TensorGen{}, true); });
  add([](Case& x) { return x.spec.splits > 1 && (x.spec.splits = (x.spec.splits + 1) / 2 == 1 ? 1 : x.spec.splits / 2, true); });
  add([](Case& x) { return x.spec.s1 > 1 && (x.spec.s1 = (x.spec.s1 + 1) / 2, true); });
  add([](Case& x) { return x.spec.s2 > 1 && (x.spec.s2 = (x.spec.s2 + 1) / 2, true); });
  add([](Case& x) { return x.spec.quant.active() && x.refusal.empty() && (x.spec.quant = QuantOptions{}, true); });
  add([](Case& x) { return !x.preset.empty() && (x.preset.clear(), true); });
  add([](Case& x) { return x.ps.paged && x.ps.paged->seqs.size() > 1 && (x.ps.paged->seqs.pop_back(), true); });
  return out;
}

// The smallest variant that still fails (greedy: the first shrink that keeps a failure, repeated).
Case shrink(Case c, std::string& why) {
  for (int round = 0; round < 200; ++round) {
    bool progress = false;
    for (const Case& x : shrinks(c)) {
      std::string w;
      try {
        w = check(x, nullptr);
      } catch (const std::exception& e) {
        w = std::string("threw: ") + e.what();
      }
      if (!w.empty()) {
        c = x;
        why = w;
        progress = true;
        break;
      }
    }
    if (!progress) break;
  }
  return c;
}

std::string describe(const Case& c) {
  AlgorithmSpec s = c.spec;
  if (!c.preset.empty()) s.alloc = allocation_preset(c.preset);
  std::ostringstream o;
  // Each line a ready file for pasa-attn --problem P.json --algo-json A.json.
  o << "problem JSON:   " << to_json(c.ps).dump() << "\n";
  o << "algorithm JSON: " << to_json(s).dump() << (c.preset.empty() ? " (fp64 run)" : " (low-precision run; fp64 run with \"alloc\": \"fp64\")")
    << "\n";
  if (!c.refusal.empty()) o << "broken on purpose: " << c.refusal << "\n";
  return o.str();
}

std::size_t env_count(const char* name, std::size_t dflt) {
  const char* v = std::getenv(name);
  return v ? static_cast<std::size_t>(std::strtoull(v, nullptr, 10)) : dflt;
}

// PASA_PROPERTY_SHARD=I/N runs cases I, I + N, I + 2N, ... of the same sequence (the case seeds are drawn
// for every k), so N processes together run exactly the cases of one run: how the long run uses a big host.
std::pair<std::size_t, std::size_t> env_shard() {
  const char* v = std::getenv("PASA_PROPERTY_SHARD");
  if (!v) return {0, 1};
  char* end = nullptr;
  const std::size_t i = std::strtoull(v, &end, 10);
  const std::size_t n = *end == '/' ? std::strtoull(end + 1, nullptr, 10) : 0;
  if (n == 0 || i >= n) throw std::invalid_argument(std::string("PASA_PROPERTY_SHARD=") + v + ": expected I/N, I < N");
  return {i, n};
}

void run_properties(std::size_t n, std::uint64_t seed) {
  Draw d{seed};
  Stats st;
  const auto [shard, shards] = env_shard();
  std::size_t planned = 0;
  static const bool verbose = std::getenv("PASA_PROPERTY_VERBOSE") != nullptr;
  const auto t0 = std::chrono::steady_clock::now();
  std::size_t failures = 0;
  for (std::size_t k = 0; k < n; ++k) {
    const std::uint64_t case_seed = d.next();
    if (k % shards != shard) continue;
    ++planned;
    Draw cd{case_seed};
    // One case in ten paged (decided by the case seed, so that the dense cases stay those of earlier runs).
    const Case c = case_seed % 10 == 3 ? draw_paged_case(cd) : draw_case(cd);
    if (verbose) std::cout << "case " << k << " (seed " << case_seed << ")\n" << describe(c);
    std::string why;
    try {
      why = check(c, &st);
    } catch (const std::exception& e) {
      why = std::string("threw: ") + e.what();
    }
    ++st.cases;
    if (why.empty()) continue;
    std::string small_why = why;
    const Case small = shrink(c, small_why);
    ++failures;
    FAIL_CHECK("case " << k << " (case seed " << case_seed << ") fails: " << why << "\n" << describe(c)
                       << "shrunk to: " << small_why << "\n" << describe(small));
    if (failures >= 5) break;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "[property] " << st.cases << " cases in " << secs << " s: " << st.fp64 << " fp64 = golden, " << st.low
            << " low-precision thread-independent, " << st.fused << " fused = general, " << st.reference
            << " = reference emulator (" << st.reference_biased << " with pse or select), " << st.refused
            << " refused as they should; " << st.paged << " paged (" << st.paged_dense
            << " prefill batches = their dense runs)\n";
  CHECK(st.cases == planned);
}

}  // namespace

TEST_CASE("property: the contract on random problems and algorithms", "[property]") {
  run_properties(env_count("PASA_PROPERTY_CASES", 2000), env_count("PASA_PROPERTY_SEED", 24));
}

TEST_CASE("property: the contract on many random problems (long)", "[property][long]") {
  run_properties(env_count("PASA_PROPERTY_LONG_CASES", 100000), env_count("PASA_PROPERTY_SEED", 24) + 1000003);
}

TEST_CASE("property: the shrinker finds a minimal failing case", "[property]") {
  // A planted failure (D > 5 and causal) must shrink to D = 6 or the smallest D above 5, no other option.
  Case c;
  c.ps.B = 3;
  c.ps.Nq = 4;
  c.ps.Nkv = 2;
  c.ps.Sq = 40;
  c.ps.Skv = 70;
  c.ps.D = 77;
  c.ps.causal = true;
  c.ps.has_pse = true;
  c.spec.splits = 4;
  c.spec.alloc = allocation_preset("fp64");
  auto fails = [](const Case& x) { return x.ps.D > 5 && x.ps.causal; };
  Case cur = c;
  for (bool progress = true; progress;) {
    progress = false;
    for (const Case& x : shrinks(cur))
      if (fails(x)) {
        cur = x;
        progress = true;
        break;
      }
  }
  CHECK(cur.ps.B == 1);
  CHECK(cur.ps.Nq == 1);
  CHECK(cur.ps.Sq == 1);
  CHECK(cur.ps.Skv == 1);
  CHECK(cur.ps.D <= 10);
  CHECK(cur.ps.D > 5);
  CHECK(!cur.ps.has_pse);
  CHECK(cur.spec.splits == 1);
  CHECK(cur.ps.causal);
}
