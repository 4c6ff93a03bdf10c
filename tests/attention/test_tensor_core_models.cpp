// The named tensor-core models of other generations (tensor_core_models.cpp) against vectors drawn with
// MMA-Sim's published arithmetic (microsoft/MMA-Sim c785138, `simulator/arithmetic.py`; drawn out of tree by
// experiments/mmasim/draw_vectors.py; tests/data/mmasim/*.json state the function, arch and instruction of
// each): every case's D bit for bit, for every arch and kind the table holds. Then the integer engine
// against exact int64 arithmetic, the block-scale interface's refusals, and the JSON of the new fields.
#include <catch2/catch.hpp>

#include <bit>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pasa/attention/gemm.hpp"
#include "pasa/core/error.hpp"
#include "pasa/io/allocation_json.hpp"

using namespace pasa;

namespace {

// The operand formats of the vector files. fp4 E2M1 (emax 2, emin 0, no infinities) as a custom format: its
// values are all the engine needs (the format registry's fp4_e2m1 comes with the element formats).
Format operand_format(const std::string& f) {
  if (f == "fp16" || f == "bf16" || f == "fp32") return format_by_name(f);
  if (f == "e4m3") return format_by_name("fp8_e4m3fn");
  if (f == "e5m2") return format_by_name("fp8_e5m2");
  if (f == "e2m1") return custom_format(2, 2, true, Specials::fn);
  throw std::runtime_error("unknown operand format " + f);
}

GemmSpec spec_for(const std::string& model, const Format& op) {
  GemmSpec g{op, op, StageSpec(format_by_name("fp32")), StageSpec(format_by_name("fp32")), GemmModel(GemmKind::tensor_core)};
  g.model.tc = tensor_core_preset(model);
  return g;
}

double parse(const nlohmann::json& v) { return v.is_string() ? std::stod(v.get<std::string>()) : v.get<double>(); }

nlohmann::json load(const std::string& model) {
  std::ifstream f(std::string(PASA_SOURCE_DIR) + "/tests/data/mmasim/" + model + ".json");
  REQUIRE(f.good());
  return nlohmann::json::parse(f);
}

// The model on every case of the file; returns the number of outputs whose bits differ (the first few shown).
int mismatches(const std::string& file, const TensorCore* override_tc = nullptr) {
  const nlohmann::json d = load(file);
  const Format op = operand_format(d.at("operands").get<std::string>());
  GemmSpec g = spec_for(d.at("model").get<std::string>(), op);
  if (override_tc) g.model.tc = *override_tc;
  int bad = 0;
  for (const auto& c : d.at("cases")) {
    std::vector<double> a, b, sa, sb;
    for (const auto& x : c.at("a")) a.push_back(parse(x));
    for (const auto& x : c.at("b")) b.push_back(parse(x));
    double out = parse(c.at("c0"));
    const double want = parse(c.at("d"));
    if (c.contains("sa")) {
      for (const auto& x : c.at("sa")) sa.push_back(parse(x));
      for (const auto& x : c.at("sb")) sb.push_back(parse(x));
      const TcScales s{sa.data(), sa.size(), sb.data(), 1};
      const double c0 = out;
      gemm_block_scaled(g, 1, 1, a.size(), a.data(), a.size(), b.data(), 1, &out, 1, s, &c0);
    } else {
      gemm_accumulate(g, 1, 1, a.size(), a.data(), a.size(), b.data(), 1, &out, 1);
    }
    // (bits compared, except the sign of a zero: MMA-Sim's RZ goes through Python's int (math.trunc), which
    // drops it, so a negative sum that underflows comes back +0 there, −0 here as IEEE's RZ gives)
    const bool zeros = out == 0.0 && want == 0.0;
    if (!zeros && std::bit_cast<std::uint64_t>(out) != std::bit_cast<std::uint64_t>(want)) {
      if (++bad <= 3 && !override_tc) UNSCOPED_INFO(file << ": K = " << a.size() << " got " << out << " want " << want);
    }
  }
  return bad;
}

const char* const kVectorFiles[] = {"volta_fp16",  "turing_fp16",   "a100_fp16",      "a100_bf16",     "a100_tf32",
                                    "ada_fp16",    "ada_e4m3",      "ada_e5m2",       "b200_fp16",     "b200_bf16",
                                    "b200_tf32",   "b200_f8f6f4",   "sm120_e4m3",     "b200_mxf8f6f4", "sm120_mxf8f6f4",
                                    "b200_mxf4",   "b200_mxf4nvf4", "sm120_mxf4nvf4"};

}  // namespace

