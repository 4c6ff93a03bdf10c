#include "pasa/attention/unified.hpp"

#include "pasa/attention/algorithm.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <exception>
#include <limits>
#include <memory>
#include <utility>

#include <fmt/format.h>
#include <sys/mman.h>

#include "pasa/attention/detail/blocked_attention.hpp"
#include "pasa/attention/detail/flash.hpp"
#include "pasa/attention/detail/pasa_attention.hpp"
#include "pasa/attention/detail/split_kv.hpp"
#include "pasa/core/error.hpp"
#include "pasa/core/memory.hpp"
#include "pasa/exact/baseline.hpp"

namespace pasa {

void validate(const PagedBatch& pb) {
  const PagedCache& c = pb.cache;
  const Shape& q = pb.q.shape;
  if (c.block_size == 0) throw InputError("paged cache: block_size must be >= 1");
  if (c.Nkv == 0 || c.D == 0) throw InputError(fmt::format("paged cache: Nkv = {} and D = {} must be >= 1", c.Nkv, c.D));
  const Format& f = c.format;  // every value of f is a float: precision, range and subnormals within fp32's
  if (!(f.p <= 24 && f.emax <= 127 && f.emin() - (f.p - 1) >= -149))
    throw InputError(fmt::format("paged cache: format {} is wider than fp32, the cache's storage (floats)", f.name));
  const std::size_t need = c.num_blocks * c.Nkv * c.block_size * c.D;
  if (c.k.size() != need || c.v.size() != need)
    throw InputError(fmt::format("paged cache: K holds {} and V {} values, (num_blocks, Nkv, block_size, D) = ({}, {}, "
                                 "{}, {}) needs {}", c.k.size(), c.v.size(), c.num_blocks, c.Nkv, c.block_size, c.D, need));
  if (q.B != 1) throw InputError(fmt::format("unified attention: Q must be (1, Nq, tokens, D), got B = {}", q.B));
  if (q.D != c.D) throw InputError(fmt::format("unified attention: D of Q ({}) differs from the cache's ({})", q.D, c.D));
  if (q.N == 0 || q.N % c.Nkv != 0)
    throw InputError(fmt::format("unified attention: Nq = {} is not a multiple of Nkv = {} (GQA)", q.N, c.Nkv));
  if (pb.q.data.size() != q.size())
    throw InputError(fmt::format("unified attention: Q holds {} values, its shape needs {}", pb.q.data.size(), q.size()));
  if (pb.seqs.empty()) throw InputError("unified attention: no sequence");
  std::size_t tokens = 0;
  for (std::size_t s = 0; s < pb.seqs.size(); ++s) {
    const PagedSequence& sq = pb.seqs[s];
    if (sq.q_len == 0 || sq.q_len > sq.ctx_len)
      throw InputError(fmt::format("sequence {}: q_len = {} must be in [1, ctx_len = {}]", s, sq.q_len, sq.ctx_len));
    const std::size_t blocks = (sq.ctx_len + c.block_size - 1) / c.block_size;
    if (sq.block_table.size() < blocks)
      throw InputError(fmt::format("sequence {}: ctx_len = {} needs {} blocks of {} tokens, its block table has {} "
                                   "(the context is longer than its cache)", s, sq.ctx_len, blocks, c.block_size,
                                   sq.block_table.size()));
    for (std::size_t t = 0; t < blocks; ++t)
      if (sq.block_table[t] >= c.num_blocks)
        throw InputError(fmt::format("sequence {}: block_table[{}] = {} points outside the cache ({} blocks)", s, t,
                                     sq.block_table[t], c.num_blocks));
    if (sq.shared_blocks * c.block_size > sq.ctx_len - sq.q_len)
      throw InputError(fmt::format("sequence {}: shared_blocks = {} ({} tokens) reaches past the cached context ({} "
                                   "tokens before the new ones)", s, sq.shared_blocks, sq.shared_blocks * c.block_size,
                                   sq.ctx_len - sq.q_len));
    tokens += sq.q_len;
  }
  if (tokens != q.S)
    throw InputError(fmt::format("unified attention: Q has {} tokens, the sequences' q_len sum to {}", q.S, tokens));
  for (std::size_t i = 0; i < pb.q.data.size(); ++i)
    if (!std::isfinite(pb.q.data[i]))
      throw InputError(fmt::format("unified attention: Q has a non-finite element {} at flat index {}", pb.q.data[i], i));
  // The cache's values are checked where they are read (gather: only the blocks the tables name count).
  if (!std::isfinite(pb.scale)) throw InputError(fmt::format("scale must be finite, got {}", pb.scale));
}

namespace {

std::size_t q_offset(const PagedBatch& pb, std::size_t s) {
  std::size_t off = 0;
  for (std::size_t t = 0; t < s; ++t) off += pb.seqs[t].q_len;
  return off;
}

// The cache row (D values) of token j of sequence s, KV head h.
std::size_t cache_row(const PagedBatch& pb, std::size_t s, std::size_t h, std::size_t j) {
  const PagedCache& c = pb.cache;
  const std::size_t blk = pb.seqs[s].block_table[j / c.block_size];
  return ((blk * c.Nkv + h) * c.block_size + j % c.block_size) * c.D;
}

bool all_finite(const float* x, std::size_t n) {
  std::uint32_t bad = 0;  // an exponent field of all ones: inf or NaN (an integer test, so the loop vectorises)
  for (std::size_t i = 0; i < n; ++i) bad |= (std::bit_cast<std::uint32_t>(x[i]) & 0x7F800000u) == 0x7F800000u;
  return bad == 0;
}

void check_finite(const PagedBatch& pb, std::size_t s, std::size_t h, std::size_t j) {
  const std::size_t src = cache_row(pb, s, h, j), D = pb.cache.D;
  if (!all_finite(pb.cache.k.data() + src, D) || !all_finite(pb.cache.v.data() + src, D))
    throw InputError(fmt::format("sequence {}: token {} (cache block {}, KV head {}) has a non-finite K or V value",
                                 s, j, pb.seqs[s].block_table[j / pb.cache.block_size], h));
}

// t reshaped to (1, n, S, D) of format f, its values left to be overwritten. The memory of earlier calls is
// reused (a gathered sequence is hundreds of MB: fresh memory costs a page fault per 4 KiB), and new memory
// is asked for transparent huge pages before it is first touched.
void reshape(Tensor& t, std::size_t n, std::size_t S, std::size_t D, const Format& f) {
  t.shape = Shape{1, n, S, D};
  t.format = f;
  if (t.data.capacity() < t.shape.size()) {
    t.data = decltype(t.data)();
    t.data.reserve(t.shape.size());
    constexpr std::uintptr_t page = 4096;
    const auto begin = (reinterpret_cast<std::uintptr_t>(t.data.data()) + page - 1) / page * page;
    const auto end = reinterpret_cast<std::uintptr_t>(t.data.data() + t.data.capacity()) / page * page;
    if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);  // advice only
  }
  t.data.resize(t.shape.size());
}

// Keys [j0, j1) of sequence s gathered through the block table into k and v: (1, Nkv, j1 − j0, D), the KV
// heads on `threads` threads. A non-finite value is named as a serial gather meets it first (head, token).
void gather(const PagedBatch& pb, std::size_t s, std::size_t j0, std::size_t j1, Tensor& k, Tensor& v, int threads) {
  const PagedCache& c = pb.cache;
  reshape(k, c.Nkv, j1 - j0, c.D, c.format);
  reshape(v, c.Nkv, j1 - j0, c.D, c.format);
  std::vector<std::uint8_t> bad(c.Nkv, 0);
  parallel_for(c.Nkv, threads, [&](std::size_t h) {
    for (std::size_t j = j0; j < j1; ++j) {
      const std::size_t src = cache_row(pb, s, h, j);
      std::copy_n(c.k.data() + src, c.D, k.head(0, h) + (j - j0) * c.D);
      std::copy_n(c.v.data() + src, c.D, v.head(0, h) + (j - j0) * c.D);
      if (!all_finite(c.k.data() + src, c.D) || !all_finite(c.v.data() + src, c.D)) bad[h] = 1;
    }
  });
  if (std::find(bad.begin(), bad.end(), 1) != bad.end())
    for (std::size_t h = 0; h < c.Nkv; ++h)
      for (std::size_t j = j0; j < j1; ++j) check_finite(pb, s, h, j);
}

Tensor sequence_q(const PagedBatch& pb, std::size_t s) {
  const Shape& qs = pb.q.shape;
  const std::size_t ql = pb.seqs[s].q_len, off = q_offset(pb, s);
  Tensor q({1, qs.N, ql, qs.D}, pb.q.format);
  for (std::size_t h = 0; h < qs.N; ++h) std::copy_n(pb.q.head(0, h) + off * qs.D, ql * qs.D, q.head(0, h));
  return q;
}

// Rows [off, off + Sq) of the batch output from one sequence's output.
void scatter(const Tensor& o, const std::vector<double>& lse, std::size_t off, Tensor& out, std::vector<double>& out_lse) {
  const std::size_t N = o.shape.N, Sq = o.shape.S, D = o.shape.D, T = out.shape.S;
  for (std::size_t h = 0; h < N; ++h) {
    std::copy_n(o.head(0, h), Sq * D, out.head(0, h) + off * D);
    std::copy_n(lse.data() + h * Sq, Sq, out_lse.data() + h * T + off);
  }
}

// Sequence s as dense causal inputs, in `in` (its K and V memory reused). pb validated.
void gathered_inputs(const PagedBatch& pb, std::size_t s, AttentionInputs& in, int threads = 1) {
  in.q = sequence_q(pb, s);
  gather(pb, s, 0, pb.seqs[s].ctx_len, in.k, in.v, threads);
  in.scale = pb.scale;
  in.mask.causal = true;
}

// Thrown by PagedTiles when a staged tile holds inf or NaN; unified_attention then names the first such
// token in cache order (the order of gather), whichever thread met one first.
struct NonFiniteTile {};

// The paged cache read in place through one sequence's block table, for a run whose key 0 is the sequence's
// token j_begin: each tile staged from the blocks it spans (a kernel's load of a tile into shared memory).
class PagedTiles final : public detail::KvTiles {
 public:
  PagedTiles(const PagedBatch& pb, std::size_t s, std::size_t j_begin) : pb_(pb), s_(s), j_begin_(j_begin) {}

