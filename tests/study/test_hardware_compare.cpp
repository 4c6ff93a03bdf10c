// pasa-hwcompare's logic (study/hardware_compare.hpp) on a fake GPU folder: the "GPU" output is the toolkit's
// own output (so the comparison must report 100 % identical and an RMSE ratio of exactly 1), then perturbed
// by a known number of ulps; the "GPU" conversions come from independent references (the compiler's
// float → half conversion: _Float16 or __fp16; and PyTorch's float → float8_e4m3fn algorithm of
// c10/util/Float8_e4m3fn.h restated here).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "pasa/attention/algorithm.hpp"
#include "pasa/io/algorithm_json.hpp"
#include "pasa/io/csv.hpp"
#include "pasa/io/json_check.hpp"
#include "pasa/io/npy.hpp"
#include "pasa/numeric/round.hpp"
#include "pasa/study/hardware_compare.hpp"

using namespace pasa;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path dir;
  explicit TempDir(const std::string& tag) {
    dir = fs::temp_directory_path() / ("pasa-test-hw-" + tag + "-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~TempDir() { fs::remove_all(dir); }
};

const fs::path kConfigs = fs::path(PASA_SOURCE_DIR) / "configs" / "hardware";

// fp16 values of a uniform-like input x0 + [−am, am] from a fixed linear congruential sequence.
std::vector<double> fp16_values(std::size_t n, double x0, double am, std::uint64_t seed) {
  std::vector<double> v(n);
  std::uint64_t s = seed;
  for (auto& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    const double u = static_cast<double>(s >> 11) * 0x1p-53;
    x = round(x0 - am + 2 * am * u, format_by_name("fp16"));
  }
  return v;
}

void write_case(const fs::path& gpu, const Shape& sh) {
  const fs::path d = gpu / "c1";
  fs::create_directories(d);
  const std::vector<std::size_t> shape = {sh.B, sh.N, sh.S, sh.D};
  const char* names[3] = {"q.npy", "k.npy", "v.npy"};
  for (int t = 0; t < 3; ++t)
    write_npy(d / names[t], make_npy(fp16_values(sh.size(), 1.0, 0.5, 11 + t), shape, NpyDtype::f16));
  nlohmann::json m = {{"cases", nlohmann::json::array({{{"name", "c1"}, {"generator", "uniform"}, {"x0", 1.0},
                                                         {"Am", 0.5}, {"seed", 1}, {"shape", shape}, {"dtype", "fp16"},
                                                         {"files", {{"fp16", {"q.npy", "k.npy", "v.npy"}}}}}})}};
  write_file_atomic(gpu / "manifest.json", m.dump(1));
}

// PyTorch's float → float8_e4m3fn (c10/util/Float8_e4m3fn.h, fp8e4m3fn_from_fp32_value), restated.
std::uint8_t torch_e4m3fn(float f) {
  constexpr std::uint32_t fp8_max = 1087u << 20, denorm_mask = 141u << 23;
  std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t sign = bits & 0x80000000u;
  bits ^= sign;
  std::uint8_t result;
  if (bits >= fp8_max) {
    result = 0x7f;
  } else if (bits < (121u << 23)) {
    bits = std::bit_cast<std::uint32_t>(std::bit_cast<float>(bits) + std::bit_cast<float>(denorm_mask));
    result = static_cast<std::uint8_t>(bits - denorm_mask);
  } else {
    const std::uint32_t mant_odd = (bits >> 20) & 1;
    bits += (static_cast<std::uint32_t>(7 - 127) << 23) + 0x7FFFF;
    bits += mant_odd;
    result = static_cast<std::uint8_t>(bits >> 20);
  }
  return static_cast<std::uint8_t>(result | (sign >> 24));
}

}  // namespace

// The compiler's own float -> half conversion (round to nearest even): __fp16 where the compiler has it (clang on
// every target, GCC on ARM: a storage type in IEEE format), else _Float16 (GCC 12 on x86-64; GCC 12 has no C++
// _Float16 on aarch64, clang 14 none on x86-64).
#if defined(__clang__) || defined(__aarch64__)
using CompilerHalf = __fp16;
#else
using CompilerHalf = _Float16;
#endif