TEST_CASE("every published tensor-core model reproduces MMA-Sim's vectors bit for bit", "[tensor_core][mmasim]") {
  for (const char* f : kVectorFiles) {
    INFO(f);
    CHECK(mismatches(f) == 0);
  }
  // every published model of the table has vectors (the integer ones: the test below; Hopper: the GPU)
  for (const auto& m : tensor_core_models()) {
    if (m.evidence != TcEvidence::published) continue;
    bool found = false;
    for (const char* f : kVectorFiles) found = found || m.name == f;
    // (ada_bf16, ada_tf32: the same parameters as a vector-tested entry)
    const bool same_as_tested = m.name == "ada_bf16" || m.name == "ada_tf32";
    INFO(m.name);
    CHECK((found || same_as_tested));
  }
  CHECK(tensor_core_preset("ada_bf16") == tensor_core_preset("a100_bf16"));
  CHECK(tensor_core_preset("ada_tf32") == tensor_core_preset("a100_tf32"));
}

TEST_CASE("the vectors tell the rules apart: each rule changed fails them", "[tensor_core][mmasim]") {
  // (the mutants of tests/mutation/mutants/ change the code; these change the parameters)
  TensorCore t = tensor_core_preset("b200_mxf4nvf4");
  t.align_bits = 34;
  CHECK(mismatches("b200_mxf4nvf4", &t) > 0);
  t = tensor_core_preset("b200_mxf4");
  t.group = 32;
  CHECK(mismatches("b200_mxf4", &t) > 0);
  t = tensor_core_preset("b200_mxf4");
  t.block_round = RoundMode::nearest_even;
  CHECK(mismatches("b200_mxf4", &t) > 0);
  t = tensor_core_preset("a100_fp16");
  t.block = 16;  // split-K off
  CHECK(mismatches("a100_fp16", &t) > 0);
  t = tensor_core_preset("a100_tf32");
  t.operand_bits = 0;  // TF32 inputs not truncated
  CHECK(mismatches("a100_tf32", &t) > 0);
  t = tensor_core_preset("ada_e4m3");
  t.acc_bits = 0;  // fp32 in place of e8m13
  CHECK(mismatches("ada_e4m3", &t) > 0);
  t = tensor_core_preset("b200_mxf8f6f4");
  t.zero_at_emin = false;
  CHECK(mismatches("b200_mxf8f6f4", &t) > 0);
}

TEST_CASE("integer tensor core: exact int32, wrapped or saturated per MMA", "[tensor_core][integer]") {
  const Format i8 = custom_format(8, 7);  // (the values are integers in [−128, 127]; only p is read)
  GemmSpec g{i8, i8, StageSpec(format_by_name("fp64")), StageSpec(format_by_name("fp64")), GemmModel(GemmKind::tensor_core)};
  g.model.tc = tensor_core_preset("int8");
  const std::size_t k = 140000;  // 140000 · 127 · 127 > 2^31: the int32 overflows
  std::vector<double> a(k, 127.0), b(k, 127.0);
  a[5] = -128.0;
  double c = 0;
  gemm(g, 1, 1, k, a.data(), k, b.data(), 1, &c, 1);
  std::int64_t exact = 0;
  for (std::size_t t = 0; t < k; ++t) exact += static_cast<std::int64_t>(a[t]) * static_cast<std::int64_t>(b[t]);
  CHECK(c == static_cast<double>(static_cast<std::int32_t>(static_cast<std::uint32_t>(exact))));
  g.model.tc = tensor_core_preset("int8_satfinite");
  gemm(g, 1, 1, k, a.data(), k, b.data(), 1, &c, 1);
  CHECK(c == 2147483647.0);  // (torch._int_mm on the H200 gives 2^31 − 1 for all-127 at K = 139264: mma_probe.json)
  // a short one: exact
  const std::vector<double> x = {3, -7, 100, -128}, y = {-2, 5, 127, -128};
  gemm(g, 1, 1, 4, x.data(), 4, y.data(), 1, &c, 1);
  CHECK(c == -6 - 35 + 12700 + 16384);
  // refused: a non-integer operand, named
  const std::vector<double> z = {0.5, 1, 1, 1};
  CHECK_THROWS_WITH(gemm(g, 1, 1, 4, z.data(), 4, y.data(), 1, &c, 1), Catch::Contains("A[0][0] = 0.5"));
}