  const float* keys_t(std::size_t, std::size_t hk, std::size_t j0, std::size_t n) const override {
    const std::size_t D = pb_.cache.D;
    thread_local std::vector<float> buffer;
    buffer.resize(D * n);
    float* t = buffer.data();  // D × n: column c holds key j0 + c
    for_rows(pb_.cache.k.data(), hk, j0, n, [&](const float* src, std::size_t c, std::size_t count) {
      // d outer: each store fills a run of adjacent columns; the block's count rows stay in L1 meanwhile.
      for (std::size_t d = 0; d < D; ++d)
        for (std::size_t i = 0; i < count; ++i) t[d * n + c + i] = src[i * D + d];
    });
    return t;
  }

  const float* values(std::size_t, std::size_t hk, std::size_t j0, std::size_t n) const override {
    const std::size_t D = pb_.cache.D;
    thread_local std::vector<float> buffer;
    buffer.resize(n * D);
    float* t = buffer.data();
    for_rows(pb_.cache.v.data(), hk, j0, n,
             [&](const float* src, std::size_t c, std::size_t count) { std::copy_n(src, count * D, t + c * D); });
    return t;
  }

 private:
  // f(rows, c, count) for each run of consecutive keys j0 + c … j0 + c + count − 1 within one cache block
  // (rows: their count × D values), after checking the values are finite.
  template <class F>
  void for_rows(const float* base, std::size_t hk, std::size_t j0, std::size_t n, F&& f) const {
    const PagedCache& c = pb_.cache;
    for (std::size_t i = 0; i < n;) {
      const std::size_t j = j_begin_ + j0 + i, count = std::min(c.block_size - j % c.block_size, n - i);
      const float* src = base + cache_row(pb_, s_, hk, j);
      if (!all_finite(src, count * c.D)) throw NonFiniteTile{};
      f(src, i, count);
      i += count;
    }
  }

