// The toolkit's contract checked on random combinations of problem options and algorithms (docs/contract.md):
//   1. every blocked algorithm in fp64 (any s1, s2, splits, PASA / fdpp / FP8-recipe options) equals the MPFR
//      golden: relative RMSE of O <= 1e-13, and lse within 1e-12·(1 + |lse|); one case in four, the golden
//      streamed (golden_stream, chunk by chunk on 2 threads) gives golden_attention's bits;
//   2. under a low-precision allocation (a random preset; one case in four with one stage, or every stage,
//      rounding to nearest with ties away, rna) it gives the independent reference emulator's bits
//      (tests/reference/) wherever the emulator covers the combination (split-KV, pse and select included; not
//      the FP8 recipe, fdpp, the tensor-core GEMM, stochastic rounding or formats without subnormals; small
//      shapes: MPFR per operation); one case in six runs its GEMMs under a named tensor-core model of any
//      generation (then property 3: threads, fused vs general path);
//   3. its bits do not depend on the thread count (1 vs 2) nor on the fused/general path (fa2 and pasa: an
//      all-zero pse selects the general path without changing a value);
//   3b. (one case in three) Q, K and V held at their formats' widths give the same bits: the golden, the fp64
//      and low-precision runs, the baseline;
//   4. a combination the toolkit does not support is refused with an InputError naming it, before any work
//      (drawn on purpose: split-KV on a normalising engine, the FP8 recipe on the others, shift_first without
//      scales, fdpp with a >= b, s1 = 0, kv_len > Skv, β = 1, an element format of block-scaled quantisation
//      (fp6/fp4, e8m0, int8/int4, hif8) as a stage or input format, ...).
// Paged problems ("kind": "paged", attention/unified.hpp), one case in ten: mixed decode / chunked prefill /
// fresh prefill sequences, shared prefixes (share_from), spare cache blocks, generated or given block tables
// (given ones may alias any blocks), any block size; fa2 or pasa with random s1, s2 and splits. Property 1 is
// unified_attention in fp64 against unified_golden; 2 (no emulator covers the merge) is that a batch of fresh
// prefills without splits (one part per sequence) gives run_attention's bits on each sequence's gathered dense
// inputs, which property 2 ties to the emulator; 3 the thread count; 4 refusals (an algorithm without unified
// attention, the FP8 recipe, a broken layout) by validate_case on the problem, before anything is generated.
// The draws (property_draws.cpp, the Case of property_case.hpp): B, Nq and Nkv (GQA ratios 1–8), Sq != Skv (1 to ~300), D (1 to 80, mostly not multiples of 16),
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
#include "pasa/attention/quantise.hpp"
#include "pasa/attention/unified.hpp"
#include "pasa/core/error.hpp"
#include "pasa/exact/baseline.hpp"
#include "pasa/exact/golden.hpp"
#include "pasa/exact/metrics.hpp"
#include "pasa/inputs/generators.hpp"
#include "pasa/io/algorithm_json.hpp"
#include "pasa/io/problem_json.hpp"
#include "reference/reference_attention.hpp"
#include "support/bits.hpp"
#include "property/property_case.hpp"

using namespace pasa;
using namespace pasa_property;

