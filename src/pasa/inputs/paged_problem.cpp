#include "pasa/inputs/paged_problem.hpp"

#include <algorithm>
#include <numeric>

#include <boost/random/mersenne_twister.hpp>
#include <boost/random/uniform_int_distribution.hpp>
#include <fmt/format.h>

#include "pasa/core/error.hpp"
#include "pasa/core/memory.hpp"
#include "pasa/inputs/generators.hpp"

namespace pasa {

std::size_t PagedLayout::tokens() const {
  std::size_t n = 0;
  for (const auto& s : seqs) n = sat_add(n, s.q_len);
  return n;
}

std::size_t PagedLayout::max_q_len() const {
  std::size_t n = 0;
  for (const auto& s : seqs) n = std::max(n, s.q_len);
  return n;
}

std::size_t PagedLayout::max_ctx_len() const {
  std::size_t n = 0;
  for (const auto& s : seqs) n = std::max(n, s.ctx_len);
  return n;
}

std::size_t PagedLayout::blocks_of(std::size_t s) const {
  return block_size == 0 ? 0 : seqs[s].ctx_len / block_size + (seqs[s].ctx_len % block_size != 0);
}

namespace {

// Cache blocks a generated table hands out: every logical block but the shared ones of a sharing sequence.
std::size_t fresh_blocks(const PagedLayout& l) {
  std::size_t n = 0;
  for (std::size_t s = 0; s < l.seqs.size(); ++s)
    n = sat_add(n, l.blocks_of(s) - (l.seqs[s].share_from ? l.seqs[s].shared_blocks : 0));
  return n;
}

std::size_t needed_blocks(const PagedLayout& l) {
  if (!l.given_tables()) return fresh_blocks(l);
  std::size_t n = 0;
  for (const auto& s : l.seqs)
    for (std::size_t b : s.block_table) n = std::max(n, b + 1);
  return n;
}

}  // namespace

void validate(const PagedLayout& l, std::size_t Nkv, std::size_t D) {
  if (l.block_size == 0) throw InputError("/block_size: must be >= 1");
  if (l.seqs.empty()) throw InputError("/sequences: a paged problem needs at least one sequence");
  const bool given = l.given_tables();
  for (std::size_t s = 0; s < l.seqs.size(); ++s) {
    const PagedSequenceSpec& q = l.seqs[s];
    const std::string at = fmt::format("/sequences/{}", s);
    if (q.ctx_len == 0) throw InputError(at + "/ctx_len: must be >= 1");
    if (q.q_len == 0 || q.q_len > q.ctx_len)
      throw InputError(fmt::format("{}/q_len: q_len = {} must be in [1, ctx_len = {}] (the new tokens end the context)",
                                   at, q.q_len, q.ctx_len));
    if (q.shared_blocks > (q.ctx_len - q.q_len) / l.block_size)
      throw InputError(fmt::format("{}/shared_blocks: {} blocks of {} tokens reach past the cached context ({} tokens "
                                   "before the new ones)", at, q.shared_blocks, l.block_size, q.ctx_len - q.q_len));
    if (q.share_from) {
      const std::size_t r = *q.share_from;
      if (given)
        throw InputError(at + "/share_from: with given block tables the tables say which blocks are shared; remove it");
      if (q.shared_blocks == 0) throw InputError(at + "/share_from: shares nothing without shared_blocks >= 1");
      if (r >= s)
        throw InputError(fmt::format("{}/share_from: {} is not an earlier sequence (0 to {})", at, r,
                                     s == 0 ? std::string("none") : std::to_string(s - 1)));
      if (l.seqs[r].ctx_len / l.block_size < q.shared_blocks)
        throw InputError(fmt::format("{}/share_from: sequence {} holds {} full blocks of {} tokens, fewer than the {} "
                                     "shared ones", at, r, l.seqs[r].ctx_len / l.block_size, l.block_size,
                                     q.shared_blocks));
    }
    if (given != !q.block_table.empty())
      throw InputError(fmt::format("{}/block_table: give a block table for every sequence or for none (generated)", at));
    if (given && q.block_table.size() != l.blocks_of(s))
      throw InputError(fmt::format("{}/block_table: {} entries, ctx_len = {} in blocks of {} tokens needs {}", at,
                                   q.block_table.size(), q.ctx_len, l.block_size, l.blocks_of(s)));
    if (given && l.num_blocks > 0)
      for (std::size_t t = 0; t < q.block_table.size(); ++t)
        if (q.block_table[t] >= l.num_blocks)
          throw InputError(fmt::format("{}/block_table/{}: cache block {} is outside the cache (num_blocks = {})", at, t,
                                       q.block_table[t], l.num_blocks));
  }
  if (!given && l.num_blocks > 0 && l.num_blocks < fresh_blocks(l))
    throw InputError(fmt::format("/num_blocks: {} cache blocks, the sequences need {}", l.num_blocks, fresh_blocks(l)));
  const std::size_t blocks = std::max(l.num_blocks, needed_blocks(l));
  if (sat_product(blocks, Nkv, l.block_size, D) >= kTooLarge / 8 || l.tokens() >= kTooLarge / 8)
    throw InputError(fmt::format("/num_blocks: a cache of {} blocks of {} tokens (Nkv {}, D {}): its element count "
                                 "overflows", blocks, l.block_size, Nkv, D));
}

PagedLayout resolved(const PagedLayout& l, std::uint64_t seed) {
  PagedLayout r = l;
  r.num_blocks = std::max(l.num_blocks, needed_blocks(l));
  if (l.given_tables()) return r;
  std::vector<std::size_t> perm(r.num_blocks);
  std::iota(perm.begin(), perm.end(), std::size_t{0});
  boost::random::mt19937_64 eng(stream_seed(seed, "block_table", 0, 0));
  for (std::size_t i = perm.size(); i > 1; --i) {  // Fisher–Yates
    boost::random::uniform_int_distribution<std::size_t> pick(0, i - 1);
    std::swap(perm[i - 1], perm[pick(eng)]);
  }
  std::size_t next = 0;
  for (std::size_t s = 0; s < r.seqs.size(); ++s) {
    PagedSequenceSpec& q = r.seqs[s];
    q.block_table.clear();
    for (std::size_t t = 0; t < r.blocks_of(s); ++t)
      q.block_table.push_back(q.share_from && t < q.shared_blocks ? r.seqs[*q.share_from].block_table[t] : perm[next++]);
  }
  return r;
}

}  // namespace pasa
