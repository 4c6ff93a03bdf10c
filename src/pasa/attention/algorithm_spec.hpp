// The plain description of one attention run and its result: which algorithm, under which precision
// allocation, with which block sizes and PASA options (PasaOptions), and the output it returns. Data only:
// the registry that runs it is algorithm.hpp, the engines are attention/detail/.
#pragma once

#include <cfloat>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pasa/attention/allocation.hpp"
#include "pasa/attention/kernel_recipe.hpp"
#include "pasa/inputs/tensor.hpp"
#include "pasa/numeric/block_scale.hpp"

namespace pasa {

struct PasaOptions {
  double beta = 0.984497;    // Table 3's optimised β for fp16, n = 128
  bool alpha_in_M = true;    // Eq. 10: M = (I − β/s2·J)/α; false: M = I − β/s2·J and S' scaled afterwards
  bool m0_zero = false;      // Alg. 1 as printed initialises m_0 = 0; false: −∞ as FlashAttention does
  bool bf16_to_fp16 = true;  // §2.2: with bf16 inputs, the allocation's bf16 stages run in fp16
  // "fa2": P = exp(S' − (m_j − Δm'_j)) with the corrected max, l and O updated as in FA2, so β = 0 is FA2
  //        (§2.2: "PASA completely degrades into FA2.0"); "printed": Alg. 1 steps 12/18/20 literally,
  //        P' = exp(S' − m'_j) with the local max, then rescaled by e^{Δm_j}.
  std::string form = "fa2";
  bool operator==(const PasaOptions&) const = default;
};

// FlashDecoding++'s asynchronised softmax ([FD++, §3]): every part uses the same "unified maximum" φ,
// P = e^{x − φ}, no running max and no rescaling; a row with a visible score x where x − φ <= a or x − φ >= b
// (overflow or precision loss of e^{x − φ}) is recomputed with the synchronised scheme (fa2 with the same
// splits); a score masked by select at or below φ + a is exempt when the row has a score inside the range
// (it only underflows). φ is rounded to the max stage.
struct FdppOptions {
  double phi = 0;
  double a = -30, b = 11;  // e^{11} < 65504: b fits an fp16 exp stage
  bool operator==(const FdppOptions&) const = default;
};

// FlashAttention-3's FP8 recipe [FA3, §3.3]: Q, K, V quantised with fp32 scales, optionally after a random
// Hadamard transform of Q and K ("incoherent processing"), P scaled by a fixed power of two before its FP8
// cast. Detail and the choices made: docs/fp8.md. Inactive by default (every field at its default): the engines
// then run exactly as without it.
enum class QuantScale {
  none,    // the inputs rounded to the q, k, v stages as they are (scale 1)
  tensor,  // one scale per tensor (Q, K, V each)
  head,    // one per (batch, head): FA3's q_descale/k_descale/v_descale, shape (B, N_kv)
  block,   // one per s1 rows of Q and per s2 rows of K and V of each (batch, head): [FA3, §3.3] block quantisation
};
struct QuantOptions {
  QuantScale scales = QuantScale::none;
  double fmax = 448;        // the value a group's amax maps to: s = fp32(fp32(amax) / fmax) (E4M3's largest finite)
  bool hadamard = false;    // Q and K multiplied along D by H·diag(±1)/√D (seeded), before the scales
  std::uint64_t hadamard_seed = 1;
  int p_offset = 0;         // P = 2^p_offset·e^{x − m} (l and O carry the factor, O/l cancels it): FA3's
                            // Max_offset, 8 for FP8 ("P in [0, 256]")
  // pasa with scales: PASA's pre-processing K' = M·K (Eq. 11) on the keys BEFORE quantisation (an FMA chain
  // in the qk_acc stage: fp32, as a separate kernel would do it), then K' quantised with its own scales into k_shift;
  // false: M·K_q on the quantised keys, under the allocation's GEMM model (the shift after quantisation)
  bool shift_first = false;
  // Block scaling (numeric/block_scale.hpp, docs/block-scaling.md), one scheme per operand, in every
  // algorithm: the operand's values become its elements times their scales (exact in fp64), in place of its
  // stage's rounding, and the GEMMs take them as they are (the MX GEMM's products of scaled elements). Q and K
  // are grouped along D, V along the keys (its GEMM's contracting axis), P along the keys of each tile after
  // the p stage's rounding. Unset: the operand as without it.
  std::optional<BlockScheme> q_block, k_block, v_block, p_block;
  bool fa3_active() const { return scales != QuantScale::none || hadamard || p_offset != 0 || shift_first; }
  bool blocks() const { return q_block || k_block || v_block || p_block; }
  bool active() const { return fa3_active() || blocks(); }
  bool operator==(const QuantOptions&) const = default;
};
const char* quant_scale_name(QuantScale s);
// fmax must be a normal fp32 number: the scale is fp32(fp32(amax) · fp32(1/fmax)) (fp8_scale, quantise.hpp),
// and beyond that range fp32(1/fmax) is 0 or inf, which fp8_scale would silently turn into "no scaling".
inline bool quant_fmax_ok(double fmax) { return fmax >= FLT_MIN && fmax <= FLT_MAX; }
QuantScale quant_scale_by_name(std::string_view name);  // throws InputError naming the known ones

struct AlgorithmSpec {
  std::string name = "fa2";  // one of algorithm_names()
  Allocation alloc;
  std::size_t s1 = 128, s2 = 128;  // query and key/value block sizes
  PasaOptions pasa;
  std::uint64_t seed = 0;  // random stream for stochastic rounding (one stream per (batch, head, query block))
  // Split-KV ("flash-decoding", [UA]): the keys of each work item cut into this many parts at s2-block
  // boundaries, each returning (unnormalised O, max, sum) (PASA: also its pseudo-average and block count),
  // merged in the allocation's `merge` stage (attention/detail/split_kv.hpp). 1: no split (the engine as
  // is). fa2, smooth_k and pasa only.
  std::size_t splits = 1;
  FdppOptions fdpp;  // the "fdpp" algorithm only
  QuantOptions quant;  // FA3's recipe: fa2 and pasa only; block schemes: every algorithm
  // A kernel recipe (kernel_recipe.hpp): fa2 as that GPU kernel runs it; its schedule and numerics replace
  // the allocation, s1, s2 and splits (which stay at their defaults).
  std::optional<KernelRecipe> kernel;
  bool operator==(const AlgorithmSpec&) const = default;
};

struct AttentionOutput {
  Tensor o;                 // (B, Nq, Sq, D), values of the allocation's "out" format
  std::vector<double> lse;  // (B, Nq, Sq): m + log(l) in fp64 from the algorithm's final m and l (−inf: no key)
  std::size_t recomputed_rows = 0;  // fdpp: rows whose scores left (φ + a, φ + b) and were recomputed
};

}  // namespace pasa