namespace {

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

struct Stats {
  std::size_t cases = 0, fp64 = 0, low = 0, reference = 0, reference_biased = 0, fused = 0, refused = 0;
  std::size_t reference_modes = 0;         // of the emulator checks, those with a stage in rna
  std::size_t paged = 0, paged_dense = 0;  // paged cases; of them, prefill batches equal to their dense runs
  std::size_t narrow = 0;                  // cases whose inputs were held narrow (property 3b)
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
  AlgorithmSpec spec64 = c.spec;  // (the KV cache's block schemes: low-precision runs only)
  spec64.quant.k_block.reset();
  spec64.quant.v_block.reset();
  const AttentionOutput o = unified_attention(pb, spec64, 2);
  AttentionInputs scaled;  // (the batch's scale as the engines take it: AttentionInputs::effective_scale)
  scaled.q.shape = pb.q.shape;
  scaled.scale = pb.scale;
  const double tol = fp64_bound(c.spec, score_magnitude(pb.q.data, pb.cache.k, pb.q.shape.D, scaled.effective_scale()));
  double vmax = 0;  // (relative_rmse's floor)
  for (float x : pb.cache.v) vmax = std::max(vmax, static_cast<double>(std::abs(x)));
  const double rel = relative_rmse(o.o.data, g.o.data, vmax);
  if (!(rel <= tol)) return "paged fp64 vs golden: relative RMSE " + sci(rel) + " (bound " + sci(tol) + ")";
  for (std::size_t i = 0; i < o.lse.size(); ++i)
    if (!(std::abs(o.lse[i] - g.lse[i]) <= 10 * tol * (1 + std::abs(g.lse[i]))))
      return "paged fp64 lse[" + std::to_string(i) + "] " + sci(o.lse[i]) + ", golden " + sci(g.lse[i]);
  if (st) ++st->fp64;
  if (c.preset.empty()) return "";
  AlgorithmSpec low = c.spec;
  low.alloc = low_alloc(c);
  const AttentionOutput a1 = unified_attention(pb, low, 1), a2 = unified_attention(pb, low, 2);
  if (std::string d = test::first_difference(a1, a2); !d.empty())
    return label(c) + ": paged, 1 vs 2 threads differ: " + d;
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
          return label(c) + ": paged prefill, sequence " + std::to_string(s) + " differs from its dense run at head " +
                 std::to_string(h) + ", element " + std::to_string(i);
    off += ql;
  }
  if (st) ++st->paged_dense;
  return "";
}

