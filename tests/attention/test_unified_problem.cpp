// The paged problem kind ("kind": "paged", inputs/paged_problem.hpp, attention/unified.hpp generate_paged): its
// JSON, its generated block tables (a permutation of the cache; a shared prefix names the same blocks), its
// values (each cache block is batch b of the tensor (num_blocks, Nkv, block_size, D) the generators draw), and
// unified attention on it in fp64 against a golden of dense inputs the test gathers itself from that tensor.
#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>
#include <set>

#include <nlohmann/json.hpp>

#include "pasa/attention/algorithm.hpp"
#include "pasa/attention/unified.hpp"
#include "pasa/core/error.hpp"
#include "pasa/exact/golden.hpp"
#include "pasa/exact/metrics.hpp"
#include "pasa/io/problem_json.hpp"
#include "pasa/study/sweep.hpp"

using namespace pasa;
using nlohmann::json;

namespace {

// A decode step sharing a 3-block prefix with a chunked prefill, a fresh prefill, a second decode step sharing
// the prefix; GQA, spare cache blocks, block size 8.
json mixed_problem() {
  return json::parse(R"({"kind": "paged", "shape": {"Nq": 4, "Nkv": 2, "D": 24}, "format": "fp16", "seed": 7,
    "generator": {"kind": "hybrid", "x0": 1, "am": 4, "p": 0.02}, "v": {"kind": "uniform", "x0": 0.5, "am": 1},
    "block_size": 8, "num_blocks": 40,
    "sequences": [{"q_len": 5, "ctx_len": 61, "shared_blocks": 3},
                  {"q_len": 1, "ctx_len": 45, "shared_blocks": 3, "share_from": 0},
                  {"q_len": 9, "ctx_len": 9},
                  {"q_len": 1, "ctx_len": 30, "shared_blocks": 3, "share_from": 1}]})");
}

AlgorithmSpec spec_of(const std::string& name, const std::string& alloc, std::size_t s1, std::size_t s2,
                      std::size_t splits) {
  AlgorithmSpec a;
  a.name = name;
  a.alloc = allocation_preset(alloc);
  a.s1 = s1;
  a.s2 = s2;
  a.splits = splits;
  return a;
}

}  // namespace

TEST_CASE("paged problem: generated tables share the prefix and hand out distinct blocks", "[unified][paged]") {
  const ProblemSpec p = problem_from_json(mixed_problem(), "t:");
  REQUIRE(p.paged);
  const PagedBatch pb = generate_paged(p, 2);
  REQUIRE(pb.seqs.size() == 4);
  CHECK(pb.cache.num_blocks == 40);
  // Blocks: 8 + 6 + 2 + 4 logical, of which 3 + 3 shared: 14 distinct cache blocks.
  std::set<std::size_t> used;
  std::size_t entries = 0;
  for (std::size_t s = 0; s < 4; ++s) {
    const auto& t = pb.seqs[s].block_table;
    CHECK(t.size() == (pb.seqs[s].ctx_len + 7) / 8);
    for (std::size_t b = 0; b < t.size(); ++b) {
      CHECK(t[b] < 40);
      if (s % 2 == 1 && b < 3) {
        CHECK(t[b] == pb.seqs[0].block_table[b]);  // (sequence 3 shares through 1, which shares 0's)
      } else {
        used.insert(t[b]);
        ++entries;
      }
    }
  }
  CHECK(used.size() == entries);
  CHECK(entries == 14);
  // A permutation of the cache, not the identity, and another one for another seed.
  std::vector<std::size_t> first(pb.seqs[0].block_table);
  CHECK(first != std::vector<std::size_t>{0, 1, 2, 3, 4, 5, 6, 7});
  json j = mixed_problem();
  j["seed"] = 8;
  CHECK(generate_paged(problem_from_json(j, "t:"), 1).seqs[0].block_table != first);
}

