// cuDNN 9.19's SDPA decode engines (Sq = 1) on sm90, as torch 2.11's CUDNN_ATTENTION backend runs them: not the
// sm90 prefill kernel but sm80 "fort_native" kernels chosen by Skv (results/hardware/kernels/
// cudnn_decode_probe_kernels.json, profiled on an H200). KernelSchedule::decode = cudnn_sm80 selects this path.
#pragma once

#include <cstddef>
#include <vector>

#include "pasa/attention/gemm_spec.hpp"
#include "pasa/attention/kernel_recipe.hpp"

namespace pasa::detail {

// One query row of one head: s2 (Skv) the scores in log2 units, RN(RN(S·scale)·RN(log2 e)); V (Skv × D).
// Writes the row's fp32 output (normalised) into o (D) and returns its LSE (natural units):
//   Skv <= 256  knob_3 64x64: 64-key blocks, online softmax with exp2f, per-thread block sums folded by
//               fma(alpha, l, sum), quad (t0+t1)+(t2+t3), O·RN(1/l);
//   257..512    knob_35 16x128 1x4x1: 128-key blocks, MUFU.EX2; warp w owns keys 32w..32w+31 of every block
//               with its own O_w and per-thread sums; O = (O0+O2)+(O1+O3), l = (W0+W1)+(W2+W3) of the warps'
//               quad sums; O·RN(1/l);
//   >= 513      the knob_35 kernel split over `splits` CTAs (cudnn_decode_splits; 1: one CTA over all blocks):
//               DecodePartition::strided deals 128-key block b to CTA b mod splits, each CTA runs the 4-warp
//               online softmax over its blocks in key order; per_block makes one part per block. Then
//               cudnn::fusion::lean_reduction_kernel over the CTAs in order: m_nat = RN(m·ln2), M = max m_nat,
//               w = MUFU.EX2(RN((m_nat − M)·log2 e)), L = Σ RN(w·l), O = Σ RN(w·acc) from 0, O·RN(1/L).
// LSE = fma(MUFU.LG2(l), ln2, RN(m·ln2)) (the stats output). Measured on the decode sweep
// (cudnn_decode_probe_sweep.npz, Skv 513-1100, D 64-160): every output bit at 93 % of the 4,368 lengths, the rest one
// element one ulp apart (>= 99.2 %); the LSE differs by 1-2 ulp in ~4 % of rows, as it does at 257-512 with one
// CTA: the 4-warp kernel's row sum is not pinned.
float cudnn_decode_row(const GemmSpec& g, const Format& p_fmt, const float* s2, const double* V, std::size_t Skv,
                       std::size_t D, double* o, std::size_t splits, DecodePartition partition);

}  // namespace pasa::detail
