// The building blocks of FlashAttention-3's FP8 recipe [FA3, §3.3] (QuantOptions in algorithm_spec.hpp): the
// random Hadamard transform of incoherent processing, the fp32 scale of a group from its amax, and the
// quantisation of a group with its scale. The engines apply them in detail::Run; docs/fp8.md says why each
// step is computed as it is.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "pasa/attention/algorithm_spec.hpp"
#include "pasa/attention/allocation.hpp"

namespace pasa {

// The random signs of the transform: D values ±1 drawn from RandomBits(seed) (one draw per sign, its top
// bit), so a seed gives the same transform on every machine.
std::vector<double> hadamard_signs(std::size_t D, std::uint64_t seed);

// x_r ← H_D·diag(signs)·x_r / √D for each of the rows (row length D, a power of two; H_D the Sylvester–
// Hadamard matrix, entries ±1, H_D·H_Dᵀ = D·I, so the transform is orthogonal and (QT)(KT)ᵀ = QKᵀ). In fp64:
// the fast Walsh–Hadamard butterflies (exact for fp16 inputs: 47 bits at most for D <= 128), then each value
// multiplied by fp64(1/√D) (exact for D = 4^k; otherwise within 2 ulp of double of the exact transform). Throws InputError when D is not a power of two.
void hadamard_rows(double* x, std::size_t rows, std::size_t D, const std::vector<double>& signs);

// The scale of a group whose largest magnitude is amax: fp32(fp32(amax) · fp32(1/fmax)), as torch computes
// amax.float() / 448 (a tensor divided by a Python number is multiplied by the number's fp32 reciprocal:
// bit-identical on the H100, experiments/gpu/fp8_chain.py); not a power of two. 1 for an all-zero (or
// non-finite) group, whose values quantise to themselves.
double fp8_scale(double amax, double fmax);

// x[i] ← the exact quotient x[i] / scale rounded ONCE to the stage (its format and options: E4M3 with
// saturation for the FP8 presets; rng for stochastic rounding).
void quantise(double* x, std::size_t n, double scale, const StageSpec& stage, RandomBits* rng = nullptr);

// Quantises `heads` heads of S rows × D values (head after head in data) group by group, with one scale per
// group from its amax (qo.scales: the whole tensor, a head, or `rows` rows of a head — FA3's block
// quantisation); returns the scales, heads · ceil(S / rows) of them, in (head, group) order.
// Block scaling (QuantOptions::q_block ...; numeric/block_scale.hpp): the format block-scaled values are
// held in: enough bits for an element times its scale (times the tensor scale), double's exponent range.
Format block_value_format(const BlockScheme& s);
// Each of the `heads` heads of S rows × D values (head after head) replaced by its block-quantised values
// (elements × scales, exact): grouped along D as the A operand (Q, operand_b false) or the B operand (K), or
// along the rows (along_rows: V, whose P·V contracts over its keys) as the B operand.
void block_quantise_heads(double* data, std::size_t heads, std::size_t S, std::size_t D, const BlockScheme& s,
                          bool operand_b, bool along_rows, RandomBits* rng);

std::vector<double> quantise_groups(double* data, std::size_t heads, std::size_t S, std::size_t D, std::size_t rows,
                                    const QuantOptions& qo, const StageSpec& stage, RandomBits* rng);

}  // namespace pasa
