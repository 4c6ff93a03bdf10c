// Unified attention's random streams and its in-place reading of the cache, as a user sees them:
// with stochastic rounding every query head of a GQA group and every sequence of the batch draws from its own
// stream (docs/decode.md: "each head keeps its own item and random stream"; one stream per item over the whole
// batch), and a cache read in place needs BOTH the k and v stages to take the cache's values as they are.
// The references are the dense engine on each sequence's own inputs (sequence_inputs) and the same batch
// under round-to-nearest.
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include <boost/random/mersenne_twister.hpp>
#include <boost/random/uniform_real_distribution.hpp>

#include "pasa/attention/algorithm.hpp"
#include "pasa/attention/unified.hpp"
#include "pasa/exact/golden.hpp"
#include "pasa/exact/metrics.hpp"
#include "support/attention_cases.hpp"

using namespace pasa;

namespace {

// Fresh prefills (ctx_len = q_len: one causal part per sequence) of the given lengths over a paged cache in
// `format` (block size 4, the blocks handed out in reverse order). `identical`: every sequence has the same
// Q, K and V (their lengths must then be equal).
PagedBatch fresh_prefills(const std::vector<std::size_t>& q_lens, std::size_t Nq, std::size_t Nkv, const char* format,
                          std::uint64_t seed, bool identical = false) {
  const std::size_t D = 16, bs = 4;
  const Format f = format_by_name(format);
  boost::random::mt19937_64 eng(seed);
  boost::random::uniform_real_distribution<double> uni(-1, 1);
  PagedBatch pb;
  pb.cache.format = f;
  pb.cache.block_size = bs;
  pb.cache.Nkv = Nkv;
  pb.cache.D = D;
  std::size_t blocks = 0, tokens = 0;
  for (std::size_t n : q_lens) blocks += (n + bs - 1) / bs, tokens += n;
  pb.cache.num_blocks = blocks;
  pb.cache.k.assign(blocks * Nkv * bs * D, 0.0f);
  pb.cache.v = pb.cache.k;
  pb.q = Tensor({1, Nq, tokens, D}, f);
  // Per sequence: Q (Nq, n, D), K and V (Nkv, n, D), drawn in that order (once when identical).
  std::vector<double> q0, k0, v0;
  std::size_t next_block = blocks, qoff = 0;
  for (std::size_t s = 0; s < q_lens.size(); ++s) {
    const std::size_t n = q_lens[s];
    if (!identical || s == 0) {
      auto draw = [&](std::vector<double>& x, std::size_t count) {
        x.resize(count);
        for (double& e : x) e = round(uni(eng), f);
      };
      draw(q0, Nq * n * D);
      draw(k0, Nkv * n * D);
      draw(v0, Nkv * n * D);
    }
    PagedSequence sq{n, n, 0, {}};
    for (std::size_t t = 0; t < (n + bs - 1) / bs; ++t) sq.block_table.push_back(--next_block);
    for (std::size_t h = 0; h < Nq; ++h)
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t d = 0; d < D; ++d) pb.q.at(0, h, qoff + i, d) = q0[(h * n + i) * D + d];
    for (std::size_t h = 0; h < Nkv; ++h)
      for (std::size_t j = 0; j < n; ++j)
        for (std::size_t d = 0; d < D; ++d) {
          const std::size_t dst = ((sq.block_table[j / bs] * Nkv + h) * bs + j % bs) * D + d;
          pb.cache.k[dst] = static_cast<float>(k0[(h * n + j) * D + d]);
          pb.cache.v[dst] = static_cast<float>(v0[(h * n + j) * D + d]);
        }
    qoff += n;
    pb.seqs.push_back(sq);
  }
  return pb;
}

// `preset` with stochastic rounding in every stage after the inputs (q, k and v stay as they are, so the
// fp16 cache is read in place) that is not fp64.
AlgorithmSpec sr_spec(const char* preset, std::size_t s1, std::uint64_t seed) {
  AlgorithmSpec spec = test::decode_spec("fa2", preset, 4, 1);
  spec.s1 = s1;
  spec.seed = seed;
  for (StageSpec& st : spec.alloc.stages)
    if (&st != &spec.alloc.spec(Stage::q) && &st != &spec.alloc.spec(Stage::k) && &st != &spec.alloc.spec(Stage::v) &&
        st.format.p < 53)
      st.round.mode = RoundMode::stochastic;
  return spec;
}

// Rows of head h of sequence s (tokens [off, off + n)) of a batch output, against rows [0, n) of a dense one.
bool same_rows(const Tensor& batch, std::size_t off, const Tensor& dense, std::size_t h, std::size_t n) {
  const std::size_t D = dense.shape.D;
  return std::memcmp(batch.head(0, h) + off * D, dense.head(0, h), n * D * sizeof(double)) == 0;
}

}  // namespace