TEST_CASE("block-scaled engines refuse scales their format does not hold", "[tensor_core][block_scale]") {
  GemmSpec g = spec_for("b200_mxf4", custom_format(2, 2, true, Specials::fn));
  std::vector<double> a(64, 1.0), b(64, 0.5), sa = {1.0, 3.0}, sb = {1.0, 1.0};
  double c = 0;
  CHECK_THROWS_WITH(gemm_block_scaled(g, 1, 1, 64, a.data(), 64, b.data(), 1, &c, 1, TcScales{sa.data(), 2, sb.data(), 1}),
                    Catch::Contains("A[0][1] = 3 is not an E8M0 value"));
  sa[1] = 0.25;
  gemm_block_scaled(g, 1, 1, 64, a.data(), 64, b.data(), 1, &c, 1, TcScales{sa.data(), 2, sb.data(), 1});
  CHECK(c == 32 * 0.5 * 1.0 + 32 * 0.5 * 0.25);
  GemmSpec plain = spec_for("h100_fp16", format_by_name("fp16"));
  CHECK_THROWS_AS(gemm_block_scaled(plain, 1, 1, 64, a.data(), 64, b.data(), 1, &c, 1, TcScales{sa.data(), 2, sb.data(), 1}),
                  std::invalid_argument);
  // grouped kinds need exact group sums: bf16 operands refused before any work
  GemmSpec wide = spec_for("b200_mxf4", format_by_name("bf16"));
  CHECK_THROWS_WITH(gemm_block_scaled(wide, 1, 1, 64, a.data(), 64, b.data(), 1, &c, 1, TcScales{sa.data(), 2, sb.data(), 1}),
                    Catch::Contains("bf16 x bf16"));
  CHECK(tc_group_exact(format_by_name("fp8_e4m3fn"), format_by_name("fp8_e4m3fn"), 16));
  CHECK_FALSE(tc_group_exact(format_by_name("fp16"), format_by_name("fp16"), 16));
  // ue4m3: the sign of a scale is not read
  g = spec_for("b200_mxf4nvf4", custom_format(2, 2, true, Specials::fn));
  std::vector<double> s4 = {-2.0, 2.0, 2.0, 2.0}, t4 = {1.0, 1.0, 1.0, 1.0};
  gemm_block_scaled(g, 1, 1, 64, a.data(), 64, b.data(), 1, &c, 1, TcScales{s4.data(), 4, t4.data(), 1});
  CHECK(c == 64 * 0.5 * 2.0);
}

