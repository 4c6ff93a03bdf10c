// The seam between the blocked algorithms and their tile kernels. FA2's loop (flash.cpp) and PASA's
// Algorithm 1 (pasa_attention.cpp) are each written once, as templates over a TileOps: the operations on
// one tile of scores (an item's rows × the keys [j0, j0 + n)). Two implementations:
//   GeneralTileOps: the general path. The tile as doubles (rows × n, row-major); every step one rounding of
//                   its exact result (two_sum, two_prod, exact_quotient) by the routines of
//                   blocked_attention.hpp, in every format, rounding mode, GEMM model and mask.
//   FusedTileOps:   the fused float path (fused_tile.hpp). The tile as floats, transposed (keys as rows), the
//                   GEMMs on the packed fp32 kernel; only for runs with fused_tiles(run) (Run::float_tiles,
//                   decided once per run from the descriptors).
// with_tile_ops(run, it, rng, body) calls body with the one the run takes.
//
// The contract, which makes the fused path a change of speed only: for a run with fused_tiles(run), each
// operation of FusedTileOps gives the same bits as that of GeneralTileOps — the same values in every output
// (row values, l, O; NaN and signed zeros included) and the same draws from the random stream — for every
// input, so an algorithm written over TileOps gives the same bits on either. The argument, per operation
// (fused_tile.hpp states it, fused_tile.cpp carries it out step by step):
//  - a stage of fp32 kind (plain RNE fp32) rounds by one float operation or a double → float conversion:
//    the exact result rounded once (IEEE 754 §4.3, §5.4.2), as two_prod / two_sum + sticky_fold do;
//  - a narrow stage (p <= 22 bits, values and rounding points floats, a deterministic mode) rounds the exact
//    result to odd at float's 24 bits, then to the stage: every point where a rounding to the stage changes
//    has at most p + 1 <= 23 bits, so the round-to-odd value lies on the same side of each as the exact
//    result [Boldo & Melquiond 2008, round-to-odd] — sticky_fold's argument, at 24 bits instead of 53;
//  - fp16 steps done in float registers (F16C) are the exact result rounded once: 24 >= 2·11 + 2
//    [Figueroa 1995];
//  - the GEMMs are the same kernel on the same operands (an ordered fp32 accumulator: each element its
//    products in order from +0), the exp is exp_one in double, the reductions add the same terms in the
//    same order.
// Tests: test_reference_emulator (the fused runs bit for bit against an independent reference and the
// general path, the round-to-odd cases), the property harness (fused vs general on random problems).
//
// The operations, in the order an algorithm calls them for one tile:
//   open(j0, n)            the tile's visibility; false: no key of it is visible to any row (skip the tile)
//   scores(scale)          S = Q·K[j0 : j0 + n]ᵀ (qk_acc, s), then with scale: round_scale(S·scale)
//   row_mean(mean)         mean[r] = the mean stage's mean of row r over all n keys (the mask not applied)
//   visibility()           rows × n, 1 = visible (general path only, see bias_select)
//   bias_select(frame)     pse and select mask (tile_bias_select); runs with a bias never take the fused
//                          path (fused_tiles), so FusedTileOps refuses it
//   mask()                 hidden entries become −inf
//   row_max(mloc)          mloc[r] = the largest score of row r (NaN never wins; −inf when none)
//   probabilities(shift, rowsum)
//                          P = round_exp(exp(round_exp(S − shift_r))) (shift_r = −inf read as 0; tile_exp),
//                          rowsum[r] = its row sum in the sum stage, then P rounded to p
//   pv()                   PV = P·V[j0 : j0 + n] (pv_acc, pv)
//   accumulate(O, alpha)   O = round_o(round_o(alpha_r·O) + PV) (rescale_add of stage o)
//   pv_values()            PV as doubles (rows × D) that the caller may change (PASA's printed form)
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "pasa/attention/detail/blocked_attention.hpp"
#include "pasa/attention/detail/fused_tile.hpp"

