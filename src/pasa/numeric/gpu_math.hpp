// The float32 instructions and CUDA math functions of NVIDIA's Hopper GPUs that attention kernels use, bit for
// bit as an H200 computes them (measured: results/hardware/kernels/README.md; the CUDA 13 sequences from
// results/hardware/kernels/sass.txt). The hardware units (MUFU.EX2, MUFU.LG2) are tables of their measured
// outputs over one binade, the structure around them tested on the GPU over every float32 input:
//   ex2.approx.ftz.f32  x >= 0: 2^floor(x) · G[frac], x < 0: 2^-floor(|x|) · H[frac(|x|)] (frac cut to 23
//                       bits), 0 below 2^-126, +inf from 128: 0 mismatches in 2^32 (mufu_report.json,
//                       ex2_models.sign_magnitude_measured)
//   rcp.approx.ftz.f32  x = ±2^E · 1.m: ±R[m] · 2^-E, R[m] = rcp(1.m) measured, ±0 where that is below 2^-126;
//                       ±0 and subnormals → ±inf, ±inf → ±0: 0 mismatches in 2^32 (mufu_report.json rcp_model)
//   lg2.approx.ftz.f32  x = 2^e · 1.m, e >= 0: RZ(e + L[m]), L[m] = lg2(1.m): 0 mismatches for x >= 1
//                       (lg2_check.jsonl); below 1 (not used by the kernels modelled here) the same form fails,
//                       so lg2_approx refuses x < 1 (std::domain_error) rather than guess.
// The functions built on them follow the instruction sequences nvcc emits without --use_fast_math (torch's
// FlashAttention-2 build): exp2f, expf, logf as CUDA's libdevice computes them, __logf = lg2.approx · ln2.
#pragma once

namespace pasa::gpu {

float ex2_approx_ftz(float x);  // MUFU.EX2
float rcp_approx_ftz(float x);  // MUFU.RCP (PTX rcp.approx.ftz.f32; also 1.f/x under --use_fast_math)
float lg2_approx_ftz(float x);  // MUFU.LG2, for x >= 1 (and +inf, NaN)
float exp2f(float x);           // CUDA exp2f: x < -126: ex2(x/2)², else ex2(x)
float expf(float x);            // CUDA expf (precise): range reduction in FFMA, ex2, the exponent as an integer
float logf(float x);            // CUDA logf (precise): exponent split and a degree-9 FFMA polynomial
float fast_logf(float x);       // CUDA __logf: lg2.approx · ln2 (for x >= 1; sub-FLT_MIN inputs pre-scaled)

// FlashAttention-4's software exp2 (flash_attn/cute/utils.py ex2_emulation, POLY_EX2[3]; for x <= 127 as the
// kernel assumes): x' = max(x, −127); r = add.rm.ftz(x', 2^23 + 2^22), whose low bits hold floor(x');
// f = RN(x' − RN(r − (2^23 + 2^22))) in [0, 1); p = ((c3·f + c2)·f + c1)·f + 1 in FMAs; the result's bits are
// bits(p) + floor(x')·2^23 (a 32-bit integer add: shl.b32 of bits(r) by 23, add.s32). Pure float32 arithmetic,
// so it is the same on every GPU; experiments/gpu/kernels/ex2_poly_probe.cu checks it on the H200.
float ex2_poly3(float x);

// IEEE float32 fused multiply-add in the rounding direction the FFMA.RM variant names (toward −inf).
float fma_rm(float a, float b, float c);

}  // namespace pasa::gpu