TEST_CASE("JSON names the newer engines' fields and refuses bad ones by path", "[tensor_core][json]") {
  using nlohmann::json;
  const Allocation a = allocation_from_json(
      json::parse(R"({"preset": "fa_fp8", "gemm": {"model": "tensor_core", "tensor_core": "b200_mxf4nvf4"}})"), "");
  CHECK(a.gemm.tc == tensor_core_preset("b200_mxf4nvf4"));
  const json out = to_json(a);
  CHECK(out.at("gemm").at("scale") == "ue4m3");
  CHECK(out.at("gemm").at("group") == 16);
  CHECK(allocation_from_json(out, "").gemm.tc == a.gemm.tc);
  // the plain presets write no new field (their JSON stays as it was)
  CHECK_FALSE(to_json(allocation_preset("fa_fp16_h100")).at("gemm").contains("scale"));
  auto err = [](const char* text) {
    try {
      allocation_from_json(json::parse(text), "alloc.json");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  CHECK_THAT(err(R"({"preset": "fa_fp8", "gemm": {"model": "tensor_core", "tensor_core": "b200_mxf4", "group": 24}})"),
             Catch::Contains("alloc.json/gemm/group") && Catch::Contains("must divide block"));
  CHECK_THAT(err(R"({"preset": "fa_fp8", "gemm": {"model": "tensor_core", "scale": "e8m1"}})"),
             Catch::Contains("alloc.json/gemm/scale") && Catch::Contains("e8m0"));
  CHECK_THAT(err(R"({"preset": "fa_fp8", "gemm": {"model": "tensor_core", "scale": "e8m0"}})"),
             Catch::Contains("alloc.json/gemm/scale_block"));
  CHECK_THAT(err(R"({"preset": "fa_fp8", "gemm": {"model": "tensor_core", "integer": "wrap", "group": 16}})"),
             Catch::Contains("alloc.json/gemm/integer"));
  CHECK_THAT(err(R"({"preset": "fa_fp8", "gemm": {"model": "tensor_core", "operand_bits": 30}})"),
             Catch::Contains("alloc.json/gemm/operand_bits"));
  CHECK_THAT(err(R"({"preset": "fa_fp8", "gemm": {"model": "tensor_core", "tensor_core": "b300"}})"),
             Catch::Contains("alloc.json/gemm/tensor_core") && Catch::Contains("b200_mxf4nvf4"));
}

TEST_CASE("integer tensor core equals the H200's mma.sync s8 and torch._int_mm bit for bit", "[tensor_core][integer][hardware]") {
  // (results/hardware/mma_probe/: experiments/gpu/mma_probe.py, packed by mma_probe_pack.py)
  const Format i8 = custom_format(8, 7);
  GemmSpec g{i8, i8, StageSpec(format_by_name("fp64")), StageSpec(format_by_name("fp64")), GemmModel(GemmKind::tensor_core)};
  std::ifstream f(std::string(PASA_SOURCE_DIR) + "/results/hardware/mma_probe/int8_mma.json");
  REQUIRE(f.good());
  const nlohmann::json d = nlohmann::json::parse(f);
  int overflowed = 0;
  for (const auto& [model, cases] : d.at("kinds").items()) {
    g.model.tc = tensor_core_preset(model);
    int bad = 0;
    for (const auto& c : cases) {
      const std::size_t k = c.at("K").get<std::size_t>();
      const std::vector<double> a = c.at("a").get<std::vector<double>>(), b = c.at("b").get<std::vector<double>>();
      std::vector<double> out = c.at("c0").get<std::vector<double>>();
      const std::vector<double> want = c.at("d").get<std::vector<double>>();
      gemm_accumulate(g, 16, 8, k, a.data(), k, b.data(), 8, out.data(), 8);
      for (std::size_t i = 0; i < out.size(); ++i) bad += out[i] != want[i];
      // (the cases near ±2^31 overflow an instruction: the two kinds differ there)
      std::vector<double> other = c.at("c0").get<std::vector<double>>();
      GemmSpec h = g;
      h.model.tc = tensor_core_preset(model == "int8" ? "int8_satfinite" : "int8");
      gemm_accumulate(h, 16, 8, k, a.data(), k, b.data(), 8, other.data(), 8);
      for (std::size_t i = 0; i < out.size(); ++i) overflowed += other[i] != want[i];
    }
    INFO(model);
    CHECK(bad == 0);
  }
  CHECK(overflowed > 0);  // the data tell wrapping from saturation
  std::ifstream fm(std::string(PASA_SOURCE_DIR) + "/results/hardware/mma_probe/int_mm.json");
  REQUIRE(fm.good());
  g.model.tc = tensor_core_preset("int8");
  // the parsed document is named: a range-for over a member of a temporary reads freed memory
  const nlohmann::json int_mm = nlohmann::json::parse(fm);
  for (const auto& c : int_mm.at("cases")) {
    const std::size_t k = c.at("K").get<std::size_t>();
    const std::vector<double> a = c.at("a").get<std::vector<double>>(), b = c.at("b").get<std::vector<double>>();
    const std::vector<double> want = c.at("d").get<std::vector<double>>();
    std::vector<double> out(32 * 32);
    gemm(g, 32, 32, k, a.data(), k, b.data(), 32, out.data(), 32);
    CHECK(out == want);
  }
}
