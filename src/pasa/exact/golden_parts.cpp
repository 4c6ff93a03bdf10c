// golden_parts (golden.hpp): the goldens of many small problems side by side, each part on one thread,
// streamed a tile of keys at a time where the fast-path test passes for any K and V within kv_bound.
#include <algorithm>
#include <functional>
#include <memory>

#include <fmt/format.h>
#include <mpfr.h>

#include "pasa/core/assert.hpp"
#include "pasa/core/error.hpp"
#include "pasa/core/memory.hpp"
#include "pasa/exact/golden_internal.hpp"

namespace pasa {

using namespace golden_detail;
using namespace exact_scores;

namespace {

// A part's K and V through golden_parts' kv_rows, a tile at a time into two buffers of kKeyTile rows.
class PartKv final : public KvTiles {
 public:
  PartKv(const GoldenRows& rows, std::size_t part, double* kbuf, double* vbuf)
      : rows_(rows), part_(part), kbuf_(kbuf), vbuf_(vbuf) {}
  const double* keys(std::size_t j0, std::size_t n) override {
    PASA_ASSERT(n <= kKeyTile);
    rows_(part_, false, j0, n, kbuf_);
    return kbuf_;
  }
  const double* values(std::size_t j0, std::size_t n) override {
    PASA_ASSERT(n <= kKeyTile);
    rows_(part_, true, j0, n, vbuf_);
    return vbuf_;
  }
  bool whole() const override { return false; }

 private:
  const GoldenRows& rows_;
  std::size_t part_;
  double *kbuf_, *vbuf_;
};

// The fast path of a part (B = 1, one KV head, one block of rows), its keys and values read a tile at a
// time (fast_rows with a build: the same bits as golden_finite's). False where golden_finite would not keep
// it (its fast-path test fails, or a head's rows have a bound below kMinFastBits bits): the caller then
// computes the part from its gathered K and V. Only called where the test passes with every |k| and |v| at
// their bound, so that no value can leave the double range here.
bool streamed_part(const AttentionInputs& in, const GoldenOptions& opt, ScratchPool& spare, KvTiles& kv, Golden& g,
                   FastCheck& check) {
  const Shape& qs = in.q.shape;
  const std::size_t G = qs.N, Sq = qs.S, Skv = in.k.shape.S, D = qs.D;
  g.o = Tensor(qs, format_by_name("fp64"));
  g.lse.assign(G * Sq, 0.0);
  Problem P{in, opt, g, scale_dd(in), 0};
  const std::size_t group_rows = std::min(kGroup, (G * std::min(Sq, kRowBlock) + kRows - 1) / kRows * kRows);
  std::vector<RowRef> rows;
  for (std::size_t h = 0; h < G; ++h)
    for (std::size_t i = 0; i < Sq; ++i) rows.push_back({h, i});
  std::vector<double> bound(rows.size(), 0.0);
  KeyInfo kg(Skv);
  double max_v = 0;
  std::unique_ptr<Scratch> scratch = spare.take(Skv, D, group_rows);
  for (std::size_t c = 0; c < rows.size(); c += group_rows)  // (the first call builds kg and finds max |V|)
    fast_rows(P, 0, rows.data() + c, std::min(group_rows, rows.size() - c), kg, *scratch, bound.data() + c, kv,
              c == 0 ? &kg : nullptr, c == 0 ? &max_v : nullptr);
  spare.give(std::move(scratch));
  mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE);  // (lse_from_dd's constants; see golden_finite_in)
  check = fast_check(in, kg.max_abs, max_v);
  if (!check.safe()) return false;
  g.guaranteed_bits = 1000;
  for (std::size_t h = 0; h < G; ++h) {  // golden_finite_in's BlockResult of each (head, block)
    BlockResult r;
    for (std::size_t i = 0; i < Sq; ++i) {
      const double E = bound[h * Sq + i];
      if (E < 0) continue;  // fully masked row
      r.bound = std::max(r.bound, E);
      r.bits = std::min(r.bits, bits_of(E));
    }
    if (r.bits < kMinFastBits) return false;
    g.guaranteed_bits = std::min(g.guaranteed_bits, r.bits);
    g.error_bound = std::max(g.error_bound, r.bound);
  }
  return true;
}

}  // namespace

