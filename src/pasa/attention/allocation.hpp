// Precision allocation as data: a format (and rounding options) for every stage of blocked attention, and
// the model of how the matrix engine rounds inside a GEMM. Presets follow the paper's figures (PASA Fig. 1–3,
// Alg. 1); a user writes new allocations in JSON (a preset plus overrides, or every stage) without C++.
//
// The stages, GEMM models and the other named options are registries (core/enum_table.hpp): one enum and one
// table of names and one-line descriptions each (kStages, kGemmKinds, ...), read by the JSON reader and
// writer, the error messages and the docs. docs/extending.md lists what else a new stage or model needs.
//
// Reductions (the row sum l in `sum`, the means in `mean`) have their own accumulator: see Reduction.
// Elementwise steps are computed exactly and rounded once to their stage's format, except the exp stage's
// `via` option (ExpVia) for hardware that evaluates e^x in fp32 before converting.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pasa/core/enum_table.hpp"
#include "pasa/numeric/format.hpp"
#include "pasa/numeric/round.hpp"

namespace pasa {

// The stages of blocked attention, in the order of stage_names() (and of Allocation::stages).
enum class Stage { q, k, v, qk_acc, s, scale, max, exp, sum, p, pv_acc, pv, o, div, out, shift, k_shift, mean, merge };
inline constexpr EnumTable<Stage, 19> kStages = {{
    {Stage::q, "q", "Q as fed to the matrix engine (the input is rounded to it)"},
    {Stage::k, "k", "K as fed to the matrix engine"},
    {Stage::v, "v", "V as fed to the matrix engine"},
    {Stage::qk_acc, "qk_acc", "accumulator of S = Q·Kᵀ (also of PASA's K·M pre-processing GEMM)"},
    {Stage::s, "s", "S as written by the QKᵀ GEMM"},
    {Stage::scale, "scale", "the scaled scores S·scale (the scale factor is rounded to this format too)"},
    {Stage::max, "max", "running and local maxima, their differences (PASA: corrected max and Δm terms)"},
    {Stage::exp, "exp", "the argument of exp (x − m), its result P̃, and the rescaling factors e^{m_old − m_new}"},
    {Stage::sum, "sum", "the row sum l (a reduction of P, see Reduction) and its rescaled update"},
    {Stage::p, "p", "P as fed to the P·V GEMM"},
    {Stage::pv_acc, "pv_acc", "accumulator of P·V"},
    {Stage::pv, "pv", "P·V as written by the GEMM"},
    {Stage::o, "o", "the running output O (rescale and add)"},
    {Stage::div, "div", "the division by the row sum (final, or FA1's per-step normalisation)"},
    {Stage::out, "out", "the stored output"},
    {Stage::shift, "shift", "PASA's shifting matrix M (Eq. 10)"},
    {Stage::k_shift, "k_shift",
     "the shifted keys written by PASA's pre-processing GEMM (Eq. 11) or smooth_k's K − mean(K)"},
    {Stage::mean, "mean",
     "PASA's row means S̄' and pseudo-averages F (Eq. 15) and correction terms Δm'; smooth_k's mean of K"},
    // Used only with AlgorithmSpec::splits > 1 [UA]: its arithmetic, and with it (StageSpec::merge,
    // MergeSpec below) the model of what each part stores. Where an allocation does not name it, it is the
    // `o` stage's spec.
    {Stage::merge, "merge", "the merge of split-KV parts (splits > 1): its arithmetic and the parts' storage"},
}};
inline constexpr std::size_t kStageCount = kStages.size();
static_assert(enum_table_in_order(kStages), "kStages: one entry per Stage, in enum order");
static_assert(static_cast<std::size_t>(Stage::merge) + 1 == kStageCount, "kStages: a Stage without an entry");

// How a GEMM rounds. The product of two input values is exact in every model except every_op.
enum class GemmKind {
  ordered,      // acc ← round_acc(acc + a·b) for k in order (an FMA chain); the result rounded once on output
  chunked,      // products summed in groups of `chunk` (in fp64, as a tensor core's wide adder), each group sum
                // added to the accumulator with one rounding; rounded once on output
  every_op,     // every product and every addition rounded to the accumulator format
  tensor_core,  // a matrix engine's multi-operand adder, parametrised by the TensorCore fields (below)
};
// The names JSON ("gemm": {"model": ...}), pasa-gemm --model and the Python binding read and write.
inline constexpr EnumTable<GemmKind, 4> kGemmKinds = {{
    {GemmKind::ordered, "ordered", "an FMA chain in k order, one rounding to the accumulator per step"},
    {GemmKind::chunked, "chunked", "groups of `chunk` products summed exactly, each group added with one rounding"},
    {GemmKind::every_op, "every_op", "every product and every addition rounded to the accumulator format"},
    {GemmKind::tensor_core, "tensor_core", "a matrix engine's multi-operand adder (the TensorCore fields)"},
}};
static_assert(enum_table_in_order(kGemmKinds), "kGemmKinds: one entry per GemmKind, in enum order");
static_assert(static_cast<std::size_t>(GemmKind::tensor_core) + 1 == kGemmKinds.size(),
              "kGemmKinds: a GemmKind without an entry");
const char* gemm_kind_name(GemmKind k);
GemmKind gemm_kind_by_name(std::string_view name);  // throws InputError naming the known models

// How a tensor core's multi-operand adder treats the bits of the aligned terms [Fasi et al. 2021, Sec. 3;
// Khattak & Mikaitis 2025, Sec. 3].
enum class AlignRound {
  truncate,  // the bits below the kept ones are dropped, sign-magnitude (toward zero): NVIDIA V100 .. H100
  nearest,   // each aligned term rounded to nearest even at the kept bits
};
inline constexpr EnumTable<AlignRound, 2> kAlignRounds = {{
    {AlignRound::truncate, "truncate", "bits below the kept ones dropped (toward zero)"},
    {AlignRound::nearest, "nearest", "each aligned term rounded to nearest even"},
}};
static_assert(enum_table_in_order(kAlignRounds) && static_cast<std::size_t>(AlignRound::nearest) + 1 == kAlignRounds.size());

// The tensor-core model (kind == tensor_core), per output element: the products a_k·b_k are exact; every
// `block` consecutive products (k = 0..block−1, block..2·block−1, ...) form one multi-operand addition,
// together with the accumulator c when acc_in_block. Each term t is aligned to the largest exponent E of the
// block's terms — for a product the SUM of its operands' exponents e_a + e_b (its significand is in [1, 4);
// a subnormal operand counts with the format's emin), for c its own exponent — and kept to `align_bits` bits
// below 2^E (multiples of 2^(E − align_bits)), the rest dropped as `align_round` says. The kept terms are
// added exactly, and the sum is normalised and rounded ONCE to the accumulator format (the qk_acc / pv_acc
// stage; with acc_bits > 0 its exponent range with only acc_bits significand bits, the FP8 engines' e8m13)
// with `block_round`. Without acc_in_block the block's sum is rounded so on its own and then added to c
// with one rounding (block_round). With promote = N > 0 the tensor-core accumulator starts from 0 every N
// products and its value is added to an outer accumulator of the acc stage (format and rounding options of
// the stage: the CUDA cores' fp32 FADD) — the FP8 recipes' promotion; split-K with sequential reduction of
// the partial sums is the same computation. align_bits = kUnlimitedAlign keeps every bit (the block's exact
// sum rounded once). Measured H100 values: tensor_core_preset().
//
// The fields after acc_bits describe the engines of other generations [MMA-Sim, `simulator/arithmetic.py`]
// (tensor_core_models(), tensor_core_models.cpp, holds them per architecture); their defaults leave the
// model above as it was:
// - operand_bits > 0: every operand cut toward zero to that many significand bits first (the TF32 `mma` of
//   Ampere/Ada reads fp32 registers and drops their 13 low bits: MMA-Sim `truncate_to_tf32`).
// - zero_at_emin: a zero accumulator, operand or block scale counts with exponent −126 (fp32's emin) in the
//   alignment (MMA-Sim `extract_significand_exponent`: frexp of 0 gives exponent −126), instead of never
//   being the largest: with small block scales a zero c then cuts the products.
// - scale != none: per-block operand scales (dgemm_tensor_core's TcScales), one for every `scale_block`
//   consecutive k of a row of A and of a column of B. e8m0 (OCP MX): a power of two; ue4m3 (NVFP4): an
//   E4M3 value taken unsigned (its sign ignored: PTX ISA, `mma.block_scale`, "ue4m3").
// - group = G > 0: every G consecutive products (within a block) summed exactly into one term, multiplied by
//   both block scales, whose exponent in the alignment is that of the scales' product (e(s_a) + e(s_b), the
//   group sum's own magnitude aside): `tcgen05.mma` kind::mxf4 / mxf4nvf4 (MMA-Sim
//   `nv_fused_dot_add_with_block_scale`, 35 fractional bits). group = 0 with e8m0 scales: each product's
//   exponent is e_a + e_b + e(s_a) + e(s_b) (kind::mxf8f6f4: MMA-Sim `nv_fused_dot_add` with the scales).
// - integer != off: integer operands and an int32 accumulator (`mma` .s8/.u8/.s4, PTX ISA "mma": integer
//   types, optional .satfinite): each block's products and the accumulator summed exactly, then wrapped to
//   32 bits (two's complement) or clamped to int32 (.satfinite); the alignment fields are unused. The
//   result is that integer (the output stage rounds it as any value). Measured: docs/tensor-cores.md.
enum class BlockScale { none, e8m0, ue4m3 };
inline constexpr EnumTable<BlockScale, 3> kBlockScales = {{
    {BlockScale::none, "none", "no block scales"},
    {BlockScale::e8m0, "e8m0", "OCP MX E8M0: a power of two per block"},
    {BlockScale::ue4m3, "ue4m3", "NVFP4: an unsigned E4M3 value per block"},
}};
static_assert(enum_table_in_order(kBlockScales) && static_cast<std::size_t>(BlockScale::ue4m3) + 1 == kBlockScales.size());
enum class TcInteger { off, wrap, saturate };
inline constexpr EnumTable<TcInteger, 3> kTcIntegers = {{
    {TcInteger::off, "off", "floating-point operands"},
    {TcInteger::wrap, "wrap", "integer operands, an int32 accumulator that wraps around (mma .s32)"},
    {TcInteger::saturate, "saturate", "integer operands, an int32 accumulator clamped per MMA (.satfinite)"},
}};
static_assert(enum_table_in_order(kTcIntegers) && static_cast<std::size_t>(TcInteger::saturate) + 1 == kTcIntegers.size());
inline constexpr int kUnlimitedAlign = -1;
struct TensorCore {
  int block = 16;           // products per multi-operand addition, >= 1
  bool acc_in_block = true;  // the accumulator is one of the aligned terms
  int align_bits = 25;      // bits kept below the largest exponent, 0..60, or kUnlimitedAlign
  AlignRound align_round = AlignRound::truncate;
  RoundMode block_round = RoundMode::toward_zero;  // normalisation into the accumulator (rne, rna, rz, ru, rd)
  int promote = 0;          // products per promotion to the outer accumulator; 0: never
  int acc_bits = 0;         // significand bits of the tensor core's accumulator; 0: the acc stage's (2..53)
  int operand_bits = 0;     // operands cut toward zero to this many significand bits first; 0: as given
  bool zero_at_emin = false;  // zeros align with exponent −126 (MMA-Sim), else never the largest
  BlockScale scale = BlockScale::none;
  int scale_block = 0;      // k per block scale (scale != none): 16 or 32
  int group = 0;            // products summed exactly per term; 0: each product a term
  TcInteger integer = TcInteger::off;
  bool operator==(const TensorCore&) const = default;
};

// The tensor_core model computes each product exactly in double: operands of at most this many significand
// bits (fp32's 24, tf32's 11, ...; the product of two has <= 52 bits). validate_case (algorithm.hpp)
// refuses a case whose tensor-core GEMM would receive wider operands.
inline constexpr int kTensorCoreMaxOperandBits = 26;
// A model with group > 0 sums `group` products exactly in double: operands whose products span at most 53
// bits over a group (quantum min_subnormal_a·min_subnormal_b up to group·max_a·max_b: fp4, fp6, E4M3; not
// fp16 or bf16, whose grouped engines do not exist). validate_case refuses the others.
bool tc_group_exact(const Format& a, const Format& b, int group);

// The GEMMs of blocked attention; each runs under Allocation::gemm_of(id).
enum class GemmId {
  qk,     // S = Q·Kᵀ
  pv,     // P·V
  shift,  // PASA's pre-processing K' = M·K (Eq. 11)
};
inline constexpr std::size_t kGemmCount = 3;
static_assert(static_cast<std::size_t>(GemmId::shift) + 1 == kGemmCount, "kGemmCount: one per GemmId");

struct GemmModel {
  GemmModel(GemmKind k = GemmKind::ordered, int c = 16, TensorCore t = {})  // NOLINT: {kind, chunk} reads well
      : kind(k), chunk(c), tc(t) {}
  GemmKind kind = GemmKind::ordered;
  int chunk = 16;  // products per group (chunked only), >= 1
  TensorCore tc;   // tensor_core only
  bool operator==(const GemmModel&) const = default;
};

// Named tensor-core models, measured on an NVIDIA H100 (experiments/gpu/tc_probe.py, docs/tensor-cores.md):
//   h100_fp16, h100_bf16  block 16, align_bits 25, truncate, rz, accumulator in the block
//   h100_tf32             block 8, otherwise as fp16 (cuBLAS adds split-K for some K: see the doc)
//   h100_e4m3, h100_e5m2  block 32, align_bits 13, acc_bits 14, truncate, rz; promote 128 (torch._scaled_mm's default,
//                         use_fast_accum=False); h100_e4m3_fast, h100_e5m2_fast: no promotion
//   exact                 unlimited bits, one block per product group of 16, rne (the wide-adder ideal)
// Throws InputError naming the known ones.
// The presets of other generations (Volta .. Blackwell, integer mma) are in tensor_core_models(): where each
// one's parameters come from.
TensorCore tensor_core_preset(std::string_view name);
std::vector<std::string> tensor_core_preset_names();
// Where a named model's parameters come from.
enum class TcEvidence {
  measured_here,  // measured on this project's GPUs (H100/H200: experiments/gpu/, results/hardware/)
  published,      // published models and measurements (MMA-Sim, Khattak & Mikaitis), tested against MMA-Sim's
  ideal,          // no hardware: an ideal
};
struct TensorCoreModel {
  std::string_view name;
  std::string_view arch;         // "Hopper (sm_90)", ...
  std::string_view instruction;  // the instruction (and shape) it models
  TcEvidence evidence = TcEvidence::published;
  std::string_view source;       // where the parameters come from
  TensorCore tc;
};
// Every named model, in the order of tensor_core_preset_names().
const std::vector<TensorCoreModel>& tensor_core_models();
const char* block_scale_name(BlockScale s);
BlockScale block_scale_by_name(std::string_view name);  // throws InputError
const char* tc_integer_name(TcInteger i);
TcInteger tc_integer_by_name(std::string_view name);  // throws InputError
const char* align_round_name(AlignRound r);
AlignRound align_round_by_name(std::string_view name);  // throws InputError

// The order in which a reduction adds its n terms x[0..n) (each addition one rounding to the accumulator).
enum class ReduceOrder {
  sequential,  // s = x[0]; s = rnd_acc(s + x[i]) for i = 1..n−1
  pairwise,    // sum(x[0:n]) = rnd_acc(sum(x[0:h]) + sum(x[h:n])), h = n/2; x[0] when n = 1
  blocked,     // `width` lanes (a warp or a vector unit): lane r sums x[r], x[r+k], ... sequentially (+0 when
               // empty), then the shuffle-down tree p[r] = rnd_acc(p[r] + p[r+off]), off = k/2, ..., 1
};
inline constexpr EnumTable<ReduceOrder, 3> kReduceOrders = {{
    {ReduceOrder::sequential, "sequential", "left to right"},
    {ReduceOrder::pairwise, "pairwise", "recursive halves"},
    {ReduceOrder::blocked, "blocked", "`width` strided lanes, then a shuffle-down tree"},
}};
static_assert(enum_table_in_order(kReduceOrders) && static_cast<std::size_t>(ReduceOrder::blocked) + 1 == kReduceOrders.size());

// How a stage reduces a row: accumulate in `acc` (each addition one rounding to acc with the stage's
// RoundOptions) in `order`, then round the result once to the stage's format. A mean divides the
// accumulated sum by n in acc (one rounding) before that final rounding, as torch.mean on half tensors does.
// acc == the stage's format with sequential order is the strict model (every partial sum stored in the stage
// format); GPUs and NPUs reduce fp16/bf16 in fp32 and round once.
struct Reduction {
  std::optional<Format> acc;  // none: the stage's own format (the strict model)
  ReduceOrder order = ReduceOrder::sequential;
  int width = 32;  // lanes of the blocked order: a power of two in [1, 1024]
  bool operator==(const Reduction&) const = default;
};

// How the exp stage evaluates e^x before rounding to its format.
enum class ExpVia {
  exact,  // e^x rounded once: PyTorch's half semantics, ideal. Correctly rounded for stages of more than 24
          // bits; for narrower ones e^x is first computed to ~2 ulp of double (equal to the correct rounding
          // except within 2^-50, relative, of a breakpoint of the stage format)
  fp32,   // the argument rounded to fp32, e^x by the C library's expf (std::exp(float), glibc: < 1 ulp, not
          // always correctly rounded), the float result rounded to the stage format: CUDA's expf then a cast
};
inline constexpr EnumTable<ExpVia, 2> kExpVias = {{
    {ExpVia::exact, "exact", "e^x rounded once to the stage format"},
    {ExpVia::fp32, "fp32", "argument rounded to fp32, expf, then rounded to the stage format"},
}};
static_assert(enum_table_in_order(kExpVias) && static_cast<std::size_t>(ExpVia::fp32) + 1 == kExpVias.size());

// How split-KV parts are stored and merged (the merge stage only; docs/decode.md, "Split-KV merge models").
enum class MergeModel {
  // Flash-decoding as the kernels store it (FA2's splitkv + combine kernels, vLLM's paged attention v2,
  // FlashInfer's merge_state): each part t ends its own softmax, O_t = Õ_t/l_t rounded to div, then stored in
  // the `partial` format; lse_t = m_t + log l_t stored in the `lse` format. The combine, in the merge stage:
  // L = max_t lse_t, s = Σ_t e^{lse_t − L}, lse = L + log s, O = Σ_t e^{lse_t − lse}·O_t (each step one
  // rounding); then O/1 through div (a no-op when div is at least as wide as merge) and the output cast.
  normalised_lse,
  // The unnormalised state of each part (Õ_t, m_t, l_t) kept unrounded and merged in the merge stage:
  // M = max m_t, a_t = e^{m_t − M}, l = Σ a_t·l_t, O = Σ a_t·Õ_t, then O/l (div) and the output cast. A
  // kernel that keeps the parts' raw accumulators (or an on-chip split within one CTA).
  unnormalised,
};
inline constexpr EnumTable<MergeModel, 2> kMergeModels = {{
    {MergeModel::normalised_lse, "normalised_lse", "each part stores O_t/l_t and lse_t (flash-decoding kernels)"},
    {MergeModel::unnormalised, "unnormalised", "each part's (Õ_t, m_t, l_t) kept unrounded"},
}};
static_assert(enum_table_in_order(kMergeModels) &&
              static_cast<std::size_t>(MergeModel::unnormalised) + 1 == kMergeModels.size());
const char* merge_model_name(MergeModel m);
MergeModel merge_model_by_name(std::string_view name);  // throws InputError naming the known models

// The storage of the parts between the split kernel and the combine kernel (normalised_lse only). Formats
// absent are the merge stage's own format (as Reduction::acc); both round with the merge stage's
// RoundOptions. Presets: partial = the out stage's format (vLLM, FlashInfer: the output dtype; FA2's own
// combine reads an fp32 buffer: "partial": "fp32"), lse = fp32 and the merge stage fp32 (every kernel).
struct MergeSpec {
  MergeModel model = MergeModel::normalised_lse;
  std::optional<Format> partial;  // each part's normalised output O_t
  std::optional<Format> lse;      // each part's lse_t
  bool operator==(const MergeSpec&) const = default;
};

struct StageSpec {
  StageSpec() = default;
  StageSpec(Format f, RoundOptions r = {}) : format(std::move(f)), round(r) {}  // NOLINT: a format is a stage
  Format format;
  RoundOptions round;  // mode (rne, rna, rz, ru, rd, ro, sr), overflow (ieee, saturate), ftz/daz
  Reduction reduce;    // used by the stages that reduce (sum, mean)
  ExpVia via = ExpVia::exact;  // used by the exp stage only
  MergeSpec merge;             // used by the merge stage only
  const Format& acc() const { return reduce.acc ? *reduce.acc : format; }
  const Format& partial() const { return merge.partial ? *merge.partial : format; }
  const Format& lse() const { return merge.lse ? *merge.lse : format; }
  bool operator==(const StageSpec& o) const;
};

// Every stage in format f with the default rounding (RNE, IEEE overflow).
std::array<StageSpec, kStageCount> uniform_stages(const Format& f);

struct Allocation {
  std::string name = "fp64";
  GemmModel gemm;
  std::array<StageSpec, kStageCount> stages = uniform_stages(format_by_name("fp64"));
  // A model for one GEMM in place of `gemm`. None in the presets and in JSON (which names one model for every
  // GEMM); error attribution sets one where lifting a stage to fp64 feeds a tensor-core GEMM operands wider
  // than the engine takes (docs/attribution.md, "lifted GEMMs").
  std::array<std::optional<GemmModel>, kGemmCount> gemm_override{};
  const GemmModel& gemm_of(GemmId g) const {
    const auto& o = gemm_override[static_cast<std::size_t>(g)];
    return o ? *o : gemm;
  }

