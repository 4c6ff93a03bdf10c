// Machinery shared by the blocked attention algorithms (internal to the library): the allocation bound to
// rounding kernels, the inputs converted to their engine formats, the two GEMMs of one tile, masks, and
// row-wise reductions under a stage's Reduction. Every elementwise operation and every addition of a reduction
// forms its exact result as hi + lo (two_sum, two_prod, exact_quotient) and rounds it once to its stage (or
// accumulator) format, in every rounding mode (see gemm.hpp for the GEMMs).
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "pasa/attention/algorithm_spec.hpp"
#include "pasa/inputs/attention_inputs.hpp"
#include "pasa/attention/gemm.hpp"
#include "pasa/numeric/double_double.hpp"
#include "pasa/core/assert.hpp"
#include "pasa/core/memory.hpp"
#include "pasa/core/parallel.hpp"

namespace pasa::detail {

inline constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// K and V read in place from a store other than the inputs' dense tensors (a paged KV cache, [UA]; see
// attention/unified.cpp): the tile of keys [j0, j0 + n) of (batch b, KV head hk) staged as a kernel loads
// it into shared memory, the keys transposed (D × n, row stride n, as keys_t holds them) and the values
// (n × D), as floats holding exact values of the run's k and v formats. The pointers stay valid until the
// next call of the same function on the same thread.
struct KvTiles {
  virtual ~KvTiles() = default;
  virtual const float* keys_t(std::size_t b, std::size_t hk, std::size_t j0, std::size_t n) const = 0;
  virtual const float* values(std::size_t b, std::size_t hk, std::size_t j0, std::size_t n) const = 0;
};

// One run's fixed data. The algorithm fills keys_t (the keys the QKᵀ GEMM sees, transposed per (batch, kv head))
// when it pre-processes K (pasa, smooth_k); otherwise it holds the rounded K.
struct Run {
  const AttentionInputs& in;
  const AlgorithmSpec& spec;
  Allocation alloc;           // spec.alloc after PASA's bf16 → fp16 mapping

 private:
  // round_each and round_acc_each for a format f: hi where f is native fp64; for p <= 51 and a deterministic
  // mode the sticky fold then round_span (the stage's or the accumulator's vectorised kernels); else round_sum.
  template <class Exact, class RoundSpan>
  static void round_each_in(bool native, const Format& f, const RoundOptions& o, double* x, std::size_t n,
                            RandomBits* rng, Exact& exact, RoundSpan&& round_span) {
    if (native) {
      for (std::size_t i = 0; i < n; ++i) x[i] = exact(i).hi;
      return;
    }
    if (sticky_fold_rounds_once(f, o)) {
      for (std::size_t i = 0; i < n; ++i) {
        const DD e = exact(i);
        x[i] = sticky_fold(e.hi, e.lo);
      }
      round_span();
      return;
    }
    for (std::size_t i = 0; i < n; ++i) {
      const DD e = exact(i);
      x[i] = round_sum(e.hi, e.lo, f, o, rng);
    }
  }

  int setup_threads_ = 1;     // threads for the set-up loops (first, as the inputs' rounding uses it)
  RandomBits setup_rng_;      // stochastic rounding of the inputs and the scale, in tensor order
  // [FA3, §3.3] the fp32 scales of the quantisation groups (QuantOptions): per (batch, head) the groups of
  // s1 (Q) or s2 (K, V) rows in order; empty without scales
  std::vector<double> q_scale_, k_scale_, v_scale_;
  Tensor k_pre_;  // the keys after the transform, before quantisation (QuantOptions::shift_first only)
  Tensor q_own_, k_own_, v_own_;

