// Blocked attention algorithms run under a precision allocation, and their registry.
//
//   safe_softmax    3-pass safe softmax attention (seed 002, Eq. 7–9): the reference attention
//   online_softmax  2-pass online softmax (seed 002): max and sum in one pass, then the output
//   fa1             FlashAttention 1 (seed 002, Alg. 1, KV outer loop): per-step normalised output
//   fa2             FlashAttention 2 (seed 002, Alg. 1 of FA2, Q outer loop): returns the log-sum-exp
//   pasa            PASA (paper Alg. 1, as read in PASA-NOTES.md; options below)
//   smooth_k        SageAttention's "smooth K": K minus its mean over the whole sequence, then fa2
//
// Every algorithm parallelises over (batch, head, query block); the loop order over blocks is fixed by the
// algorithm, not by the threads, so results are bit-identical whatever the thread count. Blocks that a mask
// hides completely are skipped (as real kernels do); rows that see no key at all get output 0 and
// lse = −inf (the golden's convention). S1 and S2 need not be multiples of s1, s2 (tail blocks).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "pasa/allocation.hpp"
#include "pasa/attention_inputs.hpp"
#include "pasa/parallel.hpp"
#include "pasa/tensor.hpp"

namespace pasa {

struct PasaOptions {
  double beta = 0.984497;    // Table 3's optimised β for fp16, n = 128
  bool alpha_in_M = true;    // Eq. 10: M = (I − β/s2·J)/α; false: M = I − β/s2·J and S' scaled afterwards
  bool m0_zero = false;      // Alg. 1 as printed initialises m_0 = 0; false: −∞ as FlashAttention does
  bool bf16_to_fp16 = true;  // §2.2: with bf16 inputs, the allocation's bf16 stages run in fp16
  // "fa2": P = exp(S' − (m_j − Δm'_j)) with the corrected max, l and O updated as in FA2, so β = 0 is FA2
  //        (§2.2: "PASA completely degrades into FA2.0"); "printed": Alg. 1 steps 12/18/20 literally,
  //        P' = exp(S' − m'_j) with the local max, then rescaled by e^{Δm_j}.
  std::string form = "fa2";
  bool operator==(const PasaOptions&) const = default;
};

struct AlgorithmSpec {
  std::string name = "fa2";  // one of algorithm_names()
  Allocation alloc;
  std::size_t s1 = 128, s2 = 128;  // query and key/value block sizes
  PasaOptions pasa;
  std::uint64_t seed = 0;  // random stream for stochastic rounding (one stream per (batch, head, query block))
  bool operator==(const AlgorithmSpec&) const = default;
};

// {"name": "pasa", "alloc": <allocation JSON>, "s1": 128, "s2": 128, "seed": 0,
//  "pasa": {"beta": 0.984497, "alpha_in_M": true, "m0": "-inf" | "zero", "bf16_to_fp16": true, "form": "fa2"}}
// Absent keys keep the defaults above. Errors are InputErrors naming the JSON path.
AlgorithmSpec algorithm_from_json(const nlohmann::json& j, const std::string& json_path);
nlohmann::json to_json(const AlgorithmSpec& spec);

struct AttentionOutput {
  Tensor o;                 // (B, Nq, Sq, D), values of the allocation's "out" format
  std::vector<double> lse;  // (B, Nq, Sq): m + log(l) in fp64 from the algorithm's final m and l (−inf: no key)
};

// Throws InputError for an unknown algorithm, s1 or s2 = 0, or inputs that fail validate().
AttentionOutput run_attention(const AttentionInputs& in, const AlgorithmSpec& spec, int threads = default_threads());

std::vector<std::string> algorithm_names();

}  // namespace pasa