  // By name (stage_names()); throws InputError naming the unknown stage and the known ones.
  Format& stage(std::string_view name);
  const Format& stage(std::string_view name) const;
  StageSpec& spec(std::string_view name);
  const StageSpec& spec(std::string_view name) const;
  StageSpec& spec(Stage s) { return stages[static_cast<std::size_t>(s)]; }
  const StageSpec& spec(Stage s) const { return stages[static_cast<std::size_t>(s)]; }
  bool operator==(const Allocation&) const = default;
};

std::vector<std::string> stage_names();
const std::string& stage_name(Stage s);
Stage stage_by_name(std::string_view name);  // throws InputError

const char* reduce_order_name(ReduceOrder o);
ReduceOrder reduce_order_by_name(std::string_view name);  // throws InputError naming the known orders
const char* exp_via_name(ExpVia v);
ExpVia exp_via_by_name(std::string_view name);  // throws InputError naming the known values

// Presets: fp64, fa_fp32 (Fig. 1), fa_fp16_fp32 (Fig. 2), fa_fp16 (Fig. 3), pasa_fp16 (Alg. 1),
// fa_fp32_bf16, fa_bf16_fp32, fa_bf16, pasa_bf16, fa_fp8, pasa_fp8. Their reductions accumulate in fp32 and
// round once (hardware practice); where that differs from the strict model (a sum or mean stage narrower than
// fp32: fa_fp16, pasa_fp16, fa_bf16, pasa_bf16, pasa_fp8), `<preset>_strict` keeps every partial sum in the
// stage format. Throws InputError for unknown names.
// Split-KV: every preset merges as the flash-decoding kernels do (MergeModel::normalised_lse, partials in
// the out format, lse and the merge arithmetic in fp32 — fp64 in fp64).
// `<preset>_h100` (every preset but fp64): the same stages with the GEMMs under the H100's tensor-core model
// for the Q stage's format (tensor_core_preset "h100_fp16", "h100_bf16" or "h100_e4m3"): opt-in, the plain
// presets keep the `ordered` model.
Allocation allocation_preset(std::string_view name);
std::vector<std::string> allocation_preset_names();

// Whether attention's engines take f as an input or stage format: an IEEE 754-like grid with IEEE or fn
// specials (fp64 ... fp8_e5m2, custom "p=,emax="). The element formats of block-scaled quantisation (fp6,
// fp4, e8m0, int8/int4, hif8) are not: their grids, ranges and NaN rules are outside what the engines' fast
// paths are written for, so they are refused by name rather than rounded on a wrong grid.
bool attention_format(const Format& f);
// InputError "<where>stage <s>: ..." for the first stage (format, acc, partial, lse) attention_format refuses,
// or whose rounding is hybrid (HiFloat8's conversion rounding, not a stage's).
void check_stage_formats(const Allocation& a, const std::string& where);

}  // namespace pasa