 public:
  // Distinct for every Run of the process (from 1): what per-thread buffers that outlive a run key on (a
  // later Run may sit at the same address with its buffers at the same addresses too).
  const std::uint64_t serial;
  const Tensor& q;            // the inputs rounded to the q, k, v stage formats (the inputs themselves
  const Tensor& k;            // when they already hold those formats)
  const Tensor& v;
  std::size_t B, Nq, Nkv, Sq, Skv, D, group;
  // The keys of the engines that pre-process K (pasa, smooth_k: held_keys), per (B, Nkv), as the Q·Kᵀ GEMM
  // reads them: keys_t each s2-key block j0 as D × n at j0·D (doubles), or keys_t_f32 the same as floats
  // (qk_floats), or keys_f32 row-major Skv × D floats (float_qk). Every other engine reads K, V and Q from
  // the run's tensors at their own width through keys_t_block ... query_rows_f32 below: from a window of
  // whole KV heads staged by for_items, or a tile at a time (no copy of a whole tensor either way).
  uninit_vector<double> keys_t;
  uninit_vector<float> keys_t_f32, keys_f32;
  Format keys_t_format;            // the format the GEMM's keys belong to (k, or k_shift)
  bool held_keys = false;          // the keys are in the buffers above (set by the pre-processing engines)
  // The general path's GEMMs on float kernels (gemm_uses_floats): Q and Kᵀ (qk_floats), V (pv_floats) as
  // floats (decided by set_keys_t_format; not with float_qk, float_pv).
  bool qk_floats = false, pv_floats = false;
  double scale = 0;           // effective scale rounded to the scale format
  bool masked = false;
  bool biased = false;        // a pse or a select mask ([IFA]) is applied to the scores
  double select_value = 0;    // the select mask's value rounded to the scale stage
  // (B, Nq, Sq) or empty: the per-row shift f of an engine whose scores are s − f for every key (smooth_k:
  // scale·q·mean(K)); the select value is then written as value − f (tile_bias_select).
  std::vector<double> score_frame;
  GemmSpec qk, pv;
  // K and V read through tiles (nullptr: from k and v, or the held keys). The inputs' K and V then give only
  // shape and format (their data may be empty) and must need no rounding to the k and v stages; not for the
  // engines that pre-process K (pasa, smooth_k).
  const KvTiles* tiles = nullptr;
  // Q, K, V quantised with scales (spec.quant.scales != none): S and P·V are dequantised tile by tile.
  bool quantised = false;
  // Some operand block-scaled (QuantOptions::q_block ... p_block): the general path only.
  bool block_scaled = false;
  // fa2 and pasa run their tiles on the fused float path (fused_tile.hpp: fused_tiles, decided once per run
  // from the descriptors by set_keys_t_format, so again when pasa_prepare sets the shifted keys' format).
  bool float_tiles = false;
  // With float_tiles, per GEMM: it runs on the fused path's own fp32 kernel (gemm_output_in_floats: K as
  // key_rows_f32, V as value_panels), or else through gemm() on the general path's operands (keys_t_block / _f32,
  // v / value_rows_f32: the tensor-core and every-op models, the same kernel and bits as the general path), its
  // output (values of a format that floats hold) moved into the fused tile.
  bool float_qk = false, float_pv = false;
  // The operands of one tile: the keys [j0, j0 + n) of (b, hk) transposed, D × n, as doubles or floats; the
  // same keys row-major (n × D floats); the values row-major (n × D floats); the values as the fused P·V
  // kernel reads them (⌈D/32⌉ panels of 32 columns, zero-padded, key j's row at 32·j, panel p at p·*ld);
  // the Q elements [at, at + count) as floats. From held_keys' buffers where it holds them, else from the
  // staged window where it holds the head (the transposed keys: a whole s2 block), else staged in the
  // calling thread's buffers (one per kind, valid until that kind's next call on the thread; a call for
  // the same block again returns the same buffer untouched). Exact: the values are of the k, v and q
  // formats, which floats hold wherever these are asked for.
  const double* keys_t_block(std::size_t b, std::size_t hk, std::size_t j0, std::size_t n) const;
  const float* keys_t_block_f32(std::size_t b, std::size_t hk, std::size_t j0, std::size_t n) const;
  const float* key_rows_f32(std::size_t b, std::size_t hk, std::size_t j0, std::size_t n) const;
  const float* value_rows_f32(std::size_t b, std::size_t hk, std::size_t j0, std::size_t n) const;
  const float* value_panels(std::size_t b, std::size_t hk, std::size_t j0, std::size_t n, std::size_t* ld) const;
  const float* query_rows_f32(std::size_t at, std::size_t count) const;
  // The KV heads (flattened b·Nkv + hk) for_items stages at once, for items_per_head items of each head on
  // `threads` threads (kv_window_heads on window_bytes_per_head); 0: tile by tile.
  std::size_t window_heads(std::size_t items_per_head, int threads) const;
  // Stages the heads [first, first + count) in the one layout each GEMM of the run reads (keys as
  // keys_t / keys_t_f32 / keys_f32 lay them out unless held_keys; V as panels with float_pv, rows with
  // pv_floats), on `threads` threads, in place of the previous window; count 0 frees it. Between the
  // parallel loops of for_items only: the items read the window, nothing writes it while they run.
  void stage_window(std::size_t first, std::size_t count, int threads) const;
  // The bytes one KV head takes in the window (0 where no GEMM reads a staged copy).
  std::size_t window_bytes_per_head() const;
  // The scale of the Q rows from r0 of head (b, h), of the K or V rows from j0 (a multiple of s2) of kv head
  // (b, hk); 1 without scales.
  double q_scale(std::size_t b, std::size_t h, std::size_t r0) const {
    return q_scale_.empty() ? 1.0 : q_scale_[(b * Nq + h) * ((Sq + spec.s1 - 1) / spec.s1) + r0 / spec.s1];
  }
  double k_scale(std::size_t b, std::size_t hk, std::size_t j0) const {
    return k_scale_.empty() ? 1.0 : k_scale_[(b * Nkv + hk) * ((Skv + spec.s2 - 1) / spec.s2) + j0 / spec.s2];
  }
  // shift_first: the unquantised keys, and the scales of the shifted keys replacing those of K.
  const Tensor& keys_before_quantisation() const { return k_pre_; }
  void set_k_scales(std::vector<double> s) { k_scale_ = std::move(s); }
  double v_scale(std::size_t b, std::size_t hk, std::size_t j0) const {
    return v_scale_.empty() ? 1.0 : v_scale_[(b * Nkv + hk) * ((Skv + spec.s2 - 1) / spec.s2) + j0 / spec.s2];
  }