std::vector<Golden> golden_parts(std::size_t parts, const std::vector<std::size_t>& group,
                                 const std::function<void(std::size_t, AttentionInputs&)>& fill, const GoldenRows& kv_rows,
                                 double kv_bound, const GoldenOptions& opt) {
  check_precision(opt);
  if (group.size() != parts)
    throw InputError(fmt::format("golden_parts: {} group entries for {} parts", group.size(), parts));
  std::vector<Golden> out(parts);
  std::vector<FastCheck> checks(parts);
  ScratchPool spare;  // shared by all parts: at most one Scratch per thread
  struct Buffers {    // a thread's, reused by its next part
    AttentionInputs in;
    std::vector<double> kt, vt;  // key tiles of the streamed path
  };
  Spares<Buffers> spare_buffers;
  auto compute = [&](std::size_t p, const GoldenOptions& o) {
    std::unique_ptr<Buffers> buf = spare_buffers.take();
    AttentionInputs& in = buf->in;
    fill(p, in);
    const Shape &qs = in.q.shape, &ks = in.k.shape;
    PASA_ASSERT(qs.B == 1 && ks.B == 1 && ks.N == 1 && ks.D == qs.D && in.v.shape == ks);
    // The streamed path where the fast-path test passes whatever K and V hold (|k|, |v| <= kv_bound).
    bool done = false;
    if (o.fast && qs.S <= kRowBlock && fast_check(in, kv_bound, kv_bound).safe()) {
      buf->kt.resize(kKeyTile * qs.D);
      buf->vt.resize(kKeyTile * qs.D);
      PartKv kv(kv_rows, p, buf->kt.data(), buf->vt.data());
      done = streamed_part(in, o, spare, kv, out[p], checks[p]);
    }
    if (!done) {  // K and V gathered whole, then golden_finite's way (its MPFR fallback per head)
      in.k.data.resize(ks.size());
      in.v.data.resize(ks.size());
      kv_rows(p, false, 0, ks.S, in.k.data.data());
      kv_rows(p, true, 0, ks.S, in.v.data.data());
      in.allow_nonfinite = true;  // (shapes, masks and bias checked; Q, K and V finite by contract: no pass over them)
      validate(in, 1);
      in.allow_nonfinite = false;
      out[p] = golden_finite_in(in, o, spare, &checks[p]);
    }
    spare_buffers.give(std::move(buf));
  };
  GoldenOptions one = opt;
  one.threads = 1;
  parallel_for(parts, opt.threads, [&](std::size_t p) { compute(p, one); });
  if (!opt.fast) return out;
  // A group whose union fails the fast-path test is computed with MPFR throughout, as golden_attention of the
  // union would: its parts that passed the test alone are redone so (the others already were).
  std::vector<std::size_t> ids(group);
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  std::vector<FastCheck> unions(ids.size());
  auto slot = [&](std::size_t p) { return static_cast<std::size_t>(std::lower_bound(ids.begin(), ids.end(), group[p]) - ids.begin()); };
  for (std::size_t p = 0; p < parts; ++p) unions[slot(p)].merge(checks[p]);
  std::vector<std::size_t> redo;
  for (std::size_t p = 0; p < parts; ++p)
    if (checks[p].safe() && !unions[slot(p)].safe()) redo.push_back(p);
  GoldenOptions plain = one;
  plain.fast = false;
  parallel_for(redo.size(), opt.threads, [&](std::size_t i) { compute(redo[i], plain); });
  return out;
}

}  // namespace pasa