  const PagedBatch& pb_;
  std::size_t s_, j_begin_;
};

// One sequence's parts (their inputs, tiles and runs) and its output rows.
struct Sequence {
  std::vector<std::unique_ptr<AttentionInputs>> ins;
  std::vector<std::unique_ptr<PagedTiles>> tiles;
  std::vector<std::unique_ptr<detail::Run>> runs;
  AttentionOutput out;
  std::size_t item_base = 0;  // index of its first (single-head) item in the batch's order
};

}  // namespace

AttentionInputs sequence_inputs(const PagedBatch& pb, std::size_t s) {
  validate(pb);
  if (s >= pb.seqs.size()) throw InputError(fmt::format("sequence {} of {}", s, pb.seqs.size()));
  AttentionInputs in;
  gathered_inputs(pb, s, in);
  return in;
}

namespace {

// The algorithm against a batch whose largest sequence has max_q new tokens and max_ctx keys (validate_unified).
void check_unified(const AlgorithmSpec& spec, const CaseLayout& largest) {
  check_stage_formats(spec.alloc, "/alloc: ");
  if (!algorithm_info(spec.name, "/name: unified attention: ").unified)
    throw InputError(fmt::format("/name: unified attention needs fa2 or pasa (an unnormalised output to merge), got "
                                 "\"{}\"", spec.name));
  if (spec.s1 == 0 || spec.s2 == 0 || spec.splits == 0) throw InputError("/s1: s1, s2 and splits must be at least 1");
  // The FP8 recipe's scales are per head and per tile of dense Q, K, V; the paged engine reads K and V in place
  // and groups a KV head's query heads, so it has no place for them yet.
  if (spec.quant.fa3_active())
    throw InputError("/quant: unified attention: the FP8 recipe (quant) runs on dense inputs only (pasa-attn, sweeps)");
  // Block schemes on the KV cache: each part of a sequence (shared prefix, cached blocks, new tokens) gathers
  // its K and V and quantises them, so a group must lie within one token (a real cache quantises a token as
  // it is written, once: vLLM's fp8_per_token_head), and deterministically (a shared block is gathered by
  // every sequence that reads it).
  const std::pair<const std::optional<BlockScheme>*, const char*> kv[] = {{&spec.quant.k_block, "k"}, {&spec.quant.v_block, "v"}};
  for (const auto& [b, name] : kv) {
    if (!*b) continue;
    const Grouping g = (*b)->b.group;
    const bool v = name[0] == 'v';
    if (!(g == Grouping::row || (!v && g == Grouping::block)))
      throw InputError(fmt::format("/quant/{}: unified attention quantises the KV cache token by token: its groups are "
                                   "rows (per token{}), got \"{}\"", name, v ? "" : ") or blocks along D (\"block\"",
                                   enum_name(kGroupings, g)));
    if ((*b)->round == RoundMode::stochastic)
      throw InputError(fmt::format("/quant/{}/round: unified attention: the KV cache's rounding must be deterministic "
                                   "(a shared block is read by several sequences)", name));
  }
  validate_case(largest, spec);
}

CaseLayout batch_layout(const PagedBatch& pb) {
  std::size_t max_q = 1, max_ctx = 1;
  for (const auto& sq : pb.seqs) max_q = std::max(max_q, sq.q_len), max_ctx = std::max(max_ctx, sq.ctx_len);
  const Format& f = pb.cache.format;
  return {{1, pb.q.shape.N, max_q, pb.q.shape.D}, {1, pb.cache.Nkv, max_ctx, pb.cache.D}, pb.q.format, f, f};
}

}  // namespace

