// Tensors at their format's width (inputs/tensor.hpp): every element reads back bit for bit, what cannot be
// held narrow stays wide, and every reader (the engines, the kernels, the golden, the baseline, the score
// statistics, the metrics, the .npy loader) gives the bits it gives on the same values as doubles.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pasa/attention/algorithm.hpp"
#include "pasa/attention/kernel_recipe.hpp"
#include "pasa/core/error.hpp"
#include "pasa/exact/baseline.hpp"
#include "pasa/exact/golden.hpp"
#include "pasa/exact/golden_compare.hpp"
#include "pasa/exact/metrics.hpp"
#include "pasa/inputs/generators.hpp"
#include "pasa/io/algorithm_json.hpp"
#include "pasa/io/metrics_json.hpp"
#include "pasa/io/npy.hpp"
#include "pasa/io/tensor_io.hpp"
#include "pasa/numeric/round.hpp"
#include "support/bits.hpp"
#include "support/temp_dirs.hpp"

using namespace pasa;
using pasa::test::same_bits;

namespace {

// Values of f: random ones over its range and its edge values (zeros, the extremes, infinities).
std::vector<double> values_of(const Format& f, std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> mant(-2.0, 2.0);
  std::uniform_int_distribution<int> ex(std::max(-60, f.emin() - f.p), std::min(60, f.emax));
  RoundOptions ro;
  ro.overflow = Overflow::saturate;
  std::vector<double> x;
  if (f.has_zero) x.push_back(0.0);
  if (f.is_signed && f.has_zero) x.push_back(-0.0);  // (made +0 below where f has no -0)
  x.push_back(f.max_finite());
  x.push_back(f.min_subnormal());
  if (f.is_signed) x.push_back(-f.max_finite());
  if (f.has_infinity()) x.push_back(-std::numeric_limits<double>::infinity());
  while (x.size() < n) x.push_back(round(std::ldexp(mant(rng), ex(rng)), f, ro));
  const bool signed_zero = f.has_zero && std::signbit(decode(encode(-0.0, f), f));  // (integers: one zero)
  for (double& v : x)
    if (v == 0 && !signed_zero) v = 0.0;
  return x;
}

Tensor tensor_of(const Format& f, const std::vector<double>& x) {
  Tensor t = Tensor::uninitialised({1, 1, x.size(), 1}, f);
  std::copy(x.begin(), x.end(), t.data.begin());
  return t;
}

bool same_tensor_values(const Tensor& a, const Tensor& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::bit_cast<std::uint64_t>(a.value(i)) != std::bit_cast<std::uint64_t>(b.value(i))) return false;
  return true;
}

AttentionInputs problem(const std::string& format, std::size_t Nq, std::size_t Nkv, std::size_t Sq, std::size_t Skv,
                        std::size_t D, bool causal, Storage storage) {
  ProblemSpec p;
  p.B = 2, p.Nq = Nq, p.Nkv = Nkv, p.Sq = Sq, p.Skv = Skv, p.D = D;
  p.format = format;
  p.causal = causal;
  p.seed = 7;
  p.q = p.k = p.v = TensorGen{GenKind::uniform, 0.5, 2};
  return generate_inputs(p, 2, storage);
}

}  // namespace