TEST_CASE("hwcompare attention: the toolkit's own output is identical; perturbations land in their bins") {
  TempDir t("attn");
  const Shape sh{1, 2, 256, 32};
  write_case(t.dir, sh);
  // The "GPU" output of pasa_fp16: the toolkit's run under configs/hardware/pasa_fp16.json.
  const AlgorithmSpec spec = algorithm_from_json(read_json_file(kConfigs / "pasa_fp16.json")["algorithm"], "cfg");
  AttentionInputs in;
  in.q = Tensor(sh, format_by_name("fp16"));
  in.k = in.q;
  in.v = in.q;
  {
    const std::vector<double> x = fp16_values(sh.size(), 1.0, 0.5, 11);
    in.q.data.assign(x.begin(), x.end());
  }
  {
    const std::vector<double> x = fp16_values(sh.size(), 1.0, 0.5, 12);
    in.k.data.assign(x.begin(), x.end());
  }
  {
    const std::vector<double> x = fp16_values(sh.size(), 1.0, 0.5, 13);
    in.v.data.assign(x.begin(), x.end());
  }
  const AttentionOutput o = run_attention(in, spec, 2);
  REQUIRE(o.o.format == format_by_name("fp16"));
  const std::vector<std::size_t> shape = {sh.B, sh.N, sh.S, sh.D};
  const fs::path out_file = t.dir / "c1" / "out_pasa_fp16.npy";
  write_npy(out_file, make_npy(o.o.data, shape, NpyDtype::f16));

  const HwAttentionOptions opt{t.dir, kConfigs, 2};
  std::vector<HwAttentionRow> rows = compare_attention(opt);
  REQUIRE(rows.size() == 6);  // every config of configs/hardware; only pasa_fp16 has a GPU output
  const HwAttentionRow* r = nullptr;
  for (const auto& row : rows) {
    if (row.label == "pasa_fp16") r = &row;
    else CHECK(row.status.rfind("missing ", 0) == 0);  // reported, not skipped
  }
  REQUIRE(r);
  CHECK(r->status == "ok");
  CHECK(r->ulps.elements == sh.size());
  CHECK(r->ulps.identical == sh.size());
  CHECK(r->ulps.max_ulp == 0);
  CHECK(r->ratio == 1.0);
  CHECK(r->rmse_gpu > 0);
  CHECK(hw_attention_csv(rows).find("pasa_fp16") != std::string::npos);

  // One element 1 ulp up, one 5 ulps down (positive outputs: V > 0), one NaN.
  const Format f16 = format_by_name("fp16");
  std::vector<double> p(o.o.data.begin(), o.o.data.end());
  p[3] = decode(encode(p[3], f16) + 1, f16);
  p[100] = decode(encode(p[100], f16) - 5, f16);
  p[200] = std::nan("");
  write_npy(out_file, make_npy(p, shape, NpyDtype::f16));
  rows = compare_attention(opt);
  for (const auto& row : rows)
    if (row.label == "pasa_fp16") r = &row;
  CHECK(r->ulps.identical == sh.size() - 3);
  CHECK(r->ulps.ulp1 == 1);
  CHECK(r->ulps.ulp2_4 == 0);
  CHECK(r->ulps.ulp_over4 == 1);
  CHECK(r->ulps.nan_mismatch == 1);
  CHECK(r->ulps.max_ulp == 5);
  CHECK(std::isnan(r->rmse_gpu));
  CHECK(r->nan_pct_gpu == Approx(100.0 / static_cast<double>(sh.size())));
}

TEST_CASE("hwcompare attention: errors name the file") {
  TempDir t("err");
  CHECK_THROWS_WITH(compare_attention({t.dir, kConfigs, 1}), Catch::Contains("manifest.json"));
}

TEST_CASE("hwcompare conversions: fp16 against the compiler's conversion, e4m3fn against PyTorch's algorithm") {
  TempDir t("conv");
  // Around fp16's overflow (65504 .. 65536 and beyond) and e4m3's (448 .. 512): inputs in two folders.
  const auto write = [&](const fs::path& d, std::uint32_t first, std::uint32_t count, const std::string& fmt_name,
                         auto convert, std::size_t width) {
    fs::create_directories(d);
    write_file_atomic(d / "conv_range.json", nlohmann::json{{"first", first}, {"count", count}}.dump());
    std::string bytes;
    for (std::uint32_t i = 0; i < count; ++i) {
      const std::uint32_t b = convert(std::bit_cast<float>(first + i));
      bytes.push_back(static_cast<char>(b & 0xff));
      if (width == 2) bytes.push_back(static_cast<char>(b >> 8));
    }
    write_file_atomic(d / ("conv_" + fmt_name + ".bin"), bytes);
  };
  const std::uint32_t f16_first = 0x477FE000u, f16_count = 1u << 16;  // 65504 − … up to ~2^17
  write(t.dir / "h", f16_first, f16_count, "fp16",
        [](float x) { return std::bit_cast<std::uint16_t>(static_cast<CompilerHalf>(x)); }, 2);
  std::vector<HwConversionRow> rows = compare_conversions({t.dir / "h", 2});
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].format == "fp16");
  CHECK(rows[0].mismatches == 0);
  CHECK(rows[0].overflow == "ieee");
  CHECK(rows[0].other_mismatches > 0);  // saturation would give 65504 where the hardware gives inf

  const std::uint32_t e_first = 0x43E00000u, e_count = 1u << 21;  // 448 .. 512
  write(t.dir / "e", e_first, e_count, "fp8_e4m3", [](float x) { return torch_e4m3fn(x); }, 1);
  rows = compare_conversions({t.dir / "e", 2});
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].mismatches == 0);
  // Saturation differs exactly on the inputs above 464 (the midpoint of 448 and the next step, 480).
  CHECK(rows[0].other_mismatches == 0x44000000u - 0x43E80000u - 1);

  // One wrong "GPU" result is found and reported with its bits.
  {
    std::fstream h(t.dir / "h" / "conv_fp16.bin", std::ios::in | std::ios::out | std::ios::binary);
    h.seekp(2 * 10);
    h.put(0x12);
  }
  rows = compare_conversions({t.dir / "h", 2});
  CHECK(rows[0].mismatches == 1);
  REQUIRE(rows[0].first_mismatches.size() == 1);
  CHECK(rows[0].first_mismatches[0].input == f16_first + 10);
  CHECK(hw_conversions_csv(rows).find(fmt::format("0x{:08x}", f16_first + 10)) != std::string::npos);
}
