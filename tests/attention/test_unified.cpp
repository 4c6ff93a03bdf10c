// Unified attention ([UA]): a mixed batch of decode and prefill sequences over a paged KV cache (shuffled
// block table, a prefix shared by two sequences), three parts per sequence merged in the merge stage. The
// reference is the golden of dense inputs the test builds itself (before scattering them into the cache).
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include <boost/random/mersenne_twister.hpp>
#include <boost/random/uniform_real_distribution.hpp>

#include "pasa/attention/algorithm.hpp"
#include "pasa/attention/unified.hpp"
#include "pasa/core/error.hpp"
#include "pasa/exact/golden.hpp"
#include "pasa/exact/metrics.hpp"
#include "support/attention_cases.hpp"

using namespace pasa;

namespace {

struct Case {
  PagedBatch pb;
  std::vector<AttentionInputs> dense;  // per sequence: Q (1, Nq, q_len, D), K/V (1, Nkv, ctx_len, D), causal
};

// Sequences (q_len, ctx_len, shared_blocks): a decode step sharing a 5-block prefix with the third, a fresh
// prefill (no cache), a chunked prefill sharing the prefix; block size bs, a cache with spare blocks, the
// logical blocks of each sequence at shuffled cache blocks.
using SeqSpec = std::vector<std::array<std::size_t, 3>>;
Case make_case(std::size_t bs, std::uint64_t seed, std::size_t Nq = 4,
               const SeqSpec& spec = {{1, 301, 5}, {7, 7, 0}, {5, 150, 5}}) {
  const std::size_t Nkv = 2, D = 16;
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
  for (std::size_t s = 0; s < spec.size(); ++s) {
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
          CHECK(compare_outputs(unified_attention(c.pb, test::decode_spec(name, "fp64", s2, splits)).o, g).rmse < 1e-13);
        }
  }
}

TEST_CASE("unified golden: sequences side by side on many threads give the same bits", "[unified]") {
  // Nkv = 2 and at most 7 query rows: one work item per KV head, so 4 and 8 threads run 2 and 3 sequences at
  // once (unified_golden), each on its share of the threads.
  const Case c = make_case(16, 21);
  const Golden one = unified_golden(c.pb);
  for (int threads : {2, 4, 8}) {
    GoldenOptions go;
    go.threads = threads;
    const Golden g = unified_golden(c.pb, go);
    INFO(threads << " threads");
    CHECK(std::memcmp(g.o.data.data(), one.o.data.data(), one.o.data.size() * sizeof(double)) == 0);
    CHECK(g.lse == one.lse);
    CHECK(g.guaranteed_bits == one.guaranteed_bits);
    CHECK(g.error_bound == one.error_bound);
  }
}

namespace {

// Each sequence's rows of g equal golden_attention of its dense inputs bit for bit (O and lse), and g's
// guaranteed bits, bound and MPFR use are the worst over the sequences' goldens.
void check_sequence_goldens(const Case& c, const Golden& g) {
  int bits = 1000;
  double bound = 0;
  bool mpfr = false;
  std::size_t off = 0;
  for (std::size_t s = 0; s < c.dense.size(); ++s) {
    const AttentionInputs& in = c.dense[s];
    const Golden d = golden_attention(in);
    const std::size_t Sq = in.q.shape.S, D = in.q.shape.D, T = c.pb.q.shape.S;
    std::size_t same = 0;
    for (std::size_t h = 0; h < in.q.shape.N; ++h) {
      same += std::memcmp(g.o.head(0, h) + off * D, d.o.head(0, h), Sq * D * sizeof(double)) == 0;
      same += std::equal(d.lse.begin() + h * Sq, d.lse.begin() + (h + 1) * Sq, g.lse.begin() + h * T + off);
    }
    INFO("sequence " << s);
    CHECK(same == 2 * in.q.shape.N);
    bits = std::min(bits, d.guaranteed_bits);
    bound = std::max(bound, d.error_bound);
    mpfr = mpfr || d.used_mpfr;
    off += Sq;
  }
  CHECK(g.guaranteed_bits == bits);
  CHECK(g.error_bound == bound);
  CHECK(g.used_mpfr == mpfr);
}

}  // namespace