TEST_CASE("paged problem: fp64 unified attention equals the golden of independently gathered inputs",
          "[unified][paged]") {
  const ProblemSpec p = problem_from_json(mixed_problem(), "t:");
  const PagedBatch pb = generate_paged(p, 2);
  const Format f = format_by_name("fp16");
  // The cache as the tensors the generators draw (one batch per cache block), the sequences gathered from it.
  const std::size_t nb = pb.cache.num_blocks, bs = 8, D = 24, Nkv = 2, Nq = 4;
  const Tensor K = generate_tensor(p.k, {nb, Nkv, bs, D}, f, p.seed, "k", 1);
  const Tensor V = generate_tensor(p.v, {nb, Nkv, bs, D}, f, p.seed, "v", 1);
  const Tensor Q = generate_tensor(p.q, {1, Nq, 16, D}, f, p.seed, "q", 1);
  std::vector<double> want;  // the golden rows in the batch's order: (head, token), token-major per head
  Tensor g_all({1, Nq, 16, D}, format_by_name("fp64"));
  std::size_t off = 0;
  for (std::size_t s = 0; s < pb.seqs.size(); ++s) {
    const PagedSequence& sq = pb.seqs[s];
    AttentionInputs in;
    in.q = Tensor({1, Nq, sq.q_len, D}, f);
    in.k = Tensor({1, Nkv, sq.ctx_len, D}, f);
    in.v = in.k;
    for (std::size_t h = 0; h < Nq; ++h)
      for (std::size_t i = 0; i < sq.q_len; ++i)
        for (std::size_t d = 0; d < D; ++d) in.q.at(0, h, i, d) = Q.at(0, h, off + i, d);
    for (std::size_t h = 0; h < Nkv; ++h)
      for (std::size_t j = 0; j < sq.ctx_len; ++j)
        for (std::size_t d = 0; d < D; ++d) {
          in.k.at(0, h, j, d) = K.at(sq.block_table[j / bs], h, j % bs, d);
          in.v.at(0, h, j, d) = V.at(sq.block_table[j / bs], h, j % bs, d);
        }
    in.mask.causal = true;
    const Golden g = golden_attention(in);
    for (std::size_t h = 0; h < Nq; ++h)
      for (std::size_t i = 0; i < sq.q_len; ++i)
        for (std::size_t d = 0; d < D; ++d) g_all.at(0, h, off + i, d) = g.o.at(0, h, i, d);
    off += sq.q_len;
  }
  REQUIRE(off == 16);
  CHECK(compare_outputs(unified_golden(pb).o, g_all).rmse < 1e-15);
  for (const char* name : {"fa2", "pasa"})
    for (std::size_t splits : {1, 3})
      for (std::size_t s2 : {4, 16}) {
        INFO(name << " splits " << splits << " s2 " << s2);
        CHECK(compare_outputs(unified_attention(pb, spec_of(name, "fp64", 4, s2, splits)).o, g_all).rmse <= 1e-13);
      }
  // Low precision: a real error, independent of the thread count.
  const AttentionOutput a1 = unified_attention(pb, spec_of("fa2", "fa_fp16_fp32", 4, 16, 2), 1);
  const AttentionOutput a2 = unified_attention(pb, spec_of("fa2", "fa_fp16_fp32", 4, 16, 2), 2);
  CHECK(a1.o.data == a2.o.data);
  const double e = compare_outputs(a1.o, g_all).rmse;
  CHECK(e > 1e-6);
  CHECK(e < 1e-2);
}

TEST_CASE("paged problem: JSON round trip, baseline and score statistics", "[unified][paged]") {
  const ProblemSpec p = problem_from_json(mixed_problem(), "t:");
  const ProblemSpec back = problem_from_json(to_json(p), "back:");
  const PagedBatch a = generate_paged(p, 1), b = generate_paged(back, 2);
  CHECK(a.q.data == b.q.data);
  CHECK(std::equal(a.cache.k.begin(), a.cache.k.end(), b.cache.k.begin(), b.cache.k.end()));
  for (std::size_t s = 0; s < a.seqs.size(); ++s) CHECK(a.seqs[s].block_table == b.seqs[s].block_table);
  // A given table (the generated one written out) is the same problem.
  json given = mixed_problem();
  given.erase("num_blocks");
  for (std::size_t s = 0; s < a.seqs.size(); ++s) {
    given["sequences"][s].erase("share_from");
    given["sequences"][s]["block_table"] = a.seqs[s].block_table;
  }
  const PagedBatch c = generate_paged(problem_from_json(given, "given:"), 1);
  CHECK(c.cache.num_blocks <= 40);
  CHECK(unified_attention(c, spec_of("pasa", "pasa_fp16", 8, 8, 1)).o.data ==
        unified_attention(a, spec_of("pasa", "pasa_fp16", 8, 8, 1)).o.data);
  // Baseline: a decode row sees its whole context: the mean of V over it.
  const Tensor base = unified_baseline(a, 2);
  const AttentionInputs s1 = sequence_inputs(a, 1);
  for (std::size_t d = 0; d < 24; d += 5) {
    double m = 0;
    for (std::size_t j = 0; j < 45; ++j) m += s1.v.at(0, 0, j, d);
    CHECK(base.at(0, 0, 5, d) == Approx(m / 45).epsilon(1e-14));  // token 5: sequence 1's one new token
  }
  const ScoreStats st = unified_score_stats(a, format_by_name("fp16"), 2);
  // Visible scores: per head, each new token i of a sequence sees ctx_len - q_len + i + 1 keys.
  CHECK(st.entries == 4 * ((57 + 58 + 59 + 60 + 61) + 45 + (1 + 2 + 3 + 4 + 5 + 6 + 7 + 8 + 9) + 30));
  CHECK(st.min < st.max);
}

