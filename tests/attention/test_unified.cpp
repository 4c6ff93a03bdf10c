// Unified attention ([UA]): a mixed batch of decode and prefill sequences over a paged KV cache (shuffled
// block table, a prefix shared by two sequences), three parts per sequence merged in the merge stage. The
// reference is the golden of dense inputs the test builds itself (before scattering them into the cache).
#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>
#include <vector>

#include <boost/random/mersenne_twister.hpp>
#include <boost/random/uniform_real_distribution.hpp>

#include "pasa/attention/unified.hpp"
#include "pasa/core/error.hpp"
#include "pasa/exact/golden.hpp"
#include "pasa/exact/metrics.hpp"

using namespace pasa;

namespace {

struct Case {
  PagedBatch pb;
  std::vector<AttentionInputs> dense;  // per sequence: Q (1, Nq, q_len, D), K/V (1, Nkv, ctx_len, D), causal
};

// Sequences (q_len, ctx_len, shared_blocks): a decode step sharing a 5-block prefix with the third, a fresh
// prefill (no cache), a chunked prefill sharing the prefix; block size bs, a cache with spare blocks, the
// logical blocks of each sequence at shuffled cache blocks.
Case make_case(std::size_t bs, std::uint64_t seed) {
  const std::size_t Nq = 4, Nkv = 2, D = 16;
  const std::size_t spec[3][3] = {{1, 301, 5}, {7, 7, 0}, {5, 150, 5}};
  boost::random::mt19937_64 eng(seed);
  boost::random::uniform_real_distribution<double> uni(-1, 1);
  const Format h = format_by_name("fp16");
  auto fill = [&](Tensor& t) {
    for (double& x : t.data) x = round(uni(eng), h);
  };
  Case c;
  PagedBatch& pb = c.pb;
  pb.cache.block_size = bs;
  pb.cache.Nkv = Nkv;
  pb.cache.D = D;
  std::size_t total_blocks = 0, tokens = 0;
  for (auto& s : spec) {
    total_blocks += (s[1] + bs - 1) / bs;
    tokens += s[0];
  }
  pb.cache.num_blocks = total_blocks + 3;
  pb.cache.k.assign(pb.cache.num_blocks * Nkv * bs * D, 0.0);
  pb.cache.v = pb.cache.k;
  std::vector<std::size_t> perm(pb.cache.num_blocks);
  std::iota(perm.begin(), perm.end(), 0);
  for (std::size_t i = perm.size() - 1; i > 0; --i) std::swap(perm[i], perm[eng() % (i + 1)]);  // Fisher–Yates
  std::size_t next = 0;
  pb.q = Tensor({1, Nq, tokens, D}, h);
  fill(pb.q);
  std::size_t qoff = 0;
  for (std::size_t s = 0; s < 3; ++s) {
    PagedSequence sq{spec[s][0], spec[s][1], spec[s][2], {}};
    AttentionInputs in;
    in.q = Tensor({1, Nq, sq.q_len, D}, h);
    for (std::size_t hh = 0; hh < Nq; ++hh)
      for (std::size_t i = 0; i < sq.q_len; ++i)
        for (std::size_t d = 0; d < D; ++d) in.q.at(0, hh, i, d) = pb.q.at(0, hh, qoff + i, d);
    qoff += sq.q_len;
    in.k = Tensor({1, Nkv, sq.ctx_len, D}, h);
    in.v = in.k;
    fill(in.k);
    fill(in.v);
    in.mask.causal = true;
    const std::size_t blocks = (sq.ctx_len + bs - 1) / bs;
    for (std::size_t t = 0; t < blocks; ++t) {
      if (s == 2 && t < sq.shared_blocks) {  // the shared prefix: sequence 0's blocks and keys
        sq.block_table.push_back(pb.seqs[0].block_table[t]);
        for (std::size_t hh = 0; hh < Nkv; ++hh)
          for (std::size_t j = t * bs; j < (t + 1) * bs; ++j)
            for (std::size_t d = 0; d < D; ++d) {
              in.k.at(0, hh, j, d) = c.dense[0].k.at(0, hh, j, d);
              in.v.at(0, hh, j, d) = c.dense[0].v.at(0, hh, j, d);
            }
        continue;
      }
      const std::size_t blk = perm[next++];
      sq.block_table.push_back(blk);
      for (std::size_t hh = 0; hh < Nkv; ++hh)
        for (std::size_t j = t * bs; j < std::min(sq.ctx_len, (t + 1) * bs); ++j)
          for (std::size_t d = 0; d < D; ++d) {
            const std::size_t dst = ((blk * Nkv + hh) * bs + j - t * bs) * D + d;
            pb.cache.k[dst] = in.k.at(0, hh, j, d);
            pb.cache.v[dst] = in.v.at(0, hh, j, d);
          }
    }
    pb.seqs.push_back(sq);
    c.dense.push_back(std::move(in));
  }
  return c;
}

// The dense goldens concatenated along the token axis.
Tensor dense_golden(const Case& c) {
  Tensor g(c.pb.q.shape, format_by_name("fp64"));
  std::size_t off = 0;
  for (const AttentionInputs& in : c.dense) {
    const Golden gs = golden_attention(in);
    for (std::size_t h = 0; h < in.q.shape.N; ++h)
      for (std::size_t i = 0; i < in.q.shape.S; ++i)
        for (std::size_t d = 0; d < in.q.shape.D; ++d) g.at(0, h, off + i, d) = gs.o.at(0, h, i, d);
    off += in.q.shape.S;
  }
  return g;
}

AlgorithmSpec spec_of(const std::string& name, const std::string& alloc, std::size_t s2, std::size_t splits) {
  AlgorithmSpec s;
  s.name = name;
  s.alloc = allocation_preset(alloc);
  s.s1 = 4;
  s.s2 = s2;
  s.splits = splits;
  return s;
}

}  // namespace

