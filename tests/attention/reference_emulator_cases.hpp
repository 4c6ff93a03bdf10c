// What the reference-emulator tests share (test_reference_emulator.cpp: presets, stages, modes, GEMM models,
// split-KV, PASA's options; test_fused_reference.cpp: the fused float tile path): the random cases with
// tails, masks and a hidden row, one configuration's comparison of the engine with tests/reference/, and
// the tally of configurations.
#pragma once

#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <string>
#include <utility>
#include <vector>
#include <boost/random/mersenne_twister.hpp>
#include <boost/random/normal_distribution.hpp>
#include "pasa/attention/algorithm.hpp"
#include "pasa/attention/detail/blocked_attention.hpp"
#include "pasa/attention/detail/fused_tile.hpp"
#include "pasa/attention/detail/pasa_attention.hpp"
#include "pasa/attention/gemm.hpp"
#include "reference/reference_attention.hpp"
#include "support/bits.hpp"

namespace pasa::refemu_test {

using namespace pasa;

const char* const kAlgorithms[] = {"safe_softmax", "online_softmax", "fa1", "fa2", "pasa", "smooth_k"};
const char* const kFormats[] = {"fp16", "bf16", "fp32", "fp8_e4m3", "fp8_e5m2"};
constexpr RoundMode kModes[] = {RoundMode::nearest_even, RoundMode::nearest_away, RoundMode::toward_zero,
                                RoundMode::toward_pos,   RoundMode::toward_neg,   RoundMode::odd};

inline Tensor normal_tensor(Shape sh, const Format& f, double mean, double sd, std::uint64_t seed) {
  Tensor t(sh, f);
  boost::random::mt19937_64 eng(seed);
  boost::random::normal_distribution<double> n(mean, sd);
  for (double& x : t.data) x = round(n(eng), f);
  return t;
}

struct Shape6 {
  std::size_t B, Nq, Nkv, Sq, Skv, D, s1, s2;
};

// Masks by kind: 0 none, 1 causal, 2 kv_len, 3 causal + kv_len + a hidden row and a hidden stripe (keep).
inline AttentionInputs make_inputs(const Shape6& s, int mask_kind, std::uint64_t seed, const char* fmt = "fp16",
                            double bias = 2.0) {
  const Format f = format_by_name(fmt);
  AttentionInputs in;
  in.q = normal_tensor({s.B, s.Nq, s.Sq, s.D}, f, bias, 1.0, seed * 3 + 1);
  in.k = normal_tensor({s.B, s.Nkv, s.Skv, s.D}, f, bias, 1.0, seed * 3 + 2);
  in.v = normal_tensor({s.B, s.Nkv, s.Skv, s.D}, f, 0.0, 1.0, seed * 3 + 3);
  if (mask_kind == 1 || mask_kind == 3) in.mask.causal = true;
  if (mask_kind >= 2) {
    in.mask.kv_len.assign(s.B, s.Skv);
    in.mask.kv_len[s.B - 1] = s.Skv / 2 + 1;
  }
  if (mask_kind == 3) {
    in.mask.keep.assign(s.B * s.Sq * s.Skv, 1);
    for (std::size_t j = 0; j < s.Skv; ++j) in.mask.keep[(0 * s.Sq + s.Sq - 1) * s.Skv + j] = 0;  // hidden row
    for (std::size_t i = 0; i < s.Sq; ++i) in.mask.keep[(1 * s.Sq + i) * s.Skv + 0] = 0;          // key 0 of batch 1
  }
  return in;
}

struct Config {
  std::string algorithm, preset;
  std::string stage;    // the stage changed ("" for none)
  std::string format;   // its format ("" keeps the preset's)
  RoundMode mode = RoundMode::nearest_even;
  GemmModel gemm;
  PasaOptions pasa;
  std::string inputs = "fp16";
  std::string acc;  // the qk_acc and pv_acc stages' format ("" keeps the preset's)

  Config(std::string alg, std::string pre, std::string st = "", std::string f = "",
         RoundMode m = RoundMode::nearest_even)
      : algorithm(std::move(alg)), preset(std::move(pre)), stage(std::move(st)), format(std::move(f)), mode(m) {}

  std::string name() const {
    std::string n = algorithm + " " + preset;
    if (!stage.empty()) n += " " + stage + "=" + (format.empty() ? "(preset)" : format) + "/" + round_mode_name(mode);
    if (gemm.kind == GemmKind::chunked) n += " gemm=chunked" + std::to_string(gemm.chunk);
    if (gemm.kind == GemmKind::every_op) n += " gemm=every_op";
    if (gemm.kind == GemmKind::tensor_core) n += " gemm=tensor_core";
    if (!acc.empty()) n += " qk_acc=pv_acc=" + acc;
    if (algorithm == "pasa" && !(pasa == PasaOptions{}))
      n += " pasa(beta=" + std::to_string(pasa.beta) + ",alpha_in_M=" + std::to_string(pasa.alpha_in_M) +
           ",m0_zero=" + std::to_string(pasa.m0_zero) + ",form=" + pasa.form +
           ",bf16_to_fp16=" + std::to_string(pasa.bf16_to_fp16) + ")";
    if (inputs != "fp16") n += " inputs=" + inputs;
    return n;
  }