void validate_unified(const ProblemSpec& p, const AlgorithmSpec& spec) {
  validate(p);
  if (!p.paged) throw InputError("/kind: not a paged problem");
  const Format f = format_by_name(p.format);
  check_unified(spec, {{1, p.Nq, std::max<std::size_t>(1, p.paged->max_q_len()), p.D},
                       {1, p.Nkv, std::max<std::size_t>(1, p.paged->max_ctx_len()), p.D}, f, f, f});
}

AttentionOutput unified_attention(const PagedBatch& pb, const AlgorithmSpec& spec, int threads) {
  validate(pb);
  check_unified(spec, batch_layout(pb));
  // The engine's one variant: PASA's shifted keys and pseudo-average (its options); otherwise FA2.
  const bool pasa = algorithm_info(spec.name).pasa_options;
  const Shape& qs = pb.q.shape;
  const PagedCache& c = pb.cache;
  AttentionOutput out;
  out.o = Tensor(qs, spec.alloc.spec(Stage::out).format);
  out.lse.assign(qs.N * qs.S, detail::kNegInf);
  // The k and v stages take the cache's values unrounded (the Run then needs no rounded copy of them).
  auto as_is = [&](Stage st) {
    const StageSpec& sp = spec.alloc.spec(st);
    const bool plain_fp64 = sp.format == format_by_name("fp64") && sp.round.mode == RoundMode::nearest_even &&
                            sp.round.overflow == Overflow::ieee && !sp.round.flush_input && !sp.round.flush_output;
    return plain_fp64 || (sp.format == c.format && sp.round.mode != RoundMode::stochastic);
  };
  const bool in_place = !pasa && as_is(Stage::k) && as_is(Stage::v) && !spec.quant.k_block && !spec.quant.v_block;
  const bool stochastic = std::any_of(spec.alloc.stages.begin(), spec.alloc.stages.end(),
                                      [](const StageSpec& sp) { return sp.round.mode == RoundMode::stochastic; });
  const std::size_t group = qs.N / c.Nkv, heads = stochastic ? 1 : group;
  std::vector<Sequence> work(pb.seqs.size());
  std::size_t item_base = 0;  // stochastic rounding: one stream per item over the whole batch
  for (std::size_t s = 0; s < pb.seqs.size(); ++s) work[s].item_base = std::exchange(item_base, item_base + qs.N *
                                                     ((pb.seqs[s].q_len + spec.s1 - 1) / spec.s1));
  // The sequences run together when the cache is read in place (their runs hold no K/V), else one at a time
  // (each holds its sequence's gathered K and V).
  for (std::size_t s0 = 0, s1; s0 < pb.seqs.size(); s0 = s1) {
    s1 = in_place ? pb.seqs.size() : s0 + 1;
    std::vector<std::pair<std::size_t, detail::Item>> items;  // (sequence, item) of the whole round
    for (std::size_t s = s0; s < s1; ++s) {
      Sequence& w = work[s];
      const PagedSequence& sq = pb.seqs[s];
      const std::size_t cached = sq.ctx_len - sq.q_len, prefix = sq.shared_blocks * c.block_size;
      // The parts' key ranges: shared prefix, unique cached blocks, the new tokens (causal).
      const std::pair<std::size_t, std::size_t> ranges[] = {{0, prefix}, {prefix, cached}, {cached, sq.ctx_len}};
      for (const auto& [j0, j1] : ranges) {
        if (j0 == j1) continue;
        auto in = std::make_unique<AttentionInputs>();
        in->q = sequence_q(pb, s);
        if (in_place) {  // K and V give the run their shape and format only; the tiles read the cache
          in->k.shape = in->v.shape = Shape{1, c.Nkv, j1 - j0, c.D};
          in->k.format = in->v.format = c.format;
          w.tiles.push_back(std::make_unique<PagedTiles>(pb, s, j0));
        } else {
          gather(pb, s, j0, j1, in->k, in->v, threads);
        }
        in->scale = pb.scale;
        in->mask.causal = j1 == sq.ctx_len;  // new token i sees new tokens 0..i (Sq = Skv = q_len)
        in->allow_nonfinite = true;  // Q checked by validate(pb), K and V where they are read
        w.runs.push_back(std::make_unique<detail::Run>(*in, spec, in_place ? w.tiles.back().get() : nullptr, threads));
        if (pasa) detail::pasa_prepare(*w.runs.back(), threads);
        w.ins.push_back(std::move(in));
      }
      const detail::Run& run0 = *w.runs.front();
      w.out.o = Tensor(run0.in.q.shape, run0.stage(Stage::out).format);
      w.out.lse.assign(qs.N * sq.q_len, detail::kNegInf);
      for (const detail::Item& it : detail::make_items(run0)) {  // (head, query block): G heads per item
        if (it.h % heads != 0) continue;
        detail::Item grouped = it;
        grouped.heads = heads;
        items.emplace_back(s, grouped);
      }
    }
    auto body = [&](std::size_t i) {
      const auto& [s, it] = items[i];
      Sequence& w = work[s];
      const detail::Run& run0 = *w.runs.front();
      // The stream of the item's first head (the single-head item of today's order: (head, query block)).
      const std::size_t blocks = (run0.Sq + spec.s1 - 1) / spec.s1;
      RandomBits rng = detail::item_stream(spec, w.item_base + it.h * blocks + it.r0 / spec.s1);
      const double m0 = pasa ? detail::pasa_m0(run0) : detail::kNegInf;
      std::vector<detail::Partial> parts;
      double inva = 0;
      for (const auto& run : w.runs) {
        parts.emplace_back(it.rows(), run0.D, m0);
        if (pasa) inva = detail::pasa_item(*run, it, parts.back(), &rng);
        else detail::fa2_item(*run, it, parts.back(), &rng);
      }
      detail::Partial st = parts.front();
      if (parts.size() > 1) detail::merge_partials(run0, parts, pasa, inva, st, &rng);
      if (pasa) detail::pasa_finish(run0, it, st, inva, w.out, &rng);  // (only the item's rows)
      else detail::finish_rows(run0, it, st.O, st.l, st.m, st.seen, true, nullptr, w.out, &rng);
    };
    try {
      parallel_for(items.size(), threads, body);
    } catch (const NonFiniteTile&) {  // a tile held inf or NaN: name the first such token in cache order
      for (std::size_t s = s0; s < s1; ++s)
        for (std::size_t h = 0; h < c.Nkv; ++h)
          for (std::size_t j = 0; j < pb.seqs[s].ctx_len; ++j) check_finite(pb, s, h, j);
      throw InputError("unified attention: a K/V tile held a non-finite value");  // (not reached)
    }
    for (std::size_t s = s0; s < s1; ++s) {
      scatter(work[s].out.o, work[s].out.lse, q_offset(pb, s), out.o, out.lse);
      work[s] = Sequence{};  // the sequence's gathered K and V are no longer needed
    }
  }
  return out;
}