  // threads: for the set-up (input rounding, key transposes, float copies and panels), results do not
  // depend on it.
  Run(const AttentionInputs& in, const AlgorithmSpec& spec, const KvTiles* tiles = nullptr, int threads = 1);
  // Frees the big buffers side by side (with the set-up's threads): each is its own mapping, and one munmap
  // after another on the calling thread left the others idle at the end of every run (docs/speed.md).
  ~Run();
  Run(const Run&) = delete;
  Run& operator=(const Run&) = delete;
  const StageSpec& stage(Stage s) const { return alloc.spec(s); }
  bool native(Stage s) const { return native_[static_cast<std::size_t>(s)]; }
  // The stage's reductions accumulate in plain RNE fp32 (a float addition rounds each step).
  bool acc_fp32(Stage s) const { return acc_fp32_[static_cast<std::size_t>(s)]; }
  // Plain RNE fp32 (a float conversion rounds it) or native fp64: a rounding that fuses into loops.
  bool fusable(Stage s) const { return native(s) || fp32_[static_cast<std::size_t>(s)]; }
  // Calls body(round) with the rounding of a fusable stage as a function object taking the exact result
  // of an operation as hi + lo (two_sum, two_prod, exact_quotient), so that the loop in body is compiled
  // (and vectorised) once per rounding, without a branch inside. fp32: the float conversion of the
  // sticky-folded double is one rounding of hi + lo (sticky_fold: 24 <= 51), whatever the operands' widths;
  // without the fold, RN to double then to fp32 is one rounding only for operands of at most 24 bits
  // (53 >= 2·24 + 2 [Figueroa 1995, "When is double rounding innocuous?"]).
  template <class Body>
  void fused(Stage s, Body&& body) const {
    PASA_ASSERT(fusable(s));  // otherwise the float conversion below would not be the stage's rounding
    if (native(s)) body([](DD x) { return x.hi; });
    else body([](DD x) { return static_cast<double>(static_cast<float>(sticky_fold(x.hi, x.lo))); });
  }
  // One rounding of an exact result hi + lo (two_sum, two_prod, exact_quotient) to a stage's format, in every
  // mode: hi for a native fp64 stage (hi is the RNE double of the result), else round_sum.
  double round_exact(Stage s, DD x, RandomBits* rng) const {
    if (native(s)) return x.hi;
    const StageSpec& sp = stage(s);
    return round_sum(x.hi, x.lo, sp.format, sp.round, rng);
  }
  // x[i] = one rounding of exact(i) (a DD) to a stage's format for i < n, draws in order. For p <= 51 and a
  // deterministic mode each exact result is folded to 53 bits with round-to-odd (sticky_fold) and the span
  // rounded by round_to's vectorised kernels; otherwise round_sum element by element. exact(i) may read x[i].
  template <class Exact>
  void round_each(Stage s, double* x, std::size_t n, RandomBits* rng, Exact&& exact) const {
    const StageSpec& sp = stage(s);
    round_each_in(native(s), sp.format, sp.round, x, n, rng, exact, [&] { round_to(s, x, n, rng); });
  }
  // Round n values (or one) to a stage's format; nothing to do for a native fp64 stage.
  void round_to(Stage s, double* x, std::size_t n, RandomBits* rng) const;
  // P (rows × n, row-major) to the p stage, then its block scheme if any (QuantOptions::p_block).
  void round_p(double* P, std::size_t rows, std::size_t n, RandomBits* rng) const;
  double round_to(Stage s, double x, RandomBits* rng) const;
  // Round n values to the accumulator format of a stage's Reduction (with the stage's RoundOptions).
  void round_acc(Stage s, double* x, std::size_t n, RandomBits* rng) const;
  // round_each for the accumulator format of a stage's Reduction: x[i] = one rounding of exact(i) to acc.
  template <class Exact>
  void round_acc_each(Stage s, double* x, std::size_t n, RandomBits* rng, Exact&& exact) const {
    const StageSpec& sp = stage(s);
    round_each_in(acc_native_[static_cast<std::size_t>(s)], sp.acc(), sp.round, x, n, rng, exact,
                  [&] { round_acc(s, x, n, rng); });
  }
  // The pre-processing engines' keys: K^T of one (batch, kv head) from K (Skv × D row-major) into keys_t or
  // keys_t_f32 (float_qk: K into keys_f32). Call set_keys_t_format first with the keys' format; it also
  // decides float_tiles and the GEMMs' operand kinds, and (held_keys) allocates the key buffer.
  void set_keys_t(std::size_t b, std::size_t hk, const double* keys);
  void set_keys_t_format(const Format& f);

