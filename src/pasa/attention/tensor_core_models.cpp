// The named tensor-core models: ONE table, one entry per instruction family and architecture, with where its
// parameters come from. tensor_core_preset, tensor_core_preset_names and the docs' table read it.
//
// The parameters per architecture follow MMA-Sim (microsoft/MMA-Sim, commit c785138, `mmasim/simulator/
// nv_ptx.py`: `arch_accum_fractional_bits`, `is_split_k`, the block-scale kinds' 35 / 25 bits;
// `simulator/arithmetic.py`: `nv_fused_dot_add`, `nv_fused_dot_add_with_block_scale`) and Khattak &
// Mikaitis, "Accurate Models of NVIDIA Tensor Cores" (arXiv:2512.07004). In pasa's terms (TensorCore,
// allocation.hpp) one `mma` of k products is one block of k products (the accumulator one of its terms);
// a split-K instruction (Ampere and Ada m16n8k16 f16/bf16, m16n8k8 tf32, m16n8k32 fp8: two fused dot-adds
// of k/2, each with the accumulator) is a block of k/2. align_bits is MMA-Sim's fractional bits; every fused
// dot-add normalises toward zero into fp32 (or e8m13: acc_bits 14). Every published entry counts zeros at
// exponent −126 as MMA-Sim does (zero_at_emin). The tests compare each against vectors drawn with MMA-Sim
// (tests/data/mmasim/, tests/attention/test_tensor_core_models.cpp).
#include <cmath>

#include <fmt/format.h>

#include "pasa/attention/allocation.hpp"
#include "pasa/core/error.hpp"