  AlgorithmSpec spec(const Shape6& s) const {
    AlgorithmSpec sp;
    sp.name = algorithm;
    sp.alloc = allocation_preset(preset);
    sp.alloc.gemm = gemm;
    if (!acc.empty()) sp.alloc.spec("qk_acc").format = sp.alloc.spec("pv_acc").format = format_by_name(acc);
    if (!stage.empty()) {
      StageSpec& st = sp.alloc.spec(stage);
      if (!format.empty()) st.format = format_by_name(format);
      st.round.mode = mode;
    }
    sp.s1 = s.s1;
    sp.s2 = s.s2;
    sp.pasa = pasa;
    return sp;
  }
};

// Configurations where the engine is known to differ from the reference, with the cause.
inline std::string known_defect(const Allocation&) { return ""; }

inline std::string hexf(double x) {
  char b[64];
  std::snprintf(b, sizeof b, "%a", x);
  return b;
}

struct Outcome {
  std::size_t mismatched = 0, total = 0;
  std::string first;
};

inline Outcome compare(const AttentionInputs& in, const AlgorithmSpec& spec) {
  const AttentionOutput e = run_attention(in, spec, 1);
  const AttentionOutput r = reference::reference_attention(in, spec);
  Outcome o;
  o.total = e.o.data.size() + e.lse.size();
  for (std::size_t i = 0; i < e.o.data.size(); ++i)
    if (!test::same_bits(e.o.data[i], r.o.data[i])) {
      if (o.mismatched++ == 0)
        o.first = "o[" + std::to_string(i) + "]: engine " + std::to_string(e.o.data[i]) + " (" +
                  hexf(e.o.data[i]) + "), reference " + std::to_string(r.o.data[i]) + " (" + hexf(r.o.data[i]) + ")";
    }
  for (std::size_t i = 0; i < e.lse.size(); ++i)
    if (!test::same_bits(e.lse[i], r.lse[i])) {
      if (o.mismatched++ == 0)
        o.first = "lse[" + std::to_string(i) + "]: engine " + std::to_string(e.lse[i]) + ", reference " +
                  std::to_string(r.lse[i]);
    }
  return o;
}

// Runs one configuration on the inputs: equal bits required, or (a known defect) reported without failing.
struct Tally {
  std::size_t cases = 0, equal = 0, known_failing = 0, known_passing = 0;
};

inline void check_config(const Config& c, const Shape6& s, const AttentionInputs& in, Tally& t) {
  const AlgorithmSpec spec = c.spec(s);
  Allocation eff = spec.alloc;
  const Outcome o = compare(in, spec);
  const std::string defect = known_defect(eff);
  ++t.cases;
  const bool eq = o.mismatched == 0;
  if (eq) ++t.equal;
  if (!defect.empty()) (eq ? t.known_passing : t.known_failing)++;
  static const bool report = std::getenv("PASA_REFEMU_REPORT") != nullptr;
  if (report)
    std::cout << (eq ? "EQUAL    " : "DIFFERENT") << (defect.empty() ? "        " : " [known]") << " " << c.name()
              << " : " << o.mismatched << "/" << o.total << (eq ? "" : " first " + o.first) << "\n";
  INFO(c.name() << ": " << o.mismatched << " of " << o.total << " values differ; first " << o.first);
  if (defect.empty()) {
    CHECK(o.mismatched == 0);
  } else {
    INFO("known defect: " << defect);
    CHECK_NOFAIL(o.mismatched == 0);
  }
}

// Small shapes with tails and GQA: Sq = 5 (s1 = 2), Skv = 11 (s2 = 4, a tail of 3), 4 query heads on 2 KV heads;
// one with Sq > Skv (causal hides the first rows completely); and one of 12 KV blocks (s2 = 2, a tail of 1), so
// that PASA's Eq. 15 multiplies F by j − 1 = 3, 5, 6, 7, … (with 3 blocks j − 1 is 1 or 2 and the product exact).
inline const Shape6 kSmall{2, 4, 2, 5, 11, 8, 2, 4};
inline const Shape6 kWide{2, 2, 1, 7, 5, 4, 3, 2};
inline const Shape6 kLong{2, 2, 1, 4, 23, 8, 2, 2};  // B >= 2: mask kind 3 hides a key of batch 1

// The base preset per algorithm for the stage sweeps: every stage in fp16 but the GEMM accumulators.
inline std::string base_preset(const std::string& algorithm) { return algorithm == "pasa" ? "pasa_fp16" : "fa_fp16"; }

}  // namespace pasa::refemu_test
