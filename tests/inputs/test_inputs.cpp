// Attention input validation and the mask definitions.
#include <catch2/catch.hpp>

#include <limits>

#include "pasa/inputs/attention_inputs.hpp"
#include "pasa/core/error.hpp"

using namespace pasa;

namespace {
AttentionInputs shapes(Shape q, Shape kv) {
  const Format h = format_by_name("fp16");
  AttentionInputs in;
  in.q = Tensor(q, h);
  in.k = Tensor(kv, h);
  in.v = Tensor(kv, h);
  return in;
}
}  // namespace

TEST_CASE("validate names each kind of bad input", "[inputs]") {
  CHECK_NOTHROW(validate(shapes({2, 8, 3, 4}, {2, 2, 5, 4})));
  CHECK_THROWS_WITH(validate(shapes({1, 6, 3, 4}, {1, 4, 3, 4})), Catch::Contains("not a multiple of N_kv"));
  CHECK_THROWS_WITH(validate(shapes({1, 2, 3, 0}, {1, 2, 3, 0})), Catch::Contains("D = 0"));
  CHECK_THROWS_WITH(validate(shapes({1, 2, 3, 4}, {1, 2, 3, 8})), Catch::Contains("head dimension"));
  CHECK_THROWS_WITH(validate(shapes({2, 2, 3, 4}, {1, 2, 3, 4})), Catch::Contains("batch"));
  AttentionInputs kv = shapes({1, 2, 3, 4}, {1, 2, 3, 4});
  kv.v = Tensor({1, 2, 4, 4}, kv.v.format);
  CHECK_THROWS_WITH(validate(kv), Catch::Contains("K and V shapes differ"));
  AttentionInputs nan = shapes({1, 1, 2, 2}, {1, 1, 2, 2});
  nan.k.data[3] = std::numeric_limits<double>::infinity();
  CHECK_THROWS_WITH(validate(nan), Catch::Contains("K has a non-finite element") && Catch::Contains("s=1, d=1"));
  nan.allow_nonfinite = true;
  CHECK_NOTHROW(validate(nan));
  AttentionInputs m = shapes({2, 1, 2, 2}, {2, 1, 3, 2});
  m.mask.kv_len = {3};
  CHECK_THROWS_WITH(validate(m), Catch::Contains("one per batch"));
  m.mask.kv_len = {3, 4};
  CHECK_THROWS_WITH(validate(m), Catch::Contains("kv_len[1] = 4 exceeds Skv = 3"));
  m.mask.kv_len.clear();
  m.mask.keep.assign(5, 1);
  CHECK_THROWS_WITH(validate(m), Catch::Contains("B*Sq*Skv"));
  AttentionInputs sz = shapes({1, 1, 2, 2}, {1, 1, 2, 2});
  sz.q.data.pop_back();
  CHECK_THROWS_WITH(validate(sz), Catch::Contains("Q holds 3 values"));
}

TEST_CASE("masks: causal aligned to the end, kv_len, keep, GQA group and scale", "[inputs]") {
  AttentionInputs in = shapes({2, 4, 2, 16}, {2, 2, 5, 16});  // decode-like: Sq = 2 < Skv = 5
  CHECK(in.group() == 2);
  CHECK(in.effective_scale() == 0.25);
  in.mask.causal = true;
  // row 0 sees keys 0..3 (j <= 0 + 5 - 2), row 1 sees 0..4
  CHECK(visible(in, 0, 0, 3));
  CHECK_FALSE(visible(in, 0, 0, 4));
  CHECK(visible(in, 0, 1, 4));
  in.mask.kv_len = {5, 2};
  CHECK_FALSE(visible(in, 1, 1, 2));
  CHECK(visible(in, 1, 1, 1));
  in.mask.keep.assign(2 * 2 * 5, 1);
  in.mask.keep[(1 * 2 + 1) * 5 + 0] = 0;
  CHECK_FALSE(visible(in, 1, 1, 0));
  CHECK(visible(in, 1, 0, 0));
  AttentionInputs pre = shapes({1, 1, 4, 2}, {1, 1, 2, 2});  // Sq > Skv: rows 0 and 1 fully masked
  pre.mask.causal = true;
  CHECK(visible_end(pre, 0, 0) == 0);
  CHECK(visible_end(pre, 0, 1) == 0);
  CHECK(visible_end(pre, 0, 2) == 1);
  CHECK(visible_end(pre, 0, 3) == 2);
}

