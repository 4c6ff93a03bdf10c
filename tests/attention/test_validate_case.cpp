// validate_case (algorithm.hpp): the checks a case needs before any value is touched, shared by the run and
// by every validator (sweeps, pasa-attn, pasa-attribute), so that they cannot disagree.
// And the generator's own validate(): parameters that pass it give finite values for any shape.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "pasa/attention/algorithm.hpp"
#include "pasa/core/error.hpp"
#include "pasa/inputs/generators.hpp"
#include "pasa/io/problem_json.hpp"

using namespace pasa;
using Catch::Matchers::Contains;

namespace {

ProblemSpec small_problem(std::size_t D, const std::string& format) {
  ProblemSpec p;
  p.Sq = p.Skv = 24;
  p.D = D;
  p.format = format;
  p.seed = 3;
  p.q.x0 = p.k.x0 = p.v.x0 = 0.5;
  return p;
}

AlgorithmSpec algo(const std::string& name, const std::string& alloc) {
  AlgorithmSpec a;
  a.name = name;
  a.alloc = allocation_preset(alloc);
  a.s1 = a.s2 = 8;
  return a;
}

}  // namespace

TEST_CASE("validate_case: a Hadamard transform needs a power-of-two D, as the run does", "[validate_case]") {
  AlgorithmSpec a = algo("fa2", "fa_fp8");
  a.quant.scales = QuantScale::block;
  a.quant.hadamard = true;
  CHECK_NOTHROW(validate_case(small_problem(16, "fp16"), a));
  CHECK_THROWS_WITH(validate_case(small_problem(12, "fp16"), a),
                    Contains("/quant/hadamard") && Contains("power of two") && Contains("D = 12"));
  const AttentionInputs in = generate_inputs(small_problem(12, "fp16"), 1);
  CHECK_THROWS_WITH(run_attention(in, a, 1), Contains("/quant/hadamard"));
}

TEST_CASE("validate_case: tensor-core GEMM operands wider than 26 bits are refused before the run", "[validate_case]") {
  // fa_fp32_h100: q, k stages fp32 (24 bits): the engine takes them. Its p stage lifted to fp64 does not.
  AlgorithmSpec a = algo("fa2", "fa_fp32_h100");
  CHECK_NOTHROW(validate_case(small_problem(8, "fp64"), a));
  a.alloc.spec(Stage::p) = StageSpec{format_by_name("fp64")};
  CHECK_THROWS_WITH(validate_case(small_problem(8, "fp16"), a),
                    Contains("/alloc") && Contains("P·V GEMM") && Contains("fp64 (53 bits)"));
  // A plain fp64 q stage leaves the inputs as they are: fp16 inputs reach the engine in fp16, fp64 ones do not.
  AlgorithmSpec b = algo("fa2", "fa_fp16_fp32_h100");
  b.alloc.spec(Stage::q) = StageSpec{format_by_name("fp64")};
  CHECK_NOTHROW(validate_case(small_problem(8, "fp16"), b));
  CHECK_THROWS_WITH(validate_case(small_problem(8, "fp64"), b), Contains("Q·Kᵀ GEMM"));
  // The same operand through a per-GEMM model that is not a tensor core: accepted.
  a.alloc.gemm_override[static_cast<std::size_t>(GemmId::pv)] = GemmModel(GemmKind::ordered);
  CHECK_NOTHROW(validate_case(small_problem(8, "fp16"), a));
}

// The property behind validate_case: over presets x input formats x algorithms x FP8 options, the run
// throws nothing but InputError, and it throws exactly when validate_case does (so a case that passes the
// sweep's validation runs to the end). Before issue 23 a tensor-core GEMM with fp64 operands, or a
// Hadamard transform of D = 12, passed validation and failed in the run (as "internal error").
TEST_CASE("validate_case agrees with the run on every preset, format and algorithm", "[validate_case]") {
  int runs = 0, refused = 0, tensor_core_refused = 0;
  for (const std::string& preset : allocation_preset_names())
    for (const char* format : {"fp16", "bf16", "fp32", "fp64"})
      for (const char* name : {"fa2", "pasa", "smooth_k"})
        for (int variant = 0; variant < 5; ++variant) {
          // 0: as the preset is; 1, 2: the FP8 recipe's scales and Hadamard transform, D = 8 and 12;
          // 3: the p stage in fp64; 4: the q and k stages in fp64 (the inputs then reach the engine as they are).
          AlgorithmSpec a = algo(name, preset);
          const std::size_t D = variant == 2 ? 12 : 8;
          if (variant == 1 || variant == 2) {
            if (std::string(name) == "smooth_k") continue;
            a.quant.scales = QuantScale::head;
            a.quant.hadamard = true;
          }
          if (variant == 3) a.alloc.spec(Stage::p) = StageSpec{format_by_name("fp64")};
          if (variant == 4) a.alloc.spec(Stage::q) = a.alloc.spec(Stage::k) = StageSpec{format_by_name("fp64")};
          const ProblemSpec p = small_problem(D, format);
          const AttentionInputs in = generate_inputs(p, 1);
          bool valid = true;
          try {
            validate_case(p, a);
          } catch (const InputError& e) {
            valid = false;
            tensor_core_refused += std::string(e.what()).find("tensor_core") != std::string::npos;
          }
          INFO(preset << " " << format << " " << name << " variant " << variant);
          bool ran = true;
          try {
            const AttentionOutput o = run_attention(in, a, 1);
            CHECK(o.o.data.size() == in.q.shape.size());
          } catch (const InputError&) {
            ran = false;
          }  // any other exception fails the test case
          CHECK(ran == valid);
          ++runs;
          refused += !valid;
        }
  CHECK(refused > 0);  // the grid holds cases of both kinds
  CHECK(refused < runs);
  CHECK(tensor_core_refused > 0);
}

