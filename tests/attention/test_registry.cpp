// The algorithm registry (algorithm.hpp, issue 24 item 3): every entry's declared support is what
// run_attention accepts and refuses, and what it runs (split-KV and the FP8 recipe in fp64 equal the golden).
#include <catch2/catch.hpp>

#include <fstream>
#include <iterator>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "pasa/attention/algorithm.hpp"
#include "pasa/core/error.hpp"
#include "pasa/exact/golden.hpp"
#include "pasa/inputs/generators.hpp"
#include "pasa/io/algorithm_json.hpp"
#include "pasa/study/error_model.hpp"
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

TEST_CASE("algorithm registry: options, recomputed rows and the error model follow the declared fields", "[registry]") {
  ProblemSpec ps;
  ps.Sq = 3;
  ps.Skv = 9;
  ps.D = 4;
  ps.q.x0 = 1;  // q in [0.5, 1.5], k in [39, 41]: every score >= 39, above fdpp's b = 1: every row recomputed
  ps.q.am = 0.5;
  ps.k.x0 = 40;
  const AttentionInputs in = generate_inputs(ps, 1);
  for (const AlgorithmInfo& a : algorithm_registry()) {
    INFO(a.name);
    const nlohmann::json base = {{"name", a.name}, {"alloc", "fp64"}};
    nlohmann::json with_pasa = base, with_fdpp = base;
    with_pasa["pasa"] = {{"beta", 0.5}};
    with_fdpp["fdpp"] = {{"phi", 0}, {"a", -20}, {"b", 1}};
    if (a.pasa_options) CHECK(algorithm_from_json(with_pasa, "").pasa.beta == 0.5);
    else CHECK_THROWS_WITH(algorithm_from_json(with_pasa, ""), Catch::Contains("PASA options do not apply"));
    if (a.fdpp_options) CHECK(algorithm_from_json(with_fdpp, "").fdpp.b == 1);
    else CHECK_THROWS_WITH(algorithm_from_json(with_fdpp, ""), Catch::Contains("FlashDecoding++ options do not apply"));
    AlgorithmSpec s = algorithm_from_json(a.fdpp_options ? with_fdpp : base, "");
    s.s1 = s.s2 = 4;
    const AttentionOutput o = run_attention(in, s, 1);
    if (a.recomputes_rows) CHECK(o.recomputed_rows == 3);
    else CHECK(o.recomputed_rows == 0);
    // The first-order error model (study/error_model.hpp) covers exactly the declared algorithms.
    s.alloc = allocation_preset(a.pasa_options ? "pasa_fp16" : "fa_fp16_fp32");
    if (a.error_model) CHECK(error_model_gap(s).empty());
    else CHECK(error_model_gap(s) == "algorithm " + a.name);
  }
}

TEST_CASE("algorithm registry: docs/algorithms.md holds the table generated from it", "[registry]") {
  // The table between the markers is `pasa-attn --list-algorithms` (algorithm_table_markdown()) verbatim:
  // a field added to or changed in the registry fails here until the docs are regenerated.
  std::ifstream f(std::string(PASA_SOURCE_DIR) + "/docs/algorithms.md");
  REQUIRE(f);
  const std::string doc((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const std::string begin = "<!-- algorithm table: pasa-attn --list-algorithms -->\n", end = "<!-- end of algorithm table -->";
  const std::size_t b = doc.find(begin), e = doc.find(end);
  REQUIRE(b != std::string::npos);
  REQUIRE(e != std::string::npos);
  REQUIRE(b < e);
  CHECK(doc.substr(b + begin.size(), e - b - begin.size()) == algorithm_table_markdown());
  for (const std::string& n : algorithm_names()) CHECK(algorithm_table_markdown().find("| `" + n + "` |") != std::string::npos);
}