// Property 1b: block schemes on Q, K, V in fp64 give the golden of the inputs replaced by their elements times
// scales (quantised as numeric/block_scale.hpp says, in the engine's order Q, K, V on the spec's seed, the
// stream of stochastic element rounding), within the fp64 bound. Not with P's scheme (inside the tiles) nor
// with FA3's transform.
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
  // Property 1: fp64 = golden. (Block schemes quantise to their own element formats, not to the stages: the
  // fp64 run leaves them out, and property 1b holds them against the golden of their quantised inputs.)
  GoldenOptions go;
  go.threads = 1;
  const Golden g = golden_attention(in, go);
  AlgorithmSpec spec64 = c.spec;
  spec64.quant.q_block.reset();
  spec64.quant.k_block.reset();
  spec64.quant.v_block.reset();
  spec64.quant.p_block.reset();
  AttentionOutput o;
  try {
    o = run_attention(in, spec64, 2);
  } catch (const std::exception& e) {
    return std::string("fp64 run threw: ") + e.what();
  }
  double vmax = 0;  // (relative_rmse's floor)
  for (double x : in.v.data) vmax = std::max(vmax, std::abs(x));
  const double rel = relative_rmse(o.o.data, g.o.data, vmax);
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
  // Property 1c (one case in four, by its seed): the golden streamed into the metrics (golden_stream, as
  // pasa-attn and the sweeps measure) gives these bits, in order, on 2 threads.
  if (c.ps.seed % 4 == 1) {
    GoldenOptions go2 = go;
    go2.threads = 2;
    std::string why;
    std::size_t next = 0;
    const std::size_t D = in.q.shape.D;
    golden_stream(in, go2, [&](std::size_t row0, std::size_t rows, const double* so, const double* slse) {
      if (!why.empty()) return;
      if (row0 != next) why = "golden_stream: rows from " + std::to_string(row0) + ", expected " + std::to_string(next);
      for (std::size_t i = 0; why.empty() && i < rows * D; ++i)
        if (std::bit_cast<std::uint64_t>(so[i]) != std::bit_cast<std::uint64_t>(g.o.data[row0 * D + i]))
          why = "golden_stream: element " + std::to_string(row0 * D + i) + " differs from golden_attention's";
      for (std::size_t i = 0; why.empty() && i < rows; ++i)
        if (std::bit_cast<std::uint64_t>(slse[i]) != std::bit_cast<std::uint64_t>(g.lse[row0 + i]))
          why = "golden_stream: lse " + std::to_string(row0 + i) + " differs from golden_attention's";
      next += rows;
    });
    if (why.empty() && next != g.lse.size()) why = "golden_stream: " + std::to_string(next) + " rows handed over";
    if (!why.empty()) return why;
  }
  if (std::string why = check_blocks_fp64(c, in, spec64); !why.empty()) return why;
  // Property 3b (one case in three, by its seed): Q, K and V held at their formats' widths (inputs/tensor.hpp
  // narrowed, as pasa-attn and the sweeps generate them) give the same bits: golden, fp64 run, baseline and,
  // below, the low-precision runs.
  AttentionInputs narrow = in;
  const bool narrowed_case = c.ps.seed % 3 == 2;
  if (narrowed_case) {
    narrow_inputs(narrow, 2);
    if (std::string why = check_narrow_fp64(in, narrow, spec64, o, g, go); !why.empty()) return why;
    if (st) st->narrow += has_narrow(narrow);
  }
  if (c.preset.empty()) return "";
  // Properties 2 and 3 under a low-precision preset.
  AlgorithmSpec low = c.spec;
  low.alloc = low_alloc(c);
  AttentionOutput a1, a2;
  try {
    a1 = run_attention(in, low, 1);
    a2 = run_attention(in, low, 2);
  } catch (const std::exception& e) {
    return "low-precision run (" + label(c) + ") threw: " + e.what();
  }
  if (std::string d = test::first_difference(a1, a2); !d.empty()) return label(c) + ": 1 vs 2 threads differ: " + d;
  if (st) ++st->low;
  if (narrowed_case)
    if (std::string d = test::first_difference(a1, run_attention(narrow, low, 2)); !d.empty())
      return label(c) + ": narrow inputs differ: " + d;
  const bool biased = !in.pse.data.empty() || !in.mask.select.empty();
  if (algorithm_info(low.name).fused_path && !biased && !low.quant.active()) {
    AttentionInputs general = in;  // +0 bias: the general path, the same values
    general.pse = Tensor({in.q.shape.B, in.q.shape.N, in.q.shape.S, in.k.shape.S}, format_by_name("fp16"));
    if (std::string d = test::first_difference(a1, run_attention(general, low, 1)); !d.empty())
      return label(c) + ": fused vs general path differ: " + d;
    if (st) ++st->fused;
  }
  const std::size_t work = in.q.shape.B * in.q.shape.N * in.q.shape.S * in.k.shape.S * in.q.shape.D;
  if (low.name != "fdpp" && !low.quant.fa3_active() && low.alloc.gemm.kind != GemmKind::tensor_core && work <= 30000) {
    AttentionOutput r;
    try {
      r = reference::reference_attention(in, low);
    } catch (const std::invalid_argument&) {
      return "";  // not covered by the emulator (stochastic rounding, formats without subnormals)
    }
    if (std::string d = test::first_difference(a1, r); !d.empty())
      return label(c) + ": engine vs reference emulator: " + d;
    if (st) ++st->reference, st->reference_biased += biased, st->reference_modes += !c.mode_stage.empty();
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
  add([](Case& x) { return !x.tc_model.empty() && (x.tc_model.clear(), true); });
  add([](Case& x) { return !x.mode_stage.empty() && (x.mode_stage.clear(), true); });
  add([](Case& x) { return !x.preset.empty() && (x.preset.clear(), x.mode_stage.clear(), x.tc_model.clear(), true); });
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
  if (!c.preset.empty()) s.alloc = low_alloc(c);
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
            << " = reference emulator (" << st.reference_biased << " with pse or select, " << st.reference_modes
            << " with a stage in rna), " << st.refused << " refused as they should; " << st.paged << " paged ("
            << st.paged_dense << " prefill batches = their dense runs); " << st.narrow << " with narrow inputs = wide\n";
  CHECK(st.cases == planned);
  if (planned >= 100) CHECK(st.narrow > 0);  // (property 3b drew narrow inputs)
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
