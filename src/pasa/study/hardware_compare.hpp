// The emulator against a real GPU (experiments/gpu/): the toolkit runs the inputs a GPU ran, under the
// allocation and algorithm that match each GPU port (configs/hardware/<label>.json), and the two outputs are
// compared against the golden (PASA Eq. 19) and against each other in ulps of the output format; and the
// rounding layer is compared with the GPU's own float32 → fp16/bf16/fp8 conversions, bit for bit.
//
// GPU folder for attention (written by experiments/gpu/make_inputs.py and attention_ports.py):
//   manifest.json  {"cases": [{"name", "generator", "x0", "Am", "seed", "shape", "dtype",
//                              "files": {"fp16": ["q.npy", "k.npy", "v.npy"], "bf16": [...]}}, ...]}
//   <case>/q.npy ... and <case>/out_<label>.npy (float16, or uint16 bf16 bit patterns)
// Hardware config (configs/hardware/<label>.json; <label> is the file's stem):
//   {"description": "...", "input": "fp16" | "bf16", "algorithm": <algorithm JSON (io/algorithm_json.hpp)>}
// GPU folder for conversions (experiments/gpu/conversions.py):
//   conv_<fmt>.bin (fmt: fp16, bf16, fp8_e4m3, fp8_e5m2): little-endian storage bits (uint16 / uint8) of the
//   conversion of every float32 bit pattern first .. first + count − 1 in order; conv_range.json
//   {"first": F, "count": C} (absent: the full range 0 .. 2^32 − 1).
#pragma once

#include <cstddef>
#include <span>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <utility>
#include <string>
#include <vector>

#include "pasa/attention/allocation.hpp"
#include "pasa/attention/gemm.hpp"
#include "pasa/core/parallel.hpp"
#include "pasa/inputs/tensor.hpp"
#include "pasa/numeric/format.hpp"
#include "pasa/numeric/round.hpp"