TEST_CASE("narrow storage: every built-in format's values read back bit for bit", "[storage]") {
  std::size_t narrowed_formats = 0;
  for (const Format& f : builtin_formats()) {
    CAPTURE(f.name);
    const std::size_t w = narrow_width(f);
    if (f.storage_bits() <= 8) CHECK(w == 1);
    else if (f.storage_bits() <= 16) CHECK(w == 2);
    if (w == 0) {  // (fp64 and the wide extended formats: kept as doubles)
      CHECK(f.p > 24);
      continue;
    }
    const Tensor wide = tensor_of(f, values_of(f, 3000, 11));
    const Tensor n = narrowed(wide, 2);
    REQUIRE(n.is_narrow());
    CHECK(n.data.empty());
    CHECK(n.narrow.width() == w);
    CHECK(n.stored_bytes() == wide.size() * w);
    CHECK(same_tensor_values(wide, n));
    std::vector<float> f32(n.size());
    n.read(0, n.size(), f32.data());
    if (f.p <= 24 && f.emax <= 127) {
      for (std::size_t i = 0; i < n.size(); ++i)
        REQUIRE(std::bit_cast<std::uint64_t>(static_cast<double>(f32[i])) == std::bit_cast<std::uint64_t>(wide.data[i]));
    }
    const Tensor back = widened(n, 2);
    CHECK(!back.is_narrow());
    CHECK(back.data == std::vector<double>(wide.data.begin(), wide.data.end()));
    ++narrowed_formats;
  }
  CHECK(narrowed_formats >= 10);
  CHECK(narrow_width(format_by_name("fp16")) == 2);
  CHECK(narrow_width(format_by_name("bf16")) == 2);
  CHECK(narrow_width(format_by_name("fp32")) == 4);
  CHECK(narrow_width(format_by_name("tf32")) == 4);
  CHECK(narrow_width(format_by_name("fp64")) == 0);
}

TEST_CASE("narrow storage: fp16 and bf16 read every bit pattern as decode() gives it", "[storage]") {
  // read()'s F16C and shift conversions against the numeric layer's decode, NaN payloads and the tails of
  // unaligned spans included.
  for (const char* name : {"fp16", "bf16"}) {
    CAPTURE(name);
    const Format f = format_by_name(name);
    auto bits = std::make_shared<std::vector<std::uint16_t>>(65536);
    for (std::size_t u = 0; u < 65536; ++u) (*bits)[u] = static_cast<std::uint16_t>(u);
    const NarrowStorage st(f, bits->size(), bits->data(), bits);
    for (std::size_t i0 : {std::size_t{0}, std::size_t{3}, std::size_t{13}}) {
      const std::size_t n = 65536 - i0 - (i0 % 5);
      std::vector<double> d(n);
      std::vector<float> x(n);
      st.read(i0, n, d.data());
      st.read(i0, n, x.data());
      for (std::size_t i = 0; i < n; ++i) {
        const double want = decode(i0 + i, f);
        CAPTURE(i0 + i);
        REQUIRE(std::bit_cast<std::uint64_t>(d[i]) == std::bit_cast<std::uint64_t>(want));
        REQUIRE(std::bit_cast<std::uint32_t>(x[i]) == std::bit_cast<std::uint32_t>(static_cast<float>(want)));
      }
    }
  }
}

TEST_CASE("narrow storage: what the format's encoding cannot hold stays wide", "[storage]") {
  const Format f = format_by_name("fp16");
  std::vector<double> x = values_of(f, 100, 3);
  x[17] = std::bit_cast<double>(std::uint64_t{0x7ff8000000000123});  // a NaN payload fp16's bits drop
  const Tensor kept = narrowed(tensor_of(f, x));
  CHECK_FALSE(kept.is_narrow());
  CHECK(std::bit_cast<std::uint64_t>(kept.data[17]) == 0x7ff8000000000123);
  x[17] = 1.0 / 3.0;  // not a value of fp16
  CHECK_FALSE(narrowed(tensor_of(f, x)).is_narrow());
  x[17] = std::numeric_limits<double>::quiet_NaN();  // the canonical NaN: held
  CHECK(narrowed(tensor_of(f, x)).is_narrow());
  // Held as floats (width 4): a double NaN payload a float cannot carry keeps fp32 wide too.
  const Format f32 = format_by_name("fp32");
  std::vector<double> y = values_of(f32, 100, 4);
  y[5] = std::bit_cast<double>(std::uint64_t{0x7ff8000000000123});
  CHECK_FALSE(narrowed(tensor_of(f32, y)).is_narrow());
  y[5] = 0.5;
  CHECK(narrowed(tensor_of(f32, y)).is_narrow());
}

