// Seeded input generators for attention problems (PASA §3.1 benchmarks and a §3.3.2-style "resonance"
// generator), and the JSON problem description. Reproducible bit for bit: Boost.Random engines and
// distributions only, one stream per (tensor, batch, head) seeded from (seed, tensor name, b, head), so the
// result is the same whatever the thread count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>


#include "pasa/inputs/attention_inputs.hpp"
#include "pasa/inputs/paged_problem.hpp"
#include "pasa/core/parallel.hpp"

namespace pasa {

enum class GenKind {
  uniform,    // PASA Eq. 17: U(x0 − am, x0 + am)
  hybrid,     // PASA Eq. 18: N(x0, 1) + N(0, am²)·Bernoulli(p)
  resonance,  // PASA §3.3.2: x0 + seq_bias·s/(S−1) + am·cos(2π·d/wavelength + phase) + N(0, noise²)
};

struct TensorGen {
  GenKind kind = GenKind::uniform;
  double x0 = 0;            // centre (uniform, hybrid) or constant offset (resonance)
  double am = 1;            // half-width (uniform), outlier std (hybrid), oscillation amplitude (resonance)
  double p = 0.001;         // hybrid: outlier probability
  double wavelength = 8;    // resonance: period along the head dimension, in elements
  double phase_deg = 0;     // resonance: phase of this tensor's wave; q 0° with k 180° (or 0°) resonate
  double seq_bias = 0;      // resonance: bias growing linearly along the sequence, from 0 to seq_bias
  double noise = 0;         // resonance: standard deviation of added Gaussian noise
};

// How generate_inputs holds Q, K and V: as doubles, or at the format's width (inputs/tensor.hpp).
enum class Storage { wide, narrow };

struct ProblemSpec {
  std::size_t B = 1, Nq = 1, Nkv = 1, Sq = 128, Skv = 128, D = 64;
  std::string format = "fp16";  // storage format of Q, K and V (values rounded to nearest even, saturating)
  double scale = 0;              // 0: 1/sqrt(D)
  bool causal = false;
  std::vector<std::size_t> kv_len;  // per batch, optional
  std::uint64_t seed = 0;
  bool allow_nonfinite = false;  // AttentionInputs::allow_nonfinite (the generators themselves stay finite)
  TensorGen q, k, v;
  // Decode inputs ([IFA]): a position bias pse (B, Nq, Sq, Skv) drawn by its own generator in `format`
  // (stream "pse"), and a select mask hiding each (b, i, j) with probability select_p (stream "select"),
  // its masked scores set to select_value.
  bool has_pse = false;
  TensorGen pse;
  double select_p = 0;
  double select_value = -1e12;
  // The same tensors as the user has them (io/user_tensors.hpp reads them from .npy), used instead of the
  // drawn ones: pse (B or 1, Nq, Sq, Skv) as AttentionInputs::pse holds it, the select flags (B, Sq, Skv).
  // Shared, so that copies of a spec (sweep grids) do not copy them. The *_file fields name where they (and
  // kv_len) came from, for to_json; empty: not from a file.
  std::shared_ptr<const Tensor> pse_user;
  std::shared_ptr<const std::vector<std::uint8_t>> select_user;
  std::string pse_file, select_file, kv_len_file;
  // Q, K and V as a model computed them (a capture folder, io/capture_folder.hpp), used instead of drawn
  // ones: shapes (B, Nq, Sq, D) and (B, Nkv, Skv, D), values exact in `format`. `capture` names where they
  // came from (for to_json); empty dir: drawn.
  std::shared_ptr<const Tensor> q_user, k_user, v_user;
  struct CaptureRef {
    std::string dir;
    std::size_t layer = 0;
    std::optional<std::size_t> head, kv_head;
  } capture;
  // A paged-KV problem ("kind": "paged", inputs/paged_problem.hpp; attention/unified.hpp generate_paged
  // draws it): Nq, Nkv, D, format, scale, seed and the q/k/v generators apply; B is 1, Sq the batch's new
  // tokens and Skv its longest context (set by problem_from_json, for messages); causal, kv_len, pse,
  // select, capture and allow_nonfinite are refused with it.
  std::optional<PagedLayout> paged;
};

std::string gen_kind_name(GenKind);
GenKind gen_kind_by_name(const std::string&);  // throws InputError listing the kinds

// Limits of the resonance parameters that keep every intermediate value of the generator finite for any
// shape (validate(TensorGen) explains them).
inline constexpr double kMinWavelength = 0x1p-950, kMaxPhaseDeg = 0x1p1000, kMaxSeqBias = 0x1p950;

// Throws InputError for impossible parameters (shape zeros, an element count that overflows, N_q % N_kv,
// am < 0, p outside [0, 1], values beyond double's range, ...). Every message starts with the JSON pointer, in
// the problem's JSON (io/problem_json.hpp), of the element that is wrong ("/kv_len/1: ...", "/shape/Sq: ...",
// "/q/p: ..."), which problem_from_json prefixes with the file and the problem's own place.
void validate(const ProblemSpec&);
// One generator; errors start with "<path>/<key>: " (path e.g. "/generator" or "/q"). The one check of a
// generator: the JSON reader, the command line and generate_tensor all call it, and a generator that passes
// it yields finite values (before the saturating rounding to the storage format) for every shape.
void validate(const TensorGen&, const std::string& path);

// The seed of the random stream `name` ("q", "k", "select", ...) of batch b, head h: every stream of a problem
// is independent of the others and of the thread count.
std::uint64_t stream_seed(std::uint64_t seed, const std::string& name, std::size_t b, std::size_t h);

// Bytes of the generated Q, K and V with this storage (8 per element wide, a model's tensors always; a paged
// problem: Q, and the cache as floats), saturating at kTooLarge (core/memory.hpp).
std::size_t inputs_bytes(const ProblemSpec&, Storage = Storage::wide);

// Values are drawn in double, then rounded to nearest even in `format`; values beyond its range saturate
// to ±max_finite (so inputs stay finite). mask.causal and mask.kv_len are taken from the spec. A paged problem
// is refused (InputError "/kind: ..."): attention/unified.hpp generate_paged draws it.
// Storage::narrow holds Q, K and V drawn (not a model's) at the format's width (inputs/tensor.hpp), drawn
// head by head, so that no wide copy of them is made; the values are the same either way.

AttentionInputs generate_inputs(const ProblemSpec&, int threads = default_threads(), Storage = Storage::wide);

// The (S, D) matrix of head h of batch b of the tensor generate_tensor draws with this seed and name (the
// same values), into out: for inputs generated head by head (a paged KV cache too large for doubles). The
// generator must have passed validate.
void generate_head(const TensorGen&, std::size_t b, std::size_t h, std::size_t S, std::size_t D, const Format&,
                   std::uint64_t seed, const std::string& name, double* out);

// One tensor (B, N, S, D) from its generator; `name` ("q", "k", "v") selects the stream.
Tensor generate_tensor(const TensorGen&, Shape, const Format&, std::uint64_t seed, const std::string& name,
                       int threads = default_threads(), Storage = Storage::wide);

}  // namespace pasa