namespace {

// unified_golden's parts: (sequence, KV head, block of kGoldenRowBlock new tokens), each with the keys its
// rows see (causal, bottom-right: the block's last token sees the first ctx_len − (q_len − i1) keys).
struct GoldenPart {
  std::size_t s, hk, i0, i1, keys;
};

std::vector<GoldenPart> golden_parts_of(const PagedBatch& pb) {
  std::vector<GoldenPart> parts;
  for (std::size_t s = 0; s < pb.seqs.size(); ++s) {
    const PagedSequence& sq = pb.seqs[s];
    for (std::size_t hk = 0; hk < pb.cache.Nkv; ++hk)
      for (std::size_t i0 = 0; i0 < sq.q_len; i0 += kGoldenRowBlock) {
        const std::size_t i1 = std::min(sq.q_len, i0 + kGoldenRowBlock);
        parts.push_back({s, hk, i0, i1, sq.ctx_len - (sq.q_len - i1)});
      }
  }
  // The longest parts first, so that the threads' last parts are short ones (the bits do not depend on the
  // order: each part writes its own golden).
  std::stable_sort(parts.begin(), parts.end(), [](const GoldenPart& a, const GoldenPart& b) {
    return (a.i1 - a.i0) * a.keys > (b.i1 - b.i0) * b.keys;
  });
  return parts;
}

}  // namespace