TEST_CASE("unified golden: its parts (KV head, 32 new tokens) give each sequence's golden bits on any threads",
          "[unified]") {
  // New tokens on both sides of the parts' 32-row blocks (1, 31, 32, 33, 40, 70), cache blocks of 5 tokens
  // (the parts' key ranges end inside blocks), parts of more keys than a tile (256) and of more rows than
  // one pass takes (32), GQA 3:1, a shared prefix; 1, 2, 3 and 7 threads, the parts' scores recomputed in
  // the second pass over the keys at 3 and 7 (golden_held_scores; the dense goldens hold theirs).
  const Case c = make_case(5, 33, 6, {{1, 301, 5}, {33, 33, 0}, {70, 150, 5}, {32, 40, 0}, {31, 97, 0}, {40, 600, 0}});
  const std::size_t limit = golden_held_scores();
  for (int threads : {1, 2, 3, 7}) {
    GoldenOptions go;
    go.threads = threads;
    INFO(threads << " threads");
    if (threads >= 3) golden_held_scores() = 0;
    const Golden parts = unified_golden(c.pb, go);
    golden_held_scores() = limit;
    check_sequence_goldens(c, parts);
  }
  // A sequence whose magnitudes leave the fast path's range (golden.cpp: fast_path_safe) only through the
  // queries of KV head 1: golden_attention computes all of it with MPFR, so the parts of KV head 0, which
  // pass the test alone, are redone with MPFR too (the same bits, bound and guaranteed bits; here the huge
  // queries' own bound is infinite, so the redo shows in golden_parts' test, test_golden.cpp).
  Case big = make_case(16, 34, 6, {{1, 301, 0}});
  for (std::size_t h = 3; h < 6; ++h)
    for (std::size_t d = 0; d < 16; ++d) {
      big.pb.q.at(0, h, 0, d) *= 0x1p900;
      big.dense[0].q.at(0, h, 0, d) *= 0x1p900;
    }
  REQUIRE(golden_attention(big.dense[0]).used_mpfr);
  for (int threads : {1, 3}) {
    GoldenOptions go;
    go.threads = threads;
    INFO(threads << " threads, fast path out of range");
    check_sequence_goldens(big, unified_golden(big.pb, go));
  }
  // Scores so large (|q|, |k| ~ 2^20) that the decode row's fast bound is below 64 bits: golden_attention
  // redoes its heads with MPFR, and so does the part read a tile at a time (the other sequence stays fast).
  Case wide = make_case(16, 35, 6, {{1, 301, 0}, {2, 50, 0}});
  for (float& x : wide.pb.cache.k) x *= 0x1p20f;
  for (AttentionInputs& in : wide.dense)
    for (double& x : in.k.data) x *= 0x1p20;
  for (std::size_t h = 0; h < 6; ++h)
    for (std::size_t d = 0; d < 16; ++d) {
      wide.pb.q.at(0, h, 0, d) *= 0x1p20;
      wide.dense[0].q.at(0, h, 0, d) *= 0x1p20;
    }
  REQUIRE(golden_attention(wide.dense[0]).used_mpfr);
  REQUIRE(!golden_attention(wide.dense[1]).used_mpfr);
  check_sequence_goldens(wide, unified_golden(wide.pb));
}

TEST_CASE("unified attention under low precision stays within the dense engine's error", "[unified]") {
  const Case c = make_case(16, 7);
  const Tensor g = dense_golden(c);
  for (const char* alloc : {"fa_fp16_fp32", "pasa_fp16"}) {
    const std::string name = std::string(alloc) == "pasa_fp16" ? "pasa" : "fa2";
    const double e = compare_outputs(unified_attention(c.pb, test::decode_spec(name, alloc, 16, 1)).o, g).rmse;
    INFO(alloc << ": " << e);
    CHECK(e > 0);
    CHECK(e < 2e-3);
  }
}

TEST_CASE("unified attention: bad paged inputs are errors naming the sequence and entry", "[unified][errors]") {
  const Case good = make_case(16, 3);
  const AlgorithmSpec spec = test::decode_spec("fa2", "fp64", 16, 1);
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
  CHECK_THROWS_WITH(unified_attention(good.pb, test::decode_spec("fa1", "fp64", 16, 1)), Catch::Contains("needs fa2 or pasa"));
}

TEST_CASE("unified attention reads the paged cache in place with the G heads of a KV head together, bit for bit",
          "[unified]") {
  // Fresh prefills (no cached context: one causal part per sequence), GQA 4:1: each sequence's result is the
  // dense fa2 engine's on the same inputs, bit for bit — the tiles staged from the shuffled cache blocks and
  // the 4 query heads of a KV head run as one work item (s1 = 8: all rows of the heads adjacent; s1 = 3: one
  // QKᵀ GEMM per head) change no bit of any row.
  const Case c = make_case(5, 11, 8, {{7, 7, 0}, {23, 23, 0}, {1, 1, 0}});
  for (const char* alloc : {"fa_fp16_fp32", "fa_fp16", "fa_bf16_fp32"})
    for (std::size_t s1 : {3, 8})
      for (std::size_t splits : {1, 3}) {
        AlgorithmSpec spec = test::decode_spec("fa2", alloc, 4, splits);
        spec.s1 = s1;
        const AttentionOutput u = unified_attention(c.pb, spec, 2);
        std::size_t off = 0, same = 0, rows = 0;
        for (const AttentionInputs& in : c.dense) {
          const AttentionOutput d = run_attention(in, spec, 1);
          for (std::size_t h = 0; h < in.q.shape.N; ++h)
            for (std::size_t i = 0; i < in.q.shape.S; ++i, ++rows)
              same += std::memcmp(u.o.head(0, h) + (off + i) * in.q.shape.D, d.o.head(0, h) + i * in.q.shape.D,
                                  in.q.shape.D * sizeof(double)) == 0;
          off += in.q.shape.S;
        }
        INFO(alloc << ", s1 " << s1 << ", splits " << splits);
        CHECK(same == rows);
      }
}