TEST_CASE("narrow storage: drawn inputs are the wide ones, at the format's width", "[storage]") {
  for (const char* fmt : {"fp16", "bf16", "fp8_e4m3fn", "fp32", "fp64"}) {
    CAPTURE(fmt);
    const AttentionInputs w = problem(fmt, 4, 2, 37, 53, 24, false, Storage::wide);
    const AttentionInputs n = problem(fmt, 4, 2, 37, 53, 24, false, Storage::narrow);
    const std::size_t width = narrow_width(format_by_name(fmt));
    CHECK(n.q.is_narrow() == (width != 0));
    CHECK(n.k.stored_bytes() == n.k.size() * (width ? width : 8));
    CHECK(same_tensor_values(w.q, n.q));
    CHECK(same_tensor_values(w.k, n.k));
    CHECK(same_tensor_values(w.v, n.v));
  }
}

TEST_CASE("narrow storage: validate names a narrow tensor's non-finite element", "[storage]") {
  AttentionInputs in = problem("fp16", 2, 2, 8, 8, 4, false, Storage::wide);
  in.k.data[3 * 4 + 1] = std::numeric_limits<double>::infinity();
  narrow_inputs(in);
  REQUIRE(in.k.is_narrow());
  CHECK_THROWS_WITH(validate(in), Catch::Contains("K has a non-finite element inf at (b=0, n=0, s=3, d=1)"));
  in.allow_nonfinite = true;
  CHECK_NOTHROW(validate(in));
  AttentionInputs wide = in;
  wide.k = widened(in.k);
  const Golden gn = golden_attention(in), gw = golden_attention(wide);  // (the non-finite golden widens)
  for (std::size_t i = 0; i < gw.o.data.size(); ++i) REQUIRE(same_bits(gw.o.data[i], gn.o.data[i]));
}

TEST_CASE("narrow storage: every reader gives the wide inputs' bits", "[storage]") {
  struct Run {
    const char* format;
    std::size_t Nq, Nkv, Sq, Skv, D;
    bool causal;
    const char* algorithm;  // JSON
  };
  const Run runs[] = {
      {"fp16", 4, 2, 70, 300, 64, false, R"({"name": "fa2", "alloc": "fa_fp16_fp32"})"},
      {"fp16", 2, 2, 33, 90, 20, true, R"({"name": "fa2", "alloc": "fa_fp16_fp32", "s1": 16, "s2": 32})"},
      {"bf16", 2, 1, 40, 77, 32, false, R"({"name": "pasa", "alloc": "pasa_bf16"})"},
      {"fp16", 2, 2, 40, 77, 32, true, R"({"name": "safe_softmax", "alloc": "fa_fp16"})"},
      {"fp16", 2, 2, 40, 77, 32, false, R"({"name": "fa1", "alloc": "fa_fp16_fp32"})"},
      {"fp16", 4, 1, 1, 200, 64, false, R"({"name": "fa2", "alloc": "fa_fp16_fp32", "splits": 3})"},
      {"fp16", 2, 2, 40, 77, 32, false, R"({"name": "smooth_k", "alloc": "fa_fp16_fp32"})"},
      {"fp32", 2, 2, 40, 77, 32, false, R"({"name": "fa2", "alloc": "fa_fp16_fp32"})"},  // (Q, K, V rounded to fp16)
      {"fp8_e4m3fn", 2, 2, 40, 77, 32, false, R"({"name": "fa2", "alloc": "fa_fp16_fp32"})"},
      {"fp16", 2, 2, 64, 128, 64, false, R"({"kernel": "torch_flash_sm90"})"},
      {"fp8_e4m3fn", 2, 2, 64, 128, 64, false, R"({"kernel": "fa3_fp8_sm90"})"},
      {"fp16", 2, 2, 40, 77, 32, false, R"({"name": "fa2", "alloc": "fa_fp16_fp32", "quant": {"scales": "block", "hadamard": true}})"},
  };
  for (const Run& r : runs) {
    CAPTURE(r.format, r.algorithm);
    const AttentionInputs w = problem(r.format, r.Nq, r.Nkv, r.Sq, r.Skv, r.D, r.causal, Storage::wide);
    const AttentionInputs n = problem(r.format, r.Nq, r.Nkv, r.Sq, r.Skv, r.D, r.causal, Storage::narrow);
    REQUIRE(has_narrow(n));
    AlgorithmSpec spec;
    try {
      spec = algorithm_from_json(nlohmann::json::parse(r.algorithm), "test");
    } catch (const InputError& e) {
      FAIL("spec: " << e.what());
    }
    const AttentionOutput ow = run_attention(w, spec, 2), on = run_attention(n, spec, 2);
    CHECK(test::first_difference(ow, on).empty());
    GoldenOptions go;
    go.threads = 2;
    const GoldenMetrics mw = compare_with_golden(w, {&ow.o}, go, true), mn = compare_with_golden(n, {&on.o}, go, true);
    for (std::size_t i = 0; i < mw.golden.o.data.size(); ++i) REQUIRE(same_bits(mw.golden.o.data[i], mn.golden.o.data[i]));
    REQUIRE(mw.metrics.size() == 1);
    CHECK(to_json(mw.metrics[0]).dump() == to_json(mn.metrics[0]).dump());
    CHECK(to_json(score_stats(w, format_by_name("fp16"), 2)).dump() == to_json(score_stats(n, format_by_name("fp16"), 2)).dump());
  }
}