Golden unified_golden(const PagedBatch& pb, const GoldenOptions& opt) {
  validate(pb);
  keep_freed_memory();  // the parts' buffers and scratch (megabytes) reused, not mapped anew per part
  const PagedCache& c = pb.cache;
  const std::size_t G = pb.q.shape.N / c.Nkv, D = c.D;
  Golden g;
  g.o = Tensor(pb.q.shape, format_by_name("fp64"));
  g.lse.assign(pb.q.shape.N * pb.q.shape.S, 0.0);
  g.guaranteed_bits = 1000;
  // Each sequence's golden is that of its dense causal inputs (gathered_inputs), computed in parts of one
  // KV head and up to kGoldenRowBlock new tokens (golden_parts, one group per sequence): a decode step has
  // B·Nkv parts, all on the threads at once, each reading its KV head's keys from the cache a tile at a
  // time (no gathered sequence of hundreds of MB, no barrier between sequences). The cache holds floats,
  // so no |k| or |v| exceeds FLT_MAX. The bits are those of golden_attention on each sequence.
  const std::vector<GoldenPart> parts = golden_parts_of(pb);
  std::vector<std::size_t> group(parts.size());
  for (std::size_t p = 0; p < parts.size(); ++p) group[p] = parts[p].s;
  std::vector<std::size_t> first(pb.seqs.size() + 1, 0);  // each sequence's first new token in Q
  for (std::size_t s = 0; s < pb.seqs.size(); ++s) first[s + 1] = first[s] + pb.seqs[s].q_len;
  auto fill = [&](std::size_t p, AttentionInputs& in) {
    const GoldenPart& t = parts[p];
    const std::size_t rows = t.i1 - t.i0, off = first[t.s] + t.i0;
    reshape(in.q, G, rows, D, pb.q.format);
    for (std::size_t h = 0; h < G; ++h) std::copy_n(pb.q.head(0, t.hk * G + h) + off * D, rows * D, in.q.head(0, h));
    in.k.shape = in.v.shape = Shape{1, 1, t.keys, D};  // (values: kv_rows)
    in.k.format = in.v.format = c.format;
    in.scale = pb.scale;
    in.mask.causal = true;
  };
  // Keys [j0, j0 + n) of a part straight from the cache blocks, a run within one block at a time.
  auto kv_rows = [&](std::size_t p, bool values, std::size_t j0, std::size_t n, double* out) {
    const GoldenPart& t = parts[p];
    const float* cache = (values ? c.v : c.k).data();
    for (std::size_t j = j0; j < j0 + n;) {
      const std::size_t run = std::min(c.block_size - j % c.block_size, j0 + n - j);
      const float* src = cache + cache_row(pb, t.s, t.hk, j);
      if (!all_finite(src, run * D)) throw NonFiniteTile{};
      std::copy_n(src, run * D, out + (j - j0) * D);
      j += run;
    }
  };
  std::vector<Golden> gs;
  try {
    gs = golden_parts(parts.size(), group, fill, kv_rows, std::numeric_limits<float>::max(), opt);
  } catch (const NonFiniteTile&) {  // name the first non-finite value in cache order (that of gather)
    for (std::size_t s = 0; s < pb.seqs.size(); ++s)
      for (std::size_t h = 0; h < c.Nkv; ++h)
        for (std::size_t j = 0; j < pb.seqs[s].ctx_len; ++j) check_finite(pb, s, h, j);
    throw InputError("unified golden: a K/V row held a non-finite value");  // (not reached)
  }
  parallel_for(parts.size(), opt.threads, [&](std::size_t p) {  // (disjoint rows of the output)
    const GoldenPart& t = parts[p];
    const std::size_t rows = t.i1 - t.i0, off = first[t.s] + t.i0, T = pb.q.shape.S;
    for (std::size_t h = 0; h < G; ++h) {
      std::copy_n(gs[p].o.head(0, h), rows * D, g.o.head(0, t.hk * G + h) + off * D);
      std::copy_n(gs[p].lse.data() + h * rows, rows, g.lse.data() + (t.hk * G + h) * T + off);
    }
  });
  for (const Golden& x : gs) {
    g.guaranteed_bits = std::min(g.guaranteed_bits, x.guaranteed_bits);
    g.error_bound = std::max(g.error_bound, x.error_bound);
    g.used_mpfr = g.used_mpfr || x.used_mpfr;
  }
  return g;
}