TEST_CASE("unified attention: a mixed paged batch equals the dense golden in fp64", "[unified]") {
  for (std::size_t bs : {16, 5}) {
    const Case c = make_case(bs, 100 + bs);
    const Tensor g = dense_golden(c);
    CHECK(compare_outputs(unified_golden(c.pb).o, g).rmse < 1e-16);
    for (const char* name : {"fa2", "pasa"})
      for (std::size_t s2 : {bs, std::size_t{32}})
        for (std::size_t splits : {1, 3}) {
          INFO(name << ", block " << bs << ", s2 " << s2 << ", splits " << splits);
          CHECK(compare_outputs(unified_attention(c.pb, spec_of(name, "fp64", s2, splits)).o, g).rmse < 1e-13);
        }
  }
}

TEST_CASE("unified attention under low precision stays within the dense engine's error", "[unified]") {
  const Case c = make_case(16, 7);
  const Tensor g = dense_golden(c);
  for (const char* alloc : {"fa_fp16_fp32", "pasa_fp16"}) {
    const std::string name = std::string(alloc) == "pasa_fp16" ? "pasa" : "fa2";
    const double e = compare_outputs(unified_attention(c.pb, spec_of(name, alloc, 16, 1)).o, g).rmse;
    INFO(alloc << ": " << e);
    CHECK(e > 0);
    CHECK(e < 2e-3);
  }
}

TEST_CASE("unified attention: bad paged inputs are errors naming the sequence and entry", "[unified][errors]") {
  const Case good = make_case(16, 3);
  const AlgorithmSpec spec = spec_of("fa2", "fp64", 16, 1);
  auto fails = [&](const PagedBatch& pb, const std::string& what) {
    INFO(what);
    CHECK_THROWS_WITH(unified_attention(pb, spec), Catch::Contains(what));
    CHECK_THROWS_WITH(unified_golden(pb), Catch::Contains(what));
  };
  PagedBatch pb = good.pb;
  pb.seqs[0].block_table[3] = pb.cache.num_blocks;
  fails(pb, "sequence 0: block_table[3] = " + std::to_string(pb.cache.num_blocks) + " points outside the cache");
  pb = good.pb;
  pb.seqs[2].ctx_len = 200;  // 13 blocks, the table has 10
  pb.seqs[2].q_len = 5;
  fails(pb, "sequence 2: ctx_len = 200 needs 13 blocks of 16 tokens, its block table has 10");
  pb = good.pb;
  pb.seqs[1].q_len = 8;
  fails(pb, "sequence 1: q_len = 8 must be in [1, ctx_len = 7]");
  pb = good.pb;
  pb.seqs[0].shared_blocks = 19;
  fails(pb, "sequence 0: shared_blocks = 19");
  pb = good.pb;
  pb.q.shape.S -= 1;
  pb.q.data.resize(pb.q.shape.size());
  fails(pb, "Q has 12 tokens, the sequences' q_len sum to 13");
  pb = good.pb;
  pb.cache.v.pop_back();
  fails(pb, "paged cache: K holds");
  CHECK_THROWS_WITH(unified_attention(good.pb, spec_of("fa1", "fp64", 16, 1)), Catch::Contains("needs fa2 or pasa"));
}