namespace pasa::detail {

template <class T>
concept TileOps = requires(T t, std::size_t j, bool b, double* out, const double* in) {
  { t.rows() } -> std::same_as<std::size_t>;
  { t.open(j, j) } -> std::same_as<bool>;
  t.scores(b);
  t.row_mean(out);
  { t.visibility() } -> std::same_as<const std::uint8_t*>;
  t.bias_select(in);
  t.mask();
  t.row_max(out);
  t.probabilities(in, out);
  t.pv();
  t.accumulate(out, in);
  { t.pv_values() } -> std::same_as<double*>;
};

// The general path's per-thread work buffers (every tile writes them before it reads them: allocating and
// zeroing them for every item cost about a tenth of a run).
struct GeneralBuffers {
  std::vector<double> Z, P, PV;
  std::vector<std::uint8_t> vis;
};
inline GeneralBuffers& general_buffers() {
  thread_local GeneralBuffers b;
  return b;
}

class GeneralTileOps {
 public:
  GeneralTileOps(const Run& run, const Item& it, RandomBits* rng)
      : run_(run), it_(it), rng_(rng), rows_(it.rows()), b_(general_buffers()) {
    b_.PV.resize(rows_ * run.D);
  }
  std::size_t rows() const { return rows_; }
  bool open(std::size_t j0, std::size_t n) {
    j0_ = j0;
    n_ = n;
    return tile_visibility(run_, it_, j0, j0 + n, b_.vis);
  }
  void scores(bool scale) {
    b_.Z.resize(rows_ * n_);
    tile_scores(run_, it_, j0_, n_, b_.Z.data(), rng_);
    if (scale) tile_scale(run_, b_.Z.data(), b_.Z.size(), rng_);
  }
  void row_mean(double* mean) { reduce_rows(run_, Stage::mean, ReduceOp::mean, b_.Z.data(), rows_, n_, n_, mean, rng_); }
  const std::uint8_t* visibility() const { return b_.vis.data(); }
  void bias_select(const double* frame) { tile_bias_select(run_, it_, j0_, n_, b_.Z.data(), rng_, frame); }
  void mask() { tile_mask(b_.Z.data(), b_.vis, b_.Z.size()); }
  void row_max(double* mloc) const {
    for (std::size_t r = 0; r < rows_; ++r) mloc[r] = detail::row_max(&b_.Z[r * n_], n_);
  }
  void probabilities(const double* shift, double* rowsum) {
    b_.P.resize(rows_ * n_);
    tile_exp(run_, b_.Z.data(), rows_, n_, n_, shift, b_.P.data(), rng_);
    reduce_rows(run_, Stage::sum, ReduceOp::sum, b_.P.data(), rows_, n_, n_, rowsum, rng_);
    run_.round_p(b_.P.data(), rows_, n_, rng_);
  }
  void pv() { tile_pv(run_, it_, b_.P.data(), n_, j0_, n_, b_.PV.data(), rng_); }
  void accumulate(double* O, const double* alpha) {
    rescale_add(run_, Stage::o, O, alpha, b_.PV.data(), rows_, run_.D, rng_);
  }
  double* pv_values() { return b_.PV.data(); }

 private:
  const Run& run_;
  const Item& it_;
  RandomBits* rng_;
  std::size_t rows_, j0_ = 0, n_ = 0;
  GeneralBuffers& b_;
};

class FusedTileOps {
 public:
  FusedTileOps(const Run& run, const Item& it, RandomBits* rng)
      : run_(run), it_(it), rng_(rng), ft_(fused_buffers()) {
    fused_begin_item(run, it, ft_);
  }
  std::size_t rows() const { return ft_.rows; }
  bool open(std::size_t j0, std::size_t n) {
    j0_ = j0;
    n_ = n;
    return !run_.masked || tile_visibility(run_, it_, j0, j0 + n, ft_.vis);  // (unmasked: all visible)
  }
  void scores(bool scale) {
    scaled_ = scale;
    fused_scores(run_, it_, j0_, n_, scale, ft_);
  }
  void row_mean(double* mean) {
    const Format& terms = run_.stage(scaled_ ? Stage::scale : Stage::s).format;  // the format the scores hold
    fused_reduce(run_, Stage::mean, ReduceOp::mean, terms, ft_, n_, mean, rng_);
  }
  const std::uint8_t* visibility() const { return ft_.vis.data(); }
  [[noreturn]] void bias_select(const double*) {
    throw std::logic_error("fused tiles: a bias or select mask (fused_tiles excludes it)");
  }
  void mask() { fused_mask(ft_, n_); }
  void row_max(double* mloc) const { fused_row_max(ft_, n_, mloc); }
  void probabilities(const double* shift, double* rowsum) { fused_exp_sum(run_, ft_, n_, shift, rowsum, rng_); }
  void pv() { fused_pv(run_, it_, j0_, n_, ft_); }
  void accumulate(double* O, const double* alpha) { fused_rescale_add(run_, O, alpha, ft_, rng_); }
  double* pv_values() {
    thread_local std::vector<double> wide;
    wide.assign(ft_.pv.begin(), ft_.pv.begin() + static_cast<std::ptrdiff_t>(ft_.rows * run_.D));  // (exact)
    return wide.data();
  }

 private:
  const Run& run_;
  const Item& it_;
  RandomBits* rng_;
  std::size_t j0_ = 0, n_ = 0;
  bool scaled_ = false;
  FusedBuffers& ft_;
};

static_assert(TileOps<GeneralTileOps> && TileOps<FusedTileOps>);

// body(tiles) with the run's TileOps for the item: FusedTileOps where the run takes the fused path.
template <class Body>
void with_tile_ops(const Run& run, const Item& it, RandomBits* rng, Body&& body) {
  if (run.float_tiles) {
    FusedTileOps tiles(run, it, rng);
    body(tiles);
  } else {
    GeneralTileOps tiles(run, it, rng);
    body(tiles);
  }
}

}  // namespace pasa::detail