TEST_CASE("unified attention names the first non-finite cache value in cache order", "[unified][errors]") {
  Case c = make_case(16, 5);
  // Two bad values: sequence 2 token 40 (KV head 1, V) and sequence 0 token 17 (KV head 0, K); whichever
  // thread meets one first, the error names sequence 0's (the order in which the cache is gathered).
  const std::size_t bs = 16, Nkv = 2, D = 16;
  auto row = [&](std::size_t s, std::size_t h, std::size_t j) {
    return ((c.pb.seqs[s].block_table[j / bs] * Nkv + h) * bs + j % bs) * D;
  };
  c.pb.cache.v[row(2, 1, 40) + 3] = std::nanf("");
  c.pb.cache.k[row(0, 0, 17) + 5] = INFINITY;
  const std::string what = "sequence 0: token 17 (cache block " + std::to_string(c.pb.seqs[0].block_table[1]) +
                           ", KV head 0) has a non-finite K or V value";
  for (const char* name : {"fa2", "pasa"})
    for (int threads : {1, 2}) CHECK_THROWS_WITH(unified_attention(c.pb, test::decode_spec(name, "fa_fp16_fp32", 16, 1), threads),
                                                 Catch::Contains(what));
  CHECK_THROWS_WITH(unified_golden(c.pb), Catch::Contains(what));
  GoldenOptions eight;  // sequences 0 to 2 side by side: still the first sequence's error
  eight.threads = 8;
  CHECK_THROWS_WITH(unified_golden(c.pb, eight), Catch::Contains(what));
  PagedBatch wide = c.pb;
  wide.cache.format = format_by_name("fp64");
  CHECK_THROWS_WITH(unified_attention(wide, test::decode_spec("fa2", "fp64", 16, 1)),
                    Catch::Contains("format fp64 is wider than fp32"));
}

TEST_CASE("block schemes on the KV cache: unified attention as on a cache holding the quantised values", "[unified][block_quant]") {
  // K per token in MX blocks along D, V per token (a row per token and head, E8M0 scales so that the values
  // fit the cache's floats): the same bits as the plain run over a cache whose every token was quantised.
  for (const char* name : {"fa2", "pasa"}) {
    const Case c = make_case(16, 41);
    BlockScheme k = block_scheme_by_name("mxfp8_e4m3"), v = k;
    v.a.group = v.b.group = Grouping::row;
    AlgorithmSpec spec = test::decode_spec(name, "fa_fp32", 16, 1);
    const AttentionOutput plain_cache = [&] {
      PagedBatch q = c.pb;
      q.cache.format = format_by_name("fp32");  // (the quantised values are fp32 values, not fp16 ones)
      const std::size_t rows = q.cache.num_blocks * q.cache.Nkv * q.cache.block_size, D = q.cache.D;
      for (auto [cache, s] : {std::pair{&q.cache.k, &k}, std::pair{&q.cache.v, &v}}) {
        const std::vector<double> x(cache->begin(), cache->end());
        const BlockQuantised r = block_quantise(x.data(), 1, rows, D, *s, true);
        for (std::size_t i = 0; i < x.size(); ++i) {
          REQUIRE(static_cast<double>(static_cast<float>(r.values[i])) == r.values[i]);
          (*cache)[i] = static_cast<float>(r.values[i]);
        }
      }
      return unified_attention(q, spec, 2);
    }();
    spec.quant.k_block = k;
    spec.quant.v_block = v;
    const AttentionOutput blocked = unified_attention(c.pb, spec, 2);
    INFO(name);
    CHECK(blocked.o.data == plain_cache.o.data);
    CHECK(blocked.lse == plain_cache.lse);
  }
  const Case c = make_case(16, 42);
  AlgorithmSpec spec = test::decode_spec("fa2", "fp64", 16, 1);
  spec.quant.k_block = block_scheme_by_name("int8_per_block");
  CHECK_THROWS_WITH(unified_attention(c.pb, spec), Catch::Contains("/quant/k") && Catch::Contains("tile"));
  spec.quant.k_block = block_scheme_by_name("fp8_per_token_head");
  spec.quant.v_block = block_scheme_by_name("mxfp8_e4m3");
  CHECK_THROWS_WITH(unified_attention(c.pb, spec), Catch::Contains("/quant/v") && Catch::Contains("block"));
  spec.quant.v_block = block_scheme_by_name("fp8_per_token_head");
  CHECK_NOTHROW(unified_attention(c.pb, spec));
}
