// An independent reference emulator of the blocked attention algorithms, for tests only.
//
// Each algorithm is written again as plainly as possible: one query row at a time, scalar loops, one
// statement per step of the paper ([FA2, Alg. 1], [FA1, Alg. 1], [PASA, Alg. 1, Eq. 10–15]). Every step's
// exact result is rounded ONCE to its stage format: where the exact result is a double, by pasa::round (the
// rounding layer, proven against MPFR); where it is not (a sum of an accumulator and a product, a quotient,
// an exponential), it is formed exactly (or with round-to-odd sticky information at 256 bits, which any
// later rounding to p <= 53 bits cannot tell from the exact value) with MPFR and rounded with MPFR to the
// format (precision p, emin/emax, mpfr_subnormalize), then the format's overflow and flush conventions.
//
// It shares no kernel with the engine: nothing from src/pasa/attention/detail/ or gemm.hpp; only the
// descriptors (formats, rounding options, allocations, algorithm specs, inputs). It is slow (MPFR per
// operation) and meant for small cases. It covers safe_softmax, online_softmax, fa1, fa2, smooth_k and pasa
// with GQA, kv_len, causal, the position bias (pse) and the select mask (the select value is the score in the
// unshifted frame, after scale and pse: docs/contract.md), and split-KV with both merge models. It throws
// std::invalid_argument for what it does not restate: stochastic rounding (it consumes the engine's random
// stream in the engine's order), formats without subnormals, the FP8 recipe, fdpp, the tensor-core GEMM.
#pragma once

#include "pasa/attention/algorithm_spec.hpp"
#include "pasa/attention/allocation.hpp"
#include "pasa/inputs/attention_inputs.hpp"

namespace pasa::reference {

// A reduction (a row sum, a mean) as the shared reductions spec defines it: additions in the
// accumulator format `acc`, in `order`, then one rounding to the stage's format.
enum class Order { sequential, pairwise, blocked };
struct Reduction {
  Format acc;
  Order order = Order::sequential;
  int width = 32;  // lanes of the blocked order (a power of two)
};

// The engine's reduction descriptor (StageSpec::reduce) in the reference's own terms.
Reduction reduction_of(const StageSpec& s);

// The output and lse of `spec.name` on `in`, as the algorithm's definition says. Throws std::invalid_argument
// for what it does not restate (above).
AttentionOutput reference_attention(const AttentionInputs& in, const AlgorithmSpec& spec);

// One rounding of the exact GEMM dot product Σ_t a[t·sa]·b[t·sb] as the model says (exposed for tests).
double reference_dot(const GemmModel& model, const StageSpec& acc, const StageSpec& out, const double* a,
                     std::size_t sa, const double* b, std::size_t sb, std::size_t k);

// One rounding of x + y, x·y, x / y, e^x (exact results) to a stage (exposed for tests).
double ref_add(const StageSpec& s, double x, double y);
double ref_mul(const StageSpec& s, double x, double y);
double ref_div(const StageSpec& s, double x, double y);
double ref_exp(const StageSpec& s, double x);

}  // namespace pasa::reference