TEST_CASE("unified attention, stochastic rounding: each head of a GQA group has its own stream", "[unified][sr]") {
  // One fresh prefill (item base 0): the unified result must be the dense engine's on the sequence's own
  // inputs, bit for bit, head by head; the dense engine gives every (head, query block) its own stream.
  const PagedBatch pb = fresh_prefills({9}, 8, 2, "fp16", 41);
  const AttentionInputs in = sequence_inputs(pb, 0);
  for (std::size_t s1 : {4, 16}) {
    const AlgorithmSpec spec = sr_spec("fa_fp16", s1, 5);
    const AttentionOutput u = unified_attention(pb, spec, 2), d = run_attention(in, spec, 1);
    for (std::size_t h = 0; h < 8; ++h) {
      INFO("s1 " << s1 << ", head " << h);
      CHECK(same_rows(u.o, 0, d.o, h, 9));
    }
    // (the stochastic rounding is real: another seed moves the output)
    AlgorithmSpec other = spec;
    other.seed = 6;
    CHECK(!same_rows(unified_attention(pb, other, 2).o, 0, u.o, 1, 9));
  }
}

TEST_CASE("unified attention, stochastic rounding: identical sequences draw different streams", "[unified][sr]") {
  // Two identical fresh prefills: under round-to-nearest their outputs are equal; under stochastic rounding
  // the second's items continue the batch's stream count, so they round differently. The first one's output
  // is the dense engine's on its own inputs.
  const PagedBatch pb = fresh_prefills({6, 6}, 4, 2, "fp16", 42, true);
  const std::size_t D = 16;
  auto seq_equal = [&](const Tensor& o, std::size_t h) {
    return std::memcmp(o.head(0, h), o.head(0, h) + 6 * D, 6 * D * sizeof(double)) == 0;
  };
  const AlgorithmSpec rne = test::decode_spec("fa2", "fa_fp16", 4, 1);
  const AttentionOutput n = unified_attention(pb, rne, 2);
  for (std::size_t h = 0; h < 4; ++h) CHECK(seq_equal(n.o, h));
  for (std::size_t s1 : {2, 8}) {
    const AlgorithmSpec spec = sr_spec("fa_fp16", s1, 9);
    const AttentionOutput u = unified_attention(pb, spec, 2);
    const AttentionOutput d = run_attention(sequence_inputs(pb, 0), spec, 1);
    for (std::size_t h = 0; h < 4; ++h) {
      INFO("s1 " << s1 << ", head " << h);
      CHECK(!seq_equal(u.o, h));
      CHECK(same_rows(u.o, 0, d.o, h, 6));
    }
  }
}

TEST_CASE("unified attention: an fp32 cache with only one of the k and v stages as the cache is read correctly",
          "[unified]") {
  // k as the cache (fp32), v in fp16 (and the other way round): the cache cannot be read in place (one of the
  // tiles needs rounding); the call is valid and gives the dense engine's result on each sequence's inputs.
  const PagedBatch pb = fresh_prefills({5, 11}, 4, 2, "fp32", 43);
  // fa_fp32 with its fp16 inputs and output in fp32 (the cache's format: read as they are).
  AlgorithmSpec all32 = test::decode_spec("fa2", "fa_fp32", 4, 1);
  for (Stage st : {Stage::q, Stage::k, Stage::v, Stage::p, Stage::out}) all32.alloc.spec(st).format = format_by_name("fp32");
  const AttentionOutput u32 = unified_attention(pb, all32, 2);
  for (Stage narrow : {Stage::v, Stage::k}) {
    AlgorithmSpec spec = all32;
    spec.alloc.spec(narrow).format = format_by_name("fp16");
    INFO((narrow == Stage::v ? "v" : "k") << " stage in fp16");
    AttentionOutput u;
    REQUIRE_NOTHROW(u = unified_attention(pb, spec, 2));
    std::size_t off = 0;
    for (std::size_t s = 0; s < pb.seqs.size(); ++s) {
      const AttentionOutput d = run_attention(sequence_inputs(pb, s), spec, 1);
      for (std::size_t h = 0; h < 4; ++h) CHECK(same_rows(u.o, off, d.o, h, pb.seqs[s].q_len));
      off += pb.seqs[s].q_len;
    }
    // (and the fp16 stage matters: the result is not the all-fp32 one)
    CHECK(compare_outputs(u.o, u32.o).rmse > 1e-6);
  }
}