namespace pasa {
namespace {

constexpr const char* kMmaSim = "MMA-Sim nv_ptx.py (c785138)";

const std::vector<TensorCoreModel>& table() {
  static const std::vector<TensorCoreModel> t = {
      // ---- measured on an H100 (experiments/gpu/tc_probe.py, tc_random.py; results/hardware/tc_*.csv) ----
      {.name = "h100_fp16", .arch = "Hopper (sm_90)", .instruction = "wgmma f16 (cuBLAS torch.mm)",
       .evidence = TcEvidence::measured_here, .source = "tc_probe.py on an H100", .tc = {}},
      {.name = "h100_bf16", .arch = "Hopper (sm_90)", .instruction = "wgmma bf16 (cuBLAS torch.mm)",
       .evidence = TcEvidence::measured_here, .source = "tc_probe.py on an H100", .tc = {}},
      {.name = "h100_tf32", .arch = "Hopper (sm_90)", .instruction = "wgmma tf32 (cuBLAS torch.mm)",
       .evidence = TcEvidence::measured_here, .source = "tc_probe.py on an H100", .tc = {.block = 8}},
      {.name = "h100_e4m3", .arch = "Hopper (sm_90)", .instruction = "wgmma e4m3 (torch._scaled_mm)",
       .evidence = TcEvidence::measured_here, .source = "tc_probe.py on an H100",
       .tc = {.block = 32, .align_bits = 13, .promote = 128, .acc_bits = 14}},
      {.name = "h100_e5m2", .arch = "Hopper (sm_90)", .instruction = "wgmma e5m2 (torch._scaled_mm)",
       .evidence = TcEvidence::measured_here, .source = "tc_probe.py on an H100",
       .tc = {.block = 32, .align_bits = 13, .promote = 128, .acc_bits = 14}},
      {.name = "h100_e4m3_fast", .arch = "Hopper (sm_90)", .instruction = "wgmma e4m3 (_scaled_mm, use_fast_accum)",
       .evidence = TcEvidence::measured_here, .source = "tc_probe.py on an H100",
       .tc = {.block = 32, .align_bits = 13, .acc_bits = 14}},
      {.name = "h100_e5m2_fast", .arch = "Hopper (sm_90)", .instruction = "wgmma e5m2 (_scaled_mm, use_fast_accum)",
       .evidence = TcEvidence::measured_here, .source = "tc_probe.py on an H100",
       .tc = {.block = 32, .align_bits = 13, .acc_bits = 14}},
      // The f16-accumulator form (an fp16 acc stage): MMA-Sim's Hopper fused sum (25 fractional bits), each
      // instruction's result rounded to nearest even in fp16 (nv_fused_dot_add output_type "f16"), measured as
      // Triton's tl.dot(..., out_dtype=float16) of SageAttention's SA1 kernel (sage_capture.py dot16)
      {.name = "h100_fp16_f16acc", .arch = "Hopper (sm_90)", .instruction = "wgmma f16 with an f16 accumulator",
       .evidence = TcEvidence::measured_here, .source = "MMA-Sim's f16 output; sage_capture.py dot16 on an H200 (every bit of 32 tiles)",
       .tc = {.block_round = RoundMode::nearest_even}},
      {.name = "exact", .arch = "-", .instruction = "the ideal wide adder", .evidence = TcEvidence::ideal,
       .source = "-", .tc = {.align_bits = kUnlimitedAlign, .block_round = RoundMode::nearest_even}},
      // (Hopper's mma.sync FP8, m16n8k32, measured on an H200, is no model of this space: not e8m13, results at
      // fp32 level; results/hardware/mma_probe/fp8_mma_findings.json. No preset until it is modelled.)
      // ---- Volta .. Ada mma.sync (published) ----
      {.name = "volta_fp16", .arch = "Volta (sm_70)", .instruction = "mma.sync m8n8k4 f16 f32",
       .source = kMmaSim, .tc = {.block = 4, .align_bits = 23, .zero_at_emin = true}},
      {.name = "turing_fp16", .arch = "Turing (sm_75)", .instruction = "mma.sync m16n8k8 f16 f32",
       .source = kMmaSim, .tc = {.block = 8, .align_bits = 24, .zero_at_emin = true}},
      {.name = "a100_fp16", .arch = "Ampere (sm_80)", .instruction = "mma.sync m16n8k16 f16 f32 (split-K: 2 x k8)",
       .source = kMmaSim, .tc = {.block = 8, .align_bits = 24, .zero_at_emin = true}},
      {.name = "a100_bf16", .arch = "Ampere (sm_80)", .instruction = "mma.sync m16n8k16 bf16 f32 (split-K: 2 x k8)",
       .source = kMmaSim, .tc = {.block = 8, .align_bits = 24, .zero_at_emin = true}},
      {.name = "a100_tf32", .arch = "Ampere (sm_80)", .instruction = "mma.sync m16n8k8 tf32 f32 (split-K: 2 x k4)",
       .source = kMmaSim, .tc = {.block = 4, .align_bits = 24, .operand_bits = 11, .zero_at_emin = true}},
      {.name = "ada_fp16", .arch = "Ada (sm_89)", .instruction = "mma.sync m16n8k16 f16 f32 (split-K: 2 x k8)",
       .source = kMmaSim, .tc = {.block = 8, .align_bits = 24, .zero_at_emin = true}},
      {.name = "ada_bf16", .arch = "Ada (sm_89)", .instruction = "mma.sync m16n8k16 bf16 f32 (split-K: 2 x k8)",
       .source = kMmaSim, .tc = {.block = 8, .align_bits = 24, .zero_at_emin = true}},
      {.name = "ada_tf32", .arch = "Ada (sm_89)", .instruction = "mma.sync m16n8k8 tf32 f32 (split-K: 2 x k4)",
       .source = kMmaSim, .tc = {.block = 4, .align_bits = 24, .operand_bits = 11, .zero_at_emin = true}},
      {.name = "ada_e4m3", .arch = "Ada (sm_89)", .instruction = "mma.sync m16n8k32 e4m3 f32 (split-K: 2 x k16)",
       .source = kMmaSim, .tc = {.block = 16, .align_bits = 13, .acc_bits = 14, .zero_at_emin = true}},
      {.name = "ada_e5m2", .arch = "Ada (sm_89)", .instruction = "mma.sync m16n8k32 e5m2 f32 (split-K: 2 x k16)",
       .source = kMmaSim, .tc = {.block = 16, .align_bits = 13, .acc_bits = 14, .zero_at_emin = true}},
      // ---- Blackwell tcgen05.mma (published) ----
      {.name = "b200_fp16", .arch = "Blackwell (sm_100)", .instruction = "tcgen05.mma kind::f16 (k16) f32",
       .source = kMmaSim, .tc = {.block = 16, .align_bits = 25, .zero_at_emin = true}},
      {.name = "b200_bf16", .arch = "Blackwell (sm_100)", .instruction = "tcgen05.mma kind::f16 bf16 (k16) f32",
       .source = kMmaSim, .tc = {.block = 16, .align_bits = 25, .zero_at_emin = true}},
      {.name = "b200_tf32", .arch = "Blackwell (sm_100)", .instruction = "tcgen05.mma kind::tf32 (k8) f32",
       .source = kMmaSim, .tc = {.block = 8, .align_bits = 25, .operand_bits = 11, .zero_at_emin = true}},
      {.name = "b200_f8f6f4", .arch = "Blackwell (sm_100)", .instruction = "tcgen05.mma kind::f8f6f4 (k32) f32",
       .source = kMmaSim, .tc = {.block = 32, .align_bits = 25, .zero_at_emin = true}},
      {.name = "b200_mxf8f6f4", .arch = "Blackwell (sm_100)",
       .instruction = "tcgen05.mma.block_scale kind::mxf8f6f4 (k32, ue8m0 per 32) f32", .source = kMmaSim,
       .tc = {.block = 32, .align_bits = 25, .zero_at_emin = true, .scale = BlockScale::e8m0, .scale_block = 32}},
      {.name = "b200_mxf4", .arch = "Blackwell (sm_100)",
       .instruction = "tcgen05.mma.block_scale kind::mxf4 (k64, ue8m0 per 32) f32", .source = kMmaSim,
       .tc = {.block = 64, .align_bits = 35, .zero_at_emin = true, .scale = BlockScale::e8m0, .scale_block = 32,
              .group = 16}},
      {.name = "b200_mxf4nvf4", .arch = "Blackwell (sm_100)",
       .instruction = "tcgen05.mma.block_scale kind::mxf4nvf4 (k64, ue4m3 per 16) f32", .source = kMmaSim,
       .tc = {.block = 64, .align_bits = 35, .zero_at_emin = true, .scale = BlockScale::ue4m3, .scale_block = 16,
              .group = 16}},
      // ---- RTX Blackwell mma.sync (sm_120; published) ----
      {.name = "sm120_e4m3", .arch = "RTX Blackwell (sm_120)", .instruction = "mma.sync m16n8k32 kind::f8f6f4 f32",
       .source = kMmaSim, .tc = {.block = 32, .align_bits = 25, .zero_at_emin = true}},
      {.name = "sm120_mxf8f6f4", .arch = "RTX Blackwell (sm_120)",
       .instruction = "mma.sync.block_scale m16n8k32 kind::mxf8f6f4 (ue8m0 per 32) f32", .source = kMmaSim,
       .tc = {.block = 32, .align_bits = 25, .zero_at_emin = true, .scale = BlockScale::e8m0, .scale_block = 32}},
      {.name = "sm120_mxf4nvf4", .arch = "RTX Blackwell (sm_120)",
       .instruction = "mma.sync.block_scale m16n8k64 kind::mxf4nvf4 (ue4m3 per 16) f32", .source = kMmaSim,
       .tc = {.block = 64, .align_bits = 35, .zero_at_emin = true, .scale = BlockScale::ue4m3, .scale_block = 16,
              .group = 16}},
      // ---- integer mma (Turing on): exact int32 (measured on an H200: mma_probe.py; torch._int_mm saturates) ----
      {.name = "int8", .arch = "Turing .. Blackwell", .instruction = "mma.sync m16n8k32 s8 s32",
       .evidence = TcEvidence::measured_here, .source = "mma_probe.py on an H200 (results/hardware/mma_probe/)",
       .tc = {.block = 32, .integer = TcInteger::wrap}},
      {.name = "int8_satfinite", .arch = "Turing .. Blackwell", .instruction = "mma.sync m16n8k32 s8 s32 .satfinite",
       .evidence = TcEvidence::measured_here, .source = "mma_probe.py on an H200; torch._int_mm (cuBLASLt) saturates too",
       .tc = {.block = 32, .integer = TcInteger::saturate}},
  };
  return t;
}

}  // namespace

const std::vector<TensorCoreModel>& tensor_core_models() { return table(); }

bool tc_group_exact(const Format& a, const Format& b, int group) {
  const double span = std::log2(static_cast<double>(group) * a.max_finite() * b.max_finite()) -
                      std::log2(a.min_subnormal() * b.min_subnormal());
  return span <= 53.0;
}

TensorCore tensor_core_preset(std::string_view name) {
  for (const auto& m : table())
    if (m.name == name) return m.tc;
  throw InputError(fmt::format("unknown tensor-core model \"{}\"; known: {}", name,
                               fmt::join(tensor_core_preset_names(), ", ")));
}

std::vector<std::string> tensor_core_preset_names() {
  std::vector<std::string> n;
  for (const auto& m : table()) n.emplace_back(m.name);
  return n;
}

const char* block_scale_name(BlockScale s) { return enum_name(kBlockScales, s).data(); }
BlockScale block_scale_by_name(std::string_view name) {
  if (const auto s = enum_by_name(kBlockScales, name)) return *s;
  throw InputError(fmt::format("unknown block scale \"{}\"; known: {}", name, enum_names_joined(kBlockScales)));
}
const char* tc_integer_name(TcInteger i) { return enum_name(kTcIntegers, i).data(); }
TcInteger tc_integer_by_name(std::string_view name) {
  if (const auto i = enum_by_name(kTcIntegers, name)) return *i;
  throw InputError(fmt::format("unknown integer accumulation \"{}\"; known: {}", name, enum_names_joined(kTcIntegers)));
}

}  // namespace pasa
