// The algorithm registry (algorithm.hpp, issue 24 item 3): every entry's declared support is what
// run_attention accepts and refuses, and what it runs (split-KV and the FP8 recipe in fp64 equal the golden).
#include <catch2/catch.hpp>

#include <set>
#include <string>

#include "pasa/attention/algorithm.hpp"
#include "pasa/core/error.hpp"
#include "pasa/exact/golden.hpp"
#include "pasa/inputs/generators.hpp"
#include "support/rel_rmse.hpp"

using namespace pasa;

TEST_CASE("algorithm registry: declared support is what run_attention accepts", "[registry]") {
  ProblemSpec ps;
  ps.Nq = 2;
  ps.Sq = 5;
  ps.Skv = 19;
  ps.D = 8;
  const AttentionInputs in = generate_inputs(ps, 1);
  const Golden g = golden_attention(in);
  std::set<std::string> names;
  for (const AlgorithmInfo& a : algorithm_registry()) {
    INFO(a.name);
    CHECK(names.insert(a.name).second);
    CHECK(!a.summary.empty());
    CHECK(&algorithm_info(a.name) == &a);
    AlgorithmSpec s;
    s.name = a.name;
    s.alloc = allocation_preset("fp64");
    s.s1 = 2;
    s.s2 = 4;
    s.splits = 3;
    if (a.split_kv) CHECK(test::rel_rmse(run_attention(in, s, 1).o, g.o) <= 1e-13);
    else CHECK_THROWS_AS(run_attention(in, s, 1), InputError);
    s.splits = 1;
    s.quant.scales = QuantScale::block;
    if (a.quant) CHECK(test::rel_rmse(run_attention(in, s, 1).o, g.o) <= 1e-13);
    else CHECK_THROWS_AS(run_attention(in, s, 1), InputError);
  }
  CHECK(names.size() == algorithm_names().size());
  CHECK_THROWS_WITH(algorithm_info("fa3", "/name: "), Catch::Contains("/name: unknown algorithm \"fa3\""));
}
