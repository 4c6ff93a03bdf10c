// The fused float path of the blocked engines (fa2, pasa; the algorithms reach it through FusedTileOps in
// tile_ops.hpp, whose contract is the equality below): one tile's softmax stages on floats, the tile
// held transposed (keys as rows, the item's rows as columns: T[c·ld + r]) so that every per-row step (the
// running max, the row sums in any reduction order, the shift by the row's max) is a vertical step over 16
// rows of a vector register, and the scores and P·V come from the fp32-accumulate GEMM kernel without a
// round trip through doubles. Taken when a run's descriptors allow it (fused_tiles, decided once per run);
// every step gives the bits of the general path (blocked_attention.hpp) by construction:
// - a stage of "fp32" kind (plain RNE fp32) rounds by a float operation or a double → float conversion
//   (IEEE 754 §4.3, §5.4.2: the correctly rounded result); float products and sums of floats are
//   the exact result rounded once, as two_prod / two_sum + sticky_fold + conversion are;
// - a stage of "narrow" kind (a format of p <= 22 bits whose values and rounding points are floats, any
//   deterministic mode) rounds the exact result to odd at float's 24 bits (ro_float after sticky_fold) and
//   then with round_span(float): every point where a rounding to such a format changes has at most
//   p + 1 <= 23 bits, so the round-to-odd value lies on the same side of each as the exact result
//   [Boldo & Melquiond 2008] — the argument of sticky_fold, at 24 bits instead of 53;
// - the exp is exp_one in double, as in exp_to_stage; the reductions are reduce_columns on the same terms.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "pasa/attention/detail/blocked_attention.hpp"
#include "pasa/attention/detail/gemm_tensor_core.hpp"

namespace pasa::detail {

// Whether fa2 or pasa (`pasa`) runs its tiles on the fused path: float GEMMs with an ordered fp32
// accumulator and float outputs (gemm_output_in_floats), an exp stage evaluated in double (via exact) of at
// most 24 bits, a scale stage and a deterministic p stage that floats hold, no scales, bias, select mask,
// p_offset or paged K/V. The o, sum, mean and max stages may be anything (their general routines take over
// where a stage is neither fp32 nor narrow). Call after pasa_prepare (it sets the keys' format).
bool fused_tiles(const Run& run);

// Per-thread work buffers of the fused path (every tile writes them before it reads them).
struct FusedBuffers {
  std::size_t rows = 0;          // the item's rows
  std::size_t w = 0;             // rows rounded up to 16 (one vector of floats): the width of the tile's loops
                                 // (the padding lanes compute on zero scores, never read back)
  std::size_t ld = 0;            // the row stride of t (w, or w + 16; see fused_begin_item)
  std::vector<float> qpanels;    // the item's Q rows as panels of Qᵀ (D × rows), see sgemm_pack_panels
  std::vector<float> t;          // n × ld: scores, then e^…, then P
  std::vector<float> pv;         // rows × D: P·V rounded to pv
  std::vector<float> tmp;        // rows × D
  std::vector<float> lanes;      // the row sums' lanes (k × ld)
  bool p_done = false;           // t holds P (rounded to p) already
  std::vector<float> shiftf;     // ld: the same as floats (when they are)
  std::vector<double> shift;     // ld: the shift of the exp argument (−inf read as 0)
  std::vector<double> wide;      // a double copy for the general routines
  std::vector<std::uint8_t> vis; // rows × n visibility (masked runs)
  // The tensor-core model's GEMMs on its register strips (tc_strips; see tc_scores and fused_pv): the item's
  // Q rows packed once (at its first key block; tc_q.m = 0 until then), P per tile, and the K and V blocks
  // of one (batch, kv head) packed once for all the items of that head a thread takes in a row (every Q
  // block of a head multiplies the same blocks): keyed by the run's serial and the head, a block packed
  // where its n is not 0.
  bool tc_qk = false, tc_pv = false;
  TcPackedA tc_q, tc_p;
  std::uint64_t tc_run = 0;
  std::size_t tc_head = 0;
  std::vector<TcPackedB> tc_k, tc_v;
};
FusedBuffers& fused_buffers();

// Packs the item's Q rows (once per item).
void fused_begin_item(const Run& run, const Item& it, FusedBuffers& ft);
// t = Sᵀ for keys [j0, j0 + n): the QKᵀ GEMM rounded to s, then (scale) rounded to the scale stage.
void fused_scores(const Run& run, const Item& it, std::size_t j0, std::size_t n, bool scale, FusedBuffers& ft);
// Masked entries (ft.vis == 0) become −inf.
void fused_mask(FusedBuffers& ft, std::size_t n);
// mloc[r] = the largest value of row r ignoring NaN (row_max).
void fused_row_max(const FusedBuffers& ft, std::size_t n, double* mloc);
// t = round_exp(exp(round_exp(t − shift_r))), shift_r = −inf read as 0 (tile_exp); where it can (see the
// .cpp), also the row sums of the sum stage into rowsum (true; false: rowsum untouched) and t rounded to p
// (ft.p_done).
bool fused_exp(const Run& run, FusedBuffers& ft, std::size_t n, const double* shift, double* rowsum, RandomBits* rng);
// fused_exp, and the row sums of the sum stage (fused_reduce) where it did not take them.
void fused_exp_sum(const Run& run, FusedBuffers& ft, std::size_t n, const double* shift, double* rowsum, RandomBits* rng);
// reduce_rows of the tile's rows (t as the terms).
// terms: the format the tile's values belong to (an fp16 accumulator on fp16 terms reduces in float registers).
void fused_reduce(const Run& run, Stage s, ReduceOp op, const Format& terms, FusedBuffers& ft, std::size_t n, double* out,
                  RandomBits* rng);
// t rounded to p (unless ft.p_done), then pv = P·V[j0 : j0 + n] rounded to pv (tile_pv).
void fused_pv(const Run& run, const Item& it, std::size_t j0, std::size_t n, FusedBuffers& ft);
// O = round_o(round_o(alpha[r]·O) + pv) (rescale_add of stage o with the tile's pv).
void fused_rescale_add(const Run& run, double* O, const double* alpha, FusedBuffers& ft, RandomBits* rng);

// PASA's pre-processing K' = M·K_j (pasa_prepare) for every key block of (b, hk) straight into keys_f32: the
// same ordered fp32 GEMM as gemm(pre, …) (each entry its n products in order from +0), its output rounded to
// pre.out in floats. False (nothing written) where gemm_output_in_floats(pre) does not hold.
bool fused_shift_keys(Run& run, const GemmSpec& pre, std::size_t b, std::size_t hk, const std::vector<double>& M_full,
                      const std::vector<double>& M_tail);

}  // namespace pasa::detail