namespace pasa {

// Distance between two outputs element by element, in ulps of their format: the number of representable
// values between them (±0 count as one value, so +0 vs −0 is "identical"; inf is one step past max_finite).
// Across a sign change the distance runs through zero: −x vs +y is ord(x) + ord(y), where ord counts the
// values from 0 (e.g. ∓min_subnormal are 2 ulps apart; −1 vs +1 in fp16 is 2·15360 = 30720), so a sign
// error shows as a max_ulp of the order of the format's value count, never as a small number.
struct UlpHistogram {
  std::size_t elements = 0;
  std::size_t identical = 0;     // equal values, or both NaN
  std::size_t ulp1 = 0;          // 1 ulp apart
  std::size_t ulp2_4 = 0;        // 2 to 4 ulps
  std::size_t ulp_over4 = 0;     // more than 4 ulps
  std::size_t nan_mismatch = 0;  // one NaN, the other not
  std::uint64_t max_ulp = 0;     // over the pairs that are not NaN mismatches
};
// Throws InputError when the shapes or formats differ or a value is not exact in the format.
UlpHistogram ulp_histogram(const Tensor& a, const Tensor& b);

struct HwAttentionRow {
  std::string case_name, generator, label, input, out_format, status;  // status: "ok" or what is missing
  double x0 = 0, am = 0;
  std::uint64_t seed = 0;
  double rmse_gpu = 0, rmse_emu = 0, ratio = 0, nan_pct_gpu = 0, nan_pct_emu = 0;
  UlpHistogram ulps;
};

struct HwAttentionOptions {
  std::filesystem::path gpu_dir, configs_dir;
  int threads = default_threads();
  std::size_t max_memory = 0;  // the memory a case may use (0: MemAvailable); checked from the .npy headers
};
// One row per (case, label) in manifest order × label order (sorted file stems). A missing out_<label>.npy
// gives a row with status "missing <file>" (and NaN figures). Errors (InputError) name the file and problem.
std::vector<HwAttentionRow> compare_attention(const HwAttentionOptions&);
std::string hw_attention_csv(const std::vector<HwAttentionRow>&);

// C = A·B under a GEMM model, for the front ends (pasa-gemm, pasa.gemm): `batch` products of row-major
// A (m × k) and B (k × n) (consecutive in A and B), their values those of spec.a_format / spec.b_format;
// returns C (batch × m × n), values of spec.out. The same bits as gemm() (attention/gemm.hpp) per product.
// What batched_gemm needs checked before any operand is read, so that a front end refuses at once with the
// figures: the model against the operands (a tensor-core model takes operands of at most
// kTensorCoreMaxOperandBits bits and rne, rna, rz, ru or rd; `model_where` names the model's option) and the
// memory: the operands and C as doubles, C's .npy bytes and the caller's `buffer_bytes` (operand bytes held
// while decoded), against `max_memory` (0: what the machine has available).
void check_batched_gemm(const GemmSpec& spec, std::size_t batch, std::size_t m, std::size_t n, std::size_t k,
                        std::size_t buffer_bytes, std::size_t max_memory, const std::string& model_where);
std::vector<double> batched_gemm(const GemmSpec& spec, std::size_t batch, std::size_t m, std::size_t n, std::size_t k,
                                 std::span<const double> A, std::span<const double> B);
// The tensor-core model an H100 applies to inputs of this format, as the "_h100" presets choose it
// (allocation.hpp): fp16, bf16, tf32, fp8_e4m3fn (h100_e4m3), fp8_e5m2 (h100_e5m2). InputError for others.
GemmModel h100_gemm_model(const Format& input);
// A GEMM model named by the front ends: "ordered", "chunked", "every_op", a tensor-core model name
// (tensor_core_preset_names(): "h100_fp16", "exact", ...), "h100" (h100_gemm_model of `input`), or the JSON
// text of the allocation's "gemm" object ('{...}'). Errors name `where`.
GemmModel gemm_model_by_name(const std::string& name, const Format& input, const std::string& where);

// A GPU GEMM against the tensor-core model (experiments/gpu/tc_probe.py, tc_random.py): A (nb, M, K) and Bt
// (nb, N, K) .npy as the GPU multiplied them (storage of their formats: float16, float32, or uint16/uint8 bit
// patterns of bf16 / fp8), C (nb, M, N) the GPU's outputs in out_format; 2-D arrays (M, K), (N, K), (M, N) are
// one product (nb = 1). The model computes every C[q] =
// A[q]·Bt[q]ᵀ with the accumulator `acc` (fp32) and rounds to out_format (RNE); inputs are first rounded to
// `convert` (e.g. float32 → tf32 inside cuBLAS) when given.
struct HwGemmOptions {
  std::filesystem::path a, b, c;
  Format a_format, b_format, out_format;
  GemmModel model;
  std::optional<std::pair<Format, RoundOptions>> convert;  // the inputs' conversion before the GEMM
  std::size_t max_mismatches = 0;                           // listed, in output order
  std::size_t max_memory = 0;  // the memory the comparison may use (0: MemAvailable); checked from the headers
};
struct HwGemmMismatch {
  std::size_t q = 0, i = 0, j = 0;
  double gpu = 0, model = 0;
};
struct HwGemmResult {
  UlpHistogram ulps;
  std::vector<HwGemmMismatch> mismatches;
};
HwGemmResult compare_gemm(const HwGemmOptions&);

struct HwConversionMismatch {
  std::uint32_t input = 0;
  std::uint64_t pasa_bits = 0, gpu_bits = 0;
};
struct HwConversionRow {
  std::string format;
  std::uint64_t first = 0, count = 0;
  std::string overflow;              // the overflow policy compared (the one matching PyTorch's documented behaviour)
  std::uint64_t mismatches = 0;      // under `overflow`
  std::string other_overflow;
  std::uint64_t other_mismatches = 0;  // under the other policy
  std::vector<HwConversionMismatch> first_mismatches;  // up to 20, under `overflow`, in input order
};
struct HwConversionOptions {
  std::filesystem::path gpu_dir;
  int threads = default_threads();
};
// The overflow policy of PyTorch's float32 → fmt conversion (tensor.to(dtype)): IEEE for every format; for
// float8_e4m3fn (no inf) c10/util/Float8_e4m3fn.h maps |x| beyond the range (and inf) to NaN, which is
// pasa's Overflow::ieee for fp8_e4m3 — not saturation (that is torch's explicit clamp in FP8 training).
Overflow torch_overflow(const Format& fmt);
// Every conv_<fmt>.bin present (at least one, else InputError naming the folder); RNE conversions from the
// float32 inputs; NaN matches NaN whatever the payload and sign.
std::vector<HwConversionRow> compare_conversions(const HwConversionOptions&);
std::string hw_conversions_csv(const std::vector<HwConversionRow>&);

}  // namespace pasa