// ---- tensor_io: .npy in and out ----
#include <filesystem>

#include "pasa/io/npy.hpp"
#include "pasa/numeric/round.hpp"
#include "pasa/io/tensor_io.hpp"

namespace {
std::filesystem::path temp_file(const char* name) {
  const auto dir = std::filesystem::temp_directory_path() / "pasa-test-inputs";
  std::filesystem::create_directories(dir);
  return dir / name;
}
}  // namespace

TEST_CASE("tensor_io: float16 and bf16-bit .npy load with their shapes, float64 save round trip", "[inputs]") {
  const Format h = format_by_name("fp16"), bf = format_by_name("bf16");
  std::vector<double> vals = {1.0, -2.5, 65504.0, 0x1p-24, 3.14453125, 0.0};
  write_npy(temp_file("q.npy"), make_npy(vals, {3, 2}, NpyDtype::f16));
  const LoadedTensor q = load_tensor(temp_file("q.npy"));
  CHECK(q.tensor.shape == Shape{1, 1, 3, 2});
  CHECK(q.tensor.format == h);
  CHECK(q.tensor.data == vals);
  // Named narrower format: values are rounded and counted. bf16 keeps 8 significant bits: 65504 (11 bits)
  // → 65536 and 3.14453125 = 11.00100101b (9 bits) → 3.140625; the others are exact.
  const LoadedTensor qb = load_tensor(temp_file("q.npy"), &bf);
  CHECK(qb.rounded == 2);
  CHECK(qb.tensor.data[2] == 65536.0);
  CHECK(qb.tensor.data[4] == 3.140625);
  std::vector<double> bvals = {1.0, -0x1.fep127, 0.0078125, 3.0};
  write_npy(temp_file("k.npy"), make_npy(bvals, {1, 2, 2, 1}, NpyDtype::u16, &bf));
  const LoadedTensor k = load_tensor(temp_file("k.npy"), &bf);
  CHECK(k.tensor.shape == Shape{1, 2, 2, 1});
  CHECK(k.tensor.data == bvals);
  CHECK_THROWS_WITH(load_tensor(temp_file("k.npy")), Catch::Contains("k.npy") && Catch::Contains("name their format"));
  write_npy(temp_file("v.npy"), make_npy(bvals, {2, 1, 2}, NpyDtype::f32));
  CHECK(load_tensor(temp_file("v.npy")).tensor.shape == Shape{1, 2, 1, 2});
  write_npy(temp_file("bad.npy"), make_npy(bvals, {4}, NpyDtype::f32));
  CHECK_THROWS_WITH(load_tensor(temp_file("bad.npy")), Catch::Contains("bad.npy") && Catch::Contains("(4,)"));
  CHECK_THROWS_AS(load_tensor(temp_file("missing.npy")), InputError);
  Tensor o({1, 2, 1, 2}, format_by_name("fp64"));
  o.data = {0.1, -1e-300, 1.0 / 3, 7.0};
  save_tensor(temp_file("o.npy"), o);
  const NpyArray back = read_npy(temp_file("o.npy"));
  CHECK(back.dtype == NpyDtype::f64);
  CHECK(back.shape == std::vector<std::size_t>{1, 2, 1, 2});
  CHECK(npy_values(back) == o.data);
  std::filesystem::remove_all(temp_file("x").parent_path());
}
