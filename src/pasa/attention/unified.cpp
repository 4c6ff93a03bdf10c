#include "pasa/attention/unified.hpp"

#include <algorithm>
#include <cmath>
#include <memory>

#include <fmt/format.h>

#include "pasa/attention/detail/blocked_attention.hpp"
#include "pasa/attention/detail/flash.hpp"
#include "pasa/attention/detail/pasa_attention.hpp"
#include "pasa/attention/detail/split_kv.hpp"
#include "pasa/core/error.hpp"

namespace pasa {

void validate(const PagedBatch& pb) {
  const PagedCache& c = pb.cache;
  const Shape& q = pb.q.shape;
  if (c.block_size == 0) throw InputError("paged cache: block_size must be >= 1");
  if (c.Nkv == 0 || c.D == 0) throw InputError(fmt::format("paged cache: Nkv = {} and D = {} must be >= 1", c.Nkv, c.D));
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

// Keys [j0, j1) of sequence s gathered through the block table: (1, Nkv, j1 − j0, D).
// k and v keep their storage when they already have the shape (every element is overwritten): fresh pages
// cost more than the copy (unified_golden gathers every sequence into the same tensors).
void gather(const PagedBatch& pb, std::size_t s, std::size_t j0, std::size_t j1, Tensor& k, Tensor& v) {
  const PagedCache& c = pb.cache;
  const Shape shape{1, c.Nkv, j1 - j0, c.D};
  if (!(k.shape == shape && k.data.size() == shape.size())) k = Tensor(shape, c.format);
  if (!(v.shape == shape && v.data.size() == shape.size())) v = Tensor(shape, c.format);
  k.format = v.format = c.format;
  const PagedSequence& sq = pb.seqs[s];
  for (std::size_t h = 0; h < c.Nkv; ++h)
    for (std::size_t j = j0; j < j1; ++j) {
      const std::size_t blk = sq.block_table[j / c.block_size];
      const std::size_t src = ((blk * c.Nkv + h) * c.block_size + j % c.block_size) * c.D;
      std::copy_n(c.k.data() + src, c.D, k.head(0, h) + (j - j0) * c.D);
      std::copy_n(c.v.data() + src, c.D, v.head(0, h) + (j - j0) * c.D);
      bool finite = true;
      for (std::size_t d = 0; d < c.D; ++d) finite = finite && std::isfinite(c.k[src + d]) && std::isfinite(c.v[src + d]);
      if (!finite)
        throw InputError(fmt::format("sequence {}: token {} (cache block {}, KV head {}) has a non-finite K or V value",
                                     s, j, blk, h));
    }
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

void gathered_inputs(const PagedBatch& pb, std::size_t s, AttentionInputs& in) {  // pb validated
  in.q = sequence_q(pb, s);
  gather(pb, s, 0, pb.seqs[s].ctx_len, in.k, in.v);
  in.scale = pb.scale;
  in.mask.causal = true;
}

}  // namespace

AttentionInputs sequence_inputs(const PagedBatch& pb, std::size_t s) {
  validate(pb);
  if (s >= pb.seqs.size()) throw InputError(fmt::format("sequence {} of {}", s, pb.seqs.size()));
  AttentionInputs in;
  gathered_inputs(pb, s, in);
  return in;
}

AttentionOutput unified_attention(const PagedBatch& pb, const AlgorithmSpec& spec, int threads) {
  validate(pb);
  if (spec.name != "fa2" && spec.name != "pasa")
    throw InputError(fmt::format("unified attention: needs fa2 or pasa (an unnormalised output to merge), got \"{}\"",
                                 spec.name));
  if (spec.s1 == 0 || spec.s2 == 0 || spec.splits == 0) throw InputError("s1, s2 and splits must be at least 1");
  const bool pasa = spec.name == "pasa";
  const Shape& qs = pb.q.shape;
  AttentionOutput out;
  out.o = Tensor(qs, spec.alloc.spec(Stage::out).format);
  out.lse.assign(qs.N * qs.S, detail::kNegInf);
  std::size_t item_base = 0;  // stochastic rounding: one stream per item over the whole batch
  for (std::size_t s = 0; s < pb.seqs.size(); ++s) {
    const PagedSequence& sq = pb.seqs[s];
    const std::size_t cached = sq.ctx_len - sq.q_len, prefix = sq.shared_blocks * pb.cache.block_size;
    // The parts' key ranges: shared prefix, unique cached blocks, the new tokens (causal).
    const std::pair<std::size_t, std::size_t> ranges[] = {{0, prefix}, {prefix, cached}, {cached, sq.ctx_len}};
    std::vector<std::unique_ptr<AttentionInputs>> ins;
    std::vector<std::unique_ptr<detail::Run>> runs;
    for (const auto& [j0, j1] : ranges) {
      if (j0 == j1) continue;
      auto in = std::make_unique<AttentionInputs>();
      in->q = sequence_q(pb, s);
      gather(pb, s, j0, j1, in->k, in->v);
      in->scale = pb.scale;
      in->mask.causal = j1 == sq.ctx_len;  // new token i sees new tokens 0..i (Sq = Skv = q_len)
      in->allow_nonfinite = true;  // Q checked by validate(pb), K and V by gather: no second scan
      validate(*in);
      runs.push_back(std::make_unique<detail::Run>(*in, spec));
      if (pasa) detail::pasa_prepare(*runs.back(), threads);
      ins.push_back(std::move(in));
    }
    const detail::Run& run0 = *runs.front();
    AttentionOutput part_out;
    part_out.o = Tensor(run0.in.q.shape, run0.stage(Stage::out).format);
    part_out.lse.assign(qs.N * sq.q_len, detail::kNegInf);
    const std::vector<detail::Item> items = detail::make_items(run0);
    parallel_for(items.size(), threads, [&](std::size_t i) {
      const detail::Item& it = items[i];
      RandomBits rng = detail::item_stream(spec, item_base + i);
      const double m0 = pasa ? detail::pasa_m0(run0) : detail::kNegInf;
      std::vector<detail::Partial> parts;
      double inva = 0;
      for (const auto& run : runs) {
        parts.emplace_back(it.rows(), run0.D, m0);
        if (pasa) inva = detail::pasa_item(*run, it, parts.back(), &rng);
        else detail::fa2_item(*run, it, parts.back(), &rng);
      }
      detail::Partial st = parts.front();
      if (parts.size() > 1) detail::merge_partials(run0, parts, pasa, inva, st, &rng);
      if (pasa) detail::pasa_finish(run0, it, st, inva, part_out, &rng);
      else detail::finish_rows(run0, it, st.O, st.l, st.m, st.seen, true, nullptr, part_out, &rng);
    });
    item_base += items.size();
    scatter(part_out.o, part_out.lse, q_offset(pb, s), out.o, out.lse);
  }
  return out;
}

Golden unified_golden(const PagedBatch& pb, const GoldenOptions& opt) {
  validate(pb);
  Golden g;
  g.o = Tensor(pb.q.shape, format_by_name("fp64"));
  g.lse.assign(pb.q.shape.N * pb.q.shape.S, 0.0);
  g.guaranteed_bits = 1000;
  AttentionInputs in;  // one buffer for every sequence's gathered K and V
  for (std::size_t s = 0; s < pb.seqs.size(); ++s) {
    gathered_inputs(pb, s, in);
    const Golden gs = golden_attention(in, opt);
    scatter(gs.o, gs.lse, q_offset(pb, s), g.o, g.lse);
    g.guaranteed_bits = std::min(g.guaranteed_bits, gs.guaranteed_bits);
    g.error_bound = std::max(g.error_bound, gs.error_bound);
    g.used_mpfr = g.used_mpfr || gs.used_mpfr;
  }
  return g;
}

}  // namespace pasa
