// Blocked attention algorithms run under a precision allocation, and their registry.
//
//   safe_softmax    3-pass safe softmax attention ([FA1, §3.1]): the textbook attention
//   online_softmax  2-pass online softmax ([FA1, §3.1]): max and sum in one pass, then the output
//   fa1             FlashAttention 1 ([FA1, Alg. 1], KV outer loop): per-step normalised output
//   fa2             FlashAttention 2 ([FA2, Alg. 1], Q outer loop): returns the log-sum-exp
//   pasa            PASA ([PASA, Alg. 1], as read in docs/; options below)
//   smooth_k        SageAttention's "smooth K": K minus its mean over the whole sequence, then fa2
//   fdpp            FlashDecoding++'s asynchronised softmax with a unified max φ and recomputation ([FD++, §3])
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

#include "pasa/attention/algorithm_spec.hpp"
#include "pasa/inputs/attention_inputs.hpp"
#include "pasa/inputs/generators.hpp"
#include "pasa/core/parallel.hpp"

namespace pasa {

// What a case's checks need of its inputs: shapes and storage formats, no values (generated inputs are
// described by their ProblemSpec, .npy inputs by their headers).
struct CaseLayout {
  Shape q, kv;
  Format q_format, k_format, v_format;
};
CaseLayout case_layout(const AttentionInputs&);
CaseLayout case_layout(const ProblemSpec&);

// One GEMM of a case: its operands' formats as the engine receives them (the q, k, v stages' formats, or the
// inputs' own where such a stage is plain fp64 and leaves them as they are) and its accumulator stage.
struct CaseGemm {
  GemmId id;
  Format a, b;
  Stage acc;
};
std::vector<CaseGemm> case_gemms(const CaseLayout&, const AlgorithmSpec&);

// Everything run_attention checks of an algorithm against inputs of this layout before it touches a value:
// the algorithm's options, and their combination with the allocation and the inputs (a Hadamard transform
// needs a power-of-two D; a tensor_core GEMM operands of at most kTensorCoreMaxOperandBits bits and
// rounding rne/rna/rz/ru/rd; ...). run_attention calls it, so a case that passes does not fail later for these
// reasons; sweeps (every grid point), pasa-attn and pasa-attribute call it before they compute or create
// anything. Throws InputError whose message starts with the JSON pointer, inside the AlgorithmSpec JSON, of
// the offending option ("/quant/hadamard: ...", "/alloc: ...").
void validate_case(const CaseLayout&, const AlgorithmSpec&);
// validate(ProblemSpec) first (its own messages), then the above; a paged problem: validate_unified (unified.hpp).
void validate_case(const ProblemSpec&, const AlgorithmSpec&);

// Throws InputError for an unknown algorithm, s1 or s2 = 0, or inputs that fail validate() or validate_case().
AttentionOutput run_attention(const AttentionInputs& in, const AlgorithmSpec& spec, int threads = default_threads());

// Memory run_attention needs beyond its inputs (the output, rounded and transposed copies, per-thread
// buffers), in bytes, saturating at kTooLarge (core/memory.hpp); s1 and s2 are clamped to Sq and Skv
// as run_attention clamps them (a longer block is the whole sequence). narrow_inputs: Q, K and V held at
// their format's width (inputs/tensor.hpp), as pasa-attn and the sweeps draw and read them.
std::size_t attention_bytes(const Shape& q, const Shape& kv, const Format& input_format, const AlgorithmSpec& spec,
                            int threads, bool narrow_inputs = false);

// The registry: what each algorithm is and what it supports. Validation (run_attention, unified attention),
// the memory estimate and the property tests (tests/property/) read it instead of comparing names.
struct AlgorithmInfo {
  std::string name;
  std::string summary;     // one line, with its source
  bool split_kv = false;   // splits > 1: an unnormalised output (O, m, l) to merge
  bool quant = false;      // the FP8 recipe (QuantOptions), tile by tile
  bool unified = false;    // unified attention over a paged KV cache (unified.hpp)
  bool shifts_keys = false;  // pre-processes K (and fills the QKᵀ GEMM's keys itself)
  bool whole_rows = false;   // keeps a whole row of scores (memory: s1 × Skv per thread)
  bool fused_path = false;   // may run its tiles on the fused float path (fused_tile.hpp)
  bool pasa_options = false, fdpp_options = false;  // reads AlgorithmSpec::pasa / ::fdpp
  bool recomputes_rows = false;  // reports AttentionOutput::recomputed_rows (rows redone synchronised)
  bool error_model = false;      // the first-order error model (study/error_model.hpp) describes it
};
const std::vector<AlgorithmInfo>& algorithm_registry();
// The entry of `name`; throws InputError "<where>unknown algorithm \"name\"; known algorithms: ..." otherwise.
const AlgorithmInfo& algorithm_info(const std::string& name, const std::string& where = "");
// The entry of `name`, or nullptr when no algorithm has that name.
const AlgorithmInfo* find_algorithm(const std::string& name);
// The names of the registered algorithms with a property, in registry order.
std::vector<std::string> algorithm_names_with(bool AlgorithmInfo::*flag);
// The registry as a markdown table (docs/algorithms.md holds it; `pasa-attn --list-algorithms` prints it).
std::string algorithm_table_markdown();

std::vector<std::string> algorithm_names();
// Throws InputError "<where>unknown algorithm \"name\"; known algorithms: ..." unless name is registered.
void check_algorithm_name(const std::string& name, const std::string& where);

}  // namespace pasa
