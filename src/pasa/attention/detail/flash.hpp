// Online softmax (2-pass) and FlashAttention 1 and 2 ([FA1], [FA2]) under a precision allocation.
#pragma once

#include <vector>

#include "pasa/attention/detail/blocked_attention.hpp"
#include "pasa/attention/detail/split_kv.hpp"

namespace pasa::detail {

// 2-pass online softmax: pass 1 the running max m and sum d' (d'_i = d'_{i−1}·e^{m_{i−1} − m_i} + Σ e^{x − m_i},
// by blocks of s2 keys), pass 2 a = e^{x − m_N}/d'_N, then O = A·V in one GEMM over the whole row.
void online_softmax_attention(const Run& run, AttentionOutput& out, int threads);

// FlashAttention 1 ([FA1, Alg. 1]): local max m̃, P̃ = exp(S − m̃), l̃; m_new = max(m, m̃);
// l_new = e^{m − m_new}·l + e^{m̃ − m_new}·l̃; O ← diag(l_new)⁻¹(diag(l)·e^{m − m_new}·O + e^{m̃ − m_new}·P̃V).
// Rows are independent, so the KV-outer loop order gives the same numbers as iterating KV per query block.
void fa1_attention(const Run& run, AttentionOutput& out, int threads);

// FlashAttention 2 ([FA2, Alg. 1]): m_j = max(m_{j−1}, rowmax S_j), P̃ = exp(S_j − m_j),
// l_j = e^{m_{j−1} − m_j}·l_{j−1} + rowsum P̃, O_j = e^{m_{j−1} − m_j}·O_{j−1} + P̃V; O = O/l, L = m + log l.
// lse_shift (optional, (B, Nq, Sq)): added to the lse (smooth_k's q·mean(K)·scale).
void fa2_attention(const Run& run, AttentionOutput& out, int threads, const std::vector<double>* lse_shift = nullptr);

// The FA2 state (unnormalised O, m, l) of one item after all its keys (with the run's split-KV), not divided:
// for engines that merge several runs (unified attention).
void fa2_item(const Run& run, const Item& it, Partial& st, RandomBits* rng);

}  // namespace pasa::detail