PagedBatch generate_paged(const ProblemSpec& p, int threads) {
  validate(p);
  if (!p.paged) throw InputError("/kind: not a paged problem");
  const PagedLayout l = resolved(*p.paged, p.seed);
  const Format f = format_by_name(p.format);
  PagedBatch pb;
  pb.q = generate_tensor(p.q, {1, p.Nq, l.tokens(), p.D}, f, p.seed, "q", threads);
  PagedCache& c = pb.cache;
  c.num_blocks = l.num_blocks;
  c.block_size = l.block_size;
  c.Nkv = p.Nkv;
  c.D = p.D;
  c.format = f;
  c.k.resize(c.num_blocks * c.Nkv * c.block_size * c.D);  // (unset: written below, page by page)
  c.v.resize(c.k.size());
  const std::size_t n = c.block_size * c.D;
  parallel_for(c.num_blocks * c.Nkv, threads, [&](std::size_t w) {
    thread_local std::vector<double> head;  // one (block_size, D) matrix; its values are exact in f (<= fp32)
    head.resize(n);
    for (const char* name : {"k", "v"}) {
      generate_head(name[0] == 'k' ? p.k : p.v, w / c.Nkv, w % c.Nkv, c.block_size, c.D, f, p.seed, name, head.data());
      std::copy_n(head.data(), n, (name[0] == 'k' ? c.k : c.v).data() + w * n);
    }
  });
  for (const PagedSequenceSpec& s : l.seqs) pb.seqs.push_back({s.q_len, s.ctx_len, s.shared_blocks, s.block_table});
  pb.scale = p.scale;
  validate(pb);
  return pb;
}

Tensor unified_baseline(const PagedBatch& pb, int threads) {
  validate(pb);
  Tensor out(pb.q.shape, format_by_name("fp64"));
  std::vector<double> lse(pb.q.shape.N * pb.q.shape.S), none;
  AttentionInputs in;
  for (std::size_t s = 0; s < pb.seqs.size(); ++s) {
    gathered_inputs(pb, s, in, threads);
    const Tensor b = uniform_baseline(in, threads);
    none.assign(b.shape.N * b.shape.S, 0.0);
    scatter(b, none, q_offset(pb, s), out, lse);
  }
  return out;
}

