// PASA ([PASA, Alg. 1]; the reading of its garbled formulas is in docs/) under a precision allocation.
#pragma once

#include "pasa/attention/detail/blocked_attention.hpp"
#include "pasa/attention/detail/split_kv.hpp"

namespace pasa::detail {

// Steps 1–2: M = (I − β/n·J)/α rounded to the shift format (n = the block's key count, so a tail block gets
// its own M; without alpha_in_M the 1/α is applied to S' in the scale stage instead), and the batched
// pre-processing GEMM K'_j = M·K_j (Eq. 11: each key minus β × the block's mean key), written in k_shift.
// Steps 3–4 per query block: S' = Q·K'ᵀ (Eq. 12), S̄' = rowmean(S') over the block's keys, the pseudo-average
// F^j = ((j−1)·F^{j−1} + S̄'_j)/j (Eq. 15, F^0 = F^1 = S̄'_1), Δm'_{j−1} = Inva·(F^{j−1} − F^j),
// Δm'_j = Inva·(S̄'_j − F^j) with Inva = β/(1 − β) (Theorem 2.1, Eq. 13–14), the corrected max
// m_j = max(m_{j−1} + Δm'_{j−1}, m'_j + Δm'_j), Δm_{j−1} = m_{j−1} − m_j + Δm'_{j−1}, and the l, O updates
// in PasaOptions::form. lse = m + Inva·F + log l (the frame of the running max is Inva·F^j).
void pasa_attention(Run& run, AttentionOutput& out, int threads);

// The pieces of pasa_attention, for engines that merge several runs (unified attention): steps 1–2 (the
// shifted keys, once per run), the block loop of one item continuing `state` (with the run's split-KV; returns
// Inva rounded to mean), the initial running max (m0 option), and step 22 (division, lse with its frame).
void pasa_prepare(Run& run, int threads);
double pasa_item(const Run& run, const Item& it, Partial& state, RandomBits* rng);
double pasa_m0(const Run& run);
void pasa_finish(const Run& run, const Item& it, const Partial& state, double inva, AttentionOutput& out, RandomBits* rng);

}  // namespace pasa::detail
