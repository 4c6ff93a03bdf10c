// The ordered fp32-accumulate GEMM kernel for callers inside the attention layer that keep their operands in
// their own float layouts (the fused tile path of the blocked engines, detail/fused_tile.cpp). Internal: not
// part of the public gemm.hpp. Declared in namespace pasa, where gemm.cpp defines them (its dispatch packs
// B with sgemm_pack_panels too).
#pragma once

#include <cstddef>

namespace pasa {

// B (k × n, row stride ldb) packed as panels of 32 columns: panel p (columns 32p …) at dst + 32·k·p, element
// (t, j) at [32·t + j], zero past column n. sgemm_fma_packed: C (m × n floats, ldc) = A·B from such panels
// (panel p at panels + p·panel_stride: 32·k as packed, or the panels of a longer B packed once, read from a
// row offset), A (m × k) given row-major (A(i, t) = A[i·lda + t]) or transposed (A(i, t) = A[t·lda + i]);
// each C element its k products in order from +0, one fma each: the bits of gemm() with an ordered fp32
// accumulator, before the output rounding.
void sgemm_pack_panels(std::size_t k, std::size_t n, const float* B, std::size_t ldb, float* dst);
// round_fp16: each result rounded to fp16 (RNE) before it is stored (the F16C conversion, what round_span
// does for fp16 in RNE).
void sgemm_fma_packed(bool a_transposed, std::size_t m, std::size_t n, std::size_t k, const float* A, std::size_t lda,
                      const float* panels, std::size_t panel_stride, float* C, std::size_t ldc, bool round_fp16);

}  // namespace pasa
