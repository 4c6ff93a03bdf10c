// Block sizes larger than the sequence: run_attention clamps s1 to Sq and s2 to Skv, which must
// change no bit of any algorithm's output (the engines already cut every block at the sequence's end), and
// attention_bytes must not grow with the unclamped sizes.
#include <catch2/catch.hpp>

#include "pasa/attention/algorithm.hpp"
#include "pasa/core/memory.hpp"
#include "pasa/inputs/generators.hpp"

using namespace pasa;

TEST_CASE("block sizes beyond the sequence: clamped, same bits, bounded memory", "[algorithms]") {
  ProblemSpec p;
  p.Nq = 2;
  p.Sq = 40;
  p.Skv = 56;
  p.D = 8;
  p.q.x0 = p.k.x0 = 3;
  const AttentionInputs in = generate_inputs(p, 1);
  for (const std::string& name : algorithm_names()) {
    AlgorithmSpec exact;
    exact.name = name;
    exact.alloc = allocation_preset(name == "pasa" ? "pasa_fp16" : "fa_fp16_fp32");
    exact.s1 = p.Sq;
    exact.s2 = p.Skv;
    AlgorithmSpec huge = exact;
    huge.s1 = 1000000;
    huge.s2 = 4000000;
    const AttentionOutput a = run_attention(in, exact, 2), b = run_attention(in, huge, 2);
    INFO(name);
    CHECK(a.o.data == b.o.data);
    CHECK(a.lse == b.lse);
    const Shape q{1, 2, 40, 8}, kv{1, 2, 56, 8};
    CHECK(attention_bytes(q, kv, in.q.format, huge, 2) == attention_bytes(q, kv, in.q.format, exact, 2));
    CHECK(attention_bytes(q, kv, in.q.format, huge, 2) < (std::size_t{1} << 20));
  }
  // Absurd shapes saturate instead of wrapping around.
  AlgorithmSpec fa2;
  CHECK(attention_bytes({1u << 20, 1u << 20, 1u << 20, 1u << 20}, {1, 1, 1, 1}, in.q.format, fa2, 1) == kTooLarge);
}
