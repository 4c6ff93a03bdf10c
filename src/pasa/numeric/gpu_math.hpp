// The float32 instructions and CUDA math functions of NVIDIA's Hopper GPUs that attention kernels use, bit for
// bit as an H200 computes them (measured: results/hardware/kernels/README.md; the CUDA 13 sequences from
// results/hardware/kernels/sass.txt). The hardware units (MUFU.EX2, MUFU.LG2) are tables of their measured
// outputs over one binade, the structure around them tested on the GPU over every float32 input:
//   ex2.approx.ftz.f32  x >= 0: 2^floor(x) · G[frac], x < 0: 2^-floor(|x|) · H[frac(|x|)] (frac cut to 23
//                       bits), 0 below 2^-126, +inf from 128: 0 mismatches in 2^32 (mufu_report.json,
//                       ex2_models.sign_magnitude_measured)
//   lg2.approx.ftz.f32  x = 2^e · 1.m, e >= 0: RZ(e + L[m]), L[m] = lg2(1.m): 0 mismatches for x >= 1
//                       (lg2_check.jsonl); below 1 (not used by the kernels modelled here) the same form fails,
//                       so lg2_approx refuses x < 1 (std::domain_error) rather than guess.
// The functions built on them follow the instruction sequences nvcc emits without --use_fast_math (torch's
// FlashAttention-2 build): exp2f, expf, logf as CUDA's libdevice computes them, __logf = lg2.approx · ln2.
#pragma once

namespace pasa::gpu {

float ex2_approx_ftz(float x);  // MUFU.EX2
float lg2_approx_ftz(float x);  // MUFU.LG2, for x >= 1 (and +inf, NaN)
float exp2f(float x);           // CUDA exp2f: x < -126: ex2(x/2)², else ex2(x)
float expf(float x);            // CUDA expf (precise): range reduction in FFMA, ex2, the exponent as an integer
float logf(float x);            // CUDA logf (precise): exponent split and a degree-9 FFMA polynomial
float fast_logf(float x);       // CUDA __logf: lg2.approx · ln2 (for x >= 1; sub-FLT_MIN inputs pre-scaled)

// IEEE float32 fused multiply-add in the rounding direction the FFMA.RM variant names (toward −inf).
float fma_rm(float a, float b, float c);

}  // namespace pasa::gpu