ScoreStats unified_score_stats(const PagedBatch& pb, const Format& score_format, int threads) {
  validate(pb);
  ScoreStats all;
  AttentionInputs in;
  for (std::size_t s = 0; s < pb.seqs.size(); ++s) {
    gathered_inputs(pb, s, in, threads);
    const ScoreStats st = score_stats(in, score_format, threads);
    if (s == 0) {
      all = st;
      continue;
    }
    if (st.entries == 0) continue;
    if (all.entries == 0) {
      all.min = st.min, all.max = st.max, all.min_unscaled = st.min_unscaled, all.max_unscaled = st.max_unscaled;
    } else {
      all.min = std::min(all.min, st.min), all.max = std::max(all.max, st.max);
      all.min_unscaled = std::min(all.min_unscaled, st.min_unscaled);
      all.max_unscaled = std::max(all.max_unscaled, st.max_unscaled);
    }
    all.entries += st.entries;
    all.over_max += st.over_max;
    all.overflow += st.overflow;
    all.over_max_scaled += st.over_max_scaled;
    all.overflow_scaled += st.overflow_scaled;
  }
  return all;
}

std::size_t unified_golden_bytes(std::size_t Nq, std::size_t Nkv, std::size_t D, std::size_t sequences, std::size_t max_q,
                                 std::size_t max_ctx, std::size_t tokens, const GoldenOptions& go) {
  // Per thread one part: its K and V (one KV head, as doubles), its Q rows and golden_bytes of the part on one
  // thread; then the parts' goldens and the batch's (O and lse each).
  const std::size_t G = Nkv == 0 ? 1 : Nq / Nkv, rows = std::min(max_q, kGoldenRowBlock);
  GoldenOptions one = go;
  one.threads = 1;
  const std::size_t part = sat_add(sat_mul(sizeof(double), sat_add(sat_product(2, max_ctx, D), sat_product(G, rows, D))),
                                   golden_bytes({1, G, rows, D}, {1, 1, max_ctx, D}, one));
  const std::size_t parts = sat_product(sequences, Nkv, (max_q + kGoldenRowBlock - 1) / kGoldenRowBlock);
  const std::size_t threads = std::min<std::size_t>(static_cast<std::size_t>(std::max(1, go.threads)), std::max<std::size_t>(1, parts));
  const std::size_t out = sat_mul(sizeof(double), sat_product(Nq, tokens, sat_add(D, 1)));
  return sat_add(sat_mul(threads, part), sat_mul(2, out));
}

std::size_t unified_memory_bytes(const ProblemSpec& p, const std::vector<AlgorithmSpec>& algs, const GoldenOptions& go) {
  constexpr std::size_t kProcessBase = std::size_t{12} << 20;  // as case_memory_bytes (study/sweep.hpp)
  const PagedLayout& l = *p.paged;
  const std::size_t max_q = std::max<std::size_t>(1, l.max_q_len()), max_ctx = std::max<std::size_t>(1, l.max_ctx_len());
  const Shape q{1, p.Nq, max_q, p.D}, kv{1, p.Nkv, max_ctx, p.D};
  const Format f = format_by_name(p.format);
  // A gathered sequence (K and V as doubles, its Q) and the batch's output (O and lse).
  const std::size_t gathered = sat_add(sat_mul(2 * sizeof(double), sat_product(p.Nkv, max_ctx, p.D)),
                                       sat_mul(sizeof(double), sat_product(p.Nq, max_q, p.D)));
  const std::size_t out = sat_mul(sizeof(double), sat_product(p.Nq, l.tokens(), sat_add(p.D, 1)));
  std::size_t algo = 0;
  for (const auto& a : algs) algo = std::max(algo, attention_bytes(q, kv, f, a, go.threads));
  const std::size_t golden = unified_golden_bytes(p.Nq, p.Nkv, p.D, l.seqs.size(), max_q, max_ctx, l.tokens(), go);
  const std::size_t kernel = sat_add(sat_add(algo, gathered), out);  // (its sequences' outputs, then the batch's)
  // The kernels one after the other, each one's output kept until the metrics; then the golden (its output
  // counted in `golden`) and the baseline (a gathered sequence at a time, the golden's output alive). The
  // order does not change the peak (pasa-attn and sweeps run the kernels first, pasa-attribute the golden).
  const std::size_t n = std::max<std::size_t>(1, algs.size());
  const std::size_t peak = std::max(sat_add(sat_mul(out, n - 1), kernel),
                                    sat_add(sat_mul(out, n), std::max(golden, sat_add(sat_mul(2, out), gathered))));
  return sat_add(kProcessBase, sat_add(inputs_bytes(p), peak));
}

}  // namespace pasa
