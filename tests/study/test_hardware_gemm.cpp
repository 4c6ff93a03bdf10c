// pasa-hwcompare gemm's logic (study/hardware_compare.hpp compare_gemm): a GPU GEMM's .npy outputs against the
// GEMM model, element by element in ulps of the output format.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "pasa/core/error.hpp"
#include "pasa/io/npy.hpp"
#include "pasa/study/hardware_compare.hpp"

using namespace pasa;
namespace fs = std::filesystem;

TEST_CASE("compare_gemm counts the model's differences from a GPU's outputs in ulps", "[hardware][gemm]") {
  const fs::path dir = fs::temp_directory_path() / ("pasa_hwgemm_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const Format f16 = format_by_name("fp16"), f32 = format_by_name("fp32");
  // A = [I | 0] (2 x 3), Bt (3 x 3): every dot product picks one element of B exactly, in every model.
  const std::vector<double> A = {1, 0, 0, 0, 1, 0};
  const std::vector<double> Bt = {0.5, 2, -3, 0.25, 1.5, 7, 1, 1, 1};  // Bt[j][t]
  std::vector<double> C = {0.5, 0.25, 1, 2, 1.5, 1};                   // C[i][j] = Bt[j][i]
  C[4] = std::nextafter(1.5f, 2.0f);                                     // one element 1 ulp (fp32) off
  C[5] = 4.0;                                                            // one far off
  write_npy(dir / "a.npy", make_npy(A, {1, 2, 3}, NpyDtype::f16));
  write_npy(dir / "b.npy", make_npy(Bt, {1, 3, 3}, NpyDtype::f16));
  write_npy(dir / "c.npy", make_npy(C, {1, 2, 3}, NpyDtype::f32));
  HwGemmOptions o;
  o.a = dir / "a.npy", o.b = dir / "b.npy", o.c = dir / "c.npy";
  o.a_format = o.b_format = f16;
  o.out_format = f32;
  o.model = GemmModel{GemmKind::tensor_core, 16, tensor_core_preset("h100_fp16")};
  o.max_mismatches = 10;
  const HwGemmResult r = compare_gemm(o);
  CHECK(r.ulps.elements == 6);
  CHECK(r.ulps.identical == 4);
  CHECK(r.ulps.ulp1 == 1);
  CHECK(r.ulps.ulp_over4 == 1);
  REQUIRE(r.mismatches.size() == 2);
  CHECK((r.mismatches[0].i == 1 && r.mismatches[0].j == 1 && r.mismatches[0].model == 1.5));
  CHECK((r.mismatches[1].i == 1 && r.mismatches[1].j == 2 && r.mismatches[1].gpu == 4.0));
  // shapes that do not fit name the files
  write_npy(dir / "c_bad.npy", make_npy(C, {1, 3, 2}, NpyDtype::f32));
  o.c = dir / "c_bad.npy";
  CHECK_THROWS_WITH(compare_gemm(o), Catch::Contains("c_bad.npy"));
  fs::remove_all(dir);
}
