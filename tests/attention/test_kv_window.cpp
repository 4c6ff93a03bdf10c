// The engines' K and V staging (attention/detail/kv_staging.cpp): a run staged as one window of all its KV
// heads, as windows of one head, or tile by tile must give the same bits, for every algorithm and a set of
// allocations (float kernels, fused path, tensor-core and every-op models, PASA's held keys), with narrow
// (fp16 storage) and wide inputs, masks, GQA, split-KV and several threads. Tiny problems take one window
// under the default limits; the test lowers the limits (kv_window_limits) to reach the other two modes.
#include <catch2/catch.hpp>

#include <string>

#include "pasa/attention/algorithm.hpp"
#include "pasa/attention/detail/blocked_attention.hpp"
#include "pasa/core/error.hpp"
#include "support/attention_cases.hpp"
#include "support/bits.hpp"

using namespace pasa;

namespace {

// The limits in force for one scope (restored however it ends).
struct Limits {
  detail::KvWindowLimits saved = detail::kv_window_limits();
  explicit Limits(const detail::KvWindowLimits& l) { detail::kv_window_limits() = l; }
  ~Limits() { detail::kv_window_limits() = saved; }
};

AttentionInputs case_inputs(std::size_t sq, bool narrow, bool causal, std::uint64_t seed) {
  AttentionInputs in;
  in.q = test::uniform_tensor({2, 4, sq, 24}, 0.0, 3.0, seed);
  in.k = test::uniform_tensor({2, 2, 70, 24}, 1.0, 2.0, seed + 1);
  in.v = test::uniform_tensor({2, 2, 70, 24}, 0.0, 1.0, seed + 2);
  in.mask.causal = causal;
  if (narrow) {
    in.q = narrowed(std::move(in.q));
    in.k = narrowed(std::move(in.k));
    in.v = narrowed(std::move(in.v));
    REQUIRE(in.k.is_narrow());
  }
  return in;
}

}  // namespace

TEST_CASE("K/V staging: one window, windows of one head and tile by tile give the same bits", "[attention]") {
  const detail::KvWindowLimits per_head{.whole_run = 0, .cap = 1, .min_items = 1};        // one head a window
  const detail::KvWindowLimits per_tile{.whole_run = 0, .cap = 1, .min_items = 1u << 30};  // no window
  const char* presets[] = {"fa_fp16_fp32", "fa_fp32", "fa_fp16", "fa_bf16_fp32_h100", "pasa_fp16"};
  std::size_t runs = 0;
  for (const std::string& alg : algorithm_names()) {
    if (algorithm_info(alg).unified) continue;  // (a paged cache, not these inputs: test_unified)
    for (const char* preset : presets)
      for (int c = 0; c < 4; ++c) {
        const bool narrow = c % 2 == 0, causal = c == 1, decode = c == 3;
        const AttentionInputs in = case_inputs(decode ? 1 : 40, narrow, causal, 700 + static_cast<std::uint64_t>(c));
        AlgorithmSpec spec;
        spec.name = alg;
        spec.alloc = allocation_preset(preset);
        spec.s1 = 8;
        spec.s2 = 16;
        if (algorithm_info(alg).split_kv && c == 2) spec.splits = 3;
        try {
          validate_case(case_layout(in), spec);
        } catch (const InputError&) {
          continue;  // (a combination the algorithm refuses)
        }
        INFO(alg << " / " << preset << " case " << c);
        const AttentionOutput one = run_attention(in, spec, 2);
        {
          // Each head's items (decode: 2 an item per head) in a window of their own, then tile by tile.
          const detail::Run run(in, spec);
          Limits l(per_head);
          if (run.window_bytes_per_head() > 0) CHECK(run.window_heads(decode ? 2 : 10, 2) == 1);
          const AttentionOutput windows = run_attention(in, spec, 3);
          INFO(test::first_difference(one, windows));
          CHECK(test::count_differing(one, windows) == 0);
        }
        {
          Limits l(per_tile);
          const AttentionOutput tiles = run_attention(in, spec, 2);
          INFO(test::first_difference(one, tiles));
          CHECK(test::count_differing(one, tiles) == 0);
        }
        ++runs;
      }
  }
  CHECK(runs > 40);
}

TEST_CASE("K/V staging: the window rule", "[attention]") {
  const std::size_t MiB = std::size_t{1} << 20;
  // Small runs at once; decode-like reuse tile by tile; else 16 items a thread within 256 MiB.
  CHECK(detail::kv_window_heads(8, 2, 4 * MiB, 16) == 8);
  CHECK(detail::kv_window_heads(64, 4, 128 * MiB, 16) == 0);
  CHECK(detail::kv_window_heads(4, 256, 32 * MiB, 16) == 1);
  CHECK(detail::kv_window_heads(32, 32, 16 * MiB, 16) == 8);
  CHECK(detail::kv_window_heads(32, 8, 128 * MiB, 16) == 2);   // (the cap)
  CHECK(detail::kv_window_heads(2, 8, 512 * MiB, 16) == 1);    // (at least one head)
  CHECK(detail::kv_window_heads(4, 100, 0, 16) == 0);          // (nothing staged)
}
