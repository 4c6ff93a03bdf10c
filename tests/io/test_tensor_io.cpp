// tensor_io: attention tensors from and to .npy (float values and fp16/bf16/fp8 bit patterns).
#include <catch2/catch.hpp>

#include <filesystem>

#include "pasa/core/error.hpp"
#include "pasa/io/npy.hpp"
#include "pasa/io/tensor_io.hpp"
#include "pasa/numeric/round.hpp"

using namespace pasa;

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
