// Block scaling as a value: a scheme (which values share a scale, the scale's format and rule, the element
// format, rounding and saturation) is a descriptor in ONE registry (kBlockSchemes below), so that a new
// scheme is one table entry and no new code path. block_quantise applies a scheme to a matrix view; the
// attention engines apply it to Q, K, V or P (attention/quantise.hpp), pasa.block_quantise and
// `pasa-round --block` to arrays. Conventions and sources: docs/block-scaling.md.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "pasa/core/enum_table.hpp"
#include "pasa/numeric/format.hpp"
#include "pasa/numeric/round.hpp"

namespace pasa {

// Which values share a scale, in a matrix view of R rows × C columns whose columns run along the block
// axis (the GEMM's contracting axis: D for Q and K, the keys for P, the tokens for V). With the axis D,
// `row` is per token and `column` per channel; in attention they keep that meaning for V too, whose view
// is transposed (attention/quantise.cpp block_quantise_heads swaps them there).
enum class Grouping {
  tensor,  // one scale for every matrix of the tensor (FA3 per tensor)
  row,     // one per row (per token): a block as long as the axis
  column,  // one per column (per channel), over all rows of a matrix
  block,   // 1 × cols along the axis (OCP MX: 32; NVFP4: 16), the last block of a row cut short
  tile,    // rows × cols tiles (0: the whole extent): SageAttention's per-block (128 × D for Q, 64 × D for K)
  thread,  // tiles of `rows` rows whose rows are dealt to `threads` groups as mma.sync's fragments hold them
};
inline constexpr EnumTable<Grouping, 6> kGroupings = {{
    {Grouping::tensor, "tensor", "one scale for the whole tensor"},
    {Grouping::row, "row", "one scale per row (per token when the axis is D)"},
    {Grouping::column, "column", "one scale per column (per channel when the axis is D)"},
    {Grouping::block, "block", "blocks of `cols` values along the axis"},
    {Grouping::tile, "tile", "tiles of `rows` x `cols` values (0: the whole extent)"},
    {Grouping::thread, "thread", "SageAttention2's per-thread groups: tiles of `rows` rows dealt to `threads` groups"},
}};
static_assert(enum_table_in_order(kGroupings));

// How a group's scale X follows from its largest magnitude amax (vmax: the element format's largest value,
// emax_elem: the exponent of its largest binade). Power-of-two rules give 2^e; the others a value of the
// scale format. Each names its source; docs/block-scaling.md says where they differ.
enum class ScaleRule {
  floor,     // OCP MX v1.0 §6.3: X = 2^(floor(log2 amax) − emax_elem)
  ceil,      // torchao CEIL: X = 2^(ceil(log2 amax) − emax_elem)
  even,      // torchao EVEN: X = 2^(floor(log2 RNA_{p_elem}(amax)) − emax_elem) (amax rounded half up first)
  rceil,     // cuBLAS / torchao RCEIL: fp32(fp32(amax) · fp32(1/vmax)) rounded up to the scale format
  round_up,  // cuDNN frontend block_scale_quantize: the exact amax / vmax rounded up to the scale format
  nearest,   // fp32(amax / vmax) rounded to nearest even in the scale format (torchao NVFP4, SageAttention per-block)
  recip,     // fp32(fp32(amax) · fp32(1/vmax)) to nearest (torch's `amax / 448.0`: FA3's scale, fp8_scale)
  sage,      // SageAttention per-thread: fp32(fp32(amax / vmax) + fp32(1e-7))
};
inline constexpr EnumTable<ScaleRule, 8> kScaleRules = {{
    {ScaleRule::floor, "floor", "OCP MX v1.0 6.3: 2^(floor(log2 amax) - emax_elem)"},
    {ScaleRule::ceil, "ceil", "torchao CEIL: 2^(ceil(log2 amax) - emax_elem)"},
    {ScaleRule::even, "even", "torchao EVEN: 2^(floor(log2 of amax rounded half up to the element's bits) - emax_elem)"},
    {ScaleRule::rceil, "rceil", "cuBLAS / torchao RCEIL: fp32(amax * fp32(1/vmax)) rounded up to the scale format"},
    {ScaleRule::round_up, "round_up", "cuDNN block_scale_quantize: amax / vmax rounded up to the scale format"},
    {ScaleRule::nearest, "nearest", "fp32(amax / vmax) rounded to nearest even in the scale format"},
    {ScaleRule::recip, "recip", "fp32(amax * fp32(1/vmax)) to nearest (torch's amax / 448.0; FA3)"},
    {ScaleRule::sage, "sage",
     "SageAttention per-thread: fp32(amax * rcp(vmax) + 1e-7), one FFMA under Triton's division (divide "
     "rcp_approx); fp32(fp32(amax / vmax) + 1e-7) under IEEE division"},
}};
static_assert(enum_table_in_order(kScaleRules));

// How a scheme's fp32 divisions (amax / vmax of the nearest and sage rules; x / X of the fp32 quotients) round.
enum class Divide {
  ieee,        // one rounding of the exact quotient (div.rn.f32)
  rcp_approx,  // RN(a · MUFU.RCP(b)): Triton's `/` on float32 (div.full.f32: every one of 2^20 random quotients,
               // sage_capture.py), and CUDA's a / b under --use_fast_math
};
inline constexpr EnumTable<Divide, 2> kDivides = {{
    {Divide::ieee, "ieee", "a / b rounded once (div.rn)"},
    {Divide::rcp_approx, "rcp_approx", "RN(a * rcp.approx(b)) (Triton's float32 /, --use_fast_math)"},
}};
static_assert(enum_table_in_order(kDivides));

// How the quotient x / X reaches the element rounding.
enum class Quotient {
  exact,       // rounded once from the exact quotient (OCP MX v1.0 §6.3; exact for power-of-two X)
  fp32_div,    // fp32(x / X) first (SageAttention's Triton kernels: x / scale in fp32)
  fp32_recip,  // fp32(x · fp32(1/X)) first (torchao: data_hp * reciprocal)
  fp32_div_half,  // fp32(fp32(x / X) ± 0.5), the sign of the quotient's (+ for 0), then rounded: SageAttention's
                  // int8 kernels add 0.5·sign and truncate (.to(tl.int8)), so pair it with round "rz" —
                  // that is RNA of the quotient except where the fp32 addition itself rounds up to an integer
                  // (triton/quant_per_block.py:42-45, quant_per_thread.py:41-44)
  recip_of_amax,  // fp32(x · r), r = fp32(vmax / amax) (SageAttention's CUDA quantisers: fused.cu :169, :399,
                  // :415): an all-zero group has r = inf and elements 0·inf = NaN, as the kernel gives
};
inline constexpr EnumTable<Quotient, 5> kQuotients = {{
    {Quotient::exact, "exact", "x / X rounded once to the element"},
    {Quotient::fp32_div, "fp32_div", "fp32(x / X), then rounded to the element"},
    {Quotient::fp32_recip, "fp32_recip", "fp32(x * fp32(1/X)), then rounded to the element"},
    {Quotient::fp32_div_half, "fp32_div_half", "fp32(fp32(x / X) + 0.5 sign), then rounded (SageAttention: rz)"},
    {Quotient::recip_of_amax, "recip_of_amax", "fp32(x * fp32(vmax / amax)) (SageAttention CUDA; 0 groups: NaN)"},
}};
static_assert(enum_table_in_order(kQuotients));

struct GroupLayout {
  Grouping group = Grouping::block;
  std::size_t rows = 1, cols = 32;  // tile / thread rows, block / tile columns; 0: the whole extent
  int threads = 0;                  // thread: groups per tile of rows (8 for mma's A rows, 4 for its B columns)
  bool operator==(const GroupLayout&) const = default;
};

// A scheme. `a` groups the A operand of its GEMM (Q, P), `b` the B operand (K, V): SageAttention lays its
// per-warp and per-thread groups of Q and K out differently. Element names: the format registry's, or
// "int8" / "int4" (symmetric integers ±(2^(bits−1) − 1) times 2^−frac_bits, saturating, OCP MX v1.0 §5.2).
struct BlockScheme {
  std::string name;
  std::string element = "fp8_e4m3fn";
  int frac_bits = 0;                  // integer elements only (MXINT8: 6)
  std::string scale_format = "e8m0";  // "e8m0" (2^−127 .. 2^127, 0xFF NaN) or a format registry name
  ScaleRule rule = ScaleRule::floor;
  bool tensor_scale = false;  // NVFP4's second level: an fp32 scale per tensor, amax_t / (vmax_scale · vmax)
  RoundMode round = RoundMode::nearest_even;
  bool saturate = true;
  Quotient quotient = Quotient::exact;
  double target = 0;  // the value a group's amax maps to (its elements' largest); 0: the element's largest
                      // (SageAttention's per-channel V: 448, or 2.25 with fp32+fp16 accumulation)
  Divide divide = Divide::ieee;
  GroupLayout a, b;
  bool operator==(const BlockScheme&) const = default;
};

// The registry: one entry a scheme (designated initializers; the fields not named take the defaults above).
struct BlockSchemeEntry {
  std::string_view name, element;
  int frac_bits = 0;
  std::string_view scale_format = "e8m0";
  ScaleRule rule = ScaleRule::floor;
  bool tensor_scale = false;
  RoundMode round = RoundMode::nearest_even;
  Quotient quotient = Quotient::exact;
  double target = 0;
  Divide divide = Divide::ieee;
  GroupLayout a{}, b{};
  std::string_view source;
};
// SageAttention2 [thu-ml/SageAttention sageattention/quant.py per_warp_int8, triton/quant_per_thread.py]:
// BLKQ 128, WARPQ 32, BLKK 64, WARPK 64.
inline constexpr GroupLayout kSageQBlock{.group = Grouping::tile, .rows = 128, .cols = 0};
inline constexpr GroupLayout kSageKBlock{.group = Grouping::tile, .rows = 64, .cols = 0};
inline constexpr GroupLayout kSageQWarp{.group = Grouping::tile, .rows = 32, .cols = 0};
inline constexpr GroupLayout kSageQThread{.group = Grouping::thread, .rows = 32, .cols = 0, .threads = 8};
inline constexpr GroupLayout kSageKThread{.group = Grouping::thread, .rows = 64, .cols = 0, .threads = 4};
// The sm90 kernel's quantisation (core.py sageattn_qk_int8_pv_fp8_cuda_sm90): BLKQ 64, WARPQ 16, BLKK = WARPK 128.
inline constexpr GroupLayout kSageQThread16{.group = Grouping::thread, .rows = 16, .cols = 0, .threads = 8};
inline constexpr GroupLayout kSageKThread128{.group = Grouping::thread, .rows = 128, .cols = 0, .threads = 4};
inline constexpr GroupLayout kPerChannel{.group = Grouping::column, .rows = 0, .cols = 0};
inline constexpr GroupLayout kMx32{.group = Grouping::block, .rows = 1, .cols = 32};
inline constexpr GroupLayout kNv16{.group = Grouping::block, .rows = 1, .cols = 16};
inline constexpr GroupLayout kPerToken{.group = Grouping::row, .rows = 1, .cols = 0};
inline constexpr std::array<BlockSchemeEntry, 17> kBlockSchemes = {{
    {.name = "mxfp8_e4m3", .element = "fp8_e4m3fn", .a = kMx32, .b = kMx32, .source = "OCP MX v1.0 §5.3 MXFP8"},
    {.name = "mxfp8_e5m2", .element = "fp8_e5m2", .a = kMx32, .b = kMx32, .source = "OCP MX v1.0 §5.3 MXFP8"},
    {.name = "mxfp6_e2m3", .element = "fp6_e2m3", .a = kMx32, .b = kMx32, .source = "OCP MX v1.0 §5.3 MXFP6"},
    {.name = "mxfp6_e3m2", .element = "fp6_e3m2", .a = kMx32, .b = kMx32, .source = "OCP MX v1.0 §5.3 MXFP6"},
    {.name = "mxfp4", .element = "fp4_e2m1", .a = kMx32, .b = kMx32, .source = "OCP MX v1.0 §5.3 MXFP4"},
    {.name = "mxint8", .element = "int8", .frac_bits = 6, .a = kMx32, .b = kMx32,
     .source = "OCP MX v1.0 §5.3 MXINT8 (elements k·2^-6)"},
    {.name = "nvfp4", .element = "fp4_e2m1", .scale_format = "fp8_e4m3fn", .rule = ScaleRule::nearest,
     .tensor_scale = true, .quotient = Quotient::fp32_recip, .a = kNv16, .b = kNv16,
     .source = "torchao nvfp4_tensor.py nvfp4_quantize (two levels)"},
    {.name = "int8_per_block", .element = "int8", .scale_format = "fp32", .rule = ScaleRule::nearest,
     .round = RoundMode::toward_zero, .quotient = Quotient::fp32_div_half, .divide = Divide::rcp_approx, .a = kSageQBlock, .b = kSageKBlock,
     .source = "SageAttention triton/quant_per_block.py:42-45"},
    {.name = "int8_per_warp", .element = "int8", .scale_format = "fp32", .rule = ScaleRule::nearest,
     .quotient = Quotient::recip_of_amax, .divide = Divide::rcp_approx, .a = kSageQWarp, .b = kSageKBlock,
     .source = "SageAttention quant.py per_warp_int8 (Q per WARPQ rows, K per BLKK): fused.cu :147-184, x·(127/amax) "
               "to int8 by cvt.rni.sat"},
    {.name = "int8_per_thread", .element = "int8", .scale_format = "fp32", .rule = ScaleRule::sage,
     .round = RoundMode::toward_zero, .quotient = Quotient::fp32_div_half, .divide = Divide::rcp_approx, .a = kSageQThread, .b = kSageKThread,
     .source = "SageAttention triton/quant_per_thread.py:27-46, 54-98"},
    {.name = "int4_per_thread", .element = "int4", .scale_format = "fp32", .rule = ScaleRule::sage,
     .round = RoundMode::toward_zero, .quotient = Quotient::fp32_div_half, .divide = Divide::rcp_approx, .a = kSageQThread, .b = kSageKThread,
     .source = "SageAttention triton/quant_per_thread.py:101-152"},
    {.name = "int8_per_thread_sm90", .element = "int8", .scale_format = "fp32", .rule = ScaleRule::sage,
     .round = RoundMode::toward_zero, .quotient = Quotient::fp32_div_half, .divide = Divide::rcp_approx, .a = kSageQThread16, .b = kSageKThread128,
     .source = "SageAttention core.py sageattn_qk_int8_pv_fp8_cuda_sm90: per_thread_int8(BLKQ 64, WARPQ 16, BLKK 128)"},
    // V per channel (the B operand of P·V, grouped along its keys: one scale per channel d), E4M3 elements
    // x·(target/amax) under --use_fast_math, scale amax/target fused into O at the end (fused.cu MeanScaleKernel)
    // SageAttention3's FP4 (quantization/fp4_quantization_4d.cu :185-230): per 16 values along D (V: along the
    // keys), SF = amax / 6 under --use_fast_math, to e4m3 and back, elements x · (1 / SF) by cvt.rn.satfinite.e2m1
    {.name = "nvfp4_sa3", .element = "fp4_e2m1", .scale_format = "fp8_e4m3fn", .rule = ScaleRule::nearest,
     .quotient = Quotient::fp32_recip, .divide = Divide::rcp_approx, .a = kNv16, .b = kNv16,
     .source = "SageAttention sageattention3_blackwell quantization/fp4_quantization_4d.cu:185-230 (no tensor scale)"},
    {.name = "fp8_per_channel", .element = "fp8_e4m3fn", .scale_format = "fp32", .rule = ScaleRule::nearest,
     .quotient = Quotient::recip_of_amax, .target = 448, .divide = Divide::rcp_approx, .a = kPerChannel, .b = kPerChannel,
     .source = "SageAttention quant.py per_channel_fp8 (scale_max 448), csrc/fused/fused.cu:317-420"},
    {.name = "fp8_per_channel_2p25", .element = "fp8_e4m3fn", .scale_format = "fp32", .rule = ScaleRule::nearest,
     .quotient = Quotient::recip_of_amax, .target = 2.25, .divide = Divide::rcp_approx, .a = kPerChannel, .b = kPerChannel,
     .source = "SageAttention core.py: scale_max 2.25 with pv_accum_dtype fp32+fp16"},
    // A KV cache with a dynamic scale per (token, head): vLLM's kv_cache_dtype "fp8_per_token_head" and
    // "int8_per_token_head" (amax of the token's D values / the element's largest, in fp32).
    {.name = "fp8_per_token_head", .element = "fp8_e4m3fn", .scale_format = "fp32", .rule = ScaleRule::nearest,
     .a = kPerToken, .b = kPerToken, .source = "vLLM kv_cache_dtype fp8_per_token_head"},
    {.name = "int8_per_token_head", .element = "int8", .scale_format = "fp32", .rule = ScaleRule::nearest,
     .a = kPerToken, .b = kPerToken, .source = "vLLM kv_cache_dtype int8_per_token_head"},
}};

BlockScheme block_scheme_by_name(std::string_view name);  // InputError naming the known schemes
std::string known_block_scheme_names();
// Throws InputError (prefixed by `where`, a JSON path or an option) when a field is impossible: an unknown
// element or scale format, a power-of-two rule with an fp32 scale where it cannot hold the exponent, ...
void validate_block_scheme(const BlockScheme& s, const std::string& where = "");
std::string_view scale_rule_name(ScaleRule r);
ScaleRule scale_rule_by_name(std::string_view name, const std::string& where = "");
Grouping grouping_by_name(std::string_view name, const std::string& where = "");
Quotient quotient_by_name(std::string_view name, const std::string& where = "");

// The element side of a scheme, resolved: the format (integer elements: none) and the numbers the rules use.
struct ElementSpec {
  bool integer = false;
  int bits = 0, frac_bits = 0;  // integer elements
  Format format;                // float elements
  double vmax = 0;              // the largest element value
  int emax = 0;                 // floor(log2 vmax)
  int p = 0;                    // significand bits (integer elements: bits − 1)
};
ElementSpec element_spec(const BlockScheme& s);

// One group's scale from its amax (and the tensor scale st, 1 without a second level). NaN for a group
// that cannot be scaled (amax infinite or NaN, or a power of two above the scale format's range: OCP MX
// §6.3); an all-zero group gets the smallest scale (torchao's clamp), whose elements are all zero.
double block_scale_of(double amax, const BlockScheme& s, const ElementSpec& e, double st = 1.0);
// The NVFP4 tensor scale: fp32(amax_t / (vmax_scale · vmax)) (torchao per_tensor_amax_to_scale); 1 when
// amax_t is 0 or not finite.
double tensor_scale_of(double amax_t, const BlockScheme& s, const ElementSpec& e);
// x / X rounded to the element as the scheme says (rng: stochastic element rounding).
// amax: the group's (Quotient::recip_of_amax only).
double quantise_element(double x, double X, double st, const BlockScheme& s, const ElementSpec& e,
                        RandomBits* rng = nullptr, double amax = 0);
// FA3's scale (attention/quantise.hpp fp8_scale): fp32(fp32(amax) · fp32(1/vmax)), 1 for a zero or
// non-finite amax.
double fp32_recip_scale(double amax, double vmax);

struct BlockQuantised {
  std::vector<double> values;    // elements × scale (× tensor scale): exact in fp64
  std::vector<double> elements;  // the element values (integers: k·2^−frac_bits)
  std::vector<double> scales;    // one per group, matrix after matrix, groups in row-major group order
  double tensor_scale = 1.0;     // the second level (NVFP4); 1 without
  std::size_t groups_per_matrix = 0;
};
// `matrices` matrices of R × C values, row-major, one after the other; operand_b: lay groups out as the B
// operand (`b`) rather than the A operand (`a`).
BlockQuantised block_quantise(const double* x, std::size_t matrices, std::size_t R, std::size_t C,
                              const BlockScheme& s, bool operand_b = false, RandomBits* rng = nullptr);
// The number of groups in one R × C matrix, and the group of (r, c) (tensor: 0 and 1 for all matrices).
std::size_t groups_per_matrix(const GroupLayout& g, std::size_t R, std::size_t C);
std::size_t group_of(const GroupLayout& g, std::size_t R, std::size_t C, std::size_t r, std::size_t c);

}  // namespace pasa