 private:
  bool native_[kStageCount];
  bool fp32_[kStageCount];  // plain RNE fp32: a float conversion rounds it
  bool acc_native_[kStageCount], acc_fp32_[kStageCount];  // the same for the reduction's accumulator
  // The staged KV heads [first, first + count) (stage_window; mutable: for_items stages it between its
  // loops on a const Run), laid out as the held buffers above with the head index less first.
  struct Window {
    std::size_t first = 0, count = 0;
    uninit_vector<double> keys_t;
    uninit_vector<float> keys_t_f32, keys_f32, v_rows, v_panels;
    bool holds(std::size_t head) const { return head - first < count; }
  };
  mutable Window win_;
};

// The KV heads a staging window holds (Run::window_heads; attention_bytes' estimate uses the same rule):
// `heads` KV heads of `bytes_per_head` each, `items_per_head` work items each, on `threads` threads. All of
// them where they take at most 32 MiB (a small run, staged once as before); none (tile by tile) where a
// head has fewer than 8 items (decode: a staged copy would be read a few times only, while a tile staged by
// the item that reads it stays in cache); else enough heads for 16 items a thread (the wait at the end of
// each window stays a few % of it), at most 256 MiB, at least one head.
std::size_t kv_window_heads(std::size_t heads, std::size_t items_per_head, std::size_t bytes_per_head, int threads);
// The bounds of that rule. Only the tests change them (to run small problems through several windows, or
// tile by tile, and compare their bits with one window): a window never changes a result.
struct KvWindowLimits {
  std::size_t whole_run = std::size_t{32} << 20;  // bytes staged at once without a window
  std::size_t cap = std::size_t{256} << 20;       // bytes of one window
  std::size_t min_items = 8;                      // items per head below which a run stages tile by tile
};
KvWindowLimits& kv_window_limits();

// One work item: rows [r0, r1) of query head h in batch b, or of the `heads` query heads h, h + 1, ... that
// share KV head hk (GQA: their rows against one K/V tile read; rows are independent, so each row's result
// is the same as in an item of its own head). Item row k is query row r0 + k % (r1 − r0) of head
// h + k / (r1 − r0).
struct Item {
  std::size_t b, h, hk, r0, r1;
  std::size_t heads = 1;
  std::size_t rows() const { return heads * (r1 - r0); }
  std::size_t head_of(std::size_t k) const { return h + k / (r1 - r0); }
  std::size_t row_of(std::size_t k) const { return r0 + k % (r1 - r0); }
};

// Elements [i0, i0 + n) of an input (Run::q, k, v) as doubles: in place when it is wide, else decoded
// into the calling thread's buffer `slot` (0 to 3), valid until that slot's next use on the thread.
const double* input_values(const Tensor& t, std::size_t i0, std::size_t n, int slot);

// The items of a run in their fixed order: (batch, head, query block).
std::vector<Item> make_items(const Run& run);

// Per-item random stream for stochastic rounding (independent of the thread that runs the item).
RandomBits item_stream(const AlgorithmSpec& spec, std::size_t item_index);

// Visibility of the tile rows [r0, r1) × keys [j0, j1): vis[(r − r0)·n + c]; returns whether any key is visible.
bool tile_visibility(const Run& run, const Item& it, std::size_t j0, std::size_t j1, std::vector<std::uint8_t>& vis);

// S (rows × n, ld n) = Q_rows · (keys j0 … j0 + n)ᵀ through the QKᵀ GEMM (qk_acc, s).
void tile_scores(const Run& run, const Item& it, std::size_t j0, std::size_t n, double* S, RandomBits* rng);
// Z = round_scale(S · scale), in place.
void tile_scale(const Run& run, double* S, std::size_t count, RandomBits* rng);
// [IFA] Z = round_scale(Z + pse) where the inputs have a pse, then Z = select_value where the select mask
// says so, for the rows of `it` × keys [j0, j0 + n) (Z: rows × n). The select value is a score in the
// UNSHIFTED frame (it replaces scale·q·k + pse): where an engine's scores are shifted, Z = s − f_k for item
// row k, a selected key gets round_scale(select_value − f_k). f: `frame` (per item row; PASA's block shift
// Inva·S̄'_j), else run.score_frame (smooth_k's scale·q·mean(K)), else 0.
void tile_bias_select(const Run& run, const Item& it, std::size_t j0, std::size_t n, double* Z, RandomBits* rng,
                      const double* frame = nullptr);
// Masked entries become −inf.
void tile_mask(double* Z, const std::vector<std::uint8_t>& vis, std::size_t count);
// PV (rows × D) = P (rows × n, ld ldp) · V[j0 : j0 + n] through the P·V GEMM (pv_acc, pv). P already in p.
void tile_pv(const Run& run, const Item& it, const double* P, std::size_t ldp, std::size_t j0, std::size_t n, double* PV,
             RandomBits* rng);

// A reduction of stage s (its Reduction: accumulator, order) over the n columns of a column-major block,
// vectorised across rows: out[r] = Σ_c T[c·st + r], or that sum divided by n in the accumulator (mean), then
// rounded once to the stage format. Tf (instead of T): the same block as floats, for a plain RNE fp32
// accumulator and the sequential or blocked order only.
enum class ReduceOp { sum, mean };
void reduce_columns(const Run& run, Stage s, ReduceOp op, const double* T, std::size_t rows, std::size_t n,
                    std::size_t st, double* out, RandomBits* rng, const float* Tf = nullptr);
// The end of every reduction: out holds the rows' accumulated sums of n terms (in the accumulator); the mean's
// division, then the one rounding to the stage format.
void reduce_finish(const Run& run, Stage s, ReduceOp op, std::size_t rows, std::size_t n, double* out,
                   RandomBits* rng);
// The same over the n entries of each row of X (rows × n, row stride ld).
void reduce_rows(const Run& run, Stage s, ReduceOp op, const double* X, std::size_t rows, std::size_t n, std::size_t ld,
                 double* out, RandomBits* rng);
// alpha[r] = round_exp(exp(round_max(m_old[r] − m_new[r]))), or 0 where m_old[r] = −∞ (a row that has
// seen nothing: its l and O are 0).
void rescale_factors(const Run& run, const double* m_old, const double* m_new, std::size_t rows, double* alpha,
                     RandomBits* rng);
// acc = round_s(round_s(alpha[r]·acc) + add) over rows × width values (FA2's l and O updates).
void rescale_add(const Run& run, Stage s, double* acc, const double* alpha, const double* add, std::size_t rows,
                 std::size_t width, RandomBits* rng);
// Largest value of each row, ignoring NaN; −inf for an empty or fully masked row.
double row_max(const double* x, std::size_t n);
// P = round_exp(exp(round_exp(z − shift_r))) for rows × n values (row stride ld); shift_r = −inf is
// treated as 0 (a row with nothing visible yet: every entry is −inf and P = 0).
void tile_exp(const Run& run, const double* Z, std::size_t rows, std::size_t n, std::size_t ld, const double* shift,
              double* P, RandomBits* rng);
// x = k·ln2 + r with |r| <= ln2/2 (Cody–Waite, ln2 split so k·ln2_hi is exact), e^r by its Taylor
// polynomial of degree 13 (truncation < 2^-58), scaled by 2^k in two steps so that subnormal results are
// rounded once. Relative error about 2 ulp of double, so rounding the result to a stage format of p <= 24
// bits gives the correctly rounded exp except within 2^-50 (relative) of a rounding boundary. Branch-free,
// so the loop vectorises; glibc's scalar exp would be a third of an emulated FlashAttention's time.
inline double exp_one(double v) {
  constexpr double log2e = 1.4426950408889634, ln2_hi = 6.93147180369123816490e-01, ln2_lo = 1.90821492927058770002e-10;
  // NaN fails v >= −746 and is clamped too, so that no NaN reaches the integer conversion below (undefined
  // behaviour; UBSan found it); the NaN itself is returned at the end.
  const double c = v >= -746.0 ? (v > 710.0 ? 710.0 : v) : -746.0;
  const double kf = std::nearbyint(c * log2e);
  const double r = std::fma(-kf, ln2_lo, std::fma(-kf, ln2_hi, c));
  double p = 1.0 / 6227020800.0;  // 1/13!
  p = std::fma(p, r, 1.0 / 479001600.0);
  p = std::fma(p, r, 1.0 / 39916800.0);
  p = std::fma(p, r, 1.0 / 3628800.0);
  p = std::fma(p, r, 1.0 / 362880.0);
  p = std::fma(p, r, 1.0 / 40320.0);
  p = std::fma(p, r, 1.0 / 5040.0);
  p = std::fma(p, r, 1.0 / 720.0);
  p = std::fma(p, r, 1.0 / 120.0);
  p = std::fma(p, r, 1.0 / 24.0);
  p = std::fma(p, r, 1.0 / 6.0);
  p = std::fma(p, r, 0.5);
  p = std::fma(p, r, 1.0);
  p = std::fma(p, r, 1.0);
  const auto k = static_cast<std::int64_t>(kf);
  const std::int64_t k1 = k / 2, k2 = k - k1;
  const double s1 = std::bit_cast<double>(static_cast<std::uint64_t>(k1 + 1023) << 52);
  const double s2 = std::bit_cast<double>(static_cast<std::uint64_t>(k2 + 1023) << 52);
  const double e = (p * s1) * s2;
  return v != v ? v : e;  // NaN stays NaN; −inf clamps to −746 and gives 0, +inf gives inf
}

// e^x in place (exp_one on each element).
void exp_span(double* x, std::size_t n);
// e^x rounded once to a stage of more than 24 bits (correctly rounded, every mode; see the .cpp).
double exp_rounded_wide(double x, const StageSpec& sp, RandomBits* rng);
// e^x of n arguments, evaluated as the exp stage's `via` says, rounded to the exp stage (correctly rounded
// for stages of more than 24 bits).
void exp_to_stage(const Run& run, double* x, std::size_t n, RandomBits* rng);

// Writes query row r of head h (D values, already in the out format) and its lse.
void write_row(const Run& run, std::size_t b, std::size_t h, std::size_t r, const double* o, double lse,
               AttentionOutput& out);

// The scaled, masked scores Z (rows × n) of one tile; false when the mask hides the whole tile.
bool tile_logits(const Run& run, const Item& it, std::size_t j0, std::size_t n, std::vector<double>& Z,
                 std::vector<std::uint8_t>& vis, RandomBits* rng);

// Final output rows: O/l rounded to div (when divide), then to out; rows that saw no key get 0 and
// lse = −inf. lse = m + log(l) (+ lse_shift, indexed (B, Nq, Sq), when given).
void finish_rows(const Run& run, const Item& it, const std::vector<double>& O, const std::vector<double>& l,
                 const std::vector<double>& m, const std::vector<std::uint8_t>& seen, bool divide,
                 const std::vector<double>* lse_shift, AttentionOutput& out, RandomBits* rng);

// The last pass of the 3-pass and online softmax ([FA1, §3.1]): A = e^{x − m}/d for every key of the rows
// (Zrow: rows × Skv, −inf where hidden), P = A rounded to p, O = P·V as one GEMM over the whole row.
void normalised_output(const Run& run, const Item& it, const std::vector<double>& m, const std::vector<double>& d,
                       const std::vector<std::uint8_t>& seen, AttentionOutput& out, RandomBits* rng,
                       const std::vector<double>& Zrow);

// Runs f(item, rng) for every item; each item writes only its own rows.
// The items of a KV head are contiguous (make_items): with a staging window (Run::window_heads) they run a
// window of heads at a time, its K and V staged first; each item keeps its index and stream either way.
template <class F>
void for_items(const Run& run, int threads, F&& f) {
  const std::vector<Item> items = make_items(run);
  auto body = [&](std::size_t i) {
    RandomBits rng = item_stream(run.spec, i);
    f(items[i], &rng);
  };
  const std::size_t heads = run.B * run.Nkv, per_head = heads ? items.size() / heads : 0;
  const std::size_t w = per_head ? run.window_heads(per_head, threads) : 0;
  if (w == 0) {
    parallel_for(items.size(), threads, body);
    return;
  }
  struct Free {  // (the window freed however the loops end)
    const Run& r;
    int t;
    ~Free() { r.stage_window(0, 0, t); }
  } free_window{run, threads};
  for (std::size_t h0 = 0; h0 < heads; h0 += w) {
    const std::size_t hn = std::min(w, heads - h0);
    run.stage_window(h0, hn, threads);
    parallel_for(hn * per_head, threads, [&](std::size_t i) { body(h0 * per_head + i); });
  }
}


}  // namespace pasa::detail