TEST_CASE("narrow storage: .npy files of the format's storage are mapped, others converted", "[storage]") {
  const auto dir = test::fresh_dir("storage");
  std::filesystem::create_directories(dir);
  const Format fp16 = format_by_name("fp16"), bf16 = format_by_name("bf16");
  const std::vector<double> h = values_of(fp16, 4096, 5), b = values_of(bf16, 4096, 6);
  write_npy(dir / "h.npy", make_npy(h, {2, 64, 32}, NpyDtype::f16));
  write_npy(dir / "b.npy", make_npy(b, {2, 64, 32}, NpyDtype::u16, &bf16));
  write_npy(dir / "d.npy", make_npy(b, {2, 64, 32}, NpyDtype::f64));
  for (const char* name : {"h.npy", "b.npy", "d.npy"}) {
    CAPTURE(name);
    const bool bits = std::string(name) == "b.npy";
    const Format* f = bits ? &bf16 : std::string(name) == "d.npy" ? &fp16 : nullptr;
    const LoadedTensor wide = load_tensor(dir / name, f), n = load_tensor_narrow(dir / name, f);
    CHECK(n.tensor.is_narrow());
    CHECK(n.tensor.shape == wide.tensor.shape);
    CHECK(n.tensor.format == wide.tensor.format);
    CHECK(n.rounded == wide.rounded);
    CHECK(same_tensor_values(wide.tensor, n.tensor));
    const TensorHeader hd = read_tensor_header(dir / name, f);
    CHECK((narrow_reading_bytes(hd) == 0) == (std::string(name) != "d.npy"));  // (d.npy: converted, not mapped)
  }
  CHECK(load_tensor_narrow(dir / "d.npy", &fp16).rounded > 0);
  // A NaN with a payload: fp16's table keeps it as load_tensor does (every pattern of every 1- and 2-byte
  // format agrees, measured), so mapped, the same values.
  NpyArray odd = make_npy(h, {4096, 1}, NpyDtype::f16);
  odd.bytes[2 * 9] = 0x01, odd.bytes[2 * 9 + 1] = 0x7e;  // fp16 0x7e01: a NaN with a payload
  write_npy(dir / "odd.npy", odd);
  const LoadedTensor ow = load_tensor(dir / "odd.npy"), on = load_tensor_narrow(dir / "odd.npy");
  for (std::size_t i = 0; i < ow.tensor.size(); ++i)
    REQUIRE(std::bit_cast<std::uint64_t>(ow.tensor.value(i)) == std::bit_cast<std::uint64_t>(on.tensor.value(i)));
  // A pattern load_tensor refuses (wider than the format's bits, int8's -128) is refused mapped too, naming
  // the element: the mapping checks every pattern first.
  for (const char* name : {"fp6_e2m3", "int4", "int8"}) {
    const Format f = format_by_name(name);
    NpyArray a = make_npy(std::vector<double>(24, 0.0), {2, 3, 4}, NpyDtype::u8, &f);
    a.bytes[7] = std::string(name) == "int8" ? 0x80 : 0xff;
    write_npy(dir / "refused.npy", a);
    CHECK_THROWS_WITH(load_tensor_narrow(dir / "refused.npy", &f), Catch::Contains("element 7") && Catch::Contains(name));
  }
}