TEST_CASE("paged problem: mistakes are named by their JSON pointer before any work", "[unified][paged]") {
  auto fails = [](const std::function<void(json&)>& change, const std::string& what) {
    json j = mixed_problem();
    change(j);
    INFO(j.dump());
    CHECK_THROWS_WITH(problem_from_json(j, "p.json:"), Catch::StartsWith("p.json:") && Catch::Contains(what));
  };
  fails([](json& j) { j["kind"] = "sparse"; }, "/kind: unknown problem kind \"sparse\"");
  fails([](json& j) { j.erase("kind"); }, "/block_size: only with \"kind\": \"paged\"");
  fails([](json& j) { j["shape"]["Sq"] = 4; }, "/shape/Sq: not with \"kind\": \"paged\"");
  fails([](json& j) { j["causal"] = true; }, "/causal: not with \"kind\": \"paged\"");
  fails([](json& j) { j["select"] = {{"p", 0.1}}; }, "/select: not with");
  fails([](json& j) { j["format"] = "fp64"; }, "/format: fp64 is wider than fp32");
  fails([](json& j) { j["block_size"] = 0; }, "/block_size: must be >= 1");
  fails([](json& j) { j["sequences"] = json::array(); }, "/sequences: a paged problem needs at least one sequence");
  fails([](json& j) { j["sequences"][2]["q_len"] = 10; }, "/sequences/2/q_len: q_len = 10 must be in [1, ctx_len = 9]");
  fails([](json& j) { j["sequences"][1].erase("ctx_len"); }, "/sequences/1: missing \"ctx_len\"");
  fails([](json& j) { j["sequences"][1]["share_from"] = 1; }, "/sequences/1/share_from: 1 is not an earlier sequence");
  fails([](json& j) { j["sequences"][3]["share_from"] = 2; }, "/sequences/3/share_from: sequence 2 holds 1 full");
  fails([](json& j) { j["sequences"][1]["shared_blocks"] = 6; }, "/sequences/1/shared_blocks: 6 blocks of 8 tokens reach");
  fails([](json& j) { j["num_blocks"] = 13; }, "/num_blocks: 13 cache blocks, the sequences need 14");
  fails([](json& j) { j["sequences"][0]["block_table"] = {1, 2}; }, "/sequences/0/block_table: 2 entries");
  fails([](json& j) { j["sequences"][0]["lenght"] = 2; }, "/sequences/0");
  fails([](json& j) { j["shape"]["Nkv"] = 3; }, "/shape/Nkv");
  fails(
      [](json& j) {
        j["num_blocks"] = 4;
        for (auto& s : j["sequences"]) {
          s.erase("share_from");
          s["block_table"] = std::vector<std::size_t>((s["ctx_len"].get<std::size_t>() + 7) / 8, 3);
        }
        j["sequences"][2]["block_table"][1] = 4;
      },
      "/sequences/2/block_table/1: cache block 4 is outside the cache (num_blocks = 4)");
  // The algorithm: refused before anything is generated (validate_case on the problem).
  const ProblemSpec p = problem_from_json(mixed_problem(), "t:");
  CHECK_THROWS_WITH(validate_case(p, spec_of("fa1", "fp64", 4, 4, 1)), Catch::Contains("/name: unified attention needs fa2 or pasa"));
  CHECK_THROWS_WITH(validate_case(p, spec_of("smooth_k", "fp64", 4, 4, 1)), Catch::Contains("needs fa2 or pasa"));
  AlgorithmSpec q = spec_of("fa2", "fp64", 4, 4, 1);
  q.quant.scales = QuantScale::block;
  CHECK_THROWS_WITH(validate_case(p, q), Catch::StartsWith("/quant:"));
  CHECK_NOTHROW(validate_case(p, spec_of("pasa", "pasa_fp16", 4, 4, 2)));
  // The memory estimate grows with the cache and is refused beyond a limit (core/memory.hpp).
  json big = mixed_problem();
  big["num_blocks"] = 4000000;
  const ProblemSpec bp = problem_from_json(big, "big:");
  GoldenOptions go;
  const std::size_t small_need = case_memory_bytes(p, {spec_of("fa2", "fp64", 4, 4, 1)}, go, false);
  const std::size_t big_need = case_memory_bytes(bp, {spec_of("fa2", "fp64", 4, 4, 1)}, go, false);
  CHECK(big_need - small_need >= std::size_t{4000000 - 40} * 2 * 8 * 2 * 24 * 4);
}
