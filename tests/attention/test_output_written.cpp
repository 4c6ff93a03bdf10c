// The attention output and generated tensors are allocated uninitialised (Tensor::uninitialised, so that
// their pages are first touched by the threads that write them): every element must be written, the
// rows that see no key (kv_len 0, here) as zeros with lse -inf. The heap is first filled with NaN blocks
// of the output's size and freed, so that an element left unwritten reads NaN instead of a fresh page's
// zero (glibc hands the freed blocks back to allocations of the same size).
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <vector>

#include "pasa/attention/algorithm.hpp"
#include "pasa/inputs/generators.hpp"

using namespace pasa;

namespace {
void dirty_heap(std::size_t doubles) {
  std::vector<std::unique_ptr<std::vector<double>>> blocks;
  for (int i = 0; i < 8; ++i) blocks.push_back(std::make_unique<std::vector<double>>(doubles, std::nan("")));
}
}  // namespace

TEST_CASE("every output element written, whatever the heap held", "[algorithms]") {
  ProblemSpec p;
  p.B = 2;
  p.Nq = 2;
  p.Sq = 24;
  p.Skv = 40;
  p.D = 8;
  p.kv_len = {0, 33};  // batch 0: every row sees no key
  for (int threads : {1, 3}) {
    dirty_heap(p.B * p.Nq * p.Sq * p.D);
    const AttentionInputs in = generate_inputs(p, threads);
    for (const double x : in.q.data) REQUIRE(std::isfinite(x));
    for (const std::string& name : algorithm_names()) {
      AlgorithmSpec spec;
      spec.name = name;
      spec.alloc = allocation_preset(name == "pasa" ? "pasa_fp16" : "fa_fp16_fp32");
      spec.s1 = 8;
      spec.s2 = 16;
      dirty_heap(p.B * p.Nq * p.Sq * p.D);
      const AttentionOutput out = run_attention(in, spec, threads);
      INFO(name << ", " << threads << " threads");
      REQUIRE(out.o.data.size() == p.B * p.Nq * p.Sq * p.D);
      std::size_t bad = 0, nonzero_masked = 0;
      for (std::size_t i = 0; i < out.o.data.size(); ++i) {
        bad += !std::isfinite(out.o.data[i]);
        nonzero_masked += i < p.Nq * p.Sq * p.D && out.o.data[i] != 0.0;  // batch 0
      }
      CHECK(bad == 0);
      CHECK(nonzero_masked == 0);
    }
  }
}