TEST_CASE("generator parameters: every value that passes validate() gives finite inputs", "[generators]") {
  // Resonance at the limits: the smallest wavelength, the largest phase and bias (fp64 storage keeps a NaN).
  TensorGen g;
  g.kind = GenKind::resonance;
  g.am = 1;
  g.noise = 1;
  g.wavelength = kMinWavelength;
  g.phase_deg = kMaxPhaseDeg;
  g.seq_bias = -kMaxSeqBias;
  REQUIRE_NOTHROW(validate(g, "/q"));
  const Tensor t = generate_tensor(g, {1, 1, 64, 128}, format_by_name("fp64"), 1, "q", 1);
  for (double x : t.data) REQUIRE(std::isfinite(x));
  // Just beyond each limit: refused, naming the key. (wavelength 1e-320 gave NaN inputs before.)
  for (auto [key, set] : std::vector<std::pair<std::string, std::function<void(TensorGen&)>>>{
           {"wavelength", [](TensorGen& x) { x.wavelength = 1e-320; }},
           {"wavelength", [](TensorGen& x) { x.wavelength = kMinWavelength / 2; }},
           {"phase_deg", [](TensorGen& x) { x.phase_deg = 2 * kMaxPhaseDeg; }},
           {"phase_deg", [](TensorGen& x) { x.phase_deg = 1e308; }},
           {"seq_bias", [](TensorGen& x) { x.seq_bias = 2 * kMaxSeqBias; }}}) {
    TensorGen bad = g;
    set(bad);
    CHECK_THROWS_WITH(validate(bad, "/q"), Contains("/q/" + key));
  }
  // Through the JSON reader, naming the JSON path.
  const auto j = nlohmann::json::parse(R"({"shape": {"Sq": 8, "D": 8}, "generator": {"kind": "resonance", "wavelength": 1e-320}})");
  CHECK_THROWS_WITH(problem_from_json(j, "p.json:"), Contains("p.json:/generator/wavelength"));
}

TEST_CASE("validate_case: the element formats of block-scaled quantisation are refused as stage and input formats, "
          "naming the stage", "[validate_case]") {
  // int4, fp4, e8m0, hif8 grids are not what the engines' fast paths round to (allocation.hpp:
  // attention_format): refused before the run, with the stage and the field named.
  for (const char* f : {"int4", "fp4_e2m1", "e8m0", "hif8", "int8_full", "fp6_e3m2"}) {
    INFO(f);
    AlgorithmSpec a = algo("fa2", "fa_fp32");
    a.alloc.stages[static_cast<std::size_t>(Stage::p)].format = format_by_name(f);
    CHECK_THROWS_WITH(validate_case(small_problem(16, "fp16"), a),
                      Contains("stage p: format " + std::string(f)) && Contains("not an attention stage format"));
    AlgorithmSpec b = algo("fa2", "fa_fp32");
    b.alloc.stages[static_cast<std::size_t>(Stage::sum)].reduce.acc = format_by_name(f);
    CHECK_THROWS_WITH(validate_case(small_problem(16, "fp16"), b), Contains("stage sum: acc " + std::string(f)));
    CHECK_THROWS_WITH(validate_case(small_problem(16, f), algo("fa2", "fa_fp32")), Contains("/format: input q in format"));
  }
  AlgorithmSpec h = algo("fa2", "fa_fp32");
  h.alloc.stages[static_cast<std::size_t>(Stage::exp)].round.mode = RoundMode::hybrid;
  CHECK_THROWS_WITH(validate_case(small_problem(16, "fp16"), h), Contains("stage exp: rounding hr (hybrid)"));
  CHECK_NOTHROW(validate_case(small_problem(16, "fp16"), algo("fa2", "fa_fp32")));
}
